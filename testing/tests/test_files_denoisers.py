"""The DiT archs' ComfyUI denoiser files, offline: each tiny denoiser written as ComfyUI's files have it
(the row's original layout, under each of the prefixes those files use, in float32, bf16, fp16 and
ComfyUI scaled FP8), named as the model with nothing else but the other components from the tiny
folder, loads with its config from the file (no extras_name_or_path, no hub) and equals the folder's
model: bit for bit in float32 (weights and output), the cast's own rounding in bf16/fp16, within FP8's
bound. Real dimensions without real weights: each known real config, built on the meta device and
written as an original-layout header over a sparse file, is detected as that config and its variant.
Where two archs take the same file (FLUX.1 dev / Kontext, Qwen-Image / Edit, Wan 2.1 14B / a Wan 2.2
A14B expert / SkyReels V2, Wan 2.1 I2V / ChronoEdit), the detector names the first that guesses and says the
others fit, and `model.arch` decides."""
import json
import os

import numpy as np
import pytest
import torch

from testing.sparse_files import write_sparse
from testing.tiny_runs import load, realigned, run
from toolkit.config_modules import ModelConfig
from toolkit.errors import ConfigError
from toolkit.models.arch import DENOISER, TOKENIZER, load_object
from toolkit.models.formats.detect import detect_file
from toolkit.models.registry import ARCHS
from toolkit.models.tiny.checkpoints import original_state, write_component

# each arch's files; model.arch is given where another arch takes the same file first
DIT_ARCHS = ("auraflow", "chroma", "chronoedit", "cosmos2", "cosmos2_5", "ernie_image", "flex1", "flux", "flux2",
             "flux2_klein", "flux_control", "flux_kontext", "hidream", "hunyuan_image", "hunyuan_video", "hunyuan_video15",
             "hunyuan_video15_i2v", "kandinsky5", "kandinsky5_edit", "kandinsky5_i2v", "kandinsky5_image", "ltx",
             "ltx2", "lumina2", "mochi", "pixart", "qwen_image", "qwen_image_2", "qwen_image_edit",
             "qwen_image_layered", "sd3", "skyreels_v2", "skyreels_v2_df", "skyreels_v2_i2v", "stable_audio",
             "wan21", "wan21_i2v", "wan22_5b", "wan22_a14b", "wan22_a14b_i2v", "wan_vace", "zimage")
# (Kandinsky 5's tiny video and editing transformers have one shape; the real editing one is Image Lite's)
AMBIGUOUS = {"flux_kontext": "flux", "qwen_image_edit": "qwen_image", "wan22_a14b": "wan21", "skyreels_v2": "wan21",
             "skyreels_v2_i2v": "wan21_i2v", "chronoedit": "wan21_i2v", "kandinsky5_i2v": "kandinsky5",
             "kandinsky5_edit": "kandinsky5", "hunyuan_video15_i2v": "hunyuan_video15"}
# what a Wan 2.1 14B file (T2V, I2V) fits besides the Wan row the detector names
WAN_14B_ALIKE = ("skyreels_v2", "skyreels_v2_df", "wan22_a14b")
WAN_I2V_14B_ALIKE = ("chronoedit", "skyreels_v2_i2v")
PREFIXES = ("model.diffusion_model.", "diffusion_model.", "")
VOCABULARIES = ("clip_l", "clip_g", "clip_h", "t5_xxl", "umt5_xxl", "qwen2_5", "qwen3", "gemma2", "gemma3", "mistral3",
                "llama3", "ernie_mistral3", "ernie_ministral3_pe", "llama3_1", "pile_t5", "byt5")


def in_file(arch: str) -> tuple:
    """What ships with the denoiser in its file (Stable Audio's seconds conditioners)."""
    return tuple(c.role for c in ARCHS[arch].components if c.with_denoiser and c.single_file is not None)


def others(arch: str, folder: str, but=None) -> dict:
    """Every component but the denoisers and what their files hold (and the scheduler and guiders: the row's
    scheduler_file and guider_files), from the tiny folder."""
    but = set(in_file(arch) if but is None else but) | set(ARCHS[arch].guider_files)
    return {c.role: os.path.join(folder, c.folder) for c in ARCHS[arch].components
            if c.kind not in (DENOISER, "scheduler") and c.role not in but
            and os.path.isdir(os.path.join(folder, c.folder))}


def denoiser_files(arch: str, folder: str, tmp_path, dtype=None, prefix="model.diffusion_model.") -> dict:
    """{role: file} of each denoiser, written as ComfyUI's `diffusion_models/` files have it; a denoiser
    with parts of its own is one checkpoint, each part under its prefix."""
    from toolkit.models.tiny.checkpoints import write_checkpoint
    first, *rest = ARCHS[arch].denoiser_roles
    out = {role: str(tmp_path / f"{arch}_{role}.safetensors") for role in (first, *rest)}
    if in_file(arch):
        write_checkpoint(arch, folder, out[first], roles=(first, *in_file(arch)), dtype=dtype)
    else:
        write_component(arch, folder, first, out[first], prefix=prefix, dtype=dtype)
    for role in rest:
        write_component(arch, folder, role, out[role], prefix=prefix, dtype=dtype)
    return out


def model_of_files(arch: str, folder: str, files: dict, but=None) -> dict:
    first, *rest = ARCHS[arch].denoiser_roles
    model = {"name_or_path": files[first], "components": {**others(arch, folder, but), **{r: files[r] for r in rest}}}
    return {"arch": arch, **model} if arch in AMBIGUOUS else model


@pytest.fixture(scope="module")
def folder_model(tiny):
    cache = {}

    def get(arch):
        if arch not in cache:
            cache[arch] = load({"arch": arch, "name_or_path": tiny(arch)})
        return cache[arch]
    return get


# -- the files load offline and equal the folder's model ------------------------------------------------------
@pytest.mark.parametrize("arch", DIT_ARCHS)
def test_a_comfyui_denoiser_loads_offline_and_equals_its_folder(arch, tiny, tmp_path, no_hub, folder_model):
    folder = tiny(arch)
    prefix = PREFIXES[DIT_ARCHS.index(arch) % len(PREFIXES)]          # every prefix ComfyUI's files use, in turn
    files = denoiser_files(arch, folder, tmp_path, prefix=prefix)
    det = detect_file(files[ARCHS[arch].denoiser_roles[0]])
    sf = ARCHS[arch].component("transformer").single_file
    assert det.arch == AMBIGUOUS.get(arch, arch)
    assert det.parts["transformer"].prefix == (sf.prefixes[0] if in_file(arch) else prefix)
    assert det.parts["transformer"].config.known == "tiny" and set(in_file(arch)) <= set(det.parts)
    holder = load(model_of_files(arch, folder, files))
    reference = folder_model(arch)
    for role in ARCHS[arch].denoiser_roles + in_file(arch):
        module = holder.loaded[role]
        assert module._aitk_file_config.known == "tiny" and module._aitk_checkpoint_report["format"] == "original"
        a, b = module.state_dict(), reference.loaded[role].state_dict()
        assert set(a) == set(b)
        assert not [k for k in a if not torch.equal(a[k], b[k])], role
    # the scheduler from the row's scheduler_file (the repo's config), no folder: the same sampling
    public = lambda s: {k: v for k, v in s.config.items() if not k.startswith("_")}     # noqa: E731
    assert public(holder.loaded["scheduler"]) == public(reference.loaded["scheduler"])
    for role in ARCHS[arch].guider_files:       # and the guiders from its guider_files
        assert type(holder.loaded[role]) is type(reference.loaded[role])
        assert public(holder.loaded[role]) == public(reference.loaded[role]), role
    lat, out = run(realigned(holder), tmp_path)
    ref_lat, ref_out = run(realigned(reference), tmp_path)
    assert torch.equal(lat, ref_lat) and np.array_equal(out, ref_out)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16), ids=("bf16", "fp16"))
@pytest.mark.parametrize("arch", ("flux", "hunyuan_video", "lumina2", "sd3", "wan22_a14b", "zimage"))
def test_a_half_precision_file_loads_as_the_folder_model_cast(arch, dtype, tiny, tmp_path, no_hub, folder_model):
    folder = tiny(arch)
    holder = load(model_of_files(arch, folder, denoiser_files(arch, folder, tmp_path, dtype=dtype)))
    for role in ARCHS[arch].denoiser_roles:
        a, b = holder.loaded[role].state_dict(), folder_model(arch).loaded[role].state_dict()
        assert a.keys() == b.keys()
        assert not [k for k in a if not torch.equal(a[k], b[k].to(dtype).to(a[k].dtype))], role


# e4m3's 3 mantissa bits: a weight's relative (Frobenius) error after the per-tensor scale is about 2-3%
FP8_BOUND = 0.05


@pytest.mark.parametrize("arch", DIT_ARCHS)
def test_a_scaled_fp8_file_loads_without_a_config_folder(arch, tiny, tmp_path, no_hub, folder_model):
    from toolkit.models.formats.scaled_fp8 import ScaledFp8Linear
    from toolkit.models.tiny.comfy_fp8 import write_comfy_fp8
    folder = tiny(arch)
    files = {}
    for role in ARCHS[arch].denoiser_roles:
        files[role] = write_comfy_fp8(arch, folder, tmp_path / f"{arch}_{role}_fp8_scaled.safetensors", role=role)["path"]
    holder = load(model_of_files(arch, folder, files, but=()))       # FP8 files hold the denoiser alone
    for role in ARCHS[arch].denoiser_roles:
        module, reference = holder.loaded[role], dict(folder_model(arch).loaded[role].named_modules())
        assert module._aitk_checkpoint_report["format"] == "comfy_scaled_fp8" and module._aitk_file_config.known == "tiny"
        layers = {n: m for n, m in module.named_modules() if isinstance(m, ScaledFp8Linear)}
        assert layers
        for name, m in layers.items():
            w, ref = m.weight.float() * m.weight_scale.float(), reference[name].weight.float()
            assert float((w - ref).norm() / ref.norm()) <= FP8_BOUND, (role, name)


# -- all-in-one files: the denoiser part ----------------------------------------------------------------------
def test_a_flux_all_in_one_fp8_file_reads_its_denoiser(tiny, tmp_path, no_hub, folder_model):
    """ComfyUI's `flux1-dev-fp8.safetensors`: the denoiser (plain FP8, no scales) beside CLIP-L, T5 and the VAE.
    Here the text encoders and VAE come as components (their file kinds are other rows' work)."""
    from safetensors.torch import save_file
    folder = tiny("flux")
    tensors = {"model.diffusion_model." + k: v.to(torch.float8_e4m3fn)
               for k, v in original_state("flux", folder, "transformer").items()}
    for role, prefix in (("text_encoder", "text_encoders.clip_l.transformer."),
                         ("text_encoder_2", "text_encoders.t5xxl.transformer."), ("vae", "vae.")):
        tensors.update({prefix + k: v.to(torch.float8_e4m3fn) for k, v in _folder_state(folder, role).items()})
    path = str(tmp_path / "flux1-dev-fp8.safetensors")
    save_file(tensors, path)
    det = detect_file(path)
    assert det.arch == "flux" and det.parts["transformer"].prefix == "model.diffusion_model."
    holder = load({"name_or_path": path, "components": others("flux", folder)})
    assert holder.model_config.arch == "flux"
    a, b = holder.loaded["transformer"].state_dict(), folder_model("flux").loaded["transformer"].state_dict()
    assert not [k for k in a if not torch.equal(a[k], b[k].to(torch.float8_e4m3fn).float())]


@pytest.mark.parametrize("with_encoders", (True, False), ids=("with-encoders", "denoiser-and-vae"))
def test_an_sd3_all_in_one_file_reads_its_denoiser(with_encoders, tiny, tmp_path, no_hub, folder_model):
    """SAI's `sd3.5_large.safetensors` layout: the MMDiT under model.diffusion_model. with the VAE under
    first_stage_model., with or without text_encoders.clip_l / clip_g / t5xxl."""
    from safetensors.torch import save_file
    folder = tiny("sd3")
    tensors = {"model.diffusion_model." + k: v.half() for k, v in original_state("sd3", folder, "transformer").items()}
    parts = [("vae", "first_stage_model.")]
    if with_encoders:
        parts += [("text_encoder", "text_encoders.clip_l.transformer."),
                  ("text_encoder_2", "text_encoders.clip_g.transformer."),
                  ("text_encoder_3", "text_encoders.t5xxl.transformer.")]
    for role, prefix in parts:
        tensors.update({prefix + k: v.half() for k, v in _folder_state(folder, role).items()})
    path = str(tmp_path / "sd3.5-tiny.safetensors")
    save_file(tensors, path)
    holder = load({"name_or_path": path, "components": others("sd3", folder)})
    a, b = holder.loaded["transformer"].state_dict(), folder_model("sd3").loaded["transformer"].state_dict()
    assert not [k for k in a if not torch.equal(a[k], b[k].half().float())]


def _folder_state(folder, role) -> dict:
    from safetensors.torch import load_file
    sub = os.path.join(folder, role)
    state = {}
    for name in os.listdir(sub):
        if name.endswith(".safetensors"):
            state.update(load_file(os.path.join(sub, name)))
    return state


# -- where two archs take the same file ------------------------------------------------------------------------
def test_shared_layouts_are_guessed_and_model_arch_decides(tiny, tmp_path, no_hub):
    folder = tiny("flux_kontext")
    path = denoiser_files("flux_kontext", folder, tmp_path)["transformer"]
    det = detect_file(path)
    assert det.arch == "flux" and det.alike == ("flux_kontext",)
    assert det.public()["alike"] == ["flux_kontext"] and "flux_kontext" in det.public()["guessed"]
    assert ModelConfig.from_dict({"name_or_path": path}).arch == "flux"
    holder = load({"arch": "flux_kontext", "name_or_path": path, "components": others("flux_kontext", folder)})
    assert holder.loaded["transformer"]._aitk_file_config.known == "tiny"
    assert type(holder.pipeline).__name__ == "FluxKontextPipeline"


def test_a_chroma_file_carries_the_flag_its_inpaint_pipeline_reads(tiny, tmp_path, no_hub, folder_model):
    """ChromaInpaintPipeline reads transformer.config.guidance_embeds, which Chroma1-HD's config.json keeps
    from Flux (ChromaTransformer2DModel takes no such argument): read from a file, the denoiser has it as the
    folder's has, so the inpaint task runs on a ComfyUI file too."""
    folder = tiny("chroma")
    holder = load(model_of_files("chroma", folder, denoiser_files("chroma", folder, tmp_path)))
    assert holder.loaded["transformer"].config.guidance_embeds is False
    assert folder_model("chroma").loaded["transformer"].config.guidance_embeds is False


def test_a_wan22_a14b_model_takes_its_low_noise_expert_from_its_own_file(tiny, tmp_path, no_hub):
    folder = tiny("wan22_a14b")
    files = denoiser_files("wan22_a14b", folder, tmp_path)
    assert detect_file(files["transformer"]).alike == ("skyreels_v2", "wan22_a14b")   # the tiny Wan shapes
    model = {"arch": "wan22_a14b", "name_or_path": files["transformer"], "components": others("wan22_a14b", folder)}
    with pytest.raises(ConfigError) as e:                   # never the high-noise file twice
        load(model)
    assert e.value.key == "model.components.transformer_2" and "transformer_2" in e.value.message
    holder = load({**model, "components": {**model["components"], "transformer_2": files["transformer_2"]}})
    a, b = holder.loaded["transformer"].state_dict(), holder.loaded["transformer_2"].state_dict()
    assert any(not torch.equal(a[k], b[k]) for k in a)      # two experts, each from its file
    assert holder.pipeline.config.boundary_ratio == 0.875


def test_a_denoiser_alone_names_the_roles_it_still_needs(tiny, tmp_path, no_hub):
    folder = tiny("zimage")
    path = denoiser_files("zimage", folder, tmp_path)["transformer"]
    with pytest.raises(ConfigError) as e:       # its tokenizer given (the Qwen3 vocabulary is found elsewhere)
        load({"name_or_path": path, "components": {"tokenizer": os.path.join(folder, "tokenizer")}})
    assert e.value.key == "model.components.text_encoder"
    assert "text_encoder" in e.value.message and "vae" in e.value.message


def test_shapes_that_match_no_known_config_are_refused_naming_the_nearest(tiny, tmp_path):
    from safetensors.torch import load_file, save_file
    folder = tiny("flux")
    path = denoiser_files("flux", folder, tmp_path)["transformer"]
    state = {k: v for k, v in load_file(path).items() if ".single_blocks.1." not in k}
    save_file(state, path)
    det = detect_file(path)
    assert "nearest known tiny" in det.denoiser.error and "num_single_layers 1 (not 2)" in det.denoiser.error
    with pytest.raises(ConfigError) as e:
        ModelConfig.from_dict({"name_or_path": path})
    assert e.value.key == "model.name_or_path" and "num_single_layers" in e.value.message


# -- the rows' data ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", DIT_ARCHS)
def test_the_known_tiny_config_is_what_the_tiny_factory_builds(arch, tiny):
    folder = tiny(arch)
    spec = ARCHS[arch]
    for role in spec.denoiser_roles + in_file(arch):
        known = _known(spec.component(role).single_file)["tiny"]
        with open(os.path.join(folder, spec.component(role).folder, "config.json")) as f:
            config = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
        assert {k: config[k] for k in known} == _lists(known), role
        # what the entry leaves out is the library class's default
        defaults = _lists(_init_defaults(spec.component(role).load_class()))
        assert {k: config[k] for k in set(config) - set(known)} == {k: defaults[k] for k in set(config) - set(known)}


def _known(single_file) -> dict:
    """The known configs a row's config rule matches against: `<part>_config` uses its module's `<PART>_KNOWN`."""
    import importlib
    module, _, fn = single_file.config.rpartition(":")
    return getattr(importlib.import_module(module), fn.removesuffix("_config").upper() + "_KNOWN")


def _lists(d: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def _init_defaults(cls) -> dict:
    import inspect
    return {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()
            if p.default is not inspect.Parameter.empty}


@pytest.mark.parametrize("arch", DIT_ARCHS)
def test_the_scheduler_file_is_the_tiny_folders_scheduler(arch, tiny):
    """The row's scheduler_file is the repo's scheduler config; the tiny model is built with the same, so a
    model read from files samples as the folder model does."""
    from toolkit.models.arch import load_class
    spec = ARCHS[arch]
    config = dict(spec.scheduler_for_files())
    cls = load_class(config.pop("_class_name"))
    with open(os.path.join(tiny(arch), "scheduler", "scheduler_config.json")) as f:
        folder = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    built = {k: v for k, v in cls.from_config(config).config.items() if not k.startswith("_")}
    assert built == folder


@pytest.mark.parametrize("arch", [a for a in DIT_ARCHS if ARCHS[a].guider_files])
def test_the_guider_files_are_the_tiny_folders_guiders(arch, tiny):
    """Likewise each guider config the row holds: the tiny model's guiders are built from the same."""
    from toolkit.models.arch import load_class
    for role, config in ARCHS[arch].guider_files.items():
        config = dict(config)
        cls = load_class(config.pop("_class_name"))
        with open(os.path.join(tiny(arch), role, "guider_config.json")) as f:
            folder = json.load(f)
        assert folder["_class_name"] == cls.__name__
        built = {k: v for k, v in cls.from_config(config).config.items() if not k.startswith("_")}
        assert built == {k: v for k, v in folder.items() if not k.startswith("_")}, role


def test_every_tokenizer_names_an_agreed_vocabulary():
    for arch in DIT_ARCHS:
        for comp in ARCHS[arch].components:
            if comp.kind == TOKENIZER:
                assert comp.vocab in VOCABULARIES, (arch, comp.role)


# -- real dimensions, without real weights ---------------------------------------------------------------------
# (arch, known config, the arch the detector names, the variant it implies, the archs it says fit too)
REAL = (
    ("flux", "flux1-dev", "flux", "dev", ("flux_kontext",)),
    ("flux", "flux1-schnell", "flux", "schnell", ()),
    ("flex1", "flex1-alpha", "flex1", None, ()),
    ("flux_kontext", "flux1-kontext-dev", "flux", "dev", ("flux_kontext",)),
    ("chroma", "chroma1-hd", "chroma", None, ()),
    ("auraflow", "auraflow-v0.3", "auraflow", None, ()),
    ("flux2", "flux2-dev", "flux2", None, ()),
    ("flux2_klein", "flux2-klein-4b", "flux2_klein", "4b", ()),
    ("flux2_klein", "flux2-klein-9b", "flux2_klein", "9b", ()),
    ("hidream", "hidream-i1", "hidream", "full", ()),
    ("sd3", "sd3-medium", "sd3", "3-medium", ()),
    ("sd3", "sd3.5-large", "sd3", "3.5-large", ()),
    ("sd3", "sd3.5-medium", "sd3", "3.5-medium", ()),
    ("zimage", "z-image-turbo", "zimage", None, ()),
    ("qwen_image", "qwen-image", "qwen_image", None, ("qwen_image_edit",)),
    ("qwen_image_edit", "qwen-image-edit-2509", "qwen_image", None, ("qwen_image_edit",)),
    ("qwen_image_2", "qwen-image-2.1", "qwen_image_2", None, ()),
    ("qwen_image_layered", "qwen-image-layered", "qwen_image_layered", None, ()),
    ("wan21", "wan2.1-t2v-1.3b", "wan21", None, ()),
    ("wan21", "wan2.1-t2v-14b", "wan21", None, WAN_14B_ALIKE),
    ("wan22_a14b", "wan2.2-t2v-a14b", "wan21", None, WAN_14B_ALIKE),
    ("wan22_5b", "wan2.2-ti2v-5b", "wan22_5b", None, ()),
    ("wan21_i2v", "wan2.1-i2v-14b", "wan21_i2v", None, WAN_I2V_14B_ALIKE),
    ("skyreels_v2", "skyreels-v2-t2v-14b", "wan21", None, WAN_14B_ALIKE),
    ("skyreels_v2_df", "skyreels-v2-df-14b", "wan21", None, WAN_14B_ALIKE),
    ("skyreels_v2_df", "skyreels-v2-df-1.3b", "skyreels_v2_df", "1.3b-540p", ()),     # its fps embedding
    ("skyreels_v2_i2v", "skyreels-v2-i2v-14b", "wan21_i2v", None, WAN_I2V_14B_ALIKE),
    ("skyreels_v2_i2v", "skyreels-v2-i2v-1.3b", "skyreels_v2_i2v", "1.3b-540p", ()),
    ("chronoedit", "chronoedit-14b", "wan21_i2v", None, WAN_I2V_14B_ALIKE),
    ("wan22_a14b_i2v", "wan2.2-i2v-a14b", "wan22_a14b_i2v", None, ()),
    ("wan_vace", "wan2.1-vace-1.3b", "wan_vace", None, ()),
    ("wan_vace", "wan2.1-vace-14b", "wan_vace", None, ()),
    ("ltx", "ltxv-2b", "ltx", None, ()),
    ("ltx", "ltxv-13b", "ltx", None, ()),
    ("ltx2", "ltx-2-19b", "ltx2", "2.0", ()),
    ("ltx2", "ltx-2.3-22b", "ltx2", "2.3", ()),
    ("hunyuan_video", "hunyuanvideo", "hunyuan_video", None, ()),
    ("cosmos2", "cosmos-predict2-2b-t2i", "cosmos2", None, ()),
    ("cosmos2", "cosmos-predict2-14b-t2i", "cosmos2", "14b", ()),
    ("cosmos2_5", "cosmos-predict2.5-2b", "cosmos2_5", None, ()),
    ("cosmos2_5", "cosmos-predict2.5-14b", "cosmos2_5", "14b", ()),
    ("kandinsky5", "kandinsky5-lite-video", "kandinsky5", None, ()),
    ("kandinsky5", "kandinsky5-pro-video", "kandinsky5", "pro-sft-5s", ("kandinsky5_i2v",)),
    ("kandinsky5_i2v", "kandinsky5-pro-video", "kandinsky5", "pro-sft-5s", ("kandinsky5_i2v",)),
    ("kandinsky5_image", "kandinsky5-lite-image", "kandinsky5_image", None, ()),
    ("kandinsky5_edit", "kandinsky5-lite-edit", "kandinsky5_edit", None, ()),
    ("mochi", "mochi-1-preview", "mochi", None, ()),
    ("hunyuan_image", "hunyuanimage-2.1", "hunyuan_image", "base", ()),
    ("hunyuan_image", "hunyuanimage-2.1-distilled", "hunyuan_image", "distilled", ()),
    ("hunyuan_video15", "hunyuanvideo-1.5-t2v", "hunyuan_video15", None, ("hunyuan_video15_i2v",)),
    ("hunyuan_video15_i2v", "hunyuanvideo-1.5-i2v", "hunyuan_video15", None, ("hunyuan_video15_i2v",)),
    ("hunyuan_video15_i2v", "hunyuanvideo-1.5-i2v-step-distilled", "hunyuan_video15_i2v", "480p_step_distilled", ()),
    ("lumina2", "lumina-image-2.0", "lumina2", None, ()),
    ("pixart", "pixart-alpha-1024", "pixart", "alpha", ()),
    ("pixart", "pixart-sigma-1024", "pixart", "sigma", ()),
    ("stable_audio", "stable-audio-open-1.0", "stable_audio", None, ()),
    ("ernie_image", "ernie-image", "ernie_image", None, ()),
)


def write_header_only(path, arch: str, config: dict, prefix: str = "model.diffusion_model.", role="transformer"):
    """A safetensors file whose header has the shapes of `arch`'s denoiser at `config`, in the row's original
    layout, over zero data (a sparse file)."""
    from accelerate import init_empty_weights
    comp = ARCHS[arch].component(role)
    cls = comp.load_class()
    with init_empty_weights():
        model = cls.from_config(dict(config))
    state = model.state_dict()
    original = load_object(comp.single_file.original)(state) if comp.single_file.original else state
    write_sparse(path, {prefix + k: t.shape for k, t in original.items()})
    return str(path)


@pytest.mark.parametrize("arch,known,detected,variant,alike", REAL, ids=[r[1] for r in REAL])
def test_real_dimension_headers_are_detected_as_their_real_configs(arch, known, detected, variant, alike, tmp_path):
    config = _known(ARCHS[arch].component("transformer").single_file)[known]
    det = detect_file(write_header_only(tmp_path / f"{known}.safetensors", arch, config))
    part = det.parts["transformer"]
    assert (det.arch, det.variant, det.alike) == (detected, variant, alike) and part.error is None
    if detected == arch:
        assert part.config.known == known and part.config.config == config


def test_a_schnell_file_sets_the_schnell_defaults(tmp_path):
    from toolkit.models.archs.flux import TRANSFORMER_KNOWN
    path = write_header_only(tmp_path / "flux1-schnell.safetensors", "flux", TRANSFORMER_KNOWN["flux1-schnell"])
    mc = ModelConfig.from_dict({"name_or_path": path})
    assert (mc.arch, mc.variant) == ("flux", "schnell")
    spec = ARCHS["flux"]
    assert spec.sample_defaults(mc.variant)["num_inference_steps"] == 4
    sched = spec.scheduler_for_files(mc.variant)
    assert sched["shift"] == 1.0 and sched["use_dynamic_shifting"] is False
    assert spec.scheduler_for_files("dev")["use_dynamic_shifting"] is True


@pytest.mark.parametrize("known,variant", (("sd3-medium", "3-medium"), ("sd3.5-large", "3.5-large"),
                                           ("sd3.5-medium", "3.5-medium")))
def test_an_sd3_file_says_which_release_it_is(known, variant, tmp_path):
    from toolkit.models.archs.sd3 import TRANSFORMER_KNOWN
    path = write_header_only(tmp_path / f"{known}.safetensors", "sd3", TRANSFORMER_KNOWN[known])
    mc = ModelConfig.from_dict({"name_or_path": path})
    assert (mc.arch, mc.variant) == ("sd3", variant)
    assert ModelConfig.from_dict({"name_or_path": path, "variant": "3.5-large-turbo"}).variant == "3.5-large-turbo"


def test_a_wan_image_to_video_file_is_wan21_i2v(tmp_path):
    """ComfyUI's Wan 2.1 I2V file (36 input channels, the image projection) is its own arch now; it used to
    be refused as the nearest T2V config."""
    from toolkit.models.archs.wan21 import WAN_14B
    path = write_header_only(tmp_path / "wan2.1_i2v_480p_14B.safetensors", "wan21",
                             dict(WAN_14B, in_channels=36, image_dim=1280, added_kv_proj_dim=5120))
    det = detect_file(path)
    assert (det.arch, det.alike) == ("wan21_i2v", WAN_I2V_14B_ALIKE) and det.denoiser.error is None
