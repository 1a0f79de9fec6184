"""Latent frames off the device without a per-step synchronisation.

A `.to("cpu")` per step makes the host wait for the device every step, so the next step's kernels are
queued late. On CUDA, `CudaCopier` copies each frame on a side stream into pinned host memory (a
non-blocking copy) and records an event; `FrameStream` hands a frame to its consumer once that event has
completed: step i's frame at step i+1 (or earlier, if already done), and whatever is left on `flush()`,
always in step order. On the CPU, `SyncCopier` is today's path: the frame is ready at once. A copier is
any object with `start(tensor) -> handle`, `handle.ready()`, `handle.wait() -> host tensor` and
`handle.release()` (tests inject one whose handles complete when told).
"""
from collections import deque


class _Done:
    def __init__(self, t):
        self.t = t

    def ready(self):
        return True

    def wait(self):
        return self.t

    def release(self):
        self.t = None


class SyncCopier:
    """The CPU path: the copy (a no-op for CPU tensors) happens now."""

    def start(self, t):
        return _Done(t.to("cpu").contiguous())


class _Pending:
    def __init__(self, copier, src, host, event):
        self.copier, self.src, self.host, self.event = copier, src, host, event

    def ready(self):
        return self.event.query()

    def wait(self):
        self.event.synchronize()       # this copy only: the device keeps running the next step
        self.src = None
        return self.host

    def release(self):
        self.copier._free.setdefault((tuple(self.host.shape), self.host.dtype), []).append(self.host)
        self.src = self.host = None


class CudaCopier:
    """Non-blocking device->pinned-host copies on a side stream, with pinned buffers reused by shape."""

    def __init__(self, device):
        import torch

        self.torch = torch
        self.stream = torch.cuda.Stream(device=device)
        self._free: dict = {}

    def start(self, t):
        torch = self.torch
        key = (tuple(t.shape), t.dtype)
        free = self._free.get(key)
        host = free.pop() if free else torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        self.stream.wait_stream(torch.cuda.current_stream(t.device))   # after the step that made it
        with torch.cuda.stream(self.stream):
            host.copy_(t, non_blocking=True)
            event = torch.cuda.Event()
            event.record(self.stream)
        t.record_stream(self.stream)     # the allocator may not reuse `t` before the copy ran
        return _Pending(self, t, host, event)


def copier_for(device) -> object:
    """The copier for tensors on `device`: CUDA's side-stream copier, else the synchronous one."""
    if str(device).startswith("cuda"):
        import torch
        if torch.cuda.is_available():
            return CudaCopier(device)
    return SyncCopier()


class FrameStream:
    """Frames in step order: `push(meta, tensor)` starts its copy and delivers every earlier frame
    whose copy is done, waiting for the ones more than `lag` pushes old; `flush()` delivers the rest.
    `deliver(meta, host_tensor)` may use the tensor only during the call (its buffer is reused)."""

    def __init__(self, deliver, copier=None, lag: int = 1):
        self.deliver = deliver
        self.copier = copier or SyncCopier()
        self.lag = lag
        self.pending: deque = deque()

    def push(self, meta, tensor):
        self.pending.append((meta, self.copier.start(tensor)))
        while self.pending and (len(self.pending) > self.lag or self.pending[0][1].ready()):
            self._deliver_first()

    def flush(self):
        while self.pending:
            self._deliver_first()

    def discard(self):
        """A request that ends early: its frames are not wanted; their buffers go back."""
        while self.pending:
            self.pending.popleft()[1].release()

    def _deliver_first(self):
        meta, handle = self.pending.popleft()
        try:
            self.deliver(meta, handle.wait())
        finally:
            handle.release()
