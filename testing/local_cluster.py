"""A local InferenceCluster for tests and benchmarks: a Ray head on loopback in this process (the
driver), CPU replicas, the ingress on a free port; engine.json written as `run.py` would."""
import json
import os
import sys
import time

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from testing.engine_client import EngineClient  # noqa: E402
from testing.ports import free_port  # noqa: E402


class _Job:
    def __init__(self, name):
        self.name = name


class LocalCluster:
    def __init__(self, job_folder: str, replicas: int = 2, num_cpus: float = 0.5, router: str = "affinity",
                 token: str = "test-token-123", engine_extra: dict | None = None, cluster_extra: dict | None = None):
        from extensions_built_in.inference_cluster.InferenceCluster import InferenceCluster
        self.replicas = replicas
        self.process = InferenceCluster(0, _Job("cluster_test"), {
            "type": "InferenceCluster", "device": "cpu",
            "cluster": {"replicas": replicas, "num_cpus": num_cpus, "port": free_port(), "router": router,
                        **(cluster_extra or {})},
            "engine": {"job_folder": job_folder, "token": token, **(engine_extra or {})}})
        self.url = self.process.start()
        self.process._write_engine_json()
        self.token = token
        self.client = EngineClient(self.url, token)
        self.wait_replicas(replicas)

    @property
    def engine_json(self) -> dict:
        with open(self.process.engine_json) as f:
            return json.load(f)

    def health(self) -> dict:
        return httpx.get(self.url + "/health", timeout=120).json()

    def wait_replicas(self, n: int, timeout: float = 240, exclude=()) -> list:
        """Each replica's /health once n live ones answer (none of `exclude`)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                replicas = [r for r in self.health().get("replicas", []) if r["replica"] not in exclude]
            except (httpx.HTTPError, ValueError):
                replicas = []
            if len(replicas) >= n:
                return replicas
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(replicas)} of {n} replicas answered within {timeout}s")
            time.sleep(0.2)

    def kill(self, replica: str):
        """Kill a replica's actor, as a crash would (Serve then starts a new one)."""
        import ray
        ray.kill(ray.get_actor(f"SERVE_REPLICA::engine#Engine#{replica}", namespace="serve"), no_restart=True)

    def close(self):
        self.client.close()
        try:
            os.remove(self.process.engine_json)
        except FileNotFoundError:
            pass
        self.process.shutdown()
