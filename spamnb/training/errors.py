"""The training layer's own exceptions (the command line maps them to its exit codes)."""

__all__ = ["CorpusError", "SkippedInput"]


class CorpusError(Exception):
    """A corpus path that cannot be used (missing, unreadable, or a skipped file under ``strict``)."""


class SkippedInput(CorpusError):
    """A path refused before it was read (a device, a socket, a FIFO where
    none is read, a file over the size limit, not mail): a batch, a learn,
    goes on without it and says so."""
