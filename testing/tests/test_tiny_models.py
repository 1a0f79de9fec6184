"""Tests for testing.tiny_models: every tiny pipeline reloads offline and runs on the CPU."""

from __future__ import annotations

import os

# Before anything imports huggingface_hub: nothing here may touch the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import functools
import pathlib
import threading

import numpy as np
import pytest
import torch

from testing import tiny_models as tm

PROMPT = "a photo of a cat sitting on a red mat"

EXPECTED_PIPELINE = {
    "zimage": "ZImagePipeline",
    "flux": "FluxPipeline",
    "sd1": "StableDiffusionPipeline",
    "wan21": "WanPipeline",
    "ace_step": "AceStepPipeline",
    "krea2": "Krea2Pipeline",
}

# What scheduler.step returns per step at sample_settings (2 inference steps).
EXPECTED_STEP_LATENT = {
    "zimage": (1, 16, 8, 8),  # B, C, H, W
    "flux": (1, 16, 64),  # B, packed 2x2 tokens (4*4), 16*4 channels
    "sd1": (1, 4, 8, 8),
    "wan21": (1, 16, 3, 8, 8),  # B, C, F, H, W; 9 frames -> 3 latent frames
    "ace_step": (1, 25, 64),  # B, T (1 s at 25/s), C
    "krea2": (1, 16, 64),  # B, packed 2x2 tokens, 16*4 channels
}
EXPECTED_STEP_CALLS = {"zimage": 2, "flux": 2, "sd1": 3, "wan21": 2, "ace_step": 2, "krea2": 2}  # PNDM: 2 steps = 3 calls


def _files(folder: pathlib.Path, component: str) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted((folder / component).rglob("*")) if p.is_file()
    }


def _safetensors(folder: pathlib.Path, component: str) -> dict[str, bytes]:
    return {k: v for k, v in _files(folder, component).items() if k.endswith(".safetensors")}


def _all_files(folder: pathlib.Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != tm.MARKER_NAME
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """make_tiny(arch, seed=0), built once per arch for the whole module."""
    root = tmp_path_factory.mktemp("tiny")
    cache: dict[str, pathlib.Path] = {}

    def get(arch: str) -> pathlib.Path:
        if arch not in cache:
            cache[arch] = tm.make_tiny(arch, root / arch, seed=0)
        return cache[arch]

    return get


def _wrap_step(pipe, record: list) -> None:
    original = pipe.scheduler.step

    @functools.wraps(original)  # keep the signature: SD inspects it for eta / generator
    def step(*args, **kwargs):
        out = original(*args, **kwargs)
        latent = out[0] if isinstance(out, tuple) else out.prev_sample
        record.append((tuple(latent.shape), bool(torch.isfinite(latent).all())))
        return out

    pipe.scheduler.step = step


def test_registry_and_settings():
    from toolkit.models.registry import ARCHS as REGISTRY
    assert set(tm.ARCHS) == set(REGISTRY)
    for arch in tm.ARCHS:
        settings = tm.sample_settings(arch)
        assert settings["num_inference_steps"] == 2
        assert "guidance_scale" in settings
        settings["num_inference_steps"] = 99  # a copy: callers may mutate it
        assert tm.sample_settings(arch)["num_inference_steps"] == 2
    assert tm.sample_settings("wan21")["num_frames"] == 9
    assert 0 < tm.sample_settings("ace_step")["audio_duration"] <= 2
    with pytest.raises(ValueError):
        tm.sample_settings("nope")


@pytest.mark.parametrize("arch", tm.ARCHS)
def test_reload_offline_and_generate(arch, built):
    from diffusers import DiffusionPipeline

    folder = built(arch)
    assert (folder / "model_index.json").is_file() and (folder / tm.MARKER_NAME).is_file()
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert total < 8_000_000, f"{arch} folder is {total} bytes"

    pipe = DiffusionPipeline.from_pretrained(folder, local_files_only=True)
    assert type(pipe).__name__ == EXPECTED_PIPELINE[arch]
    assert all(p.dtype == torch.float32 for c in pipe.components.values() if isinstance(c, torch.nn.Module)
               for p in c.parameters())
    pipe.set_progress_bar_config(disable=True)
    steps: list = []
    _wrap_step(pipe, steps)
    settings = tm.sample_settings(arch)

    def run(**extra):
        return pipe(prompt=PROMPT, generator=torch.Generator("cpu").manual_seed(0), **settings, **extra)

    if arch == "ace_step":
        out = run()
        audio = out.audios
        assert isinstance(audio, torch.Tensor)
        samples = int(settings["audio_duration"] * pipe.sample_rate)
        assert pipe.sample_rate == 48000 and pipe.latents_per_second == 25.0
        assert tuple(audio.shape) == (1, 2, samples)
        assert torch.isfinite(audio).all() and audio.abs().max() > 0
    elif arch == "wan21":
        out = run()
        frames = out.frames
        assert isinstance(frames, np.ndarray) and frames.shape == (1, 9, 64, 64, 3)
        assert np.isfinite(frames).all()
    else:
        out = run(output_type="np")
        assert out.images.shape == (1, 64, 64, 3) and np.isfinite(out.images).all()
        steps.clear()
        image = run().images[0]  # default output: PIL
        assert image.size == (64, 64)

    assert [shape for shape, _ in steps] == [EXPECTED_STEP_LATENT[arch]] * EXPECTED_STEP_CALLS[arch]
    assert all(finite for _, finite in steps)


@pytest.mark.parametrize("arch", tm.ARCHS)
def test_same_seed_same_bytes(arch, built, tmp_path):
    denoiser = tm.DENOISER_COMPONENTS[arch][0]
    first = built(arch)
    torch.manual_seed(1234)
    rng_before = torch.random.get_rng_state()
    again = tm.make_tiny(arch, tmp_path / "again", seed=0)
    assert torch.equal(torch.random.get_rng_state(), rng_before), "make_tiny must not disturb the caller's RNG"
    other = tm.make_tiny(arch, tmp_path / "other", seed=1)
    weights = _safetensors(first, denoiser)
    assert weights and weights == _safetensors(again, denoiser)
    assert _all_files(first) == _all_files(again)  # tokenizers and configs too
    assert _safetensors(other, denoiser) != weights


@pytest.mark.parametrize("arch", tm.ARCHS)
def test_shared_pair(arch, built, tmp_path):
    a, b = tm.make_shared_pair(arch, tmp_path / "a", tmp_path / "b")
    assert _all_files(a) == _all_files(built(arch))  # a is exactly make_tiny(arch, seed=0)
    for component in tm.SHARED_COMPONENTS[arch]:
        files = _files(a, component)
        assert files and files == _files(b, component), component
    for component in ("text_encoder", "vae"):
        assert _safetensors(a, component)
    for component in tm.DENOISER_COMPONENTS[arch]:
        wa, wb = _safetensors(a, component), _safetensors(b, component)
        assert wa.keys() == wb.keys() and wa != wb, component


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
