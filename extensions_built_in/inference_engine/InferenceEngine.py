"""The InferenceEngine job process: UI status/stop plumbing, the HTTP server's lifetime, and the
engine loop on the main thread. It never imports torch: generation runs in the engine's worker
process (worker.py), which this process supervises and replaces when it hangs or dies."""
import json
import os
import secrets
import signal
from datetime import datetime, timezone

from extensions_built_in.inference_engine.engine_settings import EngineSettings
from jobs.process.BaseProcess import BaseProcess
from toolkit.config_modules import ModelConfig
from toolkit.errors import ConfigError
from toolkit.job_status import JobStatus
from toolkit.profiles import EMPTY as EMPTY_PROFILES, load_profiles

class InferenceEngine(BaseProcess):
    CONFIG_KEYS = ("device", "sqlite_db_path", "engine", "offline")

    def __init__(self, process_id, job, config):
        super().__init__(process_id, job, config)
        self.device = str(self.get_conf("device", "cpu"))
        # every key of engine: checked here, before anything starts (engine_settings.py)
        self.settings = s = EngineSettings.from_dict(self.get_conf("engine", {}), "engine")
        self.job_folder = os.path.abspath(s.job_folder or os.path.join("output", job.name))
        self.output_folder = os.path.abspath(s.output_folder or os.path.join(self.job_folder, "outputs"))
        self.assets_folder = os.path.join(self.job_folder, "assets")
        self.port, self.compat_port, self.docs = s.port, s.compat_port or None, s.docs
        self.comfy_port = s.comfy_port or None
        self.token = s.token or secrets.token_urlsafe(32)
        self.dtype = s.dtype
        self.profiles = load_profiles(s.profiles_file) if s.profiles_file else EMPTY_PROFILES
        self.default_model = s.default_model if s.default_model is not None else self.profiles.default_model
        if isinstance(self.default_model, str):
            self.default_model = {"profile": self.default_model}
        if self.default_model is not None:   # fail before starting anything
            try:
                model, _ = self.profiles.resolve_model(self.default_model, "engine.default_model")
                ModelConfig.from_dict(model, "engine.default_model")
            except ConfigError as e:
                raise e if e.key.startswith(("engine.", "model_profiles")) else ConfigError(
                    f"engine.default_model.{e.key.split('.', 1)[-1]}", e.message) from None
        self.model_folders = s.folders()
        self.model_roots = self._model_roots(s.model_roots or [])
        self.engine_json = os.path.join(self.job_folder, "engine.json")
        self.job_status = JobStatus.from_env(self.get_conf("sqlite_db_path"))

    def run(self):
        status = self.job_status
        os.makedirs(self.job_folder, exist_ok=True)
        self._lock = lock_job_folder(self.job_folder)      # held until this process exits
        remove_stale_engine_json(self.job_folder)
        if status:
            status.update(status="running", info="Starting the generation worker", pid=os.getpid(), step=0)
        engine = self.make_engine(on_info=(lambda info, step=None: status.update(info=info, step=step))
                                  if status else None)
        # first: its imports (torch, diffusers: seconds) overlap the HTTP server's start and the first request
        engine.spawn_worker()
        from extensions_built_in.inference_engine.compat import compat_routes, serve_comfy_on_port, serve_compat_on_port
        from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app

        previous = {s: signal.signal(s, lambda *_: engine.stop()) for s in (signal.SIGINT, signal.SIGTERM)}
        compat = compat_routes(engine=engine)
        server = ServerThread(create_app(engine, self.token, extra_routes=[compat], docs=self.docs),
                              bind_socket(self.port)).start()
        compat_server = comfy_server = None
        failed = None
        try:
            if self.compat_port:
                compat_server = serve_compat_on_port(engine, self.token, compat, self.compat_port)
                print(f"compatibility API (A1111 /sdapi/v1, OpenAI /v1) on http://127.0.0.1:{compat_server.port}",
                      flush=True)
            if self.comfy_port:
                comfy_server = serve_comfy_on_port(engine, self.token, compat, self.comfy_port)
                print(f"ComfyUI API (/prompt, /ws) on http://127.0.0.1:{comfy_server.port}", flush=True)
            self._write_engine_json(server.port)
            print(f"inference engine listening on http://127.0.0.1:{server.port} (engine.json: {self.engine_json})",
                  flush=True)
            if status:
                status.watch_stop()
            if self.default_model is not None:      # /health says `ready` once it is loaded
                print(f"warm load: {self.default_model}", flush=True)
                engine.warm_load(self.default_model)
            engine.run_forever()
        except Exception as e:
            failed = f"{type(e).__name__}: {e}"
            raise
        finally:
            engine.stop()
            engine.shutdown_worker()      # a start that failed before run_forever leaves it running
            for extra in (compat_server, comfy_server):
                if extra is not None:
                    extra.stop()
            server.stop()
            _remove(self.engine_json)
            engine.unload_all()
            for s, h in previous.items():
                signal.signal(s, h)
            if status:
                status.close()
                status.update(status="error" if failed else "stopped", info=failed or "Stopped", force=True)
            print("inference engine stopped", flush=True)

    def make_engine(self, on_info=None):
        """The Engine this config describes (its worker not started yet): what run() serves, and what
        each replica of an InferenceCluster wraps."""
        from extensions_built_in.inference_engine.engine import Engine
        return Engine(self.settings, device=self.device, output_folder=self.output_folder,
                      assets_folder=self.assets_folder, profiles=self.profiles, model_roots=self.model_roots,
                      on_info=on_info)

    def _model_roots(self, extra: list) -> list:
        """Where requests may name local model files: the job folder, the hub cache, the tiny-model
        cache, the profiles' folders, and `engine.model_roots` (extra folders, e.g. /models)."""
        from huggingface_hub import constants

        from toolkit import model_trees
        from toolkit.models.tiny import default_cache_root
        roots = [self.job_folder, constants.HF_HUB_CACHE, str(default_cache_root()), *map(os.path.abspath, extra),
                 *(os.path.abspath(os.path.expanduser(f)) for f in self.model_folders)]
        if self.profiles.path:
            roots.append(os.path.dirname(os.path.abspath(self.profiles.path)))
        for profile in self.profiles.profiles.values():
            for path in [profile.checkpoint, *profile.components.values()]:
                if path:
                    roots.append(path if os.path.isdir(path) else os.path.dirname(path))
                    tree = model_trees.containing_tree(path) if os.path.isfile(path) else None
                    if tree is not None:          # a ComfyUI / A1111 file's tree: the companions it takes
                        roots.append(os.path.abspath(tree.models))
        return roots

    def _write_engine_json(self, port: int):
        write_engine_json(self.engine_json, {"host": "127.0.0.1", "port": port, "token": self.token})


def write_engine_json(path: str, data: dict):
    """engine.json (where a client finds the engine, and its token), for an engine and a cluster alike:
    `data` with the pid and the start time, written whole (a temp file, fsynced, renamed: a reader
    never sees half a file), readable by the owner only. The writer holds the job folder's lock
    (lock_job_folder), so no other engine writes or removes it meanwhile."""
    data = {**data, "pid": os.getpid(),
            "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")}
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def lock_job_folder(folder: str):
    """An exclusive lock on the job folder (its engine.lock file, holding our pid): a second engine
    started on the same folder would overwrite engine.json and, when stopped, delete it under the
    first. The lock goes with the process, however it ends."""
    import fcntl
    path = os.path.join(folder, "engine.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        other = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise ConfigError("engine.job_folder", f"another engine (pid {other}) is serving {folder}: stop it, "
                          "or give this one another job_folder") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def remove_stale_engine_json(folder: str) -> int:
    """`engine.json.<pid>.tmp` files (_write_engine_json's) of an engine killed while it wrote one: with
    the folder's lock held, no live engine is writing one."""
    removed = 0
    for name in os.listdir(folder):
        if name.startswith("engine.json.") and name.endswith(".tmp"):
            try:
                os.remove(os.path.join(folder, name))
                removed += 1
            except OSError:
                pass
    return removed


def _remove(path: str):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


