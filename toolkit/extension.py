"""Extension discovery: every package under extensions_built_in/ (and a user extensions/)
exports `AI_TOOLKIT_EXTENSIONS`, a list of Extension classes. Importing an extension
package must stay cheap (no torch): the process class is imported by `get_process()`."""
import importlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTENSION_FOLDERS = ("extensions_built_in", "extensions")


class Extension:
    uid: str = ""
    name: str = ""

    @classmethod
    def get_process(cls):
        raise NotImplementedError


def get_all_extensions() -> list[type[Extension]]:
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    found = []
    for folder in EXTENSION_FOLDERS:
        base = os.path.join(ROOT, folder)
        if not os.path.isdir(base):
            continue
        for entry in sorted(os.listdir(base)):
            if entry.startswith((".", "_")) or not os.path.isfile(os.path.join(base, entry, "__init__.py")):
                continue
            module = importlib.import_module(f"{folder}.{entry}")
            found.extend(getattr(module, "AI_TOOLKIT_EXTENSIONS", []))
    return found


def get_all_extensions_process_dict() -> dict[str, type[Extension]]:
    """uid -> Extension class (later folders override earlier: a user extension can replace a built-in)."""
    return {ext.uid: ext for ext in get_all_extensions()}
