"""ComfyUI's API (what its own frontend, `comfy-api-simplified`, Open WebUI, n8n and scripts written from
ComfyUI's websockets_api_example.py call): POST /prompt with an API-format workflow, /ws for its progress,
/history, /view, /upload/image and /upload/mask, /object_info, /queue, /interrupt, /free, /system_stats,
/models, /embeddings, /extensions. Each route is served under `/api` too, as ComfyUI serves them.

A workflow becomes engine requests through comfy_graph.analyse (checked by the engine's resolver, dry
run); a graph it cannot map is ComfyUI's 400 `{error, node_errors}`. The prompt queue, the history and
/ws's messages are comfy_prompts.py and comfy_ws.py; files on disk comfy_upload.py. Every 4xx is
`{error: {type, message, details, extra_info}, node_errors, field}`.

engine.comfy_port serves it at a port's root (ComfyUI's 8188 by convention); the engine port serves it
under /comfy (the engine's own /queue and /models are at its root)."""
import asyncio
import importlib.metadata
import math
import os
import sys

from fastapi import Depends, FastAPI, Query, Request as HttpRequest
from fastapi.responses import FileResponse, Response

from extensions_built_in.inference_engine.compat import comfy_files, comfy_graph, comfy_nodes, comfy_upload
from extensions_built_in.inference_engine.compat.comfy_prompts import Prompts
from extensions_built_in.inference_engine.compat.comfy_ws import Sockets
from extensions_built_in.inference_engine.compat.common import CompatError, Session, authorized, json_object
from extensions_built_in.inference_engine.http_guard import auth_first

VERSION = "aitk-engine"           # system_stats' comfyui_version: this is not ComfyUI
MAX_UPLOAD_BYTES = 2 * (64 << 20)   # one upload's form: an image of up to inputs.MAX_IMAGE_BYTES and its fields


def error(status: int, field: str, message: str, kind: str = "invalid_request", node_errors=None) -> CompatError:
    field = field or "body"          # a value under an empty key: the body names it
    return CompatError(status, {"error": {"type": kind, "message": f"{field}: {message}", "details": message,
                                          "extra_info": {}}, "node_errors": node_errors or {}, "field": field})


def bad(field: str, message: str) -> CompatError:
    return error(400, field, message)


def refused(e: comfy_upload.Refused) -> CompatError:
    return error(e.status, e.field, e.message)


# -- the request bodies, for the OpenAPI schema (what the fuzz and a client read) ----------------------
def _json_body(description: str, properties: dict, required=()) -> dict:
    return {"requestBody": {"required": bool(required), "content": {"application/json": {"schema": {
        "type": "object", "description": description, "properties": properties, "required": list(required)}}}}}


STR_LIST = {"type": "array", "items": {"type": "string"}}
PROMPT_BODY = _json_body("ComfyUI's POST /prompt: an API-format workflow (node id -> {class_type, inputs})",
                         {"prompt": {"type": "object"}, "client_id": {"type": "string"},
                          "extra_data": {"type": "object"}, "front": {"type": "boolean"},
                          "number": {"type": "number"}, "prompt_id": {"type": "string"}}, ["prompt"])
QUEUE_BODY = _json_body("delete: pending prompt ids; clear: every pending prompt",
                        {"delete": STR_LIST, "clear": {"type": "boolean"}})
HISTORY_BODY = _json_body("delete: prompt ids; clear: the whole history",
                          {"delete": STR_LIST, "clear": {"type": "boolean"}})
FREE_BODY = _json_body("unload the model (either flag)", {"unload_models": {"type": "boolean"},
                                                          "free_memory": {"type": "boolean"}})
INTERRUPT_BODY = _json_body("prompt_id: only if that prompt runs", {"prompt_id": {"type": "string"}})
UPLOAD_FORM = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["image"],
    "properties": {"image": {"type": "string", "format": "binary"}, "subfolder": {"type": "string"},
                   "type": {"type": "string", "enum": ["input"]}, "overwrite": {"type": "string"},
                   "original_ref": {"type": "string"}}}}}}}


class ComfyAPI:
    """The state every app serving ComfyUI's API shares: the prompts (queue, history), the sockets, the
    model and input files. Talks to the engine through its public methods only."""

    def __init__(self, session: Session):
        self.session = session
        self.engine = engine = session.engine
        base = engine.assets_folder or os.path.join(os.path.dirname(engine.output_folder), "assets")
        self.input_dir = os.path.join(base, comfy_upload.INPUT_FOLDER)    # made by the first upload
        self.files = comfy_files.ComfyFiles(list(engine.model_folders), self.input_dir)
        self.prompts = Prompts(engine, session, Sockets)
        self.sockets = self.prompts.sockets
        self.roots = {"output": engine.output_folder, "input": self.input_dir, "temp": engine.output_folder}

    # -- prompts -----------------------------------------------------------------------------------
    def _resolve(self, model, sample):
        return self.engine.resolve(model, sample, dry_run=True)

    async def post_prompt(self, request: HttpRequest):
        body = await json_object(request, bad)
        graph = body.get("prompt")
        if not isinstance(graph, dict) or not graph:
            raise CompatError(400, {"error": {"type": "no_prompt", "message": "No prompt provided",
                                              "details": "No prompt provided", "extra_info": {}},
                                    "node_errors": {}, "field": "prompt"})
        client_id, extra, front, number = (body.get(k) for k in ("client_id", "extra_data", "front", "number"))
        if client_id is not None and not isinstance(client_id, str):
            raise bad("client_id", f"must be a string, got {client_id!r}")
        if extra is not None and not isinstance(extra, dict):
            raise bad("extra_data", "must be an object")
        if number is not None and (isinstance(number, bool) or not isinstance(number, (int, float))
                                   or not math.isfinite(number)):
            raise bad("number", f"must be a number, got {number!r}")
        prompt_id = body.get("prompt_id")
        if prompt_id is not None and (not isinstance(prompt_id, str) or not prompt_id.strip() or len(prompt_id) > 200):
            raise bad("prompt_id", "must be a non-empty string of at most 200 characters")
        if prompt_id is not None and self.prompts.known(prompt_id):
            raise bad("prompt_id", f"{prompt_id!r} is already in use")
        try:
            jobs = await asyncio.to_thread(comfy_graph.analyse, graph, self.files, self._resolve)
        except comfy_graph.GraphError as e:
            raise CompatError(400, {"error": e.error, "node_errors": e.node_errors, "field": "prompt"}) from None
        number = float(number) if number is not None else self.prompts.next_number(bool(front))
        extra_data = {**(extra or {}), **({"client_id": client_id} if client_id else {})}
        p = await asyncio.to_thread(self.prompts.submit, graph, jobs, extra_data, client_id, number, bool(front),
                                    prompt_id, bad)
        return {"prompt_id": p.prompt_id, "number": number, "node_errors": {}}

    def get_prompt(self):
        return self.prompts.queue_info()

    def get_queue(self):
        return self.prompts.queue()

    async def post_queue(self, request: HttpRequest):
        body = await _optional_json(request)
        if body.get("clear"):
            self.prompts.delete(None)
        if "delete" in body:
            self.prompts.delete(set(_ids(body["delete"], "delete")))
        return Response(status_code=200)

    async def interrupt(self, request: HttpRequest):
        body = await _optional_json(request)
        prompt_id = body.get("prompt_id")
        if prompt_id is not None and not isinstance(prompt_id, str):
            raise bad("prompt_id", "must be a string")
        self.prompts.interrupt(prompt_id)
        return Response(status_code=200)

    async def free(self, request: HttpRequest):
        body = await _optional_json(request)
        for key in ("unload_models", "free_memory"):
            if body.get(key) not in (None, True, False):
                raise bad(key, f"must be true or false, got {body[key]!r}")
        if body.get("unload_models") or body.get("free_memory"):
            self.prompts.free()
        return Response(status_code=200)

    # -- history -------------------------------------------------------------------------------------
    def get_history(self, max_items: int | None = Query(None, ge=0), offset: int = Query(-1, ge=-1)):
        return self.prompts.get_history(max_items=max_items, offset=offset)

    def get_history_one(self, prompt_id: str):
        return self.prompts.get_history(prompt_id)

    async def post_history(self, request: HttpRequest):
        body = await _optional_json(request)
        if body.get("clear"):
            self.prompts.forget(None)
        if "delete" in body:
            self.prompts.forget(_ids(body["delete"], "delete"))
        return Response(status_code=200)

    # -- files -----------------------------------------------------------------------------------------
    def view(self, filename: str = Query(...), subfolder: str = Query(""), kind: str = Query("output", alias="type")):
        """A file by ComfyUI's `{filename, subfolder, type}`; `preview` and `channel` are not applied (the file
        as it is)."""
        try:
            full = comfy_upload.locate(self.roots, filename, subfolder, kind)
        except comfy_upload.Refused as e:
            raise refused(e) from None
        return FileResponse(full, headers={"Content-Disposition": f'filename="{os.path.basename(full)}"'})

    async def upload_image(self, request: HttpRequest):
        return await self._upload(request, mask=False)

    async def upload_mask(self, request: HttpRequest):
        return await self._upload(request, mask=True)

    async def _upload(self, request: HttpRequest, mask: bool):
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_UPLOAD_BYTES:
                raise error(413, "image", f"the form is over {MAX_UPLOAD_BYTES} bytes")
        try:
            form = await asyncio.to_thread(comfy_upload.parse_form, request.headers.get("content-type", ""), bytes(body))
            return await asyncio.to_thread(comfy_upload.store_upload, self.engine, self.input_dir, form, self.roots, mask)
        except comfy_upload.Refused as e:
            raise refused(e) from None

    # -- what is here ----------------------------------------------------------------------------------
    async def object_info(self):
        return await asyncio.to_thread(comfy_nodes.object_info, self.files)

    async def object_info_node(self, node: str):
        return await asyncio.to_thread(comfy_nodes.object_info, self.files, node)

    def models(self):
        return list(comfy_files.FOLDERS)

    async def models_in(self, folder: str):
        if comfy_files.folder_name(folder) is None:
            raise error(404, "folder", f"no model folder {folder!r} (GET /models lists them)")
        return await asyncio.to_thread(self.files.names, folder)

    async def embeddings(self):
        return [os.path.splitext(n)[0] for n in await asyncio.to_thread(self.files.names, "embeddings")]

    def extensions(self):
        return []

    def system_stats(self):
        memory = self.engine.health()["memory"]
        device = str(memory.get("device") or self.engine.device)
        kind, _, index = device.partition(":")
        total, used = int(memory.get("total") or 0), int(memory.get("used") or 0)
        try:
            torch_version = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            torch_version = ""
        return {"system": {"os": os.name, "ram_total": int(memory.get("host_total") or 0),
                           "ram_free": int(memory.get("host_available") or 0), "comfyui_version": VERSION,
                           "python_version": sys.version, "pytorch_version": torch_version,
                           "embedded_python": False, "argv": []},
                "devices": [{"name": device, "type": kind, "index": int(index) if index.isdigit() else None,
                             "vram_total": total, "vram_free": max(0, total - used),
                             "torch_vram_total": total, "torch_vram_free": max(0, total - used)}]}


async def _optional_json(request: HttpRequest) -> dict:
    """A JSON object body, or {} for none (ComfyUI's clients post /interrupt without one)."""
    if not (await request.body()).strip():
        return {}
    return await json_object(request, bad)


def _ids(value, field: str) -> list:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise bad(field, "must be a list of prompt ids")
    return value


def add_routes(app: FastAPI, api: ComfyAPI, prefix: str = ""):
    """ComfyUI's routes at `prefix` and `prefix`/api (the alias kept out of the schema), behind the token."""
    @auth_first
    def auth(request: HttpRequest):
        if not authorized(request):
            raise error(401, "token", "missing or bad engine token: send it as a Bearer token (or the Basic "
                                      "auth password)", kind="unauthorized")

    deps = [Depends(auth)]
    for base, shown in ((prefix, True), (prefix + "/api", False)):
        def add(path, endpoint, method, **kw):
            app.add_api_route(base + path, endpoint, methods=[method], dependencies=deps, include_in_schema=shown, **kw)
        add("/prompt", api.post_prompt, "POST", openapi_extra=PROMPT_BODY)
        add("/prompt", api.get_prompt, "GET")
        add("/queue", api.get_queue, "GET")
        add("/queue", api.post_queue, "POST", openapi_extra=QUEUE_BODY)
        add("/interrupt", api.interrupt, "POST", openapi_extra=INTERRUPT_BODY)
        add("/free", api.free, "POST", openapi_extra=FREE_BODY)
        add("/history", api.get_history, "GET")
        add("/history/{prompt_id}", api.get_history_one, "GET")
        add("/history", api.post_history, "POST", openapi_extra=HISTORY_BODY)
        add("/view", api.view, "GET")
        add("/upload/image", api.upload_image, "POST", openapi_extra=UPLOAD_FORM, max_body_size=MAX_UPLOAD_BYTES)
        add("/upload/mask", api.upload_mask, "POST", openapi_extra=UPLOAD_FORM, max_body_size=MAX_UPLOAD_BYTES)
        add("/object_info", api.object_info, "GET")
        add("/object_info/{node}", api.object_info_node, "GET")
        add("/models", api.models, "GET")
        add("/models/{folder}", api.models_in, "GET")
        add("/embeddings", api.embeddings, "GET")
        add("/extensions", api.extensions, "GET")
        add("/system_stats", api.system_stats, "GET")
        app.add_api_websocket_route(base + "/ws", api.sockets.serve)


def comfy_app(engine, token: str, api: ComfyAPI) -> FastAPI:
    """An app with ComfyUI's routes alone at its root (engine.comfy_port), checked as every port is."""
    from extensions_built_in.inference_engine.compat.common import compat_error
    from extensions_built_in.inference_engine.http_guard import OriginGuard
    from extensions_built_in.inference_engine.server import engine_app

    app = engine_app(title="AI Toolkit inference engine (ComfyUI API)")
    app.state.engine = engine
    app.state.token = token
    app.add_exception_handler(CompatError, compat_error)
    add_routes(app, api)
    app.add_middleware(OriginGuard)
    return app
