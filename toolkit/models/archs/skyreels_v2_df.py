"""SkyReels V2 diffusion forcing (Skywork): Wan 2.1's 3D DiT trained with a noise level per latent frame, so a
video is denoised in causal blocks, each block behind the one before (`ar_step`), and a long one in
windows of `base_num_frames` that continue the last `overlap_history` frames of the window before:
"infinite-length" video. UMT5-XXL and the Wan 2.1 VAE as wan21 has them; UniPC with flow sigmas at the
shift 8 Skywork's text-to-video runs use.

Tasks: text-to-video, and image-to-video (`init_img`, the first frame, as the clean latents the first
window starts from: no image encoder). Three checkpoints (variants, each its own repo): 1.3B 540P (the
default; it also embeds the frame rate, 16 fps or not: `fps` goes to the pipeline), 14B 540P and 14B
720P. The model card runs 544x960 with 97 frames (720P: 720x1280, 121, and windows of 121) at 24 fps,
30 steps, guidance 6. The extension of an input video (SkyReelsV2DiffusionForcingVideoToVideoPipeline)
needs an input video, which requests do not carry yet.

Departures from the pipeline: `causal_block_size` is always passed (1 unless asked), because the pipeline
writes it into the resident transformer's config; a video longer than `base_num_frames` with no
`overlap_history` continues over 17 frames (Skywork's recommendation) instead of being refused.

Progress: the pipeline steps a deep copy of the scheduler per latent frame (the scheduler's own `step`
never runs), so the holder reports each denoising pass of the step matrices through the pipeline's
step-end callback, the latents of the whole window each time, out of the passes all windows run.

Its files: the original Wan layout, as skyreels_v2's (the 1.3B, with its frame-rate embedding, is taken for
this arch; the 14B ones, with Wan 2.1 14B's shapes, for wan21 unless `model.arch` says)."""
import contextlib
import itertools

from toolkit import latent_formats
from toolkit.models.arch import ArchSpec, Extra, Latents, SampleDefaults, Task, Tiny, Variant
from toolkit.models.archs.skyreels_v2 import (COMPONENTS_T2V, FLOW_SHIFT, SCHEDULER_CONFIG, SKYREELS_LORA, TINY_SAMPLE,
                                              TINY_WAN, WAN_14B, WAN_DECODE_FEATURES, tiny_transformer,
                                              tiny_umt5_vae, transformer_facts, transformer_row,
                                              transformer_signature, unipc_flow_config, unipc_flow_scheduler)
from toolkit.models.archs.wan21 import WAN21_1_3B
from toolkit.models.base_model import BaseModel
from toolkit.models.formats.dit_configs import from_known

# Skywork's recommended overlap between windows, used when a long video names none
OVERLAP_HISTORY = 17
SAMPLE_EXTRAS = {
    "ar_step": Extra("int", 0),                 # 0: every frame at one noise level (synchronous); 5: the async mode
    "causal_block_size": Extra("int", 1),       # latent frames per causal block (5 with ar_step 5)
    "base_num_frames": Extra("int", 97),        # the window, in frames (97 for 540P, 121 for 720P)
    "overlap_history": Extra("int"),            # frames a window continues from the one before (17 or 37)
    "addnoise_condition": Extra("float", 0.0),  # noise on the continued frames (20 recommended for long videos)
}


# Skywork/SkyReels-V2-DF-1.3B-540P-Diffusers transformer/config.json (Wan 2.1 1.3B's, with the frame-rate
# embedding) and DF-14B-540P / -720P's (Wan 2.1 14B's); the tiny's
TRANSFORMER_KNOWN = {"skyreels-v2-df-1.3b": dict(WAN21_1_3B, inject_sample_info=True),
                     "skyreels-v2-df-14b": WAN_14B, "tiny": dict(TINY_WAN, inject_sample_info=True)}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the SkyReels V2 diffusion-forcing transformer", variants={"skyreels-v2-df-1.3b": "1.3b-540p"})


class SkyReelsV2DFModel(BaseModel):
    def pipeline_kwargs(self, gen):
        kw = super().pipeline_kwargs(gen)
        x = gen.extras
        kw.update(fps=gen.fps, ar_step=x["ar_step"], causal_block_size=x["causal_block_size"],
                  base_num_frames=x["base_num_frames"], addnoise_condition=x["addnoise_condition"])
        overlap = x.get("overlap_history")
        if overlap is None and gen.num_frames > x["base_num_frames"]:
            overlap = OVERLAP_HISTORY
        if overlap is not None:
            kw["overlap_history"] = overlap
        return kw

    @contextlib.contextmanager
    def step_reports(self, pipe, on_step, kwargs: dict):
        """Each denoising pass through the pipeline's step-end callback, numbered across windows, out of
        the passes the call runs (counted once the scheduler's timesteps are set)."""
        if on_step is None:
            yield
            return
        done, total = itertools.count(), {}

        def step_end(pipeline, _i, timestep, tensors):
            if "n" not in total:
                total["n"] = planned_passes(pipeline, kwargs, len(pipeline.scheduler.timesteps))
            on_step(next(done), total["n"], timestep, tensors["latents"], None)
            return {}

        kwargs["callback_on_step_end"] = step_end
        try:
            yield
        finally:
            kwargs.pop("callback_on_step_end", None)


def planned_passes(pipe, kw: dict, steps: int) -> int:
    """The denoising passes a diffusion-forcing call runs: the rows of each window's step matrix, the
    windows laid out as the pipeline lays them (one for a short video). A row count depends on the
    window's latent frames, the steps, `ar_step`, the block size and the frames already clean (the first
    frame of an image-to-video, the overlap of a later window), not on the timesteps' values."""
    import torch

    t = pipe.vae_scale_factor_temporal
    frames = kw["num_frames"]
    frames = max(frames if frames % t == 1 else frames // t * t + 1, 1)
    latent = lambda n: (n - 1) // t + 1     # noqa: E731
    block, base_frames, overlap = kw["causal_block_size"], kw["base_num_frames"], kw.get("overlap_history")
    first_clean = 1 if "image" in kw else 0
    windows = [(latent(frames), first_clean)]
    if overlap is not None and frames > base_frames:
        n, ov, base = latent(frames), latent(overlap), latent(base_frames)
        count = 1 + (n - base - 1) // (base - ov) + 1
        windows = [(base, first_clean)] + [(min(n - k * (base - ov), base), ov - ov % block) for k in range(1, count)]
    template = torch.zeros(steps)
    return sum(len(pipe.generate_timestep_matrix(f, template, f, kw["ar_step"], clean, block)[0])
               for f, clean in windows)


def _tiny(b):
    # the DF 1.3B's transformer: with the frame-rate embedding
    return dict(tiny_umt5_vae(b), scheduler=unipc_flow_scheduler(FLOW_SHIFT),
                transformer=tiny_transformer(b, inject_sample_info=True))


SPEC = ArchSpec(
    name="skyreels_v2_df", modality="video", default_name_or_path="Skywork/SkyReels-V2-DF-1.3B-540P-Diffusers",
    pipeline="SkyReelsV2DiffusionForcingPipeline", holder=SkyReelsV2DFModel,
    components=COMPONENTS_T2V[:-1] + (transformer_row("toolkit.models.archs.skyreels_v2_df:transformer_config",
                                                      "SkyReels V2 DF transformer"),),
    tasks=(Task("txt2img", "SkyReelsV2DiffusionForcingPipeline"),
           Task("i2v", "SkyReelsV2DiffusionForcingImageToVideoPipeline")),
    output_type="np",
    # model card (540P): 960x544, 97 frames at 24 fps, 30 steps, guidance 6.0 (5.0 for image-to-video)
    defaults=SampleDefaults(960, 544, 30, 6.0, num_frames=97, fps=24, output_ext="mp4"),
    sample_extras=SAMPLE_EXTRAS,
    variants={"1.3b-540p": Variant(),
              "14b-540p": Variant(name_or_path="Skywork/SkyReels-V2-DF-14B-540P-Diffusers"),
              "14b-720p": Variant(defaults={"width": 1280, "height": 720, "num_frames": 121},
                                  extras={"base_num_frames": 121},
                                  name_or_path="Skywork/SkyReels-V2-DF-14B-720P-Diffusers")},
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.WAN21), decode_features=WAN_DECODE_FEATURES,
    scheduler_file=unipc_flow_config(FLOW_SHIFT),
    tiny=Tiny(_tiny, TINY_SAMPLE),
    description="SkyReels V2 diffusion forcing: long (autoregressive, windowed) text- and image-to-video",
    scheduler_config=SCHEDULER_CONFIG,
    # the pipeline steps each frame's scheduler with the step matrix's integer timesteps, which the
    # FlowMatch Euler and Heun schedulers refuse
    samplers_excluded=("euler", "heun"),
    # one video per pass: diffusers 0.42.1's transformer adds the DF 1.3B's fps embedding, repeated frame by
    # frame, to the per-frame timestep projections of each batch item, which fails for more than one item
    batch_arg=None,
    lora=SKYREELS_LORA,
)
