"""The training layer's exceptions (the command line maps them to its exit
codes): a path that cannot be read is the mail reader's
(:class:`spamnb.mail.reader.CorpusError`, raised where mail is read)."""

from spamnb.mail.reader import CorpusError, SkippedInput

__all__ = ["CorpusError", "SkippedInput"]
