"""Placement end to end through the engine, on a simulated device (the worker's Faults.device_mb / host_mb:
a fake mem_get_info of that size): `auto` plans the fastest placement that fits, /health and the job log
say it, the staged path runs, an out-of-memory while sampling is retried once with the next lighter
placement (announced), a request that fits nowhere is a 422 before it is queued, and every output is the
resident one bit for bit.

The tiny FLUX (64x64, float32 on the CPU) the numbers below are for: text_encoder 180864 bytes,
text_encoder_2 123520, vae 289388, transformer 541184 (4 blocks); activation floors: denoise 331776,
decode 4247552. With engine.reserve_gb 0 the device peaks are: resident 5382508; encoders in cpu_cache
5078124 (the decode stage: transformer and VAE resident); cpu_cache 4536940 (the VAE and the decode
activations); staged the same, keeping at most the transformer (541184) in host memory.
"""
import os
import re

import numpy as np
import pytest
from PIL import Image

from extensions_built_in.inference_engine.worker import Faults
from testing.engine_client import InProcessEngine
from toolkit.config_modules import ModelConfig
from toolkit.errors import ConfigError

MiB = 1 << 20
HOST_RESERVE_MB = 1024          # toolkit/placement.HOST_RESERVE


def _body(tiny, **model):
    return {"model": {"arch": "flux", "name_or_path": tiny("flux"), **model},
            "sample": {"prompt": "a lighthouse at dusk", "width": 64, "height": 64, "num_inference_steps": 2, "seed": 3}}


def _pixels(frames) -> np.ndarray:
    result = next(h for h, _ in frames if h["type"] == "result")
    return np.asarray(Image.open(result["path"]))


def _engine(tmp_path, name, **faults):
    return InProcessEngine(str(tmp_path / name), faults=Faults(**faults), reserve_gb=0)


@pytest.fixture(scope="module")
def reference(tiny, tmp_path_factory):
    """The resident output on a plain CPU engine (nothing planned)."""
    eng = InProcessEngine(str(tmp_path_factory.mktemp("reference")))
    try:
        frames = eng.client.stream(_body(tiny))
        assert eng.client.health()["active"]["placement"]["rung"] == "resident"
        return _pixels(frames)
    finally:
        eng.close()


@pytest.mark.parametrize("device_mb, rung", [(5.25, "resident"), (5.0, "encoders in cpu_cache"), (4.5, "cpu_cache")])
def test_auto_takes_the_fastest_placement_that_fits(tiny, tmp_path, reference, device_mb, rung):
    eng = _engine(tmp_path, "e", device_mb=device_mb)
    try:
        frames = eng.client.stream(_body(tiny))
        assert frames[-1][0]["status"] == "ok"
        assert np.array_equal(_pixels(frames), reference)
        health = eng.client.health()
        plan = health["active"]["placement"]
        assert plan["rung"] == rung and plan["device_peak"] <= plan["device_budget"] == int(device_mb * MiB)
        assert set(plan["placement"]) == {"text_encoder", "text_encoder_2", "vae", "transformer"}
        assert health["memory"]["simulated"] and health["memory"]["total"] == int(device_mb * MiB)
        entries = {e["role"]: e for e in health["pool"]["entries"] if e["bytes"]}
        assert {r: e["placement"] for r, e in entries.items()} == plan["placement"]
    finally:
        eng.close()


def test_the_staged_path_when_host_memory_is_short(tiny, tmp_path, reference, capsys):
    """4.5 MiB of device and 0.7 MiB of host memory (past its reserve): no cpu_cache copies fit, so every
    component is staged, read from its files at its stage and released after."""
    eng = _engine(tmp_path, "staged", device_mb=4.5, host_mb=HOST_RESERVE_MB + 0.7)
    try:
        first = eng.client.stream(_body(tiny))
        second = eng.client.stream(_body(tiny))
        health = eng.client.health()
    finally:
        eng.close()
    assert np.array_equal(_pixels(first), reference) and np.array_equal(_pixels(second), reference)
    plan = health["active"]["placement"]
    assert plan["rung"] == "staged" and set(plan["placement"].values()) == {"staged"}
    assert plan["host_need"] == 541184 <= plan["host_budget"]
    entries = [e for e in health["pool"]["entries"] if e["bytes"]]
    assert entries and all(e["at_rest"] == "none" and e["device"] == "meta" for e in entries)   # nothing held
    assert health["memory"]["used"] == 0
    load = [line for line in capsys.readouterr().out.splitlines() if line.startswith("load ")]
    assert len(load) == 1 and (" placement text_encoder=staged text_encoder_2=staged vae=staged transformer=staged "
                               "components ") in load[0], load
    assert load[0].endswith(f" for request {first[0][0]['request_id']}"), load


def test_out_of_memory_while_sampling_retries_once_lighter(tiny, tmp_path, reference, capsys):
    eng = _engine(tmp_path, "oom", device_mb=5.0)
    try:
        eng.engine.faults.reset(sample_oom=1)
        frames = eng.client.stream(_body(tiny))
        retried = eng.client.health()["active"]["placement"]["rung"]
        again = eng.client.stream(_body(tiny))         # plans again from free memory
        after = eng.client.health()["active"]["placement"]["rung"]
    finally:
        eng.close()
    rid = frames[0][0]["request_id"]
    statuses = [h for h, _ in frames if h["type"] == "status"]
    retry = [h for h in statuses if h["stage"] == "retry"]
    assert len(retry) == 1
    assert re.fullmatch(r"out of memory in the sampling stage of flux-seed0; retrying once with placement "
                        r"text_encoder=cpu_cache text_encoder_2=cpu_cache vae=cpu_cache transformer=cpu_cache "
                        r"\(cpu_cache\)", retry[0]["message"]), retry[0]["message"]
    assert frames[-1][0]["status"] == "ok" and np.array_equal(_pixels(frames), reference)
    assert retried == "cpu_cache" and after == "encoders in cpu_cache"
    assert np.array_equal(_pixels(again), reference)
    log = capsys.readouterr().out
    assert f"retry {rid} out of memory in the sampling stage of flux-seed0; retrying once" in log


def test_out_of_memory_with_nothing_lighter_is_an_error_naming_the_stage(tiny, tmp_path):
    eng = _engine(tmp_path, "oom2", device_mb=4.5)       # cpu_cache already: nothing lighter lowers the peak
    try:
        eng.engine.faults.reset(sample_oom=1)
        frames = eng.client.stream(_body(tiny))
    finally:
        eng.close()
    error = next(h for h, _ in frames if h["type"] == "error")
    assert error["message"].startswith("out of memory in the sampling stage of flux-seed0: ")
    assert not [h for h, _ in frames if h.get("stage") == "retry"]


def test_a_plan_that_fits_nowhere_is_a_422_before_it_is_queued(tiny, tmp_path):
    """4.1 MiB: the activations fit (the floor's own pre-flight passes) but not with the VAE beside them."""
    eng = _engine(tmp_path, "refuse", device_mb=4.1)
    try:
        r = eng.client.post("/generate", json=_body(tiny))
        queue = eng.client.get("/queue").json()
        asked = eng.client.post("/generate", json=_body(tiny, placement={"transformer": "resident"}))
    finally:
        eng.close()
    assert r.status_code == 422 and r.json()["field"] == "model"
    detail = r.json()["detail"]
    assert detail.startswith("model: vae (283 KiB) does not fit") and "the decode stage needs 4.3 MiB" in detail
    assert "the device's 4.1 MiB budget (4.1 MiB in total less engine.reserve_gb 0 KiB)" in detail
    assert queue["queued"] == [] and queue["running"] is None
    assert asked.status_code == 422 and asked.json()["field"] == "model.placement"


def test_explicit_placements_are_kept_and_loras_are_never_staged(tiny, tmp_path, reference):
    eng = _engine(tmp_path, "explicit", device_mb=64)
    try:
        frames = eng.client.stream(_body(tiny, placement={"text_encoder_2": "staged", "transformer": {"layers": 2}}))
        plan = eng.client.health()["active"]["placement"]
    finally:
        eng.close()
    assert np.array_equal(_pixels(frames), reference)
    assert plan["placement"] == {"text_encoder": "resident", "text_encoder_2": "staged", "vae": "resident",
                                 "transformer": "layers"} and plan["groups"] == {"transformer": 2}
    lora = os.path.join(tiny("flux"), "model_index.json")          # any file: LoraRef checks it exists
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict({"arch": "flux", "name_or_path": tiny("flux"), "placement": "staged",
                               "loras": [{"path": lora}]})
    assert e.value.key == "model.placement" and "LoRA" in e.value.message
