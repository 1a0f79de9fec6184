"""FLUX.2 [klein]: the Flux.2 DiT over a Qwen3 text encoder (hidden states 9, 18 and 27 stacked),
the 32-channel Flux.2 VAE whose latents are patchified 2x2 into 128-channel tokens (channel
c*4 + dy*2 + dx, as toolkit/models/latents.py unpacks). The distilled models (4 steps) ignore
guidance; the base models run CFG against an empty prompt. `is_distilled` is the repo's
model_index.json setting. The common call (no negative prompt: CFG, on base models only, is
against ""); the edit task passes up to 4 reference images (ctrl_img, ctrl_img_1..3) as `image`.
"""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, Task, Tiny, Variant)
from toolkit.models.tiny import kit

SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=True, base_shift=0.5,
                        max_shift=1.15, base_image_seq_len=256, max_image_seq_len=4096,
                        time_shift_type="exponential")     # the pipeline computes its own mu
TAPS = (9, 18, 27)          # the pipeline's text_encoder_out_layers
TEXT_HIDDEN = 16


def _tiny_vae():
    """AutoencoderKLFlux2: 4 blocks (8x), 32 latent channels, 2x2 patchify, batch-norm statistics."""
    from diffusers import AutoencoderKLFlux2

    return AutoencoderKLFlux2(block_out_channels=(8, 8, 16, 16), layers_per_block=1, norm_num_groups=4,
                              latent_channels=32, sample_size=64, patch_size=(2, 2)).eval()


def _tiny(b):
    from diffusers import Flux2Transformer2DModel
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = kit.qwen2_tokenizer()
    with b.seeded("text_encoder", "qwen3_klein"):
        # the pipeline reads hidden states 9, 18 and 27: 28 layers of width 16
        text_encoder = Qwen3ForCausalLM(Qwen3Config(
            vocab_size=len(tokenizer), hidden_size=TEXT_HIDDEN, intermediate_size=2 * TEXT_HIDDEN,
            num_hidden_layers=max(TAPS) + 1, num_attention_heads=2, num_key_value_heads=1, head_dim=8,
            max_position_embeddings=40960, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id)).eval()
    with b.seeded("vae", "flux2_vae"):
        vae = _tiny_vae()
    with b.seeded("transformer"):
        transformer = Flux2Transformer2DModel(
            patch_size=1, in_channels=128, num_layers=1, num_single_layers=2, attention_head_dim=16,
            num_attention_heads=2, joint_attention_dim=len(TAPS) * TEXT_HIDDEN, timestep_guidance_channels=256,
            mlp_ratio=3.0, axes_dims_rope=(4, 4, 4, 4), guidance_embeds=False).eval()
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG))


_DISTILLED = {"num_inference_steps": 4, "guidance_scale": 1.0}     # the klein model cards
_BASE = {"num_inference_steps": 50, "guidance_scale": 4.0}         # diffusers' Flux2KleinPipeline example (base)

SPEC = ArchSpec(
    name="flux2_klein", modality="image", default_name_or_path="black-forest-labs/FLUX.2-klein-4B",
    pipeline="Flux2KleinPipeline",
    # one pipeline for both: `image` (up to 4 references) makes it an edit
    tasks=(Task("txt2img", "Flux2KleinPipeline"),
           Task("edit", "Flux2KleinPipeline", takes=("ctrl_img_1", "ctrl_img_2", "ctrl_img_3"))),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "transformers:Qwen3ForCausalLM", TEXT_ENCODER),
        Component("vae", "AutoencoderKLFlux2", VAE),
        Component("transformer", "Flux2Transformer2DModel", DENOISER),
    ),
    defaults=SampleDefaults(1024, 1024, 4, 1.0), uses_negative_prompt=False,
    variants={"4b": Variant(_DISTILLED, name_or_path="black-forest-labs/FLUX.2-klein-4B"),
              "9b": Variant(_DISTILLED, name_or_path="black-forest-labs/FLUX.2-klein-9B"),
              "base-4b": Variant(_BASE, name_or_path="black-forest-labs/FLUX.2-klein-base-4B"),
              "base-9b": Variant(_BASE, name_or_path="black-forest-labs/FLUX.2-klein-base-9B")},
    # scheduler.step sees (B, tokens, 128): 32 VAE channels patchified 2x2 (c*4 + dy*2 + dx)
    latents=Latents("packed", 32, patch=2, format=latent_formats.FLUX2),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 1.0},
              pipeline_kwargs={"is_distilled": True}),
    description="FLUX.2 [klein] (Qwen3 text encoder, 32-ch Flux.2 VAE, 128-ch tokens); distilled or base",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # FlowMatchHeun's set_timesteps takes no sigmas (DPM++ runs: the pipeline drops them for flow-sigma schedulers)
    samplers_excluded=("heun",),
    # FirstBlockCache fails on its double-stream blocks in diffusers 0.42.1; no MagCache ratios
    step_caches={"taylorseer": {}, "faster": {}},
)
