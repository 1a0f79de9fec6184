"""One-shot generation from the command line, through the same request resolution and holder
path as the engine:

    python -m toolkit.generate --profiles profiles.toml --model-profile krea2-turbo \\
        --prompt "a fox walking through fresh snow" -o fox.png
    python -m toolkit.generate --arch zimage --name-or-path tiny:zimage --prompt x --steps 4 -o x.png
"""
import argparse
import os
import sys

from toolkit.offline import go_offline


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m toolkit.generate", description=__doc__.split("\n\n")[0])
    src = p.add_argument_group("model")
    src.add_argument("--profiles", default=os.environ.get("AITK_PROFILES", "profiles.toml"),
                     help="profiles file (TOML or YAML); default $AITK_PROFILES or ./profiles.toml")
    src.add_argument("--model-profile", help="a profile name from the profiles file (its default_model if omitted)")
    src.add_argument("--arch", help="instead of a profile: an arch name")
    src.add_argument("--name-or-path", help="with --arch: a local diffusers folder, hub repo id or tiny:<arch>")
    src.add_argument("--quantize", action="store_true")
    samp = p.add_argument_group("sample (unset ones come from [generation], the profile, the variant, the arch)")
    samp.add_argument("--prompt", required=True)
    samp.add_argument("--negative-prompt")
    samp.add_argument("--width", type=int)
    samp.add_argument("--height", type=int)
    samp.add_argument("--steps", type=int, dest="num_inference_steps")
    samp.add_argument("--cfg", type=float, dest="guidance_scale")
    samp.add_argument("--seed", type=int)
    samp.add_argument("--mu", type=float)
    samp.add_argument("--shift-y1", type=float, dest="shift_y1")
    samp.add_argument("--shift-y2", type=float, dest="shift_y2")
    p.add_argument("--device", default="cuda" if _cuda() else "cpu")
    p.add_argument("-o", "--output", default="output.png", help="output file; its extension picks the format")
    return p.parse_args(argv)


def _cuda() -> bool:
    return os.environ.get("CUDA_VISIBLE_DEVICES", "x") not in ("", "-1") and os.path.exists("/dev/nvidia0")


def main(argv=None) -> int:
    args = parse_args(argv)
    from toolkit.errors import ConfigError
    from toolkit.profiles import EMPTY, load_profiles
    try:
        if args.arch:
            profiles = EMPTY
            model = {"arch": args.arch, **({"name_or_path": args.name_or_path} if args.name_or_path else {})}
        else:
            go_offline()   # a profile is local by contract: no hub library may reach out
            profiles = load_profiles(args.profiles)
            name = args.model_profile or profiles.default_model
            if not name:
                raise ConfigError("--model-profile", f"no profile named and {args.profiles} has no default_model")
            model = {"profile": name}
        if args.quantize:
            model["quantize"] = True
        sample = {k: getattr(args, k) for k in ("prompt", "negative_prompt", "width", "height", "num_inference_steps",
                                                "guidance_scale", "seed", "mu", "shift_y1", "shift_y2")
                  if getattr(args, k) is not None}
        ext = os.path.splitext(args.output)[1].lstrip(".").lower()
        if ext:
            sample["output_ext"] = ext
        from toolkit.request import resolve_request
        work = resolve_request(model, sample, profiles=profiles, device=args.device)
        mc, gen = work.model, work.sample
    except ConfigError as e:
        print(f"error: {e.one_line()}", file=sys.stderr)
        return 2
    for warning in gen.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    from toolkit.models.base_model import get_model_class
    def say(message, stage):
        print(f"[{stage}] {message}", file=sys.stderr)
    holder = get_model_class(mc.arch)(mc, device=args.device, status_hook=say)
    try:
        holder.load_model()
        records = holder.generate_images([gen], paths=[args.output], on_status=say)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except ConfigError as e:
        print(f"error: {e.one_line()}", file=sys.stderr)
        return 2
    for record in records:          # a batch: one file each (base_model.batch_paths)
        print(f"wrote {record['path']} ({record.get('width')}x{record.get('height')}, seed {record['seed']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
