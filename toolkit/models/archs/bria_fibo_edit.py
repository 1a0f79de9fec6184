"""Bria Fibo-Edit 1.5: FIBO's architecture trained to edit (BriaFiboEditPipeline over FIBO's component
classes: SmolLM3, the Wan 2.2 VAE, BriaFiboTransformer2DModel). The references (ctrl_img, ctrl_img_1..3)
are VAE-encoded each at its own aspect and join the sequence as tokens on their own RoPE planes; the
prompt is a JSON edit caption (an "edit_instruction" and the result's structured caption, as Bria's
prompt-to-JSON blocks write it). The pipeline refuses anything else; a prompt that is not one is passed
as {"edit_instruction": <the prompt>}. The output is the requested size.

Variants: `base` (Fibo-Edit-1.5-base: the pipeline's example, 30 steps, CFG 5) and `turbo`
(Fibo-Edit-1.5-turbo, distilled: 4 steps without CFG). The pipeline's optional `mask` (regenerate
only a region of the first reference) needs an input the engine's edit task does not take: left out.

The tiny builds the text encoder, tokenizer and VAE with bria_fibo's recipe (a shared pair)."""
from toolkit import latent_formats
from toolkit.models.arch import REFERENCES, ArchSpec, Latents, SampleDefaults, Task, Tiny, Variant
from toolkit.models.archs.bria_fibo import (COMPONENTS, SCHEDULER_FILE, tiny_fibo_shared,
                                            tiny_fibo_transformer)
from toolkit.models.base_model import BaseModel


class FiboEditModel(BaseModel):
    def pipeline_kwargs(self, gen):
        return {**super().pipeline_kwargs(gen), "prompt": edit_caption(gen.prompt)}


def edit_caption(prompt: str) -> str:
    """`prompt` as a JSON edit caption: one as given, plain text as {"edit_instruction": text}."""
    import json

    from diffusers.pipelines.bria_fibo.pipeline_bria_fibo_edit import is_valid_edit_json

    return prompt if is_valid_edit_json(prompt) else json.dumps({"edit_instruction": prompt}, ensure_ascii=False)


def _tiny(b):
    return dict(tiny_fibo_shared(b), transformer=tiny_fibo_transformer(b))


VARIANTS = {
    "base": Variant(name_or_path="briaai/Fibo-Edit-1.5-base"),
    "turbo": Variant(defaults={"num_inference_steps": 4, "guidance_scale": 1.0}, name_or_path="briaai/Fibo-Edit-1.5-turbo"),
}

SPEC = ArchSpec(
    name="bria_fibo_edit", modality="image", default_name_or_path=VARIANTS["base"].name_or_path,
    pipeline="BriaFiboEditPipeline", holder=FiboEditModel, components=COMPONENTS,
    tasks=(Task("edit", "BriaFiboEditPipeline", takes=REFERENCES[1:]),),
    variants=VARIANTS,
    defaults=SampleDefaults(1024, 1024, 30, 5.0),
    size_divisor=16,
    latents=Latents("packed", 48, spatial=16, patch=1, format=latent_formats.WAN22),
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 5.0}),
    description="Bria Fibo-Edit 1.5: edit input images with JSON edit captions (FIBO's DiT, SmolLM3, Wan 2.2 VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),
)
