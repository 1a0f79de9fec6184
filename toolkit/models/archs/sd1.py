"""Stable Diffusion 1.x: a UNet over CLIP-L, the 4-channel KL VAE, PNDM as the repos ship it."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents, Lora,
                                 SampleDefaults, Task, Tiny, pick_linears)
from toolkit.models.tiny import kit


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
    pipeline="StableDiffusionPipeline",
    tasks=(Task("txt2img", "StableDiffusionPipeline"),
           Task("img2img", "StableDiffusionImg2ImgPipeline", strength=0.8),
           Task("inpaint", "StableDiffusionInpaintPipeline", strength=1.0)),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "CLIPTextModel", TEXT_ENCODER),
        Component("vae", "AutoencoderKL", VAE),
        Component("unet", "UNet2DConditionModel", DENOISER),
    ),
    pipeline_init_kwargs={"safety_checker": None, "feature_extractor": None, "image_encoder": None,
                          "requires_safety_checker": False},
    defaults=SampleDefaults(512, 512, 25, 7.5), size_divisor=8,
    latents=Latents("BCHW", 4, format=latent_formats.SD15),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 7.5},
              pipeline_kwargs={"safety_checker": None, "feature_extractor": None, "image_encoder": None,
                               "requires_safety_checker": False}),
    description="Stable Diffusion 1.x (UNet)",
    scheduler_config={"_class_name": "PNDMScheduler", "prediction_type": "epsilon"},
    # diffusers converts kohya/A1111 files for the UNet pipelines; ComfyUI saves SD LoRAs in kohya's layout
    lora=Lora(formats=("peft", "kohya"), modules="toolkit.models.archs.sd1:lora_modules",
              text_encoders={"lora_te": "text_encoder"},
              markers=(r"^(unet\.|lora_unet_)(down|mid|up)[._]blocks",)),
)
