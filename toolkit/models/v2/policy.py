"""What the funnel does to a component after reading it: dtype, quantization, placement, offload."""
from dataclasses import dataclass

import torch

DTYPE_NAMES = {
    "float32": torch.float32, "fp32": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16,
}


def resolve_dtype(name: str, device: str) -> torch.dtype:
    if name in (None, "auto"):
        return torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    return DTYPE_NAMES[name]


@dataclass(frozen=True)
class LoadPolicy:
    dtype: torch.dtype = torch.float32
    device: str = "cpu"             # where it computes
    qtype: str | None = None        # optimum-quanto qtype name, None = no quantization
    # where it lives at rest (toolkit/placement.py): resident (on `device`) | cpu_cache | staged | layers
    placement: str = "resident"
    group: int = 1                  # layers: blocks per group

    @property
    def at_rest(self) -> str:
        """Where its weights are between its stages: "device" (resident), "host" (cpu_cache, layers: a
        prefetch reads as cpu_cache) or "none" (staged: released until its stage reads it again)."""
        return {"resident": "device", "staged": "none"}.get(self.placement, "host")

    @property
    def value_key(self) -> tuple:
        """The parts of the policy that change a module's values (placement does not)."""
        return (str(self.dtype).replace("torch.", ""), self.qtype)
