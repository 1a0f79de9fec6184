"""The simulated hardware and router settings (one object, so a run's table can say what it used)."""
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class SimParams:
    gpu_gb: float = 80.0          # one GPU per replica (H100 80 GB)
    reserve_gb: float = 10.0      # kept free for activations: components get gpu_gb - reserve_gb
    pcie_gbps: float = 25.0       # host -> device copy, per GPU
    disk_gbps: float = 5.0        # a node's NVMe read, shared by its GPUs' loads (first come, first served)
    page_cache_gbps: float = 20.0 # reading a file the node's page cache holds
    host_cache_gb: float = 512.0  # a node's page cache (LRU over files)
    gpus_per_node: int = 8
    storage: str = "local"        # local: each node reads its own NVMe copy; shared: one network store
    storage_gbps: float = 10.0    # shared: the store's total read bandwidth, shared by every node
    nic_gbps: float = 12.5        # shared: a node's network link (100 Gbit/s)
    max_imbalance: int = 1        # affinity: only replicas within this many requests of the shortest queue

    def describe(self) -> dict:
        return asdict(self)
