"""`model.attention` (toolkit/attention.py): the denoiser's attention kernel, through diffusers' dispatcher.

- the table is diffusers' own: every AttentionBackendName has a row, and each row's dtype and hub facts are
  the ones diffusers registers;
- an arch row's `attention_backends` is what its tiny denoiser's processors do (every row: test_arch_contract);
- every backend that runs on this CPU gives the denoiser's output (float32 latents after 2 steps) within
  ATOL of native's, and it is the backend that ran, for every attention call; the processors of the
  shared denoiser have exactly what they had afterwards; auto on CPU is native;
- a backend that is not installed or runs on another device, or any but auto/native on a denoiser that
  calls SDPA itself, is a 422 naming model.attention through the real server, listing what is available;
- switching attention between requests on the resident model rebuilds no holder and loads nothing.
"""
import collections
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from extensions_built_in.inference_engine.worker import WorkerCore
from testing.engine_client import InProcessEngine
from toolkit import attention
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError
from toolkit.models.base_model import get_model_class
from toolkit.models.registry import ARCHS
from toolkit.models.tiny import _quiet_libraries
from toolkit.models.tiny.kit import Build

ATOL = 1e-4        # float32 latents after 2 steps; measured differences are 0 to 2.5e-6
CPU_BACKENDS = ("native_math", "native_flash", "flex")     # what runs on a CPU besides native (all tried)
ROOT = __file__.rsplit("/testing/", 1)[0]


def _gen(arch):
    return GenerateImageConfig.from_dict({"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2,
                                          "seed": 7}, arch)


def _holder(tiny, arch, name="auto"):
    mc = ModelConfig.from_dict({"arch": arch, "name_or_path": tiny(arch), "attention": name})
    return get_model_class(arch)(mc).load_model()


@pytest.fixture
def calls(monkeypatch):
    """Counts, per diffusers backend, the attention calls the dispatcher hands it (every backend wrapped)."""
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry as registry

    counts = collections.Counter()
    for backend, fn in list(registry._backends.items()):
        def counted(*args, _fn=fn, _name=backend.value, **kwargs):
            counts[_name] += 1
            return _fn(*args, **kwargs)
        monkeypatch.setitem(registry._backends, backend, counted)
    return counts


def _left_alone(holder) -> bool:
    """No denoiser processor keeps a backend of its own, and the process-wide default is diffusers' native."""
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry as registry

    procs = [p for role in holder.spec.denoiser_roles
             for p in attention.dispatching_processors(holder.pipeline.components.get(role))]
    return bool(procs) and all("_attention_backend" not in vars(p) for p in procs) and \
        registry._active_backend.value == "native"


# -- the table ------------------------------------------------------------------------------------------

def test_the_table_is_diffusers_own():
    from diffusers.models import attention_dispatch as ad

    assert {b.diffusers for b in attention.BACKENDS.values()} == {b.value for b in ad.AttentionBackendName}
    for name, b in attention.BACKENDS.items():
        backend = ad.AttentionBackendName(b.diffusers)
        checks = {getattr(c, "__name__", "") for c in ad._AttentionBackendRegistry._constraints[backend]}
        assert b.half == ("_check_qkv_dtype_bf16_or_fp16" in checks), name
        assert b.bf16 == ("_check_qkv_dtype_bf16" in checks), name
        assert b.hub == (backend in ad._HUB_KERNELS_REGISTRY), name
        assert name == b.diffusers.lstrip("_") and attention.canonical(b.diffusers) == name


def test_names_aliases_and_the_default():
    mc = ModelConfig.from_dict({"arch": "flux", "name_or_path": "tiny:flux"})
    assert mc.attention == "auto" and ModelConfig.describe()["attention"]["choices"][0] == "auto"
    for given, stored in (("sdpa", "native"), ("_native_math", "native_math"), ("flash3", "flash_3"), ("flex", "flex")):
        named = ModelConfig.from_dict({"arch": "flux", "name_or_path": "tiny:flux", "attention": given})
        assert named.attention == stored
    for bad in ("eager", "FLASH", 3):
        with pytest.raises(ConfigError) as e:
            ModelConfig.from_dict({"arch": "flux", "name_or_path": "tiny:flux", "attention": bad})
        assert e.value.key == "model.attention"
    # not part of the holder's identity: switched per call on the resident model
    assert mc.without_loras() == named.without_loras() and mc != named
    assert attention.resolve("auto", "cpu") == attention.resolve("auto", "cuda:1") == "native"


@pytest.mark.parametrize("arch", ["sd1", "sd3", "flux", "hunyuan_video", "sana_video", "glm_image"])
def test_a_rows_attention_backends_is_what_its_denoiser_does(arch):
    """True exactly where a tiny denoiser of the row has processors that call dispatch_attention_fn (some
    alongside processors that call SDPA: HunyuanVideo's token refiner, Sana-Video's linear attention; GLM-Image's
    AR denoiser is a transformers model). test_arch_contract checks every row so."""
    spec = ARCHS[arch]
    _quiet_libraries()
    components = spec.tiny.build(Build(spec, 0, 0))
    dispatches = any(attention.dispatching_processors(components.get(role)) for role in spec.denoiser_roles)
    assert spec.attention_backends == dispatches


def test_the_check_is_torch_free():
    """What the HTTP process runs: the table, the availability probe and the check import no torch."""
    code = ("import sys, json\n"
            "from toolkit import attention\n"
            "from toolkit.config_modules import ModelConfig\n"
            "mc = ModelConfig.from_dict({'arch': 'flux', 'name_or_path': 'tiny:flux', 'attention': 'flex'})\n"
            "attention.check(mc, 'cpu')\n"
            "heavy = sorted(m for m in ('torch', 'diffusers') if m in sys.modules)\n"
            "print(json.dumps([attention.available('cpu'), heavy]))")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    names, heavy = json.loads(p.stdout.strip().splitlines()[-1])
    assert names == ["auto", "native", *CPU_BACKENDS] and heavy == []


# -- through the holder ---------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["flux", "zimage"])
def test_each_cpu_backend_matches_native(arch, tiny, calls):
    native = _holder(tiny, arch, "native")
    ref = native.generate_single(_gen(arch), output_type="latent")
    assert set(calls) == {"native"} and _left_alone(native)
    for name in CPU_BACKENDS:
        calls.clear()
        holder = _holder(tiny, arch, name)
        out = holder.generate_single(_gen(arch), output_type="latent")
        assert set(calls) == {attention.BACKENDS[name].diffusers}, f"{name}: every call ran it ({dict(calls)})"
        assert torch.allclose(out, ref, atol=ATOL, rtol=0), f"{name}: {(out - ref).abs().max().item()}"
        assert _left_alone(holder), f"{name} stayed on the shared denoiser"


def test_auto_on_cpu_is_native(tiny, calls):
    holder = _holder(tiny, "zimage")
    assert holder.model_config.attention == "auto" and attention.available("cpu")[:2] == ["auto", "native"]
    holder.generate_single(_gen("zimage"), output_type="latent")
    assert set(calls) == {"native"} and calls["native"] > 0 and _left_alone(holder)


def test_the_holder_refuses_what_it_cannot_run(tiny):
    """A holder made without the engine (the CLI, a job) checks again where it runs: before any step."""
    for arch, name, words in (("zimage", "flash", "runs on cuda only"),
                              ("sd1", "flex", "scaled_dot_product_attention")):
        holder = _holder(tiny, arch, name)
        steps = []
        with pytest.raises(ConfigError) as e:
            holder.generate_single(_gen(arch), on_step=lambda *a: steps.append(a))
        assert e.value.key == "model.attention" and words in e.value.message and not steps
    assert np.asarray(_holder(tiny, "sd1", "native").generate_single(_gen("sd1"))).shape == (64, 64, 3)


# -- the resident model ---------------------------------------------------------------------------------

def test_switching_attention_rebuilds_no_holder_and_loads_nothing(tiny, calls):
    worker = WorkerCore(lambda msg: None)
    folder = tiny("zimage")
    outs = {}
    for i, name in enumerate(("native", "flex", "native_math", "auto", "flex")):
        mc = ModelConfig.from_dict({"arch": "zimage", "name_or_path": folder, "attention": name})
        holder = worker._ensure_holder(mc, None)
        if i == 0:
            first, loads, misses, builds = holder, worker.pool.loads, worker.pool.misses, worker.builds
        calls.clear()
        outs[name] = holder.generate_single(_gen("zimage"), output_type="latent")
        assert set(calls) == {attention.BACKENDS[attention.resolve(name, "cpu")].diffusers}, name
        assert holder is first and holder.model_config.attention == name == holder.requested_config.attention
    assert (worker.pool.loads, worker.pool.misses, worker.builds) == (loads, misses, builds)
    assert torch.equal(outs["auto"], outs["native"]) and _left_alone(first)


# -- through the server ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def eng(tmp_path_factory):
    e = InProcessEngine(str(tmp_path_factory.mktemp("attention")))
    yield e
    e.close()


def test_what_cannot_run_here_is_a_422_naming_model_attention(eng):
    def post(path, arch, name):
        body = {"model": {"arch": arch, "name_or_path": f"tiny:{arch}", "attention": name},
                "sample": {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2}}
        return eng.client.post(path, json=body)

    available = "available here: auto, native, native_math, native_flash, flex"
    for path in ("/generate", "/resolve"):
        for name, words in (("flash", "runs on cuda only"), ("sage", "runs on cuda only"),
                            ("native_cudnn", "runs on cuda only"), ("xformers", "runs on cuda only")):
            r = post(path, "flux", name)
            assert r.status_code == 422 and r.json()["field"] == "model.attention", r.text
            assert words in r.text and available in r.text, r.text
        r = post(path, "sdxl", "native_math")
        assert r.status_code == 422 and r.json()["field"] == "model.attention" and "auto or native only" in r.text
    r = post("/resolve", "flux", "flash2")
    assert r.status_code == 422 and "flash runs on cuda only" in r.text, "an alias is refused by its name"
    for arch, name in (("flux", "flex"), ("flux", "_native_math"), ("sdxl", "native"), ("sd1", "auto")):
        r = post("/resolve", arch, name)
        assert r.status_code == 200 and r.json()["model"]["attention"] == attention.canonical(name), r.text
    rows = {row["name"]: row for row in eng.client.get("/models").json()["archs"]}
    assert rows["flux"]["attention"] == ["auto", "native", *CPU_BACKENDS] and rows["flux"]["attention_backends"]
    assert rows["sdxl"]["attention"] == ["auto", "native"] and not rows["sdxl"]["attention_backends"]


def test_a_device_the_packages_do_not_serve_is_named():
    """The probe (torch-free): CUDA-only kernels need their package there; half-precision ones a half dtype."""
    mc = lambda **kw: ModelConfig.from_dict({"arch": "flux", "name_or_path": "tiny:flux", **kw})
    with pytest.raises(ConfigError) as e:
        attention.check(mc(attention="sage"), "cuda")
    assert "needs the sageattention package" in e.value.message and "native_cudnn" in e.value.message
    with pytest.raises(ConfigError) as e:
        attention.check(mc(attention="native_cudnn", dtype="float32"), "cuda:0")
    assert "takes bfloat16 or float16 only, and model.dtype is float32" in e.value.message
    attention.check(mc(attention="native_cudnn"), "cuda")            # auto dtype: bf16 on CUDA
    attention.check(mc(attention="sage"), None)                      # no device known: the holder checks
    with pytest.raises(ConfigError):
        attention.check(mc(arch="sd3", name_or_path="tiny:sd3", attention="sage"), None)   # the arch's rule stands


def test_a_profile_sets_it_and_a_request_overrides_it(tiny, tmp_path):
    from toolkit.profiles import load_profiles
    from toolkit.request import resolve_request

    (tmp_path / "p.toml").write_text(f'[model_profiles.f]\narchitecture = "flux"\ncheckpoint = "{tiny("flux")}"\n'
                                     'attention = "_native_math"\n')
    prof = load_profiles(str(tmp_path / "p.toml"))
    assert resolve_request("f", {}, profiles=prof, device="cpu").model.attention == "native_math"
    work = resolve_request({"profile": "f", "attention": "flex"}, {}, profiles=prof, device="cpu")
    assert work.model.attention == "flex"
    with pytest.raises(ConfigError) as e:
        resolve_request({"profile": "f", "attention": "flash"}, {}, profiles=prof, device="cpu")
    assert e.value.key == "model.attention"
