"""Settings in every file, and reading them back (toolkit/file_settings.py, toolkit/media.py metadata,
POST /settings, POST /sdapi/v1/png-info).

  - the A1111 text is A1111's format: a fixture in A1111's exact format parses to the expected fields,
    and what we write is byte for byte the expected line and parses back with the same parser;
  - every format the holder writes (png, jpg, webp; mp4, webm, animated webp; wav, flac, mp3) carries the
    resolved request, read back equal to it, and other readers (Pillow, ffmpeg) see the same tags;
  - through the engine: file -> POST /settings -> POST /generate gives the same bytes again, for an
    arch request and a profile; png-info reads our PNG and a real A1111-style PNG and JPEG;
  - local paths never leave the machine; bad uploads are a 422 naming `body` (`image` for png-info);
  - a failed or cancelled write still leaves no partial file.
"""
import base64
import io
import json
import os
import re

import av
import numpy as np
import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from toolkit import file_settings, media
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.file_settings import (SETTINGS_KEY, file_metadata, parse_a1111, public_sample, sample_from_a1111,
                                   settings_from_metadata)
from toolkit.request import resolve_request

TOKEN = "settings-token-1"

# A1111's exact infotext (as create_infotext writes it: a quoted value, a Size, Forge-era keys)
A1111_TEXT = ('masterpiece, 1girl, (red hair:1.2), "smiling"\n'
              'Negative prompt: lowres, bad anatomy\n'
              'Steps: 20, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7, Seed: 965400086, Size: 512x768, '
              'Model hash: 6ce0161689, Model: v1-5-pruned-emaonly, VAE: vae-ft-mse-840000-ema-pruned.safetensors, '
              'Denoising strength: 0.7, Clip skip: 2, Hires upscale: 2, Hires upscaler: Latent, '
              'Lora hashes: "add_detail: 7c6bad76eb54, more_details: 3b8aa1d351ef", Version: v1.10.1')
A1111_FIELDS = {"Prompt": 'masterpiece, 1girl, (red hair:1.2), "smiling"', "Negative prompt": "lowres, bad anatomy",
                "Steps": "20", "Sampler": "DPM++ 2M", "Schedule type": "Karras", "CFG scale": "7",
                "Seed": "965400086", "Size-1": "512", "Size-2": "768", "Model hash": "6ce0161689",
                "Model": "v1-5-pruned-emaonly", "VAE": "vae-ft-mse-840000-ema-pruned.safetensors",
                "Denoising strength": "0.7", "Clip skip": "2", "Hires upscale": "2", "Hires upscaler": "Latent",
                "Lora hashes": "add_detail: 7c6bad76eb54, more_details: 3b8aa1d351ef", "Version": "v1.10.1"}


def _request_model(mc: ModelConfig) -> dict:
    """What a read-back `model` must be for a non-profile request: the config, None values and the
    empty components left out."""
    return {k: v for k, v in mc.to_dict().items() if v is not None and k != "profile" and v != {}}


# -- the A1111 text ---------------------------------------------------------------------------------

def test_an_a1111_infotext_parses_to_its_fields():
    assert parse_a1111(A1111_TEXT) == A1111_FIELDS
    warnings = []
    assert sample_from_a1111(A1111_FIELDS, warnings) == {
        "prompt": A1111_FIELDS["Prompt"], "negative_prompt": "lowres, bad anatomy", "num_inference_steps": 20,
        "guidance_scale": 7.0, "seed": 965400086, "width": 512, "height": 768, "sampler": "DPM++ 2M"}
    assert warnings == []
    # a prompt alone (no parameter line) is all prompt
    assert parse_a1111("just a prompt, with: a colon") == {"Prompt": "just a prompt, with: a colon", "Negative prompt": ""}


# A1111's parse_generation_parameters, its format part as A1111 has it (modules/infotext_utils.py, with
# re_param_code): the reference the linear parser must agree with on real infotexts
_A1111_RE_PARAM = re.compile(r'\s*(\w[\w \-/]+):\s*("(?:\\.|[^\\"])+"|[^,]*)(?:,|$)')


def _a1111_reference(x: str) -> dict:
    res, prompt, negative_prompt, done_with_prompt = {}, "", "", False
    *lines, lastline = x.strip().split("\n")
    if len(_A1111_RE_PARAM.findall(lastline)) < 3:
        lines.append(lastline)
        lastline = ""
    for line in lines:
        line = line.strip()
        if line.startswith("Negative prompt:"):
            done_with_prompt = True
            line = line[16:].strip()
        if done_with_prompt:
            negative_prompt += ("" if negative_prompt == "" else "\n") + line
        else:
            prompt += ("" if prompt == "" else "\n") + line
    res["Prompt"], res["Negative prompt"] = prompt, negative_prompt
    for k, v in _A1111_RE_PARAM.findall(lastline):
        if v and v[0] == '"' and v[-1] == '"':
            try:
                v = json.loads(v)
            except ValueError:
                pass
        m = re.match(r"^(\d+)x(\d+)$", v)
        if m is not None:
            res[f"{k}-1"], res[f"{k}-2"] = m.group(1), m.group(2)
        else:
            res[k] = v
    return res


# infotexts as A1111, Forge and their extensions write them
REAL_INFOTEXTS = [
    A1111_TEXT,
    "masterpiece, best quality,\n\n1girl, BREAK\nsolo\nNegative prompt: (worst quality:1.4),\nlowres\n\n"
    "Steps: 30, Sampler: DPM++ 2M Karras, CFG scale: 7, Seed: 1234, Size: 512x768, Model hash: 7f96a1a9ca, "
    "Model: anything-v5, Denoising strength: 0.4, Hires upscale: 2, Hires steps: 10, Hires upscaler: 4x-UltraSharp, "
    'ADetailer model: face_yolov8n.pt, ADetailer prompt: "a face, smiling: yes", ADetailer confidence: 0.3, '
    'ADetailer dilate/erode: 4, ADetailer version: 23.11.1, TI hashes: "easynegative: c74b4e810b03", Version: v1.6.0',
    'a cat\nSteps: 20, Sampler: Euler a, CFG scale: 7, Seed: 5, Size: 512x512, '
    'Template: "a \\"quoted\\" cat, at night", Negative Template: "x: y", Wildcard prompt: "__animal__, cute"',
    "a photo\nSteps: 25, Sampler: Euler, Schedule type: Simple, CFG scale: 1, Distilled CFG Scale: 3.5, Seed: 9, "
    'Size: 896x1152, Model: flux1-dev-bnb-nf4-v2, Module 1: ae, Emphasis: "No norm", '
    "Beta schedule alpha: 0.6, Version: f2.0.1v1.10.1-previous-519-g44eb4ea8",
    'Steps: 20, Sampler: DDIM, CFG scale: 7, Seed: 1, Size: 64x64',                # parameters without a prompt
    "a prompt only, with: a colon, and, commas",
    'p\nSteps: 20, Lora hashes: "unbalanced, Seed: 3, Size: 64x64',               # a quote left open
    'p\nSteps: 20, Sampler: "ab\\\nc", CFG scale: 5, Seed: 1',
]


@pytest.mark.parametrize("text", REAL_INFOTEXTS)
def test_real_infotexts_parse_as_a1111_parses_them(text):
    """The linear parser answers what A1111's own regex-based parser answers."""
    assert parse_a1111(text) == _a1111_reference(text)


def test_what_we_write_is_a1111s_line_and_parses_back():
    mc = ModelConfig.from_dict({"arch": "zimage"})
    gen = GenerateImageConfig.from_dict({"prompt": "a red fox", "negative_prompt": "blurry", "seed": 42}, mc)
    meta = file_metadata(mc, gen, scheduler="FlowMatchEulerDiscreteScheduler")
    assert meta["parameters"] == ("a red fox\nNegative prompt: blurry\n"
                                  "Steps: 8, Sampler: Euler (flow matching), CFG scale: 0.0, Seed: 42, Size: 1024x1024, "
                                  "Model: Tongyi-MAI/Z-Image-Turbo, Version: aitk-engine")
    # awkward text: commas, colons, quotes, newlines, non-Latin-1; a model name A1111 must quote
    prompt = 'a fox, "red": vivid\nsecond line, 漢字'
    mc = ModelConfig.from_dict({"arch": "wan21", "name_or_path": "tiny:wan21"})
    gen = GenerateImageConfig.from_dict({"prompt": prompt, "negative_prompt": "low: quality, blur", "seed": 7,
                                         "width": 64, "height": 64, "num_frames": 9, "fps": 8}, mc)
    meta = file_metadata(mc, gen, scheduler="UniPCMultistepScheduler")
    assert meta["parameters"].endswith('Seed: 7, Size: 64x64, Model: "tiny:wan21", Frames: 9, FPS: 8, '
                                       'Version: aitk-engine')
    fields = parse_a1111(meta["parameters"])
    assert (fields["Prompt"], fields["Negative prompt"]) == (prompt, "low: quality, blur")
    assert (fields["Steps"], fields["Sampler"], fields["CFG scale"], fields["Seed"]) == ("30", "UniPC", "5.0", "7")
    assert (fields["Size-1"], fields["Size-2"], fields["Model"], fields["Frames"]) == ("64", "64", "tiny:wan21", "9")
    settings = json.loads(meta[SETTINGS_KEY])
    assert settings["sample"] == gen.to_dict() and settings["model"]["name_or_path"] == "tiny:wan21"
    assert meta[SETTINGS_KEY].isascii() and file_metadata(mc, gen, scheduler="UniPCMultistepScheduler") == meta


def test_local_paths_never_leave_the_machine(tmp_path):
    folder = tmp_path / "secret_place" / "my-zimage"
    (folder / "vae").mkdir(parents=True)
    lora = tmp_path / "secret_place" / "style.safetensors"
    lora.write_bytes(b"x")
    mc = ModelConfig.from_dict({"arch": "zimage", "name_or_path": str(folder), "lora_path": str(lora),
                                "components": {"vae": str(folder / "vae")}})
    gen = GenerateImageConfig.from_dict({"prompt": "p", "seed": 1}, mc)
    meta = file_metadata(mc, gen)
    for text in meta.values():
        assert "secret_place" not in text and str(tmp_path) not in text
    assert "Model: my-zimage," in meta["parameters"]
    back = settings_from_metadata({"format": "png", **meta})
    assert back["model"]["name_or_path"] == "my-zimage" and back["model"]["lora_path"] == "style.safetensors"
    assert back["model"]["components"] == {"vae": "vae"}
    assert {w.split(":")[0] for w in back["warnings"]} == {"model.name_or_path", "model.lora_path",
                                                           "model.components.vae"}
    # a path that does not exist here is still a path
    mc = ModelConfig.from_dict({"arch": "zimage", "name_or_path": "/gone/elsewhere/model"})
    assert "/gone" not in file_metadata(mc, gen)["parameters"]


# -- every format through the holder ----------------------------------------------------------------

HOLDER_CASES = [("zimage", "png"), ("zimage", "jpg"), ("zimage", "webp"), ("wan21", "mp4"), ("wan21", "webm"),
                ("wan21", "webp"),
                ("stable_audio", "wav"), ("stable_audio", "flac"), ("stable_audio", "mp3")]


@pytest.fixture(scope="module")
def holders(tiny):
    from toolkit.models.base_model import get_model_class

    made = {}

    def get(arch):
        if arch not in made:
            tiny(arch)            # built in the session's tiny cache, which `tiny:<arch>` names
            made[arch] = get_model_class(arch)({"arch": arch, "name_or_path": f"tiny:{arch}", "local_only": True})
            made[arch].load_model()
        return made[arch]
    yield get
    made.clear()


def _other_readers(path: str, ext: str) -> tuple:
    """(A1111 text, JSON) as other programs read them: Pillow for png/jpg/webp, ffmpeg for the rest."""
    if ext == "png":
        info = Image.open(path).info
        return info.get("parameters"), info.get(SETTINGS_KEY)
    if ext in ("jpg", "webp"):
        im = Image.open(path)
        comment = im.getexif().get_ifd(0x8769).get(0x9286)
        assert comment[:8] == b"UNICODE\x00"                       # A1111's (piexif's) encoding
        assert b"<aitk:settings>" in im.info["xmp"]
        return comment[8:].decode("utf-16-be"), media.read_metadata(open(path, "rb").read())[SETTINGS_KEY]
    with av.open(path) as c:
        return None, c.metadata.get("comment", c.metadata.get("COMMENT"))     # ffmpeg's Matroska tags: upper case


@pytest.mark.parametrize("arch,ext", HOLDER_CASES)
def test_every_format_carries_its_request(holders, tmp_path, arch, ext):
    from toolkit.models.registry import ARCHS

    holder = holders(arch)
    mc = ModelConfig.from_dict({"arch": arch, "name_or_path": f"tiny:{arch}", "local_only": True})
    sample = {**ARCHS[arch].tiny.sample, "prompt": "a small, test: prompt", "seed": -1, "output_ext": ext}
    gen = GenerateImageConfig.from_dict(sample, mc)
    out_path = str(tmp_path / f"out.{ext}")
    rec, = holder.generate_images([gen], paths=[out_path])
    with open(rec["path"], "rb") as f:
        data = f.read()
    meta = media.read_metadata(data)
    back = settings_from_metadata(meta)
    assert back["source"] == SETTINGS_KEY and back["warnings"] == []
    assert back["sample"] == {**gen.to_dict(), "seed": rec["seed"]} and rec["seed"] >= 0   # the seed used
    assert back["model"] == _request_model(mc)
    _work = resolve_request(back["model"], back["sample"])
    mc2, gen2 = _work.model, _work.sample      # ready to POST: resolves to the same request
    assert mc2 == mc and gen2.to_dict() == {**gen.to_dict(), "seed": rec["seed"]}
    # other readers see the same text (mp4, webm and audio carry the JSON only)
    text, js = _other_readers(rec["path"], ext)
    assert js == meta[SETTINGS_KEY] and json.loads(js)["sample"] == {**gen.to_dict(), "seed": rec["seed"]}
    assert text == meta["parameters"]
    if ext in ("png", "jpg", "webp"):
        assert parse_a1111(text)["Seed"] == str(rec["seed"])


# -- atomic writes with metadata ----------------------------------------------------------------------

META = {"parameters": "p\nSteps: 1, Sampler: Euler, CFG scale: 1.0, Seed: 1, Size: 8x8",
        SETTINGS_KEY: json.dumps({"version": 1, "model": {"arch": "zimage"}, "sample": {"prompt": "p"}})}
RNG = np.random.default_rng(0)
WRITES = {
    "png": lambda p: media.save_image(RNG.random((8, 8, 3)), p, metadata=META),
    "jpg": lambda p: media.save_image(RNG.random((8, 8, 3)), p, metadata=META),
    "webp": lambda p: media.save_image(RNG.random((8, 8, 3)), p, metadata=META),
    "mp4": lambda p: media.save_video(RNG.random((2, 16, 16, 3)), p, fps=8, metadata=META),
    "webm": lambda p: media.save_video(RNG.random((2, 16, 16, 3)), p, fps=8, metadata=META),
    "wav": lambda p: media.save_audio(RNG.uniform(-1, 1, 800), p, 8000, metadata=META),
    "flac": lambda p: media.save_audio(RNG.uniform(-1, 1, 800), p, 8000, metadata=META),
    "mp3": lambda p: media.save_audio(RNG.uniform(-1, 1, 2205), p, 22050, metadata=META),
}


@pytest.mark.parametrize("ext", WRITES)
def test_a_cancel_after_the_metadata_is_written_leaves_no_file(tmp_path, ext):
    """The commit guard runs after the whole file, metadata included, is in the temp file: it still wins."""
    final = tmp_path / f"x.{ext}"
    final.write_bytes(b"previous good file")
    seen = []

    def cancel():
        tmp, = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        seen.append(media.read_metadata(tmp.read_bytes())[SETTINGS_KEY])
        raise RuntimeError("cancelled")
    with pytest.raises(RuntimeError, match="cancelled"), media.commit_guard(cancel):
        WRITES[ext](final)
    assert seen == [META[SETTINGS_KEY]], "the metadata was not in the temp file before the commit"
    assert final.read_bytes() == b"previous good file" and [p.name for p in tmp_path.iterdir()] == [final.name]
    WRITES[ext](final)
    assert media.read_metadata(final.read_bytes())[SETTINGS_KEY] == META[SETTINGS_KEY]


@pytest.mark.parametrize("ext,step", [("wav", "_append_riff_comment"), ("mp3", "_prepend_id3_comment")])
def test_a_failure_while_writing_the_metadata_leaves_no_partial_file(tmp_path, monkeypatch, ext, step):
    real = getattr(media, step)

    def broken(tmp, text):
        real(tmp, text[: len(text) // 2])            # a partial write really happens
        raise OSError("disk on fire")
    monkeypatch.setattr(media, step, broken)
    final = tmp_path / f"x.{ext}"
    final.write_bytes(b"previous good file")
    with pytest.raises(OSError, match="on fire"):
        WRITES[ext](final)
    assert final.read_bytes() == b"previous good file" and [p.name for p in tmp_path.iterdir()] == [final.name]


def test_metadata_too_large_for_a_jpeg_segment_is_left_out_not_fatal(tmp_path):
    big = {"parameters": "x" * 40000, SETTINGS_KEY: json.dumps({"p": "y" * 70000})}
    rec = media.save_image(RNG.random((8, 8, 3)), tmp_path / "big.jpg", metadata=big)
    meta = media.read_metadata(open(rec["path"], "rb").read())
    assert meta["parameters"] is None and meta[SETTINGS_KEY] is None       # 80 KB of UTF-16 > 64 KiB
    rec = media.save_image(RNG.random((8, 8, 3)), tmp_path / "big.webp", metadata=big)
    assert media.read_metadata(open(rec["path"], "rb").read())["parameters"] == big["parameters"]   # webp: no limit


# -- the engine: POST /settings and png-info ----------------------------------------------------------

@pytest.fixture(scope="module")
def eng(tiny, tiny_root, tmp_path_factory):
    from extensions_built_in.inference_engine.compat import compat_routes
    from testing.engine_client import InProcessEngine
    from toolkit.profiles import load_profiles

    folder = tmp_path_factory.mktemp("settings")
    (folder / "profiles.toml").write_text(f'[model_profiles.tiny-turbo]\narchitecture = "zimage"\n'
                                          f'checkpoint = "{tiny("zimage")}"\n')
    e = InProcessEngine(str(folder), token=TOKEN, extra_routes=[compat_routes()],
                        profiles=load_profiles(str(folder / "profiles.toml")))
    yield e
    e.close()


def _generate(eng, model, sample) -> tuple[dict, bytes]:
    """(the start frame's resolved request, the file's bytes)."""
    frames = eng.client.stream({"model": model, "sample": sample})
    start = next(h for h, _ in frames if h["type"] == "start")
    result = next(h for h, _ in frames if h["type"] == "result")
    r = eng.client.get(result["url"])
    assert r.status_code == 200
    return start, r.content


@pytest.mark.parametrize("model", [{"arch": "zimage", "name_or_path": "tiny:zimage"}, "tiny-turbo"],
                         ids=["arch", "profile"])
def test_a_file_gives_back_the_request_that_makes_it_again(eng, model):
    sample = {"prompt": "a lighthouse, at night: stormy", "width": 64, "height": 64, "num_inference_steps": 2,
              "seed": -1, "output_ext": "png"}
    start, data = _generate(eng, model, sample)
    r = eng.client.post("/settings", content=data)
    assert r.status_code == 200, r.text
    back = r.json()
    assert back["source"] == SETTINGS_KEY and back["format"] == "png" and back["warnings"] == []
    assert back["sample"] == start["sample"] and back["sample"]["seed"] >= 0
    if model == "tiny-turbo":
        assert back["model"]["profile"] == "tiny-turbo" and "name_or_path" not in back["model"]
        assert "Model: tiny-turbo," in back["parameters"]
    else:
        assert back["model"] == {k: v for k, v in start["model"].items() if v is not None and v != {}}
    again_start, again = _generate(eng, back["model"], back["sample"])
    assert again_start["sample"] == start["sample"] and again == data, "the read-back request made another file"


def test_png_info_reads_our_png_like_a1111(eng):
    _start, data = _generate(eng, "tiny-turbo", {"prompt": "a cat", "width": 64, "height": 64,
                                                 "num_inference_steps": 2, "seed": 11})
    r = eng.client.post("/sdapi/v1/png-info", json={"image": "data:image/png;base64," + base64.b64encode(data).decode()})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["info"].startswith("a cat\nSteps: 2, Sampler: ") and j["parameters"]["Seed"] == "11"
    assert j["parameters"]["Model"] == "tiny-turbo" and j["parameters"]["Size-1"] == "64"
    assert json.loads(j["items"][SETTINGS_KEY])["sample"]["seed"] == 11


def _a1111_png(text: str) -> bytes:
    """A PNG as A1111 saves it: Pillow's PngInfo with one `parameters` text chunk."""
    info = PngInfo()
    info.add_text("parameters", text)
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 10, 10)).save(buf, format="PNG", pnginfo=info)
    return buf.getvalue()


def _a1111_jpeg(text: str) -> bytes:
    """A JPEG with the EXIF UserComment A1111 writes (b"UNICODE\\0" + UTF-16BE), here through Pillow's
    own EXIF writer (a little-endian TIFF, unlike ours)."""
    exif = Image.Exif()
    exif.get_ifd(0x8769)[0x9286] = b"UNICODE\x00" + text.encode("utf-16-be")
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (10, 200, 10)).save(buf, format="JPEG", exif=exif)
    return buf.getvalue()


@pytest.mark.parametrize("make", [_a1111_png, _a1111_jpeg], ids=["png", "jpeg"])
def test_an_a1111_file_is_read_by_png_info_and_settings(eng, make):
    data = make(A1111_TEXT)
    r = eng.client.post("/sdapi/v1/png-info", json={"image": base64.b64encode(data).decode()})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["info"] == A1111_TEXT and j["parameters"] == A1111_FIELDS
    r = eng.client.post("/settings", content=data)
    assert r.status_code == 200, r.text
    back = r.json()
    assert back["source"] == "a1111" and back["parameters"] == A1111_TEXT and back["model"] is None
    assert back["sample"]["width"] == 512 and back["sample"]["seed"] == 965400086
    assert back["sample"]["sampler"] == "DPM++ 2M" and any("v1-5-pruned-emaonly" in w for w in back["warnings"])
    # a model name that is a profile here maps onto it, and the request is checked as one
    text = A1111_TEXT.replace("v1-5-pruned-emaonly", "tiny-turbo").replace("Sampler: DPM++ 2M, ", "")
    back = eng.client.post("/settings", content=make(text)).json()
    assert back["model"] == {"profile": "tiny-turbo"} and back["warnings"] == []
    back = eng.client.post("/settings", content=make(text.replace("512x768", "500x768"))).json()
    assert back["warnings"] == ["not accepted here as it is: sample.width: 500 is not a multiple of 16, "
                                "which arch zimage needs"]


@pytest.mark.parametrize("content,says", [
    (b"", "empty"), (b"hello, not a file", "not a PNG, JPEG, WebP, MP4, WebM, WAV, FLAC or MP3 file"),
    (b'{"model": "tiny-turbo"}', "not a PNG"), (b"\x89PNG\r\n\x1a\n\x00\x00\x01\x00IHDR\x00", "broken png"),
])
def test_settings_refuses_what_is_no_file_naming_the_body(eng, content, says):
    r = eng.client.post("/settings", content=content)
    assert r.status_code == 422 and r.json()["field"] == "body" and says in r.json()["detail"], r.text


def test_settings_refuses_a_file_without_settings_and_needs_the_token(eng):
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, format="PNG")
    r = eng.client.post("/settings", content=buf.getvalue())
    assert r.status_code == 422 and r.json()["field"] == "body" and "no generation settings" in r.json()["detail"]
    import httpx
    assert httpx.post(f"{eng.url}/settings", content=buf.getvalue()).status_code == 401
    assert httpx.post(f"{eng.url}/sdapi/v1/png-info", json={"image": ""}).status_code == 401


@pytest.mark.parametrize("image,says", [("not base64!", "base64"), (base64.b64encode(b"plain text").decode(), "not a PNG"),
                                        (5, "base64 string")])
def test_png_info_refuses_bad_images_naming_image(eng, image, says):
    r = eng.client.post("/sdapi/v1/png-info", json={"image": image})
    assert r.status_code == 422, r.text
    detail, = r.json()["detail"]
    assert detail["loc"] == ["body", "image"] and says in detail["msg"]


def test_png_info_of_nothing_is_empty_like_a1111(eng):
    assert eng.client.post("/sdapi/v1/png-info", json={"image": ""}).json() == {"info": "", "items": {}, "parameters": {}}


def test_settings_of_an_input_image_name_the_uploaded_asset(eng, tiny, tmp_path):
    """An image input is written by its asset name, which the engine takes again."""
    from testing.fixtures import input_image
    tiny("flux_kontext")
    with open(input_image(tmp_path / "in.png"), "rb") as f:
        stored = eng.client.post("/assets", params={"name": "in.png"}, content=f.read()).json()["path"]
    model = {"arch": "flux_kontext", "name_or_path": "tiny:flux_kontext"}
    start, data = _generate(eng, model, {"prompt": "edit", "width": 64, "height": 64, "num_inference_steps": 2,
                                         "seed": 3, "ctrl_img": stored})
    back = eng.client.post("/settings", content=data).json()
    assert back["sample"]["ctrl_img"] == stored and os.sep not in stored and back["warnings"] == []
    assert start["sample"]["ctrl_img"].endswith(os.sep + stored)        # the engine resolved it to its path
    _start, again = _generate(eng, back["model"], back["sample"])
    assert again == data


def test_public_sample_of_a_batch_member_is_that_file_alone():
    mc = ModelConfig.from_dict({"arch": "zimage"})
    gen = GenerateImageConfig.from_dict({"prompt": "p", "seed": 5}, mc)
    assert public_sample(gen, 6)["seed"] == 6 and public_sample(gen)["seed"] == 5


def _png_with(chunks: dict) -> bytes:
    info = PngInfo()
    for k, v in chunks.items():
        info.add_text(k, v)
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, format="PNG", pnginfo=info)
    return buf.getvalue()


@pytest.mark.parametrize("settings,says", [
    ("[" * 100000 + "]" * 100000, "cannot be read"),                        # nested past Python's stack
    ('{"version": 1, "model": {"arch": "zimage", "profile": [1]}, "sample": {}}', "cannot be read"),
    ('{"version": 99, "model": {"arch": "zimage"}, "sample": {}}', "format version 99"),
    ('{"version": 1, "model": {"arch": "zimage", "quantize": "yes"}, "sample": {"width": [64]}}', "not accepted"),
    ('{"version": 1, "model": {"arch": "nope"}, "sample": {}}', "model.arch: unknown arch"),
])
def test_hostile_settings_are_warnings_never_a_5xx(eng, settings, says):
    r = eng.client.post("/settings", content=_png_with({"parameters": "a fox\nSteps: 2, CFG scale: 1, Seed: 3",
                                                        SETTINGS_KEY: settings}))
    assert r.status_code == 200, r.text
    assert any(says in w for w in r.json()["warnings"]), r.json()["warnings"]


def test_a_compressed_text_chunk_may_not_inflate_without_bound(eng):
    info = PngInfo()
    info.add_text("parameters", "x" * (media.MAX_TEXT_BYTES + 1), zip=True)     # a few KiB on the wire
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, format="PNG", pnginfo=info)
    assert len(buf.getvalue()) < 100_000
    r = eng.client.post("/settings", content=buf.getvalue())
    assert r.status_code == 422 and "inflates past" in r.json()["detail"]


@pytest.mark.parametrize("value,shown", [
    ("/no/such/folder/flux1-dev.safetensors", "flux1-dev.safetensors"),   # a local path, even one not there
    ("~/models/sdxl/", "sdxl"),
    ("black-forest-labs/FLUX.1-dev", "black-forest-labs/FLUX.1-dev"),
    ("tiny:sd1", "tiny:sd1"), ("", "")])
def test_one_rule_shows_a_model_name_in_health_and_in_files(value, shown):
    """/health and /queue (engine.py) and a file's settings (file_settings.py) show a model by one rule: the
    engine's own copy showed a local path that does not exist whole."""
    from extensions_built_in.inference_engine import engine
    assert engine.display_name(value) == file_settings.display_name(value) == shown
