"""Which queued request runs next (engine.queue_policy), and what the queue costs (for /queue).

fifo: the head, always. affinity: when the head needs a component load and a later request runs on
what is resident, that request goes first, a swap saved, if it is at most `max_overtake` places
back and none of the requests it passes has been passed `max_overtake` times already: every
request waits at most max_overtake extra turns, so affinity cannot starve one. "Needs no load" is
"same config without LoRAs as the resident one" (LoRAs are switched on a resident holder).

A person's order wins over both policies: a request moved in the queue (Engine.move, POST
/queue/{id}/move) is pinned, and affinity neither passes a pinned request nor lets one pass those
ahead of it (under fifo the order is the queue's anyway). Requests behind a pinned one can still
trade places among themselves once it has run. No torch.
"""
import os

POLICIES = ("fifo", "affinity")
WEIGHT_EXTS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".sft")


def pick(queued: list, resident, policy: str = "fifo", max_overtake: int = 2, base=lambda r: r.model.without_loras(),
         bump: bool = True) -> int:
    """The index in `queued` (a non-empty list in queue order) of the request to run next.
    `resident`: the worker's active config without LoRAs (None: nothing loaded). Bumps the
    `overtaken` count of each request passed (an attribute the caller's requests carry, with
    `pinned`) unless `bump` is off (a look ahead, as prefetch takes, is no pick)."""
    if policy != "affinity" or resident is None or max_overtake < 1 or base(queued[0]) == resident:
        return 0
    for i, req in enumerate(queued[1:max_overtake + 1], start=1):
        if any(r.overtaken >= max_overtake or r.pinned for r in queued[:i]):
            return 0          # someone ahead has waited its share, or a person put it there: the head goes
        if req.pinned:
            return 0          # a person put it behind those ahead: it does not pass them
        if base(req) == resident:
            for r in queued[:i] if bump else ():
                r.overtaken += 1
            return i
    return 0


def weight_files_bytes(mc) -> int:
    """The bytes of the weight files `mc` loads (its folders or files, components and LoRAs), from
    the file system alone; 0 for what is not a local path (a hub id not in a folder here)."""
    paths = [mc.name_or_path, mc.extras_name_or_path, *(mc.components or {}).values(),
             *(ref.path for ref in mc.loras)]
    total, seen = 0, set()
    for p in paths:
        if not p or not isinstance(p, str) or p.startswith("tiny:"):
            continue          # a `tiny:<arch>` name: resolving it may build the model (torch)
        p = os.path.realpath(os.path.expanduser(str(p)))
        if p in seen:
            continue
        seen.add(p)
        if os.path.isfile(p):
            total += os.path.getsize(p)
        elif os.path.isdir(p):
            for folder, _dirs, files in os.walk(p):
                total += sum(os.path.getsize(os.path.join(folder, f)) for f in files if f.endswith(WEIGHT_EXTS))
    return total


def load_cost(mc, active, pool: dict | None, files_bytes=weight_files_bytes) -> int:
    """Bytes a request on `mc` loads before it samples: 0 when its base model is the resident one
    (`active`, a ModelConfig or None; a LoRA switch loads only adapters, counted too when not pooled),
    else its weight files less what the pool holds resident that is not in use by the active holder
    (kept components another config shares: the pool's identity is the file, so a later load of
    the same file is a hit). An estimate for the queue page, never a promise."""
    if active is not None and mc.without_loras() == active.without_loras():
        pooled = {a.get("name") for a in (pool or {}).get("adapters", [])}
        return sum(os.path.getsize(r.path) for r in mc.loras
                   if os.path.isfile(r.path) and os.path.basename(r.path) not in pooled)
    return files_bytes(mc)


def estimated_starts(running_left_steps: int, queued_steps: list, step_seconds: float | None) -> list:
    """Seconds from now each queued request starts (in queue order), from the running request's
    steps left and those of the requests ahead, at `step_seconds` each (None: unknown yet)."""
    if step_seconds is None:
        return [None] * len(queued_steps)
    out, ahead = [], running_left_steps
    for steps in queued_steps:
        out.append(round(ahead * step_seconds, 3))
        ahead += steps
    return out
