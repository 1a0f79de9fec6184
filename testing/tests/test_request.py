"""One typed request (toolkit/request.py) and one settings mechanism (toolkit/settings.py): what
resolve_request makes is frozen and runs as it is; the bounds a form reads come from GET /models and
POST /resolve, the same resolver /generate uses; the engine's settings are one class; and an unset
negative prompt is the pipeline's own default (SDXL zeroes it)."""
import dataclasses
import pickle

import numpy as np
import pytest
import torch

from extensions_built_in.inference_engine.engine import Engine
from extensions_built_in.inference_engine.engine_settings import EngineSettings
from extensions_built_in.inference_engine.admission import Limits
from testing.engine_client import InProcessEngine
from toolkit.config_modules import GenerateImageConfig
from toolkit.errors import ConfigError
from toolkit.models.base_model import get_model_class
from toolkit.models.registry import ARCHS
from toolkit.request import GenerationRequest, StreamOptions, resolve_request
from toolkit.settings import Settings, setting

TOKEN = "request-token-123"


@pytest.fixture(scope="module")
def eng(tmp_path_factory):
    e = InProcessEngine(str(tmp_path_factory.mktemp("request")), token=TOKEN, limits={"max_batch": 12})
    yield e
    e.close()


def _model(arch="sd1"):
    return {"arch": arch, "name_or_path": f"tiny:{arch}"}


# -- the typed request ------------------------------------------------------------------------------

def test_resolve_request_makes_one_frozen_request_that_pickles_as_it_is():
    work = resolve_request(_model(), {"prompt": "a fox", "width": 64}, {"latents": "none"}, request_id="r-1")
    assert isinstance(work, GenerationRequest) and work.request_id == "r-1" and work.sample.width == 64
    assert work.stream == StreamOptions(latents="none") and work.sample.seed >= 0, "the seed is fixed once, here"
    for obj, name in ((work, "output_path"), (work.sample, "seed"), (work.model, "arch"), (work.stream, "latents")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, None)
    sent = pickle.loads(pickle.dumps(work.at("/tmp/out.png")))       # what messages.Run carries to the worker
    assert sent == dataclasses.replace(work, output_path="/tmp/out.png")


def test_a_dry_run_keeps_the_seed_and_takes_inputs_as_present():
    work = resolve_request(_model(), {"init_img": "present"}, dry_run=True)
    assert work.sample.seed == -1 and work.sample.task == "img2img" and work.sample.init_img == "present"
    assert work.sample.strength == ARCHS["sd1"].task("img2img").strength


def test_every_field_error_names_its_path():
    for sample, field in (({"width": 0}, "sample.width"), ({"num_inference_steps": 1.5}, "sample.num_inference_steps"),
                          ({"guidance_scale": -1}, "sample.guidance_scale"), ({"resize_mode": "zoom"}, "sample.resize_mode"),
                          ({"strength": 0, "init_img": "x"}, "sample.strength"), ({"seed": -2}, "sample.seed"),
                          ({"task": "inpaint"}, "sample.init_img")):
        with pytest.raises(ConfigError) as e:
            resolve_request(_model(), sample, dry_run=True)
        assert e.value.key == field, (sample, e.value)
    for stream, field in (({"every_n_steps": 0}, "stream.every_n_steps"), ({"preview": "png"}, "stream.preview"),
                          ({"nope": 1}, "stream.nope")):
        with pytest.raises(ConfigError) as e:
            resolve_request(_model(), {}, stream, dry_run=True)
        assert e.value.key == field
    with pytest.raises(ConfigError) as e:
        resolve_request(_model(), {}, request_id="a b")
    assert e.value.key == "request_id"


# -- the settings mechanism -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Knobs(Settings):
    count: int = setting(2, min=1, max=9)
    ratio: float = setting(0.5, min=0, exclusive_min=True)
    mode: str | None = setting(None, choices=(None, "a", "b"))
    inner: Limits = setting(default_factory=Limits)


def test_settings_coerce_bound_describe_and_nest():
    k = _Knobs.from_dict({"count": 3.0, "mode": "b", "inner": {"max_steps": 7}}, "knobs")
    assert (k.count, type(k.count), k.mode, k.inner.max_steps) == (3, int, "b", 7)
    assert _Knobs.from_dict(None, "knobs") == _Knobs()
    for d, field in (({"count": 10}, "knobs.count"), ({"count": True}, "knobs.count"), ({"ratio": 0}, "knobs.ratio"),
                     ({"ratio": float("nan")}, "knobs.ratio"), ({"mode": "c"}, "knobs.mode"),
                     ({"inner": {"max_steps": 0}}, "knobs.inner.max_steps"), ({"other": 1}, "knobs.other")):
        with pytest.raises(ConfigError) as e:
            _Knobs.from_dict(d, "knobs")
        assert e.value.key == field, d
    described = _Knobs.describe()
    assert described["count"] == {"type": "int", "min": 1, "max": 9, "default": 2}
    assert described["ratio"] == {"type": "float", "min": 0, "exclusive_min": True, "default": 0.5}
    assert described["mode"] == {"type": "str", "choices": ["a", "b"], "nullable": True}
    assert described["inner"]["fields"]["max_steps"]["min"] == 1


def test_engine_settings_are_one_class_for_the_job_file_and_the_engine(tmp_path):
    s = EngineSettings.from_dict({"max_batch": 2, "limits": {"max_steps": 9}, "worker": "thread"})
    assert (s.max_batch, s.limits.max_steps, s.worker) == (2, 9, "thread")
    for d, field in (({"port": 70000}, "engine.port"), ({"grace_seconds": 0}, "engine.grace_seconds"),
                     ({"worker": "fiber"}, "engine.worker"), ({"token": "short"}, "engine.token"),
                     ({"port": 8000, "compat_port": 8000}, "engine.compat_port"),
                     ({"model_folders": [str(tmp_path / "nope")]}, "engine.model_folders"),
                     ({"queue_policy": "lifo"}, "engine.queue_policy"), ({"limits": {"max_pixels": 0}},
                                                                         "engine.limits.max_pixels")):
        with pytest.raises(ConfigError) as e:
            EngineSettings.from_dict(d)
        assert e.value.key == field, d
    eng = Engine(s, output_folder=str(tmp_path / "o"), max_overtake=5)     # keywords over the settings, checked alike
    assert (eng.max_batch, eng.max_overtake, eng.limits.max_steps, eng.worker_kind) == (2, 5, 9, "thread")
    with pytest.raises(ConfigError) as e:
        Engine(output_folder=str(tmp_path / "o"), bogus=1)
    assert e.value.key == "engine.bogus"


# -- what the UI reads ------------------------------------------------------------------------------

def test_models_serves_each_fields_bounds_and_choices(eng):
    got = eng.client.get("/models").json()
    assert got["limits"]["max_batch"] == 12 and got["limits"]["max_steps"] == 1000
    rows = {row["name"]: row for row in got["archs"]}
    sd1, flux, audio = rows["sd1"]["fields"], rows["flux"]["fields"], rows["stable_audio"]["fields"]
    assert sd1["width"]["multiple_of"] == ARCHS["sd1"].size_divisor and sd1["width"]["max"] == 16384
    assert sd1["batch_size"] == {"type": "int", "min": 1, "max": 12}, "the engine's limit, not a copy"
    assert sd1["num_inference_steps"]["max"] == 1000 and sd1["guidance_scale"]["min"] == 0
    assert set(sd1["task"]["choices"]) == {t.name for t in ARCHS["sd1"].tasks}
    assert "negative_prompt" not in flux and "width" not in audio and audio["duration"]["max"] == 600
    assert audio["duration"]["exclusive_min"] and "init_img" in sd1 and "ctrl_img" not in sd1
    assert rows["qwen_image"]["negative_prompt_default"] == " " and rows["sdxl"]["negative_prompt_default"] is None


def test_resolve_answers_the_task_and_the_field_a_generate_would(eng):
    r = eng.client.post("/resolve", json={"model": _model(), "sample": {"init_img": "present", "seed": -1}})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["task"] == "img2img" == out["sample"]["task"] and out["sample"]["seed"] == -1
    assert out["sample"]["strength"] == ARCHS["sd1"].task("img2img").strength and out["model"]["arch"] == "sd1"
    r = eng.client.post("/resolve", json={"model": _model(), "sample": {"init_img": "present", "strength": 0.01,
                                                                        "num_inference_steps": 10}})
    assert r.status_code == 422 and r.json()["field"] == "sample.strength", r.text
    r = eng.client.post("/resolve", json={"model": _model(), "sample": {"batch_size": 13}})
    assert r.status_code == 422 and r.json()["field"] == "sample.batch_size", "the engine's limit, as /generate's"
    assert eng.client.post("/resolve", json={"model": _model(), "sample": {"batch_size": 12}}).status_code == 200


# -- the pipeline's own defaults --------------------------------------------------------------------

def test_sdxl_with_no_negative_prompt_equals_the_bare_pipeline(tiny):
    """SDXL's config zeroes the negative embedding only for a None negative prompt
    (force_zeros_for_empty_prompt): an omitted one must reach the pipeline as None, not ""."""
    from diffusers import DiffusionPipeline

    folder = tiny("sdxl")
    holder = get_model_class("sdxl")({"arch": "sdxl", "name_or_path": folder, "local_only": True}, device="cpu")
    holder.load_model()
    assert holder.pipeline.config.force_zeros_for_empty_prompt
    sample = {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 5.0, "seed": 3}
    gen = GenerateImageConfig.from_dict(sample, holder.model_config)
    assert gen.negative_prompt is None and "negative_prompt" not in holder.pipeline_kwargs(gen)
    ours = np.asarray(holder.generate_single(gen), dtype=np.int64)
    bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    theirs = bare(prompt="a fox", width=64, height=64, num_inference_steps=2, guidance_scale=5.0,
                  generator=torch.Generator("cpu").manual_seed(3)).images[0]
    assert np.array_equal(ours, np.asarray(theirs, dtype=np.int64))
    empty = holder.generate_single(GenerateImageConfig.from_dict({**sample, "negative_prompt": ""}, holder.model_config))
    assert not np.array_equal(ours, np.asarray(empty, dtype=np.int64)), "an empty negative prompt is another request"


def test_every_engine_setting_and_limit_is_documented():
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    missing = [f"engine.{f.name}" for f in dataclasses.fields(EngineSettings) if f"`engine.{f.name}`" not in text]
    missing += [f"engine.limits.{f.name}" for f in dataclasses.fields(Limits) if f"{f.name}" not in text]
    assert not missing, f"docs/configuration.md does not list {missing}"
