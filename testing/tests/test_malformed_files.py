"""Malformed safetensors files through the real HTTP server: each case is built on disk from a valid tiny
file (the tiny Z-Image transformer, a tiny Z-Image LoRA) and sent where a request can name it:

- named by the request itself (model.name_or_path as a single file, model.components.transformer,
  model.extras_name_or_path, model.lora_path, model.loras[i].path): a 422 before queueing, naming the
  key and the file's basename, never the folder it lies in;
- inside a diffusers folder, or a hub snapshot (found when the worker opens it): the request ends with
  an error frame naming model.name_or_path, the component and the basename.

After each, a normal request generates: the engine keeps serving.
"""
import json
import os
import shutil
import struct

import pytest

from testing.engine_client import InProcessEngine

TOKEN = "malformed-token-1"
SAMPLE = {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 1, "seed": 3}
WEIGHTS = "diffusion_pytorch_model.safetensors"


def split(raw: bytes):
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def join(header, data: bytes, length=None) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def by_offset(header):
    return sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"])


def _tensor_1tb(h, d):
    first = by_offset(h)[0]
    begin = h[first]["data_offsets"][0]
    h[first].update(dtype="F32", shape=[2 ** 18, 2 ** 20], data_offsets=[begin, begin + 2 ** 40])   # 1 TiB
    return join(h, d)


def _overlap(h, d):
    names = by_offset(h)
    second = next(n for n in names[1:] if h[n]["data_offsets"][1] > h[n]["data_offsets"][0])
    begin, end = h[second]["data_offsets"]
    shift = min(8, begin)                      # slid back into the tensor before it, its size unchanged
    h[second]["data_offsets"] = [begin - shift, end - shift]
    return join(h, d)


def _bad_dtype(h, d):
    h[by_offset(h)[0]]["dtype"] = "F33"
    return join(h, d)


# name -> (valid file bytes -> malformed bytes, words the message holds)
CASES = {
    "header_length_huge": (lambda raw: struct.pack("<Q", 2 ** 40) + raw[8:], "header length 1099511627776"),
    "header_length_short": (lambda raw: struct.pack("<Q", 24) + raw[8:], "header is not JSON"),
    "header_length_past_end": (lambda raw: struct.pack("<Q", len(raw)) + raw[8:], "header length"),
    "header_not_json": (lambda raw: raw[:8] + b"x" * struct.unpack("<Q", raw[:8])[0]
                        + raw[8 + struct.unpack("<Q", raw[:8])[0]:], "header is not JSON"),
    "tensor_claims_1tb": (lambda raw: _tensor_1tb(*split(raw)), "lies outside the file"),
    "overlapping_offsets": (lambda raw: _overlap(*split(raw)), "overlap"),
    "unknown_dtype": (lambda raw: _bad_dtype(*split(raw)), "unknown dtype 'F33'"),
    "bytes_no_tensor_holds": (lambda raw: raw + b"\0" * 16, "16 bytes after the last tensor"),
    "truncated_data": (lambda raw: raw[: len(raw) - 100], "lies outside the file"),
    "zero_bytes": (lambda raw: b"", "too short to be a safetensors file"),
}


@pytest.fixture(scope="module")
def served(tiny, tiny_root, tmp_path_factory):
    work = tmp_path_factory.mktemp("malformed")
    folder = tiny("zimage")
    lora = work / "good_lora.safetensors"
    from toolkit.models.tiny.loras import write_tiny_lora
    write_tiny_lora("zimage", folder, lora, fmt="peft", rank=4)
    e = InProcessEngine(str(work / "engine"), token=TOKEN, model_roots=[str(tiny_root), str(work)])
    e.work, e.folder, e.lora = work, folder, lora
    e.transformer = open(os.path.join(folder, "transformer", WEIGHTS), "rb").read()
    yield e
    e.close()


def generate(served, model: dict):
    return served.client.post("/generate", json={"model": {"arch": "zimage", **model}, "sample": SAMPLE, "wait": True})


def still_serving(served):
    r = generate(served, {"name_or_path": served.folder})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text


def make(served, case: str, raw: bytes, name: str):
    """The malformed file `name` in its own folder under the engine's roots."""
    out = served.work / case / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(CASES[case][0](raw))
    return out


def assert_refused(served, r, field: str, basename: str, why: str):
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["field"] == field, body
    assert body["detail"].startswith(f"{field}: ") and basename in body["detail"] and why in body["detail"], body
    assert str(served.work) not in r.text                  # the file is named, never where it lies


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_request_named_file_is_a_422_naming_the_key(served, case):
    """The same malformed transformer as name_or_path, components.transformer and extras_name_or_path."""
    bad = make(served, case, served.transformer, f"{case}.safetensors")
    why = CASES[case][1]
    for model, field in (({"name_or_path": str(bad), "extras_name_or_path": served.folder}, "model.name_or_path"),
                         ({"name_or_path": served.folder, "components": {"transformer": str(bad)}},
                          "model.components.transformer"),
                         ({"name_or_path": served.folder, "extras_name_or_path": str(bad)},
                          "model.extras_name_or_path")):
        assert_refused(served, generate(served, model), field, f"{case}.safetensors", why)
    still_serving(served)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_malformed_lora_is_a_422_naming_its_key(served, case):
    bad = make(served, case, served.lora.read_bytes(), f"{case}_lora.safetensors")
    why = CASES[case][1]
    assert_refused(served, generate(served, {"name_or_path": served.folder, "lora_path": str(bad)}),
                   "model.lora_path", f"{case}_lora.safetensors", why)
    r = generate(served, {"name_or_path": served.folder, "loras": [{"path": str(served.lora)}, {"path": str(bad)}]})
    assert_refused(served, r, "model.loras[1].path", f"{case}_lora.safetensors", why)
    still_serving(served)


def malformed_folder(served, case: str, name: str):
    """A copy of the tiny diffusers folder (hard links) whose transformer weights are malformed."""
    folder = served.work / case / name
    shutil.copytree(served.folder, folder, copy_function=os.link)
    target = folder / "transformer" / WEIGHTS
    target.unlink()
    target.write_bytes(CASES[case][0](served.transformer))
    return folder


def error_frame(served, model: dict) -> str:
    frames = served.client.stream({"model": {"arch": "zimage", **model}, "sample": SAMPLE})
    assert frames[-1][0]["type"] == "end" and frames[-1][0]["status"] == "error", frames[-1]
    errors = [h["message"] for h, _ in frames if h["type"] == "error"]
    assert len(errors) == 1, frames
    assert str(served.work) not in errors[0]             # (the start frame echoes the request's own paths)
    return errors[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_malformed_file_in_a_folder_ends_the_request_naming_it(served, case):
    folder = malformed_folder(served, case, "model")
    message = error_frame(served, {"name_or_path": str(folder)})
    assert message.startswith(f"model.name_or_path: transformer: {WEIGHTS}: ") and CASES[case][1] in message, message
    still_serving(served)


@pytest.mark.parametrize("case", ["header_length_huge", "overlapping_offsets", "truncated_data"])
def test_a_malformed_file_in_a_component_folder_names_the_component_key(served, case):
    folder = malformed_folder(served, case, "component")
    message = error_frame(served, {"name_or_path": served.folder,
                                   "components": {"transformer": str(folder / "transformer")}})
    assert message.startswith(f"model.components.transformer: transformer: {WEIGHTS}: "), message
    still_serving(served)


@pytest.mark.parametrize("case", ["header_not_json", "tensor_claims_1tb", "zero_bytes"])
def test_a_malformed_file_in_a_hub_snapshot_ends_the_request_naming_it(served, case, monkeypatch):
    """A hub repo resolves to its local snapshot (faked here: no hub on this machine) holding the bad file."""
    import huggingface_hub
    folder = malformed_folder(served, case, "snapshot")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **kw: str(folder))
    message = error_frame(served, {"name_or_path": "someorg/tiny-zimage-malformed"})
    assert message.startswith(f"model.name_or_path: transformer: {WEIGHTS}: ") and CASES[case][1] in message, message
    monkeypatch.undo()
    still_serving(served)


def test_the_funnel_refuses_before_any_library_opens_the_file(served, monkeypatch):
    """Called directly (no request key), the funnel's error is still a ComponentLoadError naming the role
    and the basename, raised before the library's own loader runs."""
    from diffusers import ZImageTransformer2DModel

    from toolkit.models.v2 import aitk
    from toolkit.models.v2.mixin import ComponentLoadError, WeightsFileError
    folder = malformed_folder(served, "truncated_data", "funnel")

    def never(*a, **kw):
        raise AssertionError("the library's loader ran on a malformed file")
    monkeypatch.setattr(ZImageTransformer2DModel, "from_pretrained", never)
    with pytest.raises(ComponentLoadError) as e:
        aitk(ZImageTransformer2DModel).load(str(folder), role="transformer", subfolder="transformer")
    assert isinstance(e.value, WeightsFileError) and e.value.key is None
    assert str(e.value).startswith(f"transformer: {WEIGHTS}: tensor ") and "lies outside the file" in str(e.value)
