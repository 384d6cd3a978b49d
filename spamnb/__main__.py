"""``python -m spamnb``: the same as the ``spamnb`` command."""
import sys

from spamnb.cli import main

sys.exit(main())
