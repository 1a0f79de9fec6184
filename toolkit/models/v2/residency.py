"""Residency: where a component's weights are while it serves, and the moves between its stages. The
plan is toolkit/placement.py's; this is its runtime, in two halves:

- `place(module, policy, previous)`: where a component lives at rest, applied by the load funnel
  (OstrisModelMixin.aitk_post_load) on a load and on every pool hit: `resident` on the device;
  `cpu_cache` in host memory (pinned when the device is CUDA); `layers` in host memory with diffusers'
  group offloading streaming `policy.group` blocks at a time to the device (on CUDA from pinned memory
  on a side stream, the next group copied while this one computes); `staged` released (every tensor
  replaced by a meta placeholder of its shape and dtype) until its stage reads it again from its files
  through the funnel. A component moved between placements keeps its values: dtype and quantization
  are never touched (FP8 stays FP8).
- `Residency`: the holder's stage switch. A hook on each of the pipeline's module components (accelerate's
  ModelHook, so `vae.decode` and `encode`, which diffusers decorates with `apply_forward_hook`, trigger
  it too, and the pipeline's `_execution_device` is the device) runs before the component computes:
  the component of the previous stage leaves the device (a cpu_cache one points back at its host copy,
  a staged one is released) and this one, when it is cpu_cache or staged, arrives (a copy from its
  host copy, or a read from its files). One visiting component at a time, whatever the stage: the
  planner's arithmetic. At the end of a pipeline call (`finish`) the last one leaves too.

A simulated device (SimulatedDevice: an injected total, a fake mem_get_info; the worker's Faults set
it) counts the bytes on the device as placed and moved, and its peak, so the CPU tests check a plan's
arithmetic against what the runtime did.
"""
import contextlib
import threading

import torch

from toolkit import placement as P

_RELEASED = "_aitk_released"
_CASTABLE = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


# -- at rest (the funnel) -------------------------------------------------------------------------------
def place(module, policy, previous=None):
    """Put `module` where `policy.placement` keeps it between stages (module docstring)."""
    _unhook(module)
    if getattr(module, "_aitk_group_offload", False):
        _remove_group_offload(module)
    if is_released(module) and policy.placement != P.STAGED:
        materialize(module, policy.device if policy.placement == P.RESIDENT else "cpu")
    where = policy.placement
    if where == P.STAGED:
        release(module)
    elif where == P.RESIDENT:
        _move_all(module, policy.device)
    else:                        # cpu_cache and layers keep a host copy
        _move_all(module, "cpu")
        if str(policy.device).startswith("cuda") and torch.cuda.is_available():
            _pin(module)
        if where == P.LAYERS:
            _group_offload(module, policy)


def _move_all(module, device):
    device = torch.device(device)
    if any(t.device != device for t in _tensors(module)):
        module.to(device)


def _pin(module):
    for t in _tensors(module):
        if t.device.type == "cpu" and not t.is_pinned():
            try:
                t.data = t.data.pin_memory()
            except RuntimeError:          # a tensor subclass that cannot be pinned in place: left as it is
                pass


def _group_offload(module, policy):
    """diffusers' group offloading, block level, `policy.group` blocks per group; with a CUDA stream (the
    next group's copy overlaps this one's compute) where the device is CUDA. On the CPU the hooks run
    with no copy (what the CPU tests exercise)."""
    from diffusers.hooks import apply_group_offloading
    cuda = str(policy.device).startswith("cuda") and torch.cuda.is_available()
    apply_group_offloading(module, onload_device=torch.device(policy.device), offload_device=torch.device("cpu"),
                           offload_type="block_level", num_blocks_per_group=max(1, policy.group),
                           use_stream=cuda, record_stream=cuda, non_blocking=cuda)
    module._aitk_group_offload = True


def _remove_group_offload(module):
    from diffusers.hooks import HookRegistry
    from diffusers.hooks.group_offloading import _GROUP_OFFLOADING, _LAZY_PREFETCH_GROUP_OFFLOADING
    registry = HookRegistry.check_if_exists_or_initialize(module)
    for name in (_GROUP_OFFLOADING, "layer_execution_tracker", _LAZY_PREFETCH_GROUP_OFFLOADING):
        registry.remove_hook(name, recurse=True)
    module._aitk_group_offload = False


# -- staged: released, and read again --------------------------------------------------------------------
def is_released(module) -> bool:
    return bool(getattr(module, _RELEASED, False))


def module_bytes(module) -> int:
    """The bytes a module's tensors hold (each storage once); a released (staged) module's as when it was read."""
    if not isinstance(module, torch.nn.Module):
        return 0
    if is_released(module):
        return getattr(module, "_aitk_nbytes", 0)
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


def release(module):
    """Every parameter and buffer replaced by a meta placeholder of its shape and dtype: the module keeps
    its structure, config and hooks (a pipeline asks its `.dtype`), its memory is freed."""
    if is_released(module):
        return
    module._aitk_nbytes = module_bytes(module)
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is not None:
                m._parameters[name] = torch.nn.Parameter(torch.empty(p.shape, dtype=p.dtype, device="meta"),
                                                         requires_grad=False)
        for name, b in list(m._buffers.items()):
            if b is not None:
                m._buffers[name] = torch.empty(b.shape, dtype=b.dtype, device="meta")
    module.__dict__.pop("_aitk_host", None)
    setattr(module, _RELEASED, True)


def materialize(module, device):
    """Read a released module again from its files through the funnel (no pool: the load funnel's
    `_aitk_reload`), onto `device`, and move the fresh tensors into it: the same class and config read the
    same way give the same values."""
    reload = getattr(module, "_aitk_reload", None)
    if reload is None:
        raise RuntimeError(f"{type(module).__name__}: released, and no way to read it again")
    transplant(module, reload(device))
    setattr(module, _RELEASED, False)


def transplant(dst, src):
    """`src`'s parameters and buffers moved into `dst`, module by module (the same structure)."""
    pairs = list(zip(dst.modules(), src.modules()))
    if len(pairs) != len(list(src.modules())):
        raise RuntimeError(f"{type(dst).__name__}: read again with another structure")
    for d, s in pairs:
        for table in ("_parameters", "_buffers"):
            old, new = getattr(d, table), dict(getattr(s, table))
            for name, t in new.items():      # a placeholder cast while released (a pipeline's VAE upcast) keeps it
                was = old.get(name)
                if (t is not None and was is not None and was.dtype != t.dtype and was.dtype in _CASTABLE
                        and t.dtype in _CASTABLE):
                    t.data = t.data.to(was.dtype)
            old.clear()
            old.update(new)


# -- moves ------------------------------------------------------------------------------------------
def _tensors(module):
    """Each distinct parameter and buffer object of `module` (tied weights once)."""
    seen = set()
    for m in module.modules():
        for t in list(m._parameters.values()) + list(m._buffers.values()):
            if t is not None and id(t) not in seen:
                seen.add(id(t))
                yield t


def onload(module, device):
    """A cpu_cache module onto `device`: each tensor copied from its host copy (kept: leaving costs
    nothing), non-blocking from pinned memory on CUDA. On the CPU the host copy itself is the device's: a
    fresh copy would only double the bytes, and its new allocation can change oneDNN/MKL's kernel choice
    and so the low bits of a result (a CLIP text encoder's, measured), where cpu_cache must equal resident
    bit for bit. A module whose tensors cannot be swapped in place (a tensor subclass) moves whole."""
    device = torch.device(device)
    host = module.__dict__.setdefault("_aitk_host", {})
    try:
        for t in _tensors(module):
            h = host.get(id(t))
            if h is None or t.data_ptr() != h.data_ptr() or t.dtype != h.dtype:
                # first arrival, or changed at rest (a pipeline's `vae.to(float32)` upcast, a fused LoRA): that is
                # its host copy now
                h = host[id(t)] = t.data
            t.data = h if device.type == "cpu" and h.device.type == "cpu" else h.to(
                device, non_blocking=h.is_pinned(), copy=True)
    except RuntimeError:
        offload(module)
        module.__dict__.pop("_aitk_host", None)
        module.to(device)
        module._aitk_moved_whole = True


def offload(module):
    """A cpu_cache module back to its host copies (the device copies are freed)."""
    if module.__dict__.pop("_aitk_moved_whole", False):
        module.to("cpu")
        return
    host = module.__dict__.get("_aitk_host") or {}
    alive = set()
    for t in _tensors(module):
        alive.add(id(t))
        h = host.get(id(t))
        if h is not None:
            t.data = h
    for key in set(host) - alive:        # tensors gone since (a deleted LoRA adapter): their copies go too
        del host[key]


# -- the stage switch ------------------------------------------------------------------------------------
def _hook_class():
    from accelerate.hooks import ModelHook

    class StageHook(ModelHook):
        """Runs the stage switch before its component computes; names the device the pipeline runs on."""

        def __init__(self, residency, role: str):
            super().__init__()
            self.residency, self.role = residency, role
            self.execution_device = residency.device

        def pre_forward(self, module, *args, **kwargs):
            self.residency.enter(self.role)
            return args, kwargs
    return StageHook


def _unhook(module):
    hook = getattr(module, "_hf_hook", None)
    if hook is not None and hasattr(hook, "residency"):
        from accelerate.hooks import remove_hook_from_module
        remove_hook_from_module(module)


class Residency:
    """The stage switch of one holder (module docstring). `placements`: role -> placement of the
    pipeline's module components; `costs`: role -> device bytes while its stage runs (the plan's), which a
    simulated device counts."""

    def __init__(self, device: str, placements: dict, costs: dict | None = None, memory=None):
        self.device = torch.device(device)
        self.placements = dict(placements)
        self.costs = dict(costs or {})
        self.memory = memory
        self.modules: dict = {}
        self.current: str | None = None        # the visiting (cpu_cache or staged) component on the device
        self.running: str | None = None        # the component computing (a layers one counts its groups)
        self.moves = 0                         # arrivals: what the benchmarks count
        self._lock = threading.RLock()

    @property
    def active(self) -> bool:
        return any(p != P.RESIDENT for p in self.placements.values())

    def attach(self, components: dict):
        """Hook each module component that has a placement (none at all when every one is resident)."""
        if not self.active:
            return
        StageHook = _hook_class()
        from accelerate.hooks import add_hook_to_module
        for role, module in components.items():
            if isinstance(module, torch.nn.Module) and role in self.placements:
                add_hook_to_module(module, StageHook(self, role))
                self.modules[role] = module

    def detach(self):
        with self._lock:
            self.finish()
            for module in self.modules.values():
                _unhook(module)
            self.modules.clear()

    def enter(self, role: str):
        """`role` is about to compute: the visiting component of another stage leaves, and `role` arrives
        when it is cpu_cache or staged."""
        with self._lock:
            if self.current is not None and self.current != role:
                self._leave()
            if self.running != role:
                self._running(role)
            if self.current != role and self.placements.get(role) in (P.CPU_CACHE, P.STAGED):
                module = self.modules[role]
                if self.placements[role] == P.STAGED:
                    materialize(module, self.device)
                else:
                    onload(module, self.device)
                self.current = role
                self.moves += 1
                self._count(role, +1)

    def finish(self):
        """The pipeline call ended: the visiting component leaves the device."""
        with self._lock:
            if self.current is not None:
                self._leave()
            self._running(None)

    def _leave(self):
        role, self.current = self.current, None
        module = self.modules[role]
        if self.placements[role] == P.STAGED:
            release(module)
        else:
            offload(module)
        self._count(role, -1)

    def _running(self, role):
        """A layers component's groups are on the device while it computes (counted on a simulated one)."""
        if self.running is not None and self.placements.get(self.running) == P.LAYERS:
            self._count(self.running, -1)
        self.running = role
        if role is not None and self.placements.get(role) == P.LAYERS:
            self._count(role, +1)

    def _count(self, role, sign):
        if self.memory is not None:
            self.memory.use(sign * self.costs.get(role, 0))

    @contextlib.contextmanager
    def call(self):
        """Around one pipeline call: whatever visits leaves the device at the end, error or not."""
        try:
            yield self
        finally:
            self.finish()


class SimulatedDevice:
    """A device of `total` bytes for the CPU tests (the worker's Faults.device_mb): `used` is what the pool
    holds resident (`resident_bytes()`, read live) plus what the stage switch moved in; `mem_get_info`
    answers as torch.cuda's does. `peak` is the most it held at once."""

    def __init__(self, total: int, resident_bytes=lambda: 0, host_total: int | None = None, host_used=lambda: 0):
        self.total = int(total)
        self.resident_bytes = resident_bytes
        self.host_total = host_total
        self.host_used = host_used
        self.moved = 0
        self.peak = 0
        self._lock = threading.Lock()

    def used(self) -> int:
        return self.resident_bytes() + self.moved

    def use(self, delta: int):
        with self._lock:
            self.moved += delta
            self.peak = max(self.peak, self.used())

    def mem_get_info(self) -> tuple:
        used = self.used()
        with self._lock:
            self.peak = max(self.peak, used)
        return max(0, self.total - used), self.total

    def host_available(self) -> int | None:
        return None if self.host_total is None else max(0, self.host_total - self.host_used())


__all__ = ["Residency", "SimulatedDevice", "is_released", "materialize", "module_bytes", "offload", "onload", "place",
           "release", "transplant"]
