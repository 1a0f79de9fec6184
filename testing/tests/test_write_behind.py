"""engine.write_behind: a finished call's files are encoded and written on the worker's writer thread while
the next queued request samples (worker.py, writer.py; the engine sends the next Run at `Released`). What
held before still holds: the worker's State comes before a request is seen to end, each request's result
frames before its Done, a cancel that lands while its file is written wins and leaves no file, and a worker
that dies fails the request whose file it was writing. Every wait here is on an event."""
import json
import os
import threading

import pytest

from extensions_built_in.inference_engine import messages as m
from extensions_built_in.inference_engine.engine import Engine, Subscriber
from extensions_built_in.inference_engine.worker import Faults, WorkerCore
from testing.engine_client import InProcessEngine
from testing.tiny_runs import run_message

WAIT = 120       # seconds an event may take on a loaded machine before the test fails (never a timing)


def _model(tiny):
    return {"arch": "zimage", "name_or_path": tiny("zimage")}


def _sample(seed=1):
    return {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2, "seed": seed}


def _when(req, match):
    """An Event set once a frame of `req` (its decoded header) satisfies `match`."""
    seen = threading.Event()

    def deliver(frame, _latent):
        header = json.loads(frame[4:4 + int.from_bytes(frame[:4], "little")])
        if match(header):
            seen.set()
    for frame in req.attach(Subscriber(deliver)):
        deliver(frame, False)
    return seen


def _types(req) -> list:
    return [json.loads(f[4:4 + int.from_bytes(f[:4], "little")]) for _t, f in req.history]


@pytest.fixture
def engine(tmp_path):
    made = []

    def make(**kw):
        eng = InProcessEngine(str(tmp_path / f"e{len(made)}"), max_batch=1, **kw)
        made.append(eng)
        return eng
    yield make
    for eng in made:
        eng.close()


def test_the_next_request_samples_while_the_file_is_written(tiny, engine, monkeypatch):
    """The first request's file is held until the second request has taken a step: without the overlap
    the second would never start, and the wait would fail."""
    import toolkit.media as media

    eng = engine().engine
    first = eng.submit(_model(tiny), _sample(1))
    second = eng.submit(_model(tiny), _sample(2))
    stepped = _when(second, lambda h: h["type"] == "progress")
    held = threading.Event()
    save = media.save_media

    def held_save(*args, **kwargs):
        if not held.is_set():
            held.set()
            assert stepped.wait(WAIT), "the next request never sampled while the file was written"
        return save(*args, **kwargs)
    monkeypatch.setattr(media, "save_media", held_save)
    assert first.done_event.wait(WAIT) and second.done_event.wait(WAIT)
    assert held.is_set() and stepped.is_set()
    for req in (first, second):
        assert req.status == "ok", req.error
        assert os.path.isfile(req.results[0]["path"])
        kinds = [h["type"] for h in _types(req)]
        assert kinds.index("result") < kinds.index("end")
        assert ("status", "saving") in [(h["type"], h.get("stage")) for h in _types(req)]


def test_a_cancel_while_the_file_is_written_behind_still_wins(tiny, engine):
    """The first request's file is held (Faults.hold_write) while the second samples; cancelling the first
    then ends it cancelled with no file, and the second is unaffected."""
    eng = engine(faults=Faults(hold_write=1)).engine
    first = eng.submit(_model(tiny), _sample(1))
    second = eng.submit(_model(tiny), _sample(2))
    assert _when(second, lambda h: h["type"] == "progress").wait(WAIT)
    assert not first.finished and first.released_at is not None and first.request_id in eng.writing
    assert eng.busy()
    eng.cancel(first.request_id)
    assert first.done_event.wait(WAIT) and second.done_event.wait(WAIT)
    assert first.status == "cancelled" and not first.results
    assert second.status == "ok" and os.path.isfile(second.results[0]["path"])
    assert not [n for n in os.listdir(eng.output_folder) if n.startswith(first.request_id)]
    assert eng.writing == {}


def test_a_worker_crash_fails_the_request_whose_file_it_was_writing(tiny, tmp_path):
    """A process worker holds the first request's file and crashes at the second's first step (step 3):
    both requests fail, and a fresh worker serves the next one."""
    eng = Engine(output_folder=str(tmp_path / "out"), worker="process", max_batch=1,
                 faults=Faults(hold_write=1, crash_step=3))
    eng.start_worker()
    loop = threading.Thread(target=eng.run_forever, daemon=True)
    loop.start()
    try:
        first = eng.submit(_model(tiny), _sample(1))
        second = eng.submit(_model(tiny), _sample(2))
        assert first.done_event.wait(WAIT) and second.done_event.wait(WAIT)
        assert first.status == "error" and "before the file was written" in first.error, first.error
        assert second.status == "error" and "generation worker" in second.error, second.error
        assert not [n for n in os.listdir(eng.output_folder) if not n.startswith(".")]
        third = eng.submit(_model(tiny), _sample(3))
        assert third.done_event.wait(WAIT) and third.status == "ok", third.error
        assert eng.worker_restarts == 1
    finally:
        eng.stop()
        loop.join(60)


def test_the_worker_says_released_after_its_state_and_ends_the_request_from_the_writer(tiny, tmp_path):
    out, done = [], threading.Event()

    def emit(msg):
        out.append(msg)
        if isinstance(msg, m.Done):
            done.set()
    core = WorkerCore(emit, write_behind=True)
    core.run(run_message("w", _model(tiny), _sample(), tmp_path / "w.png"))
    assert done.wait(WAIT)
    core.unload_all()
    kinds = [type(x).__name__ if not isinstance(x, m.Frame) else x.header.get("stage") or x.header["type"]
             for x in out]
    assert "State" in kinds[:kinds.index("Released")]
    assert kinds.index("Released") < kinds.index("saving") < kinds.index("result") < kinds.index("Done")
    end = next(x for x in out if isinstance(x, m.Done))
    assert end.status == "ok" and os.path.isfile(end.results[0]["path"])
