"""Bria FIBO: an 8B MMDiT (Flux-style double and single blocks, "DimFusion": every block also reads one
of the text encoder's hidden states) over SmolLM3-3B (its last two hidden states, concatenated) and
the Wan 2.2 VAE (48 channels, 16x: latents are patch-1 tokens, normalised by the VAE's mean/std).
Flow-match Euler with a resolution-dependent shift; CFG against an empty negative prompt.

The prompt: FIBO is trained on structured JSON captions (a JSON object serialised as the prompt
string: "short_description", "objects", "background_setting", "lighting", "aesthetics",
"photographic_characteristics", "style_medium", ...), which Bria's own VLM
(briaai/FIBO-VLM-prompt-to-JSON) or Gemini writes from a short prompt. The pipeline tokenizes whatever
string it gets: a plain prompt runs, but Bria says FIBO does not work well with freeform text. The
engine passes the prompt through as given (write the JSON there).

Its edit checkpoints (Fibo-Edit 1.5) are bria_fibo_edit, which builds its text encoder, tokenizer and
VAE with this file's recipe.

Its files: the diffusers repos only (no ComfyUI release, no single-file converter in diffusers)."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, Tiny)
from toolkit.models.archs.wan22_5b import LATENTS_MEAN, LATENTS_STD
from toolkit.models.tiny import kit

# briaai/FIBO scheduler: flow-match Euler whose shift the pipeline computes from the image-token count
# (`mu`, calculate_shift over these bounds: FlowMatchEulerDiscreteScheduler's defaults)
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.5,
                        max_shift=1.15, base_image_seq_len=256, max_image_seq_len=4096)
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", **SCHEDULER_CONFIG)

# SmolLM3's (Llama 3's) specials: the pipeline feeds id 128000 (<|begin_of_text|>) for an empty prompt
LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"]
BOT_TOKEN_ID = 128000
TEXT_HIDDEN = 16


def tiny_smollm3(b):
    """(tokenizer, SmolLM3ForCausalLM): a byte-level BPE of 800 tokens; the encoder keeps SmolLM3's
    128256-row vocabulary, which the pipeline's hard-coded <|begin_of_text|> id needs."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast, Qwen2Tokenizer, SmolLM3Config, SmolLM3ForCausalLM

    from toolkit.models.tiny.tokenizers import byte_level_bpe, qwen_corpus

    reference = Qwen2Tokenizer().backend_tokenizer           # a byte-level split like Llama 3's
    vocab, merges = byte_level_bpe(reference, qwen_corpus(), vocab_size=800, special_tokens=LLAMA3_SPECIAL)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    backend.pre_tokenizer = reference.pre_tokenizer
    backend.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    backend.add_special_tokens(LLAMA3_SPECIAL)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|begin_of_text|>",
                                        eos_token="<|im_end|>", pad_token="<|end_of_text|>",
                                        clean_up_tokenization_spaces=False, model_max_length=65536)
    with b.seeded("text_encoder", "smollm3"):
        encoder = SmolLM3ForCausalLM(SmolLM3Config(
            hidden_size=TEXT_HIDDEN, intermediate_size=2 * TEXT_HIDDEN, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id, bos_token_id=BOT_TOKEN_ID)).eval()
        return tokenizer, kit.jitter_constants(encoder)


def tiny_wan22_vae(b):
    with b.seeded("vae"):                     # the Wan 2.2 VAE, as wan22_5b builds it
        return kit.wan_vae(48, is_residual=True, in_channels=12, out_channels=12, patch_size=2,
                           scale_factor_spatial=16, scale_factor_temporal=4, latents_mean=list(LATENTS_MEAN),
                           latents_std=list(LATENTS_STD))


def tiny_fibo_transformer(b):
    from diffusers import BriaFiboTransformer2DModel

    with b.seeded("transformer"):
        transformer = BriaFiboTransformer2DModel(
            patch_size=1, in_channels=48, num_layers=1, num_single_layers=1, attention_head_dim=16,
            num_attention_heads=2, joint_attention_dim=2 * TEXT_HIDDEN, text_encoder_dim=TEXT_HIDDEN,
            axes_dims_rope=[4, 6, 6]).eval()                  # RoPE axes sum to the head dim
        return kit.jitter_constants(transformer)


def tiny_fibo_shared(b) -> dict:
    """What FIBO and Fibo-Edit share: the SmolLM3 encoder, its tokenizer, the Wan 2.2 VAE, the scheduler."""
    tokenizer, text_encoder = tiny_smollm3(b)
    return dict(scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG), text_encoder=text_encoder,
                tokenizer=tokenizer, vae=tiny_wan22_vae(b))


def _tiny(b):
    return dict(tiny_fibo_shared(b), transformer=tiny_fibo_transformer(b))


COMPONENTS = (
    Component("scheduler", "SchedulerMixin", SCHEDULER),
    Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
    Component("text_encoder", "transformers:SmolLM3ForCausalLM", TEXT_ENCODER),
    Component("vae", "AutoencoderKLWan", VAE),
    Component("transformer", "BriaFiboTransformer2DModel", DENOISER),
)

SPEC = ArchSpec(
    name="bria_fibo", modality="image", default_name_or_path="briaai/FIBO", pipeline="BriaFiboPipeline",
    components=COMPONENTS,
    defaults=SampleDefaults(1024, 1024, 50, 5.0),     # Bria's generate.py: 1024^2, 50 steps, CFG 5
    size_divisor=16,                          # 16x VAE, patch-1 tokens
    latents=Latents("packed", 48, spatial=16, patch=1, format=latent_formats.WAN22),   # the Wan 2.2 VAE's space
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 5.0}),
    description="Bria FIBO (DiT prompted with JSON captions, SmolLM3 text encoder, Wan 2.2 VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
)
