"""A replica (one GPU: an LRU pool of components, a FIFO queue) and its node (page cache, disk).

Load time of a component = read (node page cache, else the node's disk or the shared store, whose
bandwidth is taken first come, first served) + host -> device copy; the two run one after the other,
as a safetensors read to host memory followed by `.to(device)` does.
"""
from collections import Counter, OrderedDict, deque

from testing.sim.catalog import GB


class Channel:
    """A read bandwidth that loads queue for (a node's NVMe, a network link, a shared store)."""

    def __init__(self, gbps: float):
        self.bps = gbps * GB
        self.free_at = 0.0


class Node:
    def __init__(self, params, channels: tuple):
        self.channels = channels
        self.cache_bps = params.page_cache_gbps * GB
        self.cache_cap = params.host_cache_gb * GB
        self.cache = OrderedDict()             # file -> bytes, least recently read first
        self.cache_used = 0

    def read(self, comp: str, nbytes: int, t: float) -> float:
        """When a read of `comp` asked for at `t` ends; the file is in the page cache afterwards."""
        if comp in self.cache:
            self.cache.move_to_end(comp)
            return t + nbytes / self.cache_bps
        start = max([t] + [c.free_at for c in self.channels])
        for c in self.channels:
            c.free_at = start + nbytes / c.bps
        end = start + nbytes / min(c.bps for c in self.channels)
        self.cache[comp] = nbytes
        self.cache_used += nbytes
        while self.cache_used > self.cache_cap and len(self.cache) > 1:
            self.cache_used -= self.cache.popitem(last=False)[1]
        return end


class Replica:
    def __init__(self, node: Node, params):
        self.node = node
        self.capacity = (params.gpu_gb - params.reserve_gb) * GB
        self.pcie_bps = params.pcie_gbps * GB
        # seconds per byte of its recent loads (a moving average), from the nominal disk + PCIe rate:
        # a stat a replica can report, and what a time-based router needs on a busy shared store
        self.load_s_per_byte = 1 / (params.disk_gbps * GB) + 1 / self.pcie_bps
        self.pool = OrderedDict()              # component -> bytes, least recently used first
        self.used = 0
        self.queue = deque()                   # (request, model) waiting, in arrival order
        self.pending = Counter()               # components of the queued requests
        self.running = None
        self.running_until = 0.0               # when the running request ends
        self.queued_s = 0.0                    # sampling seconds of the queued requests
        self.hits = self.misses = self.bytes_loaded = 0
        self.load_s = 0.0

    def queue_len(self) -> int:
        """Queued plus running: what Serve's routers count as a replica's ongoing requests."""
        return len(self.queue) + (self.running is not None)

    def bytes_to_load(self, model) -> int:
        """What a request on `model` would load here, as the replica reports it: components neither
        resident nor wanted by a request already queued here (which will load them first)."""
        return sum(b for c, b in model.components if c not in self.pool and not self.pending[c])

    def enqueue(self, req, model):
        self.queue.append((req, model))
        self.queued_s += req.service_s
        self.pending.update(c for c, _b in model.components)

    def start_next(self, t: float) -> float:
        """Start the head of the queue at `t`: load what is missing (evicting least recently used
        components this request does not use), then sample. Returns when it finishes."""
        req, model = self.queue.popleft()
        self.pending.subtract(c for c, _b in model.components)
        self.queued_s -= req.service_s
        self.running = req
        wanted = {c for c, _b in model.components}
        missing = []
        for c, b in model.components:
            if c in self.pool:
                self.hits += 1
                self.pool.move_to_end(c)
            else:
                self.misses += 1
                missing.append((c, b))
        need = sum(b for _c, b in missing)
        for c in [c for c in self.pool if c not in wanted]:
            if self.used + need <= self.capacity:
                break
            self.used -= self.pool.pop(c)
        if self.used + need > self.capacity:
            raise ValueError(f"{model.name} needs {model.bytes / GB:.1f} GB, more than a GPU's "
                             f"{self.capacity / GB:.1f} GB for components")
        cursor = t
        for c, b in missing:
            cursor = self.node.read(c, b, cursor) + b / self.pcie_bps
            self.pool[c] = b
            self.used += b
        self.bytes_loaded += need
        self.load_s += cursor - t
        if need:
            self.load_s_per_byte += 0.3 * ((cursor - t) / need - self.load_s_per_byte)
        self.running_until = cursor + req.service_s
        return self.running_until

    def work_s(self, t: float) -> float:
        """Seconds of work ahead of a new request at `t`: the running one's rest and the queued ones'
        sampling (their loads not counted): what an engine's /queue estimates from its step time."""
        return (max(0.0, self.running_until - t) if self.running is not None else 0.0) + self.queued_s
