"""Where each component of a model is read from, without any library: the folder and subfolder, the
single file, or the part of a file people have. The load funnel reads these (BaseModel.component_loads),
and the placement planner sizes them from their files' headers (toolkit/models/component_sizes.py) before
anything is read. Torch-free."""
import os
from dataclasses import dataclass

from toolkit.errors import ConfigError
from toolkit.models.arch import DENOISER, Component


@dataclass(frozen=True)
class ComponentSource:
    """Where one component is read from (BaseModel.component_loads' half that needs no library):
    `source` a folder, repo id, file or in-code config; `subfolder` the component's folder in it;
    `part` its key prefix in a file people have."""
    source: object
    config_source: object = None
    part: str | None = None
    subfolder: str | None = None


def component_sources(mc, arch_spec, folders=(), roots=None):
    """(Component, ComponentSource | None) for each of the arch's components, in order, None for an
    optional one the model lacks. Torch-free: the load funnel reads these, and the placement planner
    sizes them from their files' headers (toolkit/models/component_sizes.py) before anything is read."""
    from toolkit.models.file_sources import FileSources, named_by_files
    from toolkit.models.v2.sources import component_present

    files = FileSources(mc, arch_spec, folders, roots) if named_by_files(mc) else None
    absent = arch_spec.absent(mc.variant)
    for spec in arch_spec.components:
        if spec.role in absent and spec.role not in mc.components:
            yield spec, None        # the variant has none (the SDXL refiner's CLIP-L)
            continue
        src = _original_file(mc, arch_spec, spec) if files is None else None
        if src is not None:     # a file people have, given for a folder's model (model.vae): read by its row
            where, whole = ComponentSource(src.source, src.config_source, src.part), False
        elif files is not None:           # single files people have (toolkit/models/file_sources.py)
            src = files.source(spec)
            where = ComponentSource(src.source, src.config_source, src.part, spec.folder if src.subfolder else None)
            whole = src.subfolder           # a folder or repo of the whole model (else the component's own)
        else:
            source, config_source = source_for(mc, arch_spec, spec)
            own_repo = spec.repo and source == spec.repo         # read from its root
            where = ComponentSource(source, config_source, None,
                                    None if spec.role in mc.components or own_repo else spec.folder)
            whole = True
        if (spec.optional and whole and isinstance(where.source, str)
                and not component_present(where.source, spec.role, spec.folder)):
            yield spec, None
            continue
        yield spec, where


def source_for(mc, arch_spec, spec: Component) -> tuple[str, str]:
    """(source, config_source) for a component of a model named by a folder or repo (BaseModel.source_for)."""
    base = mc.extras_name_or_path or arch_spec.default_source(mc.variant)
    main = mc.name_or_path
    if spec.repo and spec.role not in mc.components and not any(
            p and os.path.isdir(os.path.join(os.path.expanduser(p), spec.folder)) for p in (main, base)):
        return spec.repo, spec.repo         # the role's own repo: the model's repos ship none of it
    if spec.role in mc.components:      # an explicit file: its config from the extras, else the model folder
        folder = not mc.extras_name_or_path and main and os.path.isdir(os.path.expanduser(main))
        return mc.components[spec.role], (main if folder else base)
    if os.path.isfile(os.path.expanduser(main)):
        return (main, base) if spec.kind == DENOISER else (base, base)
    if mc.extras_name_or_path and os.path.isdir(main) and not os.path.isdir(os.path.join(main, spec.folder)):
        return base, base
    return main, main


def _original_file(mc, arch_spec, spec: Component):
    """The Source of a component file given for a folder's model when the file is in the original
    layout its row reads with a config from the file (an LDM VAE as `model.vae`), else None (a file
    in the library's names: the folder's config, as before)."""
    from toolkit.models.file_sources import FileSources
    given = mc.components.get(spec.role)
    if not given or mc.extras_name_or_path or not os.path.isfile(os.path.expanduser(given)) \
            or spec.single_file is None or not spec.single_file.config:
        return None
    try:
        src = FileSources(mc, arch_spec)._given(spec, given)
    except ConfigError:
        return None
    return src if src.part is not None else None
