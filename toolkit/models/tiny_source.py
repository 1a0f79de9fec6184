"""`tiny:<arch>[:<seed>]` as name_or_path: a tiny random-weight model of that arch, written by
testing/tiny_models.py on first use and cached. It runs anywhere, offline, and makes noise:
it exists so that configs and the engine can be tried without downloading real weights."""
PREFIX = "tiny:"


def is_tiny(name_or_path) -> bool:
    return isinstance(name_or_path, str) and name_or_path.startswith(PREFIX)


def resolve_tiny(name_or_path: str, arch: str) -> str:
    from testing.tiny_models import cached_tiny

    spec = name_or_path[len(PREFIX):]
    name, _, seed = spec.partition(":")
    if name != arch:
        raise ValueError(f"model.name_or_path: {name_or_path!r} names arch {name!r}, but model.arch is {arch!r}")
    if seed and not seed.isdigit():
        raise ValueError(f"model.name_or_path: bad seed in {name_or_path!r}")
    return str(cached_tiny(arch, int(seed or 0)))
