"""How fast /health answers while every hostile request the probe found is sent, once each, to a real
engine (its generation worker in its own process, the compatibility routes on the main port and on a
port of their own): the latency of each /health poll, polled back to back on its own connection.

    .venv/bin/python testing/probe_hostile.py [--rounds 3] [--out testing/.bench/probe_hostile.json]

Prints each hostile request's status, seconds and the slowest /health poll while it ran, and the
/health latencies over the whole run (median, p99, max); writes the same as JSON. (A figure, not a test: these machines are noisy. The tests check
that every answer is a 4xx and that the engine still serves: testing/tests/test_hostile.py.)
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


POLLER = """
import sys, time, json, signal, httpx
url, out = sys.argv[1], sys.argv[2]
lat = []
def done(*_):
    json.dump(lat, open(out, "w")); sys.exit(0)
signal.signal(signal.SIGTERM, done)
with httpx.Client(timeout=30) as c:
    while True:
        t0 = time.perf_counter(); c.get(url); lat.append((t0, time.perf_counter() - t0))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "testing", ".bench", "probe_hostile.json"))
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import subprocess
    from types import SimpleNamespace

    from testing.engine_client import EngineProcess
    from testing.tests.test_hostile import gauntlet
    from toolkit.models.tiny import cached_tiny
    from toolkit.models.tiny.loras import write_tiny_lora

    # the engine as run.py runs it (HTTP in one process, generation in its worker), the poller in a
    # process of its own: neither shares a GIL with the client sending the hostile requests
    root = tempfile.mkdtemp(prefix="aitk_probe_")
    tiny = str(cached_tiny("zimage"))
    loras = os.path.join(root, "loras")
    write_tiny_lora("zimage", tiny, os.path.join(loras, "ok.safetensors"))
    os.symlink("/etc/passwd", os.path.join(loras, "passwd_link.safetensors"))
    from testing.ports import free_port
    compat_port = free_port()
    proc = EngineProcess(os.path.join(root, "job"), engine_extra={"lora_folder": loras, "compat_port": compat_port})
    proc.wait_ready()
    while not (proc.client.health().get("worker") or {}).get("alive"):     # its worker up (torch imported)
        time.sleep(0.1)
    url = f"http://127.0.0.1:{proc.info['port']}"
    served = SimpleNamespace(client=proc.client, url=url, compat_url=f"http://127.0.0.1:{compat_port}",
                             model={"arch": "zimage", "name_or_path": tiny})
    out = os.path.join(root, "health.json")
    poller = subprocess.Popen([sys.executable, "-c", POLLER, url + "/health", out])
    answers = []
    try:
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            for label, status, start, end in gauntlet(served, root):
                answers.append({"request": label, "status": status, "start": start, "seconds": end - start})
            answers.append({"request": "(round)", "seconds": time.perf_counter() - t0})
    finally:
        poller.terminate()
        poller.wait(30)
        proc.stop()
    with open(out) as f:
        polls = json.load(f)          # (perf_counter at the poll, seconds): one clock, CLOCK_MONOTONIC
    for a in answers:                 # the slowest /health poll during each request
        if "start" in a:
            during = [s for t, s in polls if a["start"] <= t <= a["start"] + a["seconds"]]
            a["health_max_ms"] = 1000 * max(during) if during else None
    lat = sorted(s for _t, s in polls)
    figures = {"health_polls": len(lat), "health_median_ms": 1000 * statistics.median(lat),
               "health_p99_ms": 1000 * lat[int(0.99 * (len(lat) - 1))], "health_max_ms": 1000 * lat[-1],
               "answers": answers}
    for a in answers:
        print(a)
    print(f"/health during the hostile requests: {len(lat)} polls, median {figures['health_median_ms']:.1f} ms, "
          f"p99 {figures['health_p99_ms']:.1f} ms, max {figures['health_max_ms']:.1f} ms")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
