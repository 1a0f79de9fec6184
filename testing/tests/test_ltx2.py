"""LTX-2 beyond the contract suite: its soundtrack (the mp4's AAC stream is the pipeline's waveform,
written as the bare pipeline's is, and the result frame says so), the call arguments each variant
departs by, and the memory floor against a measured tiny run."""
import numpy as np
import pytest
import torch

from testing.engine_client import InProcessEngine
from testing.peak_memory import PeakLive
from toolkit.config_modules import GenerateImageConfig
from toolkit.media import save_media
from toolkit.models.base_model import BaseModel, get_model_class

ARCH = "ltx2"
TOKEN = "ltx2-token"


def _decoded(path) -> dict:
    """The mp4's streams decoded: RGB frames, and the soundtrack's samples (C, T), codec and rate."""
    import av

    with av.open(path) as c:
        pixels = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])])
    with av.open(path) as c:
        stream = c.streams.audio[0]
        codec, rate = stream.codec_context.name, stream.codec_context.sample_rate
        samples = np.concatenate([f.to_ndarray() for f in c.decode(stream)], axis=1)
    return {"pixels": pixels, "audio": samples, "codec": codec, "rate": rate}


def test_the_soundtrack_over_http_is_the_bare_pipelines_audio(tiny, tmp_path):
    """A request over HTTP: the result frame says the file has audio, and its AAC
    stream decodes to exactly what the bare diffusers pipeline's audio, written by the same writer,
    decodes to (our AAC writer is deterministic); so do the frames. The soundtrack is the waveform:
    its length and level are the pipeline's."""
    from diffusers import DiffusionPipeline

    folder = tiny(ARCH)
    eng = InProcessEngine(str(tmp_path / "engine"), token=TOKEN)
    try:
        sample = {"prompt": "a dog barks", "width": 64, "height": 64, "num_frames": 9, "fps": 8,
                  "num_inference_steps": 2, "seed": 5}
        frames = eng.client.stream({"model": {"arch": ARCH, "name_or_path": folder}, "sample": sample})
        assert frames[-1][0]["type"] == "end" and frames[-1][0]["status"] == "ok", frames[-2][0]
        start = frames[0][0]
        res = next(h for h, _ in frames if h["type"] == "result")
        assert res["audio"] is True and res["kind"] == "video" and res["ext"] == "mp4"
        got = tmp_path / "engine.mp4"
        got.write_bytes(eng.client.get(res["url"]).content)
    finally:
        eng.close()

    holder = get_model_class(ARCH)({"arch": ARCH, "name_or_path": folder, "local_only": True})
    holder.load_model()
    gen = GenerateImageConfig.from_dict(start["sample"], holder.model_config)
    bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    out = bare(**holder.pipeline_kwargs(gen), generator=torch.Generator("cpu").manual_seed(5), output_type="np")
    waveform = out.audio[0].float().numpy()
    want = save_media("video", out.frames[0], str(tmp_path / "bare.mp4"), ext="mp4", fps=gen.fps, audio=waveform,
                      sample_rate=bare.vocoder.config.output_sampling_rate)
    a, b = _decoded(str(got)), _decoded(want["path"])
    assert a["codec"] == b["codec"] == "aac" and a["rate"] == b["rate"] == 24000
    assert np.array_equal(a["pixels"], b["pixels"])
    assert a["audio"].shape == b["audio"].shape and np.array_equal(a["audio"], b["audio"]), \
        "the soundtrack differs from the bare pipeline's audio written the same way"
    # the waveform itself: 9 frames at 8 fps of 24 kHz stereo (AAC pads to whole 1024-sample frames)
    assert waveform.shape[0] == 2 and a["audio"].shape[0] == 2
    assert waveform.shape[1] <= a["audio"].shape[1] <= waveform.shape[1] + 2 * 1024
    assert abs(waveform.shape[1] - 9 / 8 * 24000) < 24000 * 0.05
    assert float(np.abs(a["audio"]).max()) > 0 and abs(np.abs(a["audio"]).mean() - np.abs(waveform).mean()) < 0.05


@pytest.mark.parametrize("variant,departs", [
    ("2.0", {"use_cross_timestep": False, "spatio_temporal_guidance_blocks": [29]}),
    ("2.3", {}),
    ("2.3-distilled", {"audio_guidance_scale": 1.0, "stg_scale": 0.0, "modality_scale": 1.0}),
    ("2.0-distilled", {"use_cross_timestep": False, "audio_guidance_scale": 1.0, "stg_scale": 0.0}),
])
def test_each_variant_departs_from_the_pipeline_defaults_as_its_model_does(variant, departs):
    """The pipelines' defaults are LTX-2.3's: LTX-2.0 runs its legacy cross timestep and STG block; the
    distilled checkpoints run unguided on their 8 distilled sigmas (another step count: the linear
    schedule), with the repos' fixed-shift scheduler."""
    from diffusers.pipelines.ltx2.utils import DISTILLED_SIGMA_VALUES

    holder = get_model_class(ARCH)({"arch": ARCH, "name_or_path": "x/y", "variant": variant})
    gen = GenerateImageConfig.from_dict({"prompt": "p"}, holder.model_config)
    kw = holder.pipeline_kwargs(gen)
    assert kw["frame_rate"] == gen.fps == 24 and {k: kw[k] for k in departs} == departs
    distilled = variant.endswith("distilled")
    assert gen.num_inference_steps == (8 if distilled else 30) and gen.guidance_scale == (1.0 if distilled else 3.0)
    assert (kw.get("sigmas") == list(DISTILLED_SIGMA_VALUES)) if distilled else "sigmas" not in kw
    if distilled:
        other = holder.pipeline_kwargs(GenerateImageConfig.from_dict({"prompt": "p", "num_inference_steps": 4},
                                                                     holder.model_config))
        assert "sigmas" not in other
        scheduler = holder.spec.scheduler_for_files(variant)
        assert scheduler["use_dynamic_shifting"] is False and scheduler["shift_terminal"] is None
    if not departs:
        assert not {"use_cross_timestep", "stg_scale", "spatio_temporal_guidance_blocks"} & set(kw)


def test_the_memory_floor_is_below_a_measured_tiny_run(tiny, monkeypatch):
    """estimate_activation_bytes is a floor: with the tiny model's own widths in place of the real
    ones (the denoiser's features per latent position, the VAE decoder's last-stage features per
    pixel), a 33-frame tiny run (its VAE decodes all 5 latent frames at once) holds at least that
    much at its peak. The real row's floor for the model card's request is the real widths'."""
    holder = get_model_class(ARCH)({"arch": ARCH, "name_or_path": tiny(ARCH), "local_only": True})
    holder.load_model()
    pipe = holder.pipeline
    decoder = pipe.vae.decoder
    patch = pipe.vae.config.patch_size
    tiny_decode = decoder.conv_out.in_channels / patch ** 2
    monkeypatch.setattr(BaseModel, "DENOISER_FEATURES", pipe.transformer.config.num_attention_heads
                        * pipe.transformer.config.attention_head_dim)
    monkeypatch.setattr(BaseModel, "decode_features", classmethod(lambda cls, spec: tiny_decode))
    gen = GenerateImageConfig.from_dict({"prompt": "rain on a tin roof", "width": 96, "height": 64, "num_frames": 33,
                                         "fps": 8, "num_inference_steps": 2, "seed": 3}, holder.model_config)
    floor = BaseModel.estimate_activation_bytes(holder.model_config, gen, device="cpu")
    with torch.no_grad(), PeakLive() as meter:
        holder.generate_single(gen)
    frames_alone = 33 * 64 * 96 * 3 * 4
    assert frames_alone < floor <= meter.peak, (floor, meter.peak)
    monkeypatch.undo()
    real = BaseModel.estimate_activation_bytes(holder.model_config, GenerateImageConfig.from_dict(
        {"prompt": "p"}, holder.model_config), device="cuda")
    # 768x512, 121 frames, bf16: the decoder's 16 features per pixel over 8 frames dominate
    assert real >= 8 * 768 * 512 * 16 * 2 * 2


def test_an_ltx23_folder_reads_its_bandwidth_extending_vocoder(tiny, tmp_path):
    """LTX-2.3's vocoder is LTX2VocoderWithBWE (no subclass of LTX-2.0's LTX2Vocoder): the row names the
    role by their common base, so the repo's model_index.json class is what loads, and the soundtrack
    is written at its 48 kHz."""
    import json
    import shutil

    from diffusers.pipelines.ltx2.vocoder import LTX2VocoderWithBWE

    from toolkit.models.archs.ltx2 import TINY_MEL_BINS
    from toolkit.models.tiny.kit import seeded_rng

    folder = tmp_path / "ltx23"
    shutil.copytree(tiny(ARCH), folder)
    with seeded_rng(0, "bwe_vocoder"):
        vocoder = LTX2VocoderWithBWE(
            in_channels=2 * TINY_MEL_BINS, hidden_channels=64, resnet_kernel_sizes=[3], resnet_dilations=[[1, 3, 5]],
            bwe_in_channels=2 * TINY_MEL_BINS, bwe_hidden_channels=32, bwe_resnet_kernel_sizes=[3],
            bwe_resnet_dilations=[[1, 3, 5]], num_mel_channels=TINY_MEL_BINS).eval()
    shutil.rmtree(folder / "vocoder")
    vocoder.save_pretrained(folder / "vocoder")
    index = json.loads((folder / "model_index.json").read_text())
    index["vocoder"] = ["ltx2", "LTX2VocoderWithBWE"]
    (folder / "model_index.json").write_text(json.dumps(index))

    holder = get_model_class(ARCH)({"arch": ARCH, "name_or_path": str(folder), "local_only": True, "variant": "2.3"})
    holder.load_model()
    assert type(holder.pipeline.vocoder).__name__ == "LTX2VocoderWithBWE"
    gen = GenerateImageConfig.from_dict({"prompt": "waves", "width": 64, "height": 64, "num_frames": 9, "fps": 8,
                                         "num_inference_steps": 2, "seed": 1}, holder.model_config)
    rec, = holder.generate_images([gen], paths=[str(tmp_path / "out.mp4")])
    assert rec["audio"] is True and rec["sample_rate"] == 48000 and rec["channels"] == 2
    assert _decoded(rec["path"])["rate"] == 48000
