"""LoRA: merged at load, bit-identical to diffusers' own load+fuse, and part of the pool identity."""
import numpy as np
import pytest
import torch

from extensions_built_in.inference_engine.worker import WorkerCore
from testing.fixtures import make_tiny_lora
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError
from toolkit.models.base_model import get_model_class


@pytest.fixture(scope="module")
def lora(tiny, tmp_path_factory):
    return str(make_tiny_lora("zimage", tiny("zimage"), tmp_path_factory.mktemp("lora") / "tiny_lora.safetensors"))


def _gen():
    return GenerateImageConfig.from_dict({"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2,
                                          "seed": 3}, "zimage")


@pytest.mark.parametrize("arch", ["zimage", "sd1"])
def test_lora_output_equals_diffusers_fuse(arch, tiny, tmp_path):
    from diffusers import DiffusionPipeline
    folder = tiny(arch)
    path = str(make_tiny_lora(arch, folder, tmp_path / "l.safetensors"))
    holder = get_model_class(arch)({"arch": arch, "name_or_path": folder, "lora_path": path, "lora_scale": 0.8}).load_model()
    base = get_model_class(arch)({"arch": arch, "name_or_path": folder}).load_model()
    gen = GenerateImageConfig.from_dict({"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2,
                                         "seed": 3}, arch)
    got = np.asarray(holder.generate_single(gen))
    assert not np.array_equal(got, np.asarray(base.generate_single(gen)))
    bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    bare.load_lora_weights(path)
    bare.fuse_lora(lora_scale=0.8)
    kw = holder.pipeline_kwargs(gen)
    ref = bare(**kw, generator=torch.Generator("cpu").manual_seed(3), output_type="pil").images[0]
    assert np.array_equal(got, np.asarray(ref))


def test_lora_is_part_of_identity(tiny, lora, tmp_path):
    eng = WorkerCore(lambda msg: None)
    base = ModelConfig.from_dict({"arch": "zimage", "name_or_path": tiny("zimage")})
    with_lora = ModelConfig.from_dict({"arch": "zimage", "name_or_path": tiny("zimage"), "lora_path": lora})
    eng._ensure_holder(base, None)
    p = eng.pool
    eng._ensure_holder(with_lora, None)
    assert p.loads == 6 and p.hits == 4          # only the transformer reloads (and gets the LoRA)
    t = p.holds("transformer")
    assert len(t) == 1 and t[0].identity.lora and t[0].module._aitk_lora == t[0].identity.lora
    out_lora = np.asarray(eng.holder.generate_single(_gen()))
    eng._ensure_holder(base, None)
    assert p.loads == 7 and not p.holds("transformer")[0].identity.lora
    assert not np.array_equal(np.asarray(eng.holder.generate_single(_gen())), out_lora)
    # scale is part of it too
    eng._ensure_holder(ModelConfig.from_dict({"arch": "zimage", "name_or_path": tiny("zimage"), "lora_path": lora,
                                              "lora_scale": 0.5}), None)
    assert p.loads == 8


def test_lora_errors_name_the_key(tiny, lora, tmp_path):
    cls = get_model_class("zimage")
    with pytest.raises(ConfigError, match="model.lora_path.*no such file"):
        cls({"arch": "zimage", "name_or_path": tiny("zimage"), "lora_path": str(tmp_path / "none.safetensors")}).load_model()
    with pytest.raises(ConfigError, match="model.lora_path.*no such file"):
        ModelConfig.from_dict({"arch": "zimage", "lora_path": str(tmp_path / "none.safetensors")})
    with pytest.raises(ConfigError, match="model.lora_path.*quantized transformer"):
        cls({"arch": "zimage", "name_or_path": tiny("zimage"), "lora_path": lora, "quantize": True}).load_model()
