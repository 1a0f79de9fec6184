"""HunyuanVideo text-to-video: a dual/single-stream 3D DiT over a Llama 3 text encoder (the prompt in a
chat template whose first 95 tokens are cropped off) and CLIP-L (pooled), the 16-channel causal video VAE
(8x spatial, 4x temporal); guidance is an embedded scale (6.0), not CFG, so there is no negative prompt
unless true CFG is asked for."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, Tiny)
from toolkit.models.tiny import kit
from toolkit.models.tiny.tokenizers import PROMPTS, byte_level_bpe

# Llama 3's pre-tokenizer split (tokenizer.json of the real checkpoint)
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                   "<pad>"]


def _llama3_backend():
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    return tok


def _llama3_tokenizer():
    """A Llama 3 style byte-level BPE (800 tokens, <|begin_of_text|> prepended) trained on prompts filled into
    HunyuanVideo's template, wrapped in PreTrainedTokenizerFast; padding on the right, as the crop needs."""
    from diffusers.pipelines.hunyuan_video.pipeline_hunyuan_video import DEFAULT_PROMPT_TEMPLATE
    from tokenizers import AddedToken, Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    template = DEFAULT_PROMPT_TEMPLATE["template"]
    corpus = list(PROMPTS) + [template.format(p) for p in PROMPTS]
    vocab, merges = byte_level_bpe(_llama3_backend(), corpus, vocab_size=800, special_tokens=_LLAMA3_SPECIAL)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    backend.pre_tokenizer = _llama3_backend().pre_tokenizer
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in _LLAMA3_SPECIAL])
    bos = "<|begin_of_text|>"
    backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, vocab[bos])])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=bos, eos_token="<|end_of_text|>",
                                        pad_token="<pad>", padding_side="right", model_max_length=131072)

    # the pipeline drops the template's first crop_start tokens: they must be exactly the template's prefix
    crop = DEFAULT_PROMPT_TEMPLATE["crop_start"]
    prefix = tokenizer(template.split("{}")[0]).input_ids
    full = tokenizer(template.format(PROMPTS[0])).input_ids
    if len(prefix) != crop or full[:crop] != prefix:
        raise RuntimeError(f"tiny Llama tokenizer: the HunyuanVideo template prefix is {len(prefix)} tokens, "
                           f"the pipeline crops {crop}")
    return tokenizer


def _tiny(b):
    from diffusers import AutoencoderKLHunyuanVideo, HunyuanVideoTransformer3DModel
    from transformers import LlamaConfig, LlamaModel

    tokenizer = _llama3_tokenizer()
    with b.seeded("text_encoder"):
        # 3 layers: the pipeline reads hidden_states[-3], the output of the first layer
        text_encoder = LlamaModel(LlamaConfig(
            vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
            num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)).eval()
    tokenizer_2 = kit.clip_tokenizer()
    with b.seeded("text_encoder_2"):
        text_encoder_2 = kit.clip_text_encoder(tokenizer_2)
    with b.seeded("vae"):
        vae = AutoencoderKLHunyuanVideo(latent_channels=16, block_out_channels=(8, 8, 16, 16), layers_per_block=1,
                                        norm_num_groups=4, spatial_compression_ratio=8,
                                        temporal_compression_ratio=4).eval()
    with b.seeded("transformer"):
        transformer = HunyuanVideoTransformer3DModel(
            in_channels=16, out_channels=16, num_attention_heads=2, attention_head_dim=16, num_layers=1,
            num_single_layers=1, num_refiner_layers=1, patch_size=2, patch_size_t=1, guidance_embeds=True,
            text_embed_dim=text_encoder.config.hidden_size,
            pooled_projection_dim=text_encoder_2.config.hidden_size,
            rope_axes_dim=(4, 6, 6)).eval()                # rope axes sum to the head dim
    # hunyuanvideo-community/HunyuanVideo scheduler: flow matching, shift 7
    scheduler = kit.flow_match_scheduler(num_train_timesteps=1000, shift=7.0)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, tokenizer_2=tokenizer_2,
                text_encoder_2=text_encoder_2, vae=vae, transformer=transformer, scheduler=scheduler)


SPEC = ArchSpec(
    name="hunyuan_video", modality="video", default_name_or_path="hunyuanvideo-community/HunyuanVideo",
    pipeline="HunyuanVideoPipeline", output_type="np",
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("tokenizer_2", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "LlamaModel", TEXT_ENCODER),
        Component("text_encoder_2", "CLIPTextModel", TEXT_ENCODER),
        Component("vae", "AutoencoderKLHunyuanVideo", VAE),
        Component("transformer", "HunyuanVideoTransformer3DModel", DENOISER),
    ),
    # model card: 720p (1280x720), 129 frames at 24 fps, 50 steps, embedded guidance 6.0
    defaults=SampleDefaults(1280, 720, 50, 6.0, num_frames=129, fps=24, output_ext="mp4"),
    uses_negative_prompt=False,           # true CFG (true_cfg_scale > 1) is off: a negative prompt does nothing
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.HUNYUAN_VIDEO),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 6.0,
                      "fps": 8}),
    description="HunyuanVideo text-to-video (Llama 3 + CLIP, embedded guidance)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    batch_arg="num_videos_per_prompt",
)
