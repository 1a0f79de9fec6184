from diffusers import AutoencoderKLWan, SchedulerMixin, WanPipeline, WanTransformer3DModel
from transformers import PreTrainedTokenizerBase, UMT5EncoderModel

from toolkit.models.base_model import DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, BaseModel, ComponentSpec


class Wan21Model(BaseModel):
    arch = "wan21"
    pipeline_class = WanPipeline
    pipeline_init_kwargs = {"transformer_2": None}
    output_type = "np"   # frames as float arrays in [0, 1]
    components = (
        ComponentSpec("scheduler", SchedulerMixin, SCHEDULER),
        ComponentSpec("tokenizer", PreTrainedTokenizerBase, TOKENIZER),
        ComponentSpec("text_encoder", UMT5EncoderModel, TEXT_ENCODER),
        ComponentSpec("vae", AutoencoderKLWan, VAE),
        ComponentSpec("transformer", WanTransformer3DModel, DENOISER),
    )
