"""The content hash of one component inside a safetensors file: what lets two checkpoints that carry
byte-identical VAEs or text encoders (fine-tunes of one base) share one pool entry.

    part_digest(path, prefix) -> (hex digest, bytes)

The digest covers, for every tensor under `prefix` in name order: its name with the prefix cut, its
dtype, its shape and its bytes. So a VAE stored under `first_stage_model.` in one checkpoint and under
`vae.` in another, or alone in a ComfyUI `vae/` file, is one digest when its tensors are the same.

Hashing reads the bytes once (sha256, about 1 GB/s a core; tensors in parallel threads, which
hashlib runs without the GIL). The answer is cached by the file's (device, inode, size, mtime) in this
process and in a JSON file in the user's cache folder (`$AITK_HASH_CACHE`, else
~/.cache/aitk/part_hashes.json), so a restart does not hash again. Torch-free.
"""
import hashlib
import json
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

CACHE_ENV = "AITK_HASH_CACHE"
CHUNK = 8 << 20                  # bytes read per call: bounded memory whatever the tensor's size
MAX_FILES = 4096                 # files the persistent cache remembers (the oldest are forgotten)
_lock = threading.Lock()
_memory: dict = {}               # file key -> {prefix: [digest, bytes]}
_loaded_from: str | None = None
stats = {"hashed_bytes": 0, "hashed_parts": 0, "hits": 0}     # what this process hashed (tests, benchmarks)


def cache_path() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "aitk", "part_hashes.json")


def file_key(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def part_digest(path: str, prefix: str = "") -> tuple:
    """(sha256 hex, bytes) of the tensors under `prefix` in the safetensors file at `path`."""
    from toolkit.models.formats.safetensors_header import check_file
    path = os.path.realpath(os.path.expanduser(path))
    key = file_key(os.stat(path))
    with _lock:
        _load()
        hit = _memory.get(key, {}).get(prefix)
        if hit is not None:
            stats["hits"] += 1
            return tuple(hit)
    header = check_file(path)
    digest, nbytes = _hash(header, prefix)
    with _lock:
        _load()
        _memory.setdefault(key, {})[prefix] = [digest, nbytes]
        _memory[key] = _memory.pop(key)          # newest last: the oldest are dropped first
        stats["hashed_bytes"] += nbytes
        stats["hashed_parts"] += 1
        _save()
    return digest, nbytes


def _hash(header, prefix: str) -> tuple:
    names = sorted(n for n in header.tensors if n.startswith(prefix))
    fd = os.open(header.path, os.O_RDONLY)
    try:
        local = threading.local()

        def one(name):
            info = header.tensors[name]
            h = hashlib.sha256()
            if getattr(local, "buf", None) is None:       # one buffer per thread, read into again and again
                local.buf = bytearray(CHUNK)
            view = memoryview(local.buf)
            offset, end = header.data_start + info.begin, header.data_start + info.end
            while offset < end:
                n = os.preadv(fd, [view[:min(CHUNK, end - offset)]], offset)
                if not n:
                    raise OSError(f"{os.path.basename(header.path)}: {name} is truncated")
                h.update(view[:n])
                offset += n
            return h.digest()
        workers = min(8, os.cpu_count() or 1)
        with ThreadPoolExecutor(workers) as pool:
            digests = list(pool.map(one, names))
    finally:
        os.close(fd)
    total = hashlib.sha256()
    nbytes = 0
    for name, d in zip(names, digests):
        info = header.tensors[name]
        total.update(json.dumps([name[len(prefix):], info.dtype, list(info.shape)]).encode() + d)
        nbytes += info.nbytes
    return total.hexdigest(), nbytes


def _load():
    """The persistent cache, read once per cache file (a test may point $AITK_HASH_CACHE elsewhere)."""
    global _loaded_from
    path = cache_path()
    if _loaded_from == path:
        return
    _memory.clear()
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if isinstance(doc, dict):
            _memory.update({k: v for k, v in doc.items() if isinstance(v, dict)})
    except (OSError, ValueError):
        pass                    # none yet, or unreadable: hashed again and rewritten
    _loaded_from = path


def _save():
    """Merged with what another process wrote since, written whole to a temporary sibling, then renamed:
    a reader never sees half a file."""
    path = cache_path()
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        for k, v in (doc.items() if isinstance(doc, dict) else ()):
            if isinstance(v, dict) and k not in _memory:
                _memory[k] = v
    except (OSError, ValueError):
        pass
    while len(_memory) > MAX_FILES:
        _memory.pop(next(iter(_memory)))
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".part_hashes.", dir=os.path.dirname(path))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(_memory, f)
        os.replace(tmp, path)
    except OSError:
        pass                    # a read-only home: the process cache still holds it


def forget_process_cache():
    """Drop what this process remembers (a test of the persistent cache: as after a restart)."""
    global _loaded_from
    with _lock:
        _memory.clear()
        _loaded_from = None
