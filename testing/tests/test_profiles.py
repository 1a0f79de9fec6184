"""Profiles: parsing, validation, precedence; the local-only contract at the config level."""
import pytest

from toolkit.errors import ConfigError
from toolkit.profiles import load_profiles
from toolkit.request import resolve_request


def _files(tmp_path):
    for name in ("dm.safetensors", "te.safetensors", "vae.safetensors"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "tok").mkdir()
    return tmp_path


GOOD = """
default_model = "krea2-turbo"
[generation]
width = 768
[model_profiles.krea2-turbo]
architecture = "krea2"
variant = "turbo"
diffusion_model = "dm.safetensors"
text_encoder = "te.safetensors"
vae = "vae.safetensors"
tokenizer = "tok"
[model_profiles.krea2-raw]
architecture = "krea2"
variant = "raw"
diffusion_model = "dm.safetensors"
text_encoder = "te.safetensors"
vae = "vae.safetensors"
tokenizer = "tok"
[model_profiles.krea2-raw.defaults]
steps = 40
height = 896
"""


def test_parse_and_resolve(tmp_path):
    _files(tmp_path)
    (tmp_path / "p.toml").write_text(GOOD)
    prof = load_profiles(str(tmp_path / "p.toml"))
    assert prof.default_model == "krea2-turbo" and set(prof.profiles) == {"krea2-turbo", "krea2-raw"}
    p = prof.get("krea2-turbo")
    assert p.components["transformer"] == str(tmp_path / "dm.safetensors")       # relative to the file
    assert p.public() == {"name": "krea2-turbo", "architecture": "krea2", "variant": "turbo", "defaults": {}}
    _work = resolve_request({"profile": "krea2-turbo"}, {"prompt": "x"}, profiles=prof)
    mc, gen = _work.model, _work.sample
    assert mc.arch == "krea2" and mc.variant == "turbo" and mc.local_only and mc.profile == "krea2-turbo"
    assert (gen.num_inference_steps, gen.guidance_scale, gen.extras["mu"]) == (8, 0.0, 1.15)
    assert gen.width == 768 and gen.height == 1024                               # [generation] over the arch


def test_precedence_request_generation_profile_variant_arch(tmp_path):
    _files(tmp_path)
    (tmp_path / "p.toml").write_text(GOOD)
    prof = load_profiles(str(tmp_path / "p.toml"))
    _work = resolve_request("krea2-raw", {}, profiles=prof)
    _, gen = _work.model, _work.sample
    assert gen.num_inference_steps == 40          # profile defaults over the variant (52)
    assert gen.guidance_scale == 3.5              # the variant over the arch fallback
    assert gen.width == 768 and gen.height == 896  # [generation] over the profile; profile over the arch
    _work = resolve_request("krea2-raw", {"num_inference_steps": 3, "width": 512}, profiles=prof)
    _, gen = _work.model, _work.sample
    assert gen.num_inference_steps == 3 and gen.width == 512   # the request over everything


def test_request_can_add_model_options_to_a_profile(tmp_path):
    _files(tmp_path)
    (tmp_path / "p.toml").write_text(GOOD)
    prof = load_profiles(str(tmp_path / "p.toml"))
    _work = resolve_request({"profile": "krea2-turbo", "low_vram": True}, {}, profiles=prof)
    mc, _ = _work.model, _work.sample
    assert mc.low_vram and mc.profile == "krea2-turbo"


BAD = [
    ('[model_profiles.""]\narchitecture = "krea2"\ntokenizer = "tok"\n', "model_profiles"),
    ('[model_profiles.a]\narchitecture = "sdxl-turbo"\ntokenizer = "tok"\n', "model_profiles.a.architecture"),
    ('[model_profiles.a]\narchitecture = "krea2"\nvariant = "distilled"\ntokenizer = "tok"\n', "model_profiles.a.variant"),
    ('[model_profiles.a]\narchitecture = "krea2"\ntokenizer = "tok"\ncolour = "red"\n', "model_profiles.a.colour"),
    ('[model_profiles.a]\narchitecture = "krea2"\ntokenizer = 5\n', "model_profiles.a.tokenizer"),
    ('default_model = "nope"\n[model_profiles.a]\narchitecture = "krea2"\ntokenizer = "tok"\n', "default_model"),
    ('[model_profiles.a]\narchitecture = "krea2"\nvariant = "turbo"\n', "model_profiles.a"),
    ('[model_profiles.a]\narchitecture = "krea2"\ncheckpoint = "dm.safetensors"\n', "model_profiles.a.checkpoint"),
    ('[model_profiles.a]\narchitecture = "krea2"\ntokenizer = "tok"\n[model_profiles.a.defaults]\nsteps = 0\n',
     "model_profiles.a.defaults.num_inference_steps"),
    ('[generation]\nbogus = 1\n', "generation.bogus"),
    ('surprise = 1\n', "surprise"),
    ('[model_profiles.a\n', ""),
]


@pytest.mark.parametrize("text,key", BAD)
def test_validation_errors_name_the_key(tmp_path, text, key):
    _files(tmp_path)
    (tmp_path / "p.toml").write_text(text)
    with pytest.raises(ConfigError) as e:
        load_profiles(str(tmp_path / "p.toml"))
    assert e.value.key == key and e.value.file == str(tmp_path / "p.toml")
    assert str(tmp_path / "p.toml") in e.value.one_line()


def test_zimage_profile_has_no_variant(tmp_path):
    _files(tmp_path)
    (tmp_path / "p.toml").write_text('[model_profiles.z]\narchitecture = "z-image"\ncheckpoint = "tok"\n')
    prof = load_profiles(str(tmp_path / "p.toml"))
    assert prof.get("z").architecture == "zimage"
    (tmp_path / "p.toml").write_text('[model_profiles.z]\narchitecture = "zimage"\nvariant = "turbo"\ncheckpoint = "tok"\n')
    with pytest.raises(ConfigError, match="has no variants"):
        load_profiles(str(tmp_path / "p.toml"))



def test_an_edit_only_arch_has_a_profile_without_a_reference(tmp_path):
    """Qwen-Image-Edit needs a reference image on every request, not in its profile's defaults (which are
    still checked by its rules)."""
    _files(tmp_path)
    (tmp_path / "p.toml").write_text('[model_profiles.e]\narchitecture = "qwen_image_edit"\ncheckpoint = "tok"\n'
                                     '[model_profiles.e.defaults]\nsteps = 20\n')
    prof = load_profiles(str(tmp_path / "p.toml"))
    assert prof.get("e").defaults == {"num_inference_steps": 20} and "ctrl_img" not in prof.sample_defaults("e")
    (tmp_path / "p.toml").write_text('[model_profiles.e]\narchitecture = "qwen_image_edit"\ncheckpoint = "tok"\n'
                                     '[model_profiles.e.defaults]\nwidth = 1000\n')
    with pytest.raises(ConfigError) as e:
        load_profiles(str(tmp_path / "p.toml"))
    assert e.value.key == "model_profiles.e.defaults.width"

def test_yaml_profiles(tmp_path):
    _files(tmp_path)
    (tmp_path / "p.yaml").write_text("model_profiles:\n  k:\n    architecture: krea2\n    diffusion_model: dm.safetensors\n"
                                     "    text_encoder: te.safetensors\n    vae: vae.safetensors\n    tokenizer: tok\n")
    assert load_profiles(str(tmp_path / "p.yaml")).get("k").variant == "turbo"


def test_missing_configured_file_fails_at_once_and_names_it(tmp_path):
    _files(tmp_path)
    (tmp_path / "p.toml").write_text(GOOD)
    prof = load_profiles(str(tmp_path / "p.toml"))
    (tmp_path / "vae.safetensors").unlink()
    with pytest.raises(ConfigError) as e:
        resolve_request("krea2-turbo", {}, profiles=prof)
    assert e.value.key == "model_profiles.krea2-turbo.vae" and "vae.safetensors" in e.value.message


def test_unknown_profile_in_a_request(tmp_path):
    _files(tmp_path)
    (tmp_path / "p.toml").write_text(GOOD)
    with pytest.raises(ConfigError) as e:
        resolve_request({"profile": "krea-two"}, {}, profiles=load_profiles(str(tmp_path / "p.toml")))
    assert e.value.key == "model.profile" and "krea-two" in e.value.message
