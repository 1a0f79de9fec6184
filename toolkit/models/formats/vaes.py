"""VAE files in their original layouts (ComfyUI's `models/vae/`, the VAE part of all-in-one checkpoints): one
`SingleFile` per kind, each with its converter, its inverse (the tiny factory writes with it), its config
rule and its known configs, the real ones (the hub repos' `vae/config.json`) and the tiny factory's.

    FLUX_AE            Flux `ae.safetensors` (Flux.1, Chroma, Kontext, Z-Image, Lumina 2): LDM KL, 16 channels
    SD3_VAE            the SD3 / 3.5 VAE: the same layout and shapes, its own scale and shift
    SDXL_VAE           `sdxl_vae.safetensors`: SD 1.x's 4-channel LDM KL layout, SDXL's scale (0.13025)
    WAN21_VAE          `wan_2.1_vae.safetensors` (Wan 2.1, Wan 2.2 A14B)
    QWEN_IMAGE_VAE     `qwen_image_vae.safetensors`: Wan 2.1's layout and shapes, AutoencoderKLQwenImage
    WAN22_VAE          `wan2.2_vae.safetensors` (Wan 2.2 TI2V 5B, 48 channels)
    LTX_VAE            the LTX-Video VAE (the `vae.` part of its checkpoints), 0.9.0 / 0.9.1
    HUNYUAN_VIDEO_VAE  `hunyuan_video_vae_bf16.safetensors` (ComfyUI's layout, or Tencent's)
    FLUX2_VAE          `flux2-vae.safetensors` (FLUX.2 dev and klein; formats/flux2_vae.py)
    OOBLECK_VAE        Stable Audio Open's, in its checkpoint under `pretransform.model.` (formats/oobleck.py)

A kind is a layout its shapes can tell: the Flux and SD3 VAEs (and SD 1.x's and SDXL's, Wan 2.1's and
Qwen-Image's) have the same shapes, so a file of one fits the other's role too ("kl_vae_16ch" fills
flux's and sd3's vae); which real config it is (its scale, shift, latent statistics) is the arch's:
each constant carries its own known configs, and an arch row may set its own facts on top
(`FLUX_AE.with_facts(scaling_factor=...)`). A file whose shapes match no known config is refused,
naming the nearest one and what differs.

The signatures are torch-free (the detector calls them on a header): formats/ldm.py (LDM KL),
formats/wan_vae.py (Wan 2.1 / 2.2 and Qwen-Image), formats/ltx_vae.py, formats/hunyuan_vae.py.
"""
from toolkit.models.arch import SingleFile
from toolkit.models.formats import hunyuan_vae, ldm, ltx_vae, wan_vae
from toolkit.models.formats.file_view import FileConfig, FileKindError
from toolkit.models.formats.ldm import known_config

_M = "toolkit.models.formats.vaes"

# -- LDM KL (Flux ae, SD3, SDXL) -----------------------------------------------------------------------
KL_FACTS = ldm.VAE_FACTS + ("mid_block_add_attention",)
_KL = dict(act_fn="silu", in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
           up_block_types=["UpDecoderBlock2D"] * 4, latents_mean=None, latents_std=None, force_upcast=True,
           mid_block_add_attention=True)
_KL_REAL = dict(_KL, block_out_channels=[128, 256, 512, 512], layers_per_block=2, norm_num_groups=32, sample_size=1024)
_KL_TINY = dict(_KL, block_out_channels=[8, 8, 16, 16], layers_per_block=1, norm_num_groups=4, sample_size=64)  # kit.kl_vae
_KL16 = dict(latent_channels=16, use_quant_conv=False, use_post_quant_conv=False)
_FLUX = dict(scaling_factor=0.3611, shift_factor=0.1159)
_SD3 = dict(scaling_factor=1.5305, shift_factor=0.0609)
_SDXL = dict(latent_channels=4, use_quant_conv=True, use_post_quant_conv=True, scaling_factor=0.13025, shift_factor=None)
# black-forest-labs/FLUX.1-dev vae/config.json (Chroma, Kontext, Z-Image and Lumina 2 ship the same); the
# tiny factory's kit.flux_vae()
FLUX_AE_KNOWN = {"flux-ae": dict(_KL_REAL, **_KL16, **_FLUX), "tiny": dict(_KL_TINY, **_KL16, **_FLUX)}
# stabilityai/stable-diffusion-3-medium-diffusers (and 3.5) vae/config.json; sd3's tiny recipe
SD3_VAE_KNOWN = {"sd3-vae": dict(_KL_REAL, **_KL16, **_SD3), "tiny": dict(_KL_TINY, **_KL16, **_SD3)}
# stabilityai/sdxl-vae config.json (the SDXL base repo's vae/); sdxl's tiny recipe
SDXL_VAE_KNOWN = {"sdxl-vae": dict(_KL_REAL, **_SDXL), "tiny": dict(_KL_TINY, **_SDXL)}


def kl_signature(view) -> dict:
    return {**ldm.vae_signature(view), "mid_block_add_attention": view.has("encoder.mid.attn_1.q.weight")}


def flux_ae_config(view) -> FileConfig:
    return known_config(kl_signature(view), FLUX_AE_KNOWN, KL_FACTS, "the Flux VAE (ae)")


def sd3_vae_config(view) -> FileConfig:
    return known_config(kl_signature(view), SD3_VAE_KNOWN, KL_FACTS, "the SD3 VAE")


def sdxl_vae_config(view) -> FileConfig:
    return known_config(kl_signature(view), SDXL_VAE_KNOWN, KL_FACTS, "the SDXL VAE")


# -- Wan 2.1 / Qwen-Image / Wan 2.2 ---------------------------------------------------------------------
# the Wan 2.1 latent space's per-channel statistics (Wan-AI/Wan2.1-*-Diffusers and Qwen/Qwen-Image vae/)
WAN21_LATENTS_MEAN = [-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
                      0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921]
WAN21_LATENTS_STD = [2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
                     3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160]
# Wan-AI/Wan2.2-TI2V-5B-Diffusers vae/config.json
WAN22_LATENTS_MEAN = [
    -0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557, -0.1382, 0.0542, 0.2813, 0.0891,
    0.157, -0.0098, 0.0375, -0.1825, -0.2246, -0.1207, -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502,
    -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.123, -0.0313, -0.1649, 0.0117, 0.0723,
    -0.2839, -0.2083, -0.052, 0.3748, 0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667]
WAN22_LATENTS_STD = [
    0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.499, 0.4818, 0.5013, 0.8158, 1.0344, 0.5894, 1.0901,
    0.6885, 0.6165, 0.8454, 0.4978, 0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659,
    0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093, 0.5709, 0.6065, 0.6415, 0.4944,
    0.5726, 1.2042, 0.5458, 1.6887, 0.3971, 1.06, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744]
WAN_FACTS = ("base_dim", "decoder_base_dim", "z_dim", "dim_mult", "num_res_blocks", "temperal_downsample",
             "in_channels", "out_channels", "is_residual")
_WAN = dict(dim_mult=[1, 2, 4, 4], attn_scales=[], temperal_downsample=[False, True, True], dropout=0.0)
_WAN21 = dict(_WAN, decoder_base_dim=None, z_dim=16, latents_mean=WAN21_LATENTS_MEAN, latents_std=WAN21_LATENTS_STD,
              is_residual=False, in_channels=3, out_channels=3, patch_size=None, scale_factor_temporal=4,
              scale_factor_spatial=8)
# Wan-AI/Wan2.1-T2V-14B-Diffusers vae/config.json (the 1.3B's and Wan 2.2 A14B's are the same); kit.wan_vae(16)
WAN21_VAE_KNOWN = {"wan2.1-vae": dict(_WAN21, base_dim=96, num_res_blocks=2), "tiny": dict(_WAN21, base_dim=4, num_res_blocks=1)}
_QWEN = dict(_WAN, z_dim=16, input_channels=3, latents_mean=WAN21_LATENTS_MEAN, latents_std=WAN21_LATENTS_STD)
QWEN_FACTS = ("base_dim", "z_dim", "dim_mult", "num_res_blocks", "temperal_downsample", "input_channels")
# Qwen/Qwen-Image vae/config.json; qwen_image's tiny recipe (and its Edit models'), Krea 2's (base 8, 2 blocks)
QWEN_IMAGE_VAE_KNOWN = {"qwen-image-vae": dict(_QWEN, base_dim=96, num_res_blocks=2),
                        "tiny": dict(_QWEN, base_dim=4, num_res_blocks=1),
                        "tiny-krea2": dict(_QWEN, base_dim=8, num_res_blocks=2)}
_WAN22 = dict(_WAN, z_dim=48, latents_mean=WAN22_LATENTS_MEAN, latents_std=WAN22_LATENTS_STD, is_residual=True,
              in_channels=12, out_channels=12, patch_size=2, scale_factor_temporal=4, scale_factor_spatial=16)
# Wan-AI/Wan2.2-TI2V-5B-Diffusers vae/config.json (its `clip_output`, which this diffusers' AutoencoderKLWan
# does not take, left out); wan22_5b's tiny recipe
WAN22_VAE_KNOWN = {"wan2.2-vae": dict(_WAN22, base_dim=160, decoder_base_dim=256, num_res_blocks=2),
                   "tiny": dict(_WAN22, base_dim=4, decoder_base_dim=None, num_res_blocks=1)}


def wan21_config(view) -> FileConfig:
    return known_config(wan_vae.wan21_signature(view), WAN21_VAE_KNOWN, WAN_FACTS, "the Wan 2.1 VAE")


def qwen_image_vae_config(view) -> FileConfig:
    sig = wan_vae.wan21_signature(view)
    if sig["decoder_base_dim"] is not None or sig["out_channels"] != sig["in_channels"]:
        raise FileKindError(f"the Qwen-Image VAE: its decoder ({sig['decoder_base_dim']} wide, {sig['out_channels']} "
                            "channels out) is not its encoder's")
    return known_config({**sig, "input_channels": sig["in_channels"]}, QWEN_IMAGE_VAE_KNOWN, QWEN_FACTS,
                        "the Qwen-Image VAE")


def wan22_config(view) -> FileConfig:
    return known_config(wan_vae.wan22_signature(view), WAN22_VAE_KNOWN, WAN_FACTS + ("patch_size",),
                        "the Wan 2.2 VAE")


# -- LTX-Video ------------------------------------------------------------------------------------------
LTX_FACTS = ("latent_channels", "patch_size", "block_out_channels", "layers_per_block", "spatio_temporal_scaling",
             "decoder_block_out_channels", "decoder_layers_per_block", "decoder_spatio_temporal_scaling",
             "decoder_inject_noise", "upsample_factor", "timestep_conditioning")
_LTX = dict(in_channels=3, out_channels=3, latent_channels=128, down_block_types=["LTXVideoDownBlock3D"] * 4,
            spatio_temporal_scaling=[True, True, True, False], downsample_type=["conv"] * 4, patch_size=4,
            patch_size_t=1, resnet_norm_eps=1e-6, scaling_factor=1.0, encoder_causal=True, decoder_causal=False,
            spatial_compression_ratio=None, temporal_compression_ratio=None)
_LTX_090 = dict(decoder_spatio_temporal_scaling=[True, True, True, False], decoder_inject_noise=[False] * 5,
                upsample_residual=[False] * 4, upsample_factor=[1] * 4, timestep_conditioning=False)
# the VAE configs of LTX-Video 0.9.0 and 0.9.1 (diffusers/LTX-Video-0.9.0, -0.9.1 vae/config.json, as
# diffusers' scripts/convert_ltx_to_diffusers.py writes them); ltx's tiny recipe
LTX_VAE_KNOWN = {
    "ltx-video-0.9.0": dict(_LTX, **_LTX_090, block_out_channels=[128, 256, 512, 512],
                            decoder_block_out_channels=[128, 256, 512, 512], layers_per_block=[4, 3, 3, 3, 4],
                            decoder_layers_per_block=[4, 3, 3, 3, 4]),
    "ltx-video-0.9.1": dict(_LTX, block_out_channels=[128, 256, 512, 512], decoder_block_out_channels=[256, 512, 1024],
                            layers_per_block=[4, 3, 3, 3, 4], decoder_layers_per_block=[5, 6, 7, 8],
                            decoder_spatio_temporal_scaling=[True, True, True], decoder_inject_noise=[False, True, True, True],
                            upsample_residual=[True, True, True], upsample_factor=[2, 2, 2], timestep_conditioning=True),
    "tiny": dict(_LTX, **_LTX_090, block_out_channels=[8, 16, 32, 32], decoder_block_out_channels=[8, 16, 32, 32],
                 layers_per_block=[1] * 5, decoder_layers_per_block=[1] * 5),
}


def ltx_config(view) -> FileConfig:
    return known_config(ltx_vae.ltx_signature(view), LTX_VAE_KNOWN, LTX_FACTS, "the LTX-Video VAE")


# -- HunyuanVideo ---------------------------------------------------------------------------------------
HV_FACTS = ("in_channels", "out_channels", "latent_channels", "block_out_channels", "layers_per_block",
            "mid_block_add_attention")
_HV = dict(in_channels=3, out_channels=3, latent_channels=16, down_block_types=["HunyuanVideoDownBlock3D"] * 4,
           up_block_types=["HunyuanVideoUpBlock3D"] * 4, act_fn="silu", scaling_factor=0.476986,
           spatial_compression_ratio=8, temporal_compression_ratio=4, mid_block_add_attention=True)
# hunyuanvideo-community/HunyuanVideo vae/config.json; hunyuan_video's tiny recipe
HUNYUAN_VIDEO_VAE_KNOWN = {
    "hunyuan-video-vae": dict(_HV, block_out_channels=[128, 256, 512, 512], layers_per_block=2, norm_num_groups=32),
    "tiny": dict(_HV, block_out_channels=[8, 8, 16, 16], layers_per_block=1, norm_num_groups=4),
}


def hunyuan_video_config(view) -> FileConfig:
    return known_config(hunyuan_vae.signature(view), HUNYUAN_VIDEO_VAE_KNOWN, HV_FACTS, "the HunyuanVideo VAE")


# -- which kind a file is (when anchors alone cannot tell) -----------------------------------------------
def _fits(config_fn, view) -> bool:
    try:
        config_fn(view)
    except FileKindError:
        return False
    return True


def is_flux_ae(view) -> bool:
    return _fits(flux_ae_config, view)


def is_sd3_vae(view) -> bool:
    return _fits(sd3_vae_config, view)


def is_sdxl_vae(view) -> bool:
    return _fits(sdxl_vae_config, view)


def is_hunyuan_video_vae(view) -> bool:
    return _fits(hunyuan_video_config, view)


# -- the kinds ------------------------------------------------------------------------------------------
_KL_ANCHORS = ("encoder.conv_in.weight", "decoder.conv_out.weight")
_LDM_CONVERT, _LDM_ORIGINAL = "toolkit.models.formats.ldm:convert_vae", "toolkit.models.formats.ldm:vae_to_original"
_KL16_KIND, _KL16_LABEL = "kl_vae_16ch", "16-channel KL VAE (Flux ae, SD3)"
_WAN21_KIND, _WAN21_LABEL = "wan21_vae", "Wan 2.1 VAE layout (Wan 2.1, Qwen-Image)"
_VAE_PREFIXES = ("first_stage_model.", "vae.", "")

FLUX_AE = SingleFile(_LDM_CONVERT, _LDM_ORIGINAL, anchors=_KL_ANCHORS, prefixes=("vae.", "first_stage_model.", ""),
                     config=f"{_M}:flux_ae_config", matches=f"{_M}:is_flux_ae", kind=_KL16_KIND, label=_KL16_LABEL)
SD3_VAE = SingleFile(_LDM_CONVERT, _LDM_ORIGINAL, anchors=_KL_ANCHORS, prefixes=_VAE_PREFIXES,
                     config=f"{_M}:sd3_vae_config", matches=f"{_M}:is_sd3_vae", kind=_KL16_KIND, label=_KL16_LABEL)
SDXL_VAE = SingleFile(_LDM_CONVERT, _LDM_ORIGINAL, anchors=_KL_ANCHORS + ("quant_conv.weight",), prefixes=_VAE_PREFIXES,
                      config=f"{_M}:sdxl_vae_config", matches=f"{_M}:is_sdxl_vae", kind="ldm_kl_vae",
                      label="KL VAE (4 channels)")
WAN21_VAE = SingleFile("toolkit.models.formats.wan_vae:convert_wan21", "toolkit.models.formats.wan_vae:wan21_to_original",
                       anchors=("decoder.middle.0.residual.0.gamma", "encoder.downsamples.0.residual.0.gamma"),
                       prefixes=_VAE_PREFIXES, config=f"{_M}:wan21_config", kind=_WAN21_KIND, label=_WAN21_LABEL)
QWEN_IMAGE_VAE = SingleFile("toolkit.models.formats.wan_vae:convert_wan21",
                            "toolkit.models.formats.wan_vae:wan21_to_original", anchors=WAN21_VAE.anchors,
                            prefixes=_VAE_PREFIXES, config=f"{_M}:qwen_image_vae_config", kind=_WAN21_KIND,
                            label=_WAN21_LABEL)
WAN22_VAE = SingleFile("toolkit.models.formats.wan_vae:convert_wan22", "toolkit.models.formats.wan_vae:wan22_to_original",
                       anchors=("decoder.middle.0.residual.0.gamma", "encoder.downsamples.0.downsamples.0.residual.0.gamma"),
                       prefixes=_VAE_PREFIXES, config=f"{_M}:wan22_config", kind="wan22_vae",
                       label="Wan 2.2 VAE (48 channels)")
LTX_VAE = SingleFile("toolkit.models.formats.ltx_vae:convert_ltx", "toolkit.models.formats.ltx_vae:ltx_to_original",
                     anchors=("encoder.conv_in.conv.weight", "decoder.conv_in.conv.weight",
                              "per_channel_statistics.mean-of-means"),
                     prefixes=("vae.", ""), config=f"{_M}:ltx_config", kind="ltx_vae", label="LTX-Video VAE")
HUNYUAN_VIDEO_VAE = SingleFile("toolkit.models.formats.hunyuan_vae:convert", "toolkit.models.formats.hunyuan_vae:to_original",
                               anchors=("encoder.conv_in.conv.weight", "decoder.conv_in.conv.weight",
                                        "post_quant_conv.weight"),
                               prefixes=_VAE_PREFIXES, config=f"{_M}:hunyuan_video_config",
                               matches=f"{_M}:is_hunyuan_video_vae", kind="hunyuan_video_vae", label="HunyuanVideo VAE")

FLUX2_VAE = SingleFile("toolkit.models.formats.flux2_vae:convert", "toolkit.models.formats.flux2_vae:to_original",
                       anchors=("encoder.conv_in.weight", "encoder.quant_conv.weight", "bn.running_mean"),
                       prefixes=_VAE_PREFIXES, config="toolkit.models.formats.flux2_vae:config",
                       matches="toolkit.models.formats.flux2_vae:is_flux2_vae", kind="flux2_vae", label="FLUX.2 VAE")
OOBLECK_VAE = SingleFile("toolkit.models.formats.oobleck:convert", "toolkit.models.formats.oobleck:to_original",
                         anchors=("encoder.layers.0.weight_v", "decoder.layers.0.weight_v"),
                         prefixes=("pretransform.model.", ""), config="toolkit.models.formats.oobleck:config",
                         kind="oobleck_vae", label="Oobleck VAE (Stable Audio)")

VAES = {"FLUX_AE": FLUX_AE, "FLUX2_VAE": FLUX2_VAE, "OOBLECK_VAE": OOBLECK_VAE, "SD3_VAE": SD3_VAE, "SDXL_VAE": SDXL_VAE, "WAN21_VAE": WAN21_VAE,
        "QWEN_IMAGE_VAE": QWEN_IMAGE_VAE, "WAN22_VAE": WAN22_VAE, "LTX_VAE": LTX_VAE,
        "HUNYUAN_VIDEO_VAE": HUNYUAN_VIDEO_VAE}
