"""A file's pages sent to the disk before its fsync: a model file's save
(``spamnb.persistence.store.write_model``) starts each large array's writing
as soon as the array is written, so that the fsync which ends the save waits
for what is not on the disk yet, not for the whole file (Enron-Spam's model
with word pairs, 70 MB, waited 40-50 ms in its fsync).  A module of its own,
imported by a save with an array that large only: ``store``, which every
command loads, stays as small as it was."""

import sys

__all__ = ["start_writeback"]

_SYNC_FILE_RANGE = []   # libc's sync_file_range once looked up (None: not here)


def start_writeback(fd, offset, size):
    """Start writing ``size`` bytes at ``offset`` of the file ``fd`` to the disk,
    not waiting for them (Linux's ``sync_file_range(SYNC_FILE_RANGE_WRITE)``):
    the fsync that ends a save then waits for what is not written yet, while
    the save's later arrays are made and written meanwhile.  A hint only: the
    fsync still syncs the whole file and its size; nothing is done, and False
    returned, where the call is missing or fails (not Linux, not glibc)."""
    if not _SYNC_FILE_RANGE:
        call = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                call = ctypes.CDLL(None, use_errno=True).sync_file_range
                call.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
                call.restype = ctypes.c_int
            except (OSError, AttributeError, ImportError):
                call = None
        _SYNC_FILE_RANGE.append(call)
    call = _SYNC_FILE_RANGE[0]
    return call is not None and call(fd, offset, size, 2) == 0   # 2: SYNC_FILE_RANGE_WRITE
