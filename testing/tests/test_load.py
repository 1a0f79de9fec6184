"""Load: 100 streamed requests from 8 concurrent HTTP clients over two tiny models, with dynamic
batching off and on (engine.max_batch 1 and 4). None is lost (each ends `ok` with its own file), the
queue is FIFO (each pipeline call's head starts in the order it was queued, after every earlier
request has started, and calls run one at a time), and no stream carries another request's frames.

Everything waits on stream ends and thread joins (the timeouts are hang guards, not timings), so a
loaded 2-core CI machine only makes it slower.
"""
import os
import random
import threading

import pytest

from testing.engine_client import EngineClient, InProcessEngine

TOKEN = "load-token-123"
REQUESTS = 100
CLIENTS = 8
ARCHS = ("zimage", "sd1")
LATENT_CHANNELS = {"zimage": 16, "sd1": 4}
SIZE = 64


@pytest.fixture(scope="module", params=[1, 4], ids=["max_batch_1", "max_batch_4"])
def eng(request, tiny, tmp_path_factory):
    # keep both tiny models resident: the test is about the queue and the streams, not reloads
    e = InProcessEngine(str(tmp_path_factory.mktemp("load")), token=TOKEN, keep_resident_gb=1,
                        max_batch=request.param)
    e.max_batch = request.param
    e.paths = {arch: tiny(arch) for arch in ARCHS}     # built here: tiny() is not for concurrent first calls
    yield e
    e.close()


def _plan():
    rng = random.Random(0)
    return [{"request_id": f"load-{i:03d}", "arch": rng.choice(ARCHS), "steps": rng.randint(1, 2), "seed": i}
            for i in range(REQUESTS)]


def _check_stream(job, frames, record):
    """One request's stream: only its own frames, in the documented order, ending ok with its file."""
    rid, arch, steps = job["request_id"], job["arch"], job["steps"]
    where = f"{rid} ({arch}, {steps} steps)"
    types = [h["type"] for h, _ in frames]
    assert all(h["request_id"] == rid for h, _ in frames), f"{where}: another request's frame in its stream"
    assert types[0] == "start" and types[-1] == "end" and types.count("end") == 1, f"{where}: {types}"
    assert frames[-1][0]["status"] == "ok", f"{where}: {frames[-1][0]} {frames[-2][0]}"
    start = frames[0][0]
    assert start["model"]["arch"] == arch and start["sample"]["seed"] == job["seed"], where
    progress = [(h["step"], h["total"]) for h, _ in frames if h["type"] == "progress"]
    total = progress[-1][1]       # a scheduler may run more than asked (tiny sd1: 2 -> 3)
    assert total >= steps and progress == [(i, total) for i in range(1, total + 1)], f"{where}: {progress}"
    # latents may be skipped for a slow reader, never reordered or mixed up
    latents = [(h, p) for h, p in frames if h["type"] == "latent"]
    assert [h["step"] for h, _ in latents] == sorted({h["step"] for h, _ in latents}), where
    shape = [1, LATENT_CHANNELS[arch], SIZE // 8, SIZE // 8]
    assert all(h["shape"] == shape and len(p) == 2 * shape[1] * shape[2] * shape[3] for h, p in latents), where
    results = [h for h, _ in frames if h["type"] == "result"]
    assert len(results) == 1 and types.index("result") > types.index("progress"), where
    res = results[0]
    assert res["width"] == SIZE and res["height"] == SIZE and res["seed"] == job["seed"], where
    assert os.path.isfile(res["path"]) and os.path.getsize(res["path"]) == res["bytes"], where
    assert record.status == "ok" and record.results == [{k: v for k, v in r.items() if k not in ("type", "request_id")}
                                                        for r in results], where
    return res["path"]


def test_load_fifo_no_loss_no_mixing(eng):
    plan = _plan()
    todo = iter(plan)
    take = threading.Lock()
    streams, records, errors = {}, {}, []

    def client():
        c = EngineClient(eng.url, TOKEN)
        try:
            while True:
                with take:
                    job = next(todo, None)
                if job is None:
                    return
                rid = job["request_id"]
                body = {"model": {"arch": job["arch"], "name_or_path": eng.paths[job["arch"]]},
                        "sample": {"prompt": f"load {rid}", "width": SIZE, "height": SIZE,
                                   "num_inference_steps": job["steps"], "seed": job["seed"]},
                        "request_id": rid}

                def on_frame(h, p, rid=rid):     # keep the record while the engine surely has it
                    if h["type"] == "start":
                        records[rid] = eng.engine.get(rid)
                streams[rid] = c.stream(body, on_frame=on_frame)
        except Exception as e:                  # reported below: a thread's exception is otherwise lost
            errors.append(repr(e))
        finally:
            c.close()

    for rid in [j["request_id"] for j in plan]:
        assert eng.engine.get(rid) is None
    threads = [threading.Thread(target=client, name=f"load-client-{i}") for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)                              # a hang guard only
    assert not any(t.is_alive() for t in threads), "a client never saw its stream end"
    assert errors == []

    # none lost: every request's stream ended ok with its own, distinct file
    assert sorted(streams) == sorted(j["request_id"] for j in plan)
    paths = [_check_stream(job, streams[job["request_id"]], records[job["request_id"]]) for job in plan]
    assert len(set(paths)) == REQUESTS

    # FIFO: a pipeline call's members start together (one started_at); its head (the earliest queued
    # member) starts in queue order, once every request queued before it has started; calls run one
    # at a time. Without batching every call is one request: the start order is the queue order.
    reqs = list(records.values())
    queued = sorted(reqs, key=lambda r: r.created_at)
    assert len({r.created_at for r in reqs}) == REQUESTS          # a strict order to compare against
    calls: dict = {}
    for r in reqs:
        calls.setdefault(r.started_at, []).append(r)
    calls = [sorted(c, key=lambda r: r.created_at) for _t, c in sorted(calls.items())]
    heads = [c[0] for c in calls]
    assert [h.created_at for h in heads] == sorted(h.created_at for h in heads)
    for head in heads:
        assert all(r.started_at <= head.started_at for r in reqs if r.created_at < head.created_at), head.request_id
    assert all(len(c) <= eng.max_batch for c in calls)
    if eng.max_batch == 1:
        assert [r.request_id for r in sorted(reqs, key=lambda r: r.started_at)] == [r.request_id for r in queued]
    # a call is over at its release (its files may be written while the next samples: engine.write_behind)
    assert all(max(r.released_at or r.finished_at for r in a) <= b[0].started_at for a, b in zip(calls, calls[1:]))
    # /queue tells the same story: nothing left over, and finished (newest first) in queue order
    q = eng.client.get("/queue").json()
    assert q["running"] is None and q["queued"] == []
    finished = [r["request_id"] for r in reversed(q["finished"]) if r["request_id"] in records]
    ends = [r.request_id for r in sorted(reqs, key=lambda r: r.finished_at)]
    assert finished and finished == ends[-len(finished):]     # a batch's later-queued member may end first
    assert all(r["status"] == "ok" for r in q["finished"])
