"""LongCat-Image-Edit (Meituan): LongCat-Image's transformer trained to edit an input image, which the
Qwen2.5-VL encoder sees (at half the output size, beside the instruction) and whose VAE latents join
the transformer's sequence; real CFG. Same text encoder, tokenizer, processor and VAE as
LongCat-Image (the tiny is longcat_image.py's recipe).

The pipeline takes no size: it makes the input image's aspect at 1024x1024 area. The engine makes
the requested size instead, as for Qwen-Image-Edit and Kontext: the input image is fitted to the
request's width x height by its resize_mode, and the pipeline's size derivation answers that size
for the call (a patch of its module's `calculate_dimensions`, the holder's `call_patches`)."""
import functools
import sys

from toolkit import latent_formats
from toolkit.models.arch import ArchSpec, Latents, SampleDefaults, Task, Tiny
from toolkit.models.archs.longcat_image import COMPONENTS, tiny_longcat_shared, tiny_longcat_transformer
from toolkit.models.base_model import BaseModel


class LongCatImageEditModel(BaseModel):
    def input_kwargs(self, gen):
        """The reference at the request's size (the output's), by its resize_mode."""
        from toolkit.images import load_image

        return {"image": load_image(gen.ctrl_img, gen.width, gen.height, gen.resize_mode)}

    def call_patches(self, gen, pipe) -> list:
        size = (gen.width, gen.height)

        def requested_size(original):
            @functools.wraps(original)
            def calculate_dimensions(target_area, ratio):
                return size
            return calculate_dimensions
        return [(sys.modules[type(pipe).__module__], "calculate_dimensions", requested_size)]


def _tiny(b):
    return dict(tiny_longcat_shared(b), transformer=tiny_longcat_transformer(b))


SPEC = ArchSpec(
    name="longcat_image_edit", modality="image", default_name_or_path="meituan-longcat/LongCat-Image-Edit",
    pipeline="LongCatImageEditPipeline", holder=LongCatImageEditModel, components=COMPONENTS,
    defaults=SampleDefaults(1024, 1024, 50, 4.5),     # the model card: 50 steps, guidance 4.5; the pipeline's 1024^2
    tasks=(Task("edit", "LongCatImageEditPipeline"),),      # edit only: one input image
    latents=Latents("packed", 16, patch=2, format=latent_formats.FLUX),     # the Flux VAE's space
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.5}),
    description="LongCat-Image-Edit: edit an input image (Qwen2.5-VL sees it), Flux VAE, packed tokens",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    uncached_conditioning="encode_prompt takes the input image (Qwen2.5-VL encodes it with the prompt): "
                          "image data is no cache key",
)
