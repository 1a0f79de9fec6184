"""AuraFlow v0.3 (fal): an MMDiT (4 joint blocks, 32 single blocks, register tokens, a learned
position table of 96x96 patches) over Pile-T5-XL (a UMT5 encoder with a Llama SentencePiece
vocabulary), SDXL's 4-channel VAE (BCHW latents), flow-match Euler with CFG.

Its files: fal's original layout (ComfyUI's all-in-one `checkpoints/aura_flow_0.3.safetensors`, the denoiser
under `model.diffusion_model.`), read with the configs below; the VAE is SDXL's file kind."""
import re

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, SingleFile, Tiny)
from toolkit.models.archs import sdxl
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

# fal/AuraFlow-v0.3 scheduler/scheduler_config.json
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=1.73)
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", **SCHEDULER_CONFIG)

# fal/AuraFlow-v0.3 transformer/config.json; and the tiny factory's
TRANSFORMER_KNOWN = {
    "auraflow-v0.3": dict(sample_size=64, patch_size=2, in_channels=4, out_channels=4, num_mmdit_layers=4,
                          num_single_dit_layers=32, attention_head_dim=256, num_attention_heads=12,
                          joint_attention_dim=2048, caption_projection_dim=3072, pos_embed_max_size=9216),
    "tiny": dict(sample_size=8, patch_size=2, in_channels=4, out_channels=4, num_mmdit_layers=1,
                 num_single_dit_layers=1, attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                 caption_projection_dim=32, pos_embed_max_size=64),
}


def _pos_embed_reach(model: str) -> int:
    """The largest side its learned position table covers: sqrt(pos_embed_max_size) patches of 2x2 on the
    8x VAE latent (past it the centred crop of the table runs off its edge)."""
    side = int(TRANSFORMER_KNOWN[model]["pos_embed_max_size"] ** 0.5)
    return side * TRANSFORMER_KNOWN[model]["patch_size"] * 8


def transformer_signature(view) -> dict:
    """What an AuraFlow file's shapes tell (heads they do not)."""
    if not view.has("init_x_linear.weight") or not view.has("cond_seq_linear.weight"):
        raise FileKindError("no init_x_linear / cond_seq_linear: not an AuraFlow transformer")
    return {"width": view.dim("init_x_linear.weight"), "patch_in": view.dim("init_x_linear.weight", 1),
            "out": view.dim("final_linear.weight"), "pos_embed_max_size": view.dim("positional_encoding", 1),
            "joint_attention_dim": view.dim("cond_seq_linear.weight", 1),
            "caption_projection_dim": view.dim("cond_seq_linear.weight"),
            "num_mmdit_layers": view.count(r"double_layers\.(\d+)\."),
            "num_single_dit_layers": view.count(r"single_layers\.(\d+)\.")}


def transformer_facts(c: dict) -> dict:
    return {"width": c["num_attention_heads"] * c["attention_head_dim"],
            "patch_in": c["in_channels"] * c["patch_size"] ** 2, "out": c["out_channels"] * c["patch_size"] ** 2,
            "pos_embed_max_size": c["pos_embed_max_size"], "joint_attention_dim": c["joint_attention_dim"],
            "caption_projection_dim": c["caption_projection_dim"], "num_mmdit_layers": c["num_mmdit_layers"],
            "num_single_dit_layers": c["num_single_dit_layers"]}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the AuraFlow transformer")


# diffusers -> fal's original names (the inverse of diffusers' converter; formats/original_layout.py)
_J, _S = r"^joint_transformer_blocks\.(\d+)\.", r"^single_transformer_blocks\.(\d+)\."
_MLP = {"linear_1": "c_fc1", "linear_2": "c_fc2", "out_projection": "c_proj"}
RENAMES = (
    (r"^pos_embed\.pos_embed$", "positional_encoding"), (r"^pos_embed\.proj", "init_x_linear"),
    (r"^context_embedder", "cond_seq_linear"), (r"^time_step_proj\.linear_1", "t_embedder.mlp.0"),
    (r"^time_step_proj\.linear_2", "t_embedder.mlp.2"), (r"^proj_out", "final_linear"), (r"^norm_out\.linear", "modF.1"),
    (_J + r"norm1\.linear", r"double_layers.\1.modX.1"), (_J + r"norm1_context\.linear", r"double_layers.\1.modC.1"),
    *((_J + rf"attn\.{d}\.", rf"double_layers.\1.attn.{o}.") for d, o in
      (("to_q", "w2q"), ("to_k", "w2k"), ("to_v", "w2v"), (r"to_out\.0", "w2o"), ("add_q_proj", "w1q"),
       ("add_k_proj", "w1k"), ("add_v_proj", "w1v"), ("to_add_out", "w1o"))),
    *((_J + rf"{ff}\.{d}\.", rf"double_layers.\1.{o}.{_MLP[d]}.") for ff, o in (("ff", "mlpX"), ("ff_context", "mlpC"))
      for d in _MLP),
    (_S + r"norm1\.linear", r"single_layers.\1.modCX.1"),
    *((_S + rf"attn\.{d}\.", rf"single_layers.\1.attn.{o}.") for d, o in
      (("to_q", "w1q"), ("to_k", "w1k"), ("to_v", "w1v"), (r"to_out\.0", "w1o"))),
    *((_S + rf"ff\.{d}\.", rf"single_layers.\1.mlp.{o}.") for d, o in _MLP.items()),
)


def to_original(state: dict) -> dict:
    """A diffusers AuraFlowTransformer2DModel state dict in fal's original layout (the final modulation in
    shift/scale order), as ComfyUI's aura_flow files have it."""
    from toolkit.models.formats.original_layout import to_original as remap
    return remap(state, RENAMES, (), (r"^norm_out\.linear\.",))


def convert_original(checkpoint: dict, **kwargs) -> dict:
    """diffusers' converter (it reads the block index at a fixed place in the key: ComfyUI's prefix is cut first)."""
    from diffusers.loaders.single_file_utils import convert_auraflow_transformer_checkpoint_to_diffusers as convert

    from toolkit.models.formats.at_width import strip
    return convert(strip(checkpoint), **kwargs)


TRANSFORMER_FILE = SingleFile(
    "toolkit.models.archs.auraflow:convert_original", "toolkit.models.archs.auraflow:to_original",
    anchors=("double_layers.0.attn.w2q.weight", "cond_seq_linear.weight", "positional_encoding"),
    config="toolkit.models.archs.auraflow:transformer_config", kind="auraflow_dit", label="AuraFlow transformer")


# Pile-T5's vocabulary is Llama's SentencePiece BPE (byte fallback): <unk> 0, <s> 1, </s> 2; no start token,
# the end token appended, padded with id 1 (ComfyUI's t5_pile config: pad_token_id 1, eos_token_id 2)
PILE_SPECIAL = ("<unk>", "<s>", "</s>")
PILE_VOCAB = 700


def pile_t5_tokenizer():
    """LlamaTokenizer: BPE with byte fallback (the 256 <0xNN> tokens in the vocab), spaces as '▁'; merges
    learned (deterministically) on the tiny prompts."""
    from transformers import LlamaTokenizer

    from toolkit.models.tiny.tokenizers import PROMPTS, learn_bpe

    texts = ["\u2581" + t.replace(" ", "\u2581") for t in PROMPTS]
    counts: dict = {}
    for text in texts:
        for word in re.findall("\u2581*[^\u2581]+|\u2581+", text):   # learn within '▁word' units
            counts[tuple(word)] = counts.get(tuple(word), 0) + 1
    vocab = {tok: i for i, tok in enumerate(PILE_SPECIAL)}
    for i in range(256):
        vocab[f"<0x{i:02X}>"] = len(vocab)
    for ch in sorted({"\u2581", *"".join(texts)}):
        vocab.setdefault(ch, len(vocab))
    merges = learn_bpe(counts, PILE_VOCAB - len(vocab))
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    unk, bos, eos = PILE_SPECIAL
    return LlamaTokenizer(vocab=vocab, merges=merges, unk_token=unk, bos_token=bos, eos_token=eos, pad_token=bos,
                          add_bos_token=False, add_eos_token=True)


def _tiny(b):
    from diffusers import AuraFlowTransformer2DModel

    tokenizer = pile_t5_tokenizer()
    with b.seeded("text_encoder"):
        # Pile-T5-XL: UMT5 blocks, gated GELU
        text_encoder = kit.umt5_encoder(tokenizer, feed_forward_proj="gated-gelu")
    with b.seeded("vae"):                        # SDXL's VAE, as sdxl builds it: the same files
        vae = kit.kl_vae(4, scaling_factor=0.13025, quant_conv=True)
    with b.seeded("transformer"):
        transformer = AuraFlowTransformer2DModel(**TRANSFORMER_KNOWN["tiny"]).eval()
        kit.jitter_constants(transformer)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer,
                scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG))


SPEC = ArchSpec(
    name="auraflow", modality="image", default_name_or_path="fal/AuraFlow-v0.3", pipeline="AuraFlowPipeline",
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="pile_t5"),
        Component("text_encoder", "UMT5EncoderModel", TEXT_ENCODER),
        Component("vae", "AutoencoderKL", VAE, single_file=sdxl.VAE_FILE),        # SDXL's VAE files
        Component("transformer", "AuraFlowTransformer2DModel", DENOISER, single_file=TRANSFORMER_FILE),
    ),
    # the model card: 50 steps at CFG 3.5 (its example at 1536x768; the pipeline's default size 1024^2)
    defaults=SampleDefaults(1024, 1024, 50, 3.5),
    max_side=_pos_embed_reach("auraflow-v0.3"),
    latents=Latents("BCHW", 4, format=latent_formats.SDXL),
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 3.5}),
    description="AuraFlow v0.3 (MMDiT; Pile-T5-XL text encoder, SDXL's VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
)
