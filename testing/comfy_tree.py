"""A tiny ComfyUI install, offline, with the files its workflows name (testing/workflows/*.json):

    ComfyUI/
      comfy/sd1_tokenizer, comfy/text_encoders/t5_tokenizer      ComfyUI's tokenizer folders
      models/checkpoints/sdxl_tiny.safetensors                    an SDXL all-in-one checkpoint
      models/diffusion_models/flux_tiny.safetensors               a Flux denoiser alone
      models/text_encoders/clip_l.safetensors, t5xxl_fp16.safetensors
      models/vae/ae.safetensors                                   Flux's VAE
      models/diffusion_models/wan2.1_t2v_1.3B_fp16.safetensors    a Wan 2.1 denoiser alone
      models/text_encoders/umt5_xxl_fp8_e4m3fn_scaled.safetensors  its UMT5 (ComfyUI's scaled FP8 layout,
                                                                  the SentencePiece model embedded)
      models/vae/wan_2.1_vae.safetensors                          Wan 2.1's VAE
      models/loras/sdxl_lora.safetensors                          a LoRA of the SDXL checkpoint
      input/example.png, input/mask.png                           LoadImage's / LoadImageMask's files

each written from the tiny models (toolkit/models/tiny) in the layout people download, as
test_files_comfyui.py and test_files_sd.py write theirs. Written once per folder (a marker file says
it is complete), so a module-scoped fixture pays for it once.

    root = write_tree(base, tiny)        # tiny(arch) -> the tiny model's folder (conftest's `tiny`)
    files = ComfyFiles([root], os.path.join(root, "input"))
"""
import os
import shutil

from testing.fixtures import input_image, input_mask, make_tiny_lora

VERSION = "2"
CHECKPOINT = "sdxl_tiny.safetensors"
UNET = "flux_tiny.safetensors"
CLIP_L, T5 = "clip_l.safetensors", "t5xxl_fp16.safetensors"
VAE = "ae.safetensors"
WAN, UMT5, WAN_VAE = ("wan2.1_t2v_1.3B_fp16.safetensors", "umt5_xxl_fp8_e4m3fn_scaled.safetensors",
                      "wan_2.1_vae.safetensors")     # the names ComfyUI's Wan 2.1 example workflow loads
LORA = "sdxl_lora.safetensors"
IMAGE, MASK = "example.png", "mask.png"
SIZE = 64                       # the input images' side (the tiny models' sample size)


def write_tree(base, tiny) -> str:
    """The install at `base`/ComfyUI (written unless a complete one is there); returns its folder."""
    from toolkit.models.tiny.checkpoints import write_checkpoint, write_component
    from toolkit.tokenizers import VOCABULARIES

    root = os.path.join(str(base), "ComfyUI")
    marker = os.path.join(root, ".tiny_tree")
    if os.path.isfile(marker) and open(marker).read() == VERSION:
        return root
    models = os.path.join(root, "models")
    sdxl, flux = tiny("sdxl"), tiny("flux")
    write_checkpoint("sdxl", sdxl, os.path.join(models, "checkpoints", CHECKPOINT))
    write_component("flux", flux, "transformer", os.path.join(models, "diffusion_models", UNET),
                    prefix="model.diffusion_model.")
    write_component("flux", flux, "text_encoder", os.path.join(models, "text_encoders", CLIP_L))
    write_component("flux", flux, "text_encoder_2", os.path.join(models, "text_encoders", T5))
    write_component("flux", flux, "vae", os.path.join(models, "vae", VAE))
    make_tiny_lora("sdxl", sdxl, os.path.join(models, "loras", LORA))
    write_wan(tiny("wan21"), models)
    # the tiny CLIP vocabulary is one for SDXL and Flux; ComfyUI keeps it in comfy/sd1_tokenizer
    for role, vocab in (("tokenizer", "clip_l"), ("tokenizer_2", "t5_xxl")):
        target = os.path.join(root, VOCABULARIES[vocab].comfy[0])
        if not os.path.isdir(target):
            shutil.copytree(os.path.join(flux, role), target)
    for sub in ("loras", "controlnet", "upscale_models", "embeddings", "clip"):
        os.makedirs(os.path.join(models, sub), exist_ok=True)
    input_image(os.path.join(root, "input", IMAGE), SIZE, SIZE)
    input_mask(os.path.join(root, "input", MASK), SIZE, SIZE)
    with open(marker, "w") as f:
        f.write(VERSION)
    return root


def write_wan(folder: str, models: str):
    """Wan 2.1's three files as ComfyUI's example downloads them: the denoiser, the UMT5 in the scaled FP8
    layout carrying its SentencePiece model (no tokenizer folder: the engine builds it from that), the VAE."""
    import torch
    from transformers import AutoTokenizer, UMT5EncoderModel

    from toolkit.models.formats import t5
    from toolkit.models.tiny.checkpoints import write_component
    from toolkit.models.tiny.text_encoder_files import spiece_model, write_text_encoder
    write_component("wan21", folder, "transformer", os.path.join(models, "diffusion_models", WAN),
                    prefix="model.diffusion_model.")
    write_component("wan21", folder, "vae", os.path.join(models, "vae", WAN_VAE))
    tokenizer = AutoTokenizer.from_pretrained(os.path.join(folder, "tokenizer"))
    encoder = UMT5EncoderModel.from_pretrained(os.path.join(folder, "text_encoder"))
    write_text_encoder(encoder, t5.UMT5_XXL, os.path.join(models, "text_encoders", UMT5), dtype=torch.bfloat16,
                       fp8="legacy", embed={"spiece_model": spiece_model(tokenizer)})


def workflow(name: str) -> dict:
    """testing/workflows/<name>.json, as ComfyUI's "Save (API)" wrote it."""
    import json
    with open(os.path.join(os.path.dirname(__file__), "workflows", f"{name}.json")) as f:
        return json.load(f)
