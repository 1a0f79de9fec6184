"""ControlNets (`sample.controls`) through the engine over HTTP, on tiny SD 1.x and SDXL models and tiny
ControlNets written in the layouts people have (a diffusers folder, lllyasviel's original single file under
`control_model.`, a single file in diffusers' names), each loaded through the funnel as a pool component.

- every layout equals diffusers' own control pipeline over the same folders, bit for bit on CPU float32;
- several ControlNets at once (the pipeline's MultiControlNetModel), and the SDXL Union model with its mode;
- adding a control to a resident model loads only the control; changing or removing it reloads nothing else;
- a control of another arch is refused from its header before queueing, naming `sample.controls[i].model`;
  an arch without controls refuses `sample.controls`; resize_mode brings a control image of another size
  to the request's size as the other inputs are.
"""
import base64
import io

import numpy as np
import pytest
import torch
from PIL import Image

from testing.engine_client import InProcessEngine
from testing.fixtures import input_image
from toolkit.models.tiny.controlnets import write_tiny_controlnet

TOKEN = "control-token-1"
DIT_CONTROLS = {"sd3": "SD3ControlNetModel", "qwen_image": "QwenImageControlNetModel", "zimage": "ZImageControlNetModel"}
# the tiny Z-Image control model: control layers beside both of its transformer's layers, latent-wide input
DIT_CONFIG = {"zimage": dict(control_layers_places=[0, 1], control_refiner_layers_places=[0], control_in_dim=16)}
SEED = 5
STEPS = 2


@pytest.fixture(scope="module")
def files(tiny, tmp_path_factory):
    """Tiny ControlNets in an A1111 tree (models/ControlNet) and beside it: {(arch, layout[, seed]): path}."""
    root = tmp_path_factory.mktemp("controls")
    a1111 = root / "webui" / "models"
    (a1111 / "Stable-diffusion").mkdir(parents=True)
    out = {}
    for arch in ("sd1", "sdxl"):
        for layout, name in (("folder", f"{arch}_cn"), ("original", f"{arch}_cn.safetensors"),
                             ("file", f"{arch}_cn_diffusers.safetensors")):
            out[(arch, layout)] = str(write_tiny_controlnet(arch, tiny(arch), a1111 / "ControlNet" / name, layout))
        out[(arch, "folder", 1)] = str(write_tiny_controlnet(arch, tiny(arch), root / f"{arch}_cn_b", "folder", seed=1))
    out[("flux", "folder")] = str(write_tiny_controlnet("flux", tiny("flux"), root / "flux_cn", "folder",
                                                        cls="FluxControlNetModel"))
    out[("flux", "union")] = str(write_tiny_controlnet("flux", tiny("flux"), root / "flux_union", "folder", seed=3,
                                                       cls="FluxControlNetModel", num_mode=7))
    for arch, cls in DIT_CONTROLS.items():
        out[(arch, "folder")] = str(write_tiny_controlnet(arch, tiny(arch), root / f"{arch}_cn", "folder", cls=cls,
                                                          **DIT_CONFIG.get(arch, {})))
    out[("qwen_image", "inpaint")] = str(write_tiny_controlnet(      # InstantX's inpainting: a mask's 2x2 patch more
        "qwen_image", tiny("qwen_image"), root / "qwen_inpaint_cn", "folder", seed=4, cls="QwenImageControlNetModel",
        extra_condition_channels=4))
    out[("sd3", "inpaint")] = str(write_tiny_controlnet(      # Alimama's: the mask as one more channel
        "sd3", tiny("sd3"), root / "sd3_inpaint_cn", "folder", seed=4, cls="SD3ControlNetModel",
        extra_conditioning_channels=1))
    out[("sdxl", "union")] = str(write_tiny_controlnet("sdxl", tiny("sdxl"), root / "sdxl_union", "folder", seed=2,
                                                       cls="ControlNetUnionModel", num_control_type=8, num_trans_channel=16,
                                                       num_trans_head=2, num_proj_channel=16))
    out["root"], out["webui"] = root, root / "webui"
    out["image"] = input_image(root / "control.png")
    out["wide"] = input_image(root / "wide.png", 96, 48)
    return out


@pytest.fixture(scope="module")
def eng(tiny, files):
    e = InProcessEngine(str(files["root"] / "engine"), token=TOKEN, model_folders=[str(files["webui"])],
                        model_roots=[str(files["root"])] + [tiny(a) for a in ("sd1", "sdxl", "flux", "sana", *DIT_CONTROLS)])
    yield e
    e.close()


def data_url(path) -> str:
    with open(path, "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode()


def body(tiny, arch, controls, **sample):
    return {"model": {"arch": arch, "name_or_path": tiny(arch)},
            "sample": {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": STEPS, "seed": SEED,
                       "guidance_scale": 5.0, "controls": controls, **sample}}


def generate(eng, b) -> np.ndarray:
    frames = eng.client.stream(b)
    end = frames[-1][0]
    assert end["status"] == "ok", end
    res = next(h for h, _ in frames if h["type"] == "result")
    return np.asarray(Image.open(io.BytesIO(eng.client.get(res["url"]).content)).convert("RGB"))


def refused(eng, b) -> dict:
    r = eng.client.post("/generate", json=b)
    assert r.status_code == 422, r.text
    return r.json()


def bare(arch, folder, control_folders, images, cls="ControlNetModel", union=False, **call):
    """diffusers' own control pipeline over the same folders."""
    import diffusers

    from toolkit.models.registry import get_arch
    row = next(c for c in get_arch(arch).controls if c.cls == cls and bool(c.modes) == union)
    pipeline, image_arg = row.pipeline_for("txt2img")
    nets = [getattr(diffusers, cls).from_pretrained(f, local_files_only=True) for f in control_folders]
    extra = {"sd1": {"safety_checker": None, "feature_extractor": None, "requires_safety_checker": False},
             "sdxl": {"add_watermarker": False}}.get(arch, {})
    pipe = getattr(diffusers, pipeline).from_pretrained(folder, controlnet=nets[0] if len(nets) == 1 else nets,
                                                        local_files_only=True, dtype=torch.float32, **extra)
    pipe.set_progress_bar_config(disable=True)
    if row.lists:
        call[image_arg] = images
    else:
        call[image_arg] = images[0] if len(images) == 1 else images
    out = pipe(prompt="a fox", width=64, height=64, num_inference_steps=STEPS, guidance_scale=5.0,
               generator=torch.Generator("cpu").manual_seed(SEED), output_type="pil", **call)
    return np.asarray(out.images[0])


def control_image(files, name="image"):
    return Image.open(files[name]).convert("RGB")


# -- fidelity ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["sd1", "sdxl"])
@pytest.mark.parametrize("layout", ["folder", "original", "file"])
def test_each_layout_equals_the_bare_control_pipeline(eng, tiny, files, arch, layout):
    control = {"model": files[(arch, layout)], "image": data_url(files["image"]), "scale": 0.8, "start": 0.0,
               "end": 1.0}
    got = generate(eng, body(tiny, arch, [control]))
    want = bare(arch, tiny(arch), [files[(arch, "folder")]], [control_image(files)], controlnet_conditioning_scale=0.8)
    assert np.array_equal(got, want)
    plain = generate(eng, body(tiny, arch, []))
    assert not np.array_equal(got, plain)        # the control does change the picture


def test_a_name_in_the_controlnet_folder_and_a_guidance_range(eng, tiny, files):
    control = {"model": "sd1_cn", "image": data_url(files["image"]), "scale": 1.2, "start": 0.5, "end": 1.0}
    frames = eng.client.stream(body(tiny, "sd1", [control]))
    res = next(h for h, _ in frames if h["type"] == "result")
    raw = eng.client.get(res["url"]).content
    got = np.asarray(Image.open(io.BytesIO(raw)).convert("RGB"))
    import json

    from toolkit.media import read_metadata
    recorded = json.loads(read_metadata(raw)["aitk"])["sample"]["controls"][0]   # no local path leaves in the file
    assert recorded["model"] == "sd1_cn" and "/" not in recorded["image"] and recorded["scale"] == 1.2
    want = bare("sd1", tiny("sd1"), [files[("sd1", "folder")]], [control_image(files)],
                controlnet_conditioning_scale=1.2, control_guidance_start=0.5, control_guidance_end=1.0)
    assert np.array_equal(got, want)


def test_several_controlnets_at_once(eng, tiny, files):
    controls = [{"model": files[("sd1", "original")], "image": data_url(files["image"]), "scale": 0.6},
                {"model": files[("sd1", "folder", 1)], "image": data_url(files["image"]), "scale": 0.9, "end": 0.5}]
    got = generate(eng, body(tiny, "sd1", controls))
    want = bare("sd1", tiny("sd1"), [files[("sd1", "folder")], files[("sd1", "folder", 1)]],
                [control_image(files)] * 2, controlnet_conditioning_scale=[0.6, 0.9],
                control_guidance_start=[0.0, 0.0], control_guidance_end=[1.0, 0.5])
    assert np.array_equal(got, want)


def test_sdxl_union_with_its_mode(eng, tiny, files):
    control = {"model": files[("sdxl", "union")], "image": data_url(files["image"]), "mode": "canny", "scale": 0.7}
    got = generate(eng, body(tiny, "sdxl", [control]))
    want = bare("sdxl", tiny("sdxl"), [files[("sdxl", "union")]], [control_image(files)], cls="ControlNetUnionModel",
                union=True, control_mode=[3], controlnet_conditioning_scale=0.7)
    assert np.array_equal(got, want)
    assert refused(eng, body(tiny, "sdxl", [{**control, "mode": "nope"}]))["field"] == "sample.controls[0].mode"
    assert refused(eng, body(tiny, "sdxl", [{**control, "mode": None}]))["field"] == "sample.controls[0].mode"


def test_flux_controlnet_and_union(eng, tiny, files):
    control = {"model": files[("flux", "folder")], "image": data_url(files["image"]), "scale": 0.9}
    got = generate(eng, body(tiny, "flux", [control]))
    want = bare("flux", tiny("flux"), [files[("flux", "folder")]], [control_image(files)], cls="FluxControlNetModel",
                controlnet_conditioning_scale=0.9)
    assert np.array_equal(got, want)
    assert not np.array_equal(got, generate(eng, body(tiny, "flux", [])))
    union = {"model": files[("flux", "union")], "image": data_url(files["image"]), "mode": "depth"}
    got = generate(eng, body(tiny, "flux", [union]))
    want = bare("flux", tiny("flux"), [files[("flux", "union")]], [control_image(files)], cls="FluxControlNetModel",
                union=True, control_mode=2)
    assert np.array_equal(got, want)
    twice = generate(eng, body(tiny, "flux", [control, {**control, "scale": 0.4}]))     # FluxMultiControlNetModel
    want = bare("flux", tiny("flux"), [files[("flux", "folder")]] * 2, [control_image(files)] * 2,
                cls="FluxControlNetModel", controlnet_conditioning_scale=[0.9, 0.4], control_guidance_start=[0.0, 0.0],
                control_guidance_end=[1.0, 1.0])
    assert np.array_equal(twice, want)
    err = refused(eng, body(tiny, "flux", [control, union]))          # one pipeline runs one kind
    assert err["field"] == "sample.controls[1].model"
    err = refused(eng, body(tiny, "flux", [{"model": files[("sd1", "folder")], "image": data_url(files["image"])}]))
    assert err["field"] == "sample.controls[0].model"


@pytest.mark.parametrize("arch", ["sd1", "sdxl"])
@pytest.mark.parametrize("task", ["img2img", "inpaint"])
def test_img2img_and_inpaint_with_a_control(eng, tiny, files, arch, task):
    import diffusers

    from toolkit.images import load_image
    from toolkit.models.registry import get_arch
    control = {"model": files[(arch, "original")], "image": data_url(files["image"]), "scale": 0.7}
    inputs = {"init_img": data_url(files["wide"]), "strength": 0.75}
    call = {"image": load_image(files["wide"], 64, 64, "crop"), "strength": 0.75}
    if task == "inpaint":
        mask = files["root"] / "mask.png"
        m = np.zeros((64, 64), np.uint8)
        m[16:48, 16:48] = 255
        Image.fromarray(m, "L").save(mask)
        inputs["mask_img"] = data_url(mask)
        call["mask_image"] = load_image(str(mask), 64, 64, "crop", mask=True)
    got = generate(eng, body(tiny, arch, [control], task=task, **inputs))
    pipeline, image_arg = get_arch(arch).controls[0].pipeline_for(task)
    net = diffusers.ControlNetModel.from_pretrained(files[(arch, "folder")], local_files_only=True)
    extra = {"sd1": {"safety_checker": None, "feature_extractor": None, "requires_safety_checker": False},
             "sdxl": {"add_watermarker": False}}[arch]
    pipe = getattr(diffusers, pipeline).from_pretrained(tiny(arch), controlnet=net, local_files_only=True,
                                                        dtype=torch.float32, **extra)
    pipe.set_progress_bar_config(disable=True)
    want = pipe(prompt="a fox", width=64, height=64, num_inference_steps=STEPS, guidance_scale=5.0,
                generator=torch.Generator("cpu").manual_seed(SEED), controlnet_conditioning_scale=0.7,
                **{image_arg: control_image(files)}, **call).images[0]
    assert np.array_equal(got, np.asarray(want))


@pytest.mark.parametrize("arch", list(DIT_CONTROLS))
def test_dit_controlnets_equal_their_bare_pipeline(eng, tiny, files, arch):
    """SD3, Qwen-Image and Z-Image: the engine's picture equals the arch's control pipeline called with the holder's
    own arguments (their holders shape the call: Qwen-Image's true CFG)."""
    import dataclasses

    import diffusers

    from toolkit.config_modules import GenerateImageConfig
    from toolkit.control_models import check_all
    from toolkit.models.base_model import get_model_class
    control = {"model": files[(arch, "folder")], "image": data_url(files["image"]), "scale": 0.8}
    got = generate(eng, body(tiny, arch, [control]))
    assert not np.array_equal(got, generate(eng, body(tiny, arch, [])))
    holder = get_model_class(arch)({"arch": arch, "name_or_path": tiny(arch)}).load_model()
    gen = GenerateImageConfig.from_dict({**body(tiny, arch, [{**control, "image": files["image"]}])["sample"]}, arch)
    gen = dataclasses.replace(gen, controls=check_all(gen, holder.spec))
    kw = holder.control_kwargs(gen, holder.pipeline_kwargs(gen))
    row = holder.spec.controls[0]
    net = getattr(diffusers, row.cls).from_pretrained(files[(arch, "folder")], local_files_only=True)
    pipe = getattr(diffusers, row.pipeline_for("txt2img")[0]).from_pretrained(
        tiny(arch), controlnet=net, local_files_only=True, dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    with torch.random.fork_rng():          # SD3's pipeline VAE-samples the control image from the global RNG
        torch.manual_seed(SEED)
        want = pipe(**kw, generator=torch.Generator("cpu").manual_seed(SEED), output_type="pil").images[0]
    assert np.array_equal(got, np.asarray(want))


INPAINT_CONTROLS = {"qwen_image": ("QwenImageControlNetModel", "QwenImageControlNetInpaintPipeline"),
                    "sd3": ("SD3ControlNetModel", "StableDiffusion3ControlNetInpaintingPipeline")}


@pytest.mark.parametrize("arch", list(INPAINT_CONTROLS))
def test_an_inpainting_controlnet_repaints_its_control_image(eng, tiny, files, arch):
    """Task inpaint with Qwen-Image's or SD3's inpainting ControlNet: the control's image repainted where mask_img
    is white (the pipeline's control_image and control_mask; no image, no strength), equal to that pipeline
    called by hand; the plain ControlNet has no inpaint pipeline and the inpainting one no txt2img pipeline,
    each refused naming the model."""
    import diffusers

    from testing.fixtures import input_mask
    from toolkit.config_modules import GenerateImageConfig
    from toolkit.images import load_image
    from toolkit.models.base_model import get_model_class
    cls, pipeline = INPAINT_CONTROLS[arch]
    mask = input_mask(files["root"] / f"{arch}_mask.png")
    control = {"model": files[(arch, "inpaint")], "image": data_url(files["image"]), "scale": 0.8}
    inputs = {"task": "inpaint", "init_img": data_url(files["image"]), "mask_img": data_url(mask)}
    got = generate(eng, body(tiny, arch, [control], **inputs))
    holder = get_model_class(arch)({"arch": arch, "name_or_path": tiny(arch)})
    kw = holder.pipeline_kwargs(GenerateImageConfig.from_dict(body(tiny, arch, [])["sample"], arch))
    net = getattr(diffusers, cls).from_pretrained(files[(arch, "inpaint")], local_files_only=True)
    pipe = getattr(diffusers, pipeline).from_pretrained(tiny(arch), controlnet=net, local_files_only=True,
                                                        dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    with torch.random.fork_rng():          # the pipeline VAE-samples the masked image from the global RNG
        torch.manual_seed(SEED)
        want = pipe(**kw, control_image=load_image(files["image"], 64, 64), control_mask=load_image(mask, 64, 64, mask=True),
                    controlnet_conditioning_scale=0.8, control_guidance_start=0.0, control_guidance_end=1.0,
                    generator=torch.Generator("cpu").manual_seed(SEED), output_type="pil").images[0]
    assert np.array_equal(got, np.asarray(want))
    plain = {**control, "model": files[(arch, "folder")]}
    assert refused(eng, body(tiny, arch, [plain], **inputs))["field"] == "sample.controls[0].model"
    assert refused(eng, body(tiny, arch, [control]))["field"] == "sample.controls[0].model"


def test_zimage_takes_one_control_over_every_step(eng, tiny, files):
    control = {"model": files[("zimage", "folder")], "image": data_url(files["image"])}
    assert refused(eng, body(tiny, "zimage", [control, control]))["field"] == "sample.controls[1].model"
    assert refused(eng, body(tiny, "zimage", [{**control, "end": 0.5}]))["field"] == "sample.controls[0].end"


# -- the pool: a control is one more component --------------------------------------------------------------
def test_adding_changing_and_removing_a_control_loads_only_the_control(eng, tiny, files):
    def pool():
        return eng.client.health()["pool"]

    generate(eng, body(tiny, "sd1", []))                  # the model resident
    before = pool()
    generate(eng, body(tiny, "sd1", [{"model": files[("sd1", "folder", 1)], "image": data_url(files["image"])}]))
    added = pool()
    assert added["loads"] - before["loads"] == 1          # the controlnet alone
    generate(eng, body(tiny, "sd1", [{"model": files[("sd1", "folder", 1)], "image": data_url(files["image"]),
                                      "scale": 0.3}]))
    assert pool()["loads"] == added["loads"]              # the same control again: nothing read
    generate(eng, body(tiny, "sd1", []))
    assert pool()["loads"] == added["loads"]              # removed: nothing reloaded
    roles = [e["role"] for e in pool()["entries"]]
    assert "controlnet" in roles and "unet" in roles


# -- bad input ----------------------------------------------------------------------------------------------
def test_a_control_of_another_arch_is_refused_from_its_header(eng, tiny, files):
    for layout in ("folder", "original", "file"):
        err = refused(eng, body(tiny, "sd1", [{"model": files[("sdxl", layout)], "image": data_url(files["image"])}]))
        assert err["field"] == "sample.controls[0].model" and "SDXL ControlNet (sdxl)" in err["detail"], err
    err = refused(eng, body(tiny, "sd1", [{"model": files[("sd1", "folder")], "image": data_url(files["image"])},
                                          {"model": files[("sdxl", "original")], "image": data_url(files["image"])}]))
    assert err["field"] == "sample.controls[1].model"
    assert generate(eng, body(tiny, "sd1", [])).shape == (64, 64, 3)      # still serving


@pytest.mark.parametrize("control,field", [
    ({"image": "x"}, "sample.controls[0].model"),
    ({"model": "sd1_cn"}, "sample.controls[0].image"),
    ({"model": "no_such_cn", "image": "x"}, "sample.controls[0].model"),
    ({"model": "sd1_cn", "image": "x", "preprocessor": "nope"}, "sample.controls[0].preprocessor"),
    ({"model": "sd1_cn", "image": "x", "start": 0.6, "end": 0.5}, "sample.controls[0].end"),
    ({"model": "sd1_cn", "image": "x", "resize_mode": "stretch"}, "sample.controls[0].resize_mode"),
    ({"model": "sd1_cn", "image": "x", "scale": -1}, "sample.controls[0].scale"),
    ({"model": "sd1_cn", "image": "x", "mode": "canny"}, "sample.controls[0].mode"),
    ({"model": "sd1_cn", "image": "not-an-asset"}, "sample.controls[0].image"),
    ({"model": "/etc/passwd", "image": "x"}, "sample.controls[0].model"),
    ("nope", "sample.controls[0]"),
])
def test_bad_controls_name_the_field(eng, tiny, control, field):
    assert refused(eng, body(tiny, "sd1", [control]))["field"] == field


def test_an_arch_without_controls_refuses_the_field(eng, tiny, files):
    b = body(tiny, "sana", [{"model": files[("sd1", "folder")], "image": data_url(files["image"])}])
    assert refused(eng, b)["field"] == "sample.controls"


def test_resize_mode_brings_another_size_to_the_request(eng, tiny, files):
    from toolkit.images import load_image
    seen = []
    for mode in ("resize", "crop", "fill"):
        control = {"model": files[("sd1", "folder")], "image": data_url(files["wide"]), "resize_mode": mode}
        got = generate(eng, body(tiny, "sd1", [control]))
        want = bare("sd1", tiny("sd1"), [files[("sd1", "folder")]], [load_image(files["wide"], 64, 64, mode)])
        assert np.array_equal(got, want), mode
        seen.append(got)
    assert not np.array_equal(seen[0], seen[1]) and not np.array_equal(seen[1], seen[2])   # the image reaches it


def test_a_preprocessor_makes_the_map_then_resize_mode_fits_it(eng, tiny, files):
    """canny at processor_res 64 from the 96x48 image (the ControlNet extension's resize-with-pad: cubic up, opencv's Canny),
    then the map brought to the request's size by resize_mode: the bare pipeline fed that map by hand."""
    import cv2

    from toolkit.images import fit
    control = {"model": files[("sd1", "folder")], "image": data_url(files["wide"]), "preprocessor": "canny",
               "processor_res": 64, "threshold_a": 50, "threshold_b": 150, "resize_mode": "fill"}
    got = generate(eng, body(tiny, "sd1", [control]))
    small = cv2.resize(np.asarray(control_image(files, "wide")), (128, 64), interpolation=cv2.INTER_CUBIC)   # 48 -> 64: up
    edges = Image.fromarray(cv2.Canny(small, 50, 150)).convert("RGB")     # 128x64: a multiple of 64, no padding
    want = bare("sd1", tiny("sd1"), [files[("sd1", "folder")]], [fit(edges, 64, 64, "fill")])
    assert np.array_equal(got, want)
    unmapped = generate(eng, body(tiny, "sd1", [{**control, "preprocessor": "none"}]))
    assert not np.array_equal(got, unmapped)


def test_a_model_based_preprocessor_runs_in_the_request_from_the_pool(eng, tiny, files):
    """depth_anything's model (a tiny Depth Anything in Forge's models/ControlNetPreprocessor) loads through the
    worker's pool while the request samples; its map equals transformers' model run by the preprocessor by hand."""
    from toolkit import control_maps
    from toolkit.images import fit
    from toolkit.models.tiny.annotators import tiny_annotator, write_tiny_annotator
    folder = files["webui"] / "models" / "ControlNetPreprocessor" / "Depth-Anything-V2-Small-hf"
    write_tiny_annotator("depth_anything", folder)
    try:
        control = {"model": files[("sd1", "folder")], "image": data_url(files["wide"]),
                   "preprocessor": "depth_anything", "processor_res": 64}
        before = eng.client.health()["pool"]["loads"]
        got = generate(eng, body(tiny, "sd1", [control]))
        assert eng.client.health()["pool"]["loads"] > before           # the depth model, through the pool
        made = control_maps.make_map("depth_anything", control_image(files, "wide"), resolution=64,
                                     load_model=lambda key: tiny_annotator(key))
        want = bare("sd1", tiny("sd1"), [files[("sd1", "folder")]], [fit(made, 64, 64, "crop")])
        assert np.array_equal(got, want)
    finally:
        import shutil
        shutil.rmtree(folder.parent)


def test_a_preprocessor_whose_model_is_not_here_is_refused_before_queueing(eng, tiny, files):
    control = {"model": files[("sd1", "folder")], "image": data_url(files["image"]), "preprocessor": "depth_anything"}
    out = refused(eng, body(tiny, "sd1", [control]))
    assert out["field"] == "sample.controls[0].preprocessor" and "annotators/" in out["detail"]


def test_the_library_lists_the_controlnet_folder(eng, files):
    r = eng.client.get("/library")
    assert r.status_code == 200
    entries = [e for e in r.json()["entries"] if e.get("kind") == "controlnet"]
    by_name = {e["name"].split("/")[-1]: e for e in entries}
    assert by_name["sd1_cn.safetensors"]["archs"] == ["sd1"]
    assert by_name["sdxl_cn_diffusers.safetensors"]["archs"] == ["sdxl"]
    # the name the library gives is one a request takes
    control = {"model": by_name["sd1_cn.safetensors"]["name"], "image": data_url(files["image"])}
    assert "/" in control["model"]
    r = eng.client.post("/resolve", json={"model": {"arch": "sd1", "name_or_path": "tiny:sd1"},
                                          "sample": {"prompt": "x", "width": 64, "height": 64, "controls": [control]}})
    assert r.status_code == 200, r.text


def test_hires_runs_both_passes_under_the_controls(eng, tiny, files):
    """A1111's ControlNet extension controls the hires pass too: the second pass is the control pipeline's img2img
    at the new size, the map fitted to it."""
    control = {"model": files[("sd1", "folder")], "image": data_url(files["image"]), "scale": 0.9}
    hires = {"scale": 1.5, "upscaler": "Latent", "denoise": 0.6}
    got = generate(eng, body(tiny, "sd1", [control], hires=hires))
    plain = generate(eng, body(tiny, "sd1", [], hires=hires))
    assert got.shape == plain.shape == (96, 96, 3)
    assert not np.array_equal(got, plain)
