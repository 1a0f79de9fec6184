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
    device: str = "cpu"
    qtype: str | None = None        # optimum-quanto qtype name, None = no quantization
    offload: str | None = None      # None | "model" (low_vram: CPU until used) | "layer" (block streaming)

    @property
    def value_key(self) -> tuple:
        """The parts of the policy that change a module's values (placement does not)."""
        return (str(self.dtype).replace("torch.", ""), self.qtype)
