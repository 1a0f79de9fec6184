"""The SD family's files people have, offline: SDXL all-in-one checkpoints (base, refiner, v-prediction /
zero-terminal-SNR, Playground-style EDM) and SD 2.x ones (512 epsilon, 768 v-prediction) load with
nothing downloaded, the arch and variant from the file, configs from its shapes and the arch rows'
known configs, tokenizers found offline; each equals the same model loaded from its diffusers folder,
bit for bit on CPU float32 (weights and a generated image, through the holder and the engine).

The OpenCLIP layout (fused in_proj, text_projection as a matrix, ln_final) is read by our converter
(formats/openclip.py), checked both ways: against open_clip itself (a tiny open_clip text tower's state
dict, read by our converter, gives the hidden states and pooled output open_clip computes) and against
diffusers' convert_open_clip_checkpoint on the files the tiny factory writes."""
import json
import os
import shutil

import numpy as np
import pytest
import torch

from testing.fixtures import input_image
from testing.tests.test_files_people_have import image as image_of
from testing.tests.test_files_people_have import load, same_weights
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError
from toolkit.models.formats.detect import detect_file
from toolkit.models.tiny.checkpoints import write_checkpoint

SDXL_ROLES = ("unet", "vae", "text_encoder", "text_encoder_2")
SD2_ROLES = ("unet", "vae", "text_encoder")
SAMPLE = {"prompt": "a red fox in snow", "width": 64, "height": 64, "num_inference_steps": 2, "seed": 3}


def comfyui_tree(root, tiny_folder, name="model.safetensors") -> str:
    """A ComfyUI checkout: `models/checkpoints/`, and its one CLIP tokenizer folder `comfy/sd1_tokenizer`
    (the tiny model's vocabulary; ComfyUI pads OpenCLIP's encoders with "!" in code, and so do we)."""
    shutil.copytree(os.path.join(tiny_folder, "tokenizer"), root / "comfy" / "sd1_tokenizer")
    (root / "models" / "checkpoints").mkdir(parents=True)
    return str(root / "models" / "checkpoints" / name)


@pytest.fixture(autouse=True)
def tokenizer_cache(tmp_path, monkeypatch):
    """The offline tokenizer cache (ComfyUI folders re-padded, vocabularies built) of this test alone."""
    monkeypatch.setenv("AITK_TOKENIZER_CACHE", str(tmp_path / "tokenizer_cache"))


def variant_folder(arch: str, out, *, scheduler=None, vae_config=None, build=None, pipeline=None, **init):
    """The tiny model of `arch` as a variant's diffusers folder: its scheduler, its VAE config (same
    weights), or another build (the refiner's) into another pipeline class."""
    from diffusers import AutoencoderKL

    from toolkit.models.arch import load_class
    from toolkit.models.registry import get_arch
    from toolkit.models.tiny import build_pipeline
    from toolkit.models.tiny.kit import Build
    spec = get_arch(arch)
    if build is None:
        pipe = build_pipeline(arch)
        components = dict(pipe.components)
    else:
        components = build(Build(spec, 0, 0))
    if scheduler is not None:
        components["scheduler"] = scheduler
    if vae_config is not None:
        base = {k: v for k, v in components["vae"].config.items() if not k.startswith("_")}
        vae = AutoencoderKL.from_config({**base, **vae_config})
        vae.load_state_dict(components["vae"].state_dict())
        components["vae"] = vae.eval()
    cls = load_class(pipeline or spec.pipeline)
    params = __import__("inspect").signature(cls.__init__).parameters
    kwargs = {k: v for k, v in {**spec.tiny.pipeline_kwargs, **init}.items() if k in params}
    cls(**{**{k: v for k, v in components.items() if k in params}, **kwargs}).save_pretrained(str(out))
    return str(out)


def aligned(holder):
    """`holder` with every weight in memory of its own. A folder's weights stay mapped at their offset in
    the safetensors file (diffusers reads them zero-copy), and oneDNN's float32 GEMM rounds differently by
    its operands' alignment (SDXL's pooled projection differs by one ulp for a misaligned weight): the
    same bits must meet the same kernels before two images can be equal bit for bit."""
    for module in holder.loaded.values():
        if hasattr(module, "parameters"):
            with torch.no_grad():
                for t in list(module.parameters()) + list(module.buffers()):
                    t.data = t.data.clone()
    return holder


def image(holder, tmp_path, name):
    return image_of(aligned(holder), tmp_path, name)


def scheduler(config: dict):
    import diffusers
    return getattr(diffusers, config["_class_name"]).from_config(config)


def pixels(path_or_bytes):
    import io

    from PIL import Image
    src = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
    return np.asarray(Image.open(src))


# -- the OpenCLIP layout, both ways ----------------------------------------------------------------------
def _open_clip_tower(layers=2, width=32, heads=2, vocab=800, output_dim=32):
    from open_clip.transformer import TextTransformer
    torch.manual_seed(0)
    tower = TextTransformer(context_length=77, vocab_size=vocab, width=width, heads=heads, layers=layers, mlp_ratio=2.0,
                            output_dim=output_dim).eval()
    with torch.no_grad():         # open_clip initialises norms to 1/0: vary them, so a mis-mapped norm shows
        for name, p in tower.named_parameters():
            if "ln_" in name:
                p.add_(torch.randn_like(p) * 0.1)
    return tower


def _ids(tokens=(798, 5, 17, 40, 799), pad=33):
    """Prompt ids as the tiny tokenizer gives them (start, words, end), padded with "!" (33) to 77."""
    return torch.tensor([list(tokens) + [pad] * (77 - len(tokens))])


def test_the_openclip_layout_reads_as_open_clip_computes():
    """A tiny open_clip text tower, its state dict read by our converter into transformers' classes: bigG
    (CLIPTextModelWithProjection) gives open_clip's tokens (after ln_final), its penultimate block's output
    (what SDXL conditions on) and its projected pooled output; H (CLIPTextModel, SD 2.x) runs all but the
    last block and then ln_final, as SD 2.x's penultimate-layer encoder does."""
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    from toolkit.models.formats.component_file import align
    from toolkit.models.formats.openclip import (OPENCLIP_G_KNOWN, OPENCLIP_H_KNOWN, convert_openclip,
                                                 convert_openclip_h)
    tower = _open_clip_tower()
    state = {k: v for k, v in tower.state_dict().items()}
    ids = _ids()
    with torch.no_grad():
        inter = tower.forward_intermediates(ids, output_fmt="NLC")
        tower.output_tokens = True
        pooled, tokens = tower(ids)
    blocks = inter["text_intermediates"]

    config = OPENCLIP_G_KNOWN["tiny"]
    g = CLIPTextModelWithProjection(CLIPTextConfig(**config)).eval()
    g.load_state_dict(align(convert_openclip(dict(state), config), g.state_dict()), strict=True)
    with torch.no_grad():
        out = g(ids, output_hidden_states=True)
    torch.testing.assert_close(out.last_hidden_state, tokens, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.hidden_states[-2], blocks[-2], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.text_embeds, pooled, rtol=1e-5, atol=1e-5)

    # SD 2.x: a tower one block deeper than the encoder, whose last block is never run
    tower_h = _open_clip_tower(layers=3)
    with torch.no_grad():
        inter_h = tower_h.forward_intermediates(_ids(), output_fmt="NLC")["text_intermediates"]
        want = tower_h.ln_final(inter_h[-2])
    config_h = OPENCLIP_H_KNOWN["tiny"]
    h = CLIPTextModel(CLIPTextConfig(**config_h)).eval()
    h.load_state_dict(align(convert_openclip_h(dict(tower_h.state_dict()), config_h), h.state_dict()), strict=True)
    with torch.no_grad():
        torch.testing.assert_close(h(_ids()).last_hidden_state, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch,prefix,role", [("sdxl", "conditioner.embedders.1.model.", "text_encoder_2"),
                                              ("sd2", "cond_stage_model.model.", "text_encoder")])
def test_the_openclip_files_read_as_diffusers_converter_reads_them(arch, prefix, role, tiny, tmp_path):
    """The tiny factory's OpenCLIP tensors, converted by diffusers' own convert_open_clip_checkpoint (what
    from_single_file uses), are the same tensors our converter gives (diffusers keeps the unused last
    layer of a tiny SD 2.x tower, whose real files it drops by name: resblocks.23)."""
    from diffusers.loaders.single_file_utils import convert_open_clip_checkpoint
    from safetensors.torch import load_file

    from toolkit.models.arch import load_class
    from toolkit.models.formats.component_file import align, build_empty, convert
    from toolkit.models.registry import get_arch
    folder = tiny(arch)
    ckpt = str(tmp_path / "ckpt.safetensors")
    write_checkpoint(arch, folder, ckpt)
    comp = get_arch(arch).component(role)
    with open(os.path.join(folder, comp.folder, "config.json")) as f:
        config = json.load(f)
    model = build_empty(load_class(comp.cls), config)
    checkpoint = load_file(ckpt)
    theirs = align(convert_open_clip_checkpoint(model, checkpoint, prefix=prefix), model.state_dict())
    ours = align(convert(comp.single_file, {k[len(prefix):]: v for k, v in checkpoint.items() if k.startswith(prefix)},
                         config), model.state_dict())
    assert set(ours) == set(model.state_dict()) and set(ours) <= set(theirs)
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    extra = set(theirs) - set(ours)
    assert all(".layers.2." in k for k in extra), sorted(extra)[:3]


# -- SDXL -------------------------------------------------------------------------------------------------
def test_an_sdxl_checkpoint_loads_offline_and_equals_its_folder(tiny, tmp_path, no_hub):
    """The A1111/Forge/Civitai layout (CLIP-L as embedder 0, OpenCLIP-bigG as embedder 1); tokenizers from
    the ComfyUI tree's one CLIP folder, the second re-padded with "!" as ComfyUI pads it."""
    folder = tiny("sdxl")
    ckpt = comfyui_tree(tmp_path, folder, "ponyish.safetensors")
    write_checkpoint("sdxl", folder, ckpt)
    det = detect_file(ckpt)
    assert det.arch == "sdxl" and det.variant == "base"
    assert {r: p.prefix for r, p in det.parts.items()} == {
        "unet": "model.diffusion_model.", "vae": "first_stage_model.",
        "text_encoder": "conditioner.embedders.0.transformer.", "text_encoder_2": "conditioner.embedders.1.model."}
    from_file = load({"name_or_path": ckpt})
    from_folder = load({"arch": "sdxl", "name_or_path": folder})
    same_weights(from_file, from_folder, SDXL_ROLES)
    for role in ("tokenizer", "tokenizer_2"):
        a, b = from_file.loaded[role], from_folder.loaded[role]
        assert a.pad_token == b.pad_token and a("a fox!", padding="max_length")["input_ids"] == \
            b("a fox!", padding="max_length")["input_ids"], role
    assert from_file.loaded["tokenizer_2"].pad_token == "!"
    assert (image(from_file, tmp_path, "a") == image(from_folder, tmp_path, "b")).all()


def test_an_sdxl_checkpoint_generates_through_the_engine(tiny, tmp_path, no_hub):
    """A request naming only the file (no arch): the engine detects it and generates the folder's image."""
    from testing.engine_client import InProcessEngine
    folder = tiny("sdxl")
    ckpt = comfyui_tree(tmp_path / "comfy", folder)
    write_checkpoint("sdxl", folder, ckpt)
    want = image(load({"arch": "sdxl", "name_or_path": folder}), tmp_path, "folder")
    eng = InProcessEngine(str(tmp_path / "engine"), token="t", model_roots=[str(tmp_path)])
    try:
        frames = eng.client.stream({"model": {"name_or_path": ckpt}, "sample": dict(SAMPLE)})
        assert frames[-1][0]["status"] == "ok", frames[-2][0]
        res = next(h for h, _ in frames if h["type"] == "result")
        assert (pixels(eng.client.get(res["url"]).content) == want).all()
        # /models serves each variant's sample: the refiner's refines an image the form asks for
        row = next(a for a in eng.client.get("/models").json()["archs"] if a["name"] == "sdxl")
        refiner = row["variant_samples"]["refiner"]
        assert refiner["task"] == "img2img" and refiner["init_img"] is None and refiner["strength"] == 0.3
        assert row["variant_tasks"]["refiner"] == ["img2img", "inpaint"] and row["variant_samples"]["vpred"]["height"] == 1216
    finally:
        eng.close()


@pytest.mark.parametrize("variant,extra", [
    ("vpred", {"v_pred": torch.zeros(0)}),
    ("vpred-ztsnr", {"v_pred": torch.zeros(0), "ztsnr": torch.zeros(0)}),
    ("playground", {"edm_mean": torch.zeros(1, 4, 1, 1), "edm_std": torch.ones(1, 4, 1, 1)}),
    ("edm-vpred", {"edm_vpred.sigma_max": torch.tensor([120.0]), "edm_vpred.sigma_min": torch.tensor([0.002])}),
])
def test_an_sdxl_variant_file_samples_as_its_folder(variant, extra, tiny, tmp_path, no_hub):
    """NoobAI's v_pred / ztsnr markers, Playground v2.5's edm_mean / edm_std, CosXL's edm_vpred keys: the
    file's variant, its scheduler (diffusers' EDM classes for EDM) and VAE latents (Playground's mean/std
    and 0.5 scale) equal a diffusers folder of that variant, image for image."""
    from toolkit.models.archs import sdxl
    spec = sdxl.SPEC
    vae = sdxl.PLAYGROUND_LATENTS if variant == "playground" else None
    folder = variant_folder("sdxl", tmp_path / "folder", scheduler=scheduler(spec.scheduler_for_files(variant)),
                            vae_config=vae)
    ckpt = comfyui_tree(tmp_path / "comfy", folder)
    write_checkpoint("sdxl", folder, ckpt, extra=extra)
    det = detect_file(ckpt)
    assert det.arch == "sdxl" and det.variant == variant
    from_file = load({"name_or_path": ckpt})
    assert from_file.model_config.variant == variant
    from_folder = load({"arch": "sdxl", "name_or_path": folder, "variant": variant})
    same_weights(from_file, from_folder, SDXL_ROLES)
    sa, sb = from_file.pipeline.scheduler, from_folder.pipeline.scheduler
    assert type(sa) is type(sb) and sa.config.prediction_type == sb.config.prediction_type
    public = lambda c: {k: v for k, v in dict(c).items() if not k.startswith("_")}   # noqa: E731
    assert public(from_file.loaded["vae"].config) == public(from_folder.loaded["vae"].config)
    assert (image(from_file, tmp_path, "a") == image(from_folder, tmp_path, "b")).all()
    assert spec.sample_defaults(variant) == from_file.spec.sample_defaults(from_file.model_config.variant)


def test_the_refiner_checkpoint_refines_as_its_folder(tmp_path, no_hub):
    """The refiner: OpenCLIP-G alone as embedder 0, a UNet with five added ids (the aesthetic score);
    img2img by default, as its repo ships it; a request with no image is refused naming init_img."""
    from toolkit.models.archs import sdxl
    folder = variant_folder("sdxl", tmp_path / "refiner", build=sdxl.tiny_refiner,
                            pipeline="StableDiffusionXLImg2ImgPipeline", **sdxl.REFINER_KWARGS)
    ckpt = str(tmp_path / "refiner.safetensors")
    write_checkpoint("sdxl", folder, ckpt, roles=("unet", "vae", "text_encoder_2"),
                     prefixes={"text_encoder_2": "conditioner.embedders.0.model."})
    det = detect_file(ckpt)
    assert det.arch == "sdxl" and det.variant == "refiner" and set(det.parts) == {"unet", "vae", "text_encoder_2"}
    assert det.parts["unet"].config.known == "tiny-refiner"
    tokenizer = os.path.join(folder, "tokenizer_2")
    from_file = load({"name_or_path": ckpt, "components": {"tokenizer_2": tokenizer}})
    from_folder = load({"arch": "sdxl", "variant": "refiner", "name_or_path": folder})
    assert from_file.loaded["text_encoder"] is None and from_file.loaded["tokenizer"] is None
    same_weights(from_file, from_folder, ("unet", "vae", "text_encoder_2"))
    with pytest.raises(ConfigError) as e:
        GenerateImageConfig.from_dict(SAMPLE, from_file.model_config)
    assert e.value.key == "sample.init_img"
    sample = {**SAMPLE, "init_img": input_image(tmp_path / "in.png"), "num_inference_steps": 4}
    out = []
    for holder, name in ((aligned(from_file), "a"), (aligned(from_folder), "b")):
        gen = GenerateImageConfig.from_dict(sample, holder.model_config)
        assert gen.task == "img2img" and gen.strength == 0.3
        out.append(pixels(holder.generate_images([gen], output_folder=str(tmp_path / name))[0]["path"]))
        assert holder.pipeline_for(gen).config.requires_aesthetics_score is True
    assert (out[0] == out[1]).all()


def test_a_kohya_lora_on_an_sdxl_checkpoint_equals_it_on_the_folder(tiny, tmp_path, no_hub):
    """Item 7: a kohya SDXL LoRA (sgm block names, lora_te1/te2) on the all-in-one file."""
    from toolkit.models.tiny.loras import write_tiny_lora
    folder = tiny("sdxl")
    ckpt = comfyui_tree(tmp_path, folder)
    write_checkpoint("sdxl", folder, ckpt)
    lora = str(write_tiny_lora("sdxl", folder, tmp_path / "kohya.safetensors", fmt="kohya", seed=1,
                               text_encoder=True))
    plain = image(load({"name_or_path": ckpt}), tmp_path, "plain")
    with_file = image(load({"name_or_path": ckpt, "lora_path": lora}), tmp_path, "a")
    with_folder = image(load({"arch": "sdxl", "name_or_path": folder, "lora_path": lora}), tmp_path, "b")
    assert (with_file == with_folder).all() and not (with_file == plain).all()


def test_an_fp16_sdxl_checkpoint_equals_the_fp16_folder(tmp_path, no_hub):
    from toolkit.models.tiny import build_pipeline
    half = tmp_path / "half"
    build_pipeline("sdxl").to(torch.float16).save_pretrained(half)
    ckpt = comfyui_tree(tmp_path / "comfy", str(half))
    write_checkpoint("sdxl", str(half), ckpt, dtype=torch.float16)
    a = load({"name_or_path": ckpt, "dtype": "fp16"})
    b = load({"arch": "sdxl", "name_or_path": str(half), "dtype": "fp16"})
    same_weights(a, b, SDXL_ROLES)


# -- SD 2.x -------------------------------------------------------------------------------------------------
def test_an_sd2_checkpoint_loads_offline_and_equals_its_folder(tiny, tmp_path, no_hub):
    folder = tiny("sd2")
    ckpt = comfyui_tree(tmp_path, folder, "sd21-base.safetensors")
    write_checkpoint("sd2", folder, ckpt)
    det = detect_file(ckpt)
    assert det.arch == "sd2" and det.variant == "512"
    assert {r: p.prefix for r, p in det.parts.items()} == {"unet": "model.diffusion_model.", "vae": "first_stage_model.",
                                                           "text_encoder": "cond_stage_model.model."}
    from_file = load({"name_or_path": ckpt})
    from_folder = load({"arch": "sd2", "name_or_path": folder})
    same_weights(from_file, from_folder, SD2_ROLES)
    assert from_file.loaded["tokenizer"].pad_token == "!"
    assert (image(from_file, tmp_path, "a") == image(from_folder, tmp_path, "b")).all()


def test_a_768_v_prediction_sd2_checkpoint_samples_as_its_folder(tiny, tmp_path, no_hub):
    """The `v_pred` key says v-prediction: variant 768, stable-diffusion-2-1's DDIM v-prediction scheduler."""
    from toolkit.models.archs import sd2
    folder = variant_folder("sd2", tmp_path / "v", scheduler=scheduler(sd2.V_SCHEDULER))
    ckpt = comfyui_tree(tmp_path / "comfy", folder)
    write_checkpoint("sd2", folder, ckpt, extra={"v_pred": torch.zeros(0)})
    det = detect_file(ckpt)
    assert det.variant == "768" and "v_pred" in det.parts["unet"].config.notes[0]
    from_file = load({"name_or_path": ckpt})
    from_folder = load({"arch": "sd2", "name_or_path": folder, "variant": "768"})
    assert from_file.model_config.variant == "768"
    assert from_file.pipeline.scheduler.config.prediction_type == "v_prediction"
    assert from_file.spec.sample_defaults("768")["width"] == 768
    same_weights(from_file, from_folder, SD2_ROLES)
    assert (image(from_file, tmp_path, "a") == image(from_folder, tmp_path, "b")).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_sd2_v_prediction_without_a_marker_is_comfyuis_test_of_one_bias(dtype, tiny, tmp_path):
    """No `v_pred` key: the spread of the last output block's first norm1 bias (read as raw bytes, no
    torch in detection) above 0.09 is v-prediction, as ComfyUI decides for SD 2.x files."""
    from safetensors.torch import load_file, save_file
    folder = tiny("sd2")
    ckpt = str(tmp_path / "ckpt.safetensors")
    write_checkpoint("sd2", folder, ckpt, dtype=dtype)
    assert detect_file(ckpt).variant == "512"
    state = load_file(ckpt)
    last = max(int(k.split(".")[3]) for k in state if k.startswith("model.diffusion_model.output_blocks."))
    key = f"model.diffusion_model.output_blocks.{last}.1.transformer_blocks.0.norm1.bias"
    g = torch.Generator().manual_seed(0)
    for std, want in ((0.2, "768"), (0.02, "512")):
        state[key] = (torch.randn(state[key].shape, generator=g) * std).to(dtype)
        path = str(tmp_path / f"std{std}.safetensors")
        save_file(state, path)
        assert detect_file(path).variant == want, (std, want)


# -- configs: the tiny ones are the factory's; real dimensions detect as the real ones ---------------
def test_the_known_tiny_configs_are_what_the_tiny_factory_builds(tiny, tmp_path):
    from toolkit.models.archs import sd2, sdxl
    from toolkit.models.formats.clip import CLIP_G_KNOWN, CLIP_L_KNOWN
    from toolkit.models.formats.openclip import OPENCLIP_G_KNOWN, OPENCLIP_H_KNOWN
    refiner = variant_folder("sdxl", tmp_path / "refiner", build=sdxl.tiny_refiner,
                             pipeline="StableDiffusionXLImg2ImgPipeline", **sdxl.REFINER_KWARGS)
    cases = [(tiny("sdxl"), "unet", sdxl.UNET_KNOWN["tiny"]), (tiny("sdxl"), "vae", sdxl.VAE_KNOWN["tiny"]),
             (tiny("sdxl"), "text_encoder", CLIP_L_KNOWN["tiny"]),
             (tiny("sdxl"), "text_encoder_2", OPENCLIP_G_KNOWN["tiny"]),
             (refiner, "unet", sdxl.UNET_KNOWN["tiny-refiner"]),
             (tiny("sd2"), "unet", sd2.UNET_KNOWN["tiny"]), (tiny("sd2"), "vae", sd2.VAE_KNOWN["tiny"]),
             (tiny("sd2"), "text_encoder", OPENCLIP_H_KNOWN["tiny"]),
             (tiny("sd3"), "text_encoder_2", CLIP_G_KNOWN["tiny-sd3"])]
    for folder, sub, known in cases:
        with open(os.path.join(folder, sub, "config.json")) as f:
            config = json.load(f)
        assert {k: config[k] for k in known if k in config} == {k: (list(v) if isinstance(v, tuple) else v)
                                                                 for k, v in known.items() if k in config}, (folder, sub)


@pytest.mark.parametrize("case", ["sdxl-base", "sdxl-refiner", "sdxl-vpred", "sd21-base", "sd21-v"])
def test_real_dimension_headers_detect_as_their_real_configs(case, tmp_path):
    """At real sizes, without real weights: each model built on the meta device from its known config,
    written as an original-layout header over a sparse file, detects as that config and variant."""
    from toolkit.models.archs import sd2, sdxl
    from toolkit.models.formats.clip import CLIP_L_KNOWN
    from toolkit.models.formats.openclip import OPENCLIP_G_KNOWN, OPENCLIP_H_KNOWN
    clip_l = ("transformers:CLIPTextModel", CLIP_L_KNOWN["clip-vit-large-patch14"], "clip")
    big_g = ("transformers:CLIPTextModelWithProjection", OPENCLIP_G_KNOWN["openclip-vit-bigg-14"], "openclip")
    vae_xl = ("AutoencoderKL", sdxl.VAE_KNOWN["sdxl-vae"], "vae")
    parts, markers, want = {
        "sdxl-base": ({"model.diffusion_model.": ("UNet2DConditionModel", sdxl.UNET_KNOWN["sdxl-base"], "unet"),
                       "first_stage_model.": vae_xl, "conditioner.embedders.0.transformer.": clip_l,
                       "conditioner.embedders.1.model.": big_g}, (),
                      ("sdxl", "base", {"unet": "sdxl-base", "vae": "sdxl-vae", "text_encoder": "clip-vit-large-patch14",
                                        "text_encoder_2": "openclip-vit-bigg-14"})),
        "sdxl-refiner": ({"model.diffusion_model.": ("UNet2DConditionModel", sdxl.UNET_KNOWN["sdxl-refiner"], "unet"),
                          "first_stage_model.": vae_xl, "conditioner.embedders.0.model.": big_g}, (),
                         ("sdxl", "refiner", {"unet": "sdxl-refiner", "vae": "sdxl-vae",
                                              "text_encoder_2": "openclip-vit-bigg-14"})),
        "sdxl-vpred": ({"model.diffusion_model.": ("UNet2DConditionModel", sdxl.UNET_KNOWN["sdxl-base"], "unet")},
                       ("v_pred", "ztsnr"), ("sdxl", "vpred-ztsnr", {"unet": "sdxl-base"})),
        "sd21-base": ({"model.diffusion_model.": ("UNet2DConditionModel", sd2.UNET_KNOWN["sd21-base"], "unet"),
                       "first_stage_model.": ("AutoencoderKL", sd2.VAE_KNOWN["sd-vae"], "vae"),
                       "cond_stage_model.model.": ("transformers:CLIPTextModel", OPENCLIP_H_KNOWN["openclip-vit-h-14"],
                                                   "openclip_h")}, (),
                      ("sd2", "512", {"unet": "sd21-base", "vae": "sd-vae", "text_encoder": "openclip-vit-h-14"})),
        "sd21-v": ({"model.diffusion_model.": ("UNet2DConditionModel", sd2.UNET_KNOWN["sd21"], "unet")}, ("v_pred",),
                   ("sd2", "768", {"unet": "sd21"})),
    }[case]
    path = tmp_path / f"{case}.safetensors"
    write_header_only(path, parts, markers)
    det = detect_file(str(path))
    assert (det.arch, det.variant, {r: p.config.known for r, p in det.parts.items()}) == want, det.problems


def write_header_only(path, parts: dict, markers=()):
    """A safetensors file whose header has the shapes of each part's model at its known config, in the
    original layout (LDM, CLIP, OpenCLIP), and `markers` as empty tensors, over zero data (sparse)."""
    from accelerate import init_empty_weights

    from testing.sparse_files import write_sparse
    from toolkit.models.arch import load_object
    from toolkit.models.formats import clip, ldm, openclip
    inverse = {"unet": ldm.unet_to_original, "vae": ldm.vae_to_original, "clip": clip.to_original,
               "openclip": openclip.to_openclip, "openclip_h": openclip.to_openclip_h}
    shapes = {}
    for prefix, (cls_name, config, layout) in parts.items():
        cls = load_object(cls_name)
        with init_empty_weights():
            model = cls.from_config(config) if hasattr(cls, "from_config") else cls(cls.config_class(**config))
        shapes.update({prefix + k: t.shape for k, t in inverse[layout](model.state_dict()).items()})
    write_sparse(path, shapes, "F16", markers)


# -- tokenizers and refusals -----------------------------------------------------------------------------
@pytest.mark.parametrize("vocab", ["clip_g", "clip_h"])
def test_the_openclip_tokenizers_are_built_offline_and_pad_with_bang(vocab, tmp_path, monkeypatch):
    """(d): no folder anywhere; built from open_clip_torch's BPE, padding with "!" (id 0), tokenizing as
    open_clip's reference tokenizer."""
    from open_clip.tokenizer import SimpleTokenizer
    from transformers import AutoTokenizer

    from toolkit.tokenizers import find_tokenizer
    import huggingface_hub.constants
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty_hub"))
    tok = AutoTokenizer.from_pretrained(find_tokenizer(vocab, role="tokenizer_2"))
    assert len(tok) == 49408 and tok.pad_token == "!" and tok.pad_token_id == 0
    text = "a photo of a cat, high detail"
    ids = tok(text, padding="max_length")["input_ids"]
    assert ids[1:1 + len(SimpleTokenizer().encode(text))] == SimpleTokenizer().encode(text) and ids[-1] == 0


def test_an_openclip_tower_of_no_known_shape_is_refused_naming_it(tiny, tmp_path, no_hub, monkeypatch):
    """An SDXL file whose OpenCLIP tower matches no known config is not guessed at: the load is refused
    naming the role, and detection says what differs."""
    import huggingface_hub.constants
    from safetensors.torch import load_file, save_file
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty_hub"))
    folder = tiny("sdxl")
    ckpt = comfyui_tree(tmp_path, folder)
    write_checkpoint("sdxl", folder, ckpt)
    state = load_file(ckpt)
    for k in [k for k in state if k.startswith("conditioner.embedders.1.model.transformer.resblocks.1.")]:
        del state[k]
    save_file(state, ckpt)
    det = detect_file(ckpt)
    assert det.arch == "sdxl" and "num_hidden_layers 1" in det.parts["text_encoder_2"].error
    with pytest.raises(ConfigError) as e:
        load({"name_or_path": ckpt})
    assert e.value.key == "model.name_or_path" and "text_encoder_2" in e.value.message and "OpenCLIP" in e.value.message
    ModelConfig.from_dict({"name_or_path": ckpt})          # the arch is still what the file says
