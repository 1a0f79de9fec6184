import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("NEXT_TELEMETRY_DISABLED", "1")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_models")
    os.environ["AITK_TINY_CACHE"] = str(root)   # `tiny:<arch>` in configs resolves here too
    return root


@pytest.fixture(scope="session")
def tiny(tiny_root):
    """tiny(arch, seed=0) -> folder of a tiny random-weight model, built once per session."""
    from toolkit.models.tiny import cached_tiny

    def make(arch, seed=0):
        return str(cached_tiny(arch, seed, root=str(tiny_root)))
    return make


@pytest.fixture
def no_hub(monkeypatch, tmp_path):
    """Every way to reach a hub raises, and the hub cache is empty: a load that tries is a failure."""
    import huggingface_hub
    import huggingface_hub.constants

    import toolkit.models.v2.sources as sources

    def refuse(*_a, **_k):
        raise AssertionError("a hub download was attempted")
    for name in ("snapshot_download", "hf_hub_download"):
        monkeypatch.setattr(huggingface_hub, name, refuse)
        monkeypatch.setattr(sources, name, refuse, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty_hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
