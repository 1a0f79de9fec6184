"""The supervised generation worker in its own process (these tests are about processes): a stuck
step is cut off after the grace period and the queue goes on on a fresh worker; a crashing worker
is replaced the same way; a cancel the worker honours costs no restart; a stop ends everything
whatever the worker does; the engine's own process never imports torch."""
import json
import os
import subprocess
import sys
import threading

import pytest

from extensions_built_in.inference_engine.engine import Engine, Subscriber
from extensions_built_in.inference_engine.worker import Faults

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _model(tiny):
    return {"arch": "zimage", "name_or_path": tiny("zimage")}


def _sample(steps=3, seed=1):
    return {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": steps, "seed": seed}


def _on_progress(req, step, action):
    """Run `action()` once when progress `step` of `req` is published (on the engine's thread)."""
    fired = threading.Event()

    lock = threading.Lock()

    def deliver(frame, _latent):
        header = json.loads(frame[4:4 + int.from_bytes(frame[:4], "little")])
        if header["type"] == "progress" and header["step"] == step:
            with lock:
                if fired.is_set():
                    return
                fired.set()
            action()
    for frame in req.attach(Subscriber(deliver)):        # it may have passed the step already
        deliver(frame, False)
    return fired


@pytest.fixture
def running(tmp_path):
    """An engine with a process worker, its loop on a thread; stopped at the end."""
    engines = []

    def make(**kw):
        # one request per call: these tests are about the request a fault hits and the queue behind it
        # (a fault inside a dynamic batch: test_batching.py)
        kw.setdefault("max_batch", 1)
        eng = Engine(output_folder=str(tmp_path / "out"), worker="process", **kw)
        eng.start_worker()
        t = threading.Thread(target=eng.run_forever, daemon=True, name="engine-loop")
        t.start()
        engines.append((eng, t))
        return eng
    yield make
    for eng, t in engines:
        eng.stop()
        t.join(60)
        assert not t.is_alive(), "the engine loop did not end after stop()"


def test_stuck_step_is_cut_off_and_the_queue_goes_on(running, tiny):
    eng = running(grace_seconds=1.0, faults=Faults(stuck_step=1))
    first_pid = eng.worker.pid
    stuck = eng.submit(_model(tiny), _sample(), request_id="stuck")
    _on_progress(stuck, 1, lambda: eng.cancel("stuck"))
    after = eng.submit(_model(tiny), _sample(seed=2), request_id="after")
    assert stuck.done_event.wait(120) and after.done_event.wait(120)
    assert stuck.status == "error" and "did not stop within 1 s" in stuck.error and "restarted" in stuck.error
    assert not stuck.results and not [n for n in os.listdir(eng.output_folder) if n.startswith("stuck")]
    assert after.status == "ok", after.error
    health = eng.health()
    assert health["worker"]["restarts"] == 1 and health["worker"]["pid"] != first_pid
    assert "not honoured" in health["worker"]["last_exit"]
    frames = [f for _t, f in stuck.history]
    assert frames[-1][4:17] == b'{"type":"end"' and b'"status":"error"' in frames[-1]


def test_a_crashed_worker_is_replaced(running, tiny):
    eng = running(faults=Faults(crash_step=1))
    crash = eng.submit(_model(tiny), _sample(), request_id="crash")
    after = eng.submit(_model(tiny), _sample(), request_id="after")
    assert crash.done_event.wait(120) and after.done_event.wait(120)
    assert crash.status == "error" and "exited with code 70" in crash.error, crash.error
    assert after.status == "ok", after.error
    assert eng.health()["worker"]["last_exit"] == "exited with code 70"


def test_an_honoured_cancel_costs_no_restart(running, tiny):
    eng = running(faults=Faults(hold_step=1))        # step 1 lasts until the cancel arrives
    req = eng.submit(_model(tiny), _sample(steps=6), request_id="c")
    _on_progress(req, 1, lambda: eng.cancel("c"))
    assert req.done_event.wait(120)
    assert req.status == "cancelled", req.error
    assert eng.health()["worker"]["restarts"] == 0
    again = eng.submit(_model(tiny), _sample(), request_id="again")
    assert again.done_event.wait(120) and again.status == "ok"


def test_stop_while_a_step_is_stuck(tmp_path, tiny):
    eng = Engine(output_folder=str(tmp_path / "out"), worker="process", grace_seconds=600,
                 faults=Faults(stuck_step=1))
    eng.start_worker()
    loop = threading.Thread(target=eng.run_forever, daemon=True)
    loop.start()
    req = eng.submit(_model(tiny), _sample(), request_id="s")
    fired = _on_progress(req, 1, lambda: None)
    assert fired.wait(120)
    worker = eng.worker
    eng.stop()                        # the worker ignores it; the engine kills it after STOP_SECONDS
    loop.join(60)
    assert not loop.is_alive() and not worker.alive()
    assert req.status in ("error", "cancelled")


def test_the_engine_process_never_imports_torch(tiny, tmp_path):
    code = f"""
import sys
sys.path.insert(0, {ROOT!r})
from extensions_built_in.inference_engine.engine import Engine
eng = Engine(output_folder={str(tmp_path / "out")!r}, worker="process")
eng.start_worker()
import threading
t = threading.Thread(target=eng.run_forever, daemon=True); t.start()
req = eng.submit({{"arch": "zimage", "name_or_path": {tiny("zimage")!r}}},
                 {{"prompt": "x", "width": 64, "height": 64, "num_inference_steps": 2}})
req.done_event.wait(120)
eng.stop(); t.join(60)
print(req.status, sorted(m for m in ("torch", "diffusers", "transformers") if m in sys.modules))
"""
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split("\n")[-2] == "ok []", p.stdout
