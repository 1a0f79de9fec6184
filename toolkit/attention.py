"""`model.attention`: the attention kernel a request's denoiser runs, picked through diffusers' attention
dispatcher (diffusers/models/attention_dispatch.py: AttentionBackendName, dispatch_attention_fn).

BACKENDS is the table: our name (diffusers' own, less its leading underscore) -> the diffusers backend,
the packages it needs, the device kinds it runs on, and whether its kernel takes only bfloat16/float16
there. `check` is torch-free (importlib look-ups and the device's kind), so the engine's HTTP process
refuses a backend its worker cannot run before the request is queued: a ConfigError naming
`model.attention` that lists what is available, never a silent fallback. `applied` sets the backend on
the denoisers' attention processors for one pipeline call and puts back exactly what they had: the
denoiser is a pool module that other holders and requests share, so nothing outlives the call.
"""
import contextlib
import importlib.metadata
import importlib.util
from dataclasses import dataclass

from toolkit.errors import ConfigError

WHERE = "model.attention"
AUTO = "auto"
ANY = ()                       # runs on every device kind
CUDA = ("cuda",)
_ABSENT = object()


@dataclass(frozen=True)
class Backend:
    """One of diffusers' attention backends: `diffusers` its AttentionBackendName value; `packages`
    (module, minimum version or "") it imports; `devices` the device kinds it runs on (ANY: all);
    `half`: on CUDA its kernel takes only bfloat16/float16 (diffusers' _check_qkv_dtype_bf16_or_fp16;
    `bf16`: bfloat16 only); `hub`: it fetches its kernel from the Hugging Face hub on first use."""
    diffusers: str
    packages: tuple = ()
    devices: tuple = CUDA
    half: bool = False
    bf16: bool = False
    hub: bool = False


_FLASH = (("flash_attn", "2.6.3"),)          # diffusers' _REQUIRED_FLASH_VERSION
_FLASH_3 = (("flash_attn_3", ""),)
_SAGE = (("sageattention", "2.1.1"),)        # _REQUIRED_SAGE_VERSION
_KERNELS = (("kernels", "0.12"),)            # the hub kernels' loader

BACKENDS = {
    # PyTorch's own: scaled_dot_product_attention (native: it picks its kernel), one kernel forced, flex
    "native": Backend("native", devices=ANY),
    "native_math": Backend("_native_math", devices=ANY),
    "native_flash": Backend("_native_flash", devices=("cpu", "cuda"), half=True),
    "native_efficient": Backend("_native_efficient"),
    "native_cudnn": Backend("_native_cudnn", half=True),
    "native_npu": Backend("_native_npu", (("torch_npu", ""),), ("npu",), half=True),
    "native_xla": Backend("_native_xla", (("torch_xla", "2.2"),), ("xla",)),
    "flex": Backend("flex", (("torch", "2.5.0"),), ("cpu", "cuda")),
    # flash-attn 2 and 3
    "flash": Backend("flash", _FLASH, half=True),
    "flash_varlen": Backend("flash_varlen", _FLASH, half=True),
    "flash_3": Backend("_flash_3", _FLASH_3, half=True),
    "flash_varlen_3": Backend("_flash_varlen_3", _FLASH_3, half=True),
    # SageAttention (int8-quantized QK: close to, not equal to, exact attention)
    "sage": Backend("sage", _SAGE, half=True),
    "sage_varlen": Backend("sage_varlen", _SAGE, half=True),
    "sage_qk_int8_pv_fp8_cuda": Backend("_sage_qk_int8_pv_fp8_cuda", _SAGE),
    "sage_qk_int8_pv_fp8_cuda_sm90": Backend("_sage_qk_int8_pv_fp8_cuda_sm90", _SAGE),
    "sage_qk_int8_pv_fp16_cuda": Backend("_sage_qk_int8_pv_fp16_cuda", _SAGE),
    "sage_qk_int8_pv_fp16_triton": Backend("_sage_qk_int8_pv_fp16_triton", _SAGE),
    "xformers": Backend("xformers", (("xformers", "0.0.29"),)),
    # kernels fetched from the hub by the `kernels` package
    "flash_hub": Backend("flash_hub", _KERNELS, half=True, hub=True),
    "flash_varlen_hub": Backend("flash_varlen_hub", _KERNELS, half=True, hub=True),
    "flash_3_hub": Backend("_flash_3_hub", _KERNELS, half=True, hub=True),
    "flash_3_varlen_hub": Backend("_flash_3_varlen_hub", _KERNELS, half=True, hub=True),
    "flash_4_hub": Backend("flash_4_hub", (("kernels", "0.12.3"),), half=True, hub=True),
    "sage_hub": Backend("sage_hub", _KERNELS, half=True, hub=True),
    "sage_blackwell_hub": Backend("sage_blackwell_hub", _KERNELS, half=True, hub=True),
    "aiter_fa2_hub": Backend("aiter_fa2_hub", _KERNELS, bf16=True, hub=True),
}
NAMES = (AUTO, *BACKENDS)
# short names people use, and diffusers' own spelling of each (`_native_math`)
ALIASES = {"sdpa": "native", "flash2": "flash", "flash3": "flash_3", "flash4": "flash_4_hub",
           **{b.diffusers: name for name, b in BACKENDS.items() if b.diffusers != name}}
# a device kind's own kernel, where `auto` is not PyTorch's SDPA. On CPU and CUDA auto is `native`: SDPA picks
# its flash / memory-efficient / cuDNN kernel itself, takes every dtype and attention mask, and is exact; the
# others are opt-in (flash-attn and Sage refuse masks, Sage is approximate, most take only bf16/fp16)
AUTO_BY_DEVICE = {"npu": "native_npu", "xla": "native_xla"}
UNDISPATCHED = (AUTO, "native")     # what a denoiser that calls SDPA itself runs (ArchSpec.attention_backends False)


def canonical(value):
    """A request's `model.attention` as its name in BACKENDS (aliases and diffusers' spellings
    mapped); anything else as given, for the field's choices to refuse."""
    return ALIASES.get(value, value) if isinstance(value, str) else value


def device_kind(device) -> str:
    return str(device).split(":", 1)[0]


def resolve(name: str, device) -> str:
    """The backend `name` runs on `device`: `auto` made concrete."""
    return AUTO_BY_DEVICE.get(device_kind(device), "native") if name == AUTO else name


def compute_dtype(dtype: str, device) -> str:
    """model.dtype as the compute dtype's name (auto: bfloat16 on CUDA, float32 elsewhere, as
    toolkit/models/v2/policy.resolve_dtype)."""
    if dtype in (None, "auto"):
        return "bfloat16" if device_kind(device) == "cuda" else "float32"
    return {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(dtype, dtype)


def why_not(name: str, device, dtype: str = "auto", local_only: bool = False) -> str | None:
    """Why backend `name` cannot run on `device` with model.dtype `dtype` here, or None."""
    b = BACKENDS[resolve(name, device)]
    kind = device_kind(device)
    if b.devices and kind not in b.devices:
        return f"runs on {' or '.join(b.devices)} only, not on {device}"
    for module, minimum in b.packages:
        missing = _missing(module, minimum)
        if missing:
            return missing
    if kind == "cuda" and (b.half or b.bf16):
        have, takes = compute_dtype(dtype, device), ("bfloat16",) if b.bf16 else ("bfloat16", "float16")
        if have not in takes:
            return f"takes {' or '.join(takes)} only, and model.dtype is {have}"
    if b.hub and local_only:
        return "fetches its kernel from the Hugging Face hub, which model.local_only forbids"
    return None


def available(device, dtype: str = "auto", local_only: bool = False) -> list:
    """The names a request may give on `device` (with `dtype`) for a denoiser that dispatches: auto first."""
    return [AUTO] + [n for n in BACKENDS if why_not(n, device, dtype, local_only) is None]


def check(mc, device=None, where: str = WHERE):
    """`mc.attention` is one this model's denoiser takes and, when `device` is known (the engine's; None:
    where the holder runs, which checks again), one installed and running there. ConfigError naming
    `where` otherwise, listing what is available."""
    name = mc.attention
    if name in UNDISPATCHED:
        return
    spec = mc.spec
    if not spec.attention_backends:
        raise ConfigError(where, f"arch {spec.name}'s denoiser calls PyTorch's scaled_dot_product_attention "
                          f"itself, not diffusers' attention dispatcher, so it runs {' or '.join(UNDISPATCHED)} only")
    if device is None:
        return
    why = why_not(name, device, mc.dtype, mc.local_only)
    if why:
        raise ConfigError(where, f"{name} {why} (available here: "
                          f"{', '.join(available(device, mc.dtype, mc.local_only))})")


def _missing(module: str, minimum: str) -> str | None:
    """Why `module` (at `minimum` or later) is not importable here, or None; torch-free."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return f"needs the {module} package, which is not installed"
    if not minimum:
        return None
    try:
        version = importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        return None          # importable, no metadata to read: diffusers' own check at the call decides
    from packaging.version import InvalidVersion, Version
    try:
        if Version(version) < Version(minimum):
            return f"needs {module} {minimum} or later (installed: {version})"
    except InvalidVersion:
        return None
    return None


@contextlib.contextmanager
def applied(pipe, spec, mc, device):
    """While active, every attention processor of `pipe`'s denoisers that dispatches through diffusers
    runs `mc.attention` (its `_attention_backend`, as ModelMixin.set_attention_backend sets it, but not
    its process-wide default); afterwards each processor has exactly what it had. Enter it after any
    wrap that swaps processors for the call (IP-Adapters), so theirs run it too. A backend diffusers
    cannot load is the ConfigError naming model.attention that `check` would have given."""
    check(mc, device)
    from diffusers.models.attention_dispatch import (AttentionBackendName, _check_attention_backend_requirements,
                                                     _maybe_download_kernel_for_backend)

    backend = AttentionBackendName(BACKENDS[resolve(mc.attention, device)].diffusers)
    try:
        _check_attention_backend_requirements(backend)
        _maybe_download_kernel_for_backend(backend)
    except (RuntimeError, ImportError, ValueError) as e:
        raise ConfigError(WHERE, f"{mc.attention}: {e}") from None
    saved = {}
    for role in spec.denoiser_roles:
        for processor in dispatching_processors(pipe.components.get(role)):
            saved.setdefault(id(processor), (processor, vars(processor).get("_attention_backend", _ABSENT)))
    try:
        for processor, _before in saved.values():
            processor._attention_backend = backend
        yield backend.value
    finally:
        for processor, before in saved.values():
            if before is _ABSENT:
                vars(processor).pop("_attention_backend", None)     # the class's None shows through again
            else:
                processor._attention_backend = before



def dispatching_processors(module) -> list:
    """The attention processors under `module` that call diffusers' dispatch_attention_fn (those with an
    `_attention_backend`, as ModelMixin.set_attention_backend finds them); [] for none or no module."""
    if module is None or not hasattr(module, "modules"):
        return []
    out = []
    for sub in module.modules():
        processor = getattr(sub, "processor", None)
        if processor is not None and hasattr(processor, "_attention_backend"):
            out.append(processor)
    return out

