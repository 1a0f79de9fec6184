"""A file's embedded settings are untrusted input (POST /settings, POST /sdapi/v1/png-info).

What a crafted file could do before, each through the real server, and the rule that now holds:
  - a long run of words without a `:` in the A1111 text made A1111's regex quadratic (seconds per
    40 KB, the GIL held): the parser is linear, and the text it parses is capped (MAX_INFOTEXT_CHARS);
  - an XMP packet of unclosed `<aitk:settings>` tags made the non-greedy search quadratic: str.find;
  - zTXt chunks inflating to 16 MiB each, a hundred of them: the text of one file is bounded in all
    (MAX_TEXT_BYTES), as is the number of its texts and of the blocks walked;
  - NaN / Infinity / 1e999 in the `aitk` JSON, `CFG scale: nan` in the A1111 text: a 500 (OverflowError,
    or an answer JSON cannot carry) became a 422 naming the setting, as a request's would be;
  - lone surrogates (JSON `\\ud800` escapes) and invalid UTF-8: replaced, never in an answer;
  - a read that takes too long is a 503 naming the body, and the event loop keeps serving meanwhile.
The hypothesis properties at the end: whatever the text or the chunks, the parser answers a result or a
clean error (MetadataError / NoSettings / ConfigError), in bounded output.
"""
import base64
import io
import json
import os
import re
import struct
import subprocess
import sys
import threading
import tracemalloc
import zlib

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from toolkit import file_settings, media
from toolkit.errors import ConfigError
from toolkit.file_settings import (MAX_INFOTEXT_CHARS, SETTINGS_KEY, NoSettings, params, parse_a1111,
                                   settings_from_metadata)
from toolkit.media import MAX_TEXT_BYTES, MetadataError, read_metadata

TOKEN = "hostile-files-token"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HANG_GUARD = 120                  # seconds: a hung parse fails the test; nothing here is a speed assertion
# A1111's own infotext_utils.re_param_code: the reference params() must agree with
A1111_RE_PARAM = re.compile(r'\s*(\w[\w \-/]+):\s*("(?:\\.|[^\\"])+"|[^,]*)(?:,|$)')
SETTINGS = {"version": 1, "modality": "image", "scheduler": None,
            "model": {"arch": "zimage", "loras": [{"path": "style.safetensors", "scale": 1.0}]},
            "sample": {"prompt": "a fox", "width": 64, "height": 64, "guidance_scale": 1.0, "seed": 3}}


# -- files, built by hand where a writer would refuse -------------------------------------------------

def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png(*chunks: tuple) -> bytes:
    """A real 8x8 PNG (Pillow's) with `chunks` ((kind, body), ...) put in before its IEND."""
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (9, 99, 199)).save(buf, format="PNG")
    data = buf.getvalue()
    assert data[-12:-8] == b"\x00\x00\x00\x00" and data[-8:-4] == b"IEND"
    return data[:-12] + b"".join(_chunk(k, b) for k, b in chunks) + data[-12:]


def _text(key: str, text) -> tuple:
    return b"tEXt", key.encode("latin-1") + b"\x00" + (text if isinstance(text, bytes) else text.encode("latin-1"))


def _itxt(key: str, raw: bytes) -> tuple:
    return b"iTXt", key.encode("latin-1") + b"\x00\x00\x00" + b"\x00" + b"\x00" + raw


_BOMBS: dict = {}


def _bomb(inflated: int, unit: bytes = b"\x00") -> bytes:
    """A zlib stream of `inflated` bytes (`unit` repeated): a few KiB on the wire per 16 MiB."""
    if (inflated, unit) not in _BOMBS:
        _BOMBS[inflated, unit] = zlib.compress(unit * (inflated // len(unit)), 9)
    return _BOMBS[inflated, unit]


def _ztxt(key: str, inflated: int) -> tuple:
    return b"zTXt", key.encode("latin-1") + b"\x00\x00" + _bomb(inflated)


def _webp_with_xmp(xmp: bytes) -> bytes:
    body = b"WEBP" + b"XMP " + struct.pack("<I", len(xmp)) + xmp + b"\x00" * (len(xmp) & 1)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _video_with_comment(tmp_path, text: str, ext: str = "mp4") -> bytes:
    path = tmp_path / f"v.{ext}"
    media.save_video(np.zeros((2, 16, 16, 3), np.uint8), path, fps=8, metadata={SETTINGS_KEY: text})
    return path.read_bytes()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- the engine ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The engine with the compat routes on its own app (test_api_fuzz's way). No model is built: the
    routes here only read files and resolve requests."""
    from extensions_built_in.inference_engine.compat import compat_routes
    from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app
    from testing.engine_client import EngineClient, InProcessEngine

    eng = InProcessEngine(str(tmp_path_factory.mktemp("hostile")), token=TOKEN)
    eng.server.stop()
    eng.server = ServerThread(create_app(eng.engine, TOKEN, extra_routes=[compat_routes(engine=eng.engine)]),
                              bind_socket(0)).start()
    eng.url = f"http://127.0.0.1:{eng.server.port}"
    eng.client.close()
    eng.client = EngineClient(eng.url, TOKEN)
    yield eng
    eng.close()


def _post_file(served, data: bytes) -> httpx.Response:
    return httpx.post(f"{served.url}/settings", content=data, headers={"X-Engine-Token": TOKEN}, timeout=HANG_GUARD)


def _png_info(served, data: bytes) -> httpx.Response:
    return httpx.post(f"{served.url}/sdapi/v1/png-info", json={"image": _b64(data)},
                      headers={"X-Engine-Token": TOKEN}, timeout=HANG_GUARD)


def _a1111_loc(r: httpx.Response) -> list:
    detail, = r.json()["detail"]
    return detail["loc"]


# -- 1. the A1111 text: linear, and capped --------------------------------------------------------------

def test_a_long_run_without_colons_is_read_at_once_by_both_routes(served):
    """200 KB of `a a a ...`: A1111's regex takes minutes on it (quadratic); under the cap, so parsed."""
    text = "p\n" + "a " * 100_000
    assert len(text) < MAX_INFOTEXT_CHARS
    r = _post_file(served, _png(_text("parameters", text)))
    assert r.status_code == 200, r.text
    assert r.json()["source"] == "a1111" and r.json()["sample"]["prompt"] == text.strip()
    r = _png_info(served, _png(_text("parameters", text)))
    assert r.status_code == 200, r.text
    assert r.json()["parameters"] == {"Prompt": text.strip(), "Negative prompt": ""}


def test_megabytes_of_pathological_text_are_refused_naming_the_body(served):
    text = "p\n" + "a " * 1_500_000 + "Steps: 1, Seed: 2, CFG scale: 3"        # 3 MB, within the file's text
    data = _png(_text("parameters", text))
    r = _post_file(served, data)
    assert r.status_code == 422 and r.json()["field"] == "body", r.text
    assert f"at most {MAX_INFOTEXT_CHARS} are read" in r.json()["detail"]
    r = _png_info(served, data)
    assert r.status_code == 422 and _a1111_loc(r) == ["body", "image"], r.text
    assert len(r.content) < 1000                      # the refusal does not echo the text


def _finishes(code: str, stdin: bytes) -> str:
    """`code` (its input on stdin) in a fresh interpreter, with a hang guard (not a speed assertion): a
    regex holds the GIL for as long as it runs, so a guard on a thread of this process could not fire."""
    r = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, timeout=HANG_GUARD, cwd=ROOT)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return r.stdout.decode()


PARSE = ("import sys; from toolkit.file_settings import parse_a1111; line = sys.stdin.read(); "
         "print(parse_a1111('p\\n' + line, 10 * len(line))['Prompt'][:1])")


@pytest.mark.parametrize("line", ["a " * 2_000_000, "ab: " + '"\\"' * 1_000_000, "ab:" * 1_000_000 + "x",
                                  'ab: "x' * 500_000, "a-" * 2_000_000, " " * 4_000_000 + ","])
def test_the_parser_itself_is_linear_on_megabytes(line):
    """The cap lifted: MBs of each pathology still parse (A1111's regex: hours on the first)."""
    assert _finishes(PARSE, line.encode()) == "p\n"


def test_an_xmp_packet_of_unclosed_tags_is_read_at_once(served):
    """3 MB of `<aitk:settings>` without a closing tag in a WebP XMP chunk: the non-greedy search
    A1111-style readers use was quadratic on it (10 s at 150 KB)."""
    data = _webp_with_xmp(b"<aitk:settings>" * 200_000)
    read = "import sys; from toolkit.media import read_metadata; print(read_metadata(sys.stdin.buffer.read())['aitk'])"
    assert _finishes(read, data) == "None\n"                    # first on its own: a hang would hold the GIL
    r = _post_file(served, data)
    assert r.status_code == 422 and "no generation settings" in r.json()["detail"], r.text
    closed = _webp_with_xmp(b"<aitk:settings>" * 1000 + b"{}</aitk:settings>")
    assert read_metadata(closed)[SETTINGS_KEY] == "<aitk:settings>" * 999 + "{}"      # the regex's answer


# -- 2. memory: the text of one file is bounded -----------------------------------------------------------

def test_a_ztxt_bomb_is_refused_before_it_inflates(served):
    """100 zTXt chunks of 16 MiB each (1.6 MB on the wire) took the engine to 2.4 GB: refused, and
    png-info with 10 of them answered 167 MB: refused too."""
    data = _png(*[_ztxt(f"k{i}", 16 << 20) for i in range(100)])
    assert len(data) < 2_000_000
    r = _post_file(served, data)
    assert r.status_code == 422 and r.json()["field"] == "body" and "inflates past" in r.json()["detail"], r.text
    r = _png_info(served, _png(*[_ztxt(f"k{i}", 16 << 20) for i in range(10)]))
    assert r.status_code == 422 and _a1111_loc(r) == ["body", "image"] and len(r.content) < 1000, r.text


def test_reading_a_bomb_holds_no_more_than_the_text_a_file_may_hold():
    data = _png(*[_ztxt(f"k{i}", 16 << 20) for i in range(10)])
    tracemalloc.start()
    try:
        with pytest.raises(MetadataError, match="inflates past"):
            read_metadata(data)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * MAX_TEXT_BYTES, f"{peak} bytes at the peak"


def test_many_small_chunks_are_refused_and_a_file_at_the_limits_is_read(served):
    r = _post_file(served, _png(*[_text(f"k{i}", "x") for i in range(media.MAX_TEXT_ITEMS + 1)]))
    assert r.status_code == 422 and "text chunks" in r.json()["detail"], r.text
    # at the limits: every text read, and png-info's answer stays a bounded multiple of them
    size = MAX_TEXT_BYTES // media.MAX_TEXT_ITEMS - 8                 # the keys count too
    data = _png(*[_ztxt(f"k{i}", size) for i in range(media.MAX_TEXT_ITEMS)])
    r = _png_info(served, data)
    assert r.status_code == 200 and len(r.json()["items"]) == media.MAX_TEXT_ITEMS, r.text[:300]
    assert len(r.content) <= 7 * MAX_TEXT_BYTES        # NULs are written \u0000 in JSON: 6 bytes each


# -- 3. numbers no request may hold, surrogates, invalid UTF-8 ------------------------------------------------

def _aitk(sample_extra: dict | None = None, raw: str | None = None) -> str:
    return raw if raw is not None else json.dumps({**SETTINGS, "sample": {**SETTINGS["sample"], **(sample_extra or {})}})


@pytest.mark.parametrize("container", ["png", "mp4", "webm"])
@pytest.mark.parametrize("key,token", [("width", "Infinity"), ("guidance_scale", "NaN"),
                                       ("height", "-Infinity"), ("guidance_scale", "1e999")])
def test_a_non_finite_number_in_the_settings_is_a_422_naming_it(served, tmp_path, container, key, token):
    text = _aitk({key: "__TOKEN__"}).replace('"__TOKEN__"', token)
    data = _png(_text(SETTINGS_KEY, text)) if container == "png" else _video_with_comment(tmp_path, text, container)
    r = _post_file(served, data)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == f"sample.{key}" and token in r.json()["detail"], r.text


def test_a_non_finite_number_deeper_in_the_settings_names_its_path():
    raw = _aitk().replace('"scale": 1.0', '"scale": NaN')
    with pytest.raises(ConfigError) as e:
        settings_from_metadata({"format": "png", SETTINGS_KEY: raw})
    assert e.value.key == "model.loras[0].scale"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "Infinity", "NaN"])
def test_a_non_finite_cfg_scale_in_the_a1111_text_is_a_422_naming_the_key(served, value):
    text = f"a fox\nSteps: 2, CFG scale: {value}, Seed: 3, Size: 64x64"
    r = _post_file(served, _png(_text("parameters", text)))
    assert r.status_code == 422 and r.json()["field"] == "CFG scale", r.text
    r = _png_info(served, _png(_text("parameters", text)))       # png-info keeps values as text, as A1111 does
    assert r.status_code == 200 and r.json()["parameters"]["CFG scale"] == value, r.text


def test_lone_surrogates_and_invalid_utf8_never_reach_an_answer(served):
    settings = _aitk({"prompt": "__P__"}).replace('"__P__"', '"a \\ud800 fox \\udfff"')
    settings = settings.replace('"seed": 3', '"seed": 3, "\\udc80key": "v"')
    text = 'a \xed\xa0\x80 fox\nSteps: 2, Sampler: "\\ud800 Euler", CFG scale: 1, Seed: 3'.encode("latin-1")
    data = _png(_text(SETTINGS_KEY, settings.encode()), _itxt("parameters", text + b" \xff\xfe"))
    r = _post_file(served, data)
    assert r.status_code == 200, r.text
    back = r.json()
    assert back["sample"]["prompt"] == "a \ufffd fox \ufffd" and back["sample"]["\ufffdkey"] == "v"
    assert "\ufffd" in back["parameters"]
    r = _png_info(served, data)
    assert r.status_code == 200, r.text
    assert r.json()["parameters"]["Sampler"] == "\ufffd Euler"
    assert r.json()["parameters"]["Prompt"] == "a \ufffd\ufffd\ufffd fox"      # one U+FFFD a byte, as Python decodes
    # the A1111 path: surrogate escapes in a quoted value
    r = _post_file(served, _png(_text("parameters", 'p\nSteps: 2, Sampler: "\\udbff", Seed: 3')))
    assert r.status_code == 200 and r.json()["sample"]["sampler"] == "\ufffd", r.text


@pytest.mark.parametrize("settings,says", [
    ('{"version": 1, "model": {"arch": "zimage", "hidden": ["loras[x].path", "a[99999999999999999999]"]}, '
     '"sample": {}}', "model.loras[x].path"),                                     # was a ValueError: a 500
    ('{"version": 1, "model": {"arch": "zimage"}, "sample": {"prompt": ' + "[" * 500 + "]" * 500 + "}}",
     "nested deeper"),                                                            # was a RecursionError encoding the answer
])
def test_shapes_a_request_would_refuse_are_warnings_never_a_500(served, settings, says):
    r = _post_file(served, _png(_text("parameters", "a fox\nSteps: 2, CFG scale: 1, Seed: 3"),
                                _text(SETTINGS_KEY, settings)))
    assert r.status_code == 200, r.text
    assert any(says in w for w in r.json()["warnings"]), r.json()["warnings"]


# -- 4. the time bound --------------------------------------------------------------------------------------------

def test_a_read_past_the_bound_is_a_503_naming_the_body_and_the_loop_keeps_serving(served, monkeypatch):
    entered, release = threading.Semaphore(0), threading.Event()
    real = media.read_metadata

    def stalled(data):
        entered.release()
        release.wait(HANG_GUARD)
        return real(data)
    monkeypatch.setattr(media, "read_metadata", stalled)
    monkeypatch.setattr(file_settings, "READ_SECONDS", 0.5)
    data = _png(_text("parameters", "a fox\nSteps: 2, CFG scale: 1, Seed: 3"))
    try:
        r = _post_file(served, data)
        assert r.status_code == 503 and r.json()["field"] == "body" and "not read within 0.5 s" in r.json()["detail"]
        r = _png_info(served, data)
        assert r.status_code == 503 and _a1111_loc(r) == ["body", "image"], r.text
        assert entered.acquire(timeout=HANG_GUARD) and entered.acquire(timeout=HANG_GUARD)  # both still stalled
        assert served.client.get("/health").status_code == 200     # while both reads hold their threads
    finally:
        release.set()
    monkeypatch.undo()
    assert _post_file(served, data).status_code == 200               # the stalled threads changed nothing


# -- hypothesis: any text, any chunks, any numbers -------------------------------------------------------------

FUZZ = settings(derandomize=True, max_examples=120, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_ATOMS = ["a", "b", "_", "1", " ", "  ", "\t", ",", ", ", ":", ": ", '"', "\\", '\\"', "-", "/", "x", "\n",
          "é", "\u00a0", "\ud800", "\udfff", "nan", "inf", "Steps: ", "CFG scale: ", "Size: ", "64x64",
          "Negative prompt:", '"a, b: c"']


def _answer_is_clean(answer, source_len: int):
    """JSON without NaN, in UTF-8 (no surrogate), within a bounded multiple of what went in."""
    encoded = json.dumps(answer, allow_nan=False, ensure_ascii=False).encode("utf-8")
    assert len(encoded) <= 20 * source_len + 10_000
    return encoded


@settings(FUZZ, max_examples=400)
@given(st.lists(st.sampled_from(_ATOMS), max_size=40).map("".join))
def test_params_agrees_with_a1111s_regex(line):
    assert params(line) == A1111_RE_PARAM.findall(line)


_runs = st.lists(st.tuples(st.sampled_from(_ATOMS), st.integers(1, 3000)), min_size=1, max_size=12)


@FUZZ
@given(_runs, st.sampled_from([None, "Steps: 2, Sampler: Euler, CFG scale: {}, Seed: 5, Size: 64x64"]),
       st.sampled_from(["7", "nan", "inf", "-inf", "1e999", "x", '"1"']))
def test_any_infotext_gives_a_result_or_a_clean_error(runs, last, cfg):
    """Long runs, many separators, unbalanced quotes, non-finite numbers, surrogates."""
    text = "".join(atom * n for atom, n in runs) + (("\n" + last.format(cfg)) if last else "")
    try:
        answer = settings_from_metadata({"format": "png", "parameters": text}, profiles=(), archs=("zimage",))
    except (NoSettings, ConfigError) as e:
        answer = {"error": str(e)}
        assert len(str(e)) < 1000
    _answer_is_clean(answer, len(text))
    if len(text) <= MAX_INFOTEXT_CHARS:
        _answer_is_clean(parse_a1111(text), len(text))


_sizes = st.sampled_from([0, 10, 4096, 1 << 20, MAX_TEXT_BYTES // 2, MAX_TEXT_BYTES, 16 << 20])
_chunk_spec = st.tuples(st.sampled_from(["tEXt", "zTXt", "iTXt"]), st.sampled_from(["parameters", SETTINGS_KEY, "k"]),
                        _sizes, st.integers(1, 40))


def _spec_chunks(spec) -> list:
    chunks = []
    for kind, key, size, repeat in spec:
        if kind == "zTXt":
            chunk = _ztxt(key, size)
        elif kind == "iTXt":                                  # compressed iTXt
            chunk = b"iTXt", key.encode() + b"\x00\x01\x00\x00\x00" + _bomb(size, b"\xed\xa0\x80")
        else:
            chunk = _text(key, b"a " * min(size // 2, 1 << 16))
        chunks += [chunk] * repeat
    return chunks


@settings(FUZZ, max_examples=40)
@given(st.lists(_chunk_spec, min_size=1, max_size=5))
def test_any_text_chunks_give_bounded_text_or_a_clean_error(spec):
    """zTXt bombs, piles of chunks, compressed iTXt of invalid UTF-8."""
    data = _png(*_spec_chunks(spec))
    try:
        meta = read_metadata(data)
    except MetadataError:
        return
    texts = [meta["parameters"] or "", meta[SETTINGS_KEY] or "", *meta["items"].values()]
    assert sum(map(len, texts)) <= MAX_TEXT_BYTES and len(meta["items"]) <= media.MAX_TEXT_ITEMS
    for text in texts:
        text.encode("utf-8")                                  # no lone surrogate
    try:
        settings_from_metadata(meta)
    except (NoSettings, ConfigError):
        pass


_paths = st.sampled_from([("sample", "guidance_scale"), ("sample", "width"), ("sample", "strength"),
                          ("model", "lora_scale"), ("model", "loras", 0, "scale"), ("extra",),
                          ("sample", "new", 2)])
_tokens = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1E+400", "2e308"])


def _dotted(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


@FUZZ
@given(_paths, _tokens, st.text(st.characters() | st.characters(categories=["Cs"]), max_size=8))
def test_a_non_finite_number_anywhere_in_the_json_is_a_configerror_naming_its_path(path, token, noise):
    doc = json.loads(json.dumps(SETTINGS))
    node = doc
    for part in path[:-1]:
        if isinstance(node, dict) and part not in node:
            node[part] = [0, 0, 0] if isinstance(path[path.index(part) + 1], int) else {}
        node = node[part]
    node[path[-1]] = "__TOKEN__"
    doc["sample"]["prompt"] = noise                           # any text, surrogates included
    raw = json.dumps(doc).replace('"__TOKEN__"', token)
    with pytest.raises(ConfigError) as e:
        settings_from_metadata({"format": "png", SETTINGS_KEY: raw})
    assert e.value.key == _dotted(path) and token in e.value.message


_any_text = st.text(st.characters() | st.characters(categories=["Cs"]), max_size=30)      # surrogates included


@FUZZ
@given(_any_text, st.dictionaries(_any_text, _any_text, max_size=3))
def test_any_text_in_the_json_comes_back_without_lone_surrogates(prompt, extra):
    doc = {**SETTINGS, "sample": {**SETTINGS["sample"], "prompt": prompt, **extra}}
    back = settings_from_metadata({"format": "png", SETTINGS_KEY: json.dumps(doc)})   # ensure_ascii: \udXXX escapes
    _answer_is_clean(back, 2000)
