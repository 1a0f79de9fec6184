"""Stable Audio's Oobleck VAE in stable-audio-tools' layout (the `pretransform.model.` part of ComfyUI's
`checkpoints/stable-audio-open-1.0.safetensors`): sequential `layers.N` where diffusers'
AutoencoderOobleck names its modules, weight-normed convolutions (`weight_g`, `weight_v`) in both,
Snake parameters as (C,) vectors where diffusers keeps (1, C, 1). The names are the ones diffusers'
conversion script (scripts/convert_stable_audio.py) maps; the mapping both ways is built here from the
block count the file shows. Signature torch-free (the detector calls it on a header).
"""
import re

from toolkit.models.formats.file_view import FileConfig, FileKindError
from toolkit.models.formats.ldm import known_config

FACTS = ("encoder_hidden_size", "downsampling_ratios", "channel_multiples", "decoder_channels",
         "decoder_input_channels", "audio_channels")
_OPEN = dict(downsampling_ratios=[2, 4, 4, 8, 8], channel_multiples=[1, 2, 4, 8, 16], decoder_input_channels=64,
             audio_channels=2, sampling_rate=44100)
KNOWN = {
    # stabilityai/stable-audio-open-1.0 vae/config.json (diffusers' AutoencoderOobleck defaults)
    "stable-audio-open-1.0": dict(_OPEN, encoder_hidden_size=128, decoder_channels=128),
    # toolkit/models/archs/stable_audio.py's tiny VAE
    "tiny": dict(_OPEN, encoder_hidden_size=4, decoder_channels=4),
}


def _res_unit(o: str, d: str) -> list:
    return [(o + "layers.0.", d + "snake1.", True), (o + "layers.1.", d + "conv1.", False),
            (o + "layers.2.", d + "snake2.", True), (o + "layers.3.", d + "conv2.", False)]


def modules(blocks: int) -> list:
    """(original prefix, diffusers prefix, is a Snake) of every module, for `blocks` down/up blocks."""
    out = [("encoder.layers.0.", "encoder.conv1.", False)]
    for j in range(blocks):
        o, d = f"encoder.layers.{j + 1}.", f"encoder.block.{j}."
        for i in range(3):
            out += _res_unit(f"{o}layers.{i}.", f"{d}res_unit{i + 1}.")
        out += [(o + "layers.3.", d + "snake1.", True), (o + "layers.4.", d + "conv1.", False)]
    out += [(f"encoder.layers.{blocks + 1}.", "encoder.snake1.", True),
            (f"encoder.layers.{blocks + 2}.", "encoder.conv2.", False),
            ("decoder.layers.0.", "decoder.conv1.", False)]
    for j in range(blocks):
        o, d = f"decoder.layers.{j + 1}.", f"decoder.block.{j}."
        out += [(o + "layers.0.", d + "snake1.", True), (o + "layers.1.", d + "conv_t1.", False)]
        for k in range(1, 4):
            out += _res_unit(f"{o}layers.{k + 1}.", f"{d}res_unit{k}.")
    out += [(f"decoder.layers.{blocks + 1}.", "decoder.snake1.", True),
            (f"decoder.layers.{blocks + 2}.", "decoder.conv2.", False)]
    return out


def _blocks_original(keys) -> int:
    top = [int(m[1]) for k in keys if (m := re.match(r"encoder\.layers\.(\d+)\.", k))]
    if not top:
        raise FileKindError("no encoder.layers.N: not an Oobleck VAE")
    return max(top) - 2


def signature(view) -> dict:
    if not view.has("encoder.layers.0.weight_v") or not view.has("decoder.layers.0.weight_v"):
        raise FileKindError("no encoder.layers.0.weight_v / decoder.layers.0.weight_v: not an Oobleck VAE")
    n = _blocks_original(view.shapes)
    hidden, audio = view.shape("encoder.layers.0.weight_v")[:2]
    blocks = [view.shape(f"encoder.layers.{j + 1}.layers.4.weight_v") for j in range(n)]
    return {"encoder_hidden_size": hidden, "audio_channels": audio,
            "downsampling_ratios": [s[2] // 2 for s in blocks],        # each down conv's kernel is 2x its stride
            "channel_multiples": [s[0] // hidden for s in blocks],
            "decoder_input_channels": view.shape("decoder.layers.0.weight_v")[1],
            "decoder_channels": view.shape(f"decoder.layers.{n + 2}.weight_v")[1]}


def config(view) -> FileConfig:
    return known_config(signature(view), KNOWN, FACTS, "the Oobleck VAE")


def _remap(state: dict, table: dict, snake_shape) -> dict:
    out = {}
    for key, t in state.items():
        prefix, _, param = key.rpartition(".")
        if prefix + "." not in table:
            out[key] = t                   # not a module of this layout: the reader names it as unexpected
            continue
        new, snake = table[prefix + "."]
        out[new + param] = snake_shape(t) if snake else t
    return out


def convert(state: dict) -> dict:
    table = {o: (d, snake) for o, d, snake in modules(_blocks_original(state))}
    return _remap(state, table, lambda t: t.reshape(1, -1, 1))


def to_original(state: dict) -> dict:
    n = 1 + max(int(m[1]) for k in state if (m := re.match(r"encoder\.block\.(\d+)\.", k)))
    table = {d: (o, snake) for o, d, snake in modules(n)}
    return _remap(state, table, lambda t: t.reshape(-1))
