"""The UI's Job row for a running job process (SQLite, shared with the Next.js app).

With AITK_JOB_ID set and a `sqlite_db_path`, the process keeps its row's status/info/step/pid
current and a daemon thread turns the row's `stop` flag into SIGINT. Python touches only
status, info, step, stop, pid and updated_at.
"""
import os
import signal
import sqlite3
import threading
import time
from datetime import datetime, timezone

RETRIES = 20


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JobStatus:
    def __init__(self, db_path: str, job_id: str, min_interval: float = 0.25):
        self.db_path = db_path
        self.job_id = job_id
        self.min_interval = min_interval       # step/info updates are throttled; status changes are not
        self._last_write = 0.0
        self._pending = None
        self._timer = None
        self._lock = threading.Lock()
        self._stop_watch = threading.Event()

    @classmethod
    def from_env(cls, db_path: str | None):
        job_id = os.environ.get("AITK_JOB_ID")
        if not job_id or not db_path:
            return None
        return cls(db_path, job_id)

    def _execute(self, sql: str, params=()):
        delay = 0.05
        for attempt in range(RETRIES):
            try:
                with sqlite3.connect(self.db_path, timeout=5) as conn:
                    return conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e) or attempt == RETRIES - 1:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def update(self, *, status: str | None = None, info: str | None = None, step: int | None = None,
               pid: int | None = None, force: bool = False):
        fields = {k: v for k, v in (("status", status), ("info", info), ("step", step), ("pid", pid)) if v is not None}
        if not fields:
            return
        with self._lock:
            now = time.monotonic()
            if not force and status is None and now - self._last_write < self.min_interval:
                self._pending = {**(self._pending or {}), **fields}
                if self._timer is None:   # the last throttled value is written soon, not lost
                    self._timer = threading.Timer(self.min_interval, self.flush)
                    self._timer.daemon = True
                    self._timer.start()
                return
            fields = {**(self._pending or {}), **fields}
            self._pending = None
            self._last_write = now
        fields["updated_at"] = now_iso()
        cols = ", ".join(f"{k} = ?" for k in fields)
        try:
            self._execute(f"UPDATE Job SET {cols} WHERE id = ?", (*fields.values(), self.job_id))
        except sqlite3.Error as e:   # the UI's database must never take the job down
            print(f"job status: {e}", flush=True)

    def flush(self):
        with self._lock:
            pending, self._pending, self._timer = self._pending, None, None
        if pending:
            self.update(force=True, **pending)

    def stop_requested(self) -> bool:
        try:
            rows = self._execute("SELECT stop FROM Job WHERE id = ?", (self.job_id,))
        except sqlite3.Error:
            return False
        return bool(rows and rows[0][0])

    def watch_stop(self, interval: float = 1.0, on_stop=None):
        """Daemon thread: when the row's stop flag is set, call on_stop (default: SIGINT to this process)."""
        on_stop = on_stop or (lambda: os.kill(os.getpid(), signal.SIGINT))

        def loop():
            while not self._stop_watch.wait(interval):
                if self.stop_requested():
                    on_stop()
                    return
        threading.Thread(target=loop, daemon=True, name="job-stop-watch").start()

    def close(self):
        self._stop_watch.set()
