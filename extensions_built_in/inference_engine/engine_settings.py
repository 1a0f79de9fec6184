"""The `engine:` block of an InferenceEngine (and an InferenceCluster) job, as one Settings class:
every key spelled once, with its type, bounds and default. InferenceEngine reads it, Engine takes
it (or its fields as keywords, as the tests build engines), and docs/configuration.md lists it."""
import os
from dataclasses import dataclass, fields

from extensions_built_in.inference_engine.admission import Limits
from extensions_built_in.inference_engine.queue_policy import POLICIES
from toolkit.config_modules import DTYPES
from toolkit.errors import ConfigError
from toolkit.models.compiled import MODES as COMPILE_MODES
from toolkit.models.tiny_autoencoder import SETTINGS as PREVIEW_DECODERS
from toolkit.settings import Settings, base_type, bound_of, setting, type_hints


@dataclass(frozen=True)
class EngineSettings(Settings):
    job_folder: str | None = setting(None, doc="default: output/<job name>")
    port: int = setting(0, min=0, max=65535, doc="0: an ephemeral port (engine.json says which)")
    token: str | None = setting(None, doc="default: a random one, written to engine.json")
    default_model: dict | str | None = setting(None, doc="a model or profile loaded at start (a warm load)")
    output_folder: str | None = setting(None, doc="default: <job_folder>/outputs")
    dtype: str = setting("auto", choices=DTYPES, doc="a request's dtype when it names none")
    keep_resident_gb: float = setting(0.0, min=0, doc="components kept loaded beside the active model")
    keep_host_gb: float = setting(0.0, min=0, doc="host copies (cpu_cache, layers, prefetched) kept beside the "
                                                  "active model")
    reserve_gb: float = setting(1.0, min=0, doc="device memory no placement plan uses (the CUDA allocator's "
                                                "slack, activations past the estimate)")
    idle_unload_seconds: float = setting(0.0, min=0, doc="unload after this long idle (0: never)")
    profiles_file: str | None = setting(None, doc="model profiles (TOML or YAML): names requests may ask for")
    compat_port: int | None = setting(None, min=0, max=65535, doc="the A1111/OpenAI routes on a port of their own")
    comfy_port: int | None = setting(None, min=0, max=65535, doc="ComfyUI's API at the root of a port of its own "
                                                                  "(ComfyUI's 8188 by convention); the engine port "
                                                                  "serves it under /comfy")
    grace_seconds: float = setting(10.0, min=0, exclusive_min=True,
                                   doc="seconds a cancel may take before the worker is restarted")
    model_roots: list | None = setting(None, doc="more folders requests may name local files in")
    docs: bool = setting(False, doc="serve /openapi.json (behind the token)")
    worker: str = setting("process", choices=("process", "thread"),
                          doc="process: generation in a supervised child process; thread: in this one")
    limits: Limits = setting(default_factory=Limits, doc="what one request may ask (admission.py)")
    lora_folder: str | None = setting(None, doc="where relative LoRA paths point")
    upscaler_folder: str | None = setting(None, doc="upscale models (ESRGAN, RealESRGAN, SwinIR, DAT, ...: .pth or "
                                          ".safetensors) for hires and task upscale, besides the model folders' "
                                          "ESRGAN/ and upscale_models/")
    cond_cache_mb: float = setting(256.0, min=0, doc="prompt embeddings kept across requests (0: off)")
    prefetch: bool = setting(True, doc="read the next queued model's components while a request samples")
    write_behind: bool = setting(True, doc="encode and write a request's file while the next request samples "
                                           "(false: before the next one starts)")
    max_batch: int = setting(4, min=1, doc="images one pipeline call makes for compatible queued requests (1: off)")
    queue_policy: str = setting("fifo", choices=POLICIES, doc="fifo: arrival order; affinity: the resident model's requests may go first")
    max_overtake: int = setting(2, min=0, doc="affinity: the places a request may be passed")
    metrics_open: bool = setting(False, doc="GET /metrics without the token (a scraper)")
    model_folders: list = setting(default_factory=list, doc="folders GET /library lists and models load from")
    comfyui_path: str | None = setting(None, doc="a ComfyUI install: its models/ is a model folder")
    preview_decoder: str = setting("auto", choices=PREVIEW_DECODERS,
                                   doc="auto: a tiny autoencoder in a model folder's vae_approx/ decodes the "
                                       "live preview where one fits; projection: the latent->RGB table always")
    compile: str = setting("auto", choices=COMPILE_MODES,
                           doc="the resident denoiser compiled (torch.compile, regional) for a request whose model "
                               "leaves model.compile unset; auto: where the measured gain on this device is positive")
    compile_cache_dir: str | None = setting(None, doc="inductor's kernel cache, reused by a restarted engine "
                                                      "(default ~/.cache/aitk/compile)")
    compile_lora_rank: int = setting(64, min=1, doc="LoRAs up to this rank are hotswapped into a compiled denoiser "
                                                    "without recompiling; a higher one runs eager")

    @classmethod
    def from_dict(cls, d, where: str = "engine") -> "EngineSettings":
        return super().from_dict(d, where)

    def check(self, where: str):
        if self.token is not None and len(self.token) < 8:
            raise ConfigError(f"{where}.token", "must be a string of at least 8 characters")
        if self.compat_port and self.compat_port == self.port:
            raise ConfigError(f"{where}.compat_port", f"must be a port number other than engine.port, "
                              f"got {self.compat_port!r}")
        if self.comfy_port and self.comfy_port in (self.port, self.compat_port):
            raise ConfigError(f"{where}.comfy_port", f"must be a port number other than engine.port and "
                              f"engine.compat_port, got {self.comfy_port!r}")
        for key in ("model_roots", "model_folders"):
            paths = getattr(self, key) or []
            if not all(isinstance(p, str) and p for p in paths):
                raise ConfigError(f"{where}.{key}", f"must be a list of folders, got {paths!r}")
        if not all(os.path.isdir(os.path.expanduser(f)) for f in self.model_folders):
            raise ConfigError(f"{where}.model_folders", f"must be a list of existing folders, got {self.model_folders!r}")
        if self.lora_folder is not None and not os.path.isdir(os.path.expanduser(self.lora_folder)):
            raise ConfigError(f"{where}.lora_folder", f"must be an existing folder, got {self.lora_folder!r}")
        if self.upscaler_folder is not None and not os.path.isdir(os.path.expanduser(self.upscaler_folder)):
            raise ConfigError(f"{where}.upscaler_folder", f"must be an existing folder, got {self.upscaler_folder!r}")
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


def described(cls=EngineSettings) -> dict:
    """`describe()` with each field's doc, nested settings (limits) included: what the UI's settings
    page builds its form from (GET /models serves describe() alone)."""
    out = cls.describe()
    for f in fields(cls):
        if f.name not in out:
            continue
        if "fields" in out[f.name]:
            out[f.name]["fields"] = described(base_type(type_hints(cls)[f.name])[0])
        if bound_of(f).doc:
            out[f.name]["doc"] = bound_of(f).doc
    return out


def check_block(block) -> dict:
    """An `engine:` block as the job would read it at start: {"ok": true}, or the ConfigError naming the key."""
    try:
        EngineSettings.from_dict(block, "engine")
    except ConfigError as e:
        return {"ok": False, "key": e.key, "message": e.message}
    return {"ok": True}


def main(argv=None) -> int:
    """`--describe`: the fields as JSON; `--check`: the engine block on stdin (JSON), answered as JSON.
    The UI server runs this without an engine, so nothing here may import torch."""
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(prog="python -m extensions_built_in.inference_engine.engine_settings")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--describe", action="store_true", help="print each engine.* field's type, bounds, default, doc")
    mode.add_argument("--check", action="store_true", help="check the engine block read as JSON from stdin")
    args = parser.parse_args(argv)
    if args.describe:
        answer = described()
    else:
        try:
            block = json.loads(sys.stdin.read() or "null")
        except ValueError as e:
            answer = {"ok": False, "key": "engine", "message": f"is not valid JSON ({e})"}
        else:
            answer = check_block(block) if block is None or isinstance(block, dict) else {
                "ok": False, "key": "engine", "message": f"must be a mapping, got {type(block).__name__}"}
    json.dump(answer, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
