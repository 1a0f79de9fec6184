"""Krea 2 end to end on a tiny model written in the real ComfyUI scaled-FP8 format: through the
engine with profiles, against the float32 diffusers folder, the turbo/raw hot swap, the prompt
template's prefix boundary, CFG-0 encoding, the guidance equation and the local-only contract."""
import os

import numpy as np
import pytest
import torch
from PIL import Image

from testing.engine_client import InProcessEngine
from testing.tiny_krea2 import cached_tiny_krea2
from toolkit.config_modules import GenerateImageConfig
from toolkit.models.base_model import get_model_class
from toolkit.profiles import load_profiles

FP8 = torch.float8_e4m3fn


@pytest.fixture(scope="module")
def kfiles(tmp_path_factory):
    root = tmp_path_factory.mktemp("krea2")
    turbo = cached_tiny_krea2(root, 0)
    other = cached_tiny_krea2(root, 1)        # a second diffusion model, standing in for "raw"
    profiles = root / "profiles.toml"
    profiles.write_text(f'''default_model = "krea2-turbo"
[model_profiles.krea2-turbo]
architecture = "krea2"
variant = "turbo"
diffusion_model = "{turbo['diffusion_model']}"
text_encoder = "{turbo['text_encoder']}"
vae = "{turbo['vae']}"
tokenizer = "{turbo['tokenizer']}"
[model_profiles.krea2-turbo.defaults]
width = 64
height = 64
[model_profiles.krea2-raw]
architecture = "krea2"
variant = "raw"
diffusion_model = "{other['diffusion_model']}"
text_encoder = "{turbo['text_encoder']}"
vae = "{turbo['vae']}"
tokenizer = "{turbo['tokenizer']}"
[model_profiles.krea2-raw.defaults]
width = 64
height = 64
steps = 3
''')
    return {"turbo": turbo, "other": other, "profiles": str(profiles)}


def _holder(mc_dict):
    return get_model_class("krea2")(mc_dict, device="cpu").load_model()


def _comfy_model(files, variant="turbo"):
    return {"arch": "krea2", "variant": variant, "local_only": True,
            "components": {"transformer": files["diffusion_model"], "text_encoder": files["text_encoder"],
                           "vae": files["vae"], "tokenizer": files["tokenizer"]}}


def _gen(**kw):
    return GenerateImageConfig.from_dict({"prompt": "a fox in the snow", "width": 64, "height": 64,
                                          "num_inference_steps": 2, "seed": 7, **kw}, "krea2")


def test_fp8_output_close_to_float32_and_weights_stay_fp8(kfiles):
    """The ComfyUI FP8 files give an image within a 6 % relative error (of the [-1, 1] image) of the
    same tiny model in float32 (the FP8 rounding of the weights is the whole difference)."""
    fp8 = _holder(_comfy_model(kfiles["turbo"]))
    ref = _holder({"arch": "krea2", "variant": "turbo", "name_or_path": kfiles["turbo"]["pipeline"]})
    a = np.asarray(fp8.generate_single(_gen()), dtype=np.float64) / 127.5 - 1
    b = np.asarray(ref.generate_single(_gen()), dtype=np.float64) / 127.5 - 1
    rel = np.linalg.norm(a - b) / np.linalg.norm(b)
    assert rel < 0.06, rel
    assert not np.array_equal(a, b)          # it really ran the FP8 weights
    for role in ("transformer", "text_encoder"):
        dtypes = {p.dtype for p in fp8.loaded[role].parameters()}
        assert FP8 in dtypes, role
        fp8.loaded[role].to("cpu")
        assert FP8 in {p.dtype for p in fp8.loaded[role].parameters()}
        assert fp8.loaded[role]._aitk_identity.fmt == "comfy_scaled_fp8"


def test_engine_generates_from_a_profile_and_swaps_only_the_diffusion_model(kfiles, tmp_path):
    eng = InProcessEngine(str(tmp_path), profiles=load_profiles(kfiles["profiles"]))
    try:
        c = eng.client
        models = c.get("/models").json()
        assert {p["name"] for p in models["profiles"]} == {"krea2-turbo", "krea2-raw"}
        assert "/" not in repr(models["profiles"])                 # no paths in listings
        frames = c.stream({"model": {"profile": "krea2-turbo"}, "sample": {"prompt": "a fox", "seed": 1}})
        assert frames[-1][0]["status"] == "ok"
        start = frames[0][0]
        assert start["sample"]["num_inference_steps"] == 8 and start["sample"]["guidance_scale"] == 0.0
        assert start["sample"]["mu"] == 1.15 and start["preview"]["layout"] == "BCHW"
        lat = [h for h, _ in frames if h["type"] == "latent"]
        assert lat[0]["shape"] == [1, 16, 8, 8]                      # packed tokens arrive unpacked
        res = next(h for h, _ in frames if h["type"] == "result")
        assert Image.open(res["path"]).size == (64, 64)
        h = c.health()
        placement = h["active"].pop("placement")            # where each component lives (engine.md#placement)
        assert h["active"] == {"arch": "krea2", "name_or_path": "krea2-turbo", "profile": "krea2-turbo",
                               "variant": "turbo"}
        assert placement["rung"] == "resident" and set(placement["placement"]) == {"transformer", "text_encoder", "vae"}
        assert "/" not in repr(h["active"]) and "/tmp" not in repr(h)
        pool = eng.engine.worker.core.pool
        loads = pool.loads
        # turbo -> raw -> turbo: only the diffusion model reloads
        frames = c.stream({"model": "krea2-raw", "sample": {"prompt": "a fox"}})
        assert frames[-1][0]["status"] == "ok" and frames[0][0]["sample"]["num_inference_steps"] == 3
        assert pool.loads == loads + 1 and [e.identity.role for e in pool.entries.values()].count("transformer") == 1
        c.stream({"model": "krea2-turbo", "sample": {"prompt": "a fox"}})
        assert pool.loads == loads + 2
        before = (pool.loads, pool.misses)
        c.stream({"model": "krea2-turbo", "sample": {"prompt": "a fox"}})
        assert (pool.loads, pool.misses) == before                 # identical request: nothing loads
        ins = c.get("/inspect/krea2-turbo").json()
        assert ins["profile"] == "krea2-turbo" and ins["architecture"] == "krea2"
        assert c.get("/inspect/nope").status_code == 404
    finally:
        eng.close()


def test_size_rounding_warning_reaches_the_stream(kfiles, tmp_path):
    eng = InProcessEngine(str(tmp_path), profiles=load_profiles(kfiles["profiles"]))
    try:
        frames = eng.client.stream({"model": "krea2-turbo", "sample": {"prompt": "x", "width": 70, "height": 64,
                                                                       "num_inference_steps": 1}})
        msgs = [h["message"] for h, _ in frames if h["type"] == "status"]
        assert any("sample.width 70 rounded up to 80" in m for m in msgs)
        res = next(h for h, _ in frames if h["type"] == "result")
        assert (res["width"], res["height"]) == (80, 64)
    finally:
        eng.close()


def test_prefix_boundary_is_token_aware(kfiles):
    """The template's system+user opening is exactly the 34 tokens the pipeline drops: the last
    dropped tokens are <|im_start|>, 'user', '\\n' and the first kept one is the prompt's."""
    holder = _holder(_comfy_model(kfiles["turbo"]))
    pipe, tok = holder.pipeline, holder.pipeline.tokenizer
    ids = tok(pipe.prompt_template_encode_prefix + "fox", add_special_tokens=False).input_ids
    prefix_ids = tok(pipe.prompt_template_encode_prefix, add_special_tokens=False).input_ids
    n = pipe.prompt_template_encode_start_idx
    assert len(prefix_ids) == n == 34
    assert ids[:n] == prefix_ids
    assert tok.convert_ids_to_tokens(prefix_ids[n - 3]) == "<|im_start|>"
    assert tok.decode(prefix_ids[n - 2:]) == "user\n"
    assert tok.decode(ids[n:]) == "fox"
    assert len(tok(pipe.prompt_template_encode_suffix, add_special_tokens=False).input_ids) == 5
    # the taps: every third hidden state from 2, as many as the transformer fuses
    assert pipe.text_encoder_select_layers == (2, 5, 8)
    hs, mask = pipe.get_text_hidden_states("fox", max_sequence_length=16, device="cpu")
    assert hs.shape[2] == 3 and hs.shape[1] == mask.shape[1] == 16


def _count_encodes(holder):
    calls = []
    orig = holder.pipeline.get_text_hidden_states

    def counting(prompt, *a, **k):
        calls.append(prompt)
        return orig(prompt, *a, **k)
    holder.pipeline.get_text_hidden_states = counting
    return calls


def test_cfg_zero_encodes_only_the_positive_prompt(kfiles):
    holder = _holder(_comfy_model(kfiles["turbo"]))
    calls = _count_encodes(holder)
    holder.generate_single(_gen(guidance_scale=0.0, negative_prompt="blurry"))
    assert len(calls) == 1
    calls.clear()
    holder.generate_single(_gen(guidance_scale=2.0, negative_prompt="blurry"))
    assert len(calls) == 2 and calls[1] == ["blurry"] or calls[1] == "blurry"


def test_guidance_equation(kfiles):
    """v = v_cond + g * (v_cond - v_uncond), seen by the scheduler step."""
    holder = _holder(_comfy_model(kfiles["turbo"]))
    transformer = holder.pipeline.transformer
    outputs, seen = [], []
    orig_forward = transformer.forward

    def forward(*a, **k):
        out = orig_forward(*a, **k)
        outputs.append(out[0].clone())
        return out
    transformer.forward = forward
    sched = holder.pipeline.scheduler

    def hook(i, n, t, latents, x0):
        pass
    orig_step = sched.step

    def step(model_output, *a, **k):
        seen.append(model_output.clone())
        return orig_step(model_output, *a, **k)
    sched.step = step
    try:
        holder.generate_single(_gen(guidance_scale=2.5, num_inference_steps=2))
    finally:
        del transformer.forward, sched.step
    assert len(outputs) == 4 and len(seen) == 2
    for i in range(2):
        cond, uncond = outputs[2 * i], outputs[2 * i + 1]
        assert torch.allclose(seen[i], cond + 2.5 * (cond - uncond), atol=1e-6)


def test_mu_override_reaches_the_scheduler(kfiles):
    holder = _holder(_comfy_model(kfiles["turbo"]))
    from toolkit.models.archs.krea2 import shifted_timesteps
    holder.generate_single(_gen(num_inference_steps=4, mu=0.4))
    assert torch.allclose(holder.pipeline.scheduler.sigmas.double(),
                          torch.tensor(shifted_timesteps(4, 0.4), dtype=torch.float64), atol=1e-6)


def test_local_only_never_calls_the_hub(kfiles, monkeypatch, tmp_path):
    """With every hub download function patched to raise, the profile loads and generates; a
    missing configured file fails at once, named, and no hub call is made either."""
    import huggingface_hub
    import huggingface_hub.file_download as fdl
    import diffusers.utils.hub_utils as dhub
    import transformers.utils.hub as thub

    calls = []

    def no_hub(*a, **k):
        calls.append((a, k))
        raise AssertionError("a hub download function was called")
    for mod in (huggingface_hub, fdl, dhub, thub):   # the download functions, wherever they were imported
        for name in ("hf_hub_download", "snapshot_download", "model_info", "get_hf_file_metadata"):
            if hasattr(mod, name):
                monkeypatch.setattr(mod, name, no_hub)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    prof = load_profiles(kfiles["profiles"])
    from toolkit.request import resolve_request
    _work = resolve_request("krea2-turbo", {"prompt": "x", "num_inference_steps": 1}, profiles=prof)
    mc, gen = _work.model, _work.sample
    holder = get_model_class("krea2")(mc).load_model()
    holder.generate_single(gen)
    assert not calls
    # a missing file is named at once
    missing = dict(kfiles["turbo"])
    missing["vae"] = str(tmp_path / "gone.safetensors")
    from toolkit.errors import ConfigError
    with pytest.raises(ConfigError, match="gone.safetensors"):
        get_model_class("krea2")(_comfy_model(missing))
    # a repo-looking name is never sent to a hub for a local-only model
    from toolkit.models.v2.mixin import ComponentLoadError
    bad = _comfy_model(kfiles["turbo"])
    bad.pop("components")
    bad["name_or_path"] = "someorg/krea2-lookalike"
    with pytest.raises(ComponentLoadError, match="hub repos are not allowed"):
        get_model_class("krea2")(bad).load_model()
    assert not calls


def test_cli_one_shot_with_a_profile(kfiles, tmp_path):
    import subprocess
    import sys
    from testing.engine_client import ROOT
    out = tmp_path / "fox.png"
    p = subprocess.run([sys.executable, "-m", "toolkit.generate", "--profiles", kfiles["profiles"], "--model-profile",
                        "krea2-turbo", "--prompt", "a fox", "--steps", "2", "--seed", "3", "--mu", "1.0",
                        "--width", "70", "-o", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "rounded up to 80" in p.stderr and Image.open(out).size == (80, 64)
    p = subprocess.run([sys.executable, "-m", "toolkit.generate", "--profiles", kfiles["profiles"], "--model-profile",
                        "nope", "--prompt", "x"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "model.profile" in p.stderr and "nope" in p.stderr


@pytest.mark.parametrize("placement", ["staged", "cpu_cache"])
def test_the_designs_residency_modes_from_a_profile(kfiles, placement):
    """The Krea 2 design's two residency modes (seed 003, "Residency"), asked for by a profile request:
    staged (each component read for its stage and released) and CPU cache (built once on the CPU, on the
    device for its stage only). The FP8 weights stay FP8 on the way in, and the image is the resident one."""
    from toolkit.request import resolve_request
    profiles = load_profiles(kfiles["profiles"])
    mc = resolve_request({"profile": "krea2-turbo", "placement": placement}, {}, profiles=profiles).model
    assert mc.placement == placement
    resident = _holder(resolve_request({"profile": "krea2-turbo"}, {}, profiles=profiles).model)
    placed = _holder(mc)
    seen = []
    hook = placed.loaded["transformer"].register_forward_pre_hook(
        lambda m, args: seen.append(FP8 in {p.dtype for p in m.parameters()}))
    out = np.asarray(placed.generate_single(_gen()))
    hook.remove()
    assert seen and all(seen)
    assert set(placed.plan.placements.values()) == {placement}
    assert placed.residency.moves == 3                     # text encoder, transformer, VAE: one stage each
    assert np.array_equal(out, np.asarray(resident.generate_single(_gen())))
