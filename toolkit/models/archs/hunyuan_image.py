"""HunyuanImage 2.1 text-to-image: a 17B dual/single-stream DiT over Qwen2.5-VL-7B (the third-last hidden
state, the 34-token system prefix dropped: Qwen-Image's encoder and template) and Glyph-ByT5 (run only on
the prompt's quoted text: HunyuanVideo 1.5's), the 64-channel 32x VAE, natively 2K. Guidance runs through
the pipeline's guiders (adaptive projected guidance mixed with CFG; `ocr_guider` for prompts with quoted
text): the pipeline takes no guidance_scale, so the holder hands each call copies of them with the request's
scale.

The distilled checkpoint has no guiders: its guidance is embedded (`distilled_guidance_scale`, 3.25), with a
MeanFlow end-time embedding, and runs 8 steps.

The refiner (HunyuanImageRefinerPipeline) is no task here: another VAE class and transformer, and a call that
refines an image without a strength, which none of the engine's tasks is.

Its files: Tencent's original layout (ComfyUI's `diffusion_models/hunyuanimage2.1*.safetensors`: HunyuanVideo's
names, fused qkv and linear1, plus the glyph projection `byt5_in` and the distilled model's `guidance_in` and
`time_r_in`), read by the tables below (diffusers has no converter for it), with the configs below; the
guiders from `guider_files` (the official APG start steps: 5, and 38 for quoted text)."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, GUIDER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component,
                                 Latents, SampleDefaults, SingleFile, Tiny, Variant)
from toolkit.models.archs import hunyuan_video
from toolkit.models.archs.hunyuan_video15 import HunyuanVideo15Model, tiny_glyph_byt5
from toolkit.models.archs.qwen_image import TEXT_HIDDEN, tiny_qwen25vl
from toolkit.models.formats import llm_encoders
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError

# hunyuanvideo-community/HunyuanImage-2.1-Diffusers: flow matching, shift 5 (the model card's; 4 distilled)
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", num_train_timesteps=1000, shift=5.0)
REPO = "hunyuanvideo-community/HunyuanImage-2.1-Diffusers"
# the base repo's guider/ and ocr_guider/: APG mixed with CFG 3.5, APG from step 5 (38 for prompts with quoted
# text), the official HunyuanImage 2.1 values; the distilled repo has none
GUIDER_FILES = {"guider": dict(_class_name="AdaptiveProjectedMixGuidance", guidance_scale=3.5,
                               adaptive_projected_guidance_start_step=5),
                "ocr_guider": dict(_class_name="AdaptiveProjectedMixGuidance", guidance_scale=3.5,
                                   adaptive_projected_guidance_start_step=38)}

# hunyuanvideo-community/HunyuanImage-2.1(-Distilled)-Diffusers transformer/config.json (diffusers'
# scripts/convert_hunyuan_image_to_diffusers.py); and the tiny factory's
_HI21 = dict(in_channels=64, out_channels=64, num_attention_heads=28, attention_head_dim=128, num_layers=20,
             num_single_layers=40, num_refiner_layers=2, patch_size=[1, 1], qk_norm="rms_norm", guidance_embeds=False,
             text_embed_dim=3584, text_embed_2_dim=1472, rope_theta=256.0, rope_axes_dim=[64, 64])
TINY_TRANSFORMER = dict(in_channels=64, out_channels=64, num_attention_heads=2, attention_head_dim=16, num_layers=1,
                        num_single_layers=1, num_refiner_layers=1, patch_size=[1, 1], text_embed_dim=TEXT_HIDDEN,
                        text_embed_2_dim=32, rope_axes_dim=[8, 8])
TRANSFORMER_KNOWN = {
    "hunyuanimage-2.1": _HI21,
    "hunyuanimage-2.1-distilled": dict(_HI21, guidance_embeds=True, use_meanflow=True),
    "tiny": TINY_TRANSFORMER,
}

# Tencent's names <- diffusers': HunyuanVideo's tables, and what HunyuanImage has over them
_E = r"^time_guidance_embed\."
RENAMES = (
    (_E + r"timestep_embedder\.linear_1", "time_in.mlp.0"), (_E + r"timestep_embedder\.linear_2", "time_in.mlp.2"),
    (_E + r"timestep_embedder_r\.linear_1", "time_r_in.mlp.0"),
    (_E + r"timestep_embedder_r\.linear_2", "time_r_in.mlp.2"),
    (_E + r"guidance_embedder\.linear_1", "guidance_in.mlp.0"), (_E + r"guidance_embedder\.linear_2", "guidance_in.mlp.2"),
    (r"^context_embedder_2\.norm", "byt5_in.layernorm"), (r"^context_embedder_2\.linear_(\d)", r"byt5_in.fc\1"),
) + hunyuan_video.RENAMES
FUSED = hunyuan_video.FUSED
SWAPPED = (r"^norm_out\.linear\.",)          # the final modulation: (shift, scale) in Tencent's order


def to_original(state: dict) -> dict:
    from toolkit.models.formats.original_layout import to_original as remap
    return remap(state, RENAMES, FUSED, SWAPPED)


def convert_original(checkpoint: dict, config: dict) -> dict:
    from toolkit.models.formats.original_layout import read_original
    return read_original(checkpoint, "HunyuanImageTransformer2DModel", config, RENAMES, FUSED, SWAPPED)


def transformer_signature(view) -> dict:
    if not view.has("byt5_in.fc1.weight") or not view.has("double_blocks.0.img_attn_qkv.weight"):
        raise FileKindError("no byt5_in / double_blocks.0.img_attn_qkv: not a HunyuanImage 2.1 transformer")
    width, in_channels, *patch = view.shape("img_in.proj.weight")
    return {"width": width, "in_channels": in_channels, "patch": patch, "patch_out": view.dim("final_layer.linear.weight"),
            "head_dim": view.dim("double_blocks.0.img_attn_q_norm.weight"),
            "text_embed_dim": view.dim("txt_in.input_embedder.weight", 1),
            "text_embed_2_dim": view.dim("byt5_in.fc1.weight", 1),
            "num_layers": view.count(r"double_blocks\.(\d+)\."), "num_single_layers": view.count(r"single_blocks\.(\d+)\."),
            "num_refiner_layers": view.count(r"txt_in\.individual_token_refiner\.blocks\.(\d+)\."),
            "mlp": view.dim("double_blocks.0.img_mlp.fc1.weight"), "guidance_embeds": view.has("guidance_in.mlp.0.weight"),
            "use_meanflow": view.has("time_r_in.mlp.0.weight")}


def transformer_facts(c: dict) -> dict:
    width = c["num_attention_heads"] * c["attention_head_dim"]
    patch = list(c["patch_size"])
    return {"width": width, "in_channels": c["in_channels"], "patch": patch,
            "patch_out": c["out_channels"] * patch[0] * patch[1], "head_dim": c["attention_head_dim"],
            "text_embed_dim": c["text_embed_dim"], "text_embed_2_dim": c["text_embed_2_dim"],
            "num_layers": c["num_layers"], "num_single_layers": c["num_single_layers"],
            "num_refiner_layers": c["num_refiner_layers"], "mlp": int(width * c.get("mlp_ratio", 4.0)),
            "guidance_embeds": c.get("guidance_embeds", False), "use_meanflow": c.get("use_meanflow", False)}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the HunyuanImage 2.1 transformer",
                      variants={"hunyuanimage-2.1": "base", "hunyuanimage-2.1-distilled": "distilled"})


TRANSFORMER_FILE = SingleFile(
    "toolkit.models.archs.hunyuan_image:convert_original", "toolkit.models.archs.hunyuan_image:to_original",
    anchors=("byt5_in.fc1.weight", "double_blocks.0.img_attn_qkv.weight"),
    config="toolkit.models.archs.hunyuan_image:transformer_config", kind="hunyuan_image_dit",
    label="HunyuanImage 2.1 transformer")

VARIANTS = {
    "base": Variant(),
    # guidance embedded in the weights, 8 steps (the model card); its repo has no guiders
    "distilled": Variant({"num_inference_steps": 8, "guidance_scale": 3.25},
                         name_or_path="hunyuanvideo-community/HunyuanImage-2.1-Distilled-Diffusers",
                         scheduler={"shift": 4.0}, without=("guider", "ocr_guider")),
}


class HunyuanImageModel(HunyuanVideo15Model):
    """The request's guidance_scale is the base checkpoint's guiders' (HunyuanVideo15Model's per-call copies)
    and the distilled one's `distilled_guidance_scale` (the pipeline reads it only where the transformer
    embeds guidance)."""

    def pipeline_kwargs(self, gen):
        kw = super().pipeline_kwargs(gen)
        kw["distilled_guidance_scale"] = gen.guidance_scale
        return kw


def tiny_vae(b):
    """Six blocks (five 2x downsamples: 32x), 64 latent channels; 32 wide (its GroupNorms have 32 groups) and
    the last block 2 x 64, as the encoder's channel grouping needs. Stored in bf16, as the real repos store it
    (the 128-wide head is 2.4M weights)."""
    import torch
    from diffusers import AutoencoderKLHunyuanImage

    with b.seeded("vae"):
        return AutoencoderKLHunyuanImage(
            in_channels=3, out_channels=3, latent_channels=64, block_out_channels=(32, 32, 32, 32, 32, 128),
            layers_per_block=1, spatial_compression_ratio=32, sample_size=64,
            scaling_factor=0.75289).eval().to(torch.bfloat16)


def tiny_transformer(b, **over):
    """64 channels in 1x1 patches, 1 dual + 1 single block of 2 heads of 16 (RoPE axes 8+8). Stored in bf16, as
    the real repos store it: its glyph projection is 2048 wide whatever the model's width (4M weights)."""
    import torch
    from diffusers import HunyuanImageTransformer2DModel

    with b.seeded("transformer"):
        return HunyuanImageTransformer2DModel(**{**TINY_TRANSFORMER, **over}).eval().to(torch.bfloat16)


def tiny_guiders() -> dict:
    """The base repo's two guiders, as `guider_files` (the tiny request's 6 steps reach the general one's APG)."""
    from diffusers import AdaptiveProjectedMixGuidance

    return {role: AdaptiveProjectedMixGuidance(**{k: v for k, v in config.items() if k != "_class_name"})
            for role, config in GUIDER_FILES.items()}


def _tiny(b):
    from diffusers import FlowMatchEulerDiscreteScheduler

    tokenizer, text_encoder = tiny_qwen25vl(b)          # Qwen-Image's (one pair in the pool)
    tokenizer_2, text_encoder_2 = tiny_glyph_byt5(b)     # HunyuanVideo 1.5's
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, tokenizer_2=tokenizer_2,
                text_encoder_2=text_encoder_2, vae=tiny_vae(b), transformer=tiny_transformer(b),
                scheduler=FlowMatchEulerDiscreteScheduler(shift=5.0), **tiny_guiders())


SPEC = ArchSpec(
    name="hunyuan_image", modality="image", default_name_or_path=REPO, pipeline="HunyuanImagePipeline",
    holder=HunyuanImageModel,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("guider", "BaseGuidance", GUIDER, optional=True),
        Component("ocr_guider", "BaseGuidance", GUIDER, optional=True),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen2_5"),
        Component("tokenizer_2", "PreTrainedTokenizerBase", TOKENIZER, vocab="byt5"),
        Component("text_encoder", "transformers:Qwen2_5_VLForConditionalGeneration", TEXT_ENCODER,
                  single_file=llm_encoders.QWEN25_VL_7B),          # Qwen-Image's file (`qwen_2.5_vl_7b*`)
        Component("text_encoder_2", "transformers:T5EncoderModel", TEXT_ENCODER),
        Component("vae", "AutoencoderKLHunyuanImage", VAE),
        Component("transformer", "HunyuanImageTransformer2DModel", DENOISER, single_file=TRANSFORMER_FILE),
    ),
    # the model card: 2048x2048, 50 steps, guidance 3.5
    defaults=SampleDefaults(2048, 2048, 50, 3.5),
    variants=VARIANTS,
    size_divisor=64,                  # the pipeline's own rule (32x VAE, twice)
    latents=Latents("BCHW", 64, spatial=32, format=latent_formats.HUNYUAN_IMAGE21), scheduler_file=SCHEDULER_FILE,
    guider_files=GUIDER_FILES,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 6, "guidance_scale": 3.5}),
    description="HunyuanImage 2.1 text-to-image (17B DiT, 2K; Qwen2.5-VL + Glyph-ByT5, 64-channel 32x VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
)
