"""The models folders people have, through GET /library and a generation: an A1111/Forge tree
(`models/Stable-diffusion`, `models/VAE`, `models/Lora`) and a ComfyUI tree (`models/checkpoints`,
`diffusion_models`, `text_encoders`, `vae`), each listed with its detected arch and variant, the parts
in each file, the companion files it will use, what is missing and the `model` a request takes; every
offered model generates through the engine, equal to its diffusers folder's image. A denoiser given
alone takes its companions from the folders; `model.vae` (and A1111's sd_vae) replaces a checkpoint's
VAE; two checkpoints with byte-identical VAEs share one pool entry (content hash, cached on disk).

The files are the tiny SD 1.x model in the layouts users download (toolkit/models/tiny/checkpoints.py);
a real CLIP tokenizer would not fit the tiny text encoder, so the tokenizer cache (what open_clip's BPE
is written to) holds the tiny model's own."""
import os
import shutil
import threading

import httpx
import numpy as np
import pytest
import torch

from toolkit.config_modules import ModelConfig
from toolkit.errors import ConfigError
from toolkit.models.tiny.checkpoints import write_checkpoint, write_component

TOKEN = "library-files-token"
SAMPLE = {"prompt": "a red fox in snow", "width": 64, "height": 64, "num_inference_steps": 2, "seed": 7,
          "output_ext": "png"}


def mixed(tiny, base) -> str:
    """A fine-tune of seed 0: seed 1's UNet and text encoder, seed 0's VAE byte for byte (a diffusers
    folder, the reference its checkpoint must equal)."""
    folder = base / "illustrious-folder"
    if not folder.exists():
        shutil.copytree(tiny("sd1", 1), folder)
        shutil.rmtree(folder / "vae")
        shutil.copytree(os.path.join(tiny("sd1", 0), "vae"), folder / "vae")
    return str(folder)


def build_trees(base, tiny) -> dict:
    """webui/models (A1111/Forge) and ComfyUI/models trees of tiny SD 1.x files, and their folders."""
    a, b = tiny("sd1", 0), tiny("sd1", 1)
    mix = mixed(tiny, base)
    webui = base / "stable-diffusion-webui" / "models"
    for sub in ("Stable-diffusion", "VAE", "Lora"):
        (webui / sub).mkdir(parents=True)
    write_checkpoint("sd1", a, webui / "Stable-diffusion" / "ponyTiny.safetensors", dtype=torch.float16)
    write_checkpoint("sd1", mix, webui / "Stable-diffusion" / "illustriousTiny.safetensors", dtype=torch.float16)
    write_component("sd1", b, "vae", webui / "VAE" / "other-vae.safetensors")
    comfy = base / "ComfyUI"
    shutil.copytree(os.path.join(a, "tokenizer"), comfy / "comfy" / "sd1_tokenizer")
    models = comfy / "models"
    write_component("sd1", a, "unet", models / "diffusion_models" / "tiny_unet.safetensors")
    write_component("sd1", a, "text_encoder", models / "text_encoders" / "clip_l.safetensors")
    write_component("sd1", a, "vae", models / "vae" / "vae-ft-mse.safetensors")
    write_checkpoint("sd1", a, models / "checkpoints" / "no-vae.safetensors", roles=("unet", "text_encoder"))
    (models / "loras").mkdir()
    return {"webui": str(webui), "comfy": str(models), "comfy_install": str(comfy), "a": a, "b": b, "mix": mix}


@pytest.fixture
def tiny_clip_cache(tiny, tmp_path, monkeypatch):
    """The tokenizer cache holding the tiny model's CLIP vocabulary as `clip_l` (the built one's place)."""
    shutil.copytree(os.path.join(tiny("sd1"), "tokenizer"), tmp_path / "tok" / "clip_l")
    monkeypatch.setenv("AITK_TOKENIZER_CACHE", str(tmp_path / "tok"))
    monkeypatch.setenv("AITK_HASH_CACHE", str(tmp_path / "hashes.json"))


class Served:
    def __init__(self, base, tiny, tiny_root):
        from extensions_built_in.inference_engine.compat import compat_routes
        from extensions_built_in.inference_engine.engine import Engine
        from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app
        self.env = pytest.MonkeyPatch()
        shutil.copytree(os.path.join(tiny("sd1"), "tokenizer"), base / "tok" / "clip_l")
        self.env.setenv("AITK_TOKENIZER_CACHE", str(base / "tok"))
        self.env.setenv("AITK_HASH_CACHE", str(base / "hashes.json"))
        import huggingface_hub.constants
        (base / "hub").mkdir()
        self.env.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(base / "hub"))
        self.trees = build_trees(base, tiny)
        self.base = base
        # the A1111 install and the ComfyUI install as people name them: the folders above models/
        self.engine = Engine(output_folder=f"{base}/outputs", assets_folder=f"{base}/assets", worker="thread",
                             model_roots=[str(tiny_root), str(base)],
                             model_folders=[os.path.dirname(self.trees["webui"]), self.trees["comfy_install"]])
        self.engine.start_worker()
        self.server = ServerThread(create_app(self.engine, TOKEN, extra_routes=[compat_routes(engine=self.engine)]),
                                   bind_socket(0)).start()
        self.loop = threading.Thread(target=self.engine.run_forever, daemon=True, name="engine-loop")
        self.loop.start()
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.server.port}", headers={"X-Engine-Token": TOKEN},
                                 timeout=180)

    def generate(self, model, **sample):
        r = self.http.post("/generate", json={"model": model, "wait": True, "sample": {**SAMPLE, **sample}})
        assert r.status_code == 200, r.text
        doc = r.json()
        assert doc["status"] == "ok", doc
        return self.image(doc["results"][0]["relpath"])

    def image(self, relpath):
        import io

        from PIL import Image
        out = self.http.get(f"/outputs/{relpath}")
        assert out.status_code == 200
        return np.asarray(Image.open(io.BytesIO(out.content)))

    def close(self):
        self.engine.stop()
        self.loop.join(30)
        self.server.stop()
        self.http.close()
        self.env.undo()


@pytest.fixture(scope="module")
def srv(tiny, tiny_root, tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("trees"), tiny, tiny_root)
    yield s
    s.close()


@pytest.fixture(scope="module")
def lib(srv):
    r = srv.http.get("/library")
    assert r.status_code == 200, r.text
    return r.json()


def by(lib, **kw):
    found = [e for e in lib["entries"] if all(e.get(k) == v for k, v in kw.items())]
    assert len(found) == 1, (kw, [(e["name"], e["tree"]) for e in lib["entries"] if e["source"] == "folder"])
    return found[0]


# -- the listing ------------------------------------------------------------------------------------------
def test_an_a1111_tree_lists_each_checkpoint_with_its_parts_and_model(lib, srv):
    pony = by(lib, tree="a1111", name="Stable-diffusion/ponyTiny.safetensors")
    assert (pony["kind"], pony["arch"], pony["role"], pony["complete"], pony["dtype"]) == (
        "checkpoint", "sd1", "unet", True, "f16")
    assert {r: (p["kind"], p["known"]) for r, p in pony["parts"].items()} == {
        "unet": ("sd1_unet", "tiny"), "vae": ("ldm_kl_vae", "tiny"), "text_encoder": ("clip_l", "tiny")}
    assert pony["missing"] == [] and pony["missing_roles"] == []
    assert pony["companions"]["tokenizer"]["kind"] == "tokenizer"       # the only thing not in the file
    assert pony["model"] == {"arch": "sd1", "name_or_path": pony["path"], "local_only": True}
    vae = by(lib, tree="a1111", name="VAE/other-vae.safetensors")
    assert (vae["kind"], vae["role"], vae["component_kind"], vae["model"]) == ("component", "vae", "ldm_kl_vae", None)
    assert {"arch": "sd1", "role": "vae"} in vae["fits"]


def test_a_comfyui_tree_lists_a_denoiser_with_the_companions_it_will_use(lib, srv):
    t = srv.trees
    unet = by(lib, tree="comfyui", name="diffusion_models/tiny_unet.safetensors")
    assert (unet["kind"], unet["arch"], unet["complete"]) == ("single_file", "sd1", True)
    assert set(unet["parts"]) == {"unet"}
    comp = unet["companions"]
    assert comp["text_encoder"]["name"] == "text_encoders/clip_l.safetensors"
    # its own tree's vae/ first; the A1111 tree's VAE is an alternative
    assert comp["vae"]["name"] == "vae/vae-ft-mse.safetensors" and comp["vae"]["alternatives"] == ["VAE/other-vae.safetensors"]
    assert comp["tokenizer"]["path"] == os.path.join(t["comfy_install"], "comfy", "sd1_tokenizer")
    assert unet["model"] == {"arch": "sd1", "name_or_path": unet["path"], "local_only": True, "components": {
        "text_encoder": comp["text_encoder"]["path"], "vae": comp["vae"]["path"]}}
    # a checkpoint without its VAE takes one from the folders
    novae = by(lib, tree="comfyui", name="checkpoints/no-vae.safetensors")
    assert set(novae["parts"]) == {"unet", "text_encoder"} and novae["model"]["components"] == {"vae": comp["vae"]["path"]}
    clip = by(lib, tree="comfyui", name="text_encoders/clip_l.safetensors")
    assert (clip["kind"], clip["component_kind"], clip["label"]) == ("component", "clip_l", "CLIP-L text encoder")


def test_what_is_missing_is_named_and_no_model_is_offered(tiny, tmp_path, tiny_clip_cache):
    from toolkit import library
    models = tmp_path / "ComfyUI" / "models"
    write_component("sd1", tiny("sd1"), "unet", models / "diffusion_models" / "alone.safetensors")
    (models / "text_encoders").mkdir()
    doc = library.scan([str(models)], hub_cache=False)
    (e,) = [e for e in doc["entries"] if e["kind"] == "single_file"]
    assert e["model"] is None and e["complete"] is False
    assert e["missing_roles"] == ["text_encoder", "vae"]
    assert e["missing"][0].startswith("text_encoder: no CLIP-L text encoder file")


def test_every_offered_model_generates_as_its_diffusers_folder_does(lib, srv):
    """Each folder entry with a `model` generates through the engine, and its image equals the image of
    the diffusers folder it was written from (fp16 checkpoints: that folder in fp16)."""
    t = srv.trees
    offered = {e["name"]: e for e in lib["entries"] if e["source"] == "folder" and e["model"]}
    assert set(offered) == {"Stable-diffusion/ponyTiny.safetensors", "Stable-diffusion/illustriousTiny.safetensors",
                            "diffusion_models/tiny_unet.safetensors", "checkpoints/no-vae.safetensors"}
    half = {}

    def folder(path, dtype):
        if dtype == "float32":
            return path
        if path not in half:
            from diffusers import StableDiffusionPipeline
            half[path] = str(srv.base / f"half-{len(half)}")
            StableDiffusionPipeline.from_pretrained(path, safety_checker=None, requires_safety_checker=False,
                                                    feature_extractor=None).to(torch.float16).save_pretrained(half[path])
        return half[path]
    reference = {"Stable-diffusion/ponyTiny.safetensors": (t["a"], "float16"),
                 "Stable-diffusion/illustriousTiny.safetensors": (t["mix"], "float16"),
                 "diffusion_models/tiny_unet.safetensors": (t["a"], "float32"),
                 "checkpoints/no-vae.safetensors": (t["a"], "float32")}
    for name, e in offered.items():
        path, dtype = reference[name]
        got = srv.generate(e["model"])
        want = srv.generate({"arch": "sd1", "name_or_path": folder(path, dtype),
                             "components": {"tokenizer": os.path.join(t["a"], "tokenizer")}})
        assert (got == want).all(), name


def test_a_checkpoint_by_its_file_name_on_the_a1111_routes_with_sd_vae(srv):
    """A1111 clients pick checkpoints by file name and a VAE by sd_vae: the model folders' files."""
    names = [m["title"] for m in srv.http.get("/sdapi/v1/sd-models").json()]
    assert {"ponyTiny.safetensors", "illustriousTiny.safetensors", "tiny_unet.safetensors"} <= set(names)
    vaes = {v["model_name"]: v["filename"] for v in srv.http.get("/sdapi/v1/sd-vae").json()}
    assert vaes == {"other-vae.safetensors": os.path.join(srv.trees["webui"], "VAE", "other-vae.safetensors"),
                    "vae-ft-mse.safetensors": os.path.join(srv.trees["comfy"], "vae", "vae-ft-mse.safetensors")}
    body = {"prompt": "a fox", "width": 64, "height": 64, "steps": 2, "seed": 3,
            "override_settings": {"sd_model_checkpoint": "ponyTiny.safetensors", "sd_vae": "other-vae.safetensors"}}
    r = srv.http.post("/sdapi/v1/txt2img", json=body)
    assert r.status_code == 200, r.text
    active = srv.engine.active_config
    assert active.name_or_path.endswith("ponyTiny.safetensors") and active.components["vae"] == vaes["other-vae.safetensors"]
    r = srv.http.post("/sdapi/v1/txt2img", json={**body, "override_settings": {**body["override_settings"],
                                                                               "sd_vae": "Automatic"}})
    assert r.status_code == 200 and "vae" not in srv.engine.active_config.components
    r = srv.http.post("/sdapi/v1/txt2img", json={**body, "override_settings": {"sd_vae": "nope.safetensors"}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "override_settings", "sd_vae"]
    r = srv.http.post("/sdapi/v1/options", json={"sd_vae": "nope.safetensors"})
    assert r.status_code == 422 and "nope.safetensors" in r.json()["detail"][0]["msg"]


def test_listing_the_trees_never_imports_torch(srv):
    import json
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import sys, json; from toolkit.library import scan; "
            f"d = scan({srv.engine.model_folders!r}, hub_cache=False); "
            "assert any(e.get('companions') for e in d['entries']), d; "
            "print(json.dumps(sorted(m for m in ('torch', 'safetensors', 'diffusers', 'transformers', 'open_clip') "
            "if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": root})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


# -- sharing ---------------------------------------------------------------------------------------------
def test_switching_two_checkpoints_that_share_a_vae_loads_only_what_differs(lib, srv):
    """Pony -> Illustrious: byte-identical VAEs (one content hash) are one pool entry; /health says the
    switch read the UNet and the text encoder, and found the VAE, tokenizer and scheduler resident."""
    pony = by(lib, name="Stable-diffusion/ponyTiny.safetensors")["model"]
    illu = by(lib, name="Stable-diffusion/illustriousTiny.safetensors")["model"]
    srv.generate(pony)
    vae_key = [e["key"] for e in srv.http.get("/health").json()["pool"]["entries"] if e["role"] == "vae"]
    srv.generate(illu)
    pool = srv.http.get("/health").json()["pool"]
    assert pool["last_build"]["loaded"] == ["text_encoder", "unet"]
    assert set(pool["last_build"]["reused"]) == {"scheduler", "tokenizer", "vae"}
    assert [e["key"] for e in pool["entries"] if e["role"] == "vae"] == vae_key
    assert 0 < pool["last_build"]["loaded_bytes"] and pool["last_build"]["reused_bytes"] > 0


def test_a_part_hash_is_computed_once_and_kept_across_a_restart(tiny, tmp_path, monkeypatch):
    from toolkit.models.v2 import content_hash
    monkeypatch.setenv("AITK_HASH_CACHE", str(tmp_path / "hashes.json"))
    ckpt = tmp_path / "a.safetensors"
    write_checkpoint("sd1", tiny("sd1"), ckpt)
    vae = tmp_path / "vae.safetensors"
    write_component("sd1", tiny("sd1"), "vae", vae)
    before = dict(content_hash.stats)
    one = content_hash.part_digest(str(ckpt), "first_stage_model.")
    assert content_hash.stats["hashed_parts"] == before["hashed_parts"] + 1
    assert one[1] == os.path.getsize(vae) - _header_bytes(vae)     # every byte of the VAE's tensors
    # the same tensors alone in a ComfyUI vae/ file, under no prefix: one digest
    assert content_hash.part_digest(str(vae), "")[0] == one[0]
    content_hash.forget_process_cache()             # as a restarted process
    hashed = content_hash.stats["hashed_bytes"]
    assert content_hash.part_digest(str(ckpt), "first_stage_model.") == one
    assert content_hash.stats["hashed_bytes"] == hashed          # read from the cache file, not hashed
    os.utime(ckpt, ns=(1, 1))                                    # a changed file is hashed again
    content_hash.part_digest(str(ckpt), "first_stage_model.")
    assert content_hash.stats["hashed_bytes"] > hashed
    # another UNet: another digest
    assert content_hash.part_digest(str(ckpt), "model.diffusion_model.")[0] != one[0]


def _header_bytes(path) -> int:
    import struct
    with open(path, "rb") as f:
        return 8 + struct.unpack("<Q", f.read(8))[0]


# -- a denoiser alone, and model.vae ---------------------------------------------------------------------
def _holder(model: dict, folders=(), roots=None):
    from toolkit.models.base_model import get_model_class
    mc = ModelConfig.from_dict(model)
    holder = get_model_class(mc.arch)(mc)
    holder.library_folders, holder.library_roots = tuple(folders), roots
    holder.load_model()
    return holder


def _same(module, folder, sub):
    from safetensors.torch import load_file
    want = load_file(os.path.join(folder, sub, "diffusion_pytorch_model.safetensors"
                                  if sub != "text_encoder" else "model.safetensors"))
    got = module.state_dict()
    assert set(got) == set(want) and all(torch.equal(got[k], want[k]) for k in want), sub


def test_a_denoiser_given_alone_takes_its_companions_from_the_model_folders(tiny, tmp_path, tiny_clip_cache):
    a = tiny("sd1")
    models = tmp_path / "ComfyUI" / "models"
    unet = models / "diffusion_models" / "u.safetensors"
    write_component("sd1", a, "unet", unet)
    elsewhere = tmp_path / "shared" / "models"
    write_component("sd1", a, "text_encoder", elsewhere / "text_encoders" / "clip_l.safetensors")
    write_component("sd1", a, "vae", elsewhere / "vae" / "ae.safetensors")
    # not in its own tree, nor in a folder given: the roles it needs are named
    with pytest.raises(ConfigError) as e:
        _holder({"name_or_path": str(unet)})
    assert e.value.key == "model.components.text_encoder" and "text_encoder, vae" in e.value.message
    holder = _holder({"name_or_path": str(unet)}, folders=[str(elsewhere.parent)])
    for role in ("unet", "text_encoder", "vae"):
        _same(holder.loaded[role], a, role)
    # beside it in its own tree, with no folder configured
    shutil.move(str(elsewhere / "vae"), str(models / "vae"))
    shutil.move(str(elsewhere / "text_encoders"), str(models / "text_encoders"))
    _same(_holder({"name_or_path": str(unet)}).loaded["vae"], a, "vae")
    # an engine whose model roots hold the file but not its tree reads nothing beside it
    with pytest.raises(ConfigError) as e:
        _holder({"name_or_path": str(unet)}, roots=[str(models / "diffusion_models")])
    assert "text_encoder, vae" in e.value.message
    _same(_holder({"name_or_path": str(unet)}, roots=[str(tmp_path)]).loaded["vae"], a, "vae")


def test_model_vae_replaces_any_models_vae(tiny, tmp_path, tiny_clip_cache):
    a, b = tiny("sd1", 0), tiny("sd1", 1)
    ckpt = tmp_path / "ckpt.safetensors"
    write_checkpoint("sd1", a, ckpt)
    other = tmp_path / "other-vae.safetensors"
    write_component("sd1", b, "vae", other)
    mc = ModelConfig.from_dict({"name_or_path": str(ckpt), "vae": str(other)})
    assert mc.components == {"vae": str(other)} and mc.vae is None
    assert mc == ModelConfig.from_dict({"name_or_path": str(ckpt), "components": {"vae": str(other)}})
    holder = _holder({"name_or_path": str(ckpt), "vae": str(other)})
    _same(holder.loaded["vae"], b, "vae")
    _same(holder.loaded["unet"], a, "unet")
    # a diffusers folder's VAE too, the file read by its row (LDM layout)
    folder = _holder({"arch": "sd1", "name_or_path": a, "vae": str(other)})
    _same(folder.loaded["vae"], b, "vae")
    for bad, needle in (({"vae": str(tmp_path / "none.safetensors")}, "no such file"),
                        ({"vae": str(other), "components": {"vae": str(ckpt)}}, "another VAE"),
                        ({"vae": 5}, "must be the path")):
        with pytest.raises(ConfigError) as e:
            ModelConfig.from_dict({"name_or_path": str(ckpt), **bad})
        assert e.value.key == "model.vae" and needle in e.value.message


def test_engine_comfyui_path_is_a_model_folder(tmp_path):
    from types import SimpleNamespace

    from extensions_built_in.inference_engine.InferenceEngine import InferenceEngine

    def make(**engine):
        return InferenceEngine(0, SimpleNamespace(name="lib"),
                               {"type": "InferenceEngine", "engine": {"job_folder": str(tmp_path / "job"), **engine}})
    (tmp_path / "ComfyUI" / "models" / "checkpoints").mkdir(parents=True)
    proc = make(comfyui_path=str(tmp_path / "ComfyUI"))
    assert proc.model_folders == [str(tmp_path / "ComfyUI")]
    assert proc.make_engine().worker_options["model_folders"] == (str(tmp_path / "ComfyUI"),)
    for bad in (str(tmp_path), 5):
        with pytest.raises(ConfigError) as e:
            make(comfyui_path=bad)
        assert e.value.key == "engine.comfyui_path"


def test_a_component_file_beside_extras_takes_its_config_from_the_roles_subfolder(tiny, tmp_path, tiny_clip_cache):
    """A model named by files with extras_name_or_path (a library entry whose layout needs a config folder):
    a component file given beside it is read with the config in that folder's role subfolder (vae/)."""
    a = tiny("sd1")
    unet, vae = tmp_path / "u.safetensors", tmp_path / "v.safetensors"
    write_component("sd1", a, "unet", unet)
    write_component("sd1", a, "vae", vae)
    holder = _holder({"arch": "sd1", "name_or_path": str(unet), "extras_name_or_path": a,
                      "components": {"vae": str(vae)}})
    _same(holder.loaded["vae"], a, "vae")
