"""toolkit/client.py against a real engine on loopback with tiny models: the CLI's generate (file,
progress per step, the latent preview), its exit codes (2 on a refused field, 1 on an error frame,
130 on Ctrl-C, which cancels the request on the engine), re-attach, and its own frame parser."""
import io
import json
import os
import signal
import subprocess
import sys

import pytest
from rich.console import Console

from extensions_built_in.inference_engine.protocol import encode_frame
from testing.engine_client import ROOT, EngineProcess, InProcessEngine
from toolkit import client as cl

TOKEN = "test-token-123"


@pytest.fixture(scope="module")
def eng(tiny, tmp_path_factory):
    e = InProcessEngine(str(tmp_path_factory.mktemp("client")), token=TOKEN)
    e.tiny = tiny
    yield e
    e.close()


def cli(eng, *argv, terminal=False):
    """Run the CLI in this process; (exit code, what it printed)."""
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=terminal, width=100, color_system="truecolor" if terminal else None)
    code = cl.main([*argv, "--url", eng.url, "--token", TOKEN], console=console)
    return code, buf.getvalue()


def gen_args(eng, *extra, steps=3):
    return ["generate", "a fox", "--arch", "zimage", "--model", eng.tiny("zimage"), "--steps", str(steps),
            "--width", "64", "--height", "64", "--seed", "1", *extra]


def test_generate_writes_the_engines_file(eng, tmp_path):
    out = tmp_path / "fox.png"
    code, text = cli(eng, *gen_args(eng, "-o", str(out), "--request-id", "cli-1"))
    assert code == 0, text
    lines = text.splitlines()
    assert [ln.split()[1] for ln in lines if ln.startswith("step ")] == ["1/3", "2/3", "3/3"]
    assert "it/s" in text and "queued" in text
    req = eng.engine.get("cli-1")
    engine_file = req.results[0]["path"]
    assert out.read_bytes() == open(engine_file, "rb").read()


def test_preview_renders_half_blocks(eng, tmp_path):
    code, text = cli(eng, *gen_args(eng, "-o", str(tmp_path / "p.png"), "--preview"), terminal=True)
    assert code == 0, text
    assert "▀" in text and "\x1b[38;2;" in text and ";48;2;" in text     # truecolor fg and bg (one SGR)


def test_preview_projection_uses_the_start_frames_factors():
    import numpy as np
    lat = np.zeros((1, 2, 2, 2), dtype="<f2")
    lat[0, 0] = 1.0
    header = {"type": "latent", "request_id": "r", "shape": [1, 2, 2, 2], "layout": "BCHW"}
    preview = {"rgb_factors": [[1.0, 0.0, -1.0], [0.0, 0.0, 0.0]], "rgb_bias": [0.0, 0.0, 0.0]}
    rows = cl.latent_to_rgb(header, lat.tobytes(), preview)
    assert rows == [[(255, 128, 0)] * 2] * 2
    assert len(cl.latent_to_rgb(header, lat.tobytes(), None)) == 2       # no table: first channels, min/max


def test_bad_input_exits_2_naming_the_field(eng):
    code, text = cli(eng, "generate", "x", "--arch", "zimage", "--model", eng.tiny("zimage"), "--width", "1000")
    assert code == 2 and "sample.width" in text, text


def test_error_frame_exits_1(eng):
    eng.engine.faults.reset(sample_oom=1)
    code, text = cli(eng, *gen_args(eng))
    assert code == 1 and "out of memory" in text, text


def test_library_lists_and_names_missing_defaults(eng):
    code, text = cli(eng, "library")
    assert code == 0 and "complete" in text, text
    # no hub cache here: each arch's default repo is reported with the command that fetches it
    assert "is not downloaded: hf download " in text, text
    code, text = cli(eng, "library", "--json")
    assert code == 0 and "archs" in json.loads(text)


def test_subcommands(eng):
    code, text = cli(eng, "health")
    assert code == 0 and "queue: 0" in text
    code, text = cli(eng, "models")
    assert code == 0 and "zimage" in text
    code, text = cli(eng, "queue", "--json")
    assert code == 0 and "cli-1" in text and json.loads(text)["running"] is None
    code, text = cli(eng, "cancel", "nope")
    assert code == 2 and "request_id" in text


def test_wait_and_reattach(eng, tmp_path):
    code, text = cli(eng, *gen_args(eng, "--wait", "-o", str(tmp_path / "w.png"), "--request-id", "cli-wait"))
    assert code == 0 and (tmp_path / "w.png").read_bytes() == open(eng.engine.get("cli-wait").results[0]["path"],
                                                                    "rb").read()
    code, text = cli(eng, "attach", "cli-wait", "-o", str(tmp_path / "again.png"))   # a finished one replays
    assert code == 0 and (tmp_path / "again.png").read_bytes() == (tmp_path / "w.png").read_bytes()


def test_frame_parser_byte_by_byte():
    stream = encode_frame({"type": "start", "request_id": "a", "x": [1, {"y": 2}]}) + \
        encode_frame({"type": "latent", "request_id": "a"}, b"\x00\x01" * 5) + encode_frame({"type": "end",
                                                                                            "request_id": "a"})
    p, frames = cl.FrameParser(), []
    for i in range(len(stream)):
        frames += p.feed(stream[i:i + 1])
    p.close()
    assert [f.type for f in frames] == ["start", "latent", "end"] and frames[1].payload == b"\x00\x01" * 5
    with pytest.raises(cl.ClientError):
        cl.FrameParser().feed(b"\xff\xff\xff\x7f")
    broken = cl.FrameParser()
    broken.feed(stream[:7])
    with pytest.raises(cl.ClientError):
        broken.close()


def test_ctrl_c_cancels_on_the_engine(tiny, tiny_root, tmp_path):
    """The CLI as a subprocess against a `run.py` engine whose first step is held until a cancel
    lands (AITK_ENGINE_FAULTS hold_step=1): SIGINT once the first step line is out, then exit 130
    and the request is cancelled on the engine."""
    tiny("zimage")
    env = {"AITK_TINY_CACHE": str(tiny_root), "HF_HUB_OFFLINE": "1"}
    ep = EngineProcess(str(tmp_path / "job"), env={**env, "AITK_ENGINE_FAULTS": "hold_step=1"},
                       engine_extra={"metrics_open": True}).wait_ready()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "toolkit.client", "generate", "a fox", "--arch", "zimage",
                                 "--model", "tiny:zimage", "--steps", "4", "--width", "64", "--height", "64",
                                 "--request-id", "ctrl-c", "--engine", str(tmp_path / "job")],
                                cwd=ROOT, env={**os.environ, **env, "COLUMNS": "100"}, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("step 1/"):
                proc.send_signal(signal.SIGINT)
                break
        rest = proc.communicate(timeout=120)[0]
        assert proc.returncode == 130, "".join(seen) + rest
        assert "interrupted" in rest and "ctrl-c" in rest
        finished = {r["request_id"]: r for r in ep.client.get("/queue").json()["finished"]}
        assert finished["ctrl-c"]["status"] == "cancelled"
        # engine.metrics_open reaches the server from the job config: /metrics needs no token there
        import httpx
        r = httpx.get(ep.client.base_url + "/metrics")
        assert r.status_code == 200 and 'aitk_requests_total{arch="zimage",status="cancelled"} 1.0' in r.text
    finally:
        ep.stop()
