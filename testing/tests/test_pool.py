"""ComponentPool: identity, hits, release, keep-warm, eviction under memory pressure, idle unload."""
import os
import shutil
import time

import pytest

from extensions_built_in.inference_engine.engine import Engine
from extensions_built_in.inference_engine.worker import WorkerCore
from toolkit.models.tiny import make_shared_pair
from toolkit.config_modules import ModelConfig
from toolkit.models.v2.pool import ComponentPool


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    a, b = make_shared_pair("zimage", root / "a", root / "b")
    return str(a), str(b)


def _engine(tmp_path, **kw):
    """The generation worker's side, where holders and the pool live."""
    return WorkerCore(lambda msg: None, **kw)


def _build(engine, folder, **model):
    return engine._ensure_holder(ModelConfig.from_dict({"arch": "zimage", "name_or_path": folder, **model}), None)


def roles(pool):
    return sorted(e.identity.role for e in pool.entries.values())


def test_shared_components_hit_and_denoiser_swaps(pair, tmp_path):
    a, b = pair
    eng = _engine(tmp_path)
    _build(eng, a)
    p = eng.pool
    assert (p.hits, p.loads) == (0, 5)
    _build(eng, b)
    # tokenizer, text encoder, vae, scheduler are the same files: hits; only the transformer loads
    assert p.hits == 4 and p.loads == 6
    assert roles(p) == ["scheduler", "text_encoder", "tokenizer", "transformer", "vae"]
    transformer = p.holds("transformer")[0]
    assert os.path.realpath(b) in transformer.identity.paths[0]
    _build(eng, a)
    assert p.hits == 8 and p.loads == 7


def test_same_file_through_another_folder_shares(pair, tmp_path):
    """Identity is the weight file, not the folder that named it."""
    a, _ = pair
    link = tmp_path / "link"
    os.symlink(a, link)
    eng = _engine(tmp_path)
    _build(eng, a)
    _build(eng, str(link))
    assert eng.pool.loads == 5 and eng.pool.hits == 5


def test_different_finetune_never_shares(pair, tmp_path):
    a, _ = pair
    copy = tmp_path / "finetune"
    shutil.copytree(a, copy)
    w = copy / "transformer" / "diffusion_pytorch_model.safetensors"
    data = bytearray(w.read_bytes())
    data[-1] ^= 1
    w.write_bytes(bytes(data))
    eng = _engine(tmp_path)
    _build(eng, a)
    _build(eng, str(copy))
    t = eng.pool.holds("transformer")
    assert len(t) == 1 and str(copy) in t[0].identity.paths[0]
    # the copy's weight files are other files (other inodes): TE, VAE and transformer reload; the
    # tokenizer and scheduler, identified by their config content, are shared
    assert eng.pool.loads == 8


def test_quantization_is_part_of_identity(pair, tmp_path):
    a, _ = pair
    eng = _engine(tmp_path)
    _build(eng, a)
    _build(eng, a, quantize=True, qtype="qint8")
    assert eng.pool.loads == 6                  # only the transformer reloaded, quantized
    assert eng.pool.holds("transformer")[0].identity.qtype == "qint8"


def test_keep_resident_keeps_untouched_entries(pair, tmp_path):
    a, b = pair
    eng = _engine(tmp_path, keep_resident_gb=1.0)
    _build(eng, a)
    _build(eng, b)
    assert len(eng.pool.holds("transformer")) == 2     # A's transformer kept warm
    _build(eng, a)
    assert eng.pool.loads == 6                         # ... and reused without a load


def test_keep_resident_budget_is_lru(pair, tmp_path):
    a, b = pair
    eng = _engine(tmp_path)
    _build(eng, a)
    size = eng.pool.holds("transformer")[0].bytes
    eng.pool.keep_resident_bytes = size - 1           # too small for the untouched transformer
    _build(eng, b)
    assert len(eng.pool.holds("transformer")) == 1


def test_eviction_before_load_when_memory_is_short(pair, tmp_path):
    a, b = pair
    free = {"bytes": 1 << 40}
    pool = ComponentPool(keep_resident_bytes=1 << 40, free_memory=lambda device: free["bytes"])
    eng = _engine(tmp_path, pool=pool)
    _build(eng, a)
    free["bytes"] = 0                                   # nothing fits: untouched entries must go first
    _build(eng, b)
    assert pool.evictions >= 1
    assert len(pool.holds("transformer")) == 1


def test_idle_unload(pair, tmp_path):
    """The engine asks its worker to unload after idle_unload_seconds without requests."""
    import threading
    a, _ = pair
    eng = Engine(output_folder=str(tmp_path / "out"), idle_unload_seconds=0.3, worker="thread")
    eng.warm_load({"arch": "zimage", "name_or_path": a})
    pool = eng.worker.core.pool
    assert pool.entries and eng.health()["active"]["arch"] == "zimage"
    t = threading.Thread(target=eng.run_forever, daemon=True)
    t.start()
    deadline = time.time() + 30
    while time.time() < deadline and (pool.entries or eng.health()["active"]):
        time.sleep(0.05)
    eng.stop()
    t.join(10)
    assert not pool.entries and eng.health()["active"] is None


def test_stats_reveal_no_paths(pair, tmp_path):
    a, _ = pair
    eng = _engine(tmp_path)
    _build(eng, a)
    text = repr(eng.pool.stats())
    assert a not in text and "/" not in text.replace("//", "")
