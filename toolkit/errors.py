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
