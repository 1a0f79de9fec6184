from diffusers import AceStepPipeline, AceStepTransformer1DModel, AutoencoderOobleck, SchedulerMixin
from diffusers.pipelines.ace_step.modeling_ace_step import (AceStepAudioTokenDetokenizer, AceStepAudioTokenizer,
                                                            AceStepConditionEncoder)
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from toolkit.models.base_model import AUDIO, DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, BaseModel, ComponentSpec


class AceStepModel(BaseModel):
    arch = "ace_step"
    pipeline_class = AceStepPipeline
    output_type = "pt"   # (B, C, T) waveform in [-1, 1]
    components = (
        ComponentSpec("scheduler", SchedulerMixin, SCHEDULER),
        ComponentSpec("tokenizer", PreTrainedTokenizerBase, TOKENIZER),
        ComponentSpec("text_encoder", PreTrainedModel, TEXT_ENCODER),
        ComponentSpec("condition_encoder", AceStepConditionEncoder, TEXT_ENCODER),
        ComponentSpec("vae", AutoencoderOobleck, VAE),
        ComponentSpec("transformer", AceStepTransformer1DModel, DENOISER),
        ComponentSpec("audio_tokenizer", AceStepAudioTokenizer, AUDIO, optional=True),
        ComponentSpec("audio_token_detokenizer", AceStepAudioTokenDetokenizer, AUDIO, optional=True),
    )

    def pipeline_kwargs(self, gen):
        return {"prompt": gen.prompt, "lyrics": gen.extras.get("lyrics", ""), "audio_duration": gen.duration,
                "num_inference_steps": gen.num_inference_steps, "guidance_scale": gen.guidance_scale}

    def extract_output(self, out):
        return out.audios[0]

    def media_kwargs(self, gen, data):
        return {"sample_rate": self.pipeline.sample_rate}
