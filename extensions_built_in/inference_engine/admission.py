"""What one client may ask of the engine (`engine.limits`), and the checks that refuse the rest
before anything is queued: a request's size, frames, steps, batch and prompt bytes, the compatibility
routes' fan-out, the queue's length, the assets folder's total, and a memory pre-flight.

Here, not in toolkit/: these are the engine's policy towards clients that share one device. The
Generate job and the one-shot CLI run what their own user asked for and need none of it. No torch:
the engine process imports this; the pre-flight asks the holder class for an estimate, which is
arithmetic on the arch's registry row.
"""
import os
import threading
from dataclasses import dataclass

from toolkit.errors import ConfigError
from toolkit.models.base_model import get_model_class
from toolkit.settings import Settings, setting

# A start frame carries the prompt and the negative prompt JSON-escaped (up to 6 bytes per UTF-8 byte)
# in a header of at most 1 MiB (protocol.MAX_HEADER): 64 KiB each keeps both, escaped, under it.
PROMPT_BYTES_CEILING = 64 << 10


@dataclass(frozen=True)
class Limits(Settings):
    """Defaults a GPU user keeps: each lets every arch's usual requests through with room to spare and
    stops only what no one asks on purpose. The memory pre-flight, not max_pixels, decides what fits
    a given device; max_pixels bounds the host-side work (RoPE tables, latents, the decoded image)
    that a giant request costs before the device is even asked."""
    # the why of each default in a comment; the what in its doc, which the UI's settings page shows
    # width*height: 4096x4096, ~9x the largest arch default (1328x1328)
    max_pixels: int = setting(4096 * 4096, min=1, doc="width*height per image or frame")
    # video: LTX-Video's longest clip; Wan 81, HunyuanVideo 129
    max_frames: int = setting(257, min=1, doc="video frames one request makes")
    # the schedulers' 1000 training timesteps: more are not distinct
    max_steps: int = setting(1000, min=1, doc="num_inference_steps")
    max_batch: int = setting(16, min=1, doc="images one request (sample.batch_size) or one compat call makes")
    # UTF-8, per prompt: well past every text encoder's window; at most the ceiling the start frame's header holds
    max_prompt_bytes: int = setting(16 << 10, min=1, max=PROMPT_BYTES_CEILING,
                                    doc="UTF-8 bytes of the prompt, and of the negative prompt")
    max_queued: int = setting(256, min=1, doc="requests waiting (the running one not counted)")
    max_asset_bytes: int = setting(2 << 30, min=1, doc="the assets folder's total, uploads in flight included")

    @classmethod
    def from_dict(cls, d, where: str = "engine.limits") -> "Limits":
        """Validate a mapping of overrides; errors name `engine.limits.<key>`."""
        return super().from_dict(d, where)


def _over(key: str, value: int, limit: int) -> str:
    return f"{value} is over engine.limits.{key} ({limit})"


def check_request(limits: Limits, mc, gen):
    """Refuse a resolved request whose size, frames, steps, batch or prompts exceed `limits` (ConfigError
    naming the sample field: a 422)."""
    spec = mc.spec
    if spec.modality in ("image", "video"):
        pixels = gen.width * gen.height
        if pixels > limits.max_pixels:
            raise ConfigError("sample.width", f"{gen.width}x{gen.height} is {pixels} pixels, over "
                              f"engine.limits.max_pixels ({limits.max_pixels})")
    check_upscaled(limits, spec, gen)
    if spec.modality == "video" and gen.num_frames > limits.max_frames:
        raise ConfigError("sample.num_frames", _over("max_frames", gen.num_frames, limits.max_frames))
    if gen.batch_size > limits.max_batch:
        raise ConfigError("sample.batch_size", _over("max_batch", gen.batch_size, limits.max_batch))
    if gen.num_inference_steps > limits.max_steps:
        raise ConfigError("sample.num_inference_steps", _over("max_steps", gen.num_inference_steps, limits.max_steps))
    for name in ("prompt", "negative_prompt"):
        text = getattr(gen, name) or ""
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limits.max_prompt_bytes:
            raise ConfigError(f"sample.{name}", f"is {size} bytes (UTF-8), over engine.limits.max_prompt_bytes "
                              f"({limits.max_prompt_bytes})")


def check_batch(limits: Limits, count: int):
    """One call of a compatibility route makes `count` images, in one request or several (ConfigError
    key `batch`, which each route names as its own field: `n`, `batch_size`)."""
    if count > limits.max_batch:
        raise ConfigError("batch", f"{count} images in one call is over engine.limits.max_batch ({limits.max_batch})")


def check_upscaled(limits: Limits, spec, gen):
    """A hires pass's size and steps within `limits` (naming sample.hires.scale, sample.hires.steps)."""
    from toolkit import hires
    if gen.hires is not None:
        w, h = hires.hires_size(gen.width, gen.height, gen.hires.scale, spec.size_divisor)
        if w * h > limits.max_pixels:
            raise ConfigError("sample.hires.scale", f"{gen.width}x{gen.height} times {gen.hires.scale:g} is {w}x{h}, "
                              f"{w * h} pixels, over engine.limits.max_pixels ({limits.max_pixels})")
        if gen.hires.steps > limits.max_steps:
            raise ConfigError("sample.hires.steps", _over("max_steps", gen.hires.steps, limits.max_steps))


def check_upscale_input(limits: Limits, gen):
    """Task upscale's output (its input image, stored, times sample.upscale.scale) within max_pixels."""
    from toolkit import hires, images
    if gen.task != hires.UPSCALE or not gen.init_img or gen.upscale is None:
        return
    iw, ih = images.check_image(gen.init_img, "sample.init_img")
    w, h = hires.upscale_size(iw, ih, gen.upscale.scale)
    if w * h > limits.max_pixels:
        raise ConfigError("sample.upscale.scale", f"{iw}x{ih} times {gen.upscale.scale:g} is {w}x{h}, {w * h} "
                          f"pixels, over engine.limits.max_pixels ({limits.max_pixels})")


def check_memory(mc, gen, memory: dict | None):
    """The memory pre-flight: refuse a request whose activations alone (the holder's estimate, a
    floor) exceed the device's total memory, the worker's last report (`State.memory`: the GPU's
    total, or the machine's RAM on the CPU). Skipped while no total is known; the engine checks
    again before the request runs."""
    total = int((memory or {}).get("total") or 0)
    if total <= 0:
        return
    device = (memory or {}).get("device") or "cpu"
    estimate = get_model_class(mc.arch).estimate_activation_bytes
    tiled = gen.vae_tiling != "off"      # a decode that may tile is refused only for what its tiles need
    need = estimate(mc, gen, device=device, batch=gen.batch_size, tiled=tiled)
    if need > total:
        field, size = (("sample.duration", f"{gen.duration:g} s") if mc.spec.modality == "audio" else
                       ("sample.width", f"{gen.width}x{gen.height}" +
                        (f"x{gen.num_frames} frames" if mc.spec.modality == "video" else "")))
        if gen.batch_size > 1:
            size += f" in a batch of {gen.batch_size}"
            if estimate(mc, gen, device=device, batch=1, tiled=tiled) <= total:
                field = "sample.batch_size"       # one would fit: the batch is what is too large
        raise ConfigError(field, f"{size} needs at least {_size(need)} of activations (estimated), more than "
                          f"the {device} device's {_size(total)} in total")


def check_placement(mc, gen, memory: dict | None, reserve: int, folders=(), roots=None):
    """The placement pre-flight (toolkit/placement.py): refuse a request whose plan fits nowhere, not even in
    its lightest placement with everything else freed: the device's total less engine.reserve_gb, the host's
    RAM less the planner's host reserve. Each component's bytes come from its files' headers
    (toolkit/models/component_sizes.py), torch-free. Only where placement is planned (a CUDA device, or a
    simulated one) and the sizes are known here; the worker plans again from free memory before it loads.
    A ConfigError on `model.placement` when the request placed a component, else on `model`: a 422."""
    from toolkit import placement
    from toolkit.models import component_sizes
    from toolkit.models.v2.planning import activation_floors, plan_first
    memory = memory or {}
    total = int(memory.get("total") or 0)
    device = str(memory.get("device") or "cpu")
    if total <= 0 or not (device.startswith("cuda") or memory.get("simulated")):
        return
    parts = component_sizes.parts(mc, folders, roots, device=device)
    if not parts:
        return
    forced, groups = placement.requested(mc.placement, {c.role: c.kind for c in mc.spec.components},
                                         low_vram=mc.low_vram, layer_offloading=mc.layer_offloading)
    floors = activation_floors(get_model_class(mc.arch).estimate_stage_bytes, mc, gen, device=device,
                               batch=gen.batch_size)
    budget = placement.Budget(device_free=total, reserve=reserve, host_free=int(memory.get("host_total") or 1 << 62),
                              free_label="in total")
    try:
        plan_first(parts, floors, budget=budget, forced=forced, groups=groups, staged=not mc.loras)
    except placement.PlacementError as e:
        raise ConfigError("model.placement" if forced else "model", str(e)) from None


def _size(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


class AssetBudget:
    """The assets folder's total under `limit` bytes: stored files plus uploads still streaming.
    An upload reserves its bytes as they arrive; once written they count as stored. The folder is
    rescanned when an upload starts, so files removed by hand free their room."""

    def __init__(self, folder: str | None, limit: int):
        self.folder = folder
        self.limit = limit
        self._lock = threading.Lock()
        self._stored = 0
        self._inflight = 0

    def upload(self) -> "AssetUpload":
        with self._lock:
            self._stored = _folder_bytes(self.folder)
        return AssetUpload(self)

    def used(self) -> int:
        with self._lock:
            return self._stored + self._inflight


class AssetUpload:
    """One upload's reservation: `take(n)` before keeping n more bytes (False: over the limit, see
    `refusal`), `stored()` once the file is written; leaving the `with` block frees what is left."""

    def __init__(self, budget: AssetBudget):
        self.budget = budget
        self.reserved = 0
        self.refusal = ""

    def take(self, n: int) -> bool:
        b = self.budget
        with b._lock:
            total = b._stored + b._inflight + n
            if total > b.limit:
                self.refusal = (f"the assets folder would hold {total} bytes, over engine.limits.max_asset_bytes "
                                f"({b.limit}); delete files from the job folder's assets/ or raise the limit")
                return False
            b._inflight += n
            self.reserved += n
        return True

    def stored(self):
        b = self.budget
        with b._lock:
            b._inflight -= self.reserved
            b._stored += self.reserved
        self.reserved = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        with self.budget._lock:
            self.budget._inflight -= self.reserved
        self.reserved = 0


def _folder_bytes(folder: str | None) -> int:
    total = 0
    if not folder:
        return 0
    try:
        with os.scandir(folder) as it:
            for entry in it:
                try:
                    if entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    pass
    except FileNotFoundError:
        pass
    return total
