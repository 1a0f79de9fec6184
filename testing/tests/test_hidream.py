"""HiDream-I1's fourth text encoder: its repos ship no Llama, so text_encoder_4 and tokenizer_4 are read from
meta-llama's repo (its root) unless the model's folder has them or model.components names them
(`Component.repo`); the load list a build, a prefetch and the cluster planner read says so."""
from toolkit.models.archs.hidream import LLAMA_REPO
from toolkit.models.base_model import get_model_class

LLAMA_ROLES = ("text_encoder_4", "tokenizer_4")


def _loads(model: dict) -> dict:
    holder = get_model_class("hidream")({"arch": "hidream", "local_only": True, **model}, device="cpu")
    return {role: (source, kwargs["subfolder"]) for role, _cls, source, kwargs in holder.component_loads()}


def test_a_folder_without_llama_reads_it_from_meta_llamas_repo(tmp_path):
    folder = tmp_path / "HiDream-I1-Full"
    for role in ("transformer", "text_encoder", "tokenizer", "vae"):
        (folder / role).mkdir(parents=True)
    loads = _loads({"name_or_path": str(folder)})
    for role in LLAMA_ROLES:
        assert loads[role] == (LLAMA_REPO, None), role
    assert loads["text_encoder_3"] == (str(folder), "text_encoder_3")      # the others: the model's own


def test_a_folder_with_llama_reads_its_own(tiny):
    folder = tiny("hidream")
    loads = _loads({"name_or_path": folder})
    for role in LLAMA_ROLES:
        assert loads[role] == (folder, role), role


def test_model_components_name_the_llama_outright(tmp_path):
    (tmp_path / "llama").mkdir()
    given = str(tmp_path / "llama")
    loads = _loads({"name_or_path": str(tmp_path), "components": {"text_encoder_4": given}})
    assert loads["text_encoder_4"] == (given, None) and loads["tokenizer_4"] == (LLAMA_REPO, None)


# -- Dev and Fast: FlowMatchLCMScheduler's per-step noise from the images' seeds -----------------------------
def _lcm_step(seeds, batch):
    import torch
    from diffusers import FlowMatchLCMScheduler

    from toolkit.models.archs.hidream import seeded_step

    scheduler = FlowMatchLCMScheduler(num_train_timesteps=1000, shift=6.0)
    scheduler.set_timesteps(4)
    sample = torch.ones(batch, 16, 4, 4)
    step = seeded_step(scheduler.step, seeds)
    return step(torch.zeros_like(sample), scheduler.timesteps[0], sample, return_dict=False)[0]


def test_an_lcm_step_draws_its_noise_from_each_images_seed():
    import torch

    one = _lcm_step([7], 1)
    assert torch.equal(one, _lcm_step([7], 1)) and not torch.equal(one, _lcm_step([8], 1))
    pair = _lcm_step([7, 8], 2)         # item i of a batch: the batch of one with its own seed
    assert torch.equal(pair[:1], one) and torch.equal(pair[1:], _lcm_step([8], 1))


def test_the_holder_seeds_a_stochastic_scheduler_only():
    from types import SimpleNamespace

    from diffusers import FlowMatchLCMScheduler, UniPCMultistepScheduler

    from toolkit.config_modules import GenerateImageConfig

    holder = get_model_class("hidream")({"arch": "hidream", "name_or_path": "x/y", "variant": "dev"}, device="cpu")
    gen = GenerateImageConfig.from_dict({"prompt": "a fox", "seed": 5, "batch_size": 2}, holder.model_config)
    lcm = SimpleNamespace(scheduler=FlowMatchLCMScheduler())
    (obj, name, wrap), = holder.call_patches(gen, lcm)
    assert obj is lcm.scheduler and name == "step" and wrap(lcm.scheduler.step).__wrapped__ == lcm.scheduler.step
    unipc = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=3.0)
    assert holder.call_patches(gen, SimpleNamespace(scheduler=unipc)) == []       # Full's: deterministic
