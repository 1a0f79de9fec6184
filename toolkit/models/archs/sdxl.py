"""Stable Diffusion XL: a UNet over two CLIP encoders (CLIP-L hidden states, OpenCLIP-bigG hidden
states + pooled projection, concatenated), the 4-channel KL VAE (0.13025), Euler as the repo ships it.
The UNet's added conditions are the pooled text embedding and six size ids (the refiner's: five,
an aesthetic score in place of the target size).

Its files: a diffusers folder or repo, or the all-in-one checkpoint every SDXL fine-tune ships as
(Pony, Illustrious, NoobAI, Juggernaut...): `model.diffusion_model.` LDM UNet (with `label_emb`),
`conditioner.embedders.0.transformer.` CLIP-L, `conditioner.embedders.1.model.` OpenCLIP-bigG
(formats/openclip.py), `first_stage_model.` LDM VAE. The variant comes from the file:
- refiner: its UNet's shapes (adm 2560, 1280-wide cross attention) and only the OpenCLIP-G embedder
  (`conditioner.embedders.0.model.`); it refines an image (img2img / inpaint), as its repo ships;
- vpred / vpred-ztsnr: the `v_pred` (and `ztsnr`) marker keys NoobAI and others carry;
- playground: `edm_mean` / `edm_std` (Playground v2.5: EDM sampling, latents mean/std, scale 0.5);
- edm-vpred: the `edm_vpred.sigma_max` keys (CosXL: v-prediction EDM).
"""
import re
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Control,
                                 IPAdapter, Latents, Lora,
                                 SampleDefaults, Task, Tiny, Variant, pick_linears)
from toolkit.models.archs import sd1
from toolkit.models.archs.sd1 import UNET_ATTENTION
from toolkit.models.formats import clip, controlnet, ldm, openclip
from toolkit.models.formats.file_view import FileConfig
from toolkit.models.tiny import kit

# stabilityai/stable-diffusion-xl-base-1.0 scheduler/scheduler_config.json (the refiner's is the same)
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                        prediction_type="epsilon", interpolation_type="linear", use_karras_sigmas=False,
                        timestep_spacing="leading", steps_offset=1)
SCHEDULER_FILE = dict(SCHEDULER_CONFIG, _class_name="EulerDiscreteScheduler", clip_sample=False, sample_max_value=1.0,
                      set_alpha_to_one=False, skip_prk_steps=True, trained_betas=None)
# playgroundai/playground-v2.5-1024px-aesthetic scheduler/scheduler_config.json (EDM DPM-Solver++)
PLAYGROUND_SCHEDULER = dict(_class_name="EDMDPMSolverMultistepScheduler", algorithm_type="dpmsolver++",
                            dynamic_thresholding_ratio=0.995, euler_at_final=False, final_sigmas_type="zero",
                            lower_order_final=True, num_train_timesteps=1000, prediction_type="epsilon", rho=7.0,
                            sample_max_value=1.0, sigma_data=0.5, sigma_max=80.0, sigma_min=0.002, solver_order=2,
                            solver_type="midpoint", thresholding=False)
# CosXL's v-prediction EDM as ComfyUI samples it (ModelSamplingContinuousEDM: sigma_data 1, its file's
# sigma range), in diffusers' EDM Euler
EDM_VPRED_SCHEDULER = dict(_class_name="EDMEulerScheduler", num_train_timesteps=1000, prediction_type="v_prediction",
                           sigma_data=1.0, sigma_max=120.0, sigma_min=0.002, sigma_schedule="karras", rho=7.0,
                           final_sigmas_type="zero")
# Playground v2.5's vae/config.json entries over SDXL's VAE (the same weights' layout)
PLAYGROUND_LATENTS = dict(scaling_factor=0.5, latents_mean=[-1.6574, 1.886, -1.383, 2.5155],
                          latents_std=[8.4927, 5.9022, 6.5498, 5.2299])
PIPELINE_KWARGS = {"image_encoder": None, "feature_extractor": None}
REFINER_KWARGS = {"requires_aesthetics_score": True, "force_zeros_for_empty_prompt": False}

_UNET = dict(act_fn="silu", center_input_sample=False, downsample_padding=1, flip_sin_to_cos=True, freq_shift=0,
             mid_block_scale_factor=1, norm_eps=1e-5, in_channels=4, out_channels=4, use_linear_projection=True,
             addition_embed_type="text_time", addition_embed_type_num_heads=64, class_embed_type=None,
             num_class_embeds=None, layers_per_block=2, norm_num_groups=32, sample_size=128, upcast_attention=None)
_BASE_TYPES = ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"], \
    ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"]
_REFINER_TYPES = ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"], \
    ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"]
_TINY_TIME = 8
# the tiny factory's (_tiny below): its refiner's UNet attends to OpenCLIP-G alone, and its added
# condition is 5 ids (original size, crop, aesthetic score) and the pooled projection
_TINY_UNET = dict(_UNET, sample_size=8, block_out_channels=[16, 32], layers_per_block=1, norm_num_groups=8,
                  down_block_types=["DownBlock2D", "CrossAttnDownBlock2D"], up_block_types=["CrossAttnUpBlock2D", "UpBlock2D"],
                  transformer_layers_per_block=[1, 2], attention_head_dim=[2, 4], addition_time_embed_dim=_TINY_TIME,
                  upcast_attention=False)
UNET_KNOWN = {
    # stabilityai/stable-diffusion-xl-base-1.0 unet/config.json
    "sdxl-base": dict(_UNET, block_out_channels=[320, 640, 1280], down_block_types=_BASE_TYPES[0],
                      up_block_types=_BASE_TYPES[1], transformer_layers_per_block=[1, 2, 10], attention_head_dim=[5, 10, 20],
                      cross_attention_dim=2048, addition_time_embed_dim=256, projection_class_embeddings_input_dim=2816),
    # stabilityai/stable-diffusion-xl-refiner-1.0 unet/config.json
    "sdxl-refiner": dict(_UNET, block_out_channels=[384, 768, 1536, 1536], down_block_types=_REFINER_TYPES[0],
                         up_block_types=_REFINER_TYPES[1], transformer_layers_per_block=4,
                         attention_head_dim=[6, 12, 24, 24], cross_attention_dim=1280, addition_time_embed_dim=256,
                         projection_class_embeddings_input_dim=2560),
    "tiny": dict(_TINY_UNET, cross_attention_dim=64, projection_class_embeddings_input_dim=6 * _TINY_TIME + 32),
    "tiny-refiner": dict(_TINY_UNET, cross_attention_dim=32, projection_class_embeddings_input_dim=5 * _TINY_TIME + 32),
}
REFINERS = ("sdxl-refiner", "tiny-refiner")
_VAE = dict(sd1.VAE_KNOWN["sd-vae"], scaling_factor=0.13025, sample_size=1024, force_upcast=True)
VAE_KNOWN = {
    "sdxl-vae": _VAE,                   # stabilityai/stable-diffusion-xl-base-1.0 vae/config.json
    "tiny": dict(sd1.VAE_KNOWN["tiny"], scaling_factor=0.13025),
}


def file_variant(view) -> str:
    """The variant a base-shaped SDXL file's marker keys say (ComfyUI's order: EDM first)."""
    keys = view.all_keys
    if "edm_mean" in keys and "edm_std" in keys:
        return "playground"
    if "edm_vpred.sigma_max" in keys:
        return "edm-vpred"
    if ldm.V_PRED_MARKER in keys:
        return "vpred-ztsnr" if ldm.ZTSNR_MARKER in keys else "vpred"
    return "base"


def unet_config(view) -> FileConfig:
    fc = ldm.unet_config(view, UNET_KNOWN, "the SDXL UNet")
    variant = "refiner" if fc.known in REFINERS else file_variant(view)
    return replace(fc, variant=variant, notes=(f"{variant}: the file says so",) if variant != "base" else ())


def vae_config(view) -> FileConfig:
    fc = ldm.vae_config(view, VAE_KNOWN, "the SDXL VAE")
    if "edm_mean" in view.all_keys and "edm_std" in view.all_keys:
        return replace(fc, config={**fc.config, **PLAYGROUND_LATENTS}, notes=("Playground v2.5 latents",))
    return fc


UNET_FILE = replace(sd1.UNET_FILE, config="toolkit.models.archs.sdxl:unet_config", kind="sdxl_unet", label="SDXL UNet")
VAE_FILE = replace(sd1.VAE_FILE, config="toolkit.models.archs.sdxl:vae_config")
# SDXL checkpoints carry CLIP-L as their first embedder
CLIP_L_FILE = replace(clip.CLIP_L, prefixes=("conditioner.embedders.0.transformer.",)
                      + tuple(p for p in clip.CLIP_L.prefixes if p != "conditioner.embedders.0.transformer."))


def control_config(view):
    return controlnet.config(view, UNET_KNOWN, "the SDXL ControlNet")


# xinsir/controlnet-union-sdxl-1.0's config.json (its control transformer), and the tiny factory's
UNION_KNOWN = {"promax": dict(num_trans_channel=320, num_trans_head=8), "tiny": dict(num_trans_channel=16, num_trans_head=2)}


def union_config(view):
    return controlnet.config(view, UNET_KNOWN, "the SDXL ControlNet Union", union_known=UNION_KNOWN)


def control_fits(config: dict) -> bool:
    return controlnet.unet_fits(config, UNET_KNOWN, added=True)


# xinsir's ControlNet Union ProMax: one model, its control type by index (its model card's order)
UNION_MODES = ("openpose", "depth", "hed", "canny", "normal", "segment", "tile", "repaint")
CONTROLS = (
    Control("ControlNetModel", {"txt2img": ("StableDiffusionXLControlNetPipeline", "image"),
                                "img2img": ("StableDiffusionXLControlNetImg2ImgPipeline", "control_image"),
                                "inpaint": ("StableDiffusionXLControlNetInpaintPipeline", "control_image")},
            fits="toolkit.models.archs.sdxl:control_fits",
            files=controlnet.files("toolkit.models.archs.sdxl", "SDXL ControlNet"), label="SDXL ControlNet"),
    Control("ControlNetUnionModel", {"txt2img": ("StableDiffusionXLControlNetUnionPipeline", "control_image"),
                                     "img2img": ("StableDiffusionXLControlNetUnionImg2ImgPipeline", "control_image"),
                                     "inpaint": ("StableDiffusionXLControlNetUnionInpaintPipeline", "control_image")},
            fits="toolkit.models.archs.sdxl:control_fits", modes=UNION_MODES, mode_arg="control_mode",
            lists=True, label="SDXL ControlNet Union",
            # xinsir's diffusion_pytorch_model_promax.safetensors, as ComfyUI users download it
            files=controlnet.union_files("toolkit.models.archs.sdxl", "SDXL ControlNet Union")),
)


def _tiny(b):
    from diffusers import EulerDiscreteScheduler, UNet2DConditionModel

    # OpenCLIP's tokenizer pads with "!", its tower computes GELU (not CLIP-L's quick GELU)
    tokenizer, tokenizer_2 = kit.clip_tokenizer(), kit.clip_tokenizer(pad="!")
    with b.seeded("text_encoder", "clip_l"):           # CLIP-L as Flux builds it
        text_encoder = kit.clip_text_encoder(tokenizer)
    with b.seeded("text_encoder_2"):
        text_encoder_2 = kit.clip_text_encoder(tokenizer_2, projection=True, hidden_act="gelu")
    with b.seeded("vae"):
        vae = kit.kl_vae(4, scaling_factor=0.13025, quant_conv=True)
    with b.seeded("unet"):
        unet = UNet2DConditionModel(
            sample_size=8, in_channels=4, out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), block_out_channels=(16, 32), layers_per_block=1,
            transformer_layers_per_block=(1, 2), norm_num_groups=8, attention_head_dim=(2, 4),
            use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=_TINY_TIME,
            # the two encoders' hidden states side by side; the pooled projection and 6 size ids
            cross_attention_dim=text_encoder.config.hidden_size + text_encoder_2.config.hidden_size,
            projection_class_embeddings_input_dim=6 * _TINY_TIME + text_encoder_2.config.projection_dim).eval()
    return dict(vae=vae, text_encoder=text_encoder, text_encoder_2=text_encoder_2, tokenizer=tokenizer,
                tokenizer_2=tokenizer_2, unet=unet, scheduler=EulerDiscreteScheduler(**SCHEDULER_CONFIG))


def tiny_refiner(b):
    """A tiny refiner (the `refiner` variant): OpenCLIP-G alone, 5 added ids; build it into
    StableDiffusionXLImg2ImgPipeline with REFINER_KWARGS, as its repo ships."""
    from diffusers import EulerDiscreteScheduler, UNet2DConditionModel

    base = _tiny(b)
    with b.seeded("unet", "unet_refiner"):
        unet = UNet2DConditionModel(
            sample_size=8, in_channels=4, out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), block_out_channels=(16, 32), layers_per_block=1,
            transformer_layers_per_block=(1, 2), norm_num_groups=8, attention_head_dim=(2, 4),
            use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=_TINY_TIME,
            cross_attention_dim=base["text_encoder_2"].config.hidden_size,
            projection_class_embeddings_input_dim=5 * _TINY_TIME + base["text_encoder_2"].config.projection_dim).eval()
    return dict(base, text_encoder=None, tokenizer=None, unet=unet, scheduler=EulerDiscreteScheduler(**SCHEDULER_CONFIG))


def sgm_name(name: str, layers_per_block: int) -> str:
    """A diffusers UNet attention name as kohya names it: kohya trains SDXL on the original (sgm) UNet,
    whose input/output blocks count every resnet+attention pair (diffusers maps them back with the
    UNet's layers_per_block)."""
    per = layers_per_block + 1
    m = re.match(r"(down|up)_blocks\.(\d+)\.attentions\.(\d+)\.(.*)", name)
    if m:
        kind, block, layer, rest = m[1], int(m[2]), int(m[3]), m[4]
        return (f"input_blocks.{1 + block * per + layer}.1.{rest}" if kind == "down"
                else f"output_blocks.{block * per + layer}.1.{rest}")
    return re.sub(r"^mid_block\.attentions\.0\.", "middle_block.1.", name)


def lora_modules(fmt, linears):
    if fmt != "kohya":
        return pick_linears(linears, UNET_ATTENTION)
    # an up block has layers_per_block + 1 resnets, each with a time-embedding Linear
    per = 1 + max(int(m[1]) for n in linears if (m := re.match(r"up_blocks\.\d+\.resnets\.(\d+)\.", n)))
    return pick_linears(linears, UNET_ATTENTION, rename=lambda n: sgm_name(n, per - 1))


_VPRED = dict(width=832, height=1216, num_inference_steps=28, guidance_scale=5.0)   # NoobAI-XL V-Pred's card
VARIANTS = {
    "base": Variant(),
    # the refiner's card: StableDiffusionXLImg2ImgPipeline with its defaults (50 steps, CFG 5, strength 0.3)
    "refiner": Variant(name_or_path="stabilityai/stable-diffusion-xl-refiner-1.0", tasks=("img2img", "inpaint"),
                       pipeline_kwargs=REFINER_KWARGS, without=("text_encoder", "tokenizer")),
    "vpred": Variant(defaults=_VPRED, scheduler={"prediction_type": "v_prediction"}),
    "vpred-ztsnr": Variant(defaults=_VPRED, scheduler={"prediction_type": "v_prediction", "rescale_betas_zero_snr": True}),
    # Playground v2.5's card: 50 steps, guidance 3
    "playground": Variant(defaults=dict(num_inference_steps=50, guidance_scale=3.0),
                          name_or_path="playgroundai/playground-v2.5-1024px-aesthetic", scheduler=PLAYGROUND_SCHEDULER),
    "edm-vpred": Variant(scheduler=EDM_VPRED_SCHEDULER),
}

SPEC = ArchSpec(
    name="sdxl", modality="image", default_name_or_path="stabilityai/stable-diffusion-xl-base-1.0",
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    pipeline="StableDiffusionXLPipeline",
    tasks=(Task("txt2img", "StableDiffusionXLPipeline"),
           Task("img2img", "StableDiffusionXLImg2ImgPipeline", strength=0.3),
           Task("inpaint", "StableDiffusionXLInpaintPipeline", strength=0.9999)),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        # the refiner has no CLIP-L (its repo's model_index names both null)
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, optional=True, vocab="clip_l"),
        Component("tokenizer_2", "PreTrainedTokenizerBase", TOKENIZER, vocab="clip_g"),
        Component("text_encoder", "CLIPTextModel", TEXT_ENCODER, optional=True, single_file=CLIP_L_FILE),
        Component("text_encoder_2", "CLIPTextModelWithProjection", TEXT_ENCODER, single_file=openclip.OPENCLIP_G),
        Component("vae", "AutoencoderKL", VAE, single_file=VAE_FILE),
        Component("unet", "UNet2DConditionModel", DENOISER, single_file=UNET_FILE),
    ),
    variants=VARIANTS,
    scheduler_file=SCHEDULER_FILE,
    # invisible-watermark is not installed here: never stamp outputs
    pipeline_init_kwargs={**PIPELINE_KWARGS, "add_watermarker": False},
    # the model card calls the pipeline with its defaults: 50 steps, CFG 5.0, at 1024^2
    defaults=SampleDefaults(1024, 1024, 50, 5.0), size_divisor=8,
    latents=Latents("BCHW", 4, format=latent_formats.SDXL),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 5.0},
              pipeline_kwargs=PIPELINE_KWARGS),
    description="Stable Diffusion XL (UNet, CLIP-L + OpenCLIP-bigG)",
    controls=CONTROLS,
    scheduler_config={"_class_name": "EulerDiscreteScheduler", "prediction_type": "epsilon"},
    # SD 1.x's marker plus what only SDXL files have: sgm block names, a second text encoder, deeper
    # transformer stacks (toolkit/lora_headers.guess_arch ranks by how many markers match)
    lora=Lora(formats=("peft", "kohya"), modules="toolkit.models.archs.sdxl:lora_modules",
              text_encoders={"lora_te1": "text_encoder", "lora_te2": "text_encoder_2"},
              markers=(r"^(unet\.|lora_unet_)(down|mid|up)[._]blocks", r"^lora_unet_(input|output)_blocks|^lora_unet_middle_block",
                       r"^(lora_te2_|text_encoder_2\.)", r"^unet\..*transformer_blocks\.[1-9]")),
    # h94/IP-Adapter's sdxl_models/ip-adapter*_sdxl files: keyed to the base UNet's 2048-wide context (the
    # refiner takes none)
    ip_adapter=IPAdapter("h94", file="sdxl_models/ip-adapter_sdxl_vit-h.safetensors", context_dims=tuple(dict.fromkeys(
        c["cross_attention_dim"] for name, c in UNET_KNOWN.items() if name not in REFINERS))),
)
