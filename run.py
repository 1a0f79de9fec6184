"""python run.py CONFIG [CONFIG ...]: run job configs (YAML or JSON) one after another."""
import argparse
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Run AI Toolkit job configs.")
    parser.add_argument("config_file_list", nargs="+", help="job config files (.yaml/.yml/.json)")
    parser.add_argument("-r", "--recover", action="store_true", help="continue with the next config if one fails")
    args = parser.parse_args(argv)
    # Ctrl-C (and the UI's stop, which sends SIGINT) must stop a job even when this process was
    # started with SIGINT ignored, as a `cmd &` in a non-interactive shell is: Python then leaves
    # the inherited SIG_IGN in place instead of installing its KeyboardInterrupt handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    from jobs import get_job
    from toolkit.errors import ConfigError

    failed = 0
    for path in args.config_file_list:
        try:
            job = get_job(path)
        except ConfigError as e:
            print(f"error: {e.one_line()}", file=sys.stderr)
            failed += 1
            if not args.recover:
                return 2
            continue
        try:
            job.run()
        except KeyboardInterrupt:
            print(f"interrupted: {path}", file=sys.stderr)
            job.cleanup()
            return 130
        except ConfigError as e:
            print(f"error: {e.under('', file=path).one_line()}", file=sys.stderr)
            job.cleanup()
            failed += 1
            if not args.recover:
                return 2
            continue
        except Exception as e:
            print(f"error: {path}: {type(e).__name__}: {e}", file=sys.stderr)
            job.cleanup()
            failed += 1
            if not args.recover:
                return 1
            continue
        job.cleanup()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
