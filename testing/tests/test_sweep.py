"""The engine sweep (testing/test_inference_engine.py) run in-process on tiny models, plus its CLI once.

Each check returns a dict with `ok` and a one-line `error`; the assertion message is that line,
followed by the per-request pool steps where there are some.
"""
import json
import os
import subprocess
import sys

import pytest

from testing import test_inference_engine as sweep
from toolkit.models.tiny import own_roles, shared_roles


def _explain(res: dict) -> str:
    lines = [f"{res['name']}: {res['error']}"]
    for st in res.get("steps", []):
        lines.append(f"  {st['i']}. {st['model']}: loaded {st['loaded']} hit {st['hit']} "
                     f"resident {st.get('resident')}")
    return "\n".join(lines)


def test_swap_shared_pair_loads_only_the_denoiser(tiny, tiny_root, tmp_path):
    tiny("zimage")
    res = sweep.run_swap("zimage,zimage:b,zimage", str(tmp_path), root=str(tiny_root))
    assert res["ok"], _explain(res)
    first, second, third, repeat = res["steps"]
    assert set(first["loaded"]) >= set(shared_roles("zimage")) | set(own_roles("zimage"))
    for st in (second, third):
        assert set(st["loaded"]) - {"scheduler"} == set(own_roles("zimage")), st
        assert set(st["hit"]) >= set(shared_roles("zimage")), st
    assert repeat["delta"]["loads"] == 0 and repeat["delta"]["misses"] == 0, repeat


@pytest.mark.parametrize("names", [n for n in sweep.PAIR_SEQUENCES if not n.startswith(("zimage", "krea2"))])
def test_swap_pairs_reload_only_what_differs(names, tiny_root, tmp_path):
    """Cross-arch pairs (Wan 2.1 <-> 2.2, Qwen-Image <-> Edit, Flux <-> Chroma / Kontext) and SD3 against
    an SD3.5-style model on the same encoders: the shared files are pool hits, the rest loads."""
    res = sweep.run_swap(names, str(tmp_path), root=str(tiny_root))
    assert res["ok"], _explain(res)
    a, b, _a, repeat = res["steps"]
    models = sweep.resolve_models(names.split(",")[:2], str(tiny_root))
    shared = sweep.shared_between(models[0], models[1])
    assert shared and set(b["hit"]) >= shared and not set(b["loaded"]) & shared, b
    assert set(b["loaded"]) >= set(own_roles(models[1][1])), b
    assert repeat["delta"]["loads"] == 0, repeat


def test_swap_krea2_turbo_raw_turbo_reloads_only_the_diffusion_model(tiny_root, tmp_path):
    res = sweep.run_swap("krea2-turbo,krea2-raw,krea2-turbo", str(tmp_path), root=str(tiny_root))
    assert res["ok"], _explain(res)
    first, second, third, repeat = res["steps"]
    assert set(first["loaded"]) == {"scheduler", "tokenizer", "text_encoder", "vae", "transformer"}
    for st in (second, third):
        assert st["loaded"] == ["transformer"], st
        assert set(st["hit"]) == {"scheduler", "tokenizer", "text_encoder", "vae"}, st
    assert repeat["delta"]["loads"] == 0 and repeat["delta"]["misses"] == 0, repeat


def test_swap_across_archs_shares_no_weights(tiny, tiny_root, tmp_path):
    tiny("zimage"), tiny("sd1")
    res = sweep.run_swap("zimage,sd1,zimage", str(tmp_path), root=str(tiny_root))
    assert res["ok"], _explain(res)
    sd1 = res["steps"][1]
    # sd1 after zimage: every weighted component is its own fresh load
    assert {"text_encoder", "vae", "unet"} <= set(sd1["loaded"]), sd1
    assert not {"text_encoder", "vae", "unet", "transformer"} & set(sd1["hit"]), sd1
    assert res["steps"][-1]["delta"]["loads"] == 0


def test_cancel_then_identical_rerun(tiny, tiny_root, tmp_path):
    tiny("zimage")
    res = sweep.run_cancel(str(tmp_path), root=str(tiny_root))
    assert res["ok"], _explain(res)
    assert res["last_progress_step"] < res["total_steps"]


def test_cli_arch_zimage(tiny, tiny_root, tmp_path):
    """One real CLI run: exit code 0, a PASS line, and the JSON result as stdout's last line."""
    tiny("zimage")
    env = dict(os.environ, AITK_TINY_CACHE=str(tiny_root), HF_HUB_OFFLINE="1")
    env.pop("PYTEST_CURRENT_TEST", None)
    p = subprocess.run([sys.executable, os.path.join(sweep.ROOT, "testing", "test_inference_engine.py"),
                        "--arch", "zimage", "--json", "--out", str(tmp_path / "cli")],
                       cwd=sweep.ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
    assert "PASS arch zimage" in p.stderr
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["ok"] and res["arch"] == "zimage" and res["frames"]["end"] == 1
    assert os.path.isfile(res["result_path"])
