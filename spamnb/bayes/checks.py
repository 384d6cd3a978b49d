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
``pack_layout``, ``unpack_layout``: ``spamnb.persistence.store.Layout``);
and a file's bytes read by ``pread`` to an end (:func:`read_range`)."""

import posix   # os's calls without os.py (a cold classify or learn never loads it)

from spamnb.bayes._score import (Checksum64, PrivateMemory, blake2b, check_offsets, check_range, check_utf8, checksum64,
                                 class_sums, find_digest, journal_learns, journal_ledger, journal_records, journal_scan,
                                 layout_size, pack_layout, try_lock, unpack_layout)

__all__ = ["Checksum64", "checksum64", "check_range", "class_sums", "check_offsets", "check_utf8", "journal_records",
           "journal_scan", "journal_learns", "journal_ledger", "PrivateMemory", "try_lock", "blake2b", "find_digest",
           "layout_size", "pack_layout", "unpack_layout", "read_range"]


def read_range(fd, start, stop):
    """The bytes ``[start, stop)`` of the file open as ``fd``, read by ``pread``
    (its offset neither used nor moved) until they are all read or the file ends
    (fewer then); OSError when a read fails."""
    chunks = []
    while start < stop:
        chunk = posix.pread(fd, stop - start, start)
        if not chunk:
            break
        chunks.append(chunk)
        start += len(chunk)
    return b"".join(chunks)   # (one chunk: that very bytes object, not a copy)
