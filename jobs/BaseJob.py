class BaseJob:
    """A parsed job config. Subclasses turn `config.process[*]` into process objects and run them."""

    def __init__(self, config: dict, config_path: str | None = None):
        self.raw = config
        self.config = config["config"]
        self.meta = config.get("meta") or {}
        self.name = str(self.config["name"])
        self.config_path = config_path
        self.process = []

    def run(self):
        raise NotImplementedError

    def cleanup(self):
        for p in self.process:
            p.cleanup()
