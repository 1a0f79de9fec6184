"""IP-Adapter (`sample.ip_adapter`) through the engine over HTTP, on tiny SD 1.5, SDXL and Flux with tiny
adapters and a tiny CLIP vision encoder in the layouts people have (h94/IP-Adapter's repo, XLabs-AI/flux-ip-adapter's
one file, ComfyUI's models/ipadapter + models/clip_vision): each output equals diffusers' pipeline with `load_ip_adapter`
and `ip_adapter_image` done by hand, bit for bit on CPU float32; the next request without an adapter
is the plain model's again; the image encoder is one pool entry shared by two models; bad requests
are a 422 naming the field before anything is queued."""
import base64
import io
import os

import numpy as np
import pytest
from PIL import Image

from testing.engine_client import InProcessEngine
from toolkit.models.tiny.ip_adapters import adapter_file, write_tiny_ip_adapters

TOKEN = "ip-adapter-token-123"
SAMPLE = {"prompt": "a red fox", "width": 64, "height": 64, "num_inference_steps": 2, "seed": 11}


def _reference() -> Image.Image:
    return Image.fromarray((np.random.RandomState(5).rand(40, 56, 3) * 255).astype("uint8"))


def _data_url(img) -> str:
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def eng(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("ip_adapter")
    files = write_tiny_ip_adapters(root / "h94", {"sd1": tiny("sd1"), "sdxl": tiny("sdxl"), "flux": tiny("flux")})
    comfy = root / "h94" / "ComfyUI"
    e = InProcessEngine(str(root), token=TOKEN, model_folders=[str(comfy)],
                        model_roots=[str(root), tiny("sd1"), tiny("sd1", 1), tiny("sdxl"), tiny("flux"), tiny("flex1"),
                                     tiny("zimage")])
    e.tiny, e.files, e.root = tiny, files, root / "h94"
    yield e
    e.close()


def _run(eng, arch, sample, seed=0):
    r = eng.client.post("/generate", json={"model": {"arch": arch, "name_or_path": eng.tiny(arch, seed)},
                                           "sample": sample, "wait": True})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    res = r.json()["results"][0]
    with Image.open(io.BytesIO(eng.client.get(res["url"]).content)) as im:
        return np.asarray(im.convert("RGB"))


def _bare(eng, arch, scale=None, seed=0):
    """diffusers' own pipeline from the tiny folder; with `scale`, h94's adapter loaded by hand as its
    model card does (the repo folder, its subfolder, the image encoder folder beside it)."""
    import torch
    from diffusers import DiffusionPipeline

    pipe = DiffusionPipeline.from_pretrained(eng.tiny(arch, seed), local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    kw = {}
    if scale is not None and arch == "flux":
        # XLabs' model card: the repo and its one file, the image encoder its own repo (float32 here: CPU)
        pipe.load_ip_adapter(str(eng.root), weight_name=adapter_file(arch), local_files_only=True,
                             image_encoder_pretrained_model_name_or_path=str(eng.root / "models" / "image_encoder"),
                             image_encoder_dtype=torch.float32)
        pipe.set_ip_adapter_scale(scale)
        kw["ip_adapter_image"] = _reference()
    elif scale is not None:
        sub, name = adapter_file(arch).split("/")
        pipe.load_ip_adapter(str(eng.root), subfolder=sub, weight_name=name, image_encoder_folder="models/image_encoder",
                             local_files_only=True)
        pipe.set_ip_adapter_scale(scale)
        kw["ip_adapter_image"] = _reference()
    guidance = {"sd1": 7.5, "sdxl": 5.0, "flux": 3.5}[arch]
    out = pipe(prompt=SAMPLE["prompt"], width=64, height=64, num_inference_steps=2, guidance_scale=guidance,
               generator=torch.Generator("cpu").manual_seed(SAMPLE["seed"]), output_type="pil", **kw)
    return np.asarray(out.images[0].convert("RGB"))


@pytest.mark.parametrize("arch", ["sd1", "sdxl", "flux"])
def test_ip_adapter_equals_diffusers_by_hand_and_the_next_request_is_plain(eng, arch):
    """h94's file by path, the reference image as a data URL: the bare pipeline's output bit for bit;
    then the same request without an adapter is the plain pipeline's (the denoiser restored)."""
    ref = {"model": str(eng.root / adapter_file(arch)), "image": _data_url(_reference()), "scale": 0.7}
    got = _run(eng, arch, {**SAMPLE, "ip_adapter": [ref]})
    plain = _run(eng, arch, SAMPLE)
    assert np.array_equal(got, _bare(eng, arch, scale=0.7))
    assert np.array_equal(plain, _bare(eng, arch))
    assert not np.array_equal(got, plain)


def test_comfyui_names_the_bin_and_the_image_encoder_is_one_pool_entry(eng):
    """By name in ComfyUI's models/ipadapter (its encoder found in models/clip_vision, a single file with
    no config), and h94's .bin by path (its encoder h94's folder beside it): the same weights, the same
    picture as by hand. Across two SD 1.5 models the encoder is read once per file and then a pool hit."""
    before = eng.client.health()["pool"]
    image = _data_url(_reference())
    by_name = _run(eng, "sd1", {**SAMPLE, "ip_adapter": [{"model": "ip-adapter_sd15.safetensors", "image": image,
                                                          "scale": 0.7}]})
    assert np.array_equal(by_name, _bare(eng, "sd1", scale=0.7))
    other = _run(eng, "sd1", {**SAMPLE, "ip_adapter": [{"model": "ip-adapter_sd15.safetensors", "image": image,
                                                        "scale": 0.7}]}, seed=1)
    assert not np.array_equal(other, by_name)         # another model, the same adapter and encoder
    pool = eng.client.health()["pool"]
    encoders = [e for e in pool["entries"] if e["role"] == "image_encoder"]
    assert len(encoders) == 1 and encoders[0]["hits"] >= 1, pool["entries"]
    bin_path = str(eng.root / adapter_file("sd1")).replace(".safetensors", ".bin")
    assert np.array_equal(_run(eng, "sd1", {**SAMPLE, "ip_adapter": [{"model": bin_path, "image": image,
                                                                       "scale": 0.7}]}), by_name)
    assert pool["hits"] > before["hits"]


def test_two_adapters_at_once(eng):
    """Two entries: one load_ip_adapter call over both files, each image its scale, as by hand."""
    import torch
    from diffusers import DiffusionPipeline

    second = _reference().transpose(Image.FLIP_LEFT_RIGHT)
    refs = [{"model": str(eng.root / adapter_file("sd1")), "image": _data_url(_reference()), "scale": 0.5},
            {"model": "ip-adapter_sd15.safetensors", "image": _data_url(second), "scale": 0.8}]
    got = _run(eng, "sd1", {**SAMPLE, "ip_adapter": refs})
    pipe = DiffusionPipeline.from_pretrained(eng.tiny("sd1"), local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    pipe.load_ip_adapter(str(eng.root), subfolder="models", weight_name=["ip-adapter_sd15.safetensors"] * 2,
                         image_encoder_folder="models/image_encoder", local_files_only=True)
    pipe.set_ip_adapter_scale([0.5, 0.8])
    out = pipe(prompt=SAMPLE["prompt"], width=64, height=64, num_inference_steps=2, guidance_scale=7.5,
               ip_adapter_image=[_reference(), second], generator=torch.Generator("cpu").manual_seed(SAMPLE["seed"]))
    assert np.array_equal(got, np.asarray(out.images[0].convert("RGB")))


@pytest.mark.parametrize("arch,entry,key,why", [
    ("sd1", {"model": "SDXL", "image": "IMG"}, "sample.ip_adapter[0].model", "for another model"),
    ("sdxl", {"model": "SD15", "image": "IMG"}, "sample.ip_adapter[0].model", "for another model"),
    ("flux", {"model": "SD15", "image": "IMG"}, "sample.ip_adapter[0].model", "for another model"),
    ("sd1", {"model": "FLUX", "image": "IMG"}, "sample.ip_adapter[0].model", "for another model"),
    # Flex.1 has FLUX.1's widths but fewer double blocks: diffusers would load the file's first ones silently
    ("flex1", {"model": "FLUX", "image": "IMG"}, "sample.ip_adapter[0].model", "2 double blocks"),
    ("sd1", {"model": "nope.safetensors", "image": "IMG"}, "sample.ip_adapter[0].model", "no such file"),
    ("sd1", {"model": "SD15", "image": "/etc/passwd"}, "sample.ip_adapter[0].image", "asset"),
    ("sd1", {"model": "SD15"}, "sample.ip_adapter[0].image", "is required"),
    ("sd1", {"model": "SD15", "image": "IMG", "scale": -1}, "sample.ip_adapter[0].scale", ">= 0"),
    ("sd1", {"model": "SD15", "image": "IMG", "weight": 1}, "sample.ip_adapter[0].weight", "unknown key"),
    ("sd1", {"model": "SD15", "image": "IMG", "image_encoder": "ENC_BAD"}, "sample.ip_adapter[0].image_encoder",
     "not the image encoder"),
    ("sd1", {"model": "NOT_IP", "image": "IMG"}, "sample.ip_adapter[0].model", "not an IP-Adapter file"),
    ("zimage", {"model": "SD15", "image": "IMG"}, "sample.ip_adapter", "takes no IP-Adapter"),
])
def test_refusals_are_a_422_naming_the_field(eng, arch, entry, key, why, tiny):
    names = {"SDXL": str(eng.root / adapter_file("sdxl")), "SD15": str(eng.root / adapter_file("sd1")),
             "FLUX": str(eng.root / adapter_file("flux")),
             "IMG": _data_url(_reference()), "ENC_BAD": tiny("sd1") + "/text_encoder",
             "NOT_IP": tiny("sd1") + "/unet/diffusion_pytorch_model.safetensors"}
    entry = {k: names.get(v, v) if isinstance(v, str) else v for k, v in entry.items()}
    before = eng.client.health()["queue"] if "queue" in eng.client.health() else None
    r = eng.client.post("/generate", json={"model": {"arch": arch, "name_or_path": tiny(arch)},
                                           "sample": {**SAMPLE, "ip_adapter": [entry]}, "wait": True})
    assert r.status_code == 422, r.text
    assert key in r.text and why in r.text, r.text
    assert before is None or eng.client.health()["queue"] == before


def test_library_lists_adapters_and_encoders(eng):
    r = eng.client.get("/library")
    assert r.status_code == 200, r.text
    entries = {e["name"]: e for e in r.json()["entries"]}
    sd15 = entries["ipadapter/ip-adapter_sd15.safetensors"]
    assert (sd15["kind"], sd15["arch"], sd15["complete"]) == ("ip_adapter", "sd1", True)
    assert entries["ipadapter/ip-adapter_sdxl_vit-h.safetensors"]["arch"] == "sdxl"
    assert entries["ipadapter/ip_adapter.safetensors"]["arch"] == "flux"       # XLabs' file, by its keys
    enc = entries["clip_vision/tiny_clip_vision.safetensors"]
    assert enc["kind"] == "clip_vision" and enc["complete"], enc


def test_the_field_is_described_where_the_arch_takes_it():
    """GET /models serves fields_for: sd1 describes sample.ip_adapter's entries, an arch without IP-Adapter not."""
    from toolkit.config_modules import GenerateImageConfig
    from toolkit.models.registry import get_arch
    described = GenerateImageConfig.fields_for(get_arch("sd1"))["ip_adapter"]
    assert set(described["items"]["fields"]) == {"model", "image", "scale", "image_encoder"}
    assert "ip_adapter" not in GenerateImageConfig.fields_for(get_arch("zimage"))
