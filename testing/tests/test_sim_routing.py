"""The routing simulation (testing/sim_routing.py, testing/sim/): hand-computed runs, determinism,
the JSON line, affinity against random, the imbalance bound, and that its core needs no torch."""
import ast
import json
import os
import sys

import pytest

from testing import sim_routing
from testing.sim.catalog import FAMILIES, Model, build_models
from testing.sim.params import SimParams
from testing.sim.policies import affinity, affinity_choice
from testing.sim.simulate import build_replicas, simulate
from testing.sim.trace import Request, make_trace

G = 10**9
FAM = FAMILIES[0]
SMALL = SimParams(gpu_gb=7, reserve_gb=0, disk_gbps=2, pcie_gbps=4, page_cache_gbps=8)
POLICY_NAMES = ["random", "least_queue", "power_of_two", "affinity"]


def req(i, t, model, service=10.0):
    return Request(i, t, model, 10, 1.0, service)


def test_second_request_of_a_model_is_a_hit_and_loads_nothing():
    models = [Model("a", FAM, (("te", 2 * G), ("tr_a", 4 * G)))]
    row = simulate(models, [req(0, 0.0, 0), req(1, 20.0, 0)], 1, "affinity", SMALL)
    # first: te 2/2 + 2/4 s, tr 4/2 + 4/4 s = 4.5 s of loading, then 10 s; second: 10 s
    assert row["bytes_loaded"] == 6 * G
    assert row["load_s"] == pytest.approx(4.5)
    assert row["hit_rate"] == 0.5
    assert row["p50_s"] == pytest.approx((14.5 + 10) / 2)
    assert row["p99_s"] == pytest.approx(10 + 0.99 * 4.5)


def test_evicted_model_reloads_from_the_page_cache():
    models = [Model("a", FAM, (("te_a", 2 * G), ("tr_a", 4 * G))), Model("b", FAM, (("te_b", 2 * G), ("tr_b", 4 * G)))]
    row = simulate(models, [req(0, 0.0, 0), req(1, 100.0, 1), req(2, 200.0, 0)], 1, "affinity", SMALL)
    # one 6 GB model fits the 7 GB GPU: b evicts a; a's files come back at 8 GB/s: 0.25+0.5 + 0.5+1
    assert row["bytes_loaded"] == 18 * G
    assert row["load_s"] == pytest.approx(4.5 + 4.5 + 2.25)
    assert row["hit_rate"] == 0.0


def test_a_family_shares_its_text_encoder():
    models = [Model("a", FAM, (("te", 2 * G), ("tr_a", 4 * G))), Model("a2", FAM, (("te", 2 * G), ("tr_a2", 4 * G)))]
    row = simulate(models, [req(0, 0.0, 0), req(1, 100.0, 1)], 1, "random", SimParams(gpu_gb=20, reserve_gb=0))
    assert row["bytes_loaded"] == 10 * G
    assert row["hit_rate"] == 0.25


def test_a_model_larger_than_the_gpu_is_an_error():
    models = [Model("big", FAM, (("tr", 8 * G),))]
    with pytest.raises(ValueError, match="more than a GPU"):
        simulate(models, [req(0, 0.0, 0)], 1, "random", SMALL)


def test_same_seed_same_rows_other_seed_other_rows():
    args = sim_routing.parse(["--quick", "--replicas", "4", "16"])
    assert sim_routing.run(args) == sim_routing.run(args)
    assert sim_routing.run(args) != sim_routing.run(sim_routing.parse(["--quick", "--replicas", "4", "16", "--seed", "1"]))


def test_json_is_one_line_of_rows(capsys):
    assert sim_routing.main(["--json", "--quick"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    rows = json.loads(out)
    assert [(r["policy"], r["replicas"]) for r in rows] == [(p, n) for n in (4, 16, 64) for p in POLICY_NAMES]
    for r in rows:
        assert set(r) == {"policy", "replicas", "p50_s", "p99_s", "bytes_loaded", "load_s", "hit_rate"}
        assert isinstance(r["bytes_loaded"], int) and r["bytes_loaded"] > 0
        assert 0 < r["p50_s"] <= r["p99_s"] and r["load_s"] > 0
        assert 0.0 <= r["hit_rate"] <= 1.0


def test_affinity_loads_under_half_the_bytes_of_random_on_a_zipf_trace():
    models = build_models(40)
    trace = make_trace(models, 1500, 8, 0.5, 1.1, seed=3)
    rows = {p: simulate(models, trace, 8, p, SimParams(), seed=3) for p in POLICY_NAMES}
    assert rows["affinity"]["bytes_loaded"] < rows["random"]["bytes_loaded"] / 2
    assert rows["affinity"]["hit_rate"] > rows["random"]["hit_rate"]
    assert all(0.0 <= r["hit_rate"] <= 1.0 for r in rows.values())


def test_affinity_choice_ranks_bytes_then_queue_within_the_bound():
    costs = [(0, 3), (10 * G, 0), (5 * G, 1)]
    assert affinity_choice(costs, 0) == 1
    assert affinity_choice(costs, 1) == 2
    assert affinity_choice(costs, 3) == 0
    assert affinity_choice([(5, 2), (5, 1), (5, 1)], 4) == 1     # equal bytes: the shorter queue, then the first


@pytest.mark.parametrize("bound", [0, 1, 2])
def test_imbalance_bound_spreads_a_hot_model(bound):
    """A burst of one model (nothing finishes meanwhile): the replica that holds it takes requests
    only while its queue is within the bound of the shortest, so the burst spreads over all."""
    import random
    model = build_models(10)[0]
    params = SimParams(max_imbalance=bound)
    replicas, rng = build_replicas(4, params), random.Random(0)
    for i in range(40):
        r = replicas[affinity(replicas, model, rng, params, 0.0)]
        r.enqueue(req(i, 0.0, 0), model)
        lens = [x.queue_len() for x in replicas]
        assert max(lens) - min(lens) <= bound + 1
    assert min(x.queue_len() for x in replicas) >= 10 - bound - 1


def test_without_a_bound_a_hot_model_piles_onto_one_replica():
    import random
    model = build_models(10)[0]
    params = SimParams(max_imbalance=10**6)
    replicas, rng = build_replicas(4, params), random.Random(0)
    for i in range(40):
        replicas[affinity(replicas, model, rng, params, 0.0)].enqueue(req(i, 0.0, 0), model)
    assert sorted(x.queue_len() for x in replicas) == [0, 0, 0, 40]


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "scale.png"
    assert sim_routing.main(["--quick", "--replicas", "2", "4", "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert os.listdir(tmp_path) == ["scale.png"]


@pytest.mark.parametrize("argv, flag", [(["--replicas", "0"], "--replicas"), (["--max-imbalance", "-1"], "--max-imbalance"),
                                        (["--disk-gbps", "0"], "--disk-gbps"), (["--reserve-gb", "90"], "--reserve-gb")])
def test_bad_arguments_name_the_flag(capsys, argv, flag):
    with pytest.raises(SystemExit):
        sim_routing.main(argv)
    assert flag in capsys.readouterr().err


def test_the_simulator_imports_only_the_standard_library_and_numpy():
    """matplotlib only inside the plot function; never torch. The router's ranking it shares
    (extensions_built_in/inference_cluster/affinity.py) is held to the same."""
    import extensions_built_in.inference_cluster.affinity as affinity_module
    folder = os.path.dirname(os.path.abspath(sim_routing.__file__))
    files = [os.path.join(folder, "sim_routing.py"), affinity_module.__file__] + [
        os.path.join(folder, "sim", f) for f in os.listdir(os.path.join(folder, "sim")) if f.endswith(".py")]
    for path in files:
        tree = ast.parse(open(path, encoding="utf-8").read())
        top = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
        top |= {n.module.split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
        assert top <= set(sys.stdlib_module_names) | {"numpy", "testing", "extensions_built_in"}, path
        every = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert "torch" not in every and ("matplotlib" not in every or path.endswith("plot.py")), path


def test_affinity_time_weighs_the_wait_against_the_load_in_seconds():
    """The holder with 100 s of work ahead loses to an empty replica (a 6 GB load at 2 and 4 GB/s:
    4.5 s); with 1 s of work ahead it wins."""
    import random
    from testing.sim.policies import affinity_time
    model = Model("a", FAM, (("te", 2 * G), ("tr", 4 * G)))
    for service, expected in ((100.0, 1), (1.0, 0)):
        replicas = build_replicas(2, SMALL)
        replicas[0].enqueue(req(0, 0.0, 0, service), model)
        replicas[0].start_next(0.0)              # loads for 4.5 s, then samples for `service`
        picks = {affinity_time(replicas, model, random.Random(s), SMALL, 4.5) for s in range(4)}
        assert picks == {expected}
