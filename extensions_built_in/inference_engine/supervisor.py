"""The engine's handle on its generation worker: start it, send it messages, read what it sends,
tell whether it lives, kill it. Two kinds with one interface:

- ProcessWorker: `worker.main` in a spawned child process over a multiprocessing pipe. It can be
  killed, so a stuck CUDA call or a crashed worker costs one request, not the engine.
- ThreadWorker: `worker.WorkerCore` on a thread of this process, for fast in-process tests of the
  engine's own logic (it cannot be killed; tests of stuck and crashing workers use processes).
"""
import multiprocessing
import queue
import signal
import threading

from extensions_built_in.inference_engine import messages as m
from extensions_built_in.inference_engine import worker as worker_module


class WorkerDied(RuntimeError):
    """The worker is gone; the message says how (exit code or signal)."""


class ProcessWorker:
    kind = "process"

    def __init__(self, options: dict):
        self.options = options
        self.proc = None
        self.conn = None
        self._send_lock = threading.Lock()

    def start(self) -> "ProcessWorker":
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_module.main, args=(child, self.options), name="aitk-generation-worker",
                                daemon=True)
        self.proc.start()
        child.close()
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def send(self, msg):
        with self._send_lock:
            try:
                self.conn.send(msg)
            except (BrokenPipeError, OSError, ValueError):
                pass        # a dead worker: recv() says why

    def recv(self, timeout: float):
        """The next message, or None after `timeout` seconds; WorkerDied once it is gone and drained."""
        try:
            if self.conn.poll(timeout):
                return self.conn.recv()
        except (EOFError, OSError):
            pass
        else:
            if self.proc.is_alive():
                return None
        self.proc.join(5)
        raise WorkerDied(self.exit_reason())

    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def kill(self):
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
        if self.proc is not None:
            self.proc.join(10)
        self._close()

    def stop(self, timeout: float):
        """Ask it to finish and exit; kill it if it has not within `timeout` seconds."""
        if self.proc is None:
            return
        self.send(m.Shutdown())
        self.proc.join(timeout)
        self.kill()

    def exit_reason(self) -> str:
        code = self.proc.exitcode if self.proc is not None else None
        if code is None:
            return "its pipe closed"
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            hint = " (the kernel's out-of-memory killer, or a kill)" if -code == signal.SIGKILL else ""
            return f"killed by {name}{hint}"
        return f"exited with code {code}"

    def _close(self):
        try:
            self.conn.close()
        except (OSError, AttributeError):
            pass


class ThreadWorker:
    kind = "thread"

    def __init__(self, options: dict):
        self.options = options
        self.core = None
        self.inbox: queue.Queue = queue.Queue()
        self.outbox: queue.Queue = queue.Queue()
        self.thread = None
        self.pid = None

    def start(self) -> "ThreadWorker":
        import os
        self.core = worker_module.WorkerCore(self.outbox.put, **self.options)
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._loop, daemon=True, name="generation-worker")
        self.thread.start()
        self.outbox.put(self.core.state())
        return self

    def _loop(self):
        while True:
            msg = self.inbox.get()
            if isinstance(msg, m.Shutdown):
                self.core.unload_all()
                return
            self.core.handle(msg)

    def send(self, msg):
        if isinstance(msg, m.Cancel):
            self.core.cancel(msg.request_id)
            return
        if isinstance(msg, m.Prefetch):     # as the process worker's listener: not queued behind the Run
            self.core.prefetch(msg.model)
            return
        if isinstance(msg, m.Shutdown):
            self.core.cancel_all()
        self.inbox.put(msg)

    def recv(self, timeout: float):
        try:
            return self.outbox.get(timeout=timeout)
        except queue.Empty:
            if not self.thread.is_alive():
                raise WorkerDied("its thread ended") from None
            return None

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def kill(self):
        """A thread cannot be killed: it is abandoned (it ends at its next cancel check)."""
        if self.core is not None:
            self.core.cancel_all()

    def stop(self, timeout: float):
        self.send(m.Shutdown())
        if self.thread is not None:
            self.thread.join(timeout)

    def exit_reason(self) -> str:
        return "its thread ended"


WORKERS = {"process": ProcessWorker, "thread": ThreadWorker}
