"""Flex.1 alpha beside FLUX.1: one pipeline class, one set of roles, one file layout. What tells them apart is
the denoiser: its config in a diffusers folder (the library's listing), its shapes in a file or GGUF."""
import shutil

from toolkit.library import scan


def test_the_library_tells_a_flex1_folder_from_a_flux_one(tiny, tmp_path):
    root = tmp_path / "models"
    for arch in ("flux", "flex1"):
        shutil.copytree(tiny(arch), root / "pipes" / f"{arch}-tiny")
    entries = scan(folders=[str(root)], hub_cache=str(tmp_path / "nohub"))["entries"]
    found = {e["name"]: e["arch"] for e in entries if e["kind"] == "pipeline" and e.get("source") == "folder"}
    assert found == {"pipes/flux-tiny": "flux", "pipes/flex1-tiny": "flex1"}
