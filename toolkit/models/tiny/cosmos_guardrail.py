"""A stand-in for NVIDIA's Cosmos guardrail in the tiny Cosmos instances, as diffusers' own fast tests
have one (tests/pipelines/cosmos/cosmos_guardrail.py).

The Cosmos pipelines refuse to run without a safety checker (None makes them build
`cosmos_guardrail.CosmosSafetyChecker`, whose models come from the hub, and a call without one
raises), so a tiny model built offline carries this one in its `safety_checker` folder. It refuses
prompts holding `BLOCKED` (the real one refuses unsafe text the same way: the pipeline raises) and
passes frames through. Real models never get it: a repo without a safety checker of its own gets the
pipeline's real guardrail (toolkit/models/archs/cosmos2_5.py)."""
import numpy as np
import torch
from diffusers.configuration_utils import ConfigMixin
from diffusers.models.modeling_utils import ModelMixin

BLOCKED = "guardrail-test-refusal"


class TinyCosmosGuardrail(ModelMixin, ConfigMixin):
    def __init__(self) -> None:
        super().__init__()
        # saved (a model folder needs a weights file): where and in which dtype the checker is
        self.register_buffer("device_tracker", torch.zeros(1, dtype=torch.float32))

    def check_text_safety(self, prompt: str) -> bool:
        return BLOCKED not in prompt

    def check_video_safety(self, frames: np.ndarray) -> np.ndarray:
        return frames

    @property
    def device(self) -> torch.device:
        return self.device_tracker.device

    @property
    def dtype(self) -> torch.dtype:
        return self.device_tracker.dtype
