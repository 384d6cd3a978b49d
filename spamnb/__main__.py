"""``python -m spamnb``: the same as the ``spamnb`` command."""
import sys

if __name__ == "__main__":   # worker processes (spamnb.training.pipeline) import this module as __mp_main__
    try:
        from spamnb.cli.main import entry
    except KeyboardInterrupt:   # a Ctrl-C as the command starts
        print("spamnb: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(entry())
