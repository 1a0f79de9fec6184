"""HiDream-I1 (Full / Dev / Fast): a sparse mixture-of-experts DiT (16 dual-stream, 32 single-stream
blocks) over four text encoders: Long-CLIP L and G with projections (pooled, side by side), T5-XXL
and Llama 3.1 8B Instruct (every layer's hidden states, each block reading one), the 16-channel Flux
VAE (BCHW latents; the transformer makes 2x2 patches itself).

The pipeline renders about one megapixel whatever size is asked: it rescales width x height to an
area of 1024^2 at the request's aspect (16 px multiples), so 1024x1024, 768x1360, 1360x768 ... come
out as asked. Full runs CFG against a negative prompt (UniPC on flow sigmas, shift 3); Dev and Fast are
guidance-distilled (guidance 0) and ship FlowMatchLCMScheduler (shift 6 and 3). Its repos ship no Llama:
text_encoder_4 and tokenizer_4 are read from meta-llama's repo unless the model's folder has them (or
model.components names them).

Its files: ComfyUI's `diffusion_models/hidream_i1_{full,dev,fast}` keep diffusers' names (under ComfyUI's
prefix), read with the configs below; Dev and Fast have Full's shapes (`model.variant` says which). T5-XXL and
the VAE are FLUX.1's files (`t5xxl`, `ae`).
"""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, SingleFile, Tiny, Variant)
from toolkit.models.archs.flux import tiny_flux_encoders
from toolkit.models.base_model import BaseModel
from toolkit.models.formats import t5, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit
from toolkit.models.tiny.tokenizers import llama3_tokenizer

# HiDream-ai/HiDream-I1-Full scheduler/scheduler_config.json (the repo's since its scheduler update: UniPC on
# flow sigmas, as the model card's FlowUniPCMultistepScheduler, shift 3)
SCHEDULER_FILE = dict(_class_name="UniPCMultistepScheduler", num_train_timesteps=1000,
                      prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=3.0)
# HiDream-I1-Dev / -Fast: FlowMatchLCMScheduler, the model cards' flash flow-match Euler (shift 6 / 3)
_LCM = dict(_class_name="FlowMatchLCMScheduler", num_train_timesteps=1000, use_dynamic_shifting=False)

# the model cards: Full 50 steps at CFG 5; Dev 28 and Fast 16 steps, no guidance
VARIANTS = {
    "full": Variant({"num_inference_steps": 50, "guidance_scale": 5.0}, name_or_path="HiDream-ai/HiDream-I1-Full"),
    "dev": Variant({"num_inference_steps": 28, "guidance_scale": 0.0}, name_or_path="HiDream-ai/HiDream-I1-Dev",
                   scheduler=dict(_LCM, shift=6.0)),
    "fast": Variant({"num_inference_steps": 16, "guidance_scale": 0.0}, name_or_path="HiDream-ai/HiDream-I1-Fast",
                    scheduler=dict(_LCM, shift=3.0)),
}

# the Llama 3.1 the model cards load beside the HiDream repos (which ship no text_encoder_4 / tokenizer_4)
LLAMA_REPO = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_LAYERS = 32         # Llama 3.1 8B: the pipeline stacks every layer's hidden states
# HiDream-ai/HiDream-I1-Full transformer/config.json (Dev and Fast: the same); and the tiny factory's
TRANSFORMER_KNOWN = {
    "hidream-i1": dict(patch_size=2, in_channels=16, out_channels=16, num_layers=16, num_single_layers=32,
                       attention_head_dim=128, num_attention_heads=20, caption_channels=[4096, 4096],
                       text_emb_dim=2048, num_routed_experts=4, num_activated_experts=2, axes_dims_rope=[64, 32, 32],
                       max_resolution=[128, 128],
                       llama_layers=list(range(LLAMA_LAYERS)) + [LLAMA_LAYERS - 1] * 16),
    "tiny": dict(patch_size=2, in_channels=16, out_channels=16, num_layers=1, num_single_layers=2,
                 attention_head_dim=8, num_attention_heads=2, caption_channels=[32, 16], text_emb_dim=32,
                 num_routed_experts=4, num_activated_experts=2, axes_dims_rope=[4, 2, 2], max_resolution=[128, 128],
                 llama_layers=[0, 1, 1]),
}


def transformer_signature(view) -> dict:
    """What a HiDream file's shapes tell (heads, rope axes, the Llama taps and active experts they do not)."""
    if not view.has("caption_projection.0.linear.weight") or not view.has("x_embedder.proj.weight"):
        raise FileKindError("no caption_projection.0 / x_embedder.proj: not a HiDream-I1 transformer")
    layers, singles = view.count(r"double_stream_blocks\.(\d+)\."), view.count(r"single_stream_blocks\.(\d+)\.")
    return {"width": view.dim("x_embedder.proj.weight"), "patch_in": view.dim("x_embedder.proj.weight", 1),
            "out": view.dim("final_layer.linear.weight"), "num_layers": layers, "num_single_layers": singles,
            # a projection per block for its Llama layer, then T5's
            "caption_channels": [view.dim(f"caption_projection.{layers + singles}.linear.weight", 1),
                                 view.dim("caption_projection.0.linear.weight", 1)],
            "text_emb_dim": view.dim("p_embedder.pooled_embedder.linear_1.weight", 1),
            "num_routed_experts": view.count(r"double_stream_blocks\.0\.block\.ff_i\.experts\.(\d+)\.")}


def transformer_facts(c: dict) -> dict:
    return {"width": c["num_attention_heads"] * c["attention_head_dim"],
            "patch_in": c["in_channels"] * c["patch_size"] ** 2,
            "out": (c.get("out_channels") or c["in_channels"]) * c["patch_size"] ** 2,
            "num_layers": c["num_layers"], "num_single_layers": c["num_single_layers"],
            "caption_channels": list(c["caption_channels"]), "text_emb_dim": c["text_emb_dim"],
            "num_routed_experts": c["num_routed_experts"]}


def transformer_config(view):
    same = "Dev and Fast have Full's shapes: model.variant dev / fast says which"
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the HiDream-I1 transformer",
                      variants={"hidream-i1": "full"}, notes={"hidream-i1": (same,)})


def to_original(state: dict) -> dict:
    """ComfyUI's HiDream files keep diffusers' names (diffusers' converter only strips their prefix)."""
    return dict(state)


TRANSFORMER_FILE = SingleFile(
    "convert_hidream_transformer_to_diffusers", "toolkit.models.archs.hidream:to_original",
    anchors=("double_stream_blocks.0.block.adaLN_modulation.1.bias", "caption_projection.0.linear.weight"),
    config="toolkit.models.archs.hidream:transformer_config", kind="hidream_dit", label="HiDream-I1 transformer")


# the per-step noise streams of a stochastic scheduler (Dev's and Fast's LCM): seeded apart from the latents' own
STEP_NOISE_SEED = 0x5EED_0000_0000


class HiDreamModel(BaseModel):
    """Dev and Fast ship FlowMatchLCMScheduler, whose `step` draws fresh noise from the generator it is given;
    the pipeline gives none (torch's global RNG: a seed would not reproduce the image). Each call gives one
    per image instead, seeded from the image's seed (a batch's seed + i, a batched row's own)."""

    def generate_single(self, gen, *, rows=None, **kwargs):
        self._row_seeds = None if rows is None else [seed for _p, _n, seed in rows]
        try:
            return super().generate_single(gen, rows=rows, **kwargs)
        finally:
            self._row_seeds = None

    def call_patches(self, gen, pipe) -> list:
        import inspect

        if "generator" not in inspect.signature(pipe.scheduler.step).parameters:
            return []
        seeds = getattr(self, "_row_seeds", None) or [gen.seed + i for i in range(gen.batch_size)]
        return [(pipe.scheduler, "step", lambda step: seeded_step(step, seeds))]


def seeded_step(step, seeds):
    """`step` drawing its noise from one generator per image (`seeds`, in batch order) unless given one."""
    import functools

    import torch

    generators = [torch.Generator("cpu").manual_seed((s + STEP_NOISE_SEED) % 2**63) for s in seeds]

    @functools.wraps(step)
    def with_generators(*args, **kwargs):
        if kwargs.get("generator") is None:
            kwargs["generator"] = generators if len(generators) > 1 else generators[0]
        return step(*args, **kwargs)
    return with_generators


def _tiny(b):
    from diffusers import HiDreamImageTransformer2DModel, UniPCMultistepScheduler
    from transformers import LlamaConfig, LlamaForCausalLM

    flux = tiny_flux_encoders(b)          # T5-XXL and the VAE are Flux's (its recipe: the same files)
    # Long-CLIP L and G: 248 positions (the pipeline pads their prompts to 128 tokens); two widths, so each
    # file is of one kind, summing to the pooled width
    tokenizer, tokenizer_2 = kit.clip_tokenizer(), kit.clip_tokenizer()
    with b.seeded("text_encoder"):
        text_encoder = kit.clip_text_encoder(tokenizer, hidden=8, projection=True, max_position_embeddings=248)
    with b.seeded("text_encoder_2"):
        text_encoder_2 = kit.clip_text_encoder(tokenizer_2, hidden=24, projection=True, max_position_embeddings=248)
    # Llama 3.1 Instruct ends a turn with <|eot_id|>; the pipeline pads with the eos token
    tokenizer_4 = llama3_tokenizer(eos_token="<|eot_id|>", pad_token="<|eot_id|>")
    with b.seeded("text_encoder_4"):
        text_encoder_4 = LlamaForCausalLM(LlamaConfig(
            vocab_size=len(tokenizer_4), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, tie_word_embeddings=False,
            bos_token_id=tokenizer_4.bos_token_id, eos_token_id=tokenizer_4.eos_token_id,
            pad_token_id=tokenizer_4.pad_token_id)).eval()
    with b.seeded("transformer"):
        # the tiny's caption widths: T5's and Llama's; pooled: the two CLIP projections; a block per Llama tap
        transformer = HiDreamImageTransformer2DModel(**TRANSFORMER_KNOWN["tiny"]).eval()
        kit.jitter_constants(transformer)        # zero-initialised modulation and output layers
    scheduler = UniPCMultistepScheduler(**{k: v for k, v in SCHEDULER_FILE.items() if k != "_class_name"})
    return dict(scheduler=scheduler, vae=flux["vae"], text_encoder=text_encoder, tokenizer=tokenizer,
                text_encoder_2=text_encoder_2, tokenizer_2=tokenizer_2, text_encoder_3=flux["text_encoder_2"],
                tokenizer_3=flux["tokenizer_2"], text_encoder_4=text_encoder_4, tokenizer_4=tokenizer_4,
                transformer=transformer)


SPEC = ArchSpec(
    name="hidream", modality="image", default_name_or_path=VARIANTS["full"].name_or_path,
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    pipeline="HiDreamImagePipeline", holder=HiDreamModel,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="clip_l"),
        Component("tokenizer_2", "PreTrainedTokenizerBase", TOKENIZER, vocab="clip_g"),
        Component("tokenizer_3", "PreTrainedTokenizerBase", TOKENIZER, vocab="t5_xxl"),
        Component("tokenizer_4", "PreTrainedTokenizerBase", TOKENIZER, vocab="llama3_1", repo=LLAMA_REPO),
        Component("text_encoder", "CLIPTextModelWithProjection", TEXT_ENCODER),
        Component("text_encoder_2", "CLIPTextModelWithProjection", TEXT_ENCODER),
        Component("text_encoder_3", "T5EncoderModel", TEXT_ENCODER, single_file=t5.T5_XXL),
        Component("text_encoder_4", "transformers:LlamaForCausalLM", TEXT_ENCODER, repo=LLAMA_REPO),
        Component("vae", "AutoencoderKL", VAE, single_file=vaes.FLUX_AE),
        Component("transformer", "HiDreamImageTransformer2DModel", DENOISER, single_file=TRANSFORMER_FILE),
    ),
    defaults=SampleDefaults(1024, 1024, 50, 5.0), variants=VARIANTS,
    # the pipeline renders ~1 MP (it rescales any size to 1024^2 area): the tiny runs at its one square size
    latents=Latents("BCHW", 16, format=latent_formats.FLUX),
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 1024, "height": 1024, "num_inference_steps": 2, "guidance_scale": 5.0}),
    description="HiDream-I1 Full / Dev / Fast (sparse MoE DiT; CLIP-L + CLIP-G + T5 + Llama 3.1, Flux VAE; ~1 MP)",
    scheduler_config={"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
    # the pipeline passes `mu` to any scheduler but UniPC: FlowMatchHeun's set_timesteps takes none, DPM-Solver++
    # on flow sigmas only with exponential dynamic shifting
    samplers_excluded=("heun", "dpm++_2m"),
)
