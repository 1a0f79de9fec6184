"""Live previews decoded by a tiny autoencoder (toolkit/models/tiny_autoencoder.py): a tiny random
AutoencoderTiny written as people have it (ComfyUI's vae_approx/taesd_decoder.safetensors beside its
encoder, a .pth, a diffusers folder), found for tiny sd1 / sdxl / flux models, loaded once through the
funnel into the pool, decoding the `preview` frames; the projection without a file, with the setting
off, and when the file is broken. Waits are on the requests' done events."""
import io
import logging

import numpy as np
import pytest
import torch
from PIL import Image

from extensions_built_in.inference_engine.engine import Subscriber
from extensions_built_in.inference_engine.protocol import FrameReader
from testing.tests.test_batching import _wait, engine  # noqa: F401 (the in-process engine fixture)
from toolkit import library, model_trees
from toolkit.models import tiny_autoencoder
from toolkit.models.tiny.taesd import tiny_tae, write_tae
from toolkit.models.preview_image import encode_jpeg, preview_size, project_rgb

STREAM = {"latents": "raw", "preview": "x0", "preview_image": "jpeg", "every_n_steps": 1}


@pytest.fixture(autouse=True)
def empty_hub_cache(monkeypatch, tmp_path):
    """A hub cache of this test's own (empty unless it writes one): the machine's never answers."""
    import huggingface_hub.constants
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


def write_comfy(vae, folder, tae: str, ext=".safetensors"):
    """vae_approx/<tae>_decoder.<ext> and its encoder, in the original keys (madebyollin's files)."""
    return write_tae(vae, folder, tae, ext.lstrip("."))


def comfy_tree(tmp_path, vae, tae, ext=".safetensors"):
    root = tmp_path / "ComfyUI"
    (root / "models" / "checkpoints").mkdir(parents=True)
    write_comfy(vae, root / "models" / "vae_approx", tae, ext)
    return root


def _frames(req):
    """Every frame of `req`: the replay (its start frame) then each one live."""
    got = []
    replay = req.attach(Subscriber(lambda frame, _newest: got.extend(FrameReader().feed(frame))))
    got[:0] = [f for frame in replay for f in FrameReader().feed(frame)]
    return got


def _jpeg(payload) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(payload)).convert("RGB")).astype(np.float32)


def _model(tiny, arch):
    return {"arch": arch, "name_or_path": tiny(arch), "local_only": True}


def _sample(**over):
    return {"prompt": "a fox", "width": 96, "height": 64, "num_inference_steps": 3, "seed": 5, **over}


def _latent(header, payload):
    return torch.from_numpy(np.frombuffer(payload, dtype="<f2").reshape(header["shape"]).astype(np.float32))[0]


def _as_jpeg(rgb) -> np.ndarray:
    """What a preview frame of these pixels decodes to (the same encoder, so only the pixels differ)."""
    return _jpeg(encode_jpeg(rgb))


def _expected(vae, header, payload, w, h):
    """AutoencoderTiny.decode of a latent frame (the step's x0, in float16), resized as the preview is:
    the reference's own diffusers call, then the bilinear antialiased resize."""
    import torch.nn.functional as F
    with torch.no_grad():
        image = vae.decode(_latent(header, payload)[None]).sample[0]
    rgb = F.interpolate(((image + 1) / 2).clamp(0, 1)[None], size=(h, w), mode="bilinear", align_corners=False,
                        antialias=True)[0]
    return _as_jpeg((rgb * 255).round().to(torch.uint8).permute(1, 2, 0).contiguous())


def _run(eng, model, sample=None, stream=STREAM, rid="r1"):
    req = eng.submit(model, sample or _sample(), stream, rid)
    got = _frames(req)
    return req, got


def _check_decoded(vae, req, got, tae, size=(96, 64)):
    start = next(h for h, _ in got if h["type"] == "start")
    assert start["preview"]["decoder"] == tae and start["preview"]["tae"] == tae
    latents = {h["step"]: (h, p) for h, p in got if h["type"] == "latent"}
    previews = [(h, p) for h, p in got if h["type"] == "preview"]
    steps = [h["step"] for h, _ in previews]
    assert req.status == "ok" and steps == list(range(1, len(steps) + 1)) and len(steps) >= 3, steps
    for h, p in previews:
        assert h["decoder"] == tae and (h["width"], h["height"]) == size
        image = _jpeg(p)
        want = _expected(vae, *latents[h["step"]], *size)
        projected = _as_jpeg(project_rgb(_latent(*latents[h["step"]]), req.model.spec.latents.format, *size))
        err = np.abs(image - want).mean()
        assert err < 1.5, f"step {h['step']}: the JPEG is the decoder's picture (mean error {err:.2f})"
        assert np.abs(image - projected).mean() > 10 * max(err, 0.5), "not the projection"
        assert want.std() > 8, "a picture, not a flat fill"


def test_the_files_are_found_where_people_keep_them(tmp_path):
    vae = tiny_tae(4)
    comfy = comfy_tree(tmp_path, vae, "taesdxl")
    write_comfy(vae, comfy / "models" / "vae_approx", "taesd", ".pth")
    a1111 = tmp_path / "webui" / "models"
    (a1111 / "Stable-diffusion").mkdir(parents=True)
    write_comfy(vae, a1111 / "VAE-approx", "taesd")
    plain = tmp_path / "plain"
    vae.save_pretrained(str(plain / "vae_approx" / "taef1"))
    assert tiny_autoencoder.find("taesdxl", [str(comfy)]).path.endswith("taesdxl_decoder.safetensors")
    found = tiny_autoencoder.find("taesd", [str(comfy)])
    assert found.path.endswith("taesd_decoder.pth") and found.layout == "file", "never taesdxl's, nor an encoder"
    assert tiny_autoencoder.find("taesd", [str(a1111.parent)]).path.endswith("VAE-approx/taesd_decoder.safetensors")
    assert tiny_autoencoder.find("taef1", [str(plain)]).layout == "diffusers"
    assert tiny_autoencoder.find("taesd3", [str(comfy), str(plain)]) is None
    assert tiny_autoencoder.find(None, [str(comfy)]) is None
    assert model_trees.hint(model_trees.tree_of(str(comfy)), "vae_approx") == model_trees.VAE_APPROX


def test_the_hub_repo_is_found_in_the_local_cache_after_the_folders(empty_hub_cache, tmp_path):
    snapshot = empty_hub_cache / "models--madebyollin--taesd" / "snapshots" / "abc123"
    tiny_tae(4).save_pretrained(str(snapshot))
    (empty_hub_cache / "models--madebyollin--taesd" / "refs").mkdir()
    (empty_hub_cache / "models--madebyollin--taesd" / "refs" / "main").write_text("abc123")
    found = tiny_autoencoder.find("taesd", [])
    assert found == tiny_autoencoder.TaeFile("taesd", str(snapshot), "diffusers")
    assert tiny_autoencoder.load(found).config.latent_channels == 4
    comfy = comfy_tree(tmp_path, tiny_tae(4), "taesd")
    assert tiny_autoencoder.find("taesd", [str(comfy)]).layout == "file", "a model folder's file first"
    assert tiny_autoencoder.find("taesdxl", []) is None


@pytest.mark.parametrize("layout", ["safetensors", "pth", "diffusers", "diffusers_file"])
def test_each_layout_reads_as_the_same_decoder(tmp_path, layout):
    from safetensors.torch import save_file
    vae = tiny_tae(16, seed=3)
    if layout == "diffusers":
        path = tmp_path / "taef1"
        vae.save_pretrained(str(path))
        found = tiny_autoencoder.TaeFile("taef1", str(path), "diffusers")
    elif layout == "diffusers_file":           # the hub repo's weights file alone (sd.cpp's --taesd)
        path = tmp_path / "taef1.safetensors"
        save_file({k: v.contiguous() for k, v in vae.state_dict().items()}, str(path))
        found = tiny_autoencoder.TaeFile("taef1", str(path), "file")
    else:
        path = write_comfy(vae, tmp_path, "taef1", "." + layout)
        found = tiny_autoencoder.TaeFile("taef1", str(path), "file")
    decoder = tiny_autoencoder.load(found)
    assert decoder is not None and decoder.config.latent_channels == 16
    assert decoder._aitk_identity.role == tiny_autoencoder.ROLE
    x = torch.randn(1, 16, 6, 5)
    with torch.no_grad():
        assert torch.allclose(decoder.decode(x).sample, vae.decode(x).sample, atol=1e-5)


def test_sd1_previews_are_the_tae_decode_of_x0_and_it_loads_once(engine, tiny, tmp_path):
    vae = tiny_tae(4)
    eng = engine(max_batch=1, model_folders=[str(comfy_tree(tmp_path, vae, "taesd"))])
    req, got = _run(eng, _model(tiny, "sd1"))
    again, got2 = _run(eng, _model(tiny, "sd1"), _sample(seed=6), rid="r2")
    sd2, got3 = _run(eng, _model(tiny, "sd2"), rid="r3")       # SD 2's latent space is SD 1's: the same TAESD
    engine.start(eng)
    _wait([req, again, sd2])
    for r, g in ((req, got), (again, got2), (sd2, got3)):
        _check_decoded(vae, r, g, "taesd")
    pool = eng.worker.core.pool
    assert len(pool.holds(tiny_autoencoder.ROLE)) == 1, "one pool component, resident with the model"
    assert tiny_autoencoder.ROLE in pool.last_build["reused"], "the sd2 build found it in the pool"


def test_sdxl_from_a_diffusers_folder_and_flux_from_comfyui_files(engine, tiny, tmp_path):
    sdxl_vae, flux_vae = tiny_tae(4, seed=1), tiny_tae(16, seed=2)
    plain = tmp_path / "plain"
    sdxl_vae.save_pretrained(str(plain / "vae_approx" / "taesdxl"))
    comfy = comfy_tree(tmp_path, flux_vae, "taef1")
    eng = engine(max_batch=1, model_folders=[str(plain), str(comfy)])
    sdxl, got_sdxl = _run(eng, _model(tiny, "sdxl"), rid="x1")
    flux, got_flux = _run(eng, _model(tiny, "flux"), rid="f1")
    engine.start(eng)
    _wait([sdxl, flux])
    _check_decoded(sdxl_vae, sdxl, got_sdxl, "taesdxl")
    _check_decoded(flux_vae, flux, got_flux, "taef1")       # packed latents, unpacked before decoding


def _projected(req, got):
    start = next(h for h, _ in got if h["type"] == "start")
    previews = [h for h, _ in got if h["type"] == "preview"]
    assert req.status == "ok" and len(previews) >= 3
    assert all(h["decoder"] == "projection" and (h["width"], h["height"]) == preview_size(96, 64) for h in previews)
    return start["preview"]


def test_without_a_file_or_with_the_setting_off_previews_are_projected(engine, tiny, tmp_path):
    off = engine(max_batch=1, model_folders=[str(comfy_tree(tmp_path, tiny_tae(4), "taesd"))],
                 preview_decoder="projection")
    none = engine(max_batch=1)
    a, got_a = _run(off, _model(tiny, "sd1"))
    b, got_b = _run(none, _model(tiny, "sd1"))
    engine.start(off)       # one engine at a time: the funnel's interceptor is per process
    _wait([a])
    engine.start(none)
    _wait([b])
    for req, got in ((a, got_a), (b, got_b)):
        assert _projected(req, got) == {**req.model.spec.latents.preview(), "decoder": "projection"}
    assert not off.worker.core.pool.holds(tiny_autoencoder.ROLE)
    from toolkit.models.registry import ARCHS
    assert off.preview_of(ARCHS["sd1"])["decoder"] == "projection" and off.preview_of(ARCHS["sd1"])["tae"] == "taesd"
    assert none.preview_of(ARCHS["wan21"])["tae"] is None


def test_a_broken_file_falls_back_to_the_projection_logged_once(engine, tiny, tmp_path, caplog):
    folder = tmp_path / "ComfyUI" / "models"
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "vae_approx").mkdir()
    (folder / "vae_approx" / "taesd_decoder.pth").write_bytes(b"not a pickle")
    eng = engine(max_batch=1, model_folders=[str(folder)])
    with caplog.at_level(logging.WARNING, logger=tiny_autoencoder.__name__):
        a, got_a = _run(eng, _model(tiny, "sd1"))
        b, got_b = _run(eng, _model(tiny, "sd2"), rid="r2")      # another holder, the same file
        engine.start(eng)
        _wait([a, b])
    assert _projected(a, got_a)["decoder"] == "taesd", "the engine found a file; its frames say what ran"
    _projected(b, got_b)
    assert len([r for r in caplog.records if "taesd_decoder.pth" in r.getMessage()]) == 1


def test_the_library_lists_vae_approx_files(tmp_path):
    comfy = comfy_tree(tmp_path, tiny_tae(16), "taef1")
    entries = [e for e in library.scan_folder(str(comfy)) if e["kind"] == "vae_approx"]
    by_part = {e["part"]: e for e in entries}
    assert set(by_part) == {"decoder", "encoder"}
    decoder = by_part["decoder"]
    assert decoder["tae"] == "taef1" and decoder["latent_channels"] == 16 and decoder["complete"]
    assert {"flux", "zimage", "chroma"} <= set(decoder["archs"]) and "sdxl" not in decoder["archs"]
    plain = tmp_path / "plain"
    tiny_tae(4).save_pretrained(str(plain / "vae_approx" / "taesd"))       # a plain folder's, a diffusers folder
    (entry,) = library.scan_folder(str(plain))
    assert entry["kind"] == "vae_approx" and entry["tae"] == "taesd" and entry["latent_channels"] == 4
    assert entry["archs"] == ["pixart", "sd1", "sd2"] and entry["complete"]      # PixArt: SD 1.5's latents


def test_the_setting_is_checked_by_name():
    from extensions_built_in.inference_engine.engine_settings import EngineSettings
    from toolkit.errors import ConfigError
    assert EngineSettings.from_dict({}).preview_decoder == "auto"
    assert EngineSettings.from_dict({"preview_decoder": "projection"}).preview_decoder == "projection"
    with pytest.raises(ConfigError) as e:
        EngineSettings.from_dict({"preview_decoder": "taesd"})
    assert e.value.key == "engine.preview_decoder"


def test_which_tae_fits_is_a_fact_of_the_latent_space():
    from toolkit.models.registry import ARCHS
    tae = {name: spec.latents.format.tae if spec.latents.format else None for name, spec in ARCHS.items()}
    assert tae["sd1"] == tae["sd2"] == "taesd" and tae["sdxl"] == "taesdxl" and tae["sd3"] == "taesd3"
    assert {tae[a] for a in ("flux", "flux_kontext", "chroma", "zimage", "lumina2")} == {"taef1"}
    assert not any(tae[a] for a, spec in ARCHS.items() if spec.modality != "image"), "no video TAE class yet"
    assert set(tiny_autoencoder.known()) == {t for t in tae.values() if t}
    assert ARCHS["sdxl"].public()["preview"]["tae"] == "taesdxl"
