"""Errors a user can act on: each names where the problem is."""


class ConfigError(ValueError):
    """A bad config value. `key` is the dotted path of the field (e.g. `sample.width`),
    `file` the config file it came from, when there is one."""

    def __init__(self, key: str, message: str, file: str | None = None):
        self.key = key
        self.message = message
        self.file = file
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = f"{self.file}: " if self.file else ""
        return f"{where}{self.key}: {self.message}" if self.key else f"{where}{self.message}"

    def under(self, prefix: str, file: str | None = None) -> "ConfigError":
        """The same error, re-rooted under `prefix` (and attributed to `file`)."""
        key = f"{prefix}.{self.key}" if prefix and self.key else (prefix or self.key)
        return ConfigError(key, self.message, file or self.file)


def check_keys(d, allowed, where: str, required=()) -> dict:
    """`d` must be a mapping whose keys are all in `allowed` and include `required`."""
    if not isinstance(d, dict):
        raise ConfigError(where, f"expected a mapping, got {type(d).__name__}")
    for k in d:
        if k not in allowed:
            raise ConfigError(_join(where, k), f"unknown key (allowed: {', '.join(sorted(allowed))})")
    for k in required:
        if d.get(k) is None:
            raise ConfigError(_join(where, k), "is required")
    return d


def _join(where: str, key) -> str:
    return f"{where}.{key}" if where else str(key)


def check_values(value, where: str):
    """What JSON (or YAML, or a file's metadata) may carry that no field accepts anywhere: a string
    that is not valid Unicode (a lone surrogate, as `"\\ud800"` decodes to) and a number that is not
    finite (NaN, Infinity, 1e999). A lone surrogate cannot be written as UTF-8, so it would fail only
    later, in a log line, a file's metadata or a tokenizer; a non-finite number fails an integer field
    or the JSON of an answer. ConfigError names the first one's path (`where.key[i]`)."""
    stack = [(value, where)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, str):
            if not _is_unicode(v):
                raise ConfigError(at, "is not valid Unicode text (it holds a lone surrogate, such as \\ud800)")
        elif isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                raise ConfigError(at, f"must be a finite number, got {v!r}")
        elif isinstance(v, dict):
            for k, item in reversed(list(v.items())):
                if isinstance(k, str) and not _is_unicode(k):
                    raise ConfigError(at, "holds a key that is not valid Unicode text (a lone surrogate)")
                stack.append((item, _join(at, k)))
        elif isinstance(v, (list, tuple)):
            stack.extend((item, f"{at}[{i}]") for i, item in reversed(list(enumerate(v))))


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
