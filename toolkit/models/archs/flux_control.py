"""FLUX.1 Canny [dev] and FLUX.1 Depth [dev]: black-forest-labs' structural-conditioning checkpoints. Each is a
FLUX.1 transformer of its own whose input is the noisy latents joined, channel-wise, with the control map's VAE
latents (128 input channels, 64 out), run by FluxControlPipeline with `control_image`. CLIP, T5 and VAE are
FLUX.1's (the tiny builds them with flux.py's recipe).

How a request names one (the decision, docs/archs.md "Flux control checkpoints"):
- the model is the checkpoint, as ComfyUI loads `flux1-canny-dev.safetensors` as a diffusion model: its repo
  folder (model_index.json names FluxControlPipeline) or its file with `model.arch: flux_control`; `model.variant`
  canny | depth takes its model card's defaults (Canny: 50 steps at guidance 30; Depth: 30 at 10);
- the control map is `ctrl_img`: the image input the model itself needs, as an edit model's reference (its one
  task is `edit`, so a request without `ctrl_img` is a 422 before queueing). It is the map itself, a canny or depth
  image (`POST /preprocess` makes one from a photo), which the pipeline resizes to the request's size;
- `sample.controls` stays for ControlNets beside a model: this arch takes none (a 422 naming it).
FluxControlImg2ImgPipeline / FluxControlInpaintPipeline (an init image beside the map) are not served yet.
"""
from dataclasses import replace

from toolkit.models.arch import SampleDefaults, Task, Tiny, Variant
from toolkit.models.archs import flux
from toolkit.models.archs.flux import COMPONENTS, FLUX1, SCHEDULER_CONFIG, TRANSFORMER_FILE, flux1_facts, flux1_signature
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.tiny import kit

# black-forest-labs/FLUX.1-Canny-dev and FLUX.1-Depth-dev transformer/config.json (one config: 64 latent + 64
# control channels in, 64 out); and the tiny factory's
CONTROL_DEV = dict(FLUX1, in_channels=128, out_channels=64, guidance_embeds=True)
TRANSFORMER_KNOWN = {"flux1-control-dev": CONTROL_DEV,
                     "tiny": dict(flux.TRANSFORMER_KNOWN["tiny"], in_channels=128, out_channels=64)}


def transformer_config(view):
    return from_known(flux1_signature(view), TRANSFORMER_KNOWN, flux1_facts, "the FLUX.1 Canny/Depth transformer")


TRANSFORMER_FILE_CONTROL = replace(TRANSFORMER_FILE, config="toolkit.models.archs.flux_control:transformer_config",
                                   label="FLUX.1 Canny/Depth transformer")


def _tiny(b):
    return dict(flux.tiny_flux_encoders(b), transformer=flux.tiny_flux_transformer(b, in_channels=128, out_channels=64),
                scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG))


SPEC = replace(
    flux.SPEC, name="flux_control", default_name_or_path="black-forest-labs/FLUX.1-Canny-dev",
    pipeline="FluxControlPipeline",
    # the map goes to control_image; the pipeline resizes it to the request's size
    tasks=(Task("edit", "FluxControlPipeline", image_arg="control_image"),),
    components=COMPONENTS[:-1] + (replace(COMPONENTS[-1], single_file=TRANSFORMER_FILE_CONTROL),),
    pipeline_init_kwargs={},
    defaults=SampleDefaults(1024, 1024, 50, 30.0),
    variants={"canny": Variant(name_or_path="black-forest-labs/FLUX.1-Canny-dev"),
              "depth": Variant({"num_inference_steps": 30, "guidance_scale": 10.0},
                               name_or_path="black-forest-labs/FLUX.1-Depth-dev")},
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 30.0}),
    description="FLUX.1 Canny [dev] / Depth [dev]: FLUX.1 following a canny or depth map (ctrl_img)",
    controls=(), ip_adapter=None,          # FLUX.1's GGUF layout (flux.GGUF) and LoRA row, but
    # no LoRA markers of its own: its LoRAs have FLUX.1's keys (guessed as flux's, taken here as flex1 takes them)
    lora=replace(flux.SPEC.lora, markers=()),
    # MagCache's ratios are FLUX.1-dev's
    step_caches={"first_block": {}, "taylorseer": {}, "faster": {}},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
)
