"""The `engine:` block of an InferenceEngine (and an InferenceCluster) job, as one Settings class:
every key spelled once, with its type, bounds and default. InferenceEngine reads it, Engine takes
it (or its fields as keywords, as the tests build engines), and docs/configuration.md lists it."""
import os
from dataclasses import dataclass

from extensions_built_in.inference_engine.admission import Limits
from extensions_built_in.inference_engine.queue_policy import POLICIES
from toolkit.config_modules import DTYPES
from toolkit.errors import ConfigError
from toolkit.models.tiny_autoencoder import SETTINGS as PREVIEW_DECODERS
from toolkit.settings import Settings, setting


@dataclass(frozen=True)
class EngineSettings(Settings):
    job_folder: str | None = setting(None, doc="default: output/<job name>")
    port: int = setting(0, min=0, max=65535, doc="0: an ephemeral port (engine.json says which)")
    token: str | None = setting(None, doc="default: a random one, written to engine.json")
    default_model: dict | str | None = setting(None, doc="a model or profile loaded at start (a warm load)")
    output_folder: str | None = setting(None, doc="default: <job_folder>/outputs")
    dtype: str = setting("auto", choices=DTYPES, doc="a request's dtype when it names none")
    keep_resident_gb: float = setting(0.0, min=0, doc="components kept loaded beside the active model")
    idle_unload_seconds: float = setting(0.0, min=0, doc="unload after this long idle (0: never)")
    profiles_file: str | None = None
    compat_port: int | None = setting(None, min=0, max=65535, doc="the A1111/OpenAI routes on a port of their own")
    grace_seconds: float = setting(10.0, min=0, exclusive_min=True,
                                   doc="seconds a cancel may take before the worker is restarted")
    model_roots: list | None = setting(None, doc="more folders requests may name local files in")
    docs: bool = setting(False, doc="serve /openapi.json (behind the token)")
    worker: str = setting("process", choices=("process", "thread"),
                          doc="process: generation in a supervised child process; thread: in this one")
    limits: Limits = setting(default_factory=Limits, doc="what one request may ask (admission.py)")
    lora_folder: str | None = setting(None, doc="where relative LoRA paths point")
    cond_cache_mb: float = setting(256.0, min=0, doc="prompt embeddings kept across requests (0: off)")
    prefetch: bool = setting(True, doc="read the next queued model's components while a request samples")
    max_batch: int = setting(4, min=1, doc="images one pipeline call makes for compatible queued requests (1: off)")
    queue_policy: str = setting("fifo", choices=POLICIES)
    max_overtake: int = setting(2, min=0, doc="affinity: the places a request may be passed")
    metrics_open: bool = setting(False, doc="GET /metrics without the token (a scraper)")
    model_folders: list = setting(default_factory=list, doc="folders GET /library lists and models load from")
    comfyui_path: str | None = setting(None, doc="a ComfyUI install: its models/ is a model folder")
    preview_decoder: str = setting("auto", choices=PREVIEW_DECODERS,
                                   doc="auto: a tiny autoencoder in a model folder's vae_approx/ decodes the "
                                       "live preview where one fits; projection: the latent->RGB table always")

    @classmethod
    def from_dict(cls, d, where: str = "engine") -> "EngineSettings":
        return super().from_dict(d, where)

    def check(self, where: str):
        if self.token is not None and len(self.token) < 8:
            raise ConfigError(f"{where}.token", "must be a string of at least 8 characters")
        if self.compat_port and self.compat_port == self.port:
            raise ConfigError(f"{where}.compat_port", f"must be a port number other than engine.port, "
                              f"got {self.compat_port!r}")
        for key in ("model_roots", "model_folders"):
            paths = getattr(self, key) or []
            if not all(isinstance(p, str) and p for p in paths):
                raise ConfigError(f"{where}.{key}", f"must be a list of folders, got {paths!r}")
        if not all(os.path.isdir(os.path.expanduser(f)) for f in self.model_folders):
            raise ConfigError(f"{where}.model_folders", f"must be a list of existing folders, got {self.model_folders!r}")
        if self.lora_folder is not None and not os.path.isdir(os.path.expanduser(self.lora_folder)):
            raise ConfigError(f"{where}.lora_folder", f"must be an existing folder, got {self.lora_folder!r}")
        if self.comfyui_path is not None and not os.path.isdir(os.path.join(os.path.expanduser(self.comfyui_path),
                                                                             "models")):
            raise ConfigError(f"{where}.comfyui_path", f"must be a ComfyUI install (a folder holding models/), "
                              f"got {self.comfyui_path!r}")

    def folders(self) -> list:
        """The model folders, a ComfyUI install's included (its models/ tree, and its tokenizer folders)."""
        folders = list(self.model_folders)
        if self.comfyui_path is not None and self.comfyui_path not in folders:
            folders.append(self.comfyui_path)
        return folders
