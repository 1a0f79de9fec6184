"""Krea 2 in ComfyUI scaled-FP8 format: ScaledFp8Linear (both paths), dtype-preserving moves, the
three single-file readers with strict key accounting, every rejection, the VAE mapping, and the
tiny Krea2Pipeline generated from the ComfyUI files against the same model in float32."""
import json
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from testing import tiny_krea2 as tk
from toolkit.models.formats import comfy, quant, scaled_fp8
from toolkit.models.formats.quant import CheckpointFormatError
from toolkit.models.v2 import LoadPolicy
from toolkit.models.formats.scaled_fp8 import PARITY_RTOL, ScaledFp8Linear, enable_scaled_mm, move_preserving

# Bounds for the ComfyUI-read tiny model against the same weights in float32 (2 steps, 64x64,
# CFG 0). The only differences are FP8 weight rounding (e4m3: ~2.5% per weight) and BF16 storage of
# the unquantized tensors. Measured with seed 0: text conditioning 0.040, final latent 0.019,
# decoded image 0.037 (relative Frobenius error, image in [-1, 1]). A single misread scale
# (one layer x2) already exceeds these bounds, see test_bound_detects_a_misread_scale.
COND_RTOL = 0.06
LATENT_RTOL = 0.035
IMAGE_RTOL = 0.06
# with the _scaled_mm path on (activations quantized to e4m3 too); measured 0.024 / 0.045
SCALED_MM_LATENT_RTOL = 0.045
SCALED_MM_IMAGE_RTOL = 0.08

READERS = {"transformer": comfy.read_krea2_transformer, "text_encoder": comfy.read_qwen3vl_text_encoder,
           "vae": comfy.read_qwen_image_vae}
FILES = {"transformer": "diffusion_model", "text_encoder": "text_encoder", "vae": "vae"}


def rel(a, b) -> float:
    a, b = a.detach().float(), b.detach().float()
    return float((a - b).norm() / b.norm())


@pytest.fixture(scope="module")
def krea(tmp_path_factory):
    return tk.cached_tiny_krea2(tmp_path_factory.getbasetemp() / "tiny_krea2", seed=0)


@pytest.fixture(scope="module")
def loaded(krea):
    return {c: READERS[c](krea[FILES[c]], component=c) for c in READERS}


@pytest.fixture(scope="module")
def reference_pipe(krea):
    from diffusers import Krea2Pipeline
    pipe = Krea2Pipeline.from_pretrained(krea["pipeline"], local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


# --------------------------------------------------------------------------------------------- #
#                                        ScaledFp8Linear                                        #
# --------------------------------------------------------------------------------------------- #

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [False, True])
def test_scaled_fp8_linear_equals_explicit_reconstruction(dtype, bias):
    torch.manual_seed(0)
    linear = nn.Linear(48, 32, bias=bias)
    layer = ScaledFp8Linear.from_linear(linear)
    assert layer.weight.dtype == torch.float8_e4m3fn and not layer.weight.requires_grad
    assert layer.weight_scale.dtype == torch.float32 and layer.weight_scale.shape == ()
    assert torch.allclose(layer.weight_scale, linear.weight.abs().max() / 448)
    x = torch.randn(3, 5, 48).to(dtype)
    w = layer.weight.to(dtype) * layer.weight_scale.to(dtype)          # explicit reconstruction
    expected = F.linear(x, w, layer.bias.to(dtype) if bias else None)
    assert torch.equal(layer(x), expected)
    assert layer(x).dtype == dtype
    assert rel(layer(x), linear(x.float())) < 0.05                    # and it stands for the float layer


def test_scaled_fp8_known_weight_is_reconstructed_exactly():
    # a weight whose values are e4m3-representable multiples of a power-of-two scale
    scale = 2.0 ** -7
    codes = torch.tensor([[448.0, -448.0, 1.0, 0.5], [3.0, -6.0, 0.0, 224.0]])
    layer = ScaledFp8Linear(4, 2)
    layer.weight.data = codes.to(torch.float8_e4m3fn)
    layer.weight_scale = torch.tensor(scale)
    assert torch.equal(layer.dequantized_weight(), codes * scale)
    x = torch.randn(7, 4)
    assert torch.allclose(layer(x), x @ (codes * scale).t())


def test_scaled_fp8_linear_is_a_drop_in_inside_a_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
    x = torch.randn(2, 16)
    ref = model(x)
    model[0] = ScaledFp8Linear.from_linear(model[0])
    model[2] = ScaledFp8Linear.from_linear(model[2])
    assert rel(model(x), ref) < 0.06
    assert set(model.state_dict()) == {"0.weight", "0.weight_scale", "0.bias", "2.weight", "2.weight_scale", "2.bias"}


def _spy_scaled_mm(monkeypatch):
    calls = []
    real = torch._scaled_mm

    def spy(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)
    monkeypatch.setattr(torch, "_scaled_mm", spy)
    return calls


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_scaled_mm_path_matches_correctness_path(dtype, monkeypatch):
    torch.manual_seed(1)
    layer = ScaledFp8Linear.from_linear(nn.Linear(64, 48, bias=True))
    assert layer.set_scaled_mm(True, dtype=dtype)
    (ok, detail), = layer._scaled_mm_checks.values()
    assert ok and "parity relative error" in detail
    calls = _spy_scaled_mm(monkeypatch)
    x = (torch.randn(4, 9, 64) * 3).to(dtype)
    got = layer(x)
    assert calls, "the enabled layer did not use torch._scaled_mm"
    want = layer._forward_dequant(x)
    assert got.shape == want.shape and got.dtype == dtype
    # only the activations differ (quantized to e4m3): ~2.5% expected, PARITY_RTOL = 5%
    assert rel(got, want) <= PARITY_RTOL
    assert scaled_fp8.parity_error(layer, "cpu", dtype) <= PARITY_RTOL


def test_scaled_mm_is_exact_when_activations_are_fp8_representable():
    layer = ScaledFp8Linear.from_linear(nn.Linear(32, 16, bias=False))
    # values on the e4m3 grid with amax 448: the dynamic activation scale is exactly 1
    x = torch.randn(8, 32).mul(60).to(torch.float8_e4m3fn).float()
    x[0, 0] = 448.0
    assert layer.set_scaled_mm(True, dtype=torch.float32)
    got = layer._forward_scaled_mm(x)
    want = layer._forward_dequant(x)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-4)


def test_scaled_mm_gates_keep_the_correctness_path(monkeypatch):
    torch.manual_seed(2)
    misaligned = ScaledFp8Linear.from_linear(nn.Linear(24, 40))
    assert not misaligned.set_scaled_mm(True, dtype=torch.float32)
    assert "multiple of 16" in misaligned.check_scaled_mm()[1]
    fpmm = ScaledFp8Linear.from_linear(nn.Linear(32, 32), full_precision_matrix_mult=True)
    assert not fpmm.set_scaled_mm(True) and "full_precision_matrix_mult" in fpmm.check_scaled_mm()[1]
    f64 = ScaledFp8Linear.from_linear(nn.Linear(32, 32))
    assert "activation dtype" in f64.scaled_mm_blocker("cpu", torch.float64)
    calls = _spy_scaled_mm(monkeypatch)
    misaligned(torch.randn(3, 24))
    fpmm(torch.randn(3, 32))
    assert calls == [], "a gated layer must stay on the dequantizing path"

    # a kernel that disagrees with the reference fails the parity check
    broken = ScaledFp8Linear.from_linear(nn.Linear(32, 32))
    monkeypatch.setattr(torch, "_scaled_mm", lambda *a, **k: calls.append(1) or 2 * torch.ones(
        a[0].shape[0], a[1].shape[1], dtype=k["out_dtype"]))
    assert not broken.set_scaled_mm(True, dtype=torch.float32)
    assert "parity check failed" in broken.check_scaled_mm()[1]
    assert not broken.scaled_mm_enabled

    # the API missing
    monkeypatch.delattr(torch, "_scaled_mm")
    absent = ScaledFp8Linear.from_linear(nn.Linear(32, 32))
    assert not absent.set_scaled_mm(True) and "not available" in absent.check_scaled_mm()[1]


def test_scaled_mm_cuda_capability_gate(monkeypatch):
    layer = ScaledFp8Linear.from_linear(nn.Linear(32, 32))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 6))
    assert "8.6 < 8.9" in layer.scaled_mm_blocker("cuda", torch.bfloat16)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    # capability passes; what is left is that this CPU layer's weight is not on that device
    assert "weight is on cpu" in layer.scaled_mm_blocker("cuda", torch.bfloat16)


def test_enable_scaled_mm_on_the_loaded_models(krea):
    tr = comfy.read_krea2_transformer(krea["diffusion_model"])
    te = comfy.read_qwen3vl_text_encoder(krea["text_encoder"])
    q, fp = krea["quantized_layers"], krea["full_precision_matrix_mult"]
    # every tiny FP8 layer is 16-aligned: all switch except the full_precision_matrix_mult ones
    assert enable_scaled_mm(tr) == q["diffusion_model"] - fp["diffusion_model"] == 38
    assert enable_scaled_mm(te) == q["text_encoder"] - fp["text_encoder"] == 48
    report = scaled_fp8.scaled_mm_report(tr)
    assert sum(r["enabled"] for r in report.values()) == 38
    assert all(not r["enabled"] for r in report.values() if r["full_precision_matrix_mult"])
    assert enable_scaled_mm(tr, False) == 38 and not any(r["enabled"] for r in scaled_fp8.scaled_mm_report(tr).values())


# --------------------------------------------------------------------------------------------- #
#                                 readers and strict accounting                                 #
# --------------------------------------------------------------------------------------------- #

def _file_keys(path):
    with safe_open(path, "pt") as f:
        return list(f.keys())


def test_transformer_reader_loads_every_key(krea, loaded, reference_pipe):
    from diffusers import Krea2Transformer2DModel
    m = loaded["transformer"]
    assert isinstance(m, Krea2Transformer2DModel)
    report = m._aitk_checkpoint_report
    assert report["format"] == "comfy_scaled_fp8" and report["prefix"] == ""
    assert report["quantized_layers"] == krea["quantized_layers"]["diffusion_model"]
    assert report["full_precision_matrix_mult"] == krea["full_precision_matrix_mult"]["diffusion_model"]
    assert report["manifest_sources"] == ["metadata"]
    # every file tensor became exactly one module tensor (weights, scales, norms, tables)
    assert len(m.state_dict()) == len(_file_keys(krea["diffusion_model"]))
    assert m.config.num_text_layers == len(krea["select_layers"])
    ref = reference_pipe.transformer.state_dict()
    for name, mod in m.named_modules():
        if isinstance(mod, ScaledFp8Linear):
            assert mod.weight.dtype == torch.float8_e4m3fn
            assert rel(mod.dequantized_weight(), ref[name + ".weight"]) < 0.04
            assert mod.full_precision_matrix_mult == (name.endswith(".attn.to_gate") or
                                                      (name.startswith("text_fusion.") and name.endswith(".ff.down")))
    state = m.state_dict()
    for key, value in ref.items():            # every unquantized tensor landed where diffusers has it
        if key in state and state[key].dtype != torch.float8_e4m3fn:
            assert torch.equal(state[key], value.to(torch.bfloat16).float()), key


def test_text_encoder_reader_loads_text_backbone_only(krea, loaded, reference_pipe):
    from transformers import Qwen3VLTextModel
    m = loaded["text_encoder"]
    assert isinstance(m, Qwen3VLTextModel)
    assert not any(n.startswith(("visual", "lm_head")) for n in m.state_dict())
    report = m._aitk_checkpoint_report
    assert report["manifest_sources"] == ["comfy_quant"] and report["prefix"] == "model."
    assert report["quantized_layers"] == krea["quantized_layers"]["text_encoder"]
    assert sorted(report["ignored_keys"]) == krea["ignored_text_encoder_keys"]
    keys = _file_keys(krea["text_encoder"])
    markers = [k for k in keys if k.endswith(".comfy_quant")]
    assert len(markers) == krea["quantized_layers"]["text_encoder"]
    assert len(m.state_dict()) == len(keys) - len(markers) - len(report["ignored_keys"])
    assert m.config.num_hidden_layers >= max(krea["select_layers"])
    ref = {k[len("language_model."):]: v for k, v in reference_pipe.text_encoder.state_dict().items()
           if k.startswith("language_model.")}
    state = m.state_dict()
    assert set(state) - {k for k in state if k.endswith("weight_scale")} == set(ref)
    for key, value in ref.items():
        if state[key].dtype == torch.float8_e4m3fn:
            assert rel(state[key].float() * state[key + "_scale"], value) < 0.04, key
        else:
            assert torch.equal(state[key], value.to(torch.bfloat16).float()), key


def test_vae_reader_loads_original_keys(krea, loaded, reference_pipe):
    from diffusers import AutoencoderKLQwenImage
    m = loaded["vae"]
    assert isinstance(m, AutoencoderKLQwenImage)
    assert list(m.config.latents_mean) == comfy.QWEN_IMAGE_LATENTS_MEAN
    assert list(m.config.latents_std) == comfy.QWEN_IMAGE_LATENTS_STD
    ref = reference_pipe.vae.state_dict()
    state = m.state_dict()
    assert set(state) == set(ref) and len(state) == len(_file_keys(krea["vae"]))
    assert all(torch.equal(state[k], ref[k]) for k in ref)      # F32 file: bit-identical


def test_readers_return_the_funnels_class_and_work_through_it(krea):
    from diffusers import Krea2Transformer2DModel
    from transformers import PreTrainedModel

    from toolkit.models.v2 import LoadPolicy, aitk
    from toolkit.models.v2.mixin import OstrisModelMixin, _has_fp8_storage
    m = aitk(Krea2Transformer2DModel).load(krea["diffusion_model"], role="transformer",
                                           reader=comfy.read_krea2_transformer, policy=LoadPolicy())
    assert isinstance(m, OstrisModelMixin) and _has_fp8_storage(m)
    assert m._aitk_identity.fmt == "comfy_scaled_fp8" and m._aitk_policy == LoadPolicy()
    te = aitk(PreTrainedModel).load(krea["text_encoder"], role="text_encoder",
                                    reader=comfy.read_qwen3vl_text_encoder, policy=LoadPolicy(torch.bfloat16))
    assert te._aitk_identity.fmt == "comfy_scaled_fp8"
    assert {p.dtype for p in te.parameters()} == {torch.float8_e4m3fn, torch.bfloat16}
    for p in comfy.read_krea2_transformer, comfy.read_qwen3vl_text_encoder, comfy.read_qwen_image_vae:
        assert p.format_name == "comfy_scaled_fp8"


def test_fp8_weights_survive_load_and_moves(krea):
    m = comfy.read_krea2_transformer(krea["diffusion_model"])
    n_fp8 = krea["quantized_layers"]["diffusion_model"]

    def census(model):
        out = {}
        for _, t in model.state_dict().items():
            out[t.dtype] = out.get(t.dtype, 0) + 1
        return out
    assert census(m)[torch.float8_e4m3fn] == n_fp8
    weight = m.transformer_blocks[0].attn.to_q.weight
    move_preserving(m, "cpu", torch.bfloat16)
    assert m.transformer_blocks[0].attn.to_q.weight is weight            # parameters keep their identity
    assert weight.dtype == torch.float8_e4m3fn
    scales = [b for n, b in m.named_buffers() if n.endswith("weight_scale")]
    assert len(scales) == n_fp8 and all(s.dtype == torch.float32 for s in scales)
    keep = scaled_fp8.keep_fp32_names(m)
    assert keep and all(p.dtype == torch.float32 for n, p in m.named_parameters() if n in keep)   # norms
    others = {p.dtype for n, p in m.named_parameters() if n not in keep and p.dtype != torch.float8_e4m3fn}
    assert others == {torch.bfloat16}
    m.to("cpu")                                   # what the funnel does on placement: dtypes untouched
    m.to(torch.device("cpu"))
    assert census(m)[torch.float8_e4m3fn] == n_fp8
    m.aitk_post_load(LoadPolicy(torch.bfloat16))                  # the funnel's post-load: no cast
    assert census(m)[torch.float8_e4m3fn] == n_fp8
    with torch.no_grad():                         # and it still runs in bf16
        out = m(torch.randn(1, 16, 64, dtype=torch.bfloat16), torch.randn(1, 4, 3, 32, dtype=torch.bfloat16),
                torch.tensor([0.5]), _positions(4, 4, 4))
    assert out.sample.dtype == torch.bfloat16 and torch.isfinite(out.sample.float()).all()


def _positions(text_len, h, w):
    from diffusers import Krea2Pipeline
    return Krea2Pipeline.prepare_position_ids(text_len, h, w, "cpu")


def test_input_scale_and_prefixed_and_marker_variants_load(krea, tmp_path):
    for kind, component in (("prefix", "transformer"), ("metadata_to_markers", "transformer"),
                            ("both_markers", "transformer"), ("markers_to_metadata", "text_encoder"),
                            ("both_markers", "text_encoder"), ("input_scale", "transformer"),
                            ("lm_head", "text_encoder")):
        dst = tmp_path / f"{component}-{kind}.safetensors"
        tk.restyle_variant(krea[FILES[component]], dst, kind)
        m = READERS[component](str(dst), component=component)
        r = m._aitk_checkpoint_report
        assert r["quantized_layers"] == krea["quantized_layers"][FILES[component]], (kind, component)
        if kind == "prefix":
            assert r["prefix"] == "model.diffusion_model."
        if kind == "both_markers":
            assert r["manifest_sources"] == ["metadata", "comfy_quant"]
        if kind == "input_scale":
            layers = [mod for mod in m.modules() if isinstance(mod, ScaledFp8Linear)]
            assert all(x.input_scale is not None and x.input_scale.shape == () for x in layers)
        if kind == "lm_head":
            assert {"lm_head.weight", "lm_head.weight_scale", "lm_head.comfy_quant"} <= set(r["ignored_keys"])
            assert not any(n.startswith("lm_head") for n in m.state_dict())


# --------------------------------------------------------------------------------------------- #
#                                           rejections                                          #
# --------------------------------------------------------------------------------------------- #

CASES = [(kind, comp) for kind, (comps, _) in tk.CORRUPTIONS.items() for comp in comps]


@pytest.mark.parametrize("kind,component", CASES, ids=[f"{c}-{k}" for k, c in CASES])
def test_every_rejection_names_component_and_layer(krea, tmp_path, kind, component):
    dst = tmp_path / f"{component}-{kind}.safetensors"
    info = tk.corrupt_variant(krea[FILES[component]], dst, kind)
    with pytest.raises(CheckpointFormatError) as e:
        READERS[component](str(dst), component=component)
    message = str(e.value)
    assert message.startswith(f"{component}: "), message
    assert info["layer"] in message, message
    assert info["problem"] in e.value.kinds, (e.value.kinds, message)
    assert isinstance(e.value, ValueError)         # the funnel turns it into a ComponentLoadError


def test_mixed_format_checkpoint_rejected_although_keys_look_like_krea2(krea, tmp_path):
    dst = tmp_path / "mixed.safetensors"
    tk.corrupt_variant(krea["diffusion_model"], dst, "mixed_format")
    assert comfy.KREA2_ANCHORS[0] in _file_keys(str(dst))
    with pytest.raises(CheckpointFormatError) as e:
        comfy.read_krea2_transformer(str(dst))
    messages = "\n".join(p.message for p in e.value.problems)
    for fmt in ("int8_tensorwise", "asym_w4a8_int8", "nvfp4"):
        assert f": {fmt} (only float8_e4m3fn" in messages
    assert e.value.kinds == {quant.UNSUPPORTED_FORMAT}


def test_wrong_file_for_a_reader_is_rejected(krea):
    with pytest.raises(CheckpointFormatError, match="^vae: .*not a Qwen Image VAE"):
        comfy.read_qwen_image_vae(krea["diffusion_model"], component="vae")
    with pytest.raises(CheckpointFormatError, match="^text_encoder: .*not a Qwen3-VL"):
        comfy.read_qwen3vl_text_encoder(krea["vae"], component="text_encoder")
    with pytest.raises(CheckpointFormatError, match="^transformer: .*not a Krea 2"):
        comfy.read_krea2_transformer(krea["text_encoder"], component="transformer")


def test_funnel_reports_a_rejection_with_the_role(krea, tmp_path):
    from diffusers import Krea2Transformer2DModel

    from toolkit.models.v2 import aitk
    from toolkit.models.v2.mixin import ComponentLoadError
    dst = tmp_path / "noscale.safetensors"
    tk.corrupt_variant(krea["diffusion_model"], dst, "missing_scale")
    with pytest.raises(ComponentLoadError, match="transformer: .*layer blocks.0.attn.gate is missing weight_scale"):
        aitk(Krea2Transformer2DModel).load(str(dst), role="transformer", reader=comfy.read_krea2_transformer)


# --------------------------------------------------------------------------------------------- #
#                                   key mappings and constants                                  #
# --------------------------------------------------------------------------------------------- #

# one or more representative original keys per mapping family, at the real Qwen Image VAE layout
# (2 residual blocks, 4 levels)
VAE_REPRESENTATIVE = {
    "encoder.conv1.weight": ("encoder.conv_in.weight", "conv_in"),
    "decoder.conv1.bias": ("decoder.conv_in.bias", "conv_in"),
    "conv1.weight": ("quant_conv.weight", "quant_conv"),
    "conv2.bias": ("post_quant_conv.bias", "post_quant_conv"),
    "encoder.middle.0.residual.0.gamma": ("encoder.mid_block.resnets.0.norm1.gamma", "mid_resnet"),
    "decoder.middle.2.residual.6.weight": ("decoder.mid_block.resnets.1.conv2.weight", "mid_resnet"),
    "encoder.middle.1.to_qkv.weight": ("encoder.mid_block.attentions.0.to_qkv.weight", "mid_attention"),
    "decoder.middle.1.norm.gamma": ("decoder.mid_block.attentions.0.norm.gamma", "mid_attention"),
    "encoder.downsamples.0.residual.2.weight": ("encoder.down_blocks.0.conv1.weight", "down_resnet"),
    "encoder.downsamples.3.residual.3.gamma": ("encoder.down_blocks.3.norm2.gamma", "down_resnet"),
    "encoder.downsamples.3.shortcut.weight": ("encoder.down_blocks.3.conv_shortcut.weight", "down_resnet"),
    "encoder.downsamples.2.resample.1.weight": ("encoder.down_blocks.2.resample.1.weight", "down_resample"),
    "encoder.downsamples.5.time_conv.bias": ("encoder.down_blocks.5.time_conv.bias", "down_resample"),
    "decoder.upsamples.0.residual.0.gamma": ("decoder.up_blocks.0.resnets.0.norm1.gamma", "up_resnet"),
    "decoder.upsamples.4.shortcut.bias": ("decoder.up_blocks.1.resnets.0.conv_shortcut.bias", "up_resnet"),
    "decoder.upsamples.14.residual.6.bias": ("decoder.up_blocks.3.resnets.2.conv2.bias", "up_resnet"),
    "decoder.upsamples.3.resample.1.weight": ("decoder.up_blocks.0.upsamplers.0.resample.1.weight", "up_resample"),
    "decoder.upsamples.7.time_conv.weight": ("decoder.up_blocks.1.upsamplers.0.time_conv.weight", "up_resample"),
    "decoder.upsamples.11.resample.1.bias": ("decoder.up_blocks.2.upsamplers.0.resample.1.bias", "up_resample"),
    "encoder.head.0.gamma": ("encoder.norm_out.gamma", "head"),
    "decoder.head.2.weight": ("decoder.conv_out.weight", "head"),
}


def test_vae_mapping_families_representative_keys():
    assert {fam for _, fam in VAE_REPRESENTATIVE.values()} == set(comfy.VAE_FAMILIES)
    for key, want in VAE_REPRESENTATIVE.items():
        assert comfy.wan_vae_key_to_diffusers(key, 2, 4) == want, key
    for bad in ("decoder.upsamples.15.residual.0.gamma", "decoder.middle.1.shortcut.weight", "encoder.extra.weight",
                "decoder.upsamples.3.residual.0.gamma", "middle.0.residual.0.gamma"):
        assert comfy.wan_vae_key_to_diffusers(bad, 2, 4) is None, bad


def _meta_state(cls, *args, **kwargs):
    from accelerate import init_empty_weights
    with init_empty_weights():
        return {k: tuple(v.shape) for k, v in cls(*args, **kwargs).state_dict().items()}


def test_vae_mapping_covers_the_real_layout_and_drops_nothing(krea):
    from diffusers import AutoencoderKLQwenImage
    for base, nrb in ((96, 2), (8, 2), (8, 1)):
        shapes = _meta_state(AutoencoderKLQwenImage, base_dim=base, num_res_blocks=nrb)
        original = {tk.vae_diffusers_to_original(k, nrb): s for k, s in shapes.items()}
        assert len(original) == len(shapes)
        cfg = comfy.wan_vae_structure(original)
        assert (cfg["base_dim"], cfg["num_res_blocks"], cfg["dim_mult"]) == (base, nrb, [1, 2, 4, 4])
        mapped = {k: comfy.wan_vae_key_to_diffusers(k, nrb, 4) for k in original}
        assert None not in mapped.values()
        assert {m[0] for m in mapped.values()} == set(shapes)                  # injective and complete
        assert {m[1] for m in mapped.values()} == set(comfy.VAE_FAMILIES)       # every family exercised
    assert comfy.wan_vae_structure(original)["temperal_downsample"] == [False, True, True]
    # the tiny file: every key consumed, every family present
    keys = _file_keys(krea["vae"])
    fams = {comfy.wan_vae_key_to_diffusers(k, 2, 4)[1] for k in keys}
    assert fams == set(comfy.VAE_FAMILIES)


def test_vae_mapping_agrees_with_diffusers_converter_on_the_real_layout():
    """Oracle only: diffusers' private Wan converter is imported here, never by the reader."""
    from diffusers import AutoencoderKLQwenImage
    from diffusers.loaders.single_file_utils import convert_wan_vae_to_diffusers
    shapes = _meta_state(AutoencoderKLQwenImage)
    original = [tk.vae_diffusers_to_original(k, 2) for k in shapes]
    theirs = list(convert_wan_vae_to_diffusers({k: torch.empty(0) for k in original}).keys())
    ours = [comfy.wan_vae_key_to_diffusers(k, 2, 4)[0] for k in original]
    assert ours == theirs


def test_krea2_key_mapping_round_trips_at_both_sizes(krea):
    from diffusers import Krea2Transformer2DModel
    for shapes in (_meta_state(Krea2Transformer2DModel), _meta_state(
            Krea2Transformer2DModel, **tk.TRANSFORMER_DIMS, axes_dims_rope=comfy.krea2_axes_dims(16))):
        for key in shapes:
            assert comfy.krea2_key_to_diffusers(tk.krea2_diffusers_to_original(key)) == key
    assert "blocks.0.attn.wq.weight" in _file_keys(krea["diffusion_model"])


def test_reference_constants_match_the_libraries_and_are_enforced():
    import inspect as pyinspect

    from diffusers import AutoencoderKLQwenImage, Krea2Transformer2DModel
    defaults = {k: v.default for k, v in pyinspect.signature(Krea2Transformer2DModel.__init__).parameters.items()
                if k != "self"}
    assert {k: defaults[k] for k in comfy.KREA2_REFERENCE} == comfy.KREA2_REFERENCE
    assert comfy.krea2_axes_dims(128) == (32, 48, 48)
    vae_defaults = pyinspect.signature(AutoencoderKLQwenImage.__init__).parameters
    assert vae_defaults["latents_mean"].default == comfy.QWEN_IMAGE_LATENTS_MEAN
    assert vae_defaults["latents_std"].default == comfy.QWEN_IMAGE_LATENTS_STD
    assert comfy.qwen3vl_mrope_section(128) == [24, 20, 20] and comfy.qwen3vl_mrope_section(16) == [4, 2, 2]

    # real-size shapes derive exactly the reference configuration...
    shapes = _meta_state(Krea2Transformer2DModel)
    assert comfy.krea2_config_from_shapes(shapes) == comfy.KREA2_REFERENCE
    # ...and a reference-width checkpoint that differs anywhere is not Krea 2
    wrong = dict(shapes, **{"transformer_blocks.0.attn.to_k.weight": (6144 // 2, 6144)})
    with pytest.raises(CheckpointFormatError, match="not Krea 2 .*num_key_value_heads is 24, expected 12"):
        comfy.krea2_config_from_shapes(wrong)

    from transformers import Qwen3VLTextModel
    te_shapes = _meta_state(Qwen3VLTextModel, comfy.qwen3vl_text_config(**comfy.QWEN3VL_4B_REFERENCE))
    assert comfy.qwen3vl_dims_from_shapes(te_shapes) == comfy.QWEN3VL_4B_REFERENCE
    with pytest.raises(CheckpointFormatError, match="not Qwen3-VL-4B.*intermediate_size"):
        comfy.qwen3vl_dims_from_shapes(dict(te_shapes, **{"layers.0.mlp.gate_proj.weight": (8192, 2560)}))

    vae_shapes = {tk.vae_diffusers_to_original(k): s for k, s in _meta_state(AutoencoderKLQwenImage).items()}
    cfg = comfy.wan_vae_structure(vae_shapes)
    assert cfg == comfy.QWEN_IMAGE_VAE_REFERENCE
    bad = {k: s for k, s in vae_shapes.items() if not k.startswith("encoder.downsamples.5.time_conv")}
    with pytest.raises(CheckpointFormatError, match="not the Qwen Image VAE.*temperal_downsample"):
        comfy.wan_vae_structure(bad)


# --------------------------------------------------------------------------------------------- #
#                                 end to end: the tiny pipeline                                 #
# --------------------------------------------------------------------------------------------- #

def _comfy_pipe(krea, reference_pipe, components):
    from diffusers import Krea2Pipeline
    from transformers import Qwen2Tokenizer
    tokenizer = Qwen2Tokenizer.from_pretrained(krea["tokenizer"], local_files_only=True)
    pipe = Krea2Pipeline(scheduler=reference_pipe.scheduler, vae=components["vae"],
                         text_encoder=components["text_encoder"], tokenizer=tokenizer,
                         transformer=components["transformer"], text_encoder_select_layers=krea["select_layers"],
                         is_distilled=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _generate(pipe, output_type):
    with torch.no_grad():
        return pipe("a fox walking through fresh snow", num_inference_steps=2, guidance_scale=0.0, width=64,
                    height=64, max_sequence_length=32, generator=torch.Generator().manual_seed(0),
                    output_type=output_type).images


def test_comfy_tokenizer_folder_matches_the_pipeline_tokenizer(krea, reference_pipe):
    from transformers import Qwen2Tokenizer
    tok = Qwen2Tokenizer.from_pretrained(krea["tokenizer"], local_files_only=True)
    assert sorted(os.listdir(krea["tokenizer"])) == ["merges.txt", "tokenizer_config.json", "vocab.json"]
    ref = reference_pipe.tokenizer
    text = reference_pipe.prompt_template_encode_prefix + "a fox" + reference_pipe.prompt_template_encode_suffix
    assert tok(text).input_ids == ref(text).input_ids
    assert len(tok(reference_pipe.prompt_template_encode_prefix).input_ids) == 34
    assert len(tok(reference_pipe.prompt_template_encode_suffix).input_ids) == 5


def test_comfy_files_generate_close_to_float32(krea, loaded, reference_pipe, capsys):
    pipe = _comfy_pipe(krea, reference_pipe, loaded)
    with torch.no_grad():
        cond_a, mask_a = reference_pipe.encode_prompt("a fox walking through fresh snow", device="cpu",
                                                      max_sequence_length=32)
        cond_b, mask_b = pipe.encode_prompt("a fox walking through fresh snow", device="cpu", max_sequence_length=32)
    assert torch.equal(mask_a, mask_b) and cond_a.shape == cond_b.shape == (1, 32, 3, 32)
    lat_a, lat_b = _generate(reference_pipe, "latent"), _generate(pipe, "latent")
    img_a, img_b = _generate(reference_pipe, "pt"), _generate(pipe, "pt")
    errors = {"conditioning": rel(cond_b, cond_a), "latent": rel(lat_b, lat_a),
              "image": rel(img_b * 2 - 1, img_a * 2 - 1)}
    print("FP8 vs float32 relative error:", json.dumps({k: round(v, 4) for k, v in errors.items()}))
    assert img_b.shape == (1, 3, 64, 64) and torch.isfinite(img_b).all()
    assert errors["conditioning"] <= COND_RTOL
    assert errors["latent"] <= LATENT_RTOL
    assert errors["image"] <= IMAGE_RTOL
    assert errors["latent"] > 1e-4         # it really ran the FP8 weights, not a float copy

    # the same with the _scaled_mm path on every layer that passes its gates
    for name in ("transformer", "text_encoder"):
        assert enable_scaled_mm(loaded[name]) > 0
    try:
        lat_c, img_c = _generate(pipe, "latent"), _generate(pipe, "pt")
    finally:
        for name in ("transformer", "text_encoder"):
            enable_scaled_mm(loaded[name], False)
    print("scaled_mm vs float32:", round(rel(lat_c, lat_a), 4), round(rel(img_c * 2 - 1, img_a * 2 - 1), 4))
    assert rel(lat_c, lat_a) <= SCALED_MM_LATENT_RTOL
    assert rel(img_c * 2 - 1, img_a * 2 - 1) <= SCALED_MM_IMAGE_RTOL
    # FP8 weights still FP8 after generating
    assert {p.dtype for p in loaded["transformer"].parameters()} >= {torch.float8_e4m3fn}


def test_bound_detects_a_misread_scale(krea, loaded, reference_pipe, tmp_path):
    tensors = load_file(krea["diffusion_model"])
    with safe_open(krea["diffusion_model"], "pt") as f:
        metadata = f.metadata()
    tensors["blocks.0.attn.wo.weight_scale"] = tensors["blocks.0.attn.wo.weight_scale"] * 2
    dst = tmp_path / "scale_x2.safetensors"
    save_file(tensors, str(dst), metadata=metadata)
    wrong = dict(loaded, transformer=comfy.read_krea2_transformer(str(dst)))
    pipe = _comfy_pipe(krea, reference_pipe, wrong)
    assert rel(_generate(pipe, "latent"), _generate(reference_pipe, "latent")) > LATENT_RTOL


def test_factory_is_deterministic(krea, tmp_path):
    again = tk.make_tiny_krea2(tmp_path / "again", seed=0)
    for key in ("diffusion_model", "text_encoder", "vae"):
        with open(krea[key], "rb") as a, open(again[key], "rb") as b:
            assert a.read() == b.read(), key
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        with open(os.path.join(krea["tokenizer"], name), "rb") as a, open(os.path.join(again["tokenizer"], name),
                                                                         "rb") as b:
            assert a.read() == b.read(), name
