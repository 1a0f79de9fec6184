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
from dataclasses import replace

import torch

from toolkit import placement as P

_RELEASED = "_aitk_released"
_CASTABLE = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class _NoPool:
    """A load interceptor that neither answers nor registers: a staged component's re-read is no pool load."""

    def lookup(self, identity, policy):
        return None

    def register(self, identity, module, policy):
        pass


# -- at rest (the funnel) -------------------------------------------------------------------------------
def place(module, policy, previous=None):
    """Put `module` where `policy.placement` keeps it between stages (module docstring)."""
    _unhook(module)
    if getattr(module, "_aitk_group_offload", False):
        _remove_group_offload(module)
    if is_released(module) and policy.placement != P.STAGED:
        materialize(module, policy.device if policy.placement == P.RESIDENT else "cpu", policy)
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


def release(module):
    """Every parameter and buffer replaced by a meta placeholder of its shape and dtype: the module keeps
    its structure, config and hooks (a pipeline asks its `.dtype`), its memory is freed."""
    if is_released(module):
        return
    from toolkit.models.v2.pool import module_bytes
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


def materialize(module, device, policy=None):
    """Read a released module again from its files through the funnel (no pool), onto `device`, and move
    the fresh tensors into it: the same class and config read the same way give the same values."""
    from toolkit.models.v2.mixin import thread_load_interceptor
    reload = getattr(module, "_aitk_reload", None)
    if reload is None:
        raise RuntimeError(f"{type(module).__name__}: released, and no way to read it again")
    cls, source, kwargs = reload
    base = kwargs["policy"] if policy is None else policy
    fresh_policy = type(base)(base.dtype, str(device), base.qtype, P.RESIDENT, 1)
    with thread_load_interceptor(_NoPool()):
        fresh = cls.load(source, **{**kwargs, "policy": fresh_policy})
    transplant(module, fresh)
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
    nothing), non-blocking from pinned memory on CUDA. A copy on the CPU too, so the CPU tests move
    real bytes. A module whose tensors cannot be swapped in place (a tensor subclass) moves whole."""
    device = torch.device(device)
    host = module.__dict__.setdefault("_aitk_host", {})
    try:
        for t in _tensors(module):
            h = host.get(id(t))
            if h is None or t.data_ptr() != h.data_ptr() or t.dtype != h.dtype:
                # first arrival, or changed at rest (a pipeline's `vae.to(float32)` upcast, a fused LoRA): that is
                # its host copy now
                h = host[id(t)] = t.data
            t.data = h.to(device, non_blocking=h.is_pinned(), copy=True)
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


__all__ = ["Residency", "SimulatedDevice", "is_released", "materialize", "offload", "onload", "place", "release",
           "transplant"]


# -- planning with live numbers ----------------------------------------------------------------------------
def requested_for(mc) -> tuple:
    """(forced, groups) `mc`'s placement and aliases fix (toolkit/placement.requested)."""
    return P.requested(mc.placement, {c.role: c.kind for c in mc.spec.components}, low_vram=mc.low_vram,
                       layer_offloading=mc.layer_offloading)


def plan_for(mc, gen=None, *, device: str, folders=(), roots=None, pool=None, memory=None, reserve: int = P.GiB,
             batch: int = 1, parts=None):
    """The Plan `mc` runs with for `gen` (None: the arch's default request) on `device` now: its parts from
    their files' headers, the request's activation floor per stage, the device's free memory (the simulated
    device's, when `memory` is one) plus what `pool` holds there, less `reserve`; the host's likewise. On a
    CPU device that is not simulated nothing is planned: the request's placements, the rest resident.
    Raises placement.PlacementError when nothing fits."""
    from toolkit.config_modules import GenerateImageConfig
    from toolkit.models import component_sizes
    from toolkit.models.base_model import get_model_class

    forced, groups = requested_for(mc)
    if parts is None:
        parts = component_sizes.parts(mc, folders, roots, device=device)
    known = {p.role for p in parts}
    if memory is None and not str(device).startswith("cuda"):
        placements = {p.role: forced.get(p.role, P.RESIDENT) for p in parts}
        plan = P.evaluate(parts, placements, {r: groups.get(r, 1) for r in placements}, 0,
                          P.Budget(device_free=0, reserve=0), "as asked" if forced else "resident")
    else:
        gen = gen if gen is not None else GenerateImageConfig.from_dict({"prompt": ""}, mc)
        activation = get_model_class(mc.arch).estimate_stage_bytes(mc, gen, device="cuda" if memory is None else device,
                                                                   batch=batch)
        plan = P.plan(parts, activation=activation, budget=budget_now(device, pool, memory, reserve), forced=forced,
                      groups=groups, staged=not mc.loras)
    # a component whose size is not known here (its files are not read yet) takes what was asked, else resident
    extra = {role: p for role, p in forced.items() if role not in known}
    if extra:
        plan = replace(plan, placements={**plan.placements, **extra},
                       groups={**plan.groups, **{r: groups.get(r, 1) for r, p in extra.items() if p == P.LAYERS}})
    return plan


def budget_now(device: str, pool=None, memory=None, reserve: int = P.GiB) -> "P.Budget":
    """The planner's Budget from the device's free memory (torch.cuda.mem_get_info plus what torch's caching
    allocator holds unused, or the simulated device's) and the host's available RAM, plus what `pool` holds
    at each."""
    from toolkit.models.v2.pool import available_memory
    if memory is not None:
        free, _total = memory.mem_get_info()
        host = memory.host_available()
    else:
        dev = torch.device(device)
        free, _total = torch.cuda.mem_get_info(dev)
        # blocks torch's caching allocator holds but no tensor uses (the last request's activations) are free too
        free += torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)
        host = None
    if host is None:
        host = available_memory("host")
    pool_device = pool.bytes_at("device") if pool is not None else 0
    pool_host = pool.bytes_at("host") if pool is not None else 0
    return P.Budget(device_free=free, reserve=reserve, pool_device=pool_device, host_free=host, pool_host=pool_host)
