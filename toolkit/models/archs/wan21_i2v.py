"""Wan 2.1 I2V 14B image-to-video: Wan 2.1 14B's 3D DiT taking 36 channels (the 16 noisy latents, a
4-channel first-frame mask and the 16 latents of the first frame) and, through extra cross-attention
keys, the CLIP ViT-H/14 image encoder's penultimate hidden states of `init_img`; UMT5-XXL and the Wan
2.1 VAE as wan21 has them. Image-to-video only: every request needs `init_img`, the first frame.

480P and 720P are two checkpoints of the same shapes (variants, each its own repo); the model cards
run 81 frames at 16 fps, 50 steps, guidance 5. The pipeline repeats the image embedding once per
prompt, not per video (a batch of one prompt fails in the cross-attention): the holder repeats it
per video.

Its files: the original Wan layout (ComfyUI's `diffusion_models/wan2.1_i2v_480p_14B_fp16.safetensors`),
read with the configs below (36 input channels and `img_emb` tell it from the T2V rows)."""
import functools
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import (IMAGE_ENCODER, PROCESSOR, ArchSpec, Component, Latents, SampleDefaults, Task, Tiny,
                                 Variant)
from toolkit.models.archs.wan21 import (COMPONENTS, GGUF, LORA, TINY_WAN, WAN_14B, WAN_DECODE_FEATURES, tiny_umt5,
                                        tiny_wan_transformer, transformer_facts, transformer_signature,
                                        unipc_flow_config, unipc_flow_scheduler, with_transformer_config)
from toolkit.models.base_model import BaseModel
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.tiny import kit

# Wan-AI/Wan2.1-I2V-14B-480P-Diffusers (and -720P) transformer/config.json: the 14B with the 36-channel
# patch embedding and the image projection (CLIP ViT-H's 1280 -> the 5120-wide image keys); the tiny's
WAN21_I2V_14B = dict(WAN_14B, in_channels=36, image_dim=1280, added_kv_proj_dim=5120)
TINY_I2V = dict(TINY_WAN, in_channels=36, image_dim=32, added_kv_proj_dim=32)
TRANSFORMER_KNOWN = {"wan2.1-i2v-14b": WAN21_I2V_14B, "tiny": TINY_I2V}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the Wan 2.1 I2V transformer")


# the repo's image_processor/ and image_encoder/ between the VAE and the transformer (their pipeline arguments)
_COMPONENTS = with_transformer_config(COMPONENTS, "toolkit.models.archs.wan21_i2v:transformer_config",
                                      "Wan 2.1 I2V transformer")
COMPONENTS_I2V = _COMPONENTS[:-1] + (
    Component("image_processor", "transformers:CLIPImageProcessor", PROCESSOR),
    Component("image_encoder", "transformers:CLIPVisionModel", IMAGE_ENCODER),
    _COMPONENTS[-1],
)


class Wan21I2VModel(BaseModel):
    def call_patches(self, gen, pipe) -> list:
        """A batch of one prompt: the image embedding once per video (the pipeline repeats it per prompt)."""
        n = gen.batch_size
        if n <= 1:
            return []

        def per_video(original):
            @functools.wraps(original)
            def encode_image(*args, **kwargs):
                return original(*args, **kwargs).repeat(n, 1, 1)
            return encode_image
        return [(pipe, "encode_image", per_video)]


def tiny_clip_vision(b):
    """A tiny CLIP vision tower and its processor (32 px crops): the pipeline takes its penultimate
    hidden states, 32 wide here (the transformer's `image_dim`)."""
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

    processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    config = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                              image_size=32, patch_size=8, projection_dim=32)
    with b.seeded("image_encoder", "clip_vision_h"):
        return processor, CLIPVisionModel(config).eval()


def _tiny(b):
    tokenizer, text_encoder = tiny_umt5(b)          # the very UMT5 and VAE wan21 has (a shared pair)
    with b.seeded("vae", "wan_vae"):
        vae = kit.wan_vae(16)
    image_processor, image_encoder = tiny_clip_vision(b)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, scheduler=unipc_flow_scheduler(3.0),
                image_processor=image_processor, image_encoder=image_encoder,
                transformer=tiny_wan_transformer(b, in_channels=36, image_dim=32, added_kv_proj_dim=32))


SPEC = ArchSpec(
    name="wan21_i2v", modality="video", default_name_or_path="Wan-AI/Wan2.1-I2V-14B-480P-Diffusers",
    pipeline="WanImageToVideoPipeline", holder=Wan21I2VModel, components=COMPONENTS_I2V,
    tasks=(Task("i2v", "WanImageToVideoPipeline"),),
    pipeline_init_kwargs={"transformer_2": None}, output_type="np",
    # model card (480P): 832x480, 81 frames at 16 fps; the pipeline's 50 steps, guidance 5.0
    defaults=SampleDefaults(832, 480, 50, 5.0, num_frames=81, fps=16, output_ext="mp4"),
    variants={"480p": Variant(),
              # the 720P checkpoint: 1280x720, the flow shift Wan recommends at that size
              "720p": Variant(defaults={"width": 1280, "height": 720},
                              name_or_path="Wan-AI/Wan2.1-I2V-14B-720P-Diffusers", scheduler={"flow_shift": 5.0})},
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.WAN21), decode_features=WAN_DECODE_FEATURES,
    scheduler_file=unipc_flow_config(3.0),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 5.0,
                      "fps": 8}),
    description="Wan 2.1 I2V 14B image-to-video (CLIP image conditioning)", gguf=GGUF,
    scheduler_config={"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
    batch_arg="num_videos_per_prompt",
    lora=replace(LORA, markers=()),     # a Wan LoRA file is listed as wan21's
)
