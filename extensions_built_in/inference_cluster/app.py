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
