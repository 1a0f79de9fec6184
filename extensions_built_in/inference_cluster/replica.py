"""One cluster replica: a whole single engine (Engine, its generation worker and pool, the engine's
own HTTP app with the compatibility routes) on a loopback port inside the Serve replica actor.

Serve calls `call()`, which relays one HTTP request to that app and streams the answer back: first
a head {status, headers, replica, pid}, then the body's bytes as they come. So every route, check
and frame is the single engine's own code; the cluster only chooses the replica.
"""
import os
import threading

# hop-by-hop headers, and those Serve's own HTTP server writes again (a second Date or Server)
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "te", "upgrade",
               "date", "server"}


class _Job:
    """What an InferenceEngine process reads of its job: the name (its default job folder)."""

    def __init__(self, name: str):
        self.name = name


class EngineReplica:
    def __init__(self, process_config: dict, job_name: str):
        import httpx
        from ray import serve

        from extensions_built_in.inference_engine.InferenceEngine import InferenceEngine
        from extensions_built_in.inference_engine.compat import compat_routes
        from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app

        proc = InferenceEngine(0, _Job(job_name), process_config)      # the config checked as a single engine's
        self.engine = proc.make_engine()
        self.engine.start_worker()
        if proc.default_model is not None:
            self.engine.warm_load(proc.default_model)
        self.loop = threading.Thread(target=self.engine.run_forever, daemon=True, name="engine-loop")
        self.loop.start()
        app = create_app(self.engine, proc.token, extra_routes=[compat_routes(engine=self.engine)], docs=proc.docs)
        self.server = ServerThread(app, bind_socket(0)).start()
        self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.server.port}", timeout=None)
        self.replica_id = serve.get_replica_context().replica_id.unique_id

    async def call(self, method: str, path: str, query: str, headers: dict, body: bytes, **_routing):
        """`_routing` (target, components) is for the router only."""
        request = self.http.build_request(method, "/" + path, params=query or None, headers=headers, content=body)
        response = await self.http.send(request, stream=True)
        try:
            yield {"status": response.status_code, "replica": self.replica_id, "pid": os.getpid(),
                   "headers": {k: v for k, v in response.headers.items() if k.lower() not in HOP_HEADERS}}
            async for chunk in response.aiter_raw():
                yield chunk
        finally:
            await response.aclose()      # a caller gone away: the engine sees the disconnect (and cancels)

    def record_routing_stats(self) -> dict:
        """What the router ranks by: the pool's resident components, the queue, and whether the pool
        keeps components beyond the current model's (else a new model replaces what it holds)."""
        pool = (self.engine.worker_state.pool if self.engine.worker_state else None) or {}
        return {"resident": {e["key"]: e["bytes"] for e in pool.get("entries", [])},
                "queue": self.engine.queue_length() + (self.engine.current is not None),
                "keeps_warm": bool(self.engine.worker_options.get("keep_resident_gb"))}

    def check_health(self):
        """Serve's health check: a dead engine loop makes Serve replace this replica."""
        if not self.loop.is_alive():
            raise RuntimeError("the engine loop has stopped")

    def __del__(self):
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.stop()
            self.loop.join(10)
            self.server.stop()
