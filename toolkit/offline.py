"""The local-only contract's defence in depth: hub libraries told to stay offline. Set before
torch/diffusers/transformers are imported (they read these at import)."""
import os
import sys

OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "DIFFUSERS_OFFLINE")


def go_offline() -> bool:
    """Set the offline variables; returns False if a hub library was already imported (the
    explicit local loading is still the primary guarantee)."""
    for var in OFFLINE_VARS:
        os.environ[var] = "1"
    return not any(m in sys.modules for m in ("huggingface_hub", "diffusers", "transformers"))
