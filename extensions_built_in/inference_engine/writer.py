"""The worker's file writer (engine.write_behind): a finished call's files are encoded and written on a
thread of their own, in the order the calls ended, while the worker's main thread runs the next call.

The worker hands a call's files over only after it has emitted its State and a `Released` (the engine may
send the next Run); each job then emits its requests' result frames and their Done. Jobs never raise here:
they end their own requests whatever happens (worker.py, WorkerCore._write_behind).
"""
import queue
import threading
import traceback


class Writer:
    def __init__(self, name: str = "worker-writer"):
        self._jobs: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=name)
        self._thread.start()

    def submit(self, job):
        """Run `job()` after the jobs before it."""
        self._jobs.put(job)

    def drain(self):
        """Wait until every job handed over so far has run."""
        self._jobs.join()

    def _loop(self):
        while True:
            job = self._jobs.get()
            try:
                job()
            except BaseException:       # noqa: BLE001 - a job ends its own requests; the writer goes on
                traceback.print_exc()
            finally:
                self._jobs.task_done()
