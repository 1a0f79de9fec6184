"""Dynamic batching: which queued requests may share one pipeline call with the request at the head.

A pipeline call takes one model, one size, one step count, one sampler and one guidance value, and
per row only a prompt, a negative prompt and a generator. So requests are compatible when
everything but those (and the output format, which only the file writer reads) is equal: the rule
compares the whole resolved model config (LoRAs included) and the whole sample config minus the
per-member fields, rather than listing what must match, so a new sample key is safe by default.
Requests with input images (or controls) are never batched (each would need its own image tensors), nor are
archs whose pipeline makes one output per pass, nor non-image modalities. No torch here.
"""
import json

PER_MEMBER = ("prompt", "negative_prompt", "seed", "batch_size", "output_ext")


def batch_key(model, sample) -> str | None:
    """What must be equal for two requests to share a call (a string), or None: never batched.
    `model` is a ModelConfig, `sample` a resolved GenerateImageConfig."""
    from toolkit.config_modules import GenerateImageConfig

    spec = model.spec
    if spec.modality != "image" or not spec.batch_arg:
        return None
    if any(getattr(sample, name) for name in GenerateImageConfig.INPUTS) or sample.hires is not None or sample.controls:
        return None         # a hires request runs two passes of its own (toolkit/models/hires_run.py)
    shared = {k: v for k, v in sample.to_dict().items() if k not in PER_MEMBER}
    shared["negative_prompt_set"] = sample.negative_prompt is not None   # unset is the pipeline's default, not ""
    return json.dumps([model.to_dict(), shared], sort_keys=True, default=str)


def take_batch(head, queued, max_batch: int, key=lambda r: batch_key(r.model, r.sample)) -> list:
    """The requests of `queued` (in queue order, head excluded) that join `head`'s call: compatible
    with the head, while the rows (each member's batch_size) stay within `max_batch`. Only the head's
    key counts, so a batch never serves a request the head would not have run with (fairness)."""
    rows = head.sample.batch_size
    if max_batch <= 1 or rows >= max_batch:
        return []
    want = key(head)
    if want is None:
        return []
    members = []
    for req in queued:
        if req is head or rows + req.sample.batch_size > max_batch:
            continue
        if key(req) == want:
            members.append(req)
            rows += req.sample.batch_size
            if rows == max_batch:
                break
    return members
