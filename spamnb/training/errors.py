"""The training layer's own exceptions (the command line maps them to its exit codes)."""

__all__ = ["CorpusError"]


class CorpusError(Exception):
    """A corpus path that cannot be used (missing, unreadable, or a skipped file under ``strict``)."""
