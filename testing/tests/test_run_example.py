"""`python run.py config/examples/generate_tiny.yaml` as a user runs it: a subprocess, offline."""
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env(tiny_root):
    env = dict(os.environ, AITK_TINY_CACHE=str(tiny_root), HF_HUB_OFFLINE="1")
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def test_generate_tiny_example(tiny, tiny_root, tmp_path):
    tiny("zimage")  # shared cache: the subprocess finds the model made on first use
    example = os.path.join(ROOT, "config", "examples", "generate_tiny.yaml")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), example], cwd=tmp_path, env=_env(tiny_root),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    files = sorted(glob.glob(str(tmp_path / "output" / "generate_tiny" / "*.png")))
    assert len(files) == 2, (files, p.stdout)
    for f in files:
        assert Image.open(f).size == (64, 64)
        assert "_42." in os.path.basename(f)
    assert "wrote" in p.stdout and "[loading]" in p.stdout


def test_generate_makes_tiny_model_on_first_use(tmp_path):
    """A fresh cache: the tiny model is written on first use, then generation runs."""
    cache = tmp_path / "cache"
    cfg = tmp_path / "job.yaml"
    cfg.write_text(f"""job: extension
config:
  name: first_use
  process:
    - type: Generate
      output_folder: {tmp_path / 'out'}
      model: {{arch: sd1, name_or_path: "tiny:sd1"}}
      sample: {{width: 64, height: 64, num_inference_steps: 2, seed: 7}}
      prompts: [hello]
""")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), str(cfg)], cwd=tmp_path, env=_env(cache),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (cache / "sd1-seed0" / "model_index.json").is_file()
    assert len(glob.glob(str(tmp_path / "out" / "*.png"))) == 1


def _interrupted_run(tmp_path, tiny_root, **popen) -> tuple[int, str]:
    """A long Generate job (200 tiny videos) sent SIGINT once its first file exists: (exit code, stderr)."""
    cfg = tmp_path / "job.yaml"
    cfg.write_text(f"""job: extension
config:
  name: interrupted
  process:
    - type: Generate
      output_folder: {tmp_path / 'out'}
      model: {{arch: wan21, name_or_path: "tiny:wan21"}}
      sample: {{width: 64, height: 64, num_frames: 9, fps: 8, num_inference_steps: 2, seed: 1}}
      prompts: [{', '.join(['x'] * 200)}]
""")
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "run.py"), str(cfg)], cwd=tmp_path,
                            env=_env(tiny_root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
    deadline = time.time() + 120
    while time.time() < deadline and not glob.glob(str(tmp_path / "out" / "*.mp4")):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    return proc.returncode, err


def test_ctrl_c_stops_cleanly(tiny, tiny_root, tmp_path):
    """SIGINT during a run: exit code 130, one line saying so, no traceback, no partial file."""
    tiny("wan21")
    code, err = _interrupted_run(tmp_path, tiny_root)
    assert code == 130, err[-2000:]
    assert "Traceback" not in err and "interrupted" in err
    assert not [f for f in os.listdir(tmp_path / "out") if f.endswith(".tmp")]
    shutil.rmtree(tmp_path / "out")


def test_ctrl_c_works_when_started_with_sigint_ignored(tiny, tiny_root, tmp_path):
    """A job launched as `cmd &` from a non-interactive shell starts with SIGINT ignored: run.py
    installs its handler anyway, so Ctrl-C and the UI's stop still end it."""
    tiny("wan21")
    code, err = _interrupted_run(tmp_path, tiny_root, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert code == 130, err[-2000:]


def test_the_one_shot_job_takes_a_batch_for_every_prompt(tiny, tiny_root, tmp_path):
    """`sample.batch_size: 2` with two prompts: four files, each its own seed (seed + i), and every
    prompt runs (a batch made one record per file, which the job once unpacked as one)."""
    tiny("zimage")
    cfg = tmp_path / "job.yaml"
    cfg.write_text(f"""job: extension
config:
  name: batch
  process:
    - type: Generate
      output_folder: {tmp_path / 'out'}
      model: {{arch: zimage, name_or_path: "tiny:zimage"}}
      sample: {{width: 64, height: 64, num_inference_steps: 2, seed: 5, batch_size: 2}}
      prompts: [a fox, {{prompt: a lighthouse, seed: 9}}]
""")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), str(cfg)], cwd=tmp_path, env=_env(tiny_root),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    files = sorted(os.path.basename(f) for f in glob.glob(str(tmp_path / "out" / "*.png")))
    assert len(files) == 4, (files, p.stdout)
    assert sorted(int(f.rsplit("_", 1)[1].split("-")[0]) for f in files) == [5, 5, 9, 9], files
    assert p.stdout.count("wrote ") == 4 and "seed 6" in p.stdout and "seed 10" in p.stdout, p.stdout
