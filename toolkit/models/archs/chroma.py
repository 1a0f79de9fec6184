"""Chroma1-HD: a Flux-schnell-derived DiT whose modulations come from a small approximator instead
of CLIP, over T5-XXL alone and the Flux VAE; latents packed as 2x2-patch tokens; true CFG with a
negative prompt (guidance_scale > 1).

T5 and VAE are Flux's: the tiny builds them from flux.py's recipes ("t5", "flux_vae"), so Flux's
text_encoder_2/tokenizer_2/vae and Chroma's text_encoder/tokenizer/vae are the same files."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, SingleFile, Task, Tiny)
from toolkit.models.tiny import kit

# Chroma1-HD's scheduler: a fixed shift of 3 (no resolution-dependent shift)
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False, base_shift=0.5,
                        max_shift=1.15, base_image_seq_len=256, max_image_seq_len=4096,
                        time_shift_type="exponential")


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
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG))


SPEC = ArchSpec(
    name="chroma", modality="image", default_name_or_path="lodestones/Chroma1-HD", pipeline="ChromaPipeline",
    # no inpaint: diffusers 0.42.1's ChromaInpaintPipeline reads transformer.config.guidance_embeds,
    # which ChromaTransformer2DModel has not
    tasks=(Task("txt2img", "ChromaPipeline"), Task("img2img", "ChromaImg2ImgPipeline", strength=0.9)),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "T5EncoderModel", TEXT_ENCODER),
        Component("vae", "AutoencoderKL", VAE),
        Component("transformer", "ChromaTransformer2DModel", DENOISER, single_file=SingleFile(
            "toolkit.models.archs.chroma:convert_original", "toolkit.models.archs.chroma:to_original",
            anchors=("double_blocks.0.img_attn.qkv.weight", "distilled_guidance_layer.in_proj.weight"))),
    ),
    pipeline_init_kwargs={"image_encoder": None, "feature_extractor": None},
    defaults=SampleDefaults(1024, 1024, 40, 3.0),     # the diffusers Chroma1-HD example: 40 steps, CFG 3.0
    latents=Latents("packed", 16, patch=2, format=latent_formats.FLUX),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 3.0}),
    description="Chroma1-HD (T5 only, Flux VAE, true CFG, packed tokens)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    # its blocks are not in diffusers' block registry (no first_block); no MagCache ratios
    step_caches={"taylorseer": {}, "faster": {}},
)
