"""Flex.1 alpha (ostris): a FLUX.1-class DiT with 8 double-stream blocks (FLUX.1's 19) and 38 single-stream
blocks, begun as a FLUX.1 [schnell] fine-tune, with a trained guidance embedder (no CFG needed). It runs
through the FLUX.1 pipelines with FLUX.1's CLIP-L, T5-XXL and VAE: flux.py's components and tasks, its own
repo and denoiser.

Its files: BFL's FLUX.1 layout (the all-in-one `Flex.1-alpha.safetensors`, for ComfyUI's checkpoints/), read
with the configs below: 8 double blocks tell it from FLUX.1."""
from dataclasses import replace

from toolkit.models.arch import ArchSpec, SampleDefaults, Tiny
from toolkit.models.archs import flux
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.tiny import kit

# ostris/Flex.1-alpha transformer/config.json; and the tiny factory's (one double block to flux's two)
TRANSFORMER_KNOWN = {
    "flex1-alpha": dict(flux.FLUX1, num_layers=8, num_single_layers=38, guidance_embeds=True),
    "tiny": dict(flux.TRANSFORMER_KNOWN["tiny"], num_layers=1),
}


def transformer_config(view):
    return from_known(flux.flux1_signature(view), TRANSFORMER_KNOWN, flux.flux1_facts, "the Flex.1 transformer")


# FLUX.1's layout (its kind), read with Flex.1's configs
TRANSFORMER_FILE = replace(flux.TRANSFORMER_FILE, config="toolkit.models.archs.flex1:transformer_config",
                           label="Flex.1 transformer")


def _tiny(b):
    return dict(flux.tiny_flux_encoders(b), transformer=flux.tiny_flux_transformer(b, num_layers=1),
                scheduler=kit.flow_match_scheduler(**flux.SCHEDULER_CONFIG))


SPEC = replace(
    flux.SPEC, name="flex1", default_name_or_path="ostris/Flex.1-alpha",
    components=flux.COMPONENTS[:-1] + (replace(flux.COMPONENTS[-1], single_file=TRANSFORMER_FILE),),
    # the model card: used as FLUX.1 [dev] (28 steps, embedded guidance 3.5), prompts up to 512 tokens
    defaults=SampleDefaults(1024, 1024, 28, 3.5), variants={},
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 3.5}),
    description="Flex.1 alpha (ostris): FLUX.1-class, 8 double blocks, guidance embedder (CLIP + T5, packed tokens)",
    # FLUX.1's GGUF and LoRA layouts (flux's rows). Its LoRAs have FLUX.1's keys: no markers of its own, so a
    # file is guessed as flux's and any FLUX.1-layout LoRA is taken (model.arch flex1 says which model)
    lora=replace(flux.SPEC.lora, markers=()),
    # XLabs-layout IP-Adapters of its own double-block count (FLUX.1's 19-block file is not one)
    ip_adapter=replace(flux.SPEC.ip_adapter, blocks=tuple(dict.fromkeys(c["num_layers"] for c in TRANSFORMER_KNOWN.values()))),
    # MagCache's ratios are FLUX.1-dev's, not Flex.1's
    step_caches={"first_block": {}, "taylorseer": {}, "faster": {}},
)
