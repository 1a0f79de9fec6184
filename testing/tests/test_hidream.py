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
