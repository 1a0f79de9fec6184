"""ComfyUI API-format workflows (what "Save (API)" writes and clients post to /prompt) analysed into
engine requests: one `Job` per sampler chain that reaches output nodes.

    jobs = analyse(prompt, files, resolve=None)      # [Job], or GraphError in ComfyUI's shapes

A workflow is `{node_id: {"class_type", "inputs": {name: value | [node_id, output_index]}, "_meta"}}`.
It is read in three passes, each collecting every problem of the graph before it refuses, as ComfyUI's
own validation does:

1. the nodes: every class must be one of compat/comfy_nodes.py's table (else `missing_node_type`), and
   each input of the nodes an output depends on is checked as ComfyUI checks it (required, links to a
   node's output of the right type, numbers within bounds, a choice among the files and names served);
2. the meaning: each node's outputs are evaluated into what they stand for (a model file with its
   LoRAs, text encoder files, a prompt, an empty latent of a size, an encoded image, a sampled latent,
   ...), and each output node's images traced back to the sampler chain that makes them. What the engine
   cannot do (a clip skip, a size-dependent shift that is not the model's, a sampler it lacks, a refiner
   chain) is a node error naming the node and the input, never dropped or replaced by something else;
3. the engine's own checks (`resolve(model, sample)`, raising toolkit.errors.ConfigError): a refusal is
   mapped back to the node and input its field came from.

How the graph maps onto the engine's request:
- CheckpointLoaderSimple is `model.name_or_path`; UNETLoader's denoiser with the CLIP loaders' files as
  `model.components` (each file's role from its header: toolkit/companions.py) and VAELoader's file as
  `model.vae`; the arch is the file's, as the engine detects it. LoRA loaders are `model.loras`.
- KSampler's seed, steps, cfg, sampler_name x scheduler (compat/comfy_nodes.py COMFY_SAMPLERS onto the
  model's samplers, toolkit/samplers.py), the prompts of its CLIPTextEncode nodes; ConditioningZeroOut
  leaves the negative prompt unset (the pipeline's own empty negative). FluxGuidance is the guidance of
  a model without CFG (its KSampler's cfg must then be 1, as ComfyUI's Flux workflows run). ModelSamplingSD3
  or AuraFlow's shift, where it is not the model's own, is `sample.shift`.
- Empty latents give the size, batch_size and (video) num_frames (`length`: the frames decoded);
  SaveAnimatedWEBP's, SaveWEBM's or CreateVideo's fps is `sample.fps`, the output node the format (webp,
  webm; SaveVideo's mp4). VAEEncode of a LoadImage is img2img, VAEEncodeForInpaint or SetLatentNoiseMask with a mask is
  inpaint. A denoise below 1 runs the last `steps` of int(steps / denoise), as ComfyUI does:
  num_inference_steps int(steps / denoise) and strength steps / that.
- KSampler -> LatentUpscale(By) -> KSampler, or -> VAEDecode -> [ImageUpscaleWithModel] -> ImageScale(By)
  -> VAEEncode -> KSampler, is `sample.hires` (toolkit/hires.py) over the first sampler's request.
- ControlNetLoader + ControlNetApplyAdvanced over a LoadImage are `sample.controls`.
"""
from dataclasses import dataclass, field

from extensions_built_in.inference_engine.compat import comfy_jobs
from extensions_built_in.inference_engine.compat.comfy_eval import Analysis, Invalid, entry, reachable
from toolkit.errors import ConfigError


class GraphError(Exception):
    """A workflow refused: /prompt's 400 body is {"error": e.error, "node_errors": e.node_errors}."""

    def __init__(self, error: dict, node_errors: dict | None = None):
        super().__init__(f"{error.get('message', '')}: {error.get('details', '')}")
        self.error = error
        self.node_errors = node_errors or {}

    def body(self) -> dict:
        return {"error": self.error, "node_errors": self.node_errors}


@dataclass
class Job:
    """One engine request per sampler chain that reaches output nodes."""
    outputs: list = field(default_factory=list)   # [{"node", "class_type", "type": output|temp, "filename_prefix"}]
    model: dict = field(default_factory=dict)     # what Engine.submit takes
    sample: dict = field(default_factory=dict)    # input images as absolute paths (a derived mask: a data URL)
    nodes: list = field(default_factory=list)     # the node ids it executes, dependencies first
    sampler_node: str = ""                        # the KSampler whose steps the progress names (a hires pair's last)
    fields: dict = field(default_factory=dict)    # engine field -> (node id, input name): where it came from


def analyse(prompt: dict, files, resolve=None) -> list[Job]:
    """The engine requests of a ComfyUI API-format workflow; GraphError (ComfyUI's /prompt 400 body) with
    every node error of the graph when anything is refused. `resolve(model, sample)`: the engine's
    checks (raising ConfigError), mapped back onto the node and input each field came from."""
    a = Analysis(prompt, files)
    try:
        missing = a.check_structure()
    except Invalid as e:
        raise GraphError(e.error) from None
    outputs = a.output_nodes()
    if not outputs and missing is None:
        raise GraphError(entry("prompt_no_outputs", "Prompt has no outputs",
                                "the workflow has no output node (SaveImage, PreviewImage, SaveAnimatedWEBP, "
                                "SaveWEBM, SaveVideo)"))
    seen: set = set()
    for out in outputs:
        a.check_inputs(out, seen)
    jobs = [Job(**j) for j in comfy_jobs.build(a, outputs)] if not a.errors else []
    if not a.errors and resolve is not None:
        for job in jobs:
            _check_with_engine(a, job, resolve)
    if a.errors:
        raise GraphError(missing or _failed(a.errors), _node_errors(a, outputs))
    return jobs


def _check_with_engine(a: Analysis, job: Job, resolve):
    try:
        resolve(job.model, job.sample)
    except ConfigError as e:
        _engine_error(a, job, e)


def _engine_error(a: Analysis, job: Job, e: ConfigError):
    node, input_name = _field_source(job, e.key)
    value = a.values.get(node, {}).get(input_name) if input_name else None
    a.fail(node, input_name, f"{e.message} (the engine's {e.key})" if input_name else f"{e.key}: {e.message}",
           engine_field=e.key, **({"received_value": value} if input_name and not isinstance(value, tuple) else {}))


def refusal(prompt: dict, job: Job, e: ConfigError) -> GraphError:
    """The GraphError for the engine refusing `job` later (Engine.submit's ConfigError: a dry-run resolve does
    not check input files), on the node and input the field came from."""
    a = Analysis(prompt, None)
    for node, data in prompt.items():
        inputs = data.get("inputs") if isinstance(data, dict) else None
        a.values[node] = {k: v for k, v in inputs.items() if not isinstance(v, list)} if isinstance(inputs, dict) else {}
    _engine_error(a, job, e)
    return GraphError(_failed(a.errors), _node_errors(a, [o["node"] for o in job.outputs]))


def _field_source(job: Job, key: str) -> tuple:
    """(node, input) an engine field came from: the longest recorded prefix of `key`, else the sampler."""
    hits = [k for k in job.fields if key == k or key.startswith((k + ".", k + "["))]
    if hits:
        return job.fields[max(hits, key=len)]
    if key == "model" or key.startswith("model."):
        return job.fields.get("model", (job.sampler_node, "model"))
    return job.sampler_node, None


def _failed(errors: dict) -> dict:
    lines = [f"{e['message']}: {e['details']}" for errs in errors.values() for e in errs]
    return entry("prompt_outputs_failed_validation", "Prompt outputs failed validation", "\n".join(lines))


def _node_errors(a: Analysis, outputs: list) -> dict:
    """ComfyUI's node_errors: {node: {errors, dependent_outputs, class_type}}."""
    reach = {out: reachable(a.prompt, out) for out in outputs}
    out = {}
    for node, errs in a.errors.items():
        data = a.prompt.get(node)
        out[node] = {"errors": errs, "dependent_outputs": [o for o in outputs if node in reach[o]],
                     "class_type": data.get("class_type") if isinstance(data, dict) else None}
    return out
