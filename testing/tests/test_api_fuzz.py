"""schemathesis over the engine's own OpenAPI schema (native routes and the compatibility routes),
against the real server on loopback with a tiny model: no answer is a 5xx, and every 4xx names the
field it is about (each API family in its own shape). Cases come from schemathesis' strategies,
valid and invalid ones, driven by hypothesis with a fixed seed and a small budget per route, so the
run is deterministic and takes seconds. (schemathesis' own pytest plugin does not load under
pytest 9, so the operations are parametrized here.)"""
import json

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from testing.engine_client import EngineClient, InProcessEngine

TOKEN = "fuzz-token-123"
EXAMPLES = 12                 # per route and generation mode


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from extensions_built_in.inference_engine.compat import compat_routes
    from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app
    eng = InProcessEngine(str(tmp_path_factory.mktemp("fuzz")), token=TOKEN)
    eng.server.stop()          # serve the compatibility routes on the same app, with the schema on
    eng.server = ServerThread(create_app(eng.engine, TOKEN, extra_routes=[compat_routes(engine=eng.engine)],
                                         docs=True), bind_socket(0)).start()
    eng.url = f"http://127.0.0.1:{eng.server.port}"
    eng.client.close()
    eng.client = EngineClient(eng.url, TOKEN)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def api(served):
    return schemathesis.openapi.from_url(f"{served.url}/openapi.json", headers={"X-Engine-Token": TOKEN})


def _operations(served_url=None) -> list:
    return ["GET /health", "GET /models", "GET /inspect/{profile}", "POST /generate", "GET /stream/{request_id}",
            "POST /cancel/{request_id}", "GET /queue", "POST /queue/{request_id}/move", "POST /unload", "POST /assets", "GET /outputs/{relpath}",
            "POST /settings", "POST /sdapi/v1/txt2img", "POST /sdapi/v1/png-info", "GET /sdapi/v1/sd-models", "GET /sdapi/v1/options", "POST /sdapi/v1/options",
            "GET /sdapi/v1/progress", "POST /sdapi/v1/interrupt", "GET /sdapi/v1/samplers",
            "POST /v1/images/generations", "GET /v1/models", "POST /sdapi/v1/img2img", "POST /v1/images/edits",
            "GET /loras", "GET /library", "GET /sdapi/v1/loras", "POST /sdapi/v1/refresh-loras",
            "POST /v1/videos", "GET /v1/videos", "GET /v1/videos/{video_id}", "DELETE /v1/videos/{video_id}",
            "GET /v1/videos/{video_id}/content",
            "POST /sdcpp/v1/img_gen", "POST /sdcpp/v1/vid_gen", "GET /sdcpp/v1/jobs/{job_id}",
            "POST /sdcpp/v1/jobs/{job_id}/cancel", "GET /sdcpp/v1/capabilities", *COMFY_ROUTES]


# ComfyUI's API, under /comfy on the engine port (compat/comfy.py; its /api aliases are not in the schema)
COMFY_ROUTES = ["POST /comfy/prompt", "GET /comfy/prompt", "GET /comfy/queue", "POST /comfy/queue",
                "POST /comfy/interrupt", "POST /comfy/free", "GET /comfy/history", "GET /comfy/history/{prompt_id}",
                "POST /comfy/history", "GET /comfy/view", "POST /comfy/upload/image", "POST /comfy/upload/mask",
                "GET /comfy/object_info", "GET /comfy/object_info/{node}", "GET /comfy/models",
                "GET /comfy/models/{folder}", "GET /comfy/embeddings", "GET /comfy/extensions",
                "GET /comfy/system_stats"]


def names_a_field(body) -> bool:
    """Native answers carry `field` (and sd.cpp's `{error, field}`); A1111's 422 is FastAPI's list with a `loc`; OpenAI's error has
    a `param` key (null where no field is at fault: auth, a missing route)."""
    if not isinstance(body, dict):
        return False
    if isinstance(body.get("field"), str) and body["field"]:
        return True
    detail = body.get("detail")
    if isinstance(detail, list) and detail and isinstance(detail[0], dict) and detail[0].get("loc"):
        return True
    err = body.get("error")
    return isinstance(err, dict) and "param" in err and "message" in err


def test_the_schema_lists_every_route(api):
    labels = {op.ok().label for op in api.get_all_operations()}
    assert set(_operations()) <= labels, set(_operations()) - labels


# the routes that take images reach their image checks only past the model check: while they are fuzzed,
# what a call naming no model gets is a tiny model that serves img2img and inpaint
IMAGE_ROUTES = ("POST /sdapi/v1/img2img", "POST /v1/images/edits")
# OpenAI's video create: a call naming no model gets a tiny video model, its jobs kept small by the limits
VIDEO_ROUTES = ("POST /v1/videos",)


@pytest.mark.parametrize("label", _operations())
def test_no_5xx_and_every_4xx_names_a_field(api, served, label, tiny, monkeypatch):
    op = next(r.ok() for r in api.get_all_operations() if r.ok().label == label)
    if label in IMAGE_ROUTES:
        monkeypatch.setattr(served.engine, "default_model", {"arch": "zimage", "name_or_path": tiny("zimage")})
    if label in VIDEO_ROUTES:
        from dataclasses import replace
        monkeypatch.setattr(served.engine, "default_model", {"arch": "ltx", "name_or_path": tiny("ltx")})
        monkeypatch.setattr(served.engine, "limits", replace(served.engine.limits, max_pixels=96 * 96, max_frames=17,
                                                             max_steps=4))
    failures = []

    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        @given(case=op.as_strategy(mode))
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case):
            headers = {**(case.headers or {}), "X-Engine-Token": TOKEN}
            if label in ("POST /generate",) and isinstance(case.body, dict):
                case.body["wait"] = True            # a JSON answer, not a stream left open
            response = case.call(base_url=served.url, headers=headers, timeout=120)
            if response.status_code >= 500:
                failures.append((mode.value, response.status_code, case.as_curl_command(), response.text[:300]))
            elif response.status_code >= 400:
                try:
                    body = response.json()
                except ValueError:
                    body = None
                if not names_a_field(body):
                    failures.append((mode.value, response.status_code, case.as_curl_command(), response.text[:300]))
        try:
            check()
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE, label    # a route with no input has no invalid one
    # requests the fuzz queued are cancelled so the next route starts on an idle engine
    for r in served.client.get("/queue").json()["queued"]:
        served.client.post(f"/cancel/{r['request_id']}")
    assert not failures, json.dumps(failures[:5], indent=1)


# -- hostile values in every field ----------------------------------------------------------------------
# What JSON carries that no field accepts: a lone surrogate (`"\ud800"` decodes to one), NaN, ±Infinity
# and 1e999 (an overflow json.loads makes inf). Each case is a schema-valid body with one leaf replaced,
# written as raw JSON text; the answer is a 4xx naming a field (never a 5xx), and the engine goes on.
HOSTILE_STRINGS = ["\\ud800", "a\\udfffb", "\\udc80\\ud800", "x" * 3 + "\\ud83d"]
HOSTILE_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]
JSON_ROUTES = ("POST /generate", "POST /sdapi/v1/txt2img", "POST /sdapi/v1/img2img", "POST /sdapi/v1/options",
               "POST /v1/images/generations", "POST /queue/{request_id}/move", "POST /v1/videos",
               "POST /sdcpp/v1/img_gen", "POST /sdcpp/v1/vid_gen", "POST /comfy/prompt", "POST /comfy/queue",
               "POST /comfy/history", "POST /comfy/free", "POST /comfy/interrupt")


def _leaves(value, path=()):
    """(path, leaf) of every string and number in a JSON value (the body itself included)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, path + (i,))
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield path, value


def _with_raw(body, path, raw: str) -> str:
    """`body` as JSON text, the leaf at `path` replaced by the raw JSON token `raw`."""
    marker = "__HOSTILE_LEAF__"
    target = body
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = marker
    return json.dumps(body).replace(json.dumps(marker), raw)


@pytest.mark.parametrize("label", JSON_ROUTES)
def test_hostile_values_in_any_field_are_a_4xx_naming_it(api, served, label, tiny, monkeypatch):
    from hypothesis import strategies as st
    op = next(r.ok() for r in api.get_all_operations() if r.ok().label == label)
    monkeypatch.setattr(served.engine, "default_model", {"arch": "zimage", "name_or_path": tiny("zimage")})
    failures, sent = [], []

    @given(case=op.as_strategy(GenerationMode.POSITIVE), data=st.data())
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case, data):
        if not isinstance(case.body, dict):
            return
        body = json.loads(json.dumps(case.body))
        if label == "POST /generate":
            body["wait"] = True
        leaves = [(p, v) for p, v in _leaves(body) if p != ("wait",)]
        if not leaves:
            return
        path, leaf = data.draw(st.sampled_from(leaves))
        raw = data.draw(st.sampled_from(HOSTILE_STRINGS if isinstance(leaf, str) else HOSTILE_NUMBERS))
        text = _with_raw(body, path, raw if not isinstance(leaf, str) else f'"{raw}"')
        url = served.url + case.formatted_path
        response = httpx.post(url, content=text, params=case.query, timeout=120,
                              headers={"Content-Type": "application/json", "X-Engine-Token": TOKEN})
        sent.append(path)
        if response.status_code >= 500:
            failures.append((response.status_code, text[:300], response.text[:300]))
        elif response.status_code >= 400:
            try:
                answer = response.json()
            except ValueError:
                answer = None
            if not names_a_field(answer):
                failures.append((response.status_code, text[:300], response.text[:300]))
    check()
    for r in served.client.get("/queue").json()["queued"]:
        served.client.post(f"/cancel/{r['request_id']}")
    assert served.client.get("/health").json()["ok"]
    assert not failures, json.dumps(failures[:5], indent=1)
