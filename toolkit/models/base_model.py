"""BaseModel: the holder of one arch's model. It loads every component the arch's row lists
through the v2 funnel, assembles the diffusers pipeline, samples, and writes the files.

Most archs need nothing more than their row (toolkit/models/archs/<arch>.py). An arch whose
pipeline call differs from the common one subclasses this in its own file and overrides
`pipeline_kwargs`, `extract_output`, `media_kwargs` or `call_patches`. Libraries (torch, diffusers)
are imported in the methods that use them, so arch files that subclass this stay importable without
torch.
"""
import contextlib
import functools
import math
import os
import time
from dataclasses import replace

from toolkit import attention
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError
from toolkit.models import step_cache
from toolkit.models.arch import (AUDIO, DENOISER, IMAGE_ENCODER, PROCESSOR, SAFETY_CHECKER, TEXT_ENCODER, TOKENIZER,
                                 VAE, Component, load_class)
from toolkit.models.patches import patched
from toolkit.models.registry import get_arch
from toolkit.models.component_sources import ComponentSource, component_sources, source_for  # noqa: F401
from toolkit.models.step_hook import wrap_scheduler_step


class BaseModel:
    def __init__(self, model_config, device: str = "cpu", status_hook=None, plan=None, memory=None):
        """`plan`: the toolkit.placement.Plan to load with (the worker plans per request; None: planned
        at load_model from the device's free memory, or on a CPU the request's placements, the rest
        resident). `memory`: a simulated device (v2/residency.SimulatedDevice) the stage switch counts on."""
        from toolkit.models.tiny import is_tiny, resolve_tiny
        from toolkit.models.v2.policy import resolve_dtype

        self.model_config = ModelConfig.from_dict(model_config) if isinstance(model_config, dict) else model_config
        self.requested_config = self.model_config   # as asked (`tiny:<arch>` unresolved): what files name
        if is_tiny(self.model_config.name_or_path):
            self.model_config = replace(self.model_config, name_or_path=resolve_tiny(
                self.model_config.name_or_path, self.model_config.arch))
        self.spec = get_arch(self.model_config.arch)
        self.arch = self.spec.name
        self.components: tuple[Component, ...] = self.spec.components
        self.pipeline_class = load_class(self.spec.pipeline)
        self.output_type = self.spec.output_type
        self.device = str(device)
        self.dtype = resolve_dtype(self.model_config.dtype, self.device)
        self.status_hook = status_hook          # (message, stage) -> None, while loading
        self.pipeline = None
        self.loaded: dict = {}
        self._task_pipelines: dict = {}         # task -> (component identities, pipeline): see pipeline_for
        self._controls = None                   # (paths, Control row, modules): the request's ControlNets
        self.annotator_loader = None            # key -> (model, processor) of a control map's preprocessor (the worker's pool)
        self.cond_cache = None                  # the worker's ConditioningCache (toolkit/models/v2/cond_cache.py)
        self.library_folders = ()               # engine.model_folders: where a file's companions are found
        self.library_roots = None               # engine.model_roots (None: anywhere): the file's own tree only inside
        self.preview_decoder = None             # (tae, AutoencoderTiny): the worker's, for preview images
        self.plan = plan                        # toolkit.placement.Plan: where each component lives
        self.memory = memory
        self.residency = None                   # v2/residency.Residency: the stage switch, once loaded

    # -- status -------------------------------------------------------------------------------
    def print_and_status_update(self, message: str, stage: str = "status"):
        if self.status_hook is not None:
            self.status_hook(message, stage)

    # -- loading ------------------------------------------------------------------------------
    def policy_for(self, spec: Component):
        from toolkit.models.v2 import LoadPolicy

        mc = self.model_config
        plan = self.placement_plan()
        where = plan.placements.get(spec.role, "resident")
        group = plan.groups.get(spec.role, 1)
        if spec.kind == DENOISER:
            return LoadPolicy(self.dtype, self.device, mc.qtype if mc.quantize else None, where, group)
        if spec.kind == TEXT_ENCODER:
            return LoadPolicy(self.dtype, self.device, mc.qtype_te if mc.quantize_te else None, where)
        if spec.kind in (VAE, AUDIO, IMAGE_ENCODER, SAFETY_CHECKER):   # an image encoder (CLIP vision) is small:
            return LoadPolicy(self.dtype, self.device, None, where)      # never quantized
        return LoadPolicy(self.dtype, self.device)

    def placement_plan(self):
        """The plan this holder loads with (toolkit/placement.py): given by the worker, else made now
        (v2/planning.plan_for: on CUDA from the free memory and the arch's default request)."""
        if self.plan is None:
            from toolkit.models.v2.planning import plan_for
            self.plan = plan_for(self.model_config, estimate=type(self).estimate_stage_bytes, device=self.device,
                                 folders=self.library_folders, roots=self.library_roots, memory=self.memory)
        return self.plan

    def source_for(self, spec: Component) -> tuple[str, str]:
        """(source, config_source) for a component. A single-file name_or_path holds the denoiser;
        everything else (and its config) comes from extras_name_or_path, else the arch's default repo."""
        return source_for(self.model_config, self.spec, spec)

    def component_loads(self):
        """(role, funnel class, source, load kwargs) of every component load_model reads, in order; an
        optional component the model lacks is (role, None, None, None). A prefetch reads the same list."""
        from toolkit.models.v2 import aitk

        for spec, where in component_sources(self.model_config, self.spec, self.library_folders, self.library_roots):
            if where is None:
                yield spec.role, None, None, None
                continue
            kwargs = dict(role=spec.role, subfolder=where.subfolder, policy=self.policy_for(spec),
                          config_source=where.config_source, reader=spec.reader,
                          allow_hub=not self.model_config.local_only,
                          converter=spec.single_file.converter if spec.single_file else None,
                          field=self.field_for(spec, where.source))
            if where.part is not None:
                kwargs.update(part=where.part, single_file=spec.single_file, reader=None)
            yield spec.role, aitk(spec.load_class()), where.source, kwargs

    def field_for(self, spec: Component, source) -> str:
        """The request key that chose `source` for this component (a malformed file's error names it)."""
        mc = self.model_config
        if spec.role in mc.components:
            return f"model.components.{spec.role}"
        return "model.name_or_path" if source == mc.name_or_path else "model.extras_name_or_path"

    def load_model(self):
        """Load every component through the funnel, then build the pipeline."""
        t0 = time.perf_counter()
        self.print_and_status_update(f"loading {self.arch}", "loading")
        for role, cls, source, kwargs in self.component_loads():
            self.loaded[role] = None if cls is None else cls.load(source, status=self.print_and_status_update, **kwargs)
        self.pipeline = self.build_pipeline(dict(self.loaded))
        if self.model_config.loras:        # a holder used on its own; the worker applies them per request
            self.apply_loras(self.model_config)
        self.residency = self.build_residency()
        self.load_seconds = time.perf_counter() - t0
        self.print_and_status_update(f"loaded {self.arch} in {self.load_seconds:.1f}s", "loaded")
        return self

    # -- compile: the resident denoiser compiled in place (toolkit/models/compiled.py) -------------------------
    compile_mode = "off"            # engine.compile (the worker's); a holder used alone compiles when its model says so
    compile_lora_rank = 64          # engine.compile_lora_rank: LoRAs up to it are hotswapped (lora_slots.py)

    def compile_plan(self):
        """({role: denoiser} this model runs compiled, why not when it was asked for): model.compile, else
        engine.compile; a denoiser a listed rule excludes (compiled.excluded) makes the model run eager."""
        from toolkit.models import compiled

        denoisers = {c.role: self.loaded[c.role] for c in self.components
                     if c.kind == DENOISER and self.loaded.get(c.role) is not None}
        first = next(iter(denoisers.values()), None)
        if not compiled.wanted(self.model_config.compile, self.compile_mode, self.device, first):
            return {}, None
        placements = self.placement_plan().placements
        for role, module in denoisers.items():
            why = compiled.excluded(module, placements.get(role, "resident"))
            if why is not None:
                return {}, f"the {role} is not compiled: {why}"
        return denoisers, None

    def compiled_call(self, gen: GenerateImageConfig, on_status=None):
        """A context for one pipeline call: the compiled denoiser(s) counted (the first call after a compile
        says `compiling`), or, when this call may not run them (a rule, a step cache, a LoRA past the slots),
        their compiled code set aside for it, said in a status frame."""
        from toolkit.models import compiled

        targets, why = self.compile_plan()
        if targets:
            why = self._lora_eager or (f"a step cache ({gen.cache['type']}) hooks the {', '.join(targets)}"
                                       if gen.cache else None)
        if targets and why is None:
            states = [compiled.ensure(module) for module in targets.values()]
            if on_status is not None and not all(state.warm for state in states):
                on_status(f"compiling the {', '.join(targets)} (once per model; a new size may recompile)",
                          "compiling")
            return compiled.running(states)
        if why is not None and on_status is not None:
            on_status(f"running eager: {why}", "status")
        if any(compiled.is_compiled(m) for m in self.loaded.values() if m is not None):
            return compiled.eager()
        return contextlib.nullcontext()

    _lora_eager = None              # why the current LoRAs run eager on a compiled denoiser (lora_slots.check)

    # -- LoRA: adapters switched on the resident modules (toolkit/models/lora_adapters.py) ---------------------
    def apply_loras(self, model_config, pool=None, status=None):
        """Set the LoRA state `model_config` asks for (its loras, lora_fuse; the rest must be this
        holder's but `attention`, which generate_single applies per call). `pool` keeps the adapter books
        and the warm ones; without one, inactive adapters are deleted. Afterwards the holder's configs
        (what files record) carry these LoRAs and this attention backend. On a compiled denoiser the LoRAs
        go into its hotswapped slots (toolkit/models/lora_slots.py) where they can."""
        from toolkit.models import lora_adapters

        self._lora_eager = None
        self.model_config = replace(self.model_config, compile=model_config.compile)     # what compile_plan reads
        if self.compile_plan()[0] and not model_config.lora_fuse and self._slotted_loras(model_config, pool, status):
            return
        streamed = {role: m for role, m in self.loaded.items() if getattr(m, "_aitk_group_offload", False)}
        before = {role: _param_count(m) for role, m in streamed.items()}
        lora_adapters.apply(self.pipeline, model_config.loras, fuse=model_config.lora_fuse, pool=pool, dtype=self.dtype,
                   status=status or self.print_and_status_update,
                   fields=[model_config.lora_key(i) for i in range(len(model_config.loras))])
        for role, module in streamed.items():    # adapters added or removed: the streamed groups are made again
            if _param_count(module) != before[role]:
                from diffusers.hooks.group_offloading import _maybe_remove_and_reapply_group_offloading
                _maybe_remove_and_reapply_group_offloading(module)
        self._lora_fields(model_config)

    def _slotted_loras(self, model_config, pool, status) -> bool:
        """`model_config`'s LoRAs in the compiled denoiser's slots (the ordinary adapters switched off): True;
        False when they cannot be (then `_lora_eager` says why, and the ordinary path runs them eager)."""
        from toolkit.models import lora_adapters, lora_slots

        targets = self.compile_plan()[0]
        loras = model_config.loras
        fields = [model_config.lora_key(i) for i in range(len(loras))]
        if loras and len(targets) > 1:
            self._lora_eager = f"LoRAs on a model of {len(targets)} denoisers are not hotswapped"
        elif loras:
            self._lora_eager = lora_slots.check(self.pipeline, next(iter(targets)), loras, fields,
                                                self.compile_lora_rank)
        if self._lora_eager is not None:
            return False
        lora_adapters.apply(self.pipeline, (), pool=pool, dtype=self.dtype)
        for role in targets:
            lora_slots.apply(self.pipeline, role, loras if role == next(iter(targets)) else (),
                             self.compile_lora_rank, status or self.print_and_status_update)
        self._lora_fields(model_config)
        return True

    def _lora_fields(self, model_config):
        fields = dict(loras=model_config.loras, lora_path=model_config.lora_path, lora_scale=model_config.lora_scale,
                      lora_fuse=model_config.lora_fuse, attention=model_config.attention, compile=model_config.compile)
        self.model_config = replace(self.model_config, **fields)
        self.requested_config = replace(self.requested_config, **fields)

    # -- IP-Adapter: for one call, on the resident denoiser (toolkit/models/ip_adapters.py) -----------------
    def ip_encoder(self, gen: GenerateImageConfig):
        """The image encoder `gen`'s IP-Adapters need (resolve_request found it), through the funnel: the
        worker's pool answers when it holds it (shared by every model), and the holder keeps it for its calls."""
        if not gen.ip_adapter:
            return None
        from toolkit.models import ip_adapters

        source = gen.ip_adapter[0].image_encoder
        held = getattr(self, "_ip_encoder", None)
        if held is None or held[0] != source:
            module = ip_adapters.load_encoder(source, self.dtype, self.device, field="sample.ip_adapter[0].image_encoder")
            self._ip_encoder = held = (source, module)
        return held[1]

    def ip_adapters(self, gen: GenerateImageConfig, pipe):
        """A context: while active, `pipe` runs `gen.ip_adapter`; yields the call's extra arguments."""
        from toolkit.images import load_image
        from toolkit.models import ip_adapters

        return ip_adapters.applied(pipe, gen.ip_adapter, self.ip_encoder(gen), load_image)

    def build_pipeline(self, components: dict):
        pipe = self.pipeline_class(**components, **self.pipeline_config())
        pipe.set_progress_bar_config(disable=True)
        return pipe

    def pipeline_config(self) -> dict:
        """The pipeline's own settings that the model's model_index.json records (Wan 2.2's
        boundary_ratio and expand_timesteps, Flux.2 Klein's is_distilled), under the arch's fixed ones."""
        import inspect

        from toolkit.models.v2.sources import read_model_index

        mc = self.model_config
        main = mc.name_or_path if not os.path.isfile(os.path.expanduser(mc.name_or_path or "")) else None
        index = read_model_index(main or mc.extras_name_or_path or self.spec.default_source(mc.variant),
                                 allow_hub=not mc.local_only)
        params = inspect.signature(self.pipeline_class.__init__).parameters
        roles = {c.role for c in self.components}
        config = {k: v for k, v in index.items() if k in params and k not in roles and not k.startswith("_")
                  and not (isinstance(v, list) and len(v) == 2)}
        config.update({k: v for k, v in self.spec.init_kwargs(mc.variant).items()
                       if k in params or k in self.spec.pipeline_init_kwargs})
        return config

    def build_residency(self):
        """The stage switch over the loaded components (v2/residency.Residency), hooked on the pipeline's
        modules when any of them is not resident."""
        from toolkit.models.v2.residency import Residency
        plan = self.placement_plan()
        residency = Residency(self.device, plan.placements, plan.costs, self.memory)
        residency.attach({role: module for role, module in self.loaded.items() if role in plan.placements})
        return residency

    def unload(self):
        if self.residency is not None:
            self.residency.detach()
            self.residency = None
        self.pipeline = None
        self._task_pipelines.clear()
        self._controls = None
        self.loaded.clear()
        self._ip_encoder = None

    # -- tasks: one set of components, a pipeline per task -----------------------------------------
    def task_of(self, gen: GenerateImageConfig):
        """The arch's Task row `gen` asks for (validation fixed gen.task; unset: the arch's first)."""
        return self.spec.task(gen.task) if gen.task else self.spec.tasks[0]

    # -- ControlNets: pool components beside the resident model (toolkit/models/controlnets.py) -------------
    def ensure_controls(self, gen: GenerateImageConfig, status=None):
        """The controls `gen` names, loaded through the funnel (under the worker's pool: a resident one is a
        hit, a new one the only load); those of an earlier request are let go by the holder, not reloaded."""
        from toolkit.models import controlnets
        from toolkit.models.v2 import LoadPolicy

        paths = tuple(c.model for c in gen.controls)
        if not paths:
            self._controls = None
            return None
        if self._controls is None or self._controls[0] != paths:
            row, modules = controlnets.load(gen.controls, self.arch, LoadPolicy(self.dtype, self.device),
                                            status or self.print_and_status_update)
            self._controls = (paths, row, modules)
        return self._controls

    def control_pipeline(self, gen: GenerateImageConfig):
        """The task's control pipeline over the resident components plus the request's controlnet(s): a
        list for several (the pipelines wrap it in their Multi* class). Built per call: no copy, no load."""
        _paths, row, modules = self.ensure_controls(gen)
        cls = load_class(row.pipeline_for(self.task_of(gen).name)[0])
        return self.build_task_pipeline(cls, {**self.pipeline.components,
                                              "controlnet": modules[0] if len(modules) == 1 else list(modules)})

    def control_kwargs(self, gen: GenerateImageConfig, kwargs: dict) -> dict:
        """`kwargs` with the control images (each through its preprocessor, at the request's size by its
        resize_mode) and the scales, ranges and modes, as the control pipeline takes them; the task's own
        inputs under the names it gives them (Control.inputs)."""
        from toolkit.control_refs import control_map
        from toolkit.models import controlnets

        _paths, row, _modules = self.ensure_controls(gen)
        load = self.annotator_loader or self.own_annotator
        images = [control_map(c, gen.width, gen.height, load) for c in gen.controls]
        task = self.task_of(gen).name
        kwargs = dict(kwargs)
        for arg, renamed in row.inputs.get(task, {}).items():
            value = kwargs.pop(arg, None)
            if renamed is not None and value is not None:
                kwargs[renamed] = value
        return {**kwargs, **controlnets.arguments(row, gen.controls, images, task)}

    def own_annotator(self, key):
        """A preprocessor's (model, processor) for a holder used alone (no worker pool): from the model folders."""
        from toolkit import annotators
        return annotators.load(key, self.library_folders, device=self.device)

    def pipeline_for(self, gen: GenerateImageConfig):
        """The pipeline that runs `gen`'s task: the loaded one when the task's class is the arch's
        `pipeline`, else that class built over the very components the loaded pipeline holds (no
        load, no copy; the loaded pipeline is left as it was). Built once per task, and again only
        if a component of the loaded pipeline was replaced since (a swapped scheduler, say). With
        controls, the task's control pipeline (control_pipeline)."""
        if gen.controls:
            return self.control_pipeline(gen)
        task = self.task_of(gen)
        if task.pipeline == self.spec.pipeline:
            return self.pipeline
        components = self.pipeline.components
        key = tuple(sorted((k, id(v)) for k, v in components.items()))
        cached = self._task_pipelines.get(task.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        pipe = self.build_task_pipeline(load_class(task.pipeline), components)
        self._task_pipelines[task.name] = (key, pipe)
        return pipe

    def build_task_pipeline(self, cls, components: dict):
        """`cls` over `components`, with the loaded pipeline's registered settings (what diffusers'
        `from_pipe` carries over: requires_safety_checker, expand_timesteps, is_distilled, ...) and
        the arch's fixed init arguments that `cls` takes. Not `from_pipe` itself: it casts every
        component to a dtype (float32 unless told), which would touch the resident bf16/quantized
        modules the loaded pipeline shares."""
        import inspect

        params = inspect.signature(cls.__init__).parameters
        kwargs = {k: v for k, v in components.items() if k in params}
        kwargs.update({k: v for k, v in self.pipeline.config.items()
                       if k in params and k not in components and not k.startswith("_")})
        kwargs.update({k: v for k, v in self.spec.init_kwargs(self.model_config.variant).items()
                       if k in params and k not in components})
        pipe = cls(**kwargs)
        pipe.set_progress_bar_config(disable=True)
        return pipe

    # -- memory pre-flight ----------------------------------------------------------------------
    # The activation memory a request needs at least, from its size alone (no torch, no weights):
    # the engine refuses what cannot fit on the device even with everything else freed. A floor,
    # not a forecast: it counts only tensors any of these pipelines holds at once, so a refusal is
    # certain and a pass promises nothing (an out-of-memory error then ends only that request).
    #   denoise = P / p^2 * DENOISER_FEATURES * DENOISER_LIVE * b   P: latent positions (frames*h*w);
    #                                                              p: the row's denoiser_patch (pixel space)
    #   decode  = f * H * W * features * DECODE_LIVE * b + F * H * W * 3 * b
    #   need    = batch * (max(denoise, decode) + P * C * b)
    # b: bytes per activation (2 for bf16/fp16, 4 for float32; `auto` is bf16 on CUDA, float32
    # on the CPU). Denoise: the narrowest denoiser here (SD1/SDXL's UNet, 320 channels at latent
    # resolution; every transformer has more features per latent position) holding its residual
    # and attention q, k, v; classifier-free guidance's doubled batch is not counted. Decode: the
    # VAE decoder's last stage at output resolution (`features` per pixel, the arch row's
    # decode_features), a conv's input and output, for f frames at once (video VAEs decode one
    # latent frame, `temporal` output frames, at a time), plus the F decoded frames. P * C * b: the
    # latents. A tiled decode (sample.vae_tiling, toolkit/models/vae_tiling.py) holds the last stage for
    # one tile of one batch item at a time: min(H, T) * min(W, T) in place of H * W, and b once,
    # where T (DECODE_TILE) is the smallest tile side of the VAEs here.
    DENOISER_FEATURES = 320
    DENOISER_LIVE = 4
    DECODE_LIVE = 2
    DECODE_TILE = 256      # pixels: Wan's and HunyuanVideo's default tile (SD's is 512, SDXL's and Flux's 1024)

    @classmethod
    def decode_features(cls, spec) -> int:
        """Features per output pixel at the VAE decoder's last stage (0: no image decoder)."""
        vae = next((c for c in spec.components if c.kind == VAE), None)
        if vae is None or spec.modality == "audio":
            return 0
        return spec.decode_features

    @classmethod
    def estimate_activation_bytes(cls, model_config, gen: GenerateImageConfig, device: str = "cpu",
                                  batch: int = 1, tiled: bool | None = None) -> int:
        """A floor of the device memory `gen` needs beyond the weights (formula above); a class
        method, so the engine asks it without building a holder or importing torch."""
        return max(cls.estimate_stage_bytes(model_config, gen, device, batch, tiled).values())

    @classmethod
    def estimate_stage_bytes(cls, model_config, gen: GenerateImageConfig, device: str = "cpu",
                             batch: int = 1, tiled: bool | None = None) -> dict:
        """The same floor per stage, as the placement planner takes it (toolkit/placement.py):
        {"encode": 0 (the encoders' activations are left to engine.reserve_gb), "denoise":
        batch * (denoise + latents), "decode": batch * (decode + latents)}. `tiled`: the decode as the
        VAE's tiled decode runs it (None: as `gen.vae_tiling` fixes it, `on`; else whole)."""
        mc = ModelConfig.from_dict(model_config) if isinstance(model_config, dict) else model_config
        spec = get_arch(mc.arch)
        lat = spec.latents
        dtype = mc.dtype if mc.dtype != "auto" else ("bf16" if str(device).startswith("cuda") else "float32")
        b = 4 if dtype in ("float32", "fp32") else 2
        if spec.modality == "audio":
            positions = math.ceil(lat.per_second * gen.duration)     # 0 when the model fixes the length
            frames = height = width = 0
        else:
            frames = gen.num_frames if spec.modality == "video" else 1
            height, width = gen.height, gen.width
            positions = (lat.latent_frames(frames) * math.ceil(height / lat.spatial)
                         * math.ceil(width / lat.spatial))
        denoise = positions // spec.denoiser_patch ** 2 * cls.DENOISER_FEATURES * cls.DENOISER_LIVE * b
        at_once = min(frames, lat.temporal) if spec.modality == "video" else frames
        if tiled is None:
            tiled = getattr(gen, "vae_tiling", "auto") == "on"
        area = min(height, cls.DECODE_TILE) * min(width, cls.DECODE_TILE) if tiled else height * width
        stage = at_once * area * cls.decode_features(spec) * cls.DECODE_LIVE * b
        latents = positions * lat.channels * b
        per_item = frames * height * width * 3 * b + latents
        decode = stage + batch * per_item if tiled else batch * (stage + per_item)
        return {"encode": 0, "denoise": batch * (denoise + latents), "decode": decode}

    # -- sampling -----------------------------------------------------------------------------
    def pipeline_kwargs(self, gen: GenerateImageConfig) -> dict:
        """The pipeline call's arguments for `gen` (generator and output_type are added by the caller),
        its task's input images included (`input_kwargs`)."""
        kw = {"prompt": gen.prompt, "num_inference_steps": gen.num_inference_steps,
              "guidance_scale": gen.guidance_scale}
        negative = self.negative_prompt(gen)
        if self.spec.uses_negative_prompt and negative is not None:   # unset: the pipeline's own default
            kw["negative_prompt"] = negative
        if self.spec.modality in ("image", "video") and self.task_takes_size(gen):
            kw.update(width=gen.width, height=gen.height)
        if self.spec.modality == "video":
            kw["num_frames"] = gen.num_frames
        kw.update(self.input_kwargs(gen))
        return kw

    def negative_prompt(self, gen_or_text) -> str | None:
        """A request's negative prompt (its config's, or one row's text); unset or empty, the arch row's
        departure from its pipeline's default where it has one (ArchSpec.negative_prompt_default);
        unset, else None: the pipeline's own."""
        text = getattr(gen_or_text, "negative_prompt", gen_or_text)
        if not text and self.spec.negative_prompt_default is not None:
            return self.spec.negative_prompt_default
        return text

    def task_takes_size(self, gen: GenerateImageConfig) -> bool:
        """Whether the task's pipeline takes width/height: SD/SDXL img2img do not; their output has
        the input image's size, which load_image made the request's."""
        import inspect

        cls = load_class(self.task_of(gen).pipeline)
        if gen.controls:
            cls = load_class(self.ensure_controls(gen)[1].pipeline_for(self.task_of(gen).name)[0])
        params = inspect.signature(cls.__call__).parameters
        return "width" in params and "height" in params

    def input_kwargs(self, gen: GenerateImageConfig) -> dict:
        """The task's inputs as the pipeline takes them (toolkit.images.load_image: EXIF orientation,
        RGB / L, the request's size by resize_mode; toolkit.input_media for videos and audio): `image`
        (the task's `image_arg`: init_img, at the request size; for an edit, the references at their own
        size, a list when there are several), `mask_image` (white = repaint), `video` and `mask`
        (init_video and mask_video: their first num_frames frames at the request size), `audio`
        (init_audio at the model's rate, `audio_format`, cut at the request's duration), and `strength`
        where the task has one. An arch whose pipeline names them otherwise renames them in its holder."""
        from toolkit import input_media
        from toolkit.images import load_image

        task = self.task_of(gen)
        kw = {}
        if gen.init_img:
            kw[task.image_arg] = load_image(gen.init_img, gen.width, gen.height, gen.resize_mode)
        if gen.mask_img:
            kw["mask_image"] = load_image(gen.mask_img, gen.width, gen.height, gen.resize_mode, mask=True)
        for name, arg, mask in (("init_video", "video", False), ("mask_video", "mask", True)):
            if getattr(gen, name):
                kw[arg] = input_media.load_video(getattr(gen, name), gen.width, gen.height, gen.num_frames,
                                                 gen.resize_mode, mask=mask)
        if gen.init_audio:
            rate, channels = self.audio_format()
            kw["audio"] = input_media.load_audio(gen.init_audio, rate, channels, gen.duration or None)
        references = [load_image(getattr(gen, name)) for name in task.inputs
                      if name.startswith("ctrl_img") and getattr(gen, name)]
        if references:
            kw[task.image_arg] = references[0] if len(references) == 1 else references
        if task.strength is not None:
            kw["strength"] = gen.strength
        return kw

    def audio_format(self) -> tuple[int, int]:
        """(sample rate, channels) an input audio is brought to: its VAE's (diffusers' audio VAEs
        name them sampling_rate and audio_channels)."""
        config = self.pipeline.vae.config
        return int(config.sampling_rate), int(getattr(config, "audio_channels", 2))

    def cond_context(self, pipe):
        """What besides its arguments decides `pipe.encode_prompt`'s outputs (the conditioning cache's
        key, with the call's arguments): the funnel identities of the conditioning components (the
        row's text encoders, tokenizers, processors), the pipeline's registered settings (Krea 2's
        hidden-state taps), the other modules' dtypes (Flux casts text ids to the transformer's), the
        execution device, and the LoRAs when a text encoder holds adapters. None (uncached) when a
        conditioning component has no identity (not loaded through the funnel)."""
        import torch

        from toolkit.models.lora_adapters import adapter_key

        roles = {c.role for c in self.components if c.kind in (TEXT_ENCODER, TOKENIZER, PROCESSOR)}
        parts, lora_held = [], False
        for role, obj in sorted(pipe.components.items()):
            if role in roles and obj is not None:
                identity = getattr(obj, "_aitk_identity", None)
                if identity is None:
                    return None
                parts.append((role, identity.key))
                lora_held |= bool(getattr(obj, "peft_config", None)) or getattr(obj, "_aitk_fused", None) is not None
            elif isinstance(obj, torch.nn.Module):
                parts.append((role, str(getattr(obj, "dtype", None))))
        settings = tuple(sorted((k, repr(v)) for k, v in pipe.config.items()
                                if k not in pipe.components and not k.startswith("_")))
        loras = ()
        if lora_held:
            mc = self.model_config
            loras = (tuple((adapter_key(os.path.expanduser(r.path)), r.scale) for r in mc.loras), mc.lora_fuse)
        return (tuple(parts), settings, str(pipe._execution_device), loras)

    def extract_output(self, out):
        """The media the pipeline produced: a PIL image, video frames, or an audio waveform."""
        if self.spec.modality == "image":
            return out.images[0]
        if self.spec.modality == "video":
            return out.frames[0]
        return out.audios[0]

    def extract_outputs(self, out, n: int) -> list:
        """The `n` media items a batched call produced, in batch order."""
        items = {"image": "images", "video": "frames", "audio": "audios"}[self.spec.modality]
        return list(getattr(out, items))[:n]

    def media_kwargs(self, gen: GenerateImageConfig, data) -> dict:
        return {"fps": gen.fps} if self.spec.modality == "video" else {}

    # -- samplers: a scheduler for one call ------------------------------------------------------
    def scheduler_for(self, gen: GenerateImageConfig, generator=None):
        """The scheduler `gen.sampler` names, built fresh from the resident scheduler's config (which
        is never changed), with `gen.shift` in place of the model's own; None for the model's own
        scheduler as it is. The family follows from the loaded config."""
        from toolkit import samplers

        if not gen.sampler and gen.shift is None:
            return None
        base = self.pipeline.scheduler.config
        if gen.shift is not None and (why := samplers.shift_refusal(base)):
            raise ConfigError("sample.shift", why)
        if not gen.sampler:
            return samplers.with_shift(self.pipeline.scheduler, gen.shift)
        sampler = samplers.find(base, gen.sampler, self.spec.samplers_excluded)
        if sampler is None:
            names = [s.name for s in samplers.samplers_for(base, self.spec.samplers_excluded)]
            raise ConfigError("sample.sampler", f"unknown sampler {gen.sampler!r} for this model's scheduler "
                              f"({base.get('_class_name')}; its samplers: {', '.join(names) or 'none'})")
        return samplers.build(sampler, base, generator, gen.shift)

    def call_scheduler(self, gen: GenerateImageConfig, generator=None):
        """A context: while active, the pipeline runs `gen.sampler`'s scheduler (or its own with `gen.shift`);
        the resident one is put back after (also on error or cancel). A patch of the instance attribute only
        (toolkit/models/patches.py): pipe.config (the model's registered classes) stays as it is."""
        scheduler = self.scheduler_for(gen, generator)    # a stochastic one draws from the call's generator
        if scheduler is None:
            return contextlib.nullcontext()
        return patched(self.pipeline, "scheduler", lambda resident: scheduler)

    def call_patches(self, gen: GenerateImageConfig, pipe) -> list:
        """The arch's own wraps for one call of `pipe` (over the call's scheduler): (object, attribute,
        wrapper) triples that generate_single enters with `patched`, in the order
        toolkit/models/patches.py documents. None here; an arch's holder overrides this."""
        return []

    def step_reports(self, pipe, on_step, kwargs: dict):
        """A context: while active, `on_step(step_index, num_steps, timestep, latents, x0)` runs after every
        denoising step of `pipe(**kwargs)`. Here through the scheduler's `step` (toolkit/models/step_hook.py);
        a holder whose pipeline steps other schedulers than `pipe.scheduler` (SkyReels V2's diffusion
        forcing steps a copy per latent frame) reports another way, adding to `kwargs` what it needs."""
        return wrap_scheduler_step(pipe.scheduler, on_step)

    def generate_single(self, gen: GenerateImageConfig, *, on_step=None, on_status=None, rows=None,
                        output_type: str | None = None, inputs: dict | None = None):
        """Sample one config. `on_step(step_index, num_steps, timestep, latents, x0)` runs after every
        scheduler step (it may raise to stop); `on_status(message, stage)` hears encoding, sampling
        and decoding start. Returns the media; with `gen.batch_size` > 1 a list of them, item i
        made from seed + i in one pass. `rows`: [(prompt, negative_prompt, seed)], one pipeline row
        each over `gen`'s other settings (requests batched together by the engine): a list, in order.
        `output_type`: the pipeline's (None: the row's; "latent": the latents, what a hires pass upscales);
        `inputs`: call arguments given as they are (a hires pass's image), over those `gen` names."""
        if gen.hires is not None and rows is None and output_type is None and inputs is None:
            from toolkit.models.hires_run import generate_hires     # the base pass, the upscale, the img2img pass
            return generate_hires(self, gen, on_step=on_step, on_status=on_status)
        import torch

        from toolkit.models.v2.cond_cache import wrap_encode_prompt

        gen = gen.seeded()
        seed, n = gen.seed, gen.batch_size
        # a seed means one image on any device: CPU generators, one per batch item (seed + i), so item i
        # draws the same noise as a batch of one with seed + i. Its output is that run's within one level of
        # the written file, not bit for bit: a batch of N runs every matmul and attention with N (2N under
        # CFG) rows, which the CPU/GPU kernels block and accumulate differently, changing float32 low bits
        # (testing/tests/test_batch.py)
        generator = (torch.Generator("cpu").manual_seed(seed) if n == 1 else
                     [torch.Generator("cpu").manual_seed(seed + i) for i in range(n)])
        kwargs = self.pipeline_kwargs(gen)
        kwargs.update(inputs or {})
        if gen.controls:       # over any holder's own arguments (an arch's holder shapes the rest of the call)
            kwargs = self.control_kwargs(gen, kwargs)
        if rows is not None:
            n = len(rows)
            kwargs.update(self.row_kwargs(rows, kwargs))
            generator = [torch.Generator("cpu").manual_seed(row_seed) for _p, _np, row_seed in rows]
        elif n > 1:
            if not self.spec.batch_arg:
                raise ConfigError("sample.batch_size", f"arch {self.arch} makes one output per pass")
            kwargs[self.spec.batch_arg] = n
        # the call's patches, innermost first: the order toolkit/models/patches.py documents
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.call_scheduler(gen, generator))
            pipe = self.pipeline_for(gen)          # the task's pipeline, over the call's scheduler
            for obj, name, wrapper in self.call_patches(gen, pipe):
                stack.enter_context(patched(obj, name, wrapper))
            on_step = stack.enter_context(_steps_run(pipe, on_step))
            stack.enter_context(self.step_reports(pipe, on_step, kwargs))
            cache = self.cond_cache if self.cond_cache is not None and self.cond_cache.enabled else None
            stack.enter_context(wrap_encode_prompt(cache, pipe, cache and self.cond_context(pipe)))
            stack.enter_context(self._stage_wraps(on_status, pipe))
            stack.enter_context(self.decode_tiling(gen, pipe, on_status, n))
            if self.spec.global_rng or (gen.controls and self.ensure_controls(gen)[1].global_rng):
                stack.enter_context(global_rng_seeded(seed))
            # the request's step cache: hooks on the resident denoiser, removed on the way out
            stack.enter_context(step_cache.applied(pipe, gen.cache, self.spec, num_steps=self.steps_run(gen)))
            if self.residency is not None:     # the last visiting component leaves the device after the call
                stack.enter_context(self.residency.call())
            stack.enter_context(self.compiled_call(gen, on_status))     # the denoiser compiled, or eager for this call
            # the request's IP-Adapters: loaded into the resident denoiser for this call, removed after
            kwargs.update(stack.enter_context(self.ip_adapters(gen, pipe)))
            # model.attention on the denoisers' processors (the IP-Adapters' included), put back after
            stack.enter_context(attention.applied(pipe, self.spec, self.model_config, self.device))
            out = pipe(**kwargs, generator=generator, output_type=output_type or self.output_type)
        if output_type == "latent":
            return getattr(out, "images", out)
        return self.extract_output(out) if n == 1 and rows is None else self.extract_outputs(out, n)

    def decode_tiling(self, gen: GenerateImageConfig, pipe, on_status=None, batch: int = 1):
        """A context: while active, `pipe.vae` decodes in tiles as `gen.vae_tiling` asks (toolkit/models/
        vae_tiling.py); `auto` weighs this call's whole-decode floor for `batch` items against the memory
        free as the decode starts."""
        from toolkit.models import vae_tiling

        need = lambda: type(self).estimate_stage_bytes(self.model_config, gen, self.device, batch, tiled=False)["decode"]
        return vae_tiling.applied(getattr(pipe, "vae", None), gen.vae_tiling, need=need, free=self.decode_free_bytes,
                                  on_status=on_status)

    def decode_free_bytes(self) -> int:
        """The memory free for the decode as it starts: the stage switch brings the VAE first (the denoiser
        that visited leaves), then the device's free bytes (v2/planning.device_free; on a CPU the host's)."""
        from toolkit.models.v2.planning import device_free

        role = next((c.role for c in self.components if c.kind == VAE), None)
        if self.residency is not None and role in self.residency.modules:
            self.residency.enter(role)
        return device_free(self.device, self.memory)

    def row_kwargs(self, rows, kwargs: dict) -> dict:
        """The per-row prompts of a batched call, as lists (a pipeline broadcasts no single negative
        prompt over a list of prompts: Z-Image asserts equal lengths). Rows that all leave it unset
        leave it to the pipeline (the engine batches an unset one only with unset ones: batching.py)."""
        out = {"prompt": [p for p, _np, _s in rows]}
        negatives = [self.negative_prompt(negative) for _p, negative, _s in rows]
        if self.spec.uses_negative_prompt and any(negative is not None for negative in negatives):
            out["negative_prompt"] = [negative or "" for negative in negatives]
        return out

    @staticmethod
    def steps_run(gen: GenerateImageConfig) -> int:
        """The denoiser steps a call runs: a strength task runs the tail of its schedule (about steps x
        strength; MagCache reads this to lay out its ratios and reset after the last step)."""
        if gen.strength is None:
            return gen.num_inference_steps
        return max(1, math.ceil(gen.num_inference_steps * gen.strength))

    def generate_images(self, gens: list, output_folder: str | None = None, *, paths=None, on_step=None,
                        on_status=None, cancel=None) -> list[dict]:
        """Sample and save each config; one record per file written (atomically), a batch's items
        each their own file and record (seed + i). `paths[i]`: gens[i]'s file (default: a name in
        `output_folder`). `cancel()` raises to stop: it is asked after sampling and once more right
        before each file is moved into place, so a cancel that arrives while a file is encoded still
        wins and leaves no file."""
        if self.pipeline is None:
            raise RuntimeError("load_model() first")
        records = []
        for i, gen in enumerate(gens):
            if isinstance(gen, dict):
                gen = GenerateImageConfig.from_dict(gen, self.model_config)
            gen = gen.seeded()
            data = self.generate_single(gen, on_step=on_step, on_status=on_status)
            if cancel is not None:
                cancel()
            items = data if gen.batch_size > 1 else [data]
            path = (paths[i] if paths else None) or os.path.join(
                output_folder or ".", f"{int(time.time() * 1000)}_{i}_{gen.seed}.{gen.output_ext}")
            records.extend(self.write_items(gen, items, path, cancel=cancel, on_status=on_status))
        return records

    def write_items(self, gen: GenerateImageConfig, items: list, path: str, *, cancel=None, on_status=None) -> list:
        """Write `gen`'s outputs (item j made from seed + j) to `path` (batch_paths for several), each
        atomically; one record each (planned_files, then write_files)."""
        return write_files(self.spec.modality, self.planned_files(gen, items, path), cancel=cancel, on_status=on_status)

    def planned_files(self, gen: GenerateImageConfig, items: list, path: str) -> list:
        """The files `gen`'s outputs (item j made from seed + j) go to, `path` (batch_paths for several): an
        output of several images (the row's `output_images`: a list per item) is a file per image, each with
        its item's seed. Each a dict of what write_files takes, fixed now, the metadata included (it names
        this call's scheduler and LoRAs): another thread may write them while this holder serves the next call."""
        gen = gen.seeded()       # a caller's fixed seed; a random one for a config sampled unseeded
        files = [(part, gen.seed + j) for j, item in enumerate(items)
                 for part in (item if self.spec.output_images else [item])]
        return [{"data": item, "path": item_path, "seed": item_seed, "prompt": gen.prompt, "ext": gen.output_ext,
                 "metadata": self.file_metadata(gen, item_seed), "kwargs": self.media_kwargs(gen, item)}
                for (item, item_seed), item_path in zip(files, batch_paths(path, len(files)))]

    def file_metadata(self, gen: GenerateImageConfig, seed: int | None = None) -> dict:
        """How the file of `gen` (with `seed`, one of a batch's) was made, for the writer's `metadata=`:
        the A1111 text and the resolved request as JSON (toolkit/file_settings.py)."""
        from toolkit.file_settings import file_metadata

        scheduler = getattr(self.pipeline, "scheduler", None)
        return file_metadata(self.requested_config, gen, seed=seed,
                             scheduler=type(scheduler).__name__ if scheduler is not None else None)

    @contextlib.contextmanager
    def _stage_wraps(self, on_status, pipe=None):
        """Stage messages from the pipeline's own methods, only while someone listens: encoding
        (encode_prompt), sampling (the scheduler's set_timesteps, which every pipeline calls once
        before its loop) and decoding (vae.decode)."""
        if on_status is None:
            yield
            return
        pipe = pipe or self.pipeline
        targets = [(pipe, "encode_prompt", "encoding prompt", "encoding", False),
                   (pipe.scheduler, "set_timesteps", "sampling", "sampling", True)]
        vae = getattr(pipe, "vae", None)
        if vae is not None:
            targets.append((vae, "decode", "decoding", "decoding", False))
        with contextlib.ExitStack() as stack:
            for obj, name, message, stage, after in targets:
                if getattr(obj, name, None) is not None:
                    stack.enter_context(patched(obj, name, functools.partial(
                        _announce, on_status=on_status, message=message, stage=stage, after=after)))
            yield


@contextlib.contextmanager
def global_rng_seeded(seed: int):
    """torch's global RNGs (CPU and every CUDA device) seeded with `seed` inside, as they were after:
    for a pipeline that draws from them where it takes no generator (ArchSpec.global_rng)."""
    import torch

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def _steps_run(pipe, on_step):
    """`on_step` with the number of steps the pipeline really runs as its total. An img2img or inpaint
    pipeline runs only the tail of its schedule (`get_timesteps(steps, strength, ...)` returns it)
    while `scheduler.timesteps` keeps the whole: without this, progress would end short of its total."""
    if on_step is None or getattr(pipe, "get_timesteps", None) is None:
        yield on_step
        return
    run = {}

    def counting(original):
        @functools.wraps(original)
        def get_timesteps(*args, **kwargs):
            out = original(*args, **kwargs)
            run["n"] = len(out[0])
            return out
        return get_timesteps

    with patched(pipe, "get_timesteps", counting):
        yield lambda i, n, timestep, latents, x0: on_step(i, run.get("n", n), timestep, latents, x0)


def _announce(method, on_status, message, stage, after: bool):
    """Say `message` once: before `method` runs, or after it returns."""
    state = {"said": False}

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        if not after and not state["said"]:
            state["said"] = True
            on_status(message, stage)
        result = method(*args, **kwargs)
        if after and not state["said"]:
            state["said"] = True
            on_status(message, stage)
        return result
    return wrapper


def write_files(kind: str, files: list, *, cancel=None, on_status=None) -> list:
    """Write `files` (BaseModel.planned_files) as `kind` media, each atomically; one record each. `cancel()`
    is asked right before each file is moved into place (toolkit.media.commit_guard); a cancel between files
    removes those written: all or nothing."""
    from toolkit.media import commit_guard, save_media

    records, written = [], []
    try:
        for file in files:
            if on_status is not None:
                on_status(f"saving {os.path.basename(file['path'])}", "saving")
            with commit_guard(cancel):
                record = save_media(kind, file["data"], file["path"], ext=file["ext"], metadata=file["metadata"],
                                    **file["kwargs"])
            written.append(record["path"])
            record.update(seed=file["seed"], prompt=file["prompt"])
            records.append(record)
    except BaseException:
        for done in written:       # a batch is kept whole or not at all (a cancel between items)
            with contextlib.suppress(OSError):
                os.remove(done)
        raise
    return records


def output_files(spec, gen) -> int:
    """How many files a request writes: one per batch item, times the images one output is (the
    row's `output_images` extra)."""
    per_item = (gen.extras.get(spec.output_images) or 1) if spec.output_images else 1
    return gen.batch_size * per_item


def batch_paths(path: str, n: int) -> list[str]:
    """The files a batch of `n` is written to: `path` itself for one, else `<stem>-<i><ext>`."""
    if n == 1:
        return [path]
    stem, ext = os.path.splitext(path)
    return [f"{stem}-{i}{ext}" for i in range(n)]


def _param_count(module) -> int:
    return sum(1 for _ in module.parameters())


def get_model_class(arch: str) -> type:
    """The holder class for `arch`: the one its file declares, else BaseModel."""
    return get_arch(arch).holder or BaseModel
