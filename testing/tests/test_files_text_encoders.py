"""ComfyUI's text encoder files and their tokenizers, offline: each kind (formats/t5.py,
formats/llm_encoders.py) written as ComfyUI's files have it (toolkit/models/tiny/text_encoder_files.py:
fp16/bf16, today's scaled FP8 and the older `scaled_fp8` layout, each layout read back by transformers
itself before it is written) and read with read_component equals the transformers model from its
folder: bit for bit in float32, FP8 exactly as ComfyUI dequantizes it. The known tiny configs are the
factory's; real-dimension headers (sparse files) detect as their real configs; wrong kinds are refused
naming the role; tokenizers come from ComfyUI's folders, the hub cache or UMT5's embedded spiece."""
import functools
import json
import os
import shutil

import pytest
import torch

from testing.sparse_files import write_sparse
from toolkit.errors import ConfigError
from toolkit.models.formats import llm_encoders as llm
from toolkit.models.formats import quant, t5
from toolkit.models.formats.component_file import read_component
from toolkit.models.formats.detect import _found
from toolkit.models.formats.file_view import FileKindError, derive
from toolkit.models.formats.safetensors_header import check_file
from toolkit.models.tiny.text_encoder_files import spiece_model, write_text_encoder

# (arch, role, the kind's constant, its known configs, the tiny entry the arch's recipe builds)
KINDS = [
    ("flux", "text_encoder_2", t5.T5_XXL, t5.T5_XXL_KNOWN, "tiny"),
    ("wan21", "text_encoder", t5.UMT5_XXL, t5.UMT5_XXL_KNOWN, "tiny"),
    ("stable_audio", "text_encoder", t5.T5_BASE, t5.T5_BASE_KNOWN, "tiny"),
    ("qwen_image", "text_encoder", llm.QWEN25_VL_7B, llm.QWEN25_VL_7B_KNOWN, "tiny"),
    ("zimage", "text_encoder", llm.QWEN3_4B, llm.QWEN3_4B_KNOWN, "tiny"),
    ("flux2_klein", "text_encoder", llm.QWEN3_4B_LM, llm.QWEN3_4B_KNOWN, "tiny-flux2_klein"),
    ("ace_step", "text_encoder", llm.QWEN3_06B, llm.QWEN3_06B_KNOWN, "tiny"),
    ("lumina2", "text_encoder", llm.GEMMA2_2B, llm.GEMMA2_2B_KNOWN, "tiny"),
    ("hunyuan_video", "text_encoder", llm.LLAVA_LLAMA3_8B, llm.LLAVA_LLAMA3_8B_KNOWN, "tiny"),
]
IDS = [f"{a}-{sf.kind}" for a, _r, sf, _k, _n in KINDS]
# every tiny instance of each kind the arch recipes build (the same dims as one above, or more)
MORE_TINY = [("chroma", "text_encoder", t5.T5_XXL_KNOWN, "tiny"), ("sd3", "text_encoder_3", t5.T5_XXL_KNOWN, "tiny"),
             ("ltx", "text_encoder", t5.T5_XXL_KNOWN, "tiny"), ("wan22_5b", "text_encoder", t5.UMT5_XXL_KNOWN, "tiny"),
             ("sana", "text_encoder", llm.GEMMA2_2B_KNOWN, "tiny")]


@functools.lru_cache(maxsize=None)
def built(arch: str) -> dict:
    """The arch's tiny components, built in memory by its own recipe (seed 0)."""
    from toolkit.models.registry import get_arch
    from toolkit.models.tiny.kit import Build
    spec = get_arch(arch)
    return spec.tiny.build(Build(spec, 0, 0))


def f32():
    from toolkit.models.v2.policy import LoadPolicy
    return LoadPolicy(torch.float32)


def read(path, sf, module, role="text_encoder"):
    prefix = _found(check_file(str(path)), sf)
    assert prefix is not None, f"{sf.kind}: no prefix of {os.path.basename(str(path))} holds its anchors"
    return read_component(str(path), sf, prefix, type(module), role=role, policy=f32())


def from_folder(module, folder):
    module.save_pretrained(folder)
    return type(module).from_pretrained(folder, dtype=torch.float32)


def assert_same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert set(sa) == set(sb), sorted(set(sa) ^ set(sb))[:4]
    bad = [k for k in sa if not torch.equal(sa[k], sb[k])]
    assert not bad, bad[:3]


def hidden(model, ids):
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
    return out.hidden_states[-1] if getattr(out, "hidden_states", None) else out.last_hidden_state


# -- each kind, as ComfyUI writes it --------------------------------------------------------------
@pytest.mark.parametrize("arch,role,sf,known,name", KINDS, ids=IDS)
def test_a_comfyui_file_equals_the_transformers_model_from_its_folder(arch, role, sf, known, name, tmp_path):
    module = built(arch)[role]
    path = tmp_path / f"{sf.kind}.safetensors"
    write_text_encoder(module, sf, path)
    loaded = read(path, sf, module, role)
    reference = from_folder(module, tmp_path / "folder")
    assert_same(loaded, reference)
    assert loaded._aitk_file_config.known == name
    ids = torch.tensor([[1, 5, 9, 2, 7]])
    assert torch.equal(hidden(loaded, ids), hidden(reference, ids))


@pytest.mark.parametrize("arch,role,sf,known,name", KINDS[:1] + KINDS[3:5], ids=IDS[:1] + IDS[3:5])
def test_an_fp16_file_equals_the_fp16_model(arch, role, sf, known, name, tmp_path):
    module = built(arch)[role]
    path = tmp_path / "half.safetensors"
    write_text_encoder(module, sf, path, dtype=torch.float16)
    loaded = read(path, sf, module, role).state_dict()
    for k, v in module.state_dict().items():
        assert torch.equal(loaded[k], v.to(torch.float16).float()), k


def _dequantized(path, prefix=""):
    """{weight key (prefix cut): what ComfyUI multiplies} for every FP8 weight of the file."""
    from safetensors import safe_open
    out = {}
    with safe_open(str(path), "pt") as f:
        keys = set(f.keys())
        for k in keys:
            for scale in (".scale_weight", ".weight_scale"):
                if k.endswith(scale):
                    layer = k[:-len(scale)]
                    out[layer[len(prefix):] + ".weight"] = f.get_tensor(layer + ".weight").float() * f.get_tensor(k)
    return out


@pytest.mark.parametrize("fp8", ["legacy", "manifest"])
@pytest.mark.parametrize("arch,role,sf,known,name", [KINDS[0], KINDS[1], KINDS[3], KINDS[5]],
                         ids=[IDS[0], IDS[1], IDS[3], IDS[5]])
def test_a_scaled_fp8_file_is_dequantized_as_comfyui_computes_it(arch, role, sf, known, name, fp8, tmp_path):
    """Both of ComfyUI's scaled-FP8 layouts: every Linear FP8 with its scale; the text encoder is read
    in full precision, each weight exactly FP8 value x scale (ComfyUI's product), the rest as written."""
    module = built(arch)[role]
    path = tmp_path / f"{sf.kind}_fp8_e4m3fn_scaled.safetensors"
    info = write_text_encoder(module, sf, path, dtype=torch.bfloat16, fp8=fp8)
    assert info["quantized"] > 0
    loaded = read(path, sf, module, role)
    want = _dequantized(path)
    names = {"legacy": "comfy_scaled_fp8_legacy", "manifest": "comfy_scaled_fp8"}
    assert loaded._aitk_checkpoint_report["format"] == names[fp8]
    convert = __import__("toolkit.models.formats.component_file", fromlist=["convert"]).convert
    want = convert(sf, want, {})
    got, ref = loaded.state_dict(), module.state_dict()
    for k, w in want.items():
        assert torch.equal(got[k], w), k
        # and within e4m3's bound of the float weights: 3 mantissa bits, subnormals below 2^-6
        bound = ref[k].abs() * 2 ** -4 + ref[k].abs().max() / 448 * 2 ** -9
        assert ((got[k] - ref[k]).abs() <= bound + 1e-12).all(), k
    assert all(not t.dtype.is_floating_point or t.dtype == torch.float32 for t in got.values())


def test_legacy_scales_that_cannot_be_read_are_refused_naming_the_layer(tmp_path):
    module = built("flux")["text_encoder_2"]
    path = tmp_path / "t5xxl_fp8_e4m3fn_scaled.safetensors"
    write_text_encoder(module, t5.T5_XXL, path, fp8="legacy")
    from safetensors.torch import load_file, save_file
    state = load_file(str(path))
    layer = "encoder.block.0.layer.0.SelfAttention.q"
    state[layer + ".scale_weight"] = torch.ones(4)
    save_file(state, str(path))
    with pytest.raises(quant.CheckpointFormatError) as e:
        read(path, t5.T5_XXL, module, "text_encoder_2")
    assert layer in str(e.value) and "text_encoder_2" in str(e.value) and "scalar" in str(e.value)


def test_a_qwen25_vl_file_without_its_head_loads_with_the_embedding_as_head(tmp_path):
    """ComfyUI's qwen_2.5_vl_7b keeps the vision tower in the older names; a file without lm_head
    still gives the pipeline's hidden states exactly (the head is never read)."""
    module = built("qwen_image")["text_encoder"]
    path = tmp_path / "qwen_2.5_vl_7b.safetensors"
    write_text_encoder(module, llm.QWEN25_VL_7B, path, head=False)
    keys = set(check_file(str(path)).tensors)
    assert "visual.patch_embed.proj.weight" in keys and "model.layers.0.self_attn.q_proj.weight" in keys
    assert "lm_head.weight" not in keys
    loaded = read(path, llm.QWEN25_VL_7B, module)
    assert loaded.lm_head.weight.data_ptr() == loaded.model.language_model.embed_tokens.weight.data_ptr()
    ids = torch.tensor([[1, 5, 9, 2, 7]])
    assert torch.equal(hidden(loaded, ids), hidden(module, ids))


def test_a_tied_embedding_is_one_tensor_after_load(tmp_path):
    """T5's encoder embedding is `shared` (and a tied causal LM's head its embedding): the file holds
    it once, the model gets one tensor under both names, converted once."""
    module = built("flux")["text_encoder_2"]
    path = tmp_path / "t5xxl_fp16.safetensors"
    write_text_encoder(module, t5.T5_XXL, path, dtype=torch.float16)
    assert "encoder.embed_tokens.weight" not in check_file(str(path)).tensors
    loaded = read(path, t5.T5_XXL, module, "text_encoder_2")
    assert loaded.shared.weight.data_ptr() == loaded.encoder.embed_tokens.weight.data_ptr()


def test_an_all_in_one_checkpoints_t5_is_found_under_its_prefix(tmp_path):
    module = built("flux")["text_encoder_2"]
    path = tmp_path / "flux1-dev-fp8.safetensors"
    write_text_encoder(module, t5.T5_XXL, path, prefix="text_encoders.t5xxl.transformer.")
    assert _found(check_file(str(path)), t5.T5_XXL) == "text_encoders.t5xxl.transformer."
    assert_same(read(path, t5.T5_XXL, module, "text_encoder_2"), module)


def test_kinds_are_told_apart(tmp_path):
    """A T5 file is not a UMT5 one (one bias table, not one per layer), a Qwen3 file no Llama."""
    t5_path, qwen_path = tmp_path / "t5.safetensors", tmp_path / "qwen.safetensors"
    write_text_encoder(built("flux")["text_encoder_2"], t5.T5_XXL, t5_path)
    write_text_encoder(built("zimage")["text_encoder"], llm.QWEN3_4B, qwen_path)
    t5_header, qwen_header = check_file(str(t5_path)), check_file(str(qwen_path))
    assert _found(t5_header, t5.T5_XXL) == "" and _found(t5_header, t5.UMT5_XXL) is None
    assert _found(qwen_header, llm.QWEN3_4B) == "model." and _found(qwen_header, llm.LLAVA_LLAMA3_8B) is None
    assert _found(qwen_header, llm.QWEN3_4B_LM) == "" and _found(qwen_header, llm.GEMMA2_2B) is None


def test_a_component_of_the_wrong_kind_is_refused_naming_the_role_and_file(tmp_path):
    """A Qwen3 file given where a T5 goes: the reader names the role and the file, and what is missing."""
    path = tmp_path / "qwen_3_4b.safetensors"
    write_text_encoder(built("zimage")["text_encoder"], llm.QWEN3_4B, path)
    module = built("flux")["text_encoder_2"]
    with pytest.raises(FileKindError) as e:
        read_component(str(path), t5.T5_XXL, "", type(module), role="text_encoder_2", policy=f32())
    assert "text_encoder_2" in str(e.value) and "qwen_3_4b.safetensors" in str(e.value) and "T5" in str(e.value)


def test_a_wired_row_makes_the_file_detectable_and_a_wrong_kind_a_named_refusal(tmp_path):
    """A ComfyUI T5 file detects as its kind for every (arch, role) whose row takes it, and FileSources
    refuses a Qwen3 file given as that role, naming model.components.<role>."""
    from toolkit.config_modules import ModelConfig
    from toolkit.models import registry
    from toolkit.models.file_sources import FileSources
    from toolkit.models.formats.detect import detect_file
    spec = registry.ARCHS["flux"]
    good, wrong = tmp_path / "t5xxl_fp16.safetensors", tmp_path / "qwen_3_4b.safetensors"
    write_text_encoder(built("flux")["text_encoder_2"], t5.T5_XXL, good, dtype=torch.float16)
    write_text_encoder(built("zimage")["text_encoder"], llm.QWEN3_4B, wrong)
    det = detect_file(str(good))
    kind, label, fits = det.kinds[0]
    assert (kind, label) == ("t5_xxl", "T5-XXL text encoder")
    assert {("flux", "text_encoder_2"), ("chroma", "text_encoder"), ("sd3", "text_encoder_3"),
            ("ltx", "text_encoder")} <= set(fits)
    mc = ModelConfig.from_dict({"arch": "flux", "name_or_path": str(good), "components": {"text_encoder_2": str(wrong)}})
    with pytest.raises(ConfigError) as e:
        FileSources(mc, spec).source(spec.component("text_encoder_2"))
    assert e.value.key == "model.components.text_encoder_2" and "qwen_3_4b.safetensors" in e.value.message


# -- configs ---------------------------------------------------------------------------------------------
def _factory_config(arch, role) -> dict:
    return built(arch)[role].config.to_dict()


def _subset_equal(known: dict, config: dict) -> dict:
    """{key: (known, factory)} for every key both have that differs (nested configs compared likewise)."""
    out = {}
    for k, v in known.items():
        if k not in config:
            continue
        if isinstance(v, dict) and isinstance(config[k], dict):
            sub = _subset_equal(v, config[k])
            if sub:
                out[k] = sub
        elif (list(v) if isinstance(v, tuple) else v) != config[k]:
            out[k] = (v, config[k])
    return out


@pytest.mark.parametrize("arch,role,known,name", [(a, r, k, n) for a, r, _sf, k, n in KINDS] + MORE_TINY,
                         ids=[f"{a}-{r}" for a, r, *_ in KINDS] + [f"{a}-{r}" for a, r, *_ in MORE_TINY])
def test_the_known_tiny_configs_are_what_the_tiny_factory_builds(arch, role, known, name):
    assert not _subset_equal(known[name], _factory_config(arch, role))


REAL = [  # (class, constant, its real known config's name, the known dict)
    ("transformers:T5EncoderModel", t5.T5_XXL, "t5-v1_1-xxl", t5.T5_XXL_KNOWN),
    ("transformers:UMT5EncoderModel", t5.UMT5_XXL, "umt5-xxl", t5.UMT5_XXL_KNOWN),
    ("transformers:T5EncoderModel", t5.T5_BASE, "t5-base", t5.T5_BASE_KNOWN),
    ("transformers:Qwen2_5_VLForConditionalGeneration", llm.QWEN25_VL_7B, "qwen2.5-vl-7b", llm.QWEN25_VL_7B_KNOWN),
    ("transformers:Qwen3Model", llm.QWEN3_4B, "qwen3-4b", llm.QWEN3_4B_KNOWN),
    ("transformers:Qwen3ForCausalLM", llm.QWEN3_8B_LM, "qwen3-8b", llm.QWEN3_8B_KNOWN),
    ("transformers:Qwen3Model", llm.QWEN3_06B, "qwen3-embedding-0.6b", llm.QWEN3_06B_KNOWN),
    ("transformers:Gemma2Model", llm.GEMMA2_2B, "gemma-2-2b", llm.GEMMA2_2B_KNOWN),
    ("transformers:Gemma3TextModel", llm.GEMMA3_12B, "gemma-3-12b", llm.GEMMA3_12B_KNOWN),
    ("transformers:MistralModel", llm.MISTRAL3_SMALL, "mistral-small-3.1-24b", llm.MISTRAL3_SMALL_KNOWN),
    ("transformers:LlamaModel", llm.LLAVA_LLAMA3_8B, "llava-llama-3-8b", llm.LLAVA_LLAMA3_8B_KNOWN),
]


@pytest.mark.parametrize("cls,sf,name,known", REAL, ids=[n for _c, _s, n, _k in REAL])
def test_real_dimension_headers_are_detected_as_their_real_configs(cls, sf, name, known, tmp_path):
    """At real sizes, without real weights: the model built on the meta device from its real known
    config, its ComfyUI layout's header over a sparse file, detects as that config and no other kind."""
    path = tmp_path / f"{name}.safetensors"
    write_header_only(path, cls, known[name], sf)
    header = check_file(str(path))
    prefix = _found(header, sf)
    assert prefix is not None
    assert derive(header, sf, prefix).known == name
    others = [o for _c, o, n, _k in REAL if o.kind != sf.kind and _found(header, o) is not None]
    assert not others, [o.kind for o in others]


@pytest.mark.parametrize("name,known", [("qwen3-4b", llm.QWEN3_4B_KNOWN), ("qwen3-8b", llm.QWEN3_8B_KNOWN)])
def test_flux2_klein_takes_qwen3_4b_and_8b_files_in_one_role(name, known, tmp_path):
    """klein 4B ships Qwen3 4B and klein 9B Qwen3 8B: either file fits the row's text_encoder."""
    from toolkit.models.registry import ARCHS
    sf = ARCHS["flux2_klein"].component("text_encoder").single_file
    path = tmp_path / f"{name}.safetensors"
    write_header_only(path, "transformers:Qwen3ForCausalLM", known[name], llm.QWEN3_8B_LM)
    header = check_file(str(path))
    assert _found(header, sf) == "" and derive(header, sf, "").known == name


def write_header_only(path, cls_name, config, sf):
    from accelerate import init_empty_weights

    from toolkit.models.arch import load_object
    cls = load_object(cls_name)
    with init_empty_weights():
        model = cls(cls.config_class(**config))
    state = load_object(sf.original)(model.state_dict())
    state.pop("encoder.embed_tokens.weight", None)
    write_sparse(path, {k: t.shape for k, t in state.items()})


def test_shapes_that_match_no_known_config_are_refused_naming_the_nearest(tmp_path):
    """A Qwen3 of 36 layers but another width is no Qwen3 4B: refused, the nearest known and the facts named."""
    config = dict(llm.QWEN3_4B_KNOWN["qwen3-4b"], intermediate_size=8192)
    path = tmp_path / "odd.safetensors"
    write_header_only(path, "transformers:Qwen3Model", config, llm.QWEN3_4B)
    header = check_file(str(path))
    with pytest.raises(FileKindError) as e:
        derive(header, llm.QWEN3_4B, "model.")
    assert "nearest known qwen3-4b" in str(e.value) and "intermediate_size 8192" in str(e.value)
    assert _found(header, llm.QWEN3_4B) is None


# -- tokenizers ------------------------------------------------------------------------------------------
@pytest.fixture
def offline_tokenizers(tmp_path, monkeypatch):
    """No hub cache, a fresh tokenizer cache, no ComfyUI install configured."""
    import huggingface_hub.constants
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty_hub"))
    monkeypatch.setenv("AITK_TOKENIZER_CACHE", str(tmp_path / "tokenizer_cache"))
    monkeypatch.delenv("AITK_COMFYUI_PATH", raising=False)


def test_the_umt5_tokenizer_is_built_from_the_files_embedded_spiece(tmp_path, offline_tokenizers):
    """(e): ComfyUI's umt5_xxl file carries its SentencePiece model; the tokenizer built from it gives
    the ids of the tokenizer the text encoder was trained with (here the tiny Wan's)."""
    from transformers import AutoTokenizer

    from toolkit.tokenizers import find_tokenizer
    parts = built("wan21")
    tokenizer, module = parts["tokenizer"], parts["text_encoder"]
    path = tmp_path / "models" / "text_encoders" / "umt5_xxl_fp8_e4m3fn_scaled.safetensors"
    write_text_encoder(module, t5.UMT5_XXL, path, dtype=torch.bfloat16, fp8="legacy",
                       embed={"spiece_model": spiece_model(tokenizer)})
    folder = find_tokenizer("umt5_xxl", role="tokenizer", near=str(tmp_path / "wan.safetensors"), files=[str(path)],
                            vocab_size=module.config.vocab_size)
    built_tok = AutoTokenizer.from_pretrained(folder)
    assert len(built_tok) == len(tokenizer)
    for text in ("a photo of a cat sitting on a red mat", "Hello world! 0 1 2", "  two  spaces, and  unknown ÿ"):
        assert built_tok(text).input_ids == tokenizer(text).input_ids, text
    # the text encoder reads the same file, the tokenizer tensor aside
    assert read(path, t5.UMT5_XXL, module)._aitk_file_config.known == "tiny"
    # once built, it is the cache's
    assert find_tokenizer("umt5_xxl", role="tokenizer", files=[str(path)]) == folder


def test_a_tokenizer_whose_ids_do_not_fit_the_text_encoder_is_passed_over_naming_the_role(tmp_path,
                                                                                        offline_tokenizers):
    from toolkit.tokenizers import check_fits, find_tokenizer
    tokenizer = built("wan21")["tokenizer"]
    path = tmp_path / "umt5.safetensors"
    write_text_encoder(built("wan21")["text_encoder"], t5.UMT5_XXL, path, embed={"spiece_model": spiece_model(tokenizer)})
    with pytest.raises(ConfigError) as e:
        find_tokenizer("umt5_xxl", role="tokenizer", files=[str(path)], vocab_size=100)
    assert e.value.key == "model.components.tokenizer"
    assert "more than the text encoder's 100" in e.value.message and "hub cache google/umt5-xxl" in e.value.message
    with pytest.raises(ConfigError) as e:
        check_fits(tokenizer, 100, "tokenizer_2")
    assert e.value.key == "model.components.tokenizer_2"


def test_a_missing_tokenizer_names_the_role_and_every_place_looked_in(tmp_path, offline_tokenizers):
    from toolkit.tokenizers import find_tokenizer
    path = tmp_path / "ComfyUI" / "models" / "text_encoders" / "t5xxl_fp16.safetensors"
    write_text_encoder(built("flux")["text_encoder_2"], t5.T5_XXL, path)
    with pytest.raises(ConfigError) as e:
        find_tokenizer("t5_xxl", role="tokenizer_2", near=str(path))
    msg = e.value.message
    assert e.value.key == "model.components.tokenizer_2"
    assert os.path.join("ComfyUI", "comfy", "text_encoders", "t5_tokenizer") in msg
    assert "hub cache black-forest-labs/FLUX.1-dev/tokenizer_2" in msg and "hub cache google/t5-v1_1-xxl" in msg
    with pytest.raises(ConfigError) as e:
        find_tokenizer("umt5_xxl", role="tokenizer", files=[str(path)])
    assert "t5xxl_fp16.safetensors (no spiece_model)" in e.value.message


def test_the_t5_tokenizer_comes_from_a_comfyui_install(tmp_path, offline_tokenizers, monkeypatch):
    """(b): ComfyUI's `comfy/text_encoders/t5_tokenizer`, found next to the models folder or by $AITK_COMFYUI_PATH."""
    from toolkit.tokenizers import find_tokenizer
    root = tmp_path / "ComfyUI"
    built("flux")["tokenizer_2"].save_pretrained(root / "comfy" / "text_encoders" / "t5_tokenizer")
    near = str(root / "models" / "diffusion_models" / "flux1-dev.safetensors")
    assert find_tokenizer("t5_xxl", role="tokenizer_2", near=near) == str(root / "comfy" / "text_encoders" / "t5_tokenizer")
    monkeypatch.setenv("AITK_COMFYUI_PATH", str(root))
    assert find_tokenizer("t5_xxl", role="tokenizer_2").endswith("t5_tokenizer")


def test_qwen3_from_comfyuis_qwen25_folder_gets_qwen3s_tokens_and_template(tmp_path, offline_tokenizers):
    """ComfyUI reads Qwen3 with its qwen25_tokenizer (Qwen2.5's template adds a system prompt): the
    copy the engine uses has Qwen3's added tokens, one id each, and gives Qwen3's prompts."""
    from transformers import AutoTokenizer

    from toolkit.tokenizers import QWEN3_ADDED, find_tokenizer
    tiny = built("zimage")["tokenizer"]
    comfy = tmp_path / "ComfyUI" / "comfy" / "text_encoders" / "qwen25_tokenizer"
    tiny.save_pretrained(comfy)
    config = json.loads((comfy / "tokenizer_config.json").read_text())
    config["chat_template"] = "<|im_start|>system\nYou are Qwen.<|im_end|>\n{{ messages[0]['content'] }}"
    (comfy / "tokenizer_config.json").write_text(json.dumps(config))
    (comfy / "chat_template.jinja").unlink(missing_ok=True)
    near = str(tmp_path / "ComfyUI" / "models" / "text_encoders" / "qwen_3_4b.safetensors")
    folder = find_tokenizer("qwen3", role="tokenizer", near=near)
    assert folder != str(comfy) and comfy.exists()
    tok = AutoTokenizer.from_pretrained(folder)
    assert all(len(tok(t, add_special_tokens=False).input_ids) == 1 for t in QWEN3_ADDED)
    messages = [{"role": "user", "content": "a red fox"}]
    for thinking in (True, False):
        got = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=thinking)
        want = tiny.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=thinking)
        assert got == want, thinking


def test_every_agreed_vocabulary_has_an_offline_source():
    from toolkit.tokenizers import VOCABULARIES
    agreed = {"clip_l", "clip_g", "clip_h", "t5_xxl", "umt5_xxl", "qwen2_5", "qwen3", "gemma2", "gemma3", "mistral3",
              "llama3", "ernie_mistral3", "ernie_ministral3_pe"}
    mine = agreed - {"clip_l", "clip_g", "clip_h"}       # the CLIP ones are i21-sd's
    assert mine <= set(VOCABULARIES)
    for name in mine:
        v = VOCABULARIES[name]
        assert v.comfy or v.hub or v.build or v.embedded, name
