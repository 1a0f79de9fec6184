"""OpenAI's `/v1/images/generations` and `/v1/models` (the `openai` SDKs and clients built on them)."""
import asyncio
import re
import time

from fastapi import Depends, FastAPI, Request as HttpRequest

from extensions_built_in.inference_engine.compat.common import CompatError, Session, is_int, json_object

MAX_N = 10                       # OpenAI's own limit for n
# engine field -> the client's field, so a 400 names what the client sent
FIELDS = {"sample.prompt": "prompt", "sample.negative_prompt": "negative_prompt", "sample.width": "size",
          "sample.height": "size", "sample.num_inference_steps": "num_inference_steps",
          "sample.guidance_scale": "guidance_scale", "sample.seed": "seed", "batch": "n", "sample.batch_size": "n"}


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
        session = self.session
        model, name = await asyncio.to_thread(session.resolve, body.get("model"), "model", invalid)
        reqs = await asyncio.to_thread(session.submit_all, model, [sample], invalid, FIELDS, "model")
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
        return {"created": int(time.time()), "data": data, "output_format": "png",
                "size": f"{first.width}x{first.height}"}

    def _model(self, name: str) -> dict:
        return {"id": name, "object": "model", "created": int(self.engine.started_at), "owned_by": "aitk-engine"}

    def models(self):
        """Only what can load here (Engine.model_names): profiles, and archs whose weights are local."""
        return {"object": "list", "data": [self._model(n) for n in self.session.image_model_names()]}

    def model(self, model_id: str):
        if model_id not in self.session.image_model_names():
            raise error(404, f"model {model_id!r} does not exist here", param="model", code="model_not_found")
        return self._model(model_id)


def add_routes(app: FastAPI, session: Session, authorized):
    """The /v1 routes on `app`; `authorized(request) -> bool` (the token is the API key)."""
    api = OpenAIImages(session)

    def auth(request: HttpRequest):
        if not authorized(request):
            raise error(401, "missing or bad engine token: send it as the API key", code="invalid_api_key")

    deps = [Depends(auth)]
    app.add_api_route("/v1/images/generations", api.images_generations, methods=["POST"], dependencies=deps)
    app.add_api_route("/v1/models", api.models, methods=["GET"], dependencies=deps)
    app.add_api_route("/v1/models/{model_id}", api.model, methods=["GET"], dependencies=deps)
    return api
