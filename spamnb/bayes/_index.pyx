"""The vocabulary's hash index: open addressing with linear probing.

``keys`` (uint64, 0 = empty slot) and ``values`` (int32 feature index), both of
a power-of-two ``capacity``, kept at most half full.  Token hashes are already
well mixed 64-bit values (never 0), so the slot is their low bits.  The probe,
``_find_slot``, is in ``_index.pxd`` (the single-message scorer of ``_score``
cimports it).  Nothing here imports numpy; callers go through
``spamnb.bayes.token_kernels``, which checks shapes first.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc


def lookup(const uint64_t[::1] keys, const int32_t[::1] values, const uint64_t[::1] hashes,
           int32_t[::1] out):
    """Feature index of each hash (-1 when unknown): ``out[j]`` for ``hashes[j]``.

    Returns the number of known hashes.  ``len(out) == len(hashes)``.
    """
    cdef uint64_t mask = keys.shape[0] - 1
    cdef Py_ssize_t j, slot, n = hashes.shape[0], known = 0
    with nogil:
        for j in range(n):
            slot = _find_slot(keys, mask, hashes[j])
            if keys[slot] == 0 or keys[slot] != hashes[j]:
                out[j] = -1
            else:
                out[j] = values[slot]
                known += 1
    return known


def insert(uint64_t[::1] keys, int32_t[::1] values, const uint64_t[::1] hashes,
           int32_t[::1] out, int32_t next_index, int32_t[::1] new_positions):
    """Look up each hash, giving unknown ones the next free feature index.

    ``out[j]`` receives the index of ``hashes[j]``; the positions ``j`` of first
    occurrences of new hashes are written to ``new_positions`` (same length as
    ``hashes``).  The caller guarantees the table stays at most half full.
    Returns the number of new hashes.
    """
    cdef uint64_t mask = keys.shape[0] - 1
    cdef Py_ssize_t j, slot, n = hashes.shape[0]
    cdef int32_t n_new = 0
    with nogil:
        for j in range(n):
            slot = _find_slot(keys, mask, hashes[j])
            if keys[slot] == 0:
                keys[slot] = hashes[j]
                values[slot] = next_index + n_new
                new_positions[n_new] = <int32_t>j
                n_new += 1
            out[j] = values[slot]
    return n_new


def rehash(const uint64_t[::1] old_keys, const int32_t[::1] old_values,
           uint64_t[::1] keys, int32_t[::1] values):
    """Insert every entry of the old table into the (empty, larger) new one."""
    cdef uint64_t mask = keys.shape[0] - 1
    cdef Py_ssize_t i, slot
    with nogil:
        for i in range(old_keys.shape[0]):
            if old_keys[i] != 0:
                slot = _find_slot(keys, mask, old_keys[i])
                keys[slot] = old_keys[i]
                values[slot] = old_values[i]


def rehash_remap(const uint64_t[::1] old_keys, const int32_t[::1] old_values,
                 const int32_t[::1] remap, uint64_t[::1] keys, int32_t[::1] values):
    """Like ``rehash``, but renumbering features: old index ``i`` becomes
    ``remap[i]``, and entries whose ``remap`` is negative are dropped.
    ``len(remap)`` is the old vocabulary size: an old entry outside it raises
    ValueError (the entries before it are in the new table)."""
    cdef uint64_t mask = keys.shape[0] - 1
    cdef Py_ssize_t i, slot, n_old = remap.shape[0]
    cdef int32_t new_index
    cdef int bad = 0
    with nogil:
        for i in range(old_keys.shape[0]):
            if old_keys[i] != 0:
                if old_values[i] < 0 or old_values[i] >= n_old:
                    bad = 1
                    break
                new_index = remap[old_values[i]]
                if new_index >= 0:
                    slot = _find_slot(keys, mask, old_keys[i])
                    keys[slot] = old_keys[i]
                    values[slot] = new_index
    if bad:
        raise ValueError("a hash index entry is outside the old vocabulary")


def check_index(const uint64_t[::1] keys, const int32_t[::1] values, int64_t n_features):
    """Validate a hash index read from a file; returns the number of entries.

    Raises ValueError unless the capacity is a power of two with at least one
    empty slot (so probing always ends), and the occupied slots hold each
    feature index in [0, n_features) exactly once.  This is what keeps a
    crafted file from making a lookup loop forever or read out of bounds.
    """
    cdef Py_ssize_t cap = keys.shape[0], i, filled = 0
    cdef uint8_t *seen
    cdef int bad = 0
    if cap == 0 or (cap & (cap - 1)) != 0 or values.shape[0] != cap:
        raise ValueError("hash index capacity is not a power of two")
    if n_features < 0 or n_features >= cap:
        raise ValueError("hash index has no free slot for its vocabulary")
    seen = <uint8_t *>malloc(n_features + 1)
    if seen == NULL:
        raise MemoryError()
    with nogil:
        for i in range(n_features + 1):
            seen[i] = 0
        for i in range(cap):
            if keys[i] == 0:
                continue
            filled += 1
            if values[i] < 0 or values[i] >= n_features or seen[values[i]]:
                bad = 1
                break
            seen[values[i]] = 1
    free(seen)
    if bad:
        raise ValueError("hash index holds an out-of-range or repeated feature index")
    if filled != n_features:
        raise ValueError(f"hash index holds {filled} tokens, the vocabulary has {n_features}")
    return filled
