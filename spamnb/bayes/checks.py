"""The model file's checks and checksum, for the layers above: the entry
points of the compiled ``spamnb.bayes._checks`` (which only this package
imports), each of which checks its own input."""

from spamnb.bayes._checks import Checksum64, check_offsets, check_range, check_utf8, checksum64, class_sums

__all__ = ["Checksum64", "checksum64", "check_range", "class_sums", "check_offsets", "check_utf8"]
