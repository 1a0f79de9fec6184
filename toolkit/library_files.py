"""The single files of GET /library: each checkpoint, denoiser and component file of the model folders
(A1111/Forge and ComfyUI trees, plain folders), described from its header by the one detector
(formats/detect.py), and, for each model, what completes it. No torch.

    file_entry(path, root, hint) -> entry
    complete(entries, component_files) -> fills `companions`, `missing`, `model` of each model entry

A model entry (an all-in-one checkpoint, or a denoiser alone) needs every non-optional component of its
arch's row. Each comes from, in the load's order (toolkit/models/file_sources.py):
- the file itself (`parts`: the components the detector found in it, with the known config each is);
- a component file of the trees that fits that role of that arch (toolkit/companions.py: by kind, names
  breaking ties), named in the entry's `companions` and in its `model.components`;
- the row's data: the scheduler config, a tokenizer found offline (named in `companions` too);
- for what the files cannot give (a layout whose config the row does not hold yet, a role no file layout
  is known for): a diffusers folder of the arch here, or its default repo in the local hub cache, as
  `extras_name_or_path`;
else the role is in `missing_roles`, `missing` says what to add, and the entry has no `model`.
"""
import os

from toolkit import companions, model_trees

DTYPES = {"BF16": "bf16", "F16": "f16", "F32": "f32", "F64": "f64", "F8_E4M3": "fp8_e4m3", "F8_E5M2": "fp8_e5m2"}
KINDS = {model_trees.CHECKPOINT: "checkpoint", model_trees.DENOISER: "single_file",
         model_trees.COMPONENT: "component", model_trees.LORA: "lora", model_trees.VAE_APPROX: "vae_approx",
         model_trees.UPSCALER: "upscaler", model_trees.CONTROLNET: "controlnet"}


def _dtype(counts: dict) -> str | None:
    floats = {d: c for d, c in counts.items() if d in DTYPES}
    return DTYPES[max(floats, key=floats.get)] if floats else None


def vae_approx_entry(path: str, root: str) -> dict:
    """A file of a vae_approx/ folder: a tiny preview autoencoder (TAESD and kin), with the latent
    channels its decoder takes and the archs whose previews it decodes; an encoder file is listed as one."""
    from toolkit.models.registry import ARCHS
    from toolkit.models.tiny_autoencoder import describe
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    entry = {"name": rel, "source": "folder", "path": os.path.abspath(path), "repo": None, "kind": "vae_approx",
             "arch": None, "variant": None, "role": "preview_decoder", "bytes": os.path.getsize(path),
             "complete": True, "missing": [], "model": None, **describe(path)}
    entry["archs"] = sorted(n for n, s in ARCHS.items() if s.latents.format and entry.get("tae")
                            and s.latents.format.tae == entry["tae"])
    if entry.get("error"):
        entry.update(complete=False, missing=[entry.pop("error")])
    return entry


def upscaler_entry(path: str, root: str) -> dict:
    """A file of an ESRGAN/ or upscale_models/ folder: an upscale model (toolkit/upscalers.py), named as
    sample.hires.upscaler and A1111's hr_upscaler take it (the file's stem). Not opened: a .pth is a pickle."""
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    return {"name": rel, "source": "folder", "path": os.path.abspath(path), "repo": None, "kind": "upscaler",
            "arch": None, "variant": None, "role": "upscaler", "bytes": os.path.getsize(path), "complete": True,
            "missing": [], "model": None, "upscaler": os.path.splitext(os.path.basename(path))[0]}
def controlnet_entry(path: str, root: str) -> dict:
    """A file of a controlnet/ folder: the archs (and control classes) that take it, from its header."""
    from toolkit.control_models import identify
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    entry = {"name": rel, "source": "folder", "path": os.path.abspath(path), "repo": None, "kind": "controlnet",
             "arch": None, "variant": None, "role": "controlnet", "bytes": os.path.getsize(path), "complete": True,
             "missing": [], "model": None}
    try:
        found = identify(path)
    except ValueError as e:
        return {**entry, "complete": False, "missing": [str(e)]}
    entry.update(archs=sorted({f.arch for f in found}), label=found[0].control.label if found else None,
                 arch=found[0].arch if len(found) == 1 else None)
    if not found:
        entry.update(complete=False, missing=["no arch here takes this control model"])
    return entry


def file_entry(path: str, root: str, hint: str | None) -> dict:
    """A .safetensors file: what the detector says it is (else the older layout table of toolkit/file_report.py)."""
    if hint == model_trees.VAE_APPROX:
        return vae_approx_entry(path, root)
    if hint == model_trees.CONTROLNET:
        return controlnet_entry(path, root)
    from toolkit.file_report import inspect_file
    from toolkit.models.registry import ARCHS
    report = inspect_file(path)
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    entry = {"name": rel, "source": "folder", "path": os.path.abspath(path), "repo": None,
             "kind": KINDS.get(hint, "single_file"), "arch": None, "variant": None, "role": None,
             "dtype": _dtype(report.get("dtype_counts") or {}), "format": report.get("format"),
             "summary": report.get("summary"), "bytes": report.get("size_bytes") or os.path.getsize(path),
             "complete": not report.get("error") and not report.get("problem_count"),
             "missing": [report["error"]] if report.get("error") else list(report.get("problems") or [])[:3],
             "model": None}
    det = report.get("detection") or {}
    if det.get("arch"):
        arch = det["arch"]
        parts = det["components"]
        denoiser = next(r for r in ARCHS[arch].denoiser_roles if r in parts)
        errors = [f"{r}: {p['error']}" for r, p in parts.items() if p.get("error")]
        entry.update(arch=arch, role=denoiser, variant=det.get("variant") or ARCHS[arch].default_variant,
                     kind="checkpoint" if det["all_in_one"] else "single_file",
                     parts={r: {k: p[k] for k in ("kind", "label", "known", "error")} for r, p in parts.items()},
                     _detected=True)
        if errors:
            entry.update(complete=False, missing=errors[:3])
    elif det.get("kinds"):
        kind = det["kinds"][0]
        fits = [f for k in det["kinds"] for f in k["fits"]]
        entry.update(kind="component", role=fits[0]["role"], component_kind=kind["kind"], label=kind["label"],
                     fits=fits)
    elif report.get("arch"):        # no arch row's anchors: an older layout table's answer (Krea 2)
        arch = report["arch"]
        entry.update(arch=arch, role=report["role"], variant=ARCHS[arch].default_variant,
                     kind="single_file" if report["role"] in ARCHS[arch].denoiser_roles else "component")
    else:
        matches = _archs_for_layout(report.get("architecture") or "")
        if matches:
            from toolkit.profiles import component_role
            arch, key = matches[0]
            role = component_role(arch, key) if key == "diffusion_model" else key
            entry.update(arch=arch, role=role, variant=ARCHS[arch].default_variant,
                         kind="single_file" if role in ARCHS[arch].denoiser_roles else "component")
        elif hint is None or hint == model_trees.CHECKPOINT:
            entry["kind"] = "single_file"
    return entry


def _archs_for_layout(layout: str) -> list:
    """(arch, profile key) pairs whose checkpoint_formats accept an older detected layout."""
    from toolkit.models.registry import ARCHS
    return [(name, key) for name in ARCHS for key, formats in ARCHS[name].checkpoint_formats.items()
            if layout in formats]


# -- what completes a model ------------------------------------------------------------------------------
def complete(entries: list, files: list):
    """For each detected checkpoint or denoiser in `entries`: its companions, what is missing, its `model`.
    `files`: the trees' component files (companions.component_files)."""
    from toolkit.local_weights import weights_here
    from toolkit.models.arch import DENOISER, GUIDER, SCHEDULER, TOKENIZER
    from toolkit.models.registry import ARCHS
    for e in entries:
        if not e.pop("_detected", False) or not e["complete"]:
            continue
        spec = ARCHS[e["arch"]]
        parts = e.get("parts") or {}
        found, comps, needs, missing = {}, {}, [], []
        # tokenizers last: one may be embedded in the text encoder file picked for its role (UMT5's)
        for c in sorted(spec.components, key=lambda c: c.kind == TOKENIZER or bool(c.built)):
            if c.optional:
                continue
            if c.role in parts:
                if not (c.single_file and c.single_file.config):
                    needs.append(c.role)            # in the file, but its config is not the row's yet
                continue
            if c.kind == DENOISER:
                missing.append((c.role, f"a second {e['arch']} denoiser file ({c.role})"))
                continue
            if c.kind == SCHEDULER:
                if not spec.scheduler_for_files(e["variant"]):
                    needs.append(c.role)
                continue
            if c.kind == GUIDER:
                if c.role not in spec.guider_files:
                    needs.append(c.role)
                continue
            if c.kind == TOKENIZER:
                where = companions.tokenizer_source(c.vocab, [e["path"]]) if c.vocab else None
                encoder = found.get(c.role.replace("tokenizer", "text_encoder", 1))
                if where is None and c.vocab and encoder:
                    where = companions.embedded_tokenizer(c.vocab, encoder["path"])
                if where is None:
                    needs.append(c.role)
                else:
                    found[c.role] = {"path": where[0], "name": where[1], "kind": "tokenizer",
                                     "label": f"{c.vocab} tokenizer"}
                continue
            if c.built:                             # written over the tokenizer (Qwen-Image-Edit's processor)
                tok = next((t for t in spec.components if t.kind == TOKENIZER and t.vocab), None)
                if tok is None or tok.role not in found:
                    needs.append(c.role)
                else:
                    found[c.role] = {"path": None, "name": f"built over the {tok.vocab} tokenizer", "kind": c.kind,
                                     "label": c.role}
                continue
            sf = c.single_file
            if sf is None or not sf.anchors:
                needs.append(c.role)                # no file layout known for it: a diffusers folder gives it
                continue
            picks = companions.candidates(e["arch"], c.role, files, near=e["path"])
            if not picks:
                missing.append((c.role, f"no {sf.label or sf.kind or c.role} file in the text encoder or VAE "
                                        f"folders"))
                continue
            found[c.role] = {**picks[0].public(), "alternatives": [p.name for p in picks[1:]]}
            comps[c.role] = picks[0].path
            if not sf.config:
                needs.append(c.role)                # a file of it, read with a config folder's config
        extras = None
        if needs:
            local = next((o for o in entries if o["kind"] == "pipeline" and o["arch"] == e["arch"] and o["complete"]),
                         None)
            extras = (local["repo"] or local["path"]) if local else \
                spec.default_source(e["variant"]) if weights_here(spec, e["variant"]) else None
            if extras is None:
                repo = spec.default_source(e["variant"])
                missing += [(r, f"{r}'s config comes from a diffusers folder of {e['arch']}, and none is here"
                                + (f" (hf download {repo})" if repo else "")) for r in needs]
        e["companions"] = found
        e["missing_roles"] = [r for r, _why in missing]
        if missing:
            e.update(complete=False, missing=[f"{r}: {why}" for r, why in missing], model=None)
            continue
        model = {"arch": e["arch"], "name_or_path": e["path"], "local_only": True}
        if spec.variants and e["variant"]:
            model["variant"] = e["variant"]
        if comps:
            model["components"] = comps
        if extras:
            model["extras_name_or_path"] = extras
        e["model"] = model


def attach_legacy(entries: list):
    """A denoiser file known by an older layout table (Krea 2): its arch's other components, the first
    complete file of each role from the same library folder (and a tokenizer folder found there)."""
    from toolkit.models.registry import ARCHS
    for e in entries:
        if e["kind"] != "single_file" or not e["arch"] or not e["complete"] or e.get("_extras") or "parts" in e:
            continue
        spec = ARCHS[e["arch"]]
        comps = {e["role"]: e["path"]}
        missing = []
        for c in spec.components:
            if c.role in comps or c.role == "scheduler" or c.optional or c.role in spec.denoiser_roles:
                continue
            same = [o for o in entries if o is not e and o.get("_root") == e.get("_root") and o["complete"]
                    and o["role"] == c.role and (o["arch"] in (e["arch"], None))
                    and ("fits" not in o or {"arch": e["arch"], "role": c.role} in o["fits"])]
            if same:
                comps[c.role] = same[0]["path"]
            else:
                missing.append(c.role)
        if missing:
            e["missing"] = [f"no {r} file for {e['arch']} in this folder" for r in missing]
            e["missing_roles"] = missing
            continue
        e["model"] = {"arch": e["arch"], "local_only": True, "components": comps}
        if e["variant"]:
            e["model"]["variant"] = e["variant"]
