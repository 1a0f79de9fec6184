"""ConditioningCache: prompt embeddings kept across requests and models, bounded by bytes (LRU).

The worker owns one (beside the pool) and every holder it builds uses it, so the same prompt on
two models that share a text encoder is encoded once. The mechanism is general: for the length of a
pipeline call, the pipeline's own `encode_prompt` is wrapped (`wrap_encode_prompt`), so the pipeline's
`__call__` uses the cached outputs and nothing per arch is needed. A call is keyed on:

- the encode function (module + qualified name: each pipeline class processes embeddings its own way),
- a context from the holder: the funnel identities (`_aitk_identity.key`) of the text encoders and
  tokenizers, the pipeline's registered settings, the other modules' dtypes, the execution device and
  any LoRA state of the text encoders (BaseModel.cond_context),
- the call's arguments bound to the function's signature (defaults applied), so `prompt="a"` and a
  positional "a" are one entry, and a batched call (a list of prompts) is one entry of its own.

A call with an argument that is not plain data (a tensor: prompt_embeds passed in; a generator; an
image: Qwen-Image-Edit's encode reads the reference images) is not cached and runs as it would.
Outputs are stored as CPU copies (no device memory spent) and every hit returns fresh tensors on
the original device, so a pipeline that modifies what it got in place never touches the cache.
"""
import contextlib
import functools
import inspect
import threading
from collections import OrderedDict

import torch

from toolkit.models.patches import patched


class Uncacheable(Exception):
    """A value that cannot be part of a key or of a stored output."""


def freeze(value):
    """A hashable, exact stand-in for a call argument; raises Uncacheable for anything else."""
    if value is None or isinstance(value, (str, bool, int, float, bytes)):
        return value
    if isinstance(value, (torch.device, torch.dtype)):
        return ("torch", str(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), freeze(v)) for k, v in value.items())))
    raise Uncacheable(type(value).__name__)


def _store(value):
    """(stored form, bytes): tensors become CPU copies, plain data stays; raises Uncacheable."""
    if isinstance(value, torch.Tensor):
        cpu = value.detach().to("cpu", copy=True)
        return ("t", cpu, str(value.device), value.requires_grad), cpu.numel() * cpu.element_size()
    if isinstance(value, (list, tuple)):
        parts = [_store(v) for v in value]
        return (type(value), [p for p, _b in parts]), sum(b for _p, b in parts)
    if isinstance(value, dict):
        parts = {k: _store(v) for k, v in value.items()}
        return (dict, {k: p for k, (p, _b) in parts.items()}), sum(b for _p, b in parts.values())
    freeze(value)                # plain data only
    return ("v", value), 0


def _restore(stored):
    kind = stored[0]
    if kind == "t":
        _t, cpu, device, _grad = stored
        return cpu.clone() if device == "cpu" else cpu.to(device)
    if kind == "v":
        return stored[1]
    cls, parts = stored
    if cls is dict:
        return {k: _restore(p) for k, p in parts.items()}
    return cls(_restore(p) for p in parts)


class ConditioningCache:
    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self.entries: OrderedDict = OrderedDict()       # key -> (stored outputs, bytes)
        self.bytes = 0
        self.hits = self.misses = self.uncached = self.evictions = 0
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def get(self, key):
        with self._lock:
            entry = self.entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self.entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key, stored, size: int):
        with self._lock:
            if size > self.max_bytes or key in self.entries:
                return
            self.entries[key] = (stored, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _k, (_s, dropped) = self.entries.popitem(last=False)
                self.bytes -= dropped
                self.evictions += 1

    def note_uncached(self):
        with self._lock:
            self.uncached += 1

    def clear(self):
        with self._lock:
            self.entries.clear()
            self.bytes = 0

    def stats(self) -> dict:
        with self._lock:
            return {"enabled": self.enabled, "hits": self.hits, "misses": self.misses, "uncached": self.uncached,
                    "evictions": self.evictions, "entries": len(self.entries), "bytes": self.bytes,
                    "max_bytes": self.max_bytes}


def cached_call(cache: ConditioningCache, method, context):
    """`method` (a bound encode_prompt) answering from `cache` where it can."""
    func = getattr(method, "__func__", method)
    name = f"{func.__module__}.{func.__qualname__}"
    signature = inspect.signature(method)

    @functools.wraps(method)
    def encode(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            key = (name, context, tuple((k, freeze(v)) for k, v in bound.arguments.items()))
        except (Uncacheable, TypeError):
            cache.note_uncached()
            return method(*args, **kwargs)
        stored = cache.get(key)
        if stored is not None:
            return _restore(stored)
        out = method(*args, **kwargs)
        try:
            stored, size = _store(out)     # copied before the pipeline can touch what it got
        except Uncacheable:
            return out
        cache.put(key, stored, size)
        return out
    encode.__aitk_cond_cache__ = True
    return encode


def wrap_encode_prompt(cache: ConditioningCache | None, pipe, context):
    """A context: while active, `pipe.encode_prompt` answers from `cache` (a patch:
    toolkit/models/patches.py). No-op without a cache, a pipeline without encode_prompt, or a context
    of None (the holder found no identity to key on)."""
    if cache is None or not cache.enabled or getattr(pipe, "encode_prompt", None) is None or context is None:
        return contextlib.nullcontext()
    return patched(pipe, "encode_prompt", lambda method: cached_call(cache, method, context))


__all__ = ["ConditioningCache", "Uncacheable", "cached_call", "freeze", "wrap_encode_prompt"]
