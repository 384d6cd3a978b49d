"""The vocabulary's hash index probe, shared by spamnb.bayes._index and the scorers."""

from libc.stdint cimport uint64_t


cdef inline Py_ssize_t _find_slot(const uint64_t[::1] keys, uint64_t mask, uint64_t h) noexcept nogil:
    """Slot holding ``h``, or the empty slot where it would go."""
    cdef uint64_t slot = h & mask
    while keys[slot] != 0 and keys[slot] != h:
        slot = (slot + 1) & mask
    return <Py_ssize_t>slot
