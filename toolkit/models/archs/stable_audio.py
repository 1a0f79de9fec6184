"""Stable Audio Open 1.0 text-to-audio: a 1D DiT over T5-base, a projection model for the text and
the start/end seconds, the Oobleck VAE at 44.1 kHz (2048x: 1024 latents of 64 channels = 47.55 s
at most; the latent length is fixed and the waveform is cut to the requested duration), the
cosine DPM-Solver (SDE: needs torchsde)."""
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, Tiny)
from toolkit.models.base_model import BaseModel
from toolkit.models.tiny import kit


class StableAudioModel(BaseModel):
    def pipeline_kwargs(self, gen):
        # an empty negative prompt is none: the pipeline then uses a zero unconditional embedding
        return {"prompt": gen.prompt, "negative_prompt": gen.negative_prompt or None,
                "audio_start_in_s": 0.0, "audio_end_in_s": gen.duration,
                "num_inference_steps": gen.num_inference_steps, "guidance_scale": gen.guidance_scale}

    def media_kwargs(self, gen, data):
        return {"sample_rate": self.pipeline.vae.config.sampling_rate}


def _tiny(b):
    from diffusers import (AutoencoderOobleck, CosineDPMSolverMultistepScheduler, StableAudioDiTModel,
                           StableAudioProjectionModel)

    acoustic, cond = 64, 32          # Oobleck latent channels; tiny conditioning width
    tokenizer = kit.t5_tokenizer(128)                 # the T5 conditioner's max_length
    with b.seeded("text_encoder"):
        text_encoder = kit.t5_encoder(tokenizer)
    with b.seeded("projection_model"):
        projection_model = StableAudioProjectionModel(text_encoder_dim=text_encoder.config.d_model,
                                                      conditioning_dim=cond, min_value=0, max_value=512).eval()
    with b.seeded("vae"):
        # 44.1 kHz stereo, 2*4*4*8*8 = 2048x as the real one; narrow channels
        vae = AutoencoderOobleck(encoder_hidden_size=4, downsampling_ratios=[2, 4, 4, 8, 8],
                                 channel_multiples=[1, 2, 4, 8, 16], decoder_channels=4,
                                 decoder_input_channels=acoustic, audio_channels=2, sampling_rate=44100).eval()
    with b.seeded("transformer"):
        # sample_size 32 latents * 2048 / 44100 = 1.49 s at most; the global states are the start and
        # end seconds' embeddings side by side (2x the conditioning width)
        transformer = StableAudioDiTModel(sample_size=32, in_channels=acoustic, num_layers=2, attention_head_dim=16,
                                          num_attention_heads=2, num_key_value_attention_heads=1,
                                          out_channels=acoustic, cross_attention_dim=32, time_proj_dim=32,
                                          global_states_input_dim=2 * cond, cross_attention_input_dim=cond).eval()
    # the diffusers conversion of Stable Audio Open
    scheduler = CosineDPMSolverMultistepScheduler(sigma_min=0.3, sigma_max=500, solver_order=2,
                                                  prediction_type="v_prediction", sigma_data=1.0,
                                                  sigma_schedule="exponential")
    return dict(vae=vae, text_encoder=text_encoder, projection_model=projection_model, tokenizer=tokenizer,
                transformer=transformer, scheduler=scheduler)


SPEC = ArchSpec(
    name="stable_audio", modality="audio", default_name_or_path="stabilityai/stable-audio-open-1.0",
    pipeline="StableAudioPipeline", holder=StableAudioModel, output_type="pt",   # (B, C, T) waveform in [-1, 1]
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "T5EncoderModel", TEXT_ENCODER),
        # trained with the DiT (the checkpoint's conditioners): never shared by another model
        Component("projection_model", "StableAudioProjectionModel", TEXT_ENCODER, with_denoiser=True),
        Component("vae", "AutoencoderOobleck", VAE),
        Component("transformer", "StableAudioDiTModel", DENOISER),
    ),
    # the model card: 200 steps, CFG 7.0, 10 s
    defaults=SampleDefaults(0, 0, 200, 7.0, duration=10.0, output_ext="wav"), size_divisor=1,
    latents=Latents("BCT", 64),                          # length fixed by the DiT's sample_size
    tiny=Tiny(_tiny, {"duration": 1.0, "num_inference_steps": 2, "guidance_scale": 7.0}),
    description="Stable Audio Open 1.0 text-to-audio (T5, 64-ch Oobleck VAE at 44.1 kHz)",
    scheduler_config={"_class_name": "CosineDPMSolverMultistepScheduler", "prediction_type": "v_prediction"},
    batch_arg="num_waveforms_per_prompt",
)
