"""A request's ControlNets on a resident model: each a pool component keyed by its file, the control
pipeline built over the resident components plus the controlnet(s), and the call's arguments.

    load(refs, arch, policy, status) -> [module]   # through the funnel: a resident one is a pool hit
    arguments(control, refs, images, modes) -> the pipeline __call__'s control arguments

The refs come checked and resolved (toolkit/control_models.check_all: path, Control row, mode index).
Adding, removing or changing a control loads that control alone: the base model's components are the
holder's, untouched; a control not used by a request stays in the pool (warm) until evicted.
"""
from toolkit.models.arch import load_class


def found_for(ref, arch: str):
    """The arch's Found for a checked ref (its row and how the file is read), from the header again
    (cached by the header reader)."""
    from toolkit.control_models import identify
    found = [f for f in identify(ref.model) if f.arch == arch]
    if not found:
        raise ValueError(f"{ref.model}: no control row of arch {arch} takes it")
    return found[0]


def load(refs, arch: str, policy, status=None) -> tuple:
    """(Control row, [module]) for `refs`, each read through the funnel (`aitk(cls).load`) so the pool
    keys it by its file; the row of the first (check_all made them one)."""
    from toolkit.models.v2 import aitk

    modules, row = [], None
    for ref in refs:
        found = found_for(ref, arch)
        row = row or found.control
        cls = aitk(load_class(found.control.cls))
        if found.single_file is not None:
            module = cls.load(found.path, role="controlnet", policy=policy, status=status,
                              part=found.prefix, single_file=found.single_file)
        else:
            module = cls.load(found.path, role="controlnet", policy=policy, status=status)
        modules.append(module)
    return row, modules


def arguments(control, refs, images: list, task: str) -> dict:
    """The control arguments of the pipeline call: the images under the row's argument for the task, the
    scales and guidance ranges (lists when several: the pipelines wrap several models in their Multi*
    class), and a union model's modes."""
    _pipeline, image_arg = control.pipeline_for(task)
    one = len(refs) == 1
    pick = (lambda values: values[0]) if one else list
    kw = {"controlnet_conditioning_scale": pick([r.scale for r in refs])}
    if control.ranges:
        kw.update(control_guidance_start=pick([r.start for r in refs]), control_guidance_end=pick([r.end for r in refs]))
    if control.lists:            # images and their modes as lists however many models (the pipeline pairs them)
        kw[image_arg] = list(images)
        kw[control.mode_arg] = [r.mode for r in refs]
    else:
        kw[image_arg] = pick(images)
        if control.mode_arg:
            kw[control.mode_arg] = pick([r.mode for r in refs])
    return kw
