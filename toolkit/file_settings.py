"""How a generated file was made, kept in the file itself, and read back into a request. No torch:
the engine process reads uploaded files with it (toolkit/media.py finds the text in each format).

Every file the holder writes carries two texts (media.py says where each goes per format):

`parameters`: A1111's infotext, the text A1111/Forge write and A1111's PNG Info, Civitai and SillyTavern
read. Its format is A1111's `create_infotext` (modules/processing.py) and `parse_generation_parameters`
(modules/infotext_utils.py): the prompt, a `Negative prompt: ...` line when there is one, then one line
of `Key: value` pairs joined by ", ", each value quoted as A1111's `quote()` does (a JSON string when it
holds `,`, `:` or a newline). The keys written, in A1111's order:

    Steps, Sampler, CFG scale, Seed, Size (WxH; not for audio), Model (the display name: a profile,
    a repo id, `tiny:<arch>`, or a local path's basename), Denoising strength (img2img, when set),
    Frames and FPS (video), Duration (audio, seconds), Version (`aitk-engine`)

`aitk`: JSON (ASCII, sorted keys) holding the whole resolved request, what reproduces the file:
    {"version": 1, "modality": ..., "scheduler": the pipeline's scheduler class,
     "model": the resolved ModelConfig with every local path cut to its basename ("hidden" lists those),
     "sample": the resolved sample (GenerateImageConfig.to_dict(): defaults filled, the seed used)}

Reading back (`settings_from_metadata`): our JSON gives `{model, sample}` ready to POST to /generate; a
foreign file with A1111 text alone gives the best mapping of its fields onto a sample.
"""
import json
import math
import os
import re

from toolkit.errors import ConfigError
from toolkit.samplers import FAMILIES, SCHEDULER_LABELS

PARAMETERS_KEY = "parameters"
SETTINGS_KEY = "aitk"
FORMAT_VERSION = 1
VERSION_TEXT = "aitk-engine"
PATH_KEYS = ("name_or_path", "extras_name_or_path", "lora_path")
MAX_JSON_DEPTH = 32        # our settings nest 4 deep: a file's JSON nested deeper is not ours
# How long POST /settings and /sdapi/v1/png-info wait for a file to be read and parsed (on a worker
# thread); past it they answer 503 naming the body. The caps here and in media.py keep a read to
# milliseconds, so only a stalled machine gets there; the thread then finishes on its own, harmlessly.
READ_SECONDS = 10.0


class NoSettings(ValueError):
    """The file carries neither our JSON nor A1111 text (or only text past what is read)."""


# -- names without paths ---------------------------------------------------------------------------

def display_name(name_or_path: str) -> str:
    """A model name safe to show anywhere: repo ids and tiny:<arch> as given, local paths by basename
    (the rule of /health, engine.display_name)."""
    if not name_or_path:
        return ""
    if _is_local(name_or_path):
        return os.path.basename(os.path.normpath(os.path.expanduser(name_or_path)))
    return name_or_path


def _is_local(value: str) -> bool:
    """A filesystem path (existing or not), not a hub repo id or a `tiny:<arch>` name: never written out."""
    from toolkit.models.tiny import is_tiny
    from toolkit.models.v2.sources import looks_like_repo_id

    if os.path.exists(os.path.expanduser(value)):
        return True
    return not (is_tiny(value) or looks_like_repo_id(value))


def public_model(mc) -> dict:
    """A ModelConfig as it may leave the machine: local paths cut to their basenames (`hidden` names
    the keys), the profile kept (it names the model)."""
    d = mc.to_dict()
    hidden = []
    for key in PATH_KEYS:
        value = d.get(key)
        if value and _is_local(value):
            d[key] = display_name(value)
            hidden.append(key)
    comps = {}
    for role, path in sorted((d.get("components") or {}).items()):
        comps[role] = os.path.basename(os.path.normpath(os.path.expanduser(path)))
        hidden.append(f"components.{role}")
    d["components"] = comps
    # the lora_path shorthand is recorded as itself; `loras` holds only the entries after it
    loras = d.get("loras") or []
    if d.get("lora_path") and loras:
        loras = loras[1:]
    d["loras"] = []
    for i, ref in enumerate(loras):
        ref = dict(ref)
        if ref.get("path") and _is_local(ref["path"]):
            ref["path"] = display_name(ref["path"])
            hidden.append(f"loras[{i}].path")
        d["loras"].append(ref)
    d["hidden"] = hidden
    return d


def public_sample(gen, seed: int | None = None) -> dict:
    """The resolved sample (defaults filled) with the seed used; inputs by basename, which for the
    engine is the name POST /assets gave them. `seed`: this file's seed when one request made several."""
    d = gen.to_dict()
    if seed is not None:
        d["seed"] = int(seed)
        d["batch_size"] = 1                     # this file is one image: its own seed reproduces it
    for key in gen.INPUTS:
        if d.get(key):
            d[key] = os.path.basename(d[key])
    for key in ("hires", "upscale"):        # an upscale model by its name, never its path
        if d.get(key):
            from toolkit.hires import upscaler_label
            d[key] = {**d[key], "upscaler": upscaler_label(d[key]["upscaler"])}
    for control in d.get("controls") or ():      # a control's model and image by basename too
        control.update(model=os.path.basename(os.path.normpath(control["model"])),
                       image=os.path.basename(control["image"]))
    return d


def passes(mc, gen) -> list | None:
    """A hires request's two passes as they ran (toolkit/hires.py): size, steps, and the second's
    strength and upscaler; None for a request of one pass."""
    from toolkit.hires import hires_size, steps_of, upscaler_label
    if getattr(gen, "hires", None) is None:
        return None
    w, h = hires_size(gen.width, gen.height, gen.hires.scale, mc.spec.size_divisor)
    return [{"pass": "base", "width": gen.width, "height": gen.height, "steps": gen.num_inference_steps},
            {"pass": "hires", "width": w, "height": h, "steps": steps_of(gen), "strength": gen.hires.denoise,
             "upscaler": upscaler_label(gen.hires.upscaler)}]


def model_label(mc) -> str:
    """The model's name in the A1111 text: its profile, else the display name of name_or_path."""
    return mc.profile or display_name(mc.name_or_path or "") or mc.arch


def sampler_label(sampler: str | None, scheduler: str | None) -> tuple[str, str | None]:
    """(A1111's sampler name, its `Schedule type` when not automatic) for a request's `sample.sampler`,
    or for the model's own scheduler class when it named none."""
    if sampler:
        entry = next((e for family in FAMILIES.values() for e in family if e.name == sampler), None)
        if entry is None:
            return sampler, None
        return entry.label, (None if entry.schedule == "automatic" else entry.schedule.capitalize())
    if scheduler:
        return SCHEDULER_LABELS.get(scheduler, scheduler), None
    return "Default", None


# -- writing -----------------------------------------------------------------------------------------

def quote(value) -> str:
    """A1111's infotext_utils.quote: a value holding `,`, `:` or a newline becomes a JSON string."""
    text = str(value)
    if "," not in text and "\n" not in text and ":" not in text:
        return text
    return json.dumps(text, ensure_ascii=False)


def infotext(prompt: str, negative_prompt: str, params: dict) -> str:
    """A1111's create_infotext layout: prompt, `Negative prompt:` line when there is one, then the
    parameters (None values left out)."""
    line = ", ".join(k if k == v else f"{k}: {quote(v)}" for k, v in params.items() if v is not None)
    negative = f"\nNegative prompt: {negative_prompt}" if negative_prompt else ""
    return f"{prompt}{negative}\n{line}".strip()


def a1111_text(mc, sample: dict, modality: str, scheduler: str | None = None) -> str:
    """The `parameters` text for a resolved request (`sample`: public_sample's dict)."""
    label, schedule = sampler_label(sample.get("sampler"), scheduler)
    params = {"Steps": sample["num_inference_steps"], "Sampler": label, "Schedule type": schedule,
              "CFG scale": sample["guidance_scale"], "Seed": sample["seed"],
              "Size": f"{sample['width']}x{sample['height']}" if modality != "audio" else None,
              "Model": model_label(mc), "Denoising strength": sample.get("strength"),
              "Frames": sample["num_frames"] if modality == "video" else None,
              "FPS": sample["fps"] if modality == "video" else None,
              "Duration": sample["duration"] if modality == "audio" else None}
    hr = sample.get("hires")
    if hr:          # A1111's hires keys (processing.py); its Denoising strength is the second pass's
        params.update({"Denoising strength": hr["denoise"], "Hires upscale": hr["scale"],
                       "Hires steps": hr["steps"] or None, "Hires upscaler": hr["upscaler"],
                       "Hires prompt": hr.get("prompt"), "Hires negative prompt": hr.get("negative_prompt")})
    params["Version"] = VERSION_TEXT
    return infotext(sample["prompt"], sample["negative_prompt"], params)


def file_metadata(mc, gen, *, seed: int | None = None, scheduler: str | None = None) -> dict:
    """What the file of (`mc`, `gen`) carries: media.py's `metadata=` argument. Deterministic (no
    time, no file name): the same request writes the same bytes."""
    modality = mc.spec.modality
    sample = public_sample(gen, seed)
    settings = {"version": FORMAT_VERSION, "modality": modality, "scheduler": scheduler,
                "model": public_model(mc), "sample": sample}
    if passes(mc, gen):
        settings["passes"] = passes(mc, gen)
    return {PARAMETERS_KEY: a1111_text(mc, sample, modality, scheduler),
            SETTINGS_KEY: json.dumps(settings, ensure_ascii=True, sort_keys=True, separators=(",", ":"),
                                     allow_nan=False)}


# -- reading: A1111 text -----------------------------------------------------------------------------

# A file's A1111 text is parsed up to this many characters. A1111 itself keeps its text in a JPEG's 64 KiB
# EXIF segment (32 Ki UTF-16 characters), and the longest real infotexts (long prompts, many LoRA and
# embedding hashes, extension parameters) are tens of KB: 256 Ki leaves room for those, and bounds the
# parse (linear, milliseconds at this size) and its answer (a few times the text) whatever a file holds.
MAX_INFOTEXT_CHARS = 1 << 18

# A1111's infotext_utils.re_param_code is r'\s*(\w[\w \-/]+):\s*("(?:\\.|[^\\"])+"|[^,]*)(?:,|$)'; findall
# with it is quadratic on a long run of words without a `:` (each start re-scans the run, holding the GIL):
# params() gives the same pairs from its pieces in linear time. re_imagesize as A1111 has it:
RE_SIZE = re.compile(r"^(\d+)x(\d+)$")
_SPACES = re.compile(r"\s*")
_KEY = re.compile(r"\w[\w \-/]+")                  # re_param_code's key: a maximal run, never backtracked into
_QUOTED = re.compile(r'"(?:[^\\"]|\\.)+"')          # its quoted value (the alternatives start on distinct chars)
_SURROGATES = re.compile("[\ud800-\udfff]")


def params(line: str) -> list[tuple[str, str]]:
    """re_param_code's findall(line), pair for pair, in linear time. A start that fails is never tried again
    inside the same key run: every later start in that run reaches the same end, which is no `:`; and a
    quoted value's scan stops at the next value's opening quote, so the scans do not overlap."""
    out, pos, n = [], 0, len(line)
    while pos < n:
        start = _SPACES.match(line, pos).end()
        key = _KEY.match(line, start)
        if key is None:
            pos = start + 1
            continue
        if key.end() == n or line[key.end()] != ":":
            pos = key.end()
            continue
        at = _SPACES.match(line, key.end() + 1).end()
        quoted = _QUOTED.match(line, at)
        end = quoted.end() if quoted else -1
        if quoted and (end == n or line[end] == "," or (end == n - 1 and line[end] == "\n")):   # `(?:,|$)`
            value = quoted.group()
        else:                                                                           # `[^,]*`
            end = line.find(",", at)
            end = n if end < 0 else end
            value = line[at:end]
        out.append((key.group(), value))
        pos = end + 1 if end < n and line[end] == "," else end
    return out


def scrub(text: str) -> str:
    """`text` with every lone surrogate (what a JSON `\\ud800` escape decodes to, and no UTF-8 encoder
    takes) replaced by U+FFFD, as the byte decoders replace what they cannot read."""
    return text if text.isascii() else _SURROGATES.sub("\ufffd", text)


def unquote(text: str) -> str:
    if len(text) == 0 or text[0] != '"' or text[-1] != '"':
        return text
    try:
        return scrub(json.loads(text))
    except ValueError:
        return text


def _prompt(lines: list) -> str:
    """A1111's `prompt += ("" if prompt == "" else "\\n") + line`: leading empty lines dropped (a list,
    not repeated concatenation, whatever the number of lines)."""
    first = next((i for i, line in enumerate(lines) if line), len(lines))
    return "\n".join(lines[first:])


def parse_a1111(text: str, max_chars: int = MAX_INFOTEXT_CHARS) -> dict:
    """A1111's parse_generation_parameters, the format part (without its UI defaults, styles and
    hires back-compat): {"Prompt", "Negative prompt", key: value...}, `Size`-like values as
    `<key>-1` / `<key>-2`. Values stay text, as A1111 returns them. NoSettings past `max_chars`."""
    if len(text) > max_chars:
        raise NoSettings(f"the file's A1111 text is {len(text)} characters; at most {max_chars} are read")
    res = {}
    prompt, negative, done_with_prompt = [], [], False
    *lines, lastline = text.strip().split("\n")
    pairs = params(lastline)
    if len(pairs) < 3:
        lines.append(lastline)
        pairs = []
    for line in lines:
        line = line.strip()
        if line.startswith("Negative prompt:"):
            done_with_prompt = True
            line = line[16:].strip()
        (negative if done_with_prompt else prompt).append(line)
    res["Prompt"], res["Negative prompt"] = scrub(_prompt(prompt)), scrub(_prompt(negative))
    for k, v in pairs:
        if v and v[0] == '"' and v[-1] == '"':
            v = unquote(v)
        k, v = scrub(k), scrub(v)
        m = RE_SIZE.match(v)
        if m is not None:
            res[f"{k}-1"], res[f"{k}-2"] = m.group(1), m.group(2)
        else:
            res[k] = v
    return res


def sample_from_a1111(fields: dict, warnings: list) -> dict:
    """The best mapping of A1111 fields onto a sample: prompt, negative, steps, cfg, seed, size, and the
    sampler name as text (the engine names what it cannot use when the request is made)."""
    sample = {"prompt": fields.get("Prompt", "")}
    if fields.get("Negative prompt"):
        sample["negative_prompt"] = fields["Negative prompt"]
    for key, ours, cast in (("Steps", "num_inference_steps", int), ("CFG scale", "guidance_scale", float),
                            ("Seed", "seed", int), ("Size-1", "width", int), ("Size-2", "height", int)):
        if key not in fields:
            continue
        try:
            sample[ours] = cast(fields[key])
        except ValueError:
            warnings.append(f"{key}: {_short(fields[key])} is not a number; left out")
            continue
        if not math.isfinite(sample[ours]):           # float("nan"), float("inf"): a request refuses them too
            raise ConfigError(key, f"{_short(fields[key])} is not a finite number (the file's A1111 text)")
    if fields.get("Sampler"):
        sample["sampler"] = fields["Sampler"]
    return sample


# -- reading: a file ---------------------------------------------------------------------------------

def settings_from_metadata(meta: dict, *, profiles=(), archs=()) -> dict:
    """A file's request from media.read_metadata's answer: {source, format, model, sample, parameters,
    warnings}. Our JSON when it is there and whole (`source: "aitk"`), else the A1111 text
    (`source: "a1111"`); NoSettings when the file has neither. `profiles`/`archs`: the model names this
    engine knows, to map a foreign file's `Model:` onto one."""
    warnings = []
    text = meta.get(PARAMETERS_KEY)
    text = scrub(text) if text else text
    raw = meta.get(SETTINGS_KEY)
    out = {"format": meta.get("format"), "parameters": text}
    if raw:
        try:
            settings = _load_settings(raw)
        except ConfigError:                                  # a non-finite number: the request's rules
            raise
        except (ValueError, RecursionError) as e:           # RecursionError: JSON nested past Python's stack
            warnings.append(f"the file's {SETTINGS_KEY} settings cannot be read ({e}); "
                            + ("its A1111 text is used" if text else "nothing else is there"))
        else:
            return {**out, "source": SETTINGS_KEY, "model": _request_model(settings["model"], warnings),
                    "sample": settings["sample"], "warnings": warnings}
    if not text:
        if warnings:
            raise NoSettings(warnings[0])
        raise NoSettings("the file carries no generation settings (no A1111 `parameters` text, "
                         f"no `{SETTINGS_KEY}` settings)")
    fields = parse_a1111(text)
    sample = sample_from_a1111(fields, warnings)
    name = fields.get("Model")
    model = None
    if name in profiles:
        model = {"profile": name}
    elif name in archs:
        model = {"arch": name}
    else:
        warnings.append(f"the file names model {_short(name)}, which is no profile or arch here: choose the model"
                        if name else "the file names no model: choose one")
    return {**out, "source": "a1111", "model": model, "sample": sample, "warnings": warnings}


def _load_settings(raw: str) -> dict:
    settings = load_json(raw)
    if not isinstance(settings, dict):
        raise ValueError("not a JSON object")
    version = settings.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(f"format version {version!r}; this engine reads up to {FORMAT_VERSION}")
    model, sample = settings.get("model"), settings.get("sample")
    if not isinstance(model, dict) or not isinstance(model.get("arch"), str) or not isinstance(sample, dict):
        raise ValueError("no model with an arch, or no sample")
    if not isinstance(model.get("profile"), (str, type(None))):
        raise ValueError("a profile that is not a name")
    return settings


class _NonFinite:
    """A NaN, Infinity or out-of-range number (1e999) met in a file's JSON, refused with its path."""

    def __init__(self, text: str):
        self.text = text


def _finite(text: str):
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def load_json(raw: str):
    """A file's JSON as a request's is taken: a non-finite number (which JSON itself has not, and no
    answer can carry) is a ConfigError naming its path (`sample.guidance_scale`); lone surrogates are
    scrubbed; nesting past MAX_JSON_DEPTH is a ValueError."""
    return _checked(json.loads(raw, parse_constant=_NonFinite, parse_float=_finite), "", 0)


def _checked(value, path: str, depth: int):
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, _NonFinite):
        raise ConfigError(path or SETTINGS_KEY, f"{_short(value.text)} is not a finite number (the file's "
                                                f"{SETTINGS_KEY} settings)")
    if isinstance(value, (dict, list)) and depth >= MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH}")
    if isinstance(value, dict):
        keys = [scrub(k) for k in value]
        return {k: _checked(v, f"{path}.{k}" if path else k, depth + 1) for k, v in zip(keys, value.values())}
    if isinstance(value, list):
        return [_checked(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    return value


def _short(value, limit: int = 80) -> str:
    """repr(value) cut to about `limit` characters: a file's text quoted in a message stays a line."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} characters)"


# ModelConfig keys a profile request may override: every one that is not a path (a profile owns those)
PROFILE_OPTIONS = ("variant", "dtype", "quantize", "qtype", "quantize_te", "qtype_te", "low_vram", "layer_offloading",
                   "placement", "attention")


def _request_model(stored: dict, warnings: list) -> dict:
    """The `model` of a /generate request from the stored public ModelConfig: a profile as
    `{profile, ...options}`, else the config itself (paths as the basenames the file kept)."""
    hidden = [h for h in stored.get("hidden") or () if isinstance(h, str)]
    stored = {k: v for k, v in stored.items() if k != "hidden"}
    if stored.get("profile"):
        model = {"profile": stored["profile"], **{k: stored[k] for k in PROFILE_OPTIONS if stored.get(k) is not None}}
        if stored.get("lora_path"):
            model.update(lora_path=stored["lora_path"], lora_scale=stored.get("lora_scale", 1.0))
        for key in ("loras", "lora_fuse"):
            if stored.get(key):
                model[key] = stored[key]
        hidden = [h for h in hidden if h == "lora_path" or h.startswith("loras[")]
    else:
        model = {k: v for k, v in stored.items() if v is not None and k != "profile"}
        if not model.get("components"):
            model.pop("components", None)
    for key in hidden:
        warnings.append(f"model.{key}: the file keeps only the name of a local path "
                        f"({_short(_get(stored, key))}); give the full path, or a profile")
    return model


def _get(d: dict, dotted: str):
    for part in dotted.split("."):
        name, _, index = part.partition("[")
        d = d.get(name) if isinstance(d, dict) else None
        if index:                                   # `hidden` comes from the file: any text at all
            i = index.rstrip("]")
            d = d[int(i)] if isinstance(d, list) and i.isdecimal() and len(i) < 10 and int(i) < len(d) else None
    return d
