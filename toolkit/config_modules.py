"""ModelConfig (which model) and GenerateImageConfig (what to sample), validated against the registry.

Both are built with `from_dict`, which rejects unknown keys and bad values with a
ConfigError naming the field, and fills omitted values from the arch's registry row.
"""
import os
import random
from dataclasses import MISSING, asdict, dataclass, field, fields, replace

from toolkit import attention, ip_adapter_ref
from toolkit.control_refs import RESIZE_MODES, parse_controls   # A1111's resize_mode 0, 1, 2
from toolkit.errors import ConfigError, check_keys, check_values
from toolkit.settings import Bound, Settings, bound_of, check_bound, coerce, describe_field, setting, type_hints
from toolkit.models.arch import MAX_SIZE, IMAGE_INPUTS, INPUTS, REFERENCES, STRENGTH_TASKS, TASKS, ArchSpec, load_object
from toolkit.models import step_cache
from toolkit.models.registry import ARCHS, get_arch
from toolkit.hires import UPSCALE, HiresSettings, UpscaleSettings, check_task as check_upscale_task

INPUT_ROLES = {"init_img": "the image to start from", "mask_img": "the inpaint mask: white = repaint",
               "ctrl_img": "the reference image to edit", "ctrl_img_1": "a further reference image",
               "ctrl_img_2": "a further reference image", "ctrl_img_3": "a further reference image",
               "init_video": "the video to start from or follow (a control video)",
               "mask_video": "the video's mask: white = generate", "init_audio": "the audio to start from"}
DTYPES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")
VAE_TILING = ("auto", "on", "off")     # sample.vae_tiling (toolkit/models/vae_tiling.py)
QTYPES = ("qfloat8", "qfloat8_e4m3fn", "qfloat8_e5m2", "qint8", "qint4", "qint2")


@dataclass(frozen=True)
class LoraRef(Settings):
    """One LoRA a request applies, unmerged, on the resident model (toolkit/models/lora_adapters.py)."""
    path: str
    scale: float = 1.0
    name: str | None = None                # display name (default: the file's basename)

    @classmethod
    def from_dict(cls, d, where: str) -> "LoraRef":
        if not isinstance(d, LoraRef):
            check_keys(d, {f.name for f in fields(cls)}, where, required=("path",))
        return super().from_dict(d, where)

    def check(self, where: str):
        if not self.path or not os.path.isfile(os.path.expanduser(self.path)):
            raise ConfigError(f"{where}.path", f"no such file: {self.path}")


@dataclass(frozen=True)
class ModelConfig(Settings):
    arch: str
    name_or_path: str | None = None        # diffusers folder, hub repo id, or a single .safetensors file
    extras_name_or_path: str | None = None  # where the other components/configs come from for a single file
    dtype: str = setting("auto", choices=DTYPES)   # auto: bf16 on CUDA, float32 on the CPU
    quantize: bool = False                 # quantize the denoiser (transformer/UNet)
    qtype: str = setting("qfloat8", choices=QTYPES)
    quantize_te: bool = False              # quantize the text encoder(s)
    qtype_te: str = setting("qfloat8", choices=QTYPES)
    low_vram: bool = False                 # alias: placement cpu_cache for every component
    layer_offloading: bool = False         # alias: placement layers for the denoiser(s)
    # where each component lives (toolkit/placement.py): auto | resident | cpu_cache | staged | layers,
    # {layers: N}, or {role: one of them}; normalized by placement.parse
    placement: object = "auto"
    lora_path: str | None = None           # one-LoRA shorthand: kept as given, and the first entry of `loras`
    lora_scale: float = 1.0
    loras: tuple = ()                      # LoraRef, in the order their outputs are added
    lora_fuse: bool = False                # fuse the active LoRAs into the weights (exactly undone on change)
    variant: str | None = None             # arch variant (krea2: turbo | raw); default: the arch's first
    components: dict = field(default_factory=dict)   # role -> local file/folder, overriding name_or_path per component
    vae: str | None = None                 # a VAE file or folder for any model: components.vae (A1111's sd_vae)
    profile: str | None = None             # the profile this config came from (display only)
    local_only: bool = False               # never consult a hub, even for a repo-looking name
    compile: bool | None = None            # the denoiser compiled (toolkit/models/compiled.py); unset: engine.compile
    attention: str = setting("auto", choices=attention.NAMES)   # the denoiser's attention kernel (toolkit/attention.py)

    @classmethod
    def from_dict(cls, d, where: str = "model") -> "ModelConfig":
        if isinstance(d, ModelConfig):
            return d
        if isinstance(d, dict) and isinstance(d.get("components"), dict):
            d = {**d, "components": dict(d["components"])}
        if isinstance(d, dict) and d.get("arch") is None:
            d = _detected(d, where)         # a file says its arch (and its variant)
        check_keys(d, {f.name for f in fields(cls)}, where, required=("arch",))
        arch = d["arch"]
        if not isinstance(arch, str) or arch not in ARCHS:
            raise ConfigError(f"{where}.arch", f"unknown arch {arch!r} (known: {', '.join(sorted(ARCHS))})")
        spec = get_arch(arch)
        values = dict(d)
        if spec.variants:
            variant = values.get("variant") or _file_variant(values.get("name_or_path"), arch) or spec.default_variant
            if not isinstance(variant, str) or variant not in spec.variants:
                raise ConfigError(f"{where}.variant", f"unknown variant {variant!r} for arch {arch} "
                                  f"(known: {', '.join(spec.variants)})")
            values["variant"] = variant
        elif values.get("variant"):
            raise ConfigError(f"{where}.variant", f"arch {arch} has no variants")
        if not values.get("name_or_path"):
            values["name_or_path"] = spec.default_source(values.get("variant"))
        if not values["name_or_path"] and not values.get("components"):
            raise ConfigError(f"{where}.name_or_path", f"arch {arch} has no public repo: give a local diffusers "
                              "folder, component paths, or a profile")
        _vae_override(values, spec, where)
        comps = values.get("components") or {}
        if not isinstance(comps, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                  for k, v in comps.items()):
            raise ConfigError(f"{where}.components", "must map component names to paths")
        roles = [c.role for c in spec.components]
        for role, path in comps.items():
            if role not in roles:
                raise ConfigError(f"{where}.components.{role}", f"arch {arch} has no component {role!r} "
                                  f"(its components: {', '.join(roles)})")
            if not os.path.exists(os.path.expanduser(path)):
                raise ConfigError(f"{where}.components.{role}", f"no such file or folder: {path}")
        values["attention"] = attention.canonical(values.get("attention"))     # aliases: sdpa, flash3, _native_math
        hints = type_hints(cls)
        for f in fields(cls):
            if f.name in values and values[f.name] is not None and f.name != "loras":
                values[f.name] = coerce(values[f.name], hints[f.name], f"{where}.{f.name}", bound_of(f))
        values["loras"] = _loras(values, where)
        values["placement"] = _placement(values, spec, where)
        return cls(**{k: v for k, v in values.items() if v is not None})

    @property
    def spec(self) -> ArchSpec:
        return get_arch(self.arch)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["loras"] = [asdict(ref) for ref in self.loras]
        return d

    def lora_key(self, i: int, where: str = "model") -> str:
        """The request key that named `loras[i]`: the lora_path shorthand is entry 0 when given."""
        if self.lora_path:
            return f"{where}.lora_path" if i == 0 else f"{where}.loras[{i - 1}].path"
        return f"{where}.loras[{i}].path"

    def without_loras(self) -> "ModelConfig":
        """The holder's identity: LoRAs, the attention backend and compile are switched on a resident holder
        per request, never part of what is loaded."""
        return replace(self, lora_path=None, lora_scale=1.0, loras=(), lora_fuse=False, attention="auto", compile=None)


def _placement(values: dict, spec, where: str):
    """`model.placement` normalized (toolkit/placement.parse), errors naming `model.placement[.<role>]`.
    A staged component is read again for every stage, so LoRA adapters injected into it would be lost:
    a request with LoRAs may not ask for one (auto never stages it)."""
    from toolkit import placement
    value = placement.parse(values.get("placement"), {c.role: c.kind for c in spec.components}, f"{where}.placement")
    if values.get("loras") and placement.STAGED in (value, *(value.values() if isinstance(value, dict) else ())):
        raise ConfigError(f"{where}.placement", "a staged component is read again for each stage, which would drop "
                          "its LoRA adapters: use cpu_cache with LoRAs")
    return value


def _vae_override(values: dict, spec, where: str):
    """`model.vae` is `model.components.vae` (a checkpoint's own VAE replaced, as A1111's sd_vae does):
    moved there, so one model named either way is one holder. Refused, naming `model.vae`, when the
    arch has no VAE, the path is not there, or components.vae names another."""
    vae = values.get("vae")
    if vae is None:
        return
    if not isinstance(vae, str) or not vae:
        raise ConfigError(f"{where}.vae", f"must be the path of a VAE file or folder, got {vae!r}")
    check_values(vae, f"{where}.vae")
    if "vae" not in {c.role for c in spec.components}:
        raise ConfigError(f"{where}.vae", f"arch {spec.name} has no VAE component")
    if not os.path.exists(os.path.expanduser(vae)):
        raise ConfigError(f"{where}.vae", f"no such file or folder: {vae}")
    comps = values.get("components")
    comps = dict(comps) if isinstance(comps, dict) else {}
    if comps.get("vae") not in (None, vae):
        raise ConfigError(f"{where}.vae", "components.vae names another VAE: give one of them")
    values["components"] = {**comps, "vae": vae}
    values["vae"] = None


def _detected(d: dict, where: str) -> dict:
    """`d` with the arch (and, unless given, the variant) its name_or_path file is, from the file's
    header (toolkit/models/formats/detect.py); a file that is no known arch is refused, naming what
    was detected. Anything but a local file keeps `arch` required."""
    from toolkit.models.formats.detect import detect_file
    from toolkit.models.formats.safetensors_header import HeaderError, is_safetensors_name
    path = d.get("name_or_path")
    if not isinstance(path, str) or not os.path.isfile(os.path.expanduser(path)) or not is_safetensors_name(path):
        return d
    name = os.path.basename(path)
    try:
        det = detect_file(os.path.expanduser(path))
    except (HeaderError, OSError) as e:
        raise ConfigError(f"{where}.name_or_path", f"{name}: {getattr(e, 'reason', e)}") from None
    if det.arch is None:
        what = ("a component file (" + ", ".join(label for _k, label, _f in det.kinds) + "), not a model"
                if det.kinds else "; ".join(det.problems) or "no known arch")
        raise ConfigError(f"{where}.arch", f"not given, and {name} is {what}: give model.arch")
    if det.denoiser is not None and det.denoiser.error:
        raise ConfigError(f"{where}.name_or_path", f"{name}: {det.denoiser.error}")
    out = {**d, "arch": det.arch}
    if det.variant and not d.get("variant"):
        out["variant"] = det.variant
    return out


def _file_variant(path, arch: str) -> str | None:
    """The variant a local file of `arch` says it is (an SDXL refiner, a v-prediction fine-tune), else None."""
    from toolkit.models.formats.detect import detect_file
    from toolkit.models.formats.safetensors_header import is_safetensors_name
    if not isinstance(path, str) or not os.path.isfile(os.path.expanduser(path)) or not is_safetensors_name(path):
        return None
    try:
        det = detect_file(os.path.expanduser(path))
    except (OSError, ValueError):
        return None                 # the file's own checks name what is wrong with it
    return det.variant if det.arch == arch else None


def _loras(values: dict, where: str) -> tuple:
    """`loras` as LoraRefs, with the `lora_path` shorthand as its first entry (not repeated when a
    round-tripped config already has it there)."""
    raw = values.get("loras") or ()
    if not isinstance(raw, (list, tuple)):
        raise ConfigError(f"{where}.loras", f"must be a list of {{path, scale, name}}, got {type(raw).__name__}")
    refs = [LoraRef.from_dict(d, f"{where}.loras[{i}]") for i, d in enumerate(raw)]
    path = values.get("lora_path")
    if path:
        if not os.path.isfile(os.path.expanduser(path)):
            raise ConfigError(f"{where}.lora_path", f"no such file: {path}")
        first = LoraRef(path, values.get("lora_scale", 1.0))
        if not refs or (refs[0].path, refs[0].scale) != (first.path, first.scale):
            refs.insert(0, first)
    return tuple(refs)


MAX_SECONDS = 600         # audio: ten minutes, past every audio arch's training clips
# the fields a modality has: another modality's value is taken as given and never used
MODALITY_FIELDS = {"width": ("image", "video"), "height": ("image", "video"), "num_frames": ("video",),
                   "fps": ("video",), "duration": ("audio",), "mask_start": ("audio",), "mask_end": ("audio",),
                   "hires": ("image",), "upscale": ("image",), "vae_tiling": ("image", "video")}
# fields only a task reads (GET /models serves them where the arch has the task; another task refuses them)
TASK_FIELDS = {"mask_start": "audio_inpaint", "mask_end": "audio_inpaint"}


@dataclass(frozen=True)
class GenerateImageConfig(Settings):
    """What to sample, fixed once it is built (`from_dict`): a request's sizes rounded, its task and
    strength resolved; `seeded()` gives the copy with a random seed picked."""
    prompt: str = ""
    negative_prompt: str | None = None   # None: the pipeline's own default (SDXL zeroes it: force_zeros_for_empty_prompt)
    width: int = setting(0, min=1, max=MAX_SIZE)
    height: int = setting(0, min=1, max=MAX_SIZE)
    num_inference_steps: int = setting(0, min=1)
    guidance_scale: float = setting(0.0, min=0)
    seed: int = setting(-1, min=-1, max=2**63 - 1, doc="-1: pick one at random (the file records the one used)")
    num_frames: int = setting(1, min=1)              # video
    fps: int = setting(0, min=0, exclusive_min=True)  # video
    duration: float = setting(0.0, min=0, max=MAX_SECONDS, exclusive_min=True)   # audio, seconds
    ctrl_img: str | None = None      # reference/control image (edit and control models)
    ctrl_img_1: str | None = None
    ctrl_img_2: str | None = None
    ctrl_img_3: str | None = None
    init_img: str | None = None      # the image img2img and inpaint start from (i2v: the first frame)
    mask_img: str | None = None      # inpaint mask: white = repaint
    init_video: str | None = None    # v2v: the source or control video (its first num_frames frames)
    mask_video: str | None = None    # v2v: where to generate (white) in init_video
    init_audio: str | None = None    # a2a, audio_inpaint: the audio to vary or fill in
    mask_start: float | None = setting(None, min=0, max=MAX_SECONDS, doc="audio_inpaint: the region to "
                                       "generate anew starts here (seconds)")
    mask_end: float | None = setting(None, min=0, max=MAX_SECONDS, exclusive_min=True,
                                     doc="audio_inpaint: the region ends here (seconds)")
    task: str | None = setting(None, choices=(None, *TASKS, UPSCALE), doc="None: inferred from the inputs")
    strength: float | None = setting(None, min=0, max=1, exclusive_min=True,
                                     doc="img2img/inpaint: how much of the init image is re-noised")
    resize_mode: str = setting("crop", choices=RESIZE_MODES)   # input images to the request size (A1111's 0, 1, 2)
    sampler: str | None = None       # a scheduler from the arch family's table (None: the model's own)
    shift: float | None = setting(None, min=0, exclusive_min=True, doc="flow-matching models with a fixed shift: "
                                  "this call's sigma shift (None: the model's own)")
    batch_size: int = setting(1, min=1)   # images made in one pass (seed + i each)
    cache: dict | str | None = None  # step cache for this request (toolkit/models/step_cache.py); not model identity
    # the VAE's tiled decode for this call (toolkit/models/vae_tiling.py): a request's, as its size is
    vae_tiling: str = setting("auto", choices=VAE_TILING, doc="auto: tiled when the whole decode would not fit "
                              "the free memory, or ran out of it; on: always; off: never")
    controls: tuple = ()             # ControlNets, each over its own image (toolkit/control_refs.py ControlRef)
    output_ext: str = ""
    hires: HiresSettings | None = None     # a second, larger img2img pass (toolkit/hires.py)
    upscale: UpscaleSettings | None = None  # task upscale's upscaler (toolkit/hires.py)
    extras: dict = field(default_factory=dict)   # per-arch keys (registry `sample_extras`)
    ip_adapter: tuple = ()           # IPAdapterRef (toolkit/ip_adapter_ref.py): applied for this call alone
    warnings: tuple = ()             # adjustments made while validating (shown to the user)

    COMMON = ("prompt", "negative_prompt", "width", "height", "num_inference_steps", "guidance_scale", "seed",
              "num_frames", "fps", "duration", "ctrl_img", "ctrl_img_1", "ctrl_img_2", "ctrl_img_3", "init_img",
              "mask_img", "init_video", "mask_video", "init_audio", "mask_start", "mask_end", "task", "strength",
              "resize_mode", "sampler", "shift", "batch_size", "output_ext", "cache", "hires", "upscale", "vae_tiling")
    IMAGE_INPUTS = IMAGE_INPUTS
    INPUTS = INPUTS

    @classmethod
    def from_dict(cls, d, arch, where: str = "sample", variant: str | None = None) -> "GenerateImageConfig":
        """Validate `d` for `arch` (a name, or a ModelConfig whose variant applies); omitted values
        come from the registry: the variant's defaults, then the arch's."""
        if isinstance(d, GenerateImageConfig):
            return d
        if isinstance(arch, ModelConfig):
            arch, variant = arch.arch, arch.variant
        spec = get_arch(arch)
        d = dict(d or {})
        check_keys(d, set(cls.COMMON) | set(spec.sample_extras) | {"ip_adapter", "controls"}, where)
        defaults = spec.sample_defaults(variant)
        hints = type_hints(cls)
        values = {}
        for name in cls.COMMON:
            raw = d.get(name)
            if raw is None:
                raw = defaults.get(name)
            if raw is None:
                continue
            relevant = spec.modality in MODALITY_FIELDS.get(name, (spec.modality,))
            values[name] = coerce(raw, hints[name], f"{where}.{name}", _BOUNDS[name] if relevant else Bound())
        extras = {}
        for name, extra in spec.sample_extras.items():
            raw = d.get(name)
            if raw is None:
                raw = defaults.get(name)
            extras[name] = None if raw is None else coerce(raw, EXTRA_TYPES.get(extra.type, extra.type),
                                                           f"{where}.{name}")
        controls = parse_controls(d.get("controls"), f"{where}.controls")
        if controls and not spec.controls:
            raise ConfigError(f"{where}.controls", f"arch {spec.name} takes no control models")
        warnings = []
        _settle(values, spec, where, variant, warnings)
        if spec.check:          # the arch's own rule across its keys, before the request is queued
            load_object(spec.check)(values, extras, where)
        ip_adapter = ip_adapter_ref.parse(d.get("ip_adapter"), spec, f"{where}.ip_adapter")
        return cls(**values, extras=extras, ip_adapter=ip_adapter, controls=controls, warnings=tuple(warnings))

    @classmethod
    def fields_for(cls, spec: ArchSpec, limits=None, variant: str | None = None) -> dict:
        """The sample fields `spec` takes with their bounds and choices (Settings.describe over this
        arch's sizes, tasks, samplers and formats, and `limits`: the engine's engine.limits, whose
        maxima a request must also keep): what GET /models serves so a form copies no rule."""
        from toolkit.media import OUTPUT_EXTS

        out = {}
        described = cls.describe()
        taken = {name for task in spec.tasks_for(variant) for name in task.inputs}
        for name in cls.COMMON:
            if spec.modality not in MODALITY_FIELDS.get(name, (spec.modality,)):
                continue
            if name == "negative_prompt" and not spec.uses_negative_prompt or name in INPUTS and name not in taken:
                continue
            if name in TASK_FIELDS and TASK_FIELDS[name] not in {t.name for t in spec.tasks_for(variant)}:
                continue
            if name == "hires" and "img2img" not in {t.name for t in spec.tasks_for(variant)}:
                continue
            out[name] = {k: v for k, v in described[name].items() if k != "default"}   # the arch's: its `sample`
        reach = spec.max_side_for(variant)
        for name in ("width", "height"):
            if name in out:
                out[name]["multiple_of"] = spec.size_divisor
                if reach:
                    out[name]["max"] = min(out[name]["max"], reach)
                if spec.round_size:
                    out[name]["rounded"] = True
        out["output_ext"]["choices"] = list(OUTPUT_EXTS[spec.modality])
        out["task"]["choices"] = [t.name for t in spec.tasks_for(variant)]     # not upscale: no diffusion task
        samplers = [s.name for s in spec.samplers()]
        if samplers:
            out["sampler"]["choices"] = samplers
            out["sampler"]["nullable"] = True
        else:
            del out["sampler"]
        if "shift" in out and shift_refusal(spec, variant):
            del out["shift"]
        out["batch_size"]["max"] = 1 if not spec.batch_arg else (limits.max_batch if limits else None)
        if limits is not None:
            out["num_inference_steps"]["max"] = limits.max_steps
            if "num_frames" in out:
                out["num_frames"]["max"] = limits.max_frames
            if "width" in out:
                out["width"]["max_pixels"] = out["height"]["max_pixels"] = limits.max_pixels
            for name in ("prompt", "negative_prompt"):
                if name in out:
                    out[name]["max_bytes"] = limits.max_prompt_bytes
        if out["batch_size"]["max"] is None:
            del out["batch_size"]["max"]
        for name, extra in spec.sample_extras.items():
            out[name] = describe_field(EXTRA_TYPES.get(extra.type, str), Bound())
        if spec.ip_adapter is not None:
            out["ip_adapter"] = {"type": "list", "items": {"type": "object", "fields": ip_adapter_ref.IPAdapterRef.describe()}}
        return out

    def seeded(self) -> "GenerateImageConfig":
        """This config with its seed fixed (a random one when -1), so the record and a rerun agree."""
        if self.seed >= 0:
            return self
        return replace(self, seed=random.randrange(0, 2**31))

    def to_dict(self) -> dict:
        d = {name: getattr(self, name) for name in self.COMMON}
        for name in ("hires", "upscale"):
            d[name] = d[name].to_dict() if d[name] is not None else None
        if self.controls:
            d["controls"] = [c.to_dict() for c in self.controls]
        d.update(self.extras)
        if self.ip_adapter:
            d["ip_adapter"] = [ref.to_dict() for ref in self.ip_adapter]
        return d


EXTRA_TYPES = {"str": str, "int": int, "float": float, "bool": bool}


def _settle(v: dict, spec: ArchSpec, where: str, variant: str | None, warnings: list):
    """The checks across fields and against the arch, on the coerced values `v` (fixed in place:
    sizes rounded where the arch rounds, the task and its strength resolved, the step cache checked)."""
    from toolkit.media import OUTPUT_EXTS

    get = lambda name: v.get(name, _FIELD_DEFAULTS[name])
    if not isinstance(get("prompt"), str):
        raise ConfigError(f"{where}.prompt", "must be a string")
    for name in ("num_inference_steps",) + (("width", "height") if spec.modality in ("image", "video") else ()):
        check_bound(get(name), _BOUNDS[name], f"{where}.{name}")     # also when neither request nor arch set it
    if spec.modality in ("image", "video"):
        for name in ("width", "height"):
            value = get(name)
            if value % spec.size_divisor and spec.round_size:
                rounded = -(-value // spec.size_divisor) * spec.size_divisor
                v[name] = rounded
                warnings.append(f"{where}.{name} {value} rounded up to {rounded} (a multiple of {spec.size_divisor})")
            elif value % spec.size_divisor:
                raise ConfigError(f"{where}.{name}", f"{value} is not a multiple of {spec.size_divisor}, "
                                  f"which arch {spec.name} needs")
            reach = spec.max_side_for(variant)
            if reach and v.get(name, value) > reach:
                raise ConfigError(f"{where}.{name}", f"{v.get(name, value)} is over {reach}, the largest side arch "
                                  f"{spec.name}'s denoiser reaches (its position table ends there)")
    if spec.modality == "video":
        check_bound(get("fps"), _BOUNDS["fps"], f"{where}.fps")
    if spec.modality == "audio":
        check_bound(get("duration"), _BOUNDS["duration"], f"{where}.duration")
    allowed = OUTPUT_EXTS[spec.modality]
    if get("output_ext") not in allowed:
        raise ConfigError(f"{where}.output_ext", f"{get('output_ext')!r} is not a {spec.modality} format "
                          f"(allowed: {', '.join(allowed)})")
    if get("batch_size") > 1 and not spec.batch_arg:
        raise ConfigError(f"{where}.batch_size", f"arch {spec.name}'s pipeline makes one {spec.modality} "
                          f"output per pass: batch_size must be 1, got {get('batch_size')}")
    sampler = get("sampler")
    if sampler is not None:
        names = [s.name for s in spec.samplers()]
        if not names:
            raise ConfigError(f"{where}.sampler", f"arch {spec.name} runs only its own scheduler "
                              f"({spec.scheduler_config.get('_class_name', 'unknown')}): leave sampler unset")
        if sampler not in names:
            raise ConfigError(f"{where}.sampler", f"unknown sampler {sampler!r} for arch {spec.name} "
                              f"(its samplers: {', '.join(names)})")
    if get("shift") is not None and (why := shift_refusal(spec, variant)):
        raise ConfigError(f"{where}.shift", f"arch {spec.name}: {why}")
    _resolve_task(v, spec, where, variant)
    v["cache"] = step_cache.validate(v.get("cache"), spec, f"{where}.cache")


def shift_refusal(spec: ArchSpec, variant: str | None = None) -> str | None:
    """Why sample.shift does not apply to the arch's scheduler (None where it does, or where the row
    names no scheduler: the loaded one is checked when the call builds its scheduler)."""
    from toolkit import samplers
    config = {**spec.scheduler_config, **spec.scheduler_for_files(variant)}
    return samplers.shift_refusal(config) if config else None


def _resolve_task(v: dict, spec: ArchSpec, where: str, variant: str | None = None):
    """Fix `task` (as given, else from the inputs: mask_img -> inpaint, init_img -> img2img (i2v
    on a video arch), a reference image -> edit, none -> the first task of the variant's (the
    arch's) that needs no input, else its first) and `strength` (the task's default when unset).
    An input the task does not take, a missing one, or a task the variant does not serve is
    refused, naming the field."""
    given = [name for name in INPUTS if v.get(name)]
    if v.get("task") == UPSCALE and spec.modality == "image":    # any image model's: nothing of it is loaded
        check_upscale_task(v, where)
        return
    tasks = spec.tasks_for(variant)
    served = ", ".join(t.name for t in tasks)
    who = f"arch {spec.name}" + (f" ({variant})" if variant and tasks != spec.tasks else "")
    if v.get("task") is not None:
        task = next((t for t in tasks if t.name == v["task"]), None)
        if task is None:
            raise ConfigError(f"{where}.task", f"{who} has no {v['task']} task (its tasks: {served})")
    else:
        if v.get("mask_img"):
            cause, name = "mask_img", "inpaint"
        elif v.get("init_img"):
            cause, name = "init_img", "i2v" if spec.modality == "video" else "img2img"
        elif v.get("init_video"):
            cause, name = "init_video", "v2v"
        elif v.get("init_audio"):
            cause, name = "init_audio", "audio_inpaint" if v.get("mask_start") is not None else "a2a"
        elif any(v.get(r) for r in REFERENCES):
            cause, name = next(r for r in REFERENCES if v.get(r)), "edit"
        else:
            cause, name = None, next((t.name for t in tasks if not t.needs), tasks[0].name)
        task = next((t for t in tasks if t.name == name), None)
        if task is None:
            raise ConfigError(f"{where}.{cause}", f"{who} takes no {cause}: it has no {name} task "
                              f"(its tasks: {served})")
    for name in given:
        if name not in task.inputs:
            raise ConfigError(f"{where}.{name}", f"task {task.name} of arch {spec.name} takes no {name} "
                              f"(it takes: {', '.join(task.inputs) or 'no input image'})")
    for name in task.needs:
        if not v.get(name):
            raise ConfigError(f"{where}.{name}", f"task {task.name} of arch {spec.name} needs {name} "
                              f"({INPUT_ROLES[name]})")
    for name, needed_by in TASK_FIELDS.items():
        if v.get(name) is not None and task.name != needed_by:
            raise ConfigError(f"{where}.{name}", f"task {task.name} takes no {name} (only {needed_by} does)")
    if task.name == "audio_inpaint":
        _check_region(v, where)
    if task.strength is None and v.get("strength") is not None:
        raise ConfigError(f"{where}.strength", f"task {task.name} takes no strength (only "
                          f"{' and '.join(STRENGTH_TASKS)} re-noise an input image)")
    v["task"] = task.name
    if v.get("strength") is None:
        v["strength"] = task.strength
    steps = v.get("num_inference_steps", 0)
    if v["strength"] is not None and steps * v["strength"] < 1:
        # the pipelines run the last steps * strength of the schedule (SD's int(), the flow-matching
        # ones rounding up): under one step SD's run none, and some of them fail on the empty schedule
        raise ConfigError(f"{where}.strength", f"strength {v['strength']:g} of {steps} steps is "
                          f"less than one step: raise strength or num_inference_steps")


def _check_region(v: dict, where: str):
    """audio_inpaint's region: both ends, in order, inside the clip the request makes."""
    start, end = v.get("mask_start"), v.get("mask_end")
    for name, value in (("mask_start", start), ("mask_end", end)):
        if value is None:
            raise ConfigError(f"{where}.{name}", "task audio_inpaint needs mask_start and mask_end: the seconds "
                              "of init_audio to generate anew")
    if end <= start:
        raise ConfigError(f"{where}.mask_end", f"{end:g} s is not after mask_start ({start:g} s)")
    if v.get("duration") and start >= v["duration"]:
        raise ConfigError(f"{where}.mask_start", f"{start:g} s is past the clip's end (duration {v['duration']:g} s)")


_BOUNDS = {f.name: bound_of(f) for f in fields(GenerateImageConfig)}
_FIELD_DEFAULTS = {f.name: f.default for f in fields(GenerateImageConfig) if f.default is not MISSING}
