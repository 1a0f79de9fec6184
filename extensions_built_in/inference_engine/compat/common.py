"""What both compat families share: their auth, the error answer, reading a JSON body, and the
`Session` (the state every app serving them shares) that names models and runs batches through the
engine's public methods only."""
import asyncio
import base64
import binascii
import math
import os
import re
import threading

from fastapi import Depends, Request as HttpRequest
from fastapi.responses import JSONResponse

from extensions_built_in.inference_engine.engine import EngineBusy
from extensions_built_in.inference_engine.http_guard import auth_first
from extensions_built_in.inference_engine.routes.common import presented_token, token_matches
from toolkit.errors import ConfigError, check_values
from toolkit.images import is_data_url
from toolkit.models.arch import IMAGE_INPUTS
from toolkit.models.registry import ARCHS

WAIT_POLL = 0.5                  # seconds per wait on a worker thread (a cancelled wait frees it this soon)
REALM = 'Basic realm="aitk-engine", charset="UTF-8"'


class CompatError(Exception):
    """An answer in the client family's own error shape."""

    def __init__(self, status: int, body, headers: dict | None = None):
        super().__init__(str(body))
        self.status, self.body, self.headers = status, body, headers


async def compat_error(_request, exc: CompatError):
    return JSONResponse(exc.body, status_code=exc.status, headers=exc.headers)


# -- auth --------------------------------------------------------------------------------------------

def basic_password(authorization: str) -> str | None:
    """The password of an `Authorization: Basic base64(user:pass)` header (any user), else None."""
    if not authorization[:6].lower() == "basic ":
        return None
    try:
        decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    _user, sep, password = decoded.partition(":")
    return password if sep and password else None


def authorized(request) -> bool:
    """The token of the app serving `request` as X-Engine-Token or Bearer, or as the Basic auth
    password, compared in constant time (routes/common.py token_matches)."""
    if token_matches(request, presented_token(request)):
        return True
    password = basic_password(request.headers.get("authorization", ""))
    return password is not None and token_matches(request, password)


# -- bodies ------------------------------------------------------------------------------------------

def is_int(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v == int(v)


def strip_hash(name: str) -> str:
    """A1111 titles read "name [hash]"; clients send the title back."""
    return re.sub(r"\s*\[[0-9a-fA-F]{6,64}\]\s*$", "", name.strip())


def client_field(key: str, table: dict, model_field: str) -> str:
    """The client's name for an engine field (`table`: an engine key, or a prefix of one such as
    `model.loras`, to the client's), so a 4xx names what the client sent."""
    prefixes = [k for k in table if key == k or key.startswith((k + ".", k + "["))]
    if prefixes:
        return table[max(prefixes, key=len)]
    if key == "model" or key.startswith("model."):
        return model_field
    return key


async def json_object(request: HttpRequest, err) -> dict:
    try:
        body = await request.json()
    except Exception:
        raise err("body", "is not valid JSON")
    if not isinstance(body, dict):
        raise err("body", "must be a JSON object")
    try:        # lone surrogates and NaN/Infinity/1e999, in any field, before anything reads one
        check_values(body, "")
    except ConfigError as e:
        raise err(e.key, e.message)
    return body


async def disconnected(request: HttpRequest):
    """Returns when the client goes away. The body has been read, so the next ASGI message is the
    disconnect (Request.is_disconnected cannot see it through an @app.middleware("http") layer)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return


# -- the shared state --------------------------------------------------------------------------------

class Session:
    """State shared by every app serving the compat routes (the engine port and the compat port):
    the model chosen through /sdapi/v1/options, running batches. Talks to the engine through its
    public methods only (model_for_name, model_names, submit, cancel, running_request, ...)."""

    def __init__(self, engine):
        self.engine = engine
        self.selected: str | None = None        # /sdapi/v1/options sd_model_checkpoint
        self.options: dict = {}                 # other options a client set (echoed back)
        self.last_used: tuple | None = None     # (name, ModelConfig) of the last compat request
        self.batches: dict = {}                 # request_id -> (list of Requests of one call, index)
        self.lock = threading.Lock()

    # -- models --------------------------------------------------------------------------------
    def resolve(self, name, field: str, err) -> tuple[dict, str | None]:
        """(ModelConfig dict, the name to report) for a client's model name, checked before anything
        is submitted: a name that cannot load here, or that makes no images, is `err(field, message)`
        (and the model the engine holds stays loaded)."""
        model, _spec, name = self.model_of(name, "image", field, err)
        return model, name

    def model_of(self, name, modality: str, field: str, err) -> tuple[dict, object, str | None]:
        """(ModelConfig dict, its arch row or None, the name given) of the `modality` model a client names
        (None: the loaded one, else the default: model_for); a name that cannot load here, or a model
        of another modality, is `err(field, message)` naming the models of this one."""
        if name is not None and not isinstance(name, str):
            raise err(field, f"must be a model name (a string), got {name!r}")
        name = strip_hash(name) if name else None
        try:
            model = self.model_for(name, modality)
        except ConfigError as e:
            raise err(field, e.message if e.key in ("model", "model.profile", "") else e.one_line())
        spec = ARCHS[model["arch"]] if model.get("arch") in ARCHS else None     # else submit names the problem
        if spec is not None and spec.modality != modality:
            who = repr(name) if name else f"the loaded model ({self.title_of(model, *self._naming())})"
            here = self.image_model_names() if modality == "image" else self.engine.model_names(modality=modality)
            raise err(field, f"{who} is {'an' if spec.modality[0] in 'aeiou' else 'a'} {spec.modality} model "
                             f"({spec.name}), not a{'n' if modality[0] in 'aeiou' else ''} {modality} model; "
                             f"{modality} models here: {', '.join(here) or 'none'}")
        return model, spec, name

    def model_for(self, name: str | None, modality: str | None = None) -> dict:
        """Engine.model_for_name (for None, one of `modality` where the default is and the loaded one
        is not), and the titles of the models held (`held_models`) too."""
        held = self.held_models() if name else {}
        if name in held:
            return held[name]
        return self.engine.model_for_name(name or None, modality)

    def image_model_names(self) -> list[str]:
        """What a client may name: the models held (the loaded one, the warm-load default) by their
        titles, then every name the engine takes that can load here (profiles, archs whose weights are
        local, the model folders' diffusers folders and files)."""
        names = self.engine.model_names(modality="image")
        held = [n for n, m in self.held_models(names).items()
                if n not in names and getattr(ARCHS.get(m.get("arch")), "modality", None) == "image"]
        return held + names

    def held_models(self, names=None) -> dict:
        """{title: model} of the model the engine holds and the one it loads by default, where no name the
        engine takes gives them: a config given as a path or repo (a warm-loaded folder, a native request's)
        has none, so a client could not name the model it is using. The default's dict (its LoRAs and
        settings as warm-loaded) before the loaded one's of the same title."""
        engine = self.engine
        default = engine.default_model if isinstance(engine.default_model, dict) else None
        active = engine.active_config.to_dict() if engine.active_config is not None else None
        if default is None and active is None:
            return {}
        names, library = self._naming(names)
        out = {}
        for model in (default, active):
            if model is not None and model.get("arch"):
                title = self.title_of(model, names, library)
                if title not in names:          # else the engine's name gives it, as the engine names it
                    out.setdefault(title, model)
        return out

    def _naming(self, names=None) -> tuple:
        """(the names the engine takes, {a model folder entry's path: its name}): what title_of avoids and uses."""
        names = set(self.engine.model_names() if names is None else names)
        return names, {m.get("name_or_path"): n for n, m in self.engine.library_models().items()}

    @staticmethod
    def title_of(model: dict, names=(), library=None) -> str:
        """A stable client-facing name for a model dict: its profile; its library title where it is a
        model folder's entry; its arch for the arch's default weights; else its folder or file name
        (a hub repo id or `tiny:<arch>` as written), the whole path where that name means another model."""
        if model.get("profile"):
            return model["profile"]
        path, spec = model.get("name_or_path"), ARCHS.get(model.get("arch"))
        if not path or (spec is not None and path == spec.default_source(model.get("variant"))):
            return model.get("arch") or ""
        if library and path in library:
            return library[path]
        base = os.path.basename(os.path.normpath(path)) if os.path.isabs(path) or os.path.exists(path) else path
        return path if base in names or base in ARCHS else base

    def current_name(self) -> str:
        """The model later calls use when they name none, as a client-facing name (a title that
        image_model_names lists and model_for takes back)."""
        if self.selected:
            return self.selected
        active = self.engine.active_config
        if active is not None:
            if self.last_used and self.last_used[1] == active and self.last_used[0]:
                return self.last_used[0]
            return self.title_of(active.to_dict(), *self._naming())
        try:
            model = self.engine.model_for_name(None)
        except ConfigError:
            return ""                                   # no model loaded and no default: none to name
        return self.title_of(model, *self._naming())

    def resolve_sample(self, model: dict, sample: dict, err, table: dict, model_field: str):
        """(ModelConfig, GenerateImageConfig) the engine resolves `sample` to for `model` (its
        defaults filled, everything checked), before a route prepares its input images; a refusal
        is `err(the client's field, message)`."""
        try:
            work = self.engine.resolve(model, sample, dry_run=True)
        except ConfigError as e:
            raise err(client_field(e.key, table, model_field), e.message)
        return work.model, work.sample

    # -- running ---------------------------------------------------------------------------------
    def submit_all(self, model: dict, samples: list, err, table: dict, model_field: str,
                   stream: dict | None = None, *, api: str, client: str | None = None) -> list:
        """Submit one request per sample (all or none: a refused one cancels those before it). A
        data URL the samples share is stored once: the first request's asset serves the later ones.
        `stream`: the engine's stream options for each (e.g. preview images for a progress route);
        `api`, `client`: which API asks (a1111, openai, comfyui) and who (ComfyUI's client_id), as the
        results feed records them."""
        reqs = []
        stored = {}           # data URL -> the asset the engine stored it as
        try:      # engine.limits.max_batch counts images (a sample's batch_size each), before any is queued
            self.engine.check_batch(sum(int(s.get("batch_size") or 1) for s in samples))
            for sample in samples:
                sample = {k: stored.get(v, v) if k in IMAGE_INPUTS and isinstance(v, str) else v
                          for k, v in sample.items()}
                req = self.engine.submit(model, sample, stream, api=api, client=client)
                reqs.append(req)
                for name in IMAGE_INPUTS:
                    if is_data_url(sample.get(name)):
                        stored[sample[name]] = getattr(req.sample, name)
        except ConfigError as e:
            self.cancel_all(reqs)
            raise err(client_field(e.key, table, model_field), e.message)
        except EngineBusy as e:
            self.cancel_all(reqs)
            busy = err("engine", str(e))
            busy.status = 503
            raise busy
        except BaseException:
            self.cancel_all(reqs)
            raise
        with self.lock:
            for i, r in enumerate(reqs):
                self.batches[r.request_id] = (reqs, i)
        return reqs

    def cancel_all(self, reqs):
        for r in reqs:
            self.engine.cancel(r.request_id)

    def batch_of(self, req) -> tuple[list, int]:
        """(the requests of `req`'s call, its index there)."""
        with self.lock:
            return self.batches.get(req.request_id, ([req], 0))

    async def wait_all(self, reqs, http_request: HttpRequest | None):
        """Wait (on a worker thread) until every request ends; a client that goes away cancels them."""
        async def all_done():
            for r in reqs:
                while not await asyncio.to_thread(r.done_event.wait, WAIT_POLL):
                    pass
        waiter = asyncio.ensure_future(all_done())
        gone = asyncio.ensure_future(disconnected(http_request)) if http_request is not None else None
        try:
            done, _pending = await asyncio.wait([waiter] + ([gone] if gone else []),
                                                return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:
                self.cancel_all(reqs)
        finally:
            for task in (waiter, gone):
                if task is not None and not task.done():
                    task.cancel()
            self.forget(reqs)

    def forget(self, reqs):
        """The call is over: its requests leave the batch table (/progress)."""
        with self.lock:
            for r in reqs:
                self.batches.pop(r.request_id, None)

    @staticmethod
    def read_images(reqs) -> list:
        """[(request, result, base64 bytes)] of every image produced. Each file is read whole: the formats
        that take these (A1111's `images`, OpenAI's `b64_json`, sd.cpp's job `result`) carry every image
        as a base64 string inside one JSON body, so a call costs its images' bytes a few times over while
        its answer is made (bounded by engine.limits.max_batch and max_pixels). A client that can fetch
        files has GET /outputs (OpenAI's `response_format: url`), which streams them."""
        out = []
        for r in reqs:
            if r.status != "ok":
                continue
            for res in r.results:
                if res.get("kind") == "image":
                    with open(res["path"], "rb") as f:
                        out.append((r, res, base64.b64encode(f.read()).decode("ascii")))
        return out


def basic_auth(authorized):
    """The dependency of the A1111-shaped routes (/sdapi/v1, /controlnet): `authorized(request) -> bool`, else
    A1111's 401 with its Basic realm (what webuiapi and SillyTavern answer with credentials)."""
    @auth_first
    def auth(request: HttpRequest):
        if not authorized(request):
            raise CompatError(401, {"detail": "Not authenticated: send the engine token as the Basic auth "
                                              "password (any user name) or as a Bearer token"},
                              {"WWW-Authenticate": REALM})
    return Depends(auth)
