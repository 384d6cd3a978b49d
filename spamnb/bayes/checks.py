"""The model file's checks and checksum, for the layers above: the entry
points of the compiled checks (``_checks.pxi``, built into
``spamnb.bayes._score``, which only this package imports), each of which
checks its own input; and what a learn needs of the system beside them
(``_learn.pxi``): the model's lock (``try_lock``, flock) and the ledger's
message digest (``blake2b``, hashlib's bit for bit), without the shared
objects of ``fcntl`` and ``_blake2``, a digest's place in the model
file's ledger (``find_digest``) and the journal's ledger operations
(``journal_ledger``), and the journal's record layouts packed and
read as ``struct`` does, without its shared object (``layout_size``,
``pack_layout``, ``unpack_layout``: ``spamnb.persistence.store.Layout``)."""

from spamnb.bayes._score import (Checksum64, PrivateMemory, blake2b, check_offsets, check_range, check_utf8, checksum64,
                                 class_sums, find_digest, journal_learns, journal_ledger, journal_records, journal_scan,
                                 layout_size, pack_layout, try_lock, unpack_layout)

__all__ = ["Checksum64", "checksum64", "check_range", "class_sums", "check_offsets", "check_utf8", "journal_records",
           "journal_scan", "journal_learns", "journal_ledger", "PrivateMemory", "try_lock", "blake2b", "find_digest",
           "layout_size", "pack_layout", "unpack_layout"]
