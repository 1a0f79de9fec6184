"""InferenceCluster job configs: checked before anything starts (no Ray here), errors naming the key."""
import json

import pytest

from jobs import get_job
from toolkit.errors import ConfigError
from toolkit.extension import get_all_extensions_process_dict


def job(tmp_path, cluster=None, engine=None, **process):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"job": "extension", "config": {"name": "c", "process": [
        {"type": "InferenceCluster", "cluster": cluster or {}, "engine": {"job_folder": str(tmp_path / "job"),
                                                                          **(engine or {})}, **process}]}}))
    return get_job(str(path))


def test_the_process_type_is_registered():
    assert "InferenceCluster" in get_all_extensions_process_dict()


def test_a_good_config_builds_one_token_for_every_replica(tmp_path):
    p = job(tmp_path, {"replicas": 2, "num_gpus": 1}).process[0]
    assert p.device == "cuda" and p.replicas == 2 and p.router == "affinity"
    assert p.replica_config["engine"]["token"] == p.token and len(p.token) >= 8
    assert p.replica_config["type"] == "InferenceEngine" and p.replica_config["device"] == "cuda"
    assert job(tmp_path, {"num_cpus": 0.5}).process[0].device == "cpu"


@pytest.mark.parametrize("cluster,engine,key", [
    ({"bogus": 1}, {}, "cluster.bogus"),
    ({"replicas": 0}, {}, "cluster.replicas"),
    ({"router": "random"}, {}, "cluster.router"),
    ({"num_gpus": -1}, {}, "cluster.num_gpus"),
    ({"port": 70000}, {}, "cluster.port"),
    ({"max_imbalance": "x"}, {}, "cluster.max_imbalance"),
    ({}, {"port": 8001}, "engine.port"),
    ({}, {"compat_port": 8002}, "engine.compat_port"),
    ({}, {"max_batch": 0}, "engine.max_batch"),        # an engine key, checked as a single engine's
])
def test_bad_values_name_their_key(tmp_path, cluster, engine, key):
    with pytest.raises(ConfigError) as e:
        job(tmp_path, cluster, engine)
    assert key in e.value.one_line(), e.value.one_line()
