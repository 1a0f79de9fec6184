"""The tiny-model writer (toolkit/models/tiny): atomic folders, reuse, concurrency, pairs, the CLI
and `tiny:<arch>` names. (Every arch's own tiny instance is checked in test_arch_contract.py.)"""
from __future__ import annotations

import os
import threading

import pytest

from toolkit.models import tiny as tm


def test_sample_settings_are_copies_and_unknown_archs_fail():
    for arch in tm.tiny_archs():
        settings = tm.sample_settings(arch)
        settings["num_inference_steps"] = 99
        assert tm.sample_settings(arch)["num_inference_steps"] != 99
    with pytest.raises(ValueError):
        tm.sample_settings("nope")


def test_tiny_names(tiny):
    assert tm.is_tiny("tiny:sd1") and not tm.is_tiny("org/repo") and not tm.is_tiny(None)
    assert tm.resolve_tiny("tiny:sd1", "sd1") == tiny("sd1")
    with pytest.raises(ValueError, match="names arch 'sd1'"):
        tm.resolve_tiny("tiny:sd1", "flux")
    with pytest.raises(ValueError, match="bad seed"):
        tm.resolve_tiny("tiny:sd1:x", "sd1")


def test_pairs_of_two_archs_link_only_what_they_share(tmp_path):
    """flux's T5 is Chroma's text_encoder (one recipe): linked; a component the archs build
    differently is refused rather than linked."""
    a, b = tm.make_shared_pair("flux", tmp_path / "flux", tmp_path / "zimage", 0, 0, arch_b="zimage",
                               share={"vae": "vae"})
    for name in os.listdir(a / "vae"):
        assert os.path.samefile(a / "vae" / name, b / "vae" / name)
    with pytest.raises(RuntimeError, match="differs"):
        tm.make_shared_pair("flux", tmp_path / "flux", tmp_path / "zimage", 0, 0, arch_b="zimage",
                            share={"text_encoder": "text_encoder"})
    with pytest.raises(ValueError, match="share"):
        tm.make_shared_pair("flux", tmp_path / "f2", tmp_path / "z2", 0, 0, arch_b="zimage", share={})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    cache: dict = {}

    def get(arch: str):
        if arch not in cache:
            cache[arch] = tm.make_tiny(arch, root / arch, seed=0)
        return cache[arch]
    return get


def test_existing_complete_folder_is_reused(built):
    folder = built("sd1")
    weights = folder / "unet" / "diffusion_pytorch_model.safetensors"
    before = weights.stat().st_mtime_ns, weights.stat().st_ino
    assert tm.make_tiny("sd1", folder, seed=0) == folder
    assert (weights.stat().st_mtime_ns, weights.stat().st_ino) == before
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")], "temp folders left behind"


def test_overwrite_and_foreign_folders(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError):
        tm.make_tiny("zimage", foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"

    # A half-written folder (no marker) is never taken for a complete model.
    half = tmp_path / "half"
    half.mkdir()
    (half / "model_index.json").write_text("{}")
    with pytest.raises(FileExistsError):
        tm.make_tiny("zimage", half)
    assert tm.make_tiny("zimage", half, overwrite=True) == half.absolute()
    assert (half / tm.MARKER_NAME).is_file() and (half / "transformer").is_dir()

    # An empty folder (e.g. made by the caller) is simply filled.
    empty = tmp_path / "empty"
    empty.mkdir()
    tm.make_tiny("zimage", empty)
    assert (empty / tm.MARKER_NAME).is_file()

    # A different tiny model in the folder is replaced, not returned.
    tm.make_tiny("sd1", empty)
    assert "StableDiffusionPipeline" in (empty / "model_index.json").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_cached_tiny(tmp_path, monkeypatch):
    monkeypatch.setenv("AITK_TINY_CACHE", str(tmp_path / "cache"))
    results: list = []
    errors: list = []
    barrier = threading.Barrier(2)

    def call():
        try:
            barrier.wait()
            results.append(tm.cached_tiny("flux", seed=3))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    expected = (tmp_path / "cache" / "flux-seed3").absolute()
    assert results == [expected, expected]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["flux-seed3"]  # no temp leftovers
    weights = expected / "transformer" / "diffusion_pytorch_model.safetensors"
    stamp = weights.stat().st_mtime_ns
    assert tm.cached_tiny("flux", seed=3) == expected
    assert weights.stat().st_mtime_ns == stamp
    assert tm.cached_tiny("flux", seed=3, root=str(tmp_path / "elsewhere")).parent.name == "elsewhere"


def test_cli(tmp_path, capsys):
    assert tm.main(["--arch", "sd1", "--out", str(tmp_path / "one"), "--seed", "2"]) == 0
    assert tm.main(["--pair", "sd1", "--out", str(tmp_path / "pair")]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [
        str((tmp_path / "one").absolute()),
        str((tmp_path / "pair" / "a").absolute()),
        str((tmp_path / "pair" / "b").absolute()),
    ]
    assert (tmp_path / "pair" / "b" / tm.MARKER_NAME).is_file()
