"""ComponentPool: resident components shared across holder builds.

Plugged into the load funnel as its interceptor, so holders never see it. A build marks what it
touched; afterwards `release_unused()` frees the rest (or keeps the most recently used within
`keep_resident_bytes` on the device and `keep_host_bytes` in host memory). Identity is the funnel's
ComponentIdentity: the weight files themselves, class, dtype and quantization. Placement (toolkit/placement.py)
is no part of it: it changes where an entry lives, not its values, so a hit under another placement is
re-placed in place (v2/residency.py: a cpu_cache copy becomes resident with one host->device copy, never a
disk read). Each entry says where it lives at rest (`placement`, `at_rest`: device, host, none for a
staged one), which the planner's budgets count (`bytes_at`).

LoRA adapters are not components: toolkit/models/lora_adapters.py injects them into resident modules and
switches them per request. The pool keeps their books (`adapters`: where each is injected, hits,
which are active) and says which inactive ones stay warm within the same keep_resident_bytes.
"""
import contextlib
import gc
import threading
import time
import weakref
from dataclasses import dataclass, field

import torch

from toolkit import host_heap
from toolkit.models.v2.mixin import set_load_interceptor
from toolkit.models.v2.residency import module_bytes


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
    placement: str = "resident"   # its policy's placement (toolkit/placement.py)
    at_rest: str = "device"       # where it is between stages: device | host | none (staged)

    @property
    def public_key(self) -> str:
        """A short stable id that reveals no path (ComponentIdentity.public_key)."""
        return self.identity.public_key

    def describe(self) -> dict:
        return {"key": self.public_key, "role": self.role or self.identity.role, "roles": sorted(self.roles), "class": self.identity.cls.rsplit(".", 1)[-1],
                "bytes": self.bytes, "device": _device_of(self.module), "dtype": self.identity.dtype,
                "qtype": self.identity.qtype, "placement": self.placement, "at_rest": self.at_rest,
                "last_used": self.last_used, "hits": self.hits}

    def placed(self, policy):
        self.placement = getattr(policy, "placement", "resident")
        self.at_rest = getattr(policy, "at_rest", "device")


@dataclass
class AdapterEntry:
    key: str                   # 12 hex from the file's identity; the adapter is named `aitk_<key>` in the modules
    name: str                  # the file's basename
    bytes: int
    modules: dict              # role -> weakref of the component module it is injected into
    last_used: float
    hits: int = 0
    active: bool = False
    scale: float | None = None

    def alive(self) -> bool:
        """Still injected: every module it went into lives and holds it (a dropped component takes its
        adapters with it)."""
        for ref in self.modules.values():
            module = ref()
            if module is None or self.adapter not in (getattr(module, "peft_config", None) or {}):
                return False
        return bool(self.modules)

    @property
    def adapter(self) -> str:
        return f"aitk_{self.key}"

    def describe(self) -> dict:
        return {"key": self.key, "name": self.name, "bytes": self.bytes, "hits": self.hits, "active": self.active,
                "scale": self.scale, "last_used": self.last_used}


def _device_of(module) -> str | None:
    if isinstance(module, torch.nn.Module):
        for p in module.parameters():
            return str(p.device)
    return None


def available_memory(device: str) -> int:
    """Free bytes where `device`'s tensors live: CUDA free memory, or available RAM (`cpu`, `host`)."""
    if str(device).startswith("cuda") and torch.cuda.is_available():
        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return free
    host_heap.release()         # what the heap keeps for reuse is available too (toolkit/host_heap.py)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


class ComponentPool:
    def __init__(self, keep_resident_bytes: int = 0, free_memory=available_memory, keep_host_bytes: int = 0):
        self.keep_resident_bytes = keep_resident_bytes
        self.keep_host_bytes = keep_host_bytes      # the same for entries kept in host memory (engine.keep_host_gb)
        self.free_memory = free_memory          # injectable: tests fake a small device
        self.entries: dict[str, PoolEntry] = {}
        self.hits = self.misses = self.evictions = 0
        self.loads = 0                          # fresh loads registered (misses that completed)
        self.loaded_bytes = 0                   # their bytes (benchmarks: what a request path read)
        self.adapters: dict[str, AdapterEntry] = {}
        self.adapter_loads = self.adapter_hits = 0
        # what the latest build read and what it found here (a checkpoint switch: only what differs is read)
        self.last_build = _empty_build()
        self._load_started: dict = {}           # identity key -> monotonic time of its miss (a load's seconds)
        self._building = False
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
                entry.placed(policy)
                if self._building:
                    self.last_build["reused"].append(identity.role)
                    self.last_build["reused_bytes"] += entry.bytes
            return entry.module
        with self._lock:
            self.misses += 1
        self._make_room(identity, policy)
        self._load_started[identity.key] = time.monotonic()     # its read starts now; register() ends it
        return None

    def register(self, identity, module, policy):
        with self._lock:
            self.loads += 1
            entry = self.entries[identity.key] = PoolEntry(identity, module, module_bytes(module), time.time(),
                                                           role=identity.role, roles={identity.role})
            entry.placed(policy)
            self.loaded_bytes += entry.bytes
            started = self._load_started.pop(identity.key, None)
            if self._building:
                self.last_build["loaded"].append(identity.role)
                self.last_build["loaded_bytes"] += entry.bytes
                if started is not None:      # each component read, with its seconds (the job log's load line)
                    seconds = self.last_build["seconds"]
                    seconds[identity.role] = round(seconds.get(identity.role, 0.0) + time.monotonic() - started, 3)

    # -- residency ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def building(self):
        """Route funnel loads through the pool while a holder is built; marks start cleared."""
        for e in self.entries.values():
            e.touched = False
        with self._lock:
            self.last_build = _empty_build()
            self._building = True
        previous = set_load_interceptor(self)
        try:
            yield self
        finally:
            set_load_interceptor(previous if previous is not self else None)
            self._building = False

    def release_unused(self) -> int:
        """Free entries the last build did not touch, keeping the most recently used of them within
        keep_resident_bytes (those on the device) and keep_host_bytes (those in host memory: cpu_cache
        and layers copies, prefetched reads). Returns how many were freed."""
        untouched = sorted((e for e in self.entries.values() if not e.touched), key=lambda e: -e.last_used)
        budgets, drop = {"device": self.keep_resident_bytes, "host": self.keep_host_bytes}, []
        for e in untouched:
            where = "host" if e.at_rest == "host" else "device"
            if budgets[where] and e.bytes <= budgets[where]:   # no budget: nothing untouched stays, weightless or not
                budgets[where] -= e.bytes
            else:
                drop.append(e)
        return self._drop(drop)

    def bytes_at(self, where: str) -> int:
        """Bytes of the entries at rest `where` (device | host): what the placement planner counts as
        room (this model's own, or evictable)."""
        with self._lock:
            return sum(e.bytes for e in self.entries.values() if e.at_rest == where)

    def evict_untouched(self) -> int:
        """Free every entry the current build has not touched (memory pressure)."""
        return self._drop([e for e in self.entries.values() if not e.touched], evicted=True)

    def unload_all(self) -> int:
        with self._lock:
            self.adapters.clear()
        return self._drop(list(self.entries.values()))

    # -- adapters (books only: toolkit/models/lora_adapters.py injects and deletes them) ------------------------
    def adapter(self, key: str) -> AdapterEntry | None:
        """The entry of an adapter still injected, else None (a stale entry is forgotten)."""
        entry = self.adapters.get(key)
        if entry is not None and not entry.alive():
            with self._lock:
                self.adapters.pop(key, None)
            return None
        return entry

    def adapter_loaded(self, entry: AdapterEntry):
        with self._lock:
            self.adapter_loads += 1
            self.adapters[entry.key] = entry

    def adapter_hit(self, entry: AdapterEntry):
        with self._lock:
            self.adapter_hits += 1
            entry.hits += 1
            entry.last_used = time.time()

    def set_active_adapters(self, scales: dict):
        """`scales`: key -> scale of the adapters the current request runs; every other one is inactive."""
        with self._lock:
            for key, entry in self.adapters.items():
                entry.active, entry.scale = key in scales, scales.get(key)

    def adapters_to_release(self) -> list:
        """Inactive adapters beyond the budget, forgotten here (the caller deletes them from the modules).
        As release_unused: the most recently used stay while they fit in keep_resident_bytes, less what
        untouched components already keep; with no budget no inactive adapter stays."""
        budget = self.keep_resident_bytes
        if budget:
            budget = max(0, budget - sum(e.bytes for e in self.entries.values() if not e.touched))
        drop = []
        with self._lock:
            inactive = sorted((e for e in self.adapters.values() if not e.active), key=lambda e: -e.last_used)
            for e in inactive:
                if budget and e.bytes <= budget:
                    budget -= e.bytes
                else:
                    drop.append(self.adapters.pop(e.key))
        return drop

    def _make_room(self, identity, policy):
        need = sum(size for _file, size, _mtime in identity.weights)   # weightless components: 0
        if not need:
            return
        # where it lands: the device, or host memory ("host": a cpu_cache or layers copy, a staged read)
        where = policy.device if getattr(policy, "at_rest", "device") == "device" else "host"
        victims = sorted((e for e in self.entries.values() if not e.touched), key=lambda e: e.last_used)
        if not victims or self.free_memory(where) >= need:
            return
        for e in victims:
            self._drop([e], evicted=True)
            if self.free_memory(where) >= need:
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
        host_heap.release()
        return count

    # -- reporting ---------------------------------------------------------------------------------
    def stats(self) -> dict:
        with self._lock:
            entries = [e.describe() for e in self.entries.values()]
            adapters = [e.describe() for e in self.adapters.values() if e.alive()]
            return {"hits": self.hits, "misses": self.misses, "evictions": self.evictions, "loads": self.loads,
                    "loaded_bytes": self.loaded_bytes, "resident_bytes": sum(e["bytes"] for e in entries), "entries": entries,
                    "adapters": adapters, "adapter_loads": self.adapter_loads, "adapter_hits": self.adapter_hits,
                    "last_build": {k: type(v)(v) if isinstance(v, (list, dict)) else v for k, v in self.last_build.items()}}

    def holds(self, role: str) -> list:
        return [e for e in self.entries.values() if e.role == role]


def _empty_build() -> dict:
    return {"loaded": [], "reused": [], "loaded_bytes": 0, "reused_bytes": 0, "seconds": {}}


__all__ = ["AdapterEntry", "ComponentPool", "PoolEntry", "available_memory", "module_bytes"]
