"""HunyuanVideo text-to-video: a dual/single-stream 3D DiT over a Llama 3 text encoder (the prompt in a
chat template whose first 95 tokens are cropped off) and CLIP-L (pooled), the 16-channel causal video VAE
(8x spatial, 4x temporal); guidance is an embedded scale (6.0), not CFG, so there is no negative prompt
unless true CFG is asked for.

Its files: Tencent's original layout (ComfyUI's `diffusion_models/hunyuan_video_t2v_720p_bf16.safetensors`),
read with the configs below."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, SingleFile, Tiny)
from toolkit.models.formats import clip, llm_encoders, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit
from toolkit.models.tiny.tokenizers import PROMPTS, llama3_tokenizer

# hunyuanvideo-community/HunyuanVideo scheduler/scheduler_config.json: flow matching, shift 7
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", num_train_timesteps=1000, shift=7.0)

# hunyuanvideo-community/HunyuanVideo transformer/config.json; and the tiny factory's
TRANSFORMER_KNOWN = {
    "hunyuanvideo": dict(in_channels=16, out_channels=16, num_attention_heads=24, attention_head_dim=128, num_layers=20,
                         num_single_layers=40, num_refiner_layers=2, mlp_ratio=4.0, patch_size=2, patch_size_t=1,
                         qk_norm="rms_norm", guidance_embeds=True, text_embed_dim=4096, pooled_projection_dim=768,
                         rope_theta=256.0, rope_axes_dim=[16, 56, 56]),
    "tiny": dict(in_channels=16, out_channels=16, num_attention_heads=2, attention_head_dim=16, num_layers=1,
                 num_single_layers=1, num_refiner_layers=1, mlp_ratio=4.0, patch_size=2, patch_size_t=1,
                 qk_norm="rms_norm", guidance_embeds=True, text_embed_dim=32, pooled_projection_dim=32, rope_theta=256.0,
                 rope_axes_dim=[4, 6, 6], image_condition_type=None),
}


def transformer_signature(view) -> dict:
    if not view.has("img_in.proj.weight") or not view.has("txt_in.input_embedder.weight"):
        raise FileKindError("no img_in.proj / txt_in.input_embedder: not a HunyuanVideo transformer")
    if view.has("byt5_in.fc1.weight") or len(view.shape("img_in.proj.weight")) != 5:
        # HunyuanImage 2.1 has its layout and anchors, with a glyph projection and 2D patches
        raise FileKindError("a glyph projection (byt5_in) or 2D patches: not a HunyuanVideo transformer")
    width, in_channels, patch_t, patch, _ = view.shape("img_in.proj.weight")
    return {"width": width, "in_channels": in_channels, "patch": [patch_t, patch],
            "patch_out": view.dim("final_layer.linear.weight"),
            "text_embed_dim": view.dim("txt_in.input_embedder.weight", 1),
            "pooled_projection_dim": view.dim("vector_in.in_layer.weight", 1),
            "num_layers": view.count(r"double_blocks\.(\d+)\."),
            "num_single_layers": view.count(r"single_blocks\.(\d+)\."),
            "num_refiner_layers": view.count(r"txt_in\.individual_token_refiner\.blocks\.(\d+)\."),
            "mlp": view.dim("double_blocks.0.img_mlp.fc1.weight"),
            "guidance_embeds": view.has("guidance_in.mlp.0.weight"),
            "qk_norm": "rms_norm" if view.has("double_blocks.0.img_attn_q_norm.weight") else None}


def transformer_facts(c: dict) -> dict:
    width = c["num_attention_heads"] * c["attention_head_dim"]
    return {"width": width, "in_channels": c["in_channels"], "patch": [c["patch_size_t"], c["patch_size"]],
            "patch_out": c["out_channels"] * c["patch_size"] ** 2 * c["patch_size_t"],
            "text_embed_dim": c["text_embed_dim"], "pooled_projection_dim": c["pooled_projection_dim"],
            "num_layers": c["num_layers"], "num_single_layers": c["num_single_layers"],
            "num_refiner_layers": c["num_refiner_layers"], "mlp": int(width * c["mlp_ratio"]),
            "guidance_embeds": c["guidance_embeds"], "qk_norm": c["qk_norm"]}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the HunyuanVideo transformer")


HUNYUAN_LINEAR1 = (3072, 3072, 3072, 12288)     # the q, k, v, mlp rows diffusers' converter splits a single block at


def convert_original(checkpoint: dict, **kwargs) -> dict:
    """diffusers' converter at any width: each single block's fused linear1 split by the file's width
    (its linear2's rows), formats/at_width.py."""
    import re

    from diffusers.loaders.single_file_utils import convert_hunyuan_video_transformer_to_diffusers as convert

    from toolkit.models.formats.at_width import split_fused, strip
    ckpt = strip(checkpoint)
    fused = {}
    for key in [k for k in ckpt if re.match(r"single_blocks\.\d+\.linear1\.(weight|bias)$", k)]:
        hidden = ckpt[re.sub(r"linear1\.(weight|bias)$", "linear2.weight", key)].shape[0]
        fused[key] = ((hidden,) * 3 + (ckpt[key].shape[0] - 3 * hidden,), HUNYUAN_LINEAR1)
    return split_fused(lambda c: convert(c, **kwargs), ckpt, fused)


_R = r"^context_embedder\.token_refiner\.refiner_blocks\.(\d+)\."
_D = r"^transformer_blocks\.(\d+)\."
_S = r"^single_transformer_blocks\.(\d+)\."
_TXT = "txt_in.individual_token_refiner.blocks."
RENAMES = (
    (r"^x_embedder\.proj", "img_in.proj"),
    (r"^time_text_embed\.timestep_embedder\.linear_1", "time_in.mlp.0"),
    (r"^time_text_embed\.timestep_embedder\.linear_2", "time_in.mlp.2"),
    (r"^time_text_embed\.guidance_embedder\.linear_1", "guidance_in.mlp.0"),
    (r"^time_text_embed\.guidance_embedder\.linear_2", "guidance_in.mlp.2"),
    (r"^time_text_embed\.text_embedder\.linear_1", "vector_in.in_layer"),
    (r"^time_text_embed\.text_embedder\.linear_2", "vector_in.out_layer"),
    (r"^context_embedder\.proj_in", "txt_in.input_embedder"),
    (r"^context_embedder\.time_text_embed\.timestep_embedder\.linear_1", "txt_in.t_embedder.mlp.0"),
    (r"^context_embedder\.time_text_embed\.timestep_embedder\.linear_2", "txt_in.t_embedder.mlp.2"),
    (r"^context_embedder\.time_text_embed\.text_embedder\.linear_1", "txt_in.c_embedder.linear_1"),
    (r"^context_embedder\.time_text_embed\.text_embedder\.linear_2", "txt_in.c_embedder.linear_2"),
    (_R + r"attn\.to_out\.0", _TXT + r"\1.self_attn_proj"),
    (_R + r"ff\.net\.0\.proj", _TXT + r"\1.mlp.fc1"), (_R + r"ff\.net\.2", _TXT + r"\1.mlp.fc2"),
    (_R + r"norm_out\.linear", _TXT + r"\1.adaLN_modulation.1"), (_R, _TXT + r"\1."),
    (_D + r"norm1\.linear", r"double_blocks.\1.img_mod.linear"),
    (_D + r"norm1_context\.linear", r"double_blocks.\1.txt_mod.linear"),
    (_D + r"attn\.norm_q", r"double_blocks.\1.img_attn_q_norm"),
    (_D + r"attn\.norm_k", r"double_blocks.\1.img_attn_k_norm"),
    (_D + r"attn\.norm_added_q", r"double_blocks.\1.txt_attn_q_norm"),
    (_D + r"attn\.norm_added_k", r"double_blocks.\1.txt_attn_k_norm"),
    (_D + r"attn\.to_out\.0", r"double_blocks.\1.img_attn_proj"),
    (_D + r"attn\.to_add_out", r"double_blocks.\1.txt_attn_proj"),
    (_D + r"ff\.net\.0\.proj", r"double_blocks.\1.img_mlp.fc1"), (_D + r"ff\.net\.2", r"double_blocks.\1.img_mlp.fc2"),
    (_D + r"ff_context\.net\.0\.proj", r"double_blocks.\1.txt_mlp.fc1"),
    (_D + r"ff_context\.net\.2", r"double_blocks.\1.txt_mlp.fc2"),
    (_S + r"proj_out", r"single_blocks.\1.linear2"), (_S + r"attn\.norm_q", r"single_blocks.\1.q_norm"),
    (_S + r"attn\.norm_k", r"single_blocks.\1.k_norm"), (_S + r"norm\.linear", r"single_blocks.\1.modulation.linear"),
    (r"^norm_out\.linear", "final_layer.adaLN_modulation.1"), (r"^proj_out", "final_layer.linear"),
)
FUSED = ((_R, ("attn.to_q", "attn.to_k", "attn.to_v"), _TXT + r"\1.self_attn_qkv"),
         (_D, ("attn.to_q", "attn.to_k", "attn.to_v"), r"double_blocks.\1.img_attn_qkv"),
         (_D, ("attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"), r"double_blocks.\1.txt_attn_qkv"),
         (_S, ("attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp"), r"single_blocks.\1.linear1"))


def to_original(state: dict) -> dict:
    """A diffusers HunyuanVideoTransformer3DModel state dict in Tencent's original layout (fused qkv and
    linear1, the final modulation in shift/scale order), as ComfyUI's HunyuanVideo files have it."""
    from toolkit.models.formats.original_layout import to_original as remap
    return remap(state, RENAMES, FUSED, (r"^norm_out\.linear\.",))


TRANSFORMER_FILE = SingleFile(
    "toolkit.models.archs.hunyuan_video:convert_original", "toolkit.models.archs.hunyuan_video:to_original",
    anchors=("double_blocks.0.img_attn_qkv.weight", "txt_in.individual_token_refiner.blocks.0.self_attn_qkv.weight"),
    config="toolkit.models.archs.hunyuan_video:transformer_config", kind="hunyuan_video_dit",
    label="HunyuanVideo transformer")


def _llama3_tokenizer():
    """A Llama 3 style byte-level BPE (800 tokens, <|begin_of_text|> prepended) trained on prompts filled into
    HunyuanVideo's template, wrapped in PreTrainedTokenizerFast; padding on the right, as the crop needs."""
    from diffusers.pipelines.hunyuan_video.pipeline_hunyuan_video import DEFAULT_PROMPT_TEMPLATE

    template = DEFAULT_PROMPT_TEMPLATE["template"]
    tokenizer = llama3_tokenizer([template.format(p) for p in PROMPTS])

    # the pipeline drops the template's first crop_start tokens: they must be exactly the template's prefix
    crop = DEFAULT_PROMPT_TEMPLATE["crop_start"]
    prefix = tokenizer(template.split("{}")[0]).input_ids
    full = tokenizer(template.format(PROMPTS[0])).input_ids
    if len(prefix) != crop or full[:crop] != prefix:
        raise RuntimeError(f"tiny Llama tokenizer: the HunyuanVideo template prefix is {len(prefix)} tokens, "
                           f"the pipeline crops {crop}")
    return tokenizer


def tiny_vae(b):
    """The 16-channel causal video VAE (8x spatial, 4x temporal), one recipe for every model that ships
    it (Kandinsky 5 Video's is this one)."""
    from diffusers import AutoencoderKLHunyuanVideo

    with b.seeded("vae", "hunyuan_video_vae"):
        return AutoencoderKLHunyuanVideo(latent_channels=16, block_out_channels=(8, 8, 16, 16), layers_per_block=1,
                                         norm_num_groups=4, spatial_compression_ratio=8,
                                         temporal_compression_ratio=4).eval()


def _tiny(b):
    from diffusers import HunyuanVideoTransformer3DModel
    from transformers import LlamaConfig, LlamaModel

    tokenizer = _llama3_tokenizer()
    with b.seeded("text_encoder"):
        # 3 layers: the pipeline reads hidden_states[-3], the output of the first layer
        text_encoder = LlamaModel(LlamaConfig(
            vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
            num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)).eval()
    tokenizer_2 = kit.clip_tokenizer()
    with b.seeded("text_encoder_2"):
        text_encoder_2 = kit.clip_text_encoder(tokenizer_2)
    vae = tiny_vae(b)
    with b.seeded("transformer"):
        transformer = HunyuanVideoTransformer3DModel(
            in_channels=16, out_channels=16, num_attention_heads=2, attention_head_dim=16, num_layers=1,
            num_single_layers=1, num_refiner_layers=1, patch_size=2, patch_size_t=1, guidance_embeds=True,
            text_embed_dim=text_encoder.config.hidden_size,
            pooled_projection_dim=text_encoder_2.config.hidden_size,
            rope_axes_dim=(4, 6, 6)).eval()                # rope axes sum to the head dim
    # hunyuanvideo-community/HunyuanVideo scheduler: flow matching, shift 7
    scheduler = kit.flow_match_scheduler(num_train_timesteps=1000, shift=7.0)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, tokenizer_2=tokenizer_2,
                text_encoder_2=text_encoder_2, vae=vae, transformer=transformer, scheduler=scheduler)


SPEC = ArchSpec(
    name="hunyuan_video", modality="video", default_name_or_path="hunyuanvideo-community/HunyuanVideo",
    pipeline="HunyuanVideoPipeline", output_type="np",
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="llama3"),
        Component("tokenizer_2", "PreTrainedTokenizerBase", TOKENIZER, vocab="clip_l"),
        Component("text_encoder", "LlamaModel", TEXT_ENCODER, single_file=llm_encoders.LLAVA_LLAMA3_8B),
        Component("text_encoder_2", "CLIPTextModel", TEXT_ENCODER, single_file=clip.CLIP_L),
        Component("vae", "AutoencoderKLHunyuanVideo", VAE, single_file=vaes.HUNYUAN_VIDEO_VAE),
        Component("transformer", "HunyuanVideoTransformer3DModel", DENOISER, single_file=TRANSFORMER_FILE),
    ),
    # model card: 720p (1280x720), 129 frames at 24 fps, 50 steps, embedded guidance 6.0
    defaults=SampleDefaults(1280, 720, 50, 6.0, num_frames=129, fps=24, output_ext="mp4"),
    uses_negative_prompt=False,           # true CFG (true_cfg_scale > 1) is off: a negative prompt does nothing
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.HUNYUAN_VIDEO), scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 6.0,
                      "fps": 8}),
    description="HunyuanVideo text-to-video (Llama 3 + CLIP, embedded guidance)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    batch_arg="num_videos_per_prompt",
)
