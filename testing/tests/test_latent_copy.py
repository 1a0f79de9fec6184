"""Latent frames without a per-step device sync (toolkit/models/latent_copy.py, worker._sample).

The ordering logic is the same on every device; here it runs with a fake copier whose copies complete
only when the test (or a wait) says, standing in for CUDA events: frames still arrive one per step, in
order, with the step's data, at most one step late, and the last one before the result."""
import pytest
import torch

from extensions_built_in.inference_engine import messages as m
from extensions_built_in.inference_engine.worker import WorkerCore
from toolkit.models import latent_copy
from testing.tiny_runs import run_message


class LazyCopier:
    """Copies that are not done until waited on (or marked done): the slowest a device can be."""

    def __init__(self):
        self.started, self.waited, self.released = [], [], 0

    def start(self, t):
        copier = self

        class Handle:
            done = False

            def ready(self):
                return self.done

            def wait(self):
                copier.waited.append(self.host)
                return self.host

            def release(self):
                copier.released += 1
        h = Handle()
        h.host = t.clone()
        self.started.append(h)
        return h


def test_frames_arrive_in_order_one_step_late_and_all_on_flush():
    copier, got = LazyCopier(), []
    stream = latent_copy.FrameStream(lambda meta, t: got.append((meta, t.clone())), copier)
    stream.push(0, torch.full((2,), 0.0))
    assert got == []                                   # not done: held, the device is not waited on
    stream.push(1, torch.full((2,), 1.0))
    assert [g[0] for g in got] == [0]                  # step 0's frame at step 1
    copier.started[1].done = True
    stream.push(2, torch.full((2,), 2.0))
    assert [g[0] for g in got] == [0, 1]               # done early: delivered at once, still in order
    stream.push(3, torch.full((2,), 3.0))
    stream.flush()
    assert [g[0] for g in got] == [0, 1, 2, 3]
    assert all(torch.equal(t, torch.full((2,), float(i))) for i, t in got)
    assert copier.released == 4


def test_discard_delivers_nothing_and_returns_the_buffers():
    copier, got = LazyCopier(), []
    stream = latent_copy.FrameStream(lambda meta, t: got.append(meta), copier)
    stream.push(0, torch.zeros(1))
    stream.discard()
    stream.flush()
    assert got == [] and copier.released == 1


def test_the_cpu_copier_delivers_at_once():
    got = []
    stream = latent_copy.FrameStream(lambda meta, t: got.append(meta), latent_copy.copier_for("cpu"))
    stream.push("a", torch.zeros(1))
    assert got == ["a"]
    assert isinstance(latent_copy.copier_for("cpu"), latent_copy.SyncCopier)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_cuda_copier_copies_into_pinned_memory():
    got = []
    stream = latent_copy.FrameStream(lambda meta, t: got.append((meta, t.is_pinned(), t.clone())),
                                     latent_copy.copier_for("cuda"))
    for i in range(4):
        stream.push(i, torch.full((3, 8), float(i), device="cuda", dtype=torch.float16))
    stream.flush()
    assert [g[0] for g in got] == [0, 1, 2, 3] and all(g[1] for g in got)
    assert all(torch.equal(g[2], torch.full((3, 8), float(g[0]), dtype=torch.float16)) for g in got)


def run_request(tiny, tmp_path, steps=4, name="r"):
    out = []
    core = WorkerCore(out.append)
    msg = run_message(name, {"arch": "zimage", "name_or_path": tiny("zimage")}, {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": steps, "seed": 7}, str(tmp_path / f"{name}.png"), {"latents": "raw", "every_n_steps": 1, "preview": "noisy", "max_frames": 4})
    core.run(msg)
    return [f for f in out if isinstance(f, m.Frame)]


def test_the_worker_streams_every_step_in_order_through_a_deferred_copier(tiny, tmp_path, monkeypatch):
    steps = 4
    direct = run_request(tiny, tmp_path, steps, "direct")            # today's path: the CPU copier
    monkeypatch.setattr(latent_copy, "copier_for", lambda device: LazyCopier())
    deferred = run_request(tiny, tmp_path, steps, "deferred")
    kinds = [(f.header["type"], f.header.get("step")) for f in deferred if f.header["type"] != "status"]
    latents = [f for f in deferred if f.header["type"] == "latent"]
    assert [f.header["step"] for f in latents] == list(range(1, steps + 1))      # one per step, in order
    # step i's frame after step i+1's progress: the copy was not waited for at its own step
    assert kinds.index(("latent", 1)) > kinds.index(("progress", 2))
    # the last frame before the result
    assert kinds.index(("latent", steps)) < kinds.index(("result", None))
    # the same data and headers as the direct path
    want = [f for f in direct if f.header["type"] == "latent"]
    assert [f.header for f in latents] == [f.header for f in want]
    assert [f.payload for f in latents] == [f.payload for f in want]
