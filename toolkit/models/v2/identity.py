"""A component's identity: everything that decides the resident module's values."""
import os
from dataclasses import dataclass

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


@dataclass(frozen=True)
class ComponentIdentity:
    role: str            # transformer, unet, text_encoder, text_encoder_2, tokenizer, vae, scheduler, ...
    cls: str             # fully qualified class actually loaded
    source: str          # resolved local folder/file, or hub repo id
    subfolder: str | None
    weights: tuple       # (realpath, size, mtime_ns) of every weight file read; same blob -> same tuple
    dtype: str | None
    qtype: str | None
    lora: tuple = ()     # merged LoRA files (path fingerprint, scale)

    @property
    def key(self) -> str:
        """Stable string key: weights rather than the path that named them, so two folders that
        point at one file share it; the config source matters only when there are no weights."""
        what = self.weights if self.weights else (self.source, self.subfolder)
        return repr((self.role, self.cls, what, self.dtype, self.qtype, self.lora))


def fingerprint_files(paths) -> tuple:
    out = []
    for p in sorted(set(os.path.realpath(p) for p in paths)):
        st = os.stat(p)
        out.append((p, st.st_size, st.st_mtime_ns))
    return tuple(out)


def weight_files_in(folder: str) -> list[str]:
    if not os.path.isdir(folder):
        return []
    return [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(WEIGHT_SUFFIXES)]
