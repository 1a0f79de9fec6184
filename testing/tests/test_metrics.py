"""GET /metrics: the Prometheus text format from a per-engine registry, counters moving as requests
end ok, in error and cancelled; behind the token unless engine.metrics_open."""
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from testing.engine_client import InProcessEngine

TOKEN = "test-token-123"


@pytest.fixture(scope="module")
def eng(tiny, tmp_path_factory):
    e = InProcessEngine(str(tmp_path_factory.mktemp("metrics")), token=TOKEN)
    e.tiny = tiny
    yield e
    e.close()


def body(eng, steps=2, **extra):
    return {"model": {"arch": "zimage", "name_or_path": eng.tiny("zimage")},
            "sample": {"prompt": "a test", "width": 64, "height": 64, "num_inference_steps": steps, "seed": 1},
            **extra}


def scrape(eng) -> dict:
    """{(sample name, frozenset(labels)): value} of one /metrics answer, which must parse."""
    r = eng.client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_parse_and_move(eng):
    before = scrape(eng)
    assert ("aitk_queue_depth", frozenset()) in before and ("aitk_worker_restarts_total", frozenset()) in before
    # ok
    assert eng.client.stream(body(eng, steps=3))[-1][0]["status"] == "ok"
    after_ok = scrape(eng)
    assert value(after_ok, "aitk_requests_total", status="ok", arch="zimage") == \
        value(before, "aitk_requests_total", status="ok", arch="zimage") + 1
    assert value(after_ok, "aitk_step_duration_seconds_count") >= value(before, "aitk_step_duration_seconds_count") + 2
    assert value(after_ok, "aitk_request_duration_seconds_count", status="ok") >= 1
    assert value(after_ok, "aitk_pool_misses_total") > 0 and value(after_ok, "aitk_pool_resident_bytes") > 0
    assert value(after_ok, "aitk_load_bytes_total") > 0 and value(after_ok, "aitk_load_seconds_total") > 0
    # error: an injected out-of-memory on the first step
    eng.engine.faults.reset(sample_oom=1)
    assert eng.client.stream(body(eng))[-1][0]["status"] == "error"
    after_err = scrape(eng)
    assert value(after_err, "aitk_requests_total", status="error", arch="zimage") == \
        value(after_ok, "aitk_requests_total", status="error", arch="zimage") + 1
    # cancelled: step 1 is held until the cancel lands
    eng.engine.faults.reset(hold_step=1)
    try:
        eng.client.stream(body(eng, request_id="m-cancel", stream={"detach": True}),
                          on_frame=lambda h, p: h["type"] == "progress")
        assert eng.client.post("/cancel/m-cancel").status_code == 200
        assert eng.engine.get("m-cancel").done_event.wait(120)
    finally:
        eng.engine.faults.hold_step = 0
    after_cancel = scrape(eng)
    assert value(after_cancel, "aitk_requests_total", status="cancelled", arch="zimage") == \
        value(after_err, "aitk_requests_total", status="cancelled", arch="zimage") + 1
    assert value(after_cancel, "aitk_cancels_total") >= value(after_err, "aitk_cancels_total") + 1


def test_metrics_need_the_token(eng):
    for headers in ({}, {"X-Engine-Token": "wrong-token"}):
        r = httpx.get(eng.url + "/metrics", headers=headers)
        assert r.status_code == 401 and r.json()["field"] == "token"
    assert httpx.get(eng.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_metrics_open(tmp_path):
    e = InProcessEngine(str(tmp_path), token=TOKEN, metrics_open=True)
    try:
        r = httpx.get(e.url + "/metrics")
        assert r.status_code == 200 and "aitk_queue_depth" in r.text
        assert httpx.get(e.url + "/queue").status_code == 401      # only /metrics opens
    finally:
        e.close()


def test_engines_have_their_own_registries(eng, tmp_path):
    e = InProcessEngine(str(tmp_path), token=TOKEN)
    try:
        fresh = {(s.name, frozenset(s.labels.items())): s.value for f in
                 text_string_to_metric_families(e.client.get("/metrics").text) for s in f.samples}
        assert not any(name == "aitk_requests_total" for name, _ in fresh)
    finally:
        e.close()


def test_grafana_dashboard_names_only_served_metrics(eng):
    """docs/grafana_dashboard.json queries metric names this engine serves (no typo drifts in)."""
    import json
    import os
    import re
    from testing.engine_client import ROOT
    with open(os.path.join(ROOT, "docs", "grafana_dashboard.json")) as f:
        dash = json.load(f)
    served = set()
    for family in text_string_to_metric_families(eng.client.get("/metrics").text):
        served.update(s.name for s in family.samples)
        served.add(family.name)
    served.update(f"aitk_requests_total aitk_step_duration_seconds_bucket aitk_request_duration_seconds_bucket "
                  f"aitk_cancels_total".split())      # histogram/counter samples present once something ran
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    names = {n for e in exprs for n in re.findall(r"\baitk_[a-z_]+", e)}
    assert names and names <= served, names - served
