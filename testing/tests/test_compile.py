"""Compiled resident denoisers (toolkit/models/compiled.py, lora_slots.py): a compiled model's output stays
within float32 tolerance of eager; new sizes recompile a bounded, counted number of times; LoRAs switch in
hotswapped slots without recompiling; what a rule excludes runs eager, said in a status frame, never a
crash. One WorkerCore (its pool) runs every case here, so the tiny zimage transformer compiles once."""
import dataclasses
import os

import pytest
import torch

from extensions_built_in.inference_engine.worker import WorkerCore
from testing.fixtures import make_tiny_lora
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.models import compiled

ARCH = "zimage"
# compiled vs eager, float32 latents on this CPU: inductor fuses and reorders reductions (its own bound is
# a few ulps per op); measured here about 1e-6 of the latents' scale
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    cache = tmp_path_factory.mktemp("inductor")
    return WorkerCore(lambda msg: None, compile="off", compile_cache_dir=str(cache), compile_lora_rank=16)


@pytest.fixture(scope="module")
def files(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("compile_loras")
    folder = tiny(ARCH)
    return {"a": str(make_tiny_lora(ARCH, folder, root / "a.safetensors", seed=1, rank=4)),
            "b": str(make_tiny_lora(ARCH, folder, root / "b.safetensors", seed=2, rank=8)),
            "wide": str(make_tiny_lora(ARCH, folder, root / "wide.safetensors", seed=3, rank=32))}


def _mc(tiny, compile=None, loras=(), **kw):
    return ModelConfig.from_dict({"arch": ARCH, "name_or_path": tiny(ARCH), "compile": compile,
                                  "loras": list(loras), **kw})


def _run(core, mc, size=64, **sample):
    """(latents, [(message, stage)]) of one call through the core's holder."""
    holder = core._ensure_holder(mc, None)
    said = []
    gen = GenerateImageConfig.from_dict({"prompt": "a fox", "width": size, "height": size, "num_inference_steps": 2,
                                         "seed": 5, **sample}, ARCH)
    out = holder.generate_single(gen, on_status=lambda msg, stage="status": said.append((msg, stage)),
                                 output_type="latent")
    return out.detach().clone(), said


def _close(a, b):
    return float((a - b).abs().max() / b.abs().max()) < TOLERANCE


def _stages(said):
    return [stage for _m, stage in said]


def test_compiled_matches_eager_across_sizes_with_bounded_counted_compiles(core, tiny):
    eager = {size: _run(core, _mc(tiny, False), size)[0] for size in (64, 96, 128)}
    before = compiled.stats()
    got, said = _run(core, _mc(tiny, True), 64)
    assert "compiling" in _stages(said)                     # the first call after a load says so
    first = compiled.stats()
    assert first["compiles"] > before["compiles"] and first["modules"] == before["modules"] + 1
    assert _close(got, eager[64])
    again, said = _run(core, _mc(tiny, True), 64)
    assert "compiling" not in _stages(said)
    assert compiled.stats()["compiles"] == first["compiles"] and compiled.stats()["recompiles"] == first["recompiles"]
    assert torch.equal(again, got)
    for size in (96, 128):
        out, _said = _run(core, _mc(tiny, True), size)
        assert _close(out, eager[size])
    after = compiled.stats()
    graphs = after["compiles"] - before["compiles"]
    assert after["recompiles"] - first["recompiles"] <= graphs * compiled.RECOMPILE_LIMIT
    # a third size reuses the dynamic graphs the second one made: no recompile
    third = after["recompiles"]
    _run(core, _mc(tiny, True), 80)
    assert compiled.stats()["recompiles"] == third
    assert after["seconds"] > before["seconds"] and after["failed"] == 0


def test_the_same_module_serves_a_request_that_asks_for_eager(core, tiny):
    """The pool's module stays compiled; compile: false runs it eagerly (torch's force_eager stance)."""
    _run(core, _mc(tiny, True))
    holder = core.holder
    module = holder.loaded["transformer"]
    assert compiled.is_compiled(module)
    before, builds = compiled.stats(), core.builds
    out, _said = _run(core, _mc(tiny, False))
    assert core.holder.loaded["transformer"] is module          # the pool's entry: nothing reloaded
    assert core.builds == builds                                # compile is switched per request, as LoRAs are
    assert compiled.stats()["eager_calls"] == before["eager_calls"] + 1
    assert compiled.stats()["compiles"] == before["compiles"]


def test_lora_switches_hotswap_without_recompiling(core, tiny, files):
    eager = {name: _run(core, _mc(tiny, False, [{"path": files[name], "scale": scale}]))[0]
             for name, scale in (("a", 1.0), ("b", 0.7))}
    base = _run(core, _mc(tiny, False))[0]
    first, said = _run(core, _mc(tiny, True, [{"path": files["a"], "scale": 1.0}]))   # the slot: injected once
    assert "running eager" not in " ".join(m for m, _s in said)
    assert _close(first, eager["a"])
    _run(core, _mc(tiny, True))                   # and the adapters disabled: one more variant
    _run(core, _mc(tiny, True, [{"path": files["b"], "scale": 0.7}]))
    settled = compiled.stats()
    for name, scale in (("a", 1.0), ("b", 0.7), ("a", 1.0), ("b", 0.7)):
        out, _said = _run(core, _mc(tiny, True, [{"path": files[name], "scale": scale}]))
        assert _close(out, eager[name])
    none, _said = _run(core, _mc(tiny, True))
    assert _close(none, base)
    assert compiled.stats()["compiles"] == settled["compiles"]
    assert compiled.stats()["recompiles"] == settled["recompiles"]   # switches and scales: no recompile
    assert core.holder.model_config.loras == ()


def test_a_lora_over_the_rank_bound_runs_eager_and_says_so(core, tiny, files):
    mc = _mc(tiny, True, [{"path": files["wide"], "scale": 1.0}])
    eager = _run(core, dataclasses.replace(mc, compile=False))[0]
    before = compiled.stats()
    out, said = _run(core, mc)
    assert any("running eager" in msg and "rank 32" in msg for msg, _s in said)
    assert compiled.stats()["eager_calls"] == before["eager_calls"] + 1
    assert torch.equal(out, eager)


def test_a_step_cache_runs_eager_and_says_so(core, tiny):
    cache = {"type": "taylorseer", "cache_interval": 2, "disable_cache_before_step": 1}
    eager = _run(core, _mc(tiny, False), cache=cache, num_inference_steps=4)[0]
    out, said = _run(core, _mc(tiny, True), cache=cache, num_inference_steps=4)
    assert any("running eager" in msg and "step cache" in msg for msg, _s in said)
    assert torch.equal(out, eager)


def test_quantized_weights_are_excluded_by_rule(core, tiny):
    out, said = _run(core, _mc(tiny, True, quantize=True, qtype="qint8"))
    assert any("running eager" in msg and "quantized" in msg for msg, _s in said)
    assert out.isfinite().all()


# -- the engine as users run it: `python run.py`, its worker process, a restart --------------------------
def _engine(tmp_path, tiny_root, cache, name):
    from testing.engine_client import EngineProcess
    return EngineProcess(str(tmp_path / name), env={"AITK_TINY_CACHE": str(tiny_root), "HF_HUB_OFFLINE": "1"},
                         engine_extra={"compile": "on", "compile_cache_dir": str(cache)}).wait_ready()


def _generate(ep, size=64):
    body = {"model": {"arch": ARCH, "name_or_path": f"tiny:{ARCH}"},
            "sample": {"prompt": "a fox", "width": size, "height": size, "num_inference_steps": 2, "seed": 1}}
    frames = [h for h, _p in ep.client.stream(body)]
    assert frames[-1]["type"] == "end" and frames[-1]["status"] == "ok", frames[-1]
    return frames


def test_engine_compiles_reports_and_a_restart_reads_the_cache(tiny, tiny_root, tmp_path):
    tiny(ARCH)
    cache = tmp_path / "inductor"
    ep = _engine(tmp_path, tiny_root, cache, "first")
    try:
        frames = _generate(ep)
        assert any(h["type"] == "status" and h.get("stage") == "compiling" for h in frames)
        assert not any(h["type"] == "status" and h.get("stage") == "compiling" for h in _generate(ep))
        first = ep.client.health()["compile"]
        assert first["compiles"] > 0 and first["cache_misses"] > 0 and first["failed"] == 0
        metrics = ep.client.get("/metrics").text
        assert f"aitk_compiles_total {float(first['compiles'])}" in metrics
        assert "aitk_compile_seconds_total" in metrics
        bad = ep.client.post("/generate", json={"model": {"arch": ARCH, "name_or_path": f"tiny:{ARCH}",
                                                          "compile": "sometimes"}, "sample": {"prompt": "x"}})
        assert bad.status_code == 422 and "model.compile" in bad.text
    finally:
        ep.stop()
    assert os.listdir(cache)                        # inductor's cache, where engine.compile_cache_dir says
    again = _engine(tmp_path, tiny_root, cache, "second")
    try:
        _generate(again)
        restarted = again.client.health()["compile"]
        # the restarted engine's worker compiled the same graphs from the cache: nothing generated afresh
        assert restarted["compiles"] == first["compiles"]
        assert restarted["cache_hits"] > 0 and restarted["cache_misses"] == 0
    finally:
        again.stop()


@pytest.mark.parametrize("fmt", ["comfy_fp8", "gguf"])
def test_fp8_and_gguf_files_are_excluded_by_rule(core, tiny, tmp_path, fmt):
    from toolkit.models.tiny.comfy_fp8 import write_comfy_fp8
    from toolkit.models.tiny.gguf import make_tiny_gguf

    folder = tiny(ARCH)
    if fmt == "comfy_fp8":
        path = write_comfy_fp8(ARCH, folder, tmp_path / "fp8_scaled.safetensors")["path"]
    else:       # its own tiny pipeline, with a transformer wide enough for GGUF blocks
        made = make_tiny_gguf(ARCH, tmp_path / "gguf", qtypes=("Q8_0",))
        folder, path = str(made["folder"]), made["files"]["Q8_0"]
    mc = ModelConfig.from_dict({"arch": ARCH, "name_or_path": str(path), "extras_name_or_path": folder,
                                "compile": True, "local_only": True})
    out, said = _run(core, mc)
    assert any("running eager" in msg and "quantized" in msg for msg, _s in said)
    assert out.isfinite().all()


def test_auto_follows_the_measured_table(monkeypatch):
    """engine.compile auto compiles a denoiser class only where its measured gain on the device type reaches
    the bound: on the CPU none does (README's table), so auto there is eager."""
    from diffusers import UNet2DConditionModel

    unet = UNet2DConditionModel.__new__(UNet2DConditionModel)
    assert not compiled.wanted(None, "auto", "cpu", unet)
    assert compiled.wanted(None, "on", "cpu", unet) and not compiled.wanted(None, "off", "cpu", unet)
    assert compiled.wanted(True, "off", "cpu", unet) and not compiled.wanted(False, "on", "cpu", unet)
    assert all(g < compiled.AUTO_MIN_GAIN for g in compiled.MEASURED_GAIN["cpu"].values())
    monkeypatch.setitem(compiled.MEASURED_GAIN, "cuda", {"UNet2DConditionModel": 1.3})
    assert compiled.wanted(None, "auto", "cuda:0", unet) and not compiled.wanted(None, "auto", "cpu", unet)


def test_a_compile_that_fails_runs_the_graph_eagerly_and_says_why(monkeypatch):
    import torch._inductor.compile_fx as inductor

    def broken(gm, example_inputs):
        raise RuntimeError("no C++ compiler here")
    monkeypatch.setattr(inductor, "compile_fx", broken)
    module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 3))
    x = torch.randn(2, 8)
    expected = module(x)
    before = compiled.stats()
    state = compiled.ensure(module)
    assert state.kind == "whole" and compiled.ensure(module) is state
    with compiled.running([state]):
        got = module(x)
    assert torch.equal(got, expected)
    after = compiled.stats()
    assert after["failed"] == before["failed"] + 1 and "no C++ compiler here" in after["last_failure"]
    assert state.warm


@pytest.mark.parametrize("fmt", ["kohya", "comfyui"])
def test_lora_files_as_trainers_write_them_hotswap_with_their_alpha(core, tiny, tmp_path, fmt):
    """A kohya / ComfyUI file (alpha != rank, its own key names) swapped into a slot a PEFT file held:
    the same output as the ordinary adapters give it eagerly."""
    path = str(make_tiny_lora(ARCH, tiny(ARCH), tmp_path / f"{fmt}.safetensors", seed=4, rank=8, fmt=fmt))
    lora = [{"path": path, "scale": 0.8}]
    eager = _run(core, _mc(tiny, False, lora))[0]
    out, said = _run(core, _mc(tiny, True, lora))
    assert "running eager" not in " ".join(m for m, _s in said)
    assert _close(out, eager)
