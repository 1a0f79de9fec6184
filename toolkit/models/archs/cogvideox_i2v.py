"""CogVideoX 5B image-to-video: cogvideox's DiT taking 32 channels (the 16 noisy latents and the 16 latents
of `init_img`, the first frame, padded with zeros over time) with learned positional embeddings beside
RoPE; the T5-XXL, VAE and DPM solver cogvideox has (one pair in the pool). Image-to-video only: every
request needs `init_img`.

Its learned positions fix the size: the real checkpoint runs 720x480 alone (the pipeline refuses another).
The model card: 49 frames at 8 fps, 50 steps, guidance 6."""
from toolkit.models.arch import ArchSpec, Latents, SampleDefaults, Task, Tiny
from toolkit.models.archs.cogvideox import (COMPONENTS, SAMPLE_EXTRAS, SCHEDULER_FILE, CogVideoXModel,
                                            tiny_scheduler, tiny_t5, tiny_transformer, tiny_vae)


def _tiny(b):
    tokenizer, text_encoder = tiny_t5(b)
    # learned positions for the tiny request's 64x64 (8x8 latents), 9 frames
    transformer = tiny_transformer(b, in_channels=32, use_learned_positional_embeddings=True)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=tiny_vae(b), transformer=transformer,
                scheduler=tiny_scheduler())


SPEC = ArchSpec(
    name="cogvideox_i2v", modality="video", default_name_or_path="THUDM/CogVideoX-5b-I2V",
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    pipeline="CogVideoXImageToVideoPipeline", holder=CogVideoXModel, components=COMPONENTS, output_type="np",
    tasks=(Task("i2v", "CogVideoXImageToVideoPipeline"),),
    defaults=SampleDefaults(720, 480, 50, 6.0, num_frames=49, fps=8, output_ext="mp4"),
    size_divisor=16,
    latents=Latents("BFCHW", 16, spatial=8, temporal=4, format=None),
    sample_extras=SAMPLE_EXTRAS,
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 6.0,
                      "fps": 8}),
    description="CogVideoX 5B image-to-video (T5-XXL, 3D causal VAE; 720x480)",
    scheduler_config={"_class_name": "CogVideoXDPMScheduler", "prediction_type": "v_prediction"},
    batch_arg=None,                   # the pipeline forces one video per prompt
)
