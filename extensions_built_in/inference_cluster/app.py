"""The Serve application of a cluster: N engine replicas behind the router, and the ingress."""
from ray import serve
from ray.serve.config import RequestRouterConfig

from extensions_built_in.inference_cluster.ingress import Ingress
from extensions_built_in.inference_cluster.replica import EngineReplica
from extensions_built_in.inference_cluster.router import ROUTERS

DEPLOYMENT = "Engine"


def build(*, replica_config: dict, job_name: str, replicas: int, num_cpus: float, num_gpus: float,
          router: str = "affinity", max_imbalance: int = 2, max_ongoing_requests: int = 64, planner: dict):
    """`replica_config`: an InferenceEngine process config (each replica's engine); `planner`: what
    the ingress resolves request models with (profiles_file, dtype, device)."""
    engines = serve.deployment(EngineReplica, name=DEPLOYMENT).options(
        num_replicas=replicas, max_ongoing_requests=max_ongoing_requests,
        ray_actor_options={"num_cpus": num_cpus, "num_gpus": num_gpus},
        health_check_period_s=2, health_check_timeout_s=30,
        request_router_config=RequestRouterConfig(
            request_router_class=ROUTERS[router], request_router_kwargs={"max_imbalance": max_imbalance},
            request_routing_stats_period_s=0.5, request_routing_stats_timeout_s=5))
    return Ingress.bind(engines.bind(replica_config, job_name), DEPLOYMENT, planner)


class OneRequestId:
    """Serve's HTTP proxy adds its own X-Request-Id to every response, after the engine's (which for
    /generate is the request's id, what clients read): keep the first. An ASGI middleware for the
    proxy (proxy_middlewares), outside Serve's own."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        async def send_one(message):
            if message["type"] == "http.response.start":
                seen, headers = False, []
                for key, value in message.get("headers", []):
                    if key.lower() == b"x-request-id":
                        if seen:
                            continue
                        seen = True
                    headers.append((key, value))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_one)


def proxy_middlewares() -> list:
    """Serve's proxy, where every request enters: one X-Request-Id, and the engine's Host and Origin
    checks (http_guard.OriginGuard) for the ingress's own bind (the replicas see only the ingress)."""
    import os

    from starlette.middleware import Middleware

    from extensions_built_in.inference_engine.http_guard import OriginGuard, is_loopback_name
    loopback = is_loopback_name(os.environ.get("AITK_CLUSTER_HOST", "127.0.0.1"))
    return [Middleware(OriginGuard, loopback_bind=loopback), Middleware(OneRequestId)]
