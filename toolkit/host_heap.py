"""The C heap of a process that computes on the CPU: freed blocks kept for the next step, given back when idle.

glibc serves every allocation above its mmap threshold (128 KiB, raised as blocks are freed, to 32 MiB at
most) with a fresh mmap, and returns it on free. A UNet forward on the CPU allocates and frees gigabytes
in such blocks (oneDNN reorders each convolution's weights into its blocked layout on every call, and
the activations are megabytes each), so every step faulted in ~465,000 zeroed pages again: SD 1.5's UNet
spent 0.35 s of a 0.8 s forward at 64x64 in the kernel, and the first forward, before the threshold had
risen, twice that (testing/bench_cold.py). `keep_freed()` raises the threshold above any single block
and stops the heap's automatic trim, so a step reuses the last one's pages; `release()` (malloc_trim)
gives the free pages back to the system where memory is reckoned or let go: when the pool drops models,
before the host's available memory is read, and when the worker has been idle a moment.

Linux with glibc only: elsewhere (musl, macOS, Windows) both are no-ops that return False.
"""
import ctypes
import ctypes.util
import sys
import threading

M_TRIM_THRESHOLD = -1             # malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 30          # a single block larger than this is still mmapped
TRIM_THRESHOLD = (1 << 31) - 1    # an int: the most free memory the heap's top keeps before trimming itself

_lock = threading.Lock()
_state = {"libc": None, "kept": False}


def _libc():
    if _state["libc"] is None:
        lib = False
        if sys.platform.startswith("linux"):
            try:
                cand = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                if hasattr(cand, "mallopt") and hasattr(cand, "malloc_trim") and hasattr(cand, "gnu_get_libc_version"):
                    lib = cand
            except OSError:
                pass
        _state["libc"] = lib
    return _state["libc"]


def keep_freed() -> bool:
    """Keep freed blocks in the heap for reuse (once per process); True where glibc took the settings."""
    with _lock:
        if _state["kept"]:
            return True
        lib = _libc()
        if not lib:
            return False
        # glibc before 2.35 refuses a threshold above 32 MiB: then the largest it takes
        ok = bool(lib.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) or bool(lib.mallopt(M_MMAP_THRESHOLD, 32 << 20))
        ok = bool(lib.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and ok
        _state["kept"] = ok
        return ok


def kept() -> bool:
    return _state["kept"]


def release() -> bool:
    """Give the heap's free pages back to the system (malloc_trim(0)); True where some were."""
    if not _state["kept"]:
        return False          # glibc's own trimming is on: nothing held beyond its default
    lib = _libc()
    return bool(lib and lib.malloc_trim(0))


__all__ = ["keep_freed", "kept", "release"]
