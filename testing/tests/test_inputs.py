"""Input images and tasks: toolkit/images.py (checks, EXIF, resize modes), the task each request
resolves to, a task switch on a resident model (no load, the loaded pipeline untouched), and the
engine over HTTP: img2img and inpaint from uploads and data URLs, and every bad input a 422 naming
its field with the engine serving on."""
import base64
import io
import os
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from testing.engine_client import InProcessEngine
from testing.fixtures import input_image, input_mask
from toolkit import images
from toolkit.config_modules import GenerateImageConfig
from toolkit.errors import ConfigError
from testing.tiny_runs import run_message

TOKEN = "test-token-inputs"


def _png_bytes(im) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def _bomb_png(width: int = 50_000, height: int = 50_000) -> bytes:
    """A PNG whose header says width x height (RGB) and whose data is a few bytes: a decompression bomb's shape."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def _bands(width=90, height=60) -> Image.Image:
    """Left third red, middle green, right third blue: where a crop or a pad lands is visible."""
    a = np.zeros((height, width, 3), np.uint8)
    a[:, : width // 3] = (255, 0, 0)
    a[:, width // 3: 2 * width // 3] = (0, 255, 0)
    a[:, 2 * width // 3:] = (0, 0, 255)
    return Image.fromarray(a)


# -- toolkit/images.py ------------------------------------------------------------------------------
def test_exif_orientation_is_applied(tmp_path):
    """A camera JPEG stored landscape with Orientation 6 (rotate 90 clockwise) loads portrait, its
    top row coming from the stored image's left column."""
    stored = np.zeros((40, 80, 3), np.uint8)
    stored[:, :20] = (255, 0, 0)                       # the stored left quarter: red
    exif = Image.Exif()
    exif[0x0112] = 6
    path = tmp_path / "rotated.jpg"
    Image.fromarray(stored).save(path, "JPEG", exif=exif, quality=95)
    im = images.load_image(str(path))
    assert im.size == (40, 80) and im.mode == "RGB"
    top = np.asarray(im)[:10].reshape(-1, 3).mean(0)
    assert top[0] > 200 and top[1] < 60, "the stored left edge is not the top after rotating"


@pytest.mark.parametrize("mode", ["resize", "crop", "fill"])
def test_resize_modes(tmp_path, mode):
    path = tmp_path / "bands.png"
    _bands(90, 60).save(path)                          # 3:2 into a square
    im = images.load_image(str(path), 48, 48, mode)
    a = np.asarray(im).astype(int)
    assert im.size == (48, 48) and im.mode == "RGB"
    left, right, top, bottom = a[24, 1], a[24, 46], a[1, 24], a[46, 24]
    if mode == "resize":      # all three bands, squeezed: red at the left, blue at the right
        assert left[0] > 200 and right[2] > 200
    elif mode == "crop":      # scaled to 72x48, 12 px cut on each side: the outer bands shrink to 12 px
        assert left[0] > 200 and right[2] > 200 and a[24, 14][1] > 200 and a[24, 33][1] > 200
    else:                     # scaled to 48x32 and centred: 8 rows of padding repeat the edge rows
        assert left[0] > 200 and right[2] > 200
        assert np.array_equal(a[0], a[8]) and np.array_equal(a[47], a[39]) and top[1] > 200 and bottom[1] > 200


def test_mask_is_L_and_fill_pads_white(tmp_path):
    path = input_mask(tmp_path / "mask.png", 40, 20)
    m = images.load_image(path, 40, 40, "fill", mask=True)
    a = np.asarray(m)
    assert m.mode == "L" and m.size == (40, 40)
    assert (a[:10] == 255).all() and (a[30:] == 255).all(), "the padding is repainted (white)"
    assert a[20, 2] == 0 and a[20, 20] == 255, "the mask's own keep/repaint areas survive"


def test_an_image_at_the_request_size_is_untouched(tmp_path):
    path = input_image(tmp_path / "same.png", 64, 48)
    for mode in ("resize", "crop", "fill"):
        assert np.array_equal(np.asarray(images.load_image(path, 64, 48, mode)), np.asarray(Image.open(path)))


def test_check_image_refuses_bombs_truncated_files_and_non_images(tmp_path):
    good = input_image(tmp_path / "good.png", 64, 64)
    assert images.check_image(good, "sample.init_img") == (64, 64)
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(_bomb_png())
    with pytest.raises(ConfigError, match="pixels") as e:       # Pillow's own limit, set to twice ours
        images.check_image(str(bomb), "sample.init_img")
    assert e.value.key == "sample.init_img"
    bomb.write_bytes(_bomb_png(9000, 9000))                     # past ours, under Pillow's: our header check
    with pytest.raises(ConfigError, match="9000x9000"):
        images.check_image(str(bomb), "sample.init_img")
    from PIL import Image as PILImage
    assert PILImage.MAX_IMAGE_PIXELS == images.MAX_INPUT_PIXELS
    data = open(good, "rb").read()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    with pytest.raises(ConfigError, match="not a whole image") as e:
        images.check_image(str(tmp_path / "cut.png"), "sample.mask_img")
    assert e.value.key == "sample.mask_img"
    jpg = io.BytesIO()
    Image.open(good).save(jpg, "JPEG")
    (tmp_path / "cut.jpg").write_bytes(jpg.getvalue()[:300])
    with pytest.raises(ConfigError, match="not a whole image"):
        images.check_image(str(tmp_path / "cut.jpg"), "sample.ctrl_img")
    (tmp_path / "notes.png").write_bytes(b"just some text, no pixels")
    with pytest.raises(ConfigError, match="is not an image"):
        images.check_image(str(tmp_path / "notes.png"), "sample.ctrl_img_1")


def test_data_urls():
    data, ext = images.decode_data_url("data:image/png;base64," + base64.b64encode(b"abc").decode(), "sample.init_img")
    assert (data, ext) == (b"abc", "png")
    assert images.decode_data_url("data:image/jpeg;base64,YWJj", "f")[1] == "jpg"
    assert images.decode_data_url("data:image/..;base64,YWJj", "f")[1] == "img"
    for bad in ("data:image/png;base64,@@@", "data:image/png;base64,", "data:text/plain;base64,YWJj"):
        with pytest.raises(ConfigError) as e:
            images.decode_data_url(bad, "sample.init_img")
        assert e.value.key == "sample.init_img"


# -- the task a request resolves to -------------------------------------------------------------------
@pytest.mark.parametrize("arch,sample,task,strength", [
    ("sd1", {}, "txt2img", None),
    ("sd1", {"init_img": "a.png"}, "img2img", 0.8),
    ("sd1", {"init_img": "a.png", "mask_img": "m.png"}, "inpaint", 1.0),
    ("sdxl", {"init_img": "a.png", "strength": 0.5}, "img2img", 0.5),
    ("sd1", {"init_img": "a.png", "task": "img2img"}, "img2img", 0.8),
    ("wan22_5b", {"init_img": "a.png"}, "i2v", None),
    ("wan21_i2v", {"init_img": "a.png"}, "i2v", None),
    ("wan22_a14b_i2v", {"init_img": "a.png"}, "i2v", None),
    ("qwen_image_edit", {"ctrl_img": "a.png", "ctrl_img_1": "b.png"}, "edit", None),
    ("flux2_klein", {}, "txt2img", None),
    ("flux2_klein", {"ctrl_img": "a.png", "ctrl_img_3": "d.png"}, "edit", None),
    ("flux2_klein", {"init_img": "a.png", "mask_img": "m.png", "ctrl_img": "r.png"}, "inpaint", 0.8),
    ("chroma", {"init_img": "a.png", "mask_img": "m.png"}, "inpaint", 0.6),
])
def test_task_is_inferred_from_the_inputs(arch, sample, task, strength):
    gen = GenerateImageConfig.from_dict(sample, arch)
    assert (gen.task, gen.strength) == (task, strength)
    again = GenerateImageConfig.from_dict(gen.to_dict(), arch)      # the worker's round trip
    assert (again.task, again.strength) == (task, strength)


@pytest.mark.parametrize("arch,sample,field", [
    ("cogview4", {"init_img": "a.png"}, "sample.init_img"),          # no img2img
    ("cogview4", {"init_img": "a.png", "mask_img": "m.png"}, "sample.mask_img"),   # no inpaint
    ("flux2_klein", {"init_img": "a.png", "mask_img": "m.png", "ctrl_img_1": "b.png"}, "sample.ctrl_img_1"),
    ("zimage_omni", {"ctrl_img": "a.png"}, "sample.ctrl_img"),        # no edit (diffusers 0.42.1: see its file)
    ("sd1", {"ctrl_img": "a.png"}, "sample.ctrl_img"),               # no edit
    ("wan21", {"init_img": "a.png"}, "sample.init_img"),             # no i2v
    ("sd1", {"mask_img": "m.png"}, "sample.init_img"),               # inpaint needs the image
    ("sd1", {"task": "inpaint", "init_img": "a.png"}, "sample.mask_img"),
    ("sd1", {"task": "edit"}, "sample.task"),
    ("sd1", {"task": "paint"}, "sample.task"),
    ("sd1", {"strength": 0.5}, "sample.strength"),                   # txt2img takes none
    ("sd1", {"init_img": "a.png", "strength": 1.5}, "sample.strength"),
    ("sdxl", {"init_img": "a.png", "num_inference_steps": 3}, "sample.strength"),   # 0.3 of 3: no step
    ("qwen_image_edit", {}, "sample.ctrl_img"),                      # edit-only: needs its reference
    ("wan21_i2v", {}, "sample.init_img"),                            # i2v-only: needs its first frame
    ("wan22_a14b_i2v", {"task": "txt2img"}, "sample.task"),
    ("wan21_i2v", {"init_img": "a.png", "ctrl_img": "b.png"}, "sample.ctrl_img"),
    ("qwen_image_edit", {"ctrl_img": "a.png", "ctrl_img_3": "d.png"}, "sample.ctrl_img_3"),
    ("flux_kontext", {"ctrl_img": "a.png", "ctrl_img_1": "b.png"}, "sample.ctrl_img_1"),
    ("flux2_klein", {"task": "txt2img", "ctrl_img": "a.png"}, "sample.ctrl_img"),
    ("sd1", {"init_img": "a.png", "resize_mode": "stretch"}, "sample.resize_mode"),
    ("sd1", {"init_img": 7}, "sample.init_img"),
])
def test_inputs_a_task_cannot_take_name_the_field(arch, sample, field):
    with pytest.raises(ConfigError) as e:
        GenerateImageConfig.from_dict(sample, arch)
    assert e.value.key == field, e.value.one_line()


def test_models_serves_tasks_with_their_inputs():
    from toolkit.models.registry import ARCHS
    sd1, edit, klein = ARCHS["sd1"].public(), ARCHS["qwen_image_edit"].public(), ARCHS["flux2_klein"].public()
    assert [t["name"] for t in sd1["tasks"]] == ["txt2img", "img2img", "inpaint"] and not sd1["needs_ctrl_img"]
    assert sd1["tasks"][2] == {"name": "inpaint", "needs": ["init_img", "mask_img"], "takes": [], "strength": 1.0,
                               "kinds": {"init_img": "image", "mask_img": "image"}}
    assert edit["needs_ctrl_img"] and edit["tasks"] == [
        {"name": "edit", "needs": ["ctrl_img"], "takes": ["ctrl_img_1", "ctrl_img_2"], "strength": None,
         "kinds": {"ctrl_img": "image", "ctrl_img_1": "image", "ctrl_img_2": "image"}}]
    assert not klein["needs_ctrl_img"] and [t["name"] for t in klein["tasks"]] == ["txt2img", "edit", "inpaint"]
    assert klein["tasks"][2] == {"name": "inpaint", "needs": ["init_img", "mask_img"], "takes": ["ctrl_img"],
                                 "strength": 0.8, "kinds": dict.fromkeys(("init_img", "mask_img", "ctrl_img"), "image")}
    i2v = ARCHS["wan21_i2v"].public()
    assert not i2v["needs_ctrl_img"] and i2v["tasks"] == [{"name": "i2v", "needs": ["init_img"], "takes": [],
                                                           "strength": None, "kinds": {"init_img": "image"}}]


def test_needed_inputs_are_those_no_task_runs_without():
    from toolkit.models.registry import ARCHS
    assert ARCHS["wan21_i2v"].needed_inputs == ARCHS["wan22_a14b_i2v"].needed_inputs == ("init_img",)
    assert ARCHS["qwen_image_edit"].needed_inputs == ("ctrl_img",)
    assert ARCHS["sd1"].needed_inputs == ARCHS["wan22_5b"].needed_inputs == ARCHS["flux2_klein"].needed_inputs == ()


def test_klein_inpaint_passes_its_reference_as_image_reference(tmp_path):
    """Flux.2 Klein's inpaint: `image` is the init image at the request size, the optional reference
    (ctrl_img, at its own size) is `image_reference`; without one, no image_reference is passed."""
    from toolkit.models.base_model import get_model_class

    init, mask = input_image(tmp_path / "init.png", 80, 56), input_mask(tmp_path / "mask.png", 64, 64)
    ref = input_image(tmp_path / "ref.png", 72, 96)
    holder = get_model_class("flux2_klein")({"arch": "flux2_klein", "name_or_path": "tiny:flux2_klein"}, device="cpu")
    sample = {"width": 64, "height": 64, "num_inference_steps": 4, "init_img": init, "mask_img": mask}
    kw = holder.input_kwargs(GenerateImageConfig.from_dict({**sample, "ctrl_img": ref}, "flux2_klein"))
    assert kw["image"].size == (64, 64) and kw["mask_image"].size == (64, 64) and kw["strength"] == 0.8
    assert kw["image_reference"].size == (72, 96)
    assert np.array_equal(np.asarray(kw["image_reference"]), np.asarray(Image.open(ref).convert("RGB")))
    assert "image_reference" not in holder.input_kwargs(GenerateImageConfig.from_dict(sample, "flux2_klein"))


# -- a task switch on a resident model -----------------------------------------------------------------
def test_task_switch_loads_nothing_and_leaves_the_loaded_pipeline(tiny, tmp_path):
    """On the worker: txt2img, then img2img and inpaint on the same model load no component (pool
    loads and hits unchanged, no new holder) and build their pipelines over the very components; the
    txt2img pipeline keeps its class, components and config, and gives the same bytes again."""
    from extensions_built_in.inference_engine import messages as m
    from extensions_built_in.inference_engine.worker import WorkerCore
    from toolkit.request import resolve_request

    out = []
    core = WorkerCore(out.append)
    model = {"arch": "sdxl", "name_or_path": tiny("sdxl")}
    init, mask = input_image(tmp_path / "init.png", 80, 56), input_mask(tmp_path / "mask.png", 64, 64)

    def run(rid, **sample):
        _work = resolve_request(model, {"prompt": "a test", "width": 64, "height": 64, "seed": 3,
                                          "num_inference_steps": 4, **sample})
        mc, gen = _work.model, _work.sample
        core.run(run_message(rid, mc.to_dict(), gen.to_dict(), str(tmp_path / f"{rid}.png"), None))
        done = next(x for x in reversed(out) if isinstance(x, m.Done) and x.request_id == rid)
        assert done.status == "ok", done.error
        progress = [x.header for x in out if isinstance(x, m.Frame) and x.request_id == rid
                    and x.header["type"] == "progress"]
        return done.results[0], progress

    first, _ = run("t2i")
    holder, pipe = core.holder, core.holder.pipeline
    components, config = dict(pipe.components), dict(pipe.config)
    loads, hits, builds = core.pool.loads, core.pool.hits, core.builds
    i2i, progress = run("i2i", init_img=init)
    # sdxl img2img at its default strength 0.3 runs int(4 * 0.3) = 1 of the 4 steps: the total says 1
    assert [(p["step"], p["total"]) for p in progress] == [(1, 1)]
    inp, progress = run("inp", init_img=init, mask_img=mask)
    assert progress[-1]["step"] == progress[-1]["total"] == 3          # 0.9999 of 4: int(3.9996) = 3
    assert (core.pool.loads, core.pool.hits, core.builds) == (loads, hits, builds), "a task switch loaded something"
    assert core.holder is holder and holder.pipeline is pipe and type(pipe).__name__ == "StableDiffusionXLPipeline"
    assert dict(pipe.components) == components and all(pipe.components[k] is v for k, v in components.items())
    assert dict(pipe.config) == config
    tasks = {name: p for name, (_key, p) in holder._task_pipelines.items()}
    assert {type(p).__name__ for p in tasks.values()} == {"StableDiffusionXLImg2ImgPipeline",
                                                           "StableDiffusionXLInpaintPipeline"}
    for p in tasks.values():
        assert all(p.components[k] is v for k, v in components.items() if k in p.components)
    again, _ = run("t2i-again")
    with open(first["path"], "rb") as a, open(again["path"], "rb") as b:
        assert a.read() == b.read(), "txt2img after the other tasks differs from before them"
    outputs = {r["path"]: open(r["path"], "rb").read() for r in (first, i2i, inp)}
    assert len(set(outputs.values())) == 3, "the tasks did not change the image"
    core.unload_all()


# -- the engine over HTTP ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def eng(tiny, tmp_path_factory):
    e = InProcessEngine(str(tmp_path_factory.mktemp("engine_inputs")), token=TOKEN)
    e.tiny = tiny
    yield e
    e.close()


def _body(eng, arch="sd1", **sample):
    return {"model": {"arch": arch, "name_or_path": eng.tiny(arch)},
            "sample": {"prompt": "a test", "width": 64, "height": 64, "num_inference_steps": 3, "seed": 7, **sample}}


def _upload(eng, name: str, data: bytes) -> str:
    r = eng.client.post("/assets", params={"name": name}, content=data)
    assert r.status_code == 200, r.text
    return r.json()["path"]


def _result(frames) -> tuple[dict, dict]:
    types = [h["type"] for h, _ in frames]
    assert types[0] == "start" and types[-1] == "end" and frames[-1][0]["status"] == "ok", frames[-2][0]
    return frames[0][0], next(h for h, _ in frames if h["type"] == "result")


def _pixels(data: bytes):
    import numpy as np
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"))


def _direct(eng, arch, sample: dict, tmp_path):
    """The pixels of the same request run on a holder of our own (the engine's resolved sample, input
    paths included). Pixels, not bytes: the files' embedded settings name the model options each ran with."""
    from toolkit.models.base_model import get_model_class
    holder = get_model_class(arch)({"arch": arch, "name_or_path": eng.tiny(arch), "local_only": True})
    holder.load_model()
    gen = GenerateImageConfig.from_dict(sample, holder.model_config)
    out_path = str(tmp_path / "direct.png")
    rec, = holder.generate_images([gen], paths=[out_path])
    return _pixels(open(rec["path"], "rb").read())


def test_img2img_from_an_upload(eng, tmp_path):
    """An upload (a JPEG of another size, so the crop runs) named by its asset id: the start frame says
    img2img at sd1's strength, and the file is what a holder makes of the same request."""
    jpg = io.BytesIO()
    Image.open(input_image(tmp_path / "init.png", 96, 64)).save(jpg, "JPEG", quality=90)
    asset = _upload(eng, "photo.jpg", jpg.getvalue())
    start, res = _result(eng.client.stream(_body(eng, init_img=asset)))
    s = start["sample"]
    assert (s["task"], s["strength"], s["resize_mode"]) == ("img2img", 0.8, "crop")
    assert os.path.realpath(s["init_img"]) == os.path.realpath(os.path.join(eng.engine.assets_folder, asset))
    got = eng.client.get(res["url"]).content
    assert (res["width"], res["height"]) == (64, 64)
    assert np.array_equal(_pixels(got), _direct(eng, "sd1", s, tmp_path))
    txt2img = _result(eng.client.stream(_body(eng)))[1]
    assert eng.client.get(txt2img["url"]).content != got


def test_inpaint_from_data_urls(eng, tmp_path):
    """init_img by asset path, mask_img as a data URL: the engine stores the mask as an asset and the
    file is what a holder makes of the same request."""
    init = _upload(eng, "init.png", open(input_image(tmp_path / "init.png", 64, 64), "rb").read())
    mask_png = open(input_mask(tmp_path / "mask.png", 64, 64), "rb").read()
    url = "data:image/png;base64," + base64.b64encode(mask_png).decode()
    before = set(os.listdir(eng.engine.assets_folder))
    start, res = _result(eng.client.stream(_body(eng, init_img=os.path.join(eng.engine.assets_folder, init),
                                                 mask_img=url)))
    s = start["sample"]
    assert s["task"] == "inpaint" and s["strength"] == 1.0
    stored = set(os.listdir(eng.engine.assets_folder)) - before
    assert len(stored) == 1 and os.path.basename(s["mask_img"]) in stored
    assert open(s["mask_img"], "rb").read() == mask_png
    assert np.array_equal(_pixels(eng.client.get(res["url"]).content), _direct(eng, "sd1", s, tmp_path))


def test_bad_inputs_are_422_naming_the_field_and_the_engine_serves_on(eng, tmp_path):
    good = open(input_image(tmp_path / "good.png", 64, 64), "rb").read()
    bomb = _upload(eng, "bomb.png", _bomb_png())
    cut = _upload(eng, "cut.png", good[: len(good) // 2])
    text = _upload(eng, "text.png", b"no image here at all")
    outside = input_image(tmp_path / "outside.png", 64, 64)          # a real image, not in the assets folder
    as_url = "data:image/png;base64," + base64.b64encode(_bomb_png()).decode()
    asset = _upload(eng, "good.png", good)
    before = set(os.listdir(eng.engine.assets_folder))
    cases = [
        (_body(eng, init_img=bomb), "sample.init_img", "pixels"),
        (_body(eng, init_img=as_url), "sample.init_img", "pixels"),
        (_body(eng, init_img=asset, mask_img=cut), "sample.mask_img", "not a whole image"),
        (_body(eng, init_img=text), "sample.init_img", "not an image"),
        (_body(eng, init_img=outside), "sample.init_img", "assets"),
        (_body(eng, init_img="../outputs/x.png"), "sample.init_img", "assets"),
        (_body(eng, init_img="/etc/passwd"), "sample.init_img", "assets"),
        (_body(eng, init_img="data:image/png;base64,%%%"), "sample.init_img", "base64"),
        (_body(eng, "cogview4", init_img=asset), "sample.init_img", "img2img"),
        (_body(eng, ctrl_img=asset), "sample.ctrl_img", "edit"),
        (_body(eng, "zimage", task="i2v"), "sample.task", "i2v"),
    ]
    for payload, field, words in cases:
        r = eng.client.post("/generate", json=payload)
        assert r.status_code == 422 and r.json()["field"] == field and words in r.json()["detail"], (field, r.text)
    assert set(os.listdir(eng.engine.assets_folder)) == before, "a refused data URL was kept"
    assert not eng.engine.queue_snapshot()["queued"]
    _result(eng.client.stream(_body(eng)))                               # and it serves on
