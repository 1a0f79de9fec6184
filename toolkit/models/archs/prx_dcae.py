"""PRX (Photoroom) on DC-AE: prx's DiT and T5Gemma encoder over the Deep Compression Autoencoder
(mit-han-lab's dc-ae-f32c32-sana-1.1: 32 channels, 32x spatial, one latent pixel per token) instead of the
Flux VAE. Another latent space than prx's, so an arch of its own; the same pipeline, holder and text
encoder files (the tiny builds them from prx.py's recipe, so the two share them in the pool).

Variants: the collection's DC-AE checkpoints (base, SFT, 8-step distilled SFT), all at 512. ComfyUI has no
latent->RGB table for DC-AE (the UI falls back) and no PRX model: no single files."""
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 Tiny, Variant)
from toolkit.models.archs import prx
from toolkit.models.archs.sana import tiny_dc_ae
from toolkit.models.tiny import kit


def _tiny(b):
    tokenizer, text_encoder = prx.tiny_t5gemma(b)
    with b.seeded("vae"):                         # sana-1.1's DC-AE: not Sana 1.0's weights
        vae = tiny_dc_ae()
    transformer = prx.tiny_prx_transformer(b, 32, 1, text_encoder.config.hidden_size)
    scheduler = kit.flow_match_scheduler(num_train_timesteps=1000, shift=3.0)
    return dict(scheduler=scheduler, tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer)


# each card: 28 steps, CFG 5.0 (distilled: 8 steps, no CFG) at 512
VARIANTS = {
    "512-sft": Variant(name_or_path="Photoroom/prx-512-t2i-dc-ae-sft"),
    "512": Variant(name_or_path="Photoroom/prx-512-t2i-dc-ae"),
    "512-sft-distilled": Variant(dict(num_inference_steps=8, guidance_scale=1.0),
                                 name_or_path="Photoroom/prx-512-t2i-dc-ae-sft-distilled"),
}

SPEC = ArchSpec(
    name="prx_dcae", modality="image", default_name_or_path=VARIANTS["512-sft"].name_or_path, pipeline="PRXPipeline",
    holder=prx.SPEC.holder,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "toolkit.models.archs.prx:T5GemmaTextEncoder", TEXT_ENCODER),
        Component("vae", "AutoencoderDC", VAE),
        Component("transformer", "PRXTransformer2DModel", DENOISER),
    ),
    defaults=prx.SPEC.defaults,                       # 512x512, 28 steps, CFG 5.0
    size_divisor=32,                                  # DC-AE 32x, patch 1
    sample_extras=prx.SPEC.sample_extras,
    latents=Latents("BCHW", 32, spatial=32),          # DC-AE: ComfyUI has no latent->RGB table for it
    variants=VARIANTS,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 5.0,
                      "resolution_binning": False}, finish="toolkit.models.archs.prx:write_t5gemma_folder"),
    description="PRX on DC-AE (Photoroom; T5Gemma text encoder, 32-ch DC-AE, 32x)",
    scheduler_config=prx.SPEC.scheduler_config,
    batch_arg=None,                                   # prx's: the pipeline's CFG timestep does not follow the batch
)
