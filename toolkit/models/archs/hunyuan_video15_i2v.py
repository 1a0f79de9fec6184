"""HunyuanVideo 1.5 image-to-video: the i2v checkpoints of hunyuan_video15's DiT, conditioned on `init_img`
twice: its VAE latents as the first frame (beside the noise and a first-frame mask) and its SigLIP
embedding (729 tokens at the real 384 px) beside the text. The text encoders, tokenizers and VAE are
hunyuan_video15's (one pair in the pool). Image-to-video only: every request needs `init_img`.

The output size is the checkpoint's resolution bucket nearest the image's aspect (480p: about 848x480,
720p: 1280x720): the pipeline takes no width/height, so the request's size shapes the image (its aspect),
not the video. Checkpoints: 480p and 720p, CFG-distilled ones of both, and a 480p step-distilled one (8
steps, with a MeanFlow end-time embedding)."""
from dataclasses import replace

from toolkit.models.arch import IMAGE_ENCODER, PROCESSOR, ArchSpec, Component, SampleDefaults, Task, Tiny, Variant
from toolkit.models.archs.hunyuan_video15 import (COMPONENTS, GUIDER_FILE, HV15, LATENTS, REPO, SAME_SHAPES,
                                                  SCHEDULER_FILE, SIZE_480P, SIZE_720P, TINY_SAMPLE, TINY_TRANSFORMER,
                                                  HunyuanVideo15Model, tiny_configs, tiny_text_encoders,
                                                  tiny_transformer, tiny_vae, transformer_facts, transformer_file,
                                                  transformer_signature)
from toolkit.models.formats.dit_configs import from_known

SAME_SHAPES_I2V = ("480p and 720p checkpoints have the same shapes: model.variant says which (its shift and its "
                   "resolution bucket)",)
# the i2v repos' transformer/config.json (480p and 720p: target_size alone differs, which the variant sets on
# a model read from a file); the step-distilled one's MeanFlow time_r_in tells it; and the tiny factory's
TRANSFORMER_KNOWN = {"hunyuanvideo-1.5-i2v": dict(HV15, task_type="i2v"),
                     "hunyuanvideo-1.5-i2v-step-distilled": dict(HV15, task_type="i2v", use_meanflow=True),
                     "tiny": dict(TINY_TRANSFORMER)}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the HunyuanVideo 1.5 i2v transformer",
                      variants={"hunyuanvideo-1.5-i2v-step-distilled": "480p_step_distilled"},
                      notes={"hunyuanvideo-1.5-i2v": SAME_SHAPES_I2V})


VARIANTS = {
    "480p": Variant(SIZE_480P, name_or_path=REPO.format("480p_i2v")),
    "720p": Variant(SIZE_720P, name_or_path=REPO.format("720p_i2v"), scheduler={"shift": 7.0}),
    "480p_distilled": Variant({**SIZE_480P, "guidance_scale": 1.0}, name_or_path=REPO.format("480p_i2v_distilled")),
    "720p_distilled": Variant({**SIZE_720P, "guidance_scale": 1.0}, name_or_path=REPO.format("720p_i2v_distilled"),
                              scheduler={"shift": 7.0}),
    "480p_step_distilled": Variant({**SIZE_480P, "guidance_scale": 1.0, "num_inference_steps": 8},
                                   name_or_path=REPO.format("480p_i2v_step_distilled"), scheduler={"shift": 7.0}),
}


def tiny_siglip(b):
    """(SiglipImageProcessor, SiglipVisionModel): 32 px in 8 px patches (16 tokens), 16 wide (the transformer's
    image_embed_dim)."""
    from transformers import SiglipImageProcessor, SiglipVisionConfig, SiglipVisionModel

    processor = SiglipImageProcessor(size={"height": 32, "width": 32})
    with b.seeded("image_encoder"):
        encoder = SiglipVisionModel(SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                                       num_attention_heads=2, image_size=32, patch_size=8)).eval()
    return processor, encoder


def _tiny(b):
    feature_extractor, image_encoder = tiny_siglip(b)
    return dict(tiny_text_encoders(b), vae=tiny_vae(b), transformer=tiny_transformer(b, "i2v"),
                feature_extractor=feature_extractor, image_encoder=image_encoder, **tiny_configs())


# the repo's feature_extractor/ and image_encoder/ (SigLIP so400m, patch 14 at 384 px) before the transformer,
# whose files are read with the i2v configs
COMPONENTS_I2V = COMPONENTS[:-1] + (
    Component("feature_extractor", "transformers:SiglipImageProcessor", PROCESSOR),
    Component("image_encoder", "transformers:SiglipVisionModel", IMAGE_ENCODER),
    replace(COMPONENTS[-1], single_file=transformer_file("toolkit.models.archs.hunyuan_video15_i2v:transformer_config",
                                                         "HunyuanVideo 1.5 i2v transformer")),
)

SPEC = ArchSpec(
    name="hunyuan_video15_i2v", modality="video", default_name_or_path=REPO.format("480p_i2v"),
    pipeline="HunyuanVideo15ImageToVideoPipeline", holder=HunyuanVideo15Model, components=COMPONENTS_I2V,
    output_type="np", tasks=(Task("i2v", "HunyuanVideo15ImageToVideoPipeline"),),
    defaults=SampleDefaults(848, 480, 50, 6.0, num_frames=121, fps=24, output_ext="mp4"),
    variants=VARIANTS,
    size_divisor=16,
    latents=LATENTS, scheduler_file=SCHEDULER_FILE, guider_files={"guider": GUIDER_FILE},
    tiny=Tiny(_tiny, TINY_SAMPLE),
    description="HunyuanVideo 1.5 image-to-video (8.3B DiT; Qwen2.5-VL + Glyph-ByT5 + SigLIP, 32-channel 16x VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    batch_arg=None,                   # one video per pass (hunyuan_video15's docstring)
)
