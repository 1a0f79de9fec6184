"""HunyuanVideo 1.5's own facts the contract suite does not single out: the request's guidance scale
reaches the pipeline's guider (the pipeline takes no guidance_scale) without changing the resident one,
a quoted prompt runs the glyph encoder as the bare pipeline does, and image-to-video writes the
checkpoint's resolution bucket for the image's aspect, not the request's size."""
import numpy as np
import pytest
import torch

from testing.fixtures import input_image
from toolkit.config_modules import GenerateImageConfig
from toolkit.models.base_model import get_model_class
from toolkit.models.registry import ARCHS


def _holder(tiny, arch):
    return get_model_class(arch)({"arch": arch, "name_or_path": tiny(arch), "local_only": True},
                                 device="cpu").load_model()


def _bare(tiny, arch):
    from diffusers import DiffusionPipeline

    pipe = DiffusionPipeline.from_pretrained(tiny(arch), local_files_only=True, dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _frames(holder, gen):
    return np.asarray(holder.generate_single(gen))


def _gen(holder, **over):
    sample = {**ARCHS[holder.arch].tiny.sample, "prompt": "a small test prompt", "seed": 7, **over}
    return GenerateImageConfig.from_dict(sample, holder.model_config)


@pytest.fixture(scope="module")
def t2v(tiny):
    return _holder(tiny, "hunyuan_video15")


def test_guidance_scale_goes_to_a_copy_of_the_guider(t2v, tiny):
    from diffusers import ClassifierFreeGuidance

    resident = t2v.pipeline.guider
    assert resident.guidance_scale == 6.0 and "guidance_scale" not in t2v.pipeline_kwargs(_gen(t2v))
    bare = _bare(tiny, "hunyuan_video15")
    outs = {}
    for scale in (1.0, 3.0):
        gen = _gen(t2v, guidance_scale=scale)
        outs[scale] = _frames(t2v, gen)
        bare.guider = ClassifierFreeGuidance(guidance_scale=scale)
        ref = bare(**t2v.pipeline_kwargs(gen), generator=torch.Generator("cpu").manual_seed(7), output_type="np")
        assert np.array_equal(outs[scale], ref.frames[0]), f"guidance {scale}: not the bare pipeline's"
    assert not np.array_equal(outs[1.0], outs[3.0]), "the guidance scale changed nothing"
    assert t2v.pipeline.guider is resident and resident.guidance_scale == 6.0, "the resident guider was changed"


def test_a_quoted_prompt_runs_the_glyph_encoder_as_the_bare_pipeline(t2v, tiny):
    calls = []
    encoder = t2v.pipeline.text_encoder_2
    hook = encoder.register_forward_hook(lambda *_a: calls.append(1))
    try:
        gen = _gen(t2v, prompt='a shop sign that says "OPEN"')
        got = _frames(t2v, gen)
    finally:
        hook.remove()
    assert calls, "a quoted text did not reach the glyph encoder"
    ref = _bare(tiny, "hunyuan_video15")(**t2v.pipeline_kwargs(gen), generator=torch.Generator("cpu").manual_seed(7),
                                         output_type="np")
    assert np.array_equal(got, ref.frames[0])
    assert not np.array_equal(got, _frames(t2v, _gen(t2v, prompt="a shop sign that says OPEN")))


def test_i2v_writes_the_checkpoints_bucket_for_the_images_aspect(tiny, tmp_path):
    holder = _holder(tiny, "hunyuan_video15_i2v")
    # a 96x64 request: the image is made 96x64 (3:2), the tiny checkpoint's 64 px bucket for it is 64x48
    gen = _gen(holder, width=96, height=64, init_img=input_image(tmp_path / "init.png", 80, 80))
    got = _frames(holder, gen)
    assert got.shape[1:3] == (48, 64) and got.shape[0] == gen.num_frames
    ref = _bare(tiny, "hunyuan_video15_i2v")(**holder.pipeline_kwargs(gen), generator=torch.Generator("cpu").manual_seed(7),
                                             output_type="np")
    assert np.array_equal(got, ref.frames[0])
    rec, = holder.generate_images([gen], paths=[str(tmp_path / "out.mp4")])
    assert (rec["width"], rec["height"]) == (64, 48)


@pytest.mark.parametrize("variant,target", [("720p", 960), ("480p_step_distilled", 640), ("720p_distilled", 960)])
def test_a_real_file_read_i2v_transformer_takes_the_variants_bucket(tiny, variant, target):
    """The 480p and 720p checkpoints have one shape: a transformer read from a real file has the config of its
    shapes, and the pipeline's resolution bucket (target_size) is the variant's. A folder model's, and the
    tiny file's exact config, stay as they are."""
    from toolkit.models.formats.file_view import FileConfig

    holder = get_model_class("hunyuan_video15_i2v")({"arch": "hunyuan_video15_i2v", "name_or_path": tiny(
        "hunyuan_video15_i2v"), "local_only": True, "variant": variant}, device="cpu").load_model()
    assert holder.pipeline.target_size == 64                    # the folder's own config
    transformer = holder.loaded["transformer"]
    for known, want in (("hunyuanvideo-1.5-i2v", target), ("tiny", 64)):
        transformer._aitk_file_config = FileConfig({}, known=known)
        assert holder.build_pipeline(dict(holder.loaded)).target_size == want, known
