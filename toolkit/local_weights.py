"""Whether an arch's weights are on this machine, asked without the network: a local folder, or a hub
repo in the local hub cache (HF_HOME / HF_HUB_CACHE). Listings use it so that they offer only models
that can load here; nothing is downloaded and no model library is imported."""
import os

REPO_ID_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/")


def cached_snapshot(repo_id: str) -> str | None:
    """The local hub cache's `main` snapshot of `repo_id` when it holds model_index.json, else None."""
    if not repo_id or repo_id.count("/") != 1 or not set(repo_id) <= REPO_ID_CHARS or repo_id.startswith((".", "/")):
        return None
    from huggingface_hub import try_to_load_from_cache
    try:
        path = try_to_load_from_cache(repo_id, "model_index.json")
    except Exception:  # a malformed cache entry: not usable here
        return None
    return os.path.dirname(path) if isinstance(path, str) else None


def weights_here(spec, variant: str | None = None) -> bool:
    """The arch's default weights for `variant` (its repo, or a local folder) are here: the folder, or
    the cached snapshot, has every component the loader will read (optional ones only when
    model_index.json names them)."""
    source = spec.default_source(variant)
    if not source:
        return False                          # no public repo: only a profile or a path names its weights
    folder = os.path.expanduser(source)
    if not os.path.isdir(folder):
        folder = cached_snapshot(source)
        if folder is None:
            return False
    index = _model_index(folder)
    for c in spec.components:
        entry = index.get(c.role)
        if c.optional and not (isinstance(entry, list) and entry and entry[0]):
            continue
        if not os.path.isdir(os.path.join(folder, c.folder)):
            return False
    return True


def _model_index(folder: str) -> dict:
    import json
    try:
        with open(os.path.join(folder, "model_index.json"), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
