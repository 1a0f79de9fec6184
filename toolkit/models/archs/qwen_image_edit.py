"""Qwen-Image-Edit-2509 (Edit Plus): Qwen-Image conditioned on an input image, which the Qwen2.5-VL
encoder sees (through its processor, at about 384x384) and whose VAE latents (at about 1024x1024)
join the transformer's sequence; the 64-token system prefix is dropped; true CFG. Qwen-Image's holder
call passes the reference images (ctrl_img, ctrl_img_1, ctrl_img_2, at their own size: the pipeline
sizes them) as `image`, and width/height, so the output is the requested size (the pipeline otherwise
derives it from the first reference's aspect at 1024x1024 area).

Same text encoder, tokenizer and VAE files as Qwen-Image (the tiny recipe is qwen_image.py's). Its
denoiser files have Qwen-Image's layout and shapes: a file named without `model.arch` is taken for
qwen_image (the detector says qwen_image_edit fits it too); `model.arch: qwen_image_edit` reads it here."""
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, PROCESSOR, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component,
                                 Latents, SampleDefaults, Task, Tiny)
from toolkit.models.archs.qwen_image import (COMPONENTS, GGUF, QWEN_IMAGE, SCHEDULER_FILE, TINY_TRANSFORMER,
                                             QwenImageModel, tiny_qwen_image_shared, tiny_qwen_image_transformer,
                                             transformer_facts, transformer_signature)
from toolkit.models.formats import llm_encoders, vaes
from toolkit.models.formats.dit_configs import from_known

# Qwen/Qwen-Image-Edit-2509 transformer/config.json (Qwen-Image's; 2511's sets zero_cond_t, which no shape
# shows); and the tiny factory's
TRANSFORMER_KNOWN = {"qwen-image-edit-2509": QWEN_IMAGE, "tiny": TINY_TRANSFORMER}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the Qwen-Image-Edit transformer")


TRANSFORMER_FILE = replace(COMPONENTS[-1].single_file, config="toolkit.models.archs.qwen_image_edit:transformer_config",
                           label="Qwen-Image-Edit transformer")


def qwen2vl_processor(tokenizer):
    """Qwen2VLProcessor over the tokenizer: 14-px patches merged 2x2, the pixel bounds of the
    Qwen2.5-VL preprocessor config the Edit repos ship (processor/preprocessor_config.json)."""
    from transformers import Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    image_processor = Qwen2VLImageProcessor(size={"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 16384},
                                            patch_size=14, temporal_patch_size=2, merge_size=2)
    return Qwen2VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                            video_processor=Qwen2VLVideoProcessor())


def write_processor(tokenizer_folder: str, folder: str):
    """The processor, for files that carry none (ComfyUI's): the config above over the tokenizer found."""
    from transformers import AutoTokenizer
    qwen2vl_processor(AutoTokenizer.from_pretrained(tokenizer_folder)).save_pretrained(folder)


def _tiny(b):
    shared = tiny_qwen_image_shared(b)
    return dict(shared, processor=qwen2vl_processor(shared["tokenizer"]),
                transformer=tiny_qwen_image_transformer(b))


SPEC = ArchSpec(
    name="qwen_image_edit", modality="image", default_name_or_path="Qwen/Qwen-Image-Edit-2509",
    pipeline="QwenImageEditPlusPipeline", holder=QwenImageModel,
    negative_prompt_default=" ",      # true CFG needs a negative prompt: the model card's " " when none is given
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen2_5"),
        Component("processor", "transformers:Qwen2VLProcessor", PROCESSOR,
                  built="toolkit.models.archs.qwen_image_edit:write_processor"),
        Component("text_encoder", "transformers:Qwen2_5_VLForConditionalGeneration", TEXT_ENCODER,
                  single_file=llm_encoders.QWEN25_VL_7B),
        Component("vae", "AutoencoderKLQwenImage", VAE, single_file=vaes.QWEN_IMAGE_VAE),
        Component("transformer", "QwenImageTransformer2DModel", DENOISER, single_file=TRANSFORMER_FILE),
    ),
    defaults=SampleDefaults(1024, 1024, 40, 4.0),     # the model card: 40 steps, true CFG 4.0 (1024^2 area)
    # edit only: the reference image is required; the model card's 1 to 3 images
    tasks=(Task("edit", "QwenImageEditPlusPipeline", takes=("ctrl_img_1", "ctrl_img_2")),),
    latents=Latents("packed", 16, patch=2, format=latent_formats.WAN21),
    decode_features=96,                       # the Qwen Image VAE's last decoder stage
    scheduler_file=SCHEDULER_FILE,             # the Edit repos' scheduler is Qwen-Image's
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0}),
    description="Qwen-Image-Edit-2509 (Edit Plus): edit an input image (Qwen2.5-VL sees it), true CFG",
    gguf=GGUF,
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    uncached_conditioning="encode_prompt takes the reference images (Qwen2.5-VL encodes them with the prompt): "
                          "image data is no cache key",
)
