"""README's "Clients" examples run as they are written, against `python run.py`'s engine (its worker
process, tiny models) whose models folders are a ComfyUI install (testing/comfy_tree.py) and a plain
folder holding a video model's diffusers folder: what a user has. Each example's files are checked:
the images decode at the size asked, the video has its frames."""
import json
import os
import re
import shutil

import av
import pytest
from PIL import Image

from testing.comfy_tree import workflow, write_tree
from testing.engine_client import EngineProcess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readme_examples() -> list[str]:
    """The ```python blocks of README.md's "## Clients" section, in order."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Clients\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


@pytest.fixture(scope="module")
def engine(tiny, tmp_path_factory):
    base = tmp_path_factory.mktemp("readme")
    tree = write_tree(base, tiny)
    videos = base / "videos"
    shutil.copytree(tiny("ltx"), videos / "LTX-Video")
    proc = EngineProcess(str(base / "output" / "inference_engine"),
                         default_model={"arch": "zimage", "name_or_path": "tiny:zimage"},
                         engine_extra={"model_folders": [os.path.join(tree, "models"), str(videos)]})
    try:
        proc.wait_ready(300)
        yield base
    finally:
        assert proc.stop() == 0


def test_the_readme_client_examples_run(engine, monkeypatch):
    preamble, comfy, sdcpp, video, images = readme_examples()
    monkeypatch.chdir(engine)
    with open("workflow_api.json", "w") as f:          # a "Save (API)" export naming the tree's checkpoint
        json.dump(workflow("sdxl_txt2img"), f)
    scope: dict = {}
    exec(compile(preamble, "README.md: preamble", "exec"), scope)

    exec(compile(comfy, "README.md: ComfyUI", "exec"), scope)
    saved = [img["filename"] for out in scope["history"]["outputs"].values() for img in out.get("images", [])]
    assert saved and all(Image.open(name).size == (64, 64) for name in saved), saved

    exec(compile(sdcpp, "README.md: sd.cpp", "exec"), scope)
    assert scope["job"]["status"] == "completed" and Image.open("fox.png").size == (256, 256)

    exec(compile(video, "README.md: OpenAI videos", "exec"), scope)
    assert scope["video"].status == "completed"
    with av.open("fox.mp4") as clip:
        frames = [f.to_ndarray(format="rgb24") for f in clip.decode(video=0)]
    assert len(frames) > 1 and frames[0].shape == (128, 128, 3)

    exec(compile(images, "README.md: OpenAI images and A1111", "exec"), scope)
    for name in ("fox-openai.png", "fox-a1111.png"):
        assert Image.open(name).size == (256, 256), name
