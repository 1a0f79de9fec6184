"""ComfyUI scaled-FP8 single files of every arch with a diffusers single-file converter: the tiny
factory writes each denoiser in the original layout (FP8 + weight_scale + markers), the engine's
production path loads it (a model config naming the file, the rest from the tiny folder) and it
generates within a stated bound of the float32 model."""
import json

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from toolkit.config_modules import GenerateImageConfig
from toolkit.models.base_model import get_model_class
from toolkit.models.formats.scaled_fp8 import FP8_MAX, ScaledFp8Linear, enable_scaled_mm
from toolkit.models.tiny import sample_settings
from toolkit.models.tiny.comfy_fp8 import PREFIX, write_comfy_fp8
from toolkit.models.v2.mixin import ComponentLoadError

# arch -> (latent bound, image bound): relative (Frobenius) error against the float32 model, 2 steps.
# The errors come from e4m3's 3 mantissa bits on every block Linear plus BF16 for the other tensors.
# Measured (docs/weight_formats.md, "Accuracy"): ltx 0.0046/0.0048, qwen_image 0.0023/0.0158, wan21 0.0033/0.0072,
# wan22_5b 0.0032/0.0049, zimage 0.0317/0.0386, sd3 0.0037/0.0098, flux 0.0033/0.0088,
# chroma 0.0084/0.0141; each bound is about 3x its measurement.
BOUNDS = {"chroma": (0.025, 0.04), "flux": (0.015, 0.03), "qwen_image": (0.01, 0.05), "sd3": (0.015, 0.03),
          "wan21": (0.015, 0.025), "wan22_5b": (0.015, 0.02), "zimage": (0.08, 0.1), "ltx": (0.015, 0.015)}


def rel(a, b) -> float:
    a, b = torch.as_tensor(np.asarray(a, dtype=np.float32)), torch.as_tensor(np.asarray(b, dtype=np.float32))
    return float((a - b).norm() / b.norm().clamp_min(1e-12))


def _holder(arch, name_or_path, **model):
    return get_model_class(arch)({"arch": arch, "name_or_path": name_or_path, **model}, device="cpu").load_model()


def _run(holder, arch):
    gen = GenerateImageConfig.from_dict({**sample_settings(arch), "prompt": "a red fox in the snow", "seed": 7}, arch)
    seen = []
    out = holder.generate_single(gen, on_step=lambda i, n, t, lat, x0: seen.append(lat.detach().float().clone()))
    if isinstance(out, np.ndarray):                  # video: float frames in [0, 1]
        return seen[-1], out.astype(np.float32)
    return seen[-1], np.asarray(out, dtype=np.float32) / 255.0


@pytest.fixture(scope="module")
def reference(tiny):
    cache = {}

    def get(arch):
        if arch not in cache:
            cache[arch] = _run(_holder(arch, tiny(arch)), arch)
        return cache[arch]
    return get


@pytest.mark.parametrize("arch", sorted(BOUNDS))
def test_comfy_fp8_file_generates_close_to_float32(arch, tiny, tmp_path, reference):
    folder = tiny(arch)
    info = write_comfy_fp8(arch, folder, tmp_path / f"{arch}_fp8_scaled.safetensors")
    assert info["quantized"] > 0 and info["full_precision_matrix_mult"] > 0
    holder = _holder(arch, info["path"], extras_name_or_path=folder)
    transformer = holder.loaded["transformer"]
    assert transformer._aitk_identity.fmt == "comfy_scaled_fp8"
    layers = [m for m in transformer.modules() if isinstance(m, ScaledFp8Linear)]
    assert len(layers) == transformer._aitk_checkpoint_report["fp8_resident_layers"] >= info["quantized"]
    assert all(m.weight.dtype == torch.float8_e4m3fn for m in layers)
    assert sum(m.full_precision_matrix_mult for m in layers) >= info["full_precision_matrix_mult"]
    lat_ref, img_ref = reference(arch)
    lat, img = _run(holder, arch)
    errors = {"latent": rel(lat, lat_ref), "image": rel(img * 2 - 1, img_ref * 2 - 1)}
    print(arch, "FP8 vs float32:", json.dumps({k: round(v, 4) for k, v in errors.items()}))
    assert 1e-4 < errors["latent"] <= BOUNDS[arch][0]        # it ran the FP8 weights, within the bound
    assert errors["image"] <= BOUNDS[arch][1]
    assert {p.dtype for p in transformer.parameters()} >= {torch.float8_e4m3fn}     # still FP8 after running


def test_comfy_quant_markers_load_the_same_weights(tiny, tmp_path):
    folder = tiny("zimage")
    a = write_comfy_fp8("zimage", folder, tmp_path / "meta.safetensors")
    b = write_comfy_fp8("zimage", folder, tmp_path / "markers.safetensors", markers="comfy_quant")
    ta = _holder("zimage", a["path"], extras_name_or_path=folder).loaded["transformer"]
    tb = _holder("zimage", b["path"], extras_name_or_path=folder).loaded["transformer"]
    sa, sb = ta.state_dict(), tb.state_dict()
    assert set(sa) == set(sb) and all(torch.equal(sa[k].float(), sb[k].float()) for k in sa)


def _rewrite(src, dst, edit):
    tensors = load_file(str(src))
    with safe_open(str(src), "pt") as f:
        metadata = f.metadata() or {}
    edit(tensors, metadata)
    save_file(tensors, str(dst), metadata=metadata)
    return str(dst)


def _first_layer(metadata):
    return sorted(json.loads(metadata["_quantization_metadata"])["layers"])[0]


@pytest.mark.parametrize("case,needle", [
    ("missing_scale", "is missing weight_scale"),
    ("unknown_option", "unsupported quantization option"),
    ("mxfp8", "mxfp8"), ("nvfp4", "nvfp4"), ("int8_tensorwise", "int8_tensorwise"),
    ("stray_scale", "has no quantization metadata"),
])
def test_audit_refuses_with_the_layer_named(case, needle, tiny, tmp_path):
    folder = tiny("wan21")
    src = write_comfy_fp8("wan21", folder, tmp_path / "ok.safetensors")["path"]

    def edit(tensors, metadata):
        doc = json.loads(metadata["_quantization_metadata"])
        layer = _first_layer(metadata)
        if case == "missing_scale":
            del tensors[layer + ".weight_scale"]
        elif case == "unknown_option":
            doc["layers"][layer]["group_size"] = 64
        elif case == "stray_scale":
            tensors[PREFIX + "patch_embedding.weight_scale"] = torch.tensor(1.0)
        else:
            doc["layers"][layer]["format"] = case
        metadata["_quantization_metadata"] = json.dumps(doc)
    bad = _rewrite(src, tmp_path / f"{case}.safetensors", edit)
    with pytest.raises(ComponentLoadError, match=needle) as e:
        _holder("wan21", bad, extras_name_or_path=folder)
    assert "transformer" in str(e.value)


def test_a_misread_scale_leaves_the_bound(tiny, tmp_path, reference):
    folder = tiny("zimage")
    src = write_comfy_fp8("zimage", folder, tmp_path / "ok.safetensors")["path"]

    def edit(tensors, metadata):
        for key in [k for k in tensors if k.endswith(".weight_scale")]:
            tensors[key] = tensors[key] * 2
    bad = _rewrite(src, tmp_path / "x2.safetensors", edit)
    lat, _ = _run(_holder("zimage", bad, extras_name_or_path=folder), "zimage")
    assert rel(lat, reference("zimage")[0]) > BOUNDS["zimage"][0]


def test_text_encoder_fp8_file_is_dequantized(tiny, tmp_path):
    """ComfyUI multiplies text encoders in full precision: an FP8 text encoder loads dequantized."""
    folder = tiny("zimage")
    te = write_comfy_fp8("zimage", folder, tmp_path / "qwen3_fp8_scaled.safetensors", role="text_encoder")
    holder = _holder("zimage", folder, components={"text_encoder": te["path"]}, extras_name_or_path=folder)
    model = holder.loaded["text_encoder"]
    assert model._aitk_identity.fmt == "comfy_scaled_fp8"
    assert not any(p.dtype == torch.float8_e4m3fn for p in model.parameters())
    assert model._aitk_checkpoint_report["dequantized_layers"]


def test_comfy_activation_scale_is_one_with_clamping():
    torch.manual_seed(0)
    layer = ScaledFp8Linear.from_linear(torch.nn.Linear(32, 16, bias=False))
    x = torch.randn(8, 32) * 300                       # some entries beyond +-448
    assert layer.set_scaled_mm(True, dtype=torch.float32) or True
    layer._scaled_mm_on = True
    got = layer._forward_scaled_mm(x)
    xq = x.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).float()
    want = xq @ layer.dequantized_weight().t()
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-3)
    layer.activation_scale = "dynamic"
    assert not torch.allclose(layer._forward_scaled_mm(x), want, rtol=1e-5, atol=1e-3)


def test_scaled_mm_path_on_a_converted_file(tiny, tmp_path, reference):
    folder = tiny("qwen_image")
    info = write_comfy_fp8("qwen_image", folder, tmp_path / "q.safetensors")
    holder = _holder("qwen_image", info["path"], extras_name_or_path=folder)
    assert enable_scaled_mm(holder.loaded["transformer"]) > 0
    lat, _ = _run(holder, "qwen_image")
    assert rel(lat, reference("qwen_image")[0]) <= BOUNDS["qwen_image"][0] * 2


def test_inspection_and_library_show_arch_and_format(tiny, tmp_path):
    from toolkit.file_report import inspect_file
    from toolkit.library import scan_folder
    info = write_comfy_fp8("wan21", tiny("wan21"), tmp_path / "diffusion_models" / "wan_fp8_scaled.safetensors")
    report = inspect_file(info["path"])
    assert report["arch"] == "wan21" and report["role"] == "transformer" and report["format"] == "comfy_scaled_fp8"
    assert report["summary"].startswith("wan21 transformer, ComfyUI scaled FP8 (e4m3fn), ")
    assert report["summary"].endswith(" kB") and report["quantized_layers"] == info["quantized"]
    (entry,) = [e for e in scan_folder(str(tmp_path)) if e["path"] == info["path"]]
    assert entry["arch"] == "wan21" and entry["role"] == "transformer" and entry["format"] == "comfy_scaled_fp8"
    assert entry["summary"] == report["summary"]


def test_refused_formats_say_why_in_inspection(tiny, tmp_path):
    from toolkit.file_report import inspect_file
    src = write_comfy_fp8("ltx", tiny("ltx"), tmp_path / "ok.safetensors")["path"]

    def edit(tensors, metadata):
        doc = json.loads(metadata["_quantization_metadata"])
        doc["layers"][_first_layer(metadata)]["format"] = "nvfp4"
        metadata["_quantization_metadata"] = json.dumps(doc)
    report = inspect_file(_rewrite(src, tmp_path / "nvfp4.safetensors", edit))
    assert "nvfp4" in report["summary"] and "could not be established" in report["problems"][0]


def test_flux_original_layout_converts_at_real_width():
    """At FLUX.1's real width (on the meta device: no memory), where the row's converter is diffusers'
    own unchanged, the row's inverse round-trips and every original weight maps onto one diffusers
    tensor, so each FP8 Linear stays FP8."""
    from diffusers import FluxTransformer2DModel
    from toolkit.models.archs.flux import to_original
    from toolkit.models.formats.converted_fp8 import load_converter, trace
    from toolkit.models.registry import get_arch
    row = next(c for c in get_arch("flux").components if c.role == "transformer").single_file
    with torch.device("meta"):
        model = FluxTransformer2DModel(num_layers=2, num_single_layers=2, guidance_embeds=True)
    state = model.state_dict()
    original = to_original(state)
    convert = load_converter(row.converter)
    back = convert({PREFIX + k: v for k, v in original.items()})
    assert set(back) == set(state) and all(back[k].shape == state[k].shape for k in state)
    sources, dropped = trace(convert, {k: tuple(v.shape) for k, v in original.items()})
    assert not dropped and all(len(v) == 1 for v in sources.values())
    assert sources["single_transformer_blocks.0.proj_mlp.weight"] == ["single_blocks.0.linear1.weight"]
    from toolkit.models.formats.arch_detect import detect_single_file
    # anchors alone name a row of FLUX.1's layout (flux's, or Flex.1's: the same keys; their configs tell them apart)
    found = detect_single_file({PREFIX + k for k in original})
    assert found["arch"] in ("flex1", "flux") and (found["role"], found["converter"]) == ("transformer", row.converter)


def test_wan22_a14b_both_experts_from_fp8_files(tiny, tmp_path):
    """Two denoisers, each its own FP8 file given as a component; configs from the folder's subfolders."""
    folder = tiny("wan22_a14b")
    files = {role: write_comfy_fp8("wan22_a14b", folder, tmp_path / f"{role}.safetensors", role=role)["path"]
             for role in ("transformer", "transformer_2")}
    holder = _holder("wan22_a14b", folder, components=files, extras_name_or_path=folder)
    lat_ref, _ = _run(_holder("wan22_a14b", folder), "wan22_a14b")
    for role in files:
        assert holder.loaded[role]._aitk_identity.fmt == "comfy_scaled_fp8"
        assert any(isinstance(m, ScaledFp8Linear) for m in holder.loaded[role].modules())
    lat, _ = _run(holder, "wan22_a14b")
    assert 1e-4 < rel(lat, lat_ref) <= BOUNDS["wan21"][0]
