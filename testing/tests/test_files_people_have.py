"""The files people have, offline: all-in-one checkpoints (A1111/Forge `models/Stable-diffusion/`,
ComfyUI `checkpoints/`) and ComfyUI component files load with nothing downloaded, configs from the
files and the arch rows, tokenizers found offline; each equals the same model loaded from its
diffusers folder, bit for bit on CPU float32. Files are the tiny models written in the layouts users
download (toolkit/models/tiny/checkpoints.py, each layout checked against diffusers' own converter)."""
import json
import os
import shutil

import pytest
import torch

from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError
from toolkit.models.base_model import get_model_class
from toolkit.models.formats.detect import detect_file
from toolkit.models.tiny.checkpoints import write_checkpoint, write_component

SAMPLE = {"prompt": "a red fox in snow", "width": 64, "height": 64, "num_inference_steps": 2, "seed": 3}


def comfyui_tree(root, tiny_folder, checkpoint: str | None = None) -> str:
    """A ComfyUI checkout as people have it: `models/checkpoints/`, and its CLIP tokenizer folder
    `comfy/sd1_tokenizer` (here the tiny model's: the tiny CLIP's vocabulary)."""
    shutil.copytree(os.path.join(tiny_folder, "tokenizer"), root / "comfy" / "sd1_tokenizer")
    (root / "models" / "checkpoints").mkdir(parents=True)
    return str(root / "models" / "checkpoints" / (checkpoint or "model.safetensors"))


def load(model: dict):
    mc = ModelConfig.from_dict(model)
    holder = get_model_class(mc.arch)(mc)
    holder.load_model()
    return holder


def same_weights(a, b, roles):
    for role in roles:
        sa, sb = a.loaded[role].state_dict(), b.loaded[role].state_dict()
        assert set(sa) == set(sb), (role, sorted(set(sa) ^ set(sb))[:4])
        bad = [k for k in sa if not torch.equal(sa[k], sb[k])]
        assert not bad, (role, bad[:3])


def image(holder, tmp_path, name):
    gen = GenerateImageConfig.from_dict(SAMPLE, holder.model_config)
    import numpy as np
    from PIL import Image
    rec = holder.generate_images([gen], output_folder=str(tmp_path / name))[0]
    return np.asarray(Image.open(rec["path"]))


# -- SD 1.x all-in-one ---------------------------------------------------------------------------------
def test_an_sd1_checkpoint_loads_offline_and_equals_its_folder(tiny, tmp_path, no_hub):
    folder = tiny("sd1")
    ckpt = comfyui_tree(tmp_path, folder, "tiny-sd15.safetensors")
    write_checkpoint("sd1", folder, ckpt)
    det = detect_file(ckpt)
    assert det.arch == "sd1" and det.all_in_one and set(det.parts) == {"unet", "vae", "text_encoder"}
    assert {r: p.prefix for r, p in det.parts.items()} == {"unet": "model.diffusion_model.",
                                                           "vae": "first_stage_model.",
                                                           "text_encoder": "cond_stage_model.transformer."}
    from_file = load({"name_or_path": ckpt})           # arch from the file, tokenizer from the ComfyUI tree
    from_folder = load({"arch": "sd1", "name_or_path": folder})
    same_weights(from_file, from_folder, ("unet", "vae", "text_encoder"))
    assert (image(from_file, tmp_path, "a") == image(from_folder, tmp_path, "b")).all()


def test_an_fp16_checkpoint_as_civitai_ships_it_equals_the_fp16_folder(tiny, tmp_path, no_hub):
    folder = tiny("sd1")
    ckpt = comfyui_tree(tmp_path, folder)
    write_checkpoint("sd1", folder, ckpt, dtype=torch.float16)
    half = tmp_path / "half"
    from toolkit.models.tiny import build_pipeline
    build_pipeline("sd1").to(torch.float16).save_pretrained(half)
    a = load({"arch": "sd1", "name_or_path": ckpt})
    b = load({"arch": "sd1", "name_or_path": str(half)})
    same_weights(a, b, ("unet", "vae", "text_encoder"))


def test_the_clip_tokenizer_is_built_offline_and_tokenizes_as_openai_clip(tmp_path, monkeypatch):
    """(d): no folder anywhere; the tokenizer is built from open_clip_torch's copy of OpenAI's BPE, and
    tokenizes as open_clip's own reference tokenizer does (the other way round)."""
    from open_clip.tokenizer import SimpleTokenizer
    from transformers import AutoTokenizer

    from toolkit.tokenizers import find_tokenizer
    monkeypatch.setenv("AITK_TOKENIZER_CACHE", str(tmp_path / "cache"))
    import huggingface_hub.constants
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty_hub"))
    folder = find_tokenizer("clip_l", role="tokenizer")
    tok = AutoTokenizer.from_pretrained(folder)
    reference = SimpleTokenizer()
    assert len(tok) == 49408 and tok.pad_token == "<|endoftext|>"
    for text in ("a photo of a cat, high detail", "Émilie's café — 8K, (masterpiece:1.2)", "lörem ipsüm dolor"):
        assert tok(text)["input_ids"][1:-1] == reference.encode(text), text


def test_a_missing_tokenizer_names_the_role_and_where_it_looked(tiny, tmp_path, monkeypatch, no_hub):
    monkeypatch.setattr("toolkit.tokenizers.VOCABULARIES", {})
    folder = tiny("sd1")
    ckpt = str(tmp_path / "elsewhere.safetensors")
    write_checkpoint("sd1", folder, ckpt)
    with pytest.raises(ConfigError) as e:
        load({"arch": "sd1", "name_or_path": ckpt})
    assert e.value.key == "model.components.tokenizer"


def test_a_component_of_the_wrong_kind_is_refused_naming_the_role(tiny, tmp_path, no_hub):
    folder = tiny("sd1")
    vae = str(tmp_path / "vae.safetensors")
    write_component("sd1", folder, "vae", vae)
    ckpt = str(tmp_path / "ckpt.safetensors")
    write_checkpoint("sd1", folder, ckpt, roles=("unet", "vae"))
    with pytest.raises(ConfigError) as e:
        load({"arch": "sd1", "name_or_path": ckpt, "components": {"text_encoder": vae,
                                                                   "tokenizer": os.path.join(folder, "tokenizer")}})
    assert e.value.key == "model.components.text_encoder" and "vae.safetensors" in e.value.message


def test_a_checkpoint_missing_a_component_names_what_it_needs(tiny, tmp_path, no_hub, monkeypatch):
    import huggingface_hub.constants
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty_hub"))
    folder = tiny("sd1")
    ckpt = str(tmp_path / "unet_only.safetensors")
    write_checkpoint("sd1", folder, ckpt, roles=("unet",))
    with pytest.raises(ConfigError) as e:
        load({"arch": "sd1", "name_or_path": ckpt, "components": {"tokenizer": os.path.join(folder, "tokenizer")}})
    assert "text_encoder" in e.value.message and "vae" in e.value.message


def test_a_file_that_is_no_model_is_refused_naming_what_was_found(tiny, tmp_path):
    folder = tiny("sd1")
    vae = str(tmp_path / "just_a_vae.safetensors")
    write_component("sd1", folder, "vae", vae)
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict({"name_or_path": vae})
    assert e.value.key == "model.arch" and "VAE" in e.value.message
    from safetensors.torch import save_file
    other = str(tmp_path / "other.safetensors")
    save_file({"some.layer.weight": torch.zeros(2, 2)}, other)
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict({"name_or_path": other})
    assert e.value.key == "model.arch"


def test_shapes_that_match_no_known_config_are_refused_naming_the_difference(tiny, tmp_path):
    """A UNet whose shapes are no SD 1.x config (here: its text width changed) is not guessed at."""
    folder = tiny("sd1")
    ckpt = str(tmp_path / "odd.safetensors")
    write_checkpoint("sd1", folder, ckpt)
    from safetensors.torch import load_file, save_file
    state = load_file(ckpt)
    for k in [k for k in state if k.endswith("attn2.to_k.weight") or k.endswith("attn2.to_v.weight")]:
        state[k] = torch.zeros(state[k].shape[0], 48)
    save_file(state, ckpt)
    det = detect_file(ckpt)
    assert det.denoiser is not None and "cross_attention_dim 48" in det.denoiser.error
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict({"name_or_path": ckpt})
    assert e.value.key == "model.name_or_path" and "cross_attention_dim" in e.value.message


def test_the_known_tiny_configs_are_what_the_tiny_factory_builds(tiny):
    """The rows' `tiny` entries are the factory's own configs, so a tiny checkpoint loads by the same
    rule as a real one (shapes choose a known config) and cannot drift from the factory."""
    from toolkit.models.archs.sd1 import UNET_KNOWN, VAE_KNOWN
    from toolkit.models.formats.clip import CLIP_L_KNOWN
    folder = tiny("sd1")
    for sub, known in (("unet", UNET_KNOWN["tiny"]), ("vae", VAE_KNOWN["tiny"]), ("text_encoder", CLIP_L_KNOWN["tiny"])):
        with open(os.path.join(folder, sub, "config.json")) as f:
            config = json.load(f)
        assert {k: config[k] for k in known if k in config} == {k: (list(v) if isinstance(v, tuple) else v)
                                                                 for k, v in known.items() if k in config}, sub


def test_real_dimension_headers_are_detected_as_their_real_configs(tmp_path):
    """At real sizes, without real weights: the SD 1.5 shapes (built on the meta device from the known
    config, written as an original-layout header over a sparse file) detect as sd15 and give that config."""
    from toolkit.models.archs.sd1 import UNET_KNOWN, VAE_KNOWN
    from toolkit.models.formats.clip import CLIP_L_KNOWN
    ckpt = tmp_path / "sd15-shapes.safetensors"
    write_header_only(ckpt, {"model.diffusion_model.": ("UNet2DConditionModel", UNET_KNOWN["sd15"], "unet"),
                             "first_stage_model.": ("AutoencoderKL", VAE_KNOWN["sd-vae"], "vae"),
                             "cond_stage_model.transformer.": ("transformers:CLIPTextModel",
                                                               CLIP_L_KNOWN["clip-vit-large-patch14"], "clip")})
    det = detect_file(str(ckpt))
    assert det.arch == "sd1" and {r: p.config.known for r, p in det.parts.items()} == {
        "unet": "sd15", "vae": "sd-vae", "text_encoder": "clip-vit-large-patch14"}


def write_header_only(path, parts: dict):
    """A safetensors file whose header has the shapes of each part's model at its known config, in the
    original layout, over zero data (a sparse file: no real weights needed to check detection)."""
    from accelerate import init_empty_weights

    from testing.sparse_files import write_sparse
    from toolkit.models.arch import load_object
    from toolkit.models.formats import clip, ldm
    inverse = {"unet": ldm.unet_to_original, "vae": ldm.vae_to_original, "clip": clip.to_original}
    shapes = {}
    for prefix, (cls_name, config, layout) in parts.items():
        cls = load_object(cls_name)
        with init_empty_weights():
            model = cls.from_config(config) if hasattr(cls, "from_config") else cls(cls.config_class(**config))
        shapes.update({prefix + k: t.shape for k, t in inverse[layout](model.state_dict()).items()})
    write_sparse(path, shapes, "F16")
