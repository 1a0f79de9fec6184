"""ComfyUI's prompt queue and history on the engine's queue. A prompt's jobs (comfy_graph.analyse) are
engine requests, queued in order through `Session.submit_all` (api "comfyui", the client_id as the
client); a thread of its own follows them one after the other and tells the prompt's client, on /ws,
what ComfyUI's executor would: execution_start, execution_cached, executing (each node, then null),
progress, previews, executed (the images), and execution_success / execution_error /
execution_interrupted. The prompt is in the history, in ComfyUI's shape, before its `executing: null`.

Nodes run in the order of each job's `nodes`: the ones before its first sampler when its request
starts, a sampler at its pass's first step (a hires job's second sampler at the hires pass), the rest
(decode, save) once its files are written. A node several jobs share runs once per prompt."""
import collections
import os
import queue as queue_mod
import threading
import time
import uuid

from extensions_built_in.inference_engine.compat.preview import preview_payload
from extensions_built_in.inference_engine.engine import NotQueued, Subscriber
from extensions_built_in.inference_engine.protocol import FrameReader
from toolkit.errors import ConfigError

HISTORY_KEPT = 1000              # finished prompts /history keeps (in memory)
SAMPLERS = ("KSampler", "KSamplerAdvanced")
STREAM = {"latents": "none", "preview_image": "jpeg"}      # each request's frames: JPEG previews, no latents
SENSITIVE = ("auth_token_comfy_org", "api_key_comfy_org")  # extra_data keys ComfyUI keeps out of /queue and /history


def timestamp() -> int:
    return int(time.time() * 1000)


class Prompt:
    """One posted prompt: ComfyUI's queue item, its jobs and their engine requests, what it did so far."""

    def __init__(self, prompt_id: str, number, graph: dict, extra_data: dict, jobs: list, client_id):
        self.prompt_id, self.number, self.graph, self.jobs, self.client_id = prompt_id, number, graph, jobs, client_id
        self.extra_data = {k: v for k, v in extra_data.items() if k not in SENSITIVE}
        self.outputs = list(dict.fromkeys(o["node"] for job in jobs for o in job.outputs))
        self.reqs: list = []
        self.started = False          # its first request began (execution_start was sent)
        self.deleted = False          # taken off the queue before it started (POST /queue): no history
        self.executed: list = []      # node ids, in the order they ran
        self.ui: dict = {}            # node id -> {"images": [...]}
        self.messages: list = []      # [event, data] of history's status.messages

    def item(self) -> list:
        """ComfyUI's queue item: [number, prompt_id, prompt, extra_data, outputs_to_execute]."""
        return [self.number, self.prompt_id, self.graph, self.extra_data, self.outputs]

    def class_type(self, node) -> str:
        entry = self.graph.get(node)
        return entry.get("class_type", "") if isinstance(entry, dict) else ""


class Prompts:
    """The prompts not finished (in queue order) and the history; shared by every app serving the API."""

    def __init__(self, engine, session, sockets_factory):
        """`sockets_factory(queue_info)`: the sockets (comfy_ws.Sockets) this queue reports to."""
        self.engine, self.session = engine, session
        self.sockets = sockets_factory(self.queue_info)
        self.lock = threading.Lock()
        self.pending: list[Prompt] = []
        self.history: collections.OrderedDict[str, dict] = collections.OrderedDict()
        self.counter = 0
        self.unload_asked = False     # POST /free while the engine was busy: done when a prompt ends idle

    # -- the queue ---------------------------------------------------------------------------------
    def queue_info(self) -> dict:
        with self.lock:
            return {"exec_info": {"queue_remaining": len(self.pending)}}

    def queue(self) -> dict:
        with self.lock:
            running = [p.item() for p in self.pending if p.started]
            waiting = [p.item() for p in self.pending if not p.started]
        return {"queue_running": running, "queue_pending": waiting}

    def known(self, prompt_id: str) -> bool:
        with self.lock:
            return prompt_id in self.history or any(p.prompt_id == prompt_id for p in self.pending)

    def next_number(self, front: bool):
        with self.lock:
            n = self.counter
            self.counter += 1
        return -n if front else n

    def submit(self, graph: dict, jobs: list, extra_data: dict, client_id, number, front: bool,
               prompt_id: str | None, err) -> Prompt:
        """Queue every job of the prompt (all or none; `err(field, message)` for a refusal) and start
        following it. On a worker thread: submitting checks files."""
        p = Prompt(prompt_id or str(uuid.uuid4()), number, graph, extra_data, jobs, client_id)
        if prompt_id is not None and self.known(prompt_id):
            raise err("prompt_id", f"{prompt_id!r} is already in use")
        reqs = []
        try:
            try:     # engine.limits.max_batch counts the images of the whole prompt
                self.engine.check_batch(sum(int(job.sample.get("batch_size") or 1) for job in jobs))
            except ConfigError as e:
                raise err(e.key, e.message) from None
            for job in jobs:
                reqs += self.session.submit_all(job.model, [job.sample], err, {}, "model", STREAM,
                                                api="comfyui", client=client_id)
        except BaseException:
            self.session.cancel_all(reqs)
            raise
        finally:
            self.session.forget(reqs)       # the A1111 batch table is not ours
        p.reqs = reqs
        if front:       # the engine's queue front, first job first
            for r in reversed(reqs):
                try:
                    self.engine.move(r.request_id, 0)
                except NotQueued:
                    pass
        with self.lock:
            at = sum(1 for q in self.pending if q.started) if front else len(self.pending)
            self.pending.insert(at, p)
        threading.Thread(target=self._follow, args=(p,), daemon=True, name=f"comfy-{p.prompt_id[:8]}").start()
        self.sockets.status()
        return p

    def delete(self, prompt_ids=None):
        """POST /queue: prompts that have not started leave the queue (`None`: all of them); a running one
        stays (ComfyUI's delete_queue_item takes only pending ones)."""
        with self.lock:
            gone = [p for p in self.pending if not p.started and (prompt_ids is None or p.prompt_id in prompt_ids)]
            for p in gone:
                p.deleted = True
                self.pending.remove(p)
        for p in gone:
            self._cancel(p)
        if gone:
            self.sockets.status()

    def interrupt(self, prompt_id: str | None = None) -> bool:
        """POST /interrupt: the running prompt (the one named, if it runs) stops, its later jobs too.
        Requests of the other APIs are not ComfyUI's to stop."""
        with self.lock:
            running = [p for p in self.pending if p.started and prompt_id in (None, p.prompt_id)]
        for p in running:
            self._cancel(p)
        return bool(running)

    def _cancel(self, p: Prompt):
        for r in p.reqs:
            if not r.finished:
                self.engine.cancel(r.request_id, by="a ComfyUI client")

    # -- history ---------------------------------------------------------------------------------
    def get_history(self, prompt_id: str | None = None, max_items: int | None = None, offset: int = -1) -> dict:
        """ComfyUI's get_history: one prompt, or `max_items` from `offset` (by default the newest), oldest first."""
        with self.lock:
            if prompt_id is not None:
                return {prompt_id: self.history[prompt_id]} if prompt_id in self.history else {}
            keys = list(self.history)
            if offset < 0:
                offset = max(0, len(keys) - max_items) if max_items is not None else 0
            keys = keys[offset:] if max_items is None else keys[offset:offset + max_items]
            return {k: self.history[k] for k in keys}

    def forget(self, prompt_ids=None):
        """POST /history: `None` clears it."""
        with self.lock:
            if prompt_ids is None:
                self.history.clear()
            for k in prompt_ids or ():
                self.history.pop(k, None)

    def free(self):
        """POST /free: unload now, or when the engine is next idle (after a prompt ends)."""
        from extensions_built_in.inference_engine.engine import EngineBusy
        try:
            self.engine.request_unload()
            self.unload_asked = False
        except EngineBusy:
            self.unload_asked = True

    # -- following a prompt ------------------------------------------------------------------------
    def _send(self, p: Prompt, event: str, data: dict, record: bool = False):
        if record:
            p.messages.append([event, data])
        self.sockets.send(event, data, p.client_id)

    def _start(self, p: Prompt):
        """The prompt starts (once; never once deleted from the queue)."""
        with self.lock:
            if p.started or p.deleted:
                return
            p.started = True
        self._send(p, "execution_start", {"prompt_id": p.prompt_id, "timestamp": timestamp()}, record=True)
        self._send(p, "execution_cached", {"nodes": [], "prompt_id": p.prompt_id, "timestamp": timestamp()},
                   record=True)
        self.sockets.status()

    def _executing(self, p: Prompt, nodes):
        for node in nodes:
            if node not in p.executed:
                p.executed.append(node)
                self._send(p, "executing", {"node": node, "display_node": node, "prompt_id": p.prompt_id})

    def _follow(self, p: Prompt):
        outcome, where, message = "success", None, None
        try:
            for job, req in zip(p.jobs, p.reqs):
                status, where, message = self._follow_job(p, job, req)
                if status != "ok":
                    outcome = "interrupted" if status == "cancelled" else "error"
                    break
        except Exception as e:      # noqa: BLE001 - the prompt ends, in the client's terms, whatever broke here
            outcome, message = "error", f"{type(e).__name__}: {e}"
        finally:
            if outcome != "success":
                self._cancel(p)
            self._finish(p, outcome, where, message)

    def _follow_job(self, p: Prompt, job, req) -> tuple:
        """Tell the client what `req` (running `job`) does until it ends: (status, node at fault, error)."""
        frames: queue_mod.Queue = queue_mod.Queue()
        sub = Subscriber(lambda frame, _latent: frames.put(frame))
        for frame in req.attach(sub):
            frames.put(frame)
        nodes = list(job.nodes)
        samplers = [n for n in nodes if p.class_type(n) in SAMPLERS] or [job.sampler_node]
        sampler = None                  # the sampler node running
        error = None
        try:
            while True:
                frame = frames.get()     # `end` comes last, whatever happens to the request
                header = FrameReader().feed(frame)[0][0]
                kind = header.get("type")
                if kind == "end":
                    break
                if kind == "start" or (kind == "status" and header.get("stage") in ("queued", "warning")):
                    continue
                if kind == "error":
                    error = header.get("message")
                    continue
                self._start(p)
                if not p.started:
                    continue
                self._executing(p, nodes[:nodes.index(samplers[0])] if samplers[0] in nodes else [])
                if kind == "progress":
                    now = samplers[-1] if header.get("pass") == "hires" else samplers[0]
                    if now != sampler:
                        upto = nodes.index(now) + 1 if now in nodes else 0
                        self._executing(p, nodes[:upto] if upto else [now])
                        sampler = now
                    self._send(p, "progress", {"value": header.get("step"), "max": header.get("total"),
                                               "prompt_id": p.prompt_id, "node": sampler})
                elif kind == "preview" and header.get("format") == "jpeg":
                    got = preview_payload(frame)
                    if got is not None:
                        self.sockets.send_preview(got[1], p.client_id)
        finally:
            req.detach(sub)
        req.done_event.wait()
        if req.status != "ok":      # the node at fault: the sampler running, else (before a step) the model's loader
            before = job.fields.get("model", (job.sampler_node,))[0] if req.status == "error" else job.sampler_node
            return req.status, sampler or before, error or req.error
        self._start(p)
        if not p.started:              # deleted from the queue as it began: it tells nothing
            return "cancelled", None, None
        images = [{"filename": os.path.basename(r["relpath"]), "subfolder": os.path.dirname(r["relpath"]),
                   "kind": r.get("kind")} for r in req.results if r.get("kind") in ("image", "video")]
        kinds = {o["node"]: o.get("type", "output") for o in job.outputs}
        for node in nodes + [n for n in kinds if n not in nodes]:
            if node in p.executed:
                continue
            self._executing(p, [node])
            if node in kinds:
                out = {"images": [{"filename": i["filename"], "subfolder": i["subfolder"], "type": kinds[node]}
                                  for i in images]}
                if any(i["kind"] == "video" for i in images):
                    out["animated"] = [True]
                p.ui[node] = out
                self._send(p, "executed", {"node": node, "display_node": node, "output": out,
                                           "prompt_id": p.prompt_id})
        return "ok", None, None

    def _finish(self, p: Prompt, outcome: str, node, message):
        """The prompt's last message, its history entry, the queue's `status`, then `executing: null`."""
        self._start(p)
        if not p.started:           # deleted from the queue (which said so) before it began
            return
        base = {"prompt_id": p.prompt_id}
        if outcome == "success":
            self._send(p, "execution_success", {**base, "timestamp": timestamp()}, record=True)
        else:
            node = node or (p.jobs[0].sampler_node if p.jobs else None)
            fault = {**base, "node_id": node, "node_type": p.class_type(node), "executed": list(p.executed)}
            if outcome == "interrupted":
                self._send(p, "execution_interrupted", {**fault, "timestamp": timestamp()}, record=True)
            else:
                self._send(p, "execution_error", {
                    **fault, "exception_message": message or "the request failed", "exception_type": "RuntimeError",
                    "traceback": [], "current_inputs": {}, "current_outputs": {}, "timestamp": timestamp()},
                    record=True)
        entry = {"prompt": p.item(), "outputs": p.ui,
                 "status": {"status_str": "success" if outcome == "success" else "error",
                            "completed": outcome == "success", "messages": p.messages},
                 "meta": {n: {"node_id": n, "display_node": n, "parent_node": None, "real_node_id": n} for n in p.ui}}
        with self.lock:
            self.history[p.prompt_id] = entry
            while len(self.history) > HISTORY_KEPT:
                self.history.popitem(last=False)
            if p in self.pending:
                self.pending.remove(p)
        self.sockets.status()
        self.sockets.send("executing", {"node": None, "prompt_id": p.prompt_id}, p.client_id)
        if self.unload_asked and not self.engine.busy():
            self.free()
