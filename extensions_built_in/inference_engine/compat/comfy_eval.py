"""The nodes of a ComfyUI API-format workflow checked and evaluated (compat/comfy_graph.py's first two
passes): ComfyUI's own input validation over compat/comfy_nodes.py's table, then each node's outputs as
the values they stand for (a model file with its LoRAs, text encoder files, a prompt, an empty latent,
an encoded image, a sampled latent, ...). Problems are collected as node errors in ComfyUI's shape
(`Analysis.errors`), never raised one by one."""
import math
import os
from dataclasses import dataclass, replace

from extensions_built_in.inference_engine.compat.comfy_nodes import NODES, Dynamic, Files, choices

TE_LORA_PREFIXES = ("lora_te", "text_encoder", "text_encoders.", "te_", "te1_", "te2_")
MAX_LIST = 20                  # ComfyUI sends a choice list back only when it is this short


class Invalid(Exception):
    """A prompt that is no workflow at all: `error` is the whole answer."""

    def __init__(self, error: dict):
        super().__init__(error["message"])
        self.error = error


def entry(kind: str, message: str, details: str, **extra) -> dict:
    return {"type": kind, "message": message, "details": details, "extra_info": extra}


class _Bad:
    """An input whose node already has an error: whatever depends on it says nothing more."""


BAD = _Bad()


# -- the values an output stands for ---------------------------------------------------------------

@dataclass(frozen=True)
class Model:
    node: str                    # the loader
    input: str                   # its file input (ckpt_name, unet_name)
    path: str
    kind: str                    # checkpoint | unet
    dtype: str = "default"       # UNETLoader's weight_dtype
    loras: tuple = ()            # (node, path, strength_model)
    sampling: tuple = ()         # ModelSampling* node ids


@dataclass(frozen=True)
class Clip:
    node: str
    files: tuple                 # ((node, input, path), ...) of CLIP loaders; () for a checkpoint's own
    checkpoint: str | None = None
    loras: tuple = ()            # (node, path, strength_clip)
    skip: tuple = ()             # (node, stop_at_clip_layer)


@dataclass(frozen=True)
class Vae:
    node: str
    input: str | None
    path: str
    checkpoint: bool             # a checkpoint's own VAE


@dataclass(frozen=True)
class Cond:
    node: str | None             # the CLIPTextEncode (None: zeroed out)
    text: str
    clip: Clip | None
    guidance: tuple | None = None    # (node, value) of FluxGuidance
    controls: tuple = ()             # ((apply node, side), ControlNet node, path, image, strength, start, end)


@dataclass(frozen=True)
class Image:
    kind: str                    # load | decode | scale | model
    node: str
    path: str | None = None      # load: the file
    source: object = None        # decode: the Latent; scale / model: the Image
    vae: Vae | None = None
    size: tuple | None = None    # scale: (width, height) or None with `by`
    by: float | None = None
    method: str = ""
    crop: str = "disabled"
    upscaler: str | None = None  # model: the upscale model's file


@dataclass(frozen=True)
class Mask:
    node: str
    path: str
    channel: str                 # alpha | red | green | blue (LoadImage's MASK output: alpha)


@dataclass(frozen=True)
class Latent:
    kind: str                    # empty | encode | upscale | sampled
    node: str
    size: tuple = ()             # empty: (width, height, batch, frames or None)
    image: Image | None = None   # encode
    vae: Vae | None = None
    mask: Mask | None = None
    grow: int = 0
    source: object = None        # upscale: the Latent; sampled: the Sampler
    by: float | None = None
    method: str = ""


@dataclass(frozen=True)
class Sampler:
    node: str
    cls: str
    model: Model
    positive: Cond
    negative: Cond
    latent: Latent
    seed: int
    steps: int
    cfg: float
    sampler_name: str
    scheduler: str
    denoise: float = 1.0
    start: int = 0
    end: int = 10000
    add_noise: bool = True
    leftover: bool = False


@dataclass(frozen=True)
class Video:
    node: str
    images: object
    fps: float


# -- the analysis ------------------------------------------------------------------------------------

class Analysis:
    def __init__(self, prompt: dict, files):
        self.prompt, self.files = prompt, files
        self.errors: dict = {}              # node id -> [error]
        self.values: dict = {}              # node id -> its inputs, converted
        self.memo: dict = {}                # node id -> tuple of output values
        self.tables: dict = {}              # ComfyUI folder -> {name: path}
        self.detected: dict = {}            # path -> (arch, variant) | str (why not)

    # -- errors --------------------------------------------------------------------------------
    def fail(self, node: str, input_name: str | None, details: str, kind: str = "custom_validation_failed",
             message: str = "Custom validation failed for node", **extra):
        """A node error in ComfyUI's shape; returns BAD for the caller to pass on."""
        info = {"input_name": input_name, **extra} if input_name else dict(extra)
        err = entry(kind, message, f"{input_name} - {details}" if input_name and kind == "custom_validation_failed"
                       else details, **info)
        if err not in self.errors.setdefault(node, []):
            self.errors[node].append(err)
        return BAD

    def class_of(self, node: str) -> str:
        return self.prompt[node]["class_type"]

    def title(self, node: str) -> str | None:
        meta = self.prompt.get(node, {}).get("_meta")
        return meta.get("title") if isinstance(meta, dict) else None

    # -- pass 1: the nodes ---------------------------------------------------------------------
    def check_structure(self):
        if not isinstance(self.prompt, dict) or not self.prompt:
            raise Invalid(entry("invalid_prompt", "Cannot execute because the prompt is not a workflow",
                                 "the prompt must be an object of nodes {id: {class_type, inputs}}"))
        first_missing = None
        for node, data in self.prompt.items():
            if not isinstance(data, dict):
                raise Invalid(entry("invalid_prompt", f"Node '#{node}' is not an object", f"Node ID '#{node}'"))
            cls = data.get("class_type")
            if cls in NODES:
                if not isinstance(data.get("inputs", {}), dict):
                    self.fail(node, None, "inputs must be an object", kind="invalid_prompt",
                              message="Invalid node inputs")
                continue
            title = self.title(node)
            if cls is None:
                what = f"Node '{title or f'ID #{node}'}' has no class_type. The workflow may be corrupted."
            else:
                what = (f"Node '{title or cls}' not found: {cls} is not a node this engine serves "
                        f"(GET /object_info lists them)")
            err = entry("missing_node_type", what, f"Node ID '#{node}'", node_id=node, class_type=cls,
                         node_title=title)
            self.errors.setdefault(node, []).append(err)
            first_missing = first_missing or err
        return first_missing

    def output_nodes(self) -> list:
        return sorted((n for n, d in self.prompt.items() if isinstance(d, dict) and d.get("class_type") in NODES
                       and NODES[d["class_type"]].output_node), key=node_order)

    def check_inputs(self, node: str, seen: set):
        """ComfyUI's validate_inputs over `node` and what it links to (each node once)."""
        if node in seen or node not in self.prompt or self.prompt[node].get("class_type") not in NODES:
            return
        seen.add(node)
        spec = NODES[self.class_of(node)]
        given = self.prompt[node].get("inputs", {})
        given = given if isinstance(given, dict) else {}
        values = {}
        for name, (kind, opts) in spec.inputs().items():
            if name not in given:
                if name in spec.required:
                    self.fail(node, name, name, kind="required_input_missing", message="Required input is missing")
                continue
            val = given[name]
            if isinstance(val, list):
                link = self.check_link(node, name, kind, val)
                if link is not None:
                    values[name] = link
                    self.check_inputs(link[0], seen)
                continue
            ok, val = self.check_value(node, name, kind, opts, val)
            if ok:
                values[name] = val
        self.values[node] = values

    def check_link(self, node, name, kind, val):
        if len(val) != 2 or not isinstance(val[0], (str, int)) or isinstance(val[0], bool) \
                or isinstance(val[1], bool) or not isinstance(val[1], int):
            self.fail(node, name, name, kind="bad_linked_input",
                      message="Bad linked input, must be a length-2 list of [node_id, slot_index]", received_value=val)
            return None
        src, slot = str(val[0]), val[1]
        if src not in self.prompt:
            self.fail(node, name, f"{name}: node '#{src}' is not in the workflow", kind="bad_linked_input",
                      message="Bad linked input, the linked node does not exist", received_value=val)
            return None
        cls = self.prompt[src].get("class_type") if isinstance(self.prompt[src], dict) else None
        if cls not in NODES:
            return (src, slot)                   # its own missing_node_type names it
        outputs = NODES[cls].outputs
        if not 0 <= slot < len(outputs):
            self.fail(node, name, f"{name}: {cls} has no output {slot}", kind="bad_linked_input",
                      message="Bad linked input, the linked node has no such output", received_value=val)
            return None
        if isinstance(kind, str) and kind == outputs[slot]:
            return (src, slot)
        expected = kind if isinstance(kind, str) else "COMBO"
        self.fail(node, name, f"{name}, {outputs[slot]} != {expected}", kind="return_type_mismatch",
                  message="Return type mismatch between linked nodes", received_type=outputs[slot], linked_node=val)
        return None

    def check_value(self, node, name, kind, opts, val):
        if isinstance(kind, (list, Files, Dynamic)):
            listed = (list(self.table(kind.folder)) if isinstance(kind, Files) else
                      None if kind is _INPUT_IMAGES else choices(kind, self.files))
            return self.check_choice(node, name, kind, listed, val)
        if kind in ("INT", "FLOAT", "STRING", "BOOLEAN"):
            try:
                if kind == "INT":
                    if isinstance(val, str) or not math.isfinite(float(val)):
                        raise ValueError("not a finite number")
                    val = int(val)
                elif kind == "FLOAT":
                    if isinstance(val, str) or not math.isfinite(float(val)):
                        raise ValueError("not a finite number")
                    val = float(val)
                elif kind == "STRING":
                    if not isinstance(val, (str, int, float)) or isinstance(val, bool):
                        raise ValueError("not a string")
                    val = str(val)
                elif not isinstance(val, bool):
                    raise ValueError("not true or false")
            except (TypeError, ValueError, OverflowError) as e:
                self.fail(node, name, f"{name}, {val!r}, {e}", kind="invalid_input_type",
                          message=f"Failed to convert an input value to a {kind} value", received_value=val)
                return False, None
            if kind in ("INT", "FLOAT"):
                if "min" in opts and val < opts["min"]:
                    self.fail(node, name, name, kind="value_smaller_than_min",
                              message=f"Value {val} smaller than min of {opts['min']}", received_value=val)
                    return False, None
                if "max" in opts and val > opts["max"]:
                    self.fail(node, name, name, kind="value_bigger_than_max",
                              message=f"Value {val} bigger than max of {opts['max']}", received_value=val)
                    return False, None
            return True, val
        self.fail(node, name, f"{name}: a {kind} input must be a link [node_id, output_index]",
                  kind="bad_linked_input", message="Bad linked input, must be a length-2 list of [node_id, slot_index]",
                  received_value=val)
        return False, None

    def check_choice(self, node, name, kind, listed, val):
        if kind is _INPUT_IMAGES:            # LoadImage takes any image of the input folder ("sub/x.png [input]")
            if isinstance(val, str) and self.files.input_path(val) is not None:
                return True, val
            self.fail(node, name, f"Invalid image file: {val}")
            return False, None
        if isinstance(val, str) and val in listed:
            return True, val
        shown = f"(list of length {len(listed)})" if len(listed) > MAX_LIST else str(listed)
        self.fail(node, name, f"{name}: '{val}' not in {shown}", kind="value_not_in_list",
                  message="Value not in list", received_value=val,
                  input_config=None if len(listed) > MAX_LIST else [listed])
        return False, None

    def table(self, folder: str) -> dict:
        if folder not in self.tables:
            self.tables[folder] = self.files.table(folder)
        return self.tables[folder]

    # -- pass 2: what the outputs stand for ------------------------------------------------------
    def value(self, node: str, name: str):
        """The input `name` of `node`: a linked output's value, or the converted literal."""
        v = self.values.get(node, {}).get(name, BAD)
        if isinstance(v, tuple):            # a link (a literal is never a tuple)
            return self.output(*v)
        return v

    def output(self, node: str, slot: int):
        if node not in self.memo:
            self.memo[node] = BAD           # a cycle reads as a node error upstream
            if self.errors.get(node) or node not in self.values:
                outs = None
            else:
                outs = getattr(self, "n_" + self.class_of(node))(node)
            self.memo[node] = outs if outs is not None else BAD
        outs = self.memo[node]
        if outs is BAD:
            return BAD
        return outs[slot] if slot < len(outs) else BAD

    def inputs(self, node: str, *names):
        vals = [self.value(node, n) for n in names]
        return None if any(v is BAD for v in vals) else vals

    def lit(self, node: str, name: str, default=None):
        v = self.values.get(node, {}).get(name, default)
        return default if v is BAD else v

    # loaders
    def n_CheckpointLoaderSimple(self, node):
        path = self.table("checkpoints")[self.lit(node, "ckpt_name")]
        if self.arch_of(path, node, "ckpt_name") is None:
            return None
        return (Model(node, "ckpt_name", path, "checkpoint"), Clip(node, (), checkpoint=path),
                Vae(node, None, path, True))

    def n_UNETLoader(self, node):
        path = self.table("diffusion_models")[self.lit(node, "unet_name")]
        if self.arch_of(path, node, "unet_name") is None:
            return None
        return (Model(node, "unet_name", path, "unet", self.lit(node, "weight_dtype", "default")),)

    def _clip(self, node, *names):
        table = self.table("text_encoders")
        return (Clip(node, tuple((node, n, table[self.lit(node, n)]) for n in names)),)

    def n_CLIPLoader(self, node):
        return self._clip(node, "clip_name")

    def n_DualCLIPLoader(self, node):
        return self._clip(node, "clip_name1", "clip_name2")

    def n_TripleCLIPLoader(self, node):
        return self._clip(node, "clip_name1", "clip_name2", "clip_name3")

    def n_VAELoader(self, node):
        return (Vae(node, "vae_name", self.table("vae")[self.lit(node, "vae_name")], False),)

    def n_LoraLoader(self, node):
        got = self.inputs(node, "model", "clip")
        if got is None:
            return None
        model, clip = got
        path = self.table("loras")[self.lit(node, "lora_name")]
        return (_with(model, loras=(*model.loras, (node, path, self.lit(node, "strength_model")))),
                _with(clip, loras=(*clip.loras, (node, path, self.lit(node, "strength_clip")))))

    def n_LoraLoaderModelOnly(self, node):
        got = self.inputs(node, "model")
        if got is None:
            return None
        path = self.table("loras")[self.lit(node, "lora_name")]
        if has_text_encoder(path):
            return self.fail(node, "lora_name", "this LoRA has text encoder weights, which the engine applies with "
                             "the denoiser's: load it with LoraLoader (strength_clip = strength_model)")
        return (_with(got[0], loras=(*got[0].loras, (node, path, self.lit(node, "strength_model")))),)

    def n_ControlNetLoader(self, node):
        return (("controlnet", node, self.table("controlnet")[self.lit(node, "control_net_name")]),)

    def n_UpscaleModelLoader(self, node):
        return (("upscale_model", node, self.table("upscale_models")[self.lit(node, "model_name")]),)

    # conditioning
    def n_CLIPTextEncode(self, node):
        got = self.inputs(node, "clip")
        return None if got is None else (Cond(node, self.lit(node, "text", ""), got[0]),)

    def n_CLIPSetLastLayer(self, node):
        got = self.inputs(node, "clip")
        if got is None:
            return None
        layer = self.lit(node, "stop_at_clip_layer")
        if layer != -1:
            return self.fail(node, "stop_at_clip_layer", f"{layer}: the engine has no clip skip; only -1 (the "
                             "last layer, every model's own) is served")
        return (_with(got[0], skip=(*got[0].skip, (node, layer))),)

    def n_ConditioningZeroOut(self, node):
        got = self.inputs(node, "conditioning")
        return None if got is None else (Cond(None, "", got[0].clip),)

    def n_FluxGuidance(self, node):
        got = self.inputs(node, "conditioning")
        return None if got is None else (_with(got[0], guidance=(node, self.lit(node, "guidance"))),)

    def n_ControlNetApplyAdvanced(self, node):
        got = self.inputs(node, "positive", "negative", "control_net", "image")
        if got is None:
            return None
        pos, neg, net, image = got
        src = image_file(image)
        if src is None:
            return self.fail(node, "image", "the control image must be a LoadImage (optionally through Upscale "
                             "Image): the engine prepares the control map from an input image")
        control = (net[1], net[2], src, image, self.lit(node, "strength"), self.lit(node, "start_percent"),
                   self.lit(node, "end_percent"))
        return (_with(pos, controls=(*pos.controls, ((node, 0), *control))),
                _with(neg, controls=(*neg.controls, ((node, 1), *control))))

    # latents and images
    def n_EmptyLatentImage(self, node):
        return (Latent("empty", node, (self.lit(node, "width"), self.lit(node, "height"),
                                       self.lit(node, "batch_size"), None)),)

    n_EmptySD3LatentImage = n_EmptyLatentImage

    def _video_latent(self, node):
        return (Latent("empty", node, (self.lit(node, "width"), self.lit(node, "height"),
                                       self.lit(node, "batch_size"), self.lit(node, "length"))),)

    n_EmptyHunyuanLatentVideo = n_EmptyMochiLatentVideo = n_EmptyLTXVLatentVideo = n_EmptyCosmosLatentVideo = \
        _video_latent

    def n_LatentUpscale(self, node):
        got = self.inputs(node, "samples")
        if got is None:
            return None
        return (Latent("upscale", node, (self.lit(node, "width"), self.lit(node, "height")), source=got[0],
                       method=self.lit(node, "upscale_method")),)

    def n_LatentUpscaleBy(self, node):
        got = self.inputs(node, "samples")
        if got is None:
            return None
        return (Latent("upscale", node, source=got[0], by=self.lit(node, "scale_by"),
                       method=self.lit(node, "upscale_method")),)

    def n_VAEEncode(self, node):
        got = self.inputs(node, "pixels", "vae")
        return None if got is None else (Latent("encode", node, image=got[0], vae=got[1]),)

    def n_VAEEncodeForInpaint(self, node):
        got = self.inputs(node, "pixels", "vae", "mask")
        if got is None:
            return None
        return (Latent("encode", node, image=got[0], vae=got[1], mask=got[2], grow=self.lit(node, "grow_mask_by", 0)),)

    def n_SetLatentNoiseMask(self, node):
        got = self.inputs(node, "samples", "mask")
        if got is None:
            return None
        latent, mask = got
        if latent.kind != "encode" or latent.mask is not None:
            return self.fail(node, "samples", "a noise mask is served on an encoded image (VAEEncode of a LoadImage): "
                             "that is the engine's inpaint")
        return (_with(latent, mask=mask),)

    def n_LoadImage(self, node):
        path = self.files.input_path(self.lit(node, "image"))
        return Image("load", node, path), Mask(node, path, "alpha")

    def n_LoadImageMask(self, node):
        return (Mask(node, self.files.input_path(self.lit(node, "image")), self.lit(node, "channel")),)

    def n_ImageScale(self, node):
        got = self.inputs(node, "image")
        if got is None:
            return None
        return (Image("scale", node, source=got[0], size=(self.lit(node, "width"), self.lit(node, "height")),
                      method=self.lit(node, "upscale_method"), crop=self.lit(node, "crop")),)

    def n_ImageScaleBy(self, node):
        got = self.inputs(node, "image")
        if got is None:
            return None
        return (Image("scale", node, source=got[0], by=self.lit(node, "scale_by"),
                      method=self.lit(node, "upscale_method")),)

    def n_ImageUpscaleWithModel(self, node):
        got = self.inputs(node, "upscale_model", "image")
        if got is None:
            return None
        return (Image("model", node, source=got[1], upscaler=got[0][2]),)

    # model sampling: checked against the model when its job is built
    def _sampling(self, node):
        got = self.inputs(node, "model")
        return None if got is None else (_with(got[0], sampling=(*got[0].sampling, node)),)

    n_ModelSamplingSD3 = n_ModelSamplingFlux = n_ModelSamplingAuraFlow = _sampling

    # samplers
    def n_KSampler(self, node):
        got = self.inputs(node, "model", "positive", "negative", "latent_image")
        if got is None:
            return None
        return _sampled(Sampler(node, "KSampler", *got, seed=self.lit(node, "seed"), steps=self.lit(node, "steps"),
                        cfg=self.lit(node, "cfg"), sampler_name=self.lit(node, "sampler_name"),
                        scheduler=self.lit(node, "scheduler"), denoise=self.lit(node, "denoise")))

    def n_KSamplerAdvanced(self, node):
        got = self.inputs(node, "model", "positive", "negative", "latent_image")
        if got is None:
            return None
        return _sampled(Sampler(node, "KSamplerAdvanced", *got, seed=self.lit(node, "noise_seed"),
                        steps=self.lit(node, "steps"), cfg=self.lit(node, "cfg"),
                        sampler_name=self.lit(node, "sampler_name"), scheduler=self.lit(node, "scheduler"),
                        start=self.lit(node, "start_at_step"), end=self.lit(node, "end_at_step"),
                        add_noise=self.lit(node, "add_noise") == "enable",
                        leftover=self.lit(node, "return_with_leftover_noise") == "enable"))

    # output
    def n_VAEDecode(self, node):
        got = self.inputs(node, "samples", "vae")
        return None if got is None else (Image("decode", node, source=got[0], vae=got[1]),)

    def n_CreateVideo(self, node):
        if "audio" in self.values.get(node, {}):
            return self.fail(node, "audio", "a video's audio track is not served")
        got = self.inputs(node, "images")
        return None if got is None else (Video(node, got[0], self.lit(node, "fps")),)

    def _output(self, node):
        got = self.inputs(node, "video" if self.class_of(node) == "SaveVideo" else "images")
        return None if got is None else (got[0],)

    n_SaveImage = n_PreviewImage = n_SaveAnimatedWEBP = n_SaveWEBM = n_SaveVideo = _output

    # -- files -----------------------------------------------------------------------------------
    def arch_of(self, path: str, node: str, input_name: str):
        """(arch, variant) of a model file, as the engine detects it; None (a node error) for a file it
        does not take."""
        if path not in self.detected:
            self.detected[path] = _detect(path)
        got = self.detected[path]
        if isinstance(got, str):
            self.fail(node, input_name, f"{os.path.basename(path)}: {got}")
            return None
        return got


_INPUT_IMAGES = next(kind for kind, _o in NODES["LoadImage"].required.values())


def node_order(node: str):
    return (0, int(node), "") if node.isdigit() else (1, 0, node)


def _sampled(sampler: "Sampler") -> tuple:
    return (Latent("sampled", sampler.node, source=sampler),)


def _with(value, **changes):
    return replace(value, **changes)


def image_file(image) -> str | None:
    while isinstance(image, Image) and image.kind == "scale":
        image = image.source
    return image.path if isinstance(image, Image) and image.kind == "load" else None


def has_text_encoder(path: str) -> bool:
    """Whether a LoRA file carries text encoder weights (kohya lora_te*, ComfyUI text_encoders., PEFT text_encoder*)."""
    from toolkit.models.formats.safetensors_header import HeaderError, check_file
    try:
        keys = check_file(path).tensors
    except (HeaderError, OSError, ValueError):
        return False
    return any(k.startswith(TE_LORA_PREFIXES) for k in keys)


def _detect(path: str):
    """(arch, variant) of a model file, or why it is none (a text for the node error)."""
    if path.lower().endswith(".gguf"):
        from toolkit.models.formats.gguf_header import inspect_gguf
        from toolkit.models.registry import ARCHS
        r = inspect_gguf(path)
        if r.get("error") or not r.get("arch"):
            return r.get("error") or r.get("summary") or "no arch reads this GGUF file"
        return r["arch"], ARCHS[r["arch"]].default_variant
    from toolkit.models.formats.detect import detect_file
    from toolkit.models.formats.safetensors_header import HeaderError
    try:
        det = detect_file(path)
    except (HeaderError, OSError, ValueError) as e:
        return str(getattr(e, "reason", e))
    if det.arch is None:
        if det.kinds:
            return "is a component file (" + ", ".join(label for _k, label, _f in det.kinds) + "), not a model"
        return "; ".join(det.problems) or "is no model this engine knows"
    if det.denoiser is not None and det.denoiser.error:
        return det.denoiser.error
    return det.arch, det.variant


def reachable(prompt: dict, node: str) -> list:
    """The nodes `node` depends on and itself, dependencies first (the order ComfyUI executes them)."""
    order, seen = [], set()

    def visit(n):
        if n in seen or n not in prompt or not isinstance(prompt[n], dict):
            return
        seen.add(n)
        inputs = prompt[n].get("inputs")
        for v in (inputs.values() if isinstance(inputs, dict) else ()):
            if isinstance(v, list) and len(v) == 2 and isinstance(v[0], (str, int)) and not isinstance(v[0], bool):
                visit(str(v[0]))
        order.append(n)
    visit(node)
    return order
