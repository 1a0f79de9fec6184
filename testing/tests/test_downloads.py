"""Downloads on request (POST/GET/DELETE /downloads, toolkit/downloads.py) against a local server in
the hub's layout (testing/fake_hub.py, HF_ENDPOINT pointed at it): a hub repo through snapshot_download
into the hub cache, with HF_TOKEN sent, then listed by GET /library and generating; a cancel and a
resume of a hub repo and of a direct URL; a direct URL continued after a cut connection; bad bodies
naming their field. Waits are on the download's own state (GET /downloads), or the fake hub's events."""
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time

import httpx
import pytest

from testing.fake_hub import FakeHub

TOKEN = "downloads-token-1"
REPO = "fake-org/sd1-tiny"
HF_TOKEN = "hf_fake_token_123"
UNET = "diffusion_pytorch_model.safetensors"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sha(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Served:
    def __init__(self, base, tiny, tiny_root, monkeypatch):
        from extensions_built_in.inference_engine.engine import Engine
        from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app
        import huggingface_hub.constants
        self.base = base
        shutil.copytree(tiny("sd1"), base / "hub_root" / "fake-org" / "sd1-tiny")
        (base / "hub_root" / "files").mkdir()
        self.weights = base / "hub_root" / "files" / "model.safetensors"
        shutil.copy(os.path.join(tiny("sd1"), "unet", UNET), self.weights)
        self.hub = FakeHub(str(base / "hub_root")).start()
        self.web = FakeHub(str(base / "hub_root")).start()     # another host: any web server
        monkeypatch.setenv("HF_ENDPOINT", self.hub.url)
        monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")      # the engine's offline rule (toolkit/offline.py) stays on
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(base / "cache"))
        (base / "comfy" / "checkpoints").mkdir(parents=True)
        (base / "comfy" / "loras").mkdir()
        self.engine = Engine(output_folder=f"{base}/outputs", assets_folder=f"{base}/assets", worker="thread",
                             model_roots=[str(tiny_root), str(base / "cache")], model_folders=[str(base / "comfy")])
        self.engine.start_worker()
        self.server = ServerThread(create_app(self.engine, TOKEN), bind_socket(0)).start()
        self.loop = threading.Thread(target=self.engine.run_forever, daemon=True, name="engine-loop")
        self.loop.start()
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.server.port}",
                                 headers={"X-Engine-Token": TOKEN}, timeout=180)

    def wait(self, did: str, until, deadline_s: float = 60) -> dict:
        """GET /downloads until the download's state satisfies `until` (or fail, naming its last state)."""
        end = time.monotonic() + deadline_s
        while True:
            d = next(x for x in self.http.get("/downloads").json()["downloads"] if x["id"] == did)
            if until(d):
                return d
            assert time.monotonic() < end, repr(d)
            time.sleep(0.05)

    def close(self):
        self.engine.stop()
        self.loop.join(30)
        self.server.stop()
        self.http.close()
        self.hub.stop()
        self.web.stop()


@pytest.fixture(scope="module")
def srv(tiny, tiny_root, tmp_path_factory):
    mp = pytest.MonkeyPatch()
    s = Served(tmp_path_factory.mktemp("downloads"), tiny, tiny_root, mp)
    yield s
    s.close()
    mp.undo()


def done(d):
    return d["status"] != "running"


def test_the_routes_need_the_token(srv):
    r = httpx.get(f"http://127.0.0.1:{srv.server.port}/downloads")
    assert r.status_code == 401 and r.json()["field"] == "token"


@pytest.mark.parametrize("body, field", [
    ({}, "repo_id"),
    ({"repo_id": REPO, "url": "http://x/y"}, "repo_id"),
    ({"repo_id": "not a repo"}, "repo_id"),
    ({"repo_id": REPO, "kind": "vae"}, "kind"),
    ({"repo_id": REPO, "dest": "/tmp"}, "dest"),
    ({"url": "ftp://host/file.safetensors"}, "url"),
    ({"url": "http://h/f.safetensors", "dest": "/somewhere/else"}, "dest"),
    ({"url": "http://h/f.safetensors", "kind": "weights"}, "kind"),
    ({"url": "http://h/f.safetensors", "subdir": "../up"}, "subdir"),
    ({"url": "http://h/f.safetensors", "filename": "a/b.safetensors"}, "filename"),
    ({"url": "http://h/f.safetensors", "revision": "main"}, "revision"),
    ({"url": "http://h/", }, "url"),
    ({"repo_id": REPO, "mirror": "x"}, "mirror"),
    ({"repo_id": 5}, "repo_id"),
])
def test_bad_bodies_name_their_field(srv, body, field):
    r = srv.http.post("/downloads", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"].split(".")[-1] == field, r.json()


def test_the_listing_says_where_a_url_may_go(srv):
    doc = srv.http.get("/downloads").json()
    assert doc["model_folders"] == [str(srv.base / "comfy")]
    assert doc["kinds"] == ["checkpoint", "diffusion_model", "text_encoder", "vae", "lora"]


def test_unknown_ids_are_404(srv):
    for r in (srv.http.delete("/downloads/nope"), srv.http.post("/downloads/nope/resume")):
        assert r.status_code == 404 and r.json()["field"] == "id"


def test_a_hub_repo_into_the_hub_cache_listed_and_generating(srv, tiny):
    srv.hub.log.clear()
    r = srv.http.post("/downloads", json={"repo_id": REPO})
    assert r.status_code == 201, r.text
    d = srv.wait(r.json()["id"], done)
    assert d["status"] == "done", d
    files = srv.hub.files(REPO)
    total = sum(os.path.getsize(os.path.join(srv.hub.repo_dir(REPO), f)) for f in files)
    assert (d["bytes_total"], d["bytes_done"], d["bytes_left"]) == (total, total, 0)
    assert d["path"].startswith(str(srv.base / "cache"))
    for f in files:                                 # every file in the snapshot, byte for byte
        assert sha(os.path.join(d["path"], f)) == sha(os.path.join(srv.hub.repo_dir(REPO), f)), f
    gets = [x for x in srv.hub.log if x["method"] == "GET" and "/resolve/" in x["path"]]
    assert len(gets) == len(files)
    assert [x for x in srv.hub.log if REPO in x["path"] and x["authorization"] != f"Bearer {HF_TOKEN}"] == []
    entry = next(e for e in srv.http.get("/library").json()["entries"] if e.get("repo") == REPO)
    assert (entry["source"], entry["arch"], entry["complete"]) == ("hub", "sd1", True)
    assert entry["model"] == {"arch": "sd1", "name_or_path": REPO}
    # the model loads from the cache, offline, as any cached repo
    r = srv.http.post("/generate", json={"model": entry["model"], "wait": True, "sample": {
        "prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2, "output_ext": "png"}})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    # asked again: nothing left to fetch
    again = srv.wait(srv.http.post("/downloads", json={"repo_id": REPO}).json()["id"], done)
    assert again["status"] == "done" and again["bytes_total"] == 0


def test_a_hub_download_cancelled_then_resumed(srv):
    """The unet held mid-body: every other file lands (the progress says so); cancel leaves no partial
    blob, and the repo listed incomplete (its tree listing names the unet); resume fetches only the unet."""
    repo = "fake-org/sd1-resume"
    shutil.copytree(srv.hub.repo_dir(REPO), srv.hub.repo_dir(repo))
    unet_bytes = os.path.getsize(os.path.join(srv.hub.repo_dir(repo), "unet", UNET))
    srv.hub.hold[f"unet/{UNET}"] = 1000
    srv.hub.released.clear()
    srv.hub.held.clear()
    did = srv.http.post("/downloads", json={"repo_id": repo}).json()["id"]
    assert srv.hub.held.wait(60), "the download never reached the held file"
    d = srv.wait(did, lambda d: d["bytes_total"] is not None and d["bytes_left"] == unet_bytes)
    assert d["status"] == "running" and 0 < d["bytes_done"] < d["bytes_total"], d
    c = srv.http.delete(f"/downloads/{did}")
    assert c.status_code == 200 and c.json()["status"] == "cancelled", c.text
    srv.hub.release()
    blobs = srv.base / "cache" / f"models--{repo.replace('/', '--')}" / "blobs"
    assert not [f for f in os.listdir(blobs) if f.endswith(".incomplete")], os.listdir(blobs)
    entry = next(e for e in srv.http.get("/library").json()["entries"] if e.get("repo") == repo)
    assert (entry["complete"], entry["model"]) == (False, None), entry      # never listed as usable half-done
    assert entry["missing"] == ["unet: its weights are not downloaded yet"]
    srv.hub.log.clear()
    r = srv.http.post(f"/downloads/{did}/resume")
    assert r.status_code == 200 and r.json()["status"] == "running"
    d = srv.wait(did, done)
    assert d["status"] == "done", d
    fetched = [x["path"] for x in srv.hub.log if x["method"] == "GET" and "/resolve/" in x["path"]]
    assert [p.rsplit("/", 2)[-2:] for p in fetched] == [["unet", UNET]], fetched
    unet = os.path.join(d["path"], "unet", UNET)
    assert sha(unet) == sha(os.path.join(srv.hub.repo_dir(repo), "unet", UNET))
    entry = next(e for e in srv.http.get("/library").json()["entries"] if e.get("repo") == repo)
    assert entry["complete"] is True and entry["model"] is not None, (entry, os.listdir(blobs))


def test_a_url_continued_after_a_cut_connection(srv):
    srv.web.cut["model.safetensors"] = 4096
    srv.web.log.clear()
    r = srv.http.post("/downloads", json={"url": f"{srv.web.url}/files/model.safetensors", "kind": "checkpoint"})
    assert r.status_code == 201, r.text
    d = srv.wait(r.json()["id"], done)
    assert d["status"] == "done", d
    dest = srv.base / "comfy" / "checkpoints" / "model.safetensors"
    assert d["path"] == str(dest) and sha(dest) == sha(srv.weights)
    assert not os.path.exists(str(dest) + ".part")
    assert d["bytes_total"] == os.path.getsize(srv.weights) and d["bytes_left"] == 0
    gets = [x for x in srv.web.log if x["method"] == "GET"]
    assert [x["range"] for x in gets] == [None, "bytes=4096-"]
    assert all(x["authorization"] is None for x in gets)       # HF_TOKEN goes to the hub's host alone
    names = {e["name"] for e in srv.http.get("/library").json()["entries"]}
    assert "checkpoints/model.safetensors" in names


def test_a_url_on_the_hub_host_carries_hf_token(srv):
    srv.hub.log.clear()
    did = srv.http.post("/downloads", json={"url": f"{srv.hub.url}/{REPO}/resolve/main/model_index.json",
                                            "subdir": "configs"}).json()["id"]
    assert srv.wait(did, done)["status"] == "done"
    assert [x["authorization"] for x in srv.hub.log] == [f"Bearer {HF_TOKEN}"]


def test_a_url_cancelled_then_resumed_from_its_part_file(srv):
    srv.hub.hold["model.safetensors"] = 5000
    srv.hub.released.clear()
    srv.hub.held.clear()
    srv.hub.log.clear()
    did = srv.http.post("/downloads", json={"url": f"{srv.hub.url}/files/model.safetensors", "subdir": "mine",
                                            "filename": "again.safetensors"}).json()["id"]
    d = srv.wait(did, lambda d: d["bytes_done"] == 5000)
    assert d["status"] == "running" and d["bytes_left"] == os.path.getsize(srv.weights) - 5000
    c = srv.http.delete(f"/downloads/{did}")
    assert c.json()["status"] == "cancelled"
    part = srv.base / "comfy" / "mine" / "again.safetensors.part"
    assert os.path.getsize(part) == 5000
    srv.hub.release()
    srv.http.post(f"/downloads/{did}/resume")
    d = srv.wait(did, done)
    assert d["status"] == "done", d
    assert sha(srv.base / "comfy" / "mine" / "again.safetensors") == sha(srv.weights)
    assert [x["range"] for x in srv.hub.log if x["method"] == "GET"][-1] == "bytes=5000-"
    # a finished download leaves the list when deleted; its file stays
    gone = srv.http.delete(f"/downloads/{did}")
    listed = [x["id"] for x in srv.http.get("/downloads").json()["downloads"]]
    assert gone.json()["forgotten"] is True and did not in listed
    assert os.path.exists(srv.base / "comfy" / "mine" / "again.safetensors")


def test_an_unknown_repo_fails_saying_why(srv):
    d = srv.wait(srv.http.post("/downloads", json={"repo_id": "fake-org/nope"}).json()["id"], done)
    assert d["status"] == "failed" and "RepositoryNotFound" in d["error"], d


def test_a_url_never_overwrites_a_file(srv):
    (srv.base / "comfy" / "vae").mkdir(exist_ok=True)
    (srv.base / "comfy" / "vae" / "mine.safetensors").write_bytes(b"x")
    r = srv.http.post("/downloads", json={"url": f"{srv.web.url}/files/model.safetensors", "kind": "vae",
                                          "filename": "mine.safetensors"})
    assert r.status_code == 422 and r.json()["field"] == "filename", r.text
    assert (srv.base / "comfy" / "vae" / "mine.safetensors").read_bytes() == b"x"


def test_a_failed_url_says_why(srv):
    did = srv.http.post("/downloads", json={"url": f"{srv.hub.url}/files/missing.safetensors"}).json()["id"]
    d = srv.wait(did, done)
    assert d["status"] == "failed" and "HTTP 404" in d["error"], d


def test_where_a_url_file_goes_by_kind(tmp_path):
    from toolkit.model_trees import download_dir
    a1111 = tmp_path / "webui" / "models"
    (a1111 / "Stable-diffusion").mkdir(parents=True)
    (a1111 / "lora").mkdir()
    assert download_dir(str(tmp_path / "webui"), "checkpoint") == str(a1111 / "Stable-diffusion")
    assert download_dir(str(tmp_path / "webui"), "lora") == str(a1111 / "lora")        # the folder's own case
    assert download_dir(str(tmp_path / "webui"), "vae") == str(a1111 / "VAE")          # made on download
    (tmp_path / "plain").mkdir()
    assert download_dir(str(tmp_path / "plain"), "vae") == str(tmp_path / "plain")


def test_the_download_modules_never_import_torch():
    code = ("import sys; import toolkit.downloads, toolkit.url_fetch, toolkit.hub_fetch, toolkit.library_builtin; "
            "import extensions_built_in.inference_engine.routes.downloads; "
            "print(sorted(m for m in ('torch', 'diffusers', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
