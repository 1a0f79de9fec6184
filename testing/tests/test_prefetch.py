"""Prefetch (extensions_built_in/inference_engine/prefetch.py): while a request samples, the next
model's missing components are read into the pool, so its swap loads nothing on the request's own
path (pool counters), with the same output as without; a prefetch beyond the memory budget is
skipped; one that fails leaves the next request to load (and succeed) on its own; the engine sends
the hint when the queue's next request runs another model."""
import threading

import pytest

from extensions_built_in.inference_engine import messages as m
from extensions_built_in.inference_engine.engine import Engine
from extensions_built_in.inference_engine.worker import WorkerCore
from toolkit.config_modules import ModelConfig
from toolkit.models.tiny import make_shared_pair
from testing.tiny_runs import run_message

STREAM = {"latents": "none", "every_n_steps": 1, "max_frames": 4, "preview": "x0", "detach": False}
SAMPLE = {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2, "seed": 5}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("prefetch_pair")
    a, b = make_shared_pair("zimage", root / "a", root / "b")
    return {"arch": "zimage", "name_or_path": str(a)}, {"arch": "zimage", "name_or_path": str(b)}


def _run(core, model, out, rid="r"):
    done = []
    core.emit = lambda msg: done.append(msg) if isinstance(msg, m.Done) else None
    core.run(run_message(rid, model, SAMPLE, str(out), STREAM))
    assert done[-1].status == "ok", done[-1]
    return out.read_bytes()


def test_swap_after_prefetch_loads_nothing_on_the_request_path(pair, tmp_path):
    a, b = pair
    core = WorkerCore(lambda msg: None)
    core.prefetch(ModelConfig.from_dict(b))                       # arrives before a runs: waits for a's sampling
    _run(core, a, tmp_path / "a.png")
    assert core.prefetcher.wait(120)
    stats = core.prefetcher.stats()
    assert stats["done"] == 1 and stats["loads"] == 1 and stats["bytes"] > 0   # b's own transformer
    loads, misses = core.pool.loads, core.pool.misses
    out = _run(core, b, tmp_path / "b.png")
    assert (core.pool.loads, core.pool.misses) == (loads, misses)
    fresh = WorkerCore(lambda msg: None, prefetch=False)
    assert out == _run(fresh, b, tmp_path / "b_plain.png")


def test_prefetch_beyond_the_budget_is_skipped(pair, tmp_path):
    a, b = pair
    core = WorkerCore(lambda msg: None)
    core.prefetcher.free_memory = lambda device: core.prefetcher.margin_bytes + 1000   # 1000 bytes to spare
    _run(core, a, tmp_path / "a.png")
    core.prefetch(ModelConfig.from_dict(b))                       # between requests: pending until the next sampling
    loads = core.pool.loads
    _run(core, a, tmp_path / "a2.png")
    assert core.prefetcher.wait(120)
    stats = core.prefetcher.stats()
    assert stats["skipped"] == 1 and stats["loads"] == 0 and stats["last"]["need"] > 1000
    assert core.pool.loads == loads
    _run(core, b, tmp_path / "b.png")
    assert core.pool.loads == loads + 1    # b loaded its transformer itself


def test_failed_prefetch_does_not_break_the_next_request(pair, tmp_path):
    a, b = pair
    core = WorkerCore(lambda msg: None)
    core.prefetch(ModelConfig.from_dict({"arch": "zimage", "name_or_path": str(tmp_path / "missing")}))
    _run(core, a, tmp_path / "a.png")
    assert core.prefetcher.wait(120)
    stats = core.prefetcher.stats()
    assert stats["failed"] == 1 and "missing" in core.prefetcher.last_error
    assert stats["last"]["error"] == "ComponentLoadError" and "missing" not in repr(stats)    # no paths
    core.prefetch(ModelConfig.from_dict({"arch": "zimage", "name_or_path": str(tmp_path / "gone")}))
    _run(core, b, tmp_path / "b.png")
    assert core.prefetcher.wait(120) and core.prefetcher.stats()["failed"] == 2


def test_a_build_for_another_model_stops_the_prefetch_and_keeps_it_pending(pair, tmp_path):
    a, b = pair
    core = WorkerCore(lambda msg: None)
    _run(core, a, tmp_path / "a.png")
    release = threading.Event()
    started = threading.Event()
    original = core.prefetcher._plan

    def slow_plan(model):                  # hold the prefetch until the build has asked it to stop
        started.set()
        release.wait(60)
        return original(model)
    core.prefetcher._plan = slow_plan
    core.prefetch(ModelConfig.from_dict(b))
    with core.prefetcher.sampling():
        assert started.wait(60)
    threading.Timer(0, lambda: (core.prefetcher._stop.wait(60), release.set())).start()
    core._build_holder(core.active_config.__class__.from_dict(a), None)   # a build for a: stops b's
    st = core.prefetcher.stats()
    assert st["stopped"] == 1 and st["loads"] == 0
    core.prefetcher._plan = original
    _run(core, a, tmp_path / "a3.png")     # its sampling resumes b's prefetch
    assert core.prefetcher.wait(120) and core.prefetcher.stats()["done"] == 1


def test_engine_sends_the_next_models_prefetch(pair, tmp_path):
    a, b = pair
    eng = Engine(output_folder=str(tmp_path / "out"), worker="thread")
    eng.start_worker()
    first = eng.submit(a, SAMPLE)
    second = eng.submit(b, SAMPLE)
    loop = threading.Thread(target=eng.run_forever, daemon=True)
    loop.start()
    try:
        assert first.done_event.wait(120) and second.done_event.wait(120)
        assert first.status == second.status == "ok"
        state = eng.worker_state
        assert state.prefetch["requests"] == 1 and state.prefetch["done"] == 1
        # the request path loaded a's five components; b's transformer came through the prefetch
        assert state.pool["loads"] - state.prefetch["loads"] == 5 and state.prefetch["loads"] == 1
        assert eng.health()["prefetch"]["done"] == 1
    finally:
        eng.stop()
        loop.join(30)
