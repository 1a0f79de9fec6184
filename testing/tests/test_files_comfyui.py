"""A ComfyUI models folder, offline, per DiT arch: the tiny model written as ComfyUI's files have it
(`diffusion_models/` denoiser, `text_encoders/` and `vae/` files under ComfyUI's usual names, the
tokenizers in the install's `comfy/` folders or, for UMT5, the SentencePiece model its file embeds),
named by its denoiser file alone. The text encoders and the VAE are the tree's companion files
(toolkit/companions.py), every config from the files, nothing from a hub. Every component equals the
diffusers folder's bit for bit and so does the output. Stable Audio's is its checkpoint (the DiT, the
seconds conditioners and the Oobleck VAE) with ComfyUI's t5_base file.

Where ComfyUI ships no tokenizer folder (Gemma 2), or derives the tokenizer from another vocabulary's
folder (CLIP-G's is its CLIP folder repadded, Qwen3's its Qwen2.5 folder with four tokens added: the
tiny vocabularies are not those), the request names the tokenizer folder (model.components), as a
user's would."""
import os
import shutil

import numpy as np
import pytest
import torch

from testing.tiny_runs import load, realigned, run
from toolkit.errors import ConfigError
from toolkit.models.arch import DENOISER, TOKENIZER
from toolkit.models.formats.detect import detect_file
from toolkit.models.registry import ARCHS
from toolkit.models.tiny.checkpoints import write_checkpoint, write_component
from toolkit.tokenizers import VOCABULARIES

DIT_ARCHS = ("chroma", "ernie_image", "flux", "flux2_klein", "flux_control", "flux_kontext", "hunyuan_video", "ltx", "ltx2",
             "lumina2", "pixart", "qwen_image", "qwen_image_edit", "sd3", "stable_audio", "wan21", "wan22_5b",
             "wan22_a14b", "zimage")
# where another arch takes the same denoiser file first, the request says which
AMBIGUOUS = {"flux_kontext": "flux", "qwen_image_edit": "qwen_image", "wan22_a14b": "wan21"}
# ComfyUI's file names for each kind (the names its model pages and workflows use)
COMFY_NAMES = {"clip_l": "clip_l", "clip_g": "clip_g", "t5_xxl": "t5xxl_fp16", "umt5_xxl": "umt5_xxl_fp16",
               "t5_base": "t5_base", "qwen25_vl_7b": "qwen_2.5_vl_7b", "qwen3_4b": "qwen_3_4b",
               "qwen3_4b_8b": "qwen_3_4b",
               "gemma2_2b": "gemma_2_2b", "llava_llama3_8b": "llava_llama3_fp16", "kl_vae_16ch": "ae",
               "wan21_vae": "wan_2.1_vae", "wan22_vae": "wan2.2_vae", "ltx_vae": "ltxv_vae",
               "hunyuan_video_vae": "hunyuan_video_vae_bf16", "flux2_vae": "flux2-vae", "oobleck_vae": "oobleck",
               "ldm_kl_vae": "vae-ft-ema-560000-ema-pruned"}
SUBFOLDER = {"text_encoder": "text_encoders", "vae": "vae"}
# what the arch's release ships inside its checkpoint (ComfyUI's checkpoints/stable-audio-open-1.0.safetensors)
IN_CHECKPOINT = {"stable_audio": ("vae",)}



@pytest.fixture(autouse=True)
def own_caches(monkeypatch, tmp_path):
    """The tokenizer and part-hash caches of this test alone (nothing built by another test is found)."""
    monkeypatch.setenv("AITK_TOKENIZER_CACHE", str(tmp_path / "tokenizer_cache"))
    monkeypatch.setenv("AITK_HASH_CACHE", str(tmp_path / "hashes.json"))


def comfy_tree(arch: str, folder: str, base) -> tuple:
    """(the denoiser file, the roles the request must name) of a ComfyUI install at base/ComfyUI."""
    spec = ARCHS[arch]
    install = base / "ComfyUI"
    models = install / "models"
    first, *rest = spec.denoiser_roles
    in_file = tuple(c.role for c in spec.components if c.with_denoiser and c.single_file is not None)
    in_file += IN_CHECKPOINT.get(arch, ())
    denoiser = models / ("checkpoints" if arch in IN_CHECKPOINT else "diffusion_models") / f"{arch}.safetensors"
    if in_file:
        write_checkpoint(arch, folder, denoiser, roles=(first, *in_file))
    else:
        write_component(arch, folder, first, denoiser, prefix="model.diffusion_model.")
    given = {r: str(models / "diffusion_models" / f"{arch}_{r}.safetensors") for r in rest}
    for r in rest:
        write_component(arch, folder, r, given[r], prefix="model.diffusion_model.")
    written = {}
    for c in spec.components:
        if c.kind == DENOISER or c.role in in_file or c.kind == "scheduler":
            continue
        if c.kind == TOKENIZER:
            # ComfyUI's folder as the load derives this vocabulary from it (CLIP-G's repadded with "!",
            # Qwen3's as Qwen2.5's with four tokens added) would not be the tiny model's own
            v = VOCABULARIES.get(c.vocab)
            comfy = v.comfy if v is not None and not v.comfy_pad and not v.adapt else ()
            target = install / comfy[0] if comfy else None
            src = os.path.join(folder, c.folder)
            if c.vocab == "umt5_xxl":
                continue             # ComfyUI's umt5_xxl files embed their SentencePiece model (below)
            if target is not None and (not target.exists() or _same_files(target, src)):
                if not target.exists():
                    shutil.copytree(src, target)
            else:
                given[c.role] = src
            continue
        if c.built:
            continue                 # written over the tokenizer found (Qwen-Image-Edit's processor)
        sf = c.single_file
        if sf is None or not sf.anchors:
            given[c.role] = os.path.join(folder, c.folder)        # no ComfyUI file kind for it yet
            continue
        name = COMFY_NAMES[sf.kind]
        if name in written:
            name = f"{name}_{c.role}"
        written[name] = c.role
        path = models / SUBFOLDER[c.kind] / f"{name}.safetensors"
        write_component(arch, folder, c.role, path)
        if sf.kind == "umt5_xxl":
            _embed_spiece(path, os.path.join(folder, "tokenizer"))
    return str(denoiser), given


def _embed_spiece(path, tokenizer_folder):
    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer

    from toolkit.models.tiny.text_encoder_files import spiece_model
    tensors = load_file(str(path))
    data = spiece_model(AutoTokenizer.from_pretrained(tokenizer_folder))
    tensors["spiece_model"] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    save_file(tensors, str(path))


def _same_files(a, b) -> bool:
    names = sorted(os.listdir(a))
    return names == sorted(os.listdir(b)) and all(
        open(os.path.join(a, n), "rb").read() == open(os.path.join(b, n), "rb").read() for n in names)


def assert_same_model(holder, reference, tmp_path):
    for role, module in reference.loaded.items():
        if isinstance(module, torch.nn.Module):
            a, b = holder.loaded[role].state_dict(), module.state_dict()
            assert set(a) == set(b), role
            assert not [k for k in a if not torch.equal(a[k], b[k])], role
    lat, out = run(realigned(holder), tmp_path)
    ref_lat, ref_out = run(realigned(reference), tmp_path)
    assert torch.equal(lat, ref_lat) and np.array_equal(out, ref_out)


@pytest.mark.parametrize("arch", DIT_ARCHS)
def test_a_comfyui_tree_loads_from_the_denoiser_file_alone(arch, tiny, tmp_path, no_hub):
    folder = tiny(arch)
    denoiser, given = comfy_tree(arch, folder, tmp_path)
    det = detect_file(denoiser)
    assert det.arch == AMBIGUOUS.get(arch, arch)
    model = {"name_or_path": denoiser, "components": given}
    if arch in AMBIGUOUS:
        model["arch"] = arch
    holder = load(model)
    # each text encoder and VAE came from a file of the tree, read by its layout
    for c in ARCHS[arch].components:
        if c.kind in ("text_encoder", "vae") and c.role not in given:
            report = holder.loaded[c.role]._aitk_checkpoint_report
            assert os.path.dirname(os.path.dirname(report["path"])) == str(tmp_path / "ComfyUI" / "models"), report
    assert_same_model(holder, load({"arch": arch, "name_or_path": folder}), tmp_path)


def test_a_flux_all_in_one_file_loads_alone(tiny, tmp_path, no_hub):
    """ComfyUI's flux1-dev-fp8 layout: the transformer, CLIP-L, T5 and the VAE in one file."""
    folder = tiny("flux")
    aio = tmp_path / "models" / "checkpoints" / "flux1-dev-tiny.safetensors"
    write_checkpoint("flux", folder, aio)
    det = detect_file(str(aio))
    assert det.arch == "flux"
    assert {r: det.parts[r].prefix for r in ("transformer", "text_encoder", "text_encoder_2", "vae")} == {
        "transformer": "model.diffusion_model.", "text_encoder": "text_encoders.clip_l.transformer.",
        "text_encoder_2": "text_encoders.t5xxl.transformer.", "vae": "vae."}
    tokenizers = {r: os.path.join(folder, r) for r in ("tokenizer", "tokenizer_2")}
    assert_same_model(load({"name_or_path": str(aio), "components": tokenizers}),
                      load({"arch": "flux", "name_or_path": folder}), tmp_path)


def test_a_comfyui_denoiser_with_its_encoders_missing_names_the_roles(tiny, tmp_path, no_hub):
    folder = tiny("flux")
    denoiser, _given = comfy_tree("flux", folder, tmp_path)
    shutil.rmtree(tmp_path / "ComfyUI" / "models" / "text_encoders")
    with pytest.raises(ConfigError) as e:
        load({"name_or_path": denoiser})
    assert e.value.key.startswith("model.components.")
    assert "text_encoder, text_encoder_2" in e.value.message


def test_a_vae_file_given_as_a_text_encoder_is_refused_naming_the_role(tiny, tmp_path, no_hub):
    folder = tiny("wan21")
    denoiser, given = comfy_tree("wan21", folder, tmp_path)
    vae = str(tmp_path / "ComfyUI" / "models" / "vae" / "wan_2.1_vae.safetensors")
    with pytest.raises(ConfigError) as e:
        load({"name_or_path": denoiser, "components": {**given, "text_encoder": vae}})
    assert e.value.key == "model.components.text_encoder"
    assert "wan_2.1_vae.safetensors" in e.value.message


class Served:
    """An engine (thread worker) behind a real server on loopback, and its HTTP client."""

    def __init__(self, engine):
        import threading

        import httpx

        from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app
        self.engine = engine
        engine.start_worker()
        self.server = ServerThread(create_app(engine, "t"), bind_socket(0)).start()
        self.loop = threading.Thread(target=engine.run_forever, daemon=True)
        self.loop.start()
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.server.port}", headers={"X-Engine-Token": "t"},
                                 timeout=180)

    def image(self, model, arch="flux"):
        import io

        from PIL import Image
        sample = {**ARCHS[arch].tiny.sample, "prompt": "a red fox in snow", "seed": 7, "output_ext": "png"}
        r = self.http.post("/generate", json={"model": model, "wait": True, "sample": sample})
        assert r.status_code == 200 and r.json()["status"] == "ok", r.text
        out = self.http.get(f"/outputs/{r.json()['results'][0]['relpath']}")
        return np.asarray(Image.open(io.BytesIO(out.content)))

    def close(self):
        self.engine.stop()
        self.loop.join(30)
        self.server.stop()
        self.http.close()


def test_a_flux_comfyui_tree_through_the_library_and_the_engine(tiny, tiny_root, tmp_path, no_hub):
    """GET /library lists the denoiser with the companions it will use, complete, and its `model`
    generates over HTTP the image the diffusers folder gives."""
    from extensions_built_in.inference_engine.engine import Engine
    folder = tiny("flux")
    denoiser, given = comfy_tree("flux", folder, tmp_path)
    assert given == {}
    srv = Served(Engine(output_folder=f"{tmp_path}/outputs", assets_folder=f"{tmp_path}/assets", worker="thread",
                        model_roots=[str(tiny_root), str(tmp_path)], model_folders=[str(tmp_path / "ComfyUI")]))
    try:
        doc = srv.http.get("/library").json()
        (e,) = [e for e in doc["entries"] if e.get("path") == denoiser]
        assert (e["arch"], e["variant"], e["complete"]) == ("flux", "dev", True), e
        names = {role: c["name"] for role, c in e["companions"].items() if "name" in c}
        assert names == {"text_encoder": "text_encoders/clip_l.safetensors",
                         "text_encoder_2": "text_encoders/t5xxl_fp16.safetensors", "vae": "vae/ae.safetensors",
                         "tokenizer": "ComfyUI comfy/sd1_tokenizer",
                         "tokenizer_2": "ComfyUI comfy/text_encoders/t5_tokenizer"}
        assert np.array_equal(srv.image(e["model"]), srv.image({"arch": "flux", "name_or_path": folder}))
    finally:
        srv.close()


def test_a_profile_naming_a_comfyui_denoiser_alone_generates_through_the_engine(tiny, tiny_root, tmp_path, no_hub):
    """The engine's job config with a profiles file and no model folders: the profile's file lies in a
    ComfyUI tree, which its model roots then hold, so its companions load; the image is the folder's."""
    from types import SimpleNamespace

    from extensions_built_in.inference_engine.InferenceEngine import InferenceEngine
    folder = tiny("flux")
    denoiser, _given = comfy_tree("flux", folder, tmp_path)
    (tmp_path / "profiles.toml").write_text(f'[model_profiles.my-flux]\narchitecture = "flux"\n'
                                            f'diffusion_model = "{denoiser}"\n')
    proc = InferenceEngine(0, SimpleNamespace(name="profile-files"), {"type": "InferenceEngine", "device": "cpu",
                           "engine": {"job_folder": str(tmp_path / "job"), "worker": "thread",
                                      "profiles_file": str(tmp_path / "profiles.toml"),
                                      "model_roots": [str(tiny_root)]}})
    assert str(tmp_path / "ComfyUI" / "models") in proc.model_roots
    srv = Served(proc.make_engine())
    try:
        assert np.array_equal(srv.image({"profile": "my-flux"}), srv.image({"arch": "flux", "name_or_path": folder}))
    finally:
        srv.close()


def test_a_wan_tree_is_complete_with_the_tokenizer_its_umt5_file_embeds(tiny, tmp_path, no_hub):
    from toolkit import library
    denoiser, given = comfy_tree("wan21", tiny("wan21"), tmp_path)
    assert given == {}
    doc = library.scan([str(tmp_path / "ComfyUI")], hub_cache=False)
    (e,) = [e for e in doc["entries"] if e.get("path") == denoiser]
    assert e["complete"] and e["missing"] == []
    assert e["companions"]["tokenizer"]["name"] == "the spiece_model in umt5_xxl_fp16.safetensors"
    assert e["model"]["components"] == {"text_encoder": e["companions"]["text_encoder"]["path"],
                                        "vae": e["companions"]["vae"]["path"]}
    assert load(e["model"]).loaded["tokenizer"] is not None


def test_a_gguf_flux_takes_its_config_from_the_file_and_the_trees_companions(tmp_path, no_hub, monkeypatch):
    """ComfyUI-GGUF's layout: a GGUF denoiser in models/unet/ beside ComfyUI's clip_l, t5xxl and ae
    files loads with its config from its shapes, the same model as with a diffusers folder's config."""
    from toolkit.models.tiny.gguf import make_tiny_gguf
    made = make_tiny_gguf("flux", tmp_path / "flux-gguf", qtypes=("Q8_0",))
    folder, gguf = str(made["folder"]), made["files"]["Q8_0"]
    models = tmp_path / "ComfyUI" / "models"
    (models / "unet").mkdir(parents=True)
    target = models / "unet" / "flux1-dev-Q8_0.gguf"
    shutil.copy(gguf, target)
    write_component("flux", folder, "text_encoder", models / "text_encoders" / "clip_l.safetensors")
    write_component("flux", folder, "text_encoder_2", models / "text_encoders" / "t5xxl_fp16.safetensors")
    write_component("flux", folder, "vae", models / "vae" / "ae.safetensors")
    for role, vocab in (("tokenizer", "clip_l"), ("tokenizer_2", "t5_xxl")):
        shutil.copytree(os.path.join(folder, role), tmp_path / "ComfyUI" / VOCABULARIES[vocab].comfy[0])
    holder = load({"arch": "flux", "name_or_path": str(target)})
    assert holder.loaded["transformer"]._aitk_identity.fmt == "gguf-Q8_0"
    for role in ("text_encoder", "text_encoder_2", "vae"):
        assert holder.loaded[role]._aitk_checkpoint_report["path"].startswith(str(models))
    reference = load({"arch": "flux", "name_or_path": str(target), "extras_name_or_path": folder})
    assert_same_model(holder, reference, tmp_path)
    # GET /library offers it with those companions: its `model` is the request
    from toolkit import library
    (e,) = [e for e in library.scan([str(tmp_path / "ComfyUI")], hub_cache=False)["entries"]
            if e.get("path") == str(target)]
    assert e["complete"] and e["format"] == "GGUF Q8_0" and e["parts"]["transformer"]["known"] == "tiny-gguf"
    assert e["model"]["components"] == {"text_encoder": str(models / "text_encoders" / "clip_l.safetensors"),
                                        "text_encoder_2": str(models / "text_encoders" / "t5xxl_fp16.safetensors"),
                                        "vae": str(models / "vae" / "ae.safetensors")}
    assert "extras_name_or_path" not in e["model"]
    # shapes of no known config, and no config folder anywhere: refused naming the file
    from toolkit.models.archs import flux
    known = {k: v for k, v in flux.TRANSFORMER_KNOWN.items() if k != "tiny-gguf"}
    monkeypatch.setattr(flux, "TRANSFORMER_KNOWN", known)
    with pytest.raises(ConfigError) as e:
        load({"arch": "flux", "name_or_path": str(target)})
    assert e.value.key == "model.name_or_path" and "flux1-dev-Q8_0.gguf" in e.value.message
    assert "match no known config" in e.value.message and "extras_name_or_path" in e.value.message


def test_profiles_name_a_comfyui_denoiser_or_an_all_in_one_checkpoint(tiny, tmp_path, no_hub):
    """A profile naming the denoiser file alone takes its companions from its tree; one naming each
    file (text_encoder_2 too) reads those; one naming an all-in-one checkpoint reads it whole."""
    from toolkit.models.base_model import get_model_class
    from toolkit.profiles import load_profiles
    from toolkit.request import resolve_request
    folder = tiny("flux")
    denoiser, _given = comfy_tree("flux", folder, tmp_path)
    models = tmp_path / "ComfyUI" / "models"
    aio = models / "checkpoints" / "flux1-dev-tiny.safetensors"
    write_checkpoint("flux", folder, aio)
    (tmp_path / "p.toml").write_text(f"""
[model_profiles.flux-alone]
architecture = "flux"
diffusion_model = "{denoiser}"
[model_profiles.flux-files]
architecture = "flux"
diffusion_model = "{denoiser}"
text_encoder = "{models}/text_encoders/clip_l.safetensors"
text_encoder_2 = "{models}/text_encoders/t5xxl_fp16.safetensors"
vae = "{models}/vae/ae.safetensors"
[model_profiles.flux-aio]
architecture = "flux"
checkpoint = "{aio}"
tokenizer = "{folder}/tokenizer"
""")
    prof = load_profiles(str(tmp_path / "p.toml"))
    reference = load({"arch": "flux", "name_or_path": folder})
    for name in ("flux-alone", "flux-files", "flux-aio"):
        _work = resolve_request({"profile": name}, {}, profiles=prof)
        mc, _ = _work.model, _work.sample
        holder = get_model_class(mc.arch)(mc, device="cpu").load_model()
        for role in ("transformer", "text_encoder", "text_encoder_2", "vae"):
            a, b = holder.loaded[role].state_dict(), reference.loaded[role].state_dict()
            assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in b), (name, role)
    # a role the arch does not have is named
    (tmp_path / "bad.toml").write_text(f'[model_profiles.z]\narchitecture = "zimage"\ntext_encoder_2 = "{denoiser}"\n')
    with pytest.raises(ConfigError) as e:
        load_profiles(str(tmp_path / "bad.toml"))
    assert e.value.key == "model_profiles.z.text_encoder_2" and "zimage has no text_encoder_2" in e.value.message
