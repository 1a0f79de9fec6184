"""Planning with live numbers: the Plan a model runs with for a request on this device now, from its
components' sizes (component_sizes.py, the files' headers), the request's activation floor per stage, and
the device's and the host's free memory plus what the pool holds at each (toolkit/placement.py decides; the
runtime is residency.py). The worker plans every request with it; a holder used alone plans at load."""
from dataclasses import replace

from toolkit import placement as P


def requested_for(mc) -> tuple:
    """(forced, groups) `mc`'s placement and aliases fix (toolkit/placement.requested)."""
    return P.requested(mc.placement, {c.role: c.kind for c in mc.spec.components}, low_vram=mc.low_vram,
                       layer_offloading=mc.layer_offloading)


def plan_for(mc, gen=None, *, estimate, device: str, folders=(), roots=None, pool=None, memory=None,
             reserve: int = P.GiB, batch: int = 1, parts=None):
    """The Plan `mc` runs with for `gen` (None: the arch's default request) on `device` now. `estimate`:
    the holder class's estimate_stage_bytes; `memory`: a simulated device (residency.SimulatedDevice, or
    anything answering mem_get_info and host_available), else the real one. On a CPU device that is not
    simulated nothing is planned: the request's placements, the rest resident; nor where CUDA is named but
    absent (the cluster's ingress names its replicas' components without a GPU of its own). Raises
    placement.PlacementError when nothing fits."""
    from toolkit.config_modules import GenerateImageConfig
    from toolkit.models import component_sizes

    forced, groups = requested_for(mc)
    if parts is None:
        parts = component_sizes.parts(mc, folders, roots, device=device)
    known = {p.role for p in parts}
    if memory is None and not (str(device).startswith("cuda") and cuda_present()):
        placements = {p.role: forced.get(p.role, P.RESIDENT) for p in parts}
        plan = P.evaluate(parts, placements, {r: groups.get(r, 1) for r in placements}, 0,
                          P.Budget(device_free=0, reserve=0), "as asked" if forced else "resident")
    else:
        gen = gen if gen is not None else GenerateImageConfig.from_dict({"prompt": ""}, mc)
        floors = activation_floors(estimate, mc, gen, device="cuda" if memory is None else device, batch=batch)
        plan = plan_first(parts, floors, budget=budget_now(device, pool, memory, reserve), forced=forced,
                          groups=groups, staged=not mc.loras)
    # a component whose size is not known here (its files are not read yet) takes what was asked, else resident
    extra = {role: p for role, p in forced.items() if role not in known}
    if extra:
        plan = replace(plan, placements={**plan.placements, **extra},
                       groups={**plan.groups, **{r: groups.get(r, 1) for r, p in extra.items() if p == P.LAYERS}})
    return plan


def activation_floors(estimate, mc, gen, *, device: str, batch: int = 1) -> list:
    """The activation floors (`estimate`: a holder class's estimate_stage_bytes) a plan is tried with, in
    order: the request's own (the whole decode; the tiled one under sample.vae_tiling `on`), then under
    `auto` the tiled decode's where it is lower: a request whose whole decode fits no placement decodes in
    tiles (toolkit/models/vae_tiling.py) rather than be refused, and one that fits keeps its whole decode."""
    first = estimate(mc, gen, device=device, batch=batch)
    if getattr(gen, "vae_tiling", "auto") != "auto":
        return [first]
    tiled = estimate(mc, gen, device=device, batch=batch, tiled=True)
    return [first, tiled] if tiled != first else [first]


def plan_first(parts, floors: list, **kw) -> "P.Plan":
    """placement.plan with the first of `floors` any placement fits; else the last one's PlacementError."""
    for i, activation in enumerate(floors):
        try:
            return P.plan(parts, activation=activation, **kw)
        except P.PlacementError:
            if i == len(floors) - 1:
                raise
    raise ValueError("no activation floor to plan with")


def cuda_present() -> bool:
    import torch
    return torch.cuda.is_available()


def budget_now(device: str, pool=None, memory=None, reserve: int = P.GiB) -> "P.Budget":
    """The planner's Budget from the device's free memory (torch.cuda.mem_get_info plus what torch's caching
    allocator holds unused, or the simulated device's) and the host's available RAM, plus what `pool` holds
    at each."""
    from toolkit.models.v2.pool import available_memory
    free = device_free(device, memory)
    host = memory.host_available() if memory is not None else None
    if host is None:
        host = available_memory("host")
    pool_device = pool.bytes_at("device") if pool is not None else 0
    pool_host = pool.bytes_at("host") if pool is not None else 0
    return P.Budget(device_free=free, reserve=reserve, pool_device=pool_device, host_free=host, pool_host=pool_host)


def device_free(device: str, memory=None) -> int:
    """Bytes free on `device` now: the simulated device's (`memory`), CUDA's free memory plus the blocks torch's
    caching allocator holds but no tensor uses (the last request's activations), else the host's available RAM."""
    from toolkit.models.v2.pool import available_memory
    if memory is not None:
        return memory.mem_get_info()[0]
    if not (str(device).startswith("cuda") and cuda_present()):
        return available_memory("host")
    import torch
    dev = torch.device(device)
    free, _total = torch.cuda.mem_get_info(dev)
    return free + torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)


__all__ = ["activation_floors", "budget_now", "device_free", "plan_first", "plan_for", "requested_for"]
