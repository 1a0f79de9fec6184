"""The most bytes of CPU tensor storage a piece of code holds at once, counted op by op (a torch dispatch
mode): what the memory floor (BaseModel.estimate_activation_bytes) is checked against on tiny runs."""
import torch


class PeakLive(torch.utils._python_dispatch.TorchDispatchMode):
    """The most bytes of tensor storage made while active that were alive at once (a storage counts
    from the op that made it until nothing holds it; views and in-place results are the storage)."""

    def __init__(self):
        super().__init__()
        self.live, self.peak, self._refs = 0, 0, {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from torch.multiprocessing.reductions import StorageWeakRef

        out = func(*args, **(kwargs or {}))
        for ptr in [p for p, (ref, _n) in self._refs.items() if ref.expired()]:
            self.live -= self._refs.pop(ptr)[1]
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                storage = t.untyped_storage()
                ptr, n = storage.data_ptr(), storage.nbytes()
                if ptr and n and ptr not in self._refs:
                    self._refs[ptr] = (StorageWeakRef(storage), n)
                    self.live += n
        self.peak = max(self.peak, self.live)
        return out
