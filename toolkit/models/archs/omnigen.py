"""OmniGen v1: one Phi-3 transformer that reads the prompt's tokens and the input images' VAE latents
in one sequence and denoises the SDXL VAE's latents (4 channels, 2x2 patches); there is no separate
text encoder, only its Llama tokenizer. Flow matching (Euler, sigmas 1 -> 0).

Guidance: `guidance_scale` on the text (CFG against the processor's fixed negative prompt: the
pipeline takes none, so neither does the engine), and with input images `img_guidance_scale` on the
images (the `img_guidance_scale` sample key, the pipeline's 1.6 when unset).

Its multimodal prompts are the `edit` task: the references (ctrl_img, ctrl_img_1..3) are the
pipeline's `input_images`, and the prompt names each as `<img><|image_k|></img>` (k from 1, in the
references' order). A reference the prompt does not name is put in front of it ("<img><|image_1|></img>
make the sky red"), the form OmniGen's edit examples use; a prompt that names them places them itself
("The woman in <img><|image_1|></img> waves"). The output is the requested size. The pipeline samples
the references' VAE latents from torch's global RNG, which the holder seeds with the request's seed.

Its files: the diffusers repo only (no ComfyUI release reads OmniGen v1)."""
import re

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, REFERENCES, SCHEDULER, TOKENIZER, VAE, ArchSpec, Component, Extra,
                                 Latents, SampleDefaults, Task, Tiny)
from toolkit.models.base_model import BaseModel
from toolkit.models.tiny import kit
from toolkit.models.tiny.tokenizers import PROMPTS, learn_bpe

# Shitao/OmniGen-v1-diffusers: scheduler/scheduler_config.json (the class's defaults, as diffusers'
# conversion script writes it) and transformer/config.json's position table (192 patches a side)
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", num_train_timesteps=1000, shift=1.0)
POS_EMBED_MAX_SIZE = 192
IMAGE_TAG = "<img><|image_{}|></img>"

# the processor's chat frame (processor_omnigen.add_prefix_instruction) and Phi-3's specials it uses
PREFIX = "<|user|>\nGenerate an image according to the following instructions\n"
SUFFIX = "<|end|>\n<|assistant|>\n<|diffusion|>"
SPECIAL = ["<unk>", "<s>", "</s>"]            # ids 0, 1, 2: the processor drops a chunk's leading 1, pads with 2
TINY_VOCAB = 700


class OmniGenModel(BaseModel):
    """No negative prompt (the processor's own); the references as `input_images`, named in the prompt."""

    def pipeline_kwargs(self, gen):
        kw = {"prompt": gen.prompt, "width": gen.width, "height": gen.height,
              "num_inference_steps": gen.num_inference_steps, "guidance_scale": gen.guidance_scale}
        images = self.input_kwargs(gen).get("input_images")
        if images is not None:
            images = images if isinstance(images, list) else [images]
            scale = gen.extras.get("img_guidance_scale")
            kw.update(prompt=with_image_tags(gen.prompt, len(images)), input_images=images,
                      **({"img_guidance_scale": scale} if scale is not None else {}))
        return kw


def with_image_tags(prompt: str, count: int) -> str:
    """`prompt` naming each of `count` images: the tags it lacks, in order, in front of it."""
    named = {int(k) for k in re.findall(r"<\|image_(\d+)\|>", prompt)}
    missing = [IMAGE_TAG.format(k) for k in range(1, count + 1) if k not in named]
    return " ".join(missing + [prompt]) if missing else prompt


# -- the tiny instance ------------------------------------------------------------------------------
def tiny_tokenizer():
    """LlamaTokenizer (Phi-3's): BPE with byte fallback over '▁'-joined words, <s> prepended; merges
    learned on the prompts in the processor's frame, with image tags."""
    from transformers import LlamaTokenizer

    texts = [(PREFIX + p + SUFFIX).replace(" ", "\u2581") for p in PROMPTS]
    texts += [(PREFIX + IMAGE_TAG.format(1) + " " + p + SUFFIX).replace(" ", "\u2581") for p in PROMPTS[:8]]
    counts: dict = {}
    for text in texts:
        for word in re.findall("\u2581*[^\u2581]+|\u2581+", text):
            counts[tuple(word)] = counts.get(tuple(word), 0) + 1
    vocab = {tok: i for i, tok in enumerate(SPECIAL)}
    for i in range(256):
        vocab[f"<0x{i:02X}>"] = len(vocab)
    for ch in sorted({"\u2581", *"".join(texts)}):
        vocab.setdefault(ch, len(vocab))
    merges = learn_bpe(counts, TINY_VOCAB - len(vocab))
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    unk, bos, eos = SPECIAL
    return LlamaTokenizer(vocab=vocab, merges=merges, unk_token=unk, bos_token=bos, eos_token=eos,
                          add_bos_token=True, add_eos_token=False)


def _tiny(b):
    from diffusers import OmniGenTransformer2DModel

    tokenizer = tiny_tokenizer()
    with b.seeded("vae", "vae"):                       # the SDXL VAE, as sdxl builds it
        vae = kit.kl_vae(4, scaling_factor=0.13025, quant_conv=True)
    with b.seeded("transformer"):
        head = 16
        transformer = OmniGenTransformer2DModel(
            in_channels=4, patch_size=2, hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
            intermediate_size=64, num_layers=2, pad_token_id=tokenizer.convert_tokens_to_ids("</s>"),
            vocab_size=len(tokenizer), max_position_embeddings=131072, original_max_position_embeddings=4096,
            # Phi-3's su-scaled RoPE: a factor per frequency (head_dim / 2)
            rope_scaling={"type": "su", "short_factor": [1.0 + 0.05 * i for i in range(head // 2)],
                          "long_factor": [1.5 + 0.1 * i for i in range(head // 2)]},
            pos_embed_max_size=16).eval()                 # 16 patches a side: 256 px at the 8x VAE
        kit.jitter_constants(transformer)
    scheduler = kit.flow_match_scheduler(num_train_timesteps=1000, shift=1.0)
    return dict(transformer=transformer, scheduler=scheduler, vae=vae, tokenizer=tokenizer)


SPEC = ArchSpec(
    name="omnigen", modality="image", default_name_or_path="Shitao/OmniGen-v1-diffusers",
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    pipeline="OmniGenPipeline", holder=OmniGenModel,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("vae", "AutoencoderKL", VAE),
        Component("transformer", "OmniGenTransformer2DModel", DENOISER),
    ),
    tasks=(Task("txt2img", "OmniGenPipeline"),
           Task("edit", "OmniGenPipeline", takes=REFERENCES[1:], image_arg="input_images")),
    uses_negative_prompt=False,                     # the processor's fixed negative prompt
    defaults=SampleDefaults(1024, 1024, 50, 2.5),   # the pipeline's example: 1024^2, 50 steps, guidance 2.5
    sample_extras={"img_guidance_scale": Extra("float")},
    size_divisor=16,                                # VAE 8x, 2x2 patches
    max_side=POS_EMBED_MAX_SIZE * 2 * 8,            # the learned 192x192 patch position table: 3072 px
    latents=Latents("BCHW", 4, format=latent_formats.SDXL),   # the SDXL VAE, latents scaled by 0.13025
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 2.5}),
    description="OmniGen v1 (Phi-3 transformer reading text and input images, SDXL VAE): "
                "text-to-image and multimodal prompts naming input images",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),         # the pipeline passes sigmas, which their set_timesteps do not take
    global_rng=True,            # the pipeline VAE-samples the input images with torch's global RNG (no generator)
    uncached_conditioning="no text encoder: the transformer itself embeds the prompt's tokens at every step, "
                          "so there is no prompt encoding to keep",
)
