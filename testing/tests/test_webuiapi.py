"""The A1111 routes driven by the real `webuiapi` client (its defaults: sampler "Euler a", scheduler
"automatic"), against a real engine on loopback that warm-loaded a tiny Flux from a path and whose
model folder holds diffusers folders (a tiny Z-Image and a tiny SD 1.5): the model lists name them all,
by titles the client sets back; its common calls work on a flow model and on SD 1.5, or, for what is
not served, end in a clear error."""
import json
import shutil

import pytest
import webuiapi
from PIL import Image

from testing.tests.test_compat import TOKEN

FLUX_TITLE = "flux-warm"          # the warm-loaded folder's name: the title of the held model


class Served:
    def __init__(self, folder, tiny):
        from extensions_built_in.inference_engine.compat import compat_routes
        from extensions_built_in.inference_engine.engine import Engine
        from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app
        import huggingface_hub.constants

        (folder / "hub").mkdir()
        self.hub = pytest.MonkeyPatch()          # an empty hub cache: no arch's default weights are here
        self.hub.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(folder / "hub"))
        models = folder / "models"
        shutil.copytree(tiny("zimage"), models / "Z-Image-Tiny")
        shutil.copytree(tiny("sd1"), models / "sd15-tiny")
        shutil.copytree(tiny("flux"), folder / FLUX_TITLE)
        self.engine = Engine(output_folder=f"{folder}/outputs", assets_folder=f"{folder}/assets", worker="thread",
                             model_folders=[str(models)])
        self.engine.warm_load({"arch": "flux", "name_or_path": str(folder / FLUX_TITLE)})
        self.server = ServerThread(create_app(self.engine, TOKEN, extra_routes=[compat_routes(engine=self.engine)]),
                                   bind_socket(0)).start()
        import threading
        self.loop = threading.Thread(target=self.engine.run_forever, daemon=True, name="engine-loop")
        self.loop.start()
        self.port = self.server.port

    def api(self, **kw) -> webuiapi.WebUIApi:
        """The client as its README makes it (Basic auth: the engine token as the password)."""
        return webuiapi.WebUIApi(host="127.0.0.1", port=self.port, username="webuiapi", password=TOKEN, **kw)

    def close(self):
        self.engine.stop()
        self.loop.join(30)
        self.server.stop()
        self.hub.undo()


@pytest.fixture(scope="module")
def srv(tiny, tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("webuiapi"), tiny)
    yield s
    s.close()


def _txt2img(api, **kw):
    return api.txt2img(prompt="a red fox in the snow", width=64, height=64, seed=kw.pop("seed", 1234), **kw)


def test_the_model_lists_name_the_held_model_and_the_folders_models(srv):
    api = srv.api()
    assert api.util_get_model_names() == sorted([FLUX_TITLE, "Z-Image-Tiny", "sd15-tiny"])
    assert api.util_get_current_model() == api.get_options()["sd_model_checkpoint"] == FLUX_TITLE
    from openai import OpenAI
    client = OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key=TOKEN, max_retries=0, timeout=120)
    assert [m.id for m in client.models.list()] == [FLUX_TITLE, "Z-Image-Tiny", "sd15-tiny"]
    assert client.models.retrieve("Z-Image-Tiny").id == "Z-Image-Tiny"
    r = client.images.generate(model=FLUX_TITLE, prompt="a fox", size="64x64", response_format="b64_json")
    assert len(r.data) == 1 and srv.engine.active_config.name_or_path.endswith(FLUX_TITLE)


def test_webuiapi_on_a_flow_model_with_its_defaults(srv):
    """Flux, warm-loaded: webuiapi's default "Euler a" runs the flow Euler ancestral."""
    api = srv.api(steps=3)
    assert api.default_sampler == "Euler a"
    r = _txt2img(api)
    assert r.image.size == (64, 64) and r.info["sampler_name"] == "Euler a"
    assert r.info["sd_model_name"] == FLUX_TITLE
    req = srv.engine.get(r.info["request_ids"][0])
    assert req.sample.sampler == "euler_a" and req.model.arch == "flux"
    again = _txt2img(api)
    assert list(again.image.getdata()) == list(r.image.getdata()), "a seed reproduces an Euler a image"
    euler = _txt2img(api, sampler_name="Euler")
    assert list(euler.image.getdata()) != list(r.image.getdata())
    # each sampler /samplers lists runs, by the name it lists
    names = api.util_get_sampler_names()
    assert {"Default", "Euler", "Euler a", "DPM++ 2M SDE", "DPM++ SDE", "LCM", "UniPC"} <= set(names)
    for name in names:
        assert _txt2img(api, sampler_name=name).image.size == (64, 64), name
    # Flux's Euler + Beta (webuiapi sends `scheduler` as given): the euler_beta row
    beta = _txt2img(api, sampler_name="Euler", scheduler="Beta", steps=3)
    assert srv.engine.get(beta.info["request_ids"][0]).sample.sampler == "euler_beta"
    assert "Schedule type: Beta" in beta.info["infotexts"][0]
    # a name with no flow equivalent: the field, and what is offered
    with pytest.raises(RuntimeError) as e:
        _txt2img(api, sampler_name="DPM++ 2S a")
    status, text = e.value.args
    detail = json.loads(text)["detail"][0]
    assert status == 422 and detail["loc"] == ["body", "sampler_name"] and "Euler a" in detail["msg"]
    i2i = api.img2img(images=[r.image], prompt="a fox", width=64, height=64, seed=3, denoising_strength=0.5)
    assert i2i.image.size == (64, 64) and i2i.info["sampler_name"] == "Euler a"
    assert srv.engine.get(i2i.info["request_ids"][0]).sample.task == "img2img"
    # png-info: the infotext webuiapi's re-encoded PNG carries
    info = api.png_info(r.image)
    assert "Sampler: Euler a" in info.info and info.parameters["Sampler"] == "Euler a"
    assert info.parameters["Model"] == FLUX_TITLE


def test_webuiapi_sets_a_folder_model_and_runs_sd1_with_its_defaults(srv):
    api = srv.api(steps=3)
    try:
        api.util_set_model("sd15-tiny")
        assert api.util_get_current_model() == "sd15-tiny"
        r = _txt2img(api)
        req = srv.engine.get(r.info["request_ids"][0])
        assert req.model.arch == "sd1" and req.sample.sampler == "euler_a" and r.info["sd_model_name"] == "sd15-tiny"
        assert "Euler a" in api.util_get_sampler_names()
        i2i = api.img2img(images=[r.image], prompt="a fox", width=64, height=64, seed=3)
        assert i2i.image.size == (64, 64)
        # util_set_model's closest match (it lower-cases what it is given), then override_settings per call
        api.util_set_model("z-image-tiny")
        assert api.get_options()["sd_model_checkpoint"] == "Z-Image-Tiny"
        z = _txt2img(api)
        assert srv.engine.get(z.info["request_ids"][0]).model.arch == "zimage" and z.info["sampler_name"] == "Euler a"
        back = _txt2img(api, override_settings={"sd_model_checkpoint": FLUX_TITLE})
        assert srv.engine.get(back.info["request_ids"][0]).model.arch == "flux"
        # a title that names nothing: set_options answers the 422 body (webuiapi returns it), naming the field
        refused = api.set_options({"sd_model_checkpoint": "nope"})
        assert refused["detail"][0]["loc"] == ["body", "sd_model_checkpoint"]
        assert "Z-Image-Tiny" in refused["detail"][0]["msg"]
        assert api.get_options()["sd_model_checkpoint"] == "Z-Image-Tiny"
    finally:
        api.set_options({"sd_model_checkpoint": FLUX_TITLE})


def test_webuiapi_lists_progress_and_controls(srv):
    api = srv.api()
    progress = api.get_progress()
    assert progress["progress"] == 0 and progress["state"]["job_count"] == 0
    api.util_wait_for_ready(check_interval=0.01)          # idle: returns at once
    assert isinstance(api.get_upscalers(), list) and isinstance(api.get_sd_vae(), list)
    assert isinstance(api.get_loras(), list) and api.util_get_scheduler_names() == ["automatic", "beta", "exponential", "karras"]
    assert api.interrupt() == {} and api.skip() == {}
    assert api.refresh_checkpoints() is None             # the lists are read on every call


def test_what_webuiapi_calls_and_is_not_served_is_a_clear_404(srv):
    """Routes of A1111 that nothing here serves (no CLIP interrogator, no prompt styles, no A1111 flags):
    a 404, which webuiapi raises for result calls and returns as {"detail": "Not Found", ...} for the others."""
    api = srv.api()
    with pytest.raises(RuntimeError) as e:
        api.interrogate(Image.new("RGB", (64, 64)))
    assert e.value.args[0] == 404
    for call in (api.get_cmd_flags, api.get_prompt_styles, api.get_embeddings, api.get_face_restorers,
                 api.get_hypernetworks, api.get_memory, api.get_scripts):
        assert call()["detail"] == "Not Found", call.__name__
