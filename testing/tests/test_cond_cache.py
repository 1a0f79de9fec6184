"""The worker's conditioning cache (toolkit/models/v2/cond_cache.py): per arch, a repeated prompt skips
the text encoders (forward hooks count their calls) and the output is bit for bit the uncached one
(CPU float32), or the arch's row says why it is not cached; a swap to a model that shares the encoder
encodes nothing; the LRU stays within its bytes; a hit hands out fresh tensors; 0 MB turns it off."""
import numpy as np
import pytest
import torch

from extensions_built_in.inference_engine import messages as m
from extensions_built_in.inference_engine.engine import Engine
from extensions_built_in.inference_engine.worker import WorkerCore
from testing.fixtures import input_image
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.models.arch import TEXT_ENCODER
from toolkit.models.base_model import get_model_class
from toolkit.models.registry import ARCHS
from toolkit.models.tiny import make_shared_pair
from toolkit.models.v2.cond_cache import ConditioningCache, cached_call
from testing.tiny_runs import run_message

STREAM = {"latents": "none", "every_n_steps": 1, "max_frames": 4, "preview": "x0", "detach": False}


def _gen(arch, tmp_path, mc, **over):
    spec = ARCHS[arch]
    s = {**spec.tiny.sample, "prompt": "a small test prompt", "negative_prompt": "blurry", "seed": 7, **over}
    for name in spec.needed_inputs:
        s[name] = input_image(tmp_path / f"{name}.png", s.get("width") or 64, s.get("height") or 64)
    return GenerateImageConfig.from_dict(s, mc)


def _count_text_encoder_calls(holder) -> list:
    """One entry per forward of a text encoder of the holder or of any of its submodules (a pipeline may
    run an encoder's layers itself: Ideogram 4 calls its Qwen3-VL decoder layers one by one); hooks stay
    for the holder's life. Not the denoiser's own conditioning modules (`with_denoiser`: Stable Audio's
    projection, ACE-Step's condition encoder): they also run outside encode_prompt (durations, lyrics), on
    every request."""
    calls = []
    for c in holder.components:
        module = holder.loaded.get(c.role)
        if c.kind == TEXT_ENCODER and not c.with_denoiser and isinstance(module, torch.nn.Module):
            for sub in module.modules():
                sub.register_forward_hook(lambda *_a, role=c.role: calls.append(role))
    return calls


def _array(out):
    if isinstance(out, torch.Tensor):
        return out.detach().cpu().numpy()
    return np.asarray(out)


@pytest.mark.parametrize("arch", tuple(ARCHS))
def test_repeated_prompt_skips_the_text_encoder(arch, tiny, tmp_path):
    spec = ARCHS[arch]
    mc = ModelConfig.from_dict({"arch": arch, "name_or_path": tiny(arch), "dtype": "float32"})
    holder = get_model_class(arch)(mc).load_model()
    calls = _count_text_encoder_calls(holder)
    # OmniGen has none (its transformer embeds the prompt's tokens): nothing to cache, which its row says
    encoders = any(c.kind == TEXT_ENCODER and not c.with_denoiser for c in holder.components)
    assert encoders or spec.uncached_conditioning, f"{arch}: no text encoder, and no reason given"
    gen = _gen(arch, tmp_path, mc)
    plain = _array(holder.generate_single(gen))
    assert calls or not encoders, f"{arch}: no text-encoder forward seen"
    holder.cond_cache = cache = ConditioningCache(64 << 20)
    first = _array(holder.generate_single(gen))
    calls.clear()
    second = _array(holder.generate_single(gen))
    stats = cache.stats()
    if spec.uncached_conditioning:
        assert stats["hits"] == 0 and (calls or not encoders), f"{arch} declares itself uncached but hit the cache"
    else:
        assert stats["hits"] >= 1 and stats["bytes"] > 0, (arch, stats)
        assert not calls, f"{arch}: the text encoder ran on a repeated prompt ({calls})"
    np.testing.assert_array_equal(first, plain)
    np.testing.assert_array_equal(second, plain)


def test_uncached_archs_say_why():
    uncached = {name: spec.uncached_conditioning for name, spec in ARCHS.items() if spec.uncached_conditioning}
    # every other arch's prompt encoding is cached
    assert set(uncached) == {"qwen_image_edit", "longcat_image_edit", "omnigen", "kandinsky5_edit"}
    assert all(len(why) > 20 for why in uncached.values())


def test_same_prompt_on_two_models_encodes_once(tmp_path):
    a, b = make_shared_pair("zimage", tmp_path / "a", tmp_path / "b")
    core = WorkerCore(lambda msg: None)
    outputs = []
    for i, folder in enumerate((a, b, a)):
        core.run(run_message(f"r{i}", {"arch": "zimage", "name_or_path": str(folder)}, {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2, "seed": 3}, str(tmp_path / f"out{i}.png"), STREAM))
        outputs.append((tmp_path / f"out{i}.png").read_bytes())
    stats = core.state().cond_cache
    assert core.builds == 3 and stats["misses"] == 1 and stats["hits"] == 2, stats
    assert outputs[0] == outputs[2] and outputs[0] != outputs[1]


def test_off_at_zero_and_reported_in_health(tmp_path, tiny):
    core = WorkerCore(lambda msg: None, cond_cache_mb=0)
    for i in range(2):
        core.run(run_message(f"r{i}", {"arch": "zimage", "name_or_path": tiny("zimage")}, {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 1, "seed": 3}, str(tmp_path / f"out{i}.png"), STREAM))
    stats = core.state().cond_cache
    assert stats["enabled"] is False and stats["hits"] == stats["misses"] == stats["bytes"] == 0
    eng = Engine(output_folder=str(tmp_path / "e"), worker="thread", cond_cache_mb=1)
    assert eng.worker_options["cond_cache_mb"] == 1
    eng.start_worker()
    try:
        health = eng.health()
        assert health["cond_cache"]["max_bytes"] == 1 << 20 and health["cond_cache"]["hits"] == 0
        assert {"ok", "busy", "queue", "active", "memory", "pool", "worker", "uptime"} <= set(health)
    finally:
        eng.shutdown_worker()


class _Pipe:
    """An encode_prompt with the shape of diffusers' (tensors out; defaults; a tensor argument)."""

    def __init__(self):
        self.calls = 0

    def encode_prompt(self, prompt, device=None, num_images_per_prompt=1, prompt_embeds=None):
        self.calls += 1
        n = len(prompt) if isinstance(prompt, list) else 1
        return torch.full((n * num_images_per_prompt, 4), float(len(str(prompt)))), None


def test_keys_on_bound_arguments_and_skips_tensors():
    cache, pipe = ConditioningCache(1 << 20), _Pipe()
    encode = cached_call(cache, pipe.encode_prompt, ("ctx",))
    encode("a cat")
    encode(prompt="a cat", num_images_per_prompt=1)     # the same bound call
    assert pipe.calls == 1 and cache.hits == 1
    encode(["a cat", "a dog"])                          # a batched call: an entry of its own
    encode("a cat", num_images_per_prompt=2)
    assert pipe.calls == 3
    encode("a cat", prompt_embeds=torch.zeros(1, 4))    # embeddings passed in: runs uncached
    encode("a cat", prompt_embeds=torch.zeros(1, 4))
    assert pipe.calls == 5 and cache.uncached == 2
    other = cached_call(cache, pipe.encode_prompt, ("another encoder",))
    other("a cat")
    assert pipe.calls == 6


def test_a_hit_cannot_be_mutated_and_the_lru_keeps_its_bound():
    row = 4 * 4                                          # one (1, 4) float32 output
    cache, pipe = ConditioningCache(3 * row), _Pipe()
    encode = cached_call(cache, pipe.encode_prompt, ())
    got, _ = encode("x")
    got.mul_(0)                                          # the pipeline scribbles on what it got
    again, _ = encode("x")
    assert again.eq(1.0).all() and again.data_ptr() != got.data_ptr()
    again.add_(5)
    assert encode("x")[0].eq(1.0).all()
    for p in ("a", "bb", "ccc", "dddd"):
        encode(p)
    stats = cache.stats()
    assert stats["bytes"] <= 3 * row and stats["entries"] == 3 and stats["evictions"] == 2
    calls = pipe.calls
    encode("x")                                          # the least recently used went first
    assert pipe.calls == calls + 1
