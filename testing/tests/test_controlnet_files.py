"""The DiT ControlNets and SDXL's ControlNet Union as the single files people download (one .safetensors in
diffusers' names: InstantX's / Shakker-Labs' Flux ControlNets and Unions, InstantX's SD3 and Qwen-Image
ControlNets, xinsir's Union ProMax), named in A1111's models/ControlNet or ComfyUI's models/controlnet:

- each file gives the very picture of the same weights as a diffusers folder (test_controlnet.py holds the
  folder to diffusers' own control pipeline), bit for bit on CPU float32, its config read from its shapes;
- a file of another arch is a 422 naming `sample.controls[0].model` from its header, before queueing; a
  union file is a union (its mode is asked for), never a plain ControlNet.
"""
import json

import numpy as np
import pytest

from testing.engine_client import InProcessEngine
from testing.fixtures import input_image
from testing.tests.test_controlnet import body, data_url, generate, refused
from toolkit.models.tiny.controlnets import write_tiny_controlnet

TOKEN = "control-files-token"
# name -> (arch, class, its own sizes, the tree it lies in, a union mode)
CASES = {
    "flux_cn": ("flux", "FluxControlNetModel", {}, "a1111", None),
    "flux_union": ("flux", "FluxControlNetModel", {"num_mode": 7}, "comfyui", "depth"),
    "sd3_cn": ("sd3", "SD3ControlNetModel", {}, "a1111", None),
    "qwen_cn": ("qwen_image", "QwenImageControlNetModel", {}, "comfyui", None),
    "sdxl_union": ("sdxl", "ControlNetUnionModel", dict(num_control_type=8, num_trans_channel=16, num_trans_head=2,
                                                        num_proj_channel=16), "a1111", "canny"),
}


@pytest.fixture(scope="module")
def files(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("control_files")
    a1111, comfy = root / "webui" / "models", root / "ComfyUI" / "models"
    (a1111 / "Stable-diffusion").mkdir(parents=True)
    (comfy / "checkpoints").mkdir(parents=True)
    dirs = {"a1111": a1111 / "ControlNet", "comfyui": comfy / "controlnet"}
    out = {"root": root, "trees": [str(root / "webui"), str(root / "ComfyUI")]}
    for name, (arch, cls, sizes, tree, _mode) in CASES.items():
        out[(name, "folder")] = str(write_tiny_controlnet(arch, tiny(arch), root / name, "folder", seed=4, cls=cls,
                                                          **sizes))
        write_tiny_controlnet(arch, tiny(arch), dirs[tree] / f"{name}.safetensors", "file", seed=4, cls=cls, **sizes)
    out["image"] = input_image(root / "control.png")
    return out


@pytest.fixture(scope="module")
def eng(tiny, files):
    e = InProcessEngine(str(files["root"] / "engine"), token=TOKEN, model_folders=files["trees"],
                        model_roots=[str(files["root"])] + [tiny(a) for a in ("sd1", "sdxl", "flux", "sd3", "qwen_image")])
    yield e
    e.close()


@pytest.mark.parametrize("name", list(CASES))
def test_the_single_file_equals_its_folder(eng, tiny, files, name):
    """By name in the tree's controlnet folder: the folder's picture, bit for bit; the control changes it."""
    arch, _cls, _sizes, _tree, mode = CASES[name]
    control = {"image": data_url(files["image"]), "scale": 0.8, **({"mode": mode} if mode else {})}
    got = generate(eng, body(tiny, arch, [{**control, "model": name}]))
    want = generate(eng, body(tiny, arch, [{**control, "model": files[(name, "folder")]}]))
    assert np.array_equal(got, want)
    assert not np.array_equal(got, generate(eng, body(tiny, arch, [])))


def test_the_config_read_from_the_shapes_is_the_folders(files):
    """What the header gives is what the folder's config.json says (the keys the class reads)."""
    from toolkit.control_models import find, identify

    for name, (arch, _cls, _sizes, _tree, _mode) in CASES.items():
        found = [f for f in identify(find(name, files["trees"])) if f.arch == arch]
        assert found and found[0].single_file is not None, name
        with open(f"{files[(name, 'folder')]}/config.json") as f:
            folder = json.load(f)
        got = found[0].config
        for key, value in got.items():
            if key in folder:
                assert (list(value) if isinstance(value, tuple) else value) == folder[key], (name, key)


@pytest.mark.parametrize("arch,name,says", [
    ("sd3", "flux_cn", "Flux ControlNet (flux)"),
    ("flux", "qwen_cn", "Qwen-Image ControlNet (qwen_image)"),
    ("qwen_image", "sd3_cn", "SD3 ControlNet (sd3)"),
    ("sd1", "sdxl_union", "SDXL ControlNet Union (sdxl)"),
    ("flux", "sdxl_union", "SDXL ControlNet Union (sdxl)"),
])
def test_a_file_of_another_arch_is_refused_from_its_header(eng, tiny, files, arch, name, says):
    err = refused(eng, body(tiny, arch, [{"model": name, "image": data_url(files["image"])}]))
    text = json.dumps(err)
    assert "sample.controls[0].model" in text and says in text, text


def test_an_xlabs_flux_controlnet_is_refused_saying_what_it_is(eng, tiny, files):
    """x-flux's layout (FLUX.1's original names, its hint encoder, controlnet_blocks): diffusers reads it not."""
    import torch
    from safetensors.torch import save_file

    path = files["root"] / "webui" / "models" / "ControlNet" / "flux-canny-controlnet-v3.safetensors"
    save_file({k: torch.zeros(2, 2) for k in ("double_blocks.0.img_attn.qkv.weight", "controlnet_blocks.0.weight",
                                              "input_hint_block.0.weight", "pos_embed_input.weight")}, str(path))
    err = json.dumps(refused(eng, body(tiny, "flux", [{"model": path.name, "image": data_url(files["image"])}])))
    assert "sample.controls[0].model" in err and "XLabs Flux ControlNet" in err, err


def test_a_union_file_is_a_union(eng, tiny, files):
    """xinsir's union file is no plain SDXL ControlNet: without a mode it is asked for one."""
    err = refused(eng, body(tiny, "sdxl", [{"model": "sdxl_union", "image": data_url(files["image"])}]))
    assert "sample.controls[0].mode" in json.dumps(err), err


def test_the_listing_names_the_files(files):
    """What /controlnet/model_list and the UI's picker offer: both trees' files, by the names `model` takes."""
    from toolkit.control_models import listing

    names = {e["name"] for e in listing(files["trees"])}
    assert {f"{name}.safetensors" for name in CASES} <= names, names
