"""The placements' runtime (toolkit/models/v2/residency.py) on tiny models, CPU float32: every placement
gives the resident output bit for bit, components move between placements through the pool without being
read again (staged ones excepted: that is what staged is), FP8 stays FP8 while it moves, the stage switch
keeps one visiting component on the device, and a component's bytes from its files' headers are what the
pool holds once it is loaded."""
import numpy as np
import pytest
import torch

from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.models import component_sizes
from toolkit.models.base_model import get_model_class
from toolkit.models.tiny import sample_settings
from toolkit.models.v2.pool import ComponentPool
from toolkit.models.v2.residency import SimulatedDevice, is_released
from toolkit.placement import CPU_CACHE, LAYERS, RESIDENT, STAGED

PLACEMENTS = ["resident", "cpu_cache", "staged", "layers", {"layers": 2}]


def _gen(arch, seed=7):
    return GenerateImageConfig.from_dict({**sample_settings(arch), "prompt": "a red fox in the snow", "seed": seed}, arch)


def _build(arch, folder, pool, placement, memory=None, **model):
    holder = get_model_class(arch)({"arch": arch, "name_or_path": folder, "placement": placement, **model},
                                   device="cpu", memory=memory)
    with pool.building():
        holder.load_model()
    pool.release_unused()
    return holder


@pytest.mark.parametrize("arch", ["zimage", "flux", "sdxl"])
def test_every_placement_is_bit_for_bit_resident(arch, tiny):
    """One pool for every build: each placement after the first re-places the same modules (pool hits),
    staged ones read again from their files at each stage."""
    folder, pool = tiny(arch), ComponentPool()
    denoiser = "unet" if arch == "sdxl" else "transformer"
    placements = PLACEMENTS[:5] + [{"text_encoder": "staged", "vae": "cpu_cache", denoiser: {"layers": 1}}]
    reference = None
    for placement in placements + ["resident"]:
        holder = _build(arch, folder, pool, placement)
        out = np.asarray(holder.generate_single(_gen(arch)))
        if reference is None:
            reference = out
        assert np.array_equal(out, reference), placement
        again = np.asarray(holder.generate_single(_gen(arch)))          # the second request: moved back and in
        assert np.array_equal(again, reference), placement
        plan = holder.plan.placements
        if placement == "staged":
            assert set(plan.values()) == {STAGED}
            assert all(is_released(holder.loaded[r]) for r in plan)      # nothing held between requests
            assert holder.residency.moves == 2 * len(plan)               # each read once per request
        if placement == "cpu_cache":
            assert set(plan.values()) == {CPU_CACHE} and holder.residency.moves == 2 * len(plan)
        if placement in ("layers", {"layers": 2}):
            assert plan[denoiser] == LAYERS and holder.loaded[denoiser]._aitk_group_offload
        holder.unload()
    # every build after the first found its modules in the pool: read once, placed many times
    assert pool.loads == pool.misses


def test_a_pool_hit_changes_placement_without_reading_again(tiny):
    folder, pool = tiny("zimage"), ComponentPool()
    resident = _build("zimage", folder, pool, "resident")
    loads = pool.loads
    cached = _build("zimage", folder, pool, "cpu_cache")
    assert pool.loads == loads                           # re-placed, not read
    assert {e.placement for e in pool.entries.values() if e.bytes} == {CPU_CACHE}
    assert pool.bytes_at("host") > 0 and pool.bytes_at("device") == 0
    assert cached.loaded["transformer"] is resident.loaded["transformer"]
    staged = _build("zimage", folder, pool, "staged")
    assert pool.loads == loads and pool.bytes_at("host") == 0 and pool.bytes_at("device") == 0
    assert all(e.at_rest == "none" for e in pool.entries.values() if e.bytes)
    assert {e["placement"] for e in pool.stats()["entries"] if e["bytes"]} == {STAGED}
    back = _build("zimage", folder, pool, "resident")   # a staged entry hit as resident is read again, once
    assert not is_released(back.loaded["transformer"]) and pool.bytes_at("device") > 0
    assert np.array_equal(np.asarray(back.generate_single(_gen("zimage"))),
                          np.asarray(staged.generate_single(_gen("zimage"))))


def test_fp8_stays_fp8_while_it_moves(tiny, tmp_path):
    from toolkit.models.tiny.comfy_fp8 import write_comfy_fp8
    folder = tiny("zimage")
    info = write_comfy_fp8("zimage", folder, tmp_path / "zimage_fp8_scaled.safetensors")
    pool, outs = ComponentPool(), {}
    for placement in ("resident", "cpu_cache", "staged"):
        holder = _build("zimage", info["path"], pool, placement, extras_name_or_path=folder)
        seen = []
        transformer = holder.loaded["transformer"]
        hook = transformer.register_forward_pre_hook(
            lambda m, args: seen.append({p.dtype for p in m.parameters()}))
        outs[placement] = np.asarray(holder.generate_single(_gen("zimage")))
        hook.remove()
        assert seen and all(torch.float8_e4m3fn in dtypes for dtypes in seen), placement   # FP8 on the device
        if placement != "staged":
            assert torch.float8_e4m3fn in {p.dtype for p in transformer.parameters()}      # and at rest
        holder.unload()
    assert np.array_equal(outs["cpu_cache"], outs["resident"]) and np.array_equal(outs["staged"], outs["resident"])


def test_one_visiting_component_at_a_time_on_a_simulated_device(tiny):
    """The stage switch against the plan's arithmetic: the most the simulated device held is the resident
    components and the largest visitor, never two visitors (activations, which nothing here measures, aside)."""
    folder, pool = tiny("flux"), ComponentPool()
    sim = SimulatedDevice(8 << 30, lambda: pool.bytes_at("device"))   # the holder plans for 1024x1024
    for placement in ("cpu_cache", "staged", {"layers": 1}):
        holder = _build("flux", folder, pool, placement, memory=sim)
        sim.peak = 0
        holder.generate_single(_gen("flux"))
        plan = holder.plan
        visiting = max(c for r, c in plan.costs.items() if plan.placements[r] != RESIDENT)
        resident = pool.bytes_at("device")         # the loaded modules' bytes (with their RoPE tables)
        assert sim.peak == resident + visiting, (placement, sim.peak, resident, visiting)
        assert resident == 0 or placement == {"layers": 1}
        assert sim.moved == 0                                        # all gone after the call
        holder.unload()


def test_header_sizes_are_what_the_pool_holds(tiny):
    """component_sizes reads each component's bytes from its files' headers: what the loaded module holds
    (a module's own non-persistent buffers, RoPE tables, are not in any file)."""
    for arch in ("zimage", "flux", "sdxl", "wan21"):
        mc = ModelConfig.from_dict({"arch": arch, "name_or_path": tiny(arch)})
        sizes = {p.role: p for p in component_sizes.parts(mc)}
        pool = _build(arch, tiny(arch), ComponentPool(), "resident")
        held = {role: module for role, module in pool.loaded.items() if isinstance(module, torch.nn.Module)}
        for role, module in held.items():
            unique = {t.data_ptr(): t for t in module.state_dict().values()}     # tied weights once
            persistent = sum(t.numel() * t.element_size() for t in unique.values())
            assert sizes[role].bytes == persistent, (arch, role)
        assert sizes[pool.spec.denoiser_roles[0]].blocks >= 2        # the denoiser's blocks are found
    half = component_sizes.parts(ModelConfig.from_dict({"arch": "zimage", "name_or_path": tiny("zimage"),
                                                       "dtype": "bf16"}))
    full = component_sizes.parts(ModelConfig.from_dict({"arch": "zimage", "name_or_path": tiny("zimage")}))
    assert [p.bytes * 2 for p in half] == [p.bytes for p in full]   # the tiny files are float32, loaded as bf16


def test_host_copies_stay_warm_within_keep_host_bytes(tiny):
    """A model switched away from keeps its cpu_cache copies in the pool within keep_host_bytes (engine.keep_host_gb),
    as keep_resident_bytes keeps device entries: switching back is a re-placement, not a disk read."""
    for keep_host, kept in ((1 << 30, True), (0, False)):
        pool = ComponentPool(keep_resident_bytes=0, keep_host_bytes=keep_host)
        _build("zimage", tiny("zimage"), pool, "cpu_cache")
        cached = {k for k, e in pool.entries.items() if e.at_rest == "host" and e.bytes}
        _build("flux", tiny("flux"), pool, "resident")
        assert (cached <= set(pool.entries)) is kept
        read = pool.loaded_bytes
        _build("zimage", tiny("zimage"), pool, "cpu_cache")
        assert (pool.loaded_bytes == read) is kept           # back: no weights read when the copies were kept
