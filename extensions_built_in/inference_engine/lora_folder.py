"""The engine's LoRA folder (`engine.lora_folder`): requests name LoRA files relative to it, GET /loras
and A1111's /sdapi/v1/loras list it, and `<lora:name:weight>` in an A1111 prompt picks from it.
Listing reads headers only (toolkit/lora_headers.py): this process never imports torch."""
import os
import re

from toolkit import lora_headers
from toolkit.errors import ConfigError

# A1111's extra-network syntax: <lora:name> or <lora:name:weight> (a further :arg, the text-encoder
# weight, is accepted and ignored: one scale per LoRA here)
PROMPT_TAG = re.compile(r"<lora:([^:<>]+)(?::([^:<>]*))?(?::[^<>]*)?>", re.IGNORECASE)


def display(folder: str | None) -> str | None:
    """The folder as shown to clients: the home folder as ~."""
    if not folder:
        return None
    home = os.path.expanduser("~")
    return "~" + folder[len(home):] if folder == home or folder.startswith(home + os.sep) else folder


def lora_keys(model: dict) -> list:
    """(key, value) of every LoRA path a model dict names: model.lora_path and model.loras[i].path."""
    out = [("model.lora_path", model.get("lora_path"))]
    loras = model.get("loras")
    if isinstance(loras, list):
        out += [(f"model.loras[{i}].path", e.get("path")) for i, e in enumerate(loras) if isinstance(e, dict)]
    return out


def resolve_paths(model, folder: str | None):
    """A copy of `model` whose relative LoRA paths lie under `folder` (absolute); one that leaves it
    (`..`) is refused, naming its key. Absolute paths are left to check_paths (engine.model_roots),
    and without a folder relative paths are left as they are."""
    if not isinstance(model, dict) or not folder:
        return model
    root = os.path.normpath(folder)

    def under(key, value):
        if not isinstance(value, str) or not value or os.path.isabs(value) or value.startswith("~"):
            return value
        full = os.path.normpath(os.path.join(root, value))
        if not full.startswith(root + os.sep):
            raise ConfigError(key, "leaves the LoRA folder (engine.lora_folder): name a file inside it")
        return full

    out = dict(model)
    if "lora_path" in out:
        out["lora_path"] = under("model.lora_path", out["lora_path"])
    if isinstance(out.get("loras"), list):
        out["loras"] = [{**e, "path": under(f"model.loras[{i}].path", e["path"])} if isinstance(e, dict) and "path" in e
                        else e for i, e in enumerate(out["loras"])]
    return out


def check_files(mc):
    """Each LoRA of a validated ModelConfig read as a LoRA for its arch, from the header alone, before
    the request is queued: an unreadable, truncated or other arch's file is a ConfigError naming its key."""
    for i, ref in enumerate(mc.loras):
        try:
            lora_headers.check_lora(os.path.expanduser(ref.path), mc.arch)
        except ValueError as e:                    # HeaderError is one
            raise ConfigError(mc.lora_key(i), str(e).replace(os.path.expanduser(ref.path), os.path.basename(ref.path))) from None


def listing(folder: str | None, arch: str | None = None, metadata: bool = False) -> dict:
    """GET /loras: every LoRA file of the folder, described from its header. With `arch`, the files
    guessed to be that arch's and those no arch claims (a guess can miss; a client shows them as
    unknown rather than hiding a LoRA that may work); unreadable files are always listed."""
    loras = lora_headers.list_loras(folder, metadata) if folder and os.path.isdir(folder) else []
    if arch is not None:
        loras = [d for d in loras if d.get("arch") in (arch, None)]
    return {"folder": display(folder), "loras": loras}


def parse_prompt(prompt: str, folder: str | None, field: str = "prompt") -> tuple[str, list]:
    """`<lora:name:weight>` tags out of a prompt: (the prompt without them, [{path, scale}]) with each
    path relative to `folder` (the adapter's name is the loader's to choose: two folders may hold files
    of one basename). A name given twice adds up its weights (A1111 applies both). An
    unknown name, a bad weight, or a tag without a folder is a ConfigError naming `field`."""
    found: dict = {}
    for m in PROMPT_TAG.finditer(prompt):
        name, weight = m[1].strip(), (m[2] or "").strip()
        if not folder:
            raise ConfigError(field, f"<lora:{name}> names a LoRA, but this engine has no LoRA folder "
                              "(engine.lora_folder)")
        try:
            scale = float(weight) if weight else 1.0
        except ValueError:
            raise ConfigError(field, f"<lora:{name}:{weight}>: the weight must be a number") from None
        try:
            rel = lora_headers.find_lora(folder, name)
        except LookupError as e:
            raise ConfigError(field, f"<lora:{name}>: {e}") from None
        entry = found.setdefault(rel, {"path": rel, "scale": 0.0})
        entry["scale"] += scale
    stripped = re.sub(r"[ \t]{2,}", " ", PROMPT_TAG.sub("", prompt)).strip()
    return stripped, list(found.values())
