"""IP-Adapters on a resident pipeline, for one call, through diffusers' own machinery
(IPAdapterMixin / FluxIPAdapterMixin: `load_ip_adapter`, `set_ip_adapter_scale`, `unload_ip_adapter`).

`applied(pipe, refs, encoder)` (base_model.generate_single enters it around the call):
1. notes what the adapters change: the pipeline's `image_encoder` and `feature_extractor`, and the
   denoiser's attention processors (the very objects), `encoder_hid_proj` and `config.encoder_hid_dim_type`;
2. sets the image encoder (a pool component: `load_encoder`, shared by every model that uses it) on the
   pipeline and loads every adapter file in one `load_ip_adapter` call (diffusers builds one
   MultiIPAdapterImageProjection over them and the IP attention processors), then `set_ip_adapter_scale`;
3. gives the call `ip_adapter_image` (one image per adapter);
4. afterwards, also on error or cancel, `unload_ip_adapter()`, then puts back what it noted: the next
   call without an adapter runs the plain model bit for bit (diffusers' unload alone makes new
   processors of its default class and leaves the pipeline's config changed).

Decision: the adapter file is read for each call it is in (from the OS cache after the first), not
kept as a pool entry: diffusers builds its layers into the processors of the shared denoiser, which
must be restored after the call anyway, and the file is small next to its image encoder (SD 1.5's
44 MB against ViT-H's 2.5 GB). The image encoder is the pool entry, keyed by its file like any component.
"""
import contextlib
import inspect
import os

_MISSING = object()


def denoiser_of(pipe):
    """The module IP-Adapters go into: the UNet pipelines' `unet`, the transformer pipelines' `transformer`."""
    return pipe.unet if getattr(pipe, "unet", None) is not None else pipe.transformer


def load_encoder(source: str, dtype, device, *, allow_hub: bool = False, field: str | None = None):
    """The CLIP vision image encoder at `source` (a transformers folder, or a single file as ComfyUI's
    models/clip_vision holds them) through the funnel: the pool keys, shares and evicts it."""
    from transformers import CLIPVisionModelWithProjection

    from toolkit.models.formats.clip_vision import read_clip_vision
    from toolkit.models.v2 import LoadPolicy, aitk

    source = os.path.expanduser(source)
    reader = read_clip_vision if os.path.isfile(source) else None
    return aitk(CLIPVisionModelWithProjection).load(source, role="image_encoder", policy=LoadPolicy(dtype, device),
                                                    reader=reader, allow_hub=allow_hub, field=field)


def _encoder_kwargs(pipe) -> dict:
    """The load_ip_adapter argument that says "the image encoder is already set" (the mixins name it apart)."""
    params = inspect.signature(pipe.load_ip_adapter).parameters
    if "image_encoder_folder" in params:
        return {"image_encoder_folder": None}
    return {"image_encoder_pretrained_model_name_or_path": None}


@contextlib.contextmanager
def applied(pipe, refs, encoder, load_image):
    """While active, `pipe`'s denoiser runs `refs` (IPAdapterRefs: model file, image, scale) over `encoder`;
    yields the call's extra arguments. `load_image(path)` reads a reference image."""
    if not refs:
        yield {}
        return
    den = denoiser_of(pipe)
    # a Flux transformer has no encoder_hid_proj until an adapter is loaded (UNets: None)
    saved = {"processors": den.attn_processors, "hid": getattr(den, "encoder_hid_proj", _MISSING),
             "hid_type": den.config.__dict__.get("encoder_hid_dim_type", _MISSING),
             "image_encoder": getattr(pipe, "image_encoder", None),
             "feature_extractor": getattr(pipe, "feature_extractor", None),
             "config": {k: pipe.config.get(k, _MISSING) for k in ("image_encoder", "feature_extractor")}}
    try:
        pipe.register_modules(image_encoder=encoder)
        paths = [os.path.abspath(os.path.expanduser(r.model)) for r in refs]
        pipe.load_ip_adapter([os.path.dirname(p) for p in paths], subfolder=[""] * len(paths),
                             weight_name=[os.path.basename(p) for p in paths], local_files_only=True,
                             **_encoder_kwargs(pipe))
        # one adapter's scale as a number: Flux's mixin reads a one-adapter list as per-layer scales
        pipe.set_ip_adapter_scale(refs[0].scale if len(refs) == 1 else [r.scale for r in refs])
        yield {"ip_adapter_image": [load_image(r.image) for r in refs]}
    finally:
        _restore(pipe, den, saved)


def _restore(pipe, den, saved):
    if getattr(den, "encoder_hid_proj", _MISSING) is not saved["hid"] or den.attn_processors != saved["processors"]:
        pipe.unload_ip_adapter()
    den.set_attn_processor(saved["processors"])
    if saved["hid"] is _MISSING:
        if hasattr(den, "encoder_hid_proj"):
            delattr(den, "encoder_hid_proj")
    else:
        den.encoder_hid_proj = saved["hid"]
    if saved["hid_type"] is _MISSING:
        den.config.__dict__.pop("encoder_hid_dim_type", None)
    else:
        den.config.__dict__["encoder_hid_dim_type"] = saved["hid_type"]
    pipe.register_modules(image_encoder=saved["image_encoder"], feature_extractor=saved["feature_extractor"])
    for key, value in saved["config"].items():      # register_modules writes (None, None) for a module unset
        if value is _MISSING:
            pipe._internal_dict.pop(key, None) if hasattr(pipe, "_internal_dict") else None
        else:
            pipe.register_to_config(**{key: value})
