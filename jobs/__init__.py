from toolkit.errors import ConfigError
from toolkit.job_config import load_job_config
from toolkit.offline import go_offline

JOB_TYPES = {"extension": "jobs.ExtensionJob:ExtensionJob"}


def get_job(config_path: str):
    """Load `config_path` and build its job (validating every process config up front)."""
    config = load_job_config(config_path)
    if any(isinstance(p, dict) and (p.get("offline") or p.get("profiles_file") or
                                    (p.get("engine") or {}).get("profiles_file"))
           for p in config["config"]["process"]):
        go_offline()
    target = JOB_TYPES.get(config["job"])
    if target is None:
        raise ConfigError("job", f"unknown job {config['job']!r} (known: {', '.join(JOB_TYPES)})", file=config_path)
    module, cls = target.split(":")
    job_cls = getattr(__import__(module, fromlist=[cls]), cls)
    return job_cls(config, config_path)
