"""The training layer's exceptions: defined in :mod:`spamnb.errors` (the one
hierarchy), named here too for the modules of this layer."""

from spamnb.errors import CorpusError, SkippedInput

__all__ = ["CorpusError", "SkippedInput"]
