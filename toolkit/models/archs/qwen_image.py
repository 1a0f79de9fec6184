"""Qwen-Image: an MMDiT over a Qwen2.5-VL text encoder (last hidden state, the 34-token system
prefix dropped) and the Qwen Image VAE (16 channels, the Wan 2.1 latent space), latents packed as
2x2-patch tokens; guidance is true CFG (`true_cfg_scale`, on only with a negative prompt).

The tiny Qwen2.5-VL encoder (with its vision tower), tokenizer and VAE are defined here and shared
with qwen_image_edit (the Edit models ship the very same encoder, tokenizer and VAE files)."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Control, Gguf,
                                 Latents,
                                 Lora, SampleDefaults, SingleFile, Task, Tiny, pick_linears)
from toolkit.models.base_model import BaseModel
from toolkit.models.formats import dit_controlnet, llm_encoders, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny.tokenizers import PROMPTS, qwen2_tokenizer

# the pipelines' prompt templates and how many leading tokens each drops (diffusers' own constants)
PROMPT_TEMPLATE = ("<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, "
                   "text, spatial relationships of the objects and background:<|im_end|>\n<|im_start|>user\n{}"
                   "<|im_end|>\n<|im_start|>assistant\n")
EDIT_PLUS_TEMPLATE = ("<|im_start|>system\nDescribe the key features of the input image (color, shape, size, "
                      "texture, objects, background), then explain how the user's text instruction should alter or "
                      "modify the image. Generate a new image that meets the user's requirements while maintaining "
                      "consistency with the original input where appropriate.<|im_end|>\n<|im_start|>user\n{}"
                      "<|im_end|>\n<|im_start|>assistant\n")
EDIT_IMAGE_PROMPT = "Picture 1: <|vision_start|><|image_pad|><|vision_end|>"
PREFIX_TOKENS = {PROMPT_TEMPLATE: 34, EDIT_PLUS_TEMPLATE: 64}

# the Qwen-Image / Qwen-Image-Edit repos' scheduler (exponential shift from the image-token count)
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=0.9,
                        base_image_seq_len=256, max_image_seq_len=8192, shift_terminal=0.02,
                        time_shift_type="exponential")
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", **SCHEDULER_CONFIG)

TEXT_HIDDEN = 32

# Qwen/Qwen-Image transformer/config.json (Qwen-Image-2512's and the Edit models' have its shapes); the tiny factory's
QWEN_IMAGE = dict(patch_size=2, in_channels=64, out_channels=16, num_layers=60, attention_head_dim=128,
                  num_attention_heads=24, joint_attention_dim=3584, guidance_embeds=False, axes_dims_rope=[16, 56, 56])
TINY_TRANSFORMER = dict(patch_size=2, in_channels=64, out_channels=16, num_layers=2, attention_head_dim=16,
                        num_attention_heads=2, joint_attention_dim=TEXT_HIDDEN, guidance_embeds=False,
                        axes_dims_rope=[4, 6, 6], zero_cond_t=False, use_additional_t_cond=False, use_layer3d_rope=False)
TRANSFORMER_KNOWN = {"qwen-image": QWEN_IMAGE, "tiny": TINY_TRANSFORMER}


def transformer_signature(view) -> dict:
    """What a Qwen-Image file's shapes tell (its keys are diffusers' own names)."""
    if not view.has("img_in.weight") or not view.has("txt_norm.weight"):
        raise FileKindError("no img_in / txt_norm: not a Qwen-Image transformer")
    return {"width": view.dim("img_in.weight"), "in_channels": view.dim("img_in.weight", 1),
            "patch_out": view.dim("proj_out.weight"), "joint_attention_dim": view.dim("txt_in.weight", 1),
            "num_layers": view.count(r"transformer_blocks\.(\d+)\."),
            "head_dim": view.dim("transformer_blocks.0.attn.norm_q.weight"),
            # Qwen-Image-Layered's RGB/RGBA timestep embedding: its files are its own
            "additional_t_cond": view.has("time_text_embed.addition_t_embedding.weight")}


def transformer_facts(c: dict) -> dict:
    return {"width": c["num_attention_heads"] * c["attention_head_dim"], "in_channels": c["in_channels"],
            "patch_out": c["patch_size"] ** 2 * c["out_channels"], "joint_attention_dim": c["joint_attention_dim"],
            "num_layers": c["num_layers"], "head_dim": c["attention_head_dim"],
            "additional_t_cond": c.get("use_additional_t_cond", False)}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the Qwen-Image transformer",
                      notes={"qwen-image": ("Qwen-Image-Edit has the same shapes: model.arch qwen_image_edit reads "
                                            "it as the Edit model",)})


def tiny_qwen_tokenizer():
    """Qwen2Tokenizer trained with both pipelines' templates in the corpus, so each system prefix
    tokenizes to exactly as many tokens as the pipeline drops (34 Qwen-Image, 64 Edit-Plus)."""
    return qwen2_tokenizer([PROMPT_TEMPLATE.format(p) for p in PROMPTS] * 4
                           + [EDIT_PLUS_TEMPLATE.format(EDIT_IMAGE_PROMPT + p) for p in PROMPTS] * 4,
                           prefixes={t.split("{}")[0]: n for t, n in PREFIX_TOKENS.items()})


def tiny_qwen25vl(b, tok=None, recipe: str = "qwen2_5_vl"):
    """(tokenizer, Qwen2_5_VLForConditionalGeneration): text width 32 (2 heads of 16, M-RoPE
    sections 2+3+3), 2 layers, a 1-block vision tower whose merger outputs the text width. Another
    model's templates need their own tokenizer (`tok`), and its encoder its own `recipe`."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    tok = tiny_qwen_tokenizer() if tok is None else tok
    ids = {name: tok.convert_tokens_to_ids(t) for name, t in (
        ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>"))}
    text = dict(vocab_size=len(tok), hidden_size=TEXT_HIDDEN, intermediate_size=2 * TEXT_HIDDEN, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128000, rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
                bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=14, spatial_merge_size=2,
                  temporal_patch_size=2, window_size=112, fullatt_block_indexes=[0], out_hidden_size=TEXT_HIDDEN)
    with b.seeded("text_encoder", recipe):
        encoder = Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(
            text_config=text, vision_config=vision, tie_word_embeddings=False, **ids)).eval()
    return tok, encoder


def tiny_qwen_image_vae(b):
    """AutoencoderKLQwenImage: 8x spatial, 16 channels, the real latents_mean/std (its defaults)."""
    from diffusers import AutoencoderKLQwenImage

    with b.seeded("vae", "qwen_image_vae"):
        return AutoencoderKLQwenImage(base_dim=4, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=1,
                                      temperal_downsample=[False, True, True]).eval()


def tiny_qwen_image_transformer(b, **over):
    from diffusers import QwenImageTransformer2DModel

    dims = dict(patch_size=2, in_channels=64, out_channels=16, num_layers=2, attention_head_dim=16,
                num_attention_heads=2, joint_attention_dim=TEXT_HIDDEN, axes_dims_rope=(4, 6, 6))
    dims.update(over)
    with b.seeded("transformer"):
        return QwenImageTransformer2DModel(**dims).eval()


def tiny_qwen_image_shared(b) -> dict:
    """What Qwen-Image and its Edit models share: text encoder, tokenizer, VAE, scheduler."""
    tokenizer, text_encoder = tiny_qwen25vl(b)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=tiny_qwen_image_vae(b),
                scheduler=_scheduler())


def _scheduler():
    from diffusers import FlowMatchEulerDiscreteScheduler
    return FlowMatchEulerDiscreteScheduler(**SCHEDULER_CONFIG)


def _tiny(b):
    return dict(tiny_qwen_image_shared(b), transformer=tiny_qwen_image_transformer(b))


class QwenImageModel(BaseModel):
    """The engine's guidance_scale is the pipeline's `true_cfg_scale`; CFG runs only with a negative
    prompt, so one is passed whenever the scale asks for CFG (unset: the row's negative_prompt_default
    " ", as the model card runs it; an empty one too).
    The task's input images (img2img, inpaint, edit) as BaseModel passes them."""

    def pipeline_kwargs(self, gen):
        kw = {"prompt": gen.prompt, "width": gen.width, "height": gen.height,
              "num_inference_steps": gen.num_inference_steps, "true_cfg_scale": gen.guidance_scale}
        if gen.guidance_scale > 1:
            kw["negative_prompt"] = self.negative_prompt(gen)
        return {**kw, **self.input_kwargs(gen)}


def lora_modules(fmt, linears):
    """Both streams' attention and an MLP layer; the original checkpoint's names are diffusers' own."""
    return pick_linears(linears, r"^transformer_blocks\.\d+\.attn\.(to_q|to_k|to_v|to_out\.0|add_[qkv]_proj|to_add_out)$",
                        r"^transformer_blocks\.\d+\.(img|txt)_mlp\.net\.2$")


COMPONENTS = (
    Component("scheduler", "SchedulerMixin", SCHEDULER),
    Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen2_5"),
    Component("text_encoder", "transformers:Qwen2_5_VLForConditionalGeneration", TEXT_ENCODER,
              single_file=llm_encoders.QWEN25_VL_7B),
    Component("vae", "AutoencoderKLQwenImage", VAE, single_file=vaes.QWEN_IMAGE_VAE),
    # ComfyUI's Qwen-Image files use diffusers' names (under model.diffusion_model.): nothing to convert
    Component("transformer", "QwenImageTransformer2DModel", DENOISER, single_file=SingleFile(
        None, anchors=("img_in.weight", "txt_norm.weight", "transformer_blocks.0.img_mod.1.weight"),
        config="toolkit.models.archs.qwen_image:transformer_config", kind="qwen_image_dit",
        label="Qwen-Image transformer")),
)

# GGUF files of a Qwen-Image denoiser (qwen_image, qwen_image_edit): ComfyUI-GGUF's qwen_image, diffusers' names
GGUF = Gguf("qwen_image", tiny=dict(num_attention_heads=16, num_layers=1))

def control_config(view):
    """A Qwen-Image ControlNet file in diffusers' names (InstantX's): its config from the shapes."""
    return dit_controlnet.qwen_image(view, TRANSFORMER_KNOWN)


def control_fits(config: dict) -> bool:
    """InstantX's Qwen-Image ControlNet (Union): no extra condition channels (the inpainting one has a mask's)."""
    return not config.get("extra_condition_channels")


def inpaint_control_fits(config: dict) -> bool:
    """InstantX's Qwen-Image ControlNet Inpainting: the masked image's latents and the mask as extra channels."""
    return bool(config.get("extra_condition_channels"))


# the inpainting ControlNet repaints its control image where `control_mask` is white: task inpaint's init_img is
# not passed (the control's image is the picture), its mask_img is the control mask; one model, no strength; the
# pipeline VAE-samples the masked picture from torch's global RNG (seeded with the request's seed)
CONTROLS = (Control("QwenImageControlNetModel", {"txt2img": ("QwenImageControlNetPipeline", "control_image")},
                    fits="toolkit.models.archs.qwen_image:control_fits", label="Qwen-Image ControlNet",
                    files=dit_controlnet.files("toolkit.models.archs.qwen_image", dit_controlnet.QWEN_IMAGE_ANCHORS,
                                               "Qwen-Image ControlNet", "qwen_image_controlnet_diffusers")),
            Control("QwenImageControlNetModel", {"inpaint": ("QwenImageControlNetInpaintPipeline", "control_image")},
                    fits="toolkit.models.archs.qwen_image:inpaint_control_fits", several=False, global_rng=True,
                    inputs={"inpaint": {"image": None, "strength": None, "mask_image": "control_mask"}},
                    files=dit_controlnet.files("toolkit.models.archs.qwen_image", dit_controlnet.QWEN_IMAGE_ANCHORS,
                                               "Qwen-Image ControlNet", "qwen_image_controlnet_diffusers"),
                    label="Qwen-Image ControlNet Inpainting"))


SPEC = ArchSpec(
    name="qwen_image", modality="image", default_name_or_path="Qwen/Qwen-Image", pipeline="QwenImagePipeline",
    tasks=(Task("txt2img", "QwenImagePipeline"), Task("img2img", "QwenImageImg2ImgPipeline", strength=0.6),
           Task("inpaint", "QwenImageInpaintPipeline", strength=0.6)),
    holder=QwenImageModel, components=COMPONENTS,
    negative_prompt_default=" ",      # true CFG needs a negative prompt: the model card's " " when none is given
    defaults=SampleDefaults(1328, 1328, 50, 4.0),     # the model card: 1328^2 (1:1), 50 steps, true CFG 4.0
    latents=Latents("packed", 16, patch=2, format=latent_formats.WAN21),     # the Qwen Image VAE = Wan 2.1's space
    decode_features=96,                       # the Qwen Image VAE's last decoder stage
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0}),
    description="Qwen-Image (Qwen2.5-VL text encoder, true CFG, packed tokens)", gguf=GGUF, controls=CONTROLS,
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    lora=Lora(formats=("peft", "kohya", "comfyui"), modules="toolkit.models.archs.qwen_image:lora_modules",
              markers=(r"transformer_blocks[._]\d+[._](img|txt)_(mlp|mod)",)),
    # what skips work on it in diffusers 0.42.1 (FasterCache fails on its attention); no MagCache ratios
    step_caches={"first_block": {}, "taylorseer": {}},
)
