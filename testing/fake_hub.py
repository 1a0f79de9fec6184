"""A local HTTP server in the hub's layout, for download tests (HF_ENDPOINT pointed at it), and plain
files for direct-URL downloads. It serves each folder `<root>/<owner>/<name>/` as a model repo:

    GET  /api/models/{owner}/{name}/revision/{rev}     repo info: id, sha (the commit), siblings
    GET  /api/models/{owner}/{name}/tree/{rev}         the file list (?recursive=…): type, path, size, oid
    HEAD|GET /{owner}/{name}/resolve/{rev}/{path}      the file, with ETag, X-Repo-Commit, Content-Length,
                                                       Accept-Ranges, and 206 + Content-Range for a Range
    HEAD|GET /files/{path}                             `<root>/files/{path}`, as any web server: no hub headers

The commit is a hash of the repo's files, so it changes when they do. Behaviours a test sets, by the end
of the file's path ("unet/model.safetensors", "model.safetensors"), in Python (FakeHub) or over HTTP
(POST /_control?cut=PATH:N, ?hold=PATH:N, ?release=1):
- `cut`: the next GET of it sends that many bytes, then drops the connection (once);
- `hold`: each GET of it sends that many bytes, then waits until `release` (an event, not a delay).
GET /_control/log: every request seen: {method, path, range, authorization}.

    python -m testing.fake_hub --root DIR --port N      # what the Playwright run starts
"""
import argparse
import hashlib
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse


def _etag(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return            # a client that went away mid-body (a cancel, a cut): expected here
        super().handle_error(request, client_address)


class FakeHub:
    def __init__(self, root: str, port: int = 0):
        self.root = os.path.abspath(root)
        self.cut: dict = {}              # path end -> bytes sent before the connection drops (once)
        self.hold: dict = {}             # path end -> bytes sent before waiting on `released`
        self.released = threading.Event()
        self.held = threading.Event()    # set when a held response has sent its first bytes
        self.log: list = []
        hub = self

        class Handler(_Handler):
            fake = hub
        self.server = _Server(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="fake-hub")

    def start(self) -> "FakeHub":
        self.thread.start()
        return self

    def stop(self):
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def release(self):
        self.hold.clear()
        self.released.set()

    # -- the repos -----------------------------------------------------------------------------------
    def repo_dir(self, repo: str) -> str:
        return os.path.join(self.root, *repo.split("/"))

    def files(self, repo: str) -> list:
        base = self.repo_dir(repo)
        out = []
        for r, _d, fs in os.walk(base):
            for f in fs:
                out.append(os.path.relpath(os.path.join(r, f), base).replace(os.sep, "/"))
        return sorted(out)

    def commit(self, repo: str) -> str:
        h = hashlib.sha1(repo.encode())
        for f in self.files(repo):
            h.update(f.encode() + _etag(os.path.join(self.repo_dir(repo), f)).encode())
        return h.hexdigest()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _json(self, doc, status=200):
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _missing(self, what: str):
        self.send_response(404)
        self.send_header("X-Error-Code", "EntryNotFound" if "/resolve/" in self.path else "RepoNotFound")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        u = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        if u.path != "/_control":
            return self._missing(u.path)
        if "release" in q:
            self.fake.release()
        for key in ("cut", "hold"):
            if key in q:
                name, _, n = q[key].rpartition(":")
                getattr(self.fake, key)[name] = int(n)
                if key == "hold":
                    self.fake.released.clear()
                    self.fake.held.clear()
        self._json({"ok": True})

    def do_GET(self):
        u = urlparse(self.path)
        path = unquote(u.path)
        self.fake.log.append({"method": self.command, "path": path, "range": self.headers.get("Range"),
                              "authorization": self.headers.get("Authorization")})
        parts = path.strip("/").split("/")
        if path == "/_control/log":
            return self._json(self.fake.log)
        if path == "/_control/held":
            return self._json({"held": self.fake.held.is_set()})
        if len(parts) >= 5 and parts[:2] == ["api", "models"] and parts[4] in ("revision", "tree"):
            return self._api("/".join(parts[2:4]), parts[4])
        if len(parts) >= 5 and parts[2] == "resolve":
            repo, rel = "/".join(parts[:2]), "/".join(parts[4:])
            if os.path.isfile(os.path.join(self.fake.repo_dir(repo), *rel.split("/"))):
                return self._file(os.path.join(self.fake.repo_dir(repo), *rel.split("/")), self.fake.commit(repo))
            return self._missing(path)
        if parts[0] == "files" and len(parts) > 1:
            full = os.path.join(self.fake.root, *parts)
            if os.path.isfile(full):
                return self._file(full, None)
        return self._missing(path)

    def _api(self, repo: str, what: str):
        if not os.path.isdir(self.fake.repo_dir(repo)):
            return self._missing(repo)
        files = self.fake.files(repo)
        if what == "revision":
            return self._json({"id": repo, "modelId": repo, "sha": self.fake.commit(repo), "private": False,
                               "siblings": [{"rfilename": f} for f in files]})
        base = self.fake.repo_dir(repo)
        return self._json([{"type": "file", "path": f, "size": os.path.getsize(os.path.join(base, f)),
                            "oid": _etag(os.path.join(base, f))[:40]} for f in files])

    def _file(self, full: str, commit: str | None):
        size = os.path.getsize(full)
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start = int(rng[6:].split("-")[0] or 0)
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        self.send_response(206 if rng else 200)
        self.send_header("Content-Length", str(size - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{_etag(full)}"')
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        if commit:
            self.send_header("X-Repo-Commit", commit)
        self.end_headers()
        if self.command == "HEAD":
            return
        rel = full.replace(os.sep, "/")
        with open(full, "rb") as f:
            f.seek(start)
            data = f.read()
        cut = next((self.fake.cut.pop(k) for k in list(self.fake.cut) if rel.endswith("/" + k)), None)
        hold = next((n for k, n in list(self.fake.hold.items()) if rel.endswith("/" + k)), None)
        if cut is not None:
            self.wfile.write(data[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if hold is not None:
            self.wfile.write(data[:hold])
            self.wfile.flush()
            self.fake.held.set()
            self.fake.released.wait()
            data = data[hold:]
        self.wfile.write(data)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m testing.fake_hub")
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args(argv)
    os.makedirs(a.root, exist_ok=True)
    hub = FakeHub(a.root, a.port)
    print(f"fake hub on {hub.url} serving {hub.root}", flush=True)
    hub.server.serve_forever()


if __name__ == "__main__":
    main()
