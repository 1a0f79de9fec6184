"""Config modules and the job runner's error messages: each names the file and the key."""
import json
import os
import subprocess
import sys

import pytest

from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError
from toolkit.models.registry import ARCHS, get_arch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_model_config_fills_registry_default():
    mc = ModelConfig.from_dict({"arch": "zimage"})
    assert mc.name_or_path == ARCHS["zimage"].default_name_or_path
    assert mc.dtype == "auto" and mc.quantize is False


@pytest.mark.parametrize("d,key", [
    ({}, "model.arch"),
    ({"arch": "nope"}, "model.arch"),
    ({"arch": "zimage", "bogus": 1}, "model.bogus"),
    ({"arch": "zimage", "quantize": "yes"}, "model.quantize"),
    ({"arch": "zimage", "qtype": "qint3"}, "model.qtype"),
    ({"arch": "zimage", "dtype": "float64"}, "model.dtype"),
])
def test_model_config_errors_name_the_field(d, key):
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict(d)
    assert e.value.key == key


def test_sample_defaults_come_from_registry():
    for arch, spec in ARCHS.items():
        gen = GenerateImageConfig.from_dict({"prompt": "x", **{name: "in.png" for name in spec.needed_inputs}},
                                            arch)
        d = spec.sample_defaults()
        assert gen.num_inference_steps == d["num_inference_steps"]
        assert gen.output_ext == d["output_ext"]
        assert gen.extras == {k: d[k] for k in spec.sample_extras}


@pytest.mark.parametrize("arch,d,key", [
    ("zimage", {"width": -64}, "sample.width"),
    ("zimage", {"height": 1000}, "sample.height"),      # not a multiple of 16
    ("zimage", {"num_inference_steps": 0}, "sample.num_inference_steps"),
    ("zimage", {"seed": "abc"}, "sample.seed"),
    ("zimage", {"unknown": 1}, "sample.unknown"),
    ("zimage", {"lyrics": "la"}, "sample.lyrics"),        # an ace_step key on an image arch
    ("zimage", {"output_ext": "mp4"}, "sample.output_ext"),
    ("wan21", {"num_frames": 0}, "sample.num_frames"),
    ("wan21", {"fps": 0}, "sample.fps"),
    ("ace_step", {"duration": 0}, "sample.duration"),
    ("zimage", {"guidance_scale": float("nan")}, "sample.guidance_scale"),
])
def test_sample_errors_name_the_field(arch, d, key):
    with pytest.raises(ConfigError) as e:
        GenerateImageConfig.from_dict(d, arch)
    assert e.value.key == key


def test_krea2_variant_defaults_and_precedence():
    turbo = GenerateImageConfig.from_dict({}, "krea2")
    assert (turbo.num_inference_steps, turbo.guidance_scale, turbo.extras["mu"]) == (8, 0.0, 1.15)
    assert (turbo.width, turbo.height) == (1024, 1024)
    raw = GenerateImageConfig.from_dict({}, ModelConfig.from_dict({"arch": "krea2", "variant": "raw",
                                                                   "name_or_path": "."}))
    assert (raw.num_inference_steps, raw.guidance_scale, raw.extras["mu"]) == (52, 3.5, None)
    assert raw.extras["shift_y1"] == 0.5 and raw.extras["shift_y2"] == 1.15
    over = GenerateImageConfig.from_dict({"num_inference_steps": 4, "mu": 0.9}, "krea2", variant="raw")
    assert over.num_inference_steps == 4 and over.extras["mu"] == 0.9 and over.guidance_scale == 3.5


def test_krea2_rounds_sizes_up_with_a_warning():
    gen = GenerateImageConfig.from_dict({"width": 1000, "height": 1024}, "krea2")
    assert gen.width == 1008 and gen.height == 1024
    assert gen.warnings == ("sample.width 1000 rounded up to 1008 (a multiple of 16)",)


@pytest.mark.parametrize("d,key", [({"mu": "high"}, "sample.mu"), ({"shift_y1": None, "shift_y2": "x"}, "sample.shift_y2")])
def test_krea2_override_types(d, key):
    with pytest.raises(ConfigError) as e:
        GenerateImageConfig.from_dict(d, "krea2")
    assert e.value.key == key


@pytest.mark.parametrize("arch", ["zimage", "flux", "sd1", "wan21"])
def test_shift_overrides_are_rejected_where_not_understood(arch):
    for key in ("mu", "shift_y1", "shift_y2"):
        with pytest.raises(ConfigError) as e:
            GenerateImageConfig.from_dict({key: 1.0}, arch)
        assert e.value.key == f"sample.{key}" and "unknown key" in e.value.message


def test_variants_are_validated():
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict({"arch": "krea2", "variant": "distilled", "name_or_path": "."})
    assert e.value.key == "model.variant"
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict({"arch": "zimage", "variant": "turbo"})
    assert e.value.key == "model.variant"
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict({"arch": "krea2"})
    assert e.value.key == "model.name_or_path"
    assert ModelConfig.from_dict({"arch": "krea2", "name_or_path": "."}).variant == "turbo"


def test_arch_extras_are_accepted_where_declared():
    gen = GenerateImageConfig.from_dict({"lyrics": "[verse] hi"}, "ace_step")
    assert gen.extras == {"lyrics": "[verse] hi"}


def test_random_seed_is_fixed_once():
    gen = GenerateImageConfig.from_dict({}, "zimage")
    assert gen.seed == -1
    seeded = gen.seeded()
    assert 0 <= seeded.seed < 2**31 and seeded.seeded() is seeded and gen.seed == -1


def test_registry_rows_are_complete():
    """Row-by-row checks are the contract suite's (test_arch_contract.py); here the table as a whole."""
    for name, spec in ARCHS.items():
        assert spec.name == name
        assert "holder" not in spec.public() and "tiny" not in spec.public()
    assert {ARCHS[a].latents.layout for a in ("zimage", "flux", "wan21", "ace_step")} == {"BCHW", "packed", "BCFHW",
                                                                                          "BLC"}


def _run(tmp_path, text, name="job.yaml"):
    path = tmp_path / name
    path.write_text(text)
    p = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), str(path)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    return p, str(path)


GOOD_PROCESS = """
      - type: Generate
        model: {arch: zimage, name_or_path: "tiny:zimage"}
        prompts: [a]
"""


@pytest.mark.parametrize("body,key", [
    ("job: extension\nconfig: {name: x, process: [{type: Nope}]}\n", "config.process[0].type"),
    ("job: training\nconfig: {name: x, process: [{type: Generate}]}\n", "job"),
    ("job: extension\nconfig: {name: x}\n", "config.process"),
    ("job: extension\nconfig: {name: x, process: []}\n", "config.process"),
    ("job: extension\nconfig: {name: x, oops: 1, process: [{type: Generate}]}\n", "config.oops"),
    ("job: extension\nconfig: {name: x, process: [{type: Generate, prompts: [a]}]}\n", "config.process[0].model"),
    ("job: extension\nconfig: {name: x, process: [{type: Generate, prompts: [a], model: {arch: zimage}, colour: red}]}\n",
     "config.process[0].colour"),
    ("job: extension\nconfig: {name: x, process: [{type: Generate, prompts: [a], model: {arch: zimage}, sample: {width: 63}}]}\n",
     "config.process[0].sample.width"),
    ("job: extension\nconfig: {name: x, process: [{type: Generate, prompts: [a], model: {arch: zimage, qtype: q9}}]}\n",
     "config.process[0].model.qtype"),
])
def test_run_py_bad_config_names_file_and_key(tmp_path, body, key):
    p, path = _run(tmp_path, body)
    assert p.returncode != 0
    lines = [line for line in p.stderr.strip().splitlines() if line]
    assert len(lines) == 1, p.stderr
    assert path in lines[0] and key in lines[0], lines[0]


def test_run_py_malformed_files(tmp_path):
    p, path = _run(tmp_path, "job: [unclosed\n")
    assert p.returncode != 0 and path in p.stderr and "malformed" in p.stderr
    p, path = _run(tmp_path, "{not json", name="job.json")
    assert p.returncode != 0 and path in p.stderr and "malformed" in p.stderr
    p = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), str(tmp_path / "missing.yaml")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "missing.yaml" in p.stderr


def test_json_config_is_read(tmp_path):
    cfg = {"job": "extension", "config": {"name": "j", "process": [{"type": "Generate", "prompts": ["a"],
                                                                    "model": {"arch": "zimage"}, "bad": 1}]}}
    p, path = _run(tmp_path, json.dumps(cfg), name="job.json")
    assert p.returncode != 0 and "config.process[0].bad" in p.stderr
