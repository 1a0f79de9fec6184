"""ComfyUI API-format workflows (testing/workflows/*.json, as "Save (API)" writes them) analysed into the
engine's requests over a tiny ComfyUI install (testing/comfy_tree.py): the model and sample dicts each
graph maps to, every refusal in ComfyUI's own shapes (node_errors naming node id, class and input), the
engine's own refusals mapped back onto the node they came from, GET /object_info's shape with the
install's files in it, and one analysed request generating through the engine."""
import copy
import os
import threading

import pytest

from extensions_built_in.inference_engine.compat.comfy_files import ComfyFiles
from extensions_built_in.inference_engine.compat.comfy_graph import GraphError, Job, analyse, refusal
from extensions_built_in.inference_engine.compat.comfy_nodes import NODES, object_info
from testing import comfy_tree
from testing.comfy_tree import workflow
from toolkit.errors import ConfigError


@pytest.fixture(scope="module")
def tree(tiny, tmp_path_factory):
    return comfy_tree.write_tree(tmp_path_factory.mktemp("comfy"), tiny)


@pytest.fixture(scope="module")
def engine(tree, tmp_path_factory):
    """An engine over the install (its input folder is the assets folder LoadImage's files resolve in)."""
    from extensions_built_in.inference_engine.engine import Engine
    out = tmp_path_factory.mktemp("comfy_out")
    return Engine(output_folder=str(out), assets_folder=os.path.join(tree, "input"), worker="thread",
                  model_roots=[tree], model_folders=[tree])


@pytest.fixture(scope="module")
def files(engine, tree):
    return ComfyFiles(engine.model_folders, os.path.join(tree, "input"))


@pytest.fixture(scope="module")
def resolve(engine):
    def check(model, sample):
        engine.resolve(model, sample, dry_run=True)
    return check


def models(tree, *parts):
    return os.path.join(tree, "models", *parts)


def refused(prompt, files, resolve=None) -> GraphError:
    with pytest.raises(GraphError) as e:
        analyse(prompt, files, resolve)
    return e.value


def errors_of(err: GraphError, node: str) -> list:
    return [(e["type"], e["extra_info"].get("input_name")) for e in err.node_errors[node]["errors"]]


# -- what each workflow maps to -------------------------------------------------------------------------

def test_sdxl_txt2img(tree, files, resolve):
    (job,) = analyse(workflow("sdxl_txt2img"), files, resolve)
    assert isinstance(job, Job)
    assert job.model == {"name_or_path": models(tree, "checkpoints", "sdxl_tiny.safetensors")}
    assert job.sample == {"prompt": "beautiful scenery nature glass bottle landscape, , purple galaxy bottle,",
                          "negative_prompt": "text, watermark", "guidance_scale": 5.0, "seed": 156680208700286,
                          "sampler": "euler", "width": 64, "height": 64, "batch_size": 1, "num_inference_steps": 2,
                          "output_ext": "png"}
    assert job.outputs == [{"node": "9", "class_type": "SaveImage", "type": "output", "filename_prefix": "ComfyUI"}]
    assert job.nodes == ["4", "6", "7", "5", "3", "8", "9"]      # dependencies first, as ComfyUI executes them
    assert job.sampler_node == "3"


def test_flux_unet_dual_clip_vae_and_flux_guidance(tree, files, resolve):
    """UNETLoader's denoiser with DualCLIPLoader's files in the roles their headers fill, VAELoader's file,
    FluxGuidance as the guidance (KSampler cfg 1), ConditioningZeroOut as no negative prompt."""
    (job,) = analyse(workflow("flux_txt2img"), files, resolve)
    assert job.model == {"name_or_path": models(tree, "diffusion_models", "flux_tiny.safetensors"),
                         "components": {"text_encoder": models(tree, "text_encoders", "clip_l.safetensors"),
                                        "text_encoder_2": models(tree, "text_encoders", "t5xxl_fp16.safetensors")},
                         "vae": models(tree, "vae", "ae.safetensors")}
    assert job.sample == {"prompt": "cute anime girl with massive fluffy fennec ears", "guidance_scale": 3.5,
                          "seed": 219670278747233, "sampler": "euler", "width": 64, "height": 64, "batch_size": 1,
                          "num_inference_steps": 2, "output_ext": "png"}
    assert job.fields["sample.guidance_scale"] == ("26", "guidance")
    assert job.fields["model.components.text_encoder_2"] == ("11", "clip_name1")


def test_img2img_runs_the_last_steps_of_steps_over_denoise(tree, files, resolve):
    """KSampler denoise 0.5 over 2 steps: ComfyUI runs the last 2 of int(2 / 0.5) = 4; dpmpp_2m x karras is
    the engine's dpm++_2m_karras."""
    (job,) = analyse(workflow("sdxl_img2img"), files, resolve)
    assert job.sample == {"prompt": "photograph of victorian woman with wings, sky clouds, meadow grass",
                          "negative_prompt": "watermark, text", "guidance_scale": 5.0, "seed": 280823642470253,
                          "sampler": "dpm++_2m_karras", "init_img": os.path.join(tree, "input", "example.png"),
                          "width": 64, "height": 64, "resize_mode": "crop", "num_inference_steps": 4,
                          "strength": 0.5, "task": "img2img", "output_ext": "png"}
    prompt = workflow("sdxl_img2img")
    prompt["3"]["inputs"].update(steps=20, denoise=0.75)
    (job,) = analyse(prompt, files, resolve)
    assert (job.sample["num_inference_steps"], job.sample["strength"]) == (26, 20 / 26)


def test_lora_and_batch_size(tree, files, resolve):
    (job,) = analyse(workflow("sdxl_lora"), files, resolve)
    assert job.model["loras"] == [{"path": models(tree, "loras", "sdxl_lora.safetensors"), "scale": 0.8}]
    assert (job.sample["batch_size"], job.sample["sampler"]) == (2, "euler_a")
    assert job.fields["model.loras[0].scale"] == ("10", "strength_model")


def test_a_hires_pair_is_sample_hires(tree, files, resolve):
    (job,) = analyse(workflow("sdxl_hires"), files, resolve)
    assert job.sample["hires"] == {"upscaler": "Latent (nearest-exact)", "scale": 2.0, "steps": 4, "denoise": 0.5}
    assert (job.sample["width"], job.sample["num_inference_steps"], job.sampler_node) == (64, 2, "11")
    # Upscale Latent to a size: the scale is the size over the base's; another aspect is refused
    prompt = workflow("sdxl_hires")
    prompt["10"] = {"inputs": {"upscale_method": "bilinear", "width": 96, "height": 96, "crop": "disabled",
                               "samples": ["3", 0]}, "class_type": "LatentUpscale", "_meta": {"title": "Upscale Latent"}}
    (job,) = analyse(prompt, files, resolve)
    assert (job.sample["hires"]["scale"], job.sample["hires"]["upscaler"]) == (1.5, "Latent")
    prompt["10"]["inputs"]["height"] = 128
    assert errors_of(refused(prompt, files), "10") == [("custom_validation_failed", "height")]
    # a pixel hires: decode, Upscale Image By (lanczos), encode, second sampler
    prompt = workflow("sdxl_hires")
    prompt["20"] = {"inputs": {"samples": ["3", 0], "vae": ["16", 2]}, "class_type": "VAEDecode", "_meta": {}}
    prompt["21"] = {"inputs": {"upscale_method": "lanczos", "scale_by": 2, "image": ["20", 0]},
                    "class_type": "ImageScaleBy", "_meta": {}}
    prompt["22"] = {"inputs": {"pixels": ["21", 0], "vae": ["16", 2]}, "class_type": "VAEEncode", "_meta": {}}
    prompt["11"]["inputs"]["latent_image"] = ["22", 0]
    del prompt["10"]
    (job,) = analyse(prompt, files, resolve)
    assert job.sample["hires"] == {"upscaler": "Lanczos", "scale": 2.0, "steps": 4, "denoise": 0.5}


def test_wan_t2v_as_comfyuis_example_with_save_animated_webp(tree, files, resolve):
    """ComfyUI's Wan 2.1 example: UNETLoader + CLIPLoader (wan) + VAELoader, ModelSamplingSD3 shift 8 (not Wan's
    own 3: the request's sample.shift), EmptyHunyuanLatentVideo's length as the frames, SaveAnimatedWEBP's fps."""
    prompt = workflow("wan_t2v")
    (job,) = analyse(prompt, files, resolve)
    assert job.model == {"name_or_path": models(tree, "diffusion_models", comfy_tree.WAN),
                         "components": {"text_encoder": models(tree, "text_encoders", comfy_tree.UMT5)},
                         "vae": models(tree, "vae", comfy_tree.WAN_VAE)}
    assert job.sample == {"prompt": prompt["6"]["inputs"]["text"], "negative_prompt": prompt["7"]["inputs"]["text"],
                          "guidance_scale": 6.0, "seed": 82628696717253, "sampler": "unipc", "width": 32, "height": 32,
                          "batch_size": 1, "num_inference_steps": 2, "num_frames": 5, "shift": 8.0, "fps": 16,
                          "output_ext": "webp"}
    assert job.outputs == [{"node": "28", "class_type": "SaveAnimatedWEBP", "type": "output",
                            "filename_prefix": "ComfyUI"}]
    assert job.fields["sample.shift"] == ("48", "shift") and job.fields["sample.num_frames"] == ("40", "length")
    prompt["48"]["inputs"]["shift"] = 3.0             # Wan's own shift: nothing to set
    (job,) = analyse(prompt, files, resolve)
    assert "shift" not in job.sample


def test_wan_t2v_with_create_video_and_save_video(tree, files, resolve):
    (job,) = analyse(workflow("wan_t2v_savevideo"), files, resolve)
    assert job.sample["output_ext"] == "mp4" and job.sample["fps"] == 16 and job.sample["num_frames"] == 5
    assert job.fields["sample.fps"] == ("49", "fps")
    assert job.outputs == [{"node": "50", "class_type": "SaveVideo", "type": "output",
                            "filename_prefix": "video/ComfyUI"}]
    assert job.nodes[-2:] == ["49", "50"]


def test_a_fixed_shift_on_a_model_without_one_is_refused(files, resolve):
    """SDXL samples no flow: ModelSamplingSD3 on it is a node error on its model input, never ignored."""
    prompt = workflow("sdxl_txt2img")
    prompt["20"] = {"inputs": {"shift": 8, "model": ["4", 0]}, "class_type": "ModelSamplingSD3", "_meta": {}}
    prompt["3"]["inputs"]["model"] = ["20", 0]
    assert errors_of(refused(prompt, files, resolve), "20") == [("custom_validation_failed", "model")]


def test_every_output_of_one_decode_is_one_job_and_a_preview_of_the_base_pass_another(files, resolve):
    prompt = workflow("sdxl_hires")
    prompt["30"] = {"inputs": {"images": ["8", 0]}, "class_type": "PreviewImage", "_meta": {}}
    prompt["31"] = {"inputs": {"samples": ["3", 0], "vae": ["16", 2]}, "class_type": "VAEDecode", "_meta": {}}
    prompt["32"] = {"inputs": {"images": ["31", 0]}, "class_type": "PreviewImage", "_meta": {}}
    jobs = analyse(prompt, files, resolve)
    assert [[o["node"] for o in j.outputs] for j in jobs] == [["9", "30"], ["32"]]
    assert [o["type"] for o in jobs[0].outputs] == ["output", "temp"]
    assert "hires" in jobs[0].sample and "hires" not in jobs[1].sample


def test_inpaint_with_a_mask(tree, files, resolve):
    """VAEEncodeForInpaint with LoadImageMask: a grayscale file is the mask as it is; grown, or read from an
    alpha channel (inverted, as ComfyUI reads it), the mask is derived (a PNG data URL)."""
    prompt = workflow("sdxl_img2img")
    prompt["20"] = {"inputs": {"image": "mask.png", "channel": "red", "upload": "image"},
                    "class_type": "LoadImageMask", "_meta": {}}
    prompt["12"] = {"inputs": {"pixels": ["10", 0], "vae": ["14", 2], "mask": ["20", 0], "grow_mask_by": 0},
                    "class_type": "VAEEncodeForInpaint", "_meta": {}}
    prompt["3"]["inputs"]["denoise"] = 1.0
    (job,) = analyse(prompt, files, resolve)
    assert (job.sample["task"], job.sample["mask_img"]) == ("inpaint", os.path.join(tree, "input", "mask.png"))
    assert (job.sample["num_inference_steps"], job.sample["strength"]) == (2, 1.0)
    prompt["12"]["inputs"]["grow_mask_by"] = 6
    (job,) = analyse(prompt, files, resolve)
    assert job.sample["mask_img"].startswith("data:image/png;base64,")
    # SetLatentNoiseMask over an encoded image is inpaint too; LoadImage's MASK of an image without alpha is empty
    prompt = workflow("sdxl_img2img")
    prompt["20"] = {"inputs": {"samples": ["12", 0], "mask": ["10", 1]}, "class_type": "SetLatentNoiseMask", "_meta": {}}
    prompt["3"]["inputs"]["latent_image"] = ["20", 0]
    assert errors_of(refused(prompt, files), "10") == [("custom_validation_failed", "image")]


def test_controlnet_apply_advanced_is_sample_controls(tree, files):
    prompt = workflow("sdxl_txt2img")
    prompt["20"] = {"inputs": {"control_net_name": "canny.safetensors"}, "class_type": "ControlNetLoader", "_meta": {}}
    prompt["21"] = {"inputs": {"image": "example.png"}, "class_type": "LoadImage", "_meta": {}}
    prompt["22"] = {"inputs": {"positive": ["6", 0], "negative": ["7", 0], "control_net": ["20", 0],
                               "image": ["21", 0], "strength": 0.8, "start_percent": 0.0, "end_percent": 0.5},
                    "class_type": "ControlNetApplyAdvanced", "_meta": {}}
    prompt["3"]["inputs"].update(positive=["22", 0], negative=["22", 1])
    assert errors_of(refused(prompt, files), "20") == [("value_not_in_list", "control_net_name")]
    path = models(tree, "controlnet", "canny.safetensors")
    open(path, "wb").close()             # listed by name: the engine's own checks read it (not here)
    try:
        (job,) = analyse(prompt, files)
    finally:
        os.remove(path)
    assert job.sample["controls"] == [{"model": path, "image": os.path.join(tree, "input", "example.png"),
                                       "scale": 0.8, "start": 0.0, "end": 0.5, "resize_mode": "crop"}]
    prompt["3"]["inputs"]["negative"] = ["7", 0]           # the apply's negative side not used
    open(path, "wb").close()
    try:
        assert errors_of(refused(prompt, files), "22") == [("custom_validation_failed", "negative")]
    finally:
        os.remove(path)


# -- refusals, in ComfyUI's shapes ------------------------------------------------------------------------

def test_an_unknown_node_is_a_node_error_naming_its_id_and_class(files):
    err = refused(workflow("unknown_node"), files)
    assert err.error["type"] == "missing_node_type"
    assert set(err.node_errors) == {"10", "11"}
    entry = err.node_errors["10"]
    assert entry["class_type"] == "ImageSharpen" and entry["dependent_outputs"] == ["9"]
    (e,) = entry["errors"]
    assert (e["type"], e["details"], e["extra_info"]["class_type"]) == ("missing_node_type", "Node ID '#10'",
                                                                         "ImageSharpen")
    assert set(e) == {"type", "message", "details", "extra_info"}
    assert err.node_errors["11"]["dependent_outputs"] == []


def test_every_node_error_of_a_graph_is_collected(files):
    prompt = workflow("sdxl_txt2img")
    prompt["3"]["inputs"].update(sampler_name="dpmpp_3m_sde", scheduler="ddim_uniform", steps=0)
    prompt["4"]["inputs"]["ckpt_name"] = "missing.safetensors"
    prompt["8"]["inputs"]["vae"] = ["99", 2]              # no such node
    prompt["7"]["inputs"]["clip"] = ["4", 0]              # a MODEL into a CLIP input
    del prompt["5"]["inputs"]["width"]
    err = refused(prompt, files)
    assert err.error["type"] == "prompt_outputs_failed_validation"
    assert "Value not in list" in err.error["details"]
    assert sorted(errors_of(err, "3")) == [("value_not_in_list", "sampler_name"), ("value_not_in_list", "scheduler"),
                                           ("value_smaller_than_min", "steps")]
    assert errors_of(err, "4") == [("value_not_in_list", "ckpt_name")]
    assert errors_of(err, "8") == [("bad_linked_input", "vae")]
    assert errors_of(err, "7") == [("return_type_mismatch", "clip")]
    assert errors_of(err, "5") == [("required_input_missing", "width")]
    assert all(v["dependent_outputs"] == ["9"] for v in err.node_errors.values())
    assert err.node_errors["4"]["class_type"] == "CheckpointLoaderSimple"


def test_what_the_engine_cannot_do_is_a_node_error_never_a_substitute(files):
    prompt = workflow("flux_txt2img")
    prompt["13"]["inputs"].update(sampler_name="ddim", cfg=3.0)           # no DDIM for a flow model; two guidances
    prompt["40"] = {"inputs": {"clip": ["11", 0], "stop_at_clip_layer": -2}, "class_type": "CLIPSetLastLayer",
                    "_meta": {}}
    prompt["6"]["inputs"]["clip"] = ["40", 0]
    prompt["41"] = {"inputs": {"model": ["12", 0], "shift": 6.0}, "class_type": "ModelSamplingSD3", "_meta": {}}
    prompt["13"]["inputs"]["model"] = ["41", 0]
    err = refused(prompt, files)
    assert errors_of(err, "40") == [("custom_validation_failed", "stop_at_clip_layer")]
    # the clip skip's error stops the conditioning there: the sampler's own are not reached
    prompt["40"]["inputs"]["stop_at_clip_layer"] = -1
    err = refused(prompt, files)
    assert sorted(errors_of(err, "13")) == [("custom_validation_failed", "cfg"),
                                            ("custom_validation_failed", "sampler_name")]
    assert errors_of(err, "41") == [("custom_validation_failed", "shift")]        # Flux shifts by the image size
    assert "euler" in err.node_errors["13"]["errors"][0]["details"] + err.node_errors["13"]["errors"][1]["details"]
    # a karras schedule with a flow sampler that has none (DPM-Solver++ on flow sigmas): refused on scheduler
    prompt = workflow("flux_txt2img")
    prompt["13"]["inputs"].update(sampler_name="dpmpp_2m", scheduler="karras")
    assert errors_of(refused(prompt, files), "13") == [("custom_validation_failed", "scheduler")]
    # FluxGuidance on a model guided by CFG; ModelSamplingFlux with the model's own shifts is served
    prompt = workflow("sdxl_txt2img")
    prompt["20"] = {"inputs": {"conditioning": ["6", 0], "guidance": 3.5}, "class_type": "FluxGuidance", "_meta": {}}
    prompt["3"]["inputs"]["positive"] = ["20", 0]
    assert errors_of(refused(prompt, files), "20") == [("custom_validation_failed", "guidance")]
    prompt = workflow("flux_txt2img")
    prompt["41"] = {"inputs": {"model": ["12", 0], "max_shift": 1.15, "base_shift": 0.5, "width": 64, "height": 64},
                    "class_type": "ModelSamplingFlux", "_meta": {}}
    prompt["13"]["inputs"]["model"] = ["41", 0]
    assert len(analyse(prompt, files)) == 1
    prompt["41"]["inputs"]["width"] = 1024
    assert errors_of(refused(prompt, files), "41") == [("custom_validation_failed", "width")]


@pytest.mark.parametrize("graph,node,sampler_name,scheduler,want", [
    ("sdxl_txt2img", "3", "dpmpp_2m_sde", "karras", "dpm++_2m_sde_karras"),   # SDXL's most used pair
    ("sdxl_txt2img", "3", "dpmpp_2m_sde", "normal", "dpm++_2m_sde"),
    ("sdxl_txt2img", "3", "euler", "karras", "euler_karras"),
    ("sdxl_txt2img", "3", "dpmpp_2m", "karras", "dpm++_2m_karras"),
    ("sdxl_txt2img", "3", "uni_pc", "exponential", "unipc_exponential"),
    ("sdxl_txt2img", "3", "lms", "beta", "lms_beta"),
    ("flux_txt2img", "13", "euler", "beta", "euler_beta"),                    # Flux's
    ("flux_txt2img", "13", "euler", "simple", "euler"), ("flux_txt2img", "13", "euler", "sgm_uniform", "euler"),
    ("flux_txt2img", "13", "euler_ancestral", "karras", "euler_a_karras"),
])
def test_ksampler_sampler_name_and_scheduler_map_onto_a_row_of_the_models_table(graph, node, sampler_name,
                                                                                  scheduler, want, files, resolve):
    prompt = workflow(graph)
    prompt[node]["inputs"].update(sampler_name=sampler_name, scheduler=scheduler)
    (job,) = analyse(prompt, files, resolve)
    assert job.sample["sampler"] == want and job.fields["sample.sampler"] == (node, "sampler_name")


@pytest.mark.parametrize("graph,node,sampler_name,scheduler,error", [
    ("sdxl_txt2img", "3", "euler", "ddim_uniform", ("value_not_in_list", "scheduler")),   # no such schedule here
    ("sdxl_txt2img", "3", "euler", "kl_optimal", ("value_not_in_list", "scheduler")),
    ("sdxl_txt2img", "3", "euler_ancestral", "karras", ("custom_validation_failed", "scheduler")),  # no Karras row
    ("sdxl_txt2img", "3", "ddim", "beta", ("custom_validation_failed", "scheduler")),
    ("flux_txt2img", "13", "uni_pc", "beta", ("custom_validation_failed", "scheduler")),
])
def test_a_schedule_not_served_is_a_node_error_never_a_substitute(graph, node, sampler_name, scheduler, error,
                                                                   files):
    prompt = workflow(graph)
    prompt[node]["inputs"].update(sampler_name=sampler_name, scheduler=scheduler)
    err = refused(prompt, files)
    assert errors_of(err, node) == [error]
    if error[0] == "custom_validation_failed":
        assert f"{scheduler} is not served with {sampler_name}" in err.node_errors[node]["errors"][0]["details"]


def test_a_refiner_chain_and_a_denoise_without_an_image_are_refused(files):
    prompt = workflow("sdxl_hires")
    prompt["11"]["inputs"]["latent_image"] = ["3", 0]     # a second sampler straight on the first's latent
    del prompt["10"]
    assert errors_of(refused(prompt, files), "11") == [("custom_validation_failed", "latent_image")]
    prompt = workflow("sdxl_txt2img")
    prompt["3"]["inputs"]["denoise"] = 0.5
    assert errors_of(refused(prompt, files), "3") == [("custom_validation_failed", "denoise")]


def test_a_video_latent_or_output_for_an_image_model_is_refused(files):
    prompt = workflow("sdxl_txt2img")
    prompt["5"] = {"inputs": {"width": 64, "height": 64, "length": 9, "batch_size": 1},
                   "class_type": "EmptyHunyuanLatentVideo", "_meta": {}}
    prompt["9"] = {"inputs": {"images": ["8", 0], "filename_prefix": "v", "fps": 8, "lossless": False, "quality": 80,
                              "method": "default"}, "class_type": "SaveAnimatedWEBP", "_meta": {}}
    err = refused(prompt, files)
    assert errors_of(err, "3") == [("custom_validation_failed", "latent_image")]
    assert errors_of(err, "9") == [("custom_validation_failed", "images")]


def test_the_engines_refusals_name_the_node_and_input_they_came_from(files, resolve):
    prompt = workflow("sdxl_txt2img")
    prompt["3"]["inputs"]["seed"] = 2**64 - 1             # ComfyUI's bound; past the engine's 2**63 - 1
    err = refused(prompt, files, resolve)
    (e,) = err.node_errors["3"]["errors"]
    assert (e["type"], e["extra_info"]["input_name"], e["extra_info"]["engine_field"]) == (
        "custom_validation_failed", "seed", "sample.seed")

    def refuse(key):
        def check(model, sample):
            raise ConfigError(key, "refused")
        return check
    for key, node, input_name in (("model.loras[0].path", "10", "lora_name"), ("sample.batch_size", "5", "batch_size"),
                                  ("model.name_or_path", "4", "ckpt_name"), ("sample.negative_prompt", "7", "text"),
                                  ("sample.cache", "3", None)):
        err = refused(workflow("sdxl_lora"), files, refuse(key))
        assert list(err.node_errors) == [node], key
        assert err.node_errors[node]["errors"][0]["extra_info"].get("input_name") == input_name, key


def test_a_refusal_at_submit_names_the_node_too(engine, tmp_path):
    """A dry-run resolve does not check input files: Engine.submit's refusal maps back the same way."""
    from testing.fixtures import input_image
    input_image(tmp_path / "example.png")
    prompt = workflow("sdxl_img2img")
    (job,) = analyse(prompt, ComfyFiles(engine.model_folders, str(tmp_path)))     # an input folder out of the assets
    with pytest.raises(ConfigError) as e:
        engine.resolve(job.model, job.sample)
    err = refusal(prompt, job, e.value)
    assert errors_of(err, "10") == [("custom_validation_failed", "image")]
    assert err.node_errors["10"]["errors"][0]["extra_info"]["engine_field"] == "sample.init_img"
    assert err.node_errors["10"]["dependent_outputs"] == ["9"]


def test_a_prompt_that_is_no_workflow(files):
    for prompt in ({}, [], {"1": "x"}):
        err = refused(prompt, files)
        assert err.error["type"] == "invalid_prompt" and err.node_errors == {}
    prompt = workflow("sdxl_txt2img")
    del prompt["9"]
    assert refused(prompt, files).error["type"] == "prompt_no_outputs"


# -- /object_info ------------------------------------------------------------------------------------------

def test_object_info_lists_every_node_with_the_installs_files(files):
    info = object_info(files)
    assert set(info) == set(NODES)
    ks = info["KSampler"]
    assert set(ks) >= {"input", "input_order", "output", "output_is_list", "output_name", "name", "display_name",
                       "description", "category", "output_node", "python_module"}
    assert ks["input_order"]["required"] == ["model", "seed", "steps", "cfg", "sampler_name", "scheduler", "positive",
                                             "negative", "latent_image", "denoise"]
    assert ks["input"]["required"]["sampler_name"][0] == ["euler", "euler_ancestral", "heun", "dpmpp_sde", "dpmpp_2m",
                                                          "dpmpp_2m_sde", "lms", "lcm", "ddim", "uni_pc"]
    assert ks["input"]["required"]["scheduler"][0] == ["normal", "karras", "exponential", "sgm_uniform", "simple",
                                                       "beta"]
    assert ks["input"]["required"]["seed"] == ["INT", {"default": 0, "min": 0, "max": 2**64 - 1, "step": 1,
                                                       "control_after_generate": True}]
    assert (ks["output"], ks["output_node"], ks["python_module"]) == (["LATENT"], False, "nodes")
    assert info["CheckpointLoaderSimple"]["input"]["required"]["ckpt_name"] == [["sdxl_tiny.safetensors"]]
    assert info["UNETLoader"]["input"]["required"]["unet_name"][0] == ["flux_tiny.safetensors", comfy_tree.WAN]
    assert info["DualCLIPLoader"]["input"]["required"]["clip_name1"][0] == [
        "clip_l.safetensors", "t5xxl_fp16.safetensors", comfy_tree.UMT5]
    assert info["VAELoader"]["input"]["required"]["vae_name"][0] == ["ae.safetensors", comfy_tree.WAN_VAE]
    assert info["LoraLoader"]["input"]["required"]["lora_name"][0] == ["sdxl_lora.safetensors"]
    assert info["LoadImage"]["input"]["required"]["image"] == [["example.png", "mask.png"], {"image_upload": True}]
    assert info["SaveImage"]["output_node"] is True and info["SaveImage"]["output"] == []
    assert info["ControlNetApplyAdvanced"]["output_name"] == ["positive", "negative"]
    assert object_info(files, "VAEDecode") == {"VAEDecode": info["VAEDecode"]}
    assert object_info(files, "ImageSharpen") == {}


# -- file names ------------------------------------------------------------------------------------------------

def test_comfy_files_over_an_a1111_tree_and_out_of_folder_names(tmp_path, tree):
    import shutil
    a1111 = tmp_path / "webui" / "models"
    for sub, src in (("Stable-diffusion", "checkpoints/sdxl_tiny.safetensors"), ("Lora", "loras/sdxl_lora.safetensors"),
                     ("VAE", "vae/ae.safetensors")):
        (a1111 / sub / "sub").mkdir(parents=True)
        shutil.copy(models(tree, *src.split("/")), a1111 / sub / "sub" / os.path.basename(src))
    (tmp_path / "outside.safetensors").write_bytes(b"")
    os.symlink(tmp_path / "outside.safetensors", a1111 / "Lora" / "link.safetensors")
    files = ComfyFiles([str(tmp_path / "webui")], str(tmp_path / "input"))
    assert files.names("checkpoints") == ["sub/sdxl_tiny.safetensors"]
    assert files.names("unet") == ["sub/sdxl_tiny.safetensors"]       # Forge keeps its denoisers there
    assert files.names("loras") == ["sub/sdxl_lora.safetensors"]      # the link out is not listed
    assert files.names("vae") == ["sub/ae.safetensors"] and files.names("clip") == []
    assert files.path("loras", "sub/sdxl_lora.safetensors") == str(a1111 / "Lora" / "sub" / "sdxl_lora.safetensors")
    for name in ("link.safetensors", "../VAE/sub/ae.safetensors", "/etc/passwd", "sub/../sub/sdxl_lora.safetensors"):
        assert files.path("loras", name) is None, name
    ins = ComfyFiles([tree], os.path.join(tree, "input"))
    assert ins.input_path("example.png [input]") == os.path.join(tree, "input", "example.png")
    for name in ("example.png [output]", "../input/example.png", "nope.png", "mask"):
        assert ins.input_path(name) is None, name


# -- end to end ---------------------------------------------------------------------------------------------

def test_an_analysed_flux_workflow_generates_through_the_engine(engine, files, resolve):
    from PIL import Image
    (job,) = analyse(workflow("flux_txt2img"), files, resolve)
    engine.start_worker()
    loop = threading.Thread(target=engine.run_forever, daemon=True)
    loop.start()
    try:
        req = engine.submit(copy.deepcopy(job.model), copy.deepcopy(job.sample), api="comfyui")
        assert req.done_event.wait(300)
        assert req.status == "ok", req.error
        (res,) = [r for r in req.results if r.get("kind") == "image"]
        with Image.open(res["path"]) as im:
            assert im.size == (64, 64)
        assert req.sample.guidance_scale == 3.5 and req.model.arch == "flux"
    finally:
        engine.stop()
        loop.join(30)

