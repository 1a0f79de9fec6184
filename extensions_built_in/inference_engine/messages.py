"""The typed boundary between the engine (HTTP, queue, request records; no torch) and its generation
worker (torch, the component pool, the holders), as vLLM's EngineCoreRequest/EngineCoreOutputs
are: frozen dataclasses pickled over a local pipe. A request crosses as the GenerationRequest
resolve_request made (toolkit/request.py), which the worker uses as it arrives. Nothing else crosses.

engine -> worker: Run, Cancel, Load, Unload, Shutdown, Prefetch, Preprocess
worker -> engine: Frame, Done, State, Info, Preprocessed, Released
"""
from dataclasses import dataclass, field


# -- engine -> worker ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """Generate `requests` (GenerationRequests, each with its output_path) in one pipeline call: one
    request, or several compatible ones (batching.py: the same model and shared sample settings),
    each keeping its own frames, file, cancel and Done as if it had been sent alone."""
    requests: tuple


@dataclass(frozen=True)
class Cancel:
    request_id: str


@dataclass(frozen=True)
class Load:
    """Build (and keep) the holder for `model` (a ModelConfig) without generating: a warm load."""
    model: object


@dataclass(frozen=True)
class Unload:
    """Drop the holder and every pooled component."""


@dataclass(frozen=True)
class Shutdown:
    pass


# -- worker -> engine ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Frame:
    """One frame of a request's stream (status, progress, latent, result): the header without
    `request_id`/`type` order concerns (the engine encodes it) and its payload bytes."""
    request_id: str
    header: dict
    payload: bytes = b""


@dataclass(frozen=True)
class Done:
    """The request ended: ok, error or cancelled; `results` are the result frames' records."""
    request_id: str
    status: str
    error: str | None = None
    results: list = field(default_factory=list)
    stages: dict = field(default_factory=dict)       # the seconds of each stage it met here (stages.py)


@dataclass(frozen=True)
class State:
    """What the worker holds, for /health and the compatibility routes: the active model (its
    resolved config and scheduler class), the pool's stats and the device's memory."""
    active: object                                   # the ModelConfig held, or None
    scheduler: str | None
    pool: dict
    memory: dict
    builds: int
    cond_cache: dict = field(default_factory=dict)   # ConditioningCache.stats(): hits, misses, bytes, ...
    prefetch: dict = field(default_factory=dict)     # Prefetcher.stats(): done, skipped, failed, loads, bytes
    placement: dict = field(default_factory=dict)    # the holder's Plan.describe() and `summary` (toolkit/placement.py)
    compile: dict = field(default_factory=dict)      # toolkit/models/compiled.stats(): compiles, recompiles, seconds, ...
    boot: dict = field(default_factory=dict)         # the worker's start: {"started": monotonic, "imports": seconds}


@dataclass(frozen=True)
class Info:
    """A line for the job's status (the UI's Queue page): loading, generating n/N, idle."""
    info: str
    step: int | None = None


# -- engine -> worker, later additions ---------------------------------------------------------------
@dataclass(frozen=True)
class Prefetch:
    """The queue's next request runs `model` (a ModelConfig): read its missing components
    into CPU memory while the current request samples, within the memory budget. A hint: the worker
    may skip it, and a failed prefetch only costs the next request its own load."""
    model: object


@dataclass(frozen=True)
class Preprocess:
    """Make a control map (toolkit/control_maps.make_map) in the worker, where a model-based preprocessor's
    model loads (a pool component): `image` the input's bytes (checked by the engine), the parameters
    checked too. Answered by a `Preprocessed` with the same `task_id` (after a State)."""
    task_id: str
    preprocessor: str
    image: bytes
    resolution: int | None = None
    threshold_a: float | None = None
    threshold_b: float | None = None


# -- worker -> engine, later additions ---------------------------------------------------------------
@dataclass(frozen=True)
class Preprocessed:
    """The map of a Preprocess as PNG bytes, or why not: `error` (one line) and `field` (a ConfigError's
    key, None for a failure that is no bad value)."""
    task_id: str
    png: bytes = b""
    error: str | None = None
    field: str | None = None


@dataclass(frozen=True)
class Released:
    """The pipeline call of these requests is over (after its State) and their files are being written
    behind it (engine.write_behind: writer.py): the worker takes the next Run meanwhile. Each request
    still ends with its result frames and its Done."""
    request_ids: tuple
