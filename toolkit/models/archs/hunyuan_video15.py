"""HunyuanVideo 1.5 text-to-video: an 8.3B dual-stream 3D DiT over Qwen2.5-VL's text model (the third-last
hidden state, the 108-token system prompt cropped off) and Glyph-ByT5 (run only on the prompt's quoted
text), the 32-channel causal video VAE (16x spatial, 4x temporal). Classifier-free guidance runs through the
pipeline's `guider` component (diffusers' ClassifierFreeGuidance): the pipeline takes no guidance_scale, so
the holder hands each call a copy of the resident guider with the request's scale.

Checkpoints per resolution (480p, 720p) and a CFG-distilled 480p one (guidance 1: one pass per step), each a
hunyuanvideo-community repo; image-to-video is other checkpoints (hunyuan_video15_i2v), sharing the text
encoders, tokenizers and VAE.

diffusers 0.42.1 makes one video per pass here: `num_videos_per_prompt` > 1 breaks the t2v pipeline (its
zero image embedding is made for one), and the VAE's causal attention mask cannot take a batch of two.

Its files: Tencent's original layout (ComfyUI's `diffusion_models/hunyuanvideo1.5_*.safetensors`), read by the
tables below (diffusers has no converter for it), with the configs below; the guider from `guider_files`. The
480p and 720p (and t2v and i2v) checkpoints have the same shapes: a file is read as the arch and variant the
request names (`model.arch`, `model.variant`); what differs, the scheduler's shift and the i2v pipeline's
resolution bucket (its transformer's `target_size`), follows the variant."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, GUIDER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component,
                                 Latents, SampleDefaults, SingleFile, Tiny, Variant)
from toolkit.models.archs import hunyuan_video
from toolkit.models.base_model import BaseModel
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
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
TARGET_SIZES = {"480p": 640, "720p": 960}          # by the variant's resolution (its name's first part)

# hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-* transformer/config.json (480p and 720p differ in
# target_size alone); and the tiny factory's
HV15 = dict(in_channels=65, out_channels=32, num_attention_heads=16, attention_head_dim=128, num_layers=54,
            num_refiner_layers=2, mlp_ratio=4.0, patch_size=1, patch_size_t=1, qk_norm="rms_norm", text_embed_dim=3584,
            text_embed_2_dim=1472, image_embed_dim=1152, rope_theta=256.0, rope_axes_dim=[16, 56, 56],
            use_meanflow=False, target_size=640)
TINY_TRANSFORMER = dict(in_channels=65, out_channels=32, num_attention_heads=2, attention_head_dim=16, num_layers=2,
                        num_refiner_layers=1, text_embed_dim=32, text_embed_2_dim=32, image_embed_dim=16,
                        rope_axes_dim=[4, 6, 6], target_size=64)
TRANSFORMER_KNOWN = {"hunyuanvideo-1.5-t2v": dict(HV15, task_type="t2v"), "tiny": dict(TINY_TRANSFORMER, task_type="t2v")}
SAME_SHAPES = ("480p and 720p checkpoints have the same shapes: model.variant says which (its shift; the t2v "
               "pipeline is given the size, so target_size goes unused)",)

# Tencent's names <- diffusers': HunyuanVideo's tables but for the double blocks' separate q, k, v, and what
# 1.5 has over them (the glyph and image projections, the condition-type embedding, MeanFlow's time_r_in)
_D = r"^transformer_blocks\.(\d+)\."
RENAMES = (
    (r"^time_embed\.timestep_embedder\.linear_1", "time_in.mlp.0"), (r"^time_embed\.timestep_embedder\.linear_2", "time_in.mlp.2"),
    (r"^time_embed\.timestep_embedder_r\.linear_1", "time_r_in.mlp.0"),
    (r"^time_embed\.timestep_embedder_r\.linear_2", "time_r_in.mlp.2"),
    (r"^context_embedder_2\.norm", "byt5_in.layernorm"), (r"^context_embedder_2\.linear_(\d)", r"byt5_in.fc\1"),
    (r"^image_embedder\.norm_in", "vision_in.proj.0"), (r"^image_embedder\.linear_1", "vision_in.proj.1"),
    (r"^image_embedder\.linear_2", "vision_in.proj.3"), (r"^image_embedder\.norm_out", "vision_in.proj.4"),
    (r"^cond_type_embed", "cond_type_embedding"),
    (_D + r"attn\.to_q", r"double_blocks.\1.img_attn_q"), (_D + r"attn\.to_k", r"double_blocks.\1.img_attn_k"),
    (_D + r"attn\.to_v", r"double_blocks.\1.img_attn_v"), (_D + r"attn\.add_q_proj", r"double_blocks.\1.txt_attn_q"),
    (_D + r"attn\.add_k_proj", r"double_blocks.\1.txt_attn_k"), (_D + r"attn\.add_v_proj", r"double_blocks.\1.txt_attn_v"),
) + hunyuan_video.RENAMES
FUSED = tuple(f for f in hunyuan_video.FUSED if "individual_token_refiner" in f[2])     # the refiner's qkv alone
SWAPPED = (r"^norm_out\.linear\.",)          # the final modulation: (shift, scale) in Tencent's order


def to_original(state: dict) -> dict:
    from toolkit.models.formats.original_layout import to_original as remap
    return remap(state, RENAMES, FUSED, SWAPPED)


def convert_original(checkpoint: dict, config: dict) -> dict:
    from toolkit.models.formats.original_layout import read_original
    return read_original(checkpoint, "HunyuanVideo15Transformer3DModel", config, RENAMES, FUSED, SWAPPED)


def transformer_signature(view) -> dict:
    if not view.has("cond_type_embedding.weight") or not view.has("double_blocks.0.img_attn_q.weight"):
        raise FileKindError("no cond_type_embedding / double_blocks.0.img_attn_q: not a HunyuanVideo 1.5 transformer")
    width, in_channels, patch_t, patch, _ = view.shape("img_in.proj.weight")
    return {"width": width, "in_channels": in_channels, "patch": [patch_t, patch],
            "patch_out": view.dim("final_layer.linear.weight"), "head_dim": view.dim("double_blocks.0.img_attn_q_norm.weight"),
            "text_embed_dim": view.dim("txt_in.input_embedder.weight", 1),
            "text_embed_2_dim": view.dim("byt5_in.fc1.weight", 1), "image_embed_dim": view.dim("vision_in.proj.1.weight", 1),
            "num_layers": view.count(r"double_blocks\.(\d+)\."),
            "num_refiner_layers": view.count(r"txt_in\.individual_token_refiner\.blocks\.(\d+)\."),
            "mlp": view.dim("double_blocks.0.img_mlp.fc1.weight"), "use_meanflow": view.has("time_r_in.mlp.0.weight")}


def transformer_facts(c: dict) -> dict:
    width = c["num_attention_heads"] * c["attention_head_dim"]
    patch, patch_t = c.get("patch_size", 1), c.get("patch_size_t", 1)
    return {"width": width, "in_channels": c["in_channels"], "patch": [patch_t, patch],
            "patch_out": c["out_channels"] * patch * patch * patch_t, "head_dim": c["attention_head_dim"],
            "text_embed_dim": c["text_embed_dim"], "text_embed_2_dim": c["text_embed_2_dim"],
            "image_embed_dim": c["image_embed_dim"], "num_layers": c["num_layers"],
            "num_refiner_layers": c["num_refiner_layers"], "mlp": int(width * c.get("mlp_ratio", 4.0)),
            "use_meanflow": c.get("use_meanflow", False)}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the HunyuanVideo 1.5 t2v transformer", notes={"hunyuanvideo-1.5-t2v": SAME_SHAPES})


def transformer_file(config: str, label: str) -> SingleFile:
    return SingleFile("toolkit.models.archs.hunyuan_video15:convert_original",
                      "toolkit.models.archs.hunyuan_video15:to_original",
                      anchors=("cond_type_embedding.weight", "double_blocks.0.img_attn_q.weight"), config=config,
                      kind="hunyuan_video15_dit", label=label)


TRANSFORMER_FILE = transformer_file("toolkit.models.archs.hunyuan_video15:transformer_config",
                                    "HunyuanVideo 1.5 transformer")

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

    def build_pipeline(self, components: dict):
        """A transformer read from a file has the config of its shapes, the same at 480p and 720p: the
        pipeline's resolution bucket (`target_size`, which it reads from that config) is the variant's."""
        pipe = super().build_pipeline(components)
        fc = getattr(components.get("transformer"), "_aitk_file_config", None)
        variant = self.model_config.variant or self.spec.default_variant or ""
        target = TARGET_SIZES.get(variant.split("_")[0])
        if fc is not None and fc.known != "tiny" and target and hasattr(pipe, "target_size"):
            pipe.target_size = target       # a real checkpoint's shapes (the tiny one's config is its own)
        return pipe


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


def tiny_transformer(b, task: str, **over):
    """65 input channels (32 noisy + 32 first-frame latents + a mask), 2 layers of 2 heads of 16 (RoPE axes
    4+6+6); target_size 64: the i2v pipeline's resolution bucket is the tiny request's 64x64. Stored in bf16,
    as the real repos store it: its glyph projection is 2048 wide whatever the model's width (4M weights)."""
    import torch
    from diffusers import HunyuanVideo15Transformer3DModel

    with b.seeded("transformer"):
        return HunyuanVideo15Transformer3DModel(**{**TINY_TRANSFORMER, "task_type": task, **over}).eval().to(
            torch.bfloat16)


def tiny_configs() -> dict:
    from diffusers import ClassifierFreeGuidance, FlowMatchEulerDiscreteScheduler

    guider = ClassifierFreeGuidance(**{k: v for k, v in GUIDER_FILE.items() if k != "_class_name"})
    return dict(scheduler=FlowMatchEulerDiscreteScheduler(shift=5.0), guider=guider)


def _tiny(b):
    return dict(tiny_text_encoders(b), vae=tiny_vae(b), transformer=tiny_transformer(b, "t2v"), **tiny_configs())


COMPONENTS = (
    Component("scheduler", "SchedulerMixin", SCHEDULER),
    Component("guider", "BaseGuidance", GUIDER),
    Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen2_5"),
    Component("tokenizer_2", "PreTrainedTokenizerBase", TOKENIZER, vocab="byt5"),
    Component("text_encoder", "transformers:Qwen2_5_VLTextModel", TEXT_ENCODER),
    Component("text_encoder_2", "transformers:T5EncoderModel", TEXT_ENCODER),
    Component("vae", "AutoencoderKLHunyuanVideo15", VAE),
    Component("transformer", "HunyuanVideo15Transformer3DModel", DENOISER, single_file=TRANSFORMER_FILE),
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
    latents=LATENTS, scheduler_file=SCHEDULER_FILE, guider_files={"guider": GUIDER_FILE},
    tiny=Tiny(_tiny, TINY_SAMPLE),
    description="HunyuanVideo 1.5 text-to-video (8.3B DiT; Qwen2.5-VL + Glyph-ByT5, 32-channel 16x VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    batch_arg=None,                   # one video per pass (the module docstring)
)
