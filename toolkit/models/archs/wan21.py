"""Wan 2.1 text-to-video: a 3D DiT over UMT5-XXL and the causal Wan VAE (16 channels, 8x spatial,
4x temporal), UniPC with flow sigmas as the diffusers repos ship it."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, Tiny)
from toolkit.models.tiny import kit

COMPONENTS = (
    Component("scheduler", "SchedulerMixin", SCHEDULER),
    Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
    Component("text_encoder", "UMT5EncoderModel", TEXT_ENCODER),
    Component("vae", "AutoencoderKLWan", VAE),
    Component("transformer", "WanTransformer3DModel", DENOISER),
)


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


def unipc_flow_scheduler(flow_shift: float = 3.0):
    """What the Wan diffusers repos ship: UniPC with flow sigmas (480p shift 3.0)."""
    from diffusers import UniPCMultistepScheduler
    return UniPCMultistepScheduler(num_train_timesteps=1000, prediction_type="flow_prediction", use_flow_sigmas=True,
                                   flow_shift=flow_shift, solver_order=2, solver_type="bh2", predict_x0=True,
                                   lower_order_final=True, final_sigmas_type="zero", timestep_spacing="linspace")


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
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.WAN21),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 5.0,
                      "fps": 8}),
    description="Wan 2.1 text-to-video",
    scheduler_config={"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
    batch_arg="num_videos_per_prompt",
)
