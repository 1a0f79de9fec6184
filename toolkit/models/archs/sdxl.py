"""Stable Diffusion XL (base): a UNet over two CLIP encoders (CLIP-L hidden states, OpenCLIP-bigG
hidden states + pooled projection, concatenated), the 4-channel KL VAE (0.13025), Euler as the
repo ships it. The UNet's added conditions are the pooled text embedding and six size ids."""
import re

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents, Lora,
                                 SampleDefaults, Task, Tiny, pick_linears)
from toolkit.models.archs.sd1 import UNET_ATTENTION
from toolkit.models.tiny import kit

# stabilityai/stable-diffusion-xl-base-1.0 scheduler/scheduler_config.json
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                        prediction_type="epsilon", interpolation_type="linear", use_karras_sigmas=False,
                        timestep_spacing="leading", steps_offset=1)
PIPELINE_KWARGS = {"image_encoder": None, "feature_extractor": None}


def _tiny(b):
    from diffusers import EulerDiscreteScheduler, UNet2DConditionModel

    tokenizer, tokenizer_2 = kit.clip_tokenizer(), kit.clip_tokenizer()
    with b.seeded("text_encoder", "clip_l"):           # CLIP-L as Flux builds it
        text_encoder = kit.clip_text_encoder(tokenizer)
    with b.seeded("text_encoder_2"):
        text_encoder_2 = kit.clip_text_encoder(tokenizer_2, projection=True)
    with b.seeded("vae"):
        vae = kit.kl_vae(4, scaling_factor=0.13025, quant_conv=True)
    time_dim = 8
    with b.seeded("unet"):
        unet = UNet2DConditionModel(
            sample_size=8, in_channels=4, out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), block_out_channels=(16, 32), layers_per_block=1,
            transformer_layers_per_block=(1, 2), norm_num_groups=8, attention_head_dim=(2, 4),
            use_linear_projection=True, addition_embed_type="text_time", addition_time_embed_dim=time_dim,
            # the two encoders' hidden states side by side; the pooled projection and 6 size ids
            cross_attention_dim=text_encoder.config.hidden_size + text_encoder_2.config.hidden_size,
            projection_class_embeddings_input_dim=6 * time_dim + text_encoder_2.config.projection_dim).eval()
    return dict(vae=vae, text_encoder=text_encoder, text_encoder_2=text_encoder_2, tokenizer=tokenizer,
                tokenizer_2=tokenizer_2, unet=unet, scheduler=EulerDiscreteScheduler(**SCHEDULER_CONFIG))


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


SPEC = ArchSpec(
    name="sdxl", modality="image", default_name_or_path="stabilityai/stable-diffusion-xl-base-1.0",
    pipeline="StableDiffusionXLPipeline",
    tasks=(Task("txt2img", "StableDiffusionXLPipeline"),
           Task("img2img", "StableDiffusionXLImg2ImgPipeline", strength=0.3),
           Task("inpaint", "StableDiffusionXLInpaintPipeline", strength=0.9999)),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("tokenizer_2", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "CLIPTextModel", TEXT_ENCODER),
        Component("text_encoder_2", "CLIPTextModelWithProjection", TEXT_ENCODER),
        Component("vae", "AutoencoderKL", VAE),
        Component("unet", "UNet2DConditionModel", DENOISER),
    ),
    # invisible-watermark is not installed here: never stamp outputs
    pipeline_init_kwargs={**PIPELINE_KWARGS, "add_watermarker": False},
    # the model card calls the pipeline with its defaults: 50 steps, CFG 5.0, at 1024^2
    defaults=SampleDefaults(1024, 1024, 50, 5.0), size_divisor=8,
    latents=Latents("BCHW", 4, format=latent_formats.SDXL),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 5.0},
              pipeline_kwargs=PIPELINE_KWARGS),
    description="Stable Diffusion XL (UNet, CLIP-L + OpenCLIP-bigG)",
    scheduler_config={"_class_name": "EulerDiscreteScheduler", "prediction_type": "epsilon"},
    # SD 1.x's marker plus what only SDXL files have: sgm block names, a second text encoder, deeper
    # transformer stacks (toolkit/lora_files.guess_arch ranks by how many markers match)
    lora=Lora(formats=("peft", "kohya"), modules="toolkit.models.archs.sdxl:lora_modules",
              text_encoders={"lora_te1": "text_encoder", "lora_te2": "text_encoder_2"},
              markers=(r"^(unet\.|lora_unet_)(down|mid|up)[._]blocks", r"^lora_unet_(input|output)_blocks|^lora_unet_middle_block",
                       r"^(lora_te2_|text_encoder_2\.)", r"^unet\..*transformer_blocks\.[1-9]")),
)
