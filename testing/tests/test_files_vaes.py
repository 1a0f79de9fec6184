"""VAE files in their original layouts (formats/vaes.py): every tiny VAE an arch's recipe builds, written as
the file people have (ComfyUI `models/vae/`, or under its all-in-one checkpoint prefix) with the kind's
inverse, checked the other way round by the kind's converter (diffusers' own where it has one), read
offline with read_component and equal to the diffusers folder's VAE bit for bit on CPU float32 (weights,
config and a decode); real-dimension headers over sparse files give the real known configs; a file of
another kind is refused naming the role and the file."""
import json
import os

import pytest
import torch
from safetensors import safe_open

from testing.sparse_files import write_sparse
from toolkit.models.arch import load_class, load_object
from toolkit.models.formats import flux2_vae, oobleck, vaes
from toolkit.models.formats.component_file import align, convert, read_component
from toolkit.models.formats.detect import _found
from toolkit.models.formats.file_view import FileKindError, derive
from toolkit.models.formats.safetensors_header import check_file

# (arch whose tiny recipe builds the VAE, the kind its file is read with, its known config's name)
TINY = [("flux", "FLUX_AE", "tiny"), ("chroma", "FLUX_AE", "tiny"), ("flux_kontext", "FLUX_AE", "tiny"),
        ("zimage", "FLUX_AE", "tiny"), ("lumina2", "FLUX_AE", "tiny"), ("sd3", "SD3_VAE", "tiny"),
        ("sdxl", "SDXL_VAE", "tiny"), ("wan21", "WAN21_VAE", "tiny"), ("wan22_a14b", "WAN21_VAE", "tiny"),
        ("qwen_image", "QWEN_IMAGE_VAE", "tiny"), ("qwen_image_edit", "QWEN_IMAGE_VAE", "tiny"),
        ("krea2", "QWEN_IMAGE_VAE", "tiny-krea2"), ("wan22_5b", "WAN22_VAE", "tiny"), ("ltx", "LTX_VAE", "tiny"),
        ("hunyuan_video", "HUNYUAN_VIDEO_VAE", "tiny"), ("flux2_klein", "FLUX2_VAE", "tiny"),
        ("stable_audio", "OOBLECK_VAE", "tiny")]
KNOWN = {"FLUX_AE": vaes.FLUX_AE_KNOWN, "SD3_VAE": vaes.SD3_VAE_KNOWN, "SDXL_VAE": vaes.SDXL_VAE_KNOWN,
         "WAN21_VAE": vaes.WAN21_VAE_KNOWN, "QWEN_IMAGE_VAE": vaes.QWEN_IMAGE_VAE_KNOWN, "WAN22_VAE": vaes.WAN22_VAE_KNOWN,
         "LTX_VAE": vaes.LTX_VAE_KNOWN, "HUNYUAN_VIDEO_VAE": vaes.HUNYUAN_VIDEO_VAE_KNOWN,
         "FLUX2_VAE": flux2_vae.KNOWN,
         "OOBLECK_VAE": oobleck.KNOWN}
CLASS = {"FLUX_AE": "AutoencoderKL", "SD3_VAE": "AutoencoderKL", "SDXL_VAE": "AutoencoderKL",
         "WAN21_VAE": "AutoencoderKLWan", "QWEN_IMAGE_VAE": "AutoencoderKLQwenImage", "WAN22_VAE": "AutoencoderKLWan",
         "LTX_VAE": "AutoencoderKLLTXVideo", "HUNYUAN_VIDEO_VAE": "AutoencoderKLHunyuanVideo",
         "FLUX2_VAE": "AutoencoderKLFlux2", "OOBLECK_VAE": "AutoencoderOobleck"}
# the real configs, each a file of its kind at real dimensions
REAL = [(name, known) for name, table in KNOWN.items() for known in table if not known.startswith("tiny")]
# the kinds whose files have the same shapes (a file of one fits the other's role too)
SAME_SHAPES = [{"FLUX_AE", "SD3_VAE"}, {"WAN21_VAE", "QWEN_IMAGE_VAE"}]


def _folder_vae(folder):
    with open(os.path.join(folder, "vae", "config.json")) as f:
        config = json.load(f)
    state = {}
    sub = os.path.join(folder, "vae")
    for name in sorted(n for n in os.listdir(sub) if n.endswith(".safetensors")):
        with safe_open(os.path.join(sub, name), "pt") as f:
            state.update({k: f.get_tensor(k) for k in f.keys()})
    return config, state


def write_vae(folder, sf, out_path, prefix: str = "") -> str:
    """The folder's VAE in the kind's original layout, under `prefix`, after checking that the kind's
    converter gives the folder's tensors back exactly (the tiny factory's rule, for a kind no arch row
    names yet)."""
    config, state = _folder_vae(folder)
    original = load_object(sf.original)(dict(state))
    back = align(convert(sf, {k: v.clone() for k, v in original.items()}, config), state)
    assert set(back) == set(state), (sorted(set(state) - set(back))[:3], sorted(set(back) - set(state))[:3])
    assert all(torch.equal(back[k].reshape(state[k].shape), state[k]) for k in state)
    assert set(original) != set(state)            # it is another layout, not the library's names
    from safetensors.torch import save_file
    os.makedirs(os.path.dirname(str(out_path)), exist_ok=True)
    save_file({prefix + k: v.contiguous() for k, v in original.items()}, str(out_path))
    return str(out_path)


def _latent(model):
    torch.manual_seed(0)
    c = model.config
    channels = c.get("latent_channels") or c.get("z_dim")
    if type(model).__name__ == "AutoencoderOobleck":                              # audio: (B, C, T)
        return torch.randn(1, c["decoder_input_channels"], 8)
    if type(model).__name__ in ("AutoencoderKL", "AutoencoderKLFlux2"):          # image VAEs: no frames
        return torch.randn(1, channels, 8, 8)
    side = 2 if type(model).__name__ == "AutoencoderKLLTXVideo" else 4 if c.get("patch_size") else 8
    return torch.randn(1, channels, 2, side, side)


@pytest.mark.parametrize("arch,name,known", TINY)
@pytest.mark.parametrize("where", ["component", "checkpoint"])
def test_a_tiny_vae_file_reads_as_its_folder(arch, name, known, where, tiny, tmp_path, no_hub):
    sf, cls = vaes.VAES[name], load_class(CLASS[name])
    folder = tiny(arch)
    prefix = "" if where == "component" else sf.prefixes[0]
    path = write_vae(folder, sf, tmp_path / f"{arch}_vae.safetensors", prefix)
    assert _found(check_file(path), sf) == prefix
    model = read_component(path, sf, prefix, cls, role="vae")
    assert model._aitk_file_config.known == known
    reference = cls.from_pretrained(os.path.join(folder, "vae"), torch_dtype=torch.float32).eval()
    want = {k: v for k, v in reference.config.items() if not k.startswith("_")}
    assert {k: model.config[k] for k in want} == want
    a, b = model.state_dict(), reference.state_dict()
    assert set(a) == set(b)
    assert all((a[k].dtype == torch.float32 or not b[k].is_floating_point()) and torch.equal(a[k], b[k]) for k in b)
    z = _latent(reference)
    with torch.no_grad():
        assert torch.equal(model.decode(z).sample, reference.decode(z).sample)


@pytest.mark.parametrize("arch,name,known", TINY)
def test_the_known_tiny_configs_are_what_the_tiny_factory_builds(arch, name, known, tiny):
    config, _ = _folder_vae(tiny(arch))
    entry = KNOWN[name][known]
    assert {k: config[k] for k in entry if k in config} == {k: (list(v) if isinstance(v, tuple) else v)
                                                             for k, v in entry.items() if k in config}
    assert set(entry) >= {k for k in config if not k.startswith("_")}      # every key the factory's config has


def test_each_file_is_only_its_kind(tiny, tmp_path):
    """A file matches the kinds of its layout and no other (the shape-identical pairs match each other)."""
    files = {name: write_vae(tiny(arch), vaes.VAES[name], tmp_path / f"{name}.safetensors")
             for arch, name, _ in TINY if arch in ("flux", "sd3", "sdxl", "wan21", "qwen_image", "wan22_5b", "ltx",
                                                   "hunyuan_video", "flux2_klein", "stable_audio")}
    for name, path in files.items():
        header = check_file(path)
        fits = {other for other, sf in vaes.VAES.items() if _found(header, sf) is not None and _derives(header, sf)}
        assert fits == next((s for s in SAME_SHAPES if name in s), {name}), name


def _derives(header, sf) -> bool:
    try:
        derive(header, sf, "")
    except FileKindError:
        return False
    return True


def write_header_only(path, tensors: dict):
    """A safetensors file with `tensors`' shapes (name -> tensor, meta is fine) over zero data: a sparse
    file, so real dimensions need no real weights."""
    write_sparse(path, {k: t.shape for k, t in tensors.items()})


def _real(name, known):
    from accelerate import init_empty_weights
    cls = load_class(CLASS[name])
    with init_empty_weights():
        return cls.from_config(dict(KNOWN[name][known]))


@pytest.mark.parametrize("name,known", REAL)
def test_real_dimension_headers_detect_as_their_real_configs(name, known, tmp_path):
    sf = vaes.VAES[name]
    state = _real(name, known).state_dict()
    original = load_object(sf.original)(dict(state))
    for prefix in sf.prefixes:
        path = tmp_path / f"real_{prefix or 'file'}.safetensors"
        write_header_only(path, {prefix + k: v for k, v in original.items()})
        header = check_file(str(path))
        assert _found(header, sf) == prefix
        fc = derive(header, sf, prefix)
        same = next((s for s in SAME_SHAPES if name in s), {name})
        assert fc.known == known and fc.config == KNOWN[name][known], (prefix, fc.known)
        assert {other for other, o in vaes.VAES.items() if _found(header, o) == prefix} == same


@pytest.mark.parametrize("name,known", REAL)
def test_the_real_original_layouts_convert_back(name, known):
    """At real dimensions (on the meta device), the kind's converter maps every original tensor onto the
    library model's names and shapes (the inverse is checked the other way round)."""
    sf = vaes.VAES[name]
    state = _real(name, known).state_dict()
    back = align(convert(sf, load_object(sf.original)(dict(state)), dict(KNOWN[name][known])), state)
    assert set(back) == set(state) and all(back[k].numel() == state[k].numel() for k in state)


def test_the_wan21_mapping_is_diffusers_own_at_real_depth():
    """diffusers' convert_wan_vae_to_diffusers is written for Wan 2.1's real depth (2 resnets a level):
    there, it and the kind's converter (ours, for any depth) name every tensor alike."""
    from diffusers.loaders.single_file_utils import convert_wan_vae_to_diffusers
    state = _real("WAN21_VAE", "wan2.1-vae").state_dict()
    original = load_object(vaes.WAN21_VAE.original)(dict(state))
    ours = convert(vaes.WAN21_VAE, dict(original), vaes.WAN21_VAE_KNOWN["wan2.1-vae"])
    assert set(convert_wan_vae_to_diffusers(dict(original))) == set(ours) == set(state)


def test_comfyuis_hunyuan_video_names():
    """ComfyUI's file names its tensors as its LDM VAE does, one level deeper for the 3D convolutions,
    the attention as 1x1x1 convolutions (the names its loader reports for such a file)."""
    original = load_object(vaes.HUNYUAN_VIDEO_VAE.original)(_real("HUNYUAN_VIDEO_VAE", "hunyuan-video-vae").state_dict())
    for key in ("decoder.up.0.block.0.nin_shortcut.conv.weight", "decoder.mid.attn_1.k.weight", "decoder.norm_out.weight",
                "decoder.mid.block_1.conv1.conv.weight", "encoder.down.0.downsample.conv.conv.weight"):
        assert key in original, key
    assert original["decoder.mid.attn_1.q.weight"].shape == (512, 512, 1, 1, 1)


def test_tencents_hunyuan_video_layout_reads_too(tiny, tmp_path, no_hub):
    """Tencent's checkpoint has diffusers' names already (its safetensors copies too): read as it is."""
    from safetensors.torch import save_file
    _, state = _folder_vae(tiny("hunyuan_video"))
    path = str(tmp_path / "hunyuan_video_vae_fp32.safetensors")
    save_file(state, path)
    model = read_component(path, vaes.HUNYUAN_VIDEO_VAE, "", load_class("AutoencoderKLHunyuanVideo"), role="vae")
    assert model._aitk_file_config.known == "tiny"
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())


@pytest.mark.parametrize("given,read_as,needle", [
    ("wan21", "WAN22_VAE", "encoder.downsamples.0.downsamples.0.residual.0.gamma"),   # Wan 2.1 given for Wan 2.2
    ("sdxl", "FLUX_AE", "latent_channels 4"),                                           # SDXL's for Flux's
    ("flux", "HUNYUAN_VIDEO_VAE", "encoder.conv_in.conv.weight"),                     # an image VAE for a video one
    ("hunyuan_video", "LTX_VAE", "per_channel_statistics.mean-of-means"),
])
def test_a_vae_of_another_kind_is_refused_naming_the_role_and_file(given, read_as, needle, tiny, tmp_path):
    name = next(n for a, n, _ in TINY if a == given)
    path = write_vae(tiny(given), vaes.VAES[name], tmp_path / "models" / "vae" / f"{given}_vae.safetensors")
    with pytest.raises(FileKindError) as e:
        read_component(path, vaes.VAES[read_as], "", load_class(CLASS[read_as]), role="vae")
    message = str(e.value)
    assert message.startswith(f"vae: {given}_vae.safetensors: ") and needle in message
    assert str(tmp_path) not in message                # the basename, never the path


def test_shapes_of_no_known_config_are_refused_naming_the_nearest(tiny, tmp_path):
    """A Flux-layout VAE of no known config's shapes (the tiny widths, the real depth) is not guessed at."""
    from safetensors.torch import load_file, save_file
    path = write_vae(tiny("flux"), vaes.FLUX_AE, tmp_path / "odd.safetensors")
    state = load_file(path)
    state.update({k.replace(".block.0.", ".block.1."): v.clone() for k, v in state.items()      # 2 resnets a level
                  if k.startswith("encoder.down.") and ".block.0." in k})
    save_file(state, path)
    with pytest.raises(FileKindError) as e:
        derive(check_file(path), vaes.FLUX_AE, "")
    assert "nearest known flux-ae: block_out_channels [8, 8, 16, 16] (not [128, 256, 512, 512])" in str(e.value)
