"""The results feed: one entry per request that ended, whoever asked (native /generate, a detached
request, the compat routes, the CLI), numbered by `seq`, kept in a bounded ring and appended to
`.results.jsonl` beside the files it names (the output folder), so that a reader that was away (the
UI restarted, the engine restarted) finds what ended meanwhile. GET /results serves it.

An engine that starts on a folder with a feed file loads its newest `kept` entries and numbers on
from the last one, so `seq` only grows for a given output folder. No torch, no HTTP."""
import collections
import json
import os
import sys
import threading

from toolkit.media import atomic_path, mime_type

FILE_NAME = ".results.jsonl"
RESULTS_KEPT = 1000         # entries the ring holds (and the file keeps when it is compacted)
MAX_LIMIT = 1000            # the most entries one read returns
COMPACT_FACTOR = 2          # a file past COMPACT_FACTOR * kept lines is cut to its newest `kept` at start
FILE_KEYS = ("relpath", "kind", "ext", "bytes", "seed", "index", "width", "height", "num_frames", "fps", "duration", "audio")


def entry_for(req, seq: int, load_seconds: float | None) -> dict:
    """A finished engine.Request as its feed entry (the absolute `path` of its files left out: the
    relpaths are under the output folder, which GET /outputs serves)."""
    started, finished = req.started_at, req.finished_at
    files = [{**{k: r.get(k) for k in FILE_KEYS}, "mime": mime_type(r["relpath"])}
             for r in req.results]
    return {"seq": seq, "request_id": req.request_id, "status": req.status, "error": req.error,
            "api": req.api, "client": req.client,
            "model": req.model.to_dict(), "sample": req.sample.to_dict(),
            "seed": req.sample.seed, "width": req.sample.width, "height": req.sample.height,
            "files": files, "created_at": req.created_at, "started_at": started, "finished_at": finished,
            "timings": {"queue_s": (started - req.created_at) if started else None,
                        "run_s": (finished - started) if started and finished else None,
                        "load_s": load_seconds,
                        "total_s": (finished - req.created_at) if finished else None}}


class ResultsFeed:
    def __init__(self, folder: str, kept: int = RESULTS_KEPT):
        self.path = os.path.join(folder, FILE_NAME)
        self.kept = kept
        self._ring: collections.deque[dict] = collections.deque(maxlen=kept)
        self._lock = threading.Lock()
        self.last_seq = 0
        self._load()

    def record(self, make) -> dict:
        """Append `make(seq)` (the entry for the next seq): in the ring, then a line of the file (a
        failing disk costs the line, never the request's end: said on stderr)."""
        with self._lock:
            entry = make(self.last_seq + 1)
            self.last_seq = entry["seq"]
            self._ring.append(entry)
            try:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(entry, separators=(",", ":")) + "\n")
            except (OSError, TypeError, ValueError) as e:
                print(f"engine: results feed line {entry['seq']} not written to {self.path}: {e}",
                      file=sys.stderr, flush=True)
        return entry

    def read(self, after: int = 0, limit: int = 100) -> dict:
        """Entries with seq > `after`, oldest first, at most `limit`. `last_seq`: the newest seq (a reader
        whose cursor is past it reads a feed that started over: its folder's file was removed);
        `first_seq`: the oldest the ring still holds (entries between `after` and it are gone)."""
        with self._lock:
            entries = [e for e in self._ring if e["seq"] > after][:limit]
            first = self._ring[0]["seq"] if self._ring else self.last_seq + 1
            return {"entries": entries, "last_seq": self.last_seq, "first_seq": first,
                    "more": bool(entries) and entries[-1]["seq"] < self.last_seq}

    def _load(self):
        """The newest `kept` entries of the file (a torn last line, from a killed engine, is skipped);
        a file far past `kept` lines is rewritten with those only."""
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.readlines()
        except FileNotFoundError:
            return
        except OSError as e:
            print(f"engine: results feed {self.path} not read: {e}", file=sys.stderr, flush=True)
            return
        for line in lines:
            try:
                entry = json.loads(line)
                seq = int(entry["seq"])
            except (ValueError, KeyError, TypeError):
                continue
            if seq > self.last_seq:
                self._ring.append(entry)
                self.last_seq = seq
        if len(lines) > COMPACT_FACTOR * self.kept:
            try:
                with atomic_path(self.path) as tmp:
                    with open(tmp, "w", encoding="utf-8") as f:
                        f.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in self._ring)
            except OSError as e:
                print(f"engine: results feed {self.path} not compacted: {e}", file=sys.stderr, flush=True)
