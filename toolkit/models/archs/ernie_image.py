"""ERNIE-Image (Baidu): an 8B single-stream DiT (shared AdaLN, 3D RoPE, text and image tokens in one
sequence) over a Mistral3 text encoder (its second-to-last hidden state) and the Flux.2 VAE (32
channels, 8x): the pipeline steps the latents 2x2-patchified into 128 channels (the `patched` layout)
and un-normalises them with the VAE's batch-norm statistics before decoding. Flow-match Euler over
sigmas 1 -> 0; CFG against an empty negative prompt.

Its prompt enhancer (PE, a 3B Ministral3 LLM with its own tokenizer) rewrites the prompt before it is
encoded: the `use_pe` sample key. The pipeline's default is on; here it is off unless asked, because
the PE samples its rewrite with torch's global RNG and rewrites once per prompt: the holder seeds that
RNG with the request's seed (ArchSpec.global_rng), so a seed still reproduces the image, but a batch's
items would share the first seed's rewrite, so a batch with the PE on is refused. With the worker's
conditioning cache, a repeated prompt with the same seed and size reuses the rewrite too.

Variants: `base` (baidu/ERNIE-Image: 50 steps, CFG 4) and `turbo` (baidu/ERNIE-Image-Turbo, distilled:
8 steps, no CFG).

Its files: the DiT as ComfyUI's `diffusion_models/` files have it (diffusers' own names under
`model.diffusion_model.`: diffusers' converter only strips that), read with the configs below (base and
turbo have one shape: `model.variant` tells them apart), and the Flux.2 VAE file (flux2_klein's kind).
Its Mistral3 text encoder as ComfyUI ships it is not read yet (no file kind for it): with a denoiser
file, give the text encoder and tokenizers from a folder or repo (`model.extras_name_or_path`)."""
from toolkit import latent_formats
from toolkit.errors import ConfigError
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Extra,
                                 Latents, SampleDefaults, SingleFile, Tiny, Variant)
from toolkit.models.base_model import BaseModel
from toolkit.models.formats import vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

# baidu/ERNIE-Image scheduler: flow-match Euler, shift 3 on the pipeline's linear sigmas
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False)
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", **SCHEDULER_CONFIG)

MISTRAL_SPECIAL = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]
TEXT_HIDDEN = 32
PE_MAX_TOKENS = 12
# Ministral 3's YaRN RoPE with Llama 4 attention scaling (baidu/ERNIE-Image pe/config.json's rope_parameters)
MINISTRAL3_ROPE = dict(rope_type="yarn", rope_theta=1000000.0, factor=16.0, original_max_position_embeddings=16384,
                       max_position_embeddings=262144, beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0,
                       llama_4_scaling_beta=0.1)           # the tiny PE's tokenizer model_max_length: the pipeline's max_new_tokens


# baidu/ERNIE-Image transformer/config.json (ERNIE-Image-Turbo's has its shapes); the tiny factory's
_DIT = dict(patch_size=1, in_channels=128, out_channels=128, rope_theta=256, eps=1e-6, qk_layernorm=True)
TRANSFORMER_KNOWN = {
    "ernie-image": dict(_DIT, hidden_size=4096, num_attention_heads=32, num_layers=36, ffn_hidden_size=12288,
                        text_in_dim=3072, rope_axes_dim=[32, 48, 48]),
    "tiny": dict(_DIT, hidden_size=48, num_attention_heads=3, num_layers=2, ffn_hidden_size=96, text_in_dim=TEXT_HIDDEN,
                 rope_axes_dim=[4, 6, 6]),
}


def transformer_signature(view) -> dict:
    """What an ERNIE-Image DiT file's shapes tell (its keys are diffusers' own names)."""
    if not view.has("layers.0.adaLN_sa_ln.weight") or not view.has("final_linear.weight"):
        raise FileKindError("no layers.0.adaLN_sa_ln / final_linear: not an ERNIE-Image DiT")
    return {"hidden_size": view.dim("x_embedder.proj.weight"), "in_channels": view.dim("x_embedder.proj.weight", 1),
            "out": view.dim("final_linear.weight"), "text_in_dim": view.dim("text_proj.weight", 1),
            "ffn_hidden_size": view.dim("layers.0.mlp.gate_proj.weight"),
            "head_dim": view.dim("layers.0.self_attention.norm_q.weight"), "num_layers": view.count(r"layers\.(\d+)\.")}


def transformer_facts(c: dict) -> dict:
    return {"hidden_size": c["hidden_size"], "in_channels": c["in_channels"],
            "out": c["out_channels"] * c["patch_size"] ** 2, "text_in_dim": c["text_in_dim"],
            "ffn_hidden_size": c["ffn_hidden_size"], "head_dim": c["hidden_size"] // c["num_attention_heads"],
            "num_layers": c["num_layers"]}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the ERNIE-Image DiT",
                      notes={"ernie-image": ("ERNIE-Image-Turbo has the same shapes: model.variant turbo reads it "
                                             "as the distilled model",)})


TRANSFORMER_FILE = SingleFile(
    "diffusers.loaders.single_file_utils:convert_ernie_image_transformer_checkpoint_to_diffusers",
    anchors=("layers.0.adaLN_sa_ln.weight", "final_linear.weight", "x_embedder.proj.weight"),
    config="toolkit.models.archs.ernie_image:transformer_config", kind="ernie_image_dit",
    label="ERNIE-Image transformer")


class ErnieImageModel(BaseModel):
    """`use_pe` passed (off unless asked); the PE's rewrite through the conditioning cache."""

    def pipeline_kwargs(self, gen):
        use_pe = bool(gen.extras.get("use_pe"))
        if use_pe and gen.batch_size > 1:
            raise ConfigError("sample.batch_size", "ERNIE-Image's prompt enhancer rewrites once per prompt, so "
                              "a batch's items would share one rewrite: use batch_size 1 with use_pe")
        return {**super().pipeline_kwargs(gen), "use_pe": use_pe}

    def call_patches(self, gen, pipe) -> list:
        """The PE's rewrite from the conditioning cache: keyed on its arguments, the PE's identity and the
        seed (it samples with the global RNG that seed starts)."""
        from toolkit.models.v2.cond_cache import cached_call

        cache = self.cond_cache
        if cache is None or not cache.enabled or getattr(pipe, "pe", None) is None:
            return []
        context = self.cond_context(pipe)
        if context is None:
            return []
        return [(pipe, "_enhance_prompt_with_pe", lambda method: cached_call(cache, method, (context, gen.seed)))]


# -- the tiny instance ------------------------------------------------------------------------------
def tiny_tokenizer(model_max_length: int = 65536):
    """A Mistral-style PreTrainedTokenizerFast: byte-level BPE (800 tokens, learned in code), <s>
    prepended, a small [INST] chat template (the PE's)."""
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast, Qwen2Tokenizer

    from toolkit.models.tiny.tokenizers import byte_level_bpe, qwen_corpus

    reference = Qwen2Tokenizer().backend_tokenizer
    bpe, merges = byte_level_bpe(reference, qwen_corpus(), vocab_size=800, special_tokens=MISTRAL_SPECIAL)
    vocab = {t: i for i, t in enumerate(MISTRAL_SPECIAL)}
    vocab.update({t: i + len(vocab) for t, i in bpe.items() if t not in vocab})
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    backend.pre_tokenizer = reference.pre_tokenizer
    backend.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    backend.add_special_tokens(MISTRAL_SPECIAL)
    backend.post_processor = processors.TemplateProcessing(single="<s>:0 $A:0", pair="<s>:0 $A:0 $B:1",
                                                           special_tokens=[("<s>", vocab["<s>"])])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>",
                                        eos_token="</s>", pad_token="<unk>", clean_up_tokenization_spaces=False,
                                        model_max_length=model_max_length)
    tokenizer.chat_template = ("{%- for m in messages -%}{%- if m.role == 'user' -%}[INST]{{ m.content }}[/INST]"
                               "{%- else -%}{{ m.content }}{%- endif -%}{%- endfor -%}")
    return tokenizer


def _text_config(tokenizer, hidden: int) -> dict:
    return dict(model_type="ministral3", vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=hidden // 2,
                max_position_embeddings=262144, rope_parameters=dict(MINISTRAL3_ROPE),
                pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id)


def _tiny(b):
    from diffusers import ErnieImageTransformer2DModel
    from transformers import Ministral3Config, Ministral3ForCausalLM, Mistral3Config, Mistral3Model

    from toolkit.models.archs.flux2_klein import tiny_vae as tiny_flux2_vae

    tokenizer = tiny_tokenizer()
    with b.seeded("text_encoder", "ernie_mistral3"):
        # Mistral3Model: a Ministral3 text model (the pipeline reads hidden_states[-2]) and a Pixtral tower
        text_encoder = kit.jitter_constants(Mistral3Model(Mistral3Config(
            text_config=_text_config(tokenizer, TEXT_HIDDEN),
            vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                               head_dim=8, image_size=64, patch_size=16))).eval())
    pe_tokenizer = tiny_tokenizer(PE_MAX_TOKENS)
    with b.seeded("pe", "ernie_pe"):
        pe = kit.jitter_constants(Ministral3ForCausalLM(Ministral3Config(**{
            k: v for k, v in _text_config(pe_tokenizer, 16).items() if k != "model_type"})).eval())
    with b.seeded("vae", "flux2_vae"):            # the Flux.2 VAE, as flux2_klein builds it
        vae = tiny_flux2_vae()
    with b.seeded("transformer"):
        transformer = kit.jitter_constants(ErnieImageTransformer2DModel(**TRANSFORMER_KNOWN["tiny"]).eval())
    return dict(transformer=transformer, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer,
                scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG), pe=pe, pe_tokenizer=pe_tokenizer)


VARIANTS = {
    # the pipeline's defaults (50 steps, CFG 4, 1024^2); the turbo card: 8 steps without CFG
    "base": Variant(name_or_path="baidu/ERNIE-Image"),
    "turbo": Variant(defaults={"num_inference_steps": 8, "guidance_scale": 1.0}, name_or_path="baidu/ERNIE-Image-Turbo"),
}

SPEC = ArchSpec(
    name="ernie_image", modality="image", default_name_or_path=VARIANTS["base"].name_or_path,
    pipeline="ErnieImagePipeline", holder=ErnieImageModel,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="ernie_mistral3"),
        Component("text_encoder", "transformers:Mistral3Model", TEXT_ENCODER),
        Component("vae", "AutoencoderKLFlux2", VAE, single_file=vaes.FLUX2_VAE),
        Component("transformer", "ErnieImageTransformer2DModel", DENOISER, single_file=TRANSFORMER_FILE),
        Component("pe_tokenizer", "PreTrainedTokenizerBase", TOKENIZER, optional=True, vocab="ernie_ministral3_pe"),
        Component("pe", "transformers:Ministral3ForCausalLM", TEXT_ENCODER, optional=True),
    ),
    variants=VARIANTS,
    defaults=SampleDefaults(1024, 1024, 50, 4.0),
    sample_extras={"use_pe": Extra("bool", False)},   # the pipeline's default is on: see above
    size_divisor=16,                                  # 16 px: the VAE's 8x and the 2x2 patchify
    latents=Latents("patched", 32, patch=2, format=latent_formats.FLUX2),   # the Flux.2 VAE's space
    scheduler_file=SCHEDULER_FILE,
    global_rng=True,                                  # the PE samples with torch's global RNG
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0}),
    description="ERNIE-Image (single-stream DiT, Mistral3 text encoder, Flux.2 VAE; optional prompt enhancer)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # the pipeline passes sigmas as a tensor: Heun's and DPM++'s set_timesteps take none, UniPC's only an array
    samplers_excluded=("heun", "dpm++_2m", "unipc"),
)
