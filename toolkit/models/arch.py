"""What an arch file declares: its registry row (`ArchSpec`) and the pieces the row is made of.

Plain data, importable without torch: the registry, config validation, profiles, inspection and
the HTTP layer read these rows without loading any library. Library classes are named by string
("AutoencoderKL", "transformers:CLIPTextModel", "module.path:Name") and imported on first use.
"""
import importlib
import re
from dataclasses import asdict, dataclass, field, replace

from toolkit.latent_formats import LatentFormat

# component kinds: which load policy applies (quantize/offload) and what a pool entry is
DENOISER, TEXT_ENCODER, TOKENIZER, VAE, SCHEDULER, AUDIO, PROCESSOR, IMAGE_ENCODER, SAFETY_CHECKER = (
    "denoiser", "text_encoder", "tokenizer", "vae", "scheduler", "audio", "processor", "image_encoder",
    "safety_checker")
# a diffusers guider (ClassifierFreeGuidance, ...): a config object, as a scheduler is, that a pipeline runs its
# guidance through instead of taking a guidance_scale argument
GUIDER = "guider"
CONFIG_KINDS = (SCHEDULER, GUIDER)      # weightless: one checkpoint's settings, never a shared file
MODALITIES = ("image", "video", "audio")
MAX_SIZE = 16384          # a request's width and height: past every arch's RoPE and VAE tiling


@dataclass(frozen=True)
class SampleDefaults:
    width: int = 1024
    height: int = 1024
    num_inference_steps: int = 28
    guidance_scale: float = 3.5
    num_frames: int = 1
    fps: int = 0
    duration: float = 0.0          # seconds, audio only
    output_ext: str = "png"


@dataclass(frozen=True)
class Extra:
    """A per-arch sample key: its type ("str" | "float" | "int" | "bool") and default (None = unset)."""
    type: str
    default: object = None


@dataclass(frozen=True)
class Variant:
    """A named flavour of an arch (krea2 turbo/raw, sd3 3.5-large/3.5-medium): sample defaults and
    extras that differ, and its own hub repo where it has one."""
    defaults: dict = field(default_factory=dict)      # SampleDefaults fields
    extras: dict = field(default_factory=dict)        # sample_extras defaults
    name_or_path: str | None = None
    # over the arch's scheduler_file (v-prediction, zero SNR); one naming another `_class_name` is the
    # variant's whole scheduler config (Playground's EDM solver)
    scheduler: dict = field(default_factory=dict)
    tasks: tuple = ()             # the arch's tasks it serves, its default first (() = all): a refiner only refines
    pipeline_kwargs: dict = field(default_factory=dict)   # init arguments its repo's model_index sets
    without: tuple = ()           # optional roles its repo ships none of (model_index names them null)
    max_side: int | None = None   # its denoiser's reach where it differs from the arch's (ArchSpec.max_side)


@dataclass(frozen=True)
class Reader:
    """Reads one component from a single file stored in a format the libraries do not read (e.g.
    ComfyUI scaled FP8): `func` is "module:function(path, component=, policy=) -> module"; `format`
    joins the component's pool identity."""
    func: str
    format: str

    @property
    def format_name(self) -> str:
        return self.format

    def __call__(self, path, *, component, policy):
        return load_object(self.func)(path, component=component, policy=policy)


DENOISER_PREFIXES = ("model.diffusion_model.", "diffusion_model.", "")


@dataclass(frozen=True)
class SingleFile:
    """How a component is found and read in the files people have: an all-in-one checkpoint
    (A1111/Forge, ComfyUI `checkpoints/`), or a file of its own (ComfyUI `diffusion_models/`,
    `text_encoders/`, `vae/`), in its original (ComfyUI/LDM/OpenCLIP) key layout.

    - `converter`: to library names, "module:function(state) -> state" (a function of
      diffusers.loaders.single_file_utils, or "module:function"; None = library names already). Keys
      are the file's with the prefix cut. A converter that needs the config takes `config=`.
    - `original`: "module:function(diffusers state dict) -> original state dict", its inverse, with
      which the tiny factory writes files in the layout users download.
    - `anchors`: keys (after the prefix) that all appear in such a file; `prefixes`: where its keys sit
      (in an all-in-one checkpoint, or "" alone), the first whose anchors all appear is the file's.
    - `config`: "module:function(view) -> FileConfig": the library config, derived from the tensor
      shapes and key counts (formats/component_file.View) and checked against the known real configs
      (what a shape cannot tell comes from those); torch-free, so the detector and /library can ask.
    - `kind`: the layout's name ("clip_l", "ldm_kl_vae"): a file of this kind fills this role of any
      arch whose row names the same kind; `label` says it to a person.
    - `matches`: "module:function(view) -> bool", telling this kind from another with the same
      anchors (CLIP-L from CLIP-G by width), when anchors alone do not.
    - `facts`: ((config key, value), ...) this arch sets on a shared kind's config, which the file
      cannot tell (a VAE's scaling_factor is the arch's: SD 1.x and SDXL VAEs have one layout).
    - `guess`: False where the arch's files have another arch's shapes and that arch is the better
      guess (SkyReels V2 and ChronoEdit are Wan 2.1 fine-tunes): the detector names it only when no
      arch that guesses takes the file as well, and lists it among those that fit (`model.arch` decides).
    """
    converter: str | None = None
    original: str = ""
    anchors: tuple = ()
    prefixes: tuple = DENOISER_PREFIXES
    config: str = ""
    kind: str = ""
    label: str = ""
    matches: str = ""
    facts: tuple = ()
    guess: bool = True

    def with_facts(self, **facts) -> "SingleFile":
        return replace(self, facts=tuple({**dict(self.facts), **facts}.items()))


@dataclass(frozen=True)
class Component:
    role: str                  # the pipeline's __init__ argument
    cls: str                   # library class (model_index.json may name a subclass of it)
    kind: str                  # DENOISER | TEXT_ENCODER | TOKENIZER | VAE | SCHEDULER | GUIDER | AUDIO | PROCESSOR
    #                            | IMAGE_ENCODER | SAFETY_CHECKER (a guardrail the pipeline runs on the prompt and output:
    #                            never quantized)
    subfolder: str | None = None
    optional: bool = False     # the pipeline takes None when the model has no such component
    reader: Reader | None = None
    with_denoiser: bool = False  # ships with the denoiser (ACE-Step's condition encoder): never shared by another
    single_file: "SingleFile | None" = None    # how it is found and read in the files people have
    vocab: str = ""              # a tokenizer: the vocabulary it is (toolkit/tokenizers.py finds one offline)
    # "module:function(tokenizer_folder, folder)": written from data over the arch's tokenizer where a
    # model's files carry none of it (Qwen-Image-Edit's processor: its image preprocessor config)
    built: str = ""
    # the hub repo (its root) this role is read from where the model's folder or repo ships none of it
    # (HiDream's Llama 3.1, which its repos leave to meta-llama's); a folder that has it, or
    # model.components, still decides
    repo: str = ""

    @property
    def folder(self) -> str:
        return self.subfolder or self.role

    @property
    def own(self) -> bool:
        """Belongs to one denoiser checkpoint: two models that differ in it differ here too."""
        return self.kind == DENOISER or self.with_denoiser

    def load_class(self) -> type:
        return load_class(self.cls)


@dataclass(frozen=True)
class Latents:
    """What `scheduler.step` returns and how a `latent` frame carries it.

    layout: BCHW | BCFHW (video) | BFCHW (video, frames first: CogVideoX) | packed (B, tokens, C*patch*patch)
            | patched (B, C*patch*patch, h, w: patches folded into channels, ERNIE-Image)
            | packed_last (B, tokens, patch*patch*C: a token's channels last, Ideogram 4's)
            | packed_layers (B, N*tokens, C*patch*patch: N images of one output stacked, Qwen-Image-Layered's
            composite and layers; a frame shows the first) | packed_video (B, F*H*W tokens, C) | BFHWC (video,
            channels last: Kandinsky 5) | B1HWC (an image as a one-frame video, channels last: Kandinsky 5 Image)
            | BC1HW (an image as a one-frame video: Cosmos Predict2 Text2Image) | BLC (audio, B, T, C) | BCT (audio,
            B, C, T). Frames are BCHW, BCFHW or BLC."""
    layout: str
    channels: int              # latent channels of the frame
    spatial: int = 8           # pixels per latent pixel
    temporal: int = 1          # video: frames per latent frame after the first
    patch: int = 1             # packed: a token is patch x patch latent pixels
    per_second: float = 0.0    # audio: latents per second (0: the model fixes the length)
    format: LatentFormat | None = None   # latent->RGB preview table
    # video: leading latent frames the pipeline holds fixed and steps none of (an image-to-video's encoded first
    # frame, Kandinsky 5): `scheduler.step` returns the others
    fixed_frames: int = 0

    @property
    def frame_layout(self) -> str:
        return {"BCHW": "BCHW", "packed": "BCHW", "patched": "BCHW", "packed_last": "BCHW", "packed_layers": "BCHW",
                "BCFHW": "BCFHW", "BFCHW": "BCFHW", "packed_video": "BCFHW", "BFHWC": "BCFHW", "B1HWC": "BCHW",
                "BC1HW": "BCHW", "BLC": "BLC", "BCT": "BLC"}[self.layout]

    def latent_frames(self, num_frames: int) -> int:
        return (num_frames - 1) // self.temporal + 1

    def stepped_frames(self, num_frames: int) -> int:
        """The latent frames `scheduler.step` returns (a `latent` frame shows)."""
        return self.latent_frames(num_frames) - self.fixed_frames

    def preview(self) -> dict:
        """The start frame's `preview` block: frame layout, the RGB table and the tiny autoencoder (when known)."""
        table = self.format.public() if self.format else {"rgb_factors": None, "rgb_bias": None, "tae": None}
        return {"family": self.format.comfy_class if self.format else None, "layout": self.frame_layout, **table}


@dataclass(frozen=True)
class Tiny:
    """A tiny random-weight instance of the arch (toolkit/models/tiny): `build(kit) -> components`
    builds every component with the kit's seeded helpers; `sample` is a request that runs it in
    about a second on a CPU; `pipeline_kwargs` are extra pipeline __init__ arguments to save; `finish` is
    "module:function(folder)", run on the saved folder, writing what the real repos ship and
    `save_pretrained` cannot (a config in another form, a model_index entry naming another class)."""
    build: object
    sample: dict
    pipeline_kwargs: dict = field(default_factory=dict)
    finish: str = ""


@dataclass(frozen=True)
class Gguf:
    """The arch's denoiser in GGUF files (city96's ComfyUI-GGUF, and those made with his tools), which
    keep the model's original checkpoint keys: the names its `single_file` row's `original` writes
    (toolkit/models/formats/gguf_layouts.py reads and writes them). The reader knows the denoiser's
    class, not the arch: rows whose denoiser is one class declare one row (testing/tests/test_gguf.py).

    - `architecture`: their `general.architecture`, ComfyUI-GGUF's name (Z-Image's files say lumina2).
    - `anchor`: a key its files always carry, where one `architecture` covers several models.
    - `to_diffusers`: "module:function(checkpoint, shapes, config) -> state dict", original -> diffusers
      keys on packed tensors, popping what it consumes from `checkpoint` ("" = diffusers' own
      from_single_file converter of the class).
    - `ignored`: keys its files carry that the model has no weight for (dropped, as diffusers drops them).
    - `hiprec`: keys ComfyUI-GGUF's convert.py keeps in F32 (its keys_hiprec).
    - `tiny`: the tiny denoiser's config changes that give inner widths of 256, which GGUF's row blocks
      need (toolkit/models/tiny/gguf.py).
    """
    architecture: str
    anchor: str = ""
    to_diffusers: str = ""
    ignored: tuple = ()
    hiprec: tuple = ()
    tiny: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FileLayouts:
    """Component files the arch's own readers take and no `single_file` row describes (Krea 2's
    ComfyUI files): how inspection (toolkit/file_report.py) tells them apart, from a header alone.

    - `detect`: "module:function(keys, shapes) -> {architecture, layout, prefix, ignore_prefixes} | None",
      the architecture one of `labels`' kinds (the kinds `checkpoint_formats` names).
    - `sizes`: "module:function(det, shape, count) -> dict": width and depth from the file's shapes
      (`shape(key)`: a shape or None; `count("blocks.{}.")`: how many), and `reference`: whether they are
      the real model's.
    - `labels`: kind -> what it says to a person.
    """
    detect: str
    sizes: str
    labels: dict = field(default_factory=dict)


# what a request asks of a model; the inputs each task needs and may take (sample keys: an asset id,
# a path under the engine's assets folder, or a data: URL), and the kind of file each input is
TASKS = ("txt2img", "img2img", "inpaint", "edit", "i2v", "v2v", "a2a", "audio_inpaint")
REFERENCES = ("ctrl_img", "ctrl_img_1", "ctrl_img_2", "ctrl_img_3")     # edit: reference images, in order
IMAGE_INPUTS = ("init_img", "mask_img") + REFERENCES
VIDEO_INPUTS = ("init_video", "mask_video")   # v2v: the source or control video, its mask (white = generate)
AUDIO_INPUTS = ("init_audio",)                # a2a, audio_inpaint: the audio to vary or fill in
INPUT_KINDS = {**dict.fromkeys(IMAGE_INPUTS, "image"), **dict.fromkeys(VIDEO_INPUTS, "video"),
               **dict.fromkeys(AUDIO_INPUTS, "audio")}
INPUTS = tuple(INPUT_KINDS)
TASK_NEEDS = {"txt2img": (), "img2img": ("init_img",), "inpaint": ("init_img", "mask_img"), "edit": ("ctrl_img",),
              "i2v": ("init_img",), "v2v": ("init_video",), "a2a": ("init_audio",),
              "audio_inpaint": ("init_audio",)}
# the tasks that re-noise their input by `strength` (a2a: Stable Audio 3's init_noise_level)
STRENGTH_TASKS = ("img2img", "inpaint", "a2a")


@dataclass(frozen=True)
class Task:
    """One task an arch serves: the diffusers pipeline class that runs it (built from the same
    resident components as the arch's other tasks), the inputs it needs (TASK_NEEDS by its name)
    and may also take (`takes`: an edit's further references), and, for img2img and inpaint, its
    default `strength`: the pipeline's own `__call__` default (the contract suite checks it).
    `image_arg`: the `__call__` argument the image inputs go to (OmniGen's `input_images`)."""
    name: str
    pipeline: str
    takes: tuple = ()
    strength: float | None = None
    image_arg: str = "image"

    def __post_init__(self):
        if self.name not in TASKS:
            raise ValueError(f"unknown task {self.name!r} (known: {', '.join(TASKS)})")
        if (self.strength is not None) != (self.name in STRENGTH_TASKS):
            raise ValueError(f"task {self.name}: a default strength is for {' and '.join(STRENGTH_TASKS)} only, "
                             "and they need one")
        if set(self.takes) - set(INPUTS) or set(self.takes) & set(self.needs):
            raise ValueError(f"task {self.name}: takes {self.takes} are not further inputs")

    @property
    def needs(self) -> tuple:
        return TASK_NEEDS[self.name]

    @property
    def inputs(self) -> tuple:
        """Every input the task accepts, needed ones first."""
        return self.needs + tuple(self.takes)

    def public(self) -> dict:
        return {"name": self.name, "needs": list(self.needs), "takes": list(self.takes), "strength": self.strength,
                "kinds": {name: INPUT_KINDS[name] for name in self.inputs}}


@dataclass(frozen=True)
class Control:
    """A control model class an arch takes (`sample.controls`, toolkit/models/controlnets.py): the class,
    the pipeline that runs it per task over the arch's resident components, and how its files are told.

    - `cls`: the library class ("ControlNetModel"); `pipelines`: task -> (pipeline class, the `__call__`
      argument the control image goes to); a task missing here takes no control on this arch.
    - `fits`: "module:function(config: dict) -> bool": a control's config (its config.json, or what its
      single file's shapes give) is one this arch's denoiser takes; torch-free, so a request is refused
      from the file's header before it is queued.
    - `files`: SingleFile rows of the files people download (A1111 `models/ControlNet`, ComfyUI
      `models/controlnet`), in their key layouts; their `config` derives the class's config from the shapes.
    - `modes`: a union model's control types, by index (`sample.controls[i].mode`), and `mode_arg` the
      `__call__` argument they go to; `lists`: the pipeline takes the images and modes as lists even for one
      model (SDXL Union's); `ranges`: the pipeline takes control_guidance_start/end (Z-Image's does not);
      `global_rng`: the pipeline draws from torch's global RNG (SD3's VAE-samples the control image with no
      generator): the holder seeds it with the request's seed, as ArchSpec.global_rng; `several`: the pipeline
      runs more than one at once (Z-Image's takes one). Several controls of one row run at once as lists (the pipelines wrap the models
      in their Multi* class).
    - `inputs`: task -> {the task's own argument: the control pipeline's name for it, or None where it takes
      none}, for a control pipeline that takes the task's inputs otherwise (Qwen-Image's inpainting ControlNet
      repaints its control image under `control_mask`: no `image`, no `strength`).
    """
    cls: str
    pipelines: dict
    fits: str
    files: tuple = ()
    modes: tuple = ()
    mode_arg: str = ""
    lists: bool = False
    ranges: bool = True
    global_rng: bool = False
    several: bool = True
    label: str = ""
    inputs: dict = field(default_factory=dict)

    def pipeline_for(self, task: str):
        return self.pipelines.get(task)


LORA_FORMATS = ("peft", "kohya", "comfyui")


@dataclass(frozen=True)
class IPAdapter:
    """The IP-Adapter files an arch takes, applied per request through its pipeline's own loader
    (diffusers' IPAdapterMixin / FluxIPAdapterMixin: toolkit/models/ip_adapters.py). `layout`: the file's
    key layout (toolkit/ip_adapter_files.LAYOUTS: "h94": `image_proj.*` + `ip_adapter.N.to_k_ip`, as
    h94/IP-Adapter ships them; "xlabs": `ip_adapter_proj_model.*` + `double_blocks.N.processor.*`).
    `context_dims`: the widths of the text context its denoiser's attention reads (an adapter's key
    projection input), one per known denoiser config: a file of another width is an adapter for another
    model, refused from its header. `encoder`: the transformers image encoder class it conditions through.
    `blocks`: the denoiser's double-block counts (XLabs' files hold one k/v pair per double block: diffusers
    loads the first N of a longer file without a word, so a file of another count is refused); () any."""
    layout: str = "h94"
    context_dims: tuple = ()
    blocks: tuple = ()
    encoder: str = "CLIPVisionModelWithProjection"
    file: str = ""          # where its publisher's repo keeps the file (the tiny factory writes one there)


@dataclass(frozen=True)
class Lora:
    """The LoRA files an arch takes (toolkit/lora_headers.py lists them, toolkit/models/tiny/loras.py writes
    tiny ones). `formats`: the file layouts diffusers' loader for the arch's pipeline converts (peft:
    diffusers/PEFT keys; kohya: `lora_unet_…` with `.alpha` and `ss_*` metadata; comfyui:
    `diffusion_model.` + original-checkpoint keys); a file in another layout is refused. `modules` is
    "module:function(fmt, linears) -> [(name, in, out)]": given the denoiser's Linear layers ({diffusers
    name: (in, out)}), the layers a tiny LoRA trains, named as `fmt` names them (dotted; kohya's
    underscores are the writer's). `comfy_keys`: the down/up names its ComfyUI files use; `alpha`: the
    formats whose files may carry `.alpha` scalars; `text_encoders`: kohya prefix -> text encoder role.
    `markers`: regexes over a file's keys that point at this arch (toolkit/lora_headers.guess_arch)."""
    formats: tuple = ("peft",)
    modules: str = ""
    comfy_keys: tuple = ("lora_A", "lora_B")
    alpha: tuple = ("kohya", "comfyui")
    text_encoders: dict = field(default_factory=dict)
    markers: tuple = ()

    def __post_init__(self):
        if set(self.formats) - set(LORA_FORMATS):
            raise ValueError(f"unknown LoRA formats {self.formats} (known: {', '.join(LORA_FORMATS)})")

    def module_names(self, fmt: str, linears: dict) -> list:
        return load_object(self.modules)(fmt, linears)


def pick_linears(linears: dict, *patterns: str, rename=None) -> list:
    """[(name, in, out)] for the Linear layers ({diffusers name: (in, out)}) whose name matches one of
    `patterns` (re.search), in file order; `rename(name)` gives the name a file format uses."""
    return [((rename or str)(n), *shape) for n, shape in linears.items() if any(re.search(p, n) for p in patterns)]


@dataclass(frozen=True)
class ArchSpec:
    name: str
    modality: str                  # image | video | audio
    default_name_or_path: str      # the real hub repo ("" when there is none: local files only)
    pipeline: str                  # the diffusers pipeline class
    components: tuple              # Component rows, in load order
    defaults: SampleDefaults
    latents: Latents
    holder: type = None            # a BaseModel subclass when the pipeline call differs from the common one
    pipeline_init_kwargs: dict = field(default_factory=dict)
    output_type: str = "pil"       # what the pipeline returns: pil images, np frames, pt audio
    size_divisor: int = 16         # width/height (image/video) must be multiples of this
    round_size: bool = False       # round width/height up to size_divisor (with a warning) instead of refusing
    # the tasks it serves, the default (which `pipeline` runs) first; () means txt2img alone (`pipeline`)
    tasks: tuple = ()
    uses_negative_prompt: bool = True
    # what an unset negative prompt becomes where the arch departs from its pipeline's own default
    # (None: the pipeline's, e.g. SDXL's zeroed embedding; Qwen-Image: " ", as its model card runs CFG)
    negative_prompt_default: str | None = None
    # the largest width/height (pixels) the real denoiser's position table reaches (RoPE axes_lens, a
    # learned pos_embed's size): past it the transformer indexes out of its table. None: no such bound
    max_side: int | None = None
    sample_extras: dict = field(default_factory=dict)   # name -> Extra: per-arch sample keys
    # "module:function(values, extras, where)": a rule across the request's keys only this arch has (a
    # ConfigError naming the field), run while the request is validated, before it is queued
    check: str = ""
    variants: dict = field(default_factory=dict)        # name -> Variant; the first is the default
    checkpoint_formats: dict = field(default_factory=dict)  # profile key -> detected formats it accepts (inspect)
    file_layouts: FileLayouts | None = None    # its own readers' files, as inspection tells them apart
    aliases: tuple = ()             # other names a profile's `architecture` may give it (toolkit/profiles.py)
    gguf: Gguf | None = None        # its denoiser's GGUF files (None: not read)
    tiny: Tiny | None = None
    description: str = ""
    # samplers (toolkit/samplers.py): the keys of the scheduler config the arch's repos ship that decide
    # its family (`_class_name`, `prediction_type`, `use_flow_sigmas`); the worker checks the loaded one
    scheduler_config: dict = field(default_factory=dict)
    # the whole scheduler config its repo ships (scheduler/scheduler_config.json): what a model read from
    # single files (which carry none) samples with; a variant's `scheduler` entries go on top
    scheduler_file: dict = field(default_factory=dict)
    # role -> the config each GUIDER its repo ships (guider/guider_config.json, with `_class_name`): what a model
    # read from single files guides with (a variant whose repo has none says so in `without`)
    guider_files: dict = field(default_factory=dict)
    samplers_excluded: tuple = ()   # samplers of its family its pipeline cannot run, and schedules ("karras",
                                    # "exponential", "beta") it cannot respace (the contract tests each)
    batch_arg: str | None = "num_images_per_prompt"   # the pipeline's images-per-prompt argument (None: one per pass)
    # the sample extra that says how many images one output is (Qwen-Image-Layered's `layers`): each is
    # written as a file of its own, the output's seed on each, as a batch's are; "" = one image an output
    output_images: str = ""
    lora: Lora | None = None        # the LoRA files it takes (None: no LoRA support declared)
    ip_adapter: "IPAdapter | None" = None   # the IP-Adapter files it takes (None: `sample.ip_adapter` refused)
    # the control model classes it takes (sample.controls), each with its pipelines per task; () = none
    controls: tuple = ()
    # step caches it takes (`sample.cache.type`, toolkit/models/step_cache.py) -> the fixed parameters that
    # type needs on this denoiser (module patterns, magnitude ratios); each is checked to skip work
    step_caches: dict = field(default_factory=dict)
    # why the worker's conditioning cache (toolkit/models/v2/cond_cache.py) cannot serve its default
    # task's prompt encoding; "" = a repeated prompt skips the text encoder (test_cond_cache checks each row)
    uncached_conditioning: str = ""
    # its pipeline also draws from torch's global RNG, past the generator (OmniGen VAE-samples its input
    # images with none): the holder seeds it with the request's seed for the call and restores it after
    # (base_model.global_rng_seeded), so a seed reproduces the output
    global_rng: bool = False
    # the VAE decoder's features per output pixel at its last stage: the decode term of the memory floor
    # (toolkit/models/base_model.py, estimate_activation_bytes)
    decode_features: int = 128
    # latent pixels per side of one denoiser token where the floor would otherwise count every one as a
    # position: a pixel-space DiT (PRX Pixel's 16x16-pixel patches) holds activations per token
    denoiser_patch: int = 1
    # its denoisers' attention runs through diffusers' dispatcher, so `model.attention` picks the kernel
    # (toolkit/attention.py); False: their processors call PyTorch's scaled_dot_product_attention themselves
    # (SD's UNet, SD3's, PixArt's): auto or native only (test_attention checks each row against its denoiser)
    attention_backends: bool = True

    def __post_init__(self):
        tasks = self.tasks or (Task("txt2img", self.pipeline),)
        object.__setattr__(self, "tasks", tuple(tasks))
        names = [t.name for t in tasks]
        if len(set(names)) != len(names):
            raise ValueError(f"arch {self.name}: a task is declared twice ({names})")
        if tasks[0].pipeline != self.pipeline:
            raise ValueError(f"arch {self.name}: the first task ({tasks[0].name}) must run `pipeline` "
                             f"({self.pipeline})")
        for vname, v in self.variants.items():
            if set(v.tasks) - set(names):
                raise ValueError(f"arch {self.name} variant {vname}: serves tasks the arch has not ({v.tasks})")
            if set(v.without) - {c.role for c in self.components if c.optional}:
                raise ValueError(f"arch {self.name} variant {vname}: only optional roles may be absent ({v.without})")

    def task(self, name: str) -> Task | None:
        return next((t for t in self.tasks if t.name == name), None)

    @property
    def task_names(self) -> tuple:
        return tuple(t.name for t in self.tasks)

    @property
    def needs_ctrl_img(self) -> bool:
        """Every task needs a reference image (an edit-only arch): a request without one is refused."""
        return all("ctrl_img" in t.needs for t in self.tasks)

    @property
    def needed_inputs(self) -> tuple:
        """The inputs every request needs, where no task runs without one: its default task's (an
        edit-only arch's reference, an image-to-video-only arch's first frame); () otherwise."""
        return self.tasks[0].needs if all(t.needs for t in self.tasks) else ()

    @property
    def default_variant(self) -> str | None:
        return next(iter(self.variants), None)

    def component(self, role: str) -> Component:
        return next(c for c in self.components if c.role == role)

    @property
    def denoiser_roles(self) -> tuple:
        return tuple(c.role for c in self.components if c.kind == DENOISER)

    def default_source(self, variant: str | None = None) -> str:
        v = self.variants.get(variant or self.default_variant) if self.variants else None
        return (v.name_or_path if v is not None and v.name_or_path else None) or self.default_name_or_path

    def variant_row(self, variant: str | None = None) -> Variant | None:
        return self.variants.get(variant or self.default_variant) if self.variants else None

    def scheduler_for_files(self, variant: str | None = None) -> dict:
        """The scheduler config a model read from single files samples with: the repo's, the
        variant's entries on top, or the variant's own when it names another class ({} when the row
        has none: a config folder is needed)."""
        v = self.variant_row(variant)
        over = v.scheduler if v is not None else {}
        if over.get("_class_name") and over["_class_name"] != self.scheduler_file.get("_class_name"):
            return dict(over)
        return {**self.scheduler_file, **over} if self.scheduler_file else {}

    def max_side_for(self, variant: str | None = None) -> int | None:
        v = self.variant_row(variant)
        return v.max_side if v is not None and v.max_side else self.max_side

    def tasks_for(self, variant: str | None = None) -> tuple:
        """The Task rows a variant serves, its default first (the arch's, unless the variant says)."""
        v = self.variant_row(variant)
        if v is None or not v.tasks:
            return self.tasks
        return tuple(self.task(name) for name in v.tasks)

    def init_kwargs(self, variant: str | None = None) -> dict:
        """The pipeline's fixed init arguments, the variant's on top (the refiner's aesthetic score)."""
        v = self.variant_row(variant)
        return {**self.pipeline_init_kwargs, **(v.pipeline_kwargs if v is not None else {})}

    def absent(self, variant: str | None = None) -> tuple:
        """Optional roles the variant's model has none of."""
        v = self.variant_row(variant)
        return tuple(v.without) if v is not None else ()

    def sample_defaults(self, variant: str | None = None) -> dict:
        """SampleDefaults fields and extras' defaults, with the variant's on top."""
        d = asdict(self.defaults)
        d.update({k: e.default for k, e in self.sample_extras.items()})
        v = self.variants.get(variant or self.default_variant) if self.variants else None
        if v is not None:
            d.update(v.defaults)
            d.update(v.extras)
        return d

    def samplers(self) -> tuple:
        """The samplers a request for this arch may name (`sample.sampler`), from its family's table."""
        from toolkit import samplers
        return samplers.samplers_for(self.scheduler_config, self.samplers_excluded)

    def public(self) -> dict:
        """The row as served to clients: no classes, paths or import strings."""
        return {"name": self.name, "modality": self.modality, "default_name_or_path": self.default_name_or_path,
                "description": self.description, "defaults": asdict(self.defaults),
                "size_divisor": self.size_divisor, "round_size": self.round_size,
                "needs_ctrl_img": self.needs_ctrl_img, "tasks": [t.public() for t in self.tasks],
                "uses_negative_prompt": self.uses_negative_prompt,
                "negative_prompt_default": self.negative_prompt_default, "max_side": self.max_side,
                "sample_extras": {k: e.default for k, e in self.sample_extras.items()},
                "sample_extra_types": {k: e.type for k, e in self.sample_extras.items()},
                "variants": {name: self.sample_defaults(name) for name in self.variants},
                "variant_tasks": {name: [t.name for t in self.tasks_for(name)] for name in self.variants},
                "variant_sources": {name: self.default_source(name) for name in self.variants},
                "default_variant": self.default_variant,
                "components": [c.role for c in self.components],
                "attention_backends": self.attention_backends,
                "preview": self.latents.preview(),
                "samplers": [s.public() for s in self.samplers()], "batch": self.batch_arg is not None,
                "lora_formats": list(self.lora.formats) if self.lora else [],
                "controls": [{"class": c.cls, "label": c.label, "tasks": list(c.pipelines), "modes": list(c.modes)}
                             for c in self.controls],
                "step_caches": list(self.step_caches)}


def load_object(path: str):
    """"module:Name" -> the object; a bare "Name" is looked up in diffusers, then transformers."""
    module, sep, name = path.rpartition(":")
    if sep:
        return getattr(importlib.import_module(module), name)
    for library in ("diffusers", "transformers"):
        obj = getattr(importlib.import_module(library), path, None)
        if obj is not None:
            return obj
    raise ImportError(f"{path} is neither in diffusers nor in transformers")


_CLASSES: dict = {}


def load_class(path: str) -> type:
    cls = _CLASSES.get(path)
    if cls is None:
        cls = _CLASSES[path] = load_object(path)
    return cls
