"""One hub repo into the hub cache, run as its own process by toolkit/downloads.py:

    python -m toolkit.hub_fetch REPO --cache-dir DIR [--revision REV] [--endpoint URL]

Its own process because huggingface_hub reads HF_HUB_OFFLINE once, at import, for the whole process:
the engine's processes stay offline for every model load, and this one, started only when a person
asks for a download, is told explicitly to go online (toolkit/downloads.py sets its environment;
HF_TOKEN and HF_ENDPOINT pass through). Killing it is the cancel: the files it finished stay in the
cache, and the one it was writing starts over on the next run (huggingface_hub names its `.incomplete`
blobs per process, so toolkit/downloads.py removes the one a killed run leaves).

Writes one JSON object a line on stdout: {"total": bytes to fetch}, {"done": bytes fetched so far},
then {"path": the snapshot folder} or {"error": one line}.
"""
import argparse
import json
import sys
import threading

_LOCK = threading.Lock()


def emit(**kw):
    with _LOCK:
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()


def byte_counter():
    """A tqdm class for snapshot_download: its bytes-written bar ("Reconstructing…", resumed bytes
    included) reports each update; its other bars (files, transfer) say nothing."""
    from huggingface_hub.utils import tqdm as hf_tqdm

    class Bytes(hf_tqdm):
        done = 0

        def __init__(self, *args, **kwargs):
            self.counts = str(kwargs.get("desc", "")).startswith("Reconstructing")
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

        def update(self, n=1):
            if self.counts and n:
                Bytes.done += int(n)
                emit(done=Bytes.done)
            return super().update(n)

    return Bytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m toolkit.hub_fetch")
    ap.add_argument("repo_id")
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("--revision", default=None)
    ap.add_argument("--endpoint", default=None)
    a = ap.parse_args(argv)
    from huggingface_hub import snapshot_download
    try:
        kw = dict(repo_id=a.repo_id, revision=a.revision, cache_dir=a.cache_dir, endpoint=a.endpoint)
        plan = snapshot_download(**kw, dry_run=True)
        emit(total=sum(f.file_size for f in plan if f.will_download))
        emit(path=snapshot_download(**kw, tqdm_class=byte_counter(), max_workers=4))
    except Exception as e:          # noqa: BLE001 - any failure is the download's one-line error
        e = e.__cause__ or e        # the dry run's DryRunError wraps the hub's answer (not found, gated)
        emit(error=f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
