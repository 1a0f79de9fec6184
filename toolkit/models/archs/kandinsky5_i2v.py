"""Kandinsky 5.0 Video Pro image-to-video (19B, the I2V checkpoint): kandinsky5's DiT, the first frame
`init_img` encoded by the VAE into the first latent frame and marked by the mask channel beside the
noise; the scheduler steps the other frames only, and the first latent frames are renormalised to the
following ones before decoding (Kandinsky5I2VPipeline). The Qwen2.5-VL, CLIP-L, VAE and scheduler are
kandinsky5's (one pair in the pool). Image-to-video only: every request needs `init_img`.

The pipeline renormalises the first 4 latent frames by the ones after them: with fewer than 5 latent
frames (17 video frames) there are none, and every pixel comes out NaN, so the holder refuses shorter
videos. The pipeline's example: 768x512, 121 frames at 24 fps, 50 steps, CFG 5."""
from toolkit import latent_formats
from toolkit.errors import ConfigError
from toolkit.models.arch import ArchSpec, Latents, SampleDefaults, Task, Tiny
from dataclasses import replace

from toolkit.models.archs.kandinsky5 import (COMPONENTS, PRO_VIDEO, SCHEDULER_FILE, TINY_DIT, tiny_transformer,
                                            tiny_video_shared, transformer_facts, transformer_file,
                                            transformer_signature)
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.base_model import BaseModel

# kandinskylab/Kandinsky-5.0-I2V-Pro-sft-5s-Diffusers transformer/config.json: the Pro video shapes; the tiny's
TRANSFORMER_KNOWN = {"kandinsky5-pro-video": PRO_VIDEO, "tiny": TINY_DIT}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the Kandinsky 5 I2V transformer")


_COMPONENTS = COMPONENTS[:-1] + (replace(COMPONENTS[-1], single_file=transformer_file(
    "toolkit.models.archs.kandinsky5_i2v:transformer_config", "Kandinsky 5 I2V transformer")),)
LATENTS = Latents("BFHWC", 16, spatial=8, temporal=4, fixed_frames=1, format=latent_formats.HUNYUAN_VIDEO)
NORMALISED_FRAMES = 4            # Kandinsky5I2VPipeline.normalize_first_frame's nFr
MIN_FRAMES = NORMALISED_FRAMES * LATENTS.temporal + 1


class Kandinsky5I2VModel(BaseModel):
    def pipeline_kwargs(self, gen):
        if gen.num_frames < MIN_FRAMES:
            raise ConfigError("sample.num_frames", f"Kandinsky 5 image-to-video needs at least {MIN_FRAMES} frames: "
                              f"its first {NORMALISED_FRAMES} latent frames are renormalised by the ones after them")
        return super().pipeline_kwargs(gen)


def _tiny(b):
    return dict(tiny_video_shared(b), transformer=tiny_transformer(b))


SPEC = ArchSpec(
    name="kandinsky5_i2v", modality="video", default_name_or_path="kandinskylab/Kandinsky-5.0-I2V-Pro-sft-5s-Diffusers",
    pipeline="Kandinsky5I2VPipeline", holder=Kandinsky5I2VModel, output_type="np", components=_COMPONENTS,
    tasks=(Task("i2v", "Kandinsky5I2VPipeline"),),
    defaults=SampleDefaults(768, 512, 50, 5.0, num_frames=121, fps=24, output_ext="mp4"),
    size_divisor=16,
    max_side=2048,
    latents=LATENTS,                  # the scheduler steps every latent frame but the first (the image's)
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": MIN_FRAMES, "num_inference_steps": 2, "guidance_scale": 5.0,
                      "fps": 8}),
    description="Kandinsky 5.0 Video Pro image-to-video (Qwen2.5-VL + CLIP-L, HunyuanVideo VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # several videos per prompt run, but every one draws the first frame's VAE sample from the first generator:
    # item i would not be the video of seed + i alone
    batch_arg=None,
)
