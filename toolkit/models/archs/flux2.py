"""FLUX.2 [dev]: the Flux.2 DiT (8 double-stream, 48 single-stream blocks, embedded guidance) over
Mistral Small 3.1 (Mistral3ForConditionalGeneration; hidden states 10, 20 and 30 stacked, the prompt
in its chat template under BFL's system message), the 32-channel Flux.2 VAE whose latents are
patchified 2x2 into 128-channel tokens (FLUX.2 [klein]'s VAE). One pipeline for both tasks: `image`
(reference images, ctrl_img and ctrl_img_1..3) makes it a multi-reference edit.

The tokenizer role is the model's PixtralProcessor (the Tekken tokenizer with Mistral's chat template,
and the Pixtral image processor the pipeline's optional caption upsampling uses).

Its files: BFL's FLUX.2 layout (ComfyUI's `diffusion_models/flux2_dev_fp8mixed.safetensors` and the like), as
klein's, read with the configs below; the VAE is FLUX.2's file kind.
"""
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, Task, Tiny)
from toolkit.models.archs import flux2_klein
from toolkit.models.formats import vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.tiny import kit
from toolkit.models.tiny.tokenizers import PROMPTS

# black-forest-labs/FLUX.2-dev transformer/config.json (diffusers' Flux2Transformer2DModel defaults); the tiny's
TRANSFORMER_KNOWN = {
    "flux2-dev": dict(patch_size=1, in_channels=128, out_channels=None, num_layers=8, num_single_layers=48,
                      attention_head_dim=128, num_attention_heads=48, joint_attention_dim=15360,
                      timestep_guidance_channels=256, mlp_ratio=3.0, axes_dims_rope=[32, 32, 32, 32], rope_theta=2000,
                      guidance_embeds=True),
    "tiny": dict(patch_size=1, in_channels=128, out_channels=None, num_layers=1, num_single_layers=2,
                 attention_head_dim=16, num_attention_heads=2, joint_attention_dim=48, timestep_guidance_channels=256,
                 mlp_ratio=3.0, axes_dims_rope=[4, 4, 4, 4], rope_theta=2000, eps=1e-6, guidance_embeds=True),
}

def transformer_config(view):
    return from_known(flux2_klein.transformer_signature(view), TRANSFORMER_KNOWN, flux2_klein.transformer_facts,
                      "the FLUX.2 [dev] transformer")


# BFL's FLUX.2 layout (klein's kind and converters), read with FLUX.2 [dev]'s configs: its guidance embedder and
# widths tell it from klein
TRANSFORMER_FILE = replace(flux2_klein.TRANSFORMER_FILE, config="toolkit.models.archs.flux2:transformer_config",
                           label="FLUX.2 [dev] transformer")

TAPS = (10, 20, 30)         # the pipeline's text_encoder_out_layers
TEXT_HIDDEN = 16

# Tekken's special tokens in their ids (0..19; [IMG] = 10 is Mistral3Config's image_token_index, <pad> = 11)
MISTRAL_SPECIAL = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                   "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]",
                   "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]"]
# Mistral Small 3.1's chat template, as the pipeline uses it: a system turn, user turns of text and image blocks
MISTRAL_CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- if messages[0]['content'] is string %}{%- set system_message = messages[0]['content'] %}"
    "{%- else %}{%- set system_message = messages[0]['content'][0]['text'] %}{%- endif %}"
    "{%- set loop_messages = messages[1:] %}"
    "{%- else %}{%- set system_message = '' %}{%- set loop_messages = messages %}{%- endif %}"
    "{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}"
    "{%- for message in loop_messages %}"
    "{%- if message['role'] == 'user' %}"
    "{%- if message['content'] is string %}{{- '[INST]' + message['content'] + '[/INST]' }}"
    "{%- else %}{{- '[INST]' }}{%- for block in message['content'] %}"
    "{%- if block['type'] == 'text' %}{{- block['text'] }}"
    "{%- elif block['type'] in ['image', 'image_url'] %}{{- '[IMG]' }}{%- endif %}"
    "{%- endfor %}{{- '[/INST]' }}{%- endif %}"
    "{%- elif message['role'] == 'assistant' %}"
    "{%- if message['content'] is string %}{{- message['content'] + eos_token }}"
    "{%- else %}{{- message['content'][0]['text'] + eos_token }}{%- endif %}"
    "{%- endif %}{%- endfor %}")


def tiny_mistral_processor():
    """PixtralProcessor over a tiny Tekken-style byte-level BPE (the special tokens first, in Tekken's ids),
    trained on the prompts and BFL's system message, with Mistral's chat template."""
    from diffusers.pipelines.flux2.system_messages import SYSTEM_MESSAGE
    from tokenizers import AddedToken, Tokenizer, decoders, models
    from transformers import PixtralProcessor, PreTrainedTokenizerFast
    from transformers.models.pixtral.image_processing_pixtral import PixtralImageProcessor

    from toolkit.models.tiny.tokenizers import _llama3_backend, byte_level_bpe

    learned, merges = byte_level_bpe(_llama3_backend(), list(PROMPTS) + [SYSTEM_MESSAGE], vocab_size=1000,
                                     special_tokens=MISTRAL_SPECIAL)
    vocab = {t: i for i, t in enumerate(MISTRAL_SPECIAL)}
    for token in sorted((t for t in learned if t not in vocab), key=learned.get):
        vocab[token] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    backend.pre_tokenizer = _llama3_backend().pre_tokenizer
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in MISTRAL_SPECIAL])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                        pad_token="<pad>", model_max_length=131072)
    # Mistral Small 3.1's: 14 px patches merged 2x2, at most 1540 px a side
    image_processor = PixtralImageProcessor(patch_size=14, size={"longest_edge": 1540})
    return PixtralProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=14, spatial_merge_size=2,
                            chat_template=MISTRAL_CHAT_TEMPLATE)


def tiny_mistral3(processor):
    """Mistral3ForConditionalGeneration: 31 text layers of width 16 (the pipeline reads hidden states 10, 20,
    30) and a one-layer Pixtral vision tower."""
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration

    tok = processor.tokenizer
    config = Mistral3Config(
        text_config=dict(model_type="mistral", vocab_size=len(tok), hidden_size=TEXT_HIDDEN,
                         intermediate_size=2 * TEXT_HIDDEN, num_hidden_layers=max(TAPS) + 1, num_attention_heads=2,
                         num_key_value_heads=1, head_dim=8, max_position_embeddings=131072, sliding_window=None,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000000.0},
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id),
        vision_config=dict(model_type="pixtral", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                           num_attention_heads=2, head_dim=8, patch_size=14, image_size=1540),
        image_token_index=processor.image_token_id, spatial_merge_size=2, tie_word_embeddings=False)
    return Mistral3ForConditionalGeneration(config).eval()


def _tiny(b):
    from diffusers import Flux2Transformer2DModel

    processor = tiny_mistral_processor()
    with b.seeded("text_encoder"):
        text_encoder = tiny_mistral3(processor)
    with b.seeded("vae", "flux2_vae"):          # FLUX.2 [klein]'s VAE recipe: the same files
        vae = flux2_klein.tiny_vae()
    with b.seeded("transformer"):
        transformer = Flux2Transformer2DModel(**{k: v for k, v in TRANSFORMER_KNOWN["tiny"].items()
                                                 if k != "out_channels"}).eval()
    return dict(tokenizer=processor, text_encoder=text_encoder, vae=vae, transformer=transformer,
                scheduler=kit.flow_match_scheduler(**flux2_klein.SCHEDULER_CONFIG))


SPEC = ArchSpec(
    name="flux2", modality="image", default_name_or_path="black-forest-labs/FLUX.2-dev", pipeline="Flux2Pipeline",
    # one pipeline for both: `image` (reference images) makes it an edit
    tasks=(Task("txt2img", "Flux2Pipeline"),
           Task("edit", "Flux2Pipeline", takes=("ctrl_img_1", "ctrl_img_2", "ctrl_img_3"))),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "transformers:PixtralProcessor", TOKENIZER, vocab="mistral3"),
        Component("text_encoder", "transformers:Mistral3ForConditionalGeneration", TEXT_ENCODER),
        Component("vae", "AutoencoderKLFlux2", VAE, single_file=vaes.FLUX2_VAE),
        Component("transformer", "Flux2Transformer2DModel", DENOISER, single_file=TRANSFORMER_FILE),
    ),
    # the model card: 50 steps (28 a fair trade-off), embedded guidance 4
    defaults=SampleDefaults(1024, 1024, 50, 4.0), uses_negative_prompt=False,
    # scheduler.step sees (B, tokens, 128): 32 VAE channels patchified 2x2, as klein's
    latents=Latents("packed", 32, patch=2, format=latent_formats.FLUX2),
    scheduler_file=flux2_klein.SCHEDULER_FILE,       # FLUX.2-dev's scheduler config is klein's
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0}),
    description="FLUX.2 [dev] (Mistral Small 3.1 text encoder, 32-ch Flux.2 VAE, 128-ch tokens); multi-reference edit",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # FlowMatchHeun's set_timesteps takes no sigmas (DPM++ runs: the pipeline drops them for flow-sigma schedulers)
    samplers_excluded=("heun",),
    step_caches={"taylorseer": {}, "faster": {}},
)
