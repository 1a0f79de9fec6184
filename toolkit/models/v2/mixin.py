"""OstrisModelMixin: the single funnel every component load goes through.

`aitk(SomeDiffusersOrTransformersClass).load(source, role=..., policy=...)` resolves the
source (local folder + subfolder, single .safetensors file, or hub repo), reads it with the
library's own loader, applies `aitk_post_load(policy)` (dtype, quantization, placement,
offload) and tags the result with its ComponentIdentity. A load interceptor (the component
pool) can answer a load from memory or be told about a fresh one; holders never see it.
"""
import contextlib
import functools
import json
import os
import shutil
import tempfile
import threading

import torch

from toolkit.errors import ConfigError
from toolkit.models.arch import load_object
from toolkit.models.formats.dispatch import detect_format, read_format
from toolkit.models.formats.safetensors_header import HeaderError, check_file, is_safetensors_name
from toolkit.models.v2.identity import (ComponentIdentity, content_fingerprint, fingerprint_files, part_fingerprint,
                                       weight_files_in)
from toolkit.models.v2.policy import LoadPolicy
from toolkit.models.v2.sources import (ResolvedSource, SourceError, component_config_class, model_index_class,
                                      resolve_source)

_interceptor = None
_local = threading.local()
COMPONENT_READER = "toolkit.models.formats.component_file:read_component"   # a file people have, by its row


def _quiet_libraries():
    """Per-load progress bars from diffusers/transformers are noise in a server log."""
    from diffusers.utils import logging as dlog
    from transformers.utils import logging as tlog
    dlog.disable_progress_bar()
    tlog.disable_progress_bar()


_quiet_libraries()


def set_load_interceptor(interceptor):
    """Install (or clear with None) the object consulted on every load:
    `lookup(identity, policy) -> module | None` and `register(identity, module, policy)`."""
    global _interceptor
    previous, _interceptor = _interceptor, interceptor
    return previous


def get_load_interceptor():
    """This thread's own interceptor (a background prefetch), else the process-wide one."""
    return getattr(_local, "interceptor", None) or _interceptor


@contextlib.contextmanager
def thread_load_interceptor(interceptor):
    """Loads on this thread alone go to `interceptor`: a prefetch thread registers what it reads
    without seeing, or changing, the interceptor of a build on another thread."""
    previous = getattr(_local, "interceptor", None)
    _local.interceptor = interceptor
    try:
        yield interceptor
    finally:
        _local.interceptor = previous


class ComponentLoadError(RuntimeError):
    """A component that could not be loaded; the message names the role and source."""


class WeightsFileError(ConfigError, ComponentLoadError):
    """A component's safetensors file that breaks the format (safetensors_header.read_header): the
    message names the role and the file's basename, `key` the request key that chose the source
    (when the caller said). A ConfigError, so the worker's error frame leads with that key."""


class OstrisModelMixin:
    _aitk_base: type = None

    @classmethod
    def load(cls, source: str, *, role: str, subfolder: str | None = None, policy: LoadPolicy = LoadPolicy(),
             config_source: str | None = None, status=None, allow_hub: bool = True, reader=None,
             converter: str | None = None, field: str | None = None, single_file=None, part: str | None = None,
             **kwargs):
        """Load one component. `config_source` is the folder/repo whose `subfolder` holds the config
        when `source` is a single weights file. `reader(path, component=role, policy=policy) -> module`
        reads a single file stored in a format the libraries do not (e.g. ComfyUI scaled FP8); its
        `format_name` joins the identity. LoRAs are no part of a component: toolkit/models/lora_adapters.py
        switches them on the resident module. `converter` names the arch's diffusers single-file
        converter, used for a quantized single file (formats/dispatch.py). `field` is the request key
        that chose `source` (model.name_or_path, model.components.<role>): a malformed weights file's
        error names it. `part`: the component's key prefix in `source`, a file people have (an all-in-one
        checkpoint, a ComfyUI component file), read with `single_file` (its row's layout and config rule,
        formats/component_file.py): no config folder, nothing downloaded."""
        if isinstance(source, dict):
            return cls._from_code_config(source, role, policy)
        src, load_cls, identity = cls._identify(source, role, subfolder, policy, config_source, allow_hub, reader,
                                                part, single_file)
        interceptor = get_load_interceptor()
        if interceptor is not None:
            hit = interceptor.lookup(identity, policy)
            if hit is not None:
                if isinstance(hit, OstrisModelMixin):
                    hit.aitk_post_load(policy)
                return hit
        if status:
            status(f"loading {role}", stage="loading")
        _check_weight_files(identity.paths, role, field)
        try:
            if src.kind == "file" and part is not None:     # named, as formats/dispatch.py names its readers:
                read = load_object(COMPONENT_READER)        # the readers import the funnel (no circle)
                module = read(src.path, single_file, part, load_cls, role=role, policy=policy)
            elif src.kind == "file" and reader is not None:
                module = reader(src.path, component=role, policy=policy)
            elif src.kind == "file":
                module = load_cls._read_single_file(src, role, subfolder, config_source, policy, allow_hub, kwargs,
                                                    converter, identity.fmt)
            else:
                module = load_cls._read_folder(src, policy, kwargs)
        except (SourceError, ComponentLoadError) as e:
            raise ComponentLoadError(f"{role}: {e}") from None
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            if isinstance(e, torch.OutOfMemoryError):
                raise
            raise ComponentLoadError(f"{role}: cannot load {load_cls.__name__} from {src.label}: "
                                     f"{type(e).__name__}: {e}") from e
        module._aitk_identity = identity
        if isinstance(module, torch.nn.Module):     # how a staged placement reads it again (v2/residency.py)
            module._aitk_reload = _reloader(cls, source, dict(
                role=role, subfolder=subfolder, policy=policy, config_source=config_source, allow_hub=allow_hub,
                reader=reader, converter=converter, field=field, single_file=single_file, part=part, **kwargs))
        if isinstance(module, OstrisModelMixin):
            if policy.qtype and status:
                status(f"quantizing {role} ({policy.qtype})", stage="quantizing")
            module.aitk_post_load(policy)
        if interceptor is not None:
            interceptor.register(identity, module, policy)
        return module

    @classmethod
    def identify(cls, source, *, role: str, subfolder: str | None = None, policy: LoadPolicy = LoadPolicy(),
                 config_source: str | None = None, allow_hub: bool = True, reader=None, part: str | None = None,
                 single_file=None, **_kwargs) -> ComponentIdentity:
        """The identity `load` would give this component, without reading it (a prefetch asks the
        pool for it before deciding what to read)."""
        if isinstance(source, dict):
            return cls._code_config_identity(source, role)[1]
        return cls._identify(source, role, subfolder, policy, config_source, allow_hub, reader, part, single_file)[2]

    @classmethod
    def _identify(cls, source, role, subfolder, policy, config_source, allow_hub, reader, part=None, single_file=None):
        try:
            src = resolve_source(source, None if _is_file(source) else subfolder, allow_hub=allow_hub)
        except SourceError as e:
            raise ComponentLoadError(f"{role}: {e}") from None
        load_cls = cls._class_for(src, role)
        files = [src.path] if src.kind == "file" else weight_files_in(src.component_dir)
        if part is not None:            # one component of a file: its tensors' content and its config
            try:
                weights = part_fingerprint(src.path, part, _part_config(src.path, single_file, part))
            except (HeaderError, OSError):      # a broken file: load() names it (the file's own check)
                weights = fingerprint_files(files) + ((f"part:{part}", 0, 0),)
        elif files:
            weights = fingerprint_files(files) + content_fingerprint(_config_dir(src, config_source, subfolder), ".json")
        else:
            weights = content_fingerprint(src.component_dir)
        identity = ComponentIdentity(
            role=role, cls=f"{load_cls._aitk_base.__module__}.{load_cls._aitk_base.__qualname__}",
            source=src.path, subfolder=src.subfolder, paths=tuple(files), weights=weights,
            dtype=_dtype_name(policy.dtype) if _is_module_class(load_cls) else None,
            qtype=policy.qtype if _is_module_class(load_cls) else None,
            fmt=_single_file_format(src, reader, role),
        )
        return src, load_cls, identity

    @classmethod
    def _code_config_identity(cls, config: dict, role: str):
        import hashlib
        if not (_is_scheduler(cls) or _is_guider(cls)):
            raise ComponentLoadError(f"{role}: only a scheduler or a guider can be built from an in-code config")
        config = dict(config)       # keeps `_class_name`: the built config names its class (samplers.family_of)
        name = config.get("_class_name")
        load_cls = aitk(_import_class("diffusers", name)) if name else cls
        digest = hashlib.sha256(json.dumps({k: v for k, v in config.items() if k != "_class_name"},
                                           sort_keys=True).encode()).hexdigest()
        identity = ComponentIdentity(role=role, cls=f"{load_cls._aitk_base.__module__}.{load_cls._aitk_base.__qualname__}",
                                     source="<in-code config>", subfolder=None, weights=((f"content:{digest}", 0, 0),),
                                     dtype=None, qtype=None)
        return load_cls, identity, config

    @classmethod
    def _from_code_config(cls, config: dict, role: str, policy: LoadPolicy):
        """A weightless component (a scheduler, a guider) from an in-code config, identified by that config."""
        load_cls, identity, config = cls._code_config_identity(config, role)
        interceptor = get_load_interceptor()
        if interceptor is not None:
            hit = interceptor.lookup(identity, policy)
            if hit is not None:
                return hit
        module = load_cls.from_config(config)
        module._aitk_identity = identity
        module.aitk_post_load(policy)
        if interceptor is not None:
            interceptor.register(identity, module, policy)
        return module

    # -- post-load policy -------------------------------------------------------------------
    def aitk_post_load(self, policy: LoadPolicy):
        """Apply dtype, quantization, placement and offload. Idempotent for an identical policy;
        for another placement only the placement is re-applied."""
        if not isinstance(self, torch.nn.Module):
            self._aitk_policy = policy
            return self
        previous = getattr(self, "_aitk_policy", None)
        if previous == policy:
            return self
        if previous is None:
            self.eval()
            self.requires_grad_(False)
            if _has_fp8_storage(self) or getattr(self, "_aitk_keep_dtypes", False):
                pass   # its reader set every tensor's dtype: a whole-module cast would expand FP8/GGUF weights
            elif policy.qtype is None and _float_dtype(self) not in (None, policy.dtype):
                self.to(policy.dtype)
            if policy.qtype:
                from toolkit.quantize import quantize_module
                if _float_dtype(self) not in (None, policy.dtype):
                    self.to(policy.dtype)
                quantize_module(self, policy.qtype)
        elif previous.value_key != policy.value_key:
            raise ComponentLoadError("a resident component cannot change dtype or quantization in place")
        self._aitk_place(policy, previous)
        self._aitk_policy = policy
        return self

    def _aitk_place(self, policy: LoadPolicy, previous: LoadPolicy | None):
        """Where it lives at rest, per policy.placement (v2/residency.py: resident, cpu_cache, layers, staged)."""
        from toolkit.models.v2.residency import place
        place(self, policy, previous)

    # -- readers ----------------------------------------------------------------------------
    @classmethod
    def _class_for(cls, src: ResolvedSource, role: str):
        """model_index.json may name a more specific class for this role (a scheduler, a tokenizer)."""
        if src.kind == "file":
            return cls
        # a component folder given alone: the model_index.json of the model it is part of (beside it) names its
        # class with the module diffusers saved it from (a class outside diffusers/transformers: Cosmos' guardrail)
        beside = os.path.dirname(os.path.normpath(src.component_dir))
        named = (model_index_class(src.path, role) or model_index_class(beside, os.path.basename(
            os.path.normpath(src.component_dir))) or component_config_class(src.component_dir))
        if named is None:
            return cls
        real = _import_class(*named)
        if real is None:
            raise ComponentLoadError(f"{role}: model_index.json names {named[0]}.{named[1]}, which does not exist")
        if real is cls._aitk_base or not issubclass(real, cls._aitk_base):
            return cls
        return aitk(real)

    @classmethod
    def _read_folder(cls, src: ResolvedSource, policy: LoadPolicy, kwargs):
        sub = {"subfolder": src.subfolder} if src.subfolder else {}
        if _is_diffusers_model(cls):
            return cls.from_pretrained(src.path, dtype=policy.dtype, local_files_only=True, **sub, **kwargs)
        if _is_transformers_model(cls):
            model, info = cls.from_pretrained(src.path, dtype=policy.dtype, local_files_only=True,
                                              output_loading_info=True, **sub, **kwargs)
            _check_loading_info(info, src)
            return model
        if _is_scheduler(cls):
            return cls.from_pretrained(src.path, local_files_only=True, **sub, **kwargs)
        return cls.from_pretrained(src.path, local_files_only=True, **sub, **kwargs)

    @classmethod
    def _read_single_file(cls, src, role, subfolder, config_source, policy, allow_hub, kwargs, converter=None,
                          fmt="native"):
        if not _is_module_class(cls):
            raise ComponentLoadError(f"a {cls.__name__} cannot be read from a single weights file ({src.label})")
        if not config_source:
            raise ComponentLoadError(f"{src.label} is a single file: its config folder is needed "
                                     f"(set extras_name_or_path)")
        cfg = resolve_source(config_source, subfolder, allow_hub=allow_hub)
        if fmt != "native":          # a quantized file (formats/dispatch.py): its format's reader
            return read_format(fmt, src.path, cls, cfg.component_dir, converter, component=role, policy=policy)
        from safetensors import safe_open
        if not src.path.endswith(".safetensors"):
            raise ComponentLoadError(f"{src.label}: only .safetensors single files are read")
        with safe_open(src.path, "pt") as f:
            file_keys = set(f.keys())
        expected = cls._expected_keys(cfg.component_dir)
        unexpected = file_keys - expected
        if not unexpected:
            return cls._read_staged(src, cfg, policy, kwargs)
        if _is_diffusers_model(cls) and hasattr(cls, "from_single_file"):
            # an original-format (e.g. ComfyUI/LDM) checkpoint that diffusers converts
            return cls.from_single_file(src.path, config=cfg.path, subfolder=subfolder, dtype=policy.dtype,
                                        local_files_only=True, **kwargs)
        sample = ", ".join(sorted(unexpected)[:3])
        raise ComponentLoadError(f"{src.label}: {len(unexpected)} keys do not belong to {cls.__name__} "
                                 f"(e.g. {sample}) and it has no single-file converter")

    @classmethod
    def _expected_keys(cls, config_dir: str) -> set:
        """The module's state-dict keys, from its config alone (built on the meta device)."""
        with torch.device("meta"):
            if _is_diffusers_model(cls):
                model = cls.from_config(cls.load_config(config_dir))
            else:
                model = cls(cls.config_class.from_pretrained(config_dir))
        return set(model.state_dict().keys())

    @classmethod
    def _read_staged(cls, src, cfg, policy, kwargs):
        """A single file in the library's own key names: present it as a one-file folder so the
        library's normal loader (mmap, meta init, dtype handling) reads it."""
        stage = tempfile.mkdtemp(prefix="aitk_single_")
        try:
            for name in os.listdir(cfg.component_dir):
                if name.endswith(".json") and "index" not in name:
                    shutil.copy(os.path.join(cfg.component_dir, name), stage)
            target = "diffusion_pytorch_model.safetensors" if _is_diffusers_model(cls) else "model.safetensors"
            os.symlink(src.path, os.path.join(stage, target))
            return cls._read_folder(ResolvedSource("folder", stage, None, src.label), policy, kwargs)
        finally:
            shutil.rmtree(stage, ignore_errors=True)


_MIXED: dict[type, type] = {}


def aitk(cls: type) -> type:
    """`cls` with the funnel mixed in (cached). The mixed class keeps the library class's name
    so saved configs, logs and isinstance checks see the real class."""
    if isinstance(cls, type) and issubclass(cls, OstrisModelMixin):
        return cls
    mixed = _MIXED.get(cls)
    if mixed is None:
        mixed = type(cls.__name__, (OstrisModelMixin, cls),
                     {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "_aitk_base": cls})
        _MIXED[cls] = mixed
    return mixed


class _NoPool:
    """A load interceptor that neither answers nor registers: a staged component's re-read is no pool load."""

    def lookup(self, identity, policy):
        return None

    def register(self, identity, module, policy):
        pass


def _reloader(cls, source, kwargs):
    """`reload(device) -> module`: the component read again as it was, resident on `device`, past the pool
    (what a staged placement does at each of its stages: v2/residency.materialize)."""
    from dataclasses import replace

    def reload(device):
        policy = replace(kwargs["policy"], device=str(device), placement="resident", group=1)
        with thread_load_interceptor(_NoPool()):
            return cls.load(source, **{**kwargs, "policy": policy})
    return reload


# -- helpers ------------------------------------------------------------------------------------
def _import_class(library: str, name: str):
    """A class named in model_index.json: a library ("diffusers", "transformers") or, as diffusers
    writes for pipeline-local modules, a pipeline package's name (ACE-Step's, diffusers.pipelines.ace_step).
    A component folder's own config says "diffusers" for a pipeline-local class too (LTX-2's
    LTX2TextConnectors, LTX2Vocoder): the pipeline package that exports it."""
    for module_name in (library, f"diffusers.pipelines.{library}"):
        try:
            module = __import__(module_name, fromlist=[name])
        except ImportError:
            continue
        if hasattr(module, name):
            return getattr(module, name)
    return _pipeline_local_class(name) if library == "diffusers" else None


@functools.lru_cache(maxsize=None)
def _pipeline_local_class(name: str):
    """The class a diffusers pipeline package exports under `name` (its lazy module's names: no
    pipeline is imported but the one that has it), or None."""
    import importlib
    import pkgutil

    import diffusers.pipelines
    for info in pkgutil.iter_modules(diffusers.pipelines.__path__):
        if not info.ispkg:
            continue
        try:
            package = importlib.import_module(f"diffusers.pipelines.{info.name}")
        except ImportError:
            continue
        if name in dir(package):
            return getattr(package, name, None)
    return None


def _config_dir(src: ResolvedSource, config_source, subfolder) -> str:
    """Where this component's config comes from: its own folder, or for a single file the
    local config source's subfolder."""
    if src.kind != "file":
        return src.component_dir
    if config_source and os.path.isdir(os.path.expanduser(config_source)):
        return os.path.join(os.path.expanduser(config_source), subfolder or "")
    return ""


def _part_config(path: str, single_file, prefix: str):
    """The config a file's component is built with (its row's rule over the file's shapes, the arch's
    facts on top): one VAE's bytes are two components under two archs' scaling factors. None when the
    file does not give one; reading it then names why."""
    from toolkit.models.formats.file_view import FileKindError, derive
    if single_file is None or not single_file.config:
        return {"converter": getattr(single_file, "converter", None)}
    try:
        fc = derive(check_file(path), single_file, prefix)
    except (FileKindError, HeaderError):
        return None
    return {"converter": single_file.converter, "config": fc.config}


def _check_weight_files(paths, role: str, field: str | None):
    """Each safetensors file of a component well formed by its header, before any library opens it
    (their own errors name neither the component nor the file). Cached in this process: a file is
    parsed again only when it changes."""
    for path in paths:
        if is_safetensors_name(path):
            try:
                check_file(path)
            except HeaderError as e:
                raise WeightsFileError(field, f"{role}: {e.named()}") from None


def _single_file_format(src: ResolvedSource, reader, role: str) -> str:
    """A single file's storage format (part of the identity): an arch reader's, else the format table's
    (formats/dispatch.py; a GGUF file's names its quantization, "gguf-Q4_K": two quantizations of one
    model are two components), else native. A file its format cannot parse is an error naming it."""
    if src.kind != "file":
        return "native"
    if reader is not None:
        return getattr(reader, "format_name", "native")
    try:
        return detect_format(src.path) or "native"
    except ValueError as e:
        raise ComponentLoadError(f"{role}: {e}") from None


def _is_file(source) -> bool:
    return isinstance(source, str) and os.path.isfile(os.path.expanduser(source))


def _is_diffusers_model(cls) -> bool:
    from diffusers import ModelMixin
    return issubclass(cls, ModelMixin)


def _is_transformers_model(cls) -> bool:
    from transformers import PreTrainedModel
    return issubclass(cls, PreTrainedModel)


def _is_scheduler(cls) -> bool:
    from diffusers import SchedulerMixin
    return issubclass(cls, SchedulerMixin)


def _is_guider(cls) -> bool:
    from diffusers.guiders.guider_utils import BaseGuidance
    return issubclass(cls, BaseGuidance)


def _is_module_class(cls) -> bool:
    return issubclass(cls, torch.nn.Module)


_FP8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n))


def _has_fp8_storage(module: torch.nn.Module) -> bool:
    return any(p.dtype in _FP8 for p in module.parameters())


def _float_dtype(module: torch.nn.Module):
    for p in module.parameters():
        if p.is_floating_point():
            return p.dtype
    return None


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _check_loading_info(info: dict, src: ResolvedSource):
    missing = list(info.get("missing_keys") or [])
    bad = list(info.get("mismatched_keys") or [])
    if missing or bad:
        what = (missing + [str(b) for b in bad])[:3]
        raise ComponentLoadError(f"{src.label}: {len(missing)} missing and {len(bad)} mismatched weights "
                                 f"(e.g. {', '.join(what)})")
