"""Ovis-Image 7B (AIDC-AI): a Flux-style MMDiT (double then single blocks) over Ovis 2.5's Qwen3
language model (its last hidden state, the chat turn's 28-token user prefix with the system prompt
dropped, 256 prompt tokens) and the 16-channel Flux VAE, latents packed as 2x2-patch tokens; real CFG
(an empty negative prompt by default).

Its VAE is FLUX.1's: the tiny builds it with flux.py's recipe, so the pool shares the file."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, Tiny)
from toolkit.models.archs.longcat_image import SCHEDULER_CONFIG
from toolkit.models.tiny import kit
from toolkit.models.tiny.tokenizers import PROMPTS, qwen2_tokenizer

# OvisImagePipeline's system prompt, put before the user's in one user turn (thinking off)
SYSTEM = ("Describe the image by detailing the color, quantity, text, shape, size, texture, spatial relationships "
          "of the objects and background: ")
TEXT_HIDDEN = 32


def _chat(prompt: str) -> str:
    return f"<|im_start|>user\n{SYSTEM}{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def _tiny(b):
    from diffusers import OvisImageTransformer2DModel

    # the templates in its corpus, so each of the system prompt's words is one token, as the real vocabulary has
    # them; the pipeline drops its fixed 28 tokens of the turn whatever the tokenizer
    tokenizer = qwen2_tokenizer([_chat(p) for p in PROMPTS] * 2)
    with b.seeded("text_encoder", "ovis_qwen3"):
        text_encoder = kit.qwen3_encoder(tokenizer, layers=2, hidden=TEXT_HIDDEN)
    with b.seeded("vae", "flux_vae"):
        vae = kit.flux_vae()
    with b.seeded("transformer"):
        transformer = OvisImageTransformer2DModel(patch_size=1, in_channels=64, out_channels=64, num_layers=1,
                                                  num_single_layers=1, attention_head_dim=16, num_attention_heads=2,
                                                  joint_attention_dim=TEXT_HIDDEN, axes_dims_rope=(4, 6, 6)).eval()
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG))


SPEC = ArchSpec(
    name="ovis_image", modality="image", default_name_or_path="AIDC-AI/Ovis-Image-7B",
    pipeline="OvisImagePipeline",
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen3"),
        Component("text_encoder", "transformers:Qwen3Model", TEXT_ENCODER),
        Component("vae", "AutoencoderKL", VAE),
        Component("transformer", "OvisImageTransformer2DModel", DENOISER),
    ),
    defaults=SampleDefaults(1024, 1024, 50, 5.0),     # the model card: 50 steps, guidance 5.0; the pipeline's 1024^2
    latents=Latents("packed", 16, patch=2, format=latent_formats.FLUX),     # the Flux VAE's space
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 5.0}),
    description="Ovis-Image 7B (Ovis 2.5's Qwen3 text encoder, Flux VAE, packed tokens)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # the pipeline passes sigmas, which Heun's set_timesteps does not take (to a flow-sigma scheduler, DPM++'s, none)
    samplers_excluded=("heun",),
)
