"""The worker's C heap (toolkit/host_heap.py): a freed block's pages are reused by the next allocation, not
faulted in again, and release() gives them back. glibc's allocator is per process, so each case runs in a
fresh interpreter (without torch: ctypes' malloc is the same heap torch's CPU tensors come from)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import ctypes, json, resource, sys
sys.path.insert(0, sys.argv[1])
from toolkit import host_heap
keep = sys.argv[2] == "keep"
kept = host_heap.keep_freed() if keep else False
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
SIZE = 64 << 20          # one oneDNN weight reorder of a 1280x1280x3x3 convolution is 59 MB


def resident():
    return int(open("/proc/self/statm").read().split()[1]) * 4096


faults = []
for _ in range(3):       # a step: allocate, write, free
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    p = libc.malloc(SIZE)
    ctypes.memset(p, 1, SIZE)
    libc.free(p)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
held = resident()
released = host_heap.release()
print(json.dumps({"kept": kept, "faults": faults, "held": held, "after_release": resident(), "released": released}))
"""


def _child(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, ROOT, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator: Linux only")
def test_a_step_reuses_the_last_steps_pages_and_release_gives_them_back():
    pages = (64 << 20) // 4096
    system = _child("system")       # glibc's defaults: a 64 MiB block is mmapped and unmapped each time
    assert not system["kept"] and all(f >= pages * 0.9 for f in system["faults"]), system
    assert system["released"] is False
    kept = _child("keep")
    assert kept["kept"], kept
    assert kept["faults"][0] >= pages * 0.9                 # the first step faults its pages in
    assert max(kept["faults"][1:]) < pages * 0.05, kept     # later steps reuse them
    assert kept["held"] - kept["after_release"] >= (60 << 20), kept     # release() returns them to the system
    assert kept["released"] is True
