"""FLUX.1 [dev] and [schnell]: a double/single-stream DiT over CLIP-L (pooled) and T5-XXL, the
16-channel Flux VAE, latents packed as 2x2-patch tokens; guidance is an embedded scale, not CFG (dev).

Its files: BFL's original layout (ComfyUI's `diffusion_models/flux1-dev.safetensors`, and the denoiser
of its all-in-one `flux1-dev-fp8`), read with the configs below; schnell's file has no guidance
embedder, which is how a file says which it is."""
import re
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Control, Gguf,
                                 IPAdapter, Latents, Lora, SampleDefaults, SingleFile, Task, Tiny, Variant, pick_linears)
from toolkit.models.formats import clip, dit_controlnet, t5, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

# FLUX.1-dev's scheduler/scheduler_config.json (schnell's: a fixed shift of 1, the variant below)
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=True, base_shift=0.5,
                        max_shift=1.15, base_image_seq_len=256, max_image_seq_len=4096)
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", **SCHEDULER_CONFIG)

FLUX1 = dict(patch_size=1, in_channels=64, out_channels=None, num_layers=19, num_single_layers=38,
             attention_head_dim=128, num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=768,
             axes_dims_rope=[16, 56, 56])
# black-forest-labs/FLUX.1-dev and FLUX.1-schnell transformer/config.json; and the tiny factory's
TRANSFORMER_KNOWN = {
    "flux1-dev": dict(FLUX1, guidance_embeds=True),
    "flux1-schnell": dict(FLUX1, guidance_embeds=False),
    "tiny": dict(patch_size=1, in_channels=64, out_channels=None, num_layers=2, num_single_layers=2,
                 attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32,
                 guidance_embeds=True, axes_dims_rope=[4, 6, 6]),
    # toolkit/models/tiny/gguf.py's (GGUF's row blocks need inner widths of 256: 16 heads of 16)
    "tiny-gguf": dict(patch_size=1, in_channels=64, out_channels=None, num_layers=1, num_single_layers=1,
                      attention_head_dim=16, num_attention_heads=16, joint_attention_dim=32, pooled_projection_dim=32,
                      guidance_embeds=True, axes_dims_rope=[4, 6, 6]),
}


def flux1_signature(view) -> dict:
    """What a BFL-layout FLUX.1 file's shapes tell (heads and rope axes they do not)."""
    if not view.has("img_in.weight") or not view.has("double_blocks.0.img_mod.lin.weight"):
        raise FileKindError("no img_in / double_blocks.0.img_mod: not a FLUX.1 transformer")
    return {"width": view.dim("img_in.weight"), "in_channels": view.dim("img_in.weight", 1),
            "out": view.dim("final_layer.linear.weight"), "joint_attention_dim": view.dim("txt_in.weight", 1),
            "pooled_projection_dim": view.dim("vector_in.in_layer.weight", 1),
            "num_layers": view.count(r"double_blocks\.(\d+)\."),
            "num_single_layers": view.count(r"single_blocks\.(\d+)\."),
            "guidance_embeds": view.has("guidance_in.in_layer.weight")}


def flux1_facts(c: dict) -> dict:
    return {"width": c["num_attention_heads"] * c["attention_head_dim"], "in_channels": c["in_channels"],
            "out": (c.get("out_channels") or c["in_channels"]) * c.get("patch_size", 1) ** 2,
            "joint_attention_dim": c["joint_attention_dim"], "pooled_projection_dim": c["pooled_projection_dim"],
            "num_layers": c["num_layers"], "num_single_layers": c["num_single_layers"],
            "guidance_embeds": c["guidance_embeds"]}


def transformer_config(view):
    return from_known(flux1_signature(view), TRANSFORMER_KNOWN, flux1_facts, "the FLUX.1 transformer",
                      variants={"flux1-dev": "dev", "flux1-schnell": "schnell"},
                      notes={"flux1-dev": ("FLUX.1 Kontext [dev] has the same shapes: model.arch flux_kontext "
                                           "reads it as Kontext",)})


def tiny_flux_encoders(b):
    """CLIP + T5 as Flux, Chroma and Kontext use them (shared by the Flux-family tiny models)."""
    tokenizer, tokenizer_2 = kit.clip_tokenizer(), kit.t5_tokenizer(512)
    with b.seeded("text_encoder", "clip_l"):
        text_encoder = kit.clip_text_encoder(tokenizer)
    with b.seeded("text_encoder_2", "t5"):
        text_encoder_2 = kit.t5_encoder(tokenizer_2)
    with b.seeded("vae", "flux_vae"):
        vae = kit.flux_vae()
    return dict(tokenizer=tokenizer, tokenizer_2=tokenizer_2, text_encoder=text_encoder,
                text_encoder_2=text_encoder_2, vae=vae)


def tiny_flux_transformer(b, **over):
    from diffusers import FluxTransformer2DModel

    dims = dict(patch_size=1, in_channels=64, num_layers=2, num_single_layers=2, attention_head_dim=16,
                num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32, guidance_embeds=True,
                axes_dims_rope=(4, 6, 6))      # 16 latent channels packed 2x2; rope axes sum to the head dim
    dims.update(over)
    with b.seeded("transformer"):
        return FluxTransformer2DModel(**dims).eval()


def _tiny(b):
    return dict(tiny_flux_encoders(b), transformer=tiny_flux_transformer(b),
                scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG))


def lora_modules(fmt, linears):
    """peft: diffusers names. kohya and ComfyUI name the original (BFL) layers, where q, k, v are one
    fused qkv layer per stream (diffusers' converter splits it back) and a single block's output is
    linear2. (A single block's linear1 is left out: diffusers splits it at FLUX.1-dev's real widths.)"""
    if fmt == "peft":
        return pick_linears(linears, r"transformer_blocks\.\d+\.attn\.(to_q|to_k|to_v)$",
                            r"single_transformer_blocks\.\d+\.proj_out$")
    out = []
    for name, (n_in, n_out) in linears.items():
        if m := re.match(r"transformer_blocks\.(\d+)\.attn\.(to_q|add_q_proj)$", name):
            out.append((f"double_blocks.{m[1]}.{'img' if m[2] == 'to_q' else 'txt'}_attn.qkv", n_in, 3 * n_out))
        elif m := re.match(r"transformer_blocks\.(\d+)\.attn\.(to_out\.0|to_add_out)$", name):
            out.append((f"double_blocks.{m[1]}.{'img' if m[2] == 'to_out.0' else 'txt'}_attn.proj", n_in, n_out))
        elif m := re.match(r"single_transformer_blocks\.(\d+)\.proj_out$", name):
            out.append((f"single_blocks.{m[1]}.linear2", n_in, n_out))
    return out


FLUX_RENAMES = (
    (r"^time_text_embed\.timestep_embedder\.linear_([12])", lambda m: f"time_in.{_IO[m[1]]}"),
    (r"^time_text_embed\.text_embedder\.linear_([12])", lambda m: f"vector_in.{_IO[m[1]]}"),
    (r"^time_text_embed\.guidance_embedder\.linear_([12])", lambda m: f"guidance_in.{_IO[m[1]]}"),
    (r"^context_embedder", "txt_in"), (r"^x_embedder", "img_in"), (r"^proj_out", "final_layer.linear"),
    (r"^transformer_blocks\.(\d+)\.norm1\.linear", r"double_blocks.\1.img_mod.lin"),
    (r"^transformer_blocks\.(\d+)\.norm1_context\.linear", r"double_blocks.\1.txt_mod.lin"),
    (r"^transformer_blocks\.(\d+)\.attn\.norm_q\.weight", r"double_blocks.\1.img_attn.norm.query_norm.scale"),
    (r"^transformer_blocks\.(\d+)\.attn\.norm_k\.weight", r"double_blocks.\1.img_attn.norm.key_norm.scale"),
    (r"^transformer_blocks\.(\d+)\.attn\.norm_added_q\.weight", r"double_blocks.\1.txt_attn.norm.query_norm.scale"),
    (r"^transformer_blocks\.(\d+)\.attn\.norm_added_k\.weight", r"double_blocks.\1.txt_attn.norm.key_norm.scale"),
    (r"^transformer_blocks\.(\d+)\.attn\.to_out\.0", r"double_blocks.\1.img_attn.proj"),
    (r"^transformer_blocks\.(\d+)\.attn\.to_add_out", r"double_blocks.\1.txt_attn.proj"),
    (r"^transformer_blocks\.(\d+)\.ff\.net\.0\.proj", r"double_blocks.\1.img_mlp.0"),
    (r"^transformer_blocks\.(\d+)\.ff\.net\.2", r"double_blocks.\1.img_mlp.2"),
    (r"^transformer_blocks\.(\d+)\.ff_context\.net\.0\.proj", r"double_blocks.\1.txt_mlp.0"),
    (r"^transformer_blocks\.(\d+)\.ff_context\.net\.2", r"double_blocks.\1.txt_mlp.2"),
    (r"^single_transformer_blocks\.(\d+)\.norm\.linear", r"single_blocks.\1.modulation.lin"),
    (r"^single_transformer_blocks\.(\d+)\.attn\.norm_q\.weight", r"single_blocks.\1.norm.query_norm.scale"),
    (r"^single_transformer_blocks\.(\d+)\.attn\.norm_k\.weight", r"single_blocks.\1.norm.key_norm.scale"),
    (r"^single_transformer_blocks\.(\d+)\.proj_out", r"single_blocks.\1.linear2"),
)
_IO = {"1": "in_layer", "2": "out_layer"}
# fused original layers: (block regex, diffusers parts in order, original layer)
FLUX_FUSED = ((r"^transformer_blocks\.(\d+)\.", ("attn.to_q", "attn.to_k", "attn.to_v"),
               r"double_blocks.\1.img_attn.qkv"),
               (r"^transformer_blocks\.(\d+)\.", ("attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"),
                r"double_blocks.\1.txt_attn.qkv"),
               (r"^single_transformer_blocks\.(\d+)\.", ("attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp"),
                r"single_blocks.\1.linear1"))


FLUX1_LINEAR1 = (3072, 3072, 3072, 12288)      # the q, k, v, mlp rows diffusers' converter splits at


def convert_original(checkpoint: dict, **kwargs) -> dict:
    from diffusers.loaders.single_file_utils import convert_flux_transformer_checkpoint_to_diffusers as convert
    return at_any_width(convert, checkpoint, **kwargs)


def at_any_width(convert, checkpoint: dict, **kwargs) -> dict:
    """diffusers' Flux/Chroma converter at any width. It splits each single block's fused linear1 at
    FLUX.1's width; where a checkpoint is narrower, linear1 is split here by the checkpoint's own
    width (linear2's rows) and diffusers sees a placeholder. Everything else is diffusers'."""
    import torch
    ckpt = {k.removeprefix("model.diffusion_model."): v for k, v in checkpoint.items()}
    parts = {}
    for key in [k for k in ckpt if re.match(r"single_blocks\.\d+\.linear1\.(weight|bias)$", k)]:
        t, hidden = ckpt[key], ckpt[re.sub(r"linear1\.(weight|bias)$", "linear2.weight", key)].shape[0]
        sizes = (hidden, hidden, hidden, t.shape[0] - 3 * hidden)
        if sizes != FLUX1_LINEAR1:
            parts[key] = torch.split(t, sizes, 0)
            ckpt[key] = t.new_zeros(()).expand(sum(FLUX1_LINEAR1), *t.shape[1:])
    out = convert(ckpt, **kwargs)
    for key, split in parts.items():
        i, kind = re.match(r"single_blocks\.(\d+)\.linear1\.(weight|bias)$", key).groups()
        for name, t in zip(("attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp"), split):
            out[f"single_transformer_blocks.{i}.{name}.{kind}"] = t
    return out


# the whole FLUX.1 denoiser's: its final modulation too, whose shift/scale halves BFL orders the other way
ORIGINAL_RENAMES = FLUX_RENAMES + ((r"^norm_out\.linear", "final_layer.adaLN_modulation.1"),)
ORIGINAL_SWAPPED = (r"^norm_out\.linear\.",)


def to_original(state: dict) -> dict:
    """A diffusers FluxTransformer2DModel state dict in BFL's original layout (fused qkv and
    linear1, shift/scale order of the final modulation), as ComfyUI files have it."""
    from toolkit.models.formats.original_layout import to_original as remap
    return remap(state, ORIGINAL_RENAMES, FLUX_FUSED, ORIGINAL_SWAPPED)


def gguf_to_diffusers(checkpoint: dict, shapes: dict, config: dict) -> dict:
    """A GGUF file's BFL keys -> diffusers', by the tables to_original writes with: diffusers'
    converter splits a single block's linear1 at FLUX.1's fixed width, these at the model's own."""
    from toolkit.models.formats.original_layout import from_original
    return from_original(checkpoint, shapes, ORIGINAL_RENAMES, FLUX_FUSED, ORIGINAL_SWAPPED)


# GGUF files of a FLUX.1 denoiser (flux, flux_kontext): ComfyUI-GGUF's flux, BFL's names
GGUF = Gguf("flux", to_diffusers="toolkit.models.archs.flux:gguf_to_diffusers",
            tiny=dict(num_attention_heads=16, num_layers=1, num_single_layers=1))


TRANSFORMER_FILE = SingleFile(
    "toolkit.models.archs.flux:convert_original", "toolkit.models.archs.flux:to_original",
    # img_mod: FLUX.1's per-block modulation (FLUX.2's files share the rest of these names)
    anchors=("double_blocks.0.img_attn.qkv.weight", "double_blocks.0.img_mod.lin.weight", "time_in.in_layer.weight"),
    config="toolkit.models.archs.flux:transformer_config", kind="flux1_dit", label="FLUX.1 transformer")

# ComfyUI's all-in-one FLUX.1 files (flux1-dev-fp8) put CLIP-L under text_encoders.clip_l.
CLIP_L_FILE = replace(clip.CLIP_L, prefixes=("text_encoders.clip_l.transformer.", ""))

COMPONENTS = (
    Component("scheduler", "SchedulerMixin", SCHEDULER),
    Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="clip_l"),
    Component("tokenizer_2", "PreTrainedTokenizerBase", TOKENIZER, vocab="t5_xxl"),
    Component("text_encoder", "CLIPTextModel", TEXT_ENCODER, single_file=CLIP_L_FILE),
    Component("text_encoder_2", "T5EncoderModel", TEXT_ENCODER, single_file=t5.T5_XXL),
    Component("vae", "AutoencoderKL", VAE, single_file=vaes.FLUX_AE),
    Component("transformer", "FluxTransformer2DModel", DENOISER, single_file=TRANSFORMER_FILE),
)

def control_config(view):
    """A Flux ControlNet (or Union) file in diffusers' names: its config from the shapes."""
    return dit_controlnet.flux(view, TRANSFORMER_KNOWN)


def control_fits(config: dict) -> bool:
    return config.get("num_mode") is None


def union_fits(config: dict) -> bool:
    return config.get("num_mode") is not None


# InstantX's FLUX.1-dev-Controlnet-Union: its control types by index (its model card's order)
UNION_MODES = ("canny", "tile", "depth", "blur", "pose", "gray", "lq")
_CONTROL_PIPELINES = {"txt2img": ("FluxControlNetPipeline", "control_image"),
                      "img2img": ("FluxControlNetImg2ImgPipeline", "control_image"),
                      "inpaint": ("FluxControlNetInpaintPipeline", "control_image")}
# InstantX's / Shakker-Labs' repos' diffusion_pytorch_model.safetensors as one file (a Union by its mode embedding)
_CONTROL_FILES = dit_controlnet.files("toolkit.models.archs.flux", dit_controlnet.FLUX_ANCHORS, "Flux ControlNet",
                                      "flux_controlnet_diffusers")
CONTROLS = (Control("FluxControlNetModel", _CONTROL_PIPELINES, fits="toolkit.models.archs.flux:control_fits",
                    files=_CONTROL_FILES, label="Flux ControlNet"),
            Control("FluxControlNetModel", _CONTROL_PIPELINES, fits="toolkit.models.archs.flux:union_fits",
                    files=_CONTROL_FILES, modes=UNION_MODES, mode_arg="control_mode", label="Flux ControlNet Union"))


SPEC = ArchSpec(
    name="flux", modality="image", default_name_or_path="black-forest-labs/FLUX.1-dev", pipeline="FluxPipeline",
    tasks=(Task("txt2img", "FluxPipeline"), Task("img2img", "FluxImg2ImgPipeline", strength=0.6),
           Task("inpaint", "FluxInpaintPipeline", strength=0.6)),
    components=COMPONENTS, pipeline_init_kwargs={"image_encoder": None, "feature_extractor": None},
    defaults=SampleDefaults(1024, 1024, 28, 3.5), uses_negative_prompt=False,
    # the model cards: dev 28 steps at guidance 3.5; schnell (timestep-distilled) 4 steps, no guidance
    variants={"dev": Variant(name_or_path="black-forest-labs/FLUX.1-dev"),
              "schnell": Variant({"num_inference_steps": 4, "guidance_scale": 0.0},
                                 name_or_path="black-forest-labs/FLUX.1-schnell",
                                 scheduler={"shift": 1.0, "use_dynamic_shifting": False})},
    scheduler_file=SCHEDULER_FILE,
    latents=Latents("packed", 16, patch=2, format=latent_formats.FLUX),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 3.5}), gguf=GGUF,
    description="FLUX.1 [dev] / [schnell] (CLIP + T5, packed tokens)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    controls=CONTROLS,
    # FlowMatchHeun's set_timesteps takes no sigmas (DPM++ runs: the pipeline drops them for flow-sigma schedulers)
    samplers_excluded=("heun",),
    # ComfyUI's Flux LoRAs are kohya's down/up keys under the original names; diffusers reads both
    lora=Lora(formats=("peft", "kohya", "comfyui"), modules="toolkit.models.archs.flux:lora_modules",
              comfy_keys=("lora_down", "lora_up"),
              markers=(r"(^|[._])(double|single)_blocks[._]\d+|^transformer\.single_transformer_blocks\.",)),
    # MagCache's ratios: diffusers ships FLUX.1-dev's (28 steps; interpolated to the request's steps)
    step_caches={"first_block": {}, "taylorseer": {}, "faster": {},
                 "mag": {"mag_ratios": "diffusers.hooks.mag_cache:FLUX_MAG_RATIOS"}},
    # XLabs' flux-ip-adapter (ip_adapter.safetensors): through FluxIPAdapterMixin, over CLIP ViT-L/14's image embeds
    ip_adapter=IPAdapter("xlabs", file="ip_adapter.safetensors", context_dims=tuple(dict.fromkeys(
        c["joint_attention_dim"] for c in TRANSFORMER_KNOWN.values())), blocks=tuple(dict.fromkeys(
        c["num_layers"] for c in TRANSFORMER_KNOWN.values()))),
)
