"""Dynamic batching (engine.max_batch): compatible queued requests run as one pipeline call, each
keeping its own stream (progress, its latent rows, result, file), its own cancel and its place in
/queue. Member i's file equals its solo run within one 8-bit level: the batched call runs every
matmul and attention over more rows, which the kernels block and accumulate differently, changing
float32 low bits (as for sample.batch_size, test_batch.py); the noise is the same (a CPU generator
per row, seeded as the solo run seeds it)."""
import os
import threading

import numpy as np
import pytest
from PIL import Image

from extensions_built_in.inference_engine import batching, results_feed
from extensions_built_in.inference_engine.engine import Engine, Subscriber
from extensions_built_in.inference_engine.protocol import FrameReader
from extensions_built_in.inference_engine.worker import Faults
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.models.base_model import get_model_class

STEPS = 3


def _model(tiny, arch="zimage", **over):
    return {"arch": arch, "name_or_path": tiny(arch), "local_only": True, **over}


def _sample(**over):
    return {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": STEPS, "seed": 5, **over}


# -- the rule ----------------------------------------------------------------------------------------

class _R:
    def __init__(self, model, sample):
        self.model = ModelConfig.from_dict(model)
        self.sample = GenerateImageConfig.from_dict(sample, self.model)


def test_compatible_means_everything_but_prompts_seeds_and_format_is_equal(tiny, tmp_path):
    (tmp_path / "l.safetensors").write_bytes(b"")
    head = _R(_model(tiny), _sample(negative_prompt=""))
    same = [_R(_model(tiny), _sample(prompt="another", negative_prompt="blur", seed=9, output_ext="jpg"))]
    # an unset negative prompt is the pipeline's default (SDXL zeroes it), not "": never in a call with set ones
    other = [_R(_model(tiny), _sample()),
             _R(_model(tiny), _sample(num_inference_steps=STEPS + 1)), _R(_model(tiny), _sample(width=128)),
             _R(_model(tiny), _sample(guidance_scale=7.5)), _R(_model(tiny), _sample(sampler="euler")),
             _R(_model(tiny, "sd1"), _sample()), _R(_model(tiny, lora_path=str(tmp_path / "l.safetensors")), _sample()),
             _R(_model(tiny, dtype="bf16"), _sample())]
    key = batching.batch_key(head.model, head.sample)
    assert key is not None and batching.batch_key(same[0].model, same[0].sample) == key
    for r in other:
        assert batching.batch_key(r.model, r.sample) != key, r.sample.to_dict()
    assert batching.take_batch(head, other + same, 4) == same, "only the head's compatibles, in queue order"


def test_a_batch_stays_within_max_batch_images_and_never_takes_input_images(tiny, tmp_path):
    head = _R(_model(tiny), _sample())
    q = [_R(_model(tiny), _sample(batch_size=2)), _R(_model(tiny), _sample(batch_size=2)), _R(_model(tiny), _sample())]
    assert batching.take_batch(head, q, 4) == [q[0], q[2]], "1 + 2 + 1 rows; the second pair would make 5"
    assert batching.take_batch(head, q, 1) == [], "max_batch 1: no dynamic batching"
    Image.new("RGB", (64, 64)).save(tmp_path / "in.png")
    img = _R(_model(tiny), _sample(init_img=str(tmp_path / "in.png"), task="img2img"))
    assert batching.batch_key(img.model, img.sample) is None
    assert batching.take_batch(img, q, 4) == []
    wan = _R(_model(tiny, "wan21"), {**_sample(), "num_frames": 5})
    assert batching.batch_key(wan.model, wan.sample) is None, "videos are not batched"


# -- the holder: one call, rows per member ----------------------------------------------------------

def _levels(img):
    return np.asarray(img.convert("RGB"), dtype=np.int64)


def test_each_row_of_a_batched_call_is_its_solo_run(tiny):
    holder = get_model_class("zimage")(_model(tiny), device="cpu").load_model()
    gen = GenerateImageConfig.from_dict(_sample(guidance_scale=4.0), holder.model_config)
    rows = [("a fox", "", 5), ("a red house by the sea", "blurry", 11), ("a red house by the sea", "blurry", 12)]
    seen = []
    items = holder.generate_single(gen, rows=rows, on_step=lambda i, n, t, lat, x0: seen.append(lat.shape[0]))
    assert len(items) == 3 and seen == [3] * STEPS
    for (prompt, negative, seed), item in zip(rows, items):
        solo = holder.generate_single(GenerateImageConfig.from_dict(
            _sample(guidance_scale=4.0, prompt=prompt, negative_prompt=negative, seed=seed), holder.model_config))
        assert np.abs(_levels(item) - _levels(solo)).max() <= 1, (prompt, seed)
    assert np.abs(_levels(items[1]) - _levels(items[2])).max() > 1, "seeds 11 and 12 must differ"


# -- the engine -------------------------------------------------------------------------------------

class Gate(Faults):
    """Holds the call after step `at` until `go` is set (the test acts meanwhile)."""

    def __init__(self, at=1):
        super().__init__()
        self.at, self.steps = at, 0
        self.reached, self.go = threading.Event(), threading.Event()

    def on_step(self, check_cancel):
        self.steps += 1
        if self.steps == self.at:
            self.reached.set()
            assert self.go.wait(60)


def _frames(req):
    """A subscriber that decodes every frame `req` publishes (latents included)."""
    got = []
    req.attach(Subscriber(lambda frame, _latent: got.extend(FrameReader().feed(frame))))
    return got


@pytest.fixture
def engine(tmp_path):
    made = []

    def make(**kw):
        kw.setdefault("faults", Faults())
        e = Engine(output_folder=str(tmp_path / f"out{len(made)}"), worker="thread", **kw)
        infos = []
        e.on_info = lambda info, step=None: infos.append(info)
        e.infos = infos
        e.start_worker()
        made.append(e)
        return e

    def start(e):
        e.loop = threading.Thread(target=e.run_forever, daemon=True)
        e.loop.start()
    make.start = start
    yield make
    for e in made:
        e.stop()
        if hasattr(e, "loop"):
            e.loop.join(30)


def _wait(reqs):
    for r in reqs:
        assert r.done_event.wait(120), r.request_id


def test_queued_compatible_requests_run_as_one_call_each_with_its_own_stream_and_file(engine, tiny):
    eng = engine(max_batch=4)
    model = _model(tiny)
    samples = [_sample(prompt="a fox", seed=1), _sample(prompt="a cat", seed=2, batch_size=2),
               _sample(prompt="a fox", seed=3, output_ext="jpg"), _sample(prompt="an owl", seed=4)]
    reqs = [eng.submit(model, s, request_id=f"m{i}") for i, s in enumerate(samples)]
    frames = [_frames(r) for r in reqs]
    engine.start(eng)
    _wait(reqs)
    assert [r.status for r in reqs] == ["ok"] * 4
    assert any("a batch of 3" in i for i in eng.infos), "1 + 2 + 1 rows fill max_batch 4; the owl runs next"
    assert reqs[3].started_at > reqs[0].started_at
    for r, f, s in zip(reqs, frames, samples):
        types = [h["type"] for h, _ in f]
        assert types.count("progress") == STEPS and types.count("latent") == STEPS, r.request_id
        assert types.count("result") == s.get("batch_size", 1) and types[-1] == "end"
        lat = [h for h, _ in f if h["type"] == "latent"][-1]
        assert lat["shape"][0] == s.get("batch_size", 1), "a member's latent frame carries only its rows"
        assert [res["seed"] for res in r.results] == [s["seed"] + j for j in range(s.get("batch_size", 1))]
        for res in r.results:
            assert os.path.getsize(res["path"]) == res["bytes"] > 0
    assert reqs[2].results[0]["ext"] == "jpg"

    solo = engine(max_batch=1)       # the PNG members alone: within one level of their batched files
    engine.start(solo)
    for i in (0, 1):
        one = solo.submit(model, samples[i], request_id=f"s{i}")
        _wait([one])
        for got, want in zip(reqs[i].results, one.results):
            assert np.abs(_levels(Image.open(got["path"])) - _levels(Image.open(want["path"]))).max() <= 1
    assert not any("a batch of" in i for i in solo.infos), "max_batch 1 turns batching off"


def test_a_cancelled_member_ends_alone_and_the_others_finish(engine, tiny):
    gate = Gate(at=1)
    eng = engine(max_batch=4, faults=gate)
    reqs = [eng.submit(_model(tiny), _sample(prompt=p, seed=i), request_id=f"c{i}")
            for i, p in enumerate(["a fox", "a cat", "an owl"])]
    engine.start(eng)
    assert gate.reached.wait(120)
    q = eng.queue_snapshot()
    assert [r["request_id"] for r in q["batch"]] == ["c0", "c1", "c2"] and q["running"]["request_id"] == "c0"
    assert all(r["status"] == "running" for r in q["batch"]) and q["queued"] == []
    eng.cancel("c1")
    gate.go.set()
    _wait(reqs)
    assert [r.status for r in reqs] == ["ok", "cancelled", "ok"]
    assert reqs[1].step == 1 and not reqs[1].results
    assert not [n for n in os.listdir(eng.output_folder) if n.startswith("c1")]
    assert all(r.step == STEPS for r in (reqs[0], reqs[2]))


def test_cancelling_every_member_stops_the_call(engine, tiny):
    gate = Gate(at=1)
    eng = engine(max_batch=4, faults=gate)
    reqs = [eng.submit(_model(tiny), _sample(seed=i, num_inference_steps=8), request_id=f"a{i}") for i in range(3)]
    engine.start(eng)
    assert gate.reached.wait(120)
    for r in reqs:
        eng.cancel(r.request_id)
    gate.go.set()
    _wait(reqs)
    assert [r.status for r in reqs] == ["cancelled"] * 3 and all(r.step < 8 for r in reqs)
    assert [n for n in os.listdir(eng.output_folder) if n != results_feed.FILE_NAME] == []   # no image file
    after = eng.submit(_model(tiny), _sample(), request_id="after")      # the worker serves on
    _wait([after])
    assert after.status == "ok"


def test_incompatible_requests_are_not_batched_and_keep_their_order(engine, tiny):
    eng = engine(max_batch=4)
    reqs = [eng.submit(_model(tiny), _sample(num_inference_steps=STEPS + i % 2), request_id=f"o{i}")
            for i in range(3)]
    engine.start(eng)
    _wait(reqs)
    assert [r.status for r in reqs] == ["ok"] * 3
    assert reqs[0].started_at == reqs[2].started_at < reqs[1].started_at, "o2 joins o0's call; o1 runs after"


def test_a_fault_in_a_batched_call_ends_every_member_and_the_queue_goes_on(engine, tiny):
    eng = engine(max_batch=2, faults=Faults(sample_oom=1))
    reqs = [eng.submit(_model(tiny), _sample(seed=i), request_id=f"f{i}") for i in range(3)]
    engine.start(eng)
    _wait(reqs)
    assert [r.status for r in reqs] == ["error", "error", "ok"]
    assert all("out of memory" in r.error for r in reqs[:2]) and reqs[0].started_at == reqs[1].started_at
