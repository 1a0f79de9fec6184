"""The evaluated nodes of a ComfyUI workflow (compat/comfy_eval.py) turned into the engine's requests: one
per VAEDecode whose sampler chain reaches output nodes (compat/comfy_graph.py's third step). What the
engine cannot do as the graph says is a node error on the node and input that asks it, never a
substitute; each engine field records the node and input it came from (`fields`), so a refusal of the
engine's own checks names them too.

    build(analysis, outputs) -> [{"outputs", "model", "sample", "nodes", "sampler_node", "fields"}]
"""
import os

from extensions_built_in.inference_engine.compat.comfy_eval import BAD, Image, Latent, has_text_encoder, reachable
from extensions_built_in.inference_engine.compat.comfy_nodes import COMFY_SAMPLERS, COMFY_SCHEDULERS
from toolkit import hires as hires_rules
from toolkit import samplers as sampler_table

OUTPUT_TYPES = {"SaveImage": "output", "PreviewImage": "temp", "SaveAnimatedWEBP": "output", "SaveWEBM": "output",
                "SaveVideo": "output"}
VIDEO_OUTPUTS = {"SaveAnimatedWEBP": "webp", "SaveWEBM": "webm", "SaveVideo": "mp4"}
LATENT_UPSCALERS = {"nearest-exact": "Latent (nearest-exact)", "bilinear": "Latent", "bicubic": "Latent (bicubic)"}
PIXEL_UPSCALERS = {"lanczos": "Lanczos", "nearest-exact": "Nearest"}
WEIGHT_DTYPES = {"fp8_e4m3fn": "qfloat8_e4m3fn", "fp8_e4m3fn_fast": "qfloat8_e4m3fn", "fp8_e5m2": "qfloat8_e5m2"}
SHIFT_TOLERANCE = 1e-3
SCALE_TOLERANCE = 1e-6
DEFAULT_PREFIX = "ComfyUI"


def build(a, outputs: list) -> list:
    """The requests of the output nodes `outputs` (each output's images traced to its VAEDecode)."""
    groups: dict = {}
    for out in outputs:
        got = a.output(out, 0)
        if got is BAD:
            continue
        cls = a.class_of(out)
        images, fps = got, None
        name = "video" if cls == "SaveVideo" else "images"
        if cls == "SaveVideo":
            images, fps = got.images, (got.node, got.fps)
        elif cls in ("SaveAnimatedWEBP", "SaveWEBM"):
            fps = (out, a.lit(out, "fps"))
        if not (isinstance(images, Image) and images.kind == "decode"):
            a.fail(out, name, "must be what a VAE Decode of a sampler makes: the engine returns the images it "
                   "generates, not an input image or one processed after it")
            continue
        groups.setdefault(images.node, []).append((out, cls, images, fps))
    jobs = []
    for outs in groups.values():
        job = Builder(a, outs).build()
        if job is not None:
            jobs.append(job)
    return jobs


class Builder:
    """One request: the model, the sample and where each of their fields came from."""

    def __init__(self, a, outs: list):
        self.a, self.outs = a, outs
        self.ok = True
        self.model: dict = {}
        self.sample: dict = {}
        self.fields: dict = {}

    def fail(self, node, input_name, details):
        self.a.fail(node, input_name, details)
        self.ok = False

    def field(self, key: str, node: str, input_name: str | None):
        self.fields[key] = (node, input_name)

    # -- the whole request --------------------------------------------------------------------------
    def build(self) -> dict | None:
        decode = self.outs[0][2]
        latent = decode.source
        if not (isinstance(latent, Latent) and latent.kind == "sampled"):
            self.fail(decode.node, "samples", "must be a sampler's output (KSampler, KSamplerAdvanced): the engine "
                      "decodes the latents it samples")
            return None
        last = latent.source
        split = self.split(last)
        if split is None:
            return None
        first, second = split
        vaes = [(decode.node, decode.vae)]
        if second is not None and second[0] == "pixel":
            vaes.append((second[3].node, second[3].vae))
        if first.latent.kind == "encode":
            vaes.append((first.latent.node, first.latent.vae))
        if second is not None and second[0] == "pixel":
            vaes.append((second[1].node, second[1].vae))
        spec, variant = self.model_of(first, vaes)
        if spec is None:
            return None
        self.prompts(first, spec)
        self.sampling(first, spec)
        self.latent(first, spec)
        for node in first.model.sampling:
            self.model_sampling(node, spec, variant)
        self.controls(first)
        if second is not None:
            self.hires(first, last, second, spec)
        outputs = self.outputs(spec)
        if not self.ok:
            return None
        nodes = []
        for out, *_rest in self.outs:
            nodes += [n for n in reachable(self.a.prompt, out) if n not in nodes]
        return {"outputs": outputs, "model": self.model, "sample": self.sample, "nodes": nodes,
                "sampler_node": last.node, "fields": self.fields}

    def split(self, last):
        """(the base sampler, None | the second pass's shape) of the chain ending at `last`: a hires pair
        is ("latent", the upscale Latent) or ("pixel", the encode Latent, [image nodes], the middle decode)."""
        lat = last.latent
        if lat.kind == "upscale":
            if isinstance(lat.source, Latent) and lat.source.kind == "sampled":
                return lat.source.source, ("latent", lat)
            self.fail(lat.node, "samples", "an upscaled latent is served between two samplers (hires: KSampler -> "
                      "Upscale Latent -> KSampler), not over an empty or encoded one")
            return None
        if lat.kind == "encode":
            chain, image = [], lat.image
            while isinstance(image, Image) and image.kind in ("scale", "model"):
                chain.append(image)
                image = image.source
            if isinstance(image, Image) and image.kind == "decode":
                if not (isinstance(image.source, Latent) and image.source.kind == "sampled"):
                    self.fail(image.node, "samples", "must be a sampler's output")
                    return None
                if lat.mask is not None:
                    self.fail(lat.node, "mask", "a masked second pass (hires) is not served")
                    return None
                return image.source.source, ("pixel", lat, chain[::-1], image)
            return last, None
        if lat.kind == "sampled":
            self.fail(last.node, "latent_image", "a sampler continuing another's latent (a refiner, a split schedule) "
                      "is not served; the two-sampler pattern served is hires: KSampler -> Upscale Latent (By) -> "
                      "KSampler with denoise below 1")
            return None
        return last, None

    # -- the model ----------------------------------------------------------------------------------
    def model_of(self, s, vaes: list) -> tuple:
        from toolkit.companions import describe
        from toolkit.models.registry import ARCHS
        m = s.model
        arch, variant = self.a.detected[m.path]
        spec = ARCHS[arch]
        model = {"name_or_path": m.path}
        if m.path.lower().endswith(".gguf"):
            model["arch"] = arch                    # the engine detects a .safetensors file's arch itself
        for key in ("model", "model.name_or_path", "model.arch", "model.variant"):
            self.field(key, m.node, m.input)
        if m.dtype != "default":
            model.update(quantize=True, qtype=WEIGHT_DTYPES[m.dtype])
            for key in ("model.quantize", "model.qtype"):
                self.field(key, m.node, "weight_dtype")
        if spec.modality == "audio":
            self.fail(m.node, m.input, f"{os.path.basename(m.path)} is an audio model ({arch}): workflows of audio "
                      "nodes are not served")
            return None, None
        loras = []
        for i, (node, path, strength) in enumerate(m.loras):
            loras.append({"path": path, "scale": strength})
            self.field(f"model.loras[{i}]", node, "lora_name")
            self.field(f"model.loras[{i}].scale", node, "strength_model")
        if loras:
            model["loras"] = loras
        clip = s.positive.clip or s.negative.clip
        if s.negative.node is not None and s.positive.clip is not None and s.negative.clip != s.positive.clip:
            self.fail(s.negative.node, "clip", "the negative prompt is encoded by other text encoders than the "
                      "positive one: the engine runs one model's text encoders for both")
        if clip is not None and clip.checkpoint is not None and clip.checkpoint != m.path:
            self.fail(s.positive.node or s.node, "clip", f"the text encoders of {os.path.basename(clip.checkpoint)} "
                      f"with the denoiser of {os.path.basename(m.path)}: the engine runs one model's (load the "
                      "text encoder files with a CLIP loader)")
        elif clip is not None:
            components = {}
            roles = [c.role for c in spec.components if c.kind == "text_encoder"]
            for node, input_name, path in clip.files:
                cf = describe(path, os.path.dirname(path))
                fits = [r for a_, r in (cf.fits if cf else ()) if a_ == arch and r in roles and r not in components]
                if not fits:
                    what = f"a {cf.label} file" if cf else "no text encoder file this engine reads"
                    self.fail(node, input_name, f"{os.path.basename(path)} is {what}, which {arch} "
                              f"({os.path.basename(m.path)}) takes in none of its free text encoder roles "
                              f"({', '.join(roles) or 'none'})")
                    continue
                components[fits[0]] = path
                self.field(f"model.components.{fits[0]}", node, input_name)
            if components:
                model["components"] = components
        self.lora_clips(m, clip)
        first_node, first = vaes[0]
        for node, vae in vaes[1:]:
            if (vae.path, vae.checkpoint) != (first.path, first.checkpoint):    # one file, whichever loader node
                self.fail(node, "vae", "another VAE than the decode's: the engine runs one VAE per request")
        if first.checkpoint and first.path != m.path:
            self.fail(first_node, "vae", f"the VAE of {os.path.basename(first.path)} with the denoiser of "
                      f"{os.path.basename(m.path)}: load a VAE file with VAELoader")
        elif not first.checkpoint:
            model["vae"] = first.path
            self.field("model.vae", first.node, first.input)
            self.field("model.components.vae", first.node, first.input)
        self.model = model
        return spec, variant

    def lora_clips(self, m, clip):
        """A LoRA's text encoder weights are applied with its denoiser weights, at one strength: its CLIP
        side must be used as its MODEL side is."""
        on_clip = {node: strength for node, _p, strength in (clip.loras if clip is not None else ())}
        on_model = {node for node, _p, _s in m.loras}
        for node, path, strength in m.loras:
            if not has_text_encoder(path):
                continue
            if node not in on_clip:
                self.fail(node, "clip", "this LoRA has text encoder weights, which the engine applies with its "
                          "denoiser weights: the prompts must be encoded through its CLIP output")
            elif on_clip[node] != strength:
                self.fail(node, "strength_clip", f"{on_clip[node]:g} != strength_model {strength:g}: the engine "
                          "applies a LoRA's text encoder and denoiser weights at one strength")
        for node, path, _s in (clip.loras if clip is not None else ()):
            if node not in on_model and has_text_encoder(path):
                self.fail(node, "model", "this LoRA's MODEL output is not the sampler's model: the engine applies "
                          "its text encoder weights only with its denoiser weights")

    def model_sampling(self, node: str, spec, variant):
        """ModelSamplingSD3 / AuraFlow's fixed shift is the request's `sample.shift` (a flow model with a fixed
        shift); ModelSamplingFlux is served where it asks for the model's own shifts (the request has no
        setting for a dynamic shift's)."""
        a = self.a
        config = spec.scheduler_for_files(variant)
        cls = a.class_of(node)
        if sampler_table.family_of(config) != sampler_table.FLOW:
            self.fail(node, "model", f"{spec.name} is not a flow-matching model: {cls} does not apply to it")
            return
        dynamic = bool(config.get("use_dynamic_shifting"))
        if cls == "ModelSamplingFlux":
            if not dynamic:
                self.fail(node, "model", f"{spec.name} samples with a fixed shift, not by the image size: "
                          "ModelSamplingFlux does not apply (ModelSamplingSD3 sets a fixed shift)")
                return
            for key in ("max_shift", "base_shift"):
                own, asked = config.get(key), a.lit(node, key)
                if own is not None and abs(float(own) - asked) > SHIFT_TOLERANCE:
                    self.fail(node, key, f"{asked:g}: the engine samples {spec.name} with its own {key} {own:g} "
                              "(a request sets a fixed shift only)")
            size = (self.sample.get("width"), self.sample.get("height"))
            for key, want in zip(("width", "height"), size):
                if want is not None and a.lit(node, key) != want:
                    self.fail(node, key, f"{a.lit(node, key)}: the engine shifts by the image's own size "
                              f"({size[0]}x{size[1]})")
            return
        if dynamic:
            self.fail(node, "shift", f"{spec.name} shifts by the image size (dynamic shifting): a fixed shift is "
                      "not served (ModelSamplingFlux sets its shifts)")
            return
        own = sampler_table.flow_shift(config)
        own = 1.0 if own is None else own
        if abs(a.lit(node, "shift") - own) > SHIFT_TOLERANCE:       # the model's own needs no setting
            self.sample["shift"] = a.lit(node, "shift")
            self.field("sample.shift", node, "shift")

    # -- the sample ---------------------------------------------------------------------------------
    def prompts(self, s, spec):
        pos, neg = s.positive, s.negative
        self.sample["prompt"] = pos.text
        if pos.node is not None:
            self.field("sample.prompt", pos.node, "text")
        if neg.node is not None and neg.text and spec.uses_negative_prompt:
            self.sample["negative_prompt"] = neg.text
            self.field("sample.negative_prompt", neg.node, "text")
        guidance = pos.guidance
        if guidance is not None:
            node, value = guidance
            if spec.uses_negative_prompt:
                self.fail(node, "guidance", f"{spec.name}'s guidance is classifier-free (KSampler cfg): FluxGuidance "
                          "is for models with an embedded guidance (Flux)")
                return
            if s.cfg != 1:
                self.fail(s.node, "cfg", f"{s.cfg:g} with FluxGuidance: the engine runs one guidance for "
                          f"{spec.name}, FluxGuidance's; set cfg to 1 (no classifier-free guidance)")
            self.sample["guidance_scale"] = value
            self.field("sample.guidance_scale", node, "guidance")
        else:
            self.sample["guidance_scale"] = s.cfg
            self.field("sample.guidance_scale", s.node, "cfg")
        self.sample["seed"] = s.seed
        self.field("sample.seed", s.node, "noise_seed" if s.cls == "KSamplerAdvanced" else "seed")

    def sampler_name(self, s, spec) -> str | None:
        """The engine's sampler for the node's sampler_name x scheduler among the model's; None (a node
        error) for a pair it does not serve."""
        available = spec.samplers()
        ours = COMFY_SAMPLERS.get(s.sampler_name)
        rows = [r for r in available if r.name == ours]
        if not rows:
            served = [c for c, o in COMFY_SAMPLERS.items() if any(r.name == o for r in available)]
            self.fail(s.node, "sampler_name", f"{s.sampler_name} is not served for {spec.name} (its samplers here: "
                      f"{', '.join(served) or 'none, only its own scheduler'})")
            return None
        try:
            return sampler_table.from_a1111(rows[0].label, COMFY_SCHEDULERS[s.scheduler], available)
        except ValueError:
            with_it = [c for c, sch in COMFY_SCHEDULERS.items()
                       if any(r.label == rows[0].label and r.schedule == sch for r in available)]
            self.fail(s.node, "scheduler", f"{s.scheduler} is not served with {s.sampler_name} for {spec.name} "
                      f"(with it: {', '.join(with_it)})")
            return None

    def sampling(self, s, spec):
        name = self.sampler_name(s, spec)
        if name is not None:
            self.sample["sampler"] = name
            self.field("sample.sampler", s.node, "sampler_name")
        if s.cls == "KSamplerAdvanced":
            if not s.add_noise:
                self.fail(s.node, "add_noise", "disable: the engine samples from noise it adds itself")
            if s.end < s.steps:
                self.fail(s.node, "end_at_step", f"{s.end} < steps {s.steps}: stopping early (leftover noise for "
                          "another sampler) is not served")

    def steps(self, s):
        """(num_inference_steps, strength) for a sampler over an image: ComfyUI runs the last `steps` of
        int(steps / denoise) (KSamplerAdvanced: from start_at_step of `steps`)."""
        if s.cls == "KSamplerAdvanced":
            if s.start >= s.steps:
                self.fail(s.node, "start_at_step", f"{s.start} >= steps {s.steps}: nothing is sampled")
                return None
            return s.steps, (s.steps - s.start) / s.steps
        if s.denoise <= 0:
            self.fail(s.node, "denoise", "0: nothing is sampled")
            return None
        total = max(s.steps, int(s.steps / s.denoise))
        return total, s.steps / total

    def latent(self, s, spec):
        lat = s.latent
        if lat.kind == "empty":
            width, height, batch, frames = lat.size
            self.sample.update(width=width, height=height, batch_size=batch, num_inference_steps=s.steps)
            for key in ("width", "height", "batch_size"):
                self.field(f"sample.{key}", lat.node, key)
            self.field("sample.num_inference_steps", s.node, "steps")
            if frames is not None:
                self.sample["num_frames"] = frames
                self.field("sample.num_frames", lat.node, "length")
            if spec.modality == "video" and frames is None:
                self.fail(s.node, "latent_image", f"{spec.name} is a video model: its latent is an empty video latent "
                          "(EmptyHunyuanLatentVideo, EmptyLTXVLatentVideo, ...)")
            elif spec.modality != "video" and frames is not None:
                self.fail(s.node, "latent_image", f"{spec.name} is an image model: its latent is EmptyLatentImage "
                          "or EmptySD3LatentImage")
            if s.cls == "KSampler" and s.denoise < 1:
                self.fail(s.node, "denoise", f"{s.denoise:g} over an empty latent: a denoise below 1 is served over an "
                          "image (VAEEncode) or as the second sampler of a hires pair")
            if s.cls == "KSamplerAdvanced" and s.start > 0:
                self.fail(s.node, "start_at_step", f"{s.start} over an empty latent: a late start is served over an "
                          "image (VAEEncode)")
            return
        if lat.kind != "encode":
            self.fail(s.node, "latent_image", "not served here")
            return
        got = self.image_input(lat.image, lat.node, spec)
        steps = self.steps(s)
        if got is None or steps is None:
            return
        (path, load_node), (width, height, size_node), resize = got
        self.sample.update(init_img=path, width=width, height=height, resize_mode=resize,
                           num_inference_steps=steps[0], strength=steps[1], task="img2img")
        self.field("sample.init_img", load_node, "image")
        for key in ("width", "height"):
            self.field(f"sample.{key}", size_node, key if size_node != load_node else "image")
        self.field("sample.num_inference_steps", s.node, "steps")
        self.field("sample.strength", s.node, "start_at_step" if s.cls == "KSamplerAdvanced" else "denoise")
        self.field("sample.task", s.node, "latent_image")
        if lat.mask is not None:
            mask = self.mask_input(lat)
            if mask is not None:
                self.sample.update(mask_img=mask, task="inpaint")
                self.field("sample.mask_img", lat.mask.node, "image")
                self.field("sample.task", lat.node, "mask")

    def image_input(self, image, where: str, spec):
        """((path, LoadImage node), (width, height, node the size came from), resize_mode) of an input
        image: a LoadImage, optionally through Upscale Image (By); None (a node error) otherwise."""
        scales = []
        while isinstance(image, Image) and image.kind == "scale":
            scales.append(image)
            image = image.source
        if not (isinstance(image, Image) and image.kind == "load"):
            self.fail(where, "pixels", "must be a LoadImage (optionally through Upscale Image): the engine encodes "
                      "an input image itself")
            return None
        if len(scales) > 1:
            self.fail(scales[0].node, "image", "one Upscale Image between the image and the encoder is served")
            return None
        try:
            from PIL import Image as PILImage
            with PILImage.open(image.path) as im:
                width, height = im.size
        except (OSError, ValueError) as e:
            self.fail(image.node, "image", f"not a readable image: {e}")
            return None
        node, resize = image.node, "crop"
        if scales:
            sc = scales[0]
            node, resize = sc.node, "crop" if sc.crop == "center" else "resize"
            if sc.size is not None:
                w, h = sc.size
                width, height = (w or round(width * h / height)), (h or round(height * w / width))
            else:
                width, height = round(width * sc.by), round(height * sc.by)
        div = spec.size_divisor
        width, height = max(div, width // div * div), max(div, height // div * div)
        return (image.path, image.node), (width, height, node), resize

    def mask_input(self, lat):
        """The inpaint mask as the engine takes it (white: repaint): the file itself where it already is that,
        else a PNG data URL of the channel ComfyUI reads (an alpha channel inverted), grown by grow_mask_by."""
        from PIL import Image as PILImage
        from PIL import ImageFilter
        mask = lat.mask
        band = {"alpha": "A", "red": "R", "green": "G", "blue": "B"}[mask.channel]
        try:
            with PILImage.open(mask.path) as im:
                im.load()
                if band == "A" and "A" not in im.getbands() and im.mode != "P":
                    self.fail(mask.node, "channel" if self.a.class_of(mask.node) == "LoadImageMask" else "image",
                              "the image has no alpha channel: its mask is empty (nothing to inpaint)")
                    return None
                as_is = im.mode == "L" and band != "A" and not lat.grow
                if as_is:
                    return mask.path
                channel = im.convert("RGBA").getchannel(band)
        except (OSError, ValueError) as e:
            self.fail(mask.node, "image", f"not a readable image: {e}")
            return None
        if band == "A":
            channel = channel.point(lambda v: 255 - v)
        if lat.grow:
            channel = channel.filter(ImageFilter.MaxFilter(lat.grow // 2 * 2 + 1))
        from extensions_built_in.inference_engine.compat.inputs import png_data_url
        return png_data_url(channel)

    def controls(self, s):
        pos = {c[0][0]: c for c in s.positive.controls}
        neg = {c[0][0]: c for c in s.negative.controls}
        controls = []
        for node in list(pos) + [n for n in neg if n not in pos]:
            if node not in pos or node not in neg:
                self.fail(node, "positive" if node not in pos else "negative",
                          "Apply ControlNet's positive and negative outputs must both reach the sampler (the engine "
                          "applies a control to both)")
                continue
            _side, net_node, path, src, image, strength, start, end = pos[node]
            load = image
            while isinstance(load, Image) and load.kind == "scale":
                load = load.source
            i = len(controls)
            controls.append({"model": path, "image": src, "scale": strength, "start": start, "end": end,
                             "resize_mode": "crop"})
            self.field(f"sample.controls[{i}]", node, "control_net")
            self.field(f"sample.controls[{i}].model", net_node, "control_net_name")
            self.field(f"sample.controls[{i}].image", load.node, "image")
            for key, input_name in (("scale", "strength"), ("start", "start_percent"), ("end", "end_percent")):
                self.field(f"sample.controls[{i}].{key}", node, input_name)
        if controls:
            self.sample["controls"] = controls

    # -- hires --------------------------------------------------------------------------------------
    def hires(self, first, last, second, spec):
        """The second sampler of a hires pair as `sample.hires`: its model, sampler and guidance are the first's;
        its steps and denoise ComfyUI's (the last `steps` of int(steps / denoise)); its seed is not used (the
        engine's second pass draws from the request's seed)."""
        if last.model != first.model:
            self.fail(last.node, "model", "the second pass runs the first pass's model (with its LoRAs)")
        if self.sampler_name(last, spec) != self.sample.get("sampler"):
            self.fail(last.node, "sampler_name", f"{last.sampler_name} / {last.scheduler}: the second pass samples "
                      f"with the first pass's sampler here ({first.sampler_name} / {first.scheduler})")
        guidance = (last.positive.guidance or (None, last.cfg))[1]
        first_guidance = (first.positive.guidance or (None, first.cfg))[1]
        if guidance != first_guidance or last.cfg != first.cfg:
            self.fail(last.node, "cfg", "the second pass runs with the first pass's guidance here")
        if last.positive.controls or last.negative.controls:
            self.fail(last.node, "positive", "a ControlNet on the second pass is not served")
        if "width" not in self.sample:
            return
        base = (self.sample["width"], self.sample["height"])
        hr = {}
        if second[0] == "latent":
            up = second[1]
            if up.method not in LATENT_UPSCALERS:
                self.fail(up.node, "upscale_method", f"{up.method} is not served (served: {', '.join(LATENT_UPSCALERS)})")
                return
            hr["upscaler"] = LATENT_UPSCALERS[up.method]
            self.field("sample.hires.upscaler", up.node, "upscale_method")
            scale = self.scale_of(up, base, spec)
        else:
            _kind, _enc, chain, _decode = second
            scale = self.pixel_hires(chain, base, spec, hr)
        if scale is None:
            return
        steps = self.steps(last)
        if steps is None:
            return
        hr.update(scale=scale, steps=steps[0], denoise=steps[1])
        self.field("sample.hires", last.node, "latent_image")
        self.field("sample.hires.steps", last.node, "steps")
        if last.cls == "KSampler":
            self.field("sample.hires.denoise", last.node, "denoise")
        else:
            self.field("sample.hires.denoise", last.node, "start_at_step")
        if last.positive.text != first.positive.text:
            hr["prompt"] = last.positive.text
            self.field("sample.hires.prompt", last.positive.node, "text")
        neg = last.negative.text if last.negative.node is not None and spec.uses_negative_prompt else ""
        if neg != self.sample.get("negative_prompt", ""):
            hr["negative_prompt"] = neg
            self.field("sample.hires.negative_prompt", last.negative.node or last.node, "text")
        self.sample["hires"] = hr

    def scale_of(self, node_value, base, spec) -> float | None:
        """The hires scale an upscale node asks for: its factor, or its size over the base size (the engine
        keeps the aspect: a size that is not the base times one factor is a node error)."""
        if node_value.by is not None:
            self.field("sample.hires.scale", node_value.node, "scale_by")
            return float(node_value.by)
        w, h = node_value.size
        bw, bh = base
        if not w and not h:
            self.fail(node_value.node, "width", "0 x 0: give the size to upscale to")
            return None
        scale = w / bw if w else h / bh
        want = hires_rules.hires_size(bw, bh, scale, spec.size_divisor)
        if (w and abs(w - want[0]) >= spec.size_divisor) or (h and abs(h - want[1]) >= spec.size_divisor):
            self.fail(node_value.node, "height" if w else "width", f"{w}x{h} is not {bw}x{bh} times one factor: the "
                      "engine's second pass keeps the aspect")
            return None
        self.field("sample.hires.scale", node_value.node, "width" if w else "height")
        return scale

    def pixel_hires(self, chain, base, spec, hr) -> float | None:
        """[Upscale Image (using Model)] then [Upscale Image (By)] between the two passes: the upscaler and the scale."""
        from extensions_built_in.inference_engine.compat.upscale import _scale_of
        models = [c for c in chain if c.kind == "model"]
        scales = [c for c in chain if c.kind == "scale"]
        if len(models) > 1 or len(scales) > 1 or (models and chain[0].kind != "model"):
            self.fail(chain[-1].node, "image", "between the passes: one Upscale Image (using Model), then at most one "
                      "Upscale Image (By)")
            return None
        if not chain:
            self.fail(self.outs[0][2].node, "samples", "decoded and encoded again unscaled: not served")
            return None
        if models:
            up = models[0]
            hr["upscaler"] = up.upscaler
            loader = self.a.values[up.node].get("upscale_model")
            self.field("sample.hires.upscaler", loader[0] if isinstance(loader, tuple) else up.node, "model_name")
            factor = _scale_of(os.path.splitext(os.path.basename(up.upscaler))[0])
        else:
            sc = scales[0]
            if sc.method not in PIXEL_UPSCALERS:
                self.fail(sc.node, "upscale_method", f"{sc.method} is not served (served: "
                          f"{', '.join(PIXEL_UPSCALERS)}, or an upscale model)")
                return None
            hr["upscaler"] = PIXEL_UPSCALERS[sc.method]
            self.field("sample.hires.upscaler", sc.node, "upscale_method")
            factor = 1.0
        if not scales:
            self.field("sample.hires.scale", models[0].node, "upscale_model")
            return factor
        sc = scales[0]
        if sc.by is not None:
            self.field("sample.hires.scale", sc.node, "scale_by")
            return factor * sc.by
        return self.scale_of(sc, base, spec)

    # -- outputs ------------------------------------------------------------------------------------
    def outputs(self, spec) -> list:
        out, exts, video = [], set(), spec.modality == "video"
        for node, cls, _images, fps in self.outs:
            ext = VIDEO_OUTPUTS.get(cls, "png")
            if video and cls not in VIDEO_OUTPUTS:
                self.fail(node, "images", f"{spec.name} makes a video: save it with SaveAnimatedWEBP, SaveWEBM or SaveVideo")
            elif not video and cls in VIDEO_OUTPUTS:
                self.fail(node, "images" if cls != "SaveVideo" else "video",
                          f"{spec.name} makes images: save them with SaveImage or PreviewImage")
            exts.add(ext)
            if len(exts) > 1 and video:
                self.fail(node, "filename_prefix", "one video format per sampler: the engine writes one file")
            if fps is not None:
                fps_node, value = fps
                if value < 1 or value != round(value):
                    self.fail(fps_node, "fps", f"{value:g}: the engine writes whole frames per second (1 or more)")
                else:
                    self.sample["fps"] = int(value)
                    self.field("sample.fps", fps_node, "fps")
            prefix = self.a.lit(node, "filename_prefix", DEFAULT_PREFIX) if cls != "PreviewImage" else DEFAULT_PREFIX
            out.append({"node": node, "class_type": cls, "type": OUTPUT_TYPES[cls], "filename_prefix": prefix})
        self.sample["output_ext"] = "png" if not video else sorted(exts)[0]
        return out
