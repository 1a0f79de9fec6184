"""toolkit.file_report: what each Krea 2 component file is, from its safetensors header alone."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from testing import tiny_krea2 as tk
from toolkit import file_report as ins
from toolkit.models.formats import safetensors_header

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def krea(tmp_path_factory):
    return tk.cached_tiny_krea2(tmp_path_factory.getbasetemp() / "tiny_krea2", seed=0)


def _profile(krea) -> dict:
    return {"diffusion_model": krea["diffusion_model"], "text_encoder": krea["text_encoder"], "vae": krea["vae"],
            "tokenizer": krea["tokenizer"]}


def test_diffusion_model_report(krea):
    r = ins.inspect_file(krea["diffusion_model"])
    n = krea["quantized_layers"]["diffusion_model"]
    assert r["architecture"] == "krea2_transformer" and r["layout"] == "original"
    assert r["prefix"] == ""
    assert r["format"] == "comfy_scaled_fp8"
    # the real file's census in small: F8 weights, one F32 scale each, everything else BF16
    assert r["dtype_counts"] == {"BF16": 44, "F32": n, "F8_E4M3": n}
    assert r["tensor_count"] == 44 + 2 * n
    assert r["quantized_layers"] == n and r["full_precision_matrix_mult"] == krea["full_precision_matrix_mult"][
        "diffusion_model"]
    assert r["quantization"] == {"sources": ["metadata"], "formats": {"float8_e4m3fn": n}}
    assert r["missing_scales"] == 0 and r["unsupported_formats"] == {} and r["problem_count"] == 0
    assert r["ignored_keys"] == 0
    assert r["sizes"] == {"width": 64, "blocks": 2, "reference": False}
    assert r["metadata_keys"] == ["_quantization_metadata"]


def test_text_encoder_and_vae_reports(krea):
    te = ins.inspect_file(krea["text_encoder"])
    n = krea["quantized_layers"]["text_encoder"]
    assert te["architecture"] == "qwen3vl_text_encoder" and te["prefix"] == "model."
    assert te["format"] == "comfy_scaled_fp8" and te["quantization"]["sources"] == ["comfy_quant"]
    assert te["dtype_counts"]["U8"] == n and te["dtype_counts"]["F8_E4M3"] == n and te["dtype_counts"]["F32"] == n
    assert te["quantized_layers"] == n and te["missing_scales"] == 0
    assert te["ignored_keys"] == len(krea["ignored_text_encoder_keys"]) > 0
    assert all(k.startswith("visual.") for k in te["ignored_key_examples"])
    assert te["sizes"] == {"width": 32, "layers": 8, "reference": False}
    vae = ins.inspect_file(krea["vae"])
    assert vae["architecture"] == "qwen_image_vae" and vae["layout"] == "original"
    assert vae["format"] == "f32 original" and vae["tensor_count"] == 194 and vae["quantized_layers"] == 0


def test_prefixed_checkpoint_and_tokenizer_folder(krea, tmp_path):
    dst = tmp_path / "prefixed.safetensors"
    tk.restyle_variant(krea["diffusion_model"], dst, "prefix")
    r = ins.inspect_file(str(dst))
    assert r["prefix"] == "model.diffusion_model." and r["format"] == "comfy_scaled_fp8"
    t = ins.inspect_path(krea["tokenizer"])
    assert t["kind"] == "tokenizer" and t["complete"] and t["tokenizer_class"] == "Qwen2Tokenizer"
    assert t["files"] == {"vocab.json": True, "merges.txt": True, "tokenizer_config.json": True,
                          "tokenizer.json": False}
    partial = tmp_path / "tok"
    shutil.copytree(krea["tokenizer"], partial)
    os.remove(partial / "merges.txt")
    t = ins.inspect_path(str(partial))
    assert not t["complete"] and t["missing"] == ["merges.txt"]
    ok, why = ins.compatibility(t, "tokenizer", "krea2")
    assert not ok and "merges.txt" in why


def test_diffusers_folder(krea):
    r = ins.inspect_path(krea["pipeline"])
    assert r["kind"] == "diffusers_pipeline"
    comps = r["components"]
    (tr,) = comps["transformer"]["files"]
    assert tr["architecture"] == "krea2_transformer" and tr["layout"] == "diffusers" and tr["format"] == "f32 diffusers"
    (vae,) = comps["vae"]["files"]
    assert vae["architecture"] == "qwen_image_vae" and vae["layout"] == "diffusers"
    (te,) = comps["text_encoder"]["files"]
    assert te["architecture"] == "qwen3vl_text_encoder" and te["layout"] == "transformers"
    assert comps["tokenizer"]["kind"] == "tokenizer" and comps["tokenizer"]["complete"]


def test_profile_compatibility(krea):
    result = ins.inspect_paths(_profile(krea), architecture="krea2")
    assert result["compatible"], [c.get("compatibility") for c in result["components"]]
    assert [c["role"] for c in result["components"]] == ["diffusion_model", "text_encoder", "vae", "tokenizer"]
    swapped = ins.inspect_paths({"diffusion_model": krea["vae"], "vae": krea["diffusion_model"]}, architecture="krea2")
    assert not swapped["compatible"]
    assert "detected Qwen Image VAE, diffusion_model needs Krea 2 diffusion model" in \
        swapped["components"][0]["compatibility"]
    missing = ins.inspect_paths(["vae=/nonexistent/vae.safetensors"], architecture="krea2")
    assert missing["components"][0]["error"] == "no such file" and not missing["compatible"]


def test_rejected_files_are_reported(krea, tmp_path):
    cases = {"missing_scale": {"missing_scales": 1}, "nvfp4": {"unsupported_formats": {"nvfp4": 1}},
             "mixed_format": {"unsupported_formats": {"asym_w4a8_int8": 1, "int8_tensorwise": 1, "nvfp4": 1}},
             "fp8_conv": {"unsupported_formats": {"float8 convolution": 1}},
             "int8_storage": {"unsupported_formats": {"INT8": 1}}}
    for kind, expected in cases.items():
        dst = tmp_path / f"{kind}.safetensors"
        info = tk.corrupt_variant(krea["diffusion_model"], dst, kind)
        r = ins.inspect_file(str(dst))
        for key, value in expected.items():
            assert r[key] == value, (kind, key, r[key])
        assert r["architecture"] == "krea2_transformer"      # the keys still look like Krea 2 ...
        ok, why = ins.compatibility(r, "diffusion_model", "krea2")
        assert not ok and info["layer"] in why               # ... but it is not accepted
    r = ins.inspect_file(str(tmp_path / "mixed_format.safetensors"))
    assert r["format"].startswith("unsupported quantization (asym_w4a8_int8 x1")


def test_inspection_allocates_no_tensor_data(krea, monkeypatch):
    import safetensors
    import safetensors.torch
    import torch

    def forbidden(*args, **kwargs):
        raise AssertionError("inspection touched tensor data")
    for mod, name in ((safetensors, "safe_open"), (safetensors.torch, "safe_open"), (safetensors.torch, "load_file"),
                      (safetensors.torch, "load"), (torch, "load"), (torch, "frombuffer"), (torch, "from_file"),
                      (torch, "empty"), (torch, "zeros"), (torch, "tensor")):
        monkeypatch.setattr(mod, name, forbidden)
    monkeypatch.setattr(torch.cuda, "init", forbidden)
    monkeypatch.setattr(torch.cuda, "is_available", forbidden)
    raw_reads = []
    real_raw = safetensors_header.read_raw_bytes

    def spy(header, name, max_bytes=4096):
        raw_reads.append((name, header.tensors[name].nbytes))
        return real_raw(header, name, max_bytes)
    monkeypatch.setattr(safetensors_header, "read_raw_bytes", spy)
    monkeypatch.setattr(ins.quant, "read_raw_bytes", spy)
    result = ins.inspect_paths(list(_profile(krea).values()) + [krea["pipeline"]])
    assert all("error" not in c for c in result["components"])
    # the only data read: the comfy_quant markers, a few dozen bytes each
    assert raw_reads and all(n.endswith(".comfy_quant") and size < 256 for n, size in raw_reads)
    header = safetensors_header.read_header(krea["diffusion_model"])
    largest = max(header.tensors.values(), key=lambda t: t.nbytes)
    with pytest.raises(safetensors_header.HeaderError, match="only small marker tensors"):
        real_raw(header, largest.name)


def test_inspection_never_imports_torch(krea):
    code = ("import sys, json; from toolkit.file_report import inspect_paths; "
            f"r = inspect_paths({json.dumps(list(_profile(krea).values()))}, architecture=None); "
            "print(json.dumps(sorted(m for m in ('torch', 'safetensors', 'diffusers', 'transformers') "
            "if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []       # no torch: CUDA cannot be initialised


def test_cli_text_json_and_exit_codes(krea, capsys):
    args = [f"{k}={v}" for k, v in _profile(krea).items()]
    assert ins.main(args + ["--architecture", "krea2"]) == 0
    text = capsys.readouterr().out
    assert "format: comfy_scaled_fp8 (markers: _quantization_metadata)" in text
    assert "quantized layers: 48 (full_precision_matrix_mult 10), missing scales: 0" in text
    assert "all components compatible with krea2: yes" in text
    assert ins.main([krea["diffusion_model"], "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["components"][0]["quantized_layers"] == 48
    assert ins.main(["/nonexistent.safetensors"]) == 1
    assert "error: no such file" in capsys.readouterr().out
    assert ins.main([f"text_encoder={krea['vae']}", "--architecture", "krea2"]) == 1
    capsys.readouterr()


def test_cli_as_module(krea):
    out = subprocess.run([sys.executable, "-m", "toolkit.file_report", krea["text_encoder"], "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["components"][0]["architecture"] == "qwen3vl_text_encoder"


def _profiles_file(krea, tmp_path):
    path = tmp_path / "profiles.toml"
    path.write_text(
        'default_model = "tiny-krea2"\n'
        '[model_profiles.tiny-krea2]\narchitecture = "krea2"\nvariant = "turbo"\n'
        + "".join(f'{k} = "{v}"\n' for k, v in _profile(krea).items())
        + '[model_profiles.swapped]\narchitecture = "krea2"\nvariant = "raw"\n'
        f'diffusion_model = "{krea["vae"]}"\ntext_encoder = "{krea["text_encoder"]}"\n'
        f'vae = "{krea["vae"]}"\ntokenizer = "{krea["tokenizer"]}"\n')
    return str(path)


def test_inspect_profile(krea, tmp_path):
    from toolkit.profiles import load_profiles
    profiles = load_profiles(_profiles_file(krea, tmp_path))
    good = ins.inspect_profile(profiles.get("tiny-krea2"))
    assert good["profile"] == "tiny-krea2" and good["architecture"] == "krea2" and good["variant"] == "turbo"
    assert good["compatible"] is True
    by_role = {c["role"]: c for c in good["components"]}
    assert by_role["transformer"]["format"] == "comfy_scaled_fp8"
    assert by_role["tokenizer"]["kind"] == "tokenizer"
    json.dumps(good)                                             # what the engine route returns
    bad = ins.inspect_profile(profiles.get("swapped"))
    assert bad["compatible"] is False
    assert not {c["role"]: c for c in bad["components"]}["transformer"]["compatible"]


def test_cli_with_profiles_file(krea, tmp_path, capsys):
    path = _profiles_file(krea, tmp_path)
    assert ins.main(["--profiles", path, "tiny-krea2"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("profile tiny-krea2: krea2 turbo")
    assert "all components compatible with krea2: yes" in text
    assert ins.main(["--profiles", path, "swapped", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["compatible"] is False
