"""``python -m spamnb``: the same as the ``spamnb`` command."""
import sys

from spamnb.cli.main import main

if __name__ == "__main__":   # worker processes (spamnb.training.pipeline) import this module as __mp_main__
    sys.exit(main())
