"""The placement planner (toolkit/placement.py): a pure function of numbers, tested on a table of real
model sizes (testing/placement_table.py) whose answers are reasoned out below, then its pieces: what a
request may ask (`model.placement`, the aliases), the out-of-memory retry's next rung, the refusals."""
import subprocess
import sys

import pytest

from testing.placement_table import ARCH_OF, CARDS, MODELS, answer, budget, cell
from toolkit.errors import ConfigError
from toolkit.placement import (CPU_CACHE, GiB, LAYERS, RESIDENT, STAGED, Budget, Part, PlacementError, lighter,
                               parse, plan, requested)

# Every card's budget is N - 1.5 GiB (0.5 GiB of CUDA context, 1 GiB engine.reserve_gb): 6.5, 10.5, 14.5,
# 22.5, 46.5, 78.5 GiB; the host's is 55 GiB. Peaks per rung, in GiB (sizes converted from GB: / 1.0737),
# each the largest stage (module docstring of toolkit/placement.py):
#
# FLUX.1 [dev] bf16: transformer 22.17, T5 8.87, CLIP 0.23, VAE 0.16; activations denoise 0.04, decode 0.51.
#   resident 31.42 + 0.51 = 31.93 | encoders cpu_cache: 22.33 + T5 8.87 = 31.20 | cpu_cache: transformer
#   22.17 + 0.04 = 22.21 | layers: T5 8.87 (the transformer streams 0.14 + 2 x 0.63) | host for those 31.4.
#   8: even T5 alone (8.87) is over 6.5: refused, naming text_encoder_2. 12, 16: layers (8.87).
#   24: cpu_cache (22.21 <= 22.5). 48, 80: resident.
# FLUX.1 [dev] FP8 (transformer 11.08, T5 FP8 4.55): resident 16.52 | encoders 15.79 | cpu_cache 11.12 |
#   layers 4.55.  8, 12: layers; 16: cpu_cache; 24 and up: resident.
# FLUX.1 [dev] GGUF Q4_K_S (transformer 6.34, T5 FP8 4.55): resident 11.78 | encoders 11.05 |
#   cpu_cache 6.38.  8, 12: cpu_cache (6.38 <= 6.5); 16 and up: resident.
# Wan 2.2 A14B (two experts 26.64 each, umT5 10.58, VAE 0.24; activations 0.73, 1.31): resident 65.10 |
#   encoders 64.10 | cpu_cache 27.37 | layers: umT5 10.58 | staged 27.37 | staged + layers 10.58. Host: the
#   cpu_cache and layers rungs keep 64.1, staged + layers 63.9 (over 55); staged keeps 26.6 while it reads.
#   8, 12: umT5 alone is over the budget (10.58 > 10.5): refused, naming text_encoder. 16, 24: layers would
#   fit the device but not the host: refused on the host, naming transformer. 48: staged (27.37). 80: resident.
# Qwen-Image (transformer 38.05, Qwen2.5-VL 15.44, VAE 0.24): resident 54.37 | encoders 53.73 |
#   cpu_cache 38.12 | layers 15.44 (host 53.7 <= 55).  8, 12, 16: the text encoder alone (15.44) is over:
#   refused. 24: layers. 48: cpu_cache. 80: resident.
# HunyuanVideo 1.5 (transformer 15.52, Qwen2.5-VL 15.44, glyph 0.41, VAE 1.17; activations 1.15, 2.44):
#   resident 34.98 | encoders 32.13 | cpu_cache 16.67 | layers 15.44.  8, 12, 16: refused (text encoder).
#   24: cpu_cache. 48, 80: resident.
# SDXL fp16 (UNet 4.78, CLIP-G 1.29, CLIP-L 0.23, VAE 0.16): resident 6.97 | encoders: 4.94 + 1.29 = 6.23.
#   8: encoders in cpu_cache; 12 and up: resident.
# Z-Image Turbo (transformer 11.46, Qwen3-4B 7.49, VAE 0.16): resident 19.61 | encoders 19.11 |
#   cpu_cache 11.50 | layers 7.49.  8: refused (text encoder 7.49 > 6.5). 12: layers. 16: cpu_cache.
#   24 and up: resident.
R, E, C, L, S = "resident", "encoders in cpu_cache", "cpu_cache", "denoiser in layers", "staged"
EXPECTED = {
    "FLUX.1 [dev] bf16": ("refused: text_encoder_2 (device)", L, L, C, R, R),
    "FLUX.1 [dev] FP8": (L, L, C, R, R, R),
    "FLUX.1 [dev] GGUF Q4_K_S": (C, C, R, R, R, R),
    "Wan 2.2 T2V A14B": ("refused: text_encoder (device)", "refused: text_encoder (device)",
                         "refused: transformer (host)", "refused: transformer (host)", S, R),
    "Qwen-Image": ("refused: text_encoder (device)",) * 3 + (L, C, R),
    "HunyuanVideo 1.5": ("refused: text_encoder (device)",) * 3 + (C, R, R),
    "SDXL": (E, R, R, R, R, R),
    "Z-Image Turbo": ("refused: text_encoder (device)", L, C, R, R, R),
}


@pytest.mark.parametrize("model", list(MODELS))
def test_the_table_of_real_models(model):
    got = tuple(cell(answer(model, card)) for card in CARDS)
    assert got == EXPECTED[model]


@pytest.mark.parametrize("model", list(MODELS))
def test_every_plan_fits_its_budget_and_no_faster_rung_does(model):
    parts, act, _ = MODELS[model]
    for card in CARDS:
        result = answer(model, card)
        if isinstance(result, PlacementError):
            continue
        assert result.device_peak <= budget(card).device and result.host_need <= budget(card).host
        assert result.placements and set(result.placements) == {p.role for p in parts}


def test_the_table_activations_are_the_arch_rows_floors():
    """The table's activations are what the arch rows estimate for their default requests (bf16 on CUDA),
    so the table moves when the estimate does."""
    from toolkit.config_modules import GenerateImageConfig, ModelConfig
    from toolkit.models.base_model import get_model_class
    for model, (_parts, act, _request) in MODELS.items():
        mc = ModelConfig.from_dict({"arch": ARCH_OF[model], "dtype": "bf16"})
        gen = GenerateImageConfig.from_dict({"prompt": "x"}, mc)
        floors = get_model_class(mc.arch).estimate_stage_bytes(mc, gen, device="cuda")
        for stage in ("denoise", "decode"):
            assert abs(floors[stage] - act[stage]) < 0.01 * GiB, (model, stage)


def test_with_more_host_memory_wan_streams_instead_of_refusing():
    """Wan 2.2 A14B's refusals on 16 and 24 GB cards were the host's 55 GiB: with 128 GiB of RAM it streams."""
    assert cell(answer("Wan 2.2 T2V A14B", 16, host_free=120 * GiB)) == L
    assert cell(answer("Wan 2.2 T2V A14B", 48, host_free=120 * GiB)) == C


def test_the_refusals_name_the_component_its_bytes_and_the_budget():
    err = answer("FLUX.1 [dev] bf16", 8)
    assert isinstance(err, PlacementError) and err.role == "text_encoder_2" and err.where == "device"
    text = str(err)
    assert "text_encoder_2 (8.9 GiB)" in text and "6.5 GiB budget" in text and "engine.reserve_gb" in text
    host = answer("Wan 2.2 T2V A14B", 24)
    assert host.where == "host" and host.role == "transformer" and host.need > host.budget
    assert "transformer (26.6 GiB)" in str(host) and "host's 55.0 GiB budget" in str(host)


def test_what_the_pool_holds_counts_as_room():
    """Bytes the pool holds on the device are this model's own or evictable: the budget counts them."""
    parts = [Part("transformer", "denoiser", 10 * GiB), Part("text_encoder", "text_encoder", 4 * GiB)]
    with pytest.raises(PlacementError):
        plan(parts, activation=0, budget=Budget(device_free=8 * GiB, reserve=GiB))
    assert plan(parts, activation=0, budget=Budget(device_free=8 * GiB, reserve=GiB, pool_device=6 * GiB)).rung == C
    assert plan(parts, activation=0, budget=Budget(device_free=8 * GiB, reserve=GiB, pool_device=10 * GiB)).rung == R
    # the host's side likewise: the pool's host copies are room for this plan's
    small_host = Budget(device_free=11 * GiB, reserve=GiB, host_free=12 * GiB, host_reserve=GiB)
    assert plan(parts, activation=0, budget=small_host).rung == S      # 14 GiB of cpu_cache copies do not fit 11
    assert plan(parts, activation=0, budget=Budget(**{**small_host.__dict__, "pool_host": 6 * GiB})).rung == C


def test_layers_costs_the_rest_and_two_groups():
    p = Part("transformer", "denoiser", 10 * GiB, blocks=10, block_bytes=GiB // 2, rest=5 * GiB)
    assert p.stage_cost(LAYERS, 1) == 6 * GiB
    assert p.stage_cost(LAYERS, 3) == 8 * GiB
    assert p.stage_cost(LAYERS, 100) == 10 * GiB          # never more than the whole
    assert p.stage_cost(CPU_CACHE) == p.stage_cost(STAGED) == 10 * GiB
    assert Part("vae", "vae", GiB, blocks=4, block_bytes=1).stage_cost(LAYERS) == GiB   # only denoisers stream


def test_a_request_placement_fixes_those_roles_and_auto_plans_the_rest():
    parts = MODELS["FLUX.1 [dev] bf16"][0]
    act = MODELS["FLUX.1 [dev] bf16"][1]
    got = plan(parts, activation=act, budget=budget(80), forced={"text_encoder_2": CPU_CACHE})
    assert got.placements == {"transformer": RESIDENT, "text_encoder": RESIDENT, "text_encoder_2": CPU_CACHE,
                              "vae": RESIDENT}
    everything = {p.role: LAYERS if p.kind == "denoiser" else STAGED for p in parts}
    asked = plan(parts, activation=act, budget=budget(12), forced=everything, groups={"transformer": 4})
    assert asked.rung == "as asked" and asked.groups == {"transformer": 4}
    with pytest.raises(PlacementError) as e:          # asked resident on a card it does not fit
        plan(parts, activation=act, budget=budget(16), forced={"transformer": RESIDENT})
    assert e.value.role == "transformer"


def test_loras_keep_auto_off_the_staged_rungs():
    """A staged component is re-read per stage: adapters injected into it would be lost, so a model with
    LoRAs is never staged by auto (Wan on 48 GB with 64 GiB of RAM: refused on the host instead)."""
    parts, act, _ = MODELS["Wan 2.2 T2V A14B"]
    assert plan(parts, activation=act, budget=budget(48)).rung == "staged"
    with pytest.raises(PlacementError) as e:
        plan(parts, activation=act, budget=budget(48), staged=False)
    assert e.value.where == "host"


def test_the_out_of_memory_retry_takes_the_next_lighter_rung():
    parts, act, _ = MODELS["FLUX.1 [dev] bf16"]
    steps = [plan(parts, activation=act, budget=budget(80))]
    while True:
        nxt = lighter(parts, steps[-1])
        if nxt is None:
            break
        assert nxt.device_peak < steps[-1].device_peak
        steps.append(nxt)
    assert [s.rung for s in steps] == ["resident", "encoders in cpu_cache", "cpu_cache", "denoiser in layers"]
    # from what the request asked too: its placements no longer bind the retry
    asked = plan(parts, activation=act, budget=budget(80), forced={p.role: RESIDENT for p in parts})
    assert lighter(parts, asked).rung == "encoders in cpu_cache"


def test_parse_model_placement():
    roles = {"transformer": "denoiser", "text_encoder": "text_encoder", "vae": "vae", "tokenizer": "tokenizer",
             "scheduler": "scheduler"}
    assert parse(None, roles) == "auto" and parse("staged", roles) == "staged"
    assert parse({"layers": 2}, roles) == {"layers": 2}
    assert parse({"text_encoder": "cpu_cache", "transformer": {"layers": 3}}, roles) == {
        "text_encoder": "cpu_cache", "transformer": {"layers": 3}}
    for bad, key in [("gpu", "model.placement"), ({"layers": 0}, "model.placement.layers"),
                     ({"tokenizer": "resident"}, "model.placement.tokenizer"),
                     ({"vae": "layers"}, "model.placement.vae"), ({"transformer": "fast"}, "model.placement.transformer"),
                     (3, "model.placement")]:
        with pytest.raises(ConfigError) as e:
            parse(bad, roles)
        assert e.value.key == key, bad


def test_requested_and_the_aliases():
    roles = {"transformer": "denoiser", "text_encoder": "text_encoder", "vae": "vae", "scheduler": "scheduler"}
    assert requested("auto", roles) == ({}, {})
    assert requested("cpu_cache", roles)[0] == {"transformer": CPU_CACHE, "text_encoder": CPU_CACHE, "vae": CPU_CACHE}
    assert requested("layers", roles) == ({"transformer": LAYERS}, {})
    assert requested({"layers": 2}, roles) == ({"transformer": LAYERS}, {"transformer": 2})
    # low_vram: cpu_cache for every component; layer_offloading: the denoiser in layers
    assert requested("auto", roles, low_vram=True)[0] == {r: CPU_CACHE for r in ("transformer", "text_encoder", "vae")}
    assert requested("auto", roles, layer_offloading=True)[0] == {"transformer": LAYERS}
    assert requested("auto", roles, low_vram=True, layer_offloading=True)[0] == {
        "transformer": LAYERS, "text_encoder": CPU_CACHE, "vae": CPU_CACHE}
    # what placement names wins over an alias
    assert requested({"vae": "resident"}, roles, low_vram=True)[0]["vae"] == RESIDENT


def test_the_planner_imports_no_torch():
    code = "import sys; import toolkit.placement, testing.placement_table; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
