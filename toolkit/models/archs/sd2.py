"""Stable Diffusion 2.x: SD 1.x's UNet layout with linear attention projections over OpenCLIP-H
(its penultimate layer, 1024 wide), the same 4-channel KL VAE. Two variants, which a file's shapes
cannot tell apart:
- 512: stable-diffusion-2-1-base, epsilon prediction, PNDM as the repo ships it;
- 768: stable-diffusion-2-1, v-prediction, DDIM, attention upcast to float32.

Its files: a diffusers folder or repo, or the all-in-one checkpoint (`model.diffusion_model.` LDM
UNet, `first_stage_model.` LDM VAE, `cond_stage_model.model.` OpenCLIP-H, formats/openclip.py). A
file's prediction type is its `v_pred` key, else ComfyUI's test of one bias (formats/ldm.py
looks_v_prediction)."""
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents, Lora,
                                 SampleDefaults, Task, Tiny, Variant)
from toolkit.models.archs import sd1
from toolkit.models.formats import ldm, openclip
from toolkit.models.formats.file_view import FileConfig
from toolkit.models.tiny import kit

_UNET = dict(sd1._UNET, use_linear_projection=True, cross_attention_dim=1024, block_out_channels=[320, 640, 1280, 1280],
             layers_per_block=2, down_block_types=sd1._CROSS[0], up_block_types=sd1._CROSS[1],
             attention_head_dim=[5, 10, 20, 20], norm_num_groups=32)
UNET_KNOWN = {
    # stabilityai/stable-diffusion-2-1-base unet/config.json
    "sd21-base": dict(_UNET, sample_size=64, in_channels=4, upcast_attention=False),
    # stabilityai/stable-diffusion-2-1 unet/config.json (768, v-prediction)
    "sd21": dict(_UNET, sample_size=96, in_channels=4, upcast_attention=True),
    # stabilityai/stable-diffusion-2-inpainting unet/config.json
    "sd2-inpainting": dict(_UNET, sample_size=64, in_channels=9, upcast_attention=False),
    # the tiny factory's (_tiny below)
    "tiny": dict(sd1.UNET_KNOWN["tiny"], use_linear_projection=True, attention_head_dim=[2, 4], upcast_attention=False),
}
V_PREDICTION_UNET = {"sd21-base": "sd21"}      # the same shapes, the 768 model's config
# stabilityai/stable-diffusion-2-1(-base) vae/config.json: SD 1.x's VAE
VAE_KNOWN = {"sd-vae": dict(sd1.VAE_KNOWN["sd-vae"], sample_size=768), "tiny": sd1.VAE_KNOWN["tiny"]}
# stabilityai/stable-diffusion-2-1-base scheduler/scheduler_config.json
SCHEDULER_FILE = dict(_class_name="PNDMScheduler", num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
                      beta_schedule="scaled_linear", set_alpha_to_one=False, skip_prk_steps=True, steps_offset=1,
                      prediction_type="epsilon", trained_betas=None, clip_sample=False)
# stabilityai/stable-diffusion-2-1 scheduler/scheduler_config.json
V_SCHEDULER = dict(_class_name="DDIMScheduler", num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012,
                   beta_schedule="scaled_linear", set_alpha_to_one=False, skip_prk_steps=True, steps_offset=1,
                   prediction_type="v_prediction", trained_betas=None, clip_sample=False)


def unet_config(view) -> FileConfig:
    fc = ldm.unet_config(view, UNET_KNOWN, "the SD 2.x UNet")
    if not ldm.looks_v_prediction(view):
        return replace(fc, variant="512")
    name = V_PREDICTION_UNET.get(fc.known, fc.known)
    why = "its v_pred key" if ldm.V_PRED_MARKER in view.all_keys else "its norm bias spread (ComfyUI's test)"
    return FileConfig(dict(UNET_KNOWN.get(name, fc.config)), known=name, variant="768",
                      notes=(f"v-prediction: {why}",))


def vae_config(view) -> FileConfig:
    return ldm.vae_config(view, VAE_KNOWN, "the SD 2.x VAE")


UNET_FILE = replace(sd1.UNET_FILE, config="toolkit.models.archs.sd2:unet_config", kind="sd2_unet", label="SD 2.x UNet")
VAE_FILE = replace(sd1.VAE_FILE, config="toolkit.models.archs.sd2:vae_config")


def _tiny(b):
    from diffusers import PNDMScheduler, UNet2DConditionModel

    tokenizer = kit.clip_tokenizer(pad="!")            # OpenCLIP's pads with "!"
    with b.seeded("text_encoder", "openclip_h"):
        text_encoder = kit.clip_text_encoder(tokenizer, hidden_act="gelu")
    with b.seeded("vae"):
        vae = kit.kl_vae(4, scaling_factor=0.18215, quant_conv=True)
    with b.seeded("unet"):
        unet = UNet2DConditionModel(
            sample_size=8, in_channels=4, out_channels=4, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), block_out_channels=(16, 32), layers_per_block=1,
            norm_num_groups=8, cross_attention_dim=text_encoder.config.hidden_size, attention_head_dim=(2, 4),
            use_linear_projection=True).eval()
    scheduler = PNDMScheduler.from_config(SCHEDULER_FILE)
    return dict(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet, scheduler=scheduler)


SPEC = ArchSpec(
    name="sd2", modality="image", default_name_or_path="stabilityai/stable-diffusion-2-1-base",
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    pipeline="StableDiffusionPipeline",
    tasks=(Task("txt2img", "StableDiffusionPipeline"),
           Task("img2img", "StableDiffusionImg2ImgPipeline", strength=0.8),
           Task("inpaint", "StableDiffusionInpaintPipeline", strength=1.0)),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="clip_h"),
        Component("text_encoder", "CLIPTextModel", TEXT_ENCODER, single_file=openclip.OPENCLIP_H),
        Component("vae", "AutoencoderKL", VAE, single_file=VAE_FILE),
        Component("unet", "UNet2DConditionModel", DENOISER, single_file=UNET_FILE),
    ),
    # the pipeline's own defaults (50 steps, CFG 7.5) at each model's size (sample_size * 8)
    variants={"512": Variant(),
              "768": Variant(defaults=dict(width=768, height=768), name_or_path="stabilityai/stable-diffusion-2-1",
                             scheduler=V_SCHEDULER)},
    scheduler_file=SCHEDULER_FILE,
    pipeline_init_kwargs=dict(sd1.SPEC.pipeline_init_kwargs),
    defaults=SampleDefaults(512, 512, 50, 7.5), size_divisor=8,
    latents=Latents("BCHW", 4, format=latent_formats.SD15),      # ComfyUI previews SD 2.x with SD 1.5's table
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 7.5},
              pipeline_kwargs=dict(sd1.SPEC.tiny.pipeline_kwargs)),
    description="Stable Diffusion 2.x (UNet, OpenCLIP-H)",
    scheduler_config={"_class_name": "PNDMScheduler", "prediction_type": "epsilon"},
    # SD 1.x's layers and names (no key tells an SD 2.x LoRA from an SD 1.x one: no markers)
    lora=Lora(formats=("peft", "kohya"), modules="toolkit.models.archs.sd1:lora_modules",
              text_encoders={"lora_te": "text_encoder"}),
)
