"""The latent->RGB tables (toolkit/latent_formats.py): shapes, that every table is some arch's and
every arch with a table uses the one of its latent space, and spot values against ComfyUI's
comfy/latent_formats.py (the first row and the bias of each class, copied here by hand)."""
import pytest

from toolkit import latent_formats
from toolkit.latent_formats import LatentFormat
from toolkit.models.registry import ARCHS

TABLES = {name: value for name, value in vars(latent_formats).items() if isinstance(value, LatentFormat)}

# ComfyUI class -> (first row, bias): spot checks a transcription slip would fail
COMFY = {
    "SD15": ((0.3512, 0.2297, 0.3227), None),
    "SDXL": ((0.3651, 0.4232, 0.4341), (0.1084, -0.0175, -0.0011)),      # SDXL's own, not Playground 2.5's
    "SD3": ((-0.0922, -0.0175, 0.0749), (0.2394, 0.2135, 0.1925)),
    "Flux": ((-0.0346, 0.0244, 0.0681), (-0.0329, -0.0718, -0.0851)),
    "Flux2": ((0.0058, 0.0113, 0.0073), (-0.0329, -0.0718, -0.0851)),
    "Wan21": ((-0.1299, -0.1692, 0.2932), (-0.1835, -0.0868, -0.336)),
    "Wan22": ((0.0119, 0.0103, 0.0046), (0.0317, -0.0878, -0.1388)),
    "HunyuanVideo": ((-0.0395, -0.0331, 0.0445), (0.0259, -0.0192, -0.0761)),
    "LTXV": ((0.011202, -0.00063815, -0.010021), (-0.0571, -0.1657, -0.2512)),
    "ChromaRadiance": ((1.0, 0.0, 0.0), None),          # pixel space: the identity
    "QwenImage21": ((-0.0158, -0.0115, -0.0174), (-0.1228, -0.1869, -0.3083)),
    "LTXAV": ((0.001135, -0.010555, -0.004925), (-0.347892, -0.363814, -0.370287)),     # LTX-2's video stream
    "HunyuanVideo15": ((0.0568, -0.0521, -0.0131), (0.0456, -0.0202, -0.0644)),
    "HunyuanImage21": ((-0.0154, -0.0397, -0.0521), (0.0007, -0.0256, -0.0206)),
    "Mochi": ((-0.0069, -0.0045, 0.0018), (-0.094, -0.1418, -0.1453)),
}
CHANNELS = {"SD15": 4, "SDXL": 4, "SD3": 16, "Flux": 16, "Flux2": 32, "Wan21": 16, "Wan22": 48, "HunyuanVideo": 16,
            "LTXV": 128, "ChromaRadiance": 3, "QwenImage21": 64, "LTXAV": 128, "HunyuanVideo15": 32,
            "HunyuanImage21": 64, "Mochi": 12}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_table_shape_and_values(name):
    fmt = TABLES[name]
    assert fmt.comfy_class in CHANNELS and fmt.channels == CHANNELS[fmt.comfy_class]
    assert all(len(row) == 3 and all(isinstance(v, float) and abs(v) <= 1 for v in row) for row in fmt.rgb_factors)
    assert fmt.rgb_bias is None or len(fmt.rgb_bias) == 3
    if COMFY[fmt.comfy_class] is not None:
        first, bias = COMFY[fmt.comfy_class]
        assert fmt.rgb_factors[0] == pytest.approx(first) and (fmt.rgb_bias == pytest.approx(bias) if bias
                                                              else fmt.rgb_bias is None)
    public = fmt.public()
    assert len(public["rgb_factors"]) == fmt.channels


def test_every_table_is_used_and_fits_its_arch():
    used = {}
    for name in ARCHS:
        lat = ARCHS[name].latents
        if lat.format is not None:
            assert lat.format.channels == lat.channels, name
            used.setdefault(lat.format.comfy_class, []).append(name)
    assert set(used) == {t.comfy_class for t in TABLES.values()}, "a table no arch uses"
    assert ARCHS["sdxl"].latents.format is latent_formats.SDXL
    assert ARCHS["sd1"].latents.format is latent_formats.SD15 and ARCHS["flux"].latents.format is latent_formats.FLUX


# image and video archs whose latent space ComfyUI's comfy/latent_formats.py has no latent->RGB table for:
# their previews are the projection's fallback (the first three channels, each normalised by its own range).
# A new arch is in one place or the other: a table of its space, or here with its space named.
WITHOUT_TABLE = {
    "cogvideox": "the CogVideoX 3D VAE",
    "cogvideox_i2v": "the CogVideoX 3D VAE",
    "cogview4": "the CogView3-Plus VAE",
    "glm_image": "GLM-Image's VAE (CogView4's)",
    "prx_dcae": "the DC-AE (32 channels, 32x)",
    "sana": "the DC-AE (32 channels, 32x)",
}


def test_every_picture_arch_has_a_table_or_is_listed_without_one():
    for name in ARCHS:
        spec = ARCHS[name]
        if spec.modality == "audio":          # audio streams latents, no picture
            continue
        has_table = spec.latents.format is not None
        assert has_table != (name in WITHOUT_TABLE), (
            f"{name}: its latent space needs ComfyUI's table in toolkit/latent_formats.py, or an entry in "
            f"WITHOUT_TABLE naming the space ComfyUI has none for" if not has_table else
            f"{name} has a table: take it out of WITHOUT_TABLE")
    assert set(WITHOUT_TABLE) <= set(ARCHS)


@pytest.mark.parametrize("name", sorted(WITHOUT_TABLE))
def test_the_fallback_draws_an_arch_without_a_table(name):
    """The projection an arch without a table gets: a picture that follows the latent, not a blank."""
    import torch

    from toolkit.models.preview_image import project_rgb

    lat = ARCHS[name].latents
    g = torch.Generator().manual_seed(0)
    frame = torch.randn(lat.channels, 8, 8, generator=g)
    rgb = project_rgb(frame, lat.format, 16, 16).numpy()
    assert rgb.shape == (16, 16, 3) and rgb.std() > 10
    assert not (project_rgb(frame * -1, lat.format, 16, 16).numpy() == rgb).all()
def test_the_pixel_space_table_previews_what_the_pipeline_outputs():
    """A pixel-space arch steps the image itself: its identity table, projected at full size, gives the
    pipeline's own postprocessed pixels (PRXPixelPipeline's image processor)."""
    import numpy as np
    import torch
    from diffusers.image_processor import PixArtImageProcessor

    from toolkit.models.preview_image import project_rgb

    pixel_archs = [a for a in ARCHS if ARCHS[a].latents.format is latent_formats.PIXELS]
    assert pixel_archs and all(ARCHS[a].latents.spatial == 1 for a in pixel_archs)
    x = torch.randn(1, 3, 24, 40, generator=torch.Generator().manual_seed(0)) * 0.8
    want = PixArtImageProcessor(vae_scale_factor=1).postprocess(x, output_type="np")[0]
    got = project_rgb(x[0], latent_formats.PIXELS, 40, 24).numpy().astype(np.float32) / 255
    assert np.abs(got - want).max() <= 1 / 255 + 1e-6
