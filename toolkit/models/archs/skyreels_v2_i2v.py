"""SkyReels V2 I2V image-to-video (Skywork): Wan 2.1 I2V's 3D DiT fine-tuned for film, taking 36 channels (the
16 noisy latents, a 4-channel first-frame mask and the 16 latents of the first frame) and, through extra
cross-attention keys, the CLIP ViT-H/14 image encoder's penultimate hidden states of `init_img`; UMT5-XXL,
the Wan 2.1 VAE and the CLIP encoder as wan21_i2v has them. Image-to-video only: every request needs
`init_img`, the first frame.

Three checkpoints (variants, each its own repo): 14B 540P (the default), 14B 720P and 1.3B 540P. The
model card runs 544x960 with 97 frames (720P: 720x1280, 121) at 24 fps, 50 steps, guidance 5, flow shift
5. Its first-and-last-frame checkpoint (FLF2V 1.3B) needs a last frame, an input requests do not carry.
The pipeline repeats the image embedding once per prompt, not per video: the holder repeats it per video,
as wan21_i2v's does.

Its files: the original Wan layout, as skyreels_v2's; the 14B ones have Wan 2.1 I2V 14B's shapes (taken for
wan21_i2v unless `model.arch` says), the 1.3B its own."""
from toolkit import latent_formats
from toolkit.models.arch import ArchSpec, Latents, SampleDefaults, Task, Tiny, Variant
from toolkit.models.archs.skyreels_v2 import (SCHEDULER_CONFIG, SKYREELS_LORA, TINY_SAMPLE, WAN_DECODE_FEATURES,
                                              tiny_transformer, tiny_umt5_vae, transformer_facts, transformer_row,
                                              transformer_signature, unipc_flow_config, unipc_flow_scheduler)
from toolkit.models.archs.wan21 import WAN21_1_3B
from toolkit.models.archs.wan21_i2v import COMPONENTS_I2V, TINY_I2V, WAN21_I2V_14B, Wan21I2VModel, tiny_clip_vision
from toolkit.models.formats.dit_configs import from_known

# the shift Skywork's examples set for image-to-video
FLOW_SHIFT = 5.0
# Skywork/SkyReels-V2-I2V-14B-540P-Diffusers (and -720P) transformer/config.json (Wan 2.1 I2V 14B's), and
# I2V-1.3B-540P's (Wan 2.1 1.3B with the 36-channel patch embedding and the image projection); the tiny's
TRANSFORMER_KNOWN = {"skyreels-v2-i2v-14b": WAN21_I2V_14B,
                     "skyreels-v2-i2v-1.3b": dict(WAN21_1_3B, in_channels=36, image_dim=1280, added_kv_proj_dim=1536),
                     "tiny": TINY_I2V}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the SkyReels V2 I2V transformer", variants={"skyreels-v2-i2v-1.3b": "1.3b-540p"})


# wan21_i2v's UMT5, VAE and CLIP rows; the denoiser is SkyReels' class
COMPONENTS = COMPONENTS_I2V[:-1] + (transformer_row("toolkit.models.archs.skyreels_v2_i2v:transformer_config",
                                                    "SkyReels V2 I2V transformer"),)


def _tiny(b):
    image_processor, image_encoder = tiny_clip_vision(b)     # wan21_i2v's very CLIP (a shared pair)
    return dict(tiny_umt5_vae(b), scheduler=unipc_flow_scheduler(FLOW_SHIFT), image_processor=image_processor,
                image_encoder=image_encoder,
                transformer=tiny_transformer(b, in_channels=36, image_dim=32, added_kv_proj_dim=32))


SPEC = ArchSpec(
    name="skyreels_v2_i2v", modality="video", default_name_or_path="Skywork/SkyReels-V2-I2V-14B-540P-Diffusers",
    pipeline="SkyReelsV2ImageToVideoPipeline", holder=Wan21I2VModel, components=COMPONENTS,
    tasks=(Task("i2v", "SkyReelsV2ImageToVideoPipeline"),), output_type="np",
    # model card (540P): 960x544, 97 frames at 24 fps; the pipeline's 50 steps, guidance 5.0
    defaults=SampleDefaults(960, 544, 50, 5.0, num_frames=97, fps=24, output_ext="mp4"),
    variants={"14b-540p": Variant(),
              "14b-720p": Variant(defaults={"width": 1280, "height": 720, "num_frames": 121},
                                  name_or_path="Skywork/SkyReels-V2-I2V-14B-720P-Diffusers"),
              "1.3b-540p": Variant(name_or_path="Skywork/SkyReels-V2-I2V-1.3B-540P-Diffusers")},
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.WAN21), decode_features=WAN_DECODE_FEATURES,
    scheduler_file=unipc_flow_config(FLOW_SHIFT),
    tiny=Tiny(_tiny, {**TINY_SAMPLE, "guidance_scale": 5.0}),
    description="SkyReels V2 I2V image-to-video (Wan 2.1 I2V fine-tuned for film; CLIP image conditioning)",
    scheduler_config=SCHEDULER_CONFIG,
    batch_arg="num_videos_per_prompt",
    lora=SKYREELS_LORA,
)
