"""The CPU's convolution kernels built while a model's weights are read, not in its first request.

On the CPU, the first convolution of each configuration (channels, kernel, stride) builds its kernel
(oneDNN JIT-compiles one: about 20-25 ms each). SD 1.5's UNet meets some 40 of them: its first
forward took 2.5 s against 0.7 s for the next one, and the first request after any load paid it
(testing/bench_cold.py). The configurations are known before any tensor is read: every 4-D (5-D)
weight in the components' safetensors headers is a Conv2d's (Conv3d's). `start()` builds them on a
thread, with zero tensors at a tiny size, while the load reads the weights on the other cores;
`join()` waits for it before the model serves. The stride is not in the file: kernels wider than 1
are built at strides 1 and 2 (a resnet's convolutions and a downsampler's). On CUDA nothing is done
(its kernels are picked per call, and a device check has no figures yet).
"""
import threading

MAX_SHAPES = 256          # a pathological file: a bound on what is built, never on correctness


class Warmup:
    def __init__(self, thread: threading.Thread | None):
        self.thread = thread
        self.stop = threading.Event()
        self.built = 0

    def join(self):
        if self.thread is not None:
            self.thread.join()


def conv_weights(files: list, prefix: str = "") -> set:
    """The shapes of the 4-D and 5-D tensors in these safetensors files (under `prefix`)."""
    from toolkit.models.formats.safetensors_header import HeaderError, check_file, is_safetensors_name
    shapes = set()
    for path in files:
        if not is_safetensors_name(path):
            continue
        try:
            header = check_file(path)
        except (HeaderError, OSError):
            continue            # the load itself names a broken file
        for name, t in header.tensors.items():
            if name.startswith(prefix) and len(t.shape) in (4, 5) and all(t.shape):
                shapes.add(tuple(t.shape))
    return shapes


def model_conv_shapes(mc, folders=(), roots=None) -> set:
    """Every convolution weight shape of `mc`'s weighted components whose files are here."""
    from toolkit.models.component_sizes import component_files
    from toolkit.models.component_sources import component_sources
    from toolkit.placement import WEIGHTED
    shapes = set()
    for comp, where in component_sources(mc, mc.spec, folders, roots):
        if where is None or comp.kind not in WEIGHTED:
            continue
        files, prefix = component_files(where, allow_hub=not mc.local_only)
        shapes |= conv_weights(files or [], prefix)
    return shapes


def build(shapes, dtype, stop: threading.Event | None = None) -> int:
    """Run each configuration once on zeros (a 1-item batch at 4x4 / 2x4x4); returns how many ran."""
    import torch
    import torch.nn.functional as F

    done = 0
    with torch.no_grad():
        for shape in sorted(shapes)[:MAX_SHAPES]:
            if stop is not None and stop.is_set():
                break
            conv = F.conv2d if len(shape) == 4 else F.conv3d
            size = (4, 4) if len(shape) == 4 else (2, 4, 4)
            weight, bias = torch.zeros(shape, dtype=dtype), torch.zeros(shape[0], dtype=dtype)
            x = torch.zeros((1, shape[1], *size), dtype=dtype)
            wide = max(shape[2:]) > 1
            for stride in ((1, 2) if wide else (1,)):
                conv(x, weight, bias, stride, tuple(k // 2 for k in shape[2:]))
                done += 1
    return done


def start(mc, device: str, dtype, folders=(), roots=None) -> Warmup:
    """Build `mc`'s convolution kernels on a thread (CPU only); a failure costs only the warm-up."""
    if not str(device).startswith("cpu"):
        return Warmup(None)
    warm = Warmup(None)

    def run():
        try:
            warm.built = build(model_conv_shapes(mc, folders, roots), dtype, warm.stop)
        except Exception:       # noqa: BLE001 - an optimisation: the first request builds what is left
            pass
    warm.thread = threading.Thread(target=run, daemon=True, name="kernel-warmup")
    warm.thread.start()
    return warm
