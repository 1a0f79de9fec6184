"""Shared code never names an arch: what differs between archs is a field of its row
(toolkit/models/arch.py ArchSpec), set in its own file under toolkit/models/archs/. A quoted arch
name anywhere else in production code is a branch or a table keyed by arch, which drifts from the
rows (docs and comments included: they describe such a table)."""
import os
import re

from toolkit.models.registry import ARCHS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRODUCTION = ("toolkit", "extensions_built_in", "jobs")
ARCH_FILES = os.path.join(ROOT, "toolkit", "models", "archs")


def _production_files():
    yield os.path.join(ROOT, "run.py")
    for pkg in PRODUCTION:
        for folder, dirs, files in os.walk(os.path.join(ROOT, pkg)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))
                       and os.path.join(folder, d) != ARCH_FILES]
            yield from (os.path.join(folder, f) for f in files if f.endswith(".py"))


def test_no_quoted_arch_name_outside_the_arch_files():
    quoted = re.compile(r"""(?<!\w)["'](%s)["'](?!\w)""" % "|".join(re.escape(a) for a in sorted(ARCHS)))
    found = []
    for path in _production_files():
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                found += [f"{os.path.relpath(path, ROOT)}:{n}: {m[1]}" for m in quoted.finditer(line)]
    assert len(ARCHS) >= 20 and not found, "arch names outside toolkit/models/archs/:\n" + "\n".join(found)


def test_aliases_name_one_arch_each():
    """A profile's `architecture` resolves to one arch (toolkit/profiles.py): no alias is an arch's
    name or another arch's alias."""
    from toolkit.profiles import arch_named
    aliases = [(alias, a) for a in ARCHS for alias in ARCHS[a].aliases]
    names = [alias for alias, _ in aliases]
    assert aliases and len(set(names)) == len(names) and not set(names) & set(ARCHS)
    assert all(arch_named(alias) == a for alias, a in aliases) and arch_named("nope") == "nope"
