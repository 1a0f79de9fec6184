"""ComfyUI's API served by the engine, driven by the clients people use: `websocket-client` following /ws
exactly as ComfyUI's script_examples/websockets_api_example.py does, and `comfy-api-simplified`. The
workflows are ComfyUI "Save (API)" files (testing/workflows) over a tiny ComfyUI install
(testing/comfy_tree.py), run on a real engine (thread worker) behind real uvicorn servers on loopback:
engine.comfy_port's app at its root, and the engine port's /comfy."""
import io
import json
import os
import shutil
import struct
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid

import httpx
import pytest
from PIL import Image

from extensions_built_in.inference_engine.compat import compat_routes, serve_comfy_on_port
from testing.comfy_tree import CHECKPOINT, IMAGE, write_tree, workflow
from toolkit.errors import ConfigError

TOKEN = "comfy-token-123"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
SAMPLERS = ("KSampler", "KSamplerAdvanced")


class Served:
    """A real engine over the tiny ComfyUI tree, ComfyUI's API at the root of its own port and under
    /comfy on the engine port."""

    def __init__(self, folder, tiny):
        from extensions_built_in.inference_engine.engine import Engine
        from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app
        self.tree = write_tree(folder, tiny)
        self.engine = Engine(output_folder=str(folder / "outputs"), assets_folder=str(folder / "assets"),
                             worker="thread", comfyui_path=self.tree)
        self.engine.start_worker()
        self.route = compat_routes(engine=self.engine)
        self.server = ServerThread(create_app(self.engine, TOKEN, extra_routes=[self.route]), bind_socket(0)).start()
        self.comfy = serve_comfy_on_port(self.engine, TOKEN, self.route, 0)
        self.loop = threading.Thread(target=self.engine.run_forever, daemon=True, name="engine-loop")
        self.loop.start()
        self.address = f"127.0.0.1:{self.comfy.port}"
        self.url = f"http://{self.address}"
        self.engine_url = f"http://127.0.0.1:{self.server.port}"
        self.http = httpx.Client(base_url=self.url, headers=BEARER, timeout=120)

    def close(self):
        self.engine.stop()
        self.loop.join(30)
        self.comfy.stop()
        self.server.stop()
        self.http.close()


@pytest.fixture(scope="module")
def srv(tiny, tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("comfy"), tiny)
    yield s
    s.close()


# -- ComfyUI's websockets_api_example.py, with the token added --------------------------------------

def queue_prompt(srv, prompt, client_id):
    p = {"prompt": prompt, "client_id": client_id}
    req = urllib.request.Request(f"{srv.url}/prompt", data=json.dumps(p).encode("utf-8"), headers=BEARER)
    return json.loads(urllib.request.urlopen(req).read())


def get_image(srv, filename, subfolder, folder_type):
    data = {"filename": filename, "subfolder": subfolder, "type": folder_type}
    req = urllib.request.Request(f"{srv.url}/view?{urllib.parse.urlencode(data)}", headers=BEARER)
    with urllib.request.urlopen(req) as response:
        return response.read()


def get_history(srv, prompt_id):
    req = urllib.request.Request(f"{srv.url}/history/{prompt_id}", headers=BEARER)
    with urllib.request.urlopen(req) as response:
        return json.loads(response.read())


def connect(srv, client_id):
    import websocket        # websocket-client
    ws = websocket.WebSocket()
    ws.connect(f"ws://{srv.address}/ws?clientId={client_id}", header=[f"Authorization: Bearer {TOKEN}"], timeout=300)
    return ws


def follow(ws, prompt_id):
    """The example's get_images loop: every message until `executing` with node null for the prompt,
    as (text messages, binary frames)."""
    messages, frames = [], []
    while True:
        out = ws.recv()
        if isinstance(out, str):
            message = json.loads(out)
            messages.append(message)
            if message["type"] == "executing":
                data = message["data"]
                if data["node"] is None and data["prompt_id"] == prompt_id:
                    break
        else:
            frames.append(out)
    return messages, frames


def of(messages, kind, prompt_id=None):
    return [m["data"] for m in messages if m["type"] == kind and (prompt_id is None or m["data"].get("prompt_id") == prompt_id)]


def preview_jpeg(frame: bytes) -> Image.Image:
    """ComfyUI's binary preview: event 1 (PREVIEW_IMAGE), image type 1 (JPEG), then the JPEG."""
    assert struct.unpack(">II", frame[:8]) == (1, 1)
    im = Image.open(io.BytesIO(frame[8:]))
    assert im.format == "JPEG"
    im.load()
    return im


def upload(srv, path, name=None, **fields) -> dict:
    with open(path, "rb") as f:
        r = srv.http.post("/upload/image", files={"image": (name or "example.png", f, "image/png")}, data=fields)
    assert r.status_code == 200, r.text
    return r.json()


# -- the five workflows, as the example script runs them -------------------------------------------

CASES = {"sdxl_txt2img": ((64, 64), 1), "flux_txt2img": ((64, 64), 1), "sdxl_img2img": ((64, 64), 1),
         "sdxl_lora": ((64, 64), 2), "sdxl_hires": ((128, 128), 1)}


@pytest.mark.parametrize("name", list(CASES))
def test_the_websocket_example_runs_each_workflow(srv, name):
    size, count = CASES[name]
    prompt = workflow(name)
    for node in prompt.values():
        if node["class_type"] == "LoadImage":        # the frontend uploads the image first, then names it
            node["inputs"]["image"] = upload(srv, f"{srv.tree}/input/{IMAGE}")["name"]
    client_id = str(uuid.uuid4())
    ws = connect(srv, client_id)
    try:
        first = json.loads(ws.recv())
        assert first["type"] == "status" and first["data"]["sid"] == client_id
        answer = queue_prompt(srv, prompt, client_id)
        prompt_id = answer["prompt_id"]
        assert answer["node_errors"] == {} and isinstance(answer["number"], (int, float))
        messages, frames = follow(ws, prompt_id)
    finally:
        ws.close()
    kinds = [m["type"] for m in messages]
    assert kinds.index("execution_start") < kinds.index("progress") < kinds.index("executed") \
        < kinds.index("execution_success"), kinds
    samplers = [k for k, v in prompt.items() if v["class_type"] in SAMPLERS]
    progress = of(messages, "progress", prompt_id)
    assert {p["node"] for p in progress} == set(samplers), progress        # the hires pair: both samplers
    for node in samplers:
        steps = [p["value"] for p in progress if p["node"] == node]
        assert steps == list(range(1, prompt[node]["inputs"]["steps"] + 1)), (node, progress)
        assert {p["max"] for p in progress if p["node"] == node} == {prompt[node]["inputs"]["steps"]}
    ran = [m["node"] for m in of(messages, "executing", prompt_id)]
    assert ran[-1] is None and set(ran[:-1]) == set(prompt), ran
    assert frames and all(preview_jpeg(f).size[0] > 0 for f in frames)
    save = next(k for k, v in prompt.items() if v["class_type"] == "SaveImage")
    executed = of(messages, "executed", prompt_id)
    assert [e["node"] for e in executed] == [save]

    history = get_history(srv, prompt_id)[prompt_id]
    assert history["status"]["status_str"] == "success" and history["status"]["completed"] is True
    assert [m[0] for m in history["status"]["messages"]] == ["execution_start", "execution_cached", "execution_success"]
    assert history["prompt"][1] == prompt_id and history["prompt"][2] == prompt and history["prompt"][4] == [save]
    assert history["outputs"][save] == executed[0]["output"]
    images = history["outputs"][save]["images"]
    assert len(images) == count and all(i["type"] == "output" for i in images)
    for image in images:
        im = Image.open(io.BytesIO(get_image(srv, image["filename"], image["subfolder"], image["type"])))
        assert im.format == "PNG" and im.size == size
    feed = srv.engine.results.read(0, 1000)["entries"]         # the results feed (the UI's history) says who asked
    names = {i["filename"] for i in images}
    entry = next(e for e in feed if names & {f["relpath"] for f in e["files"]})
    assert entry["api"] == "comfyui" and entry["client"] == client_id


def test_a_prompt_of_two_sampler_chains_runs_both(srv):
    prompt = workflow("sdxl_txt2img")
    prompt["13"] = json.loads(json.dumps(prompt["3"]))
    prompt["13"]["inputs"]["seed"] = 5
    prompt["18"] = {"class_type": "VAEDecode", "inputs": {"samples": ["13", 0], "vae": ["4", 2]}}
    prompt["19"] = {"class_type": "SaveImage", "inputs": {"filename_prefix": "second", "images": ["18", 0]}}
    client_id = str(uuid.uuid4())
    ws = connect(srv, client_id)
    try:
        prompt_id = queue_prompt(srv, prompt, client_id)["prompt_id"]
        messages, _frames = follow(ws, prompt_id)
    finally:
        ws.close()
    assert {p["node"] for p in of(messages, "progress", prompt_id)} == {"3", "13"}
    assert sorted(e["node"] for e in of(messages, "executed", prompt_id)) == ["19", "9"]
    assert len(of(messages, "execution_start", prompt_id)) == len(of(messages, "execution_success", prompt_id)) == 1
    history = get_history(srv, prompt_id)[prompt_id]
    assert sorted(history["prompt"][4]) == ["19", "9"] and sorted(history["outputs"]) == ["19", "9"]
    names = [history["outputs"][n]["images"][0]["filename"] for n in ("9", "19")]
    assert names[0] != names[1]


# -- a video workflow: ComfyUI's Wan 2.1 example ------------------------------------------------------

@pytest.mark.parametrize("name,output", [("wan_t2v", "28"), ("wan_t2v_webm", "47"), ("wan_t2v_savevideo", "50")])
def test_the_websocket_example_runs_the_wan_video_workflow(srv, name, output):
    """SaveAnimatedWEBP's, SaveWEBM's and SaveVideo's file is reported as ComfyUI does (under "images", "animated": [true]) and
    holds `length` frames of the latent's size."""
    prompt = workflow(name)
    length, size = prompt["40"]["inputs"]["length"], (prompt["40"]["inputs"]["width"], prompt["40"]["inputs"]["height"])
    client_id = str(uuid.uuid4())
    ws = connect(srv, client_id)
    try:
        answer = queue_prompt(srv, prompt, client_id)
        prompt_id = answer["prompt_id"]
        assert answer["node_errors"] == {}
        messages, _frames = follow(ws, prompt_id)
    finally:
        ws.close()
    kinds = [m["type"] for m in messages]
    assert kinds.index("execution_start") < kinds.index("progress") < kinds.index("executed") \
        < kinds.index("execution_success"), kinds
    progress = [(p["node"], p["value"], p["max"]) for p in of(messages, "progress", prompt_id)]
    assert progress == [("3", 1, 2), ("3", 2, 2)]
    (executed,) = of(messages, "executed", prompt_id)
    assert executed["node"] == output and executed["output"]["animated"] == [True]
    history = get_history(srv, prompt_id)[prompt_id]
    assert history["status"]["status_str"] == "success" and history["outputs"][output] == executed["output"]
    (video,) = executed["output"]["images"]
    data = get_image(srv, video["filename"], video["subfolder"], video["type"])
    if name == "wan_t2v":
        assert video["filename"].endswith(".webp")
        with Image.open(io.BytesIO(data)) as im:
            assert im.format == "WEBP" and im.is_animated and im.n_frames == length and im.size == size
    else:
        import av
        assert video["filename"].endswith(".webm" if name == "wan_t2v_webm" else ".mp4")
        with av.open(io.BytesIO(data)) as container:
            assert container.streams.video[0].codec_context.name == ("vp9" if name == "wan_t2v_webm" else "h264")
            frames = [f for f in container.decode(video=0)]
        assert len(frames) == length and (frames[0].width, frames[0].height) == size


# -- comfy-api-simplified ---------------------------------------------------------------------------

def test_comfy_api_simplified_queues_waits_and_reads_back(srv, tmp_path):
    from comfy_api_simplified import ComfyApiWrapper, ComfyWorkflowWrapper
    api = ComfyApiWrapper(srv.url, user="comfy", password=TOKEN)      # Basic auth, on the websocket too
    uploaded = api.upload_image(f"{srv.tree}/input/{IMAGE}", subfolder="simplified")
    assert uploaded == {"name": IMAGE, "subfolder": "simplified", "type": "input"}
    assert api.get_image(IMAGE, "simplified", "input") == open(f"{srv.tree}/input/{IMAGE}", "rb").read()

    wf = ComfyWorkflowWrapper(workflow("sdxl_txt2img"))
    wf.set_node_param("KSampler", "seed", 7)
    previews = api.queue_and_wait_images(wf, "Save Image")     # the binary frames it saw: our previews
    assert previews and all(Image.open(io.BytesIO(b)).format == "JPEG" for b in previews.values())
    prompt_id = list(srv.http.get("/history", params={"max_items": 1}).json())[0]
    entry = api.get_history(prompt_id)[prompt_id]
    assert entry["prompt"][2]["3"]["inputs"]["seed"] == 7
    image = entry["outputs"]["9"]["images"][0]
    assert Image.open(io.BytesIO(api.get_image(image["filename"], image["subfolder"], image["type"]))).size == (64, 64)
    assert api.get_queue() == {"queue_running": [], "queue_pending": []}
    info = api.get_object_info("CheckpointLoaderSimple")
    assert "sdxl_tiny.safetensors" in info["CheckpointLoaderSimple"]["input"]["required"]["ckpt_name"][0]
    assert "KSampler" in api.get_object_info()
    stats = api.get_system_stats()
    assert stats["devices"][0]["type"] == "cpu" and stats["system"]["comfyui_version"]
    assert api.get_embeddings() == []
    api.interrupt()                 # nothing runs: a no-op


# -- refusals ---------------------------------------------------------------------------------------

def test_an_unknown_node_gets_node_errors(srv):
    r = srv.http.post("/prompt", json={"prompt": workflow("unknown_node"), "client_id": "x"})
    assert r.status_code == 400, r.text
    body = r.json()
    assert isinstance(body["error"], dict) and body["error"]["message"]
    assert "11" in body["node_errors"], body["node_errors"]
    assert body["node_errors"]["11"]["class_type"] == "ImpactWildcardProcessor"
    r = srv.http.post("/prompt", json={"client_id": "x"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "no_prompt"


@pytest.mark.parametrize("params,status", [
    ({"filename": "../engine.json"}, 400), ({"filename": "/etc/passwd"}, 400),
    ({"filename": "passwd", "subfolder": "../../../../../../etc"}, 403),
    ({"filename": "x.png", "subfolder": "/etc"}, 403), ({"filename": "x.png", "type": "models"}, 400),
    ({"filename": "nothere.png"}, 404), ({"filename": "a\x00b.png"}, 400),
    ({"filename": "engine.json [elsewhere]"}, 404)])
def test_view_refuses_what_is_outside_its_folders(srv, params, status):
    r = srv.http.get("/view", params=params)
    assert r.status_code == status, (params, r.text)
    assert r.json()["field"] in ("filename", "subfolder", "type")


def test_view_does_not_follow_a_link_out(srv, tmp_path):
    outside = tmp_path / "secret.png"
    outside.write_bytes(b"secret")
    link = os.path.join(srv.engine.output_folder, "linked.png")
    os.symlink(outside, link)
    try:
        assert srv.http.get("/view", params={"filename": "linked.png"}).status_code == 404
    finally:
        os.remove(link)


def test_uploads_stay_in_the_input_folder_and_name_apart(srv, tmp_path):
    src = f"{srv.tree}/input/{IMAGE}"
    assert upload(srv, src, name="same.png")["name"] == "same.png"
    assert upload(srv, src, name="same.png")["name"] == "same.png"        # the same bytes: not written twice
    other = tmp_path / "other.png"
    Image.new("RGB", (8, 8), "red").save(other)
    assert upload(srv, other, name="same.png")["name"] == "same (1).png"
    assert upload(srv, other, name="same.png", overwrite="true")["name"] == "same.png"
    for fields, name, field in (({"subfolder": "../.."}, "a.png", "subfolder"), ({}, "../a.png", "image"),
                                ({"type": "output"}, "a.png", "type")):
        with open(src, "rb") as f:
            r = srv.http.post("/upload/image", files={"image": (name, f, "image/png")}, data=fields)
        assert r.status_code in (400, 403) and r.json()["field"] == field, r.text
    r = srv.http.post("/upload/image", files={"image": ("x.png", b"not an image", "image/png")})
    assert r.status_code == 400 and r.json()["field"] == "image"
    # the mask editor's upload: the original with the mask's alpha
    assert upload(srv, src, name="orig.png", subfolder="clipspace")["name"] == "orig.png"
    mask = tmp_path / "mask.png"
    Image.new("RGBA", (64, 64), (0, 0, 0, 0)).save(mask)
    with open(mask, "rb") as f:
        r = srv.http.post("/upload/mask", files={"image": ("clipspace-mask.png", f, "image/png")},
                          data={"original_ref": json.dumps({"filename": "orig.png", "subfolder": "clipspace", "type": "input"})})
    assert r.status_code == 200, r.text
    got = Image.open(io.BytesIO(srv.http.get("/view", params={"filename": r.json()["name"], "type": "input"}).content))
    assert got.mode == "RGBA" and got.size == (64, 64) and got.getchannel("A").getextrema() == (0, 0)


# -- the queue: delete, interrupt -------------------------------------------------------------------

def test_queue_delete_and_interrupt(srv):
    long = workflow("sdxl_txt2img")
    long["3"]["inputs"]["steps"] = 1000
    client_id = str(uuid.uuid4())
    ws = connect(srv, client_id)
    try:
        ws.recv()                                             # status
        running = queue_prompt(srv, long, client_id)["prompt_id"]
        waiting = queue_prompt(srv, workflow("sdxl_txt2img"), client_id)["prompt_id"]
        while True:                                            # the first prompt runs
            out = ws.recv()
            if isinstance(out, str) and json.loads(out)["type"] == "progress":
                break
        queue = srv.http.get("/queue").json()
        assert [i[1] for i in queue["queue_running"]] == [running]
        assert [i[1] for i in queue["queue_pending"]] == [waiting]
        assert srv.http.get("/prompt").json() == {"exec_info": {"queue_remaining": 2}}
        assert srv.http.post("/queue", json={"delete": [waiting]}).status_code == 200
        # a prompt whose checkpoint goes away while it waits: its load fails when it runs
        gone = os.path.join(srv.tree, "models", "checkpoints", "gone.safetensors")
        shutil.copy(os.path.join(srv.tree, "models", "checkpoints", CHECKPOINT), gone)
        failing = workflow("sdxl_txt2img")
        failing["4"]["inputs"]["ckpt_name"] = "gone.safetensors"
        failed = queue_prompt(srv, failing, client_id)["prompt_id"]
        os.remove(gone)
        assert srv.http.post("/interrupt").status_code == 200
        messages, _frames = follow(ws, running)
        after, _frames = follow(ws, failed)
    finally:
        ws.close()
    error = of(after, "execution_error", failed)
    assert error and error[0]["node_id"] == "4" and error[0]["node_type"] == "CheckpointLoaderSimple", after
    assert error[0]["exception_message"]
    assert srv.http.get(f"/history/{failed}").json()[failed]["status"]["status_str"] == "error"
    stopped = of(messages, "execution_interrupted", running)
    assert stopped and stopped[0]["node_id"] == "3" and stopped[0]["node_type"] == "KSampler"
    history = srv.http.get(f"/history/{running}").json()[running]
    assert history["status"]["status_str"] == "error" and history["status"]["completed"] is False
    assert srv.http.get(f"/history/{waiting}").json() == {}            # deleted before it ran: no history
    assert srv.http.get("/queue").json() == {"queue_running": [], "queue_pending": []}
    assert srv.http.post("/history", json={"delete": [running]}).status_code == 200
    assert srv.http.get(f"/history/{running}").json() == {}


# -- the routes, the prefixes, the token --------------------------------------------------------------

ROUTES = [("POST", "/prompt"), ("GET", "/prompt"), ("GET", "/queue"), ("POST", "/queue"), ("POST", "/interrupt"),
          ("POST", "/free"), ("GET", "/history"), ("GET", "/history/x"), ("POST", "/history"),
          ("GET", "/view?filename=x.png"), ("POST", "/upload/image"), ("POST", "/upload/mask"),
          ("GET", "/object_info"), ("GET", "/object_info/KSampler"), ("GET", "/models"), ("GET", "/models/loras"),
          ("GET", "/embeddings"), ("GET", "/extensions"), ("GET", "/system_stats")]


@pytest.mark.parametrize("method,path", ROUTES)
def test_every_route_is_401_without_the_token(srv, method, path):
    for base in (srv.url, srv.url + "/api", srv.engine_url + "/comfy", srv.engine_url + "/comfy/api"):
        for headers in ({}, {"Authorization": "Bearer nope"}):
            r = httpx.request(method, base + path, headers=headers, content=b"{}")
            assert r.status_code == 401 and r.json()["field"] == "token", (base, path, r.text)


def test_the_websocket_needs_the_token(srv):
    import websocket
    for url, header in ((f"ws://{srv.address}/ws?clientId=a", []),
                        (f"ws://{srv.address}/ws?clientId=a", ["Authorization: Bearer nope"]),
                        (f"ws://127.0.0.1:{srv.server.port}/comfy/ws", [])):
        with pytest.raises(websocket.WebSocketBadStatusException) as e:
            websocket.create_connection(url, header=header, timeout=30)
        assert e.value.status_code == 401
    for url in (f"ws://{srv.address}/ws?clientId=b&token={TOKEN}", f"ws://{srv.address}/api/ws?token={TOKEN}",
                f"ws://127.0.0.1:{srv.server.port}/comfy/ws?token={TOKEN}"):
        ws = websocket.create_connection(url, timeout=30)
        try:
            first = json.loads(ws.recv())
            assert first["type"] == "status" and first["data"]["sid"]
        finally:
            ws.close()
    with pytest.raises(websocket.WebSocketBadStatusException) as e:      # a page of another site: refused
        websocket.create_connection(f"ws://{srv.address}/ws?token={TOKEN}", origin="http://evil.example", timeout=30)
    assert e.value.status_code == 403


def test_the_prefixes_serve_the_same_api(srv):
    base = srv.engine_url + "/comfy"
    assert httpx.get(base + "/models", headers=BEARER).json() == srv.http.get("/api/models").json()
    assert "checkpoints" in srv.http.get("/models").json()
    assert srv.http.get("/models/checkpoints").json() == ["sdxl_tiny.safetensors"]
    assert srv.http.get("/models/nope").status_code == 404
    assert httpx.get(base + "/api/extensions", headers=BEARER).json() == []
    assert srv.http.get("/object_info/NoSuchNode").json() == {}
    assert httpx.get(srv.engine_url + "/queue", headers=BEARER).json()["queued"] == []     # the native one


def test_comfy_port_is_a_port_of_its_own():
    from extensions_built_in.inference_engine.engine_settings import EngineSettings
    for d in ({"port": 8188, "comfy_port": 8188}, {"compat_port": 7860, "comfy_port": 7860}, {"comfy_port": 70000}):
        with pytest.raises(ConfigError) as e:
            EngineSettings.from_dict(d)
        assert e.value.key == "engine.comfy_port", d
    assert EngineSettings.from_dict({"comfy_port": 8188}).comfy_port == 8188


def test_the_engine_process_serves_it_on_comfy_port_without_torch(tiny, tmp_path):
    """`run.py`'s engine with engine.comfy_port: a workflow runs end to end through its worker process, and
    the HTTP process (the graph analysis, the node table, the file lookup) never imports torch."""
    import websocket
    from testing.engine_client import EngineProcess
    from testing.ports import free_port
    tree = write_tree(tmp_path, tiny)
    port = free_port()
    proc = EngineProcess(str(tmp_path / "job"), engine_extra={"comfy_port": port, "comfyui_path": tree})
    try:
        token = proc.wait_ready().info["token"]
        client_id = str(uuid.uuid4())
        ws = websocket.create_connection(f"ws://127.0.0.1:{port}/ws?clientId={client_id}&token={token}", timeout=300)
        try:
            r = httpx.post(f"http://127.0.0.1:{port}/prompt", json={"prompt": workflow("sdxl_txt2img"),
                           "client_id": client_id}, headers={"Authorization": f"Bearer {token}"}, timeout=120)
            assert r.status_code == 200, r.text
            messages, frames = follow(ws, r.json()["prompt_id"])
        finally:
            ws.close()
        assert of(messages, "execution_success") and frames
        assert httpx.get(f"http://127.0.0.1:{port}/object_info", headers={"Authorization": f"Bearer {token}"}).json()
        with open(f"/proc/{proc.info['pid']}/maps") as f:
            assert "libtorch" not in f.read(), "the engine's HTTP process has imported torch"
    finally:
        assert proc.stop() == 0
