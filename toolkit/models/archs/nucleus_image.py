"""Nucleus-Image (NucleusAI): a 17B sparse mixture-of-experts DiT (~2B active: 64 routed experts and a shared
one per MoE block, expert-choice routing within each image) whose single image stream cross-attends to a
Qwen3-VL-8B-Instruct hidden state (the 8th from last, behind the pipeline's system prompt, through its
processor); the Qwen-Image VAE (16 channels, the Wan 2.1 latent space), latents packed as 2x2-patch
tokens; flow-matching Euler over a dynamic shift; CFG with the guided prediction rescaled to the
conditional one's norm.

Its VAE is Qwen-Image's: the tiny builds it from qwen_image.py's recipe, so the two share the files. The
diffusers docs name the repo NucleusAI/NucleusMoE-Image, its former name (the hub redirects it); the model
card is NucleusAI/Nucleus-Image. No ComfyUI files and no single-file converter in diffusers: no single files."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, PROCESSOR, SCHEDULER, TEXT_ENCODER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, Tiny)
from toolkit.models.archs.qwen_image import tiny_qwen_image_vae
from toolkit.models.tiny import kit

# a chat template over Qwen3-VL's roles that takes content as text or as a list of parts (the real
# processor's template also renders images and tools, which the pipeline never passes)
CHAT_TEMPLATE = (
    "{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}{%- else -%}"
    "{%- for part in message['content'] -%}{%- if part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}{{- '<|im_end|>\\n' -}}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")
TEXT_LAYERS = 8              # the pipeline reads hidden_states[-8]


def qwen3vl_processor(tokenizer):
    """Qwen3VLProcessor over the tokenizer: Qwen3-VL's 16-px patches merged 2x2."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    return Qwen3VLProcessor(image_processor=Qwen2VLImageProcessor(patch_size=16, temporal_patch_size=2, merge_size=2),
                            tokenizer=tokenizer, video_processor=Qwen3VLVideoProcessor(), chat_template=CHAT_TEMPLATE)


def _init_experts(transformer):
    """Seeded weights for the packed experts, which the model allocates with torch.empty (left to a
    checkpoint): uninitialised memory would make two builds of one seed differ."""
    import torch

    with torch.no_grad():
        for name, p in transformer.named_parameters():
            if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
                p.copy_(torch.randn_like(p) * p.shape[-2] ** -0.5)


def _tiny(b):
    from diffusers import NucleusMoEImageTransformer2DModel
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    from toolkit.models.formats import comfy

    tokenizer = kit.qwen2_tokenizer()
    with b.seeded("text_encoder", "qwen3vl_8b_instruct"):
        text_config = comfy.qwen3vl_text_config(
            vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=TEXT_LAYERS,
            num_attention_heads=2, num_key_value_heads=1, head_dim=16).to_dict()
        vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=16, out_hidden_size=32,
                      num_position_embeddings=64, deepstack_visual_indexes=[0])
        text_encoder = Qwen3VLForConditionalGeneration(Qwen3VLConfig(
            text_config=text_config, vision_config=vision, tie_word_embeddings=False)).eval()
        kit.jitter_constants(text_encoder)
    with b.seeded("transformer"):
        # 4 blocks, the real rule (the first three dense): block 3 routes 4 experts; mlp_ratio 4 gives the dense
        # blocks a SwiGLU of 128 (the model rounds it down to a multiple of 128)
        transformer = NucleusMoEImageTransformer2DModel(
            patch_size=2, in_channels=64, out_channels=16, num_layers=4, attention_head_dim=16, num_attention_heads=4,
            num_key_value_heads=2, joint_attention_dim=text_config["hidden_size"], axes_dims_rope=(8, 4, 4),
            mlp_ratio=4.0, dense_moe_strategy="leave_first_three_blocks_dense", num_experts=4,
            moe_intermediate_dim=32, capacity_factors=[2.0] * 4).eval()
        _init_experts(transformer)
        kit.jitter_constants(transformer)
    scheduler = kit.flow_match_scheduler(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True,
                                         base_shift=0.5, max_shift=1.15, base_image_seq_len=256,
                                         max_image_seq_len=4096)
    return dict(scheduler=scheduler, processor=qwen3vl_processor(tokenizer), text_encoder=text_encoder,
                vae=tiny_qwen_image_vae(b), transformer=transformer)


SPEC = ArchSpec(
    name="nucleus_image", modality="image", default_name_or_path="NucleusAI/Nucleus-Image",
    pipeline="NucleusMoEImagePipeline",
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("processor", "transformers:Qwen3VLProcessor", PROCESSOR),
        Component("text_encoder", "transformers:Qwen3VLForConditionalGeneration", TEXT_ENCODER),
        Component("vae", "AutoencoderKLQwenImage", VAE),
        Component("transformer", "NucleusMoEImageTransformer2DModel", DENOISER),
    ),
    defaults=SampleDefaults(1024, 1024, 50, 4.0),     # the pipeline's (its example: 50 steps, CFG 4.0, 1024^2)
    size_divisor=16,                                   # VAE 8x, 2x2 patches
    latents=Latents("packed", 16, patch=2, format=latent_formats.WAN21),     # the Qwen Image VAE = Wan 2.1's space
    decode_features=96,                                 # the Qwen Image VAE's last decoder stage
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0}),
    description="Nucleus-Image (sparse MoE DiT, Qwen3-VL text encoder, Qwen Image VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
)
