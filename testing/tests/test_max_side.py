"""The largest side an arch's denoiser reaches is a field of its arch row (ArchSpec.max_side, per
variant where the variants' denoisers differ): a request past it is a 422 naming the side before it is
queued, and GET /models serves it as the side's maximum. Z-Image at 8208 px wide used to pass every
check and fail in the transformer (IndexError: index 512 is out of bounds for dimension 0 with size 512)."""
import json
import os

import pytest

from testing.engine_client import InProcessEngine
from toolkit.config_modules import GenerateImageConfig
from toolkit.errors import ConfigError
from toolkit.models.registry import ARCHS
from toolkit.request import resolve_request

TOKEN = "max-side-token-1"


def test_the_rows_reach_is_the_real_denoisers():
    from toolkit.models.archs import lumina2, sd3, zimage
    assert ARCHS["zimage"].max_side == 512 * 16 == min(zimage.TRANSFORMER_KNOWN["z-image-turbo"]["axes_lens"][1:]) * 16
    assert ARCHS["lumina2"].max_side == 8192
    assert {v: ARCHS["sd3"].max_side_for(v) for v in ARCHS["sd3"].variants} == {
        "3.5-large": 3072, "3.5-large-turbo": 3072, "3.5-medium": 6144, "3-medium": 3072}
    assert sd3.TRANSFORMER_KNOWN["sd3.5-medium"]["pos_embed_max_size"] * 16 == 6144
    assert ARCHS["flux"].max_side is None and ARCHS["sdxl"].max_side is None     # RoPE for any size; convolutions


def test_the_tiny_zimage_has_the_real_tables(tiny):
    """The tiny model's transformer indexes the same 512-position tables: the bound it is tested with is real."""
    with open(os.path.join(tiny("zimage"), "transformer", "config.json")) as f:
        assert json.load(f)["axes_lens"][1:] == [512, 512]


@pytest.mark.parametrize("arch,variant,side", [("zimage", None, 8192), ("sd3", "3.5-medium", 6144), ("sd3", None, 3072)])
def test_a_side_past_the_reach_is_refused_naming_it(arch, variant, side):
    model = {"arch": arch, "name_or_path": f"tiny:{arch}", **({"variant": variant} if variant else {})}
    for name in ("width", "height"):
        with pytest.raises(ConfigError) as e:
            resolve_request(model, {name: side + 16}, dry_run=True)
        assert e.value.key == f"sample.{name}" and str(side) in e.value.message
        resolve_request(model, {name: side}, dry_run=True)          # at the reach: accepted
    fields = GenerateImageConfig.fields_for(ARCHS[arch], variant=variant)
    assert fields["width"]["max"] == fields["height"]["max"] == side


def test_over_http_before_anything_is_queued(tmp_path):
    eng = InProcessEngine(str(tmp_path), token=TOKEN)
    try:
        r = eng.client.post("/generate", json={"model": {"arch": "zimage", "name_or_path": "tiny:zimage"},
                                               "sample": {"prompt": "x", "width": 8208, "height": 64}, "wait": True})
        assert r.status_code == 422 and r.json()["field"] == "sample.width", r.text
        assert eng.engine.queue_length() == 0 and eng.engine.get("x") is None
        rows = {row["name"]: row for row in eng.client.get("/models").json()["archs"]}
        assert rows["zimage"]["fields"]["width"]["max"] == 8192 and rows["zimage"]["max_side"] == 8192
        assert rows["flux"]["fields"]["width"]["max"] == 16384
    finally:
        eng.close()
