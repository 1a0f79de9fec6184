from toolkit.errors import check_keys


class BaseProcess:
    """One `config.process[i]` entry. Subclasses list their keys in CONFIG_KEYS; `type` is implied."""

    CONFIG_KEYS: tuple[str, ...] = ()
    REQUIRED_KEYS: tuple[str, ...] = ()

    def __init__(self, process_id: int, job, config: dict):
        check_keys(config, ("type",) + tuple(self.CONFIG_KEYS), "", required=self.REQUIRED_KEYS)
        self.process_id = process_id
        self.job = job
        self.config = config

    def get_conf(self, key, default=None):
        value = self.config.get(key)
        return default if value is None else value

    def run(self):
        raise NotImplementedError

    def cleanup(self):
        pass
