"""HunyuanVideo 1.5 text-to-video: an 8.3B dual-stream 3D DiT over Qwen2.5-VL's text model (the third-last
hidden state, the 108-token system prompt cropped off) and Glyph-ByT5 (run only on the prompt's quoted
text), the 32-channel causal video VAE (16x spatial, 4x temporal). Classifier-free guidance runs through the
pipeline's `guider` component (diffusers' ClassifierFreeGuidance): the pipeline takes no guidance_scale, so
the holder hands each call a copy of the resident guider with the request's scale.

Checkpoints per resolution (480p, 720p) and a CFG-distilled 480p one (guidance 1: one pass per step), each a
hunyuanvideo-community repo; image-to-video is other checkpoints (hunyuan_video15_i2v), sharing the text
encoders, tokenizers and VAE.

diffusers 0.42.1 makes one video per pass here: `num_videos_per_prompt` > 1 breaks the t2v pipeline (its
zero image embedding is made for one), and the VAE's causal attention mask cannot take a batch of two."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, GUIDER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component,
                                 Latents, SampleDefaults, Tiny, Variant)
from toolkit.models.base_model import BaseModel
from toolkit.models.tiny import kit
from toolkit.models.tiny.tokenizers import PROMPTS, qwen2_tokenizer

# hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-* scheduler/ and guider/ configs (diffusers'
# scripts/convert_hunyuan_video1_5_to_diffusers.py): flow matching, shift 5 at 480p, 9 at 720p t2v, 7 at 720p i2v;
# CFG 6, 1 in the distilled checkpoints
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", num_train_timesteps=1000, shift=5.0)
GUIDER_FILE = dict(_class_name="ClassifierFreeGuidance", guidance_scale=6.0)
REPO = "hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-{}"
# the resolution bucket a checkpoint makes (its transformer's target_size: 640 -> 848x480, 960 -> 1280x720)
SIZE_480P = {"width": 848, "height": 480}
SIZE_720P = {"width": 1280, "height": 720}

VARIANTS = {
    "480p": Variant(SIZE_480P, name_or_path=REPO.format("480p_t2v")),
    "720p": Variant(SIZE_720P, name_or_path=REPO.format("720p_t2v"), scheduler={"shift": 9.0}),
    # CFG-distilled: the guidance is in the weights
    "480p_distilled": Variant({**SIZE_480P, "guidance_scale": 1.0}, name_or_path=REPO.format("480p_t2v_distilled")),
}

TEXT_HIDDEN = 32


class HunyuanVideo15Model(BaseModel):
    """The request's guidance_scale goes to a per-call copy of each guider the pipeline holds (the resident
    ones are never changed); the rest is BaseModel's call, the task's input image included."""

    def pipeline_kwargs(self, gen):
        kw = super().pipeline_kwargs(gen)
        del kw["guidance_scale"]          # the guiders', below
        return kw

    def call_patches(self, gen, pipe) -> list:
        roles = [c.role for c in self.components if c.kind == GUIDER and getattr(pipe, c.role, None) is not None]
        return [(pipe, role, lambda resident: resident.new(guidance_scale=gen.guidance_scale)) for role in roles]


# -- the tiny instance (shared with hunyuan_video15_i2v) ------------------------------------------------
def _system_prefix() -> str:
    """The chat-template text before the prompt, which the pipeline crops (its first 108 tokens)."""
    import inspect

    from diffusers import HunyuanVideo15Pipeline
    system = inspect.signature(HunyuanVideo15Pipeline._get_mllm_prompt_embeds).parameters["system_message"].default
    return f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n"


def tiny_text_encoders(b) -> dict:
    """Qwen2.5-VL's text model (3 layers: the pipeline reads hidden_states[-3]) with a Qwen2 tokenizer whose
    system prefix is the 108 tokens the pipeline crops; Glyph-ByT5 (a T5 encoder over ByT5's byte vocabulary,
    recipe shared with hunyuan_image, whose glyph encoder it is too)."""
    from transformers import Qwen2_5_VLTextConfig, Qwen2_5_VLTextModel

    prefix = _system_prefix()
    tokenizer = qwen2_tokenizer([prefix + p + "<|im_end|>\n<|im_start|>assistant\n" for p in PROMPTS],
                                prefixes={prefix: 108})
    with b.seeded("text_encoder", "hunyuan_video15_qwen"):
        text_encoder = Qwen2_5_VLTextModel(Qwen2_5_VLTextConfig(
            vocab_size=len(tokenizer), hidden_size=TEXT_HIDDEN, intermediate_size=2 * TEXT_HIDDEN, num_hidden_layers=3,
            num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096, rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
            bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)).eval()
    tokenizer_2, text_encoder_2 = tiny_glyph_byt5(b)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, tokenizer_2=tokenizer_2, text_encoder_2=text_encoder_2)


def tiny_glyph_byt5(b):
    """(ByT5Tokenizer, T5EncoderModel): the glyph encoder HunyuanImage 2.1 and HunyuanVideo 1.5 share."""
    from transformers import ByT5Tokenizer

    tokenizer = ByT5Tokenizer()
    with b.seeded("text_encoder_2", "glyph_byt5"):
        return tokenizer, kit.t5_encoder(tokenizer)


def tiny_vae(b):
    """Five blocks (four 2x downsamples: 16x spatial, the last two also in time: 4x), 32 latent channels;
    the last block a multiple of 2 x 32 wide, as the encoder's channel grouping needs. Stored in bf16, as the
    real repos store it (its 64-wide blocks are 2M weights)."""
    import torch
    from diffusers import AutoencoderKLHunyuanVideo15

    with b.seeded("vae", "hunyuan_video15_vae"):
        return AutoencoderKLHunyuanVideo15(latent_channels=32, block_out_channels=(8, 8, 8, 16, 64),
                                           layers_per_block=1).eval().to(torch.bfloat16)


def tiny_transformer(b, task: str):
    """65 input channels (32 noisy + 32 first-frame latents + a mask), 2 layers of 2 heads of 16 (RoPE axes
    4+6+6); target_size 64: the i2v pipeline's resolution bucket is the tiny request's 64x64. Stored in bf16,
    as the real repos store it: its glyph projection is 2048 wide whatever the model's width (4M weights)."""
    import torch
    from diffusers import HunyuanVideo15Transformer3DModel

    with b.seeded("transformer"):
        return HunyuanVideo15Transformer3DModel(
            in_channels=65, out_channels=32, num_attention_heads=2, attention_head_dim=16, num_layers=2,
            num_refiner_layers=1, text_embed_dim=TEXT_HIDDEN, text_embed_2_dim=32, image_embed_dim=16,
            rope_axes_dim=(4, 6, 6), target_size=64, task_type=task).eval().to(torch.bfloat16)


def tiny_configs() -> dict:
    from diffusers import ClassifierFreeGuidance, FlowMatchEulerDiscreteScheduler

    return dict(scheduler=FlowMatchEulerDiscreteScheduler(shift=5.0), guider=ClassifierFreeGuidance(guidance_scale=6.0))


def _tiny(b):
    return dict(tiny_text_encoders(b), vae=tiny_vae(b), transformer=tiny_transformer(b, "t2v"), **tiny_configs())


COMPONENTS = (
    Component("scheduler", "SchedulerMixin", SCHEDULER),
    Component("guider", "BaseGuidance", GUIDER),
    Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen2_5"),
    Component("tokenizer_2", "PreTrainedTokenizerBase", TOKENIZER),
    Component("text_encoder", "transformers:Qwen2_5_VLTextModel", TEXT_ENCODER),
    Component("text_encoder_2", "transformers:T5EncoderModel", TEXT_ENCODER),
    Component("vae", "AutoencoderKLHunyuanVideo15", VAE),
    Component("transformer", "HunyuanVideo15Transformer3DModel", DENOISER),
)
LATENTS = Latents("BCFHW", 32, spatial=16, temporal=4, format=latent_formats.HUNYUAN_VIDEO15)
TINY_SAMPLE = {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 6.0, "fps": 8}

SPEC = ArchSpec(
    name="hunyuan_video15", modality="video", default_name_or_path=REPO.format("480p_t2v"),
    pipeline="HunyuanVideo15Pipeline", holder=HunyuanVideo15Model, components=COMPONENTS, output_type="np",
    # the model card: 121 frames (5 s at 24 fps), 50 steps, CFG 6; 480p is 848x480
    defaults=SampleDefaults(848, 480, 50, 6.0, num_frames=121, fps=24, output_ext="mp4"),
    variants=VARIANTS,
    size_divisor=16,                  # 16x VAE, 1x1 DiT patches
    latents=LATENTS, scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, TINY_SAMPLE),
    description="HunyuanVideo 1.5 text-to-video (8.3B DiT; Qwen2.5-VL + Glyph-ByT5, 32-channel 16x VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    batch_arg=None,                   # one video per pass (the module docstring)
)
