"""The VAE's tiled decode for one pipeline call (`sample.vae_tiling`).

diffusers' VAEs decode in tiles of their own size, blended where they overlap (`use_tiling`, what
`vae.enable_tiling()` sets), and a batch one item at a time (`use_slicing`): less memory, at the cost of
some time and of small differences where tiles meet. Here both are switched on for one call only and put
back after, error or cancel included: the VAE is a pool component that other holders and requests share.

- `on`: every decode of the call is tiled.
- `off`: never; an out-of-memory error in the decode ends the call as any other does.
- `auto` (the default): tiled when, as the decode starts, the call's whole-decode floor
  (BaseModel.estimate_stage_bytes) is more than the device's free memory (on a CPU, the host's available
  RAM); and once more, tiled, when the whole decode runs out of memory (as ComfyUI's VAE Decode falls
  back to its tiled decode). The placement planner counts the tiled decode only where the whole one fits
  no placement (toolkit/models/v2/planning.activation_floors).

A call that tiles says so once in a status frame, stage `tiled`, with the reason.
"""
import contextlib
import functools
import gc

from toolkit.errors import ConfigError
from toolkit.models.patches import patched
from toolkit.oom import is_oom
from toolkit.placement import size

MODES = ("auto", "on", "off")
STAGE = "tiled"


def can_tile(vae) -> bool:
    """Whether `vae` has diffusers' tiled decode (every image and video VAE here does)."""
    return vae is not None and hasattr(vae, "use_tiling")


@contextlib.contextmanager
def applied(vae, mode: str, *, need, free, on_status=None, field: str = "sample.vae_tiling"):
    """While active, `vae.decode` follows `mode` (module docstring). `need()`: the bytes the whole decode
    needs at least; `free()`: the bytes free for it now (both asked as a decode starts); `on_status(message,
    stage)` hears that the call tiles. `on` for a VAE without a tiled decode is a ConfigError on `field`."""
    if mode == "off" or vae is None:
        yield
        return
    if not can_tile(vae):
        if mode == "on":
            raise ConfigError(field, f"this model's VAE ({type(vae).__name__}) has no tiled decode")
        yield
        return
    with contextlib.ExitStack() as stack:
        tiled = []

        def tile(reason: str):
            if tiled:
                return
            tiled.append(reason)
            stack.enter_context(patched(vae, "use_tiling", lambda _was: True))
            if hasattr(vae, "use_slicing"):
                stack.enter_context(patched(vae, "use_slicing", lambda _was: True))
            if on_status is not None:
                on_status(f"decoding in tiles: {reason}", STAGE)

        def wrap(decode):
            @functools.wraps(decode)
            def tiling_decode(*args, **kwargs):
                if not tiled:
                    if mode == "on":
                        tile(f"{field} is on")
                    else:
                        needed, available = need(), free()
                        if needed > available:
                            tile(f"the whole decode needs at least {size(needed)}, more than the "
                                 f"{size(available)} free")
                if tiled or mode != "auto":
                    return decode(*args, **kwargs)
                try:
                    return decode(*args, **kwargs)
                except Exception as e:
                    if not is_oom(e):
                        raise
                    said = str(e).splitlines()[0] if str(e) else type(e).__name__
                _release()      # past the except block, whose traceback held the failed attempt's tensors
                tile(f"the whole decode ran out of memory ({said})")
                return decode(*args, **kwargs)
            return tiling_decode

        stack.enter_context(patched(vae, "decode", wrap))
        yield


def _release():
    """What the failed whole decode left goes back: its tensors, and the blocks torch's CUDA allocator kept."""
    import torch
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
