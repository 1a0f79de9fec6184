"""CogView4: a single-stream DiT over GLM-4 (glm-4-9b's penultimate hidden states, prompt left-padded
to a multiple of 16 tokens), the 16-channel CogView3-Plus VAE (scale 1.0, no shift), flow-match
Euler with a linear, resolution-dependent shift. Latents stay BCHW (the transformer patchifies)."""
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, Tiny)
from toolkit.models.tiny import kit

# THUDM/CogView4-6B scheduler/scheduler_config.json (as diffusers' conversion script writes it)
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.25,
                        max_shift=0.75, base_image_seq_len=256, max_image_seq_len=4096, time_shift_type="linear")
# glm-4-9b-hf's special tokens; "[gMASK]<sop>" opens every encoded text
GLM_SPECIAL = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
               "<|assistant|>", "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>",
               "<|end_of_video|>"]


def glm_tokenizer():
    """A GLM-4 style PreTrainedTokenizerFast: byte-level BPE (800 tokens, learned in code), the GLM
    special tokens, "[gMASK]<sop>" prepended by the post-processor, padding on the left."""
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast, Qwen2Tokenizer

    from toolkit.models.tiny.tokenizers import byte_level_bpe, qwen_corpus

    reference = Qwen2Tokenizer().backend_tokenizer           # the same cl100k-style split, byte-level
    vocab, merges = byte_level_bpe(reference, qwen_corpus(), vocab_size=800, special_tokens=GLM_SPECIAL)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    backend.pre_tokenizer = reference.pre_tokenizer
    backend.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    backend.add_special_tokens(GLM_SPECIAL)
    backend.post_processor = processors.TemplateProcessing(
        single="[gMASK]:0 <sop>:0 $A:0", pair="[gMASK]:0 <sop>:0 $A:0 $B:1",
        special_tokens=[("[gMASK]", vocab["[gMASK]"]), ("<sop>", vocab["<sop>"])])
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                   padding_side="left", clean_up_tokenization_spaces=False, model_max_length=128000)


def glm_encoder(tokenizer, *, layers: int = 2, hidden: int = 32):
    """GlmModel (glm-4-9b-hf's layout: GQA, partial rotary 0.5, attention biases), tiny widths."""
    from transformers import GlmConfig, GlmModel

    config = GlmConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                       num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                       pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    return GlmModel(config).eval()


def _tiny(b):
    from diffusers import CogView4Transformer2DModel, FlowMatchEulerDiscreteScheduler

    tokenizer = glm_tokenizer()
    with b.seeded("text_encoder"):
        text_encoder = glm_encoder(tokenizer)              # the pipeline reads hidden_states[-2]
    with b.seeded("vae"):
        vae = kit.kl_vae(16, scaling_factor=1.0, shift_factor=0.0, quant_conv=False, mid_block_add_attention=False)
    with b.seeded("transformer"):
        transformer = CogView4Transformer2DModel(
            patch_size=2, in_channels=16, out_channels=16, num_layers=2, attention_head_dim=16, num_attention_heads=2,
            text_embed_dim=text_encoder.config.hidden_size, time_embed_dim=32, condition_dim=16,
            pos_embed_max_size=32, sample_size=8, rope_axes_dim=(256, 256)).eval()
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                scheduler=FlowMatchEulerDiscreteScheduler(**SCHEDULER_CONFIG))


SPEC = ArchSpec(
    name="cogview4", modality="image", default_name_or_path="THUDM/CogView4-6B", pipeline="CogView4Pipeline",
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "GlmModel", TEXT_ENCODER),
        Component("vae", "AutoencoderKL", VAE),
        Component("transformer", "CogView4Transformer2DModel", DENOISER),
    ),
    # the model card: 1024^2, 50 steps, CFG 3.5 (sizes 512-2048, multiples of 32 recommended; the pipeline needs 16)
    defaults=SampleDefaults(1024, 1024, 50, 3.5), size_divisor=16,
    latents=Latents("BCHW", 16, format=None),      # the CogView3-Plus VAE: ComfyUI has no table for it
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 3.5}),
    description="CogView4 (GLM-4 text encoder, 16-ch VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # the pipeline passes timesteps and sigmas; only FlowMatchEuler takes both, and keeps those timesteps
    # when a schedule respaces the sigmas (the model would be fed times off its sigmas): no schedules
    samplers_excluded=("heun", "dpm++_2m", "unipc", "karras", "exponential", "beta"),
    # TaylorSeer's default patterns skip nothing here; no MagCache ratios
    step_caches={"first_block": {}, "faster": {}},
)
