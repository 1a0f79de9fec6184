"""Readers for checkpoint formats the libraries do not read themselves.

- `safetensors_header`: a safetensors file's header and metadata, parsed without torch and held to
  the format (length, JSON, entries, sizes, the data tiled exactly) before anything loads the file.
- `quant`: the ComfyUI quantization manifest (file-level `_quantization_metadata` or per-layer
  `comfy_quant` bytes), normalised to one manifest and audited strictly. Pure Python too, so
  `toolkit.file_report` can use it without importing torch or touching tensor data.
- `scaled_fp8`: `ScaledFp8Linear` (FP8 weight + scalar F32 scale), its optional `torch._scaled_mm`
  path behind hardware/alignment/parity gates, and dtype-preserving moves.
- `comfy`: the single-file readers the load funnel calls for Krea 2 in ComfyUI layout:
  `read_krea2_transformer`, `read_qwen3vl_text_encoder`, `read_qwen_image_vae` (their key layouts:
  toolkit/models/archs/krea2/layouts.py).

Importing this package imports nothing heavy.
"""
