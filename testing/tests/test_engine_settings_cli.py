"""The engine settings entry the UI server runs without an engine
(`python -m extensions_built_in.inference_engine.engine_settings --describe | --check`):

  - it imports no torch (nor diffusers, transformers): the settings page opens in a blink and works
    on a UI machine before any model library is set up;
  - --describe is EngineSettings.describe() with each field's doc, limits nested with theirs;
    ui/tests/fixtures/engine_settings.json, which the UI's form tests build from, is exactly it
    (regenerate: `python -m testing.tests.test_engine_settings_cli`);
  - --check reads the engine block on stdin and answers the ConfigError naming the key, as the job
    would fail at start: a missing LoRA folder, a bound, a wrong type, an unknown key, not JSON.
"""
import json
import os
import subprocess
import sys

import pytest

from extensions_built_in.inference_engine.engine_settings import EngineSettings

REPO = os.path.join(os.path.dirname(__file__), "..", "..")
FIXTURE = os.path.join(REPO, "ui", "tests", "fixtures", "engine_settings.json")
MODULE = "extensions_built_in.inference_engine.engine_settings"
HEAVY = ("torch", "diffusers", "transformers", "safetensors", "numpy")


def run(*args, stdin: str = "", importtime=False) -> subprocess.CompletedProcess:
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", MODULE, *args], input=stdin, capture_output=True,
                          text=True, cwd=REPO, timeout=60)


def describe() -> dict:
    out = run("--describe")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def check(block) -> dict:
    out = run("--check", stdin=block if isinstance(block, str) else json.dumps(block))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("args,stdin", [(["--describe"], ""), (["--check"], '{"max_batch": 2}')])
def test_no_model_library_is_imported(args, stdin):
    out = run(*args, stdin=stdin, importtime=True)
    assert out.returncode == 0, out.stderr
    # -X importtime: one "import time: self | cumulative | name" line per module imported
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in out.stderr.splitlines()
                if line.startswith("import time:")}
    assert "extensions_built_in" in imported, "importtime lines were read"
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_describe_is_the_settings_class_with_its_docs():
    d = describe()
    plain = EngineSettings.describe()
    assert set(d) == set(plain)
    for key, field in d.items():
        without_doc = {k: v for k, v in field.items() if k not in ("doc", "fields")}
        assert without_doc == {k: v for k, v in plain[key].items() if k != "fields"}, key
    for key in ("model_folders", "comfyui_path", "model_roots", "lora_folder", "keep_resident_gb", "prefetch",
                "max_batch"):
        assert d[key]["doc"], key
    assert d["limits"]["type"] == "object" and d["limits"]["fields"]["max_steps"]["min"] == 1
    assert all(f["doc"] for f in d["limits"]["fields"].values())
    assert d["queue_policy"]["choices"] == ["fifo", "affinity"] and d["queue_policy"]["default"] == "fifo"
    assert d["lora_folder"] == {"type": "str", "nullable": True, "doc": "where relative LoRA paths point"}


def test_the_ui_fixture_is_what_describe_prints():
    with open(FIXTURE) as f:
        assert json.load(f) == describe(), "regenerate it: python -m testing.tests.test_engine_settings_cli"


def test_a_good_block_passes(tmp_path):
    (tmp_path / "loras").mkdir()
    (tmp_path / "ComfyUI" / "models").mkdir(parents=True)
    assert check({}) == {"ok": True}
    assert check("") == {"ok": True}          # nothing on stdin: every default
    assert check({"lora_folder": str(tmp_path / "loras"), "comfyui_path": str(tmp_path / "ComfyUI"),
                  "model_folders": [str(tmp_path)], "max_batch": 1, "prefetch": False,
                  "limits": {"max_steps": 50}}) == {"ok": True}


@pytest.mark.parametrize("block,key,words", [
    ({"lora_folder": "/nonexistent/loras"}, "engine.lora_folder", "existing folder"),
    ({"comfyui_path": "/nonexistent"}, "engine.comfyui_path", "ComfyUI install"),
    ({"model_folders": ["/nonexistent"]}, "engine.model_folders", "existing folders"),
    ({"limits": {"max_steps": 0}}, "engine.limits.max_steps", ">= 1"),
    ({"limits": {"max_prompt_bytes": 70000}}, "engine.limits.max_prompt_bytes", "<= 65536"),
    ({"max_batch": 0}, "engine.max_batch", ">= 1"),
    ({"port": "80"}, "engine.port", "integer"),
    ({"prefetch": "yes"}, "engine.prefetch", "true or false"),
    ({"queue_policy": "lifo"}, "engine.queue_policy", "fifo, affinity"),
    ({"grace_seconds": 0}, "engine.grace_seconds", "> 0"),
    ({"lora_foldr": "/tmp"}, "engine.lora_foldr", "unknown key"),
    ("[1, 2]", "engine", "mapping"),
    ("{not json", "engine", "not valid JSON"),
])
def test_a_bad_block_names_the_key(block, key, words):
    answer = check(block)
    assert answer["ok"] is False and answer["key"] == key and words in answer["message"], answer


def test_a_bad_argument_is_a_usage_error():
    out = run("--nothing")
    assert out.returncode == 2 and "--describe" in out.stderr


if __name__ == "__main__":
    with open(FIXTURE, "w") as f:
        json.dump(describe(), f, indent=1)
        f.write("\n")
