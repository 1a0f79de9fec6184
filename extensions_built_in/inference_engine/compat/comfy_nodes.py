"""The ComfyUI core nodes this engine understands (data), and GET /object_info made from them.

Each row says what ComfyUI's own node class declares: its inputs (a type, or a list of choices, with
ComfyUI's options), outputs, category and names. The analysis (compat/comfy_graph.py) checks a
workflow's inputs against these rows as ComfyUI's validation does; `object_info` serves them in
ComfyUI's shape with the choices that depend on this engine filled in: the model files of the model
folders (compat/comfy_files.py), LoadImage's input images, and the sampler and scheduler names that
map onto the engine's samplers (toolkit/samplers.py).

    object_info(files) -> {class_type: {"input": ..., "output": ..., ...}}
    object_info(files, "KSampler") -> {"KSampler": {...}}   ({} for a node not served)
"""
import json
import os
from dataclasses import dataclass, field

from toolkit import samplers as sampler_table

MAX_RES = 16384                      # ComfyUI's nodes.MAX_RESOLUTION
MAX_SEED = 0xFFFFFFFFFFFFFFFF        # ComfyUI's seed widget bound (the engine takes up to 2**63 - 1)


@dataclass(frozen=True)
class Files:
    """A choice among a ComfyUI models folder's file names (comfy_files.ComfyFiles.names)."""
    folder: str


@dataclass(frozen=True)
class Dynamic:
    """A choice list this engine fills in: "samplers", "schedulers" or "input_images"."""
    what: str


SAMPLERS, SCHEDULERS, INPUT_IMAGES = Dynamic("samplers"), Dynamic("schedulers"), Dynamic("input_images")

# ComfyUI's sampler_name -> the engine's sampler name (toolkit/samplers.py), in ComfyUI's list order;
# its scheduler -> the schedule of the engine's rows (samplers.SCHEDULES). ComfyUI's normal, simple and
# sgm_uniform space the model's own schedule evenly: the engine's automatic rows. karras, exponential and
# beta respace the model's sigma range by diffusers' flags of those names (A1111's Karras, Exponential,
# Beta): the same formulas, Beta(0.6, 0.6) included, though ComfyUI's beta takes its quantiles over the
# model's timesteps where A1111's and diffusers' take them over sigma. A pair the model's table lacks
# (euler_ancestral x karras on SDXL, dpmpp_2m x beta on Flux) and the names not here (ddim_uniform,
# linear_quadratic, kl_optimal, dpmpp_3m_sde, ...) are not served: a node error.
COMFY_SAMPLERS = {"euler": "euler", "euler_ancestral": "euler_a", "heun": "heun", "dpmpp_sde": "dpm++_sde",
                  "dpmpp_2m": "dpm++_2m", "dpmpp_2m_sde": "dpm++_2m_sde", "lms": "lms", "lcm": "lcm",
                  "ddim": "ddim", "uni_pc": "unipc"}
COMFY_SCHEDULERS = {"normal": "automatic", "karras": "karras", "exponential": "exponential",
                    "sgm_uniform": "automatic", "simple": "automatic", "beta": "beta"}


@dataclass(frozen=True)
class Node:
    """One ComfyUI node class: inputs as its INPUT_TYPES declares them (name -> (type or choices, options))."""
    category: str
    display_name: str
    required: dict
    outputs: tuple = ()                 # RETURN_TYPES
    output_names: tuple = ()            # RETURN_NAMES (default: the types)
    optional: dict = field(default_factory=dict)
    output_node: bool = False
    description: str = ""

    def inputs(self) -> dict:
        return {**self.required, **self.optional}


def _int(default, lo, hi, step=1, **more):
    return ("INT", {"default": default, "min": lo, "max": hi, "step": step, **more})


def _float(default, lo, hi, step=0.01, **more):
    return ("FLOAT", {"default": default, "min": lo, "max": hi, "step": step, **more})


_SIZE = {"width": _int(512, 16, MAX_RES, 8), "height": _int(512, 16, MAX_RES, 8),
         "batch_size": _int(1, 1, 4096)}
_SD3_SIZE = {"width": _int(1024, 16, MAX_RES, 16), "height": _int(1024, 16, MAX_RES, 16),
             "batch_size": _int(1, 1, 4096)}
_LATENT_METHODS = ["nearest-exact", "bilinear", "area", "bicubic", "bislerp"]
_IMAGE_METHODS = ["nearest-exact", "bilinear", "area", "bicubic", "lanczos"]
# ComfyUI's own CLIPLoader / DualCLIPLoader `type` options (its nodes.py): ComfyUI's vocabulary, kept as data
# (comfy_clip_types.json), not a table of this engine's archs; the file's header decides a text encoder's role
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "comfy_clip_types.json"), encoding="utf-8") as _f:
    _COMFY_CLIP_TYPES = json.load(_f)
_CLIP_TYPES, _DUAL_CLIP_TYPES = _COMFY_CLIP_TYPES["CLIPLoader"], _COMFY_CLIP_TYPES["DualCLIPLoader"]
_DEVICE = {"device": (["default", "cpu"], {"advanced": True})}
_SAMPLER = {"sampler_name": (SAMPLERS, {}), "scheduler": (SCHEDULERS, {})}
_SEED = _int(0, 0, MAX_SEED, control_after_generate=True)
_VIDEO = {"width": _int(848, 16, MAX_RES, 16), "height": _int(480, 16, MAX_RES, 16),
          "batch_size": _int(1, 1, 4096)}


def _video_latent(display, length, step, category="latent/video", width=848, height=480):
    return Node(category, display, {**_VIDEO, "width": _int(width, 16, MAX_RES, 16),
                                    "height": _int(height, 16, MAX_RES, 16),
                                    "length": _int(length, 1, MAX_RES, step)}, ("LATENT",),
                description="an empty video latent: width x height, `length` frames")


NODES = {
    # loaders
    "CheckpointLoaderSimple": Node("loaders", "Load Checkpoint", {"ckpt_name": (Files("checkpoints"), {})},
                                   ("MODEL", "CLIP", "VAE"),
                                   description="an all-in-one checkpoint: its denoiser, text encoders and VAE"),
    "UNETLoader": Node("advanced/loaders", "Load Diffusion Model",
                       {"unet_name": (Files("diffusion_models"), {}),
                        "weight_dtype": (["default", "fp8_e4m3fn", "fp8_e4m3fn_fast", "fp8_e5m2"], {})},
                       ("MODEL",), description="a denoiser file alone (diffusion_models/)"),
    "CLIPLoader": Node("advanced/loaders", "Load CLIP",
                       {"clip_name": (Files("text_encoders"), {}), "type": (_CLIP_TYPES, {})}, ("CLIP",),
                       optional=dict(_DEVICE)),
    "DualCLIPLoader": Node("advanced/loaders", "DualCLIPLoader",
                           {"clip_name1": (Files("text_encoders"), {}), "clip_name2": (Files("text_encoders"), {}),
                            "type": (_DUAL_CLIP_TYPES, {})}, ("CLIP",), optional=dict(_DEVICE)),
    "TripleCLIPLoader": Node("advanced/loaders", "TripleCLIPLoader",
                             {"clip_name1": (Files("text_encoders"), {}), "clip_name2": (Files("text_encoders"), {}),
                              "clip_name3": (Files("text_encoders"), {})}, ("CLIP",)),
    "VAELoader": Node("loaders", "Load VAE", {"vae_name": (Files("vae"), {})}, ("VAE",)),
    "LoraLoader": Node("loaders", "Load LoRA",
                       {"model": ("MODEL", {}), "clip": ("CLIP", {}), "lora_name": (Files("loras"), {}),
                        "strength_model": _float(1.0, -100.0, 100.0), "strength_clip": _float(1.0, -100.0, 100.0)},
                       ("MODEL", "CLIP")),
    "LoraLoaderModelOnly": Node("loaders", "LoraLoaderModelOnly",
                                {"model": ("MODEL", {}), "lora_name": (Files("loras"), {}),
                                 "strength_model": _float(1.0, -100.0, 100.0)}, ("MODEL",)),
    "ControlNetLoader": Node("loaders", "Load ControlNet Model", {"control_net_name": (Files("controlnet"), {})},
                             ("CONTROL_NET",)),
    "UpscaleModelLoader": Node("loaders", "Load Upscale Model", {"model_name": (Files("upscale_models"), {})},
                               ("UPSCALE_MODEL",)),
    # conditioning
    "CLIPTextEncode": Node("conditioning", "CLIP Text Encode (Prompt)",
                           {"text": ("STRING", {"multiline": True, "dynamicPrompts": True}), "clip": ("CLIP", {})},
                           ("CONDITIONING",)),
    "CLIPSetLastLayer": Node("conditioning", "CLIP Set Last Layer",
                             {"clip": ("CLIP", {}), "stop_at_clip_layer": _int(-1, -24, -1)}, ("CLIP",),
                             description="only -1 (the last layer) is served: the engine has no clip skip"),
    "ConditioningZeroOut": Node("advanced/conditioning", "ConditioningZeroOut",
                                {"conditioning": ("CONDITIONING", {})}, ("CONDITIONING",)),
    "FluxGuidance": Node("advanced/conditioning/flux", "FluxGuidance",
                         {"conditioning": ("CONDITIONING", {}), "guidance": _float(3.5, 0.0, 100.0, 0.1)},
                         ("CONDITIONING",)),
    "ControlNetApplyAdvanced": Node("conditioning/controlnet", "Apply ControlNet",
                                    {"positive": ("CONDITIONING", {}), "negative": ("CONDITIONING", {}),
                                     "control_net": ("CONTROL_NET", {}), "image": ("IMAGE", {}),
                                     "strength": _float(1.0, 0.0, 10.0),
                                     "start_percent": _float(0.0, 0.0, 1.0, 0.001),
                                     "end_percent": _float(1.0, 0.0, 1.0, 0.001)},
                                    ("CONDITIONING", "CONDITIONING"), ("positive", "negative"),
                                    optional={"vae": ("VAE", {})}),
    # latents and images
    "EmptyLatentImage": Node("latent", "Empty Latent Image", dict(_SIZE), ("LATENT",)),
    "EmptySD3LatentImage": Node("latent/sd3", "EmptySD3LatentImage", dict(_SD3_SIZE), ("LATENT",)),
    "EmptyHunyuanLatentVideo": _video_latent("EmptyHunyuanLatentVideo", 25, 4),
    "EmptyMochiLatentVideo": _video_latent("EmptyMochiLatentVideo", 25, 6),
    "EmptyLTXVLatentVideo": _video_latent("EmptyLTXVLatentVideo", 97, 8, "latent/video/ltxv", 768, 512),
    "EmptyCosmosLatentVideo": _video_latent("EmptyCosmosLatentVideo", 121, 8, width=1280, height=704),
    "LatentUpscale": Node("latent", "Upscale Latent",
                          {"samples": ("LATENT", {}), "upscale_method": (_LATENT_METHODS, {}),
                           "width": _int(512, 0, MAX_RES, 8), "height": _int(512, 0, MAX_RES, 8),
                           "crop": (["disabled", "center"], {})}, ("LATENT",)),
    "LatentUpscaleBy": Node("latent", "Upscale Latent By",
                            {"samples": ("LATENT", {}), "upscale_method": (_LATENT_METHODS, {}),
                             "scale_by": _float(1.5, 0.01, 8.0)}, ("LATENT",)),
    "VAEEncode": Node("latent", "VAE Encode", {"pixels": ("IMAGE", {}), "vae": ("VAE", {})}, ("LATENT",)),
    "VAEEncodeForInpaint": Node("latent/inpaint", "VAE Encode (for Inpainting)",
                                {"pixels": ("IMAGE", {}), "vae": ("VAE", {}), "mask": ("MASK", {}),
                                 "grow_mask_by": _int(6, 0, 64)}, ("LATENT",)),
    "SetLatentNoiseMask": Node("latent/inpaint", "Set Latent Noise Mask",
                               {"samples": ("LATENT", {}), "mask": ("MASK", {})}, ("LATENT",)),
    "LoadImage": Node("image", "Load Image", {"image": (INPUT_IMAGES, {"image_upload": True})}, ("IMAGE", "MASK")),
    "LoadImageMask": Node("mask", "Load Image (as Mask)",
                          {"image": (INPUT_IMAGES, {"image_upload": True}),
                           "channel": (["alpha", "red", "green", "blue"], {})}, ("MASK",)),
    "ImageScale": Node("image/upscaling", "Upscale Image",
                       {"image": ("IMAGE", {}), "upscale_method": (_IMAGE_METHODS, {}),
                        "width": _int(512, 0, MAX_RES), "height": _int(512, 0, MAX_RES),
                        "crop": (["disabled", "center"], {})}, ("IMAGE",)),
    "ImageScaleBy": Node("image/upscaling", "Upscale Image By",
                         {"image": ("IMAGE", {}), "upscale_method": (_IMAGE_METHODS, {}),
                          "scale_by": _float(1.0, 0.01, 8.0)}, ("IMAGE",)),
    "ImageUpscaleWithModel": Node("image/upscaling", "Upscale Image (using Model)",
                                  {"upscale_model": ("UPSCALE_MODEL", {}), "image": ("IMAGE", {})}, ("IMAGE",)),
    # model sampling
    "ModelSamplingSD3": Node("advanced/model", "ModelSamplingSD3",
                             {"model": ("MODEL", {}), "shift": _float(3.0, 0.0, 100.0)}, ("MODEL",),
                             description="a flow-matching model's fixed shift: the request's sample.shift"),
    "ModelSamplingFlux": Node("advanced/model", "ModelSamplingFlux",
                              {"model": ("MODEL", {}), "max_shift": _float(1.15, 0.0, 100.0),
                               "base_shift": _float(0.5, 0.0, 100.0), "width": _int(1024, 16, MAX_RES, 8),
                               "height": _int(1024, 16, MAX_RES, 8)}, ("MODEL",),
                              description="served where the shifts are the model's own and the size the image's"),
    "ModelSamplingAuraFlow": Node("advanced/model", "ModelSamplingAuraFlow",
                                  {"model": ("MODEL", {}), "shift": _float(1.73, 0.0, 100.0)}, ("MODEL",),
                                  description="a flow-matching model's fixed shift: the request's sample.shift"),
    # samplers
    "KSampler": Node("sampling", "KSampler",
                     {"model": ("MODEL", {}), "seed": _SEED, "steps": _int(20, 1, 10000),
                      "cfg": _float(8.0, 0.0, 100.0, 0.1, round=0.01), **_SAMPLER,
                      "positive": ("CONDITIONING", {}), "negative": ("CONDITIONING", {}),
                      "latent_image": ("LATENT", {}), "denoise": _float(1.0, 0.0, 1.0)}, ("LATENT",)),
    "KSamplerAdvanced": Node("sampling", "KSampler (Advanced)",
                             {"model": ("MODEL", {}), "add_noise": (["enable", "disable"], {}), "noise_seed": _SEED,
                              "steps": _int(20, 1, 10000), "cfg": _float(8.0, 0.0, 100.0, 0.1, round=0.01),
                              **_SAMPLER, "positive": ("CONDITIONING", {}), "negative": ("CONDITIONING", {}),
                              "latent_image": ("LATENT", {}), "start_at_step": _int(0, 0, 10000),
                              "end_at_step": _int(10000, 0, 10000),
                              "return_with_leftover_noise": (["disable", "enable"], {})}, ("LATENT",)),
    # output
    "VAEDecode": Node("latent", "VAE Decode", {"samples": ("LATENT", {}), "vae": ("VAE", {})}, ("IMAGE",)),
    "SaveImage": Node("image", "Save Image", {"images": ("IMAGE", {}),
                                              "filename_prefix": ("STRING", {"default": "ComfyUI"})},
                      output_node=True, description="Saves the input images to your ComfyUI output directory."),
    "PreviewImage": Node("image", "Preview Image", {"images": ("IMAGE", {})}, output_node=True,
                         description="Saves the input images to your ComfyUI output directory."),
    "SaveAnimatedWEBP": Node("image/animation", "SaveAnimatedWEBP",
                             {"images": ("IMAGE", {}), "filename_prefix": ("STRING", {"default": "ComfyUI"}),
                              "fps": _float(6.0, 0.01, 1000.0), "lossless": ("BOOLEAN", {"default": False}),
                              "quality": _int(80, 0, 100), "method": (["default", "fastest", "slowest"], {})},
                             output_node=True),
    # ComfyUI's SaveWEBM (its Wan examples save with it): VP9 only here; the engine's own crf, not the node's
    "SaveWEBM": Node("image/video", "SaveWEBM",
                     {"images": ("IMAGE", {}), "filename_prefix": ("STRING", {"default": "ComfyUI"}),
                      "codec": (["vp9"], {}), "fps": _float(24.0, 0.01, 1000.0),
                      "crf": _float(32.0, 0.0, 63.0, 1.0)}, output_node=True),
    "CreateVideo": Node("image/video", "Create Video", {"images": ("IMAGE", {}), "fps": _float(30.0, 1.0, 120.0, 1.0)},
                        ("VIDEO",), optional={"audio": ("AUDIO", {})}),
    "SaveVideo": Node("image/video", "Save Video",
                      {"video": ("VIDEO", {}), "filename_prefix": ("STRING", {"default": "video/ComfyUI"}),
                       "format": (["auto", "mp4"], {}), "codec": (["auto", "h264"], {})}, output_node=True),
}


def served_samplers() -> list:
    """ComfyUI's sampler names whose engine sampler some family serves (a model's own list may be shorter)."""
    names = {s.name for rows in sampler_table.FAMILIES.values() for s in rows}
    return [c for c, ours in COMFY_SAMPLERS.items() if ours in names]


def served_schedulers() -> list:
    """ComfyUI's scheduler names whose schedule some family's rows have (a model's own may be fewer)."""
    schedules = {s.schedule for rows in sampler_table.FAMILIES.values() for s in rows}
    return [c for c, ours in COMFY_SCHEDULERS.items() if ours in schedules]


def choices(spec, files) -> list | None:
    """The list a choice input offers (None: not a choice input)."""
    if isinstance(spec, list):
        return spec
    if isinstance(spec, Files):
        return files.names(spec.folder)
    if spec is SAMPLERS:
        return served_samplers()
    if spec is SCHEDULERS:
        return served_schedulers()
    if spec is INPUT_IMAGES:
        return files.input_names()
    return None


def _input(spec, opts: dict, files) -> list:
    listed = choices(spec, files)
    kind = listed if listed is not None else spec
    return [kind, dict(opts)] if opts else [kind]


def describe(name: str, node: Node, files) -> dict:
    outputs = list(node.outputs)
    return {"input": {"required": {k: _input(s, o, files) for k, (s, o) in node.required.items()},
                      "optional": {k: _input(s, o, files) for k, (s, o) in node.optional.items()}},
            "input_order": {"required": list(node.required), "optional": list(node.optional)},
            "output": outputs, "output_is_list": [False] * len(outputs),
            "output_name": list(node.output_names or node.outputs), "name": name,
            "display_name": node.display_name, "description": node.description, "python_module": "nodes",
            "category": node.category, "output_node": node.output_node, "deprecated": False,
            "experimental": False}


def object_info(files, node: str | None = None) -> dict:
    """ComfyUI's GET /object_info (every node) or /object_info/{node} ({} when it is not served)."""
    if node is not None:
        return {node: describe(node, NODES[node], files)} if node in NODES else {}
    return {name: describe(name, n, files) for name, n in NODES.items()}
