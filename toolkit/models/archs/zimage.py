from diffusers import AutoencoderKL, SchedulerMixin, ZImagePipeline, ZImageTransformer2DModel
from transformers import PreTrainedTokenizerBase, Qwen3Model

from toolkit.models.base_model import DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, BaseModel, ComponentSpec


class ZImageModel(BaseModel):
    arch = "zimage"
    pipeline_class = ZImagePipeline
    components = (
        ComponentSpec("scheduler", SchedulerMixin, SCHEDULER),
        ComponentSpec("tokenizer", PreTrainedTokenizerBase, TOKENIZER),
        ComponentSpec("text_encoder", Qwen3Model, TEXT_ENCODER),
        ComponentSpec("vae", AutoencoderKL, VAE),
        ComponentSpec("transformer", ZImageTransformer2DModel, DENOISER),
    )
