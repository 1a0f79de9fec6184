"""Where a component's files are: a local diffusers folder (+subfolder), a single file, or a hub repo
resolved to its local snapshot. Everything downstream reads local paths only."""
import json
import os
import re
from dataclasses import dataclass

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class SourceError(FileNotFoundError):
    """A source that cannot be read; the message names it."""


@dataclass(frozen=True)
class ResolvedSource:
    kind: str              # folder | file | hub
    path: str              # local folder root, or the file
    subfolder: str | None
    label: str             # what the user wrote (repo id or path), for messages and identity

    @property
    def component_dir(self) -> str:
        return os.path.join(self.path, self.subfolder) if self.subfolder else self.path


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def looks_like_repo_id(s: str) -> bool:
    return bool(REPO_ID.match(s)) and not s.startswith((".", "/", "~"))


def resolve_source(name_or_path: str, subfolder: str | None = None, *, allow_hub: bool = True) -> ResolvedSource:
    if not name_or_path or not isinstance(name_or_path, str):
        raise SourceError("no model source given")
    path = os.path.expanduser(name_or_path)
    if os.path.isfile(path):
        return ResolvedSource("file", os.path.abspath(path), None, name_or_path)
    if os.path.isdir(path):
        src = ResolvedSource("folder", os.path.abspath(path), subfolder, name_or_path)
        if subfolder and not os.path.isdir(src.component_dir):
            raise SourceError(f"{name_or_path}: has no subfolder {subfolder!r}")
        return src
    if not looks_like_repo_id(name_or_path):
        raise SourceError(f"{name_or_path}: no such file or folder")
    if not allow_hub:
        raise SourceError(f"{name_or_path}: is not a local path, and hub repos are not allowed here")
    return ResolvedSource("hub", _snapshot(name_or_path, subfolder), subfolder, name_or_path)


def _snapshot(repo_id: str, subfolder: str | None) -> str:
    """The local snapshot folder of `repo_id` holding `subfolder` (downloaded only when online)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    patterns = ["model_index.json", "*.json", "*.txt", "*.model"]
    patterns += [f"{subfolder}/*"] if subfolder else ["*.safetensors"]
    # what to do next, in the message itself: the UI and the CLI show it as it is
    todo = f"this model is not downloaded: run `hf download {repo_id}`, or pick a local model (GET /library)"
    try:
        folder = snapshot_download(repo_id, allow_patterns=patterns, local_files_only=hub_offline())
    except LocalEntryNotFoundError:
        if hub_offline():
            raise SourceError(f"{repo_id}: not in the local hub cache, and HF_HUB_OFFLINE is set; {todo}") from None
        raise SourceError(f"{repo_id}: not downloaded (not in the local hub cache, and the hub could not be "
                          f"reached); {todo}") from None
    except Exception as e:  # network, auth, missing repo
        # a connection that failed says what to do, not the HTTP library's exception (httpx.ConnectError ...)
        if isinstance(e, (OSError, TimeoutError)) or any(w in type(e).__name__ for w in ("Connect", "Timeout", "Network")):
            raise SourceError(f"{repo_id}: not downloaded (not in the local hub cache, and the hub could not be "
                              f"reached); {todo}") from None
        raise SourceError(f"{repo_id}: cannot be fetched from the hub: {type(e).__name__}: {e}") from None
    if subfolder and not os.path.isdir(os.path.join(folder, subfolder)):
        raise SourceError(f"{repo_id}: has no subfolder {subfolder!r}")
    return folder


def read_model_index(name_or_path: str, *, allow_hub: bool = True) -> dict:
    """A model's model_index.json (a local folder's, or a hub repo's from the cache or the hub), or {}."""
    path = os.path.expanduser(name_or_path or "")
    index = os.path.join(path, "model_index.json")
    if not os.path.isdir(path):
        if not (allow_hub and looks_like_repo_id(name_or_path or "")):
            return {}
        from huggingface_hub import hf_hub_download
        try:
            index = hf_hub_download(name_or_path, "model_index.json", local_files_only=hub_offline())
        except Exception:  # not cached offline, no such file, no network: the arch's defaults apply
            return {}
    try:
        with open(index, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def model_index_class(folder: str, role: str):
    """(library, class name) that model_index.json names for `role`, or None."""
    index = os.path.join(folder, "model_index.json")
    if not os.path.isfile(index):
        return None
    with open(index, encoding="utf-8") as f:
        entry = json.load(f).get(role)
    if isinstance(entry, (list, tuple)) and len(entry) == 2 and entry[0] and entry[1]:
        return entry[0], entry[1]
    return None


def component_config_class(component_dir: str):
    """(library, class name) that a component folder's own config names, or None: a diffusers
    config's `_class_name`, or a tokenizer config's `tokenizer_class`."""
    for name, library, key in (("scheduler_config.json", "diffusers", "_class_name"),
                               ("config.json", "diffusers", "_class_name"),
                               ("tokenizer_config.json", "transformers", "tokenizer_class")):
        path = os.path.join(component_dir, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                value = json.load(f).get(key)
            if value:
                return library, value
    return None


def component_present(name_or_path: str, role: str, subfolder: str) -> bool:
    """Whether a local model folder has this (optional) component; hub repos are assumed to."""
    path = os.path.expanduser(name_or_path)
    if not os.path.isdir(path):
        return not os.path.isfile(path)
    named = model_index_class(path, role)
    index = os.path.isfile(os.path.join(path, "model_index.json"))
    return (named is not None or not index) and os.path.isdir(os.path.join(path, subfolder))
