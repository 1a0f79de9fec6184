"""The results feed (GET /results): every request that ended is one entry, whoever asked (native
/generate, a detached request, A1111's /sdapi/v1/txt2img, OpenAI's /v1/images), failures and cancels
included with their status and no files; read from `after` on, bounded, behind the engine token, and
kept in the output folder's .results.jsonl across an engine restart. Real engine, real HTTP."""
import json
import os

import httpx
import pytest

from extensions_built_in.inference_engine.compat import compat_routes
from extensions_built_in.inference_engine.engine import Engine
from extensions_built_in.inference_engine.results_feed import FILE_NAME, ResultsFeed
from testing.engine_client import InProcessEngine

TOKEN = "feed-token-123"
KEPT = 5


@pytest.fixture(scope="module")
def eng(tiny, tmp_path_factory):
    e = InProcessEngine(str(tmp_path_factory.mktemp("feed")), token=TOKEN, extra_routes=[compat_routes()],
                        results_kept=KEPT)
    e.tiny = tiny
    e.engine.default_model = {"arch": "zimage", "name_or_path": tiny("zimage")}   # what A1111 calls get
    yield e
    e.close()


def body(eng, steps=2, seed=1, **extra):
    return {"model": {"arch": "zimage", "name_or_path": eng.tiny("zimage")},
            "sample": {"prompt": "a fox", "width": 64, "height": 48, "num_inference_steps": steps, "seed": seed},
            **extra}


def feed(eng, **params) -> dict:
    r = eng.client.get("/results", params=params)
    assert r.status_code == 200, r.text
    return r.json()


def entry(eng, request_id: str) -> dict:
    found = [e for e in feed(eng, limit=1000)["entries"] if e["request_id"] == request_id]
    assert len(found) == 1, f"{request_id}: {len(found)} entries"
    return found[0]


def test_a_native_request_is_recorded_with_its_settings_files_and_timings(eng):
    before = feed(eng)["last_seq"]
    r = eng.client.post("/generate", json=body(eng, seed=7, request_id="native-1", wait=True),
                        headers={"X-Client": "grid"})
    assert r.status_code == 200 and r.json()["status"] == "ok"
    e = entry(eng, "native-1")
    assert e["seq"] == before + 1 and e["status"] == "ok" and e["error"] is None
    assert e["api"] == "native" and e["client"] == "grid"
    assert e["model"]["arch"] == "zimage" and e["model"]["name_or_path"] == eng.tiny("zimage")
    assert e["sample"]["prompt"] == "a fox" and e["sample"]["num_inference_steps"] == 2
    assert (e["seed"], e["width"], e["height"]) == (7, 64, 48)
    [f] = e["files"]
    assert f["relpath"] == r.json()["results"][0]["relpath"] and f["kind"] == "image" and f["mime"] == "image/png"
    assert "path" not in f and f["bytes"] == os.path.getsize(os.path.join(eng.engine.output_folder, f["relpath"]))
    t = e["timings"]
    assert t["queue_s"] >= 0 and t["run_s"] > 0 and t["total_s"] >= t["run_s"]
    assert e["finished_at"] >= e["started_at"] >= e["created_at"]
    # the first request loaded the model: its load is timed; a later one on the resident model has none
    loaded = [x for x in feed(eng, limit=1000)["entries"] if x["timings"]["load_s"] is not None]
    assert not loaded or loaded[0]["timings"]["load_s"] > 0


def test_the_entry_is_there_when_the_end_frame_is(eng):
    """A reader that saw `end` finds the entry: it is recorded before the end frame goes out."""
    frames = eng.client.stream(body(eng, request_id="streamed-1"))
    end = frames[-1][0]
    assert {k: v for k, v in end.items() if k != "stages"} == {"type": "end", "request_id": "streamed-1", "status": "ok"}
    assert entry(eng, "streamed-1")["files"][0]["relpath"].startswith("streamed-1")


def test_a_detached_request_is_recorded_with_no_reader_left(eng):
    eng.client.stream(body(eng, steps=3, request_id="detached-1", stream={"detach": True}),
                      on_frame=lambda h, _p: h["type"] == "progress")      # the reader goes away
    req = eng.engine.get("detached-1")
    assert req.done_event.wait(120) and req.status == "ok"
    e = entry(eng, "detached-1")
    assert e["status"] == "ok" and len(e["files"]) == 1 and e["client"] is None


def test_a1111_and_openai_requests_are_recorded_with_their_api(eng):
    r = eng.client.post("/sdapi/v1/txt2img", json={"prompt": "an owl", "steps": 2, "width": 64, "height": 64,
                                                    "seed": 11, "batch_size": 2})
    assert r.status_code == 200, r.text
    last = feed(eng, limit=1000)["entries"][-1]
    assert last["api"] == "a1111" and last["status"] == "ok" and last["sample"]["prompt"] == "an owl"
    assert [f["seed"] for f in last["files"]] == [11, 12] and [f["index"] for f in last["files"]] == [0, 1]
    r = eng.client.post("/v1/images/generations", json={"prompt": "a heron", "size": "64x64", "n": 1})
    assert r.status_code == 200, r.text
    last = feed(eng, limit=1000)["entries"][-1]
    assert last["api"] == "openai" and last["sample"]["prompt"] == "a heron" and len(last["files"]) == 1


def test_a_failed_and_a_cancelled_request_are_recorded_with_their_status_and_no_files(eng):
    faults = eng.engine.faults
    faults.reset(sample_oom=1)
    r = eng.client.post("/generate", json=body(eng, request_id="failed-1", wait=True))
    assert r.json()["status"] == "error"
    e = entry(eng, "failed-1")
    assert e["status"] == "error" and "out of memory" in e["error"] and e["files"] == []
    faults.reset(hold_step=1)       # held at step 1 until cancelled: the cancel always meets it running
    try:
        eng.client.stream(body(eng, request_id="cancelled-1", stream={"detach": True}),
                          on_frame=lambda h, _p: h["type"] == "status" and h.get("stage") == "queued")
        assert eng.client.post("/cancel/cancelled-1").status_code == 200
        assert eng.engine.get("cancelled-1").done_event.wait(60)
    finally:
        faults.reset(hold_step=0)
    e = entry(eng, "cancelled-1")
    assert e["status"] == "cancelled" and e["files"] == []


def test_after_reads_on_from_a_cursor_oldest_first(eng):
    for i in range(3):
        eng.client.post("/generate", json=body(eng, seed=20 + i, request_id=f"order-{i}", wait=True))
    whole = feed(eng, limit=1000)
    seqs = [e["seq"] for e in whole["entries"]]
    assert seqs == sorted(seqs) and seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert [e["request_id"] for e in whole["entries"][-3:]] == ["order-0", "order-1", "order-2"]
    cursor = whole["entries"][-3]["seq"]
    page = feed(eng, after=cursor, limit=1)
    assert [e["request_id"] for e in page["entries"]] == ["order-1"] and page["more"] is True
    page = feed(eng, after=page["entries"][0]["seq"])
    assert [e["request_id"] for e in page["entries"]] == ["order-2"] and page["more"] is False
    assert feed(eng, after=whole["last_seq"])["entries"] == []
    assert whole["last_seq"] == seqs[-1]


def test_the_ring_keeps_the_newest_entries_and_says_where_it_starts(eng):
    for i in range(KEPT + 1):
        eng.client.post("/generate", json=body(eng, steps=1, seed=40 + i, request_id=f"ring-{i}", wait=True))
    whole = feed(eng, limit=1000)
    assert len(whole["entries"]) == KEPT
    assert [e["request_id"] for e in whole["entries"]] == [f"ring-{i}" for i in range(1, KEPT + 1)]
    assert whole["first_seq"] == whole["entries"][0]["seq"] == whole["last_seq"] - KEPT + 1
    # the file keeps every line (until a restart compacts it)
    lines = open(os.path.join(eng.engine.output_folder, FILE_NAME)).read().splitlines()
    assert len(lines) == whole["last_seq"] and json.loads(lines[-1])["request_id"] == f"ring-{KEPT}"


@pytest.mark.parametrize("params,field", [({"after": "x"}, "after"), ({"after": -1}, "after"),
                                          ({"limit": 0}, "limit"), ({"limit": 1001}, "limit"),
                                          ({"limit": "1.5"}, "limit")])
def test_bad_query_values_are_a_422_naming_the_field(eng, params, field):
    r = eng.client.get("/results", params=params)
    assert r.status_code == 422 and r.json()["field"] == field


def test_the_feed_needs_the_engine_token(eng):
    for headers in ({}, {"X-Engine-Token": "wrong"}):
        r = httpx.get(f"{eng.url}/results", headers=headers)
        assert r.status_code == 401 and r.json()["field"] == "token"
    assert httpx.get(f"{eng.url}/results", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_a_bad_client_name_is_a_422(eng):
    r = eng.client.post("/generate", json=body(eng, wait=True), headers={"X-Client": "a b/c"})
    assert r.status_code == 422 and r.json()["field"] == "X-Client"


def test_a_restarted_engine_serves_what_ended_before_and_numbers_on(tmp_path):
    """The feed file outlives the engine: a new one on the folder loads its newest entries (a torn
    last line from a killed engine skipped), numbers on from the last, and compacts a long file."""
    out = tmp_path / "outputs"
    out.mkdir()
    lines = [json.dumps({"seq": i, "request_id": f"old-{i}", "status": "ok", "files": []}) for i in range(1, 12)]
    (out / FILE_NAME).write_text("\n".join(lines) + '\n{"seq": 12, "request_id": "tor')
    eng = Engine(output_folder=str(out), worker="thread", results_kept=KEPT)
    got = eng.results.read(0, 100)
    assert [e["request_id"] for e in got["entries"]] == [f"old-{i}" for i in range(7, 12)]
    assert got["last_seq"] == 11 and got["first_seq"] == 7
    assert len((out / FILE_NAME).read_text().splitlines()) == KEPT          # 12 lines > 2 x KEPT: compacted
    eng.results.record(lambda seq: {"seq": seq, "request_id": "new", "status": "ok", "files": []})
    assert eng.results.read(10, 100)["entries"][-1] == {"seq": 12, "request_id": "new", "status": "ok", "files": []}
    assert ResultsFeed(str(out), KEPT).read(11, 10)["entries"][0]["request_id"] == "new"
