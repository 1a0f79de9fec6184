"""Scaled-FP8 linear layers (ComfyUI "float8_e4m3fn" format) and dtype-preserving moves.

`ScaledFp8Linear` is a drop-in for `nn.Linear` inside diffusers/transformers modules: it has
`in_features`, `out_features`, `weight` (an `nn.Parameter` stored as `torch.float8_e4m3fn`,
requires_grad False), `bias` (an ordinary float Parameter or None) and two float32 buffers,
`weight_scale` (a scalar) and optionally `input_scale`. The weight the layer stands for is
`weight.float() * weight_scale`.

Two forward paths:

- Correctness path (always available, the reference): `F.linear(x, weight.to(x.dtype) *
  weight_scale.to(x.dtype), bias)`. Only this layer's weight is expanded, and only for the duration
  of the call, so at most one expanded weight exists at a time.
- `torch._scaled_mm` path (opt-in per layer, `enable_scaled_mm`): the activation is quantized to
  e4m3 with a per-tensor scale (the checkpoint's `input_scale` when it has one, else ComfyUI's fixed
  1.0 with the input clamped to +-448, or with `activation_scale = "dynamic"` the amax/448 of the
  call's input) and multiplied in FP8 with the FP8 weight, result in x.dtype. It
  is switched on for a layer only when every gate passes: the API exists; the device can run it
  (the CPU in torch >= 2.13, CUDA with compute capability >= 8.9); in_features and out_features
  are multiples of 16; the activation dtype is bf16/fp16/fp32; the layer is not marked
  `full_precision_matrix_mult`; and a one-time parity check on a small fixed random input agrees
  with the correctness path to a relative (Frobenius) error <= PARITY_RTOL. The check runs per
  (device, dtype) the layer is called with, once. Activation quantization is the only difference
  between the paths (the weights are the same FP8 values): e4m3 keeps 3 mantissa bits, so the
  expected relative error is about 2-3%; PARITY_RTOL = 5% leaves room for that and catches a
  misread scale (which is off by orders of magnitude) or a broken kernel.

The weight's dtype is FP8, and model code reads `.weight.dtype` as if it were the compute dtype: Z-Image's
TimestepEmbedder casts its input to `mlp[0].weight.dtype`, Wan's to `next(time_embedder.parameters()).dtype`,
diffusers' `ModelMixin.dtype` is the first floating parameter's (pipelines cast latents to it). So:
- the readers keep FP8 only in the repeated blocks (`in_repeated_block`: under an nn.ModuleList), where
  the memory is; an FP8 Linear outside them (embedders, projections: a small share of the weights, the
  ones whose dtype callers read) is dequantized at load, so those callers see the compute dtype and
  keep their input's precision (a cast to e4m3 would round a timestep embedding to 3 mantissa bits);
- the layer computes in its compute dtype (`compute_dtype`, set by LoRA, else the dtype it was built
  for) whatever dtype its input arrives in: an input a caller cast to FP8 is widened, never multiplied
  as FP8 (which the CPU kernels do not implement), so no caller pattern inside a block can break a step.

Moves: `module.to(device)` keeps every tensor's dtype, so it is safe. `module.to(dtype)` is not:
it would expand every FP8 weight. `move_preserving(module, device, runtime_dtype)` moves a whole
model and gives each tensor its storage dtype: FP8 weights keep FP8, scales keep float32, modules
the model lists in `_keep_in_fp32_modules` keep float32, other float parameters take the runtime
dtype, buffers (rotary tables, ...) keep theirs.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8_DTYPE).max)       # 448
FP8_DTYPES = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                                "float8_e5m2fnuz") if hasattr(torch, n))
SCALE_BUFFERS = ("weight_scale", "input_scale")
SCALED_MM_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
SCALED_MM_ALIGN = 16
MIN_CUDA_CAPABILITY = (8, 9)
PARITY_RTOL = 0.05
PARITY_ROWS = 32
PARITY_SEED = 20260
_MIN_SCALE = 1e-12
# The `_scaled_mm` path's activation scale when a layer has no input_scale: "comfy" (ComfyUI's
# arithmetic: 1.0, input clamped to +-448; the default, same bits as ComfyUI) or "dynamic" (amax/448
# of each call's input: at least as accurate, other bits). Per layer: `layer.activation_scale`.
ACTIVATION_SCALES = ("comfy", "dynamic")
ACTIVATION_SCALE = "comfy"


def quantize_fp8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(float8_e4m3fn weight, scalar float32 scale) with scale = amax(|weight|) / 448, as ComfyUI
    writes scaled-FP8 checkpoints."""
    w = weight.detach().float()
    amax = w.abs().amax() if w.numel() else torch.tensor(0.0)
    scale = (amax / FP8_MAX).clamp_min(_MIN_SCALE).reshape(())
    q = (w / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return q, scale.to(torch.float32)


class ScaledFp8Linear(nn.Linear):
    """A Linear whose weight is stored as float8_e4m3fn with a scalar float32 scale. An nn.Linear, so
    PEFT wraps it for LoRA adapters (which run beside it in the compute dtype: toolkit/models/lora_adapters.py);
    nn.Linear's own init is skipped, it would allocate a float weight."""

    def __init__(self, in_features: int, out_features: int, bias: bool = False, *, has_input_scale: bool = False,
                 full_precision_matrix_mult: bool = False, device=None, bias_dtype: torch.dtype = torch.float32):
        nn.Module.__init__(self)
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.full_precision_matrix_mult = bool(full_precision_matrix_mult)
        self.weight = nn.Parameter(torch.empty((self.out_features, self.in_features), dtype=FP8_DTYPE, device=device),
                                   requires_grad=False)
        self.register_buffer("weight_scale", torch.ones((), dtype=torch.float32, device=device))
        self.register_buffer("input_scale", torch.ones((), dtype=torch.float32, device=device)
                             if has_input_scale else None)
        if bias:
            self.bias = nn.Parameter(torch.zeros(self.out_features, dtype=bias_dtype, device=device),
                                     requires_grad=False)
        else:
            self.register_parameter("bias", None)
        self._scaled_mm_on = False
        self._scaled_mm_checks: dict = {}      # (device str, dtype) -> (ok, detail)
        self.activation_scale = ACTIVATION_SCALE
        self._built_dtype = bias_dtype         # the runtime dtype the reader built it for

    @classmethod
    def from_linear(cls, linear: nn.Linear, *, full_precision_matrix_mult: bool = False) -> "ScaledFp8Linear":
        """Quantize an ordinary Linear (amax/448 scale). The bias keeps its dtype."""
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None,
                    full_precision_matrix_mult=full_precision_matrix_mult, device=linear.weight.device,
                    bias_dtype=linear.bias.dtype if linear.bias is not None else torch.float32)
        q, s = quantize_fp8(linear.weight)
        with torch.no_grad():
            layer.weight.data = q.to(linear.weight.device)
            layer.weight_scale = s.to(linear.weight.device)
            if linear.bias is not None:
                layer.bias.data = linear.bias.detach().clone()
        return layer

    def dequantized_weight(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return self.weight.to(dtype) * self.weight_scale.to(dtype)

    def extra_repr(self) -> str:
        flags = ", full_precision_matrix_mult" if self.full_precision_matrix_mult else ""
        flags += ", input_scale" if self.input_scale is not None else ""
        flags += ", scaled_mm" if self._scaled_mm_on else ""
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, weight=float8_e4m3fn{flags}")

    # -- forward ----------------------------------------------------------------------------------
    @property
    def runtime_dtype(self) -> torch.dtype:
        """The dtype it computes in when its input is FP8 (a caller cast to `.weight.dtype`)."""
        return getattr(self, "compute_dtype", None) or self._built_dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype in FP8_DTYPES:
            x = x.to(self.runtime_dtype)
        if self._scaled_mm_on and not (torch.is_grad_enabled() and x.requires_grad) and self._passes(x.device, x.dtype):
            return self._forward_scaled_mm(x)
        return self._forward_dequant(x)

    def _bias_for(self, x: torch.Tensor):
        b = self.bias
        return b if b is None or b.dtype == x.dtype else b.to(x.dtype)

    def _forward_dequant(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight.to(x.dtype) * self.weight_scale.to(x.dtype)   # this layer's only, freed on return
        return F.linear(x, weight, self._bias_for(x))

    def _forward_scaled_mm(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, self.in_features)
        if x2.shape[0] == 0:
            return self._forward_dequant(x)
        if self.input_scale is not None:
            xs = self.input_scale.to(device=x.device, dtype=torch.float32)
        elif self.activation_scale == "dynamic":
            xs = (x2.detach().abs().amax().float() / FP8_MAX).clamp_min(_MIN_SCALE)
        else:               # ComfyUI: a fixed 1.0, the input clamped to the FP8 range
            xs = torch.ones((), dtype=torch.float32, device=x.device)
        xq = (x2.float() / xs).clamp_(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
        y = torch._scaled_mm(xq, self.weight.t(), scale_a=xs, scale_b=self.weight_scale, bias=self._bias_for(x),
                             out_dtype=x.dtype)
        if isinstance(y, tuple):            # older torch returned (out, amax)
            y = y[0]
        return y.reshape(*shape[:-1], self.out_features)

    # -- the scaled_mm gate -----------------------------------------------------------------------
    def scaled_mm_blocker(self, device, dtype: torch.dtype) -> str | None:
        """Why `_scaled_mm` cannot be used for this layer on `device` with activations of `dtype`
        (None when the static checks pass; the parity check is separate)."""
        if not hasattr(torch, "_scaled_mm"):
            return "torch._scaled_mm is not available in this torch"
        if self.full_precision_matrix_mult:
            return "the checkpoint marks this layer full_precision_matrix_mult"
        if self.weight.dtype != FP8_DTYPE:
            return f"weight is {self.weight.dtype}, not float8_e4m3fn"
        if dtype not in SCALED_MM_DTYPES:
            return f"activation dtype {dtype} is not supported"
        if self.in_features % SCALED_MM_ALIGN or self.out_features % SCALED_MM_ALIGN:
            return (f"shape {self.out_features}x{self.in_features} is not a multiple of {SCALED_MM_ALIGN} "
                    "in both dimensions")
        device = torch.device(device)
        if device.type == "cuda":
            capability = torch.cuda.get_device_capability(device)
            if tuple(capability) < MIN_CUDA_CAPABILITY:
                return f"CUDA compute capability {capability[0]}.{capability[1]} < 8.9"
        elif device.type != "cpu":
            return f"device type {device.type} is not supported"
        if self.weight.device != device:
            return f"weight is on {self.weight.device}, activations on {device}"
        return None

    def check_scaled_mm(self, device=None, dtype: torch.dtype | None = None) -> tuple[bool, str]:
        """Run (once per device and dtype) the static checks and the parity check. Returns (ok, detail)."""
        device = torch.device(device) if device is not None else self.weight.device
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        dtype = dtype or (self.bias.dtype if self.bias is not None else torch.float32)
        key = (str(device), dtype)
        if key not in self._scaled_mm_checks:
            self._scaled_mm_checks[key] = self._run_check(device, dtype)
        return self._scaled_mm_checks[key]

    def _run_check(self, device, dtype) -> tuple[bool, str]:
        blocker = self.scaled_mm_blocker(device, dtype)
        if blocker:
            return False, blocker
        rel = parity_error(self, device, dtype)
        if not math.isfinite(rel) or rel > PARITY_RTOL:
            return False, f"parity check failed: relative error {rel:.4g} > {PARITY_RTOL}"
        return True, f"parity relative error {rel:.4g} <= {PARITY_RTOL}"

    def _passes(self, device, dtype) -> bool:
        return self.check_scaled_mm(device, dtype)[0]

    def set_scaled_mm(self, enabled: bool = True, *, device=None, dtype: torch.dtype | None = None) -> bool:
        """Ask for the `_scaled_mm` path. It is used only where `check_scaled_mm` passes; returns
        whether it passes for `device`/`dtype` (default: the weight's device, the bias's dtype)."""
        if not enabled:
            was, self._scaled_mm_on = self._scaled_mm_on, False
            return was
        ok, _ = self.check_scaled_mm(device, dtype)
        self._scaled_mm_on = ok
        return ok

    @property
    def scaled_mm_enabled(self) -> bool:
        return self._scaled_mm_on


def parity_error(layer: ScaledFp8Linear, device, dtype) -> float:
    """Relative Frobenius error of the `_scaled_mm` path against the correctness path on a fixed
    random input of PARITY_ROWS rows (inf when the kernel fails or returns non-finite values)."""
    g = torch.Generator().manual_seed(PARITY_SEED)
    x = torch.randn(PARITY_ROWS, layer.in_features, generator=g).to(device=device, dtype=dtype)
    try:
        with torch.no_grad():
            ref = layer._forward_dequant(x).float()
            got = layer._forward_scaled_mm(x).float()
    except (RuntimeError, TypeError, ValueError, NotImplementedError):
        return math.inf
    if not torch.isfinite(got).all():
        return math.inf
    return float((got - ref).norm() / ref.norm().clamp_min(_MIN_SCALE))


def in_repeated_block(model: nn.Module, name: str) -> bool:
    """Whether the layer `name` sits in one of the model's repeated blocks (a child of an
    nn.ModuleList on its path: `transformer_blocks.3.attn.to_q`), not in an embedder or projection
    around them (`t_embedder.mlp.0`, `x_embedder`, `proj_out`), whose dtype model code reads."""
    parts = name.split(".")
    module = model
    for part in parts[:-1]:
        if isinstance(module, nn.ModuleList):
            return True
        module = getattr(module, part, None)
        if module is None:
            return False
    return isinstance(module, nn.ModuleList)


def dequantize_outside_blocks(model: nn.Module) -> list:
    """Replace every ScaledFp8Linear outside the repeated blocks by an nn.Linear of its dequantized weight
    (`weight * weight_scale`, in float32, stored in the layer's runtime dtype): for a reader that installs
    its FP8 layers before it knows where they sit. Returns their names."""
    done = []
    for name, layer in list(model.named_modules()):
        if not isinstance(layer, ScaledFp8Linear) or in_repeated_block(model, name):
            continue
        dtype = layer.runtime_dtype
        new = nn.Linear(layer.in_features, layer.out_features, layer.bias is not None, device=layer.weight.device,
                        dtype=dtype)
        with torch.no_grad():
            new.weight = nn.Parameter(layer.dequantized_weight(torch.float32).to(dtype), requires_grad=False)
            if layer.bias is not None:
                new.bias = nn.Parameter(layer.bias.detach().to(dtype), requires_grad=False)
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, new.eval())
        done.append(name)
    return done


def _guess_runtime_dtype(module: nn.Module) -> torch.dtype:
    for p in module.parameters():
        if p.is_floating_point() and p.dtype not in FP8_DTYPES:
            return p.dtype
    return torch.float32


def enable_scaled_mm(module: nn.Module, enabled: bool = True, *, dtype: torch.dtype | None = None) -> int:
    """Switch every ScaledFp8Linear in `module` to the `_scaled_mm` path where its gates pass (or
    back, with enabled=False). `dtype` is the activation dtype to check parity with (default: the
    module's first non-FP8 float parameter's dtype). Returns how many layers switched."""
    dtype = dtype or _guess_runtime_dtype(module)
    count = 0
    for layer in module.modules():
        if isinstance(layer, ScaledFp8Linear):
            if enabled:
                count += layer.set_scaled_mm(True, dtype=dtype)
            else:
                count += layer.set_scaled_mm(False)
    return count


def scaled_mm_report(module: nn.Module) -> dict:
    """{layer name: {"enabled": bool, "checks": {"device/dtype": detail}}} for every ScaledFp8Linear."""
    out = {}
    for name, layer in module.named_modules():
        if isinstance(layer, ScaledFp8Linear):
            out[name] = {"enabled": layer.scaled_mm_enabled,
                         "full_precision_matrix_mult": layer.full_precision_matrix_mult,
                         "checks": {f"{d}/{str(t).replace('torch.', '')}": ("ok: " if ok else "off: ") + detail
                                    for (d, t), (ok, detail) in layer._scaled_mm_checks.items()}}
    return out


def keep_fp32_names(module: nn.Module) -> set:
    """Parameter names the model asks to keep in float32 (diffusers/transformers
    `_keep_in_fp32_modules`: a name component equal to a listed module name)."""
    keep = getattr(module, "_keep_in_fp32_modules", None) or ()
    if not keep:
        return set()
    return {n for n, _ in module.named_parameters() if any(k in n.split(".") for k in keep)}


def storage_dtype(name: str, tensor: torch.Tensor, runtime_dtype: torch.dtype, keep_fp32: set,
                  owner: nn.Module | None = None) -> torch.dtype:
    """The dtype a parameter is kept in: FP8 stays FP8, scales float32, fp32-kept modules float32,
    other floats the runtime dtype, non-floats unchanged."""
    if tensor.dtype in FP8_DTYPES or not tensor.is_floating_point():
        return tensor.dtype
    if isinstance(owner, ScaledFp8Linear) and name.rsplit(".", 1)[-1] in SCALE_BUFFERS:
        return torch.float32
    if name in keep_fp32:
        return torch.float32
    return runtime_dtype


def move_preserving(module: nn.Module, device, runtime_dtype: torch.dtype | None = None) -> nn.Module:
    """Move `module` to `device` without ever expanding FP8 storage (see the module docstring).
    With runtime_dtype None only the device changes. Parameters keep their identity."""
    device = torch.device(device)
    keep = keep_fp32_names(module)
    for mod_name, sub in module.named_modules():
        for pname, p in list(sub._parameters.items()):
            if p is None:
                continue
            full = f"{mod_name}.{pname}" if mod_name else pname
            dtype = p.dtype if runtime_dtype is None else storage_dtype(full, p, runtime_dtype, keep, sub)
            if p.device != device or p.dtype != dtype:
                with torch.no_grad():
                    p.data = p.data.to(device=device, dtype=dtype)
        for bname, b in list(sub._buffers.items()):
            if b is None:
                continue
            dtype = torch.float32 if isinstance(sub, ScaledFp8Linear) and bname in SCALE_BUFFERS else b.dtype
            if b.device != device or b.dtype != dtype:
                sub._buffers[bname] = b.to(device=device, dtype=dtype)
    return module


def fp8_parameter_names(module: nn.Module) -> list:
    return [n for n, p in module.named_parameters() if p.dtype in FP8_DTYPES]
