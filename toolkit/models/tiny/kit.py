"""Building blocks for the tiny instances the arch files declare: text encoders, VAEs and
schedulers that several archs share, with tiny widths and real latent geometry (a 4-block KL VAE
compresses 8x, as the real ones do), and the per-component seeding.

Libraries are imported inside each builder, so importing this module (as arch files do) costs
nothing. Every builder returns a module in eval mode, drawing its weights from torch's global RNG:
call it inside `Build.seeded(role)`.
"""
from __future__ import annotations

import contextlib
import zlib
from dataclasses import dataclass
from typing import Iterator

from toolkit.models.tiny.tokenizers import clip_tokenizer, qwen2_tokenizer, t5_tokenizer  # noqa: F401 (re-export)


def component_seed(seed: int, component: str) -> int:
    """A stable per-component seed (independent of Python's hash randomisation)."""
    return (int(seed) * 1_000_003 + zlib.crc32(component.encode("utf-8"))) % (2**63 - 1)


@contextlib.contextmanager
def seeded_rng(seed: int, component: str) -> Iterator[None]:
    """torch's global RNG seeded for one component; the caller's RNG state is restored after."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(component_seed(seed, component))
        yield


@dataclass(frozen=True)
class Build:
    """What an arch's `Tiny.build` receives: the model's seed (its denoiser-side components) and the
    shared seed (text encoders, VAEs), so two models of a shared pair differ only in the denoiser."""
    spec: object          # the ArchSpec being built
    seed: int
    shared_seed: int

    def seed_for(self, role: str) -> int:
        own = any(c.role == role and c.own for c in self.spec.components)
        return self.seed if own else self.shared_seed

    def seeded(self, role: str, recipe: str | None = None):
        """The RNG for building `role`. `recipe` names the random stream instead of the role, so
        archs that really share a component (Flux's T5 is Chroma's text_encoder) build it from the
        same recipe and get the same bytes, which the pool can then share."""
        return seeded_rng(self.seed_for(role), recipe or role)


# -- text encoders --------------------------------------------------------------------------------
def qwen3_encoder(tokenizer, *, layers: int = 2, hidden: int = 32, **over):
    from transformers import Qwen3Config, Qwen3Model

    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=32768,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, **over)
    return Qwen3Model(config).eval()


def clip_text_encoder(tokenizer, *, hidden: int = 32, projection: bool = False, **over):
    """CLIPTextModel (or CLIPTextModelWithProjection, as SDXL's and SD3's second encoders are)."""
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    dims = dict(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden, projection_dim=hidden,
        num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=77, hidden_act="quick_gelu",
        # the pooled output is read at the eos position: the ids must be the tokenizer's
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id)
    config = CLIPTextConfig(**{**dims, **over})        # `over` may change any (OpenCLIP's GELU)
    return (CLIPTextModelWithProjection if projection else CLIPTextModel)(config).eval()


def t5_encoder(tokenizer, **over):
    from transformers import T5Config, T5EncoderModel
    return _t5_family_encoder(tokenizer, T5Config, T5EncoderModel, over)


def umt5_encoder(tokenizer, **over):
    from transformers import UMT5Config, UMT5EncoderModel
    return _t5_family_encoder(tokenizer, UMT5Config, UMT5EncoderModel, over)


def _t5_family_encoder(tokenizer, config_cls, model_cls, over: dict):
    """A tiny T5-style encoder (T5 for Flux/SD3, UMT5 for Wan): the tokenizer's ids."""
    dims = dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, relative_attention_num_buckets=8,
                relative_attention_max_distance=32, feed_forward_proj="gated-gelu", dropout_rate=0.0)
    dims.update(over)
    config = config_cls(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                        eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.pad_token_id, **dims)
    return model_cls(config).eval()


# -- VAEs and schedulers --------------------------------------------------------------------------
def kl_vae(latent_channels: int, *, scaling_factor: float, shift_factor: float | None = None,
           quant_conv: bool = True, **over):
    """AutoencoderKL with 4 blocks (8x spatial compression), the real latent channel count."""
    from diffusers import AutoencoderKL

    dims = dict(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 4,
                up_block_types=("UpDecoderBlock2D",) * 4, block_out_channels=(8, 8, 16, 16), layers_per_block=1,
                act_fn="silu", norm_num_groups=4, sample_size=64)
    dims.update(over)
    return AutoencoderKL(latent_channels=latent_channels, scaling_factor=scaling_factor, shift_factor=shift_factor,
                         use_quant_conv=quant_conv, use_post_quant_conv=quant_conv, **dims).eval()


def flux_vae():
    """The 16-channel Flux VAE (Flux.1, Chroma, Kontext, Z-Image, Lumina 2): its scale and shift."""
    return kl_vae(16, scaling_factor=0.3611, shift_factor=0.1159, quant_conv=False)


def wan_vae(z_dim: int = 16, **over):
    """AutoencoderKLWan: 8x spatial (3 downsamples), 4x temporal, the real latents_mean/std."""
    from diffusers import AutoencoderKLWan

    dims = dict(base_dim=4, dim_mult=[1, 2, 4, 4], num_res_blocks=1, attn_scales=[],
                temperal_downsample=[False, True, True])
    dims.update(over)
    return AutoencoderKLWan(z_dim=z_dim, **dims).eval()


def flow_match_scheduler(**kwargs):
    from diffusers import FlowMatchEulerDiscreteScheduler
    return FlowMatchEulerDiscreteScheduler(**kwargs)


def jitter_constants(module, scale: float = 0.1, overrides: dict | None = None):
    """Seeded noise on parameters a library initialises to a constant (norms, modulation tables), so
    a mis-mapped norm or table changes the output instead of hiding behind identical values.
    `overrides`: name fragment -> noise scale."""
    import torch

    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.numel() > 1 and float(p.detach().float().std()) == 0.0:
                s = next((v for k, v in (overrides or {}).items() if k in name), scale)
                p.add_(torch.randn_like(p) * s)
    return module
