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
    "HunyuanVideo15": ((0.0568, -0.0521, -0.0131), (0.0456, -0.0202, -0.0644)),
    "HunyuanImage21": ((-0.0154, -0.0397, -0.0521), (0.0007, -0.0256, -0.0206)),
    "Mochi": ((-0.0069, -0.0045, 0.0018), (-0.094, -0.1418, -0.1453)),
}
CHANNELS = {"SD15": 4, "SDXL": 4, "SD3": 16, "Flux": 16, "Flux2": 32, "Wan21": 16, "Wan22": 48, "HunyuanVideo": 16,
            "LTXV": 128, "HunyuanVideo15": 32, "HunyuanImage21": 64, "Mochi": 12}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_table_shape_and_values(name):
    fmt = TABLES[name]
    assert fmt.comfy_class in CHANNELS and fmt.channels == CHANNELS[fmt.comfy_class]
    assert all(len(row) == 3 and all(isinstance(v, float) and abs(v) < 1 for v in row) for row in fmt.rgb_factors)
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
