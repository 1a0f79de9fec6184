"""The InferenceCluster job process: engines on several devices behind one address, on Ray Serve.

One Serve replica per GPU (`cluster.num_gpus: 1`; on a CPU-only machine `num_gpus: 0` and a
`num_cpus` share), each a whole single engine (replica.py); an ingress on `cluster.host:port`
serving the engine's API (ingress.py); the affinity router (router.py). `engine:` takes the
InferenceEngine keys and means the same for every replica. It writes engine.json like a single
engine, so the UI proxy and every client find it the same way.
"""
import os
import secrets
import signal
import threading

from jobs.process.BaseProcess import BaseProcess
from toolkit.errors import ConfigError, check_keys
from toolkit.job_status import JobStatus

CLUSTER_KEYS = ("replicas", "num_cpus", "num_gpus", "host", "port", "router", "max_imbalance",
                "max_ongoing_requests", "address")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class InferenceCluster(BaseProcess):
    CONFIG_KEYS = ("device", "sqlite_db_path", "engine", "cluster", "offline")

    def __init__(self, process_id, job, config):
        from extensions_built_in.inference_engine.InferenceEngine import InferenceEngine
        super().__init__(process_id, job, config)
        c = self.get_conf("cluster", {})
        check_keys(c, CLUSTER_KEYS, "cluster")
        self.num_gpus = _number(c, "num_gpus", 0)
        self.device = str(self.get_conf("device", "cuda" if self.num_gpus else "cpu"))
        self.replicas = c.get("replicas", 1)
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, int) or self.replicas < 1:
            raise ConfigError("cluster.replicas", f"must be an integer >= 1 (one per GPU), got {self.replicas!r}")
        self.num_cpus = _number(c, "num_cpus", 1)
        self.host = c.get("host", "127.0.0.1")
        self.port = c.get("port", 8000)
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise ConfigError("cluster.port", f"must be a port number, got {self.port!r}")
        self.router = c.get("router", "affinity")
        if self.router not in ("affinity", "default"):
            raise ConfigError("cluster.router", f"must be 'affinity' or 'default' (Serve's power of two choices), "
                              f"got {self.router!r}")
        self.max_imbalance = c.get("max_imbalance", 2)
        self.max_ongoing_requests = c.get("max_ongoing_requests", 64)
        for key in ("max_imbalance", "max_ongoing_requests"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if key == "max_imbalance" else 1):
                raise ConfigError(f"cluster.{key}", f"must be an integer >= {0 if key == 'max_imbalance' else 1}, "
                                  f"got {v!r}")
        self.address = c.get("address")
        eng = dict(self.get_conf("engine", {}))
        for key in ("port", "compat_port", "comfy_port"):
            if eng.get(key):
                raise ConfigError(f"engine.{key}", "a cluster serves on cluster.port (compat routes included)")
        eng["token"] = eng.get("token") or secrets.token_urlsafe(32)      # one token for every replica
        eng["job_folder"] = os.path.abspath(eng.get("job_folder") or os.path.join("output", job.name))
        self.replica_config = {"type": "InferenceEngine", "device": self.device, "engine": eng}
        if self.get_conf("offline"):
            self.replica_config["offline"] = True
        check = InferenceEngine(process_id, job, self.replica_config)     # every engine key checked now
        self.token, self.job_folder, self.dtype = check.token, check.job_folder, check.dtype
        self.profiles_file = eng.get("profiles_file")
        self.engine_json = os.path.join(self.job_folder, "engine.json")
        self.job_status = JobStatus.from_env(self.get_conf("sqlite_db_path"))
        self._stop = threading.Event()

    def start(self) -> str:
        """Ray (a local head unless cluster.address), then the Serve app. Returns the ingress URL."""
        import ray
        from ray import serve

        from extensions_built_in.inference_cluster.app import build

        env = {"PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
        # Serve's HTTP proxy takes its middlewares from here only (app.proxy_middlewares)
        env["RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"] = "extensions_built_in.inference_cluster.app.proxy_middlewares"
        env["AITK_CLUSTER_HOST"] = self.host          # the Host check applies on a loopback bind
        for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "AITK_TINY_CACHE", "HF_HOME"):
            if k in os.environ:
                env[k] = os.environ[k]
        if self.address:
            ray.init(address=self.address, runtime_env={"env_vars": env})
        else:
            ray.init(include_dashboard=False, runtime_env={"env_vars": env}, configure_logging=False,
                     log_to_driver=False)
        serve.start(http_options={"host": self.host, "port": self.port})
        app = build(replica_config=self.replica_config, job_name=self.job.name, replicas=self.replicas,
                    num_cpus=self.num_cpus, num_gpus=self.num_gpus, router=self.router,
                    max_imbalance=self.max_imbalance, max_ongoing_requests=self.max_ongoing_requests,
                    planner={"profiles_file": self.profiles_file, "dtype": self.dtype, "device": self.device})
        serve.run(app, name="engine", route_prefix="/", blocking=False)
        return f"http://{self.host}:{self.port}"

    def shutdown(self):
        import ray
        from ray import serve
        try:
            serve.shutdown()
        finally:
            ray.shutdown()

    def run(self):
        from extensions_built_in.inference_engine.InferenceEngine import lock_job_folder, remove_stale_engine_json
        status = self.job_status
        os.makedirs(self.job_folder, exist_ok=True)
        # the job folder's lock, as an engine takes it: a second engine or cluster on the folder is refused
        # before it starts anything, and cannot overwrite or remove this one's engine.json
        self._lock = lock_job_folder(self.job_folder)
        remove_stale_engine_json(self.job_folder)
        previous = {s: signal.signal(s, lambda *_: self._stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
        if status:
            status.update(status="running", info="Starting cluster", pid=os.getpid(), step=0)
            status.watch_stop(on_stop=self._stop.set)
        failed = None
        try:
            url = self.start()
            self._write_engine_json()
            print(f"inference cluster ({self.replicas} replicas, router {self.router}) on {url} "
                  f"(engine.json: {self.engine_json})", flush=True)
            if status:
                status.update(info=f"Serving on {url}")
            self._stop.wait()
        except Exception as e:
            failed = f"{type(e).__name__}: {e}"
            raise
        finally:
            try:
                os.remove(self.engine_json)
            except FileNotFoundError:
                pass
            self.shutdown()
            for s, h in previous.items():
                signal.signal(s, h)
            if status:
                status.close()
                status.update(status="error" if failed else "stopped", info=failed or "Stopped", force=True)
            print("inference cluster stopped", flush=True)

    def _write_engine_json(self):
        from extensions_built_in.inference_engine.InferenceEngine import write_engine_json
        write_engine_json(self.engine_json, {"host": self.host, "port": self.port, "token": self.token,
                                             "cluster": True})


def _number(d: dict, key: str, default: float) -> float:
    v = d.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise ConfigError(f"cluster.{key}", f"must be a number >= 0, got {v!r}")
    return float(v)
