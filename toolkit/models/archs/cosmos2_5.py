"""NVIDIA Cosmos Predict 2.5 (2B, 14B) world model: a DiT over Cosmos-Reason1-7B (a Qwen2.5-VL-7B; the
prompt in a chat template, every hidden layer normalised and concatenated, 28 x 3584 wide, which the
transformer projects to 1024) and the Wan 2.1 VAE (16 channels, 8x spatial, 4x temporal); flow
matching sampled by UniPC on Karras flow sigmas, with CFG (the pipeline's own negative prompt when
none is given).

Text2World is txt2img (a video from a prompt), Image2World is i2v (`init_img` encoded as the first
latent frame, which the transformer sees as a clean conditioning frame), both Cosmos2_5_PredictBasePipeline.
Video2World, which continues an input clip, needs an input video: not a task here.

The guardrail: the pipeline will not run without NVIDIA's (the NVIDIA Open Model License asks for
it): a model whose folder ships no safety checker gets `cosmos_guardrail.CosmosSafetyChecker`, which
the pipeline builds itself (`pip install cosmos_guardrail`; it fetches its own models from the hub the
first time), and a refused prompt fails the request with the pipeline's message. The engine never
turns it off. The tiny instance, built offline, carries a stand-in (toolkit/models/tiny/cosmos_guardrail.py).

The diffusers weights live on a revision of NVIDIA's repos (`diffusers/base/post-trained`): download
that revision (POST /downloads takes one) and name the folder. The model card's example: 1280x704,
93 frames at 16 fps, 36 steps, CFG 7. The pipeline makes one video per prompt for an input image
(it encodes the image once), so a batch runs one pass per item."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, DENOISER_PREFIXES, SAFETY_CHECKER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE,
                                 ArchSpec, Component, Latents, SampleDefaults, SingleFile, Task, Tiny, Variant)
from toolkit.models.formats import llm_encoders, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

SYSTEM_PROMPT = "You are a helpful assistant who will provide prompts to an image generator."
# Qwen2.5-VL-7B-Instruct's chat template (tokenizer_config.json): messages whose content is a list of parts
QWEN25_VL_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: "
    "{% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video {{ video_count.value }}: "
    "{% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

# the scheduler diffusers' conversion script saves for Cosmos Predict 2.5 (scripts/convert_cosmos_to_diffusers.py)
SCHEDULER_CONFIG = dict(use_karras_sigmas=True, use_flow_sigmas=True, prediction_type="flow_prediction",
                        sigma_max=200.0, sigma_min=0.01)
SCHEDULER_FILE = dict(_class_name="UniPCMultistepScheduler", **SCHEDULER_CONFIG)

TEXT_HIDDEN, TEXT_LAYERS = 32, 2

# -- its files: NVIDIA's checkpoints (ComfyUI's `diffusion_models/cosmos_predict2*`), read by diffusers' converter --
_COSMOS = dict(out_channels=16, attention_head_dim=128, mlp_ratio=4.0, text_embed_dim=1024, adaln_lora_dim=256,
               max_size=[128, 240, 240], patch_size=[1, 2, 2], concat_padding_mask=True, extra_pos_embed_type=None)
# diffusers' conversion script's configs (scripts/convert_cosmos_to_diffusers.py: Cosmos-2.5-Predict-Base-2B/14B)
_PREDICT25 = dict(_COSMOS, in_channels=17, rope_scale=[1.0, 3.0, 3.0], use_crossattn_projection=True,
                  crossattn_proj_in_channels=100352, encoder_hidden_states_channels=1024)
TINY_TRANSFORMER = dict(in_channels=17, out_channels=16, num_attention_heads=2, attention_head_dim=16, num_layers=2,
                        mlp_ratio=2.0, text_embed_dim=TEXT_HIDDEN, adaln_lora_dim=4, max_size=[128, 240, 240],
                        patch_size=[1, 2, 2], rope_scale=[1.0, 3.0, 3.0], concat_padding_mask=True,
                        extra_pos_embed_type=None, use_crossattn_projection=True,
                        crossattn_proj_in_channels=TEXT_LAYERS * TEXT_HIDDEN, encoder_hidden_states_channels=TEXT_HIDDEN)
TRANSFORMER_KNOWN = {"cosmos-predict2.5-2b": dict(_PREDICT25, num_attention_heads=16, num_layers=28),
                     "cosmos-predict2.5-14b": dict(_PREDICT25, num_attention_heads=40, num_layers=36),
                     "tiny": TINY_TRANSFORMER}

_B = r"^transformer_blocks\.(\d+)\."
_ATTN = (("to_q", "q_proj"), ("to_k", "k_proj"), ("to_v", "v_proj"), (r"to_out\.0", "output_proj"),
         ("norm_q", "q_norm"), ("norm_k", "k_norm"))
# diffusers -> NVIDIA's names: the inverse of convert_cosmos_transformer_checkpoint_to_diffusers (Cosmos 2.x)
RENAMES = tuple((_B + rf"{attn}\.{d}\.", rf"blocks.\1.{o}.{n}.")
                for attn, o in (("attn1", "self_attn"), ("attn2", "cross_attn")) for d, n in _ATTN) + (
    (_B + r"ff\.net\.0\.proj\.", r"blocks.\1.mlp.layer1."),
    (_B + r"ff\.net\.2\.", r"blocks.\1.mlp.layer2."),
    (_B + r"norm1\.linear_(\d)\.", r"blocks.\1.adaln_modulation_self_attn.\2."),
    (_B + r"norm2\.linear_(\d)\.", r"blocks.\1.adaln_modulation_cross_attn.\2."),
    (_B + r"norm3\.linear_(\d)\.", r"blocks.\1.adaln_modulation_mlp.\2."),
    (r"^patch_embed\.proj\.", "x_embedder.proj.1."),
    (r"^time_embed\.t_embedder\.", "t_embedder.1."),
    (r"^time_embed\.norm\.", "t_embedding_norm."),
    (r"^norm_out\.linear_(\d)\.", r"final_layer.adaln_modulation.\1."),
    (r"^proj_out\.", "final_layer.linear."),
)


def to_original(state: dict) -> dict:
    """A diffusers CosmosTransformer3DModel state dict in NVIDIA's layout (Cosmos 2.x names; the
    cross-attention projection of 2.5 keeps its name)."""
    from toolkit.models.formats.original_layout import to_original as remap
    return remap(state, RENAMES)


def transformer_signature(view) -> dict:
    if not view.has("x_embedder.proj.1.weight") or not view.has("t_embedding_norm.weight"):
        raise FileKindError("no x_embedder.proj.1 / t_embedding_norm: not a Cosmos Predict2 transformer")
    width, patch_in = view.shape("x_embedder.proj.1.weight")
    return {"width": width, "patch_in": patch_in, "patch_out": view.dim("final_layer.linear.weight"),
            "head_dim": view.dim("blocks.0.self_attn.q_norm.weight"),
            "text_embed_dim": view.dim("blocks.0.cross_attn.k_proj.weight", 1),
            "adaln_lora_dim": view.dim("blocks.0.adaln_modulation_self_attn.1.weight"),
            "mlp": view.dim("blocks.0.mlp.layer1.weight"), "num_layers": view.count(r"blocks\.(\d+)\."),
            "crossattn_in": view.dim("crossattn_proj.0.weight", 1) if view.has("crossattn_proj.0.weight") else None}


def transformer_facts(c: dict) -> dict:
    width = c["num_attention_heads"] * c["attention_head_dim"]
    patch = c["patch_size"][0] * c["patch_size"][1] * c["patch_size"][2]
    return {"width": width, "patch_in": patch * (c["in_channels"] + (1 if c["concat_padding_mask"] else 0)),
            "patch_out": patch * c["out_channels"], "head_dim": c["attention_head_dim"],
            "text_embed_dim": c["text_embed_dim"], "adaln_lora_dim": c["adaln_lora_dim"],
            "mlp": int(width * c["mlp_ratio"]), "num_layers": c["num_layers"],
            "crossattn_in": c["crossattn_proj_in_channels"] if c.get("use_crossattn_projection") else None}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the Cosmos Predict 2.5 transformer", variants={"cosmos-predict2.5-14b": "14b"})


def transformer_file(config: str, label: str) -> SingleFile:
    return SingleFile("convert_cosmos_transformer_checkpoint_to_diffusers", "toolkit.models.archs.cosmos2_5:to_original",
                      anchors=("x_embedder.proj.1.weight", "t_embedding_norm.weight",
                               "blocks.0.self_attn.q_proj.weight"),
                      prefixes=("net.",) + DENOISER_PREFIXES, config=config, kind="cosmos_predict2_dit", label=label)


def tiny_tokenizer():
    from toolkit.models.tiny.tokenizers import PROMPTS, qwen2_tokenizer

    tok = qwen2_tokenizer([f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n{p}<|im_end|>\n"
                           for p in PROMPTS])
    tok.chat_template = QWEN25_VL_CHAT_TEMPLATE
    return tok


def tiny_transformer(b, **over):
    """Two heads of 16; the cross-attention projection takes every text layer (2 x 32 wide) to the
    text width, as the real one takes 28 x 3584 to 1024."""
    from diffusers import CosmosTransformer3DModel

    dims = {**TINY_TRANSFORMER, **over}
    with b.seeded("transformer"):
        return kit.jitter_constants(CosmosTransformer3DModel(**dims).eval())


def _tiny(b):
    from diffusers import UniPCMultistepScheduler

    from toolkit.models.archs.qwen_image import tiny_qwen25vl
    from toolkit.models.tiny.cosmos_guardrail import TinyCosmosGuardrail

    tokenizer, text_encoder = tiny_qwen25vl(b, tiny_tokenizer(), recipe="cosmos_reason1")
    with b.seeded("vae", "wan_vae"):          # the Wan 2.1 VAE, as wan21 builds it
        vae = kit.wan_vae(16)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=tiny_transformer(b),
                scheduler=UniPCMultistepScheduler(**SCHEDULER_CONFIG), safety_checker=TinyCosmosGuardrail())


_REPO = "nvidia/Cosmos-Predict2.5-{}"

SPEC = ArchSpec(
    name="cosmos2_5", modality="video", default_name_or_path=_REPO.format("2B"),
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    pipeline="Cosmos2_5_PredictBasePipeline", output_type="np",
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen2_5"),
        Component("text_encoder", "transformers:Qwen2_5_VLForConditionalGeneration", TEXT_ENCODER,
                  single_file=llm_encoders.QWEN25_VL_7B),
        Component("vae", "AutoencoderKLWan", VAE, single_file=vaes.WAN21_VAE),
        Component("transformer", "CosmosTransformer3DModel", DENOISER, single_file=transformer_file(
            "toolkit.models.archs.cosmos2_5:transformer_config", "Cosmos Predict 2.5 transformer")),
        # none in the folder: the pipeline builds NVIDIA's guardrail (module docstring)
        Component("safety_checker", "ModelMixin", SAFETY_CHECKER, optional=True),
    ),
    tasks=(Task("txt2img", "Cosmos2_5_PredictBasePipeline"), Task("i2v", "Cosmos2_5_PredictBasePipeline")),
    defaults=SampleDefaults(1280, 704, 36, 7.0, num_frames=93, fps=16, output_ext="mp4"),
    variants={"2b": Variant(), "14b": Variant(name_or_path=_REPO.format("14B"))},   # one config each, one VAE
    size_divisor=16,                  # 8x VAE x 2x2 DiT patches
    max_side=1920,                    # its RoPE tables reach 240 latent pixels per axis (max_size)
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.WAN21),
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 7.0,
                      "fps": 8}),
    description="NVIDIA Cosmos Predict 2.5 world model: text- and image-to-video (Cosmos-Reason1 text encoder, "
                "Wan 2.1 VAE, NVIDIA's guardrail)",
    scheduler_config={"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
    batch_arg=None,                   # an input image is encoded for one video (the pipeline indexes it per item)
)
