"""Control-map preprocessors (toolkit/control_maps.py): each model-free map against opencv called directly as
sd-webui-controlnet calls it; the tiny Depth Anything and DPT, loaded from their folders through the funnel
(toolkit/annotators.py), against transformers' depth-estimation pipeline run by hand; the parameters' checks."""
import cv2
import numpy as np
import pytest
from PIL import Image

from toolkit import annotators, control_maps
from toolkit.control_maps import make_map
from toolkit.errors import ConfigError


def picture(w=96, h=64, seed=0) -> Image.Image:
    """Shapes on a gradient with noise: edges, lines and flat areas for every preprocessor to find."""
    rng = np.random.RandomState(seed)
    a = np.zeros((h, w, 3), np.uint8)
    a[:] = np.linspace(40, 200, w, dtype=np.uint8)[None, :, None]
    cv2.rectangle(a, (10, 10), (40, 40), (250, 30, 30), -1)
    cv2.circle(a, (70, 30), 15, (20, 220, 90), -1)
    cv2.line(a, (0, h - 5), (w - 1, 5), (0, 0, 0), 2)
    a = np.clip(a.astype(int) + rng.randint(-8, 9, a.shape), 0, 255).astype(np.uint8)
    return Image.fromarray(a)


def arr(im) -> np.ndarray:
    assert im.mode == "RGB"
    return np.asarray(im)


def at_res(a: np.ndarray, res: int):
    """sd-webui-controlnet's resize_image_with_pad written out (annotator/util.py, its scripts/utils.py)."""
    h, w = a.shape[:2]
    k = res / min(h, w)
    th, tw = int(np.round(h * k)), int(np.round(w * k))
    a = cv2.resize(a, (tw, th), interpolation=cv2.INTER_CUBIC if k > 1 else cv2.INTER_AREA)
    padded = np.pad(a, [[0, -th % 64], [0, -tw % 64], [0, 0]], mode="edge")
    return padded, (th, tw)


def rgb(gray: np.ndarray) -> np.ndarray:
    return np.repeat(gray[:, :, None], 3, axis=2)


@pytest.mark.parametrize("res", [64, 100, 512])
def test_canny_is_cv2_canny_at_the_thresholds_and_the_processing_resolution(res):
    im = picture()
    padded, (th, tw) = at_res(np.asarray(im), res)
    want = rgb(cv2.Canny(padded, 50, 150)[:th, :tw])
    got = arr(make_map("canny", im, resolution=res, threshold_a=50, threshold_b=150))
    assert got.shape == want.shape and (min(got.shape[:2]) == res)
    np.testing.assert_array_equal(got, want)
    assert got.any()
    # the defaults are the extension's (100, 200 at 512)
    padded, (th, tw) = at_res(np.asarray(im), 512)
    np.testing.assert_array_equal(arr(make_map("canny", im)), rgb(cv2.Canny(padded, 100, 200)[:th, :tw]))


def test_threshold_scribble_lineart_blur_as_opencv_makes_them():
    im = picture()
    a = np.asarray(im)
    padded, (th, tw) = at_res(a, 128)
    want = np.zeros_like(padded)
    want[padded.min(axis=2) > 100] = 255
    np.testing.assert_array_equal(arr(make_map("threshold", im, resolution=128, threshold_a=100)), want[:th, :tw])

    g1 = cv2.GaussianBlur(padded.astype(np.float32), (0, 0), 0.5)
    g2 = cv2.GaussianBlur(padded.astype(np.float32), (0, 0), 5.0)
    dog = (255 - np.min(g2 - g1, axis=2)).clip(0, 255).astype(np.uint8)
    want = np.zeros_like(padded)
    want[2 * (255 - dog) > 20] = 255
    got = arr(make_map("scribble", im, resolution=128, threshold_a=20))
    np.testing.assert_array_equal(got, want[:th, :tw])
    assert got.any() and not got.all()

    x = padded.astype(np.float32)
    intensity = np.min(cv2.GaussianBlur(x, (0, 0), 6.0) - x, axis=2).clip(0, 255)
    intensity /= max(16, np.median(intensity[intensity > 8]))
    want = rgb((intensity * 127).clip(0, 255).astype(np.uint8))
    np.testing.assert_array_equal(arr(make_map("lineart", im, resolution=128)), want[:th, :tw])

    want = cv2.GaussianBlur(np.ascontiguousarray(padded[:th, :tw]), (0, 0), 3.5)
    np.testing.assert_array_equal(arr(make_map("blur", im, resolution=128, threshold_a=3.5)), want)


def test_tile_invert_grayscale_none_keep_the_input_size():
    im = picture(90, 60)
    a = np.asarray(im)
    np.testing.assert_array_equal(arr(make_map("tile", im, threshold_a=2.5)),
                                  cv2.resize(a, (36, 24), interpolation=cv2.INTER_AREA))
    np.testing.assert_array_equal(arr(make_map("tile", im, threshold_a=1.05)), a)     # under 1.1: the image
    np.testing.assert_array_equal(arr(make_map("invert", im)), 255 - a)
    lum = cv2.cvtColor(a, cv2.COLOR_RGB2LAB)[:, :, 0].astype(np.float32) / 255.0
    np.testing.assert_array_equal(arr(make_map("grayscale", im, threshold_a=0.5)),
                                  rgb(((lum ** 0.5) * 255).clip(0, 255).astype(np.uint8)))
    np.testing.assert_array_equal(arr(make_map("none", im, resolution=999)), a)        # not its parameter: ignored
    # an RGBA input is composited onto white first (the extension's HWC3)
    rgba = np.dstack([a, np.full(a.shape[:2], 0, np.uint8)])
    assert (arr(make_map("invert", Image.fromarray(rgba))) == 0).all()


def test_bad_names_and_values_name_their_field():
    im = picture()
    for call, field in ((lambda: make_map("cany", im, where="sample.controls[0]"), "sample.controls[0].preprocessor"),
                        (lambda: make_map("canny", im, threshold_a=0, where="sample.controls[1]"),
                         "sample.controls[1].threshold_a"),
                        (lambda: make_map("canny", im, threshold_b=256), "threshold_b"),
                        (lambda: make_map("canny", im, resolution=32), "processor_res"),
                        (lambda: make_map("canny", im, resolution=512.5), "processor_res"),
                        (lambda: make_map("blur", im, threshold_a="9"), "threshold_a"),
                        (lambda: make_map("depth_anything", im), "preprocessor")):       # no load_model given
        with pytest.raises(ConfigError) as e:
            call()
        assert e.value.key == field, (field, e.value)
    assert control_maps.for_module("invert (from white bg & black line)") == "invert"
    assert control_maps.for_module("depth") == "depth_midas"
    with pytest.raises(ConfigError, match="controlnet_module"):
        control_maps.for_module("openpose_full", "controlnet_module")


# -- model-based: the tiny models through the funnel ---------------------------------------------------
@pytest.fixture(scope="module")
def annotator_folder(tmp_path_factory):
    """A plain model folder with the tiny Depth Anything and DPT under annotators/, as `hf download` leaves them."""
    from toolkit.models.tiny.annotators import write_tiny_annotator
    root = tmp_path_factory.mktemp("models")
    write_tiny_annotator("depth_anything", root / "annotators" / "Depth-Anything-V2-Small-hf")
    write_tiny_annotator("dpt", root / "annotators" / "Intel" / "dpt-hybrid-midas")
    return root


def test_annotators_are_found_in_the_folders_people_keep_them(annotator_folder, tmp_path):
    found = {e["key"]: e["path"] for e in annotators.listing([str(annotator_folder)], hub_cache=False)}
    assert found == {"depth_anything": str(annotator_folder / "annotators" / "Depth-Anything-V2-Small-hf"),
                     "dpt": str(annotator_folder / "annotators" / "Intel" / "dpt-hybrid-midas")}
    # an A1111 install: the extension's downloads folder; a ComfyUI install: controlnet_aux's ckpts
    import shutil
    a1111 = tmp_path / "stable-diffusion-webui"
    (a1111 / "models" / "Stable-diffusion").mkdir(parents=True)
    shutil.copytree(found["depth_anything"], a1111 / "extensions" / "sd-webui-controlnet" / "annotator" / "downloads"
                    / "depth_anything_v2")
    comfy = tmp_path / "ComfyUI"
    (comfy / "models" / "checkpoints").mkdir(parents=True)
    shutil.copytree(found["dpt"], comfy / "custom_nodes" / "comfyui_controlnet_aux" / "ckpts" / "Intel" / "dpt-large")
    assert annotators.find("depth_anything", [str(a1111)]).endswith("downloads/depth_anything_v2")
    assert annotators.find("dpt", [str(comfy / "models")]).endswith("ckpts/Intel/dpt-large")
    assert annotators.find("depth_anything", [str(comfy)]) is None


@pytest.fixture(scope="module")
def loaded(annotator_folder):
    """load_model as the worker gives it: through the funnel, into a pool."""
    from toolkit.models.v2.mixin import thread_load_interceptor
    from toolkit.models.v2.pool import ComponentPool
    pool = ComponentPool()

    def load_model(key):
        with thread_load_interceptor(pool):
            return annotators.load(key, [str(annotator_folder)])
    load_model.pool = pool
    return load_model


def by_hand_pipeline(folder, image: Image.Image) -> np.ndarray:
    """transformers' own depth-estimation pipeline on the folder (its processor, model, post-processing)."""
    from transformers import pipeline
    return np.asarray(pipeline("depth-estimation", model=str(folder), device="cpu")(image)["depth"])


@pytest.mark.parametrize("key,name", [("depth_anything", "depth_anything"), ("dpt", "depth_midas")])
def test_a_depth_map_equals_transformers_pipeline_run_by_hand(annotator_folder, loaded, key, name):
    folder = annotators.find(key, [str(annotator_folder)])
    im = picture(128, 64)          # at resolution 64: the image itself, no padding (sizes multiples of 64)
    got = arr(make_map(name, im, resolution=64, load_model=loaded))
    want = by_hand_pipeline(folder, im)
    assert got.shape[:2] == want.shape
    np.testing.assert_array_equal(got, rgb(want))
    assert got.std() > 0
    # at another resolution: the pipeline on the extension's resized, padded image, the padding cut off
    padded, (th, tw) = at_res(np.asarray(im), 100)
    want = by_hand_pipeline(folder, Image.fromarray(padded))[:th, :tw]
    np.testing.assert_array_equal(arr(make_map(name, im, resolution=100, load_model=loaded)), rgb(want))


def test_the_normal_map_is_the_extensions_from_dpt_depth(annotator_folder, loaded):
    import torch
    from transformers import DPTForDepthEstimation, DPTImageProcessor
    folder = annotators.find("dpt", [str(annotator_folder)])
    model, processor = DPTForDepthEstimation.from_pretrained(folder).eval(), DPTImageProcessor.from_pretrained(folder)
    im = picture(128, 64)
    with torch.no_grad():
        out = model(**processor(images=im, return_tensors="pt"))
    depth = processor.post_process_depth_estimation(out, target_sizes=[(64, 128)])[0]["predicted_depth"].numpy()
    norm = (depth - depth.min()) / (depth.max() - depth.min())
    x, y = cv2.Sobel(depth, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(depth, cv2.CV_32F, 0, 1, ksize=3)
    x[norm < 0.3] = 0
    y[norm < 0.3] = 0
    normal = np.stack([x, y, np.ones_like(x) * np.pi * 2.0], axis=2)
    normal /= np.sum(normal ** 2.0, axis=2, keepdims=True) ** 0.5
    want = (normal * 127.5 + 127.5).clip(0, 255).astype(np.uint8)[:, :, ::-1]
    np.testing.assert_array_equal(arr(make_map("normal_midas", im, resolution=64, threshold_a=0.3,
                                               load_model=loaded)), want)


def test_annotator_models_are_pool_components(loaded):
    pool = loaded.pool
    for name in ("depth_anything", "depth_midas"):
        make_map(name, picture(), resolution=64, load_model=loaded)
    roles = {e.identity.role for e in pool.entries.values()}
    assert {"annotator.depth_anything", "annotator.dpt"} <= roles
    loads = pool.loads
    make_map("depth_anything", picture(), resolution=64, load_model=loaded)
    assert pool.loads == loads and pool.hits >= 2          # the second map reads nothing again
