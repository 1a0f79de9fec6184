"""Stable Diffusion 1.x: a UNet over CLIP-L, the 4-channel KL VAE, PNDM as the repos ship it.

Its files: a diffusers folder or repo, or the all-in-one checkpoint every SD 1.x fine-tune ships as
(`model.diffusion_model.` LDM UNet, `first_stage_model.` LDM VAE, `cond_stage_model.transformer.`
CLIP-L), read with the configs below (what a file's shapes cannot tell: heads, norm groups, sizes)."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Control,
                                 IPAdapter, Latents, Lora,
                                 SampleDefaults, SingleFile, Task, Tiny, pick_linears)
from toolkit.models.formats import clip, controlnet, ldm
from toolkit.models.tiny import kit

_UNET = dict(act_fn="silu", center_input_sample=False, downsample_padding=1, flip_sin_to_cos=True, freq_shift=0,
             mid_block_scale_factor=1, norm_eps=1e-5, transformer_layers_per_block=1, use_linear_projection=False,
             projection_class_embeddings_input_dim=None, out_channels=4)
_CROSS = ["CrossAttnDownBlock2D"] * 3 + ["DownBlock2D"], ["UpBlock2D"] + ["CrossAttnUpBlock2D"] * 3
# stable-diffusion-v1-5's unet/config.json (the inpainting model's takes 9 input channels); and the
# tiny factory's (_tiny below)
UNET_KNOWN = {
    "sd15": dict(_UNET, sample_size=64, in_channels=4, block_out_channels=[320, 640, 1280, 1280], layers_per_block=2,
                 down_block_types=_CROSS[0], up_block_types=_CROSS[1], cross_attention_dim=768,
                 attention_head_dim=8, norm_num_groups=32),
    "sd15-inpainting": dict(_UNET, sample_size=64, in_channels=9, block_out_channels=[320, 640, 1280, 1280],
                            layers_per_block=2, down_block_types=_CROSS[0], up_block_types=_CROSS[1],
                            cross_attention_dim=768, attention_head_dim=8, norm_num_groups=32),
    "tiny": dict(_UNET, sample_size=8, in_channels=4, block_out_channels=[16, 32], layers_per_block=1,
                 down_block_types=["CrossAttnDownBlock2D", "DownBlock2D"], up_block_types=["UpBlock2D", "CrossAttnUpBlock2D"],
                 cross_attention_dim=32, attention_head_dim=2, norm_num_groups=8),
}
_VAE = dict(act_fn="silu", in_channels=3, out_channels=3, latent_channels=4, use_quant_conv=True,
            use_post_quant_conv=True, scaling_factor=0.18215, down_block_types=["DownEncoderBlock2D"] * 4,
            up_block_types=["UpDecoderBlock2D"] * 4)
VAE_KNOWN = {
    "sd-vae": dict(_VAE, block_out_channels=[128, 256, 512, 512], layers_per_block=2, norm_num_groups=32, sample_size=512),
    "tiny": dict(_VAE, block_out_channels=[8, 8, 16, 16], layers_per_block=1, norm_num_groups=4, sample_size=64),
}
# stable-diffusion-v1-5's scheduler/scheduler_config.json: what a checkpoint (which has none) samples with
SCHEDULER_FILE = dict(_class_name="PNDMScheduler", num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
                      beta_schedule="scaled_linear", set_alpha_to_one=False, skip_prk_steps=True, steps_offset=1,
                      prediction_type="epsilon", timestep_spacing="leading", trained_betas=None, clip_sample=False)


def unet_config(view):
    return ldm.known_config(ldm.unet_signature(view), UNET_KNOWN, ldm.UNET_FACTS, "the SD 1.x UNet")


def vae_config(view):
    return ldm.vae_config(view, VAE_KNOWN, "the SD 1.x VAE")


UNET_FILE = SingleFile("toolkit.models.formats.ldm:convert_unet", "toolkit.models.formats.ldm:unet_to_original",
                       anchors=("input_blocks.0.0.weight", "time_embed.0.weight", "out.2.weight"),
                       config="toolkit.models.archs.sd1:unet_config", kind="sd1_unet", label="SD 1.x UNet")
VAE_FILE = SingleFile("toolkit.models.formats.ldm:convert_vae", "toolkit.models.formats.ldm:vae_to_original",
                      anchors=("encoder.conv_in.weight", "decoder.conv_out.weight", "quant_conv.weight"),
                      prefixes=("first_stage_model.", "vae.", ""), config="toolkit.models.archs.sd1:vae_config",
                      kind="ldm_kl_vae", label="KL VAE (4 channels)")


def control_config(view):
    return controlnet.config(view, UNET_KNOWN, "the SD 1.x ControlNet")


def control_fits(config: dict) -> bool:
    return controlnet.unet_fits(config, UNET_KNOWN, added=False)


# lllyasviel's ControlNet 1.0/1.1 (A1111's models/ControlNet), and diffusers' folders of them
CONTROLS = (Control("ControlNetModel", {"txt2img": ("StableDiffusionControlNetPipeline", "image"),
                                        "img2img": ("StableDiffusionControlNetImg2ImgPipeline", "control_image"),
                                        "inpaint": ("StableDiffusionControlNetInpaintPipeline", "control_image")},
                    fits="toolkit.models.archs.sd1:control_fits",
                    files=controlnet.files("toolkit.models.archs.sd1", "SD 1.x ControlNet"), label="SD 1.x ControlNet"),)


def _tiny(b):
    from diffusers import PNDMScheduler, UNet2DConditionModel

    tokenizer = kit.clip_tokenizer()
    with b.seeded("text_encoder"):
        text_encoder = kit.clip_text_encoder(tokenizer)
    with b.seeded("vae"):
        vae = kit.kl_vae(4, scaling_factor=0.18215, quant_conv=True)
    with b.seeded("unet"):
        unet = UNet2DConditionModel(
            sample_size=8, in_channels=4, out_channels=4, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), block_out_channels=(16, 32), layers_per_block=1,
            norm_num_groups=8, cross_attention_dim=text_encoder.config.hidden_size, attention_head_dim=2).eval()
    scheduler = PNDMScheduler(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                              skip_prk_steps=True, set_alpha_to_one=False, steps_offset=1)
    return dict(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet, scheduler=scheduler)


UNET_ATTENTION = r"transformer_blocks\.\d+\.attn[12]\.(to_q|to_k|to_v|to_out\.0)$"


def lora_modules(fmt, linears):
    """The UNet's attention projections; kohya trains SD 1.x on the diffusers UNet, so every format
    names them as diffusers does."""
    return pick_linears(linears, UNET_ATTENTION)


SPEC = ArchSpec(
    name="sd1", modality="image", default_name_or_path="stable-diffusion-v1-5/stable-diffusion-v1-5",
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    pipeline="StableDiffusionPipeline",
    tasks=(Task("txt2img", "StableDiffusionPipeline"),
           Task("img2img", "StableDiffusionImg2ImgPipeline", strength=0.8),
           Task("inpaint", "StableDiffusionInpaintPipeline", strength=1.0)),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="clip_l"),
        Component("text_encoder", "CLIPTextModel", TEXT_ENCODER, single_file=clip.CLIP_L),
        Component("vae", "AutoencoderKL", VAE, single_file=VAE_FILE),
        Component("unet", "UNet2DConditionModel", DENOISER, single_file=UNET_FILE),
    ),
    scheduler_file=SCHEDULER_FILE,
    pipeline_init_kwargs={"safety_checker": None, "feature_extractor": None, "image_encoder": None,
                          "requires_safety_checker": False},
    defaults=SampleDefaults(512, 512, 25, 7.5), size_divisor=8,
    latents=Latents("BCHW", 4, format=latent_formats.SD15),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 7.5},
              pipeline_kwargs={"safety_checker": None, "feature_extractor": None, "image_encoder": None,
                               "requires_safety_checker": False}),
    description="Stable Diffusion 1.x (UNet)",
    controls=CONTROLS,
    scheduler_config={"_class_name": "PNDMScheduler", "prediction_type": "epsilon"},
    # diffusers converts kohya/A1111 files for the UNet pipelines; ComfyUI saves SD LoRAs in kohya's layout
    lora=Lora(formats=("peft", "kohya"), modules="toolkit.models.archs.sd1:lora_modules",
              text_encoders={"lora_te": "text_encoder"},
              markers=(r"^(unet\.|lora_unet_)(down|mid|up)[._]blocks",)),
    # h94/IP-Adapter's models/ip-adapter*_sd15 files: keyed to the UNet's cross attention (CLIP-L wide)
    ip_adapter=IPAdapter("h94", file="models/ip-adapter_sd15.safetensors", context_dims=tuple(dict.fromkeys(c["cross_attention_dim"] for c in UNET_KNOWN.values()))),
)
