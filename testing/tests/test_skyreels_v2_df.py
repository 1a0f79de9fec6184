"""SkyReels V2 diffusion forcing's own facts the contract suite does not single out: its pipeline steps a
copy of the scheduler per latent frame, so the holder reports every denoising pass (the rows of each
window's step matrix) through the step-end callback, out of a total it plans before the first; long
videos run several windows; and the request's causal block size always reaches the pipeline, which
writes it into the resident transformer."""
import pytest
import torch

from testing.fixtures import input_image
from toolkit.config_modules import GenerateImageConfig
from toolkit.models.base_model import get_model_class

ARCH = "skyreels_v2_df"
# (task, frames, extras): one window in step, one staggered (ar_step), three windows of 9 frames over 17
# (5 latent frames, windows of 3 overlapping by 2), staggered windows, and an image's first frame held clean
CASES = [
    ("txt2img", 9, {}),
    ("txt2img", 9, {"ar_step": 1}),
    ("txt2img", 17, {"base_num_frames": 9, "overlap_history": 5}),
    ("txt2img", 17, {"base_num_frames": 9, "overlap_history": 5, "ar_step": 1}),
    ("i2v", 17, {"base_num_frames": 9, "overlap_history": 5, "ar_step": 1}),
]


@pytest.fixture(scope="module")
def holder(tiny):
    h = get_model_class(ARCH)({"arch": ARCH, "name_or_path": tiny(ARCH), "local_only": True}, device="cpu")
    return h.load_model()


@pytest.mark.parametrize("task,frames,extras", CASES)
def test_every_pass_is_reported_once_out_of_the_planned_total(holder, task, frames, extras, tmp_path):
    sample = {"prompt": "a test", "width": 64, "height": 64, "num_frames": frames, "num_inference_steps": 2,
              "guidance_scale": 1.0, "fps": 8, "seed": 7, **extras}       # no CFG: one transformer call a pass
    if task == "i2v":
        sample["init_img"] = input_image(tmp_path / "first.png")
    gen = GenerateImageConfig.from_dict(sample, holder.model_config)
    assert gen.task == task
    passes, calls = [], []
    hook = holder.pipeline.transformer.register_forward_hook(lambda *_: passes.append(1))
    try:
        video = holder.generate_single(gen, on_step=lambda i, n, t, lat, x0: calls.append((i, n, lat.shape[2])))
    finally:
        hook.remove()
    total = len(passes)
    windows = 1 if frames <= extras.get("base_num_frames", 97) else 3
    assert total >= 2 * windows and [c[:2] for c in calls] == [(i, total) for i in range(total)]
    assert {c[2] for c in calls} == {3}, "each pass reports its window's latents"
    assert len(video) == frames


def test_the_block_size_and_a_long_videos_overlap_always_reach_the_pipeline(holder):
    def kwargs(**sample):
        return holder.pipeline_kwargs(GenerateImageConfig.from_dict(
            {"prompt": "p", "width": 64, "height": 64, **sample}, holder.model_config))

    short = kwargs(num_frames=9)
    assert short["causal_block_size"] == 1 and short["fps"] == 24 and "overlap_history" not in short
    assert kwargs(num_frames=17, base_num_frames=9)["overlap_history"] == 17       # Skywork's recommendation
    assert kwargs(num_frames=17, base_num_frames=9, overlap_history=5)["overlap_history"] == 5
    assert kwargs(num_frames=9, causal_block_size=3)["causal_block_size"] == 3


def test_a_block_size_asked_once_does_not_stay_in_the_resident_transformer(holder):
    """The pipeline registers the call's block size on the transformer: the next request's own (1)
    replaces it, so a request is not shaped by the one before."""
    base = {"prompt": "p", "width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "fps": 8, "seed": 3}
    first = holder.generate_single(GenerateImageConfig.from_dict(base, holder.model_config))
    holder.generate_single(GenerateImageConfig.from_dict({**base, "causal_block_size": 3, "ar_step": 1},
                                                         holder.model_config))
    assert holder.pipeline.transformer.config.num_frame_per_block == 3
    again = holder.generate_single(GenerateImageConfig.from_dict(base, holder.model_config))
    assert holder.pipeline.transformer.config.num_frame_per_block == 1
    assert torch.equal(torch.as_tensor(first), torch.as_tensor(again))
