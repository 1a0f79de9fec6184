"""Where each component of a model named by files comes from: an all-in-one checkpoint, a ComfyUI
denoiser with its component files, or a mix with a diffusers folder. No hub, no config folder, unless
the request names one (`extras_name_or_path`).

    FileSources(model_config, spec).source(component) -> Source

For each component, the first of:
1. `model.components.<role>`: a folder as it is; a file read as the row says (its layout and config,
   formats/component_file.py), refused when it is not that component (a VAE given as `text_encoder`);
2. the component inside `name_or_path`'s file (formats/detect.py: an all-in-one checkpoint holds them
   all, a ComfyUI denoiser file its denoiser; a GGUF denoiser has its config from its shapes);
3. `extras_name_or_path` (a diffusers folder or repo: the other components and their configs);
4. what the row holds as data: the scheduler's and guiders' configs (`ArchSpec.scheduler_file`,
   `guider_files`), a tokenizer found offline (toolkit/tokenizers.py; the ComfyUI installs of the
   model folders looked in too), a component built over that tokenizer (`Component.built`:
   Qwen-Image-Edit's processor);
5. a companion file from the model folders (engine.model_folders, and the ComfyUI or A1111 tree the
   model's own file lies in): the component file that fits this role of this arch, as GET /library
   shows it (toolkit/companions.py), read as if given as `model.components.<role>`;
6. the arch's default repo, when it is in the local hub cache (or the hub may be asked);
else the model is refused, naming every role still missing and what can give it.
"""
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from toolkit.errors import ConfigError
from toolkit.models.arch import DENOISER, GUIDER, SCHEDULER, TOKENIZER


@dataclass(frozen=True)
class Source:
    source: object                   # a path, a hub repo id, or an in-code scheduler config (dict)
    config_source: str | None = None
    part: str | None = None          # the component's key prefix in `source` (a file read by its layout)
    single_file: object = None       # the row's SingleFile for it
    subfolder: bool = True           # the row's subfolder applies (a folder or repo of the whole model)


def _file(path) -> bool:
    return isinstance(path, str) and os.path.isfile(os.path.expanduser(path))


def named_by_files(mc) -> bool:
    """The model is read from files, not from a folder or repo: name_or_path is a file, or component
    files are given with no folder to take the rest from."""
    return _file(mc.name_or_path) or (not mc.name_or_path and bool(mc.components))


class FileSources:
    def __init__(self, model_config, spec, folders=(), roots=None):
        self.mc, self.spec = model_config, spec
        self.folders = tuple(folders)            # the model folders companions are looked for in
        # where an engine may read model files (engine.model_roots; None: anywhere): the tree the model's
        # file lies in lends its companions only from inside them, as a request naming them would
        self.roots = None if roots is None else [os.path.realpath(r) for r in roots]
        self._detected = {}
        self._companions = None

    def detection(self, path: str):
        """What the file is (formats/detect.py); a file in another format (GGUF) has its own reader."""
        from toolkit.models.formats.detect import Detection, detect_file
        from toolkit.models.formats.safetensors_header import is_safetensors_name
        if path not in self._detected:
            self._detected[path] = detect_file(os.path.expanduser(path)) if is_safetensors_name(path) else Detection()
        return self._detected[path]

    def source(self, comp) -> Source:
        mc = self.mc
        if comp.role in mc.components:
            return self._given(comp, mc.components[comp.role])
        if _file(mc.name_or_path):
            part = self.detection(mc.name_or_path).parts.get(comp.role)
            if part is not None and part.error is None and comp.single_file.config:
                return Source(mc.name_or_path, None, part.prefix, comp.single_file, subfolder=False)
            if part is not None and part.error is not None and comp.single_file.config:
                # in the file, but of no known shape: never guessed at, nor fetched from elsewhere
                raise ConfigError("model.name_or_path", f"{os.path.basename(mc.name_or_path)}: {comp.role}: "
                                  f"{part.error} (or give model.components.{comp.role})")
            if part is not None or (comp.kind == DENOISER and not self.detection(mc.name_or_path).parts):
                # the denoiser, in a layout whose config the row does not hold: from a config folder
                if not mc.extras_name_or_path and comp.role == self.spec.denoiser_roles[0]:
                    written = self._gguf_config(comp)
                    if written:
                        return Source(mc.name_or_path, written)
                base = mc.extras_name_or_path or self.default_repo() or self.spec.default_source(mc.variant)
                return Source(mc.name_or_path, base)
        if mc.extras_name_or_path:
            return Source(mc.extras_name_or_path, mc.extras_name_or_path)
        if comp.kind == SCHEDULER and self.spec.scheduler_for_files(mc.variant):
            return Source(self.spec.scheduler_for_files(mc.variant), subfolder=False)
        if comp.kind == GUIDER and comp.role in self.spec.guider_files:
            return Source(dict(self.spec.guider_files[comp.role]), subfolder=False)
        if comp.kind == TOKENIZER and comp.vocab:
            return Source(self._tokenizer(comp), subfolder=False)
        if comp.built:
            from toolkit.tokenizers import built_over
            tok = next(c for c in self.spec.components if c.kind == TOKENIZER and c.vocab)
            return Source(built_over(tok.vocab, comp.role, self._tokenizer(tok), comp.built), subfolder=False)
        companion = self.companion(comp)
        if companion is not None:
            return self._given(comp, companion)
        default = self.default_repo()
        if default:
            return Source(default, default)
        raise ConfigError(f"model.components.{comp.role}", self.missing_message())

    def _gguf_config(self, comp) -> str | None:
        """A GGUF denoiser's config from its shapes, by the row's rule for its original layout (the
        names GGUF files keep), written once to a config folder (`configs/` beside the tokenizer
        cache); None for another file, or shapes of no known config when a local default repo has one."""
        from toolkit.models.arch import load_object
        from toolkit.models.formats.component_file import write_config
        from toolkit.models.formats.file_view import FileKindError
        from toolkit.models.formats.gguf_header import GGUFHeaderError, header_view, is_gguf_file
        from toolkit.tokenizers import cache_root
        path, sf = os.path.expanduser(self.mc.name_or_path), comp.single_file
        if not is_gguf_file(path) or sf is None or not sf.config:
            return None
        try:
            fc = load_object(sf.config)(header_view(path))
        except (FileKindError, GGUFHeaderError) as e:
            if self.default_repo():
                return None
            raise ConfigError("model.name_or_path", f"{os.path.basename(path)}: {e} (or give extras_name_or_path: "
                                                    f"a diffusers folder of {self.spec.name} with its config)") from None
        config = {**fc.config, **dict(sf.facts)}
        digest = hashlib.sha256(json.dumps([comp.cls, config], sort_keys=True, default=str).encode()).hexdigest()[:16]
        folder = os.path.join(os.path.dirname(cache_root()), "configs", f"{self.spec.name}-{digest}")
        if not os.path.isfile(os.path.join(folder, comp.folder, "config.json")):
            os.makedirs(os.path.dirname(folder), exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=".config-", dir=os.path.dirname(folder))
            os.makedirs(os.path.join(tmp, comp.folder))
            write_config(comp.load_class(), config, os.path.join(tmp, comp.folder))
            try:
                os.rename(tmp, folder)
            except OSError:              # written meanwhile by another load: the same config
                shutil.rmtree(tmp, ignore_errors=True)
        return folder

    def model_file(self) -> str | None:
        """The file the model is named by: name_or_path, or the denoiser file given as a component (a
        profile's diffusion_model)."""
        for path in (self.mc.name_or_path, self.mc.components.get(self.spec.denoiser_roles[0])):
            if _file(path):
                return path
        return None

    def trees(self) -> list:
        """The model folders, and the tree the model's own file lies in (a ComfyUI `diffusion_models/` file
        finds its `text_encoders/` and `vae/` beside it)."""
        from toolkit import model_trees
        folders = list(self.folders)
        model_file = self.model_file()
        if model_file:
            tree = model_trees.containing_tree(model_file)
            real = os.path.realpath(tree.models) if tree is not None else None
            inside = real is not None and (self.roots is None or any(real == r or real.startswith(r + os.sep)
                                                                     for r in self.roots))
            if inside and tree.models not in folders:
                folders.insert(0, tree.models)
        return folders

    def companion(self, comp) -> str | None:
        """The model folders' file for this role of this arch (toolkit/companions.py), else None."""
        from toolkit import companions
        sf = comp.single_file
        if comp.kind == DENOISER or sf is None or not sf.anchors or not (sf.config or self.default_repo()):
            return None             # a layout whose config the row does not hold needs a config folder
        if self._companions is None:
            self._companions = companions.component_files(self.trees())
        picks = companions.candidates(self.spec.name, comp.role, self._companions, near=self.model_file())
        return picks[0].path if picks else None

    def _tokenizer(self, comp) -> str:
        """A tokenizer folder for the row's vocabulary: the model folders' ComfyUI installs first, then
        toolkit/tokenizers.py's order (near the model's file, the hub cache, a pinned package)."""
        from toolkit import model_trees
        from toolkit.tokenizers import find_tokenizer
        near = [self.model_file()] + [os.path.join(model_trees.tree_of(f).models, "-") for f in self.trees()]
        files, size = self._encoder_file(comp.role)
        return find_tokenizer(comp.vocab, role=comp.role, near=near, files=files, vocab_size=size)

    def _encoder_file(self, tokenizer_role: str) -> tuple:
        """([the file its text encoder is read from], that encoder's vocabulary size) for a tokenizer
        role (`tokenizer_2` serves `text_encoder_2`): a UMT5 file embeds its tokenizer, and a
        tokenizer with more ids than its encoder takes is passed over."""
        role = tokenizer_role.replace("tokenizer", "text_encoder", 1)
        comp = next((c for c in self.spec.components if c.role == role), None)
        if comp is None:
            return (), None
        # where the encoder itself comes from: given, in the model's file, or a companion file
        path = self.mc.components.get(role)
        if path:
            self._given(comp, path)        # a file of another kind is refused as its own role, not its tokenizer's
        if not path and _file(self.mc.name_or_path) and role in self.detection(self.mc.name_or_path).parts:
            path = self.mc.name_or_path
        if not path and not self.mc.extras_name_or_path:
            path = self.companion(comp)
        if not _file(path):
            return (), None
        part = self.detection(path).parts.get(role)
        if part is None:
            part = next((p for p in self._kind_parts(path) if p.role == role), None)
        size = (part.config.config.get("vocab_size") if part is not None and part.config is not None else None)
        return (path,), size

    def _given(self, comp, path: str) -> Source:
        mc = self.mc
        if not _file(path):              # a folder: as it is, its config beside it
            folder = mc.name_or_path and os.path.isdir(os.path.expanduser(mc.name_or_path)) and not mc.extras_name_or_path
            return Source(path, mc.name_or_path if folder else (mc.extras_name_or_path or self.default_repo()),
                          subfolder=False)
        if mc.extras_name_or_path or comp.single_file is None or not comp.single_file.config:
            base = mc.extras_name_or_path or self.spec.default_source(mc.variant)
            folder = mc.name_or_path and os.path.isdir(os.path.expanduser(mc.name_or_path))
            # its config in the role's subfolder of that folder or repo
            return Source(path, mc.name_or_path if folder and not mc.extras_name_or_path else base)
        part = self.detection(path).parts.get(comp.role)
        wanted = comp.single_file
        if part is None:
            # a component file of this role's kind under any arch's row that names the same kind
            part = next((p for p in self._kind_parts(path) if p.single_file.kind == wanted.kind), None)
        if part is None or part.error is not None:
            raise ConfigError(f"model.components.{comp.role}", self._wrong_kind(path, comp, part))
        return Source(path, None, part.prefix, wanted, subfolder=False)

    def _kind_parts(self, path: str) -> Iterator:
        """Every part of the file this arch's row recognises (a CLIP-L file is its text_encoder's); none
        for a file of another format (GGUF: its own reader)."""
        from toolkit.models.formats.detect import Part, _found
        from toolkit.models.formats.file_view import FileKindError, derive
        from toolkit.models.formats.safetensors_header import check_file, is_safetensors_name
        if not is_safetensors_name(path):
            return
        header = check_file(os.path.expanduser(path))
        for c in self.spec.components:
            if c.single_file is not None and c.single_file.anchors:
                prefix = _found(header, c.single_file)
                if prefix is None:
                    continue
                try:
                    config, error = derive(header, c.single_file, prefix), None
                except FileKindError as e:
                    config, error = None, str(e)
                yield Part(c.role, c.single_file, prefix, config, error)

    def _wrong_kind(self, path: str, comp, part) -> str:
        base = os.path.basename(path)
        want = comp.single_file.label or comp.single_file.kind or comp.role
        if part is not None and part.error is not None:
            return f"{base}: {part.error}"
        det = self.detection(path)
        if det.arch:
            what = f"a {det.arch} checkpoint ({', '.join(det.parts)})"
        elif det.kinds:
            what = " or ".join(label for _k, label, _f in det.kinds)
        else:
            what = "no layout this engine knows"
        return f"{base} is {what}, not the {want} arch {self.spec.name} takes as {comp.role}"

    def default_repo(self) -> str | None:
        """The arch's default repo, when it may be read here: in the local hub cache, or the hub is
        allowed and reachable (not local_only, HF_HUB_OFFLINE unset)."""
        from toolkit.local_weights import weights_here
        from toolkit.models.v2.sources import hub_offline
        repo = self.spec.default_source(self.mc.variant)
        if not repo:
            return None
        if weights_here(self.spec, self.mc.variant) or not (self.mc.local_only or hub_offline()):
            return repo
        return None

    def missing(self) -> list:
        """The roles nothing here gives (what `source` would refuse)."""
        out = []
        for comp in self.spec.components:
            if comp.optional:
                continue
            try:
                self.source(comp)
            except ConfigError:
                out.append(comp.role)
        return out

    def missing_message(self) -> str:
        roles = []
        for comp in self.spec.components:
            if comp.optional or comp.role in self.mc.components:
                continue
            if _file(self.mc.name_or_path) and comp.role in self.detection(self.mc.name_or_path).parts:
                continue
            if comp.kind == SCHEDULER and self.spec.scheduler_for_files(self.mc.variant):
                continue
            if comp.kind == GUIDER and comp.role in self.spec.guider_files:
                continue
            if comp.kind == TOKENIZER and comp.vocab:
                continue
            if self.companion(comp) is not None:
                continue
            roles.append(comp.role)
        repo = self.spec.default_source(self.mc.variant)
        n = len(self.trees())
        looked = (f"; none of its files is in the text encoder or VAE folders of the {n} model folder"
                  f"{'s' if n > 1 else ''} looked in" if n else
                  "; or keep its file in a ComfyUI or A1111 models folder (engine.model_folders)")
        return (f"{self.spec.name} needs {', '.join(roles)} besides what its files hold: give each as "
                f"model.components.<role> (a file or folder), or extras_name_or_path (a diffusers folder"
                + (f", or have {repo} in the local hub cache" if repo else "") + ")" + looked)
