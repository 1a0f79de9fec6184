"""SANA-Video 2B 480p (NVIDIA, MIT HAN Lab): Sana's linear-attention DiT made 3D (Wan's RoPE, a temporal
mix-FFN), over Sana's Gemma2 2B text encoder (behind the pipeline's complex human instruction) and the Wan
2.1 VAE (16 channels, 8x spatial, 4x temporal), flow DPM-Solver.

Tasks: text-to-video, and image-to-video (SanaImageToVideoPipeline over the same components: `init_img`
is the first latent frame, held clean). The model card runs 832x480 with 81 frames at 16 fps, 50 steps,
guidance 6, its negative prompt (the default here), and every prompt followed by " motion score: 30.",
the motion the model was trained to read: `motion_score` appends it (unset: the prompt as given). The
pipeline calls the frame count `frames` and snaps width/height to its aspect-ratio bins, resizing the
video back (`resolution_binning`, on by default; off for the tiny model, far below any bin)."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Extra,
                                 Latents, SampleDefaults, Task, Tiny)
from toolkit.models.archs.lumina2 import tiny_gemma
from toolkit.models.archs.wan21 import WAN_DECODE_FEATURES
from toolkit.models.base_model import BaseModel
from toolkit.models.tiny import kit

# the model card's negative prompt
NEGATIVE_PROMPT = ("A chaotic sequence with misshapen, deformed limbs in heavy motion blur, sudden disappearance, jump "
                   "cuts, jerky movements, rapid shot changes, frames out of sync, inconsistent character shapes, "
                   "temporal artifacts, jitter, and ghosting effects, creating a disorienting visual experience.")
# flow DPM-Solver++ at the shift 8 of SANA-Video's inference configs
SCHEDULER_FILE = dict(_class_name="DPMSolverMultistepScheduler", num_train_timesteps=1000, solver_order=2,
                      prediction_type="flow_prediction", algorithm_type="dpmsolver++", solver_type="midpoint",
                      lower_order_final=True, use_flow_sigmas=True, flow_shift=8.0, final_sigmas_type="zero")


class SanaVideoModel(BaseModel):
    def pipeline_kwargs(self, gen):
        kw = super().pipeline_kwargs(gen)
        kw["frames"] = kw.pop("num_frames")
        kw["use_resolution_binning"] = gen.extras["resolution_binning"]
        score = gen.extras.get("motion_score")
        if score is not None:
            kw["prompt"] = f"{kw['prompt']} motion score: {score}."
        return kw


def _tiny(b):
    from diffusers import DPMSolverMultistepScheduler, SanaVideoTransformer3DModel

    tokenizer, text_encoder = tiny_gemma(b)           # Sana's very Gemma2 (a shared pair)
    with b.seeded("vae", "wan_vae"):                  # wan21's very VAE (a shared pair)
        vae = kit.wan_vae(16)
    with b.seeded("transformer"):
        transformer = SanaVideoTransformer3DModel(
            in_channels=16, out_channels=16, num_attention_heads=2, attention_head_dim=16, num_layers=2,
            num_cross_attention_heads=2, cross_attention_head_dim=16, cross_attention_dim=32,
            caption_channels=text_encoder.config.hidden_size, mlp_ratio=2.5, attention_bias=False, sample_size=30,
            patch_size=(1, 2, 2), norm_elementwise_affine=False, norm_eps=1e-6, qk_norm="rms_norm_across_heads",
            rope_max_seq_len=1024).eval()
    config = {k: v for k, v in SCHEDULER_FILE.items() if k != "_class_name"}
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                scheduler=DPMSolverMultistepScheduler(**config))


SPEC = ArchSpec(
    name="sana_video", modality="video", default_name_or_path="Efficient-Large-Model/SANA-Video_2B_480p_diffusers",
    pipeline="SanaVideoPipeline", holder=SanaVideoModel,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="gemma2"),
        Component("text_encoder", "Gemma2Model", TEXT_ENCODER),
        Component("vae", "AutoencoderKLWan", VAE),
        Component("transformer", "SanaVideoTransformer3DModel", DENOISER),
    ),
    tasks=(Task("txt2img", "SanaVideoPipeline"), Task("i2v", "SanaImageToVideoPipeline")),
    output_type="np",
    # the model card: 832x480, 81 frames at 16 fps, 50 steps, guidance 6.0
    defaults=SampleDefaults(832, 480, 50, 6.0, num_frames=81, fps=16, output_ext="mp4"),
    negative_prompt_default=NEGATIVE_PROMPT,
    size_divisor=32,                                   # the pipeline refuses other sizes
    # unset: the prompt as given; the model card appends " motion score: 30." to every prompt
    sample_extras={"resolution_binning": Extra("bool", True), "motion_score": Extra("int")},
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.WAN21), decode_features=WAN_DECODE_FEATURES,
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 6.0,
                      "fps": 8, "resolution_binning": False}),
    description="SANA-Video 2B 480p text- and image-to-video (linear-attention DiT, Gemma2, Wan 2.1 VAE)",
    scheduler_config={"_class_name": "DPMSolverMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
    batch_arg="num_videos_per_prompt",
)
