"""The import graph of the project's own code: production never imports testing/, and no two
modules import each other, directly or around a longer circle (function-level imports count).
The registry's importlib lookup of arch files by name is not an edge: it is how arch files are
collected, not a dependency of the registry on any one of them."""
import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ("toolkit", "extensions_built_in", "jobs", "testing")


def _modules() -> dict:
    """module name -> file, for every .py file of the project's packages and run.py."""
    out = {"run": os.path.join(ROOT, "run.py")}
    for pkg in PACKAGES:
        for folder, dirs, files in os.walk(os.path.join(ROOT, pkg)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
            for f in files:
                if f.endswith(".py"):
                    rel = os.path.relpath(os.path.join(folder, f), ROOT)[:-3].replace(os.sep, ".")
                    out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(folder, f)
    return out


def _edges(modules: dict) -> dict:
    """module -> the project modules it imports (the longest project module each import names)."""
    graph = {}
    for name, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                # `from pkg import module` uses the module; `from pkg import name` uses pkg
                for a in node.names:
                    targets.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
        resolved = set()
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != name:
                resolved.add(t)
        graph[name] = resolved
    return graph


def _cycles(graph: dict) -> list:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    cycles = _cycles(_edges(_modules()))
    assert not cycles, f"import circles: {cycles}"


def test_production_never_imports_testing():
    graph = _edges(_modules())
    bad = {m: sorted(t for t in targets if t == "testing" or t.startswith("testing."))
           for m, targets in graph.items() if not (m == "testing" or m.startswith("testing."))}
    assert not {m: t for m, t in bad.items() if t}


def test_registry_rows_load_without_torch():
    """Every arch file is data plus a holder class: collecting the whole registry, its public rows
    and the profile/inspection tables imports no torch, diffusers or transformers."""
    code = ("import sys, json\n"
            "from toolkit.models.registry import ARCHS\n"
            "rows = [ARCHS[a].public() for a in ARCHS]\n"
            "json.dumps(rows)\n"
            "import toolkit.file_report, toolkit.profiles, toolkit.config_modules\n"
            "toolkit.file_report.architectures()\n"
            "heavy = sorted(m for m in ('torch', 'diffusers', 'transformers') if m in sys.modules)\n"
            "print(len(rows), heavy)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    count, heavy = p.stdout.split(" ", 1)
    assert int(count) >= 6 and heavy.strip() == "[]", p.stdout
