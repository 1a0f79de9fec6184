"""The compatibility routes that take images: A1111's `/sdapi/v1/img2img` (img2img and inpaint) and
OpenAI's `/v1/images/edits` (inpaint, multi-reference edit, img2img), driven as their clients drive
them (A1111's img2img API body; the real `openai` client's `images.edit`), against a real engine
with tiny models. Each answer is checked against the engine's own `/generate` with the same inputs,
or against the inputs the engine was handed; bad images are a 4xx naming the client's field."""
import base64
import io
import json
import os

import httpx
import numpy as np
import pytest
from PIL import Image

from testing.tests.test_compat import TOKEN, Served, openai_client, png, sillytavern_body
from testing.tests.test_inputs import _bomb_png


@pytest.fixture(scope="module")
def srv(tiny, tmp_path_factory):
    more = (f'[model_profiles.tiny-qwen-edit]\narchitecture = "qwen_image_edit"\ncheckpoint = "{tiny("qwen_image_edit")}"\n'
            f'[model_profiles.tiny-sd1-64]\narchitecture = "sd1"\ncheckpoint = "{tiny("sd1")}"\n'
            f'[model_profiles.tiny-sd1-64.defaults]\nwidth = 64\nheight = 64\nsteps = 2\n')
    s = Served(tmp_path_factory.mktemp("compat_images"), tiny, more)
    yield s
    s.close()


def picture(width=64, height=64, alpha: bool = False) -> Image.Image:
    """Gradients and a red square (an RGBA copy with its top-left quarter transparent when `alpha`)."""
    y, x = np.mgrid[0:height, 0:width]
    a = np.stack([x * 255 // (width - 1), y * 255 // (height - 1), (x + y) * 127 // (width + height - 2)], -1)
    a = a.astype(np.uint8)
    a[height // 4: height // 2, width // 4: width // 2] = (250, 40, 40)
    if not alpha:
        return Image.fromarray(a, "RGB")
    alpha_ch = np.full((height, width), 255, np.uint8)
    alpha_ch[: height // 2, : width // 2] = 0
    return Image.fromarray(np.dstack([a, alpha_ch]), "RGBA")


def centre_mask(width=64, height=64) -> Image.Image:
    m = np.zeros((height, width), np.uint8)
    m[height // 4: height * 3 // 4, width // 4: width * 3 // 4] = 255
    return Image.fromarray(m, "L")


def encode(im, fmt="PNG") -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt)
    return buf.getvalue()


def b64(im, fmt="PNG") -> str:
    return base64.b64encode(encode(im, fmt)).decode("ascii")


def pixels(b64_png: str) -> np.ndarray:
    return np.asarray(png(b64_png).convert("RGB"))


def img2img_body(**over) -> dict:
    """An /sdapi/v1/img2img body as A1111's API model (StableDiffusionImg2ImgProcessingAPI) declares it,
    every field at its default unless set, with a SillyTavern-style client's common settings and its
    url/auth keys (SillyTavern's own SD extension posts txt2img only; this is the shape its body takes
    on A1111's img2img route)."""
    body = {
        **sillytavern_body(steps=4, cfg_scale=7, width=64, height=64, seed=4321, sampler_name="Euler",
                           override_settings={"sd_model_checkpoint": "tiny-sd1"}),
        "init_images": [b64(picture())], "resize_mode": 0, "image_cfg_scale": None, "denoising_strength": 0.75,
        "mask": None, "mask_blur_x": 4, "mask_blur_y": 4, "mask_blur": None, "mask_round": True,
        "inpainting_fill": 0, "inpaint_full_res": True, "inpaint_full_res_padding": 0, "inpainting_mask_invert": 0,
        "initial_noise_multiplier": None, "latent_mask": None, "force_task_id": None, "sampler_index": "Euler",
        "include_init_images": False, "script_name": None, "script_args": [], "infotext": None,
        "refiner_checkpoint": None, "refiner_switch_at": None, "disable_extra_networks": False,
        "firstpass_image": None, "comments": None,
    }
    for k in ("enable_hr", "hr_upscaler", "hr_scale", "hr_additional_modules", "hr_second_pass_steps"):
        body.pop(k)                                     # txt2img's hires fix: not an img2img field
    body.update(over)
    return body


def generate(srv, sample: dict, model: str) -> dict:
    """The engine's own /generate with the same settings: what a compat call must equal."""
    r = httpx.post(srv.url + "/generate", headers={"X-Engine-Token": TOKEN}, timeout=120,
                   json={"model": model, "sample": {"output_ext": "png", **sample}, "wait": True})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    return r.json()


def file_pixels(path: str, mode="RGB") -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert(mode))


def request_of(srv, info: dict, i=0):
    return srv.engine.get(info["request_ids"][i])


# -- A1111 img2img ------------------------------------------------------------------------------------

def test_a1111_img2img_equals_the_engines_own_request(srv):
    r = srv.http.post("/sdapi/v1/img2img", json=img2img_body())
    assert r.status_code == 200, r.text
    j = r.json()
    assert set(j) == {"images", "parameters", "info"}
    info = json.loads(j["info"])
    req = request_of(srv, info)
    assert (req.sample.task, req.sample.strength, req.sample.resize_mode) == ("img2img", 0.75, "resize")
    assert info["denoising_strength"] == 0.75 and "Denoising strength: 0.75" in info["infotexts"][0]
    assert j["parameters"]["init_images"] is None and j["parameters"]["mask"] is None      # include_init_images off
    assert "auth" not in j["parameters"] and TOKEN not in r.text
    # the stored init image is the client's bytes (a PNG without alpha goes through as it is)
    assert open(req.sample.init_img, "rb").read() == encode(picture())
    native = generate(srv, {"prompt": req.sample.prompt, "negative_prompt": req.sample.negative_prompt,
                            "init_img": req.sample.init_img, "strength": 0.75, "resize_mode": "resize",
                            "width": 64, "height": 64, "num_inference_steps": 4, "guidance_scale": 7,
                            "seed": 4321, "sampler": "euler"}, "tiny-sd1")
    assert np.array_equal(pixels(j["images"][0]), file_pixels(native["results"][0]["path"]))
    # include_init_images echoes them
    j = srv.http.post("/sdapi/v1/img2img", json=img2img_body(include_init_images=True, steps=2)).json()
    assert j["parameters"]["init_images"] == img2img_body()["init_images"]


def test_a1111_img2img_alpha_and_data_url_and_resize_modes(srv):
    """An init image with alpha is flattened onto white (A1111's img2img_background_color) and sent as a
    PNG; a data: URL is taken like bare base64; resize_mode 1 crops, 3 (latent upscale) resizes."""
    rgba = picture(96, 64, alpha=True)
    url = "data:image/png;base64," + b64(rgba)
    j = srv.http.post("/sdapi/v1/img2img", json=img2img_body(init_images=[url], resize_mode=1, steps=2)).json()
    req = request_of(srv, json.loads(j["info"]))
    assert req.sample.resize_mode == "crop"
    stored = file_pixels(req.sample.init_img)
    assert stored.shape == (64, 96, 3) and (stored[:32, :48] == 255).all()            # transparent -> white
    assert np.array_equal(stored[40:, 60:], np.asarray(rgba.convert("RGB"))[40:, 60:])  # opaque: as it was
    j = srv.http.post("/sdapi/v1/img2img", json=img2img_body(resize_mode=3, steps=2, mask="")).json()
    req = request_of(srv, json.loads(j["info"]))
    assert (req.sample.resize_mode, req.sample.task, req.sample.mask_img) == ("resize", "img2img", None)
    # a JPEG keeps its format on the way to the engine
    j = srv.http.post("/sdapi/v1/img2img", json=img2img_body(init_images=[b64(picture(), "JPEG")], steps=2)).json()
    assert request_of(srv, json.loads(j["info"])).sample.init_img.endswith(".jpg")


def test_a1111_inpaint_original_equals_the_engines_own_request(srv):
    """inpainting_fill 1 (original) with no blur: the mask and init image reach the engine unchanged,
    so the answer equals /generate's inpaint with the same two images."""
    body = img2img_body(mask=b64(centre_mask()), inpainting_fill=1, mask_blur=0, inpaint_full_res=False,
                        denoising_strength=0.9)
    r = srv.http.post("/sdapi/v1/img2img", json=body)
    assert r.status_code == 200, r.text
    info = json.loads(r.json()["info"])
    req = request_of(srv, info)
    assert (req.sample.task, req.sample.strength) == ("inpaint", 0.9)
    assert np.array_equal(file_pixels(req.sample.mask_img, "L"), np.asarray(centre_mask()))
    assert np.array_equal(file_pixels(req.sample.init_img), np.asarray(picture()))
    assert info["warnings"] == [] and "Masked content" not in info["extra_generation_params"]
    native = generate(srv, {"prompt": req.sample.prompt, "negative_prompt": req.sample.negative_prompt,
                            "init_img": req.sample.init_img, "mask_img": req.sample.mask_img, "strength": 0.9,
                            "width": 64, "height": 64, "num_inference_steps": 4, "guidance_scale": 7,
                            "seed": 4321, "sampler": "euler"}, "tiny-sd1")
    assert np.array_equal(pixels(r.json()["images"][0]), file_pixels(native["results"][0]["path"]))


def test_a1111_inpaint_mask_settings_reach_the_engine(srv):
    """A1111's defaults (mask_blur 4, inpainting_fill 0 = fill, inpaint_full_res on): the mask is
    blurred, the init image filled under it from its surroundings; invert flips the mask; an RGBA
    mask with real alpha is its alpha; sizes follow resize_mode."""
    r = srv.http.post("/sdapi/v1/img2img", json=img2img_body(mask=b64(centre_mask()), steps=2))
    assert r.status_code == 200, r.text
    info = json.loads(r.json()["info"])
    req = request_of(srv, info)
    mask = file_pixels(req.sample.mask_img, "L")
    assert mask[32, 32] == 255 and mask[2, 2] == 0 and 0 < mask[32, 16] < 255      # blurred edges
    init = file_pixels(req.sample.init_img).astype(int)
    orig = np.asarray(picture()).astype(int)
    assert np.array_equal(init[mask == 0], orig[mask == 0])                      # outside: untouched
    assert np.abs(init[28:36, 28:36] - orig[28:36, 28:36]).max() > 40             # inside: filled
    assert info["extra_generation_params"]["Masked content"] == "fill"
    assert info["extra_generation_params"]["Mask blur"] == 4
    assert any("inpaint_full_res" in w for w in info["warnings"])
    assert "Mask blur: 4" in info["infotexts"][0]
    # inverted; an alpha mask (opaque = repaint, A1111's create_binary_mask); latent noise is filled + noted
    alpha_mask = Image.merge("RGBA", [centre_mask()] * 3 + [centre_mask()])
    j = srv.http.post("/sdapi/v1/img2img", json=img2img_body(
        mask=b64(alpha_mask), inpainting_mask_invert=1, mask_blur=0, inpainting_fill=2, steps=2)).json()
    info = json.loads(j["info"])
    got = file_pixels(request_of(srv, info).sample.mask_img, "L")
    assert np.array_equal(got, 255 - np.asarray(centre_mask()))
    assert info["extra_generation_params"]["Mask mode"] == "Inpaint not masked"
    assert any("inpainting_fill 2" in w for w in info["warnings"])
    # a mask of another size is brought to width x height like the init image (fill pads it white)
    j = srv.http.post("/sdapi/v1/img2img", json=img2img_body(
        mask=b64(centre_mask(32, 64)), init_images=[b64(picture(32, 64))], resize_mode=2, mask_blur=0,
        inpainting_fill=1, steps=2)).json()
    got = file_pixels(request_of(srv, json.loads(j["info"])).sample.mask_img, "L")
    assert got.shape == (64, 64) and (got[:, :16] == 255).all() and np.array_equal(got[:, 16:48], np.asarray(centre_mask(32, 64)))


def test_a1111_img2img_n_iter_stores_the_init_image_once(srv):
    assets = srv.engine.assets_folder
    before = set(os.listdir(assets))
    j = srv.http.post("/sdapi/v1/img2img", json=img2img_body(init_images=[b64(picture(48, 48))], n_iter=2,
                                                             batch_size=2, steps=2)).json()
    info = json.loads(j["info"])
    assert len(j["images"]) == 4 and info["all_seeds"] == [4321, 4322, 4323, 4324]
    new = set(os.listdir(assets)) - before
    assert len(new) == 1 and {request_of(srv, info, i).sample.init_img for i in (0, 1)} == {os.path.join(assets, *new)}


def test_a1111_img2img_on_the_loaded_model_and_sampler_names(srv):
    try:
        assert srv.http.post("/sdapi/v1/options", json={"sd_model_checkpoint": "tiny-turbo"}).status_code == 200
        body = img2img_body(steps=2, cfg_scale=0, sampler_name="Default", override_settings={})
        j = srv.http.post("/sdapi/v1/img2img", json=body).json()
        info = json.loads(j["info"])
        assert info["sd_model_name"] == "tiny-turbo" and request_of(srv, info).sample.task == "img2img"
        r = srv.http.post("/sdapi/v1/img2img", json={**body, "sampler_name": "DDIM"})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "sampler_name"]
    finally:
        srv.http.post("/sdapi/v1/options", json={"sd_model_checkpoint": "tiny-turbo"})


def _cut(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _truncated() -> str:
    return base64.b64encode(_cut(encode(picture()))).decode()


@pytest.mark.parametrize("over,field", [
    ({"init_images": None}, "init_images"), ({"init_images": []}, "init_images"), ({"init_images": "x"}, "init_images"),
    ({"init_images": [5]}, "init_images"), ({"init_images": ["not base64!"]}, "init_images"),
    ({"init_images": [base64.b64encode(b"plain text, no image").decode()]}, "init_images"),
    ({"init_images": [_truncated()]}, "init_images"),
    ({"init_images": [base64.b64encode(_bomb_png()).decode()]}, "init_images"),
    ({"init_images": ["https://example.com/a.png"]}, "init_images"),
    ({"init_images": ["data:text/plain;base64,aGVsbG8="]}, "init_images"),
    ({"mask": _truncated()}, "mask"), ({"mask": base64.b64encode(_bomb_png()).decode()}, "mask"), ({"mask": 7}, "mask"),
    ({"denoising_strength": 0}, "denoising_strength"), ({"denoising_strength": 1.5}, "denoising_strength"),
    ({"denoising_strength": "x"}, "denoising_strength"), ({"denoising_strength": 0.1, "steps": 4}, "denoising_strength"),
    ({"resize_mode": 7}, "resize_mode"), ({"inpainting_fill": 9}, "inpainting_fill"), ({"mask_blur": -1}, "mask_blur"),
    ({"mask_blur_x": "a"}, "mask_blur_x"), ({"inpainting_mask_invert": 2}, "inpainting_mask_invert"),
    ({"width": 60}, "width"), ({"steps": 0}, "steps"), ({"batch_size": 0}, "batch_size"),
    ({"override_settings": {"sd_model_checkpoint": "tiny-qwen-edit"}}, "override_settings.sd_model_checkpoint"),
    ({"override_settings": {"sd_model_checkpoint": "nope"}}, "override_settings.sd_model_checkpoint"),
])
def test_a1111_img2img_bad_values_name_the_field(srv, over, field):
    r = srv.http.post("/sdapi/v1/img2img", json=img2img_body(**over))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["loc"] == ["body", *field.split(".")] and detail["msg"].startswith(field + ":"), detail


def test_a1111_img2img_refusals_keep_no_asset_and_honour_the_asset_limit(srv):
    assets = srv.engine.assets_folder
    before = sorted(os.listdir(assets))
    for over in ({"init_images": [_truncated()]}, {"mask": base64.b64encode(_bomb_png()).decode()}, {"width": 60}):
        assert srv.http.post("/sdapi/v1/img2img", json=img2img_body(**over)).status_code == 422
    assert sorted(os.listdir(assets)) == before
    limit = srv.engine.assets.limit
    srv.engine.assets.limit = 1000       # engine.limits.max_asset_bytes, as the data URL path reads it
    try:
        r = srv.http.post("/sdapi/v1/img2img", json=img2img_body())
        detail = r.json()["detail"][0]
        assert r.status_code == 422 and detail["loc"] == ["body", "init_images"], r.text
        assert "max_asset_bytes" in detail["msg"]
    finally:
        srv.engine.assets.limit = limit
    assert srv.http.post("/sdapi/v1/img2img", json=img2img_body(steps=2)).status_code == 200


# -- OpenAI image edits -------------------------------------------------------------------------------

def test_openai_edit_with_a_mask_inpaints(srv):
    client = openai_client(srv)
    image, mask = picture(), picture(alpha=True)          # the mask's transparent top-left quarter: edit there
    r = client.images.edit(model="tiny-sd1", image=("in.png", encode(image), "image/png"),
                           mask=("mask.png", encode(mask), "image/png"), prompt="a red door", size="64x64",
                           extra_body={"seed": 77, "num_inference_steps": 4})
    assert isinstance(r.created, int) and len(r.data) == 1 and r.output_format == "png" and r.size == "64x64"
    req = srv.engine.queue_snapshot()["finished"][0]
    req = srv.engine.get(req["request_id"])
    assert req.sample.task == "inpaint" and req.sample.strength == 1.0       # the task's own default
    got = file_pixels(req.sample.mask_img, "L")
    assert (got[:32, :32] == 255).all() and (got[32:, :] == 0).all()         # alpha 0 -> white = repaint
    assert open(req.sample.init_img, "rb").read() == encode(image)
    native = generate(srv, {"prompt": "a red door", "init_img": req.sample.init_img, "mask_img": req.sample.mask_img,
                            "width": 64, "height": 64, "num_inference_steps": 4, "seed": 77}, "tiny-sd1")
    assert np.array_equal(pixels(r.data[0].b64_json), file_pixels(native["results"][0]["path"]))


def test_openai_edit_several_images_on_an_edit_model(srv):
    """Three images on Qwen-Image-Edit: its references ctrl_img, ctrl_img_1, ctrl_img_2 in order (the
    SDKs send them as image[]); the answer equals /generate's edit with the same three."""
    client = openai_client(srv)
    refs = [picture(), picture(48, 64), picture().transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
    r = client.images.edit(model="tiny-qwen-edit", image=[(f"r{i}.png", encode(im), "image/png") for i, im in enumerate(refs)],
                           prompt="put them together", size="64x64", n=1, response_format="url",
                           extra_body={"seed": 5, "num_inference_steps": 2})
    assert len(r.data) == 1 and r.data[0].url.startswith(srv.url + "/outputs/")
    req = srv.engine.get(srv.engine.queue_snapshot()["finished"][0]["request_id"])
    assert req.sample.task == "edit"
    stored = [req.sample.ctrl_img, req.sample.ctrl_img_1, req.sample.ctrl_img_2]
    assert [open(p, "rb").read() for p in stored] == [encode(im) for im in refs]
    got = httpx.get(r.data[0].url, headers={"Authorization": f"Bearer {TOKEN}"})
    native = generate(srv, {"prompt": "put them together", "ctrl_img": stored[0], "ctrl_img_1": stored[1],
                            "ctrl_img_2": stored[2], "width": 64, "height": 64, "num_inference_steps": 2,
                            "seed": 5}, "tiny-qwen-edit")
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(got.content)).convert("RGB")),
                          file_pixels(native["results"][0]["path"]))


def test_openai_edit_without_a_mask_is_img2img_and_auto_size(srv):
    """Without a mask a model with no edit task re-noises the image (img2img); `size: auto` is the
    model's default area at the image's aspect ratio (tiny-sd1-64: 64x64 -> 96x64 in gives 80x56)."""
    client = openai_client(srv)
    r = client.images.edit(model="tiny-sd1-64", image=("a.webp", encode(picture(96, 64), "WEBP"), "image/webp"),
                           prompt="autumn", n=2, output_format="webp", quality="high", background="opaque",
                           input_fidelity="low", user="someone")
    assert len(r.data) == 2 and r.output_format == "webp" and r.size == "80x56"
    req = srv.engine.get(srv.engine.queue_snapshot()["finished"][0]["request_id"])
    assert (req.sample.task, req.sample.batch_size, req.sample.output_ext) == ("img2img", 2, "webp")
    assert req.sample.init_img.endswith(".webp")
    outs = [Image.open(io.BytesIO(base64.b64decode(d.b64_json))) for d in r.data]
    assert all(o.format == "WEBP" and o.size == (80, 56) for o in outs)


def test_openai_edit_errors_name_the_param(srv):
    import openai
    client = openai_client(srv)
    good, rgb_mask = encode(picture()), encode(centre_mask().convert("RGB"))
    alpha = encode(picture(alpha=True))
    cases = [
        (dict(model="tiny-sd1", image=good, mask=rgb_mask), "mask"),                       # no alpha channel
        (dict(model="tiny-sd1", image=good, mask=encode(picture(32, 32, alpha=True))), "mask"),   # another size
        (dict(model="tiny-qwen-edit", image=good, mask=alpha), "mask"),                    # an edit model: no inpaint
        (dict(model="tiny-qwen-edit", image=[good] * 4), "image"),                         # it takes three
        (dict(model="tiny-sd1", image=[good, good], mask=alpha), "image"),
        (dict(model="tiny-sd1", image=[good, good]), "image"),
        (dict(model="tiny-sd1", image=b"not an image at all"), "image"),
        (dict(model="tiny-sd1", image=_cut(good)), "image"),                               # truncated
        (dict(model="tiny-sd1", image=_bomb_png()), "image"),                              # a decompression bomb
        (dict(model="tiny-sd1", image=good, mask=_bomb_png()), "mask"),
        (dict(model="tiny-sd1", image=good, background="transparent"), "background"),
        (dict(model="tiny-sd1", image=good, output_format="gif"), "output_format"),
        (dict(model="tiny-sd1", image=good, size="60x64"), "size"),
        (dict(model="tiny-sd1", image=good, size="big"), "size"),
        (dict(model="tiny-sd1", image=good, n=11), "n"),
        (dict(model="tiny-qwen-edit", image=good, extra_body={"strength": 0.5}), "strength"),
        (dict(model="tiny-wan", image=good), "model"),
        (dict(model="dall-e-2", image=good), "model"),
    ]
    for kwargs, param in cases:
        with pytest.raises(openai.BadRequestError) as e:
            client.images.edit(prompt="x", **{"size": "64x64", **kwargs})
        err = e.value.response.json()["error"]
        assert e.value.status_code == 400 and err["param"] == param and err["type"] == "invalid_request_error", \
            (kwargs.get("model"), param, err)
        assert err["message"].startswith(param + ":")
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for kw, param in ((dict(json={"prompt": "x", "image": "abc"}), "image"),             # not a form
                      (dict(files={"image": ("a.png", good)}, data={"prompt": "x", "stream": "maybe"}), "stream"),
                      (dict(files={"image": ("a.png", good)}, data={"prompt": "x", "partial_images": "4"}),
                       "partial_images"),
                      (dict(files={"image": ("a.png", good)}, data={"prompt": ""}), "prompt"),
                      (dict(files={"mask": ("m.png", alpha)}, data={"prompt": "x"}), "image"),
                      (dict(files={"image": ("a.png", good), "markup": ("m.png", alpha)}, data={"prompt": "x"}), "markup"),
                      (dict(files={"image": ("a.png", good)}, data={"prompt": "x", "seed": "1.5"}), "seed")):
        r = httpx.post(srv.url + "/v1/images/edits", headers=bearer, timeout=60, **kw)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, (param, r.text)
    r = httpx.post(srv.url + "/v1/images/edits", files={"image": ("a.png", good)}, data={"prompt": "x"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
