"""Placement: where each component of a model lives while it serves, planned from numbers alone.

    plan(parts, activation=..., budget=Budget(...)) -> Plan          (or PlacementError)

No torch, no files, no clock: the same numbers give the same plan, so the planner is tested on a table
of real model sizes (testing/tests/test_placement.py; docs/engine.md#placement shows it) and the engine
process asks it before a request is queued without importing torch.

The placements (`model.placement`, docs/configuration.md):
- `resident`: on the device from the build on.
- `cpu_cache`: built once in host memory (pinned on CUDA) and moved to the device only while its stage
  runs; leaving the device costs nothing (the host copy is kept). Weights keep their dtype (FP8 stays FP8).
- `staged`: read from its files when its stage starts and released when it ends: no host copy at all,
  a disk read per stage.
- `layers`: a denoiser's blocks streamed to the device `group` blocks at a time (diffusers' group
  offloading), the next group copied while this one computes; its host copy is kept.

The device model behind the arithmetic (toolkit/models/v2/residency.py keeps to it): a request runs in
three stages, `encode` (text and image encoders), `denoise` (the denoisers) and `decode` (the VAE or
vocoder), each with its own activations. Resident components are on the device throughout; any other
component is on the device while its stage needs it, and a component of another stage is evicted when
room is needed (one at a time at worst, two denoisers of one stage included). So the device's peak is
    max over stages s of: sum(resident) + max(stage cost of a non-resident component of s) + activation(s)
where a cpu_cache or staged component's stage cost is its bytes and a layers one's is its bytes outside
the blocks plus two groups (the one computing and the one arriving). The host keeps every cpu_cache
and layers copy, plus the largest staged component while it is read (the reader goes through host memory).

`auto` tries, for the components no one placed, the rungs of LADDER in order and takes the first
that fits both budgets: the fastest that fits. A plan that fits nowhere is a PlacementError naming the
component, its bytes and the budget it exceeds.
"""
from dataclasses import dataclass, field

from toolkit.errors import ConfigError

RESIDENT, CPU_CACHE, STAGED, LAYERS = "resident", "cpu_cache", "staged", "layers"
AUTO = "auto"
PLACEMENTS = (RESIDENT, CPU_CACHE, STAGED, LAYERS)
CHOICES = (AUTO,) + PLACEMENTS
GiB = 1 << 30
HOST_RESERVE = 1 << 30       # host memory a plan (and a prefetch: prefetch.MARGIN_BYTES) leaves free

# component kinds (toolkit/models/arch.py; repeated here so this module imports nothing) and their stage
DENOISER = "denoiser"
ENCODERS = ("text_encoder", "image_encoder", "safety_checker")   # run once per request, before the denoiser
STAGE_OF = {"text_encoder": "encode", "image_encoder": "encode", "safety_checker": "encode",
            "denoiser": "denoise", "vae": "decode", "audio": "decode"}
WEIGHTED = tuple(STAGE_OF)
STAGES = ("encode", "denoise", "decode")


def _rung(denoiser: str, encoders: str, other: str):
    def assign(kind: str) -> str:
        return denoiser if kind == DENOISER else encoders if kind in ENCODERS else other
    return assign


# (name, placement by kind) from fastest to lightest. cpu_cache moves a component once per request (and
# not at all while the room lasts); layers streams the denoiser over PCIe every step; staged keeps no host
# copy and reads its files every request, so it comes last: its rungs lower the host's need, not the
# device's.
LADDER = (
    ("resident", _rung(RESIDENT, RESIDENT, RESIDENT)),
    ("encoders in cpu_cache", _rung(RESIDENT, CPU_CACHE, RESIDENT)),
    ("cpu_cache", _rung(CPU_CACHE, CPU_CACHE, CPU_CACHE)),
    ("denoiser in layers", _rung(LAYERS, CPU_CACHE, CPU_CACHE)),
    ("staged", _rung(STAGED, STAGED, STAGED)),
    ("staged, denoiser in layers", _rung(LAYERS, STAGED, STAGED)),
)


@dataclass(frozen=True)
class Part:
    """One weighted component as the planner sees it. `bytes`: its size once loaded (at the dtype and
    quantization it is loaded with), from its files' headers. `blocks`, `block_bytes`: its repeated
    blocks (a transformer's `transformer_blocks.N`) and the largest one's bytes, what `layers` streams
    (0: a component without blocks cannot stream); `rest`: its bytes outside the blocks (default: all
    but `blocks` times `block_bytes`)."""
    role: str
    kind: str
    bytes: int
    blocks: int = 0
    block_bytes: int = 0
    rest: int | None = None

    @property
    def streams(self) -> bool:
        return self.kind == DENOISER and self.blocks > 1 and self.block_bytes > 0

    def stage_cost(self, placement: str, group: int = 1) -> int:
        """Device bytes while its stage runs: all of it, or in layers what is outside the blocks plus two
        groups (the one computing, the next one arriving)."""
        if placement == LAYERS and self.streams:
            rest = self.rest if self.rest is not None else max(0, self.bytes - self.blocks * self.block_bytes)
            return min(self.bytes, rest + min(self.blocks, 2 * group) * self.block_bytes)
        return self.bytes


@dataclass(frozen=True)
class Budget:
    """What a plan may use. Device: its free memory now, plus what the pool holds there (its entries
    are either this model's own, counted again in the plan, or evictable), less engine.reserve_gb.
    Host: free RAM plus the pool's host copies, less HOST_RESERVE."""
    device_free: int
    reserve: int = GiB
    pool_device: int = 0
    host_free: int = 1 << 62
    host_reserve: int = HOST_RESERVE
    pool_host: int = 0
    free_label: str = "free"          # "in total" for the engine's pre-flight (everything else freed)

    @property
    def device(self) -> int:
        return self.device_free + self.pool_device - self.reserve

    @property
    def host(self) -> int:
        return self.host_free + self.pool_host - self.host_reserve

    def explain(self, where: str) -> str:
        if where == "device":
            held = f" + {size(self.pool_device)} the pool holds" if self.pool_device else ""
            return (f"the device's {size(max(self.device, 0))} budget ({size(self.device_free)} {self.free_label}{held} "
                    f"less engine.reserve_gb {size(self.reserve)})")
        held = f" + {size(self.pool_host)} of pool copies" if self.pool_host else ""
        return (f"the host's {size(max(self.host, 0))} budget ({size(self.host_free)} of RAM {self.free_label}{held} "
                f"less a {size(self.host_reserve)} reserve)")


@dataclass(frozen=True)
class Plan:
    placements: dict            # role -> placement, every weighted part
    groups: dict                # role -> blocks per group, for the layers parts
    rung: str                   # the LADDER rung taken, or "as asked" when every part was placed by the request
    device_peak: int
    host_need: int
    budget: Budget
    activation: dict = field(default_factory=dict)     # stage -> bytes
    costs: dict = field(default_factory=dict)          # role -> device bytes: resident always, else while its stage runs

    @property
    def fits(self) -> bool:
        return self.device_peak <= self.budget.device and self.host_need <= self.budget.host

    def describe(self) -> dict:
        """/health's and the job log's view: the placements and the numbers behind them."""
        return {"placement": dict(self.placements), "groups": dict(self.groups), "rung": self.rung,
                "device_peak": self.device_peak, "device_budget": self.budget.device, "host_need": self.host_need,
                "host_budget": self.budget.host, "activation": self.activation}

    def summary(self) -> str:
        """`transformer=layers:1 text_encoder=cpu_cache vae=resident` (a log line's part)."""
        return " ".join(f"{role}={p}" + (f":{self.groups[role]}" if p == LAYERS else "")
                        for role, p in self.placements.items())


class PlacementError(Exception):
    """No placement fits: `role` the component that does not, `bytes` its size, `need` what the
    lightest plan needs where it fails (`where`: device | host), `budget` what there is."""

    def __init__(self, role: str, nbytes: int, need: int, budget: int, where: str, message: str):
        self.role, self.bytes, self.need, self.budget, self.where = role, nbytes, need, budget, where
        super().__init__(message)


def activations(activation) -> dict:
    """`activation` as {stage: bytes}: an int is the same for every stage."""
    if isinstance(activation, dict):
        return {stage: int(activation.get(stage, 0)) for stage in STAGES}
    return {stage: int(activation) for stage in STAGES}


def evaluate(parts, placements: dict, groups: dict, activation, budget: Budget, rung: str) -> Plan:
    """The peaks of one assignment (the module docstring's arithmetic)."""
    act = activations(activation)
    resident = sum(p.bytes for p in parts if placements[p.role] == RESIDENT)
    peak = 0
    for stage in STAGES:
        costs = [p.stage_cost(placements[p.role], groups.get(p.role, 1)) for p in parts
                 if placements[p.role] != RESIDENT and STAGE_OF[p.kind] == stage]
        peak = max(peak, resident + max(costs, default=0) + act[stage])
    host = sum(p.bytes for p in parts if placements[p.role] in (CPU_CACHE, LAYERS))
    host += max((p.bytes for p in parts if placements[p.role] == STAGED), default=0)
    costs = {p.role: p.stage_cost(placements[p.role], groups.get(p.role, 1)) for p in parts}
    return Plan(dict(placements), {r: g for r, g in groups.items() if placements.get(r) == LAYERS}, rung,
                peak, host, budget, act, costs)


def candidates(parts, forced: dict | None = None, *, staged: bool = True) -> list:
    """[(rung name, placements)] auto tries, in order: the LADDER over the parts `forced` leaves open
    (one candidate, "as asked", when it places them all). `staged=False` leaves out the rungs that
    stage a component (a model with LoRAs: adapters live in the kept module). Layers only for a part
    with blocks (else the rung gives it cpu_cache)."""
    forced = dict(forced or {})
    if all(p.role in forced for p in parts):
        return [("as asked", {p.role: forced[p.role] for p in parts})]
    out, seen = [], []
    for name, assign in LADDER:
        placements = {}
        for p in parts:
            choice = forced.get(p.role) or assign(p.kind)
            if choice == LAYERS and not p.streams and p.role not in forced:
                choice = CPU_CACHE          # auto streams only what has blocks; what a request asked stays
            placements[p.role] = choice
        if not staged and any(placements[r] == STAGED for r in placements if r not in forced):
            continue
        if placements not in seen:
            seen.append(placements)
            out.append((name, placements))
    return out


def weighted(parts) -> list:
    return [p for p in parts if p.kind in WEIGHTED]


def plan(parts, *, activation, budget: Budget, forced: dict | None = None, groups: dict | None = None,
         staged: bool = True) -> Plan:
    """The fastest placement of `parts` that fits `budget` with `activation` bytes of activations
    (an int, or {stage: bytes}) on the device: the first candidate that fits, else PlacementError.
    `forced`: {role: placement} the request fixed; `groups`: {role: blocks per group} for layers."""
    parts = weighted(parts)
    groups = {p.role: (groups or {}).get(p.role, 1) for p in parts if p.kind == DENOISER}
    tried = [evaluate(parts, placements, groups, activation, budget, name)
             for name, placements in candidates(parts, forced, staged=staged)]
    for candidate in tried:
        if candidate.fits:
            return candidate
    raise refusal(parts, tried, budget)


def lighter(parts, current: Plan, *, staged: bool = True) -> Plan | None:
    """The first plan of the ladder whose device peak is lower than `current`'s and whose host need
    fits (the out-of-memory retry; the request's own placements no longer bind it), whether or not
    its device peak fits the budget (the device was short already: a retry is the best left). None
    when there is none."""
    parts = weighted(parts)
    groups = {p.role: 1 for p in parts if p.kind == DENOISER}
    for name, placements in candidates(parts, None, staged=staged):
        candidate = evaluate(parts, placements, groups, current.activation, current.budget, name)
        if candidate.device_peak < current.device_peak and candidate.host_need <= current.budget.host:
            return candidate
    return None


def refusal(parts, tried: list, budget: Budget) -> PlacementError:
    """Why nothing fits. When even the candidate with the lowest device peak is over the device budget:
    a device refusal naming the largest component of its peak stage. Else some candidate fits the device
    but keeps too much in host memory: a host refusal naming, of the device-fitting candidate with the
    lowest host need, the largest component it keeps there."""
    lightest = min(tried, key=lambda c: (c.device_peak, c.host_need))
    if lightest.device_peak > budget.device:
        stage, role, cost = _binding(parts, lightest)
        part = next(p for p in parts if p.role == role)
        placement = lightest.placements[role]
        how = placement + (f", {lightest.groups[role]} block per group" if placement == LAYERS else "")
        hint = ("" if part.streams else
                "; only a denoiser streams in layers: an FP8 file of it or model.quantize_te makes an encoder smaller"
                if part.kind in ENCODERS else "")
        act = lightest.activation.get(stage, 0)
        message = (f"{role} ({size(part.bytes)}) does not fit: in its lightest placement ({how}) the {stage} "
                   f"stage needs {size(lightest.device_peak)} on the device ({size(cost)} for it"
                   f"{_others(lightest, parts, role)}{f', {size(act)} of activations' if act else ''}), "
                   f"more than {budget.explain('device')}{hint}")
        return PlacementError(role, part.bytes, lightest.device_peak, budget.device, "device", message)
    best = min((c for c in tried if c.device_peak <= budget.device), key=lambda c: c.host_need)
    kept = [p for p in parts if best.placements[p.role] in (CPU_CACHE, LAYERS, STAGED)]
    part = max(kept or parts, key=lambda p: p.bytes)
    message = (f"{part.role} ({size(part.bytes)}) does not fit: the lightest plan that fits the device "
               f"({best.summary()}) keeps {size(best.host_need)} in host memory, more than {budget.explain('host')}")
    return PlacementError(part.role, part.bytes, best.host_need, budget.host, "host", message)


def _binding(parts, plan_: Plan) -> tuple:
    """(stage, role, device bytes): `plan_`'s peak stage and the largest component on the device in it."""
    resident = [(p.role, p.bytes) for p in parts if plan_.placements[p.role] == RESIDENT]
    best = None
    for stage in STAGES:
        staged_in = [(p.role, p.stage_cost(plan_.placements[p.role], plan_.groups.get(p.role, 1))) for p in parts
                     if plan_.placements[p.role] != RESIDENT and STAGE_OF[p.kind] == stage]
        visiting = max(staged_in, key=lambda rc: rc[1], default=None)
        on = resident + ([visiting] if visiting else [])
        if not on:
            continue
        total = sum(c for _r, c in on) + plan_.activation.get(stage, 0)
        if best is None or total > best[0]:
            best = (total, stage, *max(on, key=lambda rc: rc[1]))
    return best[1:] if best else ("denoise", parts[0].role, parts[0].bytes)


def _others(plan_: Plan, parts, role: str) -> str:
    resident = sum(p.bytes for p in parts if plan_.placements[p.role] == RESIDENT and p.role != role)
    return f", {size(resident)} for the resident components" if resident else ""


def size(n: int) -> str:
    if abs(n) >= GiB:
        return f"{n / GiB:.1f} GiB"
    return f"{n / (1 << 20):.1f} MiB" if abs(n) >= 1 << 20 else f"{n / 1024:.0f} KiB"


# -- model.placement: what a request asks ------------------------------------------------------------------
def parse(value, roles: dict, where: str = "model.placement"):
    """`model.placement` checked and normalized: a placement name (`auto`, `resident`, `cpu_cache`,
    `staged`, `layers`), `{layers: N}`, or a mapping of the arch's weighted roles to either. `roles`:
    role -> kind of the arch's components. `layers` only for a denoiser (its blocks are what streams)."""
    if value is None:
        return AUTO
    if isinstance(value, str):
        if value not in CHOICES:
            raise ConfigError(where, f"must be one of {', '.join(CHOICES)}, {{layers: N}} or a mapping of "
                                     f"components to them, got {value!r}")
        return value
    if not isinstance(value, dict):
        raise ConfigError(where, f"must be a placement name or a mapping, got {type(value).__name__}")
    if set(value) == {LAYERS}:
        return {LAYERS: _group(value[LAYERS], f"{where}.{LAYERS}")}
    weighted = {r: k for r, k in roles.items() if k in WEIGHTED}
    out = {}
    for role, item in value.items():
        key = f"{where}.{role}"
        if role not in weighted:
            raise ConfigError(key, f"not a component with weights of this arch (its components: "
                                   f"{', '.join(weighted)}); or give {{layers: N}}")
        item = parse(item, roles, key)
        is_layers = item == LAYERS or isinstance(item, dict)
        if is_layers and weighted[role] != DENOISER:
            raise ConfigError(key, f"layers streams a denoiser's blocks; {role} is a {weighted[role]}")
        out[role] = item
    return out


def _group(n, where: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(where, f"the group size must be an integer >= 1, got {n!r}")
    return n


def requested(placement, roles: dict, *, low_vram: bool = False, layer_offloading: bool = False) -> tuple:
    """(forced {role: placement}, groups {role: blocks per group}) a parsed `model.placement` fixes,
    with the aliases for the roles it leaves to auto: `low_vram` is cpu_cache for every component,
    `layer_offloading` layers for the denoisers. The roles left out are planned (auto)."""
    weighted = {r: k for r, k in roles.items() if k in WEIGHTED}
    forced, groups = {}, {}

    def put(role, item):
        if item == AUTO:
            return
        if isinstance(item, dict):
            forced[role], groups[role] = LAYERS, item[LAYERS]
        elif item == LAYERS and weighted[role] != DENOISER:
            return                  # `placement: layers`: the denoisers stream, the rest is planned
        else:
            forced[role] = item
    for role in weighted:
        item = placement.get(role, AUTO) if isinstance(placement, dict) and LAYERS not in placement else placement
        if isinstance(item, dict) and weighted[role] != DENOISER:
            item = AUTO
        put(role, item)
    for role, kind in weighted.items():
        if role in forced:
            continue
        if layer_offloading and kind == DENOISER:
            forced[role] = LAYERS
        elif low_vram:
            forced[role] = CPU_CACHE
    return forced, groups


__all__ = ["AUTO", "Budget", "CHOICES", "CPU_CACHE", "HOST_RESERVE", "LADDER", "LAYERS", "PLACEMENTS", "Part", "Plan",
           "PlacementError", "RESIDENT", "STAGED", "STAGES", "STAGE_OF", "activations", "candidates", "evaluate",
           "lighter", "parse", "plan", "refusal", "requested", "size"]
