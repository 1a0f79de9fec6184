"""Stable Audio Open 1.0 text-to-audio: a 1D DiT over T5-base, a projection model for the text and
the start/end seconds, the Oobleck VAE at 44.1 kHz (2048x: 1024 latents of 64 channels = 47.55 s
at most; the latent length is fixed and the waveform is cut to the requested duration), the
cosine DPM-Solver (SDE: needs torchsde).

Its files: the original stable-audio-tools checkpoint (ComfyUI's `checkpoints/stable-audio-open-1.0.safetensors`:
the DiT under `model.model.`, the seconds conditioners under `conditioner.conditioners.`, the VAE under
`pretransform.model.`), read with the configs below. No library converts this layout: the converter
and its inverse are here (the names are stable-audio-tools' own, as diffusers' conversion script maps them)."""
import re

from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, SingleFile, Tiny)
from toolkit.models.base_model import BaseModel
from toolkit.models.formats import t5, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

# stabilityai/stable-audio-open-1.0 scheduler/scheduler_config.json (the diffusers conversion of Stable Audio Open)
SCHEDULER_FILE = dict(_class_name="CosineDPMSolverMultistepScheduler", sigma_min=0.3, sigma_max=500, solver_order=2,
                      prediction_type="v_prediction", sigma_data=1.0, sigma_schedule="exponential")
# stabilityai/stable-audio-open-1.0 transformer/ and projection_model/config.json; and the tiny factory's
TRANSFORMER_KNOWN = {
    "stable-audio-open-1.0": dict(sample_size=1024, in_channels=64, num_layers=24, attention_head_dim=64,
                                  num_attention_heads=24, num_key_value_attention_heads=12, out_channels=64,
                                  cross_attention_dim=768, time_proj_dim=256, global_states_input_dim=1536,
                                  cross_attention_input_dim=768),
    "tiny": dict(sample_size=32, in_channels=64, num_layers=2, attention_head_dim=16, num_attention_heads=2,
                 num_key_value_attention_heads=1, out_channels=64, cross_attention_dim=32, time_proj_dim=32,
                 global_states_input_dim=64, cross_attention_input_dim=32),
}
PROJECTION_KNOWN = {"stable-audio-open-1.0": dict(text_encoder_dim=768, conditioning_dim=768, min_value=0, max_value=512),
                    "tiny": dict(text_encoder_dim=32, conditioning_dim=32, min_value=0, max_value=512)}


def transformer_signature(view) -> dict:
    if not view.has("transformer.project_in.weight") or not view.has("to_cond_embed.0.weight"):
        raise FileKindError("no transformer.project_in / to_cond_embed: not a Stable Audio DiT")
    return {"width": view.dim("transformer.project_in.weight"),
            "in_channels": view.dim("transformer.project_in.weight", 1),
            "out_channels": view.dim("transformer.project_out.weight"),
            "cross_attention_dim": view.dim("to_cond_embed.0.weight"),
            "cross_attention_input_dim": view.dim("to_cond_embed.0.weight", 1),
            "global_states_input_dim": view.dim("to_global_embed.0.weight", 1),
            "time_proj_dim": view.dim("to_timestep_embed.0.weight", 1),
            "kv": view.dim("transformer.layers.0.cross_attn.to_kv.weight") // 2,
            "num_layers": view.count(r"transformer\.layers\.(\d+)\.")}


def transformer_facts(c: dict) -> dict:
    return {"width": c["num_attention_heads"] * c["attention_head_dim"], "in_channels": c["in_channels"],
            "out_channels": c["out_channels"], "cross_attention_dim": c["cross_attention_dim"],
            "cross_attention_input_dim": c["cross_attention_input_dim"],
            "global_states_input_dim": c["global_states_input_dim"], "time_proj_dim": c["time_proj_dim"],
            "kv": c["num_key_value_attention_heads"] * c["attention_head_dim"], "num_layers": c["num_layers"]}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the Stable Audio DiT")


def projection_config(view):
    if not view.has("seconds_start.embedder.embedding.1.weight"):
        raise FileKindError("no seconds_start.embedder.embedding.1.weight: not Stable Audio's seconds conditioners")
    sig = {"conditioning_dim": view.dim("seconds_start.embedder.embedding.1.weight")}
    return from_known(sig, PROJECTION_KNOWN, lambda c: {"conditioning_dim": c["conditioning_dim"]},
                      "Stable Audio's seconds conditioners")


# stable-audio-tools -> diffusers, in order (str.replace on the key with `transformer.` cut)
_TO_DIFFUSERS = (("layers.", "transformer_blocks."), ("self_attn", "attn1"), ("cross_attn", "attn2"),
                 ("ff.ff.", "ff.net."), ("pre_norm", "norm1"), ("cross_attend_norm", "norm2"), ("ff_norm", "norm3"),
                 ("to_out", "to_out.0"), (".gamma", ".weight"), (".beta", ".bias"), ("project_in", "proj_in"),
                 ("project_out", "proj_out"), ("to_timestep_embed", "timestep_proj"), ("to_global_embed", "global_proj"),
                 ("to_cond_embed", "cross_attention_proj"), ("timestep_features", "time_proj"))


def convert_original(checkpoint: dict, **_) -> dict:
    """A stable-audio-tools DiT (keys under `model.model.` cut) in StableAudioDiTModel's names: fused
    self-attention qkv and cross-attention kv split, the Fourier features flattened, the rotary
    table (which diffusers computes) dropped."""
    import torch
    out = {}
    for key, t in checkpoint.items():
        key = key.removeprefix("model.diffusion_model.").removeprefix("model.model.")
        if key.endswith("rotary_pos_emb.inv_freq"):
            continue
        new = key.removeprefix("transformer.")
        for a, b in _TO_DIFFUSERS:
            new = new.replace(a, b)
        if ".to_qkv." in new:
            out.update(zip((new.replace("qkv", n) for n in "qkv"), torch.chunk(t, 3, 0)))
        elif ".to_kv." in new:
            out.update(zip((new.replace("kv", n) for n in "kv"), torch.chunk(t, 2, 0)))
        else:
            out[new] = t.reshape(-1) if new == "time_proj.weight" else t
    return out


_TO_ORIGINAL = (("transformer_blocks.", "layers."), ("attn1", "self_attn"), ("attn2", "cross_attn"),
                ("ff.net.", "ff.ff."),
                ("norm1.weight", "pre_norm.gamma"), ("norm1.bias", "pre_norm.beta"),
                ("norm2.weight", "cross_attend_norm.gamma"), ("norm2.bias", "cross_attend_norm.beta"),
                ("norm3.weight", "ff_norm.gamma"), ("norm3.bias", "ff_norm.beta"), ("to_out.0", "to_out"))
_TOP = {"proj_in": "transformer.project_in", "proj_out": "transformer.project_out", "timestep_proj": "to_timestep_embed",
        "global_proj": "to_global_embed", "cross_attention_proj": "to_cond_embed"}


def to_original(state: dict) -> dict:
    """A diffusers StableAudioDiTModel state dict in the stable-audio-tools layout (its rotary table
    included: the key ComfyUI detects the model by)."""
    import torch
    out = {}
    for key, t in state.items():
        if m := re.match(r"transformer_blocks\.(\d+)\.(attn[12])\.to_([qkv])\.weight$", key):
            i, attn, part = m.groups()
            fused = "to_qkv" if attn == "attn1" else "to_kv"
            if (attn, part) in (("attn1", "q"), ("attn2", "k")):
                names = "qkv" if attn == "attn1" else "kv"
                out[f"transformer.layers.{i}.{'self_attn' if attn == 'attn1' else 'cross_attn'}.{fused}.weight"] = \
                    torch.cat([state[f"transformer_blocks.{i}.{attn}.to_{n}.weight"] for n in names], 0)
            if not (attn == "attn2" and part == "q"):
                continue
        new = key
        for a, b in _TO_ORIGINAL:
            new = new.replace(a, b)
        head, _, rest = new.partition(".")
        if head in _TOP:
            new = f"{_TOP[head]}.{rest}"
        elif head == "layers":
            new = "transformer." + new
        elif new == "time_proj.weight":
            new, t = "timestep_features.weight", t.reshape(-1, 1)
        out[new] = t
    out["transformer.rotary_pos_emb.inv_freq"] = 1.0 / (10000 ** (torch.arange(0, 32, 2).float() / 32))
    return out


def convert_projection(checkpoint: dict, **_) -> dict:
    """stable-audio-tools' seconds conditioners in StableAudioProjectionModel's names (the prompt's T5 is a
    component of its own)."""
    out = {}
    for key, t in checkpoint.items():
        if key.startswith("prompt."):
            continue
        new = key.replace("embedder.embedding", "time_positional_embedding")
        new = new.replace("seconds_start", "start_number_conditioner")
        out[new.replace("seconds_total", "end_number_conditioner")] = t
    return out


def projection_to_original(state: dict) -> dict:
    out = {}
    for key, t in state.items():
        new = key.replace("time_positional_embedding", "embedder.embedding")
        new = new.replace("start_number_conditioner", "seconds_start")
        out[new.replace("end_number_conditioner", "seconds_total")] = t
    return out


TRANSFORMER_FILE = SingleFile(
    "toolkit.models.archs.stable_audio:convert_original", "toolkit.models.archs.stable_audio:to_original",
    anchors=("transformer.rotary_pos_emb.inv_freq", "transformer.layers.0.self_attn.to_qkv.weight"),
    prefixes=("model.model.", "model.diffusion_model.", ""),
    config="toolkit.models.archs.stable_audio:transformer_config",
    kind="stable_audio_dit", label="Stable Audio DiT")
PROJECTION_FILE = SingleFile(
    "toolkit.models.archs.stable_audio:convert_projection", "toolkit.models.archs.stable_audio:projection_to_original",
    anchors=("seconds_start.embedder.embedding.1.weight", "seconds_total.embedder.embedding.1.weight"),
    prefixes=("conditioner.conditioners.", ""), config="toolkit.models.archs.stable_audio:projection_config",
    kind="stable_audio_seconds", label="Stable Audio seconds conditioners")


class StableAudioModel(BaseModel):
    def pipeline_kwargs(self, gen):
        # an empty negative prompt is none: the pipeline then uses a zero unconditional embedding
        return {"prompt": gen.prompt, "negative_prompt": gen.negative_prompt or None,
                "audio_start_in_s": 0.0, "audio_end_in_s": gen.duration,
                "num_inference_steps": gen.num_inference_steps, "guidance_scale": gen.guidance_scale}

    def media_kwargs(self, gen, data):
        return {"sample_rate": self.pipeline.vae.config.sampling_rate}


def _tiny(b):
    from diffusers import (AutoencoderOobleck, CosineDPMSolverMultistepScheduler, StableAudioDiTModel,
                           StableAudioProjectionModel)

    acoustic, cond = 64, 32          # Oobleck latent channels; tiny conditioning width
    tokenizer = kit.t5_tokenizer(128)                 # the T5 conditioner's max_length
    with b.seeded("text_encoder"):
        text_encoder = kit.t5_encoder(tokenizer)
    with b.seeded("projection_model"):
        projection_model = StableAudioProjectionModel(text_encoder_dim=text_encoder.config.d_model,
                                                      conditioning_dim=cond, min_value=0, max_value=512).eval()
    with b.seeded("vae"):
        # 44.1 kHz stereo, 2*4*4*8*8 = 2048x as the real one; narrow channels
        vae = AutoencoderOobleck(encoder_hidden_size=4, downsampling_ratios=[2, 4, 4, 8, 8],
                                 channel_multiples=[1, 2, 4, 8, 16], decoder_channels=4,
                                 decoder_input_channels=acoustic, audio_channels=2, sampling_rate=44100).eval()
    with b.seeded("transformer"):
        # sample_size 32 latents * 2048 / 44100 = 1.49 s at most; the global states are the start and
        # end seconds' embeddings side by side (2x the conditioning width)
        transformer = StableAudioDiTModel(sample_size=32, in_channels=acoustic, num_layers=2, attention_head_dim=16,
                                          num_attention_heads=2, num_key_value_attention_heads=1,
                                          out_channels=acoustic, cross_attention_dim=32, time_proj_dim=32,
                                          global_states_input_dim=2 * cond, cross_attention_input_dim=cond).eval()
    # the diffusers conversion of Stable Audio Open
    scheduler = CosineDPMSolverMultistepScheduler(sigma_min=0.3, sigma_max=500, solver_order=2,
                                                  prediction_type="v_prediction", sigma_data=1.0,
                                                  sigma_schedule="exponential")
    return dict(vae=vae, text_encoder=text_encoder, projection_model=projection_model, tokenizer=tokenizer,
                transformer=transformer, scheduler=scheduler)


SPEC = ArchSpec(
    name="stable_audio", modality="audio", default_name_or_path="stabilityai/stable-audio-open-1.0",
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    pipeline="StableAudioPipeline", holder=StableAudioModel, output_type="pt",   # (B, C, T) waveform in [-1, 1]
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        # t5-base's vocabulary is T5 v1.1's (the same 32k SentencePiece model)
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="t5_xxl"),
        Component("text_encoder", "T5EncoderModel", TEXT_ENCODER, single_file=t5.T5_BASE),
        # trained with the DiT (the checkpoint's conditioners): never shared by another model
        Component("projection_model", "StableAudioProjectionModel", TEXT_ENCODER, with_denoiser=True,
                  single_file=PROJECTION_FILE),
        Component("vae", "AutoencoderOobleck", VAE, single_file=vaes.OOBLECK_VAE),
        Component("transformer", "StableAudioDiTModel", DENOISER, single_file=TRANSFORMER_FILE),
    ),
    # the model card: 200 steps, CFG 7.0, 10 s
    defaults=SampleDefaults(0, 0, 200, 7.0, duration=10.0, output_ext="wav"), size_divisor=1,
    latents=Latents("BCT", 64),                          # length fixed by the DiT's sample_size
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"duration": 1.0, "num_inference_steps": 2, "guidance_scale": 7.0}),
    description="Stable Audio Open 1.0 text-to-audio (T5, 64-ch Oobleck VAE at 44.1 kHz)",
    scheduler_config={"_class_name": "CosineDPMSolverMultistepScheduler", "prediction_type": "v_prediction"},
    batch_arg="num_waveforms_per_prompt",
)
