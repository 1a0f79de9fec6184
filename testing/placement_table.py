"""Real model sizes for the placement planner (toolkit/placement.py): what each model gets on each card.

    python -m testing.placement_table            # the markdown table docs/engine.md#placement shows

Sizes are the files' (GB = 1e9 bytes) at the precision named, from their published sizes and parameter
counts; a denoiser's blocks are its repeated transformer blocks (what `layers` streams), the largest one
given. Activations are the arch rows' floors (BaseModel.estimate_stage_bytes) at each row's default size
(testing/tests/test_placement.py checks they still are). A card of N GB is N GiB, of which 0.5 GiB go to the
CUDA context, less engine.reserve_gb (1 GiB): budget N - 1.5 GiB. The host: 64 GiB of RAM, 56 free.
"""
from toolkit.placement import GiB, Budget, Part, PlacementError, plan

GB = 10 ** 9
CARDS = (8, 12, 16, 24, 48, 80)
CONTEXT = GiB // 2
RESERVE = GiB
HOST_FREE = 56 * GiB


def _gb(x: float) -> int:
    return int(x * GB)


def _gib(x: float) -> int:
    return int(x * GiB)


def flux(denoiser: float, double: float, single: float, t5: float) -> list:
    """FLUX.1 [dev]: 19 double + 38 single blocks."""
    streamed = 19 * double + 38 * single
    return [Part("transformer", "denoiser", _gb(denoiser), 57, _gb(double), _gb(denoiser - streamed)),
            Part("text_encoder", "text_encoder", _gb(0.246)),        # CLIP-L, bf16
            Part("text_encoder_2", "text_encoder", _gb(t5)),           # T5-XXL encoder
            Part("vae", "vae", _gb(0.168))]


# name -> (parts, {stage: activation bytes}, the request the activations are for)
MODELS = {
    "FLUX.1 [dev] bf16": (flux(23.80, 0.679, 0.283, 9.52), {"denoise": _gib(0.040), "decode": _gib(0.506)},
                          "1024x1024; T5-XXL bf16"),
    "FLUX.1 [dev] FP8": (flux(11.90, 0.340, 0.142, 4.89), {"denoise": _gib(0.040), "decode": _gib(0.506)},
                         "1024x1024; scaled FP8 transformer, T5-XXL FP8"),
    "FLUX.1 [dev] GGUF Q4_K_S": (flux(6.81, 0.191, 0.0796, 4.89), {"denoise": _gib(0.040), "decode": _gib(0.506)},
                                 "1024x1024; T5-XXL FP8"),
    "Wan 2.2 T2V A14B": ([Part("transformer", "denoiser", _gb(28.6), 40, _gb(0.705), _gb(0.4)),
                          Part("transformer_2", "denoiser", _gb(28.6), 40, _gb(0.705), _gb(0.4)),
                          Part("text_encoder", "text_encoder", _gb(11.36)),     # umT5-XXL encoder, bf16
                          Part("vae", "vae", _gb(0.254))],
                         {"denoise": _gib(0.730), "decode": _gib(1.305)}, "1280x720, 81 frames; bf16"),
    "Qwen-Image": ([Part("transformer", "denoiser", _gb(40.86), 60, _gb(0.679), _gb(0.12)),
                    Part("text_encoder", "text_encoder", _gb(16.58)),            # Qwen2.5-VL-7B, bf16
                    Part("vae", "vae", _gb(0.254))],
                   {"denoise": _gib(0.067), "decode": _gib(0.641)}, "1328x1328; bf16"),
    "HunyuanVideo 1.5": ([Part("transformer", "denoiser", _gb(16.66), 54, _gb(0.305), _gb(0.19)),
                          Part("text_encoder", "text_encoder", _gb(16.58)),      # Qwen2.5-VL-7B, bf16
                          Part("text_encoder_2", "text_encoder", _gb(0.44)),     # the glyph encoder (ByT5)
                          Part("vae", "vae", _gb(1.26))],
                         {"denoise": _gib(1.147), "decode": _gib(2.436)}, "1280x720, 129 frames; bf16"),
    "SDXL": ([Part("unet", "denoiser", _gb(5.135), 6, _gb(2.2), _gb(0.9)),
              Part("text_encoder", "text_encoder", _gb(0.246)),                  # CLIP-L, fp16
              Part("text_encoder_2", "text_encoder", _gb(1.389)),                # OpenCLIP bigG, fp16
              Part("vae", "vae", _gb(0.167))],
             {"denoise": _gib(0.039), "decode": _gib(0.506)}, "1024x1024; fp16"),
    "Z-Image Turbo": ([Part("transformer", "denoiser", _gb(12.31), 34, _gb(0.36), _gb(0.07)),
                       Part("text_encoder", "text_encoder", _gb(8.04)),          # Qwen3-4B, bf16
                       Part("vae", "vae", _gb(0.168))],
                      {"denoise": _gib(0.040), "decode": _gib(0.506)}, "1024x1024; bf16"),
}
# the arch row each model's activations come from, and its request
ARCH_OF = {"FLUX.1 [dev] bf16": "flux", "FLUX.1 [dev] FP8": "flux", "FLUX.1 [dev] GGUF Q4_K_S": "flux",
           "Wan 2.2 T2V A14B": "wan22_a14b", "Qwen-Image": "qwen_image", "HunyuanVideo 1.5": "hunyuan_video",
           "SDXL": "sdxl", "Z-Image Turbo": "zimage"}


def budget(card_gb: int, host_free: int = HOST_FREE) -> Budget:
    return Budget(device_free=card_gb * GiB - CONTEXT, reserve=RESERVE, host_free=host_free)


def answer(model: str, card_gb: int, host_free: int = HOST_FREE):
    """The planner's Plan for `model` on a card of `card_gb`, or its PlacementError."""
    parts, act, _request = MODELS[model]
    try:
        return plan(parts, activation=act, budget=budget(card_gb, host_free))
    except PlacementError as e:
        return e


def cell(result) -> str:
    if isinstance(result, PlacementError):
        return f"refused: {result.role} ({result.where})"
    return result.rung


def markdown(host_free: int = HOST_FREE) -> str:
    rows = ["| model | " + " | ".join(f"{c} GB" for c in CARDS) + " |", "|---|" + "---|" * len(CARDS)]
    for model in MODELS:
        rows.append(f"| {model} | " + " | ".join(cell(answer(model, c, host_free)) for c in CARDS) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown())
