"""Which arch's original-layout single file a key set is, from the arch rows' `SingleFile.anchors`
(every anchor key present, under one checkpoint prefix). Pure Python, no torch: inspection and
/library use it on a header's keys."""

PREFIXES = ("model.diffusion_model.", "diffusion_model.", "")


def detect_single_file(keys) -> dict | None:
    """{"arch", "role", "prefix", "converter"} of the first arch row whose anchors all appear, else None."""
    from toolkit.models.registry import ARCHS
    keys = keys if isinstance(keys, (set, frozenset, dict)) else set(keys)
    for name in ARCHS:
        for comp in ARCHS[name].components:
            sf = comp.single_file
            if sf is None or not sf.anchors:
                continue
            for prefix in PREFIXES:
                if all(prefix + a in keys for a in sf.anchors):
                    return {"arch": name, "role": comp.role, "prefix": prefix, "converter": sf.converter}
    return None
