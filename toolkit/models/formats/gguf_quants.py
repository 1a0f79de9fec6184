"""GGML block quantization for writing GGUF files (numpy only, no torch).

The `gguf` package (0.19.0) quantizes Q8_0 and Q4_0 itself but has only *de*quantizers for the
K-quants. Q6_K, Q5_K and Q4_K are encoded here in exactly the byte layout `gguf.quants`'
dequantizers (and llama.cpp, diffusers, ComfyUI-GGUF) read: 256-value super-blocks with fp16
super-scales and 6-bit (Q4_K/Q5_K) or int8 (Q6_K) sub-block scales. The scales come from each
sub-block's range (a plain min/max fit, not llama.cpp's iterative search), so the error is a
little above llama-quantize's for the same type; round trips are tested against `gguf.quants`.
"""
import numpy as np

QK_K = 256
QUANT_TYPES = ("Q8_0", "Q6_K", "Q5_K", "Q4_K", "Q4_0")     # what the tiny factory writes and the tests cover
BLOCK = {"Q8_0": 32, "Q4_0": 32, "Q6_K": QK_K, "Q5_K": QK_K, "Q4_K": QK_K}


def quantize(data: np.ndarray, qtype: str) -> np.ndarray:
    """`data` (float32, last dim a multiple of the type's block) -> the packed uint8 rows."""
    import gguf

    data = np.ascontiguousarray(data, dtype=np.float32)
    if qtype in ("F32", "F16", "Q8_0", "Q4_0"):
        return gguf.quants.quantize(data, gguf.GGMLQuantizationType[qtype])
    if data.shape[-1] % QK_K:
        raise ValueError(f"{qtype} needs rows a multiple of {QK_K} values, not {data.shape[-1]}")
    blocks = data.reshape(-1, QK_K)
    packed = {"Q6_K": _q6_k, "Q5_K": _q5_k, "Q4_K": _q4_k}[qtype](blocks)
    return packed.reshape(*data.shape[:-1], data.shape[-1] // QK_K * packed.shape[-1])


def _f16(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float16).reshape(-1, 1).view(np.uint8)


def _safe_div(a, b):
    return np.divide(a, b, out=np.zeros_like(a), where=b != 0)


def _scale_min_k4(blocks: np.ndarray, qmax: int):
    """Q4_K/Q5_K: per 32-value sub-block x ~= d*sc*q - dmin*m with q in [0, qmax], sc and m 6-bit."""
    sub = blocks.reshape(-1, 8, 32)
    lo = np.minimum(sub.min(axis=-1), 0.0)                     # the offset is never negative (llama.cpp too)
    scale = (sub.max(axis=-1) - lo) / qmax
    offset = -lo
    d = scale.max(axis=-1, keepdims=True) / 63.0
    dmin = offset.max(axis=-1, keepdims=True) / 63.0
    d, dmin = d.astype(np.float16).astype(np.float32), dmin.astype(np.float16).astype(np.float32)
    sc = np.clip(np.rint(_safe_div(scale, d)), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(_safe_div(offset, dmin)), 0, 63).astype(np.uint8)
    step = (d * sc)[..., None]
    q = np.clip(np.rint(_safe_div(sub + (dmin * m)[..., None], np.broadcast_to(step, sub.shape))), 0, qmax)
    return d, dmin, sc, m, q.astype(np.uint8)


def _pack_scales(sc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The 12-byte packing of eight 6-bit scales and eight 6-bit mins (gguf Q4_K.get_scale_min's inverse)."""
    d_part = (sc[:, :4] & 0x3F) | ((sc[:, 4:] >> 4) << 6)
    m_part = (m[:, :4] & 0x3F) | ((m[:, 4:] >> 4) << 6)
    md_part = (sc[:, 4:] & 0x0F) | ((m[:, 4:] & 0x0F) << 4)
    return np.concatenate([d_part, m_part, md_part], axis=-1).astype(np.uint8)


def _nibbles(q: np.ndarray) -> np.ndarray:
    """Sub-blocks (n, 8, 32) of 4-bit values -> 128 bytes: sub-block 2g in the low nibble, 2g+1 high."""
    q = q.reshape(-1, 4, 2, 32)
    return (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(-1, 128).astype(np.uint8)


def _q4_k(blocks):
    d, dmin, sc, m, q = _scale_min_k4(blocks, 15)
    return np.concatenate([_f16(d), _f16(dmin), _pack_scales(sc, m), _nibbles(q)], axis=-1)


def _q5_k(blocks):
    d, dmin, sc, m, q = _scale_min_k4(blocks, 31)
    high = (q >> 4) & 1                                            # (n, 8, 32): bit j of qh[i] is sub-block j's
    qh = np.zeros((q.shape[0], 32), dtype=np.uint8)
    for j in range(8):
        qh |= (high[:, j, :] << j).astype(np.uint8)
    return np.concatenate([_f16(d), _f16(dmin), _pack_scales(sc, m), qh, _nibbles(q & 0x0F)], axis=-1)


def _q6_k(blocks):
    sub = blocks.reshape(-1, 16, 16)
    amax = np.abs(sub).max(axis=-1)
    scale = amax / 31.0
    d = (np.abs(scale).max(axis=-1, keepdims=True) / 127.0).astype(np.float16).astype(np.float32)
    sc = np.clip(np.rint(_safe_div(scale, d)), -127, 127).astype(np.int8)
    step = np.broadcast_to((d * sc)[..., None], sub.shape)
    q = (np.clip(np.rint(_safe_div(sub, step)), -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 128)
    # 128 values per half: low nibbles as two runs of 64 in one 64-byte row, high bit pairs as four runs of 32
    low, high = q & 0x0F, q >> 4
    ql = (low[:, :, :64] | (low[:, :, 64:] << 4)).reshape(-1, 128)
    h = high.reshape(-1, 2, 4, 32)
    qh = (h[:, :, 0] | (h[:, :, 1] << 2) | (h[:, :, 2] << 4) | (h[:, :, 3] << 6)).reshape(-1, 64)
    return np.concatenate([ql.astype(np.uint8), qh.astype(np.uint8), sc.view(np.uint8), _f16(d)], axis=-1)
