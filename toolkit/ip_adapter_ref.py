"""`sample.ip_adapter`: the IP-Adapters one request applies on the resident model, each an adapter
file, a reference image and a scale (toolkit/models/ip_adapters.py applies them for the call alone).

    [{"model": "ip-adapter_sd15.safetensors", "image": "<asset id | data URL>", "scale": 0.6}]

`model` is a path or a file's name in the engine's model folders (ComfyUI's models/ipadapter, A1111's
models/ControlNet); `image_encoder` (optional) a CLIP vision folder or file, else the one its adapter
needs is found beside it or in models/clip_vision (toolkit/ip_adapter_files.py). Resolved once, in
toolkit/request.py: every field of an entry an error names is `sample.ip_adapter[i].<key>`.
"""
from dataclasses import dataclass

from toolkit.errors import ConfigError
from toolkit.settings import Settings, setting


@dataclass(frozen=True)
class IPAdapterRef(Settings):
    model: str = setting("", doc="the adapter file: a path, or its name in the model folders")
    image: str = setting("", doc="the reference image (an input image, as init_img)")
    scale: float = setting(1.0, min=0, max=10, doc="how strongly the image conditions (0: not at all)")
    image_encoder: str | None = setting(None, doc="the CLIP vision encoder (default: found for the adapter)")

    def check(self, where: str):
        for name in ("model", "image"):
            if not getattr(self, name):
                raise ConfigError(f"{where}.{name}", "is required")


def parse(value, spec, where: str = "sample.ip_adapter") -> tuple:
    """The request's list as IPAdapterRefs, refused naming `where` when the arch declares no IP-Adapter
    (its row's `ip_adapter`) and `where[i].<key>` for a bad entry."""
    if value is None or value == []:
        return ()
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ConfigError(where, "must be a list of {model, image, scale}")
    if spec.ip_adapter is None:
        raise ConfigError(where, f"arch {spec.name} takes no IP-Adapter")
    return tuple(IPAdapterRef.from_dict(v, f"{where}[{i}]") for i, v in enumerate(value))
