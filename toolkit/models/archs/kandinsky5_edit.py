"""Kandinsky 5.0 Image Lite editing (6B, the I2I checkpoint): kandinsky5_image's DiT taking 33 channels
(the noise, the VAE latents of the reference image `ctrl_img` at the output size, and a mask channel)
while Qwen2.5-VL also sees the reference (at half its size) after the instruction, in an editing
template whose first 54 tokens are dropped; the text encoders, VAE and sampling are kandinsky5_image's
(one pair in the pool). Edit only: every request needs `ctrl_img`; the output has the request's size
(the reference is resized to it), the pipeline's trained-size snap left out as kandinsky5_image does.

The pipeline makes one image per pass (its reference latents are encoded once, for one image). The
model card and the original config: 50 steps, CFG 3.5, 1024x1024."""
from toolkit import latent_formats
from toolkit.models.arch import ArchSpec, Latents, SampleDefaults, Task, Tiny, Variant
from toolkit.models.archs.kandinsky5 import tiny_transformer
from toolkit.models.archs.kandinsky5_image import (IMAGE_COMPONENTS, SCHEDULER_FILE, Kandinsky5ImageModel,
                                                   tiny_image_encoders)


def _tiny(b):
    # `visual_cond`: the 2 x 16 + 1 input channels of the original's instruct_type "channel"
    return dict(tiny_image_encoders(b), transformer=tiny_transformer(b, visual_cond=True))


SPEC = ArchSpec(
    name="kandinsky5_edit", modality="image", default_name_or_path="kandinskylab/Kandinsky-5.0-I2I-Lite-sft-Diffusers",
    pipeline="Kandinsky5I2IPipeline", holder=Kandinsky5ImageModel, components=IMAGE_COMPONENTS,
    tasks=(Task("edit", "Kandinsky5I2IPipeline"),),
    defaults=SampleDefaults(1024, 1024, 50, 3.5),
    variants={"sft": Variant(),
              "pretrain": Variant(name_or_path="kandinskylab/Kandinsky-5.0-I2I-Lite-pretrain-Diffusers")},
    size_divisor=16,
    max_side=2048,
    latents=Latents("B1HWC", 16, format=latent_formats.FLUX),
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 3.5}),
    description="Kandinsky 5.0 Image Lite editing: edit a reference image (Qwen2.5-VL sees it), FLUX.1 VAE",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    batch_arg=None,                   # the pipeline encodes the reference once, not once per image
    uncached_conditioning="encode_prompt takes the reference image (Qwen2.5-VL encodes it with the prompt): "
                          "image data is no cache key",
)
