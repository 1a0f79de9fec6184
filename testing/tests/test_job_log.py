"""The job log (joblog.py): the engine prints one line per request, model load, eviction, LoRA load
and worker restart to the job process's stdout. An in-process engine (the worker on a thread) with
its stdout captured; every wait is on a request's done_event, and the lines are printed before it is
set (the load's before the Done, from the worker's State)."""
import re

from extensions_built_in.inference_engine import joblog
from extensions_built_in.inference_engine import messages as m
from testing.engine_client import InProcessEngine
from testing.fixtures import make_tiny_lora
from toolkit.config_modules import ModelConfig

PROMPT = "a lighthouse on a cliff at dusk, long exposure, waves crashing below, seagulls, film grain"


def _lines(out: str, word: str) -> list:
    return [line for line in out.splitlines() if line.startswith(word + " ")]


def test_requests_loads_and_loras_are_logged(tiny, tmp_path, capsys):
    folder = tiny("zimage")
    name = folder.rstrip("/").rsplit("/", 1)[-1]
    lora = str(make_tiny_lora("zimage", folder, tmp_path / "style.safetensors", seed=1))
    eng = InProcessEngine(str(tmp_path / "engine"))
    model = {"arch": "zimage", "name_or_path": folder}
    sample = {"prompt": PROMPT, "width": 64, "height": 64, "num_inference_steps": 2, "seed": 1}
    try:
        ok = eng.engine.submit(model, sample, request_id="log-ok")
        assert ok.done_event.wait(300) and ok.status == "ok"

        eng.engine.faults.reset(sample_oom=1)
        err = eng.engine.submit(model, sample, request_id="log-err")
        assert err.done_event.wait(300) and err.status == "error"

        eng.engine.faults.reset(hold_step=1)      # held until the cancel lands, if it started at all
        try:
            held = eng.engine.submit(model, sample, request_id="log-cancel")
            assert eng.client.post("/cancel/log-cancel").status_code == 200
            assert held.done_event.wait(300) and held.status == "cancelled"
        finally:
            eng.engine.faults.reset(hold_step=0)

        styled = eng.engine.submit({**model, "loras": [{"path": lora}]}, sample, request_id="log-lora")
        assert styled.done_event.wait(300) and styled.status == "ok"
    finally:
        eng.close()
    out = capsys.readouterr().out

    requests = {line.split()[1]: line for line in _lines(out, "request")}
    head = f"zimage {name} 64x64 2 steps"
    assert re.match(rf"request log-ok ok {re.escape(head)} \d+\.\d\ds prompt=", requests["log-ok"])
    # the seconds of each stage it went through, in order (stages.py)
    stages = re.search(r" stages ((?:\w+=\d+\.\d\ds ?)+)$", requests["log-ok"])
    assert stages, requests["log-ok"]
    assert [kv.split("=")[0] for kv in stages.group(1).split()] == ["queue", "load", "encode", "sample", "decode",
                                                                     "save"], requests["log-ok"]
    assert " stages " in requests["log-err"] and requests["log-err"].index(" stages ") < requests["log-err"].index(
        " error: ")
    assert f'prompt="{PROMPT[:60]}…"' in requests["log-ok"] and PROMPT not in out    # 60 characters only
    assert requests["log-err"].startswith(f"request log-err error {head}")
    assert "error: out of memory" in requests["log-err"]
    assert requests["log-cancel"].startswith(f"request log-cancel cancelled {head}")
    assert "cancelled by POST /cancel" in requests["log-cancel"]

    loads = _lines(out, "load")
    assert len(loads) == 1, out           # built once; later requests reuse the holder
    got = re.match(rf"load zimage {re.escape(name)} (\d+) bytes \d+\.\d\ds pool hits \d+ misses (\d+) "
                   r"placement text_encoder=resident vae=resident transformer=resident "
                   r"components ((?:\w+=\d+\.\d\ds ?)+) for request log-ok$", loads[0])
    assert got and int(got.group(1)) > 0 and int(got.group(2)) > 0, loads[0]
    # each component read for it, with its seconds
    assert {"text_encoder", "vae", "transformer"} <= {kv.split("=")[0] for kv in got.group(3).split()}, loads[0]
    lora_lines = _lines(out, "lora")
    assert len(lora_lines) == 1 and re.match(r"lora load style\.safetensors \d+ bytes for request log-lora$",
                                             lora_lines[0]), lora_lines

    logged = [line for line in out.splitlines() if line.split(" ", 1)[0] in ("request", "load", "lora", "evict")]
    assert logged and not any(str(tmp_path) in line or folder in line for line in logged)
    assert not any(re.search(r"(^|[\s=\"'(])~?/[^\s/]+/", line) for line in logged), logged     # no absolute path at all


def _state(builds, entries, evictions=0):
    return m.State(active=ModelConfig(arch="sd1", name_or_path="/models/sd1/dreamshaper"), scheduler=None,
                   pool={"hits": 0, "misses": len(entries), "evictions": evictions, "loads": len(entries),
                         "loaded_bytes": sum(e["bytes"] for e in entries), "load_seconds": 1.5,
                         "entries": entries}, memory={}, builds=builds)


def test_evictions_and_restarts_are_logged():
    vae = {"key": "k1", "role": "vae", "class": "AutoencoderKL", "bytes": 100}
    unet = {"key": "k2", "role": "transformer", "class": "UNet2DConditionModel", "bytes": 900}
    before = _state(1, [vae, unet])
    assert joblog.state_lines(before, _state(1, [vae], evictions=1)) == [
        "evict transformer UNet2DConditionModel 900 bytes (memory)"]
    assert joblog.state_lines(before, _state(1, [])) == ["evict vae AutoencoderKL 100 bytes (released)",
                                                         "evict transformer UNet2DConditionModel 900 bytes (released)"]
    load = joblog.state_lines(_state(0, []), before, "r1")
    assert load == ["load sd1 dreamshaper 1000 bytes 0.00s pool hits 0 misses 2 for request r1"]
    assert joblog.state_lines(None, before) == []          # a fresh worker's first State: nothing to compare
    assert (joblog.worker_restart_line("died (exit code -9) while loading /models/sd1/dreamshaper/unet.safetensors")
            == "worker restart: died (exit code -9) while loading unet.safetensors")


def test_request_seconds_come_from_the_monotonic_clock():
    """A suspend/resume moves the wall clock, not the monotonic one: the log says the request's own time."""
    from types import SimpleNamespace
    req = SimpleNamespace(
        request_id="r1", status="ok", error=None, model=ModelConfig(arch="sd1", name_or_path="tiny:sd1"),
        sample=SimpleNamespace(width=256, height=256, num_inference_steps=10, prompt="a fox"),
        created_at=1000.0, started_at=1000.0, finished_at=1185.9,          # the wall clock: a 41.2 s suspend
        accepted_mono=50.0, started_mono=50.0, finished_mono=194.7,
        stages={"queue": 0.0, "load": 9.3, "encode": 0.2, "sample": 133.9, "decode": 1.0, "save": 0.3})
    line = joblog.request_line(req)
    assert " 144.70s " in line and "185.90s" not in line, line
    assert line.endswith(" stages queue=0.00s load=9.30s encode=0.20s sample=133.90s decode=1.00s save=0.30s"), line
