from diffusers import AutoencoderKL, SchedulerMixin, StableDiffusionPipeline, UNet2DConditionModel
from transformers import CLIPTextModel, PreTrainedTokenizerBase

from toolkit.models.base_model import DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, BaseModel, ComponentSpec


class SD1Model(BaseModel):
    arch = "sd1"
    pipeline_class = StableDiffusionPipeline
    pipeline_init_kwargs = {"safety_checker": None, "feature_extractor": None, "image_encoder": None,
                            "requires_safety_checker": False}
    components = (
        ComponentSpec("scheduler", SchedulerMixin, SCHEDULER),
        ComponentSpec("tokenizer", PreTrainedTokenizerBase, TOKENIZER),
        ComponentSpec("text_encoder", CLIPTextModel, TEXT_ENCODER),
        ComponentSpec("vae", AutoencoderKL, VAE),
        ComponentSpec("unet", UNet2DConditionModel, DENOISER),
    )
