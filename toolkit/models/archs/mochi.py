"""Mochi 1 (preview) text-to-video: Genmo's 10B asymmetric dual-stream 3D DiT over T5-XXL (256 tokens; the
T5-v1.1-XXL encoder Flux, PixArt and SD3 use), the causal Mochi VAE (12 channels, 8x spatial, 6x temporal,
latents normalised by its mean/std), and a linear-quadratic flow schedule the pipeline computes itself
(threshold noise 0.025); classic CFG.

Its files: Genmo's original layout (ComfyUI's `diffusion_models/mochi_preview_bf16.safetensors`), read by the
tables below (diffusers' own converter counts 48 blocks, so it cannot read a file of another depth; the
tables give what it gives on a 48-block one: testing/tests/test_mochi.py), with the configs below."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, SingleFile, Tiny)
from toolkit.models.formats import t5
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

# genmo/mochi-1-preview scheduler/scheduler_config.json: flow matching on inverted sigmas, no shift
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", num_train_timesteps=1000, shift=1.0,
                      invert_sigmas=True)

# genmo/mochi-1-preview transformer/config.json; and the tiny factory's
_MOCHI = dict(patch_size=2, in_channels=12, out_channels=None, qk_norm="rms_norm", activation_fn="swiglu",
              max_sequence_length=256)
TRANSFORMER_KNOWN = {
    "mochi-1-preview": dict(_MOCHI, num_attention_heads=24, attention_head_dim=128, num_layers=48,
                            pooled_projection_dim=1536, text_embed_dim=4096, time_embed_dim=256),
    "tiny": dict(_MOCHI, num_attention_heads=2, attention_head_dim=16, num_layers=2, pooled_projection_dim=16,
                 text_embed_dim=32, time_embed_dim=16),
}

# Genmo's names <- diffusers' (the last block has no context output: its mod_y is norm1_context.linear_1)
_B = r"^transformer_blocks\.(\d+)\."
RENAMES = (
    (r"^patch_embed\.proj", "x_embedder.proj"),
    (r"^time_embed\.timestep_embedder\.linear_1", "t_embedder.mlp.0"),
    (r"^time_embed\.timestep_embedder\.linear_2", "t_embedder.mlp.2"),
    (r"^time_embed\.pooler\.", "t5_y_embedder."), (r"^time_embed\.caption_proj", "t5_yproj"),
    (_B + r"norm1\.linear", r"blocks.\1.mod_x"), (_B + r"norm1_context\.linear(_1)?", r"blocks.\1.mod_y"),
    (_B + r"attn1\.norm_q", r"blocks.\1.attn.q_norm_x"), (_B + r"attn1\.norm_k", r"blocks.\1.attn.k_norm_x"),
    (_B + r"attn1\.norm_added_q", r"blocks.\1.attn.q_norm_y"),
    (_B + r"attn1\.norm_added_k", r"blocks.\1.attn.k_norm_y"),
    (_B + r"attn1\.to_out\.0", r"blocks.\1.attn.proj_x"), (_B + r"attn1\.to_add_out", r"blocks.\1.attn.proj_y"),
    (_B + r"ff\.net\.0\.proj", r"blocks.\1.mlp_x.w1"), (_B + r"ff\.net\.2", r"blocks.\1.mlp_x.w2"),
    (_B + r"ff_context\.net\.0\.proj", r"blocks.\1.mlp_y.w1"), (_B + r"ff_context\.net\.2", r"blocks.\1.mlp_y.w2"),
    (r"^norm_out\.linear", "final_layer.mod"), (r"^proj_out", "final_layer.linear"),
)
FUSED = ((_B + r"attn1\.", ("to_q", "to_k", "to_v"), r"blocks.\1.attn.qkv_x"),
         (_B + r"attn1\.", ("add_q_proj", "add_k_proj", "add_v_proj"), r"blocks.\1.attn.qkv_y"))
# halves in the other order: SwiGLU's (proj, gate) and the final modulation's (shift, scale)
SWAPPED = (_B + r"ff(_context)?\.net\.0\.proj\.", r"^norm_out\.linear\.")


def to_original(state: dict) -> dict:
    """A diffusers MochiTransformer3DModel state dict in Genmo's layout, as ComfyUI's Mochi file has it."""
    from toolkit.models.formats.original_layout import to_original as remap
    return remap(state, RENAMES, FUSED, SWAPPED)


def convert_original(checkpoint: dict, config: dict) -> dict:
    """Genmo's layout (any depth and width; ComfyUI's `model.diffusion_model.` prefix or none) -> diffusers'
    names, the model's shapes from `config`."""
    from toolkit.models.formats.original_layout import read_original
    return read_original(checkpoint, "MochiTransformer3DModel", config, RENAMES, FUSED, SWAPPED)


def transformer_signature(view) -> dict:
    if not view.has("t5_y_embedder.to_kv.weight") or not view.has("blocks.0.attn.qkv_x.weight"):
        raise FileKindError("no t5_y_embedder / blocks.0.attn.qkv_x: not a Mochi transformer")
    width, in_channels, patch, _ = view.shape("x_embedder.proj.weight")
    return {"width": width, "in_channels": in_channels, "patch": patch, "patch_out": view.dim("final_layer.linear.weight"),
            "head_dim": view.dim("blocks.0.attn.q_norm_x.weight"), "num_layers": view.count(r"blocks\.(\d+)\."),
            "pooled_projection_dim": view.dim("t5_yproj.weight"), "text_embed_dim": view.dim("t5_yproj.weight", 1),
            "time_embed_dim": view.dim("t_embedder.mlp.0.weight", 1)}


def transformer_facts(c: dict) -> dict:
    width = c["num_attention_heads"] * c["attention_head_dim"]
    return {"width": width, "in_channels": c["in_channels"], "patch": c["patch_size"],
            "patch_out": c["patch_size"] ** 2 * (c["out_channels"] or c["in_channels"]),
            "head_dim": c["attention_head_dim"], "num_layers": c["num_layers"],
            "pooled_projection_dim": c["pooled_projection_dim"], "text_embed_dim": c["text_embed_dim"],
            "time_embed_dim": c["time_embed_dim"]}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the Mochi transformer")


TRANSFORMER_FILE = SingleFile(
    "toolkit.models.archs.mochi:convert_original", "toolkit.models.archs.mochi:to_original",
    anchors=("t5_y_embedder.to_kv.weight", "blocks.0.attn.qkv_x.weight"),
    config="toolkit.models.archs.mochi:transformer_config", kind="mochi_dit", label="Mochi transformer")


def _tiny(b):
    from diffusers import AutoencoderKLMochi, FlowMatchEulerDiscreteScheduler, MochiTransformer3DModel

    tokenizer = kit.t5_tokenizer(512)
    with b.seeded("text_encoder", "t5"):                 # T5-XXL as Flux, PixArt and SD3 build it
        text_encoder = kit.t5_encoder(tokenizer)
    with b.seeded("vae"):
        # three 2x spatial expansions (8x) and 1x2x3 in time (6x), the real 12 channels and mean/std
        vae = AutoencoderKLMochi(latent_channels=12, out_channels=3, encoder_block_out_channels=(32, 32, 32, 32),
                                 decoder_block_out_channels=(32, 32, 32, 32), layers_per_block=(1, 1, 1, 1, 1)).eval()
    with b.seeded("transformer"):
        # 2x2 patches, 2 heads of 16; its RoPE frequencies start at zero (learned): jittered, so positions matter
        transformer = kit.jitter_constants(MochiTransformer3DModel(
            patch_size=2, num_attention_heads=2, attention_head_dim=16, num_layers=2, pooled_projection_dim=16,
            in_channels=12, text_embed_dim=text_encoder.config.d_model, time_embed_dim=16).eval())
    scheduler = FlowMatchEulerDiscreteScheduler(shift=1.0, invert_sigmas=True)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer, scheduler=scheduler)


SPEC = ArchSpec(
    name="mochi", modality="video", default_name_or_path="genmo/mochi-1-preview", pipeline="MochiPipeline",
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="t5_xxl"),
        Component("text_encoder", "T5EncoderModel", TEXT_ENCODER, single_file=t5.T5_XXL),
        Component("vae", "AutoencoderKLMochi", VAE),
        Component("transformer", "MochiTransformer3DModel", DENOISER, single_file=TRANSFORMER_FILE),
    ),
    output_type="np",
    # Genmo's settings (diffusers' docs reproduce them): 848x480, 163 frames (5.4 s at 30 fps), 64 steps, CFG 4.5
    defaults=SampleDefaults(848, 480, 64, 4.5, num_frames=163, fps=30, output_ext="mp4"),
    size_divisor=16,                  # 8x VAE x 2x2 DiT patches
    latents=Latents("BCFHW", 12, spatial=8, temporal=6, format=latent_formats.MOCHI), scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 7, "num_inference_steps": 2, "guidance_scale": 4.5,
                      "fps": 8}),
    description="Mochi 1 preview text-to-video (10B AsymmDiT, T5-XXL, 12-channel causal VAE)",
    # on inverted sigmas: Euler alone samples it (toolkit/samplers.py); Heun and the multistep solvers either
    # refuse the pipeline's sigmas or would feed the DiT un-inverted times
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler", "invert_sigmas": True},
    batch_arg="num_videos_per_prompt",
)
