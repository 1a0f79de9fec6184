"""The InferenceCluster on a local Ray head: 2 CPU replicas (num_cpus 0.5 each), tiny models, one
cluster for the whole module (it takes a while to start). The engine's black-box HTTP tests run
against its ingress unchanged; then routing, cancel and re-attach across replicas, the routes the
UI proxy calls, and a replica killed mid-request."""
import threading

import httpx
import pytest

from extensions_built_in.inference_cluster.plan import Planner
from extensions_built_in.inference_engine.protocol import FrameReader
# the engine's black-box suite (HTTP only, no engine internals), collected here against the cluster
from testing.tests.test_engine import (  # noqa: F401
    TOKEN, body, test_bad_bodies_are_422_naming_the_body, test_bad_body_shapes_are_422,
    test_bad_generate_input_names_the_field, test_bearer_token_and_open_health, test_every_error_names_a_field,
    test_every_route_needs_the_token, test_generate_stream_sequence, test_latents_none_and_every_n,
    test_other_routes_give_clear_4xx_and_engine_keeps_serving, test_outputs_path_traversal,
    test_assets_path_traversal, test_queue_lists_finished, test_stream_options_are_checked_once_by_the_engine,
    test_wait_returns_json, types)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def eng(tiny, tmp_path_factory):
    from testing.local_cluster import LocalCluster
    tiny("zimage")       # built here, before the replicas look for it
    cluster = LocalCluster(str(tmp_path_factory.mktemp("cluster")), replicas=2, num_cpus=0.5, token=TOKEN)
    cluster.tiny = tiny
    yield cluster
    cluster.close()


def stream(eng, payload, on_frame=None, path="/generate", method="POST"):
    """(frames, the replica that answered): the frames until `end`, or until on_frame says stop."""
    frames, reader = [], FrameReader()
    with eng.client.http.stream(method, path, **({"json": payload} if method == "POST" else {})) as r:
        assert r.status_code == 200, r.read()
        for chunk in r.iter_bytes():
            for header, data in reader.feed(chunk):
                frames.append((header, data))
                if on_frame is not None and on_frame(header):
                    return frames, r.headers["x-engine-replica"]
    return frames, r.headers["x-engine-replica"]


def model(eng, seed):
    return {"arch": "zimage", "name_or_path": eng.tiny("zimage", seed)}


def generate(eng, m, steps=2, **extra):
    r = eng.client.post("/generate", json={"model": m, "wait": True, "sample": {
        "prompt": "a test", "width": 64, "height": 64, "num_inference_steps": steps, "seed": 1}, **extra})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    return r.headers["x-engine-replica"]


def test_health_lists_every_replica(eng):
    h = eng.health()
    assert h["ok"] is True and len({r["replica"] for r in h["replicas"]}) == 2
    assert all(r["worker"]["alive"] for r in h["replicas"])


def test_requests_for_a_model_go_to_the_replica_holding_it(eng):
    a, b = model(eng, 11), model(eng, 12)
    holder_a = generate(eng, a)
    assert [generate(eng, a) for _ in range(3)] == [holder_a] * 3
    holder_b = generate(eng, b)
    assert [generate(eng, b) for _ in range(3)] == [holder_b] * 3
    if holder_b != holder_a:              # A is still where it was: it goes back there
        assert generate(eng, a) == holder_a


def test_the_router_names_components_as_the_pool_does(eng):
    """What the router ranks by (plan.py) is the pool's identity: after a request, the components
    the planner names for its model are exactly what its replica reports resident."""
    m = model(eng, 13)
    replica = generate(eng, m)
    wanted = Planner(None, "auto", "cpu").components(m)
    held = next(r for r in eng.health()["replicas"] if r["replica"] == replica)["pool"]["entries"]
    assert wanted and set(wanted) <= {e["key"] for e in held}
    assert sum(wanted.values()) > 0


def test_the_ingress_plans_gpu_replicas_without_a_gpu(eng):
    """The ingress runs where no GPU is (Ray hides them from it): planning for `cuda` replicas needs
    none, and names the dtype those replicas load (bfloat16 under `auto`), so the keys differ from CPU's."""
    m = model(eng, 13)
    gpu, cpu = Planner(None, "auto", "cuda").components(m), Planner(None, "auto", "cpu").components(m)
    assert gpu and set(gpu) != set(cpu) and sum(gpu.values()) == sum(cpu.values())


def test_cancel_reaches_the_replica_holding_the_request(eng):
    running = threading.Event()
    out = {}

    def run():
        out["frames"], _ = stream(eng, body(eng, steps=400, request_id="cl-cancel-1"),
                                  on_frame=lambda h: running.set() if h["type"] == "progress" else None)
    t = threading.Thread(target=run)
    t.start()
    assert running.wait(120)
    r = eng.client.post("/cancel/cl-cancel-1")
    assert r.status_code == 200 and r.headers["x-engine-replica"]
    t.join(120)
    assert out["frames"][-1][0]["status"] == "cancelled"
    assert max(h["step"] for h, _ in out["frames"] if h["type"] == "progress") < 400


def test_detach_and_reattach_through_the_ingress(eng):
    frames, replica = stream(eng, body(eng, steps=30, request_id="cl-keep-1", stream={"detach": True}),
                             on_frame=lambda h: h["type"] == "progress")
    again, replica_again = stream(eng, None, path="/stream/cl-keep-1", method="GET")
    assert replica_again == replica
    t = types(again)
    assert t[0] == "start" and t[-1] == "end" and again[-1][0]["status"] == "ok" and "result" in t


def test_a_client_that_goes_away_cancels_its_request(eng):
    """The ingress closes its call to the replica, whose engine sees the disconnect; re-attaching
    (which waits for the end) shows how it ended."""
    stream(eng, body(eng, steps=400, request_id="cl-drop-1"), on_frame=lambda h: h["type"] == "progress")
    frames, _ = stream(eng, None, path="/stream/cl-drop-1", method="GET")
    assert frames[-1][0]["status"] == "cancelled"
    assert max(h["step"] for h, _ in frames if h["type"] == "progress") < 400


def test_the_routes_the_ui_proxy_calls_answer_with_the_token(eng, tmp_path):
    """The UI proxy reads engine.json (host, port, token) and forwards to these paths with
    X-Engine-Token and accept-encoding: identity; the cluster writes the same file."""
    info = eng.engine_json
    base = f"http://{info['host']}:{info['port']}"
    headers = {"x-engine-token": info["token"], "accept-encoding": "identity"}
    for path in ("/health", "/models", "/queue", "/library", "/loras"):
        r = httpx.get(base + path, headers=headers, timeout=60)
        assert r.status_code == 200, (path, r.text)
    r = httpx.post(base + "/generate", headers=headers, timeout=120,
                   json={**body(eng, steps=2, request_id="cl-ui-1"), "wait": True})
    assert r.status_code == 200 and r.json()["status"] == "ok"
    for name in ("date", "server", "x-request-id"):          # once each, as from one server
        assert len(r.headers.get_list(name)) == 1, (name, r.headers.get_list(name))
    assert httpx.post(base + "/cancel/cl-ui-1", headers=headers).status_code == 200
    assert httpx.get(base + "/stream/cl-ui-1", headers=headers).status_code == 200
    assert httpx.post(base + "/unload", headers=headers, timeout=60).json() == {"unloaded": True}
    r = httpx.post(base + "/assets", params={"name": "a.png"}, content=b"\x89PNG", headers=headers)
    assert r.status_code == 200 and r.json()["name"] == "a.png"
    assert httpx.get(base + "/queue").status_code == 401


def test_a_killed_replica_ends_its_request_with_an_error_and_the_next_is_served(eng):
    """Last in the module: Serve replaces the replica, which the test waits for."""
    before = {r["replica"] for r in eng.health()["replicas"]}
    state = {}
    frames, reader = [], FrameReader()
    with eng.client.http.stream("POST", "/generate", json=body(eng, steps=400, request_id="cl-doomed-1")) as r:
        victim = r.headers["x-engine-replica"]
        for chunk in r.iter_bytes():
            for header, _data in reader.feed(chunk):
                frames.append(header)
                if header["type"] == "progress" and "killed" not in state:
                    state["killed"] = True
                    eng.kill(victim)
    assert state.get("killed") and frames[-2]["type"] == "error" and frames[-1] == {
        "type": "end", "request_id": "cl-doomed-1", "status": "error"}
    assert "replica" in frames[-2]["message"] and [h["type"] for h in frames].count("end") == 1
    # the next request is served (by the survivor, or the replacement)
    served = generate(eng, model(eng, 0))
    assert served != victim
    replicas = eng.wait_replicas(2, exclude={victim})          # Serve started a new one
    assert {r["replica"] for r in replicas} - before
