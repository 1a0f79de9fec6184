"""The job log: one line per thing that happened in the engine, printed to the job process's stdout
(the file the UI's job log link shows), as the start/listening/stopped lines are. No torch here:
loads, evictions and LoRA adapter loads are read from the difference between two of the worker's
State messages (its pool's counters and entries), the only thing that reaches the engine about them.

Lines (docs/engine.md, "The job log"):
  worker ready in <seconds>s (its imports <seconds>s)
  request <id> <status> <arch> <model> <W>x<H> <steps> steps <seconds>s prompt="<first 60 chars>"
      stages worker=<s>s queue=<s>s load=<s>s encode=<s>s sample=<s>s decode=<s>s save=<s>s [error: ...|cancelled ...]
  load <arch> <model> <bytes> bytes <seconds>s pool hits <n> misses <n> placement <role>=<p> ...
      [components <role>=<s>s ...] [for request <id>]
  retry <id> out of memory in the <stage> stage of <model>; retrying once with placement <role>=<p> ... (<rung>)
  evict <role> <class> <bytes> bytes (memory|released)
  lora load <file name> <bytes> bytes [for request <id>]
  worker restart: <reason>
Model names are repo ids or `tiny:<arch>` as given; a local path shows only its basename.
Prompts are cut to PROMPT_CHARS: enough to find a request by its prompt, not a full copy of it.
Seconds are the monotonic clock's (stages.py).
"""
import json
import os
import re

from extensions_built_in.inference_engine.stages import components_part, log_part

PROMPT_CHARS = 60


def emit(line: str):
    """Print one line. Never raises: a line that cannot be written (text that is not valid Unicode,
    a closed or full stdout) costs that line only, never the engine that logs it."""
    try:
        try:
            print(line, flush=True)
        except UnicodeEncodeError:          # a lone surrogate, or a stdout that is not UTF-8
            print(line.encode("ascii", "backslashreplace").decode("ascii"), flush=True)
    except Exception:            # noqa: BLE001 - the log is bookkeeping: it may fail, the engine goes on
        pass


def model_name(name_or_path: str | None) -> str:
    """A repo id or tiny:<arch> as given; anything that is a local path by its basename only."""
    if not name_or_path:
        return "-"
    expanded = os.path.expanduser(name_or_path)
    if (os.path.isabs(expanded) or name_or_path.startswith((".", "~")) or os.sep in name_or_path.strip(os.sep)
            and os.path.exists(expanded)):
        return os.path.basename(os.path.normpath(expanded)) or "-"
    return name_or_path


def model_label(mc) -> str:
    """A ModelConfig's name for a log line: its profile, else its weights' name."""
    if mc is None:
        return "-"
    return mc.profile or model_name(mc.name_or_path)


def prompt(text: str | None) -> str:
    text = text or ""
    cut = text[:PROMPT_CHARS] + ("…" if len(text) > PROMPT_CHARS else "")
    return json.dumps(cut, ensure_ascii=False)      # quoted, newlines escaped: one line per request


def request_line(req) -> str:
    """`req`: a finished engine.Request; its seconds from its start (or acceptance) to its end."""
    s, mc = req.sample, req.model
    began = req.started_mono if req.started_mono is not None else req.accepted_mono
    seconds = max(0.0, (req.finished_mono if req.finished_mono is not None else began) - began)
    line = (f"request {req.request_id} {req.status} {mc.arch} {model_label(mc)} "
            f"{s.width}x{s.height} {s.num_inference_steps} steps {seconds:.2f}s prompt={prompt(s.prompt)}"
            f"{log_part(getattr(req, 'stages', None))}")
    if req.status == "cancelled":
        by = getattr(req, "cancelled_by", None)
        line += f" cancelled by {by}" if by else " cancelled"
        if req.error and req.error != "cancelled":
            line += f" ({_one_line(req.error)})"
    elif req.status == "error":
        line += f" error: {_one_line(req.error or 'error')}"
    return line


def state_lines(prev, new, request_id: str | None = None) -> list[str]:
    """What the worker did between two State messages (messages.State; `prev` None: nothing known)."""
    if prev is None:
        return []
    lines = []
    p, n = prev.pool or {}, new.pool or {}
    suffix = f" for request {request_id}" if request_id else ""
    if new.builds > prev.builds:
        lines.append(f"load {new.active.arch if new.active else '-'} {model_label(new.active)} "
                     f"{n.get('loaded_bytes', 0) - p.get('loaded_bytes', 0)} bytes "
                     f"{n.get('load_seconds', 0) - p.get('load_seconds', 0):.2f}s "
                     f"pool hits {n.get('hits', 0) - p.get('hits', 0)} misses {n.get('misses', 0) - p.get('misses', 0)}"
                     f"{placement_part(new)}{components_part((n.get('last_build') or {}).get('seconds'))}{suffix}")
    kept = {e["key"] for e in n.get("entries", [])}
    why = "memory" if n.get("evictions", 0) > p.get("evictions", 0) else "released"
    for e in p.get("entries", []):
        if e["key"] not in kept:
            lines.append(f"evict {e.get('role') or '-'} {e.get('class', '-')} {e.get('bytes', 0)} bytes ({why})")
    if n.get("adapter_loads", 0) > p.get("adapter_loads", 0):
        known = {a["key"] for a in p.get("adapters", [])}
        for a in n.get("adapters", []):
            if a["key"] not in known:
                lines.append(f"lora load {model_name(a.get('name'))} {a.get('bytes', 0)} bytes{suffix}")
    return lines


def placement_part(state) -> str:
    """` placement transformer=layers:1 text_encoder=cpu_cache ...` of a State (empty when unknown)."""
    summary = (getattr(state, "placement", None) or {}).get("summary")
    return f" placement {summary}" if summary else ""


def retry_line(request_id: str, message: str) -> str:
    return f"retry {request_id} {_one_line(message)}"


def worker_ready_line(seconds: float, boot: dict) -> str:
    """The generation worker answers: `seconds` from its spawn; `boot` its own account (messages.State)."""
    imports = f" (its imports {boot['imports']:.2f}s)" if boot.get("imports") is not None else ""
    return f"worker ready in {seconds:.2f}s{imports}"


def worker_restart_line(reason: str) -> str:
    return f"worker restart: {_one_line(reason)}"


_ABS_PATH = re.compile(r"(?<![\w.:/~])[~]?/(?:[^\s'\"/]+/)+([^\s'\"/]*)")


def _one_line(text: str) -> str:
    """One line, absolute paths (a loader's error names the file) cut to their basename."""
    return _ABS_PATH.sub(r"\1", " ".join(str(text).split()))
