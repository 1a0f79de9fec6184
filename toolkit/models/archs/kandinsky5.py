"""Kandinsky 5.0 Video (Lite 2B, Pro 19B): a cross-attention DiT over Qwen2.5-VL-7B (last hidden state of
the prompt in a video-describing system template, its first 128 tokens dropped) and CLIP-L (pooled,
added to the time embedding), the HunyuanVideo VAE (16 channels, 8x spatial, 4x temporal); flow
matching with true CFG (the pipeline's own negative prompt when none is given). The scheduler steps
the latents channels last, (batch, frame, row, column, channel): `BFHWC`.

Image-to-video is another checkpoint of the same shape (kandinsky5_i2v), not a task over these weights:
every Kandinsky 5 video transformer takes 33 channels (visual_cond: the noise, the first frame's latents
and a mask), which text-to-video leaves zero.

Text-to-video makes one video per prompt whatever it is asked (Kandinsky5T2VPipeline encodes the
prompt once per prompt, not per video): a batch runs one pass per item.

The tiny text encoders are shared with kandinsky5_i2v, kandinsky5_image and kandinsky5_edit (every
Kandinsky 5 model ships the same Qwen2.5-VL and CLIP-L); its CLIP-L is Flux's recipe, its VAE
hunyuan_video's."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, PROCESSOR, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component,
                                 Latents, SampleDefaults, SingleFile, Tiny, Variant)
from toolkit.models.formats import clip, llm_encoders, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

# the pipelines' prompt templates (diffusers' own constants) and the leading tokens each drops
VIDEO_TEMPLATE = "\n".join([
    "<|im_start|>system\nYou are a prompt engineer. Describe the video in detail.",
    "Describe how the camera moves or shakes, describe the zoom and view angle, whether it follows the objects.",
    "Describe the location of the video, main characters or objects and their action.",
    "Describe the dynamism of the video and presented actions.",
    "Name the visual style of the video: whether it is a professional footage, user generated content, some kind of "
    "animation, video game or scren content.",
    "Describe the visual effects, postprocessing and transitions if they are presented in the video.",
    "Pay attention to the order of key actions shown in the scene.<|im_end|>",
    "<|im_start|>user\n{}<|im_end|>"])
IMAGE_TEMPLATE = ("<|im_start|>system\nYou are a prompt engineer. Describe the image by detailing the color, shape, "
                  "size, texture, quantity, text, spatial relationships of the objects and background:<|im_end|>\n"
                  "<|im_start|>user\n{}<|im_end|>")
EDIT_TEMPLATE = ("<|im_start|>system\nYou are a prompt engineer. Based on the provided source image (first image) and "
                 "target image (second image), create an interesting text prompt that can be used together with the "
                 "source image to create the target image:<|im_end|><|im_start|>user{}<|vision_start|><|image_pad|>"
                 "<|vision_end|><|im_end|>")
PREFIX_TOKENS = {VIDEO_TEMPLATE: 128, IMAGE_TEMPLATE: 40, EDIT_TEMPLATE: 54}
# words the tiny vocabulary would learn whole, left split (the real Qwen vocabulary splits the first three),
# so each template's fixed part is as many tokens as its pipeline drops
UNMERGED = ("Ġscren", "Ġpostprocessing", "Ġdynamism", "Ġprovided", "Ġtarget", "Ġinteresting", "Ġtogether")

# flow matching; the shift (the original code's scheduler_scale): 5 for the 5-second models (FastVideo's
# Kandinsky 5 config), 10 for the 10-second ones (the original repo's configs)
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", num_train_timesteps=1000, shift=5.0)
TEN_SECONDS = {"num_frames": 241}
LONG_SHIFT = {"shift": 10.0}

TEXT_HIDDEN = 32


def tiny_qwen_tokenizer():
    from toolkit.models.tiny.tokenizers import PROMPTS, qwen2_tokenizer
    return qwen2_tokenizer([t.format(p) for t in PREFIX_TOKENS for p in PROMPTS], unmerged=UNMERGED,
                           prefixes={t.split("{}")[0]: n for t, n in PREFIX_TOKENS.items()})


def tiny_text_encoders(b) -> dict:
    """What every Kandinsky 5 model ships alike: Qwen2.5-VL (its processor as `tokenizer`: the edit
    model shows it the image) and CLIP-L (Flux's recipe: the same openai/clip-vit-large-patch14)."""
    from toolkit.models.archs.qwen_image import tiny_qwen25vl
    from toolkit.models.archs.qwen_image_edit import qwen2vl_processor

    tok, text_encoder = tiny_qwen25vl(b, tiny_qwen_tokenizer(), recipe="kandinsky5_qwen2_5_vl")
    tokenizer_2 = kit.clip_tokenizer()
    with b.seeded("text_encoder_2", "clip_l"):
        text_encoder_2 = kit.clip_text_encoder(tokenizer_2)
    return dict(tokenizer=qwen2vl_processor(tok), text_encoder=text_encoder, tokenizer_2=tokenizer_2,
                text_encoder_2=text_encoder_2)


# the transformer configs (the Diffusers repos' transformer/config.json: the original repo's configs/*.yaml dit_params):
# Lite video 2B, Pro video 19B (T2V and I2V), Image Lite 6B (T2I 16 input channels, I2I 33); and the tiny factory's
_DIT = dict(in_visual_dim=16, out_visual_dim=16, in_text_dim=3584, in_text_dim2=768, patch_size=[1, 2, 2])
LITE_VIDEO = dict(_DIT, time_dim=512, model_dim=1792, ff_dim=7168, num_text_blocks=2, num_visual_blocks=32,
                  axes_dims=[16, 24, 24], visual_cond=True)
PRO_VIDEO = dict(_DIT, time_dim=1024, model_dim=4096, ff_dim=16384, num_text_blocks=4, num_visual_blocks=60,
                 axes_dims=[32, 48, 48], visual_cond=True)
LITE_IMAGE = dict(_DIT, time_dim=512, model_dim=2560, ff_dim=10240, num_text_blocks=2, num_visual_blocks=50,
                  axes_dims=[32, 48, 48], visual_cond=False)
TINY_DIT = dict(in_visual_dim=16, out_visual_dim=16, in_text_dim=TEXT_HIDDEN, in_text_dim2=TEXT_HIDDEN, time_dim=32,
                patch_size=[1, 2, 2], model_dim=32, ff_dim=64, num_text_blocks=1, num_visual_blocks=2,
                axes_dims=[4, 6, 6], visual_cond=True)
TRANSFORMER_KNOWN = {"kandinsky5-lite-video": LITE_VIDEO, "kandinsky5-pro-video": PRO_VIDEO, "tiny": TINY_DIT}


def transformer_signature(view) -> dict:
    """What a Kandinsky 5 file's shapes tell (the original checkpoints' names are diffusers' own)."""
    if not view.has("visual_embeddings.in_layer.weight") or not view.has("text_embeddings.in_layer.weight"):
        raise FileKindError("no visual_embeddings / text_embeddings: not a Kandinsky 5 transformer")
    return {"model_dim": view.dim("visual_embeddings.in_layer.weight"),
            "visual_in": view.dim("visual_embeddings.in_layer.weight", 1),
            "visual_out": view.dim("out_layer.out_layer.weight"),
            "in_text_dim": view.dim("text_embeddings.in_layer.weight", 1),
            "in_text_dim2": view.dim("pooled_text_embeddings.in_layer.weight", 1),
            "time_dim": view.dim("time_embeddings.out_layer.weight"),
            "ff_dim": view.dim("visual_transformer_blocks.0.feed_forward.in_layer.weight"),
            "head_dim": view.dim("visual_transformer_blocks.0.self_attention.query_norm.weight"),
            "num_text_blocks": view.count(r"text_transformer_blocks\.(\d+)\."),
            "num_visual_blocks": view.count(r"visual_transformer_blocks\.(\d+)\.")}


def transformer_facts(c: dict) -> dict:
    patch = c["patch_size"][0] * c["patch_size"][1] * c["patch_size"][2]
    visual_in = 2 * c["in_visual_dim"] + 1 if c["visual_cond"] else c["in_visual_dim"]
    return {"model_dim": c["model_dim"], "visual_in": patch * visual_in, "visual_out": patch * c["out_visual_dim"],
            "in_text_dim": c["in_text_dim"], "in_text_dim2": c["in_text_dim2"], "time_dim": c["time_dim"],
            "ff_dim": c["ff_dim"], "head_dim": sum(c["axes_dims"]), "num_text_blocks": c["num_text_blocks"],
            "num_visual_blocks": c["num_visual_blocks"]}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the Kandinsky 5 video transformer", variants={"kandinsky5-pro-video": "pro-sft-5s"},
                      notes={"kandinsky5-pro-video": ("Kandinsky 5 Pro I2V has the same shapes: model.arch "
                                                      "kandinsky5_i2v reads it as image-to-video",)})


def transformer_file(config: str, label: str) -> SingleFile:
    """ComfyUI's Kandinsky 5 files (`diffusion_models/kandinsky5lite_t2v_sft_5s.safetensors`, the original
    checkpoints): diffusers' own names, nothing to convert; `config` tells the arch's shapes apart."""
    return SingleFile(None, anchors=("visual_embeddings.in_layer.weight", "text_embeddings.in_layer.weight",
                                     "visual_transformer_blocks.0.visual_modulation.out_layer.weight"),
                      config=config, kind="kandinsky5_dit", label=label)


TRANSFORMER_FILE = transformer_file("toolkit.models.archs.kandinsky5:transformer_config", "Kandinsky 5 video transformer")


def tiny_transformer(b, **over):
    """Two heads of 16 (RoPE axes 4+6+6), 2x2 patches over 16 latent channels; `visual_cond` (the
    first-frame latents and mask beside the noise) as the video checkpoints have it."""
    from diffusers import Kandinsky5Transformer3DModel

    dims = {**TINY_DIT, **over}
    with b.seeded("transformer"):
        return kit.jitter_constants(Kandinsky5Transformer3DModel(**dims).eval())


def tiny_video_shared(b) -> dict:
    """The text encoders, VAE and scheduler the T2V and I2V checkpoints ship alike."""
    from toolkit.models.archs.hunyuan_video import tiny_vae

    return dict(tiny_text_encoders(b), vae=tiny_vae(b), scheduler=kit.flow_match_scheduler(
        **{k: v for k, v in SCHEDULER_FILE.items() if k != "_class_name"}))


def _tiny(b):
    return dict(tiny_video_shared(b), transformer=tiny_transformer(b))


TEXT_COMPONENTS = (
    Component("scheduler", "SchedulerMixin", SCHEDULER),
    Component("tokenizer", "transformers:Qwen2VLProcessor", PROCESSOR),
    Component("tokenizer_2", "PreTrainedTokenizerBase", TOKENIZER, vocab="clip_l"),
    Component("text_encoder", "transformers:Qwen2_5_VLForConditionalGeneration", TEXT_ENCODER,
              single_file=llm_encoders.QWEN25_VL_7B),
    Component("text_encoder_2", "CLIPTextModel", TEXT_ENCODER, single_file=clip.CLIP_L),
)

COMPONENTS = TEXT_COMPONENTS + (
    Component("vae", "AutoencoderKLHunyuanVideo", VAE, single_file=vaes.HUNYUAN_VIDEO_VAE),
    Component("transformer", "Kandinsky5Transformer3DModel", DENOISER, single_file=TRANSFORMER_FILE),
)

_REPO = "kandinskylab/Kandinsky-5.0-{}-Diffusers"
# the original repo's configs: Lite 5 s / 10 s at 768x512 (50 steps, CFG 5; nocfg: CFG 1; distilled: 16 steps,
# CFG 1), Pro at 1024x768 (the diffusers docs' example); 121 frames (241 for 10 s) at 24 fps
VARIANTS = {
    "lite-sft-5s": Variant(name_or_path=_REPO.format("T2V-Lite-sft-5s")),
    "lite-sft-10s": Variant(TEN_SECONDS, name_or_path=_REPO.format("T2V-Lite-sft-10s"), scheduler=LONG_SHIFT),
    "lite-nocfg-5s": Variant({"guidance_scale": 1.0}, name_or_path=_REPO.format("T2V-Lite-nocfg-5s")),
    "lite-nocfg-10s": Variant({**TEN_SECONDS, "guidance_scale": 1.0}, name_or_path=_REPO.format("T2V-Lite-nocfg-10s"),
                              scheduler=LONG_SHIFT),
    "lite-distilled16steps-5s": Variant({"num_inference_steps": 16, "guidance_scale": 1.0},
                                        name_or_path=_REPO.format("T2V-Lite-distilled16steps-5s")),
    "lite-distilled16steps-10s": Variant({**TEN_SECONDS, "num_inference_steps": 16, "guidance_scale": 1.0},
                                         name_or_path=_REPO.format("T2V-Lite-distilled16steps-10s"),
                                         scheduler=LONG_SHIFT),
    "lite-pretrain-5s": Variant(name_or_path=_REPO.format("T2V-Lite-pretrain-5s")),
    "lite-pretrain-10s": Variant(TEN_SECONDS, name_or_path=_REPO.format("T2V-Lite-pretrain-10s"), scheduler=LONG_SHIFT),
    "pro-sft-5s": Variant({"width": 1024, "height": 768}, name_or_path=_REPO.format("T2V-Pro-sft-5s")),
}

SPEC = ArchSpec(
    name="kandinsky5", modality="video", default_name_or_path=_REPO.format("T2V-Lite-sft-5s"),
    pipeline="Kandinsky5T2VPipeline", output_type="np",
    components=COMPONENTS,
    defaults=SampleDefaults(768, 512, 50, 5.0, num_frames=121, fps=24, output_ext="mp4"),
    variants=VARIANTS,
    size_divisor=16,                  # 8x VAE x 2x2 DiT patches
    max_side=2048,                    # its 3D RoPE tables hold 128 positions per axis, one per 16 px
    latents=Latents("BFHWC", 16, spatial=8, temporal=4, format=latent_formats.HUNYUAN_VIDEO),
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 5.0,
                      "fps": 8}),
    description="Kandinsky 5.0 Video Lite / Pro text-to-video (Qwen2.5-VL + CLIP-L, HunyuanVideo VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    batch_arg=None,                   # the T2V pipeline encodes each prompt once, for one video
)
