from jobs.BaseJob import BaseJob
from toolkit.errors import ConfigError
from toolkit.extension import get_all_extensions_process_dict


class ExtensionJob(BaseJob):
    """`job: extension`: each process entry is run by the extension whose uid equals its `type`."""

    def __init__(self, config: dict, config_path: str | None = None):
        super().__init__(config, config_path)
        extensions = get_all_extensions_process_dict()
        for i, proc in enumerate(self.config["process"]):
            where = f"config.process[{i}]"
            ext = extensions.get(proc["type"])
            if ext is None:
                raise ConfigError(f"{where}.type", f"unknown process type {proc['type']!r} "
                                  f"(known: {', '.join(sorted(extensions))})", file=config_path)
            try:
                self.process.append(ext.get_process()(i, self, proc))
            except ConfigError as e:
                raise e.under(where, file=config_path) from None

    def run(self):
        for p in self.process:
            p.run()
