"""Typed settings: one mechanism for the request's sample and stream options, the model config's
plain fields, the engine's limits and the engine's own settings (engine.yaml's `engine:` block).

A Settings class is a frozen dataclass whose fields carry their bounds and choices
(`setting(default, min=..., max=..., choices=...)`). `from_dict(d, where)` is the one place a
mapping becomes one: unknown keys, wrong types, values out of bounds or not among the choices are a
ConfigError naming `where.<field>`; `check(where)` is a class's cross-field rule. `describe()`
serves the same bounds as data (GET /models), so a client reads them instead of copying them.
"""
import functools
import math
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields

from toolkit.errors import ConfigError, check_keys, check_values


@dataclass(frozen=True)
class Bound:
    """What a field takes beyond its type: `min`/`max` (inclusive; `exclusive_min`: > min), and
    `choices` (None among them: the field may be left unset)."""
    min: float | None = None
    max: float | None = None
    exclusive_min: bool = False
    choices: tuple | None = None
    doc: str = ""


def setting(default=MISSING, *, min=None, max=None, exclusive_min=False, choices=None, doc="",
            default_factory=MISSING):
    """A dataclass field with its Bound (dataclasses.field's metadata)."""
    bound = Bound(min, max, exclusive_min, tuple(choices) if choices is not None else None, doc)
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata={"bound": bound})
    return field(default=default, metadata={"bound": bound})


def bound_of(f) -> Bound:
    return f.metadata.get("bound") or Bound()


@functools.cache
def type_hints(cls) -> dict:
    """A settings class's field types, evaluated once per class (from_dict runs on every request)."""
    return typing.get_type_hints(cls)


class Settings:
    """Base of the typed settings classes (frozen dataclasses)."""

    @classmethod
    def from_dict(cls, d, where: str):
        """`d` (a mapping; None: every default) checked and coerced field by field, then `check`."""
        if isinstance(d, cls):
            return d
        if d is None:
            d = {}
        check_keys(d, {f.name for f in fields(cls)}, where)
        hints = type_hints(cls)
        values = {}
        for f in fields(cls):
            if d.get(f.name) is not None:
                values[f.name] = coerce(d[f.name], hints[f.name], f"{where}.{f.name}", bound_of(f))
        obj = cls(**values)
        obj.check(where)
        return obj

    def check(self, where: str):
        """A rule across fields: raise ConfigError naming the field. None by default."""

    @classmethod
    def describe(cls) -> dict:
        """Each field's type and bounds, as GET /models serves them: {name: {type, min, max,
        exclusive_min, choices, nullable, default}} (keys that do not apply left out)."""
        hints = type_hints(cls)
        return {f.name: describe_field(hints[f.name], bound_of(f), _default(f)) for f in fields(cls)
                if not f.name.startswith("_")}

    def to_dict(self) -> dict:
        return asdict(self)


def _default(f):
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


TYPE_NAMES = {bool: "bool", int: "int", float: "float", str: "str", dict: "object", list: "list", tuple: "list"}


def base_type(typ):
    """(the type a value must have, whether None is allowed) of an annotation: `int`, `str | None`."""
    nullable = False
    if isinstance(typ, types.UnionType) or typing.get_origin(typ) is typing.Union:
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(typ))
        typ = args[0] if len(args) == 1 else object
    return typing.get_origin(typ) or typ, nullable


def describe_field(typ, bound: Bound, default=None) -> dict:
    typ, nullable = base_type(typ)
    if isinstance(typ, type) and issubclass(typ, Settings):
        return {"type": "object", "fields": typ.describe()}
    out = {"type": TYPE_NAMES.get(typ, "any")}
    for key in ("min", "max"):
        if getattr(bound, key) is not None:
            out[key] = getattr(bound, key)
    if bound.exclusive_min:
        out["exclusive_min"] = True
    if bound.choices is not None:
        out["choices"] = [c for c in bound.choices if c is not None]
        nullable = nullable or None in bound.choices
    if nullable:
        out["nullable"] = True
    if isinstance(default, (bool, int, float, str)):
        out["default"] = default
    return out


def coerce(value, typ, key: str, bound: Bound = Bound()):
    """`value` as `typ` (what YAML or JSON give for it: an int for a float, a whole float for an
    int), within `bound`; else a ConfigError naming `key`."""
    typ, _nullable = base_type(typ)
    if isinstance(typ, type) and issubclass(typ, Settings):
        return typ.from_dict(value, key)
    if typ is bool:
        if not isinstance(value, bool):
            raise ConfigError(key, f"must be true or false, got {value!r}")
    elif typ is int:
        # NaN, Infinity and 1e999 (JSON's overflow) are floats int() refuses with ValueError/OverflowError
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or isinstance(value, float) and (not math.isfinite(value) or value != int(value))):
            raise ConfigError(key, f"must be an integer, got {value!r}")
        value = int(value)
    elif typ is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(key, f"must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(key, f"must be finite, got {value!r}")
        value = float(value)
    elif typ is str:
        if not isinstance(value, str):
            raise ConfigError(key, f"must be a string, got {value!r}")
        check_values(value, key)        # a lone surrogate never reaches a log, a file or a tokenizer
    elif typ in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(key, f"must be a list, got {type(value).__name__}")
        check_values(value, key)
    elif typ is dict:
        if not isinstance(value, dict):
            raise ConfigError(key, f"must be a mapping, got {type(value).__name__}")
        check_values(value, key)
    return check_bound(value, bound, key)


def check_bound(value, bound: Bound, key: str):
    if bound.choices is not None and value not in bound.choices:
        shown = ", ".join(str(c) for c in bound.choices if c is not None)
        raise ConfigError(key, f"must be one of {shown}, got {value!r}")
    if bound.min is not None and (value <= bound.min if bound.exclusive_min else value < bound.min):
        raise ConfigError(key, f"must be {'>' if bound.exclusive_min else '>='} {_num(bound.min)}, got {value!r}")
    if bound.max is not None and value > bound.max:
        raise ConfigError(key, f"must be <= {_num(bound.max)}, got {value!r}")
    return value


def _num(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
