"""Z-Image Omni: Z-Image's single-stream DiT with a SigLIP2 branch (`siglip_feat_dim`: a SigLIP embedder,
refiner and pad token the Turbo checkpoint has not) and the SigLIP2 vision tower with its NaFlex
processor, over Z-Image's Qwen3 text encoder and the Flux VAE (ZImageOmniPipeline). Its call takes up
to several reference images (`image`): each is VAE-encoded into the sequence as a clean frame and seen
by SigLIP2, the prompt template then names one vision slot per image; without one it is text-to-image.

A checkpoint of its own (another transformer, an image encoder): an arch beside zimage, sharing its
tokenizer, text encoder and VAE files in the pool. Tongyi-MAI announced Z-Image-Omni-Base but has
published no weights (no hub repo, no ComfyUI files): local diffusers folders only, and no single-file
rows. The defaults are the pipeline's own (no model card yet).

Only txt2img here: in diffusers 0.42.1 the edit path (`image=` references) encodes them with
`self.vae.encode(image.bfloat16())`, which fails on any VAE not held in bfloat16 (float32 on the CPU,
fp16), so the contract suite's float32 run cannot run it."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, IMAGE_ENCODER, PROCESSOR, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec,
                                 Component, Latents, SampleDefaults, Task, Tiny)
from toolkit.models.archs.zimage import SCHEDULER_FILE
from toolkit.models.archs.zimage import SPEC as ZIMAGE
from toolkit.models.tiny import kit

SIGLIP_HIDDEN = 32          # the tiny tower's width (google/siglip2-so400m-patch16-naflex: 1152)


def tiny_siglip2(b):
    """A tiny SigLIP2 NaFlex tower (16-px patches, at most 64 of them) and its processor."""
    from transformers import Siglip2ImageProcessor, Siglip2VisionConfig, Siglip2VisionModel

    processor = Siglip2ImageProcessor(patch_size=16, max_num_patches=64)
    config = Siglip2VisionConfig(hidden_size=SIGLIP_HIDDEN, intermediate_size=2 * SIGLIP_HIDDEN, num_hidden_layers=1,
                                 num_attention_heads=2, patch_size=16, num_patches=64)
    with b.seeded("siglip", "siglip2"):
        return processor, Siglip2VisionModel(config).eval()


def _tiny(b):
    from diffusers import ZImageTransformer2DModel

    tokenizer = kit.qwen2_tokenizer()
    with b.seeded("text_encoder"):                # zimage's recipe: the same files
        text_encoder = kit.qwen3_encoder(tokenizer, layers=2)
    with b.seeded("vae", "flux_vae"):
        vae = kit.flux_vae()
    siglip_processor, siglip = tiny_siglip2(b)
    with b.seeded("transformer"):
        transformer = ZImageTransformer2DModel(
            all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=32, n_layers=2, n_refiner_layers=1,
            n_heads=2, n_kv_heads=2, norm_eps=1e-5, qk_norm=True, cap_feat_dim=text_encoder.config.hidden_size,
            siglip_feat_dim=SIGLIP_HIDDEN, rope_theta=256.0, t_scale=1000.0, axes_dims=[4, 6, 6],
            axes_lens=[1024, 512, 512]).eval()
    scheduler = kit.flow_match_scheduler(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False)
    return dict(scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer,
                siglip=siglip, siglip_processor=siglip_processor)


SPEC = ArchSpec(
    # the same RoPE tables as Z-Image (diffusers' default axes_lens): 8192 px
    max_side=ZIMAGE.max_side,
    name="zimage_omni", modality="image", default_name_or_path="",      # no public repo: local files only
    pipeline="ZImageOmniPipeline",
    tasks=(Task("txt2img", "ZImageOmniPipeline"),),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen3"),
        Component("text_encoder", "Qwen3Model", TEXT_ENCODER),
        Component("vae", "AutoencoderKL", VAE),
        Component("siglip_processor", "transformers:Siglip2ImageProcessor", PROCESSOR),
        Component("siglip", "transformers:Siglip2VisionModel", IMAGE_ENCODER),
        Component("transformer", "ZImageTransformer2DModel", DENOISER),
    ),
    defaults=SampleDefaults(1024, 1024, 50, 5.0),      # ZImageOmniPipeline's own: 50 steps, CFG 5.0
    latents=Latents("BCHW", 16, format=latent_formats.FLUX),
    scheduler_file=SCHEDULER_FILE,                      # Z-Image's (the family's published one)
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0}),
    description="Z-Image Omni (Z-Image's DiT with a SigLIP2 branch; Qwen3 text encoder, 16-ch VAE); unreleased weights",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=ZIMAGE.samplers_excluded,         # the same sigmas list and mu as ZImagePipeline passes
    # its denoiser class's GGUF row (the reader knows the class, not the arch); no Omni GGUF is published
    gguf=ZIMAGE.gguf,
    step_caches={"taylorseer": {"cache_identifiers": [r"layers\.\d+\.attention"]}},
)
