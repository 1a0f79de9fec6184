"""The seconds of each stage of a request, on the monotonic clock (a suspend/resume or a clock change
never shows as a stage's seconds). No torch here: the worker times what it does (load, encode,
sample, decode, save) and the engine what happens before (waiting for the worker, the queue).

Stages, in the order a request meets them (STAGES): `worker` (queued while the engine was still
starting: its worker, its default model), `queue`, `load` (from the call's start until the model is
ready: planned, each component read and placed, LoRAs set; the `loaded` frame's `components` gives
each component's read), `compile`, `encode` (the prompt), `sample`, `decode`, `save` (the file
encoded and written). A stage a request did not go through is absent. A status frame carries the
stages ended so far (`stages`); the `end` frame and the job log's request line carry them all."""
import time

STAGES = ("worker", "queue", "load", "compile", "encode", "sample", "decode", "save")

# a status frame's `stage` -> the timed stage it starts ("loaded" ends `load`; "pass", "retry" and
# "status" say something within the current stage)
STATUS_STAGE = {"loading": "load", "quantizing": "load", "compiling": "compile", "encoding": "encode",
                "sampling": "sample", "decoding": "decode", "saving": "save"}
ENDS = ("loaded",)


class StageClock:
    """The running stage and the seconds of those ended; a stage met again (a hires pass samples
    twice, a LoRA loads after the model) adds to its total."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.seconds: dict[str, float] = {}
        self.current: str | None = None
        self.since = clock()

    def status(self, stage: str | None):
        """A status frame's stage: the timed stage it starts, ends, or nothing."""
        if stage in STATUS_STAGE:
            self.enter(STATUS_STAGE[stage])
        elif stage in ENDS:
            self.close()

    def enter(self, name: str):
        if name == self.current:
            return
        self.close()
        self.current, self.since = name, self.clock()

    def close(self):
        if self.current is not None:
            now = self.clock()
            self.seconds[self.current] = self.seconds.get(self.current, 0.0) + now - self.since
            self.current, self.since = None, now

    def snapshot(self) -> dict:
        """The seconds of each ended stage, rounded to the millisecond, in STAGES order."""
        return ordered(self.seconds)


def ordered(seconds: dict) -> dict:
    return {k: round(seconds[k], 3) for k in sorted(seconds, key=lambda k: STAGES.index(k) if k in STAGES else 99)}


def log_part(stages: dict | None) -> str:
    """` stages worker=0.00s queue=0.01s load=9.31s ...` for the job log (empty when none are known)."""
    if not stages:
        return ""
    return " stages " + " ".join(f"{k}={v:.2f}s" for k, v in ordered(stages).items())


def components_part(seconds: dict | None) -> str:
    """` components unet=6.10s text_encoder=1.21s` (a load line: each component read, and its seconds)."""
    if not seconds:
        return ""
    return " components " + " ".join(f"{k}={v:.2f}s" for k, v in seconds.items())
