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
from dataclasses import replace

from toolkit.models.archs.kandinsky5 import (LITE_IMAGE, TINY_DIT, tiny_transformer, transformer_facts, transformer_file,
                                            transformer_signature)
from toolkit.models.archs.kandinsky5_image import (IMAGE_COMPONENTS, SCHEDULER_FILE, Kandinsky5ImageModel,
                                                   tiny_image_encoders)
from toolkit.models.formats.dit_configs import from_known

# kandinskylab/Kandinsky-5.0-I2I-Lite-sft-Diffusers transformer/config.json: the T2I shapes taking 2 x 16 + 1 channels
# (the original's instruct_type "channel"); the tiny's
TRANSFORMER_KNOWN = {"kandinsky5-lite-edit": dict(LITE_IMAGE, visual_cond=True), "tiny": TINY_DIT}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the Kandinsky 5 Image editing transformer")


COMPONENTS = IMAGE_COMPONENTS[:-1] + (replace(IMAGE_COMPONENTS[-1], single_file=transformer_file(
    "toolkit.models.archs.kandinsky5_edit:transformer_config", "Kandinsky 5 Image editing transformer")),)


def _tiny(b):
    return dict(tiny_image_encoders(b), transformer=tiny_transformer(b, **TRANSFORMER_KNOWN["tiny"]))


SPEC = ArchSpec(
    name="kandinsky5_edit", modality="image", default_name_or_path="kandinskylab/Kandinsky-5.0-I2I-Lite-sft-Diffusers",
    pipeline="Kandinsky5I2IPipeline", holder=Kandinsky5ImageModel, components=COMPONENTS,
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
