"""The tiny Krea 2: dimensions and builder (the ComfyUI-format copy of it is written by
testing/tiny_krea2.py from these same modules).

Transformer width 64 (4 heads x 16, 2 KV heads), 2 blocks, SwiGLU 128, text width 32, 3 text
layers, text fusion 2 heads; a Qwen3-VL text encoder of width 32 with 8 layers (taps 2, 5, 8:
every third hidden state from 2, as the holder derives them) and a 1-block vision tower; the Qwen
Image VAE at base width 8 with the real structure and latent statistics. Every Linear the FP8
files quantize is a multiple of 16 on both sides, so the `_scaled_mm` gates pass for all of them.
The tokenizer has the Krea 2 template in its corpus: prefix 34 tokens, suffix 5, as the real one.
Parameters a library initialises to a constant get seeded noise, so a mis-mapped norm or
modulation table changes the output.
"""
from toolkit.models.tiny import kit
from toolkit.models.tiny.tokenizers import PROMPTS, qwen2_tokenizer

TAPS = (2, 5, 8)
TRANSFORMER_DIMS = dict(in_channels=64, num_layers=2, attention_head_dim=16, num_attention_heads=4,
                        num_key_value_heads=2, intermediate_size=128, timestep_embed_dim=256, text_hidden_dim=32,
                        num_text_layers=len(TAPS), text_num_attention_heads=2, text_num_key_value_heads=2,
                        text_intermediate_size=64, num_layerwise_text_blocks=2, num_refiner_text_blocks=2)
TEXT_DIMS = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=8, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=16)
VISION_DIMS = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=16, out_hidden_size=32,
                   num_position_embeddings=64, deepstack_visual_indexes=[0])
VAE_DIMS = dict(base_dim=8, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, temperal_downsample=[False, True, True])
PROMPT_PREFIX = ("<|im_start|>system\nDescribe the image by detailing the color, shape, size, texture, quantity, "
                 "text, spatial relationships of the objects and background:<|im_end|>\n<|im_start|>user\n")
PROMPT_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n"
SAMPLE = {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 2.0}   # CFG on: the Krea equation


def tokenizer():
    """(Qwen2Tokenizer, vocab, merges) trained with the Krea 2 template in the corpus."""
    return qwen2_tokenizer([PROMPT_PREFIX + p + PROMPT_SUFFIX for p in PROMPTS] * 4,
                           prefixes={PROMPT_PREFIX: 34, PROMPT_SUFFIX: 5}, with_vocab=True)


def build(b) -> dict:
    """Every component but the scheduler (the arch's recipe adds its own)."""
    from diffusers import AutoencoderKLQwenImage, Krea2Transformer2DModel
    from transformers import Qwen3VLConfig, Qwen3VLModel

    from toolkit.models.formats import comfy

    tok = tokenizer()[0]
    with kit.seeded_rng(b.shared_seed, "krea2.text_encoder"):
        text_config = comfy.qwen3vl_text_config(vocab_size=len(tok), **TEXT_DIMS).to_dict()
        text_encoder = Qwen3VLModel(Qwen3VLConfig(text_config=text_config, vision_config=dict(VISION_DIMS),
                                                  tie_word_embeddings=False)).eval()
        kit.jitter_constants(text_encoder)
    with kit.seeded_rng(b.seed, "krea2.transformer"):
        transformer = Krea2Transformer2DModel(**TRANSFORMER_DIMS, axes_dims_rope=comfy.krea2_axes_dims(
            TRANSFORMER_DIMS["attention_head_dim"])).eval()
        kit.jitter_constants(transformer, overrides={"scale_shift_table": 1.0})
    with kit.seeded_rng(b.shared_seed, "krea2.vae"):
        vae = AutoencoderKLQwenImage(**VAE_DIMS, latents_mean=list(comfy.QWEN_IMAGE_LATENTS_MEAN),
                                     latents_std=list(comfy.QWEN_IMAGE_LATENTS_STD)).eval()
        kit.jitter_constants(vae, 0.05)
    return dict(vae=vae, text_encoder=text_encoder, tokenizer=tok, transformer=transformer)
