"""Z-Image Turbo: a single-stream DiT over a Qwen3 text encoder and the Flux VAE (16 channels).

Its files: the original Z-Image layout (ComfyUI's `diffusion_models/z_image_turbo_bf16.safetensors`),
read with the configs below. Lumina 2's files share its block names; Z-Image's pad tokens and its
modulation tell them apart."""
import re

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Control, Gguf,
                                 Latents,
                                 Lora, SampleDefaults, SingleFile, Task, Tiny, pick_linears)
from toolkit.models.formats import llm_encoders, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

# Tongyi-MAI/Z-Image-Turbo scheduler/scheduler_config.json
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", num_train_timesteps=1000, use_dynamic_shifting=False,
                      shift=3.0)
# Tongyi-MAI/Z-Image-Turbo transformer/config.json (Z-Image's has the same shapes); and the tiny factory's
TRANSFORMER_KNOWN = {
    "z-image-turbo": dict(all_patch_size=[2], all_f_patch_size=[1], in_channels=16, dim=3840, n_layers=30,
                          n_refiner_layers=2, n_heads=30, n_kv_heads=30, norm_eps=1e-05, qk_norm=True, cap_feat_dim=2560,
                          rope_theta=256.0, t_scale=1000.0, axes_dims=[32, 48, 48], axes_lens=[1536, 512, 512]),
    "tiny": dict(all_patch_size=[2], all_f_patch_size=[1], in_channels=16, dim=32, n_layers=2, n_refiner_layers=1,
                 n_heads=2, n_kv_heads=2, norm_eps=1e-05, qk_norm=True, cap_feat_dim=32, rope_theta=256.0, t_scale=1000.0,
                 axes_dims=[4, 6, 6], axes_lens=[1024, 512, 512]),
}


def transformer_signature(view) -> dict:
    if not view.has("x_pad_token") or not view.has("layers.0.adaLN_modulation.0.weight"):
        raise FileKindError("no x_pad_token / layers.0.adaLN_modulation.0: not a Z-Image transformer")
    qk_norm = view.has("layers.0.attention.q_norm.weight")
    return {"width": view.dim("x_embedder.weight"), "patch_in": view.dim("x_embedder.weight", 1),
            "patch_out": view.dim("final_layer.linear.weight"), "cap_feat_dim": view.dim("cap_embedder.1.weight", 1),
            "n_layers": view.count(r"layers\.(\d+)\."), "n_refiner_layers": view.count(r"noise_refiner\.(\d+)\."),
            "context_refiner_layers": view.count(r"context_refiner\.(\d+)\."),
            "qkv": view.dim("layers.0.attention.qkv.weight"), "qk_norm": qk_norm,
            "head_dim": view.dim("layers.0.attention.q_norm.weight") if qk_norm else None}


def transformer_facts(c: dict) -> dict:
    head = c["dim"] // c["n_heads"]
    patch = c["all_patch_size"][0] ** 2 * c["all_f_patch_size"][0]
    return {"width": c["dim"], "patch_in": patch * c["in_channels"], "patch_out": patch * c["in_channels"],
            "cap_feat_dim": c["cap_feat_dim"], "n_layers": c["n_layers"], "n_refiner_layers": c["n_refiner_layers"],
            "context_refiner_layers": c["n_refiner_layers"], "qkv": (c["n_heads"] + 2 * c["n_kv_heads"]) * head,
            "qk_norm": c["qk_norm"], "head_dim": head if c["qk_norm"] else None}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the Z-Image transformer")


TO_ORIGINAL = (("all_final_layer.2-1.", "final_layer."), ("all_x_embedder.2-1.", "x_embedder."),
               (".attention.to_out.0.", ".attention.out."), (".attention.norm_k.", ".attention.k_norm."),
               (".attention.norm_q.", ".attention.q_norm."))


def to_original(state: dict) -> dict:
    """A diffusers ZImageTransformer2DModel state dict in the original Z-Image layout (fused qkv)."""
    import torch
    out = {}
    for key, t in state.items():
        if ".attention.to_k." in key or ".attention.to_v." in key:
            continue
        if ".attention.to_q." in key:
            qkv = [state[key.replace("to_q", n)] for n in ("to_q", "to_k", "to_v")]
            out[key.replace(".to_q.", ".qkv.")] = torch.cat(qkv, 0)
            continue
        for a, b in TO_ORIGINAL:
            key = key.replace(a, b)
        out[key] = t
    return out


def _tiny(b):
    from diffusers import ZImageTransformer2DModel

    tokenizer = kit.qwen2_tokenizer()
    with b.seeded("text_encoder"):
        text_encoder = kit.qwen3_encoder(tokenizer, layers=2)     # the pipeline reads hidden_states[-2]
    with b.seeded("vae", "flux_vae"):
        vae = kit.flux_vae()
    with b.seeded("transformer"):
        transformer = ZImageTransformer2DModel(
            all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=32, n_layers=2, n_refiner_layers=1,
            n_heads=2, n_kv_heads=2, norm_eps=1e-5, qk_norm=True, cap_feat_dim=text_encoder.config.hidden_size,
            rope_theta=256.0, t_scale=1000.0, axes_dims=[4, 6, 6], axes_lens=[1024, 512, 512]).eval()
    scheduler = kit.flow_match_scheduler(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False)
    return dict(scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer)


def lora_modules(fmt, linears):
    """Attention, feed-forward and a refiner layer, as diffusers names them (kohya's names are the same,
    underscored); ComfyUI files name the attention output as the original checkpoint does (`out`)."""
    rename = (lambda n: re.sub(r"\.to_out\.0$", ".out", n)) if fmt == "comfyui" else None
    return pick_linears(linears, r"^layers\.\d+\.attention\.(to_q|to_k|to_v|to_out\.0)$",
                        r"^layers\.\d+\.feed_forward\.w[123]$", r"^noise_refiner\.\d+\.attention\.to_q$", rename=rename)


def control_fits(config: dict) -> bool:
    """Alibaba PAI's Z-Image-Turbo-Fun-Controlnet-Union (1.x and 2.x): its control layers over Z-Image's."""
    return bool(config.get("control_layers_places"))


# the pipeline attaches the resident transformer's embedders and refiners to the control model, runs one, over
# every step, its control types in one model (no mode)
CONTROLS = (Control("ZImageControlNetModel", {"txt2img": ("ZImageControlNetPipeline", "control_image")},
                    fits="toolkit.models.archs.zimage:control_fits", ranges=False, several=False,
                    label="Z-Image ControlNet"),)


SPEC = ArchSpec(
    # RoPE tables of 512 positions per image axis, each a 2x2 patch of the 8x VAE latent: 8192 px
    max_side=min(TRANSFORMER_KNOWN["z-image-turbo"]["axes_lens"][1:]) * 2 * 8,
    name="zimage", modality="image", default_name_or_path="Tongyi-MAI/Z-Image-Turbo", pipeline="ZImagePipeline",
    tasks=(Task("txt2img", "ZImagePipeline"), Task("img2img", "ZImageImg2ImgPipeline", strength=0.6),
           Task("inpaint", "ZImageInpaintPipeline", strength=1.0)),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen3"),
        Component("text_encoder", "Qwen3Model", TEXT_ENCODER, single_file=llm_encoders.QWEN3_4B),
        Component("vae", "AutoencoderKL", VAE, single_file=vaes.FLUX_AE),
        Component("transformer", "ZImageTransformer2DModel", DENOISER, single_file=SingleFile(
            "convert_z_image_transformer_checkpoint_to_diffusers", "toolkit.models.archs.zimage:to_original",
            anchors=("layers.0.attention.qkv.weight", "cap_embedder.0.weight"),
            config="toolkit.models.archs.zimage:transformer_config", kind="zimage_dit", label="Z-Image transformer")),
    ),
    defaults=SampleDefaults(1024, 1024, 8, 0.0),      # the model card: 8 steps, no CFG (distilled)
    latents=Latents("BCHW", 16, format=latent_formats.FLUX), scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0}),
    # GGUF files: ComfyUI-GGUF names Lumina-Image-2.0 and Z-Image both lumina2; only Z-Image has pad tokens.
    # Its unused final norm is dropped, as diffusers' converter drops it.
    gguf=Gguf("lumina2", anchor="x_pad_token", ignored=("norm_final.weight",),
              tiny=dict(dim=256, n_heads=16, n_kv_heads=16, n_layers=1)),
    aliases=("z-image",),
    description="Z-Image Turbo (Qwen3 text encoder, 16-ch VAE)",
    controls=CONTROLS,
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # the pipeline passes sigmas as a list (UniPC multiplies it by a float)
    samplers_excluded=("heun", "dpm++_2m", "unipc"),
    # diffusers maps a ComfyUI file's bare `out` only with down/up keys
    lora=Lora(formats=("peft", "kohya", "comfyui"), modules="toolkit.models.archs.zimage:lora_modules",
              comfy_keys=("lora_down", "lora_up"),
              markers=(r"^(transformer\.|diffusion_model\.|lora_unet_)?layers[._]\d+[._]attention[._]",
                       r"(noise|context)[._]refiner[._]\d+")),
    # TaylorSeer only, on its `layers.N.attention`: in diffusers 0.42.1 FirstBlockCache and MagCache read the
    # block's `hidden_states` argument (ZImage's block names it `x`) and FasterCache hooks attention only
    # under blocks/transformer_blocks; MagCache would also need ratios nobody has published for it
    step_caches={"taylorseer": {"cache_identifiers": [r"layers\.\d+\.attention"]}},
)
