"""Checkpoint inspection: what a component file (or folder) is, without loading it.

    python -m toolkit.file_report PATH [PATH ...] [--json] [--architecture krea2]
    python -m toolkit.file_report --profiles profiles.toml krea2-turbo [--json]
    python -m toolkit.file_report diffusion_model=/m/krea2_turbo_fp8_scaled.safetensors \\
        text_encoder=/m/qwen3vl_4b_fp8_scaled.safetensors vae=/m/qwen_image_vae.safetensors \\
        tokenizer=/m/qwen25_tokenizer --architecture krea2

A PATH may be `role=path` (roles: diffusion_model, transformer, text_encoder, vae, tokenizer). With
--architecture, each component also says whether it fits that role of the architecture.

For each safetensors file: path, checkpoint prefix (e.g. `model.diffusion_model.`), tensor count,
dtype counts, detected architecture (an arch's own `file_layouts`, else the arch rows' detector,
toolkit/models/formats/detect.py) and layout, format (comfy_scaled_fp8, bf16 original, f32
diffusers, ...), quantized-layer count, full_precision_matrix_mult count, missing-scale count,
unsupported formats, ignored keys (e.g. a Qwen3-VL vision tower), the first problems the readers
would reject. For a tokenizer folder: which of vocab.json / merges.txt / tokenizer_config.json
(and tokenizer.json) are present. For a diffusers folder: each component's weight files.

What is read: only each file's safetensors header (its JSON) and metadata, parsed here with plain
file I/O, plus the bytes of ComfyUI's tiny `comfy_quant` marker tensors (a few dozen bytes of
JSON each, read by seeking to them; larger tensors are refused). No tensor is ever materialised,
torch is not imported, so CUDA is never initialised. The quantization audit is the readers' own
(`toolkit.models.formats.quant`); key-by-key accounting against the module needs the module, so
only the readers do that (an unexpected or missing key shows up when loading, not here).

A profile name (with --profiles FILE) inspects that profile's component paths against its
architecture.

Importable: `inspect_file(path) -> dict`, `inspect_paths(paths, architecture=None) -> dict`
(paths: a list of paths / "role=path" strings, or a {role: path} dict), and
`inspect_profile(profile) -> dict` for a `toolkit.profiles.ModelProfile` (what the engine's
GET /inspect/{profile} returns).
"""
import argparse
import json
import os
import sys

from toolkit.models.arch import load_object
from toolkit.models.formats import quant
from toolkit.models.formats.detect import detect
from toolkit.models.formats.safetensors_header import FP8_DTYPES, HeaderError, dtype_counts, read_header

TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json")
ROLES = ("diffusion_model", "transformer", "text_encoder", "vae", "tokenizer", "checkpoint")
_DTYPE_NAMES = {"BF16": "bf16", "F16": "f16", "F32": "f32", "F64": "f64"}
MAX_PROBLEMS = 10
MAX_IGNORED = 5
UNKNOWN = {"architecture": "unknown", "layout": "unknown", "prefix": "", "ignore_prefixes": ()}


def architectures() -> dict:
    """arch -> {profile key: detected formats it accepts}, for the archs that declare them."""
    from toolkit.models.registry import ARCHS
    return {name: ARCHS[name].checkpoint_formats for name in ARCHS if ARCHS[name].checkpoint_formats}


def _file_layouts() -> list:
    """The arch rows' own file layouts (FileLayouts), in registry order."""
    from toolkit.models.registry import ARCHS
    return [ARCHS[name].file_layouts for name in ARCHS if ARCHS[name].file_layouts is not None]


def labels() -> dict:
    """Detected kind -> what it says to a person, over every row's own file layouts."""
    out = {UNKNOWN["architecture"]: "unknown"}
    for fl in _file_layouts():
        out.update(fl.labels)
    return out


def _own_layout(header, shapes):
    """(detection, FileLayouts) by the first row whose own layouts know the file, else (UNKNOWN, None)."""
    for fl in _file_layouts():
        det = load_object(fl.detect)(header.tensors, shapes)
        if det is not None:
            return det, fl
    return dict(UNKNOWN), None


def _sizes(header, det, fl) -> dict:
    """Width/depth from shapes, and whether they are the real model's (the detecting row's rule)."""
    if fl is None:
        return {}
    p, t = det["prefix"], header.tensors

    def shape(k):
        info = t.get(p + k)
        return info.shape if info is not None else None

    def count(fmt):
        n = 0
        while any(k.startswith(p + fmt.format(n)) for k in t):
            n += 1
        return n
    return load_object(fl.sizes)(det, shape, count)


def inspect_file(path: str) -> dict:
    """Everything `python -m toolkit.file_report` reports about one safetensors file (see module doc)."""
    path = os.path.expanduser(str(path))
    if path.lower().endswith(".gguf"):
        from toolkit.models.formats.gguf_header import inspect_gguf
        return inspect_gguf(path)
    out = {"path": os.path.abspath(path), "kind": "safetensors"}
    if not os.path.isfile(path):
        out["error"] = "no such file"
        return out
    try:
        header = read_header(path)
    except HeaderError as e:
        out["error"] = str(e)
        return out
    shapes = {k: v.shape for k, v in header.tensors.items()}
    det, own = _own_layout(header, shapes)
    found = detect(header) if own is None else None      # the arch rows' detector
    single = None
    if found is not None and found.denoiser is not None:
        d = found.denoiser
        single = {"arch": found.arch, "role": d.role, "prefix": d.prefix}
        what = f"checkpoint ({', '.join(found.parts)})" if found.all_in_one else d.role
        det = {"architecture": f"{found.arch} {what}", "layout": "original", "prefix": d.prefix, "ignore_prefixes": ()}
    elif found is not None and found.kinds:
        det = {"architecture": found.kinds[0][0], "layout": "original", "prefix": "", "ignore_prefixes": ()}
    prefix = det["prefix"]
    manifest, problems = quant.parse_manifest(header, prefix, det["ignore_prefixes"])
    result = quant.audit(header, manifest, prefix=prefix, ignore_prefixes=det["ignore_prefixes"])
    problems = problems + result.problems
    counts = dtype_counts(header)
    out.update({
        "size_bytes": header.file_size,
        "prefix": prefix,
        "tensor_count": len(header.tensors),
        "dtype_counts": counts,
        "architecture": det["architecture"],
        "architecture_label": labels().get(det["architecture"], det["architecture"]) if not
        (found and found.kinds and not single) else found.kinds[0][1],
        "arch": single["arch"] if single else None, "role": single["role"] if single else None,
        "layout": det["layout"],
        "detection": found.public() if found is not None else None,
        "sizes": _sizes(header, det, own),
        "quantization": {"sources": list(manifest.sources), "formats": manifest.formats()},
        "quantized_layers": len(result.quantized),
        "full_precision_matrix_mult": sum(1 for s in result.quantized.values() if s.full_precision_matrix_mult),
        "missing_scales": sum(1 for p in problems if p.kind == quant.MISSING_SCALE),
        "unsupported_formats": dict(sorted(result.unsupported_formats.items())),
        "ignored_keys": len(result.ignored),
        "ignored_key_examples": result.ignored[:MAX_IGNORED],
        "problem_count": len(problems),
        "problems": [p.message for p in problems[:MAX_PROBLEMS]],
        "metadata_keys": sorted(header.metadata),
    })
    out["format"] = _format(out, counts, manifest, result, det)
    out["summary"] = summary(out)
    return out


FORMAT_LABELS = {"comfy_scaled_fp8": "ComfyUI scaled FP8 (e4m3fn)"}


def summary(report: dict) -> str:
    """One line: what the file is, its format and quantization, its size ("wan21 transformer, ComfyUI
    scaled FP8 (e4m3fn), 11.9 GB")."""
    base, _, rest = (report.get("format") or "unknown").partition(" (")
    label = FORMAT_LABELS.get(base, base) + (f" ({rest}" if rest else "")
    size = report.get("size_bytes") or 0
    return f"{report.get('architecture_label') or 'unknown'}, {label}, {_human(size)}"


def _human(n: int) -> str:
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def _format(out, counts, manifest, result, det) -> str:
    if manifest.layers:
        if set(manifest.formats()) == {quant.SUPPORTED_FORMAT}:
            n = out["problem_count"]
            return "comfy_scaled_fp8" + (f" (rejected: {n} problem{'s' if n > 1 else ''})" if n else "")
        return "unsupported quantization (" + ", ".join(f"{k} x{v}" for k, v in manifest.formats().items()) + ")"
    if any(d in counts for d in FP8_DTYPES):
        return "fp8 without quantization metadata (unsupported)"
    floats = {d: n for d, n in counts.items() if d in _DTYPE_NAMES}
    if not floats:
        return "unknown"
    main = _DTYPE_NAMES[max(floats, key=floats.get)]
    if out["unsupported_formats"]:
        return f"{main} {det['layout']} with unsupported storage"
    return f"{main} {det['layout']}"


def inspect_folder(path: str) -> dict:
    path = os.path.expanduser(str(path))
    names = set(os.listdir(path))
    if "model_index.json" in names:
        comps = {}
        for name in sorted(names):
            sub = os.path.join(path, name)
            if os.path.isdir(sub):
                comps[name] = _inspect_dir_contents(sub)
        return {"path": os.path.abspath(path), "kind": "diffusers_pipeline", "components": comps}
    if names & set(TOKENIZER_FILES + ("tokenizer.json",)):
        return inspect_tokenizer(path)
    return _inspect_dir_contents(path)


def _inspect_dir_contents(path: str) -> dict:
    names = sorted(os.listdir(path))
    if set(names) & set(TOKENIZER_FILES + ("tokenizer.json",)):
        return inspect_tokenizer(path)
    files = [inspect_file(os.path.join(path, n)) for n in names if n.endswith((".safetensors", ".gguf"))]
    return {"path": os.path.abspath(path), "kind": "folder", "files": files,
            "configs": [n for n in names if n.endswith(".json")]}


def inspect_tokenizer(path: str) -> dict:
    path = os.path.expanduser(str(path))
    present = {n: os.path.isfile(os.path.join(path, n)) for n in TOKENIZER_FILES + ("tokenizer.json",)}
    # complete: the three files a ComfyUI/Qwen tokenizer folder has (what Qwen2Tokenizer needs), or
    # a saved tokenizer.json with its tokenizer_config.json (a diffusers/transformers folder)
    out = {"path": os.path.abspath(path), "kind": "tokenizer", "files": present,
           "complete": all(present[n] for n in TOKENIZER_FILES)
           or (present["tokenizer.json"] and present["tokenizer_config.json"])}
    cfg = os.path.join(path, "tokenizer_config.json")
    if present["tokenizer_config.json"]:
        try:
            with open(cfg, encoding="utf-8") as f:
                doc = json.load(f)
            out["tokenizer_class"] = doc.get("tokenizer_class")
            out["pad_token"] = doc.get("pad_token")
            out["added_tokens"] = len(doc.get("added_tokens_decoder") or {})
        except (OSError, ValueError) as e:
            out["error"] = f"tokenizer_config.json: {e}"
    missing = [n for n in TOKENIZER_FILES if not present[n]]
    if missing and not out["complete"]:
        out["missing"] = missing
    return out


def inspect_path(path: str) -> dict:
    p = os.path.expanduser(str(path))
    if os.path.isdir(p):
        return inspect_folder(p)
    return inspect_file(p)


def _split_role(item):
    if isinstance(item, (tuple, list)):
        return item[0], item[1]
    item = str(item)
    role, sep, rest = item.partition("=")
    if sep and role in ROLES:
        return role, rest
    return None, item


def compatibility(report: dict, role: str | None, architecture: str) -> tuple[bool, str]:
    """Whether a component report fits `role` of `architecture` (e.g. krea2), and why not."""
    roles = architectures().get(architecture)
    if report.get("error"):
        return False, report["error"]
    if roles is None:
        return None, f"no compatibility rules for architecture {architecture!r}"
    if role == "checkpoint":
        return False, f"{architecture} needs separate component files (diffusion_model, text_encoder, vae, tokenizer)"
    if role == "tokenizer" or report.get("kind") == "tokenizer":
        if report.get("kind") != "tokenizer":
            return False, "not a tokenizer folder"
        return (True, "tokenizer files present") if report.get("complete") else \
            (False, "tokenizer folder lacks " + ", ".join(report.get("missing", [])))
    if report.get("kind") != "safetensors":
        return False, "expected a single .safetensors file"
    wanted = roles.get(role) if role else tuple(a for archs in roles.values() for a in archs)
    if wanted is None:
        return False, f"{architecture} has no component {role!r}"
    if report["architecture"] not in wanted:
        return False, f"detected {report['architecture_label']}, {role or architecture} needs " + \
            " or ".join(labels()[a] for a in wanted)
    if report["problem_count"]:
        return False, report["problems"][0]
    return True, "ok"


def inspect_paths(paths, architecture: str | None = None) -> dict:
    """Inspect several components. `paths`: [path | "role=path"] or {role: path}."""
    items = list(paths.items()) if isinstance(paths, dict) else [_split_role(p) for p in paths]
    components = []
    for role, path in items:
        report = inspect_path(path)
        if role:
            report["role"] = role
        if architecture:
            ok, why = compatibility(report, role, architecture)
            report["compatible"] = ok
            report["compatibility"] = why
        components.append(report)
    out = {"components": components}
    if architecture:
        out["architecture"] = architecture
        out["compatible"] = _all_compatible(components)
    return out


def _all_compatible(components):
    flags = [c.get("compatible") for c in components]
    if any(f is False for f in flags):
        return False
    return None if any(f is None for f in flags) or not flags else True


def inspect_profile(profile) -> dict:
    """Inspect a model profile's components (a `toolkit.profiles.ModelProfile`: name, architecture,
    variant, components {role: path}, checkpoint) against its architecture."""
    items = list((getattr(profile, "components", None) or {}).items())
    if getattr(profile, "checkpoint", None):
        items.append(("checkpoint", profile.checkpoint))
    result = inspect_paths(items, architecture=profile.architecture)
    out = {"profile": profile.name, "architecture": profile.architecture,
           "variant": getattr(profile, "variant", None)}
    out.update(result)
    if not items:
        out["compatible"] = False
        out["compatibility"] = "the profile names no component files"
    return out


# -- text output ------------------------------------------------------------------------------------
def _format_report(r: dict, indent: str = "") -> list:
    lines = [f"{indent}{r['path']}" + (f"  [{r['role']}]" if r.get("role") else "")]
    ind = indent + "  "
    if r.get("error"):
        lines.append(f"{ind}error: {r['error']}")
    elif r["kind"] == "tokenizer":
        files = ", ".join(f"{n} {'yes' if ok else 'NO'}" for n, ok in r["files"].items())
        cls = f"; class {r['tokenizer_class']}" if r.get("tokenizer_class") else ""
        lines.append(f"{ind}tokenizer: {files}{cls}")
    elif r["kind"] == "diffusers_pipeline":
        lines.append(f"{ind}diffusers pipeline folder")
        for name, comp in r["components"].items():
            lines.append(f"{ind}{name}:")
            for sub in ([comp] if comp.get("kind") == "tokenizer" else comp.get("files", [])):
                lines += _format_report(sub, ind + "  ")
    elif r["kind"] == "gguf":
        lines.append(f"{ind}{r['summary']}")
        types = ", ".join(f"{k} {v}" for k, v in r["tensor_types"].items())
        lines.append(f"{ind}general.architecture: {r['gguf_architecture']}; tensors: {r['tensor_count']} ({types})")
    elif r["kind"] == "folder":
        for sub in r["files"]:
            lines += _format_report(sub, ind)
    else:
        sizes = ", ".join(f"{k} {v}" for k, v in r["sizes"].items() if k != "reference")
        ref = " (the real model's size)" if r["sizes"].get("reference") else (" (reduced size)" if sizes else "")
        lines.append(f"{ind}architecture: {r['architecture_label']} ({r['layout']} keys)"
                     + (f", {sizes}{ref}" if sizes else ""))
        lines.append(f"{ind}prefix: {r['prefix'] or '(none)'}")
        src = ", ".join({"metadata": "_quantization_metadata"}.get(s, s) for s in r["quantization"]["sources"])
        lines.append(f"{ind}format: {r['format']}" + (f" (markers: {src})" if src else ""))
        dtypes = ", ".join(f"{k} {v}" for k, v in r["dtype_counts"].items())
        lines.append(f"{ind}tensors: {r['tensor_count']} ({dtypes})")
        lines.append(f"{ind}quantized layers: {r['quantized_layers']} (full_precision_matrix_mult "
                     f"{r['full_precision_matrix_mult']}), missing scales: {r['missing_scales']}")
        unsup = ", ".join(f"{k} x{v}" for k, v in r["unsupported_formats"].items()) or "none"
        lines.append(f"{ind}unsupported formats: {unsup}")
        lines.append(f"{ind}ignored keys: {r['ignored_keys']}"
                     + (f" (e.g. {', '.join(r['ignored_key_examples'][:3])})" if r["ignored_keys"] else ""))
        if r["problem_count"]:
            lines.append(f"{ind}problems ({r['problem_count']}):")
            lines += [f"{ind}  - {m}" for m in r["problems"]]
    if "compatible" in r:
        verdict = {True: "yes", False: "NO", None: "unknown"}[r["compatible"]]
        lines.append(f"{ind}compatible: {verdict} ({r['compatibility']})")
    return lines


def format_text(result: dict) -> str:
    lines = []
    for r in result["components"]:
        lines += _format_report(r)
    if "profile" in result:
        lines.insert(0, f"profile {result['profile']}: {result['architecture']}"
                     + (f" {result['variant']}" if result.get("variant") else ""))
    if "compatible" in result:
        verdict = {True: "yes", False: "NO", None: "unknown"}[result["compatible"]]
        lines.append(f"all components compatible with {result['architecture']}: {verdict}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m toolkit.file_report",
                                 description="Inspect checkpoint files from their headers only (no tensor data).")
    ap.add_argument("paths", nargs="+", help="a file or folder, role=path (roles: " + ", ".join(ROLES) + "), "
                    "or a profile name from --profiles")
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--architecture", choices=sorted(architectures()), help="check each component against it")
    ap.add_argument("--profiles", metavar="FILE", help="a profiles file (TOML/YAML) whose profile names may be given")
    args = ap.parse_args(argv)
    profiles = None
    if args.profiles:
        from toolkit.errors import ConfigError
        from toolkit.profiles import load_profiles
        try:
            profiles = load_profiles(args.profiles)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    results, paths = [], []
    for item in args.paths:
        if profiles is not None and item in profiles.profiles:
            results.append(inspect_profile(profiles.get(item)))
        else:
            paths.append(item)
    if paths:
        results.append(inspect_paths(paths, architecture=args.architecture))
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=2))
    else:
        print("\n".join(format_text(r) for r in results))
    failed = any(c.get("error") for r in results for c in r["components"])
    if any(r.get("compatible") is False for r in results):
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
