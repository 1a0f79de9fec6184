"""sample.vae_tiling (toolkit/models/vae_tiling.py): the VAE's own tiled decode for one call. `on` tiles,
`off` never does, `auto` tiles a decode whose floor does not fit the free memory and retries tiled a whole
decode that ran out of memory (an injected fault here: Faults.decode_oom). A call that tiles says so in a
status frame (stage `tiled`); the shared VAE is as it was after the call. The tiled image stays within a
stated bound of the whole one on the tiny SD1 model; the planner and the pre-flight count a tiled decode
only where the whole one fits nowhere.

The bound: the tiny SD1 VAE's tiles are 64 pixels (its sample_size; 8 latents, a quarter overlapping), so a
128x128 image is four tiles, each decoded with its own GroupNorm statistics and mid-block attention over
the tile alone: a random-weight decoder is far more sensitive to that than a trained one. Measured there
(seeds 0-3): mean difference 9.5-10.3 levels of 255, PSNR 23.7-24.4 dB, where two unrelated seeds differ
by 34-35 levels. Asserted: PSNR >= 20 dB, mean <= 16 levels, and under half the unrelated difference.
"""
import inspect
import re

import numpy as np
import pytest
from PIL import Image

from extensions_built_in.inference_engine.worker import Faults
from testing.engine_client import InProcessEngine
from toolkit import placement as P
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError
from toolkit.models.arch import VAE
from toolkit.models.base_model import BaseModel, get_model_class
from toolkit.models.registry import ARCHS
from toolkit.models.v2.planning import activation_floors, plan_first

MiB = 1 << 20


def _sample(size=128, seed=3, **kw):
    return {"prompt": "a lighthouse at dusk", "width": size, "height": size, "num_inference_steps": 2, "seed": seed,
            **kw}


def _body(tiny, **sample):
    return {"model": {"arch": "sd1", "name_or_path": tiny("sd1")}, "sample": _sample(**sample)}


def _pixels(frames) -> np.ndarray:
    result = next(h for h, _ in frames if h["type"] == "result")
    return np.asarray(Image.open(result["path"])).astype(np.float64)


def _statuses(frames) -> list:
    return [(h["stage"], h["message"]) for h, _ in frames if h["type"] == "status"]


# -- the setting ------------------------------------------------------------------------------------
def test_the_setting_defaults_to_auto_and_names_its_field():
    mc = ModelConfig.from_dict({"arch": "sd1", "name_or_path": "x"})
    assert GenerateImageConfig.from_dict({"prompt": "x"}, mc).vae_tiling == "auto"
    assert GenerateImageConfig.from_dict({"prompt": "x", "vae_tiling": "on"}, mc).vae_tiling == "on"
    with pytest.raises(ConfigError) as e:
        GenerateImageConfig.from_dict({"prompt": "x", "vae_tiling": "yes"}, mc)
    assert e.value.key == "sample.vae_tiling"
    fields = GenerateImageConfig.fields_for(mc.spec)
    assert fields["vae_tiling"]["choices"] == ["auto", "on", "off"]
    assert "vae_tiling" not in GenerateImageConfig.fields_for(ARCHS["stable_audio"])


def test_every_image_and_video_vae_has_a_tiled_decode():
    """What the floors assume: every image and video arch's VAE class sets diffusers' use_tiling and use_slicing."""
    for name, spec in ARCHS.items():
        vae = next((c for c in spec.components if c.kind == VAE), None)
        if vae is None or spec.modality not in ("image", "video"):
            continue
        source = inspect.getsource(vae.load_class().__init__)
        assert "self.use_tiling" in source and "self.use_slicing" in source, (name, vae.cls)


# -- the floors -------------------------------------------------------------------------------------
def _floors(size, batch=1, **sample):
    mc = ModelConfig.from_dict({"arch": "sd1", "name_or_path": "x", "dtype": "bf16"})
    gen = GenerateImageConfig.from_dict({"prompt": "x", "width": size, "height": size, **sample}, mc)
    whole = BaseModel.estimate_stage_bytes(mc, gen, "cuda", batch, tiled=False)
    tiled = BaseModel.estimate_stage_bytes(mc, gen, "cuda", batch, tiled=True)
    return mc, gen, whole, tiled


def test_a_tiled_decode_floor_holds_one_tile_of_one_item():
    _mc, _gen, whole, tiled = _floors(256)
    assert tiled == whole                                   # one tile: nothing to save
    _mc, gen, whole, tiled = _floors(1024, batch=2)
    out = 1024 * 1024 * 3 * 2 + 128 * 128 * 4 * 2           # each item's pixels and latents (bf16)
    assert whole["decode"] == 2 * (1024 * 1024 * 128 * 2 * 2) + 2 * out
    assert tiled["decode"] == 256 * 256 * 128 * 2 * 2 + 2 * out
    assert tiled["denoise"] == whole["denoise"]
    assert BaseModel.estimate_stage_bytes(_mc, gen, "cuda", 2) == whole                  # auto: whole
    on = GenerateImageConfig.from_dict({**gen.to_dict(), "vae_tiling": "on"}, _mc)
    assert BaseModel.estimate_stage_bytes(_mc, on, "cuda", 2) == tiled


def test_the_planner_counts_a_tiled_decode_only_where_the_whole_one_fits_nowhere():
    """auto keeps the whole decode with any placement that fits it (as ComfyUI moves weights before it tiles),
    and plans the tiled one only where none does; off is then refused."""
    mc, gen, whole, tiled = _floors(2048)
    unet, vae = P.GiB, 160 * MiB
    parts = [P.Part("unet", "denoiser", unet), P.Part("vae", "vae", vae)]
    estimate = BaseModel.estimate_stage_bytes
    floors = activation_floors(estimate, mc, gen, device="cuda")
    assert floors == [whole, tiled]

    def planned(room):
        plan = plan_first(parts, floors, budget=P.Budget(device_free=room + P.GiB, reserve=P.GiB))
        return plan.rung, plan.activation["decode"]
    assert planned(unet + vae + whole["decode"]) == ("resident", whole["decode"])
    assert planned(vae + whole["decode"]) == ("cpu_cache", whole["decode"])
    tight = unet + vae + max(tiled["denoise"], tiled["decode"])
    assert planned(tight) == ("resident", tiled["decode"])
    off = GenerateImageConfig.from_dict({**gen.to_dict(), "vae_tiling": "off"}, mc)
    with pytest.raises(P.PlacementError):
        plan_first(parts, activation_floors(estimate, mc, off, device="cuda"),
                   budget=P.Budget(device_free=tight + P.GiB, reserve=P.GiB))


# -- a holder's call ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sd1(tiny):
    return get_model_class("sd1")({"arch": "sd1", "name_or_path": tiny("sd1"), "local_only": True}).load_model()


def _run(holder, **sample):
    said = []
    gen = GenerateImageConfig.from_dict(_sample(**sample), holder.model_config)
    image = holder.generate_single(gen, on_status=lambda message, stage="status": said.append((stage, message)))
    return np.asarray(image).astype(np.float64), said


def test_tiled_decode_is_within_its_bound_of_the_whole_one_and_the_vae_is_left_as_it_was(sd1):
    vae = sd1.pipeline.vae
    before = {k: v for k, v in vars(vae).items() if not k.startswith("_")}
    whole, said = _run(sd1, vae_tiling="off")
    assert not [s for s in said if s[0] == "tiled"]
    tiled, said = _run(sd1, vae_tiling="on")
    assert [s for s in said if s[0] == "tiled"] == [("tiled", "decoding in tiles: sample.vae_tiling is on")]
    assert {k: v for k, v in vars(vae).items() if not k.startswith("_")} == before
    assert vae.use_tiling is False and vae.use_slicing is False and "decode" not in vars(vae)
    unrelated, _ = _run(sd1, vae_tiling="off", seed=103)
    diff = np.abs(tiled - whole)
    psnr = 10 * np.log10(255 ** 2 / np.mean((tiled - whole) ** 2))
    assert diff.mean() > 0                                   # four tiles really were decoded
    assert psnr >= 20 and diff.mean() <= 16, (psnr, diff.mean())
    assert diff.mean() < 0.5 * np.abs(unrelated - whole).mean()
    auto, said = _run(sd1)                                    # the host has room: auto decodes whole
    assert np.array_equal(auto, whole) and not [s for s in said if s[0] == "tiled"]


# -- through the engine -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = InProcessEngine(str(tmp_path_factory.mktemp("tiling")))
    yield eng
    eng.close()


def test_a_decode_out_of_memory_is_retried_tiled_under_auto(tiny, engine):
    on = engine.client.stream(_body(tiny, vae_tiling="on"))
    assert ("tiled", "decoding in tiles: sample.vae_tiling is on") in _statuses(on)
    engine.engine.faults.reset(decode_oom=1)
    frames = engine.client.stream(_body(tiny))
    assert frames[-1][0]["status"] == "ok"
    statuses = _statuses(frames)
    tiled = [i for i, s in enumerate(statuses) if s[0] == "tiled"]
    assert len(tiled) == 1 and statuses[tiled[0] - 1][0] == "decoding"
    assert statuses[tiled[0]][1] == ("decoding in tiles: the whole decode ran out of memory "
                                     "(injected out of memory during decoding)")
    assert np.array_equal(_pixels(frames), _pixels(on))     # the same tiled decode


def test_a_decode_out_of_memory_with_tiling_off_ends_the_request(tiny, engine):
    engine.engine.faults.reset(decode_oom=1)
    frames = engine.client.stream(_body(tiny, vae_tiling="off"))
    assert frames[-1][0]["status"] == "error"
    error = next(h for h, _ in frames if h["type"] == "error")["message"]
    assert error.startswith("out of memory in the decoding stage of "), error
    assert not [s for s in _statuses(frames) if s[0] == "tiled"]


def test_auto_tiles_a_decode_that_does_not_fit_the_device(tiny, tmp_path):
    """A 100 MiB simulated device (engine.reserve_gb 0): at 512x512 the tiny SD1's whole decode needs at least
    259 MiB (float32), its tiled one 67 MiB. Under auto the request is planned with the tiled floor and tiles as its
    decode starts; under off it is refused before it is queued."""
    eng = InProcessEngine(str(tmp_path / "small"), faults=Faults(device_mb=100), reserve_gb=0)
    try:
        frames = eng.client.stream(_body(tiny, size=512))
        refused = eng.client.post("/generate", json=_body(tiny, size=512, vae_tiling="off"))
    finally:
        eng.close()
    assert frames[-1][0]["status"] == "ok"
    tiled = [m for s, m in _statuses(frames) if s == "tiled"]
    assert len(tiled) == 1 and re.fullmatch(r"decoding in tiles: the whole decode needs at least \d+\.\d MiB, "
                                            r"more than the \d+\.\d MiB free", tiled[0]), tiled
    assert _pixels(frames).shape == (512, 512, 3)
    assert refused.status_code == 422 and refused.json()["field"] == "sample.width", refused.text
    assert "needs at least 259.1 MiB of activations" in refused.text
