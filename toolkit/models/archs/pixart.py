"""PixArt-α and PixArt-Σ (1024-MS): a cross-attention DiT (adaLN-single, learned sigma: 8 output
channels, the pipeline keeps the first 4) over T5-XXL, SD's 4-channel KL VAE, DPM-Solver++ on an
epsilon-predicting linear beta schedule.

Two variants, two pipelines: PixArtAlphaPipeline (120 T5 tokens; its 1024 transformer also takes the
resolution and aspect ratio as conditions) and PixArtSigmaPipeline (300 tokens, none of those). The
holder picks the variant's class; the components are the same classes in both repos.

Both pipelines snap width/height to their aspect-ratio bins and resize the image back by default, as
Sana's does; the `resolution_binning` sample key turns that off (the tiny model's 64x64 has no bin).

Its files: the original PixArt DiT layout (ComfyUI's `diffusion_models/PixArt-*.safetensors`, the
releases' own checkpoints), read with the configs below; the 1024 alpha DiT's size and aspect-ratio
embedders tell it from Sigma's. T5-XXL and the SD VAE as ComfyUI keeps them (`text_encoders/`, `vae/`)."""
import re

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Extra,
                                 Latents, SampleDefaults, SingleFile, Tiny, Variant, load_class)
from toolkit.models.archs import sd1
from toolkit.models.archs.sana import SanaModel
from toolkit.models.formats import t5
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

# the variant -> the pipeline its repo's model_index.json names
PIPELINES = {"alpha": "PixArtAlphaPipeline", "sigma": "PixArtSigmaPipeline"}


class PixArtModel(SanaModel):
    """Sana's `resolution_binning` key; the variant's pipeline class over the same components."""

    def __init__(self, model_config, *args, **kwargs):
        super().__init__(model_config, *args, **kwargs)
        self.pipeline_class = load_class(PIPELINES[self.model_config.variant or self.spec.default_variant])


_DIT = dict(num_attention_heads=16, attention_head_dim=72, in_channels=4, out_channels=8, num_layers=28,
            cross_attention_dim=1152, caption_channels=4096, sample_size=128, patch_size=2)
# PixArt-alpha/PixArt-XL-2-1024-MS and PixArt-Sigma-XL-2-1024-MS transformer/config.json; the tiny factory's
TRANSFORMER_KNOWN = {
    "pixart-alpha-1024": dict(_DIT),
    "pixart-sigma-1024": dict(_DIT, interpolation_scale=2, use_additional_conditions=False),
    "tiny": dict(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8, num_layers=2,
                 cross_attention_dim=32, caption_channels=32, sample_size=8, patch_size=2),
}

# (diffusers name, original name): "{}" is a block index; fused layers split on dim 0 in equal parts
_NAMES = (
    ("pos_embed.proj", "x_embedder.proj"), ("proj_out", "final_layer.linear"),
    ("scale_shift_table", "final_layer.scale_shift_table"),
    ("adaln_single.emb.timestep_embedder.linear_1", "t_embedder.mlp.0"),
    ("adaln_single.emb.timestep_embedder.linear_2", "t_embedder.mlp.2"),
    ("adaln_single.emb.resolution_embedder.linear_1", "csize_embedder.mlp.0"),
    ("adaln_single.emb.resolution_embedder.linear_2", "csize_embedder.mlp.2"),
    ("adaln_single.emb.aspect_ratio_embedder.linear_1", "ar_embedder.mlp.0"),
    ("adaln_single.emb.aspect_ratio_embedder.linear_2", "ar_embedder.mlp.2"),
    ("adaln_single.linear", "t_block.1"),
    ("caption_projection.linear_1", "y_embedder.y_proj.fc1"), ("caption_projection.linear_2", "y_embedder.y_proj.fc2"),
    ("transformer_blocks.{}.scale_shift_table", "blocks.{}.scale_shift_table"),
    ("transformer_blocks.{}.attn1.to_out.0", "blocks.{}.attn.proj"),
    ("transformer_blocks.{}.attn2.to_q", "blocks.{}.cross_attn.q_linear"),
    ("transformer_blocks.{}.attn2.to_out.0", "blocks.{}.cross_attn.proj"),
    ("transformer_blocks.{}.ff.net.0.proj", "blocks.{}.mlp.fc1"), ("transformer_blocks.{}.ff.net.2", "blocks.{}.mlp.fc2"),
)
_FUSED = (("transformer_blocks.{}.attn1.", ("to_q", "to_k", "to_v"), "blocks.{}.attn.qkv"),
          ("transformer_blocks.{}.attn2.", ("to_k", "to_v"), "blocks.{}.cross_attn.kv_linear"))
# in the original files, not in the diffusers model: the null caption (CFG dropout) and the fixed sin-cos table
IGNORED = ("y_embedder.y_embedding", "pos_embed")


def _rx(name: str, tail: str = r"(?P<tail>\.|$)") -> str:
    """`name` as a regex over keys: "{}" matches a block index (group `n`)."""
    return "^" + re.escape(name).replace(r"\{\}", r"(?P<n>\d+)") + tail


def _sub(name: str) -> str:
    return name.replace("{}", r"\g<n>") + r"\g<tail>"


def to_original(state: dict) -> dict:
    """A diffusers PixArtTransformer2DModel state dict in the original PixArt layout (fused qkv and kv)."""
    from toolkit.models.formats.original_layout import to_original as remap
    renames = tuple((_rx(d), _sub(o)) for d, o in _NAMES)
    fused = tuple((_rx(head, ""), parts, o.replace("{}", r"\g<n>")) for head, parts, o in _FUSED)
    return remap(state, renames, fused)


def convert_original(checkpoint: dict, **_) -> dict:
    """The original PixArt layout (ComfyUI's `model.diffusion_model.` prefix or none) -> diffusers names;
    what the model has no weight for is dropped."""
    from toolkit.models.formats.at_width import strip

    out = {}
    for key, t in strip(checkpoint).items():
        if key in IGNORED:
            continue
        for head, parts, original in _FUSED:
            m = re.match(_rx(original, r"\.(?P<kind>weight|bias)$"), key)
            if m:
                prefix = head.replace("{}", m["n"])
                out.update({f"{prefix}{p}.{m['kind']}": c for p, c in zip(parts, t.chunk(len(parts), 0))})
                break
        else:
            out[next((re.sub(_rx(o), _sub(d), key) for d, o in _NAMES if re.match(_rx(o), key)), key)] = t
    return out


def transformer_signature(view) -> dict:
    if not view.has("t_block.1.weight") or not view.has("blocks.0.cross_attn.kv_linear.weight"):
        raise FileKindError("no t_block.1 / blocks.0.cross_attn.kv_linear: not a PixArt DiT")
    width, in_channels, patch, _ = view.shape("x_embedder.proj.weight")
    return {"width": width, "in_channels": in_channels, "patch_size": patch,
            "out": view.dim("final_layer.linear.weight"), "caption_channels": view.dim("y_embedder.y_proj.fc1.weight", 1),
            "num_layers": view.count(r"blocks\.(\d+)\."), "size_conditions": view.has("csize_embedder.mlp.0.weight")}


def transformer_facts(c: dict) -> dict:
    conditions = c.get("use_additional_conditions")
    return {"width": c["num_attention_heads"] * c["attention_head_dim"], "in_channels": c["in_channels"],
            "patch_size": c["patch_size"], "out": c["out_channels"] * c["patch_size"] ** 2,
            "caption_channels": c["caption_channels"], "num_layers": c["num_layers"],
            # unset: the model's own rule (a 1024 DiT, sample_size 128, has them)
            "size_conditions": c["sample_size"] == 128 if conditions is None else conditions}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the PixArt DiT",
                      variants={"pixart-alpha-1024": "alpha", "pixart-sigma-1024": "sigma"})


TRANSFORMER_FILE = SingleFile(
    "toolkit.models.archs.pixart:convert_original", "toolkit.models.archs.pixart:to_original",
    anchors=("t_block.1.weight", "blocks.0.cross_attn.kv_linear.weight", "x_embedder.proj.weight"),
    config="toolkit.models.archs.pixart:transformer_config", kind="pixart_dit", label="PixArt DiT")

# PixArt-alpha/PixArt-XL-2-1024-MS and PixArt-Sigma-XL-2-1024-MS scheduler/scheduler_config.json
SCHEDULER_FILE = dict(_class_name="DPMSolverMultistepScheduler", num_train_timesteps=1000, beta_start=0.0001,
                      beta_end=0.02, beta_schedule="linear", prediction_type="epsilon", algorithm_type="dpmsolver++",
                      solver_order=2, solver_type="midpoint", lower_order_final=True, timestep_spacing="linspace",
                      steps_offset=0, use_karras_sigmas=False, thresholding=False, trained_betas=None)


def _tiny(b):
    from diffusers import DPMSolverMultistepScheduler, PixArtTransformer2DModel

    tokenizer = kit.t5_tokenizer(512)
    with b.seeded("text_encoder", "t5"):                 # T5-XXL as Flux and SD3 build it
        text_encoder = kit.t5_encoder(tokenizer)
    # sd-vae-ft-ema: SD 1.x's layout and scale, its own weights (not shared with sd1's VAE)
    with b.seeded("vae", "sd_vae_ft_ema"):
        vae = kit.kl_vae(4, scaling_factor=0.18215, quant_conv=True)
    with b.seeded("transformer"):
        # sample_size 8 (not 128): no resolution/aspect-ratio conditions, which the Alpha pipeline
        # passes only to a 1024 transformer
        transformer = PixArtTransformer2DModel(
            num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8, num_layers=2,
            cross_attention_dim=32, sample_size=8, patch_size=2, caption_channels=text_encoder.config.d_model,
            norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6).eval()
        kit.jitter_constants(transformer)
    scheduler = DPMSolverMultistepScheduler.from_config(SCHEDULER_FILE)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer, scheduler=scheduler)


# each model card's example: the pipeline's defaults (20 steps, CFG 4.5) at 1024^2
VARIANTS = {
    "alpha": Variant(name_or_path="PixArt-alpha/PixArt-XL-2-1024-MS"),
    "sigma": Variant(name_or_path="PixArt-alpha/PixArt-Sigma-XL-2-1024-MS"),
}

SPEC = ArchSpec(
    name="pixart", modality="image", default_name_or_path=VARIANTS["alpha"].name_or_path,
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    pipeline=PIPELINES["alpha"], holder=PixArtModel,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="t5_xxl"),
        Component("text_encoder", "T5EncoderModel", TEXT_ENCODER, single_file=t5.T5_XXL),
        Component("vae", "AutoencoderKL", VAE, single_file=sd1.VAE_FILE),
        Component("transformer", "PixArtTransformer2DModel", DENOISER, single_file=TRANSFORMER_FILE),
    ),
    defaults=SampleDefaults(1024, 1024, 20, 4.5),
    size_divisor=16,                                     # VAE 8x, 2x2 patches
    sample_extras={"resolution_binning": Extra("bool", True)},
    latents=Latents("BCHW", 4, format=latent_formats.SD15),     # ComfyUI previews PixArt with SD 1.5's table
    variants=VARIANTS, scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.5,
                      "resolution_binning": False}),
    description="PixArt-α / PixArt-Σ (DiT, T5-XXL, SD VAE)",
    scheduler_config={"_class_name": "DPMSolverMultistepScheduler", "prediction_type": "epsilon"},
)
