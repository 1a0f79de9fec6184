"""Qwen-Image-Layered (the contract suite runs its tiny request, 2 layers, on a square input): one request
is one decomposition, a file per layer with the request's seed, RGBA as the pipeline decodes them, at
the requested size from an input of another size and aspect; the latent frame shows the composite."""
import os

import numpy as np
import pytest
import torch
from PIL import Image

from testing.fixtures import input_image
from toolkit.config_modules import GenerateImageConfig
from toolkit.models import latents as latent_frames
from toolkit.models.base_model import batch_paths, get_model_class, output_files
from toolkit.models.registry import ARCHS

SAMPLE = {"prompt": "a small test prompt", "seed": 7, "width": 96, "height": 64, "num_inference_steps": 2,
          "guidance_scale": 4.0, "layers": 3}


@pytest.fixture(scope="module")
def holder(tiny_root):
    from toolkit.models.tiny import cached_tiny

    folder = str(cached_tiny("qwen_image_layered", 0, root=str(tiny_root)))
    h = get_model_class("qwen_image_layered")({"arch": "qwen_image_layered", "name_or_path": folder,
                                               "local_only": True}, device="cpu")
    h.load_model()
    return h


def test_a_decomposition_is_a_file_per_layer_at_the_requested_size(holder, tmp_path):
    gen = GenerateImageConfig.from_dict({**SAMPLE, "ctrl_img": input_image(tmp_path / "in.png", 48, 80)},
                                        holder.model_config)
    frames = []
    out_path = str(tmp_path / "out.png")
    recs = holder.generate_images([gen], paths=[out_path], on_step=lambda i, n, t, lat, x0: frames.append(lat))
    assert output_files(holder.spec, gen) == 3
    assert [r["path"] for r in recs] == batch_paths(out_path, 3) and {r["seed"] for r in recs} == {7}
    for rec in recs:
        with Image.open(rec["path"]) as im:
            assert im.size == (96, 64) and im.mode == "RGBA"

    # the latents stack the composite and the layers (4 images of 6x4 tokens); the frame is the composite's
    lat = frames[-1]
    assert lat.shape == (1, 4 * 6 * 4, 64)
    frame, layout = latent_frames.to_frame(lat, ARCHS["qwen_image_layered"].latents, height=64, width=96)
    want = latent_frames.unpack_tokens(lat[:, :24], 4, 6, 2).to(torch.float16)
    assert layout == "BCHW" and frame.shape == (1, 16, 8, 12) and torch.equal(frame, want)


def test_the_layers_are_the_pipelines_on_an_input_of_the_requested_size(holder, tmp_path):
    """3 layers at a size other than square: the holder's layers are the bare pipeline's under the same
    size patch, which is gone after the call."""
    from diffusers import QwenImageLayeredPipeline

    from toolkit.models.patches import patched

    gen = GenerateImageConfig.from_dict({**SAMPLE, "ctrl_img": input_image(tmp_path / "in.png", 96, 64)},
                                        holder.model_config)
    got = holder.generate_single(gen)
    bare = QwenImageLayeredPipeline.from_pretrained(holder.model_config.name_or_path, local_files_only=True,
                                                    dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    (module, name, wrapper), = holder.call_patches(gen, bare)
    with patched(module, name, wrapper):
        want = bare(**holder.pipeline_kwargs(gen), generator=torch.Generator("cpu").manual_seed(7)).images[0]
    assert len(got) == len(want) == 3
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(got, want))
    assert getattr(module, name)(640 * 640, 1.0) == (640, 640), "the patch outlived the call"


def test_a_request_counts_a_file_per_layer():
    """What the engine reserves names for (engine._output_path) and the suites expect."""
    from toolkit.config_modules import ModelConfig

    mc = ModelConfig.from_dict({"arch": "qwen_image_layered", "name_or_path": "x/y"})
    gen = GenerateImageConfig.from_dict({**SAMPLE, "ctrl_img": "x.png", "layers": 5}, mc)
    assert output_files(mc.spec, gen) == 5
    assert os.path.basename(batch_paths("r.png", 5)[-1]) == "r-4.png"


def test_a_gguf_file_reads_as_the_layered_denoiser(tmp_path):
    """Its GGUF files are Qwen-Image's layout (the denoiser class's `gguf` row) with the RGB/RGBA timestep
    embedding: read as Qwen-Image-Layered, the layer flags set, a Q8_0 decomposition near the float32 one."""
    from toolkit.models.tiny.gguf import make_tiny_gguf

    made = make_tiny_gguf("qwen_image_layered", tmp_path / "gguf", qtypes=("Q8_0",))
    sample = {**SAMPLE, "width": 64, "height": 64, "layers": 2,
              "ctrl_img": input_image(tmp_path / "in.png", 64, 64)}

    def layers(model):
        h = get_model_class("qwen_image_layered")({"arch": "qwen_image_layered", "local_only": True, **model},
                                                  device="cpu").load_model()
        return h, np.stack([np.asarray(im, np.float64) for im in h.generate_single(
            GenerateImageConfig.from_dict(sample, h.model_config))])

    _, want = layers({"name_or_path": str(made["folder"])})
    holder, got = layers({"name_or_path": str(made["files"]["Q8_0"]), "extras_name_or_path": str(made["folder"])})
    tr = holder.loaded["transformer"]
    assert tr._aitk_gguf["qtype"] == "Q8_0" and tr.config.use_additional_t_cond and tr.config.use_layer3d_rope
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 0.02
