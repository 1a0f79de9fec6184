"""The engine over real HTTP (in-process server on loopback) with tiny models."""
import os
import threading
import time

import numpy as np
import pytest

from extensions_built_in.inference_engine.worker import Faults
from testing.engine_client import InProcessEngine
from testing.tiny_runs import run_message

TOKEN = "test-token-123"


@pytest.fixture(scope="module")
def eng(tiny, tmp_path_factory):
    e = InProcessEngine(str(tmp_path_factory.mktemp("engine")), token=TOKEN)
    e.tiny = tiny
    yield e
    e.close()


def body(eng, arch="zimage", steps=4, seed=1, size=64, **extra):
    b = {"model": {"arch": arch, "name_or_path": eng.tiny(arch)},
         "sample": {"prompt": "a test", "width": size, "height": size, "num_inference_steps": steps, "seed": seed}}
    for k, v in extra.items():
        b[k] = v
    return b


def types(frames):
    return [h["type"] for h, _ in frames]


def test_generate_stream_sequence(eng):
    frames = eng.client.stream(body(eng))
    t = types(frames)
    assert t[0] == "start" and t[-1] == "end" and t.count("end") == 1
    assert t.count("progress") == 4 and t.count("latent") == 4 and t.count("result") == 1
    start = frames[0][0]
    assert start["modality"] == "image" and start["preview"]["layout"] == "BCHW"
    assert len(start["preview"]["rgb_factors"]) == 16 and len(start["preview"]["rgb_bias"]) == 3
    lat_h, lat_p = next(f for f in frames if f[0]["type"] == "latent")
    arr = np.frombuffer(lat_p, dtype="<f2").reshape(lat_h["shape"])
    assert arr.shape == (1, 16, 8, 8) and np.isfinite(arr).all()
    res = next(h for h, _ in frames if h["type"] == "result")
    r = eng.client.get(res["url"])
    assert r.status_code == 200 and r.content[:8] == b"\x89PNG\r\n\x1a\n" and len(r.content) == res["bytes"]
    assert frames[-1][0]["status"] == "ok"


def test_packed_latents_arrive_unpacked(eng):
    frames = eng.client.stream(body(eng, "flux", steps=2))
    lat = [h for h, _ in frames if h["type"] == "latent"]
    assert lat and lat[0]["layout"] == "BCHW" and lat[0]["shape"] == [1, 16, 8, 8]


def test_video_latents_subsampled(eng):
    b = body(eng, "wan21", steps=2)
    b["sample"].update(num_frames=17, fps=8, output_ext="webp")
    b["stream"] = {"max_frames": 2}
    frames = eng.client.stream(b)
    lat = [h for h, _ in frames if h["type"] == "latent"]
    assert lat[0]["layout"] == "BCFHW" and lat[0]["shape"][2] == 2
    res = next(h for h, _ in frames if h["type"] == "result")
    assert res["kind"] == "video" and res["num_frames"] == 17


def test_latents_none_and_every_n(eng):
    frames = eng.client.stream(body(eng, steps=4, stream={"latents": "none"}))
    assert "latent" not in types(frames)
    frames = eng.client.stream(body(eng, steps=5, stream={"every_n_steps": 2}))
    assert [h["step"] for h, _ in frames if h["type"] == "latent"] == [2, 4, 5]


def test_wait_returns_json(eng):
    r = eng.client.post("/generate", json=body(eng, wait=True, request_id="waiter-1"))
    j = r.json()
    assert r.status_code == 200 and j["status"] == "ok" and j["request_id"] == "waiter-1"
    assert r.headers["X-Request-Id"] == "waiter-1" and j["results"][0]["kind"] == "image"


ROUTES = [("GET", "/models"), ("POST", "/generate"), ("POST", "/cancel/x"), ("GET", "/queue"), ("POST", "/queue/x/move"), ("POST", "/unload"),
          ("POST", "/assets?name=a.png"), ("GET", "/outputs/a.png"), ("GET", "/stream/x")]


@pytest.mark.parametrize("method,path", ROUTES)
def test_every_route_needs_the_token(eng, method, path):
    import httpx
    for headers in ({}, {"X-Engine-Token": "wrong-token"}, {"Authorization": "Bearer nope"}):
        r = httpx.request(method, eng.url + path, headers=headers, json={} if method == "POST" else None)
        assert r.status_code == 401, (path, headers)
        assert "X-Request-Id" in r.headers


def test_bearer_token_and_open_health(eng):
    import httpx
    assert httpx.get(eng.url + "/models", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    r = httpx.get(eng.url + "/health")
    assert r.status_code == 200 and r.json()["ok"] is True
    eng.client.stream(body(eng))            # something active, with pool entries
    text = httpx.get(eng.url + "/health").text
    assert TOKEN not in text and "/tmp" not in text and eng.tiny("zimage") not in text


@pytest.mark.parametrize("payload,field", [
    ({"model": {"arch": "nope"}}, "model.arch"),
    ({"model": {"arch": "zimage", "oops": 1}}, "model.oops"),
    ({"model": {"arch": "zimage"}, "sample": {"width": 1000}}, "sample.width"),
    ({"model": {"arch": "zimage"}, "sample": {"num_inference_steps": 0}}, "sample.num_inference_steps"),
    ({"model": {"arch": "zimage"}, "sample": {"colour": "red"}}, "sample.colour"),
    ({"model": {"arch": "zimage"}, "sample": {"ctrl_img": "../../etc/passwd"}}, "sample.ctrl_img"),
    ({"model": {"arch": "zimage"}, "request_id": "bad id!"}, "request_id"),
])
def test_bad_generate_input_names_the_field(eng, payload, field):
    r = eng.client.post("/generate", json=payload)
    assert r.status_code == 422 and field in r.text, r.text


@pytest.mark.parametrize("payload", [{"sample": {}}, {"model": {"arch": "zimage"}, "extra": 1}])
def test_bad_body_shapes_are_422(eng, payload):
    r = eng.client.post("/generate", json=payload)
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("stream,field", [
    ({"latents": "jpeg"}, "stream.latents"), ({"bogus": 1}, "stream.bogus"), ({"max_frames": 0}, "stream.max_frames"),
    ({"every_n_steps": True}, "stream.every_n_steps"), ({"preview": "png"}, "stream.preview"),
    ({"detach": "yes"}, "stream.detach"), ("fast", "stream"), ([1], "stream"),
])
def test_stream_options_are_checked_once_by_the_engine(eng, stream, field):
    """The HTTP layer passes `stream` through as it came; the engine's StreamOptions names the bad key."""
    r = eng.client.post("/generate", json={**body(eng), "stream": stream})
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    assert r.json()["detail"].startswith(field), r.text


def test_other_routes_give_clear_4xx_and_engine_keeps_serving(eng):
    c = eng.client
    assert c.post("/cancel/unknown-id").status_code == 404
    assert c.get("/stream/unknown-id").status_code == 404
    assert c.get("/outputs/nothing.png").status_code == 404
    assert c.post("/assets?name=x.png", content=b"").status_code == 422     # empty: names the body
    assert c.post("/assets", content=b"abc").status_code == 422      # name missing
    assert c.post("/generate", content=b"{not json", headers={"content-type": "application/json"}).status_code == 422
    assert types(c.stream(body(eng)))[-1] == "end"


@pytest.mark.parametrize("path", ["/outputs/../engine.json", "/outputs/%2e%2e/%2e%2e/etc/passwd",
                                  "/outputs//etc/passwd", "/outputs/..%2fassets%2fx"])
def test_outputs_path_traversal(eng, path):
    assert eng.client.get(path).status_code == 404


@pytest.mark.parametrize("name", ["../x.png", "..", ".hidden", "a/b.png", "x" * 200])
def test_assets_path_traversal(eng, name):
    r = eng.client.post("/assets", params={"name": name}, content=b"data")
    assert r.status_code in (400, 404, 422), (name, r.status_code)


def test_asset_upload_resolves_for_ctrl_img(eng, tmp_path):
    import os

    from testing.fixtures import input_image
    with open(input_image(tmp_path / "ctrl.png"), "rb") as f:
        r = eng.client.post("/assets", params={"name": "ctrl.png"}, content=f.read())
    assert r.status_code == 200
    stored = r.json()["path"]
    assert os.path.isfile(os.path.join(eng.engine.assets_folder, stored))
    assert eng.engine.resolve_asset(stored).startswith(eng.engine.assets_folder)


def _cancel_at(eng, step, seen=None):
    def on_frame(h, _p):
        if h["type"] == "progress" and h["step"] == step:
            eng.client.post(f"/cancel/{h['request_id']}")
            if seen is not None:
                seen.append(eng.engine.get(h["request_id"]).step)   # steps done when the cancel landed
    return on_frame


def test_cancel_running_then_rerun_is_identical(eng):
    ref = eng.client.stream(body(eng, steps=6, seed=5))
    ref_file = next(h for h, _ in ref if h["type"] == "result")
    seen = []
    frames = eng.client.stream(body(eng, steps=60, seed=5), on_frame=_cancel_at(eng, 2, seen))
    assert types(frames)[-2:] == ["error", "end"]
    assert frames[-2][0]["cancelled"] is True and frames[-1][0]["status"] == "cancelled"
    # it stops at the next step after the cancel lands
    assert max(h["step"] for h, _ in frames if h["type"] == "progress") <= seen[0] + 1 < 60
    again = eng.client.stream(body(eng, steps=6, seed=5))
    again_file = next(h for h, _ in again if h["type"] == "result")
    assert eng.client.get(again_file["url"]).content == eng.client.get(ref_file["url"]).content


def test_cancel_queued_ends_at_once(eng):
    started = threading.Event()
    long_frames = []

    def run_long():
        long_frames.extend(eng.client.stream(body(eng, steps=400, request_id="long-1"),
                                             on_frame=lambda h, p: started.set() if h["type"] == "progress" else None))
    t = threading.Thread(target=run_long)
    t.start()
    assert started.wait(60)
    queued = []
    q = threading.Thread(target=lambda: queued.extend(eng.client.stream(body(eng, request_id="queued-1"))))
    q.start()
    deadline = time.time() + 10
    while time.time() < deadline and not eng.client.get("/queue").json()["queued"]:
        time.sleep(0.02)
    assert eng.client.get("/queue").json()["running"]["request_id"] == "long-1"
    r = eng.client.post("/cancel/queued-1")
    assert r.json()["status"] == "cancelled"
    q.join(10)
    assert not q.is_alive() and types(queued)[-1] == "end" and queued[-1][0]["status"] == "cancelled"
    assert "progress" not in types(queued)
    eng.client.post("/cancel/long-1")
    t.join(60)
    assert long_frames[-1][0]["status"] == "cancelled"


def test_cancel_during_load(eng):
    eng.engine.faults.load_delay = 0.2
    try:
        def on_frame(h, _p):
            if h["type"] == "status" and h["stage"] == "loading":
                eng.client.post(f"/cancel/{h['request_id']}")
        frames = eng.client.stream(body(eng, "sd1"), on_frame=on_frame)
    finally:
        eng.engine.faults.load_delay = 0
    assert frames[-1][0]["status"] == "cancelled" and "progress" not in types(frames)
    assert types(eng.client.stream(body(eng, "sd1", steps=2)))[-2] == "result"


def test_disconnect_cancels_by_default(eng):
    """The client goes away after step 2, which is held until a cancel lands (faults.hold_step): the
    request cannot finish first however slow the machine, so it ends cancelled only if the server
    saw the disconnect."""
    faults = eng.engine.faults
    faults.reset(hold_step=2)                  # the fault step count is shared: count from this request
    try:
        eng.client.stream(body(eng, steps=4, request_id="drop-1"),
                          on_frame=lambda h, p: h["type"] == "progress" and h["step"] == 2)
        req = eng.engine.get("drop-1")
        assert req.done_event.wait(120), "the held request never ended: the disconnect did not cancel it"
        assert req.status == "cancelled"
    finally:
        faults.hold_step = 0


def test_detach_and_reattach(eng):
    eng.client.stream(body(eng, steps=40, request_id="keep-1", stream={"detach": True}),
                      on_frame=lambda h, p: h["type"] == "progress" and h["step"] == 2)
    time.sleep(0.3)
    assert eng.engine.get("keep-1").status in ("running", "ok")
    frames = eng.client.stream(None, path="/stream/keep-1", method="GET")
    t = types(frames)
    assert t[0] == "start" and t[-1] == "end" and frames[-1][0]["status"] == "ok"
    assert "result" in t and "latent" in t and t.count("end") == 1
    steps = [h["step"] for h, _ in frames if h["type"] == "progress"]
    assert steps == sorted(steps) and steps[-1] == 40 and steps[0] == 1   # replay, then live
    # a finished request re-attaches too: its frames and newest latent, then end
    again = eng.client.stream(None, path="/stream/keep-1", method="GET")
    assert types(again).count("latent") == 1 and types(again)[-1] == "end"


def test_fifo_under_concurrent_clients(eng):
    results, ids = {}, [f"fifo-{i}" for i in range(6)]

    def go(rid):
        results[rid] = eng.client.post("/generate", json=body(eng, steps=2, request_id=rid, wait=True)).json()
    threads = []
    for rid in ids:
        th = threading.Thread(target=go, args=(rid,))
        th.start()
        threads.append(th)
        time.sleep(0.02)
    for th in threads:
        th.join(120)
    assert all(results[r]["status"] == "ok" for r in ids)
    reqs = [eng.engine.get(r) for r in ids]
    by_created = sorted(reqs, key=lambda r: r.created_at)
    by_started = sorted(reqs, key=lambda r: (r.started_at, r.created_at))
    assert [r.request_id for r in by_created] == [r.request_id for r in by_started]
    # requests that waited together may share a call (engine.max_batch: same start); calls never overlap (a
    # call is over at its release: its file may be written while the next samples, engine.write_behind)
    calls = sorted({r.started_at for r in reqs})
    ends = [max(r.released_at or r.finished_at for r in reqs if r.started_at == t) for t in calls]
    assert all(end <= start for end, start in zip(ends, calls[1:]))


def test_move_reorders_the_queue_over_http(eng):
    """POST /queue/{id}/move: a held request runs (faults.hold_step: it cannot finish before the
    cancel, however slow the machine), three wait; the third is moved to the front, and they then
    run in the new order. Each has its own step count, so none joins another's pipeline call."""
    faults = eng.engine.faults
    faults.reset(hold_step=1)
    try:
        eng.client.stream(body(eng, steps=4, request_id="mv-hold", stream={"detach": True}),
                          on_frame=lambda h, p: h["type"] == "progress")
        for i, rid in enumerate(("mv-a", "mv-b", "mv-c")):      # detached: queued, no reader needed
            eng.client.stream(body(eng, steps=2 + i, request_id=rid, stream={"detach": True}),
                              on_frame=lambda h, p: True)
        order = lambda: [r["request_id"] for r in eng.client.get("/queue").json()["queued"]]
        assert eng.client.get("/queue").json()["running"]["request_id"] == "mv-hold"
        assert order() == ["mv-a", "mv-b", "mv-c"]
        r = eng.client.post("/queue/mv-c/move", json={"position": 0})
        assert r.status_code == 200 and r.json() == {"request_id": "mv-c", "status": "queued", "position": 0}
        assert order() == ["mv-c", "mv-a", "mv-b"]
        assert eng.client.post("/queue/mv-a/move", json={"position": 7}).json()["position"] == 2
        assert order() == ["mv-c", "mv-b", "mv-a"]
        q = eng.client.get("/queue").json()["queued"]
        assert [x["pinned"] for x in q] == [True, False, True] and q[0]["steps"] == 4 and q[0]["width"] == 64
        r = eng.client.post("/queue/mv-hold/move", json={"position": 0})
        assert r.status_code == 409 and r.json()["field"] == "request_id" and "running" in r.json()["detail"]
        r = eng.client.post("/queue/nope/move", json={"position": 0})
        assert r.status_code == 404 and r.json()["field"] == "request_id"
        for bad in ({"position": -1}, {"position": "first"}, {"position": 1.5}, {}, {"position": 0, "x": 1}):
            r = eng.client.post("/queue/mv-b/move", json=bad)
            assert r.status_code == 422, bad
            assert r.json()["field"] == ("x" if "x" in bad else "position"), r.json()
    finally:
        faults.hold_step = 0
        eng.client.post("/cancel/mv-hold")
    reqs = [eng.engine.get(rid) for rid in ("mv-c", "mv-b", "mv-a")]
    assert all(r.done_event.wait(120) and r.status == "ok" for r in reqs)
    assert [r.started_at for r in reqs] == sorted(r.started_at for r in reqs)
    over = [r.released_at or r.finished_at for r in reqs]      # a call is over at its release (write_behind)
    assert over[0] <= reqs[1].started_at <= over[1] <= reqs[2].started_at
    r = eng.client.post("/queue/mv-a/move", json={"position": 0})
    assert r.status_code == 409 and "ok" in r.json()["detail"]


def test_queue_lists_finished(eng):
    eng.client.stream(body(eng, request_id="listed-1"))
    q = eng.client.get("/queue").json()
    assert q["running"] is None and any(r["request_id"] == "listed-1" and r["status"] == "ok" for r in q["finished"])


def test_injected_oom_during_load_retries(eng):
    eng.engine.faults.reset(load_oom=2)        # the 2nd load from now
    frames = eng.client.stream(body(eng, "flux", steps=2))
    msgs = [h.get("message", "") for h, _ in frames if h["type"] == "status"]
    assert any("out of memory while loading" in m for m in msgs)
    assert frames[-1][0]["status"] == "ok"


def test_injected_oom_during_sampling_keeps_serving(eng):
    eng.engine.faults.reset(sample_oom=2)      # the 2nd step from now
    frames = eng.client.stream(body(eng, steps=4))
    assert frames[-2][0]["type"] == "error" and "out of memory" in frames[-2][0]["message"]
    assert frames[-2][0]["cancelled"] is False and frames[-1][0]["status"] == "error"
    assert eng.client.stream(body(eng))[-1][0]["status"] == "ok"


def test_unload_conflict_and_success(eng):
    started = threading.Event()
    t = threading.Thread(target=lambda: eng.client.stream(
        body(eng, steps=300, request_id="busy-1"), on_frame=lambda h, p: started.set() if h["type"] == "progress" else None))
    t.start()
    assert started.wait(60)
    assert eng.client.post("/unload").status_code == 409
    eng.client.post("/cancel/busy-1")
    t.join(60)
    assert eng.client.post("/unload").status_code == 200
    deadline = time.time() + 10
    while time.time() < deadline and eng.client.health()["pool"]["entries"]:
        time.sleep(0.05)
    h = eng.client.health()
    assert h["active"] is None and h["pool"]["entries"] == [] and h["pool"]["resident_bytes"] == 0


def test_models_serves_registry(eng):
    archs = {a["name"]: a for a in eng.client.get("/models").json()["archs"]}
    assert set(archs) >= {"zimage", "flux", "sd1", "wan21", "ace_step"}
    assert archs["wan21"]["modality"] == "video" and archs["wan21"]["preview"]["layout"] == "BCFHW"
    assert archs["ace_step"]["preview"]["layout"] == "BLC" and archs["ace_step"]["preview"]["rgb_factors"] is None
    assert archs["zimage"]["size_divisor"] == 16 and "holder" not in archs["zimage"]


def test_paths_outside_the_model_roots_get_one_answer(tiny, tmp_path):
    """A request naming local files outside engine.model_roots is refused before anything reads them,
    with the same message whether the file exists or not; paths inside the roots, tiny names and repo
    ids pass. An unknown component role is refused too, naming it."""
    from extensions_built_in.inference_engine.engine import Engine
    from toolkit.errors import ConfigError

    folder = tiny("zimage")
    eng = Engine(output_folder=str(tmp_path / "out"), worker="thread", model_roots=[os.path.dirname(folder)])
    sample = {"prompt": "x", "width": 64, "height": 64, "num_inference_steps": 1}
    answers = {}
    for key, value in [("lora_path", "/etc/passwd"), ("lora_path", "/no/such/file.safetensors"),
                       ("name_or_path", "/root"), ("name_or_path", "/no/such/folder"),
                       ("extras_name_or_path", "/etc")]:
        with pytest.raises(ConfigError) as e:
            eng.submit({"arch": "zimage", "name_or_path": folder, key: value} if key != "name_or_path"
                       else {"arch": "zimage", key: value}, sample)
        assert e.value.key == f"model.{key}"
        answers.setdefault(key, set()).add(e.value.message)
    assert all(len(messages) == 1 for messages in answers.values()), answers
    with pytest.raises(ConfigError) as e:
        eng.submit({"arch": "zimage", "name_or_path": folder, "components": {"vae": "/etc/hosts"}}, sample)
    assert e.value.key == "model.components.vae" and "model_roots" in e.value.message
    with pytest.raises(ConfigError) as e:
        eng.submit({"arch": "zimage", "name_or_path": folder, "components": {"unet": folder}}, sample)
    assert e.value.key == "model.components.unet" and "no component 'unet'" in e.value.message
    assert eng.submit({"arch": "zimage", "name_or_path": folder}, sample).status == "queued"
    assert eng.submit({"arch": "zimage", "name_or_path": "tiny:zimage"}, sample).status == "queued"
    assert eng.submit({"arch": "zimage", "name_or_path": "org/some-repo"}, sample).status == "queued"


def test_a_reused_request_id_never_overwrites_an_older_file(tiny, tmp_path):
    """Once an id has left the kept history it can be used again; its file gets a new name."""
    from extensions_built_in.inference_engine import engine as engine_module
    from extensions_built_in.inference_engine.engine import Engine

    # execute() driven by hand, no loop to take a Done written behind it: each file before execute returns
    eng = Engine(output_folder=str(tmp_path / "out"), worker="thread", write_behind=False)
    model = {"arch": "zimage", "name_or_path": tiny("zimage")}
    sample = {"prompt": "x", "width": 64, "height": 64, "num_inference_steps": 1}
    eng.start_worker()
    try:
        first = eng.submit(model, {**sample, "seed": 1}, request_id="load000")
        eng.execute(eng._next_request())
        with open(first.results[0]["path"], "rb") as f:
            kept = f.read()
        for r in list(eng.requests):                    # the id leaves the kept history
            eng.requests.pop(r)
        again = eng.submit(model, {**sample, "seed": 2}, request_id="load000")
        eng.execute(eng._next_request())
        assert again.status == "ok" and again.results[0]["path"] != first.results[0]["path"]
        with open(first.results[0]["path"], "rb") as f:
            assert f.read() == kept
        assert engine_module.FINISHED_KEPT >= 1
    finally:
        eng.shutdown_worker()


BAD_BODIES = [
    ("malformed JSON", b'{"model": {"arch": "zimage"}, "sample": ', {"content-type": "application/json"}),
    ("not UTF-8, JSON type", b'\xff\xfe{"a": 1}', {"content-type": "application/json"}),
    ("not UTF-8, no type", b'\xff\xfe{"a": 1}', {}),
    ("empty", b"", {"content-type": "application/json"}),
    ("an array", b"[1, 2]", {"content-type": "application/json"}),
]


@pytest.mark.parametrize("name,content,headers", BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_bad_bodies_are_422_naming_the_body(eng, name, content, headers):
    r = eng.client.post("/generate", content=content, headers=headers)
    assert r.status_code == 422, (r.status_code, r.text)
    body = r.json()
    assert body["field"] == "body" and body["detail"].startswith("body: ") and "\\xff" not in r.text


def test_every_error_names_a_field(eng):
    import httpx
    cases = [("GET", "/outputs/%00", 404, "relpath"), ("GET", "/outputs/nope.png", 404, "relpath"),
             ("GET", "/stream/nope", 404, "request_id"), ("POST", "/cancel/nope", 404, "request_id"),
             ("GET", "/inspect/nope", 404, "profile"), ("GET", "/nowhere", 404, "path"),
             ("POST", "/generate", 422, "model")]
    for method, path, status, field in cases:
        r = eng.client.http.request(method, path, json={} if method == "POST" else None)
        assert (r.status_code, r.json()["field"]) == (status, field), (path, r.text)
    r = httpx.get(eng.url + "/queue")
    assert r.status_code == 401 and r.json()["field"] == "token"


def test_schema_and_docs_are_not_public(eng, tmp_path):
    """/openapi.json, /docs and /redoc are off by default; with docs on, the schema needs the token
    and declares the error shape every route answers with."""
    import httpx
    from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app
    for path in ("/openapi.json", "/docs", "/redoc"):
        assert httpx.get(eng.url + path).status_code == 404
    server = ServerThread(create_app(eng.engine, TOKEN, docs=True), bind_socket(0)).start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        assert httpx.get(url + "/openapi.json").status_code == 401
        schema = httpx.get(url + "/openapi.json", headers={"X-Engine-Token": TOKEN}).json()
        assert httpx.get(url + "/docs").status_code == 404
        assert "GenerateBody" in schema["components"]["schemas"]
        gen = schema["paths"]["/generate"]["post"]["responses"]
        assert {"401", "422"} <= set(gen)
        ref = gen["422"]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/ErrorBody")
        assert schema["components"]["schemas"]["ErrorBody"]["properties"]["detail"]["type"] == "string"
    finally:
        server.stop()


def test_a_cancel_landing_while_the_file_is_written_still_wins(tiny, tmp_path):
    """The cancel arrives after the last step, while the file is being encoded: the request ends
    cancelled and no file appears (the file is checked against the cancel before it is moved in)."""
    from extensions_built_in.inference_engine import messages as m
    from extensions_built_in.inference_engine.worker import WorkerCore

    out = []

    def emit(msg):
        out.append(msg)
        if isinstance(msg, m.Frame) and msg.header.get("stage") == "saving":
            core.cancel(msg.request_id)
    core = WorkerCore(emit)
    core.run(run_message("late", {"arch": "zimage", "name_or_path": tiny("zimage")},
                         {"prompt": "x", "width": 64, "height": 64, "num_inference_steps": 2}, tmp_path / "late.png"))
    done = out[-1]
    assert isinstance(done, m.Done) and done.status == "cancelled" and not done.results
    assert os.listdir(tmp_path) == []


def test_models_serves_resolved_defaults(tmp_path):
    """GET /models carries the sample a request gets when it sets none, resolved by the engine:
    per arch (and variant), and per profile with the profiles file's [generation] on top."""
    from toolkit.profiles import load_profiles
    (tmp_path / "w").mkdir()
    (tmp_path / "p.toml").write_text(
        '[generation]\nwidth = 1000\nguidance_scale = 2.0\n'
        f'[model_profiles.k2]\narchitecture = "krea2"\nvariant = "raw"\ncheckpoint = "{tmp_path / "w"}"\n'
        '[model_profiles.k2.defaults]\nsteps = 20\nguidance_scale = 5.0\n'
        f'[model_profiles.z]\narchitecture = "zimage"\ncheckpoint = "{tmp_path / "w"}"\n')
    e = InProcessEngine(str(tmp_path / "engine"), token=TOKEN, profiles=load_profiles(str(tmp_path / "p.toml")))
    try:
        models = e.client.get("/models").json()
    finally:
        e.close()
    archs = {a["name"]: a for a in models["archs"]}
    k2 = archs["krea2"]
    assert k2["sample"]["num_inference_steps"] == 8 and k2["sample"]["mu"] == 1.15           # turbo: the default
    assert k2["variant_samples"]["raw"]["num_inference_steps"] == 52 and k2["variant_samples"]["raw"]["mu"] is None
    assert archs["zimage"]["variant_samples"] == {} and archs["zimage"]["sample"]["output_ext"] == "png"
    assert archs["qwen_image_edit"]["sample"]["ctrl_img"] is None                 # needs one; the form asks
    profiles = {p["name"]: p for p in models["profiles"]}
    # request > [generation] > profile > variant > arch; krea2 rounds 1000 up to 1008
    assert profiles["k2"]["sample"] == {**k2["variant_samples"]["raw"], "num_inference_steps": 20,
                                        "guidance_scale": 2.0, "width": 1008}
    assert profiles["k2"]["sample_error"] is None
    # zimage refuses a width that is no multiple of 16: said, and the listing still answers
    assert profiles["z"]["sample"] is None and profiles["z"]["sample_error"].startswith("sample.width")
