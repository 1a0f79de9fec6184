"""ModelConfig (which model) and GenerateImageConfig (what to sample), validated against the registry.

Both are built with `from_dict`, which rejects unknown keys and bad values with a
ConfigError naming the field, and fills omitted values from the arch's registry row.
"""
import math
import os
import random
from dataclasses import asdict, dataclass, field, fields, replace

from toolkit.errors import ConfigError, check_keys, check_values
from toolkit.models.arch import IMAGE_INPUTS, REFERENCES, STRENGTH_TASKS, TASKS, ArchSpec
from toolkit.models import step_cache
from toolkit.models.registry import ARCHS, get_arch

RESIZE_MODES = ("resize", "crop", "fill")      # A1111's resize_mode 0, 1, 2: just resize, crop and resize, resize and fill
INPUT_ROLES = {"init_img": "the image to start from", "mask_img": "the inpaint mask: white = repaint",
               "ctrl_img": "the reference image to edit", "ctrl_img_1": "a further reference image",
               "ctrl_img_2": "a further reference image", "ctrl_img_3": "a further reference image"}
DTYPES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")
QTYPES = ("qfloat8", "qfloat8_e4m3fn", "qfloat8_e5m2", "qint8", "qint4", "qint2")


@dataclass(frozen=True)
class LoraRef:
    """One LoRA a request applies, unmerged, on the resident model (toolkit/models/lora.py)."""
    path: str
    scale: float = 1.0
    name: str | None = None                # display name (default: the file's basename)

    @classmethod
    def from_dict(cls, d, where: str) -> "LoraRef":
        if isinstance(d, LoraRef):
            return d
        check_keys(d, {f.name for f in fields(cls)}, where, required=("path",))
        values = {f.name: _coerce(d[f.name], f.type, f"{where}.{f.name}") for f in fields(cls)
                  if d.get(f.name) is not None}
        if not values["path"] or not os.path.isfile(os.path.expanduser(values["path"])):
            raise ConfigError(f"{where}.path", f"no such file: {values['path']}")
        return cls(**values)


@dataclass(frozen=True)
class ModelConfig:
    arch: str
    name_or_path: str | None = None        # diffusers folder, hub repo id, or a single .safetensors file
    extras_name_or_path: str | None = None  # where the other components/configs come from for a single file
    dtype: str = "auto"                    # auto: bf16 on CUDA, float32 on the CPU
    quantize: bool = False                 # quantize the denoiser (transformer/UNet)
    qtype: str = "qfloat8"
    quantize_te: bool = False              # quantize the text encoder(s)
    qtype_te: str = "qfloat8"
    low_vram: bool = False                 # keep components on the CPU until used
    layer_offloading: bool = False         # stream denoiser blocks to the device one group at a time
    lora_path: str | None = None           # one-LoRA shorthand: kept as given, and the first entry of `loras`
    lora_scale: float = 1.0
    loras: tuple = ()                      # LoraRef, in the order their outputs are added
    lora_fuse: bool = False                # fuse the active LoRAs into the weights (exactly undone on change)
    variant: str | None = None             # arch variant (krea2: turbo | raw); default: the arch's first
    components: dict = field(default_factory=dict)   # role -> local file/folder, overriding name_or_path per component
    vae: str | None = None                 # a VAE file or folder for any model: components.vae (A1111's sd_vae)
    profile: str | None = None             # the profile this config came from (display only)
    local_only: bool = False               # never consult a hub, even for a repo-looking name

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
        for f in fields(cls):
            if f.name in values and values[f.name] is not None and f.name != "loras":
                values[f.name] = _coerce(values[f.name], f.type, f"{where}.{f.name}")
        if values.get("dtype", "auto") not in DTYPES:
            raise ConfigError(f"{where}.dtype", f"unknown dtype {values['dtype']!r} (allowed: {', '.join(DTYPES)})")
        for q in ("qtype", "qtype_te"):
            if values.get(q) is not None and values[q] not in QTYPES:
                raise ConfigError(f"{where}.{q}", f"unknown qtype {values[q]!r} (allowed: {', '.join(QTYPES)})")
        values["loras"] = _loras(values, where)
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
        """The holder's identity: LoRAs are switched on a resident holder, never part of what is loaded."""
        return replace(self, lora_path=None, lora_scale=1.0, loras=(), lora_fuse=False)


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


@dataclass
class GenerateImageConfig:
    prompt: str = ""
    negative_prompt: str = ""
    width: int = 0
    height: int = 0
    num_inference_steps: int = 0
    guidance_scale: float = 0.0
    seed: int = -1                   # -1: pick one at random (the file records the one used)
    num_frames: int = 1              # video
    fps: int = 0                     # video
    duration: float = 0.0            # audio, seconds
    ctrl_img: str | None = None      # reference/control image (edit and control models)
    ctrl_img_1: str | None = None
    ctrl_img_2: str | None = None
    ctrl_img_3: str | None = None
    init_img: str | None = None      # the image img2img and inpaint start from (i2v: the first frame)
    mask_img: str | None = None      # inpaint mask: white = repaint
    task: str | None = None          # txt2img | img2img | inpaint | edit | i2v; None: inferred from the inputs
    strength: float | None = None    # img2img/inpaint: how much of the init image is re-noised (None: the arch's)
    resize_mode: str = "crop"        # input images to the request size: resize | crop | fill (A1111's 0, 1, 2)
    sampler: str | None = None       # a scheduler from the arch family's table (None: the model's own)
    batch_size: int = 1              # images made in one pass (seed + i each)
    cache: dict | None = None        # step cache for this request (toolkit/models/step_cache.py); not model identity
    output_ext: str = ""
    extras: dict = field(default_factory=dict)   # per-arch keys (registry `sample_extras`)
    warnings: list = field(default_factory=list)  # adjustments made while validating (shown to the user)

    COMMON = ("prompt", "negative_prompt", "width", "height", "num_inference_steps", "guidance_scale", "seed",
              "num_frames", "fps", "duration", "ctrl_img", "ctrl_img_1", "ctrl_img_2", "ctrl_img_3", "init_img",
              "mask_img", "task", "strength", "resize_mode", "sampler", "batch_size", "output_ext", "cache")
    IMAGE_INPUTS = IMAGE_INPUTS

    @classmethod
    def from_dict(cls, d, arch, where: str = "sample", variant: str | None = None) -> "GenerateImageConfig":
        """Validate `d` for `arch` (a name, or a ModelConfig whose variant applies); omitted values
        come from the registry: the variant's defaults, then the arch's."""
        if isinstance(arch, ModelConfig):
            arch, variant = arch.arch, arch.variant
        spec = get_arch(arch)
        d = dict(d or {})
        check_keys(d, set(cls.COMMON) | set(spec.sample_extras), where)
        defaults = spec.sample_defaults(variant)
        types = {f.name: f.type for f in fields(cls)}
        values = {}
        for name in cls.COMMON:
            raw = d.get(name)
            if raw is None:
                raw = defaults.get(name)
            if raw is None:
                continue
            values[name] = _coerce(raw, types[name], f"{where}.{name}")
        extras = {}
        for name, extra in spec.sample_extras.items():
            raw = d.get(name)
            if raw is None:
                raw = defaults.get(name)
            extras[name] = None if raw is None else _coerce(raw, extra.type, f"{where}.{name}")
        gen = cls(**values, extras=extras)
        gen.validate(spec, where, variant)
        return gen

    def validate(self, spec: ArchSpec, where: str = "sample", variant: str | None = None):
        from toolkit.media import AUDIO_EXTS, IMAGE_EXTS, VIDEO_EXTS

        if not isinstance(self.prompt, str):
            raise ConfigError(f"{where}.prompt", "must be a string")
        if self.num_inference_steps < 1:
            raise ConfigError(f"{where}.num_inference_steps", f"must be >= 1, got {self.num_inference_steps}")
        if not math.isfinite(self.guidance_scale) or self.guidance_scale < 0:
            raise ConfigError(f"{where}.guidance_scale", f"must be a finite number >= 0, got {self.guidance_scale}")
        if self.seed < -1 or self.seed >= 2**63:
            raise ConfigError(f"{where}.seed", f"must be -1 (random) or in [0, 2^63), got {self.seed}")
        if spec.modality in ("image", "video"):
            for name in ("width", "height"):
                v = getattr(self, name)
                if v <= 0:
                    raise ConfigError(f"{where}.{name}", f"must be > 0, got {v}")
                if v > 16384:
                    raise ConfigError(f"{where}.{name}", f"must be <= 16384, got {v}")
                if v % spec.size_divisor and spec.round_size:
                    rounded = -(-v // spec.size_divisor) * spec.size_divisor
                    setattr(self, name, rounded)
                    self.warnings.append(f"{where}.{name} {v} rounded up to {rounded} "
                                         f"(a multiple of {spec.size_divisor})")
                elif v % spec.size_divisor:
                    raise ConfigError(f"{where}.{name}", f"{v} is not a multiple of {spec.size_divisor}, "
                                      f"which arch {spec.name} needs")
        if spec.modality == "video":
            if self.num_frames < 1:
                raise ConfigError(f"{where}.num_frames", f"must be >= 1, got {self.num_frames}")
            if self.fps <= 0:
                raise ConfigError(f"{where}.fps", f"must be > 0, got {self.fps}")
        if spec.modality == "audio" and not (0 < self.duration <= 600):
            raise ConfigError(f"{where}.duration", f"must be in (0, 600] seconds, got {self.duration}")
        allowed = {"image": IMAGE_EXTS, "video": VIDEO_EXTS, "audio": AUDIO_EXTS}[spec.modality]
        if self.output_ext not in allowed:
            raise ConfigError(f"{where}.output_ext", f"{self.output_ext!r} is not a {spec.modality} format "
                              f"(allowed: {', '.join(allowed)})")
        if self.batch_size < 1:
            raise ConfigError(f"{where}.batch_size", f"must be >= 1, got {self.batch_size}")
        if self.batch_size > 1 and not spec.batch_arg:
            raise ConfigError(f"{where}.batch_size", f"arch {spec.name}'s pipeline makes one {spec.modality} "
                              f"output per pass: batch_size must be 1, got {self.batch_size}")
        if self.sampler is not None:
            names = [s.name for s in spec.samplers()]
            if not names:
                raise ConfigError(f"{where}.sampler", f"arch {spec.name} runs only its own scheduler "
                                  f"({spec.scheduler_config.get('_class_name', 'unknown')}): leave sampler unset")
            if self.sampler not in names:
                raise ConfigError(f"{where}.sampler", f"unknown sampler {self.sampler!r} for arch {spec.name} "
                                  f"(its samplers: {', '.join(names)})")
        if self.resize_mode not in RESIZE_MODES:
            raise ConfigError(f"{where}.resize_mode", f"must be one of {', '.join(RESIZE_MODES)}, got "
                              f"{self.resize_mode!r}")
        if self.strength is not None and not (0 < self.strength <= 1):
            raise ConfigError(f"{where}.strength", f"must be in (0, 1], got {self.strength}")
        self._resolve_task(spec, where, variant)
        self.cache = step_cache.validate(self.cache, spec, f"{where}.cache")

    def _resolve_task(self, spec: ArchSpec, where: str, variant: str | None = None):
        """Fix `task` (as given, else from the inputs: mask_img -> inpaint, init_img -> img2img (i2v
        on a video arch), a reference image -> edit, none -> the first task of the variant's (the
        arch's) that needs no input, else its first) and `strength` (the task's default when unset).
        An input the task does not take, a missing one, or a task the variant does not serve is
        refused, naming the field."""
        given = [name for name in IMAGE_INPUTS if getattr(self, name)]
        tasks = spec.tasks_for(variant)
        served = ", ".join(t.name for t in tasks)
        who = f"arch {spec.name}" + (f" ({variant})" if variant and tasks != spec.tasks else "")
        if self.task is not None:
            if self.task not in TASKS:
                raise ConfigError(f"{where}.task", f"unknown task {self.task!r} (known: {', '.join(TASKS)})")
            task = next((t for t in tasks if t.name == self.task), None)
            if task is None:
                raise ConfigError(f"{where}.task", f"{who} has no {self.task} task (its tasks: {served})")
        else:
            if self.mask_img:
                cause, name = "mask_img", "inpaint"
            elif self.init_img:
                cause, name = "init_img", "i2v" if spec.modality == "video" else "img2img"
            elif any(getattr(self, r) for r in REFERENCES):
                cause, name = next(r for r in REFERENCES if getattr(self, r)), "edit"
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
            if not getattr(self, name):
                raise ConfigError(f"{where}.{name}", f"task {task.name} of arch {spec.name} needs {name} "
                                  f"({INPUT_ROLES[name]})")
        if task.strength is None and self.strength is not None:
            raise ConfigError(f"{where}.strength", f"task {task.name} takes no strength (only "
                              f"{' and '.join(STRENGTH_TASKS)} re-noise an input image)")
        self.task = task.name
        if self.strength is None:
            self.strength = task.strength
        if self.strength is not None and self.num_inference_steps * self.strength < 1:
            # the pipelines run the last steps * strength of the schedule (SD's int(), the flow-matching
            # ones rounding up): under one step SD's run none, and some of them fail on the empty schedule
            raise ConfigError(f"{where}.strength", f"strength {self.strength:g} of {self.num_inference_steps} steps is "
                              f"less than one step: raise strength or num_inference_steps")

    def resolved_seed(self) -> int:
        """Fix a random seed once, so the record and a rerun agree."""
        if self.seed < 0:
            self.seed = random.randrange(0, 2**31)
        return self.seed

    def to_dict(self) -> dict:
        d = {name: getattr(self, name) for name in self.COMMON}
        d.update(self.extras)
        return d


def _coerce(value, typ, key):
    """Accept what YAML/JSON give for `typ`; reject anything else naming `key`."""
    typ_s = typ if isinstance(typ, str) else getattr(typ, "__name__", None) or str(typ)
    if "bool" in typ_s:
        if isinstance(value, bool):
            return value
        raise ConfigError(key, f"must be true or false, got {value!r}")
    if typ_s.startswith("int"):
        # NaN, Infinity and 1e999 (JSON's overflow) are floats int() refuses with ValueError/OverflowError
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or isinstance(value, float) and (not math.isfinite(value) or value != int(value))):
            raise ConfigError(key, f"must be an integer, got {value!r}")
        return int(value)
    if typ_s.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(key, f"must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(key, f"must be finite, got {value!r}")
        return float(value)
    if typ_s.startswith("str"):
        if not isinstance(value, str):
            raise ConfigError(key, f"must be a string, got {value!r}")
        check_values(value, key)        # a lone surrogate never reaches a log, a file or a tokenizer
        return value
    return value
