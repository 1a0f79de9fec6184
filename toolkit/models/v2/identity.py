"""A component's identity: everything that decides the resident module's values."""
import os
import re
from dataclasses import dataclass, field

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


@dataclass(frozen=True)
class ComponentIdentity:
    role: str            # transformer, unet, text_encoder, text_encoder_2, tokenizer, vae, scheduler, ...
    cls: str             # fully qualified class actually loaded
    source: str          # resolved local folder/file, or hub repo id
    subfolder: str | None
    weights: tuple       # (file id, size, mtime_ns) of every weight file read; see fingerprint_files
    dtype: str | None
    qtype: str | None
    fmt: str = "native"  # storage format read: "native" (diffusers/transformers) or a reader's format_name
    paths: tuple = field(default=(), compare=False)   # where the weights were read (for inspection, not identity)

    @property
    def key(self) -> str:
        """Stable string key: the files' identities rather than the paths that named them, so two
        folders that point at one file share it. The role is not part of it: Flux's `text_encoder_2`
        and Chroma's `text_encoder` are one T5 when their files are one."""
        return repr((self.cls, self.weights, self.dtype, self.qtype, self.fmt))

    @property
    def public_key(self) -> str:
        """A short stable id of `key` that reveals no path: what /health's pool entries and a cluster
        replica's routing stats name a component by."""
        import hashlib
        return hashlib.sha1(self.key.encode()).hexdigest()[:12]


HUB_BLOB = re.compile(r"[/\\]blobs[/\\]([0-9a-f]{40}|[0-9a-f]{64})$")


def file_id(path: str, st: os.stat_result) -> str:
    """What makes two paths the same weights: a hub cache blob is named by its content hash (two
    repos holding one file share it); any other file by its inode, so links and other folders
    pointing at it share it, while a separate copy, fine-tuned or not, never does."""
    m = HUB_BLOB.search(path)
    return f"blob:{m.group(1)}" if m else f"inode:{st.st_dev}:{st.st_ino}"


def fingerprint_files(paths) -> tuple:
    """Sorted (file id, size, mtime_ns) of each distinct file: cheap (one stat each), and it
    changes when a file is rewritten."""
    out = set()
    for p in paths:
        real = os.path.realpath(p)
        st = os.stat(real)
        fid = file_id(real, st)
        out.add((fid, st.st_size, 0 if fid.startswith("blob:") else st.st_mtime_ns))
    return tuple(sorted(out))


def part_fingerprint(path: str, prefix: str, config=None) -> tuple:
    """One component inside a file people have (an all-in-one checkpoint, a ComfyUI component file):
    the content hash of its tensors (v2/content_hash.py: names relative to `prefix`, dtypes, shapes,
    bytes) and of the config it is built with. Two checkpoints carrying byte-identical VAEs give one
    identity, whatever the files' names, prefixes or inodes; its size is what the pool makes room for."""
    import hashlib
    import json

    from toolkit.models.v2.content_hash import part_digest
    digest, nbytes = part_digest(path, prefix)
    conf = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()
    return ((f"content:{digest}", nbytes, 0), (f"config:{conf}", 0, 0))


def content_fingerprint(folder: str, suffix: str = "") -> tuple:
    """A hash of a component folder's small files (all of them, or those ending in `suffix`):
    the whole identity of a tokenizer or scheduler, and the config part of a model's."""
    import hashlib
    h = hashlib.sha256()
    if os.path.isdir(folder):
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if os.path.isfile(path) and name.endswith(suffix) and not name.endswith(WEIGHT_SUFFIXES):
                h.update(name.encode() + b"\0")
                with open(path, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
    return (("content:" + h.hexdigest(), 0, 0),)


def weight_files_in(folder: str) -> list[str]:
    if not os.path.isdir(folder):
        return []
    return [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(WEIGHT_SUFFIXES)]
