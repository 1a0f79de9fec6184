"""Stable Diffusion 3 / 3.5: an MMDiT over two CLIP encoders with projection (CLIP-L, OpenCLIP-bigG:
hidden states side by side, zero-padded to T5's width, then joined with T5-XXL's; pooled
projections concatenated), the 16-channel VAE with shift and scale, flow-match Euler (shift 3).
One arch for the 3.5 Large / Large Turbo / Medium and 3 Medium checkpoints (variants).

Its files: SAI's MMDiT layout (ComfyUI's `sd3.5_large.safetensors`, alone or with its text encoders and
VAE in one file), read with the configs below; the shapes tell 3 Medium, 3.5 Large and 3.5 Medium
apart (3.5 Large Turbo has 3.5 Large's: `model.variant` says which)."""
import math
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Control, Gguf,
                                 Latents,
                                 SampleDefaults, SingleFile, Task, Tiny, Variant)
from toolkit.models.formats import clip, dit_controlnet, t5, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

# diffusers -> SAI's original MMDiT names (the inverse of diffusers' converter; formats/original_layout.py)
_B = r"^transformer_blocks\.(\d+)\."
FUSED = ((_B, ("attn.to_q", "attn.to_k", "attn.to_v"), r"joint_blocks.\1.x_block.attn.qkv"),
         (_B, ("attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"), r"joint_blocks.\1.context_block.attn.qkv"),
         (_B, ("attn2.to_q", "attn2.to_k", "attn2.to_v"), r"joint_blocks.\1.x_block.attn2.qkv"))
RENAMES = (
    (r"^pos_embed\.pos_embed$", "pos_embed"), (r"^pos_embed\.proj", "x_embedder.proj"),
    (r"^time_text_embed\.timestep_embedder\.linear_1", "t_embedder.mlp.0"),
    (r"^time_text_embed\.timestep_embedder\.linear_2", "t_embedder.mlp.2"),
    (r"^time_text_embed\.text_embedder\.linear_1", "y_embedder.mlp.0"),
    (r"^time_text_embed\.text_embedder\.linear_2", "y_embedder.mlp.2"),
    (r"^proj_out", "final_layer.linear"), (r"^norm_out\.linear", "final_layer.adaLN_modulation.1"),
    (_B + r"attn\.norm_q", r"joint_blocks.\1.x_block.attn.ln_q"),
    (_B + r"attn\.norm_k", r"joint_blocks.\1.x_block.attn.ln_k"),
    (_B + r"attn\.norm_added_q", r"joint_blocks.\1.context_block.attn.ln_q"),
    (_B + r"attn\.norm_added_k", r"joint_blocks.\1.context_block.attn.ln_k"),
    (_B + r"attn2\.norm_q", r"joint_blocks.\1.x_block.attn2.ln_q"),
    (_B + r"attn2\.norm_k", r"joint_blocks.\1.x_block.attn2.ln_k"),
    (_B + r"attn\.to_out\.0", r"joint_blocks.\1.x_block.attn.proj"),
    (_B + r"attn\.to_add_out", r"joint_blocks.\1.context_block.attn.proj"),
    (_B + r"attn2\.to_out\.0", r"joint_blocks.\1.x_block.attn2.proj"),
    (_B + r"norm1\.linear", r"joint_blocks.\1.x_block.adaLN_modulation.1"),
    (_B + r"norm1_context\.linear", r"joint_blocks.\1.context_block.adaLN_modulation.1"),
    (_B + r"ff\.net\.0\.proj", r"joint_blocks.\1.x_block.mlp.fc1"),
    (_B + r"ff\.net\.2", r"joint_blocks.\1.x_block.mlp.fc2"),
    (_B + r"ff_context\.net\.0\.proj", r"joint_blocks.\1.context_block.mlp.fc1"),
    (_B + r"ff_context\.net\.2", r"joint_blocks.\1.context_block.mlp.fc2"),
)


def to_original(state: dict) -> dict:
    """A diffusers SD3Transformer2DModel state dict in SAI's MMDiT layout (fused qkv; the final and the
    last block's context modulation in shift/scale order), as ComfyUI's SD3.5 files have it."""
    from toolkit.models.formats.original_layout import to_original as remap
    last = max(int(k.split(".")[1]) for k in state if k.startswith("transformer_blocks."))
    swapped = (r"^norm_out\.linear\.", rf"^transformer_blocks\.{last}\.norm1_context\.linear\.")
    return remap(state, RENAMES, FUSED, swapped)


SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=3.0)     # every SD3/3.5 repo's scheduler_config.json
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", **SCHEDULER_CONFIG)

_MMDIT = dict(sample_size=128, patch_size=2, in_channels=16, out_channels=16, attention_head_dim=64,
              joint_attention_dim=4096, pooled_projection_dim=2048)
# the stable-diffusion-3-medium-diffusers, 3.5-large (and -large-turbo) and 3.5-medium transformer/config.json;
# and the tiny factory's
TRANSFORMER_KNOWN = {
    "sd3-medium": dict(_MMDIT, num_layers=24, num_attention_heads=24, caption_projection_dim=1536,
                       pos_embed_max_size=192, dual_attention_layers=[], qk_norm=None),
    "sd3.5-large": dict(_MMDIT, num_layers=38, num_attention_heads=38, caption_projection_dim=2432,
                        pos_embed_max_size=192, dual_attention_layers=[], qk_norm="rms_norm"),
    "sd3.5-medium": dict(_MMDIT, num_layers=24, num_attention_heads=24, caption_projection_dim=1536,
                         pos_embed_max_size=384, dual_attention_layers=list(range(13)), qk_norm="rms_norm"),
    "tiny": dict(sample_size=8, patch_size=2, in_channels=16, out_channels=16, num_layers=2, attention_head_dim=16,
                 num_attention_heads=2, joint_attention_dim=32, caption_projection_dim=32, pooled_projection_dim=32,
                 pos_embed_max_size=32, dual_attention_layers=[0], qk_norm="rms_norm"),
}


def transformer_signature(view) -> dict:
    """What an MMDiT file's shapes tell: widths, depth, the blocks with a second (self) attention, QK norm."""
    if not view.has("x_embedder.proj.weight") or not view.has("joint_blocks.0.x_block.attn.qkv.weight"):
        raise FileKindError("no x_embedder.proj / joint_blocks.0.x_block.attn.qkv: not an SD3 MMDiT")
    width, in_channels, patch, _ = view.shape("x_embedder.proj.weight")
    return {"width": width, "in_channels": in_channels, "patch_size": patch,
            "out": view.dim("final_layer.linear.weight"),
            "pos_embed_max_size": math.isqrt(view.dim("pos_embed", 1)),
            "joint_attention_dim": view.dim("context_embedder.weight", 1),
            "caption_projection_dim": view.dim("context_embedder.weight"),
            "pooled_projection_dim": view.dim("y_embedder.mlp.0.weight", 1),
            "num_layers": view.count(r"joint_blocks\.(\d+)\."),
            "dual_attention_layers": view.indices(r"joint_blocks\.(\d+)\.x_block\.attn2\.qkv\.weight$"),
            "qk_norm": "rms_norm" if view.has("joint_blocks.0.x_block.attn.ln_q.weight") else None}


def transformer_facts(c: dict) -> dict:
    return {"width": c["num_attention_heads"] * c["attention_head_dim"], "in_channels": c["in_channels"],
            "patch_size": c["patch_size"], "out": c["out_channels"] * c["patch_size"] ** 2,
            "pos_embed_max_size": c["pos_embed_max_size"], "joint_attention_dim": c["joint_attention_dim"],
            "caption_projection_dim": c["caption_projection_dim"], "pooled_projection_dim": c["pooled_projection_dim"],
            "num_layers": c["num_layers"], "dual_attention_layers": list(c.get("dual_attention_layers") or []),
            "qk_norm": c.get("qk_norm")}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the SD3 MMDiT",
                      variants={"sd3-medium": "3-medium", "sd3.5-large": "3.5-large", "sd3.5-medium": "3.5-medium"},
                      notes={"sd3.5-large": ("3.5 Large Turbo has the same shapes: model.variant 3.5-large-turbo "
                                             "says it is",)})
PIPELINE_KWARGS = {"image_encoder": None, "feature_extractor": None}


def _tiny(b):
    from diffusers import SD3Transformer2DModel

    tokenizer, tokenizer_2, tokenizer_3 = kit.clip_tokenizer(), kit.clip_tokenizer(), kit.t5_tokenizer(512)
    # CLIP widths 8 + 24 = T5's 32 (the pipeline pads the CLIP features up to T5's width); two widths,
    # as CLIP-L's 768 and CLIP-G's 1280, so each file is of one kind only
    with b.seeded("text_encoder"):
        text_encoder = kit.clip_text_encoder(tokenizer, hidden=8, projection=True)
    with b.seeded("text_encoder_2"):
        text_encoder_2 = kit.clip_text_encoder(tokenizer_2, hidden=24, projection=True)
    with b.seeded("text_encoder_3", "t5"):               # T5-XXL as Flux builds it
        text_encoder_3 = kit.t5_encoder(tokenizer_3)
    with b.seeded("vae"):
        vae = kit.kl_vae(16, scaling_factor=1.5305, shift_factor=0.0609, quant_conv=False)
    heads, head_dim = 2, 16
    with b.seeded("transformer"):
        transformer = SD3Transformer2DModel(
            sample_size=8, patch_size=2, in_channels=16, out_channels=16, num_layers=2, attention_head_dim=head_dim,
            num_attention_heads=heads, joint_attention_dim=text_encoder_3.config.d_model,
            caption_projection_dim=heads * head_dim,
            pooled_projection_dim=text_encoder.config.projection_dim + text_encoder_2.config.projection_dim,
            pos_embed_max_size=32, dual_attention_layers=(0,), qk_norm="rms_norm").eval()   # SD3.5's blocks
        kit.jitter_constants(transformer)
    return dict(transformer=transformer, scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG), vae=vae,
                text_encoder=text_encoder, tokenizer=tokenizer, text_encoder_2=text_encoder_2,
                tokenizer_2=tokenizer_2, text_encoder_3=text_encoder_3, tokenizer_3=tokenizer_3)


def _pos_embed_reach(model: str) -> int:
    """The largest side its learned position embedding covers: pos_embed_max_size patches of 2x2 on the
    8x VAE latent (diffusers' PatchEmbed refuses a larger latent)."""
    return TRANSFORMER_KNOWN[model]["pos_embed_max_size"] * 2 * 8


# each model card's example call (all at 1024^2)
VARIANTS = {
    "3.5-large": Variant({"num_inference_steps": 28, "guidance_scale": 3.5},
                         name_or_path="stabilityai/stable-diffusion-3.5-large",
                         max_side=_pos_embed_reach("sd3.5-large")),
    "3.5-large-turbo": Variant({"num_inference_steps": 4, "guidance_scale": 0.0},
                               name_or_path="stabilityai/stable-diffusion-3.5-large-turbo",
                               max_side=_pos_embed_reach("sd3.5-large")),
    "3.5-medium": Variant({"num_inference_steps": 40, "guidance_scale": 4.5},
                          name_or_path="stabilityai/stable-diffusion-3.5-medium",
                          max_side=_pos_embed_reach("sd3.5-medium")),
    "3-medium": Variant({"num_inference_steps": 28, "guidance_scale": 7.0},
                        name_or_path="stabilityai/stable-diffusion-3-medium-diffusers",
                        max_side=_pos_embed_reach("sd3-medium")),
}

# SD3's CLIP-L has a projection; a ComfyUI clip_l file without one gets the identity (formats/clip.py)
CLIP_L_FILE = replace(clip.CLIP_L, converter="toolkit.models.formats.clip:convert_clip_projected",
                      prefixes=("text_encoders.clip_l.transformer.", ""))

def control_config(view):
    """An SD3 ControlNet file in diffusers' names (InstantX's): its config from the shapes."""
    return dit_controlnet.sd3(view, TRANSFORMER_KNOWN)


def control_fits(config: dict) -> bool:
    """A plain SD3 ControlNet (Canny, Depth, Tile): no extra conditioning channels (the inpainting one has a mask's)."""
    return not config.get("extra_conditioning_channels")


def inpaint_control_fits(config: dict) -> bool:
    """Alimama's SD3 ControlNet Inpainting: the mask as an extra conditioning channel."""
    return bool(config.get("extra_conditioning_channels"))


# the inpainting ControlNet repaints its control image where `control_mask` is white (task inpaint's init_img and
# strength are not passed; its mask_img is the control mask); it VAE-samples the picture from the global RNG too
CONTROLS = (Control("SD3ControlNetModel", {"txt2img": ("StableDiffusion3ControlNetPipeline", "control_image")},
                    fits="toolkit.models.archs.sd3:control_fits", global_rng=True, label="SD3 ControlNet",
                    files=dit_controlnet.files("toolkit.models.archs.sd3", dit_controlnet.SD3_ANCHORS, "SD3 ControlNet",
                                               "sd3_controlnet_diffusers")),
            Control("SD3ControlNetModel", {"inpaint": ("StableDiffusion3ControlNetInpaintingPipeline", "control_image")},
                    fits="toolkit.models.archs.sd3:inpaint_control_fits", global_rng=True, several=False,
                    inputs={"inpaint": {"image": None, "strength": None, "mask_image": "control_mask"}},
                    files=dit_controlnet.files("toolkit.models.archs.sd3", dit_controlnet.SD3_ANCHORS, "SD3 ControlNet",
                                               "sd3_controlnet_diffusers"),
                    label="SD3 ControlNet Inpainting"))


SPEC = ArchSpec(
    name="sd3", modality="image", default_name_or_path=VARIANTS["3.5-large"].name_or_path,
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    pipeline="StableDiffusion3Pipeline",
    tasks=(Task("txt2img", "StableDiffusion3Pipeline"),
           Task("img2img", "StableDiffusion3Img2ImgPipeline", strength=0.6),
           Task("inpaint", "StableDiffusion3InpaintPipeline", strength=0.6)),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="clip_l"),
        Component("tokenizer_2", "PreTrainedTokenizerBase", TOKENIZER, vocab="clip_g"),
        Component("tokenizer_3", "PreTrainedTokenizerBase", TOKENIZER, vocab="t5_xxl"),
        Component("text_encoder", "CLIPTextModelWithProjection", TEXT_ENCODER, single_file=CLIP_L_FILE),
        Component("text_encoder_2", "CLIPTextModelWithProjection", TEXT_ENCODER, single_file=clip.CLIP_G),
        Component("text_encoder_3", "T5EncoderModel", TEXT_ENCODER, single_file=t5.T5_XXL),
        Component("vae", "AutoencoderKL", VAE, single_file=vaes.SD3_VAE),
        # ComfyUI's SD3/3.5 files (SAI's MMDiT keys)
        Component("transformer", "SD3Transformer2DModel", DENOISER, single_file=SingleFile(
            "convert_sd3_transformer_checkpoint_to_diffusers", "toolkit.models.archs.sd3:to_original",
            anchors=("joint_blocks.0.x_block.attn.qkv.weight",),
            config="toolkit.models.archs.sd3:transformer_config", kind="sd3_mmdit", label="SD3 MMDiT")),
    ),
    pipeline_init_kwargs=PIPELINE_KWARGS,
    defaults=SampleDefaults(1024, 1024, 28, 3.5), size_divisor=16,      # VAE 8x, 2x2 patches
    latents=Latents("BCHW", 16, format=latent_formats.SD3),
    variants=VARIANTS, scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0},
              pipeline_kwargs=PIPELINE_KWARGS),
    gguf=Gguf("sd3", tiny=dict(num_attention_heads=16, caption_projection_dim=256)),   # SAI's MMDiT names
    description="Stable Diffusion 3 / 3.5 (MMDiT, CLIP-L + CLIP-G + T5, 16-ch VAE)",
    controls=CONTROLS,
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
)
