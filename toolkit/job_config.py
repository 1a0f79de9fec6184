"""Reading a job config file (YAML or JSON) into a validated dict."""
import json
import os

import yaml

from toolkit.errors import ConfigError, check_keys

TOP_KEYS = ("job", "config", "meta")
CONFIG_KEYS = ("name", "process")


def load_job_config(path: str) -> dict:
    """Parse `path`; the result has `job`, `config.name` and a non-empty `config.process` list.
    Every `[name]` inside string values is replaced by `config.name`."""
    if not os.path.isfile(path):
        raise ConfigError("", "no such config file", file=path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        if path.lower().endswith(".json"):
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise ConfigError("", f"malformed file: {_first_line(e)}", file=path) from None
    try:
        check_keys(data, TOP_KEYS, "", required=("job", "config"))
        check_keys(data["config"], CONFIG_KEYS, "config", required=("name", "process"))
        procs = data["config"]["process"]
        if not isinstance(procs, list) or not procs:
            raise ConfigError("config.process", "must be a non-empty list")
        for i, p in enumerate(procs):
            where = f"config.process[{i}]"
            if not isinstance(p, dict):
                raise ConfigError(where, "must be a mapping")
            if not p.get("type"):
                raise ConfigError(f"{where}.type", "is required")
    except ConfigError as e:
        raise e.under("", file=path) from None
    return _replace_name(data, str(data["config"]["name"]))


def _replace_name(obj, name):
    if isinstance(obj, str):
        return obj.replace("[name]", name)
    if isinstance(obj, list):
        return [_replace_name(v, name) for v in obj]
    if isinstance(obj, dict):
        return {k: _replace_name(v, name) for k, v in obj.items()}
    return obj


def _first_line(e: Exception) -> str:
    return " ".join(str(e).split())
