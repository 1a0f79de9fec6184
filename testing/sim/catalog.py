"""The model catalog the routing simulation draws from: component sizes and model families (data).

A model is its family's shared components (text encoders, VAE: one file each, so one identity, as the
engine's pool keys them: file + dtype/quant) plus a transformer file of its own (a finetune or a
quantization): two models of a family differ only in that file. Sizes are the published checkpoint
sizes (GB = 1e9 bytes); per-step seconds are rough H100-class figures at each family's reference size.
"""
from dataclasses import dataclass

GB = 1e9

# one file each; a name used by two families is one file both read (Z-Image reads Flux's ae.safetensors)
SHARED_GB = {
    "flux_clip_l": 0.25,      # CLIP ViT-L text model, bf16
    "flux_t5xxl": 9.52,       # T5-XXL encoder, bf16
    "flux_vae": 0.17,         # ae.safetensors
    "sdxl_clip_l": 0.25,      # fp16
    "sdxl_clip_g": 1.39,      # fp16
    "sdxl_vae": 0.17,         # fp16
    "qwen25_vl_7b": 16.6,     # Qwen-Image's text encoder, bf16
    "qwen_image_vae": 0.25,
    "umt5_xxl": 11.4,         # Wan 2.x text encoder, bf16
    "wan_vae": 0.25,
    "qwen3_4b": 8.04,         # Z-Image's text encoder, bf16
}


@dataclass(frozen=True)
class Family:
    name: str
    transformer_gb: dict      # quantization -> GB of one transformer file (models alternate over these)
    shared: tuple             # names in SHARED_GB
    step_s: float             # seconds per step at the reference size
    steps: tuple              # the step counts requests ask for (uniformly)
    weight: float             # share of the catalog's models


FAMILIES = (
    Family("flux", {"bf16": 23.8, "fp8": 11.9}, ("flux_clip_l", "flux_t5xxl", "flux_vae"), 0.30, (20, 28, 50), 0.35),
    Family("sdxl", {"fp16": 5.14}, ("sdxl_clip_l", "sdxl_clip_g", "sdxl_vae"), 0.07, (25, 30, 40), 0.30),
    Family("qwen_image", {"bf16": 40.9, "fp8": 20.4}, ("qwen25_vl_7b", "qwen_image_vae"), 0.75, (20, 30, 50), 0.10),
    Family("wan_t2v", {"bf16": 28.6, "fp8": 14.3}, ("umt5_xxl", "wan_vae"), 3.0, (20, 30), 0.10),   # 480p, 33 frames
    Family("z_image", {"bf16": 12.3}, ("qwen3_4b", "flux_vae"), 0.12, (8, 9), 0.15),
)


@dataclass(frozen=True)
class Model:
    name: str
    family: Family
    components: tuple         # ((component id, bytes), ...): shared ones first, its transformer last

    @property
    def bytes(self) -> int:
        return sum(b for _c, b in self.components)


def family_counts(n_models: int, families=FAMILIES) -> list:
    """Models per family: shares of n_models by weight, largest remainders first (at least one each
    when there are enough models)."""
    total = sum(f.weight for f in families)
    exact = [n_models * f.weight / total for f in families]
    counts = [int(x) for x in exact]
    for i in sorted(range(len(families)), key=lambda i: counts[i] - exact[i])[:n_models - sum(counts)]:
        counts[i] += 1
    return counts


def build_models(n_models: int, families=FAMILIES) -> list:
    """n_models models, each its family's shared files plus its own transformer file, quantizations
    alternating (a finetune and its fp8 copy are two files: two identities)."""
    models = []
    for fam, count in zip(families, family_counts(n_models, families)):
        quants = list(fam.transformer_gb)
        for j in range(count):
            q = quants[j % len(quants)]
            shared = tuple((name, round(SHARED_GB[name] * GB)) for name in fam.shared)
            own = (f"{fam.name}/{j}.{q}", round(fam.transformer_gb[q] * GB))
            models.append(Model(f"{fam.name}-{j}-{q}", fam, shared + (own,)))
    return models
