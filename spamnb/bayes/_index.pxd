"""The vocabulary's hash index probe, shared by the index (``_index.pxi``) and the scorers (``_score.pyx``)."""

from libc.stdint cimport uint64_t


cdef inline Py_ssize_t _find_slot(const uint64_t *keys, uint64_t mask, uint64_t h) noexcept nogil:
    """Slot holding ``h``, or the empty slot where it would go.  At most one
    probe a slot: in a table with no empty slot (never written so; a model
    file mapped without its full check, ``spamnb.persistence.store.map_model``)
    the slot returned holds neither ``h`` nor 0, and the callers that may
    meet such a table check ``keys[slot] == h``."""
    cdef uint64_t slot = h & mask
    cdef uint64_t probes = 0
    while keys[slot] != 0 and keys[slot] != h and probes <= mask:
        slot = (slot + 1) & mask
        probes += 1
    return <Py_ssize_t>slot
