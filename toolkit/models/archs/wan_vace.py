"""Wan 2.1 VACE (all-in-one video creation and editing): Wan 2.1's 3D DiT with VACE context blocks that
read a control video, its mask and reference images (encoded by the Wan VAE, 96 channels); UMT5-XXL, the
Wan 2.1 VAE and UniPC as wan21 has them (one pair in the pool).

Tasks, as the VACE pipeline runs them (one set of weights):
- txt2img: text-to-video (no control: a zero video, all of it generated);
- v2v: `init_video` is the control or source video (pose, depth, a sketch, or the frames to keep), its
  first `num_frames` frames at the request size; `mask_video` (optional) says where to generate (white)
  and what to keep (black), as in VACE's inpainting and outpainting; reference images may come with it;
- edit: reference-to-video: `ctrl_img` (and ctrl_img_1..3) are the subjects the video shows.

1.3B and 14B are variants, each its own repo; the model cards run 81 frames at 16 fps (1.3B: 832x480,
14B also 1280x720), 50 steps, guidance 5.

Its files: the original Wan layout with its VACE blocks (ComfyUI's
`diffusion_models/wan2.1_vace_14B_fp16.safetensors`): `vace_blocks.N.before_proj` / `after_proj` and
`vace_patch_embedding` beside Wan's own names, read with the configs below."""
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import ArchSpec, Latents, SampleDefaults, Task, Tiny, Variant
from toolkit.models.archs.wan21 import (COMPONENTS, GGUF, LORA, TINY_WAN, WAN21_1_3B, WAN_14B, WAN_DECODE_FEATURES, WAN_FILE,
                                        tiny_umt5, to_original, transformer_facts, wan_signature,
                                        unipc_flow_config, unipc_flow_scheduler)
from toolkit.models.base_model import BaseModel
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit

# Wan-AI/Wan2.1-VACE-1.3B-diffusers and -14B-diffusers transformer/config.json: the T2V models with VACE
# blocks beside every second (1.3B) or fifth (14B) block, taking 96 context channels; and the tiny factory's
VACE_1_3B = dict(WAN21_1_3B, vace_layers=list(range(0, 30, 2)), vace_in_channels=96)
VACE_14B = dict(WAN_14B, vace_layers=list(range(0, 40, 5)), vace_in_channels=96)
TINY_VACE = dict(TINY_WAN, vace_layers=[0, 1], vace_in_channels=96)
TRANSFORMER_KNOWN = {"wan2.1-vace-1.3b": VACE_1_3B, "wan2.1-vace-14b": VACE_14B, "tiny": TINY_VACE}


def transformer_signature_vace(view) -> dict:
    if not view.has("vace_patch_embedding.weight"):
        raise FileKindError("no vace_patch_embedding: a Wan transformer without VACE blocks")
    return {**wan_signature(view), "vace_in_channels": view.dim("vace_patch_embedding.weight", 1),
            "vace_blocks": view.count(r"vace_blocks\.(\d+)\.")}


def transformer_facts_vace(c: dict) -> dict:
    return {**transformer_facts(c), "vace_in_channels": c["vace_in_channels"], "vace_blocks": len(c["vace_layers"])}


def transformer_config(view):
    return from_known(transformer_signature_vace(view), TRANSFORMER_KNOWN, transformer_facts_vace,
                      "the Wan 2.1 VACE transformer")


def to_original_vace(state: dict) -> dict:
    """A diffusers WanVACETransformer3DModel state dict in the original layout (Wan's names, the VACE
    blocks' before_proj / after_proj)."""
    vace = {k: t for k, t in state.items() if k.startswith("vace_blocks.")}
    out = to_original({k: t for k, t in state.items() if k not in vace})
    renamed = to_original({k.replace(".proj_in.", ".before_proj.").replace(".proj_out.", ".after_proj."): t
                           for k, t in vace.items()})
    return {**out, **renamed}


VACE_COMPONENTS = COMPONENTS[:-1] + (replace(
    COMPONENTS[-1], cls="WanVACETransformer3DModel",
    single_file=replace(WAN_FILE, original="toolkit.models.archs.wan_vace:to_original_vace",
                        anchors=WAN_FILE.anchors + ("vace_patch_embedding.weight",), kind="wan_vace_dit",
                        config="toolkit.models.archs.wan_vace:transformer_config",
                        label="Wan 2.1 VACE transformer")),)


class WanVaceModel(BaseModel):
    def input_kwargs(self, gen) -> dict:
        """The references as VACE names them (`reference_images`, a list); the video and its mask as
        the base holder loads them (`video`, `mask`)."""
        kw = super().input_kwargs(gen)
        refs = kw.pop("image", None)
        if refs is not None:
            kw["reference_images"] = refs if isinstance(refs, list) else [refs]
        return kw


def _tiny(b):
    from diffusers import WanVACETransformer3DModel

    tokenizer, text_encoder = tiny_umt5(b)          # the very UMT5 and VAE wan21 has (a shared pair)
    with b.seeded("vae", "wan_vae"):
        vae = kit.wan_vae(16)
    with b.seeded("transformer"):
        transformer = WanVACETransformer3DModel(**{**TINY_VACE, "patch_size": (1, 2, 2)}).eval()
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, scheduler=unipc_flow_scheduler(3.0),
                transformer=transformer)


# three references at most: the pipeline pads the mask with one zero frame per reference, sliced from the
# latent frames, so more references than latent frames fail (a 9-frame clip has 3)
_REFERENCES = ("ctrl_img_1", "ctrl_img_2")

SPEC = ArchSpec(
    name="wan_vace", modality="video", default_name_or_path="Wan-AI/Wan2.1-VACE-1.3B-diffusers",
    pipeline="WanVACEPipeline", holder=WanVaceModel, components=VACE_COMPONENTS,
    tasks=(Task("txt2img", "WanVACEPipeline"),
           Task("v2v", "WanVACEPipeline", takes=("mask_video", "ctrl_img") + _REFERENCES),
           Task("edit", "WanVACEPipeline", takes=_REFERENCES)),
    pipeline_init_kwargs={"transformer_2": None}, output_type="np",
    defaults=SampleDefaults(832, 480, 50, 5.0, num_frames=81, fps=16, output_ext="mp4"),
    variants={"1.3b": Variant(),
              "14b": Variant(name_or_path="Wan-AI/Wan2.1-VACE-14B-diffusers")},
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.WAN21), decode_features=WAN_DECODE_FEATURES,
    scheduler_file=unipc_flow_config(3.0),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 5.0,
                      "fps": 8}),
    description="Wan 2.1 VACE: text-to-video, control/source video to video with a mask, reference to video",
    # ComfyUI-GGUF's wan files (QuantStack's VACE ones): Wan's row, its wide tiny with one VACE block
    gguf=replace(GGUF, anchor="vace_patch_embedding.weight", tiny={**GGUF.tiny, "vace_layers": [0]}),
    scheduler_config={"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
    batch_arg=None,                 # the VACE pipeline makes one video per call (it refuses more)
    lora=replace(LORA, markers=()),     # a Wan LoRA file is listed as wan21's
)
