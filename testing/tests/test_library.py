"""GET /library: the models on this machine (a local hub cache, a ComfyUI `models/` tree, a plain
folder of diffusers folders, the profiles), each with its detected arch, format, size, completeness
and the `model` dict a request takes; every offered `model` generates on a real in-process engine."""
import json
import os
import shutil
import subprocess
import sys
import threading

import httpx
import pytest

from testing.tests.test_compat import ZIMAGE_REPO, fake_hub_cache
from testing.tiny_krea2 import cached_tiny_krea2
from toolkit.profiles import load_profiles

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKEN = "library-token-123"
SD1_REPO = "stable-diffusion-v1-5/stable-diffusion-v1-5"


def build_library(base, tiny):
    """hub/ (zimage complete; sd1 with an unfinished blob), comfy/ (the tiny Krea 2 ComfyUI files),
    plain/ (a diffusers sd1 folder), profiles.toml (a zimage profile)."""
    k = cached_tiny_krea2(base / "krea2src", 0)
    shutil.copytree(os.path.dirname(os.path.dirname(k["diffusion_model"])), base / "comfy")
    (base / "comfy" / "loras").mkdir()
    (base / "plain").mkdir()
    shutil.copytree(tiny("sd1"), base / "plain" / "sd1-tiny")
    (base / "hub").mkdir()
    fake_hub_cache(base / "hub", ZIMAGE_REPO, tiny("zimage"))
    fake_hub_cache(base / "hub", SD1_REPO, tiny("sd1"))
    blobs = base / "hub" / f"models--{SD1_REPO.replace('/', '--')}" / "blobs"
    blobs.mkdir()
    (blobs / ("a" * 64 + ".incomplete")).write_bytes(b"\0" * 1000)     # an interrupted download
    (base / "profiles.toml").write_text(
        f'[model_profiles.tiny-turbo]\narchitecture = "zimage"\ncheckpoint = "{tiny("zimage")}"\n')
    return k


def folder_bytes(path) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path, followlinks=True) for f in fs)


class Served:
    def __init__(self, base, tiny, tiny_root):
        from extensions_built_in.inference_engine.engine import Engine
        from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app
        self.krea = build_library(base, tiny)
        self.base = base
        self.hub = pytest.MonkeyPatch()
        import huggingface_hub.constants
        self.hub.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(base / "hub"))
        self.engine = Engine(output_folder=f"{base}/outputs", assets_folder=f"{base}/assets", worker="thread",
                             profiles=load_profiles(str(base / "profiles.toml")),
                             model_roots=[str(tiny_root), str(base / "hub")],
                             model_folders=[str(base / "comfy"), str(base / "plain")])
        self.engine.start_worker()
        self.server = ServerThread(create_app(self.engine, TOKEN), bind_socket(0)).start()
        self.loop = threading.Thread(target=self.engine.run_forever, daemon=True, name="engine-loop")
        self.loop.start()
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.server.port}",
                                 headers={"X-Engine-Token": TOKEN}, timeout=180)

    def close(self):
        self.engine.stop()
        self.loop.join(30)
        self.server.stop()
        self.http.close()
        self.hub.undo()


@pytest.fixture(scope="module")
def srv(tiny, tiny_root, tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("library"), tiny, tiny_root)
    yield s
    s.close()


@pytest.fixture(scope="module")
def lib(srv):
    r = srv.http.get("/library")
    assert r.status_code == 200, r.text
    return r.json()


def by(lib, **kw):
    found = [e for e in lib["entries"] if all(e.get(k) == v for k, v in kw.items())]
    assert len(found) == 1, (kw, [e["name"] for e in lib["entries"]])
    return found[0]


def test_the_route_needs_the_token(srv):
    r = httpx.get(f"http://127.0.0.1:{srv.server.port}/library")
    assert r.status_code == 401 and r.json()["field"] == "token"


def test_hub_cache_repos_with_arch_size_and_completeness(lib, tiny):
    z = by(lib, source="hub", repo=ZIMAGE_REPO)
    assert (z["kind"], z["arch"], z["pipeline_class"], z["complete"]) == ("pipeline", "zimage", "ZImagePipeline", True)
    assert z["bytes"] == folder_bytes(tiny("zimage")) and z["format"] == f"{z['dtype']} diffusers"
    assert z["model"] == {"arch": "zimage", "name_or_path": ZIMAGE_REPO}   # the cached snapshot loads
    s = by(lib, source="hub", repo=SD1_REPO)
    assert s["arch"] == "sd1" and s["complete"] is False and "incomplete" in s["missing"][0]
    assert s["bytes"] == folder_bytes(tiny("sd1")) + 1000


def test_comfy_tree_single_file_with_scaled_fp8_and_its_components(lib, srv):
    k = srv.krea
    dm = by(lib, source="folder", path=os.path.join(srv.base, "comfy", "diffusion_models",
                                                    os.path.basename(k["diffusion_model"])))
    assert (dm["kind"], dm["arch"], dm["role"], dm["format"]) == ("single_file", "krea2", "transformer",
                                                                  "comfy_scaled_fp8")
    assert dm["complete"] and dm["bytes"] == os.path.getsize(k["diffusion_model"])
    comfy = os.path.join(srv.base, "comfy")
    assert dm["model"] == {"arch": "krea2", "local_only": True, "variant": "turbo", "components": {
        "transformer": dm["path"], "text_encoder": os.path.join(comfy, "text_encoders", os.path.basename(k["text_encoder"])),
        "vae": os.path.join(comfy, "vae", os.path.basename(k["vae"])), "tokenizer": os.path.join(comfy, "tokenizer")}}
    te = by(lib, source="folder", role="text_encoder")
    assert (te["kind"], te["arch"], te["format"], te["model"]) == ("component", "krea2", "comfy_scaled_fp8", None)
    vae = by(lib, source="folder", role="vae")
    assert vae["kind"] == "component" and vae["format"].startswith("f32")


def test_plain_folder_diffusers_and_profile(lib, srv, tiny):
    sd = by(lib, source="folder", name="sd1-tiny")
    assert (sd["kind"], sd["arch"], sd["complete"]) == ("pipeline", "sd1", True)
    assert sd["model"] == {"arch": "sd1", "name_or_path": str(srv.base / "plain" / "sd1-tiny")}
    p = by(lib, source="profile", name="tiny-turbo")
    assert (p["arch"], p["kind"], p["complete"], p["model"]) == ("zimage", "pipeline", True, {"profile": "tiny-turbo"})
    assert p["bytes"] == folder_bytes(tiny("zimage"))


def test_default_repos_present_or_a_download_command(lib):
    rows = {r["arch"]: r for r in lib["archs"]}
    assert rows["zimage"]["default_present"] is True and "download" not in rows["zimage"]
    assert rows["sd1"]["default_present"] is False                       # cached, but not finished
    assert rows["sd1"]["download"] == f"hf download {SD1_REPO}"
    flux = [r for r in lib["archs"] if r["arch"] == "flux"]            # one row a variant: dev, schnell
    assert flux[0] == {"arch": "flux", "variant": "dev", "repo": "black-forest-labs/FLUX.1-dev",
                       "default_present": False, "download": "hf download black-forest-labs/FLUX.1-dev"}
    assert [r["variant"] for r in flux] == ["dev", "schnell"]
    assert "krea2" not in rows                                           # no public repo


def test_a_missing_component_removes_the_model(tiny, tmp_path):
    from toolkit import library
    k = cached_tiny_krea2(tmp_path / "src", 0)
    shutil.copytree(os.path.dirname(os.path.dirname(k["diffusion_model"])), tmp_path / "comfy")
    shutil.rmtree(tmp_path / "comfy" / "vae")
    partial = tmp_path / "plain" / "zimage-partial"
    shutil.copytree(tiny("zimage"), partial)
    shutil.rmtree(partial / "vae")
    doc = library.scan([str(tmp_path / "comfy"), str(tmp_path / "plain")], hub_cache=str(tmp_path / "nohub"))
    dm = by(doc, role="transformer")
    assert dm["model"] is None and dm["missing"] == ["no vae file for krea2 in this folder"]
    z = by(doc, name="zimage-partial")
    assert z["complete"] is False and z["missing"] == ["vae"]


def test_the_tiny_models_are_listed_usable(lib, tiny):
    from toolkit.models.tiny import tiny_archs
    rows = [e for e in lib["entries"] if e["source"] == "tiny"]
    assert [e["name"] for e in rows] == [f"tiny:{a}" for a in tiny_archs()]
    z = by(lib, source="tiny", arch="zimage")
    assert (z["kind"], z["complete"], z["model"]) == ("pipeline", True, {"arch": "zimage", "name_or_path": "tiny:zimage"})
    assert z["built"] is True and z["bytes"] == folder_bytes(tiny("zimage"))     # built by the session's fixture
    # a tiny model's random weights never complete a real file (the GGUF/denoiser extras look-up)
    assert all(e["model"].get("extras_name_or_path", "").find("tiny") < 0 for e in lib["entries"]
               if e["source"] == "folder" and e["model"])


def test_the_loaded_model_is_listed_first(srv):
    r = srv.http.post("/generate", json={"model": {"arch": "zimage", "name_or_path": "tiny:zimage"}, "wait": True,
                                         "sample": {"prompt": "a fox", "width": 64, "height": 64,
                                                    "num_inference_steps": 2}})
    assert r.status_code == 200, r.text
    first = srv.http.get("/library").json()["entries"][0]
    assert (first["source"], first["name"], first["arch"]) == ("loaded", "tiny:zimage", "zimage")
    assert first["model"] == {"arch": "zimage", "name_or_path": "tiny:zimage"}
    from toolkit import library
    assert [e for e in library.scan(hub_cache=False)["entries"] if e["source"] in ("tiny", "loaded")] == []


def test_every_offered_model_generates(lib, srv):
    offered = [e for e in lib["entries"] if e["model"] is not None and e["complete"] and e["source"] != "tiny"]
    assert {(e["source"], e["arch"]) for e in offered} == {("hub", "zimage"), ("folder", "krea2"),
                                                            ("folder", "sd1"), ("profile", "zimage")}
    for e in offered:
        r = srv.http.post("/generate", json={"model": e["model"], "wait": True, "sample": {
            "prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2, "output_ext": "png"}})
        assert r.status_code == 200, (e["name"], r.text)
        doc = r.json()
        assert doc["status"] == "ok" and doc["results"], (e["name"], doc)
        out = srv.http.get(f"/outputs/{doc['results'][0]['relpath']}")
        assert out.status_code == 200 and out.content[:8] == b"\x89PNG\r\n\x1a\n", e["name"]


def test_listing_never_imports_torch(srv):
    code = ("import sys, json; import huggingface_hub.constants as c; "
            f"c.HF_HUB_CACHE = {str(srv.base / 'hub')!r}; from toolkit.profiles import load_profiles; "
            "from toolkit.library import scan; "
            f"d = scan([{str(srv.base / 'comfy')!r}, {str(srv.base / 'plain')!r}], "
            f"load_profiles({str(srv.base / 'profiles.toml')!r})); assert len(d['entries']) > 5, d; "
            "print(json.dumps(sorted(m for m in ('torch', 'safetensors', 'diffusers', 'transformers') "
            "if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_engine_model_folders_config(tmp_path):
    """engine.model_folders: a list of existing folders, model roots too; anything else names the key."""
    from types import SimpleNamespace

    from extensions_built_in.inference_engine.InferenceEngine import InferenceEngine
    from toolkit.errors import ConfigError

    def make(**engine):
        return InferenceEngine(0, SimpleNamespace(name="library"),
                               {"type": "InferenceEngine", "engine": {"job_folder": str(tmp_path / "job"), **engine}})
    (tmp_path / "models").mkdir()
    assert make().model_folders == []
    proc = make(model_folders=[str(tmp_path / "models")])
    assert proc.model_folders == [str(tmp_path / "models")] and str(tmp_path / "models") in proc.model_roots
    for bad in ([str(tmp_path / "missing")], str(tmp_path / "models"), [5]):
        with pytest.raises(ConfigError) as e:
            make(model_folders=bad)
        assert e.value.key == "engine.model_folders"


def test_a_hub_repo_cut_short_between_files_is_incomplete(tiny, tmp_path):
    """A component whose weights its tree listing names but none are here (a download stopped between
    files) makes the repo incomplete; weights left out by a pattern (the .bin beside the .safetensors) do not."""
    from toolkit import library
    repo_dir = tmp_path / "hub" / f"models--{SD1_REPO.replace('/', '--')}"
    snap = repo_dir / "snapshots" / ("1" * 40)
    shutil.copytree(tiny("sd1"), snap)                  # a copy: a file of it is removed below
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(snap.name)
    files = {str(p.relative_to(snap)).replace(os.sep, "/"): {"size": 1} for p in snap.rglob("*") if p.is_file()}
    files["unet/diffusion_pytorch_model.bin"] = {"size": 1}          # listed, left out on purpose
    (repo_dir / "trees").mkdir()
    (repo_dir / "trees" / f"{snap.name}.json").write_text(json.dumps({"format_version": 1, "files": files}))

    def hub_entry():
        (e,) = [x for x in library.scan(hub_cache=str(tmp_path / "hub"))["entries"] if x["source"] == "hub"]
        return e
    e = hub_entry()
    assert e["complete"] is True and e["model"] is not None, e
    os.remove(snap / "unet" / "diffusion_pytorch_model.safetensors")
    e = hub_entry()
    assert (e["complete"], e["model"], e["missing"]) == (False, None, ["unet: its weights are not downloaded yet"])
