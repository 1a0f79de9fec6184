"""Stable Audio 3 Medium: a rectified-flow 1D DiT over a T5Gemma text encoder and a duration embedder
(the seconds as an AdaLN vector and one more cross-attention token), the SAME autoencoder (stereo
44.1 kHz, 4096x: 256-channel latents at about 10.8 a second), FlowMatchEuler over a log-SNR-uniform
sigma schedule. The distilled checkpoint samples 8 ping-pong steps (stochastic re-noise) with guidance
off; the base checkpoint 100 deterministic Euler steps (its scheduler says which).

Tasks, over the same components:
- txt2img: text-to-audio of `duration` seconds;
- a2a: audio-to-audio: `init_audio` re-noised by `strength` (the pipeline's `init_noise_level`: 1.0
  replaces it all; lower keeps more of it) and denoised;
- audio_inpaint: the seconds `mask_start`..`mask_end` of `init_audio` generated anew, the rest kept
  (the reference latents enter every DiT block through its local conditioning).
The audio tasks' pipelines take no guidance or negative prompt.

Stability ships no diffusers folder: a model is a local folder made with diffusers' conversion script
(`default_name_or_path` is empty: local files only)."""
import inspect

from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, Task, Tiny, load_class)
from toolkit.models.base_model import BaseModel
from toolkit.models.tiny import kit

LATENT_DIM = 256                # SAME's latent channels (its real width: the DiT's io_channels)
TEXT_TOKENS = 256               # the pipeline caps T5Gemma at 256 tokens


class StableAudio3Model(BaseModel):
    def pipeline_kwargs(self, gen):
        """The common arguments the task's pipeline takes (the audio tasks take no guidance or negative
        prompt), the duration, and the audio tasks' own: strength as `init_noise_level`, the region as
        `mask_start_seconds` / `mask_end_seconds`."""
        kw = super().pipeline_kwargs(gen)
        kw["duration"] = gen.duration
        if "strength" in kw:
            kw["init_noise_level"] = kw.pop("strength")
        if gen.mask_start is not None:
            kw.update(mask_start_seconds=gen.mask_start, mask_end_seconds=gen.mask_end)
        call = inspect.signature(load_class(self.task_of(gen).pipeline).__call__).parameters
        return {k: v for k, v in kw.items() if k in call}

    def media_kwargs(self, gen, data):
        return {"sample_rate": self.pipeline.vae.config.sampling_rate}


def _t5gemma_encoder(tokenizer):
    """A tiny T5GemmaEncoderModel (the encoder half of T5Gemma b-b: Gemma 2 blocks, bidirectional)."""
    from transformers import T5GemmaConfig, T5GemmaEncoderModel

    module = dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16,
                  max_position_embeddings=1024, sliding_window=512, pad_token_id=tokenizer.pad_token_id,
                  eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
    config = T5GemmaConfig(encoder=module, decoder=module, vocab_size=len(tokenizer), is_encoder_decoder=False)
    return T5GemmaEncoderModel(config).eval()


def _tiny(b):
    from diffusers import AutoencoderSAME, FlowMatchEulerDiscreteScheduler, StableAudio3DiTModel
    from diffusers.pipelines.stable_audio_3.modeling_stable_audio_3 import StableAudio3DurationEmbedder

    from toolkit.models.archs.lumina2 import gemma_tokenizer

    cond = 32                        # the text width; the duration vector and token are as wide
    tokenizer = gemma_tokenizer()
    tokenizer.model_max_length = TEXT_TOKENS
    with b.seeded("text_encoder", "t5gemma"):
        text_encoder = kit.jitter_constants(_t5gemma_encoder(tokenizer))
    with b.seeded("vae"):
        # stereo 44.1 kHz, 256-sample patches x a 16x stride = 4096x, as the real SAME; narrow and shallow
        vae = AutoencoderSAME(audio_channels=2, patch_size=256, encoder_channels=8, encoder_c_mults=(2,),
                              encoder_strides=(16,), encoder_transformer_depths=(1,), latent_dim=LATENT_DIM,
                              dim_heads=8, ff_mult=2, sampling_rate=44100).eval()
        # its zero-initialised attention and feed-forward outputs leave a random tiny decoding every latent
        # to about the same sound (its output tokens reach the latent only through them)
        kit.jitter_constants(vae, overrides={"to_out": 1.0, "ff.proj_out": 1.0})
    with b.seeded("duration_embedder"):
        duration_embedder = StableAudio3DurationEmbedder(output_dim=cond, fourier_dim=16).eval()
    with b.seeded("transformer"):
        transformer = StableAudio3DiTModel(io_channels=LATENT_DIM, embed_dim=32, depth=2, num_heads=2,
                                           cond_token_dim=cond, global_cond_dim=cond,
                                           local_add_cond_dim=LATENT_DIM + 1, timestep_features_dim=16,
                                           ff_mult=2.0, num_memory_tokens=4).eval()
        kit.jitter_constants(transformer)      # its zero-initialised in/out convolutions and local embedding
    # the distilled checkpoint's: ping-pong re-noise; its sigmas come from the pipeline's log-SNR schedule
    scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1, shift=1.0, stochastic_sampling=True)
    return dict(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, duration_embedder=duration_embedder,
                transformer=transformer, scheduler=scheduler)


SPEC = ArchSpec(
    name="stable_audio3", modality="audio", default_name_or_path="", pipeline="StableAudio3Pipeline",
    holder=StableAudio3Model, output_type="pt",   # (B, C, T) waveform in [-1, 1]
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="gemma2"),   # T5Gemma's is Gemma's
        Component("text_encoder", "transformers:T5GemmaEncoderModel", TEXT_ENCODER),
        # trained with the DiT (the checkpoint's seconds_total conditioner): never shared by another model
        Component("duration_embedder", "diffusers.pipelines.stable_audio_3.modeling_stable_audio_3:"
                  "StableAudio3DurationEmbedder", TEXT_ENCODER, with_denoiser=True),
        Component("vae", "AutoencoderSAME", VAE),
        Component("transformer", "StableAudio3DiTModel", DENOISER),
    ),
    tasks=(Task("txt2img", "StableAudio3Pipeline"),
           # its init_noise_level's default
           Task("a2a", "StableAudio3AudioToAudioPipeline", strength=1.0),
           Task("audio_inpaint", "StableAudio3InpaintPipeline")),
    # the distilled checkpoint: 8 steps, guidance off; the pipeline's 10 s
    defaults=SampleDefaults(0, 0, 8, 1.0, duration=10.0, output_ext="wav"), size_divisor=1,
    latents=Latents("BCT", LATENT_DIM, per_second=44100 / 4096),   # ComfyUI has no SAME table
    tiny=Tiny(_tiny, {"duration": 1.0, "num_inference_steps": 2, "guidance_scale": 1.0}),
    description="Stable Audio 3 Medium: text-to-audio, audio-to-audio and audio inpainting (T5Gemma, SAME "
                "autoencoder at 44.1 kHz); local diffusers folders converted with diffusers' script",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # the pipeline hands its log-SNR sigmas to set_timesteps as a list, which these multistep solvers'
    # flow-sigma arithmetic cannot take
    samplers_excluded=("dpm++_2m", "heun", "unipc"),
    batch_arg="num_waveforms_per_prompt",
)
