"""OpenAI's `/v1/images/generations`, `/v1/images/edits` and `/v1/models` (the `openai` SDKs and clients
built on them)."""
import asyncio
import base64
import json
import math
import re
import time

from fastapi import Depends, FastAPI, Request as HttpRequest
from fastapi.responses import StreamingResponse

from extensions_built_in.inference_engine.compat import inputs
from extensions_built_in.inference_engine.compat.common import CompatError, Session, is_int, json_object
from extensions_built_in.inference_engine.compat.forms import parse_form
from extensions_built_in.inference_engine.compat.preview import preview_payload
from extensions_built_in.inference_engine.engine import Subscriber
from extensions_built_in.inference_engine.http_guard import INLINE_IMAGES_BODY_BYTES, auth_first
from extensions_built_in.inference_engine.protocol import FrameReader
from extensions_built_in.inference_engine.routes.generation import FrameQueue
from toolkit.errors import ConfigError
from toolkit.models.arch import REFERENCES
from toolkit.models.registry import ARCHS

MAX_N = 10                       # OpenAI's own limit for n
MAX_PARTIAL_IMAGES = 3           # OpenAI's partial_images range: 0-3
# a streamed call's engine stream options: the worker's small JPEG previews (partial images), no latents
PREVIEW_STREAM = {"latents": "none", "preview_image": "jpeg"}
NO_LATENTS = {"latents": "none"}
# engine field -> the client's field, so a 400 names what the client sent
FIELDS = {"sample.prompt": "prompt", "sample.negative_prompt": "negative_prompt", "sample.width": "size",
          "sample.height": "size", "sample.num_inference_steps": "num_inference_steps",
          "sample.guidance_scale": "guidance_scale", "sample.seed": "seed", "batch": "n", "sample.batch_size": "n",
          "sample.init_img": "image", "sample.mask_img": "mask", "sample.strength": "strength",
          "sample.output_ext": "output_format", "sample.task": "model",
          **{f"sample.{name}": "image" for name in REFERENCES}}
MAX_FORM_BYTES = 2 * inputs.MAX_IMAGE_BYTES      # one edit's whole form: its images, mask and fields
IMAGE_FIELD = re.compile(r"image(\[\d*\])?")      # image, image[] (the SDKs' arrays), image[0]
FILE_FIELDS = ("mask", "markup")
OUTPUT_FORMATS = {"png": "png", "jpeg": "jpg", "webp": "webp"}
# the edit form's fields, for the OpenAPI schema (what the fuzz and a client read)
EDIT_FORM = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["image", "prompt"],
    "description": "OpenAI's image edit form; `model` names a profile or arch (GET /v1/models), else the loaded "
                   "or default one; other OpenAI fields (quality, input_fidelity, user, ...) are accepted",
    "properties": {
        "image": {"type": "string", "format": "binary"},
        "image[]": {"type": "array", "items": {"type": "string", "format": "binary"}},
        "mask": {"type": "string", "format": "binary"},
        "prompt": {"type": "string", "minLength": 1},
        "n": {"type": "integer", "minimum": 1, "maximum": MAX_N},
        "size": {"type": "string"}, "response_format": {"type": "string", "enum": ["b64_json", "url"]},
        "output_format": {"type": "string", "enum": list(OUTPUT_FORMATS)},
        "background": {"type": "string", "enum": ["auto", "opaque"]}, "quality": {"type": "string"},
        "negative_prompt": {"type": "string"}, "num_inference_steps": {"type": "integer"},
        "guidance_scale": {"type": "number"}, "strength": {"type": "number"}, "seed": {"type": "integer"}}}}}}}


def error(status: int, message: str, param: str | None = None, code: str | None = None,
          kind: str = "invalid_request_error") -> CompatError:
    return CompatError(status, {"error": {"message": message, "type": kind, "param": param, "code": code}})


def invalid(field: str, message: str) -> CompatError:
    return error(400, f"{field}: {message}", param=field)


class OpenAIImages:
    def __init__(self, session: Session):
        self.session = session
        self.engine = session.engine

    async def images_generations(self, request: HttpRequest):
        body = await json_object(request, invalid)
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise invalid("prompt", "is required (a non-empty string)")
        n = body.get("n")
        n = 1 if n is None else n
        if not is_int(n) or not 1 <= n <= MAX_N:
            raise invalid("n", f"must be an integer from 1 to {MAX_N}, got {n!r}")
        fmt = body.get("response_format") or "b64_json"
        if fmt not in ("b64_json", "url"):
            raise invalid("response_format", f"must be 'b64_json' or 'url', got {fmt!r}")
        sample = {"prompt": prompt, "output_ext": "png"}
        size = body.get("size")
        if size not in (None, "", "auto"):
            m = re.fullmatch(r"\s*(\d{1,5})\s*[xX]\s*(\d{1,5})\s*", size) if isinstance(size, str) else None
            if not m:
                raise invalid("size", f"must be 'WIDTHxHEIGHT' (e.g. '1024x1024') or 'auto', got {size!r}")
            sample["width"], sample["height"] = int(m.group(1)), int(m.group(2))
        for ours, aliases in (("negative_prompt", ("negative_prompt",)),
                              ("num_inference_steps", ("num_inference_steps", "steps")),
                              ("guidance_scale", ("guidance_scale", "cfg_scale"))):
            for a in aliases:
                if body.get(a) is not None:
                    sample[ours] = body[a]
                    break
        seed = body.get("seed")
        if seed is not None and (not is_int(seed) or seed < -1):
            raise invalid("seed", f"must be -1 (random) or an integer >= 0, got {seed!r}")
        # the n images in one pass: seed, seed + 1, ... (a random seed when none is given)
        sample.update(batch_size=int(n), seed=int(seed) if seed is not None and seed >= 0 else -1)
        stream = body.get("stream")
        if stream not in (None, True, False):
            raise invalid("stream", f"must be true or false, got {stream!r}")
        partials = _partial_images(body.get("partial_images"))
        model, name = await asyncio.to_thread(self.session.resolve, body.get("model"), "model", invalid)
        if stream:
            return await self._stream(model, name, sample, partials, "image_generation")
        return await self._run(request, model, name, sample, fmt)

    async def _run(self, request: HttpRequest, model: dict, name, sample: dict, fmt: str, output_format="png"):
        """Run one request (its n images in one pass) and answer `{created, data, output_format, size}`."""
        session = self.session
        reqs = await asyncio.to_thread(session.submit_all, model, [sample], invalid, FIELDS, "model", api="openai")
        session.last_used = (name, reqs[0].model)
        await session.wait_all(reqs, request)
        failed = [r for r in reqs if r.status != "ok"]
        if failed:
            r = failed[0]
            raise error(500, r.error or r.status, code="cancelled" if r.status == "cancelled" else None,
                        kind="server_error")
        base = str(request.base_url).rstrip("/")
        if fmt == "b64_json":
            images = await asyncio.to_thread(session.read_images, reqs)
            data = [{"b64_json": b64} for _r, _res, b64 in images]
        else:
            data = [{"url": f"{base}/outputs/{res['relpath']}"} for r in reqs for res in r.results
                    if res.get("kind") == "image"]
        first = reqs[0].sample
        return {"created": int(time.time()), "data": data, "output_format": output_format,
                "size": f"{first.width}x{first.height}"}

    async def images_edits(self, request: HttpRequest):
        """OpenAI's image edits (a multipart form). With a mask: inpaint the first image where the mask
        is transparent. Without: an edit model (one with an `edit` task) takes the images as its
        references (ctrl_img, ctrl_img_1..3); any other model re-noises the one image (img2img)."""
        fields, files = await read_form(request)
        prompt = fields.get("prompt")
        if prompt is None or not prompt.strip():
            raise invalid("prompt", "is required (a non-empty string)")
        n = _form_number(fields, "n", int, 1)
        if not 1 <= n <= MAX_N:
            raise invalid("n", f"must be an integer from 1 to {MAX_N}, got {n!r}")
        fmt = fields.get("response_format") or "b64_json"
        if fmt not in ("b64_json", "url"):
            raise invalid("response_format", f"must be 'b64_json' or 'url', got {fmt!r}")
        out = fields.get("output_format") or "png"
        if out not in OUTPUT_FORMATS:
            raise invalid("output_format", f"must be one of {', '.join(OUTPUT_FORMATS)} here, got {out!r}")
        if (fields.get("background") or "auto") not in ("auto", "opaque"):
            raise invalid("background", f"must be 'auto' or 'opaque' here (no transparent output), got "
                          f"{fields['background']!r}")
        stream = (fields.get("stream") or "false").lower()
        if stream not in ("true", "1", "false", "0"):
            raise invalid("stream", f"must be true or false, got {fields['stream']!r}")
        partials = _partial_images(_form_number(fields, "partial_images", int, None))
        images = [data for name, data in files if IMAGE_FIELD.fullmatch(name)]
        masks = [data for name, data in files if name == "mask"]
        if any(name == "markup" for name, _data in files):
            raise invalid("markup", "is not served here: send a mask (its transparent pixels mark where to edit)")
        if not images:
            raise invalid("image", "is required: an image file (image), or several (image[])")
        if len(masks) > 1:
            raise invalid("mask", f"takes one file, got {len(masks)}")
        model, name = await asyncio.to_thread(self.session.resolve, fields.get("model"), "model", invalid)
        spec = ARCHS[model["arch"]] if model.get("arch") in ARCHS else None
        if spec is None:
            raise invalid("model", f"unknown arch {model.get('arch')!r}")
        label, served = f"{name or spec.name!r} ({spec.name})", ", ".join(spec.task_names)
        if masks:
            task, slots = "inpaint", ("init_img",)
            if spec.task("inpaint") is None:
                raise invalid("mask", f"{label} cannot inpaint: it has no inpaint task (its tasks: {served})")
        elif spec.task("edit") is not None:
            task, slots = "edit", spec.task("edit").inputs
        elif spec.task("img2img") is not None:
            task, slots = "img2img", ("init_img",)
        else:
            raise invalid("model", f"{label} makes no image from an image: it has no edit or img2img task "
                          f"(its tasks: {served})")
        if len(images) > len(slots):
            raise invalid("image", f"with a mask one image is inpainted: send one, got {len(images)}" if masks else
                          f"task {task} of {label} takes at most {len(slots)} image(s), got {len(images)}")
        sample = {"prompt": prompt, "output_ext": OUTPUT_FORMATS[out], "batch_size": n, "task": task}
        for ours, aliases, kind in (("negative_prompt", ("negative_prompt",), str),
                                    ("num_inference_steps", ("num_inference_steps", "steps"), int),
                                    ("guidance_scale", ("guidance_scale", "cfg_scale"), float),
                                    ("strength", ("strength",), float)):
            for a in aliases:
                if fields.get(a) not in (None, ""):
                    sample[ours] = fields[a] if kind is str else _form_number(fields, a, kind, None)
                    break
        seed = _form_number(fields, "seed", int, -1)
        if seed < -1:
            raise invalid("seed", f"must be -1 (random) or an integer >= 0, got {seed}")
        sample["seed"] = seed
        size = fields.get("size")
        if size not in (None, "", "auto"):
            m = re.fullmatch(r"\s*(\d{1,5})\s*[xX]\s*(\d{1,5})\s*", size)
            if not m:
                raise invalid("size", f"must be 'WIDTHxHEIGHT' (e.g. '1024x1024') or 'auto', got {size!r}")
            sample["width"], sample["height"] = int(m.group(1)), int(m.group(2))
        # the model's defaults and every setting checked before an image is decoded
        probe = {**sample, **{slot: "image" for slot in slots[:len(images)]}, **({"mask_img": "mask"} if masks else {})}
        _mc, gen = await asyncio.to_thread(self.session.resolve_sample, model, probe, invalid, FIELDS, "model")
        try:
            prepared, first_size = await asyncio.to_thread(_prepare_edit, images, masks[0] if masks else None, slots)
        except ConfigError as e:
            raise invalid(e.key, e.message)
        sample.update(prepared)
        if "width" not in sample:      # auto: the model's default area at the first image's aspect ratio
            sample["width"], sample["height"] = _auto_size(first_size, gen.width * gen.height, spec.size_divisor)
        if stream in ("true", "1"):
            return await self._stream(model, name, sample, partials, "image_edit", out)
        return await self._run(request, model, name, sample, fmt, out)

    async def _stream(self, model: dict, name, sample: dict, partials: int, kind: str, output_format="png"):
        """OpenAI's streamed image call: server-sent events `<kind>.partial_image` (up to `partials`, the
        worker's JPEG previews of the first image at evenly spaced steps: a preview is a small picture
        projected from the latents, at most 256 px on its long side, so `output_format` is jpeg), then one
        `<kind>.completed` per image. A refusal is a plain 4xx before the stream starts; a failure after
        it is an `error` event (what the SDKs raise as APIError)."""
        session = self.session
        opts = PREVIEW_STREAM if partials else NO_LATENTS
        reqs = await asyncio.to_thread(session.submit_all, model, [sample], invalid, FIELDS, "model", opts,
                                       api="openai")
        session.last_used = (name, reqs[0].model)
        req = reqs[0]
        # previews a client that stopped reading has not taken are skipped, not queued (FrameQueue): what it
        # holds is bounded by the request, not by its steps
        frames = FrameQueue(asyncio.get_running_loop())
        sub = Subscriber(frames.deliver)
        replay = req.attach(sub)      # the replay goes first: live frames wait in `frames` meanwhile
        size = f"{req.sample.width}x{req.sample.height}"
        common = {"background": "opaque", "quality": "auto", "size": size}

        def event(name_: str, data: dict) -> bytes:
            return f"event: {name_}\ndata: {json.dumps(data)}\n\n".encode()

        async def events():
            sent, targets = 0, None
            try:
                while True:
                    frame = replay.pop(0) if replay else (await frames.get())[0]
                    header = FrameReader().feed(frame)[0][0]
                    if header["type"] == "end":
                        break
                    got = preview_payload(frame) if header["type"] == "preview" else None
                    if got is None or sent >= partials:
                        continue
                    step, total = header["step"], header["total"]
                    if targets is None:    # evenly spaced, never the last step (the completed image is next)
                        targets = [math.ceil((k + 1) * total / (partials + 1)) for k in range(partials)]
                    if step < total and step >= targets[sent]:
                        while sent < partials and targets[sent] <= step:
                            targets[sent] = -1
                            sent += 1
                        yield event(f"{kind}.partial_image", {
                            "type": f"{kind}.partial_image", "b64_json": base64.b64encode(got[1]).decode("ascii"),
                            "partial_image_index": sent - 1, "created_at": int(time.time()),
                            "output_format": "jpeg", **common})
                await asyncio.to_thread(req.done_event.wait, 60)
                if req.status != "ok":
                    err = {"message": req.error or req.status, "type": "server_error", "param": None,
                           "code": "cancelled" if req.status == "cancelled" else None}
                    yield event("error", {"type": "error", "error": err})
                    return
                # the format holds each image whole, base64 inside one JSON event (common.read_images)
                for _r, _res, b64 in await asyncio.to_thread(session.read_images, reqs):
                    yield event(f"{kind}.completed", {
                        "type": f"{kind}.completed", "b64_json": b64, "created_at": int(time.time()),
                        "output_format": output_format, **common,
                        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                                  "input_tokens_details": {"image_tokens": 0, "text_tokens": 0}}})
            finally:
                req.detach(sub)
                if not req.finished:          # the client went away: the request stops
                    session.cancel_all(reqs)
                session.forget(reqs)

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    def _model(self, name: str) -> dict:
        return {"id": name, "object": "model", "created": int(self.engine.started_at), "owned_by": "aitk-engine"}

    def models(self):
        """Only what can load here (Session.image_model_names): the models held by title, profiles, archs
        whose weights are local, the model folders' models; each id is what `model` takes."""
        return {"object": "list", "data": [self._model(n) for n in self.session.image_model_names()]}

    def model(self, model_id: str):
        if model_id not in self.session.image_model_names():
            raise error(404, f"model {model_id!r} does not exist here", param="model", code="model_not_found")
        return self._model(model_id)


# -- the edit form ------------------------------------------------------------------------------------

async def read_form(request: HttpRequest) -> tuple[dict, list]:
    """A multipart/form-data body as ({text field: value}, [(file field, bytes)...] in order), read
    within MAX_FORM_BYTES and parsed by the standard library's MIME parser (no python-multipart)."""
    ctype = request.headers.get("content-type", "")
    if not ctype.lower().startswith("multipart/form-data"):
        raise invalid("image", "send a multipart/form-data form (the image files and the fields), as OpenAI's "
                      f"clients do; got content-type {ctype[:80]!r}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise invalid("image", f"the form is over {MAX_FORM_BYTES} bytes")
    return await asyncio.to_thread(_parse_form, ctype, bytes(body))


def _parse_form(ctype: str, body: bytes) -> tuple[dict, list]:
    fields, files = parse_form(ctype, body, invalid, "image",
                               is_file=lambda name: IMAGE_FIELD.fullmatch(name) or name in FILE_FIELDS)
    return fields, [(name, payload) for name, _filename, payload in files]


def _form_number(fields: dict, field: str, kind, default):
    """A form field as an int or float (a form sends text); `default` when absent or empty."""
    v = fields.get(field)
    if v in (None, ""):
        return default
    try:
        x = float(v.strip())
    except ValueError:
        x = math.nan
    if not math.isfinite(x) or (kind is int and not is_int(x)):
        raise invalid(field, f"must be {'an integer' if kind is int else 'a number'}, got {v[:40]!r}")
    return int(x) if kind is int else x


def _prepare_edit(images: list, mask: bytes | None, slots: tuple) -> tuple[dict, tuple]:
    """(the sample's image inputs as data URLs, the first image's size). Each image is checked first
    (the engine stores them). The mask (alpha 0 = edit) becomes the engine's white = repaint mask and
    must match the first image's size, as OpenAI requires."""
    out = {}
    for slot, data in zip(slots, images):
        inputs.check(data, "image")
        out[slot] = inputs.data_url(data)
    first = inputs.open_checked(images[0])
    if mask is not None:
        inputs.check(mask, "mask")
        m = inputs.openai_mask(inputs.open_checked(mask), "mask")
        if m.size != first.size:
            raise ConfigError("mask", f"is {m.size[0]}x{m.size[1]}; it must have the image's size, "
                              f"{first.size[0]}x{first.size[1]}")
        out["mask_img"] = inputs.png_data_url(m)
    return out, first.size


def _auto_size(size: tuple, area: int, divisor: int) -> tuple[int, int]:
    """`size: auto`: `area` pixels (the model's default width x height) at the image's aspect ratio,
    each side a multiple of `divisor`."""
    w, h = size
    width = math.sqrt(area * w / h)
    return (max(divisor, round(width / divisor) * divisor), max(divisor, round(width * h / w / divisor) * divisor))


def _partial_images(value) -> int:
    """OpenAI's partial_images: 0-3 (0 or none: only the completed event)."""
    if value is None:
        return 0
    if not is_int(value) or not 0 <= value <= MAX_PARTIAL_IMAGES:
        raise invalid("partial_images", f"must be an integer from 0 to {MAX_PARTIAL_IMAGES}, got {value!r}")
    return int(value)


def add_routes(app: FastAPI, session: Session, authorized):
    """The /v1 routes on `app`; `authorized(request) -> bool` (the token is the API key)."""
    api = OpenAIImages(session)

    @auth_first
    def auth(request: HttpRequest):
        if not authorized(request):
            raise error(401, "missing or bad engine token: send it as the API key", code="invalid_api_key")

    deps = [Depends(auth)]
    app.add_api_route("/v1/images/generations", api.images_generations, methods=["POST"], dependencies=deps)
    app.add_api_route("/v1/images/edits", api.images_edits, methods=["POST"], dependencies=deps,
                      openapi_extra=EDIT_FORM, max_body_size=INLINE_IMAGES_BODY_BYTES)     # its images, uploaded
    app.add_api_route("/v1/models", api.models, methods=["GET"], dependencies=deps)
    app.add_api_route("/v1/models/{model_id}", api.model, methods=["GET"], dependencies=deps)
    return api
