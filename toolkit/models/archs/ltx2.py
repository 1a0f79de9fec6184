"""LTX-2 (Lightricks): one DiT that denoises video latents and audio latents together, so a clip comes
with its soundtrack. Gemma 3 12B's 49 hidden states (its 48 layers' and the embeddings') go through the text
`connectors` (one stack per modality, learnable registers in place of the padding) to the video and
audio streams; the video VAE is LTX's geometry (128 channels, 32x spatial, 8x temporal; not LTX-Video's
weights or blocks), the audio VAE decodes a mel spectrogram (8 latent channels, 4x in time and mel,
25 latents a second) that the vocoder turns into a 24 kHz stereo waveform (LTX-2.3: 48 kHz, its
vocoder's bandwidth extension). The scheduler steps the packed video latents; the pipeline steps the
audio latents with a copy of it (toolkit/models/patches.py: the copy has none of the call's wraps).

Tasks: text-to-video (LTX2Pipeline), image-to-video (LTX2ImageToVideoPipeline, `init_img` the first
frame, re-compressed at the model's H.264 CRF as the pipeline does) and v2v (LTX2ConditionPipeline:
`init_video`'s first `num_frames` frames as one video condition at frame 0, strength 1). Every
result is an mp4 with an AAC soundtrack. The frame rate conditions the DiT's RoPE (`frame_rate`).

Variants: LTX-2.0 (Lightricks/LTX-2) and LTX-2.3 (diffusers/LTX-2.3-Diffusers), each with its distilled
checkpoint (8 steps on the distilled sigmas, unguided). The pipelines' guidance defaults are LTX-2.3's
(STG at block 28, modality guidance 3, audio CFG 7, rescale 0.7); LTX-2.0 runs with the legacy
cross-modality timestep and STG at block 29, as the pipeline documents. Not here: LTX-2.5 (a Gemma 4
text encoder, a duration head, a prompt enhancer), prompt enhancement, the two-stage upsampling recipe.

Its files: Lightricks' checkpoints (`ltx-2-19b-dev.safetensors`, `ltx-2.3-22b-*`; ComfyUI `checkpoints/`)
give the DiT and the text connectors beside it; GGUF files give the DiT. Their video VAE, audio VAE and
vocoder (`vae.`, `audio_vae.`, `vocoder.`) and Gemma 3's own file are not read yet: a diffusers folder
gives them (`extras_name_or_path` or `model.components`).
"""
import re

from toolkit import latent_formats
from toolkit.models.arch import (AUDIO, DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Gguf,
                                 Latents, SampleDefaults, SingleFile, Task, Tiny, Variant)
from toolkit.models.base_model import BaseModel
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError

_LTX2 = "diffusers.pipelines.ltx2"
_HERE = "toolkit.models.archs.ltx2:"

# Lightricks/LTX-2 scheduler/scheduler_config.json (diffusers' convert_ltx2_to_diffusers.py writes it):
# LTX's resolution-dependent shift, stretched to 0.1; the distilled repos use their sigmas as they are
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.95,
                        max_shift=2.05, base_image_seq_len=1024, max_image_seq_len=4096, shift_terminal=0.1)
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", **SCHEDULER_CONFIG)
DISTILLED_SCHEDULER = {"use_dynamic_shifting": False, "shift_terminal": None}

# the call's arguments per variant where the pipeline's defaults (LTX-2.3's) are not the model's:
# LTX-2.0's legacy cross-modality timestep and its STG block; a distilled model runs unguided (no CFG on
# the audio either, no STG, no modality guidance) on its own 8 sigmas (diffusers' DISTILLED_SIGMA_VALUES)
_UNGUIDED = dict(audio_guidance_scale=1.0, stg_scale=0.0, audio_stg_scale=0.0, modality_scale=1.0,
                 audio_modality_scale=1.0)
CALL_ARGS = {
    "2.0": dict(use_cross_timestep=False, spatio_temporal_guidance_blocks=[29]),
    "2.0-distilled": dict(_UNGUIDED, use_cross_timestep=False, distilled=True),
    "2.3": {},
    "2.3-distilled": dict(_UNGUIDED, distilled=True),
}


# -- its files: Lightricks' checkpoints (ComfyUI `checkpoints/ltx-2-19b-dev.safetensors`) -------------------------
# The DiT under `model.diffusion_model.`, with the text connectors' two stacks beside it
# (`video_embeddings_connector`, `audio_embeddings_connector`) and their input projection outside it
# (`text_embedding_projection.`); the VAE (`vae.`), audio VAE (`audio_vae.`) and vocoder (`vocoder.`) after.
_T = dict(in_channels=128, out_channels=128, patch_size=1, patch_size_t=1, num_attention_heads=32,
          attention_head_dim=128, cross_attention_dim=4096, vae_scale_factors=[8, 32, 32], pos_embed_max_pos=20,
          base_height=2048, base_width=2048, audio_in_channels=128, audio_out_channels=128, audio_patch_size=1,
          audio_patch_size_t=1, audio_num_attention_heads=32, audio_attention_head_dim=64,
          audio_cross_attention_dim=2048, audio_scale_factor=4, audio_pos_embed_max_pos=20,
          audio_sampling_rate=16000, audio_hop_length=160, num_layers=48, activation_fn="gelu-approximate",
          qk_norm="rms_norm_across_heads", norm_elementwise_affine=False, norm_eps=1e-6, caption_channels=3840,
          attention_bias=True, attention_out_bias=True, rope_theta=10000.0, rope_double_precision=True,
          causal_offset=1, timestep_scale_multiplier=1000, cross_attn_timestep_scale_multiplier=1000,
          rope_type="split")
# Lightricks/LTX-2 and diffusers/LTX-2.3-Diffusers transformer/config.json (diffusers'
# convert_ltx2_to_diffusers.py writes them so); and the tiny factory's
TRANSFORMER_KNOWN = {
    "ltx-2-19b": dict(_T, gated_attn=False, cross_attn_mod=False, audio_gated_attn=False, audio_cross_attn_mod=False,
                      use_prompt_embeddings=True, perturbed_attn=False),
    "ltx-2.3-22b": dict(_T, gated_attn=True, cross_attn_mod=True, audio_gated_attn=True, audio_cross_attn_mod=True,
                        use_prompt_embeddings=False, perturbed_attn=True),
    "tiny": dict(num_attention_heads=2, attention_head_dim=16, cross_attention_dim=32, audio_in_channels=16,
                 audio_out_channels=None, audio_num_attention_heads=2, audio_attention_head_dim=8,
                 audio_cross_attention_dim=16, num_layers=2, caption_channels=32, rope_type="split"),
}
_C = dict(caption_channels=3840, text_proj_in_factor=49, video_connector_num_learnable_registers=128,
          audio_connector_num_learnable_registers=128, connector_rope_base_seq_len=4096, rope_theta=10000.0,
          rope_double_precision=True, causal_temporal_positioning=False, rope_type="split")
# their connectors/config.json; and the tiny factory's
CONNECTORS_KNOWN = {
    "ltx-2-19b": dict(_C, video_connector_num_attention_heads=30, video_connector_attention_head_dim=128,
                      video_connector_num_layers=2, video_gated_attn=False, audio_connector_num_attention_heads=30,
                      audio_connector_attention_head_dim=128, audio_connector_num_layers=2, audio_gated_attn=False,
                      per_modality_projections=False, proj_bias=False),
    "ltx-2.3-22b": dict(_C, video_connector_num_attention_heads=32, video_connector_attention_head_dim=128,
                        video_connector_num_layers=8, video_gated_attn=True, audio_connector_num_attention_heads=32,
                        audio_connector_attention_head_dim=64, audio_connector_num_layers=8, audio_gated_attn=True,
                        per_modality_projections=True, video_hidden_dim=4096, audio_hidden_dim=2048, proj_bias=True),
    "tiny": dict(caption_channels=32, text_proj_in_factor=3, video_connector_num_attention_heads=2,
                 video_connector_attention_head_dim=16, video_connector_num_layers=1,
                 audio_connector_num_attention_heads=2, audio_connector_attention_head_dim=16,
                 audio_connector_num_layers=1, rope_type="split"),
}
_VARIANTS = {"ltx-2-19b": "2.0", "ltx-2.3-22b": "2.3"}
_DISTILLED_NOTE = ("a distilled checkpoint has the same shapes: model.variant {}-distilled says it is",)

# original (Lightricks) -> diffusers names, in order, as str.replace on a key (diffusers'
# convert_ltx2_to_diffusers.py tables); `adaln_single.` / `audio_adaln_single.` at a key's start are the
# time embeddings
TRANSFORMER_RENAMES = (
    ("patchify_proj", "proj_in"), ("av_ca_video_scale_shift_adaln_single", "av_cross_attn_video_scale_shift"),
    ("av_ca_a2v_gate_adaln_single", "av_cross_attn_video_a2v_gate"),
    ("av_ca_audio_scale_shift_adaln_single", "av_cross_attn_audio_scale_shift"),
    ("av_ca_v2a_gate_adaln_single", "av_cross_attn_audio_v2a_gate"),
    ("scale_shift_table_a2v_ca_video", "video_a2v_cross_attn_scale_shift_table"),
    ("scale_shift_table_a2v_ca_audio", "audio_a2v_cross_attn_scale_shift_table"),
    ("q_norm", "norm_q"), ("k_norm", "norm_k"), ("prompt_adaln_single.", "prompt_adaln."))
TIME_EMBEDS = (("audio_adaln_single.", "audio_time_embed."), ("adaln_single.", "time_embed."))
CONNECTOR_PARTS = ("video_embeddings_connector.", "audio_embeddings_connector.", "text_embedding_projection.")
CONNECTOR_RENAMES = (
    ("video_embeddings_connector.", "video_connector."), ("audio_embeddings_connector.", "audio_connector."),
    ("transformer_1d_blocks", "transformer_blocks"), ("text_embedding_projection.aggregate_embed", "text_proj_in"),
    ("text_embedding_projection.video_aggregate_embed", "video_text_proj_in"),
    ("text_embedding_projection.audio_aggregate_embed", "audio_text_proj_in"), ("q_norm", "norm_q"),
    ("k_norm", "norm_k"))
_DIT = "model.diffusion_model."


def _renamed(key: str, pairs) -> str:
    for a, b in pairs:
        key = key.replace(a, b)
    return key


def convert_transformer(checkpoint: dict, **_) -> dict:
    """The DiT's tensors (prefix cut) in LTX2VideoTransformer3DModel's names; the connectors beside it
    are the `connectors` role's."""
    out = {}
    for key, t in checkpoint.items():
        key = key.removeprefix(_DIT).removeprefix("diffusion_model.")     # a caller's that keeps the prefix
        if key.startswith(CONNECTOR_PARTS):
            continue
        for a, b in TIME_EMBEDS:
            if key.startswith(a):
                key = b + key[len(a):]
                break
        out[_renamed(key, TRANSFORMER_RENAMES)] = t
    return out


def transformer_to_original(state: dict) -> dict:
    out = {}
    for key, t in state.items():
        for a, b in TIME_EMBEDS:
            if key.startswith(b):
                key = a + key[len(b):]
                break
        out[_renamed(key, [(b, a) for a, b in reversed(TRANSFORMER_RENAMES)])] = t
    return out


def convert_connectors(checkpoint: dict, **_) -> dict:
    """LTX2TextConnectors' tensors from the whole checkpoint: its stacks under the DiT's prefix, their
    projection outside it (or under it: both are in use)."""
    out = {}
    for key, t in checkpoint.items():
        key = key.removeprefix(_DIT)
        if key.startswith(CONNECTOR_PARTS):
            out[_renamed(key, CONNECTOR_RENAMES)] = t
    return out


def connectors_to_original(state: dict) -> dict:
    out = {}
    for key, t in state.items():
        key = _renamed(key, [(b, a) for a, b in reversed(CONNECTOR_RENAMES)])
        out[key if key.startswith("text_embedding_projection.") else _DIT + key] = t
    return out


def transformer_signature(view) -> dict:
    if not view.has("audio_patchify_proj.weight") or not view.has("av_ca_a2v_gate_adaln_single.linear.weight"):
        raise FileKindError("no audio_patchify_proj / av_ca_a2v_gate_adaln_single: not an LTX-2 transformer")
    block = "transformer_blocks.0."
    return {"width": view.dim("patchify_proj.weight"), "in_channels": view.dim("patchify_proj.weight", 1),
            "out_channels": view.dim("proj_out.weight"), "audio_width": view.dim("audio_patchify_proj.weight"),
            "audio_in_channels": view.dim("audio_patchify_proj.weight", 1),
            "audio_out_channels": view.dim("audio_proj_out.weight"),
            "cross_attention_dim": view.dim(block + "attn2.to_k.weight", 1),
            "audio_cross_attention_dim": view.dim(block + "audio_attn2.to_k.weight", 1),
            "caption_channels": (view.dim("caption_projection.linear_1.weight", 1)
                                 if view.has("caption_projection.linear_1.weight") else None),
            "gated_attn": view.has(block + "attn1.to_gate_logits.weight"),
            "cross_attn_mod": view.has("prompt_adaln_single.linear.weight"),
            "num_layers": view.count(r"transformer_blocks\.(\d+)\.")}


def transformer_facts(c: dict) -> dict:
    audio_in = c.get("audio_in_channels", 128)
    return {"width": c["num_attention_heads"] * c["attention_head_dim"], "in_channels": c.get("in_channels", 128),
            "out_channels": c.get("out_channels", 128),
            "audio_width": c["audio_num_attention_heads"] * c["audio_attention_head_dim"],
            "audio_in_channels": audio_in, "audio_out_channels": c.get("audio_out_channels") or audio_in,
            "cross_attention_dim": c["cross_attention_dim"], "audio_cross_attention_dim": c["audio_cross_attention_dim"],
            "caption_channels": c["caption_channels"] if c.get("use_prompt_embeddings", True) else None,
            "gated_attn": c.get("gated_attn", False), "cross_attn_mod": c.get("cross_attn_mod", False),
            "num_layers": c["num_layers"]}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the LTX-2 transformer",
                      variants=_VARIANTS, notes={k: (_DISTILLED_NOTE[0].format(v),) for k, v in _VARIANTS.items()})


def _projection(view, name: str):
    """The connectors' input projection, outside the DiT's prefix or under it."""
    for key in (f"text_embedding_projection.{name}.weight", f"{_DIT}text_embedding_projection.{name}.weight"):
        if view.has(key):
            return view.shape(key)
    return None


def connectors_config(view):
    stacks = {m: f"{_DIT}{m}_embeddings_connector." for m in ("video", "audio")}
    if not all(view.has(p + "learnable_registers") for p in stacks.values()):
        raise FileKindError("no video/audio_embeddings_connector.learnable_registers: not LTX-2's text connectors")
    proj = _projection(view, "aggregate_embed") or _projection(view, "video_aggregate_embed")
    if proj is None:
        raise FileKindError("no text_embedding_projection: LTX-2's text connectors lack their input projection")
    sig = {"proj_out": proj[0], "proj_in": proj[1],
           "per_modality": _projection(view, "video_aggregate_embed") is not None}
    for m, p in stacks.items():
        sig.update({f"{m}_width": view.dim(p + "learnable_registers", 1),
                    f"{m}_registers": view.dim(p + "learnable_registers"),
                    f"{m}_layers": view.count(re.escape(p) + r"transformer_1d_blocks\.(\d+)\."),
                    f"{m}_gated": view.has(p + "transformer_1d_blocks.0.attn1.to_gate_logits.weight")})
    return from_known(sig, CONNECTORS_KNOWN, connectors_facts, "LTX-2's text connectors", variants=_VARIANTS)


def connectors_facts(c: dict) -> dict:
    per_modality = c.get("per_modality_projections", False)
    facts = {"proj_out": c["video_hidden_dim"] if per_modality else c["caption_channels"],
             "proj_in": c["caption_channels"] * c["text_proj_in_factor"], "per_modality": per_modality}
    for m in ("video", "audio"):
        facts.update({f"{m}_width": c[f"{m}_connector_num_attention_heads"] * c[f"{m}_connector_attention_head_dim"],
                      f"{m}_registers": c.get(f"{m}_connector_num_learnable_registers", 128),
                      f"{m}_layers": c[f"{m}_connector_num_layers"], f"{m}_gated": c.get(f"{m}_gated_attn", False)})
    return facts


def gguf_to_diffusers(checkpoint: dict, shapes: dict, config: dict) -> dict:
    """A GGUF file's DiT (QuantStack's, unsloth's: the original names, no prefix) in diffusers' names,
    LTX-2.0's and LTX-2.3's alike (diffusers' own converter knows 2.0's); every key consumed."""
    return convert_transformer({k: checkpoint.pop(k) for k in list(checkpoint)})


# ComfyUI-GGUF names LTX-2's files "ltxv", as LTX-Video's: the audio stream's projection tells them apart.
# hiprec: convert.py keeps the modulation tables in F32. The tiny: inner widths of 256 (video and audio)
GGUF = Gguf("ltxv", anchor="audio_patchify_proj.weight", to_diffusers=_HERE + "gguf_to_diffusers",
            hiprec=("scale_shift_table",),
            tiny=dict(num_attention_heads=16, cross_attention_dim=256, audio_num_attention_heads=32,
                      audio_cross_attention_dim=256, num_layers=1))

TRANSFORMER_FILE = SingleFile(
    _HERE + "convert_transformer", _HERE + "transformer_to_original",
    anchors=("audio_patchify_proj.weight", "av_ca_a2v_gate_adaln_single.linear.weight"),
    config=_HERE + "transformer_config", kind="ltx2_dit", label="LTX-2 transformer")
# the whole file is the view: the stacks sit under the DiT's prefix, their projection outside it
CONNECTORS_FILE = SingleFile(
    _HERE + "convert_connectors", _HERE + "connectors_to_original",
    anchors=(f"{_DIT}video_embeddings_connector.learnable_registers",
             f"{_DIT}audio_embeddings_connector.learnable_registers"),
    prefixes=("",), config=_HERE + "connectors_config", kind="ltx2_connectors", label="LTX-2 text connectors")


class Soundtracked:
    """A video's frames with the waveform made with them: what the holder hands the writer (save_video
    reads `frames`' pixels through `__array__`; media_kwargs passes the audio)."""

    def __init__(self, frames, audio, sample_rate: int):
        self.frames, self.audio, self.sample_rate = frames, audio, int(sample_rate)

    def __array__(self, dtype=None, copy=None):
        import numpy as np
        return np.asarray(self.frames, dtype=dtype)

    def __len__(self):
        return len(self.frames)


class LTX2Model(BaseModel):
    def pipeline_kwargs(self, gen):
        kw = {**super().pipeline_kwargs(gen), "frame_rate": gen.fps}
        args = dict(CALL_ARGS[self.model_config.variant or self.spec.default_variant])
        if args.pop("distilled", False) and gen.num_inference_steps == len(self.distilled_sigmas()):
            kw["sigmas"] = self.distilled_sigmas()      # another step count: the pipeline's linear schedule
        return {**kw, **args}

    @staticmethod
    def distilled_sigmas() -> list:
        from diffusers.pipelines.ltx2.utils import DISTILLED_SIGMA_VALUES
        return list(DISTILLED_SIGMA_VALUES)

    def input_kwargs(self, gen) -> dict:
        """v2v: the input video (its first num_frames frames at the request size) as the condition
        pipeline's one video condition at frame 0; i2v's first frame stays `image`."""
        kw = super().input_kwargs(gen)
        video = kw.pop("video", None)
        if video is not None:
            from diffusers.pipelines.ltx2.pipeline_ltx2_condition import LTX2VideoCondition
            kw["conditions"] = [LTX2VideoCondition(frames=video, index=0, strength=1.0)]
        return kw

    def soundtracked(self, frames, audio) -> Soundtracked:
        rate = self.pipeline.vocoder.config.output_sampling_rate
        return Soundtracked(frames, audio.detach().float().cpu().numpy(), rate)

    def extract_output(self, out):
        return self.soundtracked(out.frames[0], out.audio[0])

    def extract_outputs(self, out, n: int) -> list:
        return [self.soundtracked(out.frames[i], out.audio[i]) for i in range(n)]

    def media_kwargs(self, gen, data) -> dict:
        return {"fps": gen.fps, "audio": data.audio, "sample_rate": data.sample_rate}


# -- the tiny instance ----------------------------------------------------------------------------------
# The text side is Gemma 3 with a vision tower (Gemma3ForConditionalGeneration, as the repos ship it) over
# the tiny Gemma tokenizer (lumina2's: byte fallback); the connectors read its 3 hidden states (2 layers +
# the embeddings). The audio VAE keeps its 8 latent channels and 4x compressions but 8 mel bins (the real
# 64 would need its 128-wide first stage: the packed audio token, latent channels x mel bins / 4, is the
# width of its latent statistics), so the DiT's audio tokens are 16 wide; the vocoder keeps the real
# 240x upsampling (16 kHz mel hops of 160 to 24 kHz).
TINY_MEL_BINS, TINY_AUDIO_LATENT = 8, 8


def tiny_gemma3(tokenizer):
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig, SiglipVisionConfig

    text = Gemma3TextConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16, sliding_window=512,
        max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id)
    vision = SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                image_size=28, patch_size=14)
    # image tokens past the vocabulary: a text prompt never holds one (Gemma 3 maps them out itself)
    config = Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
                          image_token_index=len(tokenizer), boi_token_index=tokenizer.bos_token_id,
                          eoi_token_index=tokenizer.eos_token_id)
    return Gemma3ForConditionalGeneration(config).eval()


def _tiny(b):
    from diffusers import AutoencoderKLLTX2Audio, AutoencoderKLLTX2Video, LTX2VideoTransformer3DModel
    from diffusers.pipelines.ltx2 import LTX2TextConnectors
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder

    from toolkit.models.archs.lumina2 import gemma_tokenizer
    from toolkit.models.tiny import kit

    tokenizer = gemma_tokenizer()
    with b.seeded("text_encoder", "gemma3"):
        text_encoder = kit.jitter_constants(tiny_gemma3(tokenizer))
    width = text_encoder.config.text_config.hidden_size
    layers = text_encoder.config.text_config.num_hidden_layers + 1          # the embeddings too
    with b.seeded("connectors"):
        # 128 learnable registers, as the real ones: they tile the 1024-token prompt
        connectors = LTX2TextConnectors(**{**CONNECTORS_KNOWN["tiny"], "caption_channels": width,
                                           "text_proj_in_factor": layers}).eval()
    with b.seeded("vae"):
        # 4x4 pixel patches, then spatial, temporal and 2 space-time downsamplings: 32x spatial, 8x temporal
        vae = AutoencoderKLLTX2Video(
            latent_channels=128, block_out_channels=(8, 16, 32, 32), decoder_block_out_channels=(8, 16, 32),
            layers_per_block=(1, 1, 1, 1, 1), decoder_layers_per_block=(1, 1, 1, 1), decoder_causal=False,
            spatial_compression_ratio=32, temporal_compression_ratio=8).eval()
    with b.seeded("audio_vae"):
        audio_vae = AutoencoderKLLTX2Audio(
            base_channels=TINY_AUDIO_LATENT * TINY_MEL_BINS // 4, ch_mult=(1, 2, 4), num_res_blocks=1,
            latent_channels=TINY_AUDIO_LATENT, mel_bins=TINY_MEL_BINS).eval()
    with b.seeded("vocoder"):
        vocoder = LTX2Vocoder(in_channels=2 * TINY_MEL_BINS, hidden_channels=32, resnet_kernel_sizes=[3],
                              resnet_dilations=[[1, 3, 5]]).eval()
    with b.seeded("transformer"):
        # its audio tokens: latent channels x mel bins / 4 (16 here)
        transformer = LTX2VideoTransformer3DModel(**{**TRANSFORMER_KNOWN["tiny"], "caption_channels": width}).eval()
    return dict(scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG), vae=vae, audio_vae=audio_vae,
                text_encoder=text_encoder, tokenizer=tokenizer, connectors=connectors, transformer=transformer,
                vocoder=vocoder)


_DISTILLED = {"num_inference_steps": 8, "guidance_scale": 1.0}

SPEC = ArchSpec(
    name="ltx2", modality="video", default_name_or_path="Lightricks/LTX-2", pipeline="LTX2Pipeline",
    holder=LTX2Model, output_type="np",
    tasks=(Task("txt2img", "LTX2Pipeline"), Task("i2v", "LTX2ImageToVideoPipeline"),
           Task("v2v", "LTX2ConditionPipeline")),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="gemma3"),
        Component("text_encoder", "transformers:Gemma3ForConditionalGeneration", TEXT_ENCODER),
        # the text connectors ship inside the denoiser's original checkpoint: the denoiser's, run after the
        # prompt encoding (the conditioning cache keeps what comes before them)
        Component("connectors", f"{_LTX2}:LTX2TextConnectors", TEXT_ENCODER, with_denoiser=True,
                  single_file=CONNECTORS_FILE),
        Component("vae", "AutoencoderKLLTX2Video", VAE),
        Component("audio_vae", "AutoencoderKLLTX2Audio", VAE),
        Component("transformer", "LTX2VideoTransformer3DModel", DENOISER, single_file=TRANSFORMER_FILE),
        # LTX-2.3's is LTX2VocoderWithBWE, no subclass of LTX-2.0's: the repo's model_index.json names it
        Component("vocoder", "ModelMixin", AUDIO),
    ),
    # the diffusers docs' LTX-2.0/2.3 examples: 768x512, 121 frames at 24 fps, 30 steps, guidance 3.0
    defaults=SampleDefaults(768, 512, 30, 3.0, num_frames=121, fps=24, output_ext="mp4"),
    variants={
        "2.0": Variant(),
        "2.0-distilled": Variant(_DISTILLED, name_or_path="rootonchair/LTX-2-19b-distilled",
                                 scheduler=DISTILLED_SCHEDULER),
        "2.3": Variant(name_or_path="diffusers/LTX-2.3-Diffusers"),
        "2.3-distilled": Variant(_DISTILLED, name_or_path="diffusers/LTX-2.3-Distilled-Diffusers",
                                 scheduler=DISTILLED_SCHEDULER),
    },
    size_divisor=32,
    latents=Latents("packed_video", 128, spatial=32, temporal=8, format=latent_formats.LTXAV),
    decode_features=16,          # its VAE decoder's last stage: 256 features at a quarter of the size (patch 4)
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 3.0,
                      "fps": 8}),
    description="LTX-2 text/image/video-to-video with its audio (Gemma 3, 128-ch video VAE, audio VAE + vocoder)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    batch_arg="num_videos_per_prompt",
    gguf=GGUF,
)
