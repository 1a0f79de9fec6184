"""The queue policy (engine.queue_policy: fifo | affinity, engine.max_overtake) and /queue's
estimates (estimated_start, load_cost)."""
import random
import threading

import pytest

from extensions_built_in.inference_engine import queue_policy as qp
from extensions_built_in.inference_engine.engine import Engine, NotQueued
from toolkit.config_modules import ModelConfig
from toolkit.errors import ConfigError


class R:
    def __init__(self, name, base, pinned=False):
        self.name, self.base, self.overtaken, self.pinned = name, base, 0, pinned


def _pick(queued, resident, policy="affinity", k=2):
    return qp.pick(queued, resident, policy, k, base=lambda r: r.base)


def test_affinity_runs_a_resident_request_before_a_head_that_needs_a_load():
    q = [R("a", "B"), R("b", "C"), R("c", "A"), R("d", "A")]
    assert _pick(q, "A", "fifo") == 0
    assert _pick(q, "A") == 2 and [r.overtaken for r in q] == [1, 1, 0, 0]
    assert _pick(q, "A", k=1) == 0, "c is two places back: over max_overtake 1"
    assert _pick([R("a", "A"), R("b", "A")], "A") == 0, "the head needs no load: it goes"
    assert _pick(q, None) == 0, "nothing resident: every request loads"


def test_affinity_neither_passes_a_moved_request_nor_lets_it_pass():
    """A request a person moved (pinned) keeps its place: not overtaken as the head, not overtaken
    from behind, and not itself jumping over those the person left ahead of it."""
    assert _pick([R("a", "B", pinned=True), R("b", "A")], "A") == 0, "a pinned head is not passed"
    assert _pick([R("a", "B"), R("b", "A", pinned=True)], "A") == 0, "a pinned request does not pass"
    assert _pick([R("a", "B"), R("p", "C", pinned=True), R("c", "A")], "A") == 0, "nor is it passed from behind"
    q = [R("a", "B"), R("c", "A"), R("p", "C", pinned=True)]
    assert _pick(q, "A") == 1 and q[0].overtaken == 1, "ahead of a pinned request affinity still works"


@pytest.mark.parametrize("seed", range(40))
def test_no_request_is_overtaken_more_than_max_overtake_times(seed):
    """Random traces: arrivals from 3 models, the resident model is the last one run; every pick
    passes at most max_overtake requests and nobody is passed more than max_overtake times."""
    rng = random.Random(seed)
    k = rng.choice([1, 2, 3])
    queue, resident, ran, n = [], None, [], 0
    for _ in range(200):
        for _ in range(rng.choice([0, 1, 1, 2])):
            queue.append(R(f"r{n}", rng.choice("ABC")))
            n += 1
        if not queue:
            continue
        before = list(queue)
        i = _pick(queue, resident, k=k)
        assert 0 <= i <= k
        chosen = queue.pop(i)
        assert all(r.overtaken <= k for r in before), [r.overtaken for r in before]
        if i:
            assert chosen.base == resident and before[0].base != resident
        resident = chosen.base
        ran.append(chosen)
    assert all(r.overtaken <= k for r in ran + queue)
    assert any(r.overtaken for r in ran), "the trace never exercised affinity"


def test_options_are_checked():
    from extensions_built_in.inference_engine.engine_settings import EngineSettings

    s = EngineSettings.from_dict({"queue_policy": "affinity", "max_overtake": 3})
    assert (s.queue_policy, s.max_overtake) == ("affinity", 3)
    for bad, key in (({"queue_policy": "lifo"}, "engine.queue_policy"), ({"max_overtake": -1}, "engine.max_overtake"),
                     ({"max_batch": 0}, "engine.max_batch"), ({"max_overtake": True}, "engine.max_overtake")):
        with pytest.raises(ConfigError) as e:
            EngineSettings.from_dict(bad)
        assert e.value.key == key


def test_estimated_starts_add_the_steps_ahead():
    assert qp.estimated_starts(3, [4, 10, 2], 0.5) == [1.5, 3.5, 8.5]
    assert qp.estimated_starts(3, [4], None) == [None]


def test_load_cost_is_zero_on_the_resident_model_else_its_weight_files(tiny):
    a = ModelConfig.from_dict({"arch": "zimage", "name_or_path": tiny("zimage")})
    b = ModelConfig.from_dict({"arch": "sd1", "name_or_path": tiny("sd1")})
    assert qp.load_cost(a, a, {}) == 0
    assert qp.load_cost(a, b, {}) == qp.weight_files_bytes(a) > 0
    assert qp.load_cost(a, None, {}) == qp.weight_files_bytes(a)


# -- the engine ---------------------------------------------------------------------------------------

def _run_order(tiny, tmp_path, policy, move=None):
    eng = Engine(output_folder=str(tmp_path / (f"{policy}-{move[0]}-{move[1]}" if move else policy)), worker="thread", queue_policy=policy, max_batch=1)
    try:
        a = {"arch": "zimage", "name_or_path": tiny("zimage")}
        b = {"arch": "zimage", "name_or_path": tiny("zimage", seed=1)}
        eng.warm_load(a)
        sample = {"prompt": "x", "width": 64, "height": 64, "num_inference_steps": 2, "seed": 1}
        reqs = [eng.submit(b, sample, request_id="needs-load"), eng.submit(a, sample, request_id="resident")]
        q = {r["request_id"]: r for r in eng.queue_snapshot()["queued"]}
        assert q["resident"]["load_cost"] == 0 and q["needs-load"]["load_cost"] > 0
        assert q["needs-load"]["estimated_start"] is None, "no step timed yet"
        if move is not None:
            assert eng.move(*move)[1] == move[1]
        loop = threading.Thread(target=eng.run_forever, daemon=True)
        loop.start()
        for r in reqs:
            assert r.done_event.wait(120) and r.status == "ok"
        assert eng.step_seconds is not None and eng.step_seconds > 0
        return [r.request_id for r in sorted(reqs, key=lambda r: r.started_at)]
    finally:
        eng.stop()


def test_affinity_in_the_engine_saves_the_swap_and_fifo_does_not(tiny, tmp_path):
    assert _run_order(tiny, tmp_path, "fifo") == ["needs-load", "resident"]
    assert _run_order(tiny, tmp_path, "affinity") == ["resident", "needs-load"]


def test_a_moved_request_runs_where_it_was_put_under_either_policy(tiny, tmp_path):
    """Moving the resident-model request behind the one that needs a load: affinity keeps the
    person's order (the load is not saved); fifo follows it too."""
    for policy in ("fifo", "affinity"):
        assert _run_order(tiny, tmp_path, policy, move=("resident", 1)) == ["needs-load", "resident"], policy
    assert _run_order(tiny, tmp_path, "fifo", move=("resident", 0)) == ["resident", "needs-load"]


def test_move_reorders_the_queue_and_checks_its_input(tiny, tmp_path):
    """Engine.move without a running loop: every request stays queued, so the order is exact."""
    eng = Engine(output_folder=str(tmp_path / "move"), worker="thread")
    model = {"arch": "zimage", "name_or_path": tiny("zimage")}
    for rid in ("a", "b", "c"):
        eng.submit(model, {"prompt": rid, "width": 64, "height": 64, "num_inference_steps": 2}, request_id=rid)
    order = lambda: [r["request_id"] for r in eng.queue_snapshot()["queued"]]
    req, pos = eng.move("c", 1)
    assert (req.request_id, pos, order()) == ("c", 1, ["a", "c", "b"])
    assert [r["pinned"] for r in eng.queue_snapshot()["queued"]] == [False, True, False]
    assert eng.move("a", 99)[1] == 2 and order() == ["c", "b", "a"], "past the end: last"
    assert eng.move("a", 0)[1] == 0 and order() == ["a", "c", "b"]
    assert eng.move("nope", 0) is None
    for bad in (-1, 1.5, "1", True, None):
        with pytest.raises(ConfigError) as e:
            eng.move("a", bad)
        assert e.value.key == "position"
    eng.cancel("b")
    with pytest.raises(NotQueued, match="cancelled"):
        eng.move("b", 0)
    assert order() == ["a", "c"]
    row = eng.queue_snapshot()["queued"][0]
    assert (row["model"], row["width"], row["height"], row["steps"]) == ("zimage-seed0", 64, 64, 2)
