"""What can run here: the archs and profiles (GET /models), a request resolved without running it
(POST /resolve), a profile's files (GET /inspect), the LoRA folder (GET /loras), the upscalers
(GET /upscalers) and the models on this machine (GET /library)."""
from fastapi import Depends, Request as HttpRequest
from pydantic import BaseModel, ConfigDict, Field

from extensions_built_in.inference_engine.routes.common import ApiError, engine_router, errors, require_token
from toolkit import attention
from toolkit.config_modules import GenerateImageConfig
from toolkit.errors import ConfigError
from toolkit.media import OUTPUT_EXTS
from toolkit.models.registry import ARCHS


router = engine_router(dependencies=[Depends(require_token)])


class ResolveBody(BaseModel):
    """POST /resolve: a /generate body's model and sample, checked by the engine as /generate's are."""
    model_config = ConfigDict(extra="forbid")
    model: dict | str
    sample: dict = Field(default_factory=dict)


@router.get("/models", responses=errors())
def models(request: HttpRequest):
    """The registry and the profiles, each with the sample a request gets when it sets none
    (`sample`, `variant_samples`): resolved by the engine, so a client never re-merges precedence."""
    engine = request.app.state.engine
    archs = []
    backends = attention.available(engine.device, engine.dtype)
    for spec in ARCHS.values():
        row = spec.public()
        row["output_exts"] = list(OUTPUT_EXTS[spec.modality])
        row["preview"] = engine.preview_of(spec)     # which decoder makes its preview images here
        # the most images one request may ask for: engine.limits.max_batch where the arch batches
        row["max_batch"] = engine.limits.max_batch if row.get("batch") else 1
        # each sample field's type, bounds and choices here, engine.limits included: a form copies no rule
        row["fields"] = GenerateImageConfig.fields_for(spec, engine.limits)
        # the model.attention names a request may give here (this engine's device, its packages)
        row["attention"] = backends if spec.attention_backends else list(attention.UNDISPATCHED)
        row["sample"] = engine.default_sample(arch=spec.name)
        row["variant_samples"] = {v: engine.default_sample(arch=spec.name, variant=v) for v in spec.variants}
        archs.append(row)
    profiles = []
    for p in engine.profiles.profiles.values():
        row = {**p.public(), "sample": None, "sample_error": None}
        try:
            row["sample"] = engine.default_sample(profile=p.name)
        except ConfigError as e:      # e.g. a [generation] width this arch refuses: say so, list the rest
            row["sample_error"] = e.one_line()
        profiles.append(row)
    return {"archs": archs, "profiles": profiles, "default_model": engine.profiles.default_model,
            "limits": engine.limits.to_dict()}


@router.post("/resolve", responses=errors())
def resolve(body: ResolveBody, request: HttpRequest):
    """What POST /generate would run for this {model, sample}, without running it: the resolved
    model and sample (defaults filled, sizes rounded, task and strength resolved; the seed as
    given), or the 422 naming the first bad field. Image inputs are only present here (any
    non-empty string): neither read nor stored. The same resolver as /generate (toolkit/request.py)."""
    work = request.app.state.engine.resolve(body.model, body.sample, dry_run=True)
    return {"model": work.model.to_dict(), "sample": work.sample.to_dict(), "task": work.sample.task,
            "warnings": list(work.sample.warnings)}


@router.get("/inspect/{profile}", responses=errors(404))
def inspect_profile(profile: str, request: HttpRequest):
    """A profile's component files, from their safetensors headers only."""
    from toolkit.file_report import inspect_profile as inspect
    engine = request.app.state.engine
    if profile not in engine.profiles.profiles:
        raise ApiError(404, "profile", f"unknown profile {profile!r}")
    return inspect(engine.profiles.get(profile))


@router.get("/loras", responses=errors())
def loras(request: HttpRequest, arch: str | None = None):
    """The LoRA files of engine.lora_folder, from their safetensors headers: format, guessed arch,
    rank, alpha, trigger words. `arch`: that arch's files and those no arch claims."""
    if arch is not None and arch not in ARCHS:
        raise ApiError(422, "arch", f"unknown arch {arch!r}")
    return request.app.state.engine.list_loras(arch)


@router.get("/upscalers", responses=errors())
def upscalers_list(request: HttpRequest):
    """What sample.hires.upscaler and sample.upscale.upscaler take (toolkit/hires.py, toolkit/upscalers.py):
    A1111's latent modes (hires only), Lanczos and Nearest, and the upscale models of engine.upscaler_folder
    and the model folders' ESRGAN/ and upscale_models/, by name (a model's file by its basename)."""
    import os

    from toolkit import hires, upscalers
    models = upscalers.model_files(request.app.state.engine.upscaler_folders())
    return {"upscalers": [{"name": n, "kind": "latent"} for n in hires.LATENT_UPSCALERS]
            + [{"name": n, "kind": "pixel"} for n in hires.PIXEL_UPSCALERS]
            + [{"name": n, "kind": "model", "file": os.path.basename(p)} for n, p in sorted(models.items())]}


@router.get("/library", responses=errors())
def library(request: HttpRequest):
    """The models on this machine (hub cache, engine.model_folders, profiles), from model_index.json
    and safetensors headers: arch, kind, format, bytes, completeness and the `model` a request takes;
    and per arch whether its default repo is here (else the `hf download` command)."""
    return request.app.state.engine.library()
