"""T5-family text encoders as ComfyUI's files and all-in-one checkpoints carry them: T5 v1.1 XXL
(`t5xxl_fp16`, `t5xxl_fp8_e4m3fn_scaled`: Flux, Chroma, Kontext, SD3, LTX), UMT5-XXL
(`umt5_xxl_fp16`, `umt5_xxl_fp8_e4m3fn_scaled`: Wan 2.1 / 2.2) and T5-base (Stable Audio Open).

Their layout is transformers' own encoder names (`encoder.block.N.layer.0.SelfAttention.q.weight`,
`shared.weight`), alone or under `text_encoders.<name>.transformer.` in an all-in-one checkpoint.
UMT5 files also embed the SentencePiece model as a `spiece_model` uint8 tensor (the tokenizer:
toolkit/tokenizers.py builds the umt5_xxl vocabulary from it). The older ComfyUI `scaled_fp8`
files (an FP8 weight and a `scale_weight` per Linear) are dequantized at load (formats/quant.py).

Config from the shapes (vocabulary, width, depth, heads and buckets from the relative-attention
table, head width, MLP width, gated or not, one bias table or one per layer), the rest (bucket
distance, activation, token ids, epsilon) from the known configs: the real ones (the hub repos'
`text_encoder/config.json`) and the tiny factory's (toolkit/models/tiny/kit.py `t5_encoder` /
`umt5_encoder` over its tiny tokenizer: the tests check they agree).
"""
from toolkit.models.arch import SingleFile
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.formats.known_match import match_known

# keys a file may carry that are no part of the encoder: the embedded tokenizer, the legacy FP8
# marker, a full T5's decoder and head (the pipelines take the encoder alone)
EMBEDDED = ("spiece_model", "scaled_fp8")
DROPPED_PREFIXES = ("decoder.", "lm_head.")
EMBEDDING, EMBEDDING_TIED = "shared.weight", "encoder.embed_tokens.weight"

_REAL = dict(d_kv=64, decoder_start_token_id=0, dense_act_fn="gelu_new", dropout_rate=0.1, eos_token_id=1,
             feed_forward_proj="gated-gelu", initializer_factor=1.0, is_encoder_decoder=True, layer_norm_epsilon=1e-6,
             pad_token_id=0, relative_attention_max_distance=128, relative_attention_num_buckets=32,
             tie_word_embeddings=False)
_TINY = dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
             relative_attention_num_buckets=8, relative_attention_max_distance=32, feed_forward_proj="gated-gelu",
             dropout_rate=0.0, layer_norm_epsilon=1e-6, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
TINY_VOCAB = 319              # len(kit.t5_tokenizer()): every arch's tiny T5/UMT5 takes its ids

T5_XXL_KNOWN = {
    # google/t5-v1_1-xxl's encoder, as FLUX.1 (text_encoder_2), SD3 (text_encoder_3) and LTX-Video ship it
    "t5-v1_1-xxl": dict(_REAL, vocab_size=32128, d_model=4096, d_ff=10240, num_layers=24, num_decoder_layers=24,
                        num_heads=64),
    # flux, chroma, flux_kontext, sd3, ltx: kit.t5_encoder(kit.t5_tokenizer(...))
    "tiny": dict(_TINY, vocab_size=TINY_VOCAB),
}
UMT5_XXL_KNOWN = {
    # google/umt5-xxl's encoder, as Wan 2.1 / 2.2 ship it (text_encoder/config.json)
    "umt5-xxl": dict(_REAL, vocab_size=256384, d_model=4096, d_ff=10240, num_layers=24, num_decoder_layers=24,
                     num_heads=64, scalable_attention=True),
    # wan21, wan22_5b, wan22_a14b: kit.umt5_encoder(kit.t5_tokenizer(512))
    "tiny": dict(_TINY, vocab_size=TINY_VOCAB),
}
T5_BASE_KNOWN = {
    # t5-base, as stabilityai/stable-audio-open-1.0 ships it (text_encoder/config.json): ReLU, not gated
    "t5-base": dict(_REAL, vocab_size=32128, d_model=768, d_ff=3072, num_layers=12, num_decoder_layers=12,
                    num_heads=12, feed_forward_proj="relu", dense_act_fn="relu", tie_word_embeddings=True),
    # stable_audio: kit.t5_encoder(kit.t5_tokenizer(128))
    "tiny": dict(_TINY, vocab_size=TINY_VOCAB),
}


def _embedding(view) -> str:
    for key in (EMBEDDING, EMBEDDING_TIED):
        if view.has(key):
            return key
    raise FileKindError("no shared.weight (nor encoder.embed_tokens.weight): not a T5 text encoder")


def t5_signature(view) -> dict:
    """What a T5-family encoder's shapes tell."""
    vocab, width = view.shape(_embedding(view))
    bias = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    buckets, heads = view.shape(bias)
    ff = "encoder.block.0.layer.1.DenseReluDense."
    gated = view.has(ff + "wi_0.weight")
    return {"vocab_size": vocab, "d_model": width, "num_layers": view.count(r"encoder\.block\.(\d+)\."),
            "num_heads": heads, "relative_attention_num_buckets": buckets,
            "d_kv": view.dim("encoder.block.0.layer.0.SelfAttention.q.weight") // max(heads, 1),
            "d_ff": view.dim(ff + ("wi_0.weight" if gated else "wi.weight")), "gated": gated,
            # UMT5 has a relative-attention table in every layer, T5 in the first alone
            "per_layer_bias": view.has("encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight")}


def _facts(umt5: bool):
    def facts_of(config: dict) -> dict:
        return {"vocab_size": config["vocab_size"], "d_model": config["d_model"], "num_layers": config["num_layers"],
                "num_heads": config["num_heads"], "relative_attention_num_buckets": config["relative_attention_num_buckets"],
                "d_kv": config["d_kv"], "d_ff": config["d_ff"], "gated": config["feed_forward_proj"].startswith("gated"),
                "per_layer_bias": umt5 and config["num_layers"] > 1}
    return facts_of


def t5_xxl_config(view):
    return match_known(t5_signature(view), T5_XXL_KNOWN, _facts(False), "T5-XXL text encoder")


def umt5_xxl_config(view):
    return match_known(t5_signature(view), UMT5_XXL_KNOWN, _facts(True), "UMT5-XXL text encoder")


def t5_base_config(view):
    return match_known(t5_signature(view), T5_BASE_KNOWN, _facts(False), "T5-base text encoder")


def _is(config_fn):
    def matches(view) -> bool:
        try:
            config_fn(view)
        except FileKindError:
            return False
        return True
    return matches


is_t5_xxl, is_umt5_xxl, is_t5_base = _is(t5_xxl_config), _is(umt5_xxl_config), _is(t5_base_config)


def convert_t5(state: dict) -> dict:
    """The file's tensors as T5EncoderModel / UMT5EncoderModel name them: the embedding under both
    of its names (the very same tensor: the encoder's embed_tokens is tied to `shared`), without
    the embedded tokenizer, the legacy FP8 marker, a decoder or a head."""
    out = {k: v for k, v in state.items() if k not in EMBEDDED and not k.startswith(DROPPED_PREFIXES)}
    emb = out.get(EMBEDDING, out.get(EMBEDDING_TIED))
    if emb is not None:
        out[EMBEDDING] = out[EMBEDDING_TIED] = emb
    return out


def to_original(state: dict) -> dict:
    """A T5EncoderModel / UMT5EncoderModel state dict as ComfyUI's files have it: transformers'
    names, the embedding once, as `shared.weight`."""
    out = dict(state)
    emb = out.pop(EMBEDDING_TIED, None)
    out.setdefault(EMBEDDING, emb)
    return out


_ANCHORS = ("encoder.block.0.layer.0.SelfAttention.q.weight", "encoder.final_layer_norm.weight")
_CONVERT, _ORIGINAL = "toolkit.models.formats.t5:convert_t5", "toolkit.models.formats.t5:to_original"

T5_XXL = SingleFile(_CONVERT, _ORIGINAL, anchors=_ANCHORS, prefixes=("text_encoders.t5xxl.transformer.", ""),
                    config="toolkit.models.formats.t5:t5_xxl_config", kind="t5_xxl", label="T5-XXL text encoder",
                    matches="toolkit.models.formats.t5:is_t5_xxl")
UMT5_XXL = SingleFile(_CONVERT, _ORIGINAL, anchors=_ANCHORS, prefixes=("text_encoders.umt5xxl.transformer.", ""),
                      config="toolkit.models.formats.t5:umt5_xxl_config", kind="umt5_xxl",
                      label="UMT5-XXL text encoder", matches="toolkit.models.formats.t5:is_umt5_xxl")
T5_BASE = SingleFile(_CONVERT, _ORIGINAL, anchors=_ANCHORS, prefixes=("text_encoders.t5base.transformer.", ""),
                     config="toolkit.models.formats.t5:t5_base_config", kind="t5_base", label="T5-base text encoder",
                     matches="toolkit.models.formats.t5:is_t5_base")
