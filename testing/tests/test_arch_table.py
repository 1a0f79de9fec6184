"""docs/archs.md's "What each arch reads" table is the registry's: each arch's modality, tasks, the
single files it reads (ComfyUI `diffusion_models/`, `text_encoders/`, `vae/`, A1111 checkpoints: each
SingleFile's layout name), GGUF and LoRA formats. An arch added without its row fails here.
Regenerate: `python -m testing.tests.test_arch_table`."""
import os
import re

from toolkit.models.arch import DENOISER
from toolkit.models.registry import ARCHS

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "archs.md")
BEGIN = "<!-- arch table: python -m testing.tests.test_arch_table -->"
END = "<!-- end of arch table -->"


def _files(spec) -> str:
    if spec.file_layouts is not None:         # its own readers (Krea 2's ComfyUI layouts)
        return "its own layouts: " + ", ".join(f"`{n}`" for n in spec.file_layouts.labels)
    kinds = [("denoiser " if c.kind == DENOISER else "") + f"`{c.single_file.kind}`"
             for c in spec.components if c.single_file is not None]
    return ", ".join(kinds)


def table() -> str:
    rows = ["| arch | modality | tasks | single files (ComfyUI, A1111) | GGUF | LoRA |", "|---|---|---|---|---|---|"]
    for name in ARCHS:
        spec = ARCHS[name]
        rows.append(f"| `{name}` | {spec.modality} | {', '.join(spec.task_names)} | {_files(spec)} "
                    f"| {'yes' if spec.gguf else ''} | {', '.join(spec.lora.formats) if spec.lora else ''} |")
    return "\n".join(rows)


def _documented(text: str) -> str:
    m = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), text, re.S)
    assert m, f"docs/archs.md has no {BEGIN!r} ... {END!r} block"
    return m.group(1).rstrip("\n")


def test_the_docs_table_is_the_registry():
    with open(DOC) as f:
        assert _documented(f.read()) == table(), "regenerate it: python -m testing.tests.test_arch_table"


if __name__ == "__main__":
    with open(DOC) as f:
        text = f.read()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    new = text[:start] + "\n" + table() + "\n" + text[end:]
    with open(DOC, "w") as f:
        f.write(new)
