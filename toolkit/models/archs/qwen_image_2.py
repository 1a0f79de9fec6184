"""Qwen-Image 2.1: a single-stream block-causal DiT over a Qwen3-VL text encoder (its last decoder
layer before the final norm, the system turn dropped) and its own RGBA VAE (64 channels, 16x spatial,
one latent per token). One pipeline serves text-to-image and editing: reference images join the
prompt as vision tokens (the Qwen3-VL processor sees them) and as VAE latents before the target's.
Guidance is true CFG (`true_cfg_scale`, on only with a negative prompt); the model is meant to run
without it (1.0). The output is RGBA.

No component is Qwen-Image's (Qwen2.5-VL and a 16-channel VAE there): nothing is shared with
qwen_image. The Turbo checkpoint is the `turbo` variant: its model_index.json fixes an 8-step
sigma grid (`sample_sigmas`) and its scheduler shifts nothing."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, PROCESSOR, SCHEDULER, TEXT_ENCODER, VAE, ArchSpec, Component, Extra,
                                 Latents, SampleDefaults, SingleFile, Task, Tiny, Variant)
from toolkit.models.archs.qwen_image import SCHEDULER_CONFIG, QwenImageModel
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny.tokenizers import PROMPTS, QWEN_VL_CHAT_TEMPLATE, qwen2_tokenizer

# the pipeline's own templates (QwenImage21Pipeline.__init__)
SYSTEM = "Comprehend and analyze the provided prompt."
T2I_TEMPLATE = (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{{}}<|im_end|>\n"
                "<|im_start|>assistant\n")
EDIT_TEMPLATE = (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n"
                 "<image1><|vision_start|><|image_pad|><|vision_end|>{}<|im_end|>\n<|im_start|>assistant\n")

# Qwen/Qwen-Image-2.1-Turbo model_index.json: the grid its pipeline samples (the terminal 0 left out)
TURBO_SIGMAS = [1.0, 0.978453, 0.95418, 0.926626, 0.89508, 0.845148, 0.704534, 0.414568]
# the base repo's scheduler shifts by the image-token count as Qwen-Image's does (shift 1, terminal 0.02); the
# Turbo's turns the shift off and has no terminal (its grid is already the schedule)
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", **SCHEDULER_CONFIG)
TURBO_SCHEDULER = {"use_dynamic_shifting": False, "shift_terminal": None}

TEXT_HIDDEN = 32


# Qwen/Qwen-Image-2.1 transformer/config.json (the Turbo's has its shapes); the tiny factory's
QWEN_IMAGE21 = dict(patch_size=1, in_channels=64, out_channels=64, num_layers=32, attention_head_dim=128,
                    num_attention_heads=32, context_in_dim=4096, mlp_ratio=3, axes_dims_rope=[16, 56, 56])
TINY_TRANSFORMER = dict(patch_size=1, in_channels=64, out_channels=64, num_layers=2, attention_head_dim=16,
                        num_attention_heads=2, context_in_dim=TEXT_HIDDEN, mlp_ratio=3, axes_dims_rope=[4, 6, 6])
TRANSFORMER_KNOWN = {"qwen-image-2.1": QWEN_IMAGE21, "tiny": TINY_TRANSFORMER}


def transformer_signature(view) -> dict:
    """What a Qwen-Image 2.1 file's shapes tell (diffusers' names but the MLP's gate and up in one `gate_up`)."""
    if not view.has("img_in.weight") or not view.has("txt_in.text_norm.weight"):
        raise FileKindError("no img_in / txt_in.text_norm: not a Qwen-Image 2.1 transformer")
    return {"width": view.dim("img_in.weight"), "in_channels": view.dim("img_in.weight", 1),
            "patch_out": view.dim("proj_out.weight"), "context_in_dim": view.dim("txt_in.in_layer.weight", 1),
            "num_layers": view.count(r"transformer_blocks\.(\d+)\."),
            "head_dim": view.dim("transformer_blocks.0.attn.norm_q.weight"),
            "mlp": view.dim("transformer_blocks.0.img_mlp.gate_up.weight") // 2}


def transformer_facts(c: dict) -> dict:
    width = c["num_attention_heads"] * c["attention_head_dim"]
    return {"width": width, "in_channels": c["in_channels"], "patch_out": c["patch_size"] ** 2 * c["out_channels"],
            "context_in_dim": c["context_in_dim"], "num_layers": c["num_layers"],
            "head_dim": c["attention_head_dim"], "mlp": c["mlp_ratio"] * width}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the Qwen-Image 2.1 transformer",
                      notes={"qwen-image-2.1": ("the Turbo has the same shapes: variant turbo samples it as the "
                                                "Turbo",)})


def to_original(state: dict) -> dict:
    """diffusers names -> ComfyUI's: each block's SwiGLU gate and up projections as one `gate_up`, gate
    rows first (what diffusers' converter splits)."""
    import torch

    out = {}
    for key, t in state.items():
        if key.endswith("img_mlp.proj.weight"):
            continue
        if key.endswith("img_mlp.gate_layer.weight"):
            up = state[key.replace("gate_layer", "proj")]
            out[key.replace("gate_layer", "gate_up")] = torch.cat([t, up], 0)
        else:
            out[key] = t
    return out


class QwenImage2Model(QwenImageModel):
    """Qwen-Image's call (true CFG with the row's " " negative prompt when the scale asks for it), and:
    - references are sized by `reference_resolution` (the pipeline's `output_resolution`: the side of
      the square area they are resized to; the output keeps the request's width and height);
    - a checkpoint with a fixed sigma grid (Turbo's `sample_sigmas`) runs it when the request asks for
      as many steps; another step count gets the pipeline's own grid for that count (linear, shifted by
      the scheduler), instead of the fixed grid silently overriding the request's steps."""

    def pipeline_kwargs(self, gen):
        import numpy as np

        kw = super().pipeline_kwargs(gen)
        resolution = gen.extras.get("reference_resolution")
        if resolution is not None:
            kw["output_resolution"] = resolution
        grid = self.pipeline.config.get("sample_sigmas") if self.pipeline is not None else None
        n = gen.num_inference_steps
        if grid and len(grid) != n:
            kw["sigmas"] = np.linspace(1.0, 1 / n, n).tolist()
        return kw


def tiny_qwen3vl(b):
    """(processor, Qwen3VLForConditionalGeneration): text width 32 (2 heads of 16, interleaved M-RoPE
    4+2+2), 2 layers; a 2-block vision tower of 16-px patches merged 2x2 (one vision token per 32 px,
    the 2x2 latents it stands for), its merger at the text width."""
    from transformers import (Qwen2VLImageProcessor, Qwen3VLConfig, Qwen3VLForConditionalGeneration,
                              Qwen3VLProcessor, Qwen3VLVideoProcessor)

    tok = qwen2_tokenizer([T2I_TEMPLATE.format(p) for p in PROMPTS] * 4 + [EDIT_TEMPLATE.format(p) for p in PROMPTS])
    tok.chat_template = QWEN_VL_CHAT_TEMPLATE
    ids = {name: tok.convert_tokens_to_ids(t) for name, t in (
        ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>"),
        ("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>"))}
    text = dict(vocab_size=len(tok), hidden_size=TEXT_HIDDEN, intermediate_size=2 * TEXT_HIDDEN, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=262144,
                rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [4, 2, 2],
                                 "mrope_interleaved": True},
                eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    vision = dict(depth=2, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=TEXT_HIDDEN,
                  patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64,
                  deepstack_visual_indexes=[0])
    with b.seeded("text_encoder", "qwen3_vl"):
        encoder = Qwen3VLForConditionalGeneration(Qwen3VLConfig(
            text_config=text, vision_config=vision, tie_word_embeddings=False, **ids)).eval()
    # Qwen3-VL's preprocessor (16-px patches, merge 2, mean/std 0.5), its smallest area lowered from 256^2 to
    # 32^2 so the tiny's 64-px references keep one vision token per 2x2 latents
    image_processor = Qwen2VLImageProcessor(size={"shortest_edge": 32 * 32, "longest_edge": 16777216}, patch_size=16,
                                            temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3,
                                            image_std=[0.5] * 3)
    processor = Qwen3VLProcessor(image_processor=image_processor, tokenizer=tok, chat_template=QWEN_VL_CHAT_TEMPLATE,
                                 video_processor=Qwen3VLVideoProcessor(patch_size=16, merge_size=2,
                                                                       temporal_patch_size=2))
    return processor, encoder


def _tiny(b):
    from diffusers import AutoencoderKLQwenImage21, QwenImage21Transformer2DModel

    processor, text_encoder = tiny_qwen3vl(b)
    with b.seeded("vae", "qwen_image21_vae"):
        # five stages (16x), 4-channel RGBA in and out, 64 latent channels with the real mean/std (its defaults)
        vae = AutoencoderKLQwenImage21(base_dim=4, decoder_base_dim=4, z_dim=64, dim_mult=[1, 1, 1, 1, 1],
                                       num_res_blocks=1, temperal_downsample=[False, True, True, True]).eval()
    with b.seeded("transformer"):
        transformer = QwenImage21Transformer2DModel(**TINY_TRANSFORMER).eval()
    from diffusers import FlowMatchEulerDiscreteScheduler
    return dict(processor=processor, text_encoder=text_encoder, vae=vae, transformer=transformer,
                scheduler=FlowMatchEulerDiscreteScheduler(**SCHEDULER_CONFIG))


SPEC = ArchSpec(
    name="qwen_image_2", modality="image", default_name_or_path="Qwen/Qwen-Image-2.1",
    pipeline="QwenImage21Pipeline", holder=QwenImage2Model,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("processor", "transformers:Qwen3VLProcessor", PROCESSOR),
        Component("text_encoder", "transformers:Qwen3VLForConditionalGeneration", TEXT_ENCODER),
        Component("vae", "AutoencoderKLQwenImage21", VAE),
        # ComfyUI's files (Comfy-Org/Qwen-Image-2.1 diffusion_models/): diffusers' names, the MLP's gate and up fused
        Component("transformer", "QwenImage21Transformer2DModel", DENOISER, single_file=SingleFile(
            "convert_qwen_image21_transformer_checkpoint_to_diffusers",
            "toolkit.models.archs.qwen_image_2:to_original",
            anchors=("img_in.weight", "txt_in.text_norm.weight", "transformer_blocks.0.img_mlp.gate_up.weight"),
            config="toolkit.models.archs.qwen_image_2:transformer_config", kind="qwen_image21_dit",
            label="Qwen-Image 2.1 transformer")),
    ),
    # the diffusers docs' Qwen defaults: 40 steps, no guidance; the pipeline's 1024^2
    defaults=SampleDefaults(1024, 1024, 40, 1.0),
    variants={"base": Variant(),
              # Qwen/Qwen-Image-2.1-Turbo: the 8-step distilled model, no guidance
              "turbo": Variant(defaults={"num_inference_steps": 8, "guidance_scale": 1.0},
                               name_or_path="Qwen/Qwen-Image-2.1-Turbo", scheduler=TURBO_SCHEDULER,
                               pipeline_kwargs={"sample_sigmas": TURBO_SIGMAS})},
    # one pipeline: without references it draws, with them (the docs' 1 and more) it edits
    tasks=(Task("txt2img", "QwenImage21Pipeline"),
           Task("edit", "QwenImage21Pipeline", takes=("ctrl_img_1", "ctrl_img_2", "ctrl_img_3"))),
    negative_prompt_default=" ",      # true CFG needs a negative prompt: " " when none is given, as Qwen-Image
    sample_extras={"reference_resolution": Extra("int", 1024)},     # the pipeline's output_resolution default
    size_divisor=32,                  # the pipeline floors width/height to 32 px (16x VAE, 2x2 latents a vision slot)
    latents=Latents("packed", 64, spatial=16, patch=1, format=latent_formats.QWEN_IMAGE21),
    decode_features=144,              # the VAE decoder's last stage (decoder_base_dim)
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0,
                      "reference_resolution": 64}),
    description="Qwen-Image 2.1 (Qwen3-VL text encoder, RGBA 64-ch VAE; draws and edits); base or Turbo",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
)
