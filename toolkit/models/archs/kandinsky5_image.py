"""Kandinsky 5.0 Image Lite (6B) text-to-image: Kandinsky 5's cross-attention DiT (16 input channels, no
image conditioning) over the same Qwen2.5-VL-7B and CLIP-L as the video models (the prompt in an
image-describing template, its first 40 tokens dropped) and the FLUX.1 VAE (16 channels, 8x spatial;
the pipeline scales its latents by 0.3611 alone, without Flux's shift); flow matching with true CFG.
The scheduler steps an image as a one-frame video, channels last: `B1HWC`.

Departure: the pipeline snaps any size outside the seven it was trained at (1024x1024, 1280x768,
768x1280, 1152x896, 896x1152, 1408x640, 640x1408) to the one of nearest aspect, so the image would not
have the size asked for; the holder adds the request's size to the pipeline's list for the call, so
the engine makes the size the request names (the model card's 1024x1024 is the default).

Editing is another checkpoint with a 33-channel transformer (kandinsky5_edit), not a task over this one."""
from toolkit import latent_formats
from toolkit.models.arch import DENOISER, VAE, ArchSpec, Component, Latents, SampleDefaults, Tiny, Variant
from toolkit.models.archs.kandinsky5 import (LITE_IMAGE, TEXT_COMPONENTS, TINY_DIT, tiny_text_encoders, tiny_transformer,
                                            transformer_facts, transformer_file, transformer_signature)
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.base_model import BaseModel
from toolkit.models.formats import vaes
from toolkit.models.tiny import kit

# kandinskylab/Kandinsky-5.0-T2I-Lite-sft-Diffusers transformer/config.json (16 input channels); the tiny's
TRANSFORMER_KNOWN = {"kandinsky5-lite-image": LITE_IMAGE, "tiny": dict(TINY_DIT, visual_cond=False)}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the Kandinsky 5 Image transformer")


# the original code's scheduler_scale for the image models (t2i_pipeline.py, i2i_pipeline.py)
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", num_train_timesteps=1000, shift=3.0)


class Kandinsky5ImageModel(BaseModel):
    """The output is `image`, not `images`; the request's size is one the pipeline keeps (module docstring)."""

    def call_patches(self, gen, pipe) -> list:
        size = (gen.width, gen.height)
        return [(pipe, "resolutions", lambda trained: trained if size in trained else [*trained, size])]

    def extract_output(self, out):
        return out.image[0]

    def extract_outputs(self, out, n: int) -> list:
        return list(out.image)[:n]


def tiny_image_encoders(b) -> dict:
    """The text encoders (kandinsky5's) and the FLUX.1 VAE (Flux's recipe) every image model ships."""
    with b.seeded("vae", "flux_vae"):
        vae = kit.flux_vae()
    return dict(tiny_text_encoders(b), vae=vae, scheduler=kit.flow_match_scheduler(**{
        k: v for k, v in SCHEDULER_FILE.items() if k != "_class_name"}))


def _tiny(b):
    return dict(tiny_image_encoders(b), transformer=tiny_transformer(b, **TRANSFORMER_KNOWN["tiny"]))


IMAGE_COMPONENTS = TEXT_COMPONENTS + (
    Component("vae", "AutoencoderKL", VAE, single_file=vaes.FLUX_AE),
    Component("transformer", "Kandinsky5Transformer3DModel", DENOISER, single_file=transformer_file(
        "toolkit.models.archs.kandinsky5_image:transformer_config", "Kandinsky 5 Image transformer")),
)

SPEC = ArchSpec(
    name="kandinsky5_image", modality="image", default_name_or_path="kandinskylab/Kandinsky-5.0-T2I-Lite-sft-Diffusers",
    pipeline="Kandinsky5T2IPipeline", holder=Kandinsky5ImageModel, components=IMAGE_COMPONENTS,
    # the model card and the original config: 1024x1024, 50 steps, CFG 3.5
    defaults=SampleDefaults(1024, 1024, 50, 3.5),
    variants={"sft": Variant(),
              "pretrain": Variant(name_or_path="kandinskylab/Kandinsky-5.0-T2I-Lite-pretrain-Diffusers")},
    size_divisor=16,                  # 8x VAE x 2x2 DiT patches
    max_side=2048,                    # its RoPE tables hold 128 positions per axis, one per 16 px
    latents=Latents("B1HWC", 16, format=latent_formats.FLUX),
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 3.5}),
    description="Kandinsky 5.0 Image Lite text-to-image (Qwen2.5-VL + CLIP-L, FLUX.1 VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
)
