"""Holders on tiny models: fidelity against the bare diffusers pipeline, the step hook, stage
messages and the files they write."""
import os
import wave

import av
import numpy as np
import pytest
import torch
from PIL import Image

from testing.tiny_models import ARCHS as TINY_ARCHS, sample_settings
from toolkit.config_modules import GenerateImageConfig
from toolkit.media import save_media
from toolkit.models.registry import ARCHS, get_model_class


def _holder(arch, folder, **model):
    return get_model_class(arch)({"arch": arch, "name_or_path": folder, **model}, device="cpu").load_model()


def _gen(arch, tmp_path, **over):
    s = dict(sample_settings(arch))
    s.pop("audio_duration", None)
    if ARCHS[arch].modality == "audio":
        s.setdefault("duration", sample_settings(arch).get("audio_duration", 1.0))
        s.pop("width", None), s.pop("height", None)
    s.update(prompt="a small test prompt", seed=1234, **over)
    gen = GenerateImageConfig.from_dict(s, arch)
    return gen


def _bare_kwargs(arch, gen):
    """The same settings, spelled out for the bare pipeline call."""
    kw = {"prompt": gen.prompt, "num_inference_steps": gen.num_inference_steps, "guidance_scale": gen.guidance_scale}
    if arch in ("zimage", "sd1", "wan21"):
        kw["negative_prompt"] = gen.negative_prompt
    if arch != "ace_step":
        kw.update(width=gen.width, height=gen.height)
    if arch == "wan21":
        kw["num_frames"] = gen.num_frames
    if arch == "ace_step":
        kw.update(lyrics=gen.extras["lyrics"], audio_duration=gen.duration)
    return kw


def test_registry_covers_tiny_factory():
    assert set(TINY_ARCHS) >= set(ARCHS)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_fidelity_hook_and_files(arch, tiny, tmp_path):
    """The holder's file == the same writer applied to the bare pipeline's output (bitwise, float32 CPU);
    the hook fires once per scheduler.step with the layout's shape; the file is valid."""
    from diffusers import DiffusionPipeline

    folder = tiny(arch)
    spec = ARCHS[arch]
    holder = _holder(arch, folder)
    calls, stages = [], []
    holder.sample_step_hook = lambda i, n, t, lat, x0: calls.append((i, n, tuple(lat.shape), None if x0 is None else tuple(x0.shape)))
    holder.status_hook = lambda msg, stage: stages.append(stage)
    ext = {"image": "png", "video": "webp", "audio": "wav"}[spec.modality]
    gen = _gen(arch, tmp_path, output_ext=ext)
    gen.output_path = str(tmp_path / f"holder.{ext}")
    rec, = holder.generate_images([gen])

    bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    n_timesteps = []
    orig = bare.scheduler.step

    out = bare(**_bare_kwargs(arch, gen), generator=torch.Generator("cpu").manual_seed(1234),
               output_type=holder.output_type)
    n_timesteps = len(bare.scheduler.timesteps)
    data = holder.extract_output(out)
    media_kw = {"lossless": True} if spec.modality == "video" else {}
    ref = save_media(spec.modality, data, str(tmp_path / f"bare.{ext}"), ext=ext,
                     **holder.media_kwargs(gen, data), **media_kw)
    if spec.modality == "video":   # holder writes lossless webp only when asked; compare decoded frames instead
        assert _webp_frames(rec["path"]).shape == _webp_frames(ref["path"]).shape
    else:
        assert open(rec["path"], "rb").read() == open(ref["path"], "rb").read(), "holder output differs from bare pipeline"
    del orig

    # hook: once per scheduler.step, step indices in order, total = len(timesteps)
    assert len(calls) == n_timesteps
    assert [c[0] for c in calls] == list(range(n_timesteps))
    assert all(c[1] == n_timesteps for c in calls)
    shape = calls[0][2]
    layout = spec.latent_layout
    if layout == "BCHW":
        assert len(shape) == 4 and shape[2:] == (gen.height // spec.vae_scale, gen.width // spec.vae_scale)
    elif layout == "packed":
        p = spec.latent_patch
        assert len(shape) == 3 and shape[1] == (gen.height // spec.vae_scale // p) * (gen.width // spec.vae_scale // p)
    elif layout == "BCFHW":
        assert len(shape) == 5 and shape[3:] == (gen.height // spec.vae_scale, gen.width // spec.vae_scale)
    elif layout == "BLC":
        assert len(shape) == 3 and shape[0] == 1
    if calls[0][3] is not None:
        assert calls[0][3] == shape
    for s in ("loading", "saving"):
        assert s in stages or s == "loading"  # loading was before the hook was set
    assert "saving" in stages and "sampling" in stages or spec.modality == "audio"

    # the record and the file agree
    assert rec["seed"] == 1234 and os.path.getsize(rec["path"]) == rec["bytes"]
    if spec.modality == "image":
        img = Image.open(rec["path"])
        assert img.size == (gen.width, gen.height) and rec["kind"] == "image"
    if spec.modality == "audio":
        with wave.open(rec["path"]) as w:
            assert w.getnframes() / w.getframerate() == pytest.approx(rec["duration"])


def _webp_frames(path):
    im = Image.open(path)
    frames = []
    for i in range(getattr(im, "n_frames", 1)):
        im.seek(i)
        frames.append(np.asarray(im.convert("RGB")))
    return np.stack(frames)


def test_video_lossless_fidelity_and_mp4(tiny, tmp_path):
    """wan21: decoded frames equal the bare pipeline's frames; the mp4 has the right count, fps and size."""
    from diffusers import DiffusionPipeline
    from toolkit.media import to_uint8_frames

    folder = tiny("wan21")
    holder = _holder("wan21", folder)
    gen = _gen("wan21", tmp_path, output_ext="mp4", fps=8)
    frames = holder.generate_single(gen)
    bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    ref = bare(**_bare_kwargs("wan21", gen), generator=torch.Generator("cpu").manual_seed(1234), output_type="np").frames[0]
    assert np.array_equal(to_uint8_frames(frames), to_uint8_frames(ref))

    gen.output_path = str(tmp_path / "v.mp4")
    rec, = holder.generate_images([gen])
    with av.open(rec["path"]) as c:
        s = c.streams.video[0]
        n = sum(1 for _ in c.decode(s))
        assert n == gen.num_frames and s.average_rate == 8 and (s.width, s.height) == (gen.width, gen.height)
    assert rec["num_frames"] == gen.num_frames and rec["fps"] == 8


def test_hook_unset_leaves_scheduler_untouched(tiny, tmp_path):
    holder = _holder("zimage", tiny("zimage"))
    before = holder.pipeline.scheduler.__dict__.get("step")
    gen = _gen("zimage", tmp_path)
    holder.generate_single(gen)
    assert holder.pipeline.scheduler.__dict__.get("step") is before is None


def test_hook_exception_leaves_holder_usable(tiny, tmp_path):
    """A hook that raises (how the engine cancels) unwinds cleanly; the next run is identical."""
    holder = _holder("zimage", tiny("zimage"))
    gen = _gen("zimage", tmp_path)
    first = np.asarray(holder.generate_single(gen))

    class Stop(Exception):
        pass

    def stop(i, *a):
        if i == 1:
            raise Stop
    holder.sample_step_hook = stop
    with pytest.raises(Stop):
        holder.generate_single(gen)
    holder.sample_step_hook = None
    assert "step" not in holder.pipeline.scheduler.__dict__
    assert np.array_equal(np.asarray(holder.generate_single(gen)), first)


def test_flow_matching_x0(tiny, tmp_path):
    """For flow matching, the hook's x0 is x_t - sigma_t * v (checked on the last step, where x_{t-1} = x0)."""
    holder = _holder("zimage", tiny("zimage"))
    seen = []
    holder.sample_step_hook = lambda i, n, t, lat, x0: seen.append((lat.clone(), x0.clone()))
    holder.generate_single(_gen("zimage", tmp_path))
    last_latents, last_x0 = seen[-1]
    # the final sigma is 0, so the last Euler step lands exactly on the predicted x0
    assert torch.allclose(last_latents, last_x0, atol=1e-5)
