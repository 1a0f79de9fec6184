"""Readers for checkpoint formats the libraries do not read themselves.

- `safetensors_header`: a safetensors file's header and metadata, parsed without torch and held to
  the format (length, JSON, entries, sizes, the data tiled exactly) before anything loads the file.
- `quant`: the ComfyUI quantization manifest (file-level `_quantization_metadata` or per-layer
  `comfy_quant` bytes), normalised to one manifest and audited strictly. Pure Python too, so
  `toolkit.inspect` can use it without importing torch or touching tensor data.
- `layouts`: the key layouts of the Krea 2 components and their detection (pure Python).
- `scaled_fp8`: `ScaledFp8Linear` (FP8 weight + scalar F32 scale), its optional `torch._scaled_mm`
  path behind hardware/alignment/parity gates, and dtype-preserving moves.
- `comfy`: the single-file readers the load funnel calls for Krea 2 in ComfyUI layout:
  `read_krea2_transformer`, `read_qwen3vl_text_encoder`, `read_qwen_image_vae`.

Importing this package imports nothing heavy.
"""
