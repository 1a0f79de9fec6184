"""Decoder LLMs used as text encoders, as ComfyUI's `text_encoders/` files carry them:
Qwen2.5-VL-7B (`qwen_2.5_vl_7b_fp8_scaled`: Qwen-Image, its Edit models), Qwen3 0.6B / 4B / 8B
(`qwen_3_4b`: Z-Image, FLUX.2 klein; ACE-Step's 0.6B), Gemma 2 2B (`gemma_2_2b`: Lumina 2, Sana),
Gemma 3 12B (`gemma_3_12b`), Mistral Small 3.1 (`mistral_3_small`), LLaVA-Llama-3-8B
(`llava_llama3_fp8_scaled`: HunyuanVideo).

Their layout is transformers' names with a `model.` prefix (`model.layers.N.self_attn.q_proj.weight`,
`model.embed_tokens.weight`), or without one (a transformers base model's own save); a Qwen2.5-VL
file adds the vision tower under `visual.` in the older transformers names (`model.layers`,
`visual.blocks`), which the converter moves to today's (`model.language_model.`, `model.visual.`).
Gemma files embed their SentencePiece model (`spiece_model`) and Mistral's its Tekken vocabulary
(`tekken_model`): toolkit/tokenizers.py builds the tokenizer from them; the converters drop them.
FP8 files (ComfyUI scaled FP8, the older `scaled_fp8`) are dequantized at load.

Each constant reads into the transformers class a pipeline takes for the role: a base model
(`Qwen3Model`, `Gemma2Model`, `LlamaModel`, ...: keys without `model.`, no head) or a causal LM
(`Qwen3ForCausalLM`, the `_LM` constants: `model.` names and `lm_head`; a file without the head,
whose model ties it, gets the embedding as its head, the very same tensor). A file of one kind fits
every constant of that kind (`kind` is the checkpoint's, not the class's).

Config from the shapes (vocabulary, width, depth, MLP width, query and key/value widths, head width
where a q_norm tells it, biases and norms that tell the family; a vision tower's depth and widths),
the rest (heads, rope, token ids, soft-capping, windows) from the known configs: the real ones (the
hub repos' config.json) and the tiny factory's (each arch's tiny recipe: the tests check they agree).
"""
import re

from dataclasses import replace

from toolkit.models.arch import SingleFile
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.formats.known_match import match_known

EMBEDDED = ("spiece_model", "tekken_model", "scaled_fp8")
VISION_PREFIXES = ("visual.", "model.visual.", "vision_tower.", "model.vision_tower.", "multi_modal_projector.",
                   "model.multi_modal_projector.")
LM_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.", "model.", "")


# -- signature -----------------------------------------------------------------------------------
def lm_prefix(view) -> str:
    """Where the language model's own names (`embed_tokens`, `layers.N`) sit in the view."""
    for p in LM_PREFIXES:
        if view.has(p + "embed_tokens.weight") and view.has(p + "layers.0.self_attn.q_proj.weight"):
            return p
    raise FileKindError("no embed_tokens.weight with layers.0.self_attn.q_proj: not a decoder LLM text encoder")


def llm_signature(view) -> dict:
    p = lm_prefix(view)
    layer = p + "layers.0."
    vocab, hidden = view.shape(p + "embed_tokens.weight")
    sig = {"vocab_size": vocab, "hidden_size": hidden, "num_hidden_layers": view.count(rf"{re.escape(p)}layers\.(\d+)\."),
           "intermediate_size": view.dim(layer + "mlp.gate_proj.weight"),
           "q_width": view.dim(layer + "self_attn.q_proj.weight"), "kv_width": view.dim(layer + "self_attn.k_proj.weight"),
           "head_dim": view.dim(layer + "self_attn.q_norm.weight") if view.has(layer + "self_attn.q_norm.weight") else None,
           "qkv_bias": view.has(layer + "self_attn.k_proj.bias"),
           "post_ffn_norm": view.has(layer + "post_feedforward_layernorm.weight")}
    return sig


def qwen25_vl_signature(view) -> dict:
    sig = llm_signature(view)
    v = next((p for p in ("visual.", "model.visual.") if view.has(p + "patch_embed.proj.weight")), None)
    if v is None:
        raise FileKindError("no visual.patch_embed.proj.weight: a Qwen2.5-VL text encoder without its vision tower")
    width, channels, temporal, patch, _ = view.shape(v + "patch_embed.proj.weight")
    sig.update(vision_depth=view.count(rf"{re.escape(v)}blocks\.(\d+)\."), vision_hidden=width,
               vision_intermediate=view.dim(v + "blocks.0.mlp.gate_proj.weight"),
               vision_out=view.dim(v + "merger.mlp.2.weight"), vision_patch=[channels, temporal, patch])
    return sig


def _text_facts(text: dict, *, qk_norm: bool, qkv_bias: bool, post_ffn_norm: bool) -> dict:
    head_dim = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    return {"vocab_size": text["vocab_size"], "hidden_size": text["hidden_size"],
            "num_hidden_layers": text["num_hidden_layers"], "intermediate_size": text["intermediate_size"],
            "q_width": text["num_attention_heads"] * head_dim, "kv_width": text["num_key_value_heads"] * head_dim,
            "head_dim": head_dim if qk_norm else None, "qkv_bias": qkv_bias, "post_ffn_norm": post_ffn_norm}


def _family(**flags):
    return lambda config: _text_facts(config, **flags)


def _qwen25_vl_facts(config: dict) -> dict:
    out = _text_facts(config["text_config"], qk_norm=False, qkv_bias=True, post_ffn_norm=False)
    v = config["vision_config"]
    out.update(vision_depth=v["depth"], vision_hidden=v["hidden_size"], vision_intermediate=v["intermediate_size"],
               vision_out=v["out_hidden_size"], vision_patch=[v.get("in_channels", 3), v["temporal_patch_size"],
                                                              v["patch_size"]])
    return out


# -- known configs ---------------------------------------------------------------------------------
_QWEN_ROPE = {"rope_type": "default", "rope_theta": 1000000.0}
_QWEN3 = dict(hidden_act="silu", rms_norm_eps=1e-6, attention_bias=False, rope_parameters=_QWEN_ROPE,
              max_position_embeddings=40960, bos_token_id=151643, eos_token_id=151645)
# the tiny factory's tokenizer (kit.qwen2_tokenizer): 800 entries, <|endoftext|> pads, <|im_end|> ends
_TINY_QWEN = dict(vocab_size=800, pad_token_id=784, eos_token_id=786, bos_token_id=None)
_TINY_QWEN3 = dict(_TINY_QWEN, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=1, head_dim=16, max_position_embeddings=32768, rope_parameters=_QWEN_ROPE,
                   tie_word_embeddings=False, hidden_act="silu", rms_norm_eps=1e-6)
QWEN3_06B_KNOWN = {
    # Qwen/Qwen3-Embedding-0.6B, ACE-Step 1.5's text encoder (Qwen3-0.6B's shapes)
    "qwen3-embedding-0.6b": dict(_QWEN3, vocab_size=151936, hidden_size=1024, intermediate_size=3072,
                                 num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                                 max_position_embeddings=32768, tie_word_embeddings=True),
    "tiny": _TINY_QWEN3,                                   # ace_step: kit.qwen3_encoder(layers=2)
}
QWEN3_4B_KNOWN = {
    # Qwen/Qwen3-4B, as Z-Image and FLUX.2 klein 4B ship it (text_encoder/config.json)
    "qwen3-4b": dict(_QWEN3, vocab_size=151936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True),
    "tiny": _TINY_QWEN3,                                   # zimage: kit.qwen3_encoder(layers=2)
    # flux2_klein: a Qwen3ForCausalLM of 28 layers of width 16 (the pipeline reads hidden states 9, 18, 27)
    "tiny-flux2_klein": dict(_TINY_QWEN3, hidden_size=16, intermediate_size=32, num_hidden_layers=28, head_dim=8,
                             max_position_embeddings=40960),
}
QWEN3_8B_KNOWN = {
    # Qwen/Qwen3-8B, as FLUX.2 klein 9B ships it
    "qwen3-8b": dict(_QWEN3, vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=False),
}
QWEN25_VL_7B_KNOWN = {
    # Qwen/Qwen2.5-VL-7B-Instruct, as Qwen-Image and Qwen-Image-Edit ship it (text_encoder/config.json)
    "qwen2.5-vl-7b": dict(
        text_config=dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                         num_attention_heads=28, num_key_value_heads=4, hidden_act="silu", rms_norm_eps=1e-6,
                         max_position_embeddings=128000, sliding_window=32768, max_window_layers=28,
                         use_sliding_window=False, attention_dropout=0.0, bos_token_id=151643, eos_token_id=151645,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                                          "mrope_section": [16, 24, 24]}),
        vision_config=dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, in_channels=3,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2, tokens_per_second=2,
                           window_size=112, out_hidden_size=3584, fullatt_block_indexes=[7, 15, 23, 31],
                           hidden_act="silu"),
        image_token_id=151655, video_token_id=151656, vision_start_token_id=151652, vision_end_token_id=151653,
        tie_word_embeddings=False),
    # qwen_image, qwen_image_edit: archs/qwen_image.py tiny_qwen25vl
    "tiny": dict(
        text_config=dict(_TINY_QWEN, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, max_position_embeddings=128000, rms_norm_eps=1e-6,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]}),
        vision_config=dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, window_size=112, fullatt_block_indexes=[0],
                           out_hidden_size=32),
        image_token_id=796, video_token_id=797, vision_start_token_id=793, vision_end_token_id=794,
        tie_word_embeddings=False),
}
_GEMMA = dict(hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, pad_token_id=0, eos_token_id=1, bos_token_id=2,
              attention_bias=False, tie_word_embeddings=True)
GEMMA2_2B_KNOWN = {
    # google/gemma-2-2b, as Lumina-Image-2.0 (and Sana, gemma-2-2b-it) ship it
    "gemma-2-2b": dict(_GEMMA, vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                       num_attention_heads=8, num_key_value_heads=4, head_dim=256, query_pre_attn_scalar=256,
                       sliding_window=4096, final_logit_softcapping=30.0, attn_logit_softcapping=50.0,
                       max_position_embeddings=8192, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
    # lumina2, sana: archs/lumina2.py gemma2_encoder over its tiny Gemma tokenizer (1024 entries)
    "tiny": dict(_GEMMA, vocab_size=1024, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=2, num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16,
                 sliding_window=4096, final_logit_softcapping=30.0, attn_logit_softcapping=50.0,
                 max_position_embeddings=8192, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
}
GEMMA3_12B_KNOWN = {
    # google/gemma-3-12b-it's text model (LTX-2's text encoder): local layers at 10k, global at 1M x8 linear
    "gemma-3-12b": dict(_GEMMA, vocab_size=262208, hidden_size=3840, intermediate_size=15360, num_hidden_layers=48,
                        num_attention_heads=16, num_key_value_heads=8, head_dim=256, query_pre_attn_scalar=256,
                        sliding_window=1024, max_position_embeddings=131072, final_logit_softcapping=None,
                        attn_logit_softcapping=None,
                        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0,
                                                            "rope_theta": 1000000.0},
                                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
}
MISTRAL3_SMALL_KNOWN = {
    # mistralai/Mistral-Small-3.1-24B-Instruct-2503's text model (FLUX.2 dev's text encoder)
    "mistral-small-3.1-24b": dict(vocab_size=131072, hidden_size=5120, intermediate_size=32768, num_hidden_layers=40,
                                  num_attention_heads=32, num_key_value_heads=8, head_dim=128, hidden_act="silu",
                                  rms_norm_eps=1e-5, max_position_embeddings=131072, sliding_window=None,
                                  rope_parameters={"rope_type": "default", "rope_theta": 1000000000.0},
                                  bos_token_id=1, eos_token_id=2, pad_token_id=11, tie_word_embeddings=False),
}
LLAVA_LLAMA3_8B_KNOWN = {
    # xtuner/llava-llama-3-8b-v1_1's language model, as hunyuanvideo-community/HunyuanVideo ships it
    "llava-llama-3-8b": dict(vocab_size=128320, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                             num_attention_heads=32, num_key_value_heads=8, head_dim=128, hidden_act="silu",
                             rms_norm_eps=1e-5, max_position_embeddings=8192, attention_bias=False, mlp_bias=False,
                             rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
                             bos_token_id=128000, eos_token_id=128001, tie_word_embeddings=False),
    # hunyuan_video: its tiny recipe's LlamaModel (3 layers: the pipeline reads hidden_states[-3])
    "tiny": dict(vocab_size=800, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=16, hidden_act="silu", rms_norm_eps=1e-6, max_position_embeddings=1024,
                 rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, pad_token_id=799, bos_token_id=794,
                 eos_token_id=795, tie_word_embeddings=False),
}

_QWEN3_FLAGS = dict(qk_norm=True, qkv_bias=False, post_ffn_norm=False)
_GEMMA2_FLAGS = dict(qk_norm=False, qkv_bias=False, post_ffn_norm=True)
_GEMMA3_FLAGS = dict(qk_norm=True, qkv_bias=False, post_ffn_norm=True)
_LLAMA_FLAGS = dict(qk_norm=False, qkv_bias=False, post_ffn_norm=False)


def qwen3_06b_config(view):
    return match_known(llm_signature(view), QWEN3_06B_KNOWN, _family(**_QWEN3_FLAGS), "Qwen3 0.6B text encoder")


def qwen3_4b_config(view):
    return match_known(llm_signature(view), QWEN3_4B_KNOWN, _family(**_QWEN3_FLAGS), "Qwen3 4B text encoder")


def qwen3_8b_config(view):
    return match_known(llm_signature(view), QWEN3_8B_KNOWN, _family(**_QWEN3_FLAGS), "Qwen3 8B text encoder")


def qwen3_klein_config(view):
    """FLUX.2 klein's: Qwen3 4B (klein 4B) or Qwen3 8B (klein 9B), one role for both."""
    return match_known(llm_signature(view), {**QWEN3_4B_KNOWN, **QWEN3_8B_KNOWN}, _family(**_QWEN3_FLAGS),
                       "Qwen3 4B / 8B text encoder")


def qwen25_vl_7b_config(view):
    return match_known(qwen25_vl_signature(view), QWEN25_VL_7B_KNOWN, _qwen25_vl_facts, "Qwen2.5-VL-7B text encoder")


def gemma2_2b_config(view):
    return match_known(llm_signature(view), GEMMA2_2B_KNOWN, _family(**_GEMMA2_FLAGS), "Gemma 2 2B text encoder")


def gemma3_12b_config(view):
    return match_known(llm_signature(view), GEMMA3_12B_KNOWN, _family(**_GEMMA3_FLAGS), "Gemma 3 12B text encoder")


def mistral3_small_config(view):
    return match_known(llm_signature(view), MISTRAL3_SMALL_KNOWN, _family(**_LLAMA_FLAGS),
                       "Mistral Small 3.1 text encoder")


def llava_llama3_8b_config(view):
    return match_known(llm_signature(view), LLAVA_LLAMA3_8B_KNOWN, _family(**_LLAMA_FLAGS),
                       "LLaVA-Llama-3-8B text encoder")


def _matches(config_fn):
    def matches(view) -> bool:
        try:
            config_fn(view)
        except FileKindError:
            return False
        return True
    return matches


is_qwen3_06b, is_qwen3_4b, is_qwen3_8b = _matches(qwen3_06b_config), _matches(qwen3_4b_config), _matches(qwen3_8b_config)
is_qwen3_klein = _matches(qwen3_klein_config)
is_qwen25_vl_7b, is_gemma2_2b = _matches(qwen25_vl_7b_config), _matches(gemma2_2b_config)
is_gemma3_12b, is_mistral3_small = _matches(gemma3_12b_config), _matches(mistral3_small_config)
is_llava_llama3_8b = _matches(llava_llama3_8b_config)


# -- converters and their inverses ---------------------------------------------------------------------
def _language_model(state: dict) -> dict:
    """The language model's tensors by their own names (`embed_tokens.weight`, `layers.N...`): no
    vision tower, no head, no embedded tokenizer or FP8 marker."""
    out = {}
    for k, v in state.items():
        if k in EMBEDDED or k.startswith(VISION_PREFIXES) or k.startswith(("lm_head.", "model.lm_head.")):
            continue
        for p in LM_PREFIXES:
            if p and k.startswith(p):
                k = k[len(p):]
                break
        out[k] = v
    return out


def to_base_model(state: dict) -> dict:
    """A file's tensors as a transformers base model (Qwen3Model, Gemma2Model, LlamaModel...) names them."""
    return _language_model(state)


def to_causal_lm(state: dict) -> dict:
    """As a causal LM (Qwen3ForCausalLM) names them: `model.` + the base names, and `lm_head.weight`:
    the file's, else the embedding itself (the models these files hold tie it; the pipelines read
    hidden states, never the head)."""
    out = {"model." + k: v for k, v in _language_model(state).items()}
    head = state.get("lm_head.weight", state.get("model.lm_head.weight"))
    head = head if head is not None else out.get("model.embed_tokens.weight")
    if head is not None:
        out["lm_head.weight"] = head
    return out


def to_qwen25_vl(state: dict) -> dict:
    """Qwen2_5_VLForConditionalGeneration's names (transformers >= 4.52: `model.language_model.`,
    `model.visual.`) from the older ones ComfyUI's files keep (`model.layers`, `visual.blocks`), or
    from today's as they are; `lm_head.weight` the file's, else the embedding (the pipelines read
    hidden states, never the head)."""
    out = {}
    for k, v in state.items():
        if k in EMBEDDED:
            continue
        if k.startswith("visual."):
            k = "model." + k
        elif k.startswith("model.") and not k.startswith(("model.language_model.", "model.visual.")):
            k = "model.language_model." + k[len("model."):]
        out[k] = v
    if "lm_head.weight" not in out and "model.language_model.embed_tokens.weight" in out:
        out["lm_head.weight"] = out["model.language_model.embed_tokens.weight"]
    return out


def base_to_comfy(state: dict) -> dict:
    """A base model's state dict as ComfyUI's files have it: every key under `model.`."""
    return {"model." + k: v for k, v in state.items()}


def causal_lm_to_comfy(state: dict) -> dict:
    """A causal LM's state dict as ComfyUI's files have it: transformers' names already."""
    return dict(state)


def qwen25_vl_to_comfy(state: dict) -> dict:
    """A Qwen2_5_VLForConditionalGeneration state dict in the older names ComfyUI's files keep."""
    out = {}
    for k, v in state.items():
        if k.startswith("model.visual."):
            k = k[len("model."):]
        elif k.startswith("model.language_model."):
            k = "model." + k[len("model.language_model."):]
        out[k] = v
    return out


_M = "toolkit.models.formats.llm_encoders:"


def _base(kind: str, label: str, config: str, matches: str, anchors: tuple, comfy: str) -> SingleFile:
    """A constant reading into a base model: the language model's names under `model.` or alone."""
    return SingleFile(_M + "to_base_model", _M + "base_to_comfy", anchors=anchors,
                      prefixes=(f"text_encoders.{comfy}.transformer.model.", "model.", ""),
                      config=_M + config, kind=kind, label=label, matches=_M + matches)


def _lm(base: SingleFile, comfy: str) -> SingleFile:
    """The same kind read into a causal LM: the whole file (its head, where it has one)."""
    from dataclasses import replace
    return replace(base, converter=_M + "to_causal_lm", original=_M + "causal_lm_to_comfy",
                   anchors=tuple("model." + a for a in base.anchors),
                   prefixes=(f"text_encoders.{comfy}.transformer.", ""))


_QWEN3_ANCHORS = ("embed_tokens.weight", "layers.0.self_attn.q_norm.weight", "layers.0.mlp.gate_proj.weight")
_GEMMA_ANCHORS = ("embed_tokens.weight", "layers.0.post_feedforward_layernorm.weight")
_LLAMA_ANCHORS = ("embed_tokens.weight", "layers.0.self_attn.q_proj.weight", "layers.0.post_attention_layernorm.weight")

QWEN3_06B = _base("qwen3_06b", "Qwen3 0.6B text encoder", "qwen3_06b_config", "is_qwen3_06b", _QWEN3_ANCHORS, "qwen3_06b")
QWEN3_4B = _base("qwen3_4b", "Qwen3 4B text encoder", "qwen3_4b_config", "is_qwen3_4b", _QWEN3_ANCHORS, "qwen3_4b")
QWEN3_8B = _base("qwen3_8b", "Qwen3 8B text encoder", "qwen3_8b_config", "is_qwen3_8b", _QWEN3_ANCHORS, "qwen3_8b")
QWEN3_4B_LM, QWEN3_8B_LM = _lm(QWEN3_4B, "qwen3_4b"), _lm(QWEN3_8B, "qwen3_8b")
# FLUX.2 klein's role: a Qwen3 4B or 8B file read into the causal LM
QWEN3_KLEIN_LM = replace(QWEN3_4B_LM, config=_M + "qwen3_klein_config", matches=_M + "is_qwen3_klein",
                         kind="qwen3_4b_8b", label="Qwen3 4B / 8B text encoder",
                         prefixes=("text_encoders.qwen3_4b.transformer.", "text_encoders.qwen3_8b.transformer.", ""))
GEMMA2_2B = _base("gemma2_2b", "Gemma 2 2B text encoder", "gemma2_2b_config", "is_gemma2_2b", _GEMMA_ANCHORS, "gemma2_2b")
GEMMA3_12B = _base("gemma3_12b", "Gemma 3 12B text encoder", "gemma3_12b_config", "is_gemma3_12b",
                   _GEMMA_ANCHORS + ("layers.0.self_attn.q_norm.weight",), "gemma3_12b")
MISTRAL3_SMALL = _base("mistral3_small", "Mistral Small 3.1 text encoder", "mistral3_small_config",
                       "is_mistral3_small", _LLAMA_ANCHORS, "mistral3_24b")
LLAVA_LLAMA3_8B = _base("llava_llama3_8b", "LLaVA-Llama-3-8B text encoder", "llava_llama3_8b_config",
                        "is_llava_llama3_8b", _LLAMA_ANCHORS, "llama")
# the whole file: the vision tower sits beside the language model (`visual.`), not under `model.`
QWEN25_VL_7B = SingleFile(_M + "to_qwen25_vl", _M + "qwen25_vl_to_comfy",
                          anchors=("model.embed_tokens.weight", "model.layers.0.self_attn.k_proj.bias",
                                   "visual.patch_embed.proj.weight"),
                          prefixes=("text_encoders.qwen25_7b.transformer.", ""), config=_M + "qwen25_vl_7b_config",
                          kind="qwen25_vl_7b", label="Qwen2.5-VL-7B text encoder", matches=_M + "is_qwen25_vl_7b")
