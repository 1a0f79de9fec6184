"""NVIDIA Cosmos Predict2 Text2Image (2B, 14B): the Cosmos DiT over T5-11B (the original T5's encoder,
1024 wide, 512 tokens, zeroed past each prompt's end) and the Wan 2.1 VAE, an image made as a one-frame
video: the scheduler steps (batch, channel, 1, row, column), `BC1HW`. EDM-style preconditioning on a
flow-matching Euler schedule with Karras sigmas (sigma_max 80, which the pipeline sets on its
scheduler), CFG with the pipeline's own negative prompt when none is given.

The guardrail is cosmos2_5's: a folder without a safety checker gets NVIDIA's (the pipeline builds
`cosmos_guardrail.CosmosSafetyChecker`), never turned off; the tiny instance carries a stand-in.

The pipeline's defaults (the model card's example): 1360x768, 35 steps, CFG 7."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SAFETY_CHECKER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec,
                                 Component, Latents, SampleDefaults, Tiny, Variant)
from toolkit.models.archs.cosmos2_5 import (_COSMOS, TINY_TRANSFORMER, tiny_transformer, transformer_facts,
                                            transformer_file, transformer_signature)
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.base_model import BaseModel
from toolkit.models.formats import vaes
from toolkit.models.tiny import kit

# diffusers' conversion script's configs (Cosmos-2.0-Diffusion-2B/14B-Text2Image); the tiny's
_PREDICT2 = dict(_COSMOS, in_channels=16, rope_scale=[1.0, 4.0, 4.0])
TRANSFORMER_KNOWN = {"cosmos-predict2-2b-t2i": dict(_PREDICT2, num_attention_heads=16, num_layers=28),
                     "cosmos-predict2-14b-t2i": dict(_PREDICT2, num_attention_heads=40, num_layers=36),
                     "tiny": dict(TINY_TRANSFORMER, in_channels=16, rope_scale=[1.0, 4.0, 4.0],
                                  use_crossattn_projection=False)}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the Cosmos Predict2 Text2Image transformer", variants={"cosmos-predict2-14b-t2i": "14b"})


# the scheduler diffusers' conversion script saves for Cosmos Predict2, with the sigma bounds the pipeline
# registers on it (so its repo's scheduler_config.json has them)
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", use_karras_sigmas=True, sigma_max=80.0,
                      sigma_min=0.002, sigma_data=1.0, final_sigmas_type="sigma_min")


class Cosmos2Model(BaseModel):
    def extract_output(self, out):
        return out.images[0]


def _tiny(b):
    from toolkit.models.tiny.cosmos_guardrail import TinyCosmosGuardrail

    tokenizer = kit.t5_tokenizer(512)
    with b.seeded("text_encoder", "t5_11b"):        # the original T5's feed-forward (ReLU, not gated)
        text_encoder = kit.t5_encoder(tokenizer, feed_forward_proj="relu")
    with b.seeded("vae", "wan_vae"):                 # the Wan 2.1 VAE, as wan21 builds it
        vae = kit.wan_vae(16)
    transformer = tiny_transformer(b, **TRANSFORMER_KNOWN["tiny"])
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                scheduler=kit.flow_match_scheduler(use_karras_sigmas=True), safety_checker=TinyCosmosGuardrail())


_REPO = "nvidia/Cosmos-Predict2-{}-Text2Image"

SPEC = ArchSpec(
    name="cosmos2", modality="image", default_name_or_path=_REPO.format("2B"),
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    pipeline="Cosmos2TextToImagePipeline", holder=Cosmos2Model,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="t5_xxl"),
        Component("text_encoder", "T5EncoderModel", TEXT_ENCODER),
        Component("vae", "AutoencoderKLWan", VAE, single_file=vaes.WAN21_VAE),
        Component("transformer", "CosmosTransformer3DModel", DENOISER, single_file=transformer_file(
            "toolkit.models.archs.cosmos2:transformer_config", "Cosmos Predict2 Text2Image transformer")),
        Component("safety_checker", "ModelMixin", SAFETY_CHECKER, optional=True),
    ),
    defaults=SampleDefaults(1360, 768, 35, 7.0),
    variants={"2b": Variant(), "14b": Variant(name_or_path=_REPO.format("14B"))},
    size_divisor=16,
    max_side=1920,                    # its RoPE tables reach 240 latent pixels per axis (max_size)
    latents=Latents("BC1HW", 16, format=latent_formats.WAN21),
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 7.0}),
    description="NVIDIA Cosmos Predict2 text-to-image (T5-11B, Wan 2.1 VAE, NVIDIA's guardrail)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # the pipeline passes its own sigmas from 0 to 1: Heun and DPM++ take none, UniPC cannot log a zero sigma
    samplers_excluded=("heun", "dpm++_2m", "unipc"),
)
