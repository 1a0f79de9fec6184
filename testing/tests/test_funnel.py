"""The v2 load funnel: every component type from a folder and from a single file, quantization,
identity, hub handling and the interceptor hook the pool plugs into."""
import os

import pytest
import torch

from toolkit.models.v2 import LoadPolicy, OstrisModelMixin, aitk, set_load_interceptor
from toolkit.models.v2.mixin import ComponentLoadError


def _components(arch):
    from toolkit.models.registry import ARCHS
    return ARCHS[arch].components


@pytest.mark.parametrize("arch", ["zimage", "flux", "sd1", "wan21", "ace_step"])
def test_every_component_loads_from_folder(arch, tiny):
    folder = tiny(arch)
    for spec in _components(arch):
        if spec.optional and not os.path.isdir(os.path.join(folder, spec.folder)):
            continue
        comp = aitk(spec.load_class()).load(folder, role=spec.role, subfolder=spec.folder)
        assert isinstance(comp, spec.load_class()) and isinstance(comp, OstrisModelMixin)
        ident = comp._aitk_identity
        assert ident.role == spec.role and ident.source == os.path.abspath(folder)
        if isinstance(comp, torch.nn.Module):
            assert ident.weights and ident.dtype == "float32"
            assert not any(p.requires_grad for p in comp.parameters())


def _state_equal(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("arch", ["zimage", "flux", "sd1", "wan21"])
def test_module_components_load_from_single_file(arch, tiny):
    """Denoiser, text encoders and VAE from one .safetensors file (config from the model folder)."""
    folder = tiny(arch)
    for spec in _components(arch):
        if spec.kind not in ("denoiser", "text_encoder", "vae"):
            continue
        sub = os.path.join(folder, spec.folder)
        files = [f for f in os.listdir(sub) if f.endswith(".safetensors")]
        assert len(files) == 1, files
        from_folder = aitk(spec.load_class()).load(folder, role=spec.role, subfolder=spec.folder)
        cls = type(from_folder)
        single = cls.load(os.path.join(sub, files[0]), role=spec.role, subfolder=spec.folder, config_source=folder)
        assert _state_equal(from_folder, single), spec.role
        # same weights file -> same identity key whichever way it was named
        assert single._aitk_identity.weights == from_folder._aitk_identity.weights


def test_single_file_with_foreign_keys_is_rejected(tiny, tmp_path):
    from safetensors.torch import save_file
    from transformers import CLIPTextModel
    folder = tiny("sd1")
    bad = tmp_path / "bad.safetensors"
    save_file({"not.a.clip.key": torch.zeros(2)}, str(bad))
    with pytest.raises(ComponentLoadError, match="text_encoder.*do not belong"):
        aitk(CLIPTextModel).load(str(bad), role="text_encoder", subfolder="text_encoder", config_source=folder)


def test_single_file_without_config_source_names_the_key(tiny):
    from transformers import CLIPTextModel
    path = os.path.join(tiny("sd1"), "text_encoder", "model.safetensors")
    with pytest.raises(ComponentLoadError, match="extras_name_or_path"):
        aitk(CLIPTextModel).load(path, role="text_encoder", subfolder="text_encoder")


@pytest.mark.parametrize("qtype", ["qint8", "qfloat8", "qint4"])
def test_quantized_denoiser_really_quantizes(qtype, tiny):
    from optimum.quanto import QLinear
    from diffusers import ZImageTransformer2DModel
    folder = tiny("zimage")
    plain = aitk(ZImageTransformer2DModel).load(folder, role="transformer", subfolder="transformer")
    quant = aitk(ZImageTransformer2DModel).load(folder, role="transformer", subfolder="transformer",
                                                policy=LoadPolicy(qtype=qtype))
    qlin = [m for m in quant.modules() if isinstance(m, QLinear)]
    assert qlin and not any(isinstance(m, QLinear) for m in plain.modules())
    assert quant._aitk_identity.qtype == qtype and quant._aitk_identity.key != plain._aitk_identity.key
    # the weights are stored quantized (not float32 parameters)
    w = qlin[0].weight
    assert type(w).__name__ != "Parameter" or w.dtype != torch.float32
    # and the output stays close to the float module
    lin = [m for m in plain.modules() if isinstance(m, torch.nn.Linear)][0]
    qname = [n for n, m in quant.named_modules() if isinstance(m, QLinear)][0]
    pname = [n for n, m in plain.named_modules() if isinstance(m, torch.nn.Linear) and n == qname]
    assert pname, qname
    lin = dict(plain.named_modules())[qname]
    x = torch.randn(4, lin.in_features, generator=torch.Generator().manual_seed(0))
    ref, got = lin(x), dict(quant.named_modules())[qname](x)
    rel = (got.float() - ref).norm() / ref.norm()
    assert rel < {"qint8": 0.02, "qfloat8": 0.08, "qint4": 0.25}[qtype], rel


def test_quantized_text_encoder_output_close(tiny):
    from optimum.quanto import QLinear
    from transformers import CLIPTextModel
    folder = tiny("sd1")
    plain = aitk(CLIPTextModel).load(folder, role="text_encoder", subfolder="text_encoder")
    quant = aitk(CLIPTextModel).load(folder, role="text_encoder", subfolder="text_encoder",
                                     policy=LoadPolicy(qtype="qint8"))
    assert any(isinstance(m, QLinear) for m in quant.modules())
    ids = torch.tensor([[1, 5, 9, 12, 2]])
    a, b = plain(ids).last_hidden_state, quant(ids).last_hidden_state
    assert ((a - b).norm() / a.norm()) < 0.05


def test_dtype_policy(tiny):
    from diffusers import AutoencoderKL
    vae = aitk(AutoencoderKL).load(tiny("sd1"), role="vae", subfolder="vae", policy=LoadPolicy(dtype=torch.bfloat16))
    assert {p.dtype for p in vae.parameters()} == {torch.bfloat16}
    assert vae._aitk_identity.dtype == "bfloat16"


def test_post_load_is_idempotent_and_refuses_value_changes(tiny):
    from diffusers import AutoencoderKL
    vae = aitk(AutoencoderKL).load(tiny("sd1"), role="vae", subfolder="vae")
    before = {k: v.clone() for k, v in vae.state_dict().items()}
    vae.aitk_post_load(LoadPolicy())
    assert all(torch.equal(before[k], v) for k, v in vae.state_dict().items())
    with pytest.raises(ComponentLoadError):
        vae.aitk_post_load(LoadPolicy(dtype=torch.float16))


def test_missing_sources_are_named(tmp_path):
    from diffusers import AutoencoderKL
    with pytest.raises(ComponentLoadError, match=r"vae: .*nowhere.*no such file"):
        aitk(AutoencoderKL).load(str(tmp_path / "nowhere"), role="vae", subfolder="vae")
    with pytest.raises(ComponentLoadError, match="no subfolder 'vae'"):
        aitk(AutoencoderKL).load(str(tmp_path), role="vae", subfolder="vae")


def test_hub_repo_offline_is_a_clear_error(monkeypatch):
    from diffusers import AutoencoderKL
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ComponentLoadError, match="not in the local hub cache, and HF_HUB_OFFLINE is set; this model is "
                                                 "not downloaded: run `hf download someorg/some-model-that-is-not-cached`"):
        aitk(AutoencoderKL).load("someorg/some-model-that-is-not-cached", role="vae", subfolder="vae")
    with pytest.raises(ComponentLoadError, match="hub repos are not allowed"):
        aitk(AutoencoderKL).load("someorg/x", role="vae", subfolder="vae", allow_hub=False)


def test_hub_unreachable_is_not_reported_as_offline(monkeypatch):
    """Online, a cache miss whose download failed (no connection) says so, not "HF_HUB_OFFLINE is set"."""
    import huggingface_hub
    from diffusers import AutoencoderKL
    from huggingface_hub.errors import LocalEntryNotFoundError

    def no_connection(repo_id, **kw):
        raise LocalEntryNotFoundError("An error happened while trying to locate the files on the Hub: "
                                      "connection refused")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_connection)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(ComponentLoadError) as e:
        aitk(AutoencoderKL).load("someorg/not-cached", role="vae", subfolder="vae")
    assert "could not be reached" in str(e.value) and "HF_HUB_OFFLINE" not in str(e.value)
    assert "run `hf download someorg/not-cached`" in str(e.value)


def test_hub_connection_error_reads_as_not_downloaded(monkeypatch):
    """A hub that cannot be reached (httpx.ConnectError out of snapshot_download) says "not downloaded" and
    how to get it, never the HTTP library's exception (the Generate page shows this text as it is)."""
    import httpx
    import huggingface_hub
    from diffusers import AutoencoderKL

    def refused(repo_id, **kw):
        raise httpx.ConnectError("[Errno 111] Connection refused")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", refused)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(ComponentLoadError) as e:
        aitk(AutoencoderKL).load("someorg/not-cached", role="vae", subfolder="vae")
    text = str(e.value)
    assert "someorg/not-cached: not downloaded" in text and "run `hf download someorg/not-cached`" in text
    assert "ConnectError" not in text and "Errno" not in text


def test_hub_repo_resolves_through_snapshot(monkeypatch, tiny):
    """A repo id is resolved to its local snapshot (the hub call is faked to point at a tiny folder)."""
    import huggingface_hub
    from diffusers import AutoencoderKL
    seen = {}

    def fake_snapshot(repo_id, allow_patterns=None, local_files_only=False, **kw):
        seen.update(repo=repo_id, patterns=allow_patterns, offline=local_files_only)
        return tiny("sd1")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    vae = aitk(AutoencoderKL).load("org/tiny-sd1", role="vae", subfolder="vae")
    assert seen == {"repo": "org/tiny-sd1", "patterns": seen["patterns"], "offline": False}
    assert "vae/*" in seen["patterns"]
    assert vae._aitk_identity.source == os.path.abspath(tiny("sd1"))


def test_interceptor_sees_every_load_and_can_answer(tiny):
    """The hook the component pool plugs into: lookups with the identity, registration of fresh loads."""
    from toolkit.models.base_model import get_model_class

    class Recorder:
        def __init__(self):
            self.store, self.lookups, self.registered = {}, [], []

        def lookup(self, identity, policy):
            self.lookups.append(identity.role)
            return self.store.get(identity.key)

        def register(self, identity, module, policy):
            self.registered.append(identity.role)
            self.store[identity.key] = module

    rec = Recorder()
    prev = set_load_interceptor(rec)
    try:
        h1 = get_model_class("zimage")({"arch": "zimage", "name_or_path": tiny("zimage")}).load_model()
        roles = [s.role for s in h1.components]
        assert sorted(rec.lookups) == sorted(roles) and sorted(rec.registered) == sorted(roles)
        h2 = get_model_class("zimage")({"arch": "zimage", "name_or_path": tiny("zimage")}).load_model()
        assert len(rec.registered) == len(roles)      # second build answered entirely from the store
        assert all(h2.loaded[r] is h1.loaded[r] for r in roles)
    finally:
        set_load_interceptor(prev)
