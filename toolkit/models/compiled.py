"""Compiled resident denoisers: `model.compile` (true | false; unset: the engine's) and `engine.compile`
(auto | on | off).

A denoiser is compiled in place, regionally: diffusers' `compile_repeated_blocks` where the class declares
`_repeated_blocks` (each transformer block compiled once, every repeat reusing it), else `torch.compile` of
the whole module. The compiled code lives on the module, and the module is the pool's entry: an identical
model, or a swap back to one, finds it compiled. A call that must not run it (the request says
compile: false, a step cache's hooks, a LoRA over the rank bound) runs the same module eagerly under
`torch.compiler.set_stance("force_eager")`, announced in a status frame.

Sizes: torch's automatic dynamic shapes: the first new size of a graph recompiles it once with its sizes
symbolic, later sizes reuse that. A graph recompiles at most RECOMPILE_LIMIT times (then its frame runs
eagerly, torch's own fallback). Every compile is counted here (STATS: /health's `compile`, /metrics'
aitk_compile_*): the first call after a module is compiled counts `compiles`, any later one `recompiles`.

Excluded, by these listed rules (the call runs eager, announced, never a crash):
- weights held in a tensor subclass or a float8 dtype (quanto, GGUF, scaled FP8): their dequantizing
  dispatch is not measured to compile here;
- a denoiser not resident (cpu_cache, staged, streamed layers): its hooks move weights inside the call;
- a request with a step cache (sample.cache): its hooks decide per step in Python, around the blocks;
- a compile that fails (no C++ compiler, an op inductor cannot lower): the graph runs as traced, eagerly,
  and the reason is kept (`failed`); a frame dynamo cannot trace runs eagerly (torch's suppress_errors).

The inductor cache (compiled kernels, FX graphs) lives under engine.compile_cache_dir (default
~/.cache/aitk/compile), keyed as torch keys it, so a restarted engine compiles from it (`cache_hits`).
"""
import contextlib
import os
import time

MODES = ("auto", "on", "off")
RECOMPILE_LIMIT = 8
DEFAULT_CACHE_DIR = os.path.join("~", ".cache", "aitk", "compile")

# Eager over compiled seconds per forward, per device type and denoiser class, at the first of the bench's
# sizes, measured by `testing/bench_engine.py --compile` (README.md's table; 2 cores, float32, batch 1).
# `auto` compiles where the gain reaches AUTO_MIN_GAIN: past the +-10% that repeated eager runs vary by on
# these machines, and enough to earn the first call's compile back within a few requests. Nothing on the
# CPU reaches it (inductor's CPU kernels add little to oneDNN's convolutions and matmuls there); no GPU
# figures yet (testing/device_check.py --compile measures them on a lent card).
MEASURED_GAIN = {
    "cpu": {"UNet2DConditionModel": 1.01, "FluxTransformer2DModel": 1.08},
    "cuda": {},
}
AUTO_MIN_GAIN = 1.10

STATS = {"compiles": 0, "recompiles": 0, "seconds": 0.0, "eager_calls": 0, "failed": 0, "modules": 0,
         "cache_hits": 0, "cache_misses": 0, "last_failure": None}
_current = {"state": None}       # the CompileState whose call is running (the backend counts into it)


class CompileState:
    """What one compiled module has been through: `warm` once a call completed compiled."""
    def __init__(self, kind: str):
        self.kind = kind             # "regional" | "whole"
        self.warm = False
        self.graphs = 0              # graphs compiled for it so far


def stats() -> dict:
    return dict(STATS)


def use_cache_dir(path: str | None):
    """Point inductor's caches at `path` (engine.compile_cache_dir; None: DEFAULT_CACHE_DIR). Before the first
    compile of the process (inductor makes the folder when it first writes); the FX graph and AOT autograd caches are on (torch's defaults, made explicit)."""
    folder = os.path.abspath(os.path.expanduser(path or DEFAULT_CACHE_DIR))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
    os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
    return folder


def wanted(model_compile, engine_mode: str, device: str, module) -> bool:
    """Whether a model is to run compiled: its own `compile` when set, else engine.compile (auto: where the
    measured gain of its denoiser's class on this device type reaches AUTO_MIN_GAIN)."""
    if model_compile is not None:
        return bool(model_compile)
    if engine_mode == "on":
        return True
    if engine_mode == "off" or module is None:
        return False
    gains = MEASURED_GAIN.get(str(device).split(":")[0], {})
    return gains.get(type(module).__name__, 0.0) >= AUTO_MIN_GAIN


def excluded(module, placement: str = "resident") -> str | None:
    """Why `module` is not compiled (the listed rules above), or None."""
    import torch

    if placement != "resident":
        return f"its placement is {placement} (weights move inside the call)"
    for p in module.parameters():
        if type(p) not in (torch.nn.Parameter, torch.Tensor) or p.dtype in _float8_dtypes():
            name = type(p).__name__ if type(p) not in (torch.nn.Parameter, torch.Tensor) else str(p.dtype)
            return f"its weights are quantized ({name})"
    return None


def _float8_dtypes():
    import torch
    return tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
                 if hasattr(torch, n))


def ensure(module) -> CompileState:
    """`module` compiled in place (once: a second call finds its state)."""
    state = getattr(module, "_aitk_compile", None)
    if state is not None:
        return state
    import torch

    torch._dynamo.config.recompile_limit = RECOMPILE_LIMIT
    torch._dynamo.config.suppress_errors = True      # a frame dynamo cannot trace runs eagerly, never ends the call
    if getattr(module, "_repeated_blocks", None) and any(
            type(m).__name__ in module._repeated_blocks for m in module.modules()):
        module.compile_repeated_blocks(backend=_backend)
        state = CompileState("regional")
    else:
        module.compile(backend=_backend)
        state = CompileState("whole")
    module._aitk_compile = state
    STATS["modules"] += 1
    return state


def is_compiled(module) -> bool:
    return getattr(module, "_aitk_compile", None) is not None


@contextlib.contextmanager
def running(states):
    """A call of compiled modules: the backend's compiles count for them; they are warm after it ends (or
    after a cancelled one that got as far as compiling)."""
    previous = _current["state"]
    _current["state"] = states
    ok = False
    try:
        yield
        ok = True
    finally:
        _current["state"] = previous
        for state in states:
            state.warm = state.warm or ok or state.graphs > 0


@contextlib.contextmanager
def eager():
    """Compiled modules run eagerly inside (their compiled code kept for the next compiled call)."""
    import torch

    STATS["eager_calls"] += 1
    with torch.compiler.set_stance("force_eager"):
        yield


def _backend(gm, example_inputs):
    """Inductor, counted: each call is one graph compiled (a compile, or a recompile once its module is warm).
    A failure keeps the traced graph, run eagerly, and says why (STATS["last_failure"])."""
    from torch._dynamo.utils import counters
    from torch._inductor.compile_fx import compile_fx

    states = _current["state"] or ()
    warm = bool(states) and all(s.warm for s in states)
    hits, misses = counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]
    t0 = time.perf_counter()
    try:
        compiled = compile_fx(gm, example_inputs)
    except Exception as e:      # noqa: BLE001 - a compile that fails runs eagerly, never ends the request
        STATS["failed"] += 1
        STATS["last_failure"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        return gm.forward
    finally:
        STATS["seconds"] += time.perf_counter() - t0
        STATS["recompiles" if warm else "compiles"] += 1
        for state in states:
            state.graphs += 1
        STATS["cache_hits"] += counters["inductor"]["fxgraph_cache_hit"] - hits
        STATS["cache_misses"] += counters["inductor"]["fxgraph_cache_miss"] - misses
    return compiled
