"""Mochi's own facts the contract suite does not single out: the tables that read Genmo's layout give what
diffusers' own converter gives (which reads the 48 blocks of the real model only), and the model samples
on inverted sigmas with Euler alone."""
import torch

from toolkit.models.registry import ARCHS


def _narrow_48_blocks():
    """The real depth (48 blocks: diffusers' converter counts them) at a tiny width."""
    from diffusers import MochiTransformer3DModel

    torch.manual_seed(0)
    model = MochiTransformer3DModel(patch_size=2, num_attention_heads=1, attention_head_dim=8, num_layers=48,
                                    pooled_projection_dim=8, in_channels=12, text_embed_dim=8, time_embed_dim=8)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    return model, dict(model.config)


def test_the_tables_read_genmos_layout_as_diffusers_converter_does():
    from diffusers.loaders.single_file_utils import convert_mochi_transformer_checkpoint_to_diffusers as theirs

    from toolkit.models.archs.mochi import convert_original, to_original
    model, config = _narrow_48_blocks()
    state = model.state_dict()
    original = to_original(state)
    assert "blocks.47.attn.qkv_x.weight" in original and "blocks.47.attn.proj_y.weight" not in original
    want = theirs({"model.diffusion_model." + k: v.clone() for k, v in original.items()})
    got = convert_original({"model.diffusion_model." + k: v.clone() for k, v in original.items()}, config=config)
    assert set(got) == set(want) == set(state)
    assert all(torch.equal(got[k], want[k]) and torch.equal(got[k], state[k]) for k in state)


def test_it_is_sampled_on_inverted_sigmas_by_euler_alone():
    """Euler and its schedules (respaced, then inverted: test_samplers), the one class that inverts them."""
    spec = ARCHS["mochi"]
    assert spec.scheduler_file["invert_sigmas"]
    assert [s.name for s in spec.samplers()] == ["euler", "euler_karras", "euler_exponential", "euler_beta"]
