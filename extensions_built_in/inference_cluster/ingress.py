"""The cluster's HTTP front: the single engine's API, relayed to the engine replicas (replica.py).

Every route is the engine's own (its app runs in each replica); here only the replica is chosen:
- POST /generate: by the router, from the request's model (plan.py gives its components); the
  request id is fixed here (the body's, else a new one) and remembered with its replica.
- /stream/{id}, /cancel/{id}: the replica that holds the request.
- /health, /queue, /unload: every replica, merged (each replica's own answer is in `replicas`).
- the rest (/models, /outputs, /assets, compat routes, ...): any replica (they share the job folder).
A replica that dies mid-stream: the client gets the frames it had, then an error frame and `end`.
"""
import asyncio
import json
import logging
import uuid

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from ray import serve

from extensions_built_in.inference_cluster.frames import FrameCutter, lost_frames

log = logging.getLogger("ray.serve")     # into the replica's Serve log file
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]
OWNERS_KEPT = 10000
app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)


class ReplicaLost(RuntimeError):
    pass


# The helpers come before the deployment class: serve.ingress pickles the app (and so the routes'
# globals) when the class is defined.


async def _rest(gen):
    try:
        async for chunk in gen:
            yield chunk
    finally:
        gen.cancel()          # the client went away: the replica's relay closes, the engine sees it


async def _frames(chunks, request_id: str):
    """The replica's frames, whole; if the replica dies first, an error frame and `end`."""
    cut = FrameCutter()
    try:
        async for chunk in chunks:
            whole = cut.feed(chunk)
            if whole:
                yield whole
    except asyncio.CancelledError:
        raise
    except Exception as e:
        log.warning("engine replica lost during request %s: %s", request_id, e)
    if not cut.ended:
        yield lost_frames(request_id, "the engine replica serving this request stopped; it is being restarted, "
                                      "and the cluster's other replicas go on")


def replica_ids(app_name: str, deployment: str) -> list[str]:
    """The ids of the deployment's live replicas, from their actors' names (SERVE_REPLICA::app#name#id)."""
    import ray
    prefix = f"SERVE_REPLICA::{app_name}#{deployment}#"
    return sorted(a["name"][len(prefix):] for a in ray.util.list_named_actors(all_namespaces=True)
                  if a["name"].startswith(prefix))


def _forwarded(request: Request) -> dict:
    return {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length", "connection")}


def _with_request_id(body: bytes) -> tuple:
    """(body, request id, model) with a request id set when the body is a JSON object without one;
    anything else goes on as it came, for the replica to answer 422."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body, None, None
    if not isinstance(data, dict):
        return body, None, None
    if data.get("request_id") is None:
        data["request_id"] = uuid.uuid4().hex[:16]
        body = json.dumps(data).encode()
    rid = data["request_id"] if isinstance(data["request_id"], str) else None
    return body, rid, data.get("model")


@serve.deployment(num_replicas=1, max_ongoing_requests=1000)
@serve.ingress(app)
class Ingress:
    def __init__(self, engines, deployment: str, planner_config: dict):
        from extensions_built_in.inference_cluster.plan import Planner
        self.engines = engines.options(stream=True)
        self.deployment = deployment
        self.app_name = serve.get_replica_context().app_name
        self.planner = Planner(**planner_config)
        self.owners: dict = {}          # request id -> replica id (insertion order: oldest first)

    # -- routes --------------------------------------------------------------------------------------
    @app.get("/health")
    async def health(self, request: Request):
        answers = await self._everyone("GET", "health", request)
        if isinstance(answers, Response):
            return answers
        merged = dict(answers[0])
        merged.update(ok=all(a.get("ok") for a in answers), busy=any(a.get("busy") for a in answers),
                      queue=sum(a.get("queue", 0) for a in answers), replicas=answers)
        return merged

    @app.get("/queue")
    async def queue(self, request: Request):
        answers = await self._everyone("GET", "queue", request)
        if isinstance(answers, Response):
            return answers
        running = [a["running"] for a in answers if a.get("running")]
        finished = sorted((r for a in answers for r in a["finished"]), key=lambda r: -(r.get("finished_at") or 0))
        return {"running": running[0] if running else None, "batch": [r for a in answers for r in a["batch"]],
                "queued": sorted((r for a in answers for r in a["queued"]), key=lambda r: r["created_at"]),
                "finished": finished}

    @app.post("/unload")
    async def unload(self, request: Request):
        answers = await self._everyone("POST", "unload", request)
        return answers if isinstance(answers, Response) else {"unloaded": True}

    @app.api_route("/{path:path}", methods=METHODS)
    async def relay(self, path: str, request: Request):
        body = await request.body()
        headers = _forwarded(request)
        target = components = request_id = None
        if path == "generate" and request.method == "POST":
            body, request_id, model = _with_request_id(body)
            if model is not None:
                components = await asyncio.to_thread(self.planner.components, model)
        elif path.startswith(("stream/", "cancel/")):
            request_id = path.split("/", 1)[1]
            target = self.owners.get(request_id)
        try:
            # the path as the client sent it (percent-escapes kept): the engine answers a bad one itself
            raw = (request.scope.get("raw_path") or b"").decode("latin-1").split("?", 1)[0].lstrip("/") or path
            head, chunks = await self._open(request.method, raw, request.url.query, headers, body,
                                            target=target, components=components, retry=target is None)
        except ReplicaLost as e:
            return JSONResponse({"detail": f"no engine replica answered: {e}", "field": "body"}, status_code=503)
        if path == "generate" and head["status"] == 200 and request_id:
            self._remember(request_id, head["replica"])
        head["headers"]["x-engine-replica"] = head["replica"]     # which replica answered (logs, tests)
        media = head["headers"].get("content-type", "")
        if head["status"] == 200 and media.startswith("application/octet-stream") and request_id:
            return StreamingResponse(_frames(chunks, request_id), status_code=200, headers=head["headers"])
        try:
            data = b"".join([c async for c in chunks])
        except Exception as e:          # the replica died while it answered (a `wait` generate, a file)
            return JSONResponse({"detail": f"the engine replica stopped while answering: {type(e).__name__}",
                                 "field": "body"}, status_code=503)
        return Response(data, status_code=head["status"], headers=head["headers"])

    # -- helpers -------------------------------------------------------------------------------------
    async def _open(self, method, path, query, headers, body, *, target=None, components=None, retry=True):
        """The replica's head and the rest of its stream. A replica found dead before it answered
        (the router had not heard yet) is tried again on another, once."""
        for attempt in range(2 if retry else 1):
            gen = self.engines.call.remote(method, path, query, headers, body, target=target, components=components)
            try:
                head = await gen.__anext__()
            except (asyncio.CancelledError, StopAsyncIteration):
                gen.cancel()
                raise
            except Exception as e:
                log.warning("engine replica failed before answering %s /%s: %s", method, path, e)
                last = e
                continue
            return head, _rest(gen)
        raise ReplicaLost(type(last).__name__)        # the message (a remote traceback) stays in the log

    async def _everyone(self, method: str, path: str, request: Request):
        """Each replica's JSON answer (with `replica` and `pid`), or the first non-200 response."""
        headers = _forwarded(request)
        seen, answers, targets = set(), [], [None]
        while targets:
            target = targets.pop()
            try:
                head, chunks = await self._open(method, path, "", headers, b"", target=target, retry=False)
            except ReplicaLost:
                continue          # one died meanwhile: Serve replaces it; the others still answer
            data = b"".join([c async for c in chunks])
            if head["status"] != 200:
                return Response(data, status_code=head["status"], headers=head["headers"])
            if head["replica"] not in seen:
                seen.add(head["replica"])
                answers.append({**json.loads(data), "replica": head["replica"], "pid": head["pid"]})
            if target is None:
                targets = [r for r in replica_ids(self.app_name, self.deployment) if r not in seen]
        if not answers:
            return JSONResponse({"detail": "no engine replica answered", "field": "body"}, status_code=503)
        return answers

    def _remember(self, request_id: str, replica: str):
        self.owners.pop(request_id, None)
        self.owners[request_id] = replica
        while len(self.owners) > OWNERS_KEPT:
            self.owners.pop(next(iter(self.owners)))
