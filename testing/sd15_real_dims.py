"""An SD 1.5-shaped diffusers folder of random weights at the real dimensions (UNet 860M, CLIP-L 123M,
the KL VAE 84M), fp16 safetensors as the hub repo ships them: what a cold start is timed on
(testing/bench_engine.py --cold). The configs are the arch file's (toolkit/models/archs/sd1.py
UNET_KNOWN["sd15"], VAE_KNOWN["sd-vae"]); the tokenizer is the tiny factory's (its ids fit
CLIP-L's 49408-row embedding), so nothing is downloaded.

    .venv/bin/python testing/sd15_real_dims.py [FOLDER]     # default testing/.bench/sd15-real-dims
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DEFAULT = os.path.join(ROOT, "testing", ".bench", "sd15-real-dims")
MARKER = "sd15_real_dims.json"
VERSION = 1


def make(folder: str = DEFAULT) -> str:
    """The folder (made once: a marker says it is whole)."""
    marker = os.path.join(folder, MARKER)
    if os.path.isfile(marker):
        with open(marker) as f:
            if json.load(f).get("version") == VERSION:
                return folder
    import torch
    from diffusers import AutoencoderKL, PNDMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    from toolkit.models.archs import sd1
    from toolkit.models.tiny import kit

    torch.manual_seed(0)
    tokenizer = kit.clip_tokenizer()
    te = CLIPTextModel(CLIPTextConfig(
        vocab_size=49408, hidden_size=768, intermediate_size=3072, projection_dim=768, num_hidden_layers=12,
        num_attention_heads=12, max_position_embeddings=77, hidden_act="quick_gelu",
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id)).eval()
    unet = UNet2DConditionModel(**{k: v for k, v in sd1.UNET_KNOWN["sd15"].items()}).eval()
    vae = AutoencoderKL(**sd1.VAE_KNOWN["sd-vae"]).eval()
    scheduler = PNDMScheduler.from_config(sd1.SCHEDULER_FILE)
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=te, tokenizer=tokenizer, unet=unet, scheduler=scheduler,
                                   safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    pipe.to(torch.float16)
    tmp = folder + ".tmp"
    pipe.save_pretrained(tmp, safe_serialization=True)
    with open(os.path.join(tmp, MARKER), "w") as f:
        json.dump({"version": VERSION}, f)
    if os.path.isdir(folder):
        import shutil
        shutil.rmtree(folder)
    os.replace(tmp, folder)
    return folder


if __name__ == "__main__":
    print(make(sys.argv[1] if len(sys.argv) > 1 else DEFAULT))
