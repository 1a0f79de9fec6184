"""The seconds of each stage of a request (stages.py): in its status frames as they happen, in its `end`
frame, and (test_job_log.py) in the job log. An in-process engine, its worker on a thread; every wait is
on a request's done_event."""
import threading

from extensions_built_in.inference_engine.engine import Engine
from extensions_built_in.inference_engine.stages import STAGES, StageClock
from testing.engine_client import InProcessEngine


def _body(folder, steps=2):
    return {"model": {"arch": "zimage", "name_or_path": folder},
            "sample": {"prompt": "a lighthouse", "width": 64, "height": 64, "num_inference_steps": steps, "seed": 3}}


def test_status_frames_carry_the_stages_so_far_and_end_carries_them_all(tiny, tmp_path):
    eng = InProcessEngine(str(tmp_path / "engine"))
    try:
        frames = eng.client.stream(_body(tiny("zimage")))
    finally:
        eng.close()
    statuses = [h for h, _ in frames if h["type"] == "status" and "stages" in h]
    assert [h["stage"] for h in statuses][:1] == ["loading"], statuses
    previous: dict = {}
    for h in statuses:          # stages only end: each frame's are the previous frame's and more
        stages = h["stages"]
        assert list(stages) == sorted(stages, key=STAGES.index), stages
        assert all(stages[k] >= v for k, v in previous.items()), (previous, stages)
        previous = stages
    loaded = next(h for h in statuses if h["stage"] == "loaded")
    assert {"text_encoder", "vae", "transformer"} <= set(loaded["components"]), loaded
    assert all(s >= 0 for s in loaded["components"].values())
    end = frames[-1][0]
    assert end["type"] == "end" and end["status"] == "ok"
    assert list(end["stages"]) == ["queue", "load", "encode", "sample", "decode", "save"], end
    assert all(s >= 0 for s in end["stages"].values())
    # the load includes each component's read
    assert end["stages"]["load"] >= max(loaded["components"].values())


def test_a_request_sent_while_the_engine_starts_says_it_waited_for_the_worker(tiny, tmp_path):
    engine = Engine(output_folder=str(tmp_path / "out"), worker="thread")
    health = engine.health()
    assert health["ready"] is False and health["starting"] == "starting the generation worker"
    req = engine.submit(_body(tiny("zimage"))["model"], _body(tiny("zimage"))["sample"])   # before any worker
    loop = threading.Thread(target=engine.run_forever, daemon=True)
    loop.start()
    try:
        assert req.done_event.wait(300) and req.status == "ok", req.error
        health = engine.health()
        assert health["ready"] is True and health["starting"] is None
        assert {"worker_seconds", "ready_seconds"} <= set(health["startup"]), health["startup"]
    finally:
        engine.stop()
        loop.join(30)
    assert list(req.stages)[:2] == ["worker", "queue"] and req.stages["worker"] > 0, req.stages


def test_a_default_model_is_loaded_before_the_engine_says_it_is_ready(tiny, tmp_path):
    engine = Engine(output_folder=str(tmp_path / "out"), worker="thread")
    try:
        engine.warm_load({"arch": "zimage", "name_or_path": tiny("zimage")})
        health = engine.health()     # loaded, but run_forever has not started: not serving yet
        assert health["ready"] is False and health["starting"].startswith("loading the default model")
        assert health["active"]["arch"] == "zimage" and health["startup"]["default_model_seconds"] > 0
    finally:
        engine.shutdown_worker()


def test_stage_clock_adds_a_stage_met_again_and_ignores_what_is_no_stage():
    now = [0.0]
    clock = StageClock(lambda: now[0])
    for stage, t in (("loading", 0.0), ("loaded", 2.0), ("sampling", 3.0), ("pass", 4.0), ("decoding", 5.0),
                     ("sampling", 6.0), ("saving", 8.5)):
        now[0] = t
        clock.status(stage)
    now[0] = 9.0
    clock.close()
    # load 0-2; nothing 2-3; sample 3-5 and 6-8.5 (a hires pass's second); decode 5-6; save 8.5-9
    assert clock.snapshot() == {"load": 2.0, "sample": 4.5, "decode": 1.0, "save": 0.5}
