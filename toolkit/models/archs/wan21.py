"""Wan 2.1 text-to-video: a 3D DiT over UMT5-XXL and the causal Wan VAE (16 channels, 8x spatial,
4x temporal), UniPC with flow sigmas as the diffusers repos ship it.

Its files: the original Wan layout (ComfyUI's `diffusion_models/wan2.1_t2v_1.3B_fp16.safetensors`),
read with the configs below; the Wan 2.2 rows read theirs with their own. A Wan 2.2 A14B expert has
Wan 2.1 14B's shapes: a file named without `model.arch` is taken for wan21 (the detector says
wan22_a14b fits it too)."""
import re
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Gguf, Latents,
                                 Lora, SampleDefaults, SingleFile, Tiny, pick_linears)
from toolkit.models.formats import t5, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

_WAN = dict(patch_size=[1, 2, 2], attention_head_dim=128, in_channels=16, out_channels=16, text_dim=4096, freq_dim=256,
            cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-06, image_dim=None, added_kv_proj_dim=None,
            rope_max_seq_len=1024)
WAN21_1_3B = dict(_WAN, num_attention_heads=12, num_layers=30, ffn_dim=8960)
WAN_14B = dict(_WAN, num_attention_heads=40, num_layers=40, ffn_dim=13824)
WAN22_5B = dict(_WAN, num_attention_heads=24, num_layers=30, ffn_dim=14336, in_channels=48, out_channels=48)
TINY_WAN = dict(patch_size=[1, 2, 2], num_attention_heads=2, attention_head_dim=16, in_channels=16, out_channels=16,
                text_dim=32, freq_dim=256, ffn_dim=64, num_layers=2, cross_attn_norm=True,
                qk_norm="rms_norm_across_heads", eps=1e-06, image_dim=None, added_kv_proj_dim=None, rope_max_seq_len=1024)
# Wan-AI/Wan2.1-T2V-1.3B-Diffusers and -14B-Diffusers transformer/config.json; and the tiny factory's
TRANSFORMER_KNOWN = {"wan2.1-t2v-1.3b": WAN21_1_3B, "wan2.1-t2v-14b": WAN_14B, "tiny": TINY_WAN}


def transformer_signature(view) -> dict:
    """What an original-layout Wan file's shapes tell (the heads they do not: 128 wide in every release);
    a file with VACE blocks is wan_vace's, not a plain Wan transformer."""
    if view.has("vace_patch_embedding.weight"):
        raise FileKindError("VACE blocks (vace_patch_embedding): a Wan VACE transformer, arch wan_vace")
    return wan_signature(view)


def wan_signature(view) -> dict:
    """The shapes every original-layout Wan transformer has."""
    if not view.has("patch_embedding.weight") or not view.has("head.head.weight"):
        raise FileKindError("no patch_embedding / head.head: not a Wan transformer")
    width, in_channels, *patch = view.shape("patch_embedding.weight")
    return {"width": width, "in_channels": in_channels, "patch_size": list(patch),
            "patch_out": view.dim("head.head.weight"), "text_dim": view.dim("text_embedding.0.weight", 1),
            "freq_dim": view.dim("time_embedding.0.weight", 1), "num_layers": view.count(r"blocks\.(\d+)\."),
            "ffn_dim": view.dim("blocks.0.ffn.0.weight"),
            "image_dim": view.dim("img_emb.proj.1.weight", 1) if view.has("img_emb.proj.1.weight") else None,
            "added_kv_proj_dim": view.dim("blocks.0.cross_attn.k_img.weight", 1)
            if view.has("blocks.0.cross_attn.k_img.weight") else None,
            # SkyReels V2 DF 1.3B's frame-rate embedding, which no Wan release has
            "inject_sample_info": view.has("fps_embedding.weight")}


def transformer_facts(c: dict) -> dict:
    patch = list(c["patch_size"])
    return {"width": c["num_attention_heads"] * c["attention_head_dim"], "in_channels": c["in_channels"],
            "patch_size": patch, "patch_out": c["out_channels"] * patch[0] * patch[1] * patch[2],
            "text_dim": c["text_dim"], "freq_dim": c["freq_dim"], "num_layers": c["num_layers"], "ffn_dim": c["ffn_dim"],
            "image_dim": c.get("image_dim"), "added_kv_proj_dim": c.get("added_kv_proj_dim"),
            "inject_sample_info": bool(c.get("inject_sample_info"))}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the Wan 2.1 transformer",
                      notes={"wan2.1-t2v-14b": ("a Wan 2.2 T2V A14B expert has the same shapes: model.arch wan22_a14b "
                                                "reads it as one",)})


# the layout every Wan row reads; each arch's own `config` picks among its known configs
WAN_FILE = SingleFile("convert_wan_transformer_to_diffusers", "toolkit.models.archs.wan21:to_original",
                      anchors=("blocks.0.self_attn.q.weight", "patch_embedding.weight"), kind="wan_dit",
                      label="Wan transformer")

# GGUF files of any Wan denoiser: ComfyUI-GGUF's wan, Wan's names; its convert.py keeps the modulation tables F32
GGUF = Gguf("wan", hiprec=(".modulation",), tiny=dict(num_attention_heads=16, ffn_dim=1024, num_layers=1))
# the Wan VAE's decoder features per output pixel at its last stage, one floor for every Wan row: Wan 2.2
# 5B's VAE has 256 at half size (patch 2), Wan 2.1's 96 at full size
WAN_DECODE_FEATURES = 64

COMPONENTS = (
    Component("scheduler", "SchedulerMixin", SCHEDULER),
    Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="umt5_xxl"),
    Component("text_encoder", "UMT5EncoderModel", TEXT_ENCODER, single_file=t5.UMT5_XXL),
    Component("vae", "AutoencoderKLWan", VAE, single_file=vaes.WAN21_VAE),
    Component("transformer", "WanTransformer3DModel", DENOISER, single_file=replace(
        WAN_FILE, config="toolkit.models.archs.wan21:transformer_config", label="Wan 2.1 transformer")),
)


def with_transformer_config(components: tuple, config: str, label: str) -> tuple:
    """`components` with the transformer read by another Wan row's config rule."""
    return components[:-1] + (replace(components[-1], single_file=replace(WAN_FILE, config=config, label=label)),)

# diffusers name -> original (Wan/ComfyUI) name, applied in order: the inverse of diffusers' rename table
TO_ORIGINAL = (("condition_embedder.image_embedder.norm1", "img_emb.proj.0"),       # I2V's image projection
               ("condition_embedder.image_embedder.ff.net.0.proj", "img_emb.proj.1"),
               ("condition_embedder.image_embedder.ff.net.2", "img_emb.proj.3"),
               ("condition_embedder.image_embedder.norm2", "img_emb.proj.4"),
               (".add_k_proj.", ".k_img."), (".add_v_proj.", ".v_img."), (".norm_added_k.", ".norm_k_img."),
               ("condition_embedder.time_embedder.linear_1", "time_embedding.0"),
               ("condition_embedder.time_embedder.linear_2", "time_embedding.2"),
               ("condition_embedder.text_embedder.linear_1", "text_embedding.0"),
               ("condition_embedder.text_embedder.linear_2", "text_embedding.2"),
               ("condition_embedder.time_proj", "time_projection.1"), ("attn1", "self_attn"), ("attn2", "cross_attn"),
               (".to_out.0.", ".o."), (".to_q.", ".q."), (".to_k.", ".k."), (".to_v.", ".v."),
               ("ffn.net.0.proj", "ffn.0"), ("ffn.net.2", "ffn.2"),
               ("norm2", "norm__swap"), ("norm3", "norm2"), ("norm__swap", "norm3"))


def to_original(state: dict) -> dict:
    """A diffusers WanTransformer3DModel state dict in the original Wan layout ComfyUI files use."""
    out = {}
    for key, t in state.items():
        if key == "scale_shift_table":
            key = "head.modulation"
        elif key.startswith("proj_out."):
            key = "head.head." + key[len("proj_out."):]
        else:
            key = key.replace("scale_shift_table", "modulation")
            for a, b in TO_ORIGINAL:
                key = key.replace(a, b)
        out[key] = t
    return out


ORIGINAL_ATTENTION = {"attn1": "self_attn", "attn2": "cross_attn"}
ORIGINAL_LAYER = {"to_q": "q", "to_k": "k", "to_v": "v", "to_out.0": "o"}


def original_name(name: str) -> str:
    """A diffusers Wan layer as the original checkpoint (and so kohya/musubi and ComfyUI) names it."""
    if m := re.match(r"blocks\.(\d+)\.(attn[12])\.(.+)$", name):
        return f"blocks.{m[1]}.{ORIGINAL_ATTENTION[m[2]]}.{ORIGINAL_LAYER[m[3]]}"
    return re.sub(r"\.ffn\.net\.(0)\.proj$|\.ffn\.net\.(2)$", lambda m: f".ffn.{m[1] or m[2]}", name)


def lora_modules(fmt, linears):
    """Every attention projection and both feed-forward layers of every block (musubi's converter
    expects them all)."""
    return pick_linears(linears, r"^blocks\.\d+\.(attn[12]\.(to_q|to_k|to_v|to_out\.0)|ffn\.net\.(0\.proj|2))$",
                        rename=None if fmt == "peft" else original_name)


# Wan 2.1 and 2.2 LoRA files share their keys: the markers name Wan 2.1, the family's first arch
LORA = Lora(formats=("peft", "kohya", "comfyui"), modules="toolkit.models.archs.wan21:lora_modules",
            markers=(r"^(transformer\.|diffusion_model\.|lora_unet_)?blocks[._]\d+[._](self_attn|cross_attn|attn[12]|ffn)[._]",))


def tiny_umt5(b):
    """The tiny UMT5 encoder and tokenizer every Wan model shares (so Wan pairs share it in the pool)."""
    tokenizer = kit.t5_tokenizer(512)
    with b.seeded("text_encoder", "umt5"):
        return tokenizer, kit.umt5_encoder(tokenizer)


def tiny_wan_transformer(b, role: str = "transformer", **over):
    from diffusers import WanTransformer3DModel

    dims = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=16, out_channels=16,
                text_dim=32, freq_dim=256, ffn_dim=64, num_layers=2, cross_attn_norm=True,
                qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024)
    dims.update(over)
    with b.seeded(role):
        return WanTransformer3DModel(**dims).eval()


def unipc_flow_config(flow_shift: float = 3.0) -> dict:
    """What the Wan diffusers repos ship (scheduler/scheduler_config.json): UniPC with flow sigmas
    (Wan 2.1 and 2.2 A14B: shift 3.0; 2.2 TI2V 5B: 5.0)."""
    return dict(_class_name="UniPCMultistepScheduler", num_train_timesteps=1000, prediction_type="flow_prediction",
                use_flow_sigmas=True, flow_shift=flow_shift, solver_order=2, solver_type="bh2", predict_x0=True,
                lower_order_final=True, final_sigmas_type="zero", timestep_spacing="linspace")


def unipc_flow_scheduler(flow_shift: float = 3.0):
    from diffusers import UniPCMultistepScheduler
    config = unipc_flow_config(flow_shift)
    config.pop("_class_name")
    return UniPCMultistepScheduler(**config)


def _tiny(b):
    tokenizer, text_encoder = tiny_umt5(b)
    with b.seeded("vae", "wan_vae"):
        vae = kit.wan_vae(16)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, scheduler=unipc_flow_scheduler(),
                transformer=tiny_wan_transformer(b))


SPEC = ArchSpec(
    name="wan21", modality="video", default_name_or_path="Wan-AI/Wan2.1-T2V-1.3B-Diffusers", pipeline="WanPipeline",
    components=COMPONENTS, pipeline_init_kwargs={"transformer_2": None}, output_type="np",
    defaults=SampleDefaults(832, 480, 30, 5.0, num_frames=33, fps=16, output_ext="mp4"),
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.WAN21), decode_features=WAN_DECODE_FEATURES,
    scheduler_file=unipc_flow_config(3.0),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 5.0,
                      "fps": 8}),
    description="Wan 2.1 text-to-video", gguf=GGUF,
    scheduler_config={"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
    batch_arg="num_videos_per_prompt",
    lora=LORA,
    # TaylorSeer skips nothing on its separate cond/uncond calls; no MagCache ratios
    step_caches={"first_block": {}, "faster": {}},
)
