"""Sana 1600M (1024px): a linear-attention DiT over a Gemma2 2B text encoder (behind the pipeline's
complex human instruction) and the DC-AE autoencoder (32 channels, 32x spatial), flow DPM-Solver.

The pipeline snaps width/height to its aspect-ratio bins and resizes the image back by default;
the `resolution_binning` sample key turns that off (the tiny model's 64x64 is far below any bin)."""
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Extra,
                                 Latents, SampleDefaults, Tiny)
from toolkit.models.archs.lumina2 import tiny_gemma
from toolkit.models.base_model import BaseModel


class SanaModel(BaseModel):
    def pipeline_kwargs(self, gen):
        kw = super().pipeline_kwargs(gen)
        if gen.extras.get("resolution_binning") is not None:
            kw["use_resolution_binning"] = gen.extras["resolution_binning"]
        return kw


def tiny_dc_ae():
    """A tiny AutoencoderDC f32c32 (32 latent channels, 32x: 6 stages), Sana's scaling factor."""
    from diffusers import AutoencoderDC

    blocks = ("ResBlock",) * 3 + ("EfficientViTBlock",) * 3          # 6 stages: 2^5 = 32x, as DC-AE f32c32
    return AutoencoderDC(
        in_channels=3, latent_channels=32, attention_head_dim=8, encoder_block_types=blocks,
        decoder_block_types=blocks, encoder_block_out_channels=(8, 8, 16, 16, 32, 32),
        decoder_block_out_channels=(8, 8, 16, 16, 32, 32), encoder_layers_per_block=(1,) * 6,
        decoder_layers_per_block=(1,) * 6, encoder_qkv_multiscales=((), (), (), (5,), (5,), (5,)),
        decoder_qkv_multiscales=((), (), (), (5,), (5,), (5,)), downsample_block_type="Conv",
        upsample_block_type="interpolate", decoder_norm_types="rms_norm", decoder_act_fns="silu",
        scaling_factor=0.41407).eval()


def _tiny(b):
    from diffusers import DPMSolverMultistepScheduler, SanaTransformer2DModel

    tokenizer, text_encoder = tiny_gemma(b)
    with b.seeded("vae"):
        vae = tiny_dc_ae()
    with b.seeded("transformer"):
        transformer = SanaTransformer2DModel(
            in_channels=32, out_channels=32, num_attention_heads=2, attention_head_dim=16, num_layers=2,
            num_cross_attention_heads=2, cross_attention_head_dim=16, cross_attention_dim=32,
            caption_channels=text_encoder.config.hidden_size, mlp_ratio=2.5, attention_bias=False,
            sample_size=32, patch_size=1, norm_elementwise_affine=False, norm_eps=1e-6,
            interpolation_scale=None).eval()
    # what the 1024px diffusers repos ship: flow DPM-Solver++, shift 3.0
    scheduler = DPMSolverMultistepScheduler(flow_shift=3.0, use_flow_sigmas=True, prediction_type="flow_prediction")
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer, scheduler=scheduler)


SPEC = ArchSpec(
    name="sana", modality="image", default_name_or_path="Efficient-Large-Model/Sana_1600M_1024px_diffusers",
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    pipeline="SanaPipeline", holder=SanaModel,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "Gemma2Model", TEXT_ENCODER),
        Component("vae", "AutoencoderDC", VAE),
        Component("transformer", "SanaTransformer2DModel", DENOISER),
    ),
    defaults=SampleDefaults(1024, 1024, 20, 4.5),      # the model card / pipeline example: 20 steps, CFG 4.5
    size_divisor=32,
    sample_extras={"resolution_binning": Extra("bool", True)},
    latents=Latents("BCHW", 32, spatial=32),            # DC-AE: ComfyUI has no latent->RGB table for it
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.5,
                      "resolution_binning": False}),
    description="Sana 1600M (Gemma2 text encoder, 32-ch DC-AE, 32x)",
    scheduler_config={"_class_name": "DPMSolverMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
)
