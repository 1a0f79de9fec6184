"""What a hostile client found, each repro as it was sent, through the real HTTP server: lone
surrogates and non-finite numbers in a body, links out of the listed folders, a body before its
token, the compatibility port's /outputs, oversized bodies, foreign Host and Origin headers, and
the bookkeeping that must never end the engine. After each, the engine still serves."""
import json
import os
import threading
import time

import httpx
import pytest

from extensions_built_in.inference_engine import joblog
from extensions_built_in.inference_engine.compat import compat_routes, serve_compat_on_port
from testing.engine_client import InProcessEngine
from toolkit.models.tiny.loras import write_tiny_lora

TOKEN = "hostile-token-123"
AUTH = {"X-Engine-Token": TOKEN}
LONE = "\\ud800"           # JSON text of a lone surrogate: json.loads makes it the str "\ud800"


@pytest.fixture(scope="module")
def served(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    loras = root / "loras"
    write_tiny_lora("zimage", tiny("zimage"), loras / "ok.safetensors")
    (loras / "passwd_link.safetensors").symlink_to("/etc/passwd")
    outside = root / "outside"
    outside.mkdir()
    write_tiny_lora("zimage", tiny("zimage"), outside / "elsewhere.safetensors")
    (loras / "linked_out.safetensors").symlink_to(outside / "elsewhere.safetensors")
    (loras / "loop").symlink_to(loras, target_is_directory=True)
    models = root / "models"
    (models / "diffusion_models").mkdir(parents=True)
    write_tiny_lora("zimage", tiny("zimage"), models / "loras" / "m.safetensors")
    (models / "loras" / "out.safetensors").symlink_to(outside / "elsewhere.safetensors")
    (models / "loras" / "again").symlink_to(models, target_is_directory=True)
    (models / "diffusion_models" / "passwd.safetensors").symlink_to("/etc/passwd")
    eng = InProcessEngine(str(root), token=TOKEN, extra_routes=[compat_routes()], lora_folder=str(loras),
                          model_folders=[str(models)])
    eng.engine.default_model = {"arch": "zimage", "name_or_path": tiny("zimage")}
    eng.model = {"arch": "zimage", "name_or_path": tiny("zimage")}
    eng.compat = serve_compat_on_port(eng.engine, TOKEN, compat_routes(engine=eng.engine), 0)
    eng.compat_url = f"http://127.0.0.1:{eng.compat.port}"
    yield eng
    eng.compat.stop()
    eng.close()


def still_serving(served):
    """The engine is up: /health answers and a normal request generates."""
    assert served.client.get("/health").json()["ok"]
    body = {"model": served.model, "sample": {"prompt": "fine", "width": 64, "height": 64,
                                              "num_inference_steps": 1, "seed": 1}, "wait": True}
    r = served.client.post("/generate", json=body)
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text


def post_text(client, path, text: str, **headers):
    return client.post(path, content=text.encode(), headers={"Content-Type": "application/json", **headers})


# -- 1. a lone surrogate ------------------------------------------------------------------------------
def test_a_lone_surrogate_is_refused_at_the_boundary_naming_the_field(served):
    model = json.dumps(served.model)
    r = post_text(served.client, "/generate", f'{{"model": {model}, "sample": {{"prompt": "{LONE}"}}, "wait": true}}')
    assert r.status_code == 422 and r.json()["field"] == "sample.prompt", r.text
    r = post_text(served.client, "/generate", f'{{"model": {model}, "sample": {{"prompt": "a", "negative_prompt": '
                                              f'"x{LONE}y"}}}}')
    assert r.status_code == 422 and r.json()["field"] == "sample.negative_prompt", r.text
    r = post_text(served.client, "/sdapi/v1/txt2img", f'{{"prompt": "{LONE}", "steps": 1, "width": 64, "height": 64}}')
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "prompt"], r.text
    r = post_text(served.client, "/v1/images/generations", f'{{"prompt": "{LONE}", "size": "64x64"}}')
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt", r.text
    still_serving(served)


def test_a_valid_surrogate_pair_is_text(served):
    model = json.dumps(served.model)
    r = post_text(served.client, "/generate", f'{{"model": {model}, "sample": {{"prompt": "a fox \\ud83e\\udd8a", '
                                              '"width": 64, "height": 64, "num_inference_steps": 1}, "wait": true}')
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text


def test_the_job_log_survives_text_it_cannot_write(capsys):
    joblog.emit('request x ok prompt="\ud800"')
    assert "\\ud800" in capsys.readouterr().out


def test_bookkeeping_that_fails_never_ends_the_engine(served, monkeypatch):
    def broken(_line):
        raise RuntimeError("the log is gone")
    monkeypatch.setattr(joblog, "emit", broken)
    monkeypatch.setattr(served.engine.metrics, "request_finished", lambda _req: 1 / 0)
    still_serving(served)
    still_serving(served)
    assert served.loop.is_alive()


def test_an_error_inside_the_engine_loop_costs_that_request_only(served, monkeypatch):
    calls = {"n": 0}
    original = served.engine._claim_batch

    def once(head):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("injected")
        return original(head)
    monkeypatch.setattr(served.engine, "_claim_batch", once)
    body = {"model": served.model, "sample": {"prompt": "x", "width": 64, "height": 64, "num_inference_steps": 1},
            "wait": True}
    r = served.client.post("/generate", json=body)
    assert r.json()["status"] == "error" and "injected" in r.json()["error"]
    assert served.loop.is_alive()
    still_serving(served)


def test_a_stopping_engine_answers_every_waiting_client(tiny, tmp_path):
    """`wait: true` clients get their answer when the engine stops, so its process can exit."""
    from extensions_built_in.inference_engine.worker import Faults
    # the first holds at step 1; max_batch 1: the second waits in the queue (batched, it would join the first's call)
    eng = InProcessEngine(str(tmp_path), token=TOKEN, faults=Faults(hold_step=1), max_batch=1)
    body = {"model": {"arch": "zimage", "name_or_path": tiny("zimage")},
            "sample": {"prompt": "x", "width": 64, "height": 64, "num_inference_steps": 2}, "wait": True}
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(httpx.post(eng.url + "/generate", json=body,
                                                                          headers=AUTH, timeout=120)))
               for _ in range(2)]
    for t in threads:
        t.start()
    while eng.engine.current is None or eng.engine.queue_length() < 1:      # one runs, one waits
        eng.engine._stopping.wait(0.01)
    eng.engine.stop()
    eng.loop.join(60)
    for t in threads:
        t.join(60)
    eng.server.stop()
    assert [a.json()["status"] for a in answers] == ["cancelled", "cancelled"]


# -- 2. non-finite numbers ----------------------------------------------------------------------------
NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e999")


@pytest.mark.parametrize("value", NON_FINITE)
@pytest.mark.parametrize("key", ["width", "height", "num_inference_steps", "seed", "batch_size"])
def test_non_finite_numbers_in_integer_fields_are_422(served, key, value):
    model = json.dumps(served.model)
    r = post_text(served.client, "/generate", f'{{"model": {model}, "sample": {{"prompt": "a", "{key}": {value}}}}}')
    assert r.status_code == 422 and r.json()["field"] == f"sample.{key}", r.text
    # the keep-alive connection still carries the next request
    assert served.client.get("/health").status_code == 200


@pytest.mark.parametrize("value", NON_FINITE)
@pytest.mark.parametrize("key", ["num_frames", "fps"])
def test_non_finite_numbers_in_video_fields_are_422(served, tiny, key, value):
    model = json.dumps({"arch": "wan21", "name_or_path": tiny("wan21")})
    r = post_text(served.client, "/generate", f'{{"model": {model}, "sample": {{"prompt": "a", "{key}": {value}}}}}')
    assert r.status_code == 422 and r.json()["field"] == f"sample.{key}", r.text


@pytest.mark.parametrize("value", NON_FINITE)
def test_non_finite_numbers_on_the_compat_routes(served, value):
    for key in ("width", "height", "steps"):
        r = post_text(served.client, "/sdapi/v1/txt2img", f'{{"prompt": "a", "{key}": {value}}}')
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", key], r.text
    r = post_text(served.client, "/sdapi/v1/txt2img", f'{{"prompt": "a", "steps": 1, "unknown_extra": {value}}}')
    assert r.status_code == 422, r.text        # echoed back in `parameters`, it would be a 500
    r = post_text(served.client, "/v1/images/generations", f'{{"prompt": "a", "num_inference_steps": {value}}}')
    assert r.status_code == 400 and r.json()["error"]["param"] == "num_inference_steps", r.text
    assert served.client.get("/health").status_code == 200


# -- 3. links out of the listed folders ---------------------------------------------------------------
def test_lora_listings_skip_links_that_leave_the_folder(served):
    names = [e["name"] for e in served.client.get("/loras").json()["loras"]]
    assert names == ["ok"], names
    a1111 = [e["name"] for e in served.client.get("/sdapi/v1/loras").json()]
    assert a1111 == ["ok"], a1111
    text = served.client.get("/loras").text
    assert "passwd" not in text and "root:" not in text


def test_a_prompt_lora_tag_naming_a_link_out_is_refused_on_prompt(served):
    r = served.client.post("/sdapi/v1/txt2img", json={"prompt": "a <lora:passwd_link:1>", "steps": 1,
                                                       "width": 64, "height": 64})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "prompt"], r.text


@pytest.mark.parametrize("content", [b"\xff\xff\x00\x00\x00\x00\x00\x00{}",     # a header length past the end
                                     b"\x02\x00\x00\x00\x00\x00\x00\x00{}"])    # no tensors at all
def test_a_prompt_lora_whose_file_is_refused_names_prompt(served, content):
    bad = os.path.join(served.engine.lora_folder, "bad.safetensors")
    with open(bad, "wb") as f:
        f.write(content)
    try:
        r = served.client.post("/sdapi/v1/txt2img", json={"prompt": "a <lora:bad:1>", "steps": 1, "width": 64,
                                                           "height": 64})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "prompt"], r.text
    finally:
        os.remove(bad)


def test_the_library_does_not_follow_links_out_or_around(served):
    entries = [e for e in served.client.get("/library").json()["entries"] if e["source"] == "folder"]
    paths = [e["path"] for e in entries]
    assert len(paths) == len(set(paths)) == 1, paths       # m.safetensors once: no loop, no link out
    assert paths[0].endswith(os.path.join("loras", "m.safetensors"))


# -- 7. the token before the body ---------------------------------------------------------------------
@pytest.mark.parametrize("path,body", [("/generate", "{"), ("/generate", '{"model": 1}'),
                                       ("/queue/x/move", "{"), ("/sdapi/v1/txt2img", "{"),
                                       ("/v1/images/generations", "{"), ("/v1/videos", "{"),
                                       ("/sdcpp/v1/img_gen", "{"), ("/sdcpp/v1/vid_gen", "{"),
                                       ("/sdcpp/v1/jobs/x/cancel", "{"), ("/comfy/prompt", "{"),
                                       ("/comfy/api/prompt", '{"prompt": 1}')])
def test_no_token_is_401_whatever_the_body(served, path, body):
    r = httpx.post(served.url + path, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 401, r.text


# -- 9. the compatibility port's /outputs -------------------------------------------------------------
@pytest.mark.parametrize("path", ["/outputs/%00", "/outputs/a%00b.png", "/outputs/../engine.json", "/nowhere"])
def test_the_compat_port_answers_404_naming_a_field(served, path):
    for url in (served.compat_url, served.url):
        r = httpx.get(url + path, headers=AUTH)
        assert r.status_code == 404 and r.json()["field"], (url, r.text)


def test_the_compat_port_names_the_field_of_405(served):
    r = httpx.delete(served.compat_url + "/sdapi/v1/txt2img", headers=AUTH)
    assert r.status_code == 405 and r.json()["field"] == "method", r.text


# -- bodies -------------------------------------------------------------------------------------------
def test_json_bodies_are_bounded_with_a_413(served):
    big = json.dumps({"position": 0, "pad": "x" * (3 << 20)})
    r = post_text(served.client, "/queue/x/move", big)
    assert r.status_code == 413 and r.json()["field"] == "body", r.text
    r = post_text(served.client, "/sdapi/v1/txt2img", json.dumps({"prompt": "x" * (3 << 20)}))
    assert r.status_code == 413, r.text
    huge = json.dumps({"model": served.model, "sample": {"prompt": "x" * (70 << 20)}})
    r = post_text(served.client, "/generate", huge)
    assert r.status_code == 413 and "bytes" in r.json()["detail"], r.text[:300]
    still_serving(served)


def test_a_data_url_input_still_fits_the_generate_route(served, tmp_path):
    import base64
    from testing.fixtures import input_image
    url = "data:image/png;base64," + base64.b64encode(open(input_image(tmp_path / "in.png"), "rb").read()).decode()
    body = {"model": served.model, "sample": {"prompt": "x", "init_img": url, "width": 64, "height": 64,
                                              "num_inference_steps": 2, "strength": 0.5}, "wait": True}
    assert served.client.post("/generate", json=body).json()["status"] == "ok"


# -- 11. Host and Origin ------------------------------------------------------------------------------
ROUTES = [("GET", "/health"), ("GET", "/models"), ("POST", "/generate"), ("GET", "/queue"), ("GET", "/loras"),
          ("GET", "/outputs/x.png"), ("POST", "/assets?name=a.png"), ("GET", "/metrics"),
          ("POST", "/sdapi/v1/txt2img"), ("GET", "/sdapi/v1/sd-models"), ("POST", "/v1/images/generations"),
          ("GET", "/v1/models"), ("POST", "/sdcpp/v1/img_gen"), ("GET", "/sdcpp/v1/capabilities"),
          ("POST", "/comfy/prompt"), ("GET", "/comfy/view?filename=x.png")]


@pytest.mark.parametrize("method,path", ROUTES)
@pytest.mark.parametrize("headers,field", [({"Host": "evil.example:8675"}, "host"),
                                           ({"Host": "evil.example"}, "host"),
                                           ({"Origin": "http://evil.example"}, "origin"),
                                           ({"Origin": "null"}, "origin"),
                                           ({"Referer": "http://evil.example/page"}, "referer")])
def test_foreign_hosts_and_origins_get_403_on_every_route(served, method, path, headers, field):
    for url in (served.url, served.compat_url):
        r = httpx.request(method, url + path, headers={**AUTH, **headers}, content=b"{}")
        if url == served.compat_url and not path.startswith(("/sdapi", "/v1", "/outputs")):
            assert r.status_code in (403, 404), r.text
            if r.status_code == 404:
                continue
        assert r.status_code == 403 and r.json()["field"] == field, (url, path, r.text)


@pytest.mark.parametrize("headers", [{"Host": "localhost:1234"}, {"Host": "127.0.0.1"}, {"Host": "[::1]:9"},
                                     {"Host": "a.localhost"}, {"Origin": "http://localhost:8675"},
                                     {"Origin": "http://127.0.0.1:3000"}, {"Referer": "http://[::1]:8675/generate"}])
def test_this_machines_names_and_pages_are_served(served, headers):
    r = httpx.get(served.url + "/queue", headers={**AUTH, **headers})
    assert r.status_code == 200, r.text


def test_the_proxied_ui_origin_reaches_the_engine(served):
    """The UI's proxy forwards the browser's headers: a page of the UI on loopback is not foreign."""
    r = served.client.post("/generate", json={"model": served.model, "sample": {"prompt": "x", "width": 64,
                           "height": 64, "num_inference_steps": 1}, "wait": True},
                           headers={"Origin": "http://localhost:8675", "Referer": "http://localhost:8675/generate"})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text


# -- leftovers of a killed engine ---------------------------------------------------------------------
def test_start_up_removes_partial_files_of_every_folder(tmp_path):
    from extensions_built_in.inference_engine.InferenceEngine import remove_stale_engine_json
    (tmp_path / "assets").mkdir()
    (tmp_path / "outputs").mkdir()
    partial = [tmp_path / "assets" / ".up.png.0123456789ab.tmp", tmp_path / "outputs" / ".r.png.0123456789ab.tmp"]
    for p in partial:
        p.write_bytes(b"half")
    kept = tmp_path / "assets" / "keep.png"
    kept.write_bytes(b"whole")
    (tmp_path / "engine.json.4242.tmp").write_text("{")
    eng = InProcessEngine(str(tmp_path), token=TOKEN)
    eng.close()
    assert remove_stale_engine_json(str(tmp_path)) == 1
    assert not any(p.exists() for p in partial) and kept.exists()
    assert not (tmp_path / "engine.json.4242.tmp").exists()


# -- links in every listed folder, as a property ------------------------------------------------------
def test_listings_never_leave_their_folder_whatever_the_links(tiny, tmp_path):
    """A random tree of LoRA files, links to files inside and outside, links to folders inside (loops)
    and outside: /loras' and /library's listings name only files whose real path is inside, each
    real folder walked once."""
    import shutil
    import tempfile

    from hypothesis import HealthCheck, given, settings, strategies as st

    from toolkit import library, lora_headers

    lora = tmp_path / "one.safetensors"
    write_tiny_lora("zimage", tiny("zimage"), lora)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(lora, outside / "far.safetensors")
    op = st.tuples(st.sampled_from(["file", "link_in", "link_out", "dir", "dirlink_in", "dirlink_out"]),
                   st.integers(0, 3), st.integers(0, 9))

    @given(ops=st.lists(op, min_size=1, max_size=12))
    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(ops):
        root = tempfile.mkdtemp(dir=tmp_path)
        dirs = [root]
        files = []
        for kind, d, n in ops:
            at = dirs[d % len(dirs)]
            name = os.path.join(at, f"{kind}{n}")
            if os.path.lexists(name) or os.path.lexists(name + ".safetensors"):
                continue
            if kind == "file":
                shutil.copy(lora, name + ".safetensors")
                files.append(name + ".safetensors")
            elif kind == "link_in" and files:
                os.symlink(files[n % len(files)], name + ".safetensors")
            elif kind == "link_out":
                os.symlink(outside / "far.safetensors", name + ".safetensors")
            elif kind == "dir":
                os.mkdir(name)
                dirs.append(name)
            elif kind == "dirlink_in":
                os.symlink(dirs[n % len(dirs)], name, target_is_directory=True)
            elif kind == "dirlink_out":
                os.symlink(outside, name, target_is_directory=True)
        top = os.path.realpath(root)
        listed = [os.path.join(root, e["path"]) if not os.path.isabs(e.get("path", "")) else e["path"]
                  for e in lora_headers.list_loras(root)]
        entries = library.scan_folder(root)
        for path in listed + [e["path"] for e in entries]:
            assert os.path.realpath(path).startswith(top + os.sep), path
        assert len({os.path.realpath(p) for p in listed}) <= len(files)
    check()


# -- each hostile case once, then a normal request ----------------------------------------------------
def gauntlet(served, folder) -> list:
    """Every kind of hostile request the probe found, sent once each against `served` (an engine with
    the compat routes and its compat port): (label, status) of each answer."""
    from testing.tests.test_hostile_files import _png, _text, _ztxt
    from testing.tests.test_malformed_files import split, join
    model = json.dumps(served.model)
    c = served.client
    auth = {"X-Engine-Token": c.token}
    bad = os.path.join(folder, "bad.safetensors")
    header, data = split(open(os.path.join(served.model["name_or_path"], "transformer",
                                           "diffusion_pytorch_model.safetensors"), "rb").read())
    with open(bad, "wb") as f:
        f.write(join(header, data[: len(data) // 2]))               # truncated data
    cases = [
        ("lone surrogate", lambda: post_text(c, "/generate", f'{{"model": {model}, "sample": {{"prompt": "{LONE}"}}}}')),
        ("NaN width", lambda: post_text(c, "/generate", f'{{"model": {model}, "sample": {{"width": NaN}}}}')),
        ("1e999 steps (A1111)", lambda: post_text(c, "/sdapi/v1/txt2img", '{"prompt": "a", "steps": 1e999}')),
        ("Infinity steps (OpenAI)", lambda: post_text(c, "/v1/images/generations",
                                                      '{"prompt": "a", "num_inference_steps": Infinity}')),
        ("LoRA link out", lambda: c.get("/loras")),
        ("library links", lambda: c.get("/library")),
        ("quadratic infotext", lambda: c.post("/settings", content=_png(_text("parameters", "p\n" + "a " * 40000)))),
        ("zTXt bomb", lambda: c.post("/settings", content=_png(*[_ztxt("parameters", 16 << 20)] * 10))),
        ("malformed safetensors", lambda: c.post("/generate", json={"model": {"arch": "zimage", "name_or_path": bad},
                                                                      "sample": {"prompt": "a"}})),
        ("body before token", lambda: httpx.post(served.url + "/generate", content=b"{",
                                                 headers={"Content-Type": "application/json"})),
        ("compat /outputs/%00", lambda: httpx.get(served.compat_url + "/outputs/%00", headers=auth)),
        ("100 MB body", lambda: post_text(c, "/generate", '{"pad": "' + "x" * (100 << 20) + '"}')),
        ("foreign Origin", lambda: c.get("/queue", headers={"Origin": "http://evil.example"})),
        ("rebinding Host", lambda: c.get("/queue", headers={"Host": "evil.example:8675"})),
    ]
    answers = []
    for label, send in cases:
        t0 = time.perf_counter()
        status = send().status_code
        answers.append((label, status, t0, time.perf_counter()))
    return answers


def test_each_hostile_request_once_then_the_engine_still_serves(served, tmp_path):
    answers = {label: status for label, status, *_ in gauntlet(served, tmp_path)}
    answered = ("LoRA link out", "library links", "quadratic infotext")       # served, at once
    assert all(400 <= s < 500 or label in answered and s == 200 for label, s in answers.items()), answers
    assert answers["body before token"] == 401 and answers["100 MB body"] == 413
    assert answers["foreign Origin"] == answers["rebinding Host"] == 403
    still_serving(served)


def test_the_http_process_never_imports_torch_whatever_it_is_sent(tiny, tmp_path):
    """The engine's HTTP process holds no model and never imports torch: importing it there holds the
    GIL for seconds, stalling /health, and costs ~0.5 GiB that process never needs (the first /generate
    did, through toolkit.models.v2's package imports). Every hostile request, then a real one, against
    `run.py`; torch's library must not be mapped into that process."""
    from types import SimpleNamespace

    from testing.engine_client import EngineProcess
    loras = tmp_path / "loras"
    write_tiny_lora("zimage", tiny("zimage"), loras / "ok.safetensors")
    (loras / "passwd_link.safetensors").symlink_to("/etc/passwd")
    from testing.ports import free_port
    compat_port = free_port()
    proc = EngineProcess(str(tmp_path / "job"), engine_extra={"lora_folder": str(loras), "compat_port": compat_port,
                                                              "model_roots": [str(tmp_path)]})
    try:
        proc.wait_ready()
        served = SimpleNamespace(client=proc.client, url=f"http://127.0.0.1:{proc.info['port']}",
                                 compat_url=f"http://127.0.0.1:{compat_port}",
                                 model={"arch": "zimage", "name_or_path": tiny("zimage")})
        answers = {label: status for label, status, *_ in gauntlet(served, str(tmp_path))}
        assert answers["malformed safetensors"] == 422, answers
        still_serving(served)
        with open(f"/proc/{proc.info['pid']}/maps") as f:
            mapped = f.read()
        assert "libtorch" not in mapped, "the engine's HTTP process has imported torch"
    finally:
        assert proc.stop() == 0
