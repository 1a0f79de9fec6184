"""ComponentPool: resident components shared across holder builds.

Plugged into the load funnel as its interceptor, so holders never see it. A build marks what it
touched; afterwards `release_unused()` frees the rest (or keeps the most recently used within
`keep_resident_bytes`). Identity is the funnel's ComponentIdentity: the weight files themselves,
class, dtype, quantization and merged LoRA; placement is re-applied in place on a hit.
"""
import contextlib
import gc
import hashlib
import threading
import time
import weakref
from dataclasses import dataclass, field

import torch

from toolkit.models.v2.mixin import set_load_interceptor


@dataclass
class PoolEntry:
    identity: object
    module: object
    bytes: int
    last_used: float
    touched: bool = True
    hits: int = 0
    role: str = ""             # the role it was last loaded or reused as (one file can serve two roles)
    roles: set = field(default_factory=set)   # every role it serves in the latest build that used it

    @property
    def public_key(self) -> str:
        """A short stable id that reveals no path."""
        return hashlib.sha1(self.identity.key.encode()).hexdigest()[:12]

    def describe(self) -> dict:
        return {"key": self.public_key, "role": self.role or self.identity.role, "roles": sorted(self.roles), "class": self.identity.cls.rsplit(".", 1)[-1],
                "bytes": self.bytes, "device": _device_of(self.module), "dtype": self.identity.dtype,
                "qtype": self.identity.qtype, "last_used": self.last_used, "hits": self.hits}


def module_bytes(module) -> int:
    if not isinstance(module, torch.nn.Module):
        return 0
    seen, total = set(), 0
    for t in list(module.parameters()) + list(module.buffers()):
        try:
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            if ptr in seen:
                continue
            seen.add(ptr)
            total += storage.nbytes()
        except (RuntimeError, NotImplementedError):  # tensor subclasses (quantized) without one storage
            total += t.numel() * t.element_size()
    return total


def _device_of(module) -> str | None:
    if isinstance(module, torch.nn.Module):
        for p in module.parameters():
            return str(p.device)
    return None


def available_memory(device: str) -> int:
    """Free bytes where `device`'s tensors live: CUDA free memory, or available RAM."""
    if str(device).startswith("cuda") and torch.cuda.is_available():
        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return free
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


class ComponentPool:
    def __init__(self, keep_resident_bytes: int = 0, free_memory=available_memory):
        self.keep_resident_bytes = keep_resident_bytes
        self.free_memory = free_memory          # injectable: tests fake a small device
        self.entries: dict[str, PoolEntry] = {}
        self.hits = self.misses = self.evictions = 0
        self.loads = 0                          # fresh loads registered (misses that completed)
        self._lock = threading.Lock()           # readers on the HTTP thread take snapshots

    # -- the funnel's interceptor API ------------------------------------------------------------
    def lookup(self, identity, policy):
        entry = self.entries.get(identity.key)
        if entry is not None:
            with self._lock:
                self.hits += 1
                entry.hits += 1
                if not entry.touched:          # its first use in this build
                    entry.roles = set()
                entry.touched = True
                entry.last_used = time.time()
                entry.role = identity.role
                entry.roles.add(identity.role)
            return entry.module
        with self._lock:
            self.misses += 1
        self._make_room(identity, policy)
        return None

    def register(self, identity, module, policy):
        with self._lock:
            self.loads += 1
            self.entries[identity.key] = PoolEntry(identity, module, module_bytes(module), time.time(),
                                                   role=identity.role, roles={identity.role})

    # -- residency ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def building(self):
        """Route funnel loads through the pool while a holder is built; marks start cleared."""
        for e in self.entries.values():
            e.touched = False
        previous = set_load_interceptor(self)
        try:
            yield self
        finally:
            set_load_interceptor(previous if previous is not self else None)

    def release_unused(self) -> int:
        """Free entries the last build did not touch, keeping the most recently used of them
        within keep_resident_bytes. Returns how many were freed."""
        untouched = sorted((e for e in self.entries.values() if not e.touched), key=lambda e: -e.last_used)
        budget, drop = self.keep_resident_bytes, []
        for e in untouched:
            if budget and e.bytes <= budget:      # no budget: nothing untouched stays, weightless or not
                budget -= e.bytes
            else:
                drop.append(e)
        return self._drop(drop)

    def evict_untouched(self) -> int:
        """Free every entry the current build has not touched (memory pressure)."""
        return self._drop([e for e in self.entries.values() if not e.touched], evicted=True)

    def unload_all(self) -> int:
        return self._drop(list(self.entries.values()))

    def _make_room(self, identity, policy):
        need = sum(size for _file, size, _mtime in identity.weights)   # weightless components: 0
        if not need:
            return
        victims = sorted((e for e in self.entries.values() if not e.touched), key=lambda e: e.last_used)
        if not victims or self.free_memory(policy.device) >= need:
            return
        for e in victims:
            self._drop([e], evicted=True)
            if self.free_memory(policy.device) >= need:
                return

    def _drop(self, entries, evicted: bool = False) -> int:
        if not entries:
            return 0
        alive = []
        with self._lock:
            for e in entries:
                self.entries.pop(e.identity.key, None)
                if evicted:
                    self.evictions += 1
                try:
                    alive.append(weakref.ref(e.module))
                except TypeError:
                    pass
                e.module = None
        count = len(entries)
        del entries
        # Dropping the references frees most modules at once; a full collection (~0.2 s in a process
        # holding torch, diffusers and transformers) runs only when one is still held by a cycle.
        if any(r() is not None for r in alive):
            gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return count

    # -- reporting ---------------------------------------------------------------------------------
    def stats(self) -> dict:
        with self._lock:
            entries = [e.describe() for e in self.entries.values()]
            return {"hits": self.hits, "misses": self.misses, "evictions": self.evictions, "loads": self.loads,
                    "resident_bytes": sum(e["bytes"] for e in entries), "entries": entries}

    def holds(self, role: str) -> list:
        return [e for e in self.entries.values() if e.role == role]


__all__ = ["ComponentPool", "PoolEntry", "available_memory", "module_bytes"]
