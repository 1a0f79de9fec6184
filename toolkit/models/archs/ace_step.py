"""ACE-Step 1.5 text-to-music: a 1D DiT over a Qwen3 text encoder and a lyric/timbre condition
encoder, the Oobleck VAE at 48 kHz (1920x downsampling = 25 latents/s of 64 channels)."""
from toolkit.models.arch import (AUDIO, DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component,
                                 Extra, Latents, SampleDefaults, Tiny)
from toolkit.models.base_model import BaseModel
from toolkit.models.tiny import kit
from toolkit.models.tiny.tokenizers import LYRICS, PROMPTS

_MODELING = "diffusers.pipelines.ace_step.modeling_ace_step"


class AceStepModel(BaseModel):
    def pipeline_kwargs(self, gen):
        return {"prompt": gen.prompt, "lyrics": gen.extras.get("lyrics", ""), "audio_duration": gen.duration,
                "num_inference_steps": gen.num_inference_steps, "guidance_scale": gen.guidance_scale}

    def media_kwargs(self, gen, data):
        return {"sample_rate": self.pipeline.sample_rate}


def _templates() -> list:
    """ACE-Step's real prompt and lyric templates, filled with a few examples (tokenizer corpus)."""
    from diffusers.pipelines.ace_step.pipeline_ace_step import (DEFAULT_DIT_INSTRUCTION, SFT_GEN_PROMPT,
                                                                TASK_INSTRUCTIONS)
    texts = []
    instructions = [DEFAULT_DIT_INSTRUCTION, *TASK_INSTRUCTIONS.values()]
    for i, prompt in enumerate(PROMPTS[19:25]):
        metas = (f"- bpm: {'N/A' if i % 2 else 90 + 10 * i}\n- timesignature: {'N/A' if i % 3 else '4'}\n"
                 f"- keyscale: {'N/A' if i % 2 else 'C major'}\n- duration: {[1, 2, 10, 30, 60][i % 5]} seconds\n")
        texts.append(SFT_GEN_PROMPT.format(instructions[i % len(instructions)], prompt, metas))
    for lang, lyrics in zip(["en", "zh", "ja"], LYRICS):
        texts.append(f"# Languages\n{lang}\n\n# Lyric\n{lyrics}<|endoftext|>")
    return texts


def _tiny(b):
    from diffusers import AceStepTransformer1DModel, AutoencoderOobleck
    from diffusers.pipelines.ace_step.modeling_ace_step import (AceStepAudioTokenDetokenizer, AceStepAudioTokenizer,
                                                                AceStepConditionEncoder)

    acoustic = 64                   # Oobleck latent channels
    common = dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=16)
    tokenizer = kit.qwen2_tokenizer(_templates())
    with b.seeded("text_encoder"):
        text_encoder = kit.qwen3_encoder(tokenizer, layers=2)
    with b.seeded("vae"):
        # 48 kHz stereo, 2*4*4*6*10 = 1920x. The encoder is narrow (text2music only decodes).
        vae = AutoencoderOobleck(encoder_hidden_size=8, downsampling_ratios=[2, 4, 4, 6, 10],
                                 channel_multiples=[1, 2, 2, 4, 4], decoder_channels=8, decoder_input_channels=acoustic,
                                 audio_channels=2, sampling_rate=48000).eval()
    with b.seeded("transformer"):
        transformer = AceStepTransformer1DModel(num_hidden_layers=2, in_channels=3 * acoustic,
                                                audio_acoustic_hidden_dim=acoustic, patch_size=2,
                                                encoder_hidden_size=32, is_turbo=False, **common).eval()
    with b.seeded("condition_encoder"):
        condition_encoder = AceStepConditionEncoder(text_hidden_dim=text_encoder.config.hidden_size,
                                                    timbre_hidden_dim=acoustic, num_lyric_encoder_hidden_layers=1,
                                                    num_timbre_encoder_hidden_layers=1, **common).eval()
    with b.seeded("audio_tokenizer"):
        audio_tokenizer = AceStepAudioTokenizer(audio_acoustic_hidden_dim=acoustic, pool_window_size=5, fsq_dim=32,
                                                num_attention_pooler_hidden_layers=1, **common).eval()
    with b.seeded("audio_token_detokenizer"):
        detokenizer = AceStepAudioTokenDetokenizer(audio_acoustic_hidden_dim=acoustic, pool_window_size=5,
                                                   num_attention_pooler_hidden_layers=1, **common).eval()
    # ACE-Step computes its own shifted sigmas in [0, 1] and passes them in
    scheduler = kit.flow_match_scheduler(num_train_timesteps=1, shift=1.0)
    return dict(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer,
                condition_encoder=condition_encoder, scheduler=scheduler, audio_tokenizer=audio_tokenizer,
                audio_token_detokenizer=detokenizer)


SPEC = ArchSpec(
    name="ace_step", modality="audio", default_name_or_path="ACE-Step/acestep-v15-xl-turbo-diffusers",
    pipeline="AceStepPipeline", holder=AceStepModel, output_type="pt",   # (B, C, T) waveform in [-1, 1]
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen3"),     # Qwen3-Embedding's BPE
        Component("text_encoder", "transformers:PreTrainedModel", TEXT_ENCODER),
        # the condition encoder and audio (de)tokenizer ship inside the DiT checkpoint
        Component("condition_encoder", f"{_MODELING}:AceStepConditionEncoder", TEXT_ENCODER, with_denoiser=True),
        Component("vae", "AutoencoderOobleck", VAE),
        Component("transformer", "AceStepTransformer1DModel", DENOISER),
        Component("audio_tokenizer", f"{_MODELING}:AceStepAudioTokenizer", AUDIO, optional=True, with_denoiser=True),
        Component("audio_token_detokenizer", f"{_MODELING}:AceStepAudioTokenDetokenizer", AUDIO, optional=True,
                  with_denoiser=True),
    ),
    defaults=SampleDefaults(0, 0, 8, 1.0, duration=30.0, output_ext="wav"), size_divisor=1,
    uses_negative_prompt=False, sample_extras={"lyrics": Extra("str", "")},
    latents=Latents("BLC", 64, per_second=25.0),
    tiny=Tiny(_tiny, {"duration": 1.0, "num_inference_steps": 2, "guidance_scale": 7.0}),
    description="ACE-Step 1.5 text-to-music",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # the pipeline passes its own sigmas as a list (UniPC multiplies it by a float)
    samplers_excluded=("heun", "dpm++_2m", "unipc"),
    batch_arg=None,
)
