"""The C heap of a training process (glibc's malloc; nothing elsewhere).

Training frees many arrays of a few MiB (the partitions' counts as they are
merged, each fold model's temporaries).  glibc keeps freed blocks in its heap
once its mmap threshold has risen past them, so without help the peak memory
of ``spamnb train`` counts them on top of the fold models.  Two calls keep it
down: :func:`map_large_blocks` (large blocks as mappings of their own, given
back when freed) and :func:`release_free_memory` (the heap's free pages given
back now).  Both do nothing off Linux or without glibc.
"""

from __future__ import annotations

__all__ = ["release_free_memory", "map_large_blocks"]


def release_free_memory():
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``;
    nothing elsewhere).  A merge frees many arrays of a few MiB, which glibc
    keeps in the heap once its mmap threshold has risen past them: without
    this, ``spamnb train``'s peak memory counts them on top of the fold models."""
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def map_large_blocks(threshold=256 << 10):
    """Make the C heap give blocks of ``threshold`` bytes or more as memory
    mappings of their own (glibc's ``M_MMAP_THRESHOLD``, fixed; nothing
    elsewhere): freed, they go back to the system at once.  Left to itself,
    glibc raises the threshold past the largest block freed, so the merge's
    stream of arrays of a few MiB (the partitions' counts) would stay in the
    heap, fragmenting it: ``spamnb train``'s parent maps them from its
    counting pass (its workers forked) to its end (held in the heap, the
    held-out pass's and the save's arrays took Enron-Spam's save from 74 to
    82 MiB)."""
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-3, int(threshold))   # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass
