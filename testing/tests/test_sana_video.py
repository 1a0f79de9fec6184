"""SANA-Video's own call the contract suite does not single out: the frame count reaches the pipeline as
`frames`, resolution binning follows the request, the model card's negative prompt is the default, and
`motion_score` appends the card's suffix only when set."""
from toolkit.config_modules import GenerateImageConfig
from toolkit.models.archs.sana_video import NEGATIVE_PROMPT
from toolkit.models.base_model import get_model_class


def _kwargs(**sample):
    holder = get_model_class("sana_video")({"arch": "sana_video", "name_or_path": "x/y"}, device="cpu")
    gen = GenerateImageConfig.from_dict({"prompt": "a cat", "width": 64, "height": 64, **sample}, holder.model_config)
    return holder.pipeline_kwargs(gen)


def test_frames_binning_and_negative_prompt_reach_the_pipeline_as_it_names_them():
    kw = _kwargs(num_frames=17)
    assert kw["frames"] == 17 and "num_frames" not in kw
    assert kw["use_resolution_binning"] is True and kw["negative_prompt"] == NEGATIVE_PROMPT
    assert _kwargs(resolution_binning=False)["use_resolution_binning"] is False
    assert _kwargs(negative_prompt="blur")["negative_prompt"] == "blur"


def test_motion_score_appends_the_model_cards_suffix_only_when_set():
    assert _kwargs()["prompt"] == "a cat"
    assert _kwargs(motion_score=30)["prompt"] == "a cat motion score: 30."
