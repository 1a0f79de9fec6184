"""LoRA files described from their headers (toolkit/lora_headers.py): the format and arch of every file
the tiny-LoRA factory writes, rank, alpha (F32/F16/BF16 scalars), trigger words, bad headers listed
with an error, name lookup for the prompt syntax, and no torch in the listing process."""
import json
import os
import struct
import subprocess
import sys

import pytest

from toolkit import lora_headers
from toolkit.models.formats.safetensors_header import HeaderError
from toolkit.models.registry import ARCHS
from toolkit.models.tiny.loras import write_tiny_lora

ARCH_NAMES = ("sd1", "sdxl", "flux", "zimage", "wan21", "qwen_image", "krea2")
CASES = [(a, f) for a in ARCH_NAMES for f in ARCHS[a].lora.formats]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_raw(path, tensors, metadata=None):
    """A safetensors file from (name, dtype, shape, raw bytes) rows, written by hand (BF16 included)."""
    header, offset, blob = {}, 0, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blob += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob)
    return str(path)


def _f32(n):
    return struct.pack(f"<{n}f", *([0.5] * n))


@pytest.mark.parametrize("arch,fmt", CASES)
def test_factory_files_are_described(tiny, tmp_path, arch, fmt):
    lora = ARCHS[arch].lora
    path = write_tiny_lora(arch, tiny(arch), tmp_path / "sub" / f"my_{fmt}.safetensors", fmt=fmt, rank=4,
                           text_encoder=bool(lora.text_encoders) and fmt != "comfyui")
    d = lora_headers.describe(str(path), str(tmp_path))
    assert d["name"] == f"sub/my_{fmt}" and d["path"] == f"sub/my_{fmt}.safetensors"
    assert d["bytes"] == os.path.getsize(path) and d["mtime"] == os.path.getmtime(path)
    assert (d["format"], d["arch"], d["rank"]) == (fmt, arch, 4)
    assert d["alpha"] == (2.0 if fmt in lora.alpha else None)
    if fmt == "kohya":
        assert d["trigger_words"] == [f"my_{fmt}_style"] and d["output_name"] == f"my_{fmt}"
        assert d["base_model"] == f"tiny_{arch}"
    else:
        assert d["trigger_words"] == [] and d["output_name"] is None
        assert d["base_model"] == (f"tiny-{arch}/lora" if fmt == "comfyui" else None)


def test_alpha_scalars_of_every_float_dtype(tmp_path):
    down, up = ("lora_unet_x.lora_down.weight", "F32", (2, 3), _f32(6)), ("lora_unet_x.lora_up.weight", "F32", (3, 2), _f32(6))
    for dtype, raw in (("F32", struct.pack("<f", 8.0)), ("F16", struct.pack("<e", 8.0)),
                       ("BF16", struct.pack("<f", 8.0)[2:])):
        path = write_raw(tmp_path / f"{dtype}.safetensors", [down, up, ("lora_unet_x.alpha", dtype, (), raw)])
        d = lora_headers.describe(path)
        assert (d["format"], d["rank"], d["alpha"]) == ("kohya", 2, 8.0), dtype
    # no alpha tensor: kohya's metadata says it
    path = write_raw(tmp_path / "meta.safetensors", [down, up], {"ss_network_alpha": "1.5", "ss_network_dim": "2"})
    assert lora_headers.describe(path)["alpha"] == 1.5


def test_trigger_word_rule():
    freq = {"10_a": {"zkx": 30, "photo": 12}, "5_b": {"zkx": 10, "qqv": 40, " ": 99}}
    assert lora_headers.trigger_words({"ss_tag_frequency": json.dumps(freq)}) == ["zkx", "qqv"]   # tied at 40
    assert lora_headers.trigger_words({"ss_output_name": "mystyle"}) == ["mystyle"]
    assert lora_headers.trigger_words({"ss_tag_frequency": "not json", "ss_output_name": "x"}) == ["x"]
    assert lora_headers.trigger_words({}) == []


def test_bad_headers_are_refused_and_listed_with_an_error(tmp_path):
    (tmp_path / "short.safetensors").write_bytes(b"\x01\x02")
    (tmp_path / "huge.safetensors").write_bytes(struct.pack("<Q", 10_000) + b"{}")
    (tmp_path / "notjson.safetensors").write_bytes(struct.pack("<Q", 4) + b"nope")
    text = json.dumps({"a.lora_A.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}).encode()
    (tmp_path / "truncated.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * 4)
    (tmp_path / "notes.txt").write_text("not a LoRA")
    for name, why in (("short", "too short"), ("huge", "header length"), ("notjson", "not JSON"),
                      ("truncated", "outside the file")):
        with pytest.raises(HeaderError, match=why):
            lora_headers.describe(str(tmp_path / f"{name}.safetensors"))
    listed = {d["name"]: d for d in lora_headers.list_loras(str(tmp_path))}
    assert set(listed) == {"short", "huge", "notjson", "truncated"}
    assert all("error" in d and str(tmp_path) not in d["error"] for d in listed.values())
    assert listed["short"]["bytes"] == 2


def test_a_file_that_is_no_lora_is_unknown(tmp_path):
    path = write_raw(tmp_path / "ckpt.safetensors", [("model.diffusion_model.out.weight", "F32", (2, 2), _f32(4))])
    d = lora_headers.describe(path)
    assert (d["format"], d["arch"], d["rank"], d["alpha"]) == ("unknown", None, None, None)
    # LoRA keys no arch claims
    path = write_raw(tmp_path / "odd.safetensors", [("foo.bar.lora_A.weight", "F32", (2, 2), _f32(4)),
                                                     ("foo.bar.lora_B.weight", "F32", (2, 2), _f32(4))])
    assert (lora_headers.describe(path)["format"], lora_headers.describe(path)["arch"]) == ("peft", None)


def test_find_lora_by_relative_name_or_unique_basename(tmp_path):
    for rel in ("style/a.safetensors", "b.safetensors", "x/dup.safetensors", "y/dup.safetensors"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        write_raw(tmp_path / rel, [])
    assert lora_headers.find_lora(str(tmp_path), "style/a") == "style/a.safetensors"
    assert lora_headers.find_lora(str(tmp_path), "a") == "style/a.safetensors"
    assert lora_headers.find_lora(str(tmp_path), "b.safetensors") == "b.safetensors"
    assert lora_headers.find_lora(str(tmp_path), "x/dup") == "x/dup.safetensors"
    with pytest.raises(LookupError, match="ambiguous"):
        lora_headers.find_lora(str(tmp_path), "dup")
    with pytest.raises(LookupError, match="no LoRA named 'zzz'"):
        lora_headers.find_lora(str(tmp_path), "zzz")


def test_listing_imports_no_torch(tmp_path):
    write_raw(tmp_path / "a.safetensors", [("lora_unet_x.lora_down.weight", "F32", (2, 2), _f32(4)),
                                            ("lora_unet_x.lora_up.weight", "F32", (2, 2), _f32(4)),
                                            ("lora_unet_x.alpha", "F16", (), struct.pack("<e", 1.0))])
    code = ("import sys, toolkit.lora_headers as l; out = l.list_loras(sys.argv[1]); assert out[0]['alpha'] == 1.0, out; "
            "bad = [m for m in ('torch', 'diffusers', 'transformers', 'safetensors', 'numpy') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, check=True, timeout=120)


def test_cli_writes_a_lora_and_prints_its_path(tiny, tmp_path):
    out = tmp_path / "cli" / "k.safetensors"
    run = subprocess.run([sys.executable, "-m", "toolkit.models.tiny.loras", "sd1", str(out), "--format", "kohya",
                          "--seed", "3", "--model-folder", tiny("sd1")], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(out)
    assert lora_headers.describe(str(out))["format"] == "kohya"
    bad = subprocess.run([sys.executable, "-m", "toolkit.models.tiny.loras", "sd1", str(out), "--format", "comfyui",
                          "--model-folder", tiny("sd1")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "takes LoRA files in peft, kohya" in bad.stderr
