"""Chroma1-HD: a Flux-schnell-derived DiT whose modulations come from a small approximator instead
of CLIP, over T5-XXL alone and the Flux VAE; latents packed as 2x2-patch tokens; true CFG with a
negative prompt (guidance_scale > 1).

T5 and VAE are Flux's: the tiny builds them from flux.py's recipes ("t5", "flux_vae"), so Flux's
text_encoder_2/tokenizer_2/vae and Chroma's text_encoder/tokenizer/vae are the same files."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, SingleFile, Task, Tiny)
from toolkit.models.formats import t5, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

# Chroma1-HD's scheduler: a fixed shift of 3 (no resolution-dependent shift)
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False, base_shift=0.5,
                        max_shift=1.15, base_image_seq_len=256, max_image_seq_len=4096,
                        time_shift_type="exponential")
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", **SCHEDULER_CONFIG)

# lodestones/Chroma1-HD transformer/config.json; and the tiny factory's. The repo's config keeps Flux's
# `guidance_embeds: false`, which ChromaTransformer2DModel does not take (diffusers keeps it in the config,
# with a warning) and ChromaInpaintPipeline reads: a file's config carries it as the repo's does.
TRANSFORMER_KNOWN = {
    "chroma1-hd": dict(patch_size=1, in_channels=64, out_channels=None, num_layers=19, num_single_layers=38,
                       attention_head_dim=128, num_attention_heads=24, joint_attention_dim=4096,
                       axes_dims_rope=[16, 56, 56], approximator_num_channels=64, approximator_hidden_dim=5120,
                       approximator_layers=5, guidance_embeds=False),
    "tiny": dict(patch_size=1, in_channels=64, out_channels=None, num_layers=2, num_single_layers=2,
                 attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32, axes_dims_rope=[4, 6, 6],
                 approximator_num_channels=64, approximator_hidden_dim=32, approximator_layers=1,
                 guidance_embeds=False),
}


def transformer_signature(view) -> dict:
    """What a Chroma file's shapes tell: Flux's blocks without their modulation, and the approximator."""
    if not view.has("distilled_guidance_layer.in_proj.weight"):
        raise FileKindError("no distilled_guidance_layer.in_proj.weight: not a Chroma transformer")
    return {"width": view.dim("img_in.weight"), "in_channels": view.dim("img_in.weight", 1),
            "out": view.dim("final_layer.linear.weight"), "joint_attention_dim": view.dim("txt_in.weight", 1),
            "num_layers": view.count(r"double_blocks\.(\d+)\."),
            "num_single_layers": view.count(r"single_blocks\.(\d+)\."),
            "approximator_num_channels": view.dim("distilled_guidance_layer.in_proj.weight", 1),
            "approximator_hidden_dim": view.dim("distilled_guidance_layer.in_proj.weight"),
            "approximator_layers": view.count(r"distilled_guidance_layer\.layers\.(\d+)\.")}


def transformer_facts(c: dict) -> dict:
    return {"width": c["num_attention_heads"] * c["attention_head_dim"], "in_channels": c["in_channels"],
            "out": (c.get("out_channels") or c["in_channels"]) * c.get("patch_size", 1) ** 2,
            "joint_attention_dim": c["joint_attention_dim"], "num_layers": c["num_layers"],
            "num_single_layers": c["num_single_layers"], "approximator_num_channels": c["approximator_num_channels"],
            "approximator_hidden_dim": c["approximator_hidden_dim"], "approximator_layers": c["approximator_layers"]}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the Chroma transformer")


# Chroma's own layers; its blocks are Flux's without modulation (diffusers' converter, inverted)
_DGL = r"^distilled_guidance_layer\."
CHROMA_RENAMES = ((_DGL + r"layers\.(\d+)\.linear_1", r"distilled_guidance_layer.layers.\1.in_layer"),
                  (_DGL + r"layers\.(\d+)\.linear_2", r"distilled_guidance_layer.layers.\1.out_layer"),
                  (r"^distilled_guidance_layer\.norms\.(\d+)\.weight", r"distilled_guidance_layer.norms.\1.scale"))


def convert_original(checkpoint: dict, **kwargs) -> dict:
    from diffusers.loaders.single_file_utils import convert_chroma_transformer_checkpoint_to_diffusers as convert
    from toolkit.models.archs.flux import at_any_width
    return at_any_width(convert, checkpoint, **kwargs)


def to_original(state: dict) -> dict:
    """A diffusers ChromaTransformer2DModel state dict in the original (Flux-style) layout."""
    from toolkit.models.archs.flux import FLUX_FUSED, FLUX_RENAMES
    from toolkit.models.formats.original_layout import to_original as remap
    return remap(state, CHROMA_RENAMES + FLUX_RENAMES, FLUX_FUSED)


def _tiny(b):
    from diffusers import ChromaTransformer2DModel

    tokenizer = kit.t5_tokenizer(512)
    with b.seeded("text_encoder", "t5"):          # = Flux's text_encoder_2
        text_encoder = kit.t5_encoder(tokenizer)
    with b.seeded("vae", "flux_vae"):
        vae = kit.flux_vae()
    with b.seeded("transformer"):
        transformer = ChromaTransformer2DModel(
            patch_size=1, in_channels=64, num_layers=2, num_single_layers=2, attention_head_dim=16,
            num_attention_heads=2, joint_attention_dim=text_encoder.config.d_model, axes_dims_rope=(4, 6, 6),
            approximator_num_channels=64, approximator_hidden_dim=32, approximator_layers=1).eval()
        transformer.register_to_config(guidance_embeds=False)      # as the repo's config.json has it
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG))


SPEC = ArchSpec(
    name="chroma", modality="image", default_name_or_path="lodestones/Chroma1-HD", pipeline="ChromaPipeline",
    # inpaint reads transformer.config.guidance_embeds: the repo's config.json has it (TRANSFORMER_KNOWN)
    tasks=(Task("txt2img", "ChromaPipeline"), Task("img2img", "ChromaImg2ImgPipeline", strength=0.9),
           Task("inpaint", "ChromaInpaintPipeline", strength=0.6)),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="t5_xxl"),
        Component("text_encoder", "T5EncoderModel", TEXT_ENCODER, single_file=t5.T5_XXL),
        Component("vae", "AutoencoderKL", VAE, single_file=vaes.FLUX_AE),
        Component("transformer", "ChromaTransformer2DModel", DENOISER, single_file=SingleFile(
            "toolkit.models.archs.chroma:convert_original", "toolkit.models.archs.chroma:to_original",
            anchors=("double_blocks.0.img_attn.qkv.weight", "distilled_guidance_layer.in_proj.weight"),
            config="toolkit.models.archs.chroma:transformer_config", kind="chroma_dit", label="Chroma transformer")),
    ),
    pipeline_init_kwargs={"image_encoder": None, "feature_extractor": None},
    defaults=SampleDefaults(1024, 1024, 40, 3.0),     # the diffusers Chroma1-HD example: 40 steps, CFG 3.0
    latents=Latents("packed", 16, patch=2, format=latent_formats.FLUX),
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 3.0}),
    description="Chroma1-HD (T5 only, Flux VAE, true CFG, packed tokens)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    # its blocks are not in diffusers' block registry (no first_block); no MagCache ratios
    step_caches={"taylorseer": {}, "faster": {}},
)
