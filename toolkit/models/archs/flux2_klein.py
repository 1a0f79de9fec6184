"""FLUX.2 [klein]: the Flux.2 DiT over a Qwen3 text encoder (hidden states 9, 18 and 27 stacked),
the 32-channel Flux.2 VAE whose latents are patchified 2x2 into 128-channel tokens (channel
c*4 + dy*2 + dx, as toolkit/models/latents.py unpacks). The distilled models (4 steps) ignore
guidance; the base models run CFG against an empty prompt. `is_distilled` is the repo's
model_index.json setting. The common call (no negative prompt: CFG, on base models only, is
against ""); the edit task passes up to 4 reference images (ctrl_img, ctrl_img_1..3) as `image`.
Inpaint (Flux2KleinInpaintPipeline) repaints the mask of `init_img`, optionally after one reference
image (ctrl_img, its `image_reference`); its output has the init image's size, which load_image made
the request's (past 1024x1024 pixels the pipeline scales the image down to that area first).

Its files: BFL's original layout (ComfyUI's `diffusion_models/flux-2-klein-4b.safetensors`), read with
the configs below. A file tells 4B from 9B, not a base model from its distilled one (the same
shapes): the file's variant is the distilled one, `model.variant: base-4b` says otherwise.
"""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, SingleFile, Task, Tiny, Variant)
from toolkit.models.base_model import BaseModel
from toolkit.models.formats import llm_encoders, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=True, base_shift=0.5,
                        max_shift=1.15, base_image_seq_len=256, max_image_seq_len=4096,
                        time_shift_type="exponential")     # the pipeline computes its own mu
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", **SCHEDULER_CONFIG)

_KLEIN = dict(patch_size=1, in_channels=128, out_channels=None, attention_head_dim=128, timestep_guidance_channels=256,
              mlp_ratio=3.0, axes_dims_rope=[32, 32, 32, 32], rope_theta=2000, guidance_embeds=False)
# black-forest-labs/FLUX.2-klein-4B and -9B transformer/config.json (the base models': the same); the tiny factory's
TRANSFORMER_KNOWN = {
    "flux2-klein-4b": dict(_KLEIN, num_layers=5, num_single_layers=20, num_attention_heads=24, joint_attention_dim=7680),
    "flux2-klein-9b": dict(_KLEIN, num_layers=8, num_single_layers=24, num_attention_heads=32,
                           joint_attention_dim=12288),
    "tiny": dict(patch_size=1, in_channels=128, out_channels=None, num_layers=1, num_single_layers=2,
                 attention_head_dim=16, num_attention_heads=2, joint_attention_dim=48, timestep_guidance_channels=256,
                 mlp_ratio=3.0, axes_dims_rope=[4, 4, 4, 4], rope_theta=2000, eps=1e-6, guidance_embeds=False),
}


def transformer_signature(view) -> dict:
    if not view.has("single_stream_modulation.lin.weight"):
        raise FileKindError("no single_stream_modulation.lin.weight: not a FLUX.2 transformer")
    return {"width": view.dim("img_in.weight"), "in_channels": view.dim("img_in.weight", 1),
            "out": view.dim("final_layer.linear.weight"), "joint_attention_dim": view.dim("txt_in.weight", 1),
            "timestep_guidance_channels": view.dim("time_in.in_layer.weight", 1),
            "num_layers": view.count(r"double_blocks\.(\d+)\."),
            "num_single_layers": view.count(r"single_blocks\.(\d+)\."),
            "mlp": view.dim("double_blocks.0.img_mlp.0.weight"),
            "guidance_embeds": view.has("guidance_in.in_layer.weight")}


def transformer_facts(c: dict) -> dict:
    width = c["num_attention_heads"] * c["attention_head_dim"]
    return {"width": width, "in_channels": c["in_channels"],
            "out": (c.get("out_channels") or c["in_channels"]) * c.get("patch_size", 1) ** 2,
            "joint_attention_dim": c["joint_attention_dim"],
            "timestep_guidance_channels": c["timestep_guidance_channels"],
            "num_layers": c["num_layers"], "num_single_layers": c["num_single_layers"],
            "mlp": 2 * int(width * c["mlp_ratio"]), "guidance_embeds": c["guidance_embeds"]}     # SwiGLU: 2 halves


def transformer_config(view):
    same = "the base (undistilled) model has the same shapes: model.variant {} says it is"
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the FLUX.2 [klein] transformer",
                      variants={"flux2-klein-4b": "4b", "flux2-klein-9b": "9b"},
                      notes={"flux2-klein-4b": (same.format("base-4b"),), "flux2-klein-9b": (same.format("base-9b"),)})


def convert_original(checkpoint: dict, **kwargs) -> dict:
    """diffusers' converter (it splits nothing at a fixed width; it does not strip ComfyUI's prefix)."""
    from diffusers.loaders.single_file_utils import convert_flux2_transformer_checkpoint_to_diffusers as convert

    from toolkit.models.formats.at_width import strip
    return convert(strip(checkpoint), **kwargs)


_D = r"^transformer_blocks\.(\d+)\."
_S = r"^single_transformer_blocks\.(\d+)\."
RENAMES = (
    (r"^x_embedder", "img_in"), (r"^context_embedder", "txt_in"), (r"^proj_out", "final_layer.linear"),
    (r"^norm_out\.linear", "final_layer.adaLN_modulation.1"),
    (r"^time_guidance_embed\.timestep_embedder\.linear_1", "time_in.in_layer"),
    (r"^time_guidance_embed\.timestep_embedder\.linear_2", "time_in.out_layer"),
    (r"^time_guidance_embed\.guidance_embedder\.linear_1", "guidance_in.in_layer"),
    (r"^time_guidance_embed\.guidance_embedder\.linear_2", "guidance_in.out_layer"),
    (r"^(double_stream_modulation_img|double_stream_modulation_txt|single_stream_modulation)\.linear", r"\1.lin"),
    (_D + r"attn\.norm_q\.weight", r"double_blocks.\1.img_attn.norm.query_norm.scale"),
    (_D + r"attn\.norm_k\.weight", r"double_blocks.\1.img_attn.norm.key_norm.scale"),
    (_D + r"attn\.norm_added_q\.weight", r"double_blocks.\1.txt_attn.norm.query_norm.scale"),
    (_D + r"attn\.norm_added_k\.weight", r"double_blocks.\1.txt_attn.norm.key_norm.scale"),
    (_D + r"attn\.to_out\.0", r"double_blocks.\1.img_attn.proj"),
    (_D + r"attn\.to_add_out", r"double_blocks.\1.txt_attn.proj"),
    (_D + r"ff\.linear_in", r"double_blocks.\1.img_mlp.0"), (_D + r"ff\.linear_out", r"double_blocks.\1.img_mlp.2"),
    (_D + r"ff_context\.linear_in", r"double_blocks.\1.txt_mlp.0"),
    (_D + r"ff_context\.linear_out", r"double_blocks.\1.txt_mlp.2"),
    (_S + r"attn\.to_qkv_mlp_proj", r"single_blocks.\1.linear1"), (_S + r"attn\.to_out", r"single_blocks.\1.linear2"),
    (_S + r"attn\.norm_q\.weight", r"single_blocks.\1.norm.query_norm.scale"),
    (_S + r"attn\.norm_k\.weight", r"single_blocks.\1.norm.key_norm.scale"),
)
FUSED = ((_D, ("attn.to_q", "attn.to_k", "attn.to_v"), r"double_blocks.\1.img_attn.qkv"),
         (_D, ("attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"), r"double_blocks.\1.txt_attn.qkv"))


def to_original(state: dict) -> dict:
    """A diffusers Flux2Transformer2DModel state dict in BFL's original layout (fused double-block qkv,
    the final modulation in shift/scale order), as ComfyUI's FLUX.2 files have it."""
    from toolkit.models.formats.original_layout import to_original as remap
    return remap(state, RENAMES, FUSED, (r"^norm_out\.linear\.",))


TRANSFORMER_FILE = SingleFile(
    "toolkit.models.archs.flux2_klein:convert_original", "toolkit.models.archs.flux2_klein:to_original",
    anchors=("double_blocks.0.img_attn.qkv.weight", "single_stream_modulation.lin.weight"),
    config="toolkit.models.archs.flux2_klein:transformer_config", kind="flux2_dit", label="FLUX.2 [klein] transformer")


class Flux2KleinModel(BaseModel):
    def input_kwargs(self, gen) -> dict:
        """Inpaint: `image` stays the init image; the reference (ctrl_img) is the pipeline's `image_reference`."""
        kw = super().input_kwargs(gen)
        if self.task_of(gen).name == "inpaint" and gen.ctrl_img:
            from toolkit.images import load_image
            kw["image_reference"] = load_image(gen.ctrl_img)
            kw["image"] = load_image(gen.init_img, gen.width, gen.height, gen.resize_mode)
        return kw

    def pipeline_config(self) -> dict:
        """A file carries no model_index.json: `is_distilled` is then the variant's (the base ones are not)."""
        config = super().pipeline_config()
        config.setdefault("is_distilled", not (self.model_config.variant or "").startswith("base"))
        return config
TAPS = (9, 18, 27)          # the pipeline's text_encoder_out_layers
TEXT_HIDDEN = 16


def tiny_vae():
    """AutoencoderKLFlux2: 4 blocks (8x), 32 latent channels, 2x2 patchify, batch-norm statistics."""
    from diffusers import AutoencoderKLFlux2

    return AutoencoderKLFlux2(block_out_channels=(8, 8, 16, 16), layers_per_block=1, norm_num_groups=4,
                              latent_channels=32, sample_size=64, patch_size=(2, 2)).eval()


def _tiny(b):
    from diffusers import Flux2Transformer2DModel
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = kit.qwen2_tokenizer()
    with b.seeded("text_encoder", "qwen3_klein"):
        # the pipeline reads hidden states 9, 18 and 27: 28 layers of width 16
        text_encoder = Qwen3ForCausalLM(Qwen3Config(
            vocab_size=len(tokenizer), hidden_size=TEXT_HIDDEN, intermediate_size=2 * TEXT_HIDDEN,
            num_hidden_layers=max(TAPS) + 1, num_attention_heads=2, num_key_value_heads=1, head_dim=8,
            max_position_embeddings=40960, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id)).eval()
    with b.seeded("vae", "flux2_vae"):
        vae = tiny_vae()
    with b.seeded("transformer"):
        transformer = Flux2Transformer2DModel(
            patch_size=1, in_channels=128, num_layers=1, num_single_layers=2, attention_head_dim=16,
            num_attention_heads=2, joint_attention_dim=len(TAPS) * TEXT_HIDDEN, timestep_guidance_channels=256,
            mlp_ratio=3.0, axes_dims_rope=(4, 4, 4, 4), guidance_embeds=False).eval()
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG))


_DISTILLED = {"num_inference_steps": 4, "guidance_scale": 1.0}     # the klein model cards
_BASE = {"num_inference_steps": 50, "guidance_scale": 4.0}         # diffusers' Flux2KleinPipeline example (base)

SPEC = ArchSpec(
    name="flux2_klein", modality="image", default_name_or_path="black-forest-labs/FLUX.2-klein-4B",
    pipeline="Flux2KleinPipeline", holder=Flux2KleinModel,
    # one pipeline for both: `image` (up to 4 references) makes it an edit; inpaint may take one reference
    tasks=(Task("txt2img", "Flux2KleinPipeline"),
           Task("edit", "Flux2KleinPipeline", takes=("ctrl_img_1", "ctrl_img_2", "ctrl_img_3")),
           Task("inpaint", "Flux2KleinInpaintPipeline", takes=("ctrl_img",), strength=0.8)),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen3"),
        Component("text_encoder", "transformers:Qwen3ForCausalLM", TEXT_ENCODER, single_file=llm_encoders.QWEN3_KLEIN_LM),
        Component("vae", "AutoencoderKLFlux2", VAE, single_file=vaes.FLUX2_VAE),
        Component("transformer", "Flux2Transformer2DModel", DENOISER, single_file=TRANSFORMER_FILE),
    ),
    defaults=SampleDefaults(1024, 1024, 4, 1.0), uses_negative_prompt=False,
    variants={"4b": Variant(_DISTILLED, name_or_path="black-forest-labs/FLUX.2-klein-4B"),
              "9b": Variant(_DISTILLED, name_or_path="black-forest-labs/FLUX.2-klein-9B"),
              "base-4b": Variant(_BASE, name_or_path="black-forest-labs/FLUX.2-klein-base-4B"),
              "base-9b": Variant(_BASE, name_or_path="black-forest-labs/FLUX.2-klein-base-9B")},
    # scheduler.step sees (B, tokens, 128): 32 VAE channels patchified 2x2 (c*4 + dy*2 + dx)
    latents=Latents("packed", 32, patch=2, format=latent_formats.FLUX2),
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 1.0},
              pipeline_kwargs={"is_distilled": True}),
    description="FLUX.2 [klein] (Qwen3 text encoder, 32-ch Flux.2 VAE, 128-ch tokens); distilled or base",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # FlowMatchHeun's set_timesteps takes no sigmas (DPM++ runs: the pipeline drops them for flow-sigma schedulers)
    samplers_excluded=("heun",),
    # FirstBlockCache fails on its double-stream blocks in diffusers 0.42.1; no MagCache ratios
    step_caches={"taylorseer": {}, "faster": {}},
)
