"""GLM-Image (zai-org/GLM-Image): an autoregressive prior plus a diffusion decoder. The prior,
GlmImageForConditionalGeneration (9B, from GLM-4-9B, its vocabulary grown by 16,384 image tokens),
reads the prompt in its chat frame with the target size ("<sop>H W<eop>" at 32 px a token, and a
16x16 preview grid) and samples ~256 preview tokens then the image's tokens (one per 32 px). The
decoder, a single-stream DiT (7B), denoises the 16-channel KL VAE's latents (8x, 2x2 patches, mean/std
normalised) conditioned on those tokens (upsampled to 16 px) and on a glyph encoder (a ByT5 T5
encoder over the prompt's quoted text, for lettering). CFG (1.5) drops the prior tokens and the glyph
text; there is no negative prompt.

The prior samples with torch's global RNG, which the pipeline seeds from the generator's seed: the
holder scopes that to the call (ArchSpec.global_rng). It is one draw per prompt, shared by every image
of num_images_per_prompt, so a batch item would not be the batch of one with seed + i: one per pass.
The prior is the model's own sampling stage, not a prompt encoder: its role is a denoiser-side
component (loaded with the model's quantization, never shared, not in the conditioning cache).

Image-to-image (the pipeline's `image=`: edit, style transfer, multi-subject) is not offered: in
diffusers 0.42.1 it cannot run against transformers 5.24. generate_prior_tokens concatenates
`get_image_features(...).pooler_output` (transformers now returns one (C, h, w) map per image) with
torch.cat(dim=0) and hands the result to `get_image_tokens`, which iterates it as images, so the
VQ's 1x1 conv gets a 1-channel map ("expected input[1, 1, h, w] to have C channels").

Its files: the diffusers repo only (no ComfyUI release, no single-file converter in diffusers)."""
from toolkit.models.arch import (DENOISER, PROCESSOR, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component,
                                 Latents, SampleDefaults, Tiny)
from toolkit.models.tiny import kit

# zai-org/GLM-Image scheduler: flow-match Euler with the pipeline's linear shift
# (mu = sqrt(seq_len / 256) * 0.75 + 0.25, its calculate_shift defaults), as CogView4's
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.25,
                        max_shift=0.75, base_image_seq_len=256, max_image_seq_len=4096, time_shift_type="linear")
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", **SCHEDULER_CONFIG)

# the tiny prior's image vocabulary: ids 0..V-1 the VQ codebook (what the prior samples), V the image
# start (the sequence's last token, after which it generates), V + 1 the image end (its eos, never sampled)
TINY_IMAGE_VOCAB = 64
GLM_SPECIAL = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
               "<|assistant|>", "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>", "<|image|>"]


def _image_token(i: int) -> str:
    return f"<|dit_token_{i}|>"


def _chat_template(start: str, end: str) -> str:
    """GLM's chat frame: "[gMASK]<sop><|user|>\\n" + the text, each input image as start, <|image|>, end."""
    return ("[gMASK]<sop>{%- for m in messages -%}<|{{ m.role }}|>\n{%- if m.content is string -%}{{ m.content }}"
            "{%- else -%}{%- for item in m.content -%}{%- if item.type == 'text' -%}{{ item.text }}"
            "{%- else -%}" + start + "<|image|>" + end + "{%- endif -%}{%- endfor -%}{%- endif -%}{%- endfor -%}")


def tiny_processor():
    """GlmImageProcessor: a GLM-4 style byte-level BPE (800 tokens, learned in code) after the image
    tokens (ids 0..V+1, as the real vocabulary puts them first), the grid markers <sop>/<eop>, the
    image-start token as bos; the image processor at 16 px patches, unmerged, as GLM-Image's."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import GlmImageProcessor, PreTrainedTokenizerFast, Qwen2Tokenizer
    from transformers.models.glm_image.image_processing_glm_image import GlmImageImageProcessor

    from toolkit.models.tiny.tokenizers import byte_level_bpe, qwen_corpus

    v = TINY_IMAGE_VOCAB
    reference = Qwen2Tokenizer().backend_tokenizer
    bpe, merges = byte_level_bpe(reference, qwen_corpus(), vocab_size=800, special_tokens=GLM_SPECIAL)
    images = [_image_token(i) for i in range(v + 2)]
    vocab = {t: i for i, t in enumerate(images)}
    vocab.update({t: i + len(images) for t, i in bpe.items()})
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    backend.pre_tokenizer = reference.pre_tokenizer
    backend.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    backend.add_special_tokens(GLM_SPECIAL + images)
    start, end = _image_token(v), _image_token(v + 1)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token=start, eos_token=end, pad_token="<|endoftext|>", padding_side="left",
        clean_up_tokenization_spaces=False,
        extra_special_tokens={"image_token": "<|image|>", "grid_bos_token": "<sop>", "grid_eos_token": "<eop>"})
    image_processor = GlmImageImageProcessor(patch_size=16, temporal_patch_size=1, merge_size=1, min_pixels=32 * 32,
                                             max_pixels=2048 * 2048, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    return GlmImageProcessor(image_processor=image_processor, tokenizer=tokenizer,
                             chat_template=_chat_template(start, end))


def tiny_prior(b, processor):
    """GlmImageForConditionalGeneration: a 2-layer text model of width 16 (M-RoPE sections 2+1+1 of
    its head dim 8), a 1-block vision tower and a VQ of V codes; lm_head scores the V image tokens."""
    from transformers import GlmImageConfig, GlmImageForConditionalGeneration

    tok, v = processor.tokenizer, TINY_IMAGE_VOCAB
    config = GlmImageConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                         vision_vocab_size=v, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1]}),
        vision_config=dict(depth=1, hidden_size=16, num_heads=2, image_size=64, patch_size=16, intermediate_size=32),
        vq_config=dict(embed_dim=16, num_embeddings=v, latent_channels=16),
        image_token_id=tok.convert_tokens_to_ids(tok.image_token), image_start_token_id=v, image_end_token_id=v + 1)
    with b.seeded("vision_language_encoder"):
        return kit.jitter_constants(GlmImageForConditionalGeneration(config).eval())


def _tiny(b):
    from diffusers import GlmImageTransformer2DModel
    from transformers import ByT5Tokenizer

    processor = tiny_processor()
    tokenizer = ByT5Tokenizer()                       # bytes: no vocabulary file
    with b.seeded("text_encoder", "byt5_glyph"):
        text_encoder = kit.t5_encoder(tokenizer)
    with b.seeded("vae"):
        # 16 channels, 8x; the pipeline normalises by the config's per-channel mean and std
        vae = kit.kl_vae(16, scaling_factor=1.0, quant_conv=False, latents_mean=[0.05 * (i % 5) for i in range(16)],
                         latents_std=[1.0 + 0.1 * (i % 3) for i in range(16)])
    with b.seeded("transformer"):
        transformer = GlmImageTransformer2DModel(
            patch_size=2, in_channels=16, out_channels=16, num_layers=2, attention_head_dim=16, num_attention_heads=2,
            text_embed_dim=text_encoder.config.d_model, time_embed_dim=32, condition_dim=16,
            prior_vq_quantizer_codebook_size=TINY_IMAGE_VOCAB).eval()
        kit.jitter_constants(transformer)
    return dict(tokenizer=tokenizer, processor=processor, text_encoder=text_encoder,
                vision_language_encoder=tiny_prior(b, processor), vae=vae, transformer=transformer,
                scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG))


SPEC = ArchSpec(
    name="glm_image", modality="image", default_name_or_path="zai-org/GLM-Image", pipeline="GlmImagePipeline",
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("processor", "transformers:GlmImageProcessor", PROCESSOR),
        Component("text_encoder", "T5EncoderModel", TEXT_ENCODER),
        # the autoregressive prior: the model's own first sampling stage (see above)
        Component("vision_language_encoder", "transformers:GlmImageForConditionalGeneration", DENOISER),
        Component("vae", "AutoencoderKL", VAE),
        Component("transformer", "GlmImageTransformer2DModel", DENOISER),
    ),
    uses_negative_prompt=False,                     # the pipeline takes none (CFG drops the conditions)
    defaults=SampleDefaults(1024, 1024, 50, 1.5),   # the model card: 50 steps, guidance 1.5; 32 px multiples
    size_divisor=32,                                # the prior's 32 px tokens (the pipeline refuses others)
    latents=Latents("BCHW", 16, format=None),       # ComfyUI has no GLM-Image latent table
    scheduler_file=SCHEDULER_FILE,
    global_rng=True,                                # the prior samples with the global RNG the pipeline seeds
    batch_arg=None,                                 # one prior draw per prompt (see above)
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 1.5}),
    description="GLM-Image (autoregressive GLM prior of image tokens + DiT decoder with a ByT5 glyph encoder)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # the pipeline passes timesteps and sigmas together, which only Euler's set_timesteps takes; it keeps
    # those timesteps when a schedule respaces the sigmas (times off the sigmas): no schedules
    samplers_excluded=("heun", "dpm++_2m", "unipc", "karras", "exponential", "beta"),
)
