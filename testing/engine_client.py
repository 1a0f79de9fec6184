"""Test/bench helpers for the inference engine: a client that reads frame streams, an engine
run in-process (engine loop on a thread, HTTP on its own), and an engine run as `run.py` would."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from extensions_built_in.inference_engine.protocol import FrameReader  # noqa: E402


class EngineClient:
    def __init__(self, base_url: str, token: str, timeout: float = 300):
        self.base_url = base_url
        self.token = token
        self.http = httpx.Client(base_url=base_url, headers={"X-Engine-Token": token}, timeout=timeout)

    def get(self, path, **kw):
        return self.http.get(path, **kw)

    def post(self, path, **kw):
        return self.http.post(path, **kw)

    def health(self) -> dict:
        return self.http.get("/health").json()

    def stream(self, body: dict, on_frame=None, path="/generate", method="POST") -> list:
        """POST /generate (or GET /stream/{id}) and collect (header, payload) frames until the end;
        on_frame(header, payload) may return True to stop reading (the client then disconnects)."""
        frames, reader = [], FrameReader()
        kw = {"json": body} if method == "POST" else {}
        with self.http.stream(method, path, **kw) as r:
            if r.status_code != 200:
                r.read()
                raise httpx.HTTPStatusError(f"{r.status_code}: {r.text}", request=r.request, response=r)
            for chunk in r.iter_bytes():
                for header, payload in reader.feed(chunk):
                    frames.append((header, payload))
                    if on_frame is not None and on_frame(header, payload):
                        return frames
        reader.close()
        return frames

    def close(self):
        self.http.close()


class InProcessEngine:
    """Engine + HTTP server in this process (the engine loop on a thread) for fast tests. The
    generation worker runs on a thread too (`worker="thread"`) unless `worker="process"` is given;
    `faults` (worker.Faults) then reach it directly: tests may change them while it runs."""

    def __init__(self, folder: str, token: str = "test-token-123", extra_routes=None, docs: bool = False, **engine_kw):
        from extensions_built_in.inference_engine.engine import Engine
        from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app
        from extensions_built_in.inference_engine.worker import Faults
        engine_kw.setdefault("worker", "thread")
        engine_kw.setdefault("faults", Faults())
        self.engine = Engine(output_folder=os.path.join(folder, "outputs"),
                             assets_folder=os.path.join(folder, "assets"), **engine_kw)
        self.engine.start_worker()
        self.server = ServerThread(create_app(self.engine, token, extra_routes=extra_routes, docs=docs),
                                   bind_socket(0)).start()
        self.loop = threading.Thread(target=self.engine.run_forever, daemon=True, name="engine-loop")
        self.loop.start()
        self.url = f"http://127.0.0.1:{self.server.port}"
        self.client = EngineClient(self.url, token)

    def close(self):
        self.engine.stop()
        self.loop.join(30)
        self.server.stop()
        self.client.close()


class EngineProcess:
    """`python run.py <config>` for an InferenceEngine job; waits for engine.json."""

    def __init__(self, job_folder: str, default_model: dict | None = None, env: dict | None = None,
                 extra_process: dict | None = None, engine_extra: dict | None = None, name="engine_test"):
        os.makedirs(job_folder, exist_ok=True)
        self.job_folder = job_folder
        self.engine_json = os.path.join(job_folder, "engine.json")
        engine = {"job_folder": job_folder, **(engine_extra or {})}
        if default_model:
            engine["default_model"] = default_model
        cfg = {"job": "extension", "config": {"name": name, "process": [
            {"type": "InferenceEngine", "device": "cpu", "engine": engine, **(extra_process or {})}]}}
        self.config_path = os.path.join(job_folder, "config.json")
        with open(self.config_path, "w") as f:
            json.dump(cfg, f)
        self.log = open(os.path.join(job_folder, "log.txt"), "w")
        self.proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "run.py"), self.config_path], cwd=ROOT,
                                     env={**os.environ, **(env or {})}, stdout=self.log, stderr=subprocess.STDOUT)
        self.info = None
        self.client = None

    def wait_ready(self, timeout: float = 120) -> "EngineProcess":
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"engine exited with {self.proc.returncode}: {self.read_log()[-3000:]}")
            if os.path.isfile(self.engine_json):
                with open(self.engine_json) as f:
                    self.info = json.load(f)
                self.client = EngineClient(f"http://{self.info['host']}:{self.info['port']}", self.info["token"])
                return self
            time.sleep(0.05)
        raise TimeoutError(f"no engine.json after {timeout}s: {self.read_log()[-3000:]}")

    def read_log(self) -> str:
        self.log.flush()
        with open(os.path.join(self.job_folder, "log.txt")) as f:
            return f.read()

    def stop(self, sig=signal.SIGINT, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if self.client:
            self.client.close()
        self.log.close()
        return code
