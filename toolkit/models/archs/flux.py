from diffusers import AutoencoderKL, FluxPipeline, FluxTransformer2DModel, SchedulerMixin
from transformers import CLIPTextModel, PreTrainedTokenizerBase, T5EncoderModel

from toolkit.models.base_model import DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, BaseModel, ComponentSpec


class FluxModel(BaseModel):
    arch = "flux"
    pipeline_class = FluxPipeline
    pipeline_init_kwargs = {"image_encoder": None, "feature_extractor": None}
    components = (
        ComponentSpec("scheduler", SchedulerMixin, SCHEDULER),
        ComponentSpec("tokenizer", PreTrainedTokenizerBase, TOKENIZER),
        ComponentSpec("tokenizer_2", PreTrainedTokenizerBase, TOKENIZER),
        ComponentSpec("text_encoder", CLIPTextModel, TEXT_ENCODER),
        ComponentSpec("text_encoder_2", T5EncoderModel, TEXT_ENCODER),
        ComponentSpec("vae", AutoencoderKL, VAE),
        ComponentSpec("transformer", FluxTransformer2DModel, DENOISER),
    )
