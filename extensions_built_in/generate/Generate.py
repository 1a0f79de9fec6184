import os
import time

from jobs.process.BaseProcess import BaseProcess
from toolkit.errors import ConfigError


class Generate(BaseProcess):
    """`type: Generate`: `model` + shared `sample` settings + `prompts` (strings, or mappings of
    sample keys that override the shared ones) -> one file per prompt in `output_folder`."""

    CONFIG_KEYS = ("device", "output_folder", "model", "sample", "prompts", "profiles_file", "offline")
    REQUIRED_KEYS = ("model", "prompts")

    def __init__(self, process_id, job, config):
        super().__init__(process_id, job, config)
        self.device = str(self.get_conf("device", "cpu"))
        self.output_folder = self.get_conf("output_folder", os.path.join("output", job.name))
        from toolkit.profiles import EMPTY, load_profiles
        from toolkit.request import resolve_request
        profiles = load_profiles(config["profiles_file"]) if config.get("profiles_file") else EMPTY
        prompts = config["prompts"]
        if not isinstance(prompts, list) or not prompts:
            raise ConfigError("prompts", "must be a non-empty list")
        shared = config.get("sample") or {}
        if not isinstance(shared, dict):
            raise ConfigError("sample", "must be a mapping")
        self.works = []
        # each prompt resolved as the engine resolves a request (toolkit/request.py): every sample key
        # the engine takes, with the profile's defaults under the shared settings
        for i, p in enumerate(prompts):
            item = {"prompt": p} if isinstance(p, str) else p
            if not isinstance(item, dict):
                raise ConfigError(f"prompts[{i}]", "must be a string or a mapping of sample keys")
            try:
                work = resolve_request(config["model"], {**shared, **item}, profiles=profiles, device=self.device)
            except ConfigError as e:
                if e.key.startswith("sample.") and not isinstance(p, str):
                    raise ConfigError(f"prompts[{i}].{e.key[len('sample.'):]}", e.message) from None
                raise
            self.works.append(work)
        self.model_config = self.works[0].model

    def run(self):
        from toolkit import host_heap
        from toolkit.models.base_model import get_model_class

        host_heap.keep_freed()      # a step reuses the last one's pages (toolkit/host_heap.py)

        def say(message, stage):
            print(f"[{stage}] {message}", flush=True)
        holder = get_model_class(self.model_config.arch)(self.model_config, device=self.device, status_hook=say)
        holder.load_model()
        os.makedirs(self.output_folder, exist_ok=True)
        stamp = time.strftime("%Y%m%d_%H%M%S")
        for i, work in enumerate(self.works):
            gen = work.sample
            for warning in gen.warnings:
                print(f"warning: {warning}", flush=True)
            path = os.path.join(self.output_folder, f"{stamp}_{i:03d}_{gen.seed}.{gen.output_ext}")
            for record in holder.generate_images([gen], paths=[path], on_status=say):   # a batch: one record per file
                print(f"wrote {record['path']} ({record['bytes']} bytes, seed {record['seed']})", flush=True)
        holder.unload()
