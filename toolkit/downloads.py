"""Downloads a person asked for (POST /downloads), never implicitly: a profile stays local-only, and
every model load stays offline (toolkit/offline.py). No torch.

    Downloads(model_folders, hub_cache=None)
      .start(body) -> Download          # {repo_id | url, revision?, dest?, kind?, subdir?, filename?}
      .list() / .get(id) / .cancel(id) / .resume(id) / .forget(id) / .stop()

- A hub repo (`repo_id`, `revision`): `snapshot_download` into the hub cache, in its own process
  (toolkit/hub_fetch.py: huggingface_hub's offline switch is per process), honouring HF_ENDPOINT and
  HF_TOKEN. Cancel kills it (and removes the partial blobs it leaves); resume runs it again: the files
  already fetched are kept, the one cut short starts over (huggingface_hub keeps no partial file
  between processes), and the repo is listed incomplete until then (its tree listing says so).
- A direct URL (`url`): an HTTP download on a thread into a model folder (`dest`, one of
  engine.model_folders, the first by default), in the sub-folder of `kind` for that folder's tree
  (model_trees.download_dir) or the `subdir` the person picks. Bytes go to `<file>.part`; a cut
  connection, a cancel then resume, or a restart continue it with `Range: bytes=<size>-`; the file
  gets its name when complete.

A Download's public form: {id, kind: hub|url, source, revision, dest, path, status: running|done|
failed|cancelled, bytes_done, bytes_total (null until known), bytes_left, error}. GET /library scans
again on every call, so a finished download is listed there.
"""
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

from toolkit import model_trees
from toolkit.errors import ConfigError

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")
RETRIES = 3                 # a cut connection is continued this many times in a row without progress
BODY_KEYS = {"repo_id", "url", "revision", "dest", "kind", "subdir", "filename"}
ACTIVE = "running"


@dataclass
class Download:
    id: str
    kind: str                              # hub | url
    source: str                            # the repo id or the URL
    revision: str | None
    dest: str                              # the hub cache, or the file's final path
    status: str = ACTIVE
    bytes_done: int = 0
    bytes_total: int | None = None
    path: str | None = None                # when done: the snapshot folder or the file
    error: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    proc: subprocess.Popen | None = field(default=None, repr=False)
    thread: threading.Thread | None = field(default=None, repr=False)
    abort: object = field(default=None, repr=False)    # set by url_fetch while a response is open

    def public(self) -> dict:
        left = None if self.bytes_total is None else max(self.bytes_total - self.bytes_done, 0)
        return {"id": self.id, "kind": self.kind, "source": self.source, "revision": self.revision,
                "dest": self.dest, "path": self.path, "status": self.status, "bytes_done": self.bytes_done,
                "bytes_total": self.bytes_total, "bytes_left": left, "error": self.error}


def _text(body: dict, key: str) -> str | None:
    v = body.get(key)
    if v is None or v == "":
        return None
    if not isinstance(v, str):
        raise ConfigError(key, f"must be a string, not {type(v).__name__}")
    return v.strip()


def _safe_name(name: str, key: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\\" in name or name.startswith("."):
        raise ConfigError(key, f"{name!r} is not a file name")
    return name


class Downloads:
    def __init__(self, model_folders=(), hub_cache: str | None = None):
        self.model_folders = [os.path.abspath(os.path.expanduser(f)) for f in model_folders or ()]
        self._hub_cache = hub_cache
        self._items: dict = {}
        self._lock = threading.Lock()

    @property
    def hub_cache(self) -> str:
        if self._hub_cache:
            return self._hub_cache
        from huggingface_hub import constants      # read now: HF_HUB_CACHE / HF_HOME as the engine has them
        return constants.HF_HUB_CACHE

    # -- the requests ------------------------------------------------------------------------------
    def start(self, body: dict) -> Download:
        if not isinstance(body, dict):
            raise ConfigError("body", "must be an object")
        unknown = sorted(set(body) - BODY_KEYS)
        if unknown:
            raise ConfigError(unknown[0], f"unknown key (known: {', '.join(sorted(BODY_KEYS))})")
        repo, url = _text(body, "repo_id"), _text(body, "url")
        if bool(repo) == bool(url):
            raise ConfigError("repo_id", "give a hub repo id (owner/name) or a url, one of them")
        d = self._hub(repo, body) if repo else self._url(url, body)
        with self._lock:
            same = next((o for o in self._items.values() if o.status == ACTIVE and o.dest == d.dest
                         and o.source == d.source), None)
            if same:
                return same              # asked twice: the one already running
            self._items[d.id] = d
        self._run(d)
        return d

    def _hub(self, repo: str, body: dict) -> Download:
        if not REPO_ID.match(repo):
            raise ConfigError("repo_id", f"{repo!r} is not a hub repo id (owner/name)")
        for key in ("kind", "subdir", "filename"):
            if body.get(key):
                raise ConfigError(key, "a hub repo goes into the hub cache: only a url takes it")
        if _text(body, "dest") not in (None, "hub"):
            raise ConfigError("dest", "a hub repo goes into the hub cache (dest: \"hub\")")
        return Download(uuid.uuid4().hex[:12], "hub", repo, _text(body, "revision"), self.hub_cache)

    def _url(self, url: str, body: dict) -> Download:
        u = urlparse(url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ConfigError("url", f"{url!r} is not an http(s) URL")
        if _text(body, "revision"):
            raise ConfigError("revision", "only a hub repo has revisions")
        if not self.model_folders:
            raise ConfigError("dest", "a URL downloads into a model folder, and engine.model_folders is empty")
        dest = _text(body, "dest")
        if dest in (None, "hub"):
            folder = self.model_folders[0]
        else:
            folder = os.path.abspath(os.path.expanduser(dest))
            if folder not in self.model_folders:
                raise ConfigError("dest", f"{dest!r} is not one of engine.model_folders "
                                          f"({', '.join(self.model_folders)})")
        sub = _text(body, "subdir")
        if sub is not None:
            parts = sub.replace("\\", "/").split("/")
            if any(p in ("", ".", "..") for p in parts):
                raise ConfigError("subdir", f"{sub!r} must be a folder inside the model folder")
            where = os.path.join(folder, *parts)
        else:
            kind = _text(body, "kind") or model_trees.CHECKPOINT
            if kind not in model_trees.DOWNLOAD_KINDS:
                raise ConfigError("kind", f"unknown kind {kind!r} (known: {', '.join(model_trees.DOWNLOAD_KINDS)})")
            where = model_trees.download_dir(folder, kind)
        name = _text(body, "filename") or unquote(os.path.basename(u.path))
        name = _safe_name(name, "filename" if body.get("filename") else "url")
        if os.path.exists(os.path.join(where, name)):
            raise ConfigError("filename", f"{name} is in {where} already (give another filename)")
        return Download(uuid.uuid4().hex[:12], "url", url, None, os.path.join(where, name))

    def list(self) -> list:
        with self._lock:
            return [d.public() for d in self._items.values()]

    def get(self, did: str) -> Download | None:
        with self._lock:
            return self._items.get(did)

    def cancel(self, did: str) -> Download | None:
        d = self.get(did)
        if d is None or d.status != ACTIVE:
            return d
        d.cancel.set()
        if d.proc is not None:
            d.proc.kill()
        if callable(d.abort):
            d.abort()
        if d.thread is not None:
            d.thread.join(30)
        return d

    def resume(self, did: str) -> Download | None:
        d = self.get(did)
        if d is not None and d.status in ("failed", "cancelled"):
            d.status, d.error, d.cancel = ACTIVE, None, threading.Event()
            self._run(d)
        return d

    def forget(self, did: str) -> bool:
        """A finished, failed or cancelled download off the list (its files stay)."""
        with self._lock:
            d = self._items.get(did)
            if d is None or d.status == ACTIVE:
                return False
            del self._items[did]
            return True

    def stop(self):
        for d in list(self._items.values()):
            self.cancel(d.id)

    # -- the work ------------------------------------------------------------------------------------
    def _run(self, d: Download):
        target = self._fetch_hub if d.kind == "hub" else self._fetch_url
        d.thread = threading.Thread(target=self._guard, args=(d, target), daemon=True, name=f"download-{d.id}")
        d.thread.start()

    def _guard(self, d: Download, target):
        """`target` returns True when the files are complete, False when cancelled."""
        try:
            d.status = "done" if target(d) else "cancelled"
        except Exception as e:              # noqa: BLE001 - the download's own failure, shown on its row
            if d.cancel.is_set():
                d.status = "cancelled"
            else:
                d.error = d.error or f"{type(e).__name__}: {e}"
                d.status = "failed"

    def _fetch_hub(self, d: Download):
        cmd = [sys.executable, "-m", "toolkit.hub_fetch", d.source, "--cache-dir", d.dest]
        if d.revision:
            cmd += ["--revision", d.revision]
        env = dict(os.environ, HF_HUB_OFFLINE="0", TRANSFORMERS_OFFLINE="0", HF_HUB_DISABLE_PROGRESS_BARS="1",
                   PYTHONPATH=os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p))
        d.bytes_done, d.bytes_total = 0, None
        blobs = os.path.join(d.dest, "models--" + d.source.replace("/", "--"), "blobs")
        before = _partials(blobs)
        errors = tempfile.TemporaryFile("w+")     # not a pipe: a chatty stderr never blocks the process
        d.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.DEVNULL,
                                  env=env, cwd=_ROOT, text=True)
        if d.cancel.is_set():
            d.proc.kill()
        for line in d.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "total" in msg:
                d.bytes_total = int(msg["total"])
            elif "done" in msg:
                d.bytes_done = int(msg["done"])
            elif "path" in msg:
                d.path = msg["path"]
            elif "error" in msg:
                d.error = msg["error"]
        rc = d.proc.wait()
        errors.seek(0)
        err = errors.read()
        errors.close()
        if d.cancel.is_set():
            # a killed process leaves its per-process `<etag>.<id>.incomplete` files, which no later run
            # reuses (huggingface_hub names them per process): removed, so the cache is not left partial
            for f in _partials(blobs) - before:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(blobs, f))
            return False
        if rc != 0:
            raise RuntimeError(d.error or (err.strip().splitlines() or [f"exit {rc}"])[-1])
        d.bytes_total = d.bytes_total or 0
        d.bytes_done = d.bytes_total
        return True

    def _fetch_url(self, d: Download):
        from toolkit import url_fetch
        return url_fetch.fetch(d, retries=RETRIES)


def _partials(blobs: str) -> set:
    try:
        return {f for f in os.listdir(blobs) if f.endswith(".incomplete")}
    except OSError:
        return set()


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
