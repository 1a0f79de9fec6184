"""HunyuanImage 2.1's own facts the contract suite does not single out: the request's guidance scale reaches
both guiders of the base checkpoint (the OCR one runs for a quoted prompt) and the distilled checkpoint's
embedded guidance, whose repo has no guiders at all."""
import numpy as np
import pytest
import torch

from toolkit.config_modules import GenerateImageConfig
from toolkit.models.base_model import get_model_class
from toolkit.models.registry import ARCHS


def _holder(folder, variant=None):
    return get_model_class("hunyuan_image")({"arch": "hunyuan_image", "name_or_path": str(folder), "local_only": True,
                                             "variant": variant}, device="cpu").load_model()


def _bare(folder):
    from diffusers import DiffusionPipeline

    pipe = DiffusionPipeline.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _gen(holder, **over):
    sample = {**ARCHS["hunyuan_image"].tiny.sample, "prompt": "a small test prompt", "seed": 7, **over}
    return GenerateImageConfig.from_dict(sample, holder.model_config)


def _image(holder, gen):
    return np.asarray(holder.generate_single(gen))


def _bare_image(pipe, holder, gen):
    out = pipe(**holder.pipeline_kwargs(gen), generator=torch.Generator("cpu").manual_seed(7))
    return np.asarray(out.images[0])


@pytest.mark.parametrize("prompt,used", [("a small test prompt", "guider"), ('a sign that says "OPEN"', "ocr_guider")])
def test_guidance_scale_goes_to_copies_of_both_guiders(tiny, prompt, used):
    folder = tiny("hunyuan_image")
    holder = _holder(folder)
    resident = {r: getattr(holder.pipeline, r) for r in ("guider", "ocr_guider")}
    bare = _bare(folder)
    seen, outs = [], {}
    for scale in (1.5, 5.0):
        gen = _gen(holder, prompt=prompt, guidance_scale=scale)
        original = type(resident[used]).__call__

        def spy(self, *a, **k):
            seen.append((self.guidance_scale, self is resident[used], self.config.adaptive_projected_guidance_start_step))
            return original(self, *a, **k)
        type(resident[used]).__call__ = spy
        try:
            outs[scale] = _image(holder, gen)
        finally:
            type(resident[used]).__call__ = original
        for role in resident:
            setattr(bare, role, resident[role].new(guidance_scale=scale))
        assert np.array_equal(outs[scale], _bare_image(bare, holder, gen)), f"guidance {scale}: not the bare pipeline's"
    # the two differ in their APG start step: the one that ran is `used`, a copy with the request's scale
    assert {step for _s, _r, step in seen} == {resident[used].config.adaptive_projected_guidance_start_step}
    assert {s for s, _r, _step in seen} == {1.5, 5.0} and not any(r for _s, r, _step in seen), \
        f"the {used} that ran was not a copy with the request's scale"
    assert not np.array_equal(outs[1.5], outs[5.0])
    assert all(getattr(holder.pipeline, r) is g and g.guidance_scale == 3.5 for r, g in resident.items())


def test_the_distilled_checkpoint_takes_the_scale_as_embedded_guidance(tiny, tmp_path):
    """A tiny distilled repo (guidance-embedding MeanFlow transformer, no guiders), as the variant loads it."""
    from toolkit.models.archs.hunyuan_image import tiny_transformer
    from toolkit.models.tiny import build_pipeline
    from toolkit.models.tiny.kit import Build

    pipe = build_pipeline("hunyuan_image")
    b = Build(ARCHS["hunyuan_image"], 1, 0)
    pipe.transformer = tiny_transformer(b, guidance_embeds=True, use_meanflow=True)
    pipe.guider = pipe.ocr_guider = None
    pipe.register_modules(transformer=pipe.transformer, guider=None, ocr_guider=None)
    pipe.save_pretrained(tmp_path / "distilled", safe_serialization=True)

    holder = _holder(tmp_path / "distilled", "distilled")
    assert holder.pipeline.guider is None and holder.pipeline.ocr_guider is None
    gen = _gen(holder, guidance_scale=2.0)
    assert holder.pipeline_kwargs(gen)["distilled_guidance_scale"] == 2.0
    got = _image(holder, gen)
    assert np.array_equal(got, _bare_image(_bare(tmp_path / "distilled"), holder, gen))
    assert not np.array_equal(got, _image(holder, _gen(holder, guidance_scale=6.0)))


def test_comfyui_files_alone_need_no_folder_for_the_guiders_or_the_glyph_tokenizer(tiny, tmp_path, no_hub,
                                                                                   monkeypatch):
    """The denoiser and text encoder as ComfyUI's files, the rest given but the guiders (the row's guider_files)
    and ByT5's tokenizer (written from code, as toolkit/tokenizers.py finds none): the folder model's image."""
    from testing.tiny_runs import load, realigned, run
    from toolkit.models.tiny.checkpoints import write_component

    monkeypatch.setenv("AITK_TOKENIZER_CACHE", str(tmp_path / "tokenizers"))
    folder = tiny("hunyuan_image")
    files = {role: write_component("hunyuan_image", folder, role, tmp_path / f"{role}.safetensors",
                                   prefix=prefix)["path"]
             for role, prefix in (("transformer", "model.diffusion_model."), ("text_encoder", ""))}
    rest = {r: f"{folder}/{r}" for r in ("tokenizer", "text_encoder_2", "vae")}
    holder = load({"name_or_path": files["transformer"], "components": {"text_encoder": files["text_encoder"], **rest}})
    assert holder.model_config.arch == "hunyuan_image" and holder.model_config.variant == "base"
    assert holder.loaded["guider"].config.adaptive_projected_guidance_start_step == 5
    assert holder.loaded["ocr_guider"].config.adaptive_projected_guidance_start_step == 38
    assert str(tmp_path / "tokenizers") in holder.loaded["tokenizer_2"].name_or_path
    lat, out = run(realigned(holder), tmp_path)
    ref_lat, ref_out = run(realigned(load({"arch": "hunyuan_image", "name_or_path": folder})), tmp_path)
    assert torch.equal(lat, ref_lat) and np.array_equal(out, ref_out)
