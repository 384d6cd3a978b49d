"""The model file's checks and checksum, for the layers above: the entry
points of the compiled checks (``_checks.pxi``, built into
``spamnb.bayes._score``, which only this package imports), each of which
checks its own input."""

from spamnb.bayes._score import (Checksum64, check_offsets, check_range, check_utf8, checksum64, class_sums,
                                 journal_learns, journal_records, PrivateMemory)

__all__ = ["Checksum64", "checksum64", "check_range", "class_sums", "check_offsets", "check_utf8", "journal_records",
           "journal_learns", "PrivateMemory"]
