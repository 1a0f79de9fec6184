"""The engine as a job process (`python run.py`): engine.json, signals, and the UI's Job row."""
import json
import os
import signal
import sqlite3
import stat
import threading
import time

import pytest

from testing.engine_client import EngineProcess

SCHEMA = """CREATE TABLE Job (id TEXT PRIMARY KEY, name TEXT UNIQUE, gpu_ids TEXT, job_config TEXT,
status TEXT, stop INTEGER DEFAULT 0, step INTEGER DEFAULT 0, info TEXT, job_type TEXT, pid INTEGER,
created_at TEXT, updated_at TEXT)"""


def _env(tiny_root):
    return {"AITK_TINY_CACHE": str(tiny_root), "HF_HUB_OFFLINE": "1"}


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_engine_json_lifecycle_and_signals(tiny, tiny_root, tmp_path, sig):
    tiny("zimage")
    # a stale engine.json from a killed run must not confuse a new one
    (tmp_path / "engine.json").write_text(json.dumps({"host": "127.0.0.1", "port": 1, "token": "old", "pid": 999999}))
    ep = EngineProcess(str(tmp_path), default_model={"arch": "zimage", "name_or_path": "tiny:zimage"},
                       env=_env(tiny_root))
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            info = json.loads((tmp_path / "engine.json").read_text())
            if info["pid"] == ep.proc.pid:
                break
            time.sleep(0.05)
        ep.wait_ready()
        assert ep.info["pid"] == ep.proc.pid and ep.info["host"] == "127.0.0.1" and ep.info["token"] != "old"
        assert stat.S_IMODE(os.stat(ep.engine_json).st_mode) == 0o600
        assert set(ep.info) == {"host", "port", "token", "pid", "started_at"}
        while time.time() < deadline and (ep.client.health()["active"] or {}).get("arch") != "zimage":
            time.sleep(0.1)    # the warm load of the default model
        active = ep.client.health()["active"]
        assert active.pop("placement")["placement"] == {"text_encoder": "resident", "vae": "resident",
                                                         "transformer": "resident"}
        assert active == {"arch": "zimage", "name_or_path": "tiny:zimage", "profile": None, "variant": None}
        # a request in flight when the signal comes is cancelled and the process exits 0
        got = []
        body = {"model": {"arch": "zimage", "name_or_path": "tiny:zimage"},
                "sample": {"prompt": "x", "width": 64, "height": 64, "num_inference_steps": 1000}}
        started = threading.Event()

        def read():
            got.extend(ep.client.stream(body, on_frame=lambda h, p: started.set() if h["type"] == "progress" else None))
        t = threading.Thread(target=read)
        t.start()
        assert started.wait(60)
        ep.proc.send_signal(sig)
        t.join(60)
        assert got[-1][0]["type"] == "end" and got[-1][0]["status"] == "cancelled"
        assert ep.proc.wait(60) == 0
        assert not os.path.exists(ep.engine_json)
        assert "inference engine listening on http://127.0.0.1:" in ep.read_log()
    finally:
        ep.stop()


def test_stop_flag_in_sqlite(tiny, tiny_root, tmp_path):
    tiny("zimage")
    db = str(tmp_path / "aitk_db.db")
    with sqlite3.connect(db) as c:
        c.execute(SCHEMA)
        c.execute("INSERT INTO Job (id, name, status, job_type, stop, created_at, updated_at) "
                  "VALUES ('job-1', 'engine', 'queued', 'inference', 0, 'x', 'x')")
    ep = EngineProcess(str(tmp_path / "job"), default_model={"arch": "zimage", "name_or_path": "tiny:zimage"},
                       env={**_env(tiny_root), "AITK_JOB_ID": "job-1"}, extra_process={"sqlite_db_path": db})

    def row():
        with sqlite3.connect(db) as c:
            return dict(zip(("status", "info", "step", "pid", "stop"),
                            c.execute("SELECT status, info, step, pid, stop FROM Job WHERE id='job-1'").fetchone()))
    try:
        ep.wait_ready()
        deadline = time.time() + 120
        while time.time() < deadline and row()["info"] != "Idle — zimage":
            time.sleep(0.1)
        r = row()
        assert r["status"] == "running" and r["info"] == "Idle — zimage" and r["pid"] == ep.proc.pid
        frames = ep.client.stream({"model": {"arch": "zimage", "name_or_path": "tiny:zimage"},
                                   "sample": {"prompt": "x", "width": 64, "height": 64, "num_inference_steps": 3}})
        assert frames[-1][0]["status"] == "ok"
        while time.time() < deadline and row()["info"] != "Idle — zimage":
            time.sleep(0.1)
        with sqlite3.connect(db) as c:
            c.execute("UPDATE Job SET stop = 1, status = 'stopping' WHERE id = 'job-1'")
        assert ep.proc.wait(60) == 0
        r = row()
        assert r["status"] == "stopped" and not os.path.exists(ep.engine_json)
    finally:
        ep.stop()


def test_job_status_retries_when_locked(tmp_path):
    from toolkit.job_status import JobStatus
    db = str(tmp_path / "db.db")
    with sqlite3.connect(db) as c:
        c.execute(SCHEMA)
        c.execute("INSERT INTO Job (id, name, status) VALUES ('j', 'n', 'queued')")
    js = JobStatus(db, "j")
    lock = sqlite3.connect(db, timeout=0)
    lock.execute("BEGIN EXCLUSIVE")
    done = threading.Event()
    t = threading.Thread(target=lambda: (js.update(status="running", info="Idle — x"), done.set()))
    t.start()
    time.sleep(6)            # longer than one connect timeout: the writer must retry, not fail
    assert not done.is_set()
    lock.rollback()
    lock.close()
    t.join(30)
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT status, info FROM Job").fetchone() == ("running", "Idle — x")


def test_bad_engine_config_names_the_key(tmp_path):
    import subprocess
    import sys
    from testing.engine_client import ROOT
    cfg = tmp_path / "e.yaml"
    cfg.write_text("job: extension\nconfig:\n  name: e\n  process:\n    - type: InferenceEngine\n"
                   "      engine: {port: -3}\n")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), str(cfg)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode != 0 and "config.process[0].engine.port" in p.stderr


def test_stop_while_the_worker_is_stuck(tiny, tiny_root, tmp_path):
    """SIGINT while a step hangs with signals blocked (a long CUDA call): the engine kills its worker
    and exits 0 without waiting for it, engine.json removed, no worker process left."""
    tiny("zimage")
    ep = EngineProcess(str(tmp_path), env={**_env(tiny_root), "AITK_ENGINE_FAULTS": "stuck_step=1"},
                       engine_extra={"grace_seconds": 600}).wait_ready()
    try:
        started, got = threading.Event(), []
        body = {"model": {"arch": "zimage", "name_or_path": "tiny:zimage"},
                "sample": {"prompt": "x", "width": 64, "height": 64, "num_inference_steps": 3}}
        t = threading.Thread(target=lambda: got.extend(ep.client.stream(
            body, on_frame=lambda h, p: started.set() if h["type"] == "progress" else None)))
        t.start()
        assert started.wait(120)
        worker_pid = ep.client.health()["worker"]["pid"]
        assert worker_pid and worker_pid != ep.proc.pid and _pid_alive(worker_pid)
        ep.proc.send_signal(signal.SIGINT)
        assert ep.proc.wait(60) == 0
        t.join(60)
        assert got[-1][0]["type"] == "end" and got[-1][0]["status"] in ("error", "cancelled")
        assert not os.path.exists(ep.engine_json)
        deadline = time.time() + 30
        while time.time() < deadline and _pid_alive(worker_pid):
            time.sleep(0.05)      # reaped by the engine before it exited; the kernel may take a moment
        assert not _pid_alive(worker_pid)
    finally:
        ep.stop()


def test_second_engine_on_one_folder_is_refused(tiny, tiny_root, tmp_path):
    """Two engines on one job folder: the second refuses to start, naming the first's pid; the first's
    engine.json stays and it keeps serving. Partial files a killed run left are removed at start."""
    out = tmp_path / "outputs"
    out.mkdir()
    (out / ".leftover.png.0123456789ab.tmp").write_bytes(b"partial")
    (out / "kept.png").write_bytes(b"a real output")
    first = EngineProcess(str(tmp_path), env=_env(tiny_root)).wait_ready()
    try:
        assert sorted(os.listdir(out)) == ["kept.png"]
        info = json.loads((tmp_path / "engine.json").read_text())
        second = EngineProcess(str(tmp_path), env=_env(tiny_root), name="second")
        assert second.proc.wait(120) != 0
        log = second.read_log()
        assert f"another engine (pid {first.proc.pid})" in log and "engine.job_folder" in log
        second.stop()
        assert json.loads((tmp_path / "engine.json").read_text()) == info
        assert first.client.health()["ok"]
    finally:
        first.stop()


def test_a_killed_engine_takes_its_worker_with_it(tiny, tiny_root, tmp_path):
    """SIGKILL to the engine process while its worker is stuck in a step: the worker does not outlive
    it (the kernel ends it: PR_SET_PDEATHSIG), so nothing keeps holding the device."""
    tiny("zimage")
    ep = EngineProcess(str(tmp_path), env={**_env(tiny_root), "AITK_ENGINE_FAULTS": "stuck_step=1"},
                       engine_extra={"grace_seconds": 600}).wait_ready()
    try:
        started = threading.Event()
        body = {"model": {"arch": "zimage", "name_or_path": "tiny:zimage"},
                "sample": {"prompt": "x", "width": 64, "height": 64, "num_inference_steps": 3}}

        def read():
            try:
                ep.client.stream(body, on_frame=lambda h, p: started.set() if h["type"] == "progress" else None)
            except Exception:
                pass            # the engine is killed under the stream
        threading.Thread(target=read, daemon=True).start()
        assert started.wait(120)
        worker_pid = ep.client.health()["worker"]["pid"]
        assert _pid_alive(worker_pid)
        ep.proc.kill()
        ep.proc.wait(30)
        deadline = time.time() + 60
        while time.time() < deadline and _pid_alive(worker_pid):
            time.sleep(0.05)
        assert not _pid_alive(worker_pid), "the worker outlived its killed engine"
    finally:
        ep.stop()


def test_a_cluster_on_a_served_folder_is_refused_before_ray_starts(tmp_path, monkeypatch):
    """The cluster takes the job folder's lock as an engine does: on a folder another engine serves it
    stops before Ray starts, naming that engine's pid, and the engine's engine.json stays."""
    from types import SimpleNamespace

    from extensions_built_in.inference_cluster.InferenceCluster import InferenceCluster
    from extensions_built_in.inference_engine.InferenceEngine import lock_job_folder, write_engine_json
    from toolkit.errors import ConfigError
    lock = lock_job_folder(str(tmp_path))
    try:
        write_engine_json(str(tmp_path / "engine.json"), {"host": "127.0.0.1", "port": 1, "token": "t"})
        info = (tmp_path / "engine.json").read_text()
        assert stat.S_IMODE(os.stat(tmp_path / "engine.json").st_mode) == 0o600
        cluster = InferenceCluster(0, SimpleNamespace(name="c"), {"type": "InferenceCluster",
                                                                  "engine": {"job_folder": str(tmp_path)}})
        monkeypatch.setattr(cluster, "start", lambda: pytest.fail("Ray started on a served folder"))
        with pytest.raises(ConfigError) as e:
            cluster.run()
        assert e.value.key == "engine.job_folder" and f"pid {os.getpid()}" in e.value.message
        assert (tmp_path / "engine.json").read_text() == info
    finally:
        os.close(lock)
