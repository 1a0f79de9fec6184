"""A tiny text encoder written as ComfyUI's `text_encoders/` files have it:

    write_text_encoder(module, single_file, out_path, *, dtype=None, fp8=None, prefix="",
                       embed=None, head=True) -> dict

- the layout: the kind's `SingleFile.original` (formats/t5.py, formats/llm_encoders.py) over the
  module's state dict, checked the other way round twice before writing: the kind's converter gives
  the module's tensors back, and transformers itself (`from_pretrained` of a folder holding the file
  and the module's config) reads the file as the same model;
- `dtype`: fp16 / bf16 as ComfyUI's files are (None keeps float32);
- `fp8="legacy"`: ComfyUI's older scaled_fp8 layout (a `scaled_fp8` marker of the FP8 dtype, an FP8
  weight and a scalar F32 `scale_weight` per Linear, a `scale_input` on every other one);
  `fp8="manifest"`: today's (`weight_scale`, the `_quantization_metadata` header entry);
- `embed`: {tensor name: bytes} written as uint8 tensors (UMT5's `spiece_model`);
- `head=False`: a causal LM's file without `lm_head.weight` (its head tied to the embedding);
- `prefix`: an all-in-one checkpoint's (`text_encoders.t5xxl.transformer.`).

    spiece_model(tokenizer) -> bytes

a SentencePiece ModelProto holding a Unigram T5 tokenizer's pieces and scores (what ComfyUI's
umt5_xxl files embed), built with transformers' copy of the protobuf schema.
"""
import json
import os
import tempfile

import torch

# weights that are no Linear's: embeddings, relative-attention tables, heads
_NOT_LINEAR = ("shared.weight", "embed_tokens.weight", "relative_attention_bias.weight", "lm_head.weight")


def comfy_state(module, single_file) -> dict:
    """The module's tensors in the kind's ComfyUI layout, checked against the kind's converter and
    against transformers' own loading."""
    from toolkit.models.arch import load_object
    from toolkit.models.formats.component_file import convert
    state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    original = load_object(single_file.original)(dict(state))
    back = convert(single_file, dict(original), {})
    if set(back) != set(state):
        raise ValueError(f"{single_file.kind}: the ComfyUI layout does not convert back: missing "
                         f"{sorted(set(state) - set(back))[:3]}, extra {sorted(set(back) - set(state))[:3]}")
    bad = [k for k in state if not torch.equal(back[k], state[k])]
    if bad:
        raise ValueError(f"{single_file.kind}: the ComfyUI layout converts back to other values for {bad[:3]}")
    _check_transformers_reads(module, original)
    return original


def _check_transformers_reads(module, original: dict):
    """transformers' from_pretrained reads the layout as the module (ComfyUI's names are transformers'
    own, with or without `model.`, or Qwen2.5-VL's older ones, which transformers still converts)."""
    from safetensors.torch import save_file
    with tempfile.TemporaryDirectory(prefix="aitk_te_check_") as folder:
        module.config.save_pretrained(folder)
        save_file({k: v.contiguous() for k, v in original.items()}, os.path.join(folder, "model.safetensors"))
        back = type(module).from_pretrained(folder, dtype=torch.float32).state_dict()
    want = module.state_dict()
    bad = [k for k in want if k not in back or not torch.equal(back[k].float(), want[k].float())]
    if bad:
        raise ValueError(f"transformers reads the ComfyUI layout as other values for {bad[:3]}")


def is_linear_weight(key: str, t) -> bool:
    return t.ndim == 2 and key.endswith(".weight") and not key.endswith(_NOT_LINEAR)


def write_text_encoder(module, single_file, out_path, *, dtype=None, fp8=None, prefix: str = "", embed=None,
                       head: bool = True) -> dict:
    from safetensors.torch import save_file

    from toolkit.models.formats.scaled_fp8 import quantize_fp8
    original = comfy_state(module, single_file)
    if not head:
        original.pop("lm_head.weight", None)
    store = dtype or torch.float32
    tensors, layers, metadata = {}, {}, {}
    for key, t in original.items():
        if fp8 and is_linear_weight(key, t):
            layer = key[:-len(".weight")]
            q, scale = quantize_fp8(t.float())
            tensors[prefix + key] = q
            if fp8 == "legacy":
                tensors[prefix + layer + ".scale_weight"] = scale
                if len(layers) % 2:
                    tensors[prefix + layer + ".scale_input"] = torch.ones((), dtype=torch.float32)
            else:
                tensors[prefix + layer + ".weight_scale"] = scale
            layers[prefix + layer] = {"format": "float8_e4m3fn"}
        else:
            tensors[prefix + key] = t.to(store) if t.is_floating_point() else t
    if fp8 == "legacy":
        tensors[prefix + "scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    elif fp8 == "manifest":
        metadata["_quantization_metadata"] = json.dumps({"format_version": "1.0", "layers": layers}, sort_keys=True)
    elif fp8:
        raise ValueError(f"fp8 must be legacy or manifest, got {fp8!r}")
    for name, data in (embed or {}).items():
        tensors[name] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    out_path = str(out_path)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    tmp = out_path + ".tmp"
    save_file({k: v.contiguous() for k, v in sorted(tensors.items())}, tmp, metadata=metadata or None)
    os.replace(tmp, out_path)
    return {"path": out_path, "tensors": len(tensors), "quantized": len(layers)}


def spiece_model(tokenizer) -> bytes:
    """A Unigram SentencePiece model of a T5Tokenizer's pieces (ids in order, pad/eos/unk as T5's)."""
    from transformers.convert_slow_tokenizer import import_protobuf
    pb = import_protobuf()
    doc = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab = doc["model"]["vocab"]
    proto = pb.ModelProto()
    specials = {tokenizer.pad_token: 3, tokenizer.eos_token: 3, tokenizer.unk_token: 2}   # CONTROL, UNKNOWN
    for piece, score in vocab:
        p = proto.pieces.add()
        p.piece, p.score, p.type = piece, score, specials.get(piece, 1)
    spec = proto.trainer_spec
    spec.model_type, spec.vocab_size = 1, len(vocab)
    ids = {piece: i for i, (piece, _s) in enumerate(vocab)}
    spec.pad_id, spec.eos_id, spec.unk_id, spec.bos_id = (ids[tokenizer.pad_token], ids[tokenizer.eos_token],
                                                          ids[tokenizer.unk_token], -1)
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = True
    proto.normalizer_spec.remove_extra_whitespaces = True
    return proto.SerializeToString()
