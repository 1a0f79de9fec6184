"""Hires fix and upscaling (toolkit/hires.py, toolkit/upscalers.py, toolkit/models/hires_run.py): one hires
request equals the two diffusers passes done by hand, bit for bit on CPU float32; an upscale model (a tiny
ESRGAN in the key layouts people download, read by spandrel) equals spandrel's model called by hand, tiled
and untiled; the engine streams both passes, each frame naming its pass; bad settings are a 422 naming the
field."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from testing.engine_client import InProcessEngine
from toolkit.errors import ConfigError
from toolkit.models.base_model import get_model_class
from toolkit.request import resolve_request

TOKEN = "test-token-123"


@pytest.fixture(scope="module")
def esrgan(tmp_path_factory):
    """A folder of tiny ESRGANs: 2x in the original layout (.pth), 4x in BasicSR's (Real-ESRGAN's)."""
    from toolkit.models.tiny.esrgan import write_tiny_esrgan
    folder = tmp_path_factory.mktemp("upscalers")
    write_tiny_esrgan(folder, "tiny-2x", 2, "old", "pth")
    write_tiny_esrgan(folder, "tiny-realesrgan-4x", 4, "new", "safetensors", seed=1)
    return folder


def _bare(folder):
    from diffusers import DiffusionPipeline
    bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    for module in bare.components.values():
        if isinstance(module, torch.nn.Module):
            module.requires_grad_(False)
    bare.set_progress_bar_config(disable=True)
    return bare


def _img2img(bare):
    from toolkit.models.arch import load_class
    from toolkit.models.registry import ARCHS
    arch = next(a for a, s in ARCHS.items() if type(bare).__name__ == s.pipeline)
    pipe = load_class(ARCHS[arch].task("img2img").pipeline).from_pipe(bare)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _holder(arch, folder):
    holder = get_model_class(arch)({"arch": arch, "name_or_path": folder, "local_only": True}, device="cpu")
    return holder.load_model()


CASES = [("sd1", "Latent", 1.5), ("sd1", "Latent (bicubic antialiased)", 2.0), ("sd1", "Lanczos", 1.5),
         ("sdxl", "Latent (nearest)", 1.5), ("zimage", "Lanczos", 1.5)]


@pytest.mark.parametrize("arch,upscaler,scale", CASES)
def test_hires_equals_two_passes_by_hand(arch, upscaler, scale, tiny):
    """base pass -> upscale (torch's interpolate as A1111's latent modes, or PIL) -> img2img at the new size with
    denoise as strength, the second pass's steps and the request's seed: the holder's image, bit for bit."""
    from toolkit import hires
    folder = tiny(arch)
    hr = {"scale": scale, "upscaler": upscaler, "denoise": 0.6, "steps": 3, "prompt": "a sharper test"}
    work = resolve_request({"arch": arch, "name_or_path": folder, "local_only": True},
                           {"prompt": "a test", "seed": 5, "num_inference_steps": 2, "width": 64, "height": 64,
                            "hires": hr})
    gen = work.sample
    holder = _holder(arch, folder)
    steps = []
    got = holder.generate_single(gen, on_step=lambda i, n, t, lat, x0: steps.append((n, tuple(lat.shape))))

    bare = _bare(folder)
    kw = {k: v for k, v in holder.pipeline_kwargs(hires.first_pass(gen)).items() if k != "prompt"}
    latent = upscaler in hires.LATENT_UPSCALERS
    first = bare(prompt="a test", **kw, generator=torch.Generator("cpu").manual_seed(5),
                 output_type="latent" if latent else "pil").images
    w, h = hires.hires_size(64, 64, scale, holder.spec.size_divisor)
    if latent:
        mode, antialias = hires.LATENT_UPSCALERS[upscaler]
        image = F.interpolate(first, size=(h // 8, w // 8), mode=mode, antialias=antialias)
    else:
        image = first[0].resize((w, h), resample=Image.LANCZOS)
    second = hires.second_pass(gen, holder.spec)
    kw2 = {k: v for k, v in holder.pipeline_kwargs(second).items() if k not in ("prompt", "strength")}
    assert second.num_inference_steps == 3 and (second.width, second.height) == (w, h)
    want = _img2img(bare)(prompt="a sharper test", image=image, strength=0.6, **kw2,
                          generator=torch.Generator("cpu").manual_seed(5)).images[0]
    assert got.size == want.size == (w, h)
    assert np.array_equal(np.asarray(got), np.asarray(want)), "hires differs from the two passes by hand"
    # both passes reported their steps, the second at its own latent size
    sizes = {shape for _n, shape in steps}
    assert len(sizes) == 2


def test_hires_upscale_model_equals_spandrel_by_hand(tiny, esrgan):
    """A pixel upscaler that is a model: the base image through spandrel's model (2x), Lanczos to the size."""
    import spandrel

    from toolkit import hires
    folder = tiny("sd1")
    path = str(esrgan / "tiny-2x.pth")
    work = resolve_request({"arch": "sd1", "name_or_path": folder, "local_only": True},
                           {"prompt": "a test", "seed": 3, "num_inference_steps": 2, "width": 64, "height": 64,
                            "hires": {"scale": 1.5, "upscaler": path, "denoise": 0.5}})
    holder = _holder("sd1", folder)
    got = holder.generate_single(work.sample)
    bare = _bare(folder)
    kw = {k: v for k, v in holder.pipeline_kwargs(hires.first_pass(work.sample)).items()}
    base = bare(**kw, generator=torch.Generator("cpu").manual_seed(3)).images[0]
    model = spandrel.ModelLoader().load_from_file(path)
    x = torch.from_numpy(np.asarray(base, dtype=np.float32) / 255.0).permute(2, 0, 1)[None]
    y = model(x)[0].permute(1, 2, 0).clamp(0, 1).mul(255).round().to(torch.uint8).numpy()
    image = Image.fromarray(y).resize((96, 96), resample=Image.LANCZOS)
    second = hires.second_pass(work.sample, holder.spec)
    kw2 = holder.pipeline_kwargs(second)
    kw2["image"] = image
    want = _img2img(bare)(**kw2, generator=torch.Generator("cpu").manual_seed(3)).images[0]
    assert np.array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("name,scale", [("tiny-2x", 2), ("tiny-realesrgan-4x", 4)])
def test_upscale_model_equals_spandrel_tiled_and_untiled(esrgan, name, scale):
    """spandrel detects both key layouts; untiled, the funnel's module is spandrel's model called by hand
    (exactly); tiled, each tile keeps half of each overlap, so with the overlap past twice the tiny model's
    receptive field (21 input pixels: 21 3x3 convolutions) the seams vanish: equal within float rounding."""
    import spandrel

    from toolkit import upscalers
    path = next(str(p) for p in esrgan.iterdir() if p.stem == name)
    found = upscalers.model_files(((), (str(esrgan),)))
    assert found[name] == path
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, (72, 100, 3), dtype=np.uint8))
    model = upscalers.load(path)
    assert model.scale == scale and model.architecture == "ESRGAN"
    desc = spandrel.ModelLoader().load_from_file(path)
    x = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)[None]
    want = desc(x)
    untiled = upscalers.run_tiled(model, x, scale, 0, 0)
    assert torch.equal(untiled, want)
    tiled = upscalers.run_tiled(model, x, scale, 64, 48)       # 2 x 3 tiles, 24 px of context each side
    assert tiled.shape == want.shape
    assert torch.allclose(tiled, want, atol=1e-5), float((tiled - want).abs().max())
    coarse = upscalers.run_tiled(model, x, scale, 48, 16)      # 8 px of context: differs near the seams only
    assert float((coarse - want).abs().mean()) < 0.05
    # the PIL path: one pass at the model's factor, to the size asked
    out = upscalers.upscale(image, path, 100 * scale, 72 * scale, tile=64, overlap=48)
    assert out.size == (100 * scale, 72 * scale)


def test_upscale_model_is_a_pool_component(esrgan):
    """Loaded through the funnel: the pool keys it by its file and answers the second load from memory."""
    from toolkit import upscalers
    from toolkit.models.v2.mixin import thread_load_interceptor
    from toolkit.models.v2.pool import ComponentPool
    pool = ComponentPool()
    path = str(esrgan / "tiny-2x.pth")
    with thread_load_interceptor(pool):
        a = upscalers.load(path)
        b = upscalers.load(path)
    assert a is b and pool.loads == 1 and pool.hits == 1
    assert pool.holds("upscaler")


def test_settings_are_checked_naming_the_field(tiny, esrgan):
    folder = tiny("sd1")
    model = {"arch": "sd1", "name_or_path": folder, "local_only": True}
    base = {"prompt": "x", "width": 64, "height": 64, "num_inference_steps": 2}
    cases = [({"hires": {"scale": 0.5}}, "sample.hires.scale"),
             ({"hires": {"upscaler": "Latent (wobbly)"}}, "sample.hires.upscaler"),
             ({"hires": {"denoise": 0}}, "sample.hires.denoise"),
             ({"hires": {"denoise": 0.1, "steps": 3}}, "sample.hires.denoise"),
             ({"hires": {"bogus": 1}}, "sample.hires.bogus"),
             ({"hires": {"scale": 2}, "batch_size": 2}, "sample.batch_size"),
             ({"upscale": {"upscaler": "Lanczos"}}, "sample.upscale"),
             ({"task": "upscale"}, "sample.init_img"),
             ({"task": "upscale", "init_img": "x.png", "upscale": {"upscaler": "Latent"}}, "sample.upscale.upscaler"),
             ({"task": "upscale", "init_img": "x.png", "upscale": {"tile": 64, "overlap": 32}},
              "sample.upscale.overlap")]
    for extra, field in cases:
        with pytest.raises(ConfigError) as e:
            resolve_request(model, {**base, **extra}, dry_run=True)
        assert e.value.key == field, (extra, e.value)
    # flux's latents are packed: a latent upscaler is refused, a pixel one taken
    flux = {"arch": "flux", "name_or_path": tiny("flux"), "local_only": True}
    with pytest.raises(ConfigError) as e:
        resolve_request(flux, {**base, "hires": {"upscaler": "Latent"}}, dry_run=True)
    assert e.value.key == "sample.hires.upscaler"
    assert resolve_request(flux, {**base, "hires": {"upscaler": "Lanczos"}}, dry_run=True).sample.hires


# -- the engine ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def eng(tiny, esrgan, tmp_path_factory):
    e = InProcessEngine(str(tmp_path_factory.mktemp("engine")), token=TOKEN, upscaler_folder=str(esrgan),
                        limits={"max_pixels": 200 * 200})
    e.tiny = tiny
    yield e
    e.close()


def _body(eng, hires=None, **sample):
    s = {"prompt": "a test", "width": 64, "height": 64, "num_inference_steps": 2, "seed": 9, **sample}
    if hires is not None:
        s["hires"] = hires
    return {"model": {"arch": "sd1", "name_or_path": eng.tiny("sd1")}, "sample": s}


def test_frames_name_their_pass_and_the_file_records_both(eng):
    from toolkit.file_settings import settings_from_metadata
    from toolkit.media import read_metadata
    frames = eng.client.stream(_body(eng, {"scale": 1.5, "upscaler": "tiny-2x", "denoise": 0.5, "steps": 4}))
    progress = [h for h, _ in frames if h["type"] == "progress"]
    latents = [h for h, _ in frames if h["type"] == "latent"]
    names = [p["pass"] for p in progress]       # PNDM runs a step more than asked (its PLMS warm-up): 3, then 3
    assert names == ["base"] * 3 + ["hires"] * 3
    assert [p["step"] for p in progress] == [1, 2, 3, 1, 2, 3] and {p["total"] for p in progress} == {3}
    assert {p["pass"] for p in latents} == {"base", "hires"}
    assert {tuple(h["shape"]) for h in latents if h["pass"] == "hires"} == {(1, 4, 12, 12)}
    stages = [h.get("stage") for h, _ in frames if h["type"] == "status"]
    assert "pass" in stages and "upscaling" in stages
    result = next(h for h, _ in frames if h["type"] == "result")
    assert (result["width"], result["height"]) == (96, 96) and frames[-1][0]["status"] == "ok"
    data = eng.client.get(result["url"]).content
    meta = read_metadata(data)
    assert "Hires upscale: 1.5" in meta["parameters"] and "Hires upscaler: tiny-2x" in meta["parameters"]
    back = settings_from_metadata(meta)
    assert back["sample"]["hires"]["upscaler"] == "tiny-2x"      # a name, never the server's path
    import json
    passes = json.loads(meta["aitk"])["passes"]
    assert [(p["pass"], p["width"], p["steps"]) for p in passes] == [("base", 64, 2), ("hires", 96, 4)]
    # the pool keeps the upscale model resident: a second request reads nothing again
    pool = eng.engine.worker_state.pool if eng.engine.worker_state else {}
    assert pool


def test_native_upscaler_list(eng):
    listed = eng.client.get("/upscalers").json()["upscalers"]
    assert listed[0] == {"name": "Latent", "kind": "latent"} and {"name": "Lanczos", "kind": "pixel"} in listed
    assert {"name": "tiny-2x", "kind": "model", "file": "tiny-2x.pth"} in listed


def test_hires_past_max_pixels_names_the_scale(eng):
    r = eng.client.post("/generate", json=_body(eng, {"scale": 4.0}))
    assert r.status_code == 422 and "sample.hires.scale" in r.text and "max_pixels" in r.text
    r = eng.client.post("/generate", json=_body(eng, {"upscaler": "no-such-model"}))
    assert r.status_code == 422 and "sample.hires.upscaler" in r.text and "tiny-2x" in r.text
    assert eng.client.health()["ok"] if "ok" in eng.client.health() else True


def test_task_upscale_alone(eng, tmp_path):
    """task upscale: init_img through the model (tiled), no diffusion: nothing of the named model loads."""
    import base64
    import io
    rng = np.random.default_rng(1)
    image = Image.fromarray(rng.integers(0, 256, (40, 56, 3), dtype=np.uint8))
    buf = io.BytesIO()
    image.save(buf, "PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    builds = eng.engine.worker_state.builds if eng.engine.worker_state else None
    body = {"model": {"arch": "sdxl", "name_or_path": eng.tiny("sdxl")},
            "sample": {"task": "upscale", "init_img": url, "upscale": {"upscaler": "tiny-2x", "scale": 2, "tile": 32,
                                                                       "overlap": 8}}}
    frames = eng.client.stream(body)
    assert frames[-1][0]["status"] == "ok", frames[-1][0]
    result = next(h for h, _ in frames if h["type"] == "result")
    assert (result["width"], result["height"]) == (112, 80)
    assert eng.engine.worker_state.builds == builds     # no holder built for it
    body["sample"]["upscale"]["scale"] = 4              # 224x160 = 35840 <= 40000: fine; 5x is not
    body["sample"]["upscale"]["scale"] = 5
    r = eng.client.post("/generate", json=body)
    assert r.status_code == 422 and "sample.upscale.scale" in r.text


# -- the A1111 API, as SillyTavern sends it -----------------------------------------------------------------
@pytest.fixture(scope="module")
def a1111(tiny, esrgan, tmp_path_factory):
    from extensions_built_in.inference_engine.compat import compat_routes
    e = InProcessEngine(str(tmp_path_factory.mktemp("a1111")), token=TOKEN, upscaler_folder=str(esrgan),
                        extra_routes=[compat_routes()], limits={"max_pixels": 200 * 200})
    e.engine.default_model = {"arch": "sd1", "name_or_path": tiny("sd1")}
    yield e
    e.close()


def _st_payload(**over):
    """SillyTavern's SD WebUI txt2img body (its extension's generateAutoImage), hires on."""
    body = {"prompt": "a cat", "negative_prompt": "blurry", "sampler_name": "Default", "scheduler": "Automatic",
            "steps": 2, "cfg_scale": 7, "width": 64, "height": 64, "restore_faces": False, "enable_hr": True,
            "hr_scale": 1.5, "hr_upscaler": "Latent", "hr_second_pass_steps": 0, "denoising_strength": 0.7,
            "hr_prompt": "", "hr_negative_prompt": "", "seed": 11, "send_images": True, "save_images": False,
            "override_settings_restore_afterwards": True, "override_settings": {}, "clip_skip": 1,
            "n_iter": 1, "batch_size": 1, "faceid_enabled": False}
    body.update(over)
    return body


def _decode(b64):
    import base64
    import io
    return Image.open(io.BytesIO(base64.b64decode(b64)))


def test_a1111_txt2img_enable_hr_as_sillytavern_sends_it(a1111, tiny):
    import json
    auth = ("user", TOKEN)
    r = a1111.client.http.post("/sdapi/v1/txt2img", json=_st_payload(), auth=auth)
    assert r.status_code == 200, r.text
    out = r.json()
    image = _decode(out["images"][0])
    assert image.size == (96, 96)                        # 64 x 1.5
    info = json.loads(out["info"])
    assert "Hires upscale: 1.5" in info["infotexts"][0] and "Hires upscaler: Latent" in info["infotexts"][0]
    # the same request on the native API: the same image
    native = {"model": {"arch": "sd1", "name_or_path": tiny("sd1")},
              "sample": {"prompt": "a cat", "negative_prompt": "blurry", "num_inference_steps": 2,
                         "guidance_scale": 7, "width": 64, "height": 64, "seed": 11, "output_ext": "png",
                         "hires": {"scale": 1.5, "upscaler": "Latent", "denoise": 0.7}}}
    frames = a1111.client.stream(native)
    res = next(h for h, _ in frames if h["type"] == "result")
    want = Image.open(__import__("io").BytesIO(a1111.client.get(res["url"]).content))
    assert np.array_equal(np.asarray(image), np.asarray(want))
    # an upscale model by its name, and a hires prompt
    r = a1111.client.http.post("/sdapi/v1/txt2img", json=_st_payload(hr_upscaler="tiny-2x", hr_prompt="a sharp cat",
                                                                      hr_second_pass_steps=3), auth=auth)
    assert r.status_code == 200 and _decode(r.json()["images"][0]).size == (96, 96)
    # an unknown upscaler, and a hires past max_pixels: 422s naming the client's field
    r = a1111.client.http.post("/sdapi/v1/txt2img", json=_st_payload(hr_upscaler="R-ESRGAN 4x+"), auth=auth)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "hr_upscaler"]
    r = a1111.client.http.post("/sdapi/v1/txt2img", json=_st_payload(hr_scale=4), auth=auth)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "hr_scale"]
    # enable_hr false: the fields are read by nothing
    r = a1111.client.http.post("/sdapi/v1/txt2img", json=_st_payload(enable_hr=False, hr_upscaler="nope"), auth=auth)
    assert r.status_code == 200 and _decode(r.json()["images"][0]).size == (64, 64)


def test_a1111_upscaler_lists_and_extras(a1111):
    import base64
    import io
    auth = ("user", TOKEN)
    ups = a1111.client.http.get("/sdapi/v1/upscalers", auth=auth).json()
    names = [u["name"] for u in ups]
    assert names[:3] == ["None", "Lanczos", "Nearest"] and "tiny-2x" in names and "tiny-realesrgan-4x" in names
    assert set(ups[0]) == {"name", "model_name", "model_path", "model_url", "scale"}
    entry = next(u for u in ups if u["name"] == "tiny-realesrgan-4x")
    assert entry["scale"] == 4 and "/" not in entry["model_path"]
    modes = a1111.client.http.get("/sdapi/v1/latent-upscale-modes", auth=auth).json()
    assert modes[0] == {"name": "Latent"} and {"name": "Latent (nearest-exact)"} in modes
    rng = np.random.default_rng(2)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(buf, "PNG")
    b64 = base64.b64encode(buf.getvalue()).decode()
    body = {"image": b64, "resize_mode": 0, "show_extras_results": True, "gfpgan_visibility": 0,
            "codeformer_visibility": 0, "codeformer_weight": 0, "upscaling_resize": 2, "upscaling_resize_w": 512,
            "upscaling_resize_h": 512, "upscaling_crop": True, "upscaler_1": "tiny-2x", "upscaler_2": "None",
            "extras_upscaler_2_visibility": 0, "upscale_first": False}
    r = a1111.client.http.post("/sdapi/v1/extra-single-image", json=body, auth=auth)
    assert r.status_code == 200, r.text
    assert _decode(r.json()["image"]).size == (80, 60)
    r = a1111.client.http.post("/sdapi/v1/extra-batch-images", auth=auth, json={
        **{k: v for k, v in body.items() if k != "image"}, "upscaler_1": "Lanczos", "upscaling_resize": 1.5,
        "imageList": [{"data": b64, "name": "a.png"}, {"data": b64, "name": "b.png"}]})
    assert r.status_code == 200, r.text
    assert [_decode(i).size for i in r.json()["images"]] == [(60, 45), (60, 45)]
    r = a1111.client.http.post("/sdapi/v1/extra-single-image", json={**body, "upscaler_1": "4x-Nope"}, auth=auth)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "upscaler_1"]


def test_library_lists_the_trees_upscale_models(tmp_path):
    """A1111's models/ESRGAN and ComfyUI's models/upscale_models: GET /library's `upscaler` entries, and names
    a request may give."""
    from toolkit import library, upscalers
    from toolkit.models.tiny.esrgan import write_tiny_esrgan
    a1111 = tmp_path / "webui" / "models"
    (a1111 / "Stable-diffusion").mkdir(parents=True)
    write_tiny_esrgan(a1111 / "ESRGAN", "4x-Tiny", 4, "old")
    comfy = tmp_path / "ComfyUI" / "models"
    (comfy / "checkpoints").mkdir(parents=True)
    write_tiny_esrgan(comfy / "upscale_models", "2x-Tiny", 2, "old", "safetensors")
    entries = library.scan_folder(str(a1111)) + library.scan_folder(str(tmp_path / "ComfyUI"))
    ups = {e["upscaler"]: e for e in entries if e["kind"] == "upscaler"}
    assert set(ups) == {"4x-Tiny", "2x-Tiny"} and ups["2x-Tiny"]["tree"] == "comfyui"
    found = upscalers.model_files(([str(a1111), str(tmp_path / "ComfyUI")], ()))
    assert set(found) == {"4x-Tiny", "2x-Tiny"}
    assert upscalers.resolve("2x-Tiny", "x", ([str(tmp_path / "ComfyUI")], ())) == found["2x-Tiny"]
