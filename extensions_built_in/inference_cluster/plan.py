"""The components a request's model loads, as {public key: bytes}: the identity the pool keys on
(OstrisModelMixin.identify over the holder's component_loads, as a prefetch plans), so the router
compares what a replica holds with what a request needs. Imports torch (the holders): the ingress
calls it off its event loop; results are kept a short while (a rewritten file changes the identity).
"""
import json
import threading
import time

KEEP_SECONDS = 30.0


class Planner:
    def __init__(self, profiles_file: str | None, dtype: str, device: str):
        from toolkit.profiles import EMPTY, load_profiles
        self.profiles = load_profiles(profiles_file) if profiles_file else EMPTY
        self.dtype = dtype
        self.device = device
        self._cache: dict = {}
        self._lock = threading.Lock()

    def components(self, model) -> dict | None:
        """None when the model does not resolve: the replica that gets it answers the 422."""
        key = json.dumps(model, sort_keys=True, default=str)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < KEEP_SECONDS:
                return hit[1]
        try:
            out = self._plan(model)
        except Exception:
            out = None
        with self._lock:
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[key] = (now, out)
        return out

    def _plan(self, model) -> dict:
        from toolkit.models.base_model import get_model_class
        from toolkit.request import resolve_model

        mc, _defaults = resolve_model(model, profiles=self.profiles, dtype=self.dtype)    # the replica checks the rest
        mc = mc.without_loras()
        holder = get_model_class(mc.arch)(mc, device=self.device)
        out = {}
        for _role, cls, source, kwargs in holder.component_loads():
            if cls is not None:
                identity = cls.identify(source, **kwargs)
                out[identity.public_key] = sum(size for _file, size, _mtime in identity.weights)
        return out
