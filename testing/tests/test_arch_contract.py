"""The contract every registered arch passes, one parametrized suite (the pattern of diffusers'
PipelineTesterMixin): an arch file added to toolkit/models/archs/ is in it at once, and fails it
until its row, its tiny instance, its holder and its stream all hold.

Per arch:
  - the row: classes resolve, the pipeline takes every component, the latent table fits the
    latent channels, the defaults and the tiny request validate;
  - the tiny instance: real on-disk format, deterministic, a shared pair shares files;
  - the holder (funnel, offline, float32 CPU) writes the same file as the bare diffusers pipeline
    through the same writer with the same settings embedded, bit for bit (mp4: frame count, fps,
    size and decoded frames), and the step hook sees every scheduler step with the registry's
    latent layout;
  - each further task (img2img, inpaint, edit, i2v) the same way against the bare task pipeline
    (`DiffusionPipeline.from_pretrained`, then the task class's `from_pipe`), given the same
    prepared input images (toolkit.images.load_image) and settings;
  - the engine over HTTP: start -> progress / latent per step -> result -> end, the latent frame's
    layout and shape as the registry says, an identical rerun loading nothing;
  - cancel mid-run (deterministically, from the generation thread) writes nothing and leaves the
    holder reusable: the next identical request loads nothing and gives the same bytes.
"""
import contextlib
import inspect
import json
import math
import os

import av
import numpy as np
import pytest
import torch

from testing import test_inference_engine as sweep
from testing.fixtures import input_audio, input_image, input_mask, input_video
from toolkit import attention
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.file_settings import public_sample, settings_from_metadata
from toolkit.media import AUDIO_EXTS, IMAGE_EXTS, VIDEO_EXTS, read_metadata, save_media
from toolkit.images import load_image
from toolkit.input_media import load_video
from toolkit.models import latents as latent_frames
from toolkit.models.arch import DENOISER, IMAGE_INPUTS, MODALITIES, STRENGTH_TASKS, TASKS, load_class
from toolkit.models.base_model import BaseModel, get_model_class, global_rng_seeded, output_files
from toolkit.models.registry import ARCHS
from toolkit.models.patches import patched
from toolkit.models.step_hook import wrap_scheduler_step
from toolkit.models.tiny import MARKER_NAME, make_shared_pair, make_tiny, own_roles, shared_roles
from toolkit.models.v2.sources import looks_like_repo_id
from testing.tiny_runs import run_message

ARCH_NAMES = tuple(ARCHS)
# (arch, task) for every task past an arch's first (its first is test_holder_matches_diffusers')
TASK_CASES = tuple((a, t.name) for a in ARCH_NAMES for t in ARCHS[a].tasks[1:])
FILE_EXT = {"image": "png", "video": "mp4", "audio": "wav"}
MAX_TINY_BYTES = 16_000_000
STRENGTH_ARGS = ("strength", "init_noise_level")      # the pipelines' names for a task's strength


def _bare(folder: str):
    """The diffusers pipeline of a folder, its modules frozen as every holder's are (the funnel's post-load
    requires_grad_(False)): torch's linear takes another kernel path for a non-contiguous 3D input whose weight
    requires grad, which changes float32 low bits (PRX's patch-1 `img_in` on DC-AE latents)."""
    from diffusers import DiffusionPipeline

    bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    for module in bare.components.values():
        if isinstance(module, torch.nn.Module):
            module.requires_grad_(False)
    return bare


def _sample(arch: str, tmp_path, **over) -> dict:
    spec = ARCHS[arch]
    s = {**spec.tiny.sample, "prompt": "a small test prompt", "seed": 1234, "output_ext": FILE_EXT[spec.modality]}
    for name in spec.needed_inputs:
        s[name] = input_image(tmp_path / f"{name}.png", s.get("width") or 64, s.get("height") or 64)
    s.update(over)
    return s


def _frame_shape(spec, gen) -> tuple:
    lat = spec.latents
    if spec.modality == "audio":
        return None
    h, w = gen.height // lat.spatial, gen.width // lat.spatial
    if spec.modality == "video":
        return (1, lat.channels, min(4, lat.stepped_frames(gen.num_frames)), h, w)
    return (1, lat.channels, h, w)


# -- the row ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_row(arch):
    spec = ARCHS[arch]
    assert spec.name == arch and spec.modality in MODALITIES and spec.description
    assert spec.tiny is not None, f"{arch} declares no tiny instance (ArchSpec.tiny): it cannot be tested"
    pipeline = load_class(spec.pipeline)
    params = set(__import__("inspect").signature(pipeline.__init__).parameters)
    roles = [c.role for c in spec.components]
    assert len(roles) == len(set(roles)) and spec.denoiser_roles
    assert set(roles) <= params, f"{spec.pipeline} takes no {sorted(set(roles) - params)}"
    for c in spec.components:
        assert isinstance(c.load_class(), type), c
    assert spec.holder is None or issubclass(spec.holder, BaseModel)
    assert set(spec.pipeline_init_kwargs) <= params and set(spec.tiny.pipeline_kwargs) <= params
    lat = spec.latents
    assert lat.frame_layout == {"image": "BCHW", "video": "BCFHW", "audio": "BLC"}[spec.modality]
    assert lat.format is None or lat.format.channels == lat.channels, "the preview table fits other latents"
    assert spec.default_name_or_path == "" or looks_like_repo_id(spec.default_name_or_path)
    for variant in spec.variants.values():
        assert variant.name_or_path is None or looks_like_repo_id(variant.name_or_path)
    ext = spec.defaults.output_ext
    assert ext in {"image": IMAGE_EXTS, "video": VIDEO_EXTS, "audio": AUDIO_EXTS}[spec.modality]
    # the real defaults (each variant's) and the tiny request validate like any request
    for variant in list(spec.variants) or [None]:
        mc = ModelConfig.from_dict({"arch": arch, "name_or_path": "x/y", "variant": variant})
        needs = spec.tasks_for(variant)[0].needs        # a variant that only refines needs its image
        GenerateImageConfig.from_dict({name: "x.png" for name in needs}, mc)
    GenerateImageConfig.from_dict({**{name: "x.png" for name in spec.needed_inputs}, **spec.tiny.sample}, arch)
    json.dumps(spec.public())
    # the tasks: the first runs `pipeline`; each task's class takes the arch's components, the arguments its
    # inputs become, and its default strength is the pipeline's own
    assert spec.tasks[0].pipeline == spec.pipeline and {t.name for t in spec.tasks} <= set(TASKS)
    for task in spec.tasks:
        cls = load_class(task.pipeline)
        init = set(inspect.signature(cls.__init__).parameters)
        assert set(roles) <= init, f"{task.pipeline} takes no {sorted(set(roles) - init)}"
        call = inspect.signature(cls.__call__).parameters
        # the arguments the base holder makes of the inputs (a holder that renames them is checked by its run)
        if spec.holder is None or spec.holder.input_kwargs is BaseModel.input_kwargs:
            wanted = {task.image_arg} if set(task.inputs) & set(IMAGE_INPUTS) else set()
            wanted |= {"mask_image"} if "mask_img" in task.inputs else set()
            wanted |= {"video"} if "init_video" in task.inputs else set()
            wanted |= {"audio"} if "init_audio" in task.inputs else set()
            assert wanted <= set(call), f"{task.name}: {task.pipeline} takes no {sorted(wanted - set(call))}"
        strength = next((call[a] for a in STRENGTH_ARGS if a in call), None)
        if task.strength is not None:
            assert task.strength == strength.default, f"{task.name}: default strength is not the pipeline's"
        else:
            assert strength is None or task.name not in STRENGTH_TASKS
    assert spec.public()["tasks"] == [t.public() for t in spec.tasks]


# -- the tiny instance -----------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_tiny_instance(arch, tiny, tmp_path):
    spec = ARCHS[arch]
    folder = tiny(arch)
    with open(os.path.join(folder, "model_index.json")) as f:
        index = json.load(f)
    assert index["_class_name"] == spec.pipeline and os.path.isfile(os.path.join(folder, MARKER_NAME))
    files = {os.path.relpath(os.path.join(d, n), folder): os.path.join(d, n)
             for d, _s, names in os.walk(folder) for n in names if n != MARKER_NAME}
    assert sum(os.path.getsize(p) for p in files.values()) < MAX_TINY_BYTES
    for c in spec.components:
        assert c.optional or c.role in index, f"model_index.json has no {c.role}"

    rng = torch.random.get_rng_state()
    again = make_tiny(arch, tmp_path / "again", seed=0)
    assert torch.equal(torch.random.get_rng_state(), rng), "building must not disturb the caller's RNG"
    for rel, path in files.items():
        with open(path, "rb") as f1, open(again / rel, "rb") as f2:
            assert f1.read() == f2.read(), f"{rel} differs between two builds of seed 0"

    a, b = make_shared_pair(arch, tmp_path / "a", tmp_path / "b")
    for role in shared_roles(arch):
        for name in os.listdir(a / role):
            assert os.path.samefile(a / role / name, b / role / name), f"{role}/{name} is not one file"
    for role in own_roles(arch):
        weights = [n for n in os.listdir(a / role) if n.endswith(".safetensors")]
        assert weights and any((a / role / n).read_bytes() != (b / role / n).read_bytes() for n in weights), role


# -- the holder against the bare pipeline ----------------------------------------------------------
@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_holder_matches_diffusers(arch, tiny, tmp_path):
    spec = ARCHS[arch]
    folder = tiny(arch)
    holder = get_model_class(arch)({"arch": arch, "name_or_path": folder, "local_only": True}, device="cpu")
    holder.load_model()
    # the row says whether model.attention reaches its denoisers (toolkit/attention.py): their processors do
    assert spec.attention_backends == any(attention.dispatching_processors(holder.loaded.get(role))
                                          for role in spec.denoiser_roles)
    calls, stages = [], []
    gen = GenerateImageConfig.from_dict(_sample(arch, tmp_path), holder.model_config)
    ext = gen.output_ext
    out_path = str(tmp_path / f"holder.{ext}")
    recs = holder.generate_images([gen], paths=[out_path], on_step=lambda i, n, t, lat, x0: calls.append((i, n, lat.clone())),
                                  on_status=lambda message, stage: stages.append(stage))
    rec = recs[0]

    bare = _bare(folder)
    assert type(bare).__name__ == spec.pipeline
    bare.set_progress_bar_config(disable=True)
    kwargs = holder.pipeline_kwargs(gen)
    # the prompt reaches the pipeline (framed where the arch must: Fibo-Edit's JSON edit caption)
    assert gen.prompt in kwargs["prompt"] and kwargs["num_inference_steps"] == gen.num_inference_steps
    with _global_rng(spec), _arch_patches(holder, gen, bare):
        out = bare(**kwargs, generator=torch.Generator("cpu").manual_seed(1234), output_type=spec.output_type)
    data = holder.extract_output(out)
    # the same writer with the same settings embedded (the holder's metadata for this request): bit for bit;
    # an output of several images (the row's output_images) a file each
    parts = list(data) if spec.output_images else [data]
    assert len(recs) == len(parts) == output_files(spec, gen)
    for i, (rec, part) in enumerate(zip(recs, parts)):
        ref = save_media(spec.modality, part, str(tmp_path / f"bare-{i}.{ext}"), ext=ext,
                         metadata=holder.file_metadata(gen, rec["seed"]), **holder.media_kwargs(gen, part))
        if spec.modality == "video":
            got, want = _decoded(rec["path"]), _decoded(ref["path"])
            assert got["frames"] == want["frames"] == gen.num_frames and got["fps"] == want["fps"] == gen.fps
            assert got["size"] == want["size"] == (gen.width, gen.height)
            assert np.array_equal(got["pixels"], want["pixels"]), "decoded frames differ from the bare pipeline's"
        else:
            with open(rec["path"], "rb") as f1, open(ref["path"], "rb") as f2:
                assert f1.read() == f2.read(), "the holder's file differs from the bare pipeline's"
    rec = recs[0]
    with open(rec["path"], "rb") as f:       # and the file names the request that made it
        back = settings_from_metadata(read_metadata(f.read()))
    assert back["source"] == "aitk" and back["sample"] == public_sample(gen) and back["sample"]["seed"] == 1234

    # the hook: every scheduler step, in order, with latents the registry's layout describes
    n = len(bare.scheduler.timesteps)
    assert [c[0] for c in calls] == list(range(n)) and all(c[1] == n for c in calls)
    frame, layout = latent_frames.to_frame(calls[-1][2], spec.latents, height=gen.height, width=gen.width,
                                           num_frames=gen.num_frames)
    assert layout == spec.latents.frame_layout
    want = _frame_shape(spec, gen)
    if want is not None:
        assert tuple(frame.shape) == want
    else:
        assert frame.shape[0] == 1 and frame.shape[2] == spec.latents.channels
    assert "saving" in stages and "sampling" in stages
    assert rec["seed"] == 1234 and os.path.getsize(rec["path"]) == rec["bytes"]


@pytest.mark.parametrize("arch,task", TASK_CASES)
def test_task_matches_diffusers(arch, task, tiny, tmp_path):
    """The holder's task pipeline (built over the loaded components) against the bare diffusers task
    pipeline, bit for bit, on input images of another size and aspect than the request's."""
    spec, row = ARCHS[arch], ARCHS[arch].task(task)
    folder = tiny(arch)
    holder = get_model_class(arch)({"arch": arch, "name_or_path": folder, "local_only": True}, device="cpu")
    holder.load_model()
    sample = _sample(arch, tmp_path, **_task_inputs(spec, row, tmp_path))
    gen = GenerateImageConfig.from_dict(sample, holder.model_config)
    assert gen.task == task and gen.strength == row.strength
    ext = gen.output_ext
    out_path = str(tmp_path / f"holder.{ext}")
    calls = []
    rec, = holder.generate_images([gen], paths=[out_path], on_step=lambda i, n, t, lat, x0: calls.append((i, n)))
    assert type(holder.pipeline).__name__ == spec.pipeline, "the task replaced the loaded pipeline"

    kwargs = holder.pipeline_kwargs(gen)
    _assert_prepared_inputs(kwargs, gen, row)
    bare = _bare(folder)
    cls = load_class(row.pipeline)
    pipe = bare if type(bare) is cls else cls.from_pipe(bare)
    pipe.set_progress_bar_config(disable=True)
    bare_steps = []
    # the steps counted as the holder counts them (the scheduler's step; diffusion forcing: its passes)
    with holder.step_reports(pipe, lambda i, n, t, lat, x0: bare_steps.append(i), kwargs), _global_rng(spec), \
            _arch_patches(holder, gen, pipe):
        out = pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(1234), output_type=spec.output_type)
    data = holder.extract_output(out)
    ref = save_media(spec.modality, data, str(tmp_path / f"bare.{ext}"), ext=ext,
                     metadata=holder.file_metadata(gen, rec["seed"]), **holder.media_kwargs(gen, data))
    if spec.modality == "video":
        got, want = _decoded(rec["path"]), _decoded(ref["path"])
        assert got["frames"] == want["frames"] == gen.num_frames
        assert got["size"] == want["size"] == (gen.width, gen.height)
        assert np.array_equal(got["pixels"], want["pixels"]), "decoded frames differ from the bare task pipeline's"
    else:
        if spec.modality == "image":
            assert (rec["width"], rec["height"]) == (gen.width, gen.height)
        else:
            assert rec["duration"] == pytest.approx(gen.duration, abs=0.05)
        with open(rec["path"], "rb") as f1, open(ref["path"], "rb") as f2:
            assert f1.read() == f2.read(), f"the holder's {task} file differs from the bare {row.pipeline}'s"
    # progress counts the steps the task runs (img2img/inpaint: the schedule's last steps * strength), as its total
    assert [c[0] for c in calls] == list(range(len(bare_steps))) and {c[1] for c in calls} == {len(bare_steps)}


def _global_rng(spec):
    """The bare call seeded as the holder seeds it where its pipeline draws from torch's global RNG."""
    return global_rng_seeded(1234) if spec.global_rng else contextlib.nullcontext()


@contextlib.contextmanager
def _arch_patches(holder, gen, pipe):
    """The arch's own per-call patches (its holder's `call_patches`: Krea 2's mu, a size the pipeline
    would derive from the input image) over the bare pipeline too: they are the arch's declared
    departures from its pipeline, each tested in the arch's own file; this suite checks the rest."""
    with contextlib.ExitStack() as stack:
        for obj, name, wrapper in holder.call_patches(gen, pipe):
            stack.enter_context(patched(obj, name, wrapper))
        yield


def _task_inputs(spec, row, tmp_path) -> dict:
    """Input files for `row`'s inputs, of other sizes than the request (the resize runs): init 16 px
    wider and 8 px lower (crop), the mask at twice the size, references of their own sizes (at least
    64 px: Flux.2 refuses smaller); a video longer than the request (its first frames are used), its
    mask at twice the size; an audio at another rate and channel count than the model's."""
    w, h = spec.tiny.sample.get("width") or 64, spec.tiny.sample.get("height") or 64
    frames = spec.tiny.sample.get("num_frames") or 1
    out = {}
    for i, name in enumerate(row.inputs):
        if name == "init_img":
            out[name] = input_image(tmp_path / "init.png", w + 16, h - 8)
        elif name == "mask_img":
            out[name] = input_mask(tmp_path / "mask.png", 2 * w, 2 * h)
        elif name == "init_video":
            out[name] = input_video(tmp_path / "init.mp4", w + 16, h - 8, frames + 4)
        elif name == "mask_video":
            out[name] = input_video(tmp_path / "mask.mp4", 2 * w, 2 * h, frames + 4, mask=True)
        elif name == "init_audio":
            out[name] = input_audio(tmp_path / "init.wav", (spec.tiny.sample.get("duration") or 1.0) + 0.5)
        else:
            out[name] = input_image(tmp_path / f"{name}.png", max(w, 64) + 8 * i, max(h, 64) + 16)
    if row.name == "audio_inpaint":     # the seconds it generates anew: the middle of the clip
        d = spec.tiny.sample.get("duration") or 1.0
        out.update(mask_start=d / 4, mask_end=3 * d / 4)
    if row.strength is not None:      # the tiny's steps, or enough that one step runs at the default strength
        out["num_inference_steps"] = max(spec.tiny.sample["num_inference_steps"], math.ceil(1 / row.strength))
    return out


def _assert_prepared_inputs(kwargs, gen, row):
    """The holder passes the inputs as load_image prepares them: init and mask at the request size."""
    def same(a, b):
        return a.size == b.size and a.mode == b.mode and np.array_equal(np.asarray(a), np.asarray(b))

    refs = [load_image(getattr(gen, n)) for n in row.inputs if n.startswith("ctrl_img") and getattr(gen, n)]
    given = kwargs.get(row.image_arg)
    if gen.init_img:
        want = load_image(gen.init_img, gen.width, gen.height, gen.resize_mode)
        assert want.size == (gen.width, gen.height) and same(given, want)
    elif refs:          # the task's image_arg (a list when several), or where the arch's holder passes them
        lists = [v if isinstance(v, list) else [v] for v in kwargs.values()]
        assert any(len(got) == len(refs) and all(hasattr(a, "mode") and same(a, b) for a, b in zip(got, refs))
                   for got in lists), "no argument holds the references as load_image prepares them"
    if gen.mask_img:
        want = load_image(gen.mask_img, gen.width, gen.height, gen.resize_mode, mask=True)
        assert want.mode == "L" and same(kwargs["mask_image"], want)
    # an argument, or the `frames` of a condition object in a list argument (LTX-2's LTX2VideoCondition)
    frame_lists = [v for v in kwargs.values() if isinstance(v, list)]
    frame_lists += [c.frames for v in frame_lists for c in v if isinstance(getattr(c, "frames", None), list)]
    for name, mask in (("init_video", False), ("mask_video", True)):
        if getattr(gen, name):       # the first num_frames frames at the request size, wherever the arch passes them
            want = load_video(getattr(gen, name), gen.width, gen.height, gen.num_frames, gen.resize_mode, mask=mask)
            got = [v for v in frame_lists if len(v) == len(want) and all(same(a, b) for a, b in zip(v, want))]
            assert got, f"{name}: no argument holds its first {gen.num_frames} frames at {gen.width}x{gen.height}"
    if gen.init_audio:
        got = [v for v in kwargs.values() if isinstance(v, torch.Tensor) and v.ndim == 3 and v.shape[0] == 1]
        assert got and got[0].shape[2] <= round(gen.duration * 48000) + 1, "no input audio cut at the duration"
    if row.strength is not None:     # Stable Audio 3's a2a names it init_noise_level
        assert kwargs.get("strength", kwargs.get("init_noise_level")) == gen.strength


def _decoded(path) -> dict:
    with av.open(path) as c:
        s = c.streams.video[0]
        pixels = [f.to_ndarray(format="rgb24") for f in c.decode(s)]
        return {"frames": len(pixels), "fps": float(s.average_rate), "size": (s.width, s.height),
                "pixels": np.stack(pixels)}


# -- the engine ------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_engine_stream(arch, tiny, tiny_root, tmp_path):
    tiny(arch)
    res = sweep.run_arch(arch, str(tmp_path), root=str(tiny_root))
    assert res["ok"], f"{res['name']}: {res['error']} ({res.get('sequence')})"
    fr = res["frames"]
    files = output_files(ARCHS[arch], GenerateImageConfig.from_dict(_sample(arch, tmp_path), arch))
    assert fr["start"] == 1 and fr["end"] == 1 and fr["result"] == files and fr["error"] == 0
    assert fr["progress"] == res["steps"] and fr["latent"] == res["steps"], "one progress and latent per step"


@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_cancel_leaves_holder_reusable(arch, tiny, tmp_path):
    """On the generation worker (where the holder lives): a cancel at step 1, made from the worker's
    own thread before step 2 (deterministic), writes nothing; the next identical request loads
    nothing and gives the first run's bytes."""
    from extensions_built_in.inference_engine import messages as m
    from extensions_built_in.inference_engine.worker import WorkerCore
    from toolkit.request import resolve_request

    spec = ARCHS[arch]
    _work = resolve_request({"arch": arch, "name_or_path": tiny(arch)},
                              _sample(arch, tmp_path, num_inference_steps=3, output_ext=spec.defaults.output_ext))
    mc, gen = _work.model, _work.sample
    cancel_at, out = {}, []

    def emit(msg):
        out.append(msg)
        if isinstance(msg, m.Frame) and msg.header["type"] == "progress" and msg.header["step"] == 1 \
                and msg.request_id in cancel_at:
            core.cancel(msg.request_id)

    core = WorkerCore(emit)

    def run(rid: str, cancel: bool = False) -> m.Done:
        if cancel:
            cancel_at[rid] = 1
        path = str(tmp_path / f"{rid}.{gen.output_ext}")
        core.run(run_message(rid, mc.to_dict(), gen.to_dict(), path, None))
        return next(x for x in reversed(out) if isinstance(x, m.Done) and x.request_id == rid)

    first = run("first")
    assert first.status == "ok", first.error
    loads = core.pool.loads
    cancelled = run("cancelled", cancel=True)
    steps = [x.header["step"] for x in out if isinstance(x, m.Frame) and x.request_id == "cancelled"
             and x.header["type"] == "progress"]
    assert cancelled.status == "cancelled" and steps == [1] and not cancelled.results
    assert not [n for n in os.listdir(tmp_path) if "cancelled" in n], "a cancelled request left a file"
    again = run("again")
    assert again.status == "ok", again.error
    assert core.pool.loads == loads, "the request after a cancel reloaded components"
    with open(first.results[0]["path"], "rb") as f1, open(again.results[0]["path"], "rb") as f2:
        assert f1.read() == f2.read(), "the rerun after a cancel differs from the first run"
    core.unload_all()


def test_every_arch_is_in_the_suite():
    """The suite's parameters are the registry's arch files (a new file is tested at once)."""
    from toolkit.models.registry import _module_table
    assert set(ARCH_NAMES) == set(_module_table()) and len(ARCH_NAMES) >= 6
    assert all(ARCHS[a].denoiser_roles and any(c.kind == DENOISER for c in ARCHS[a].components) for a in ARCH_NAMES)
