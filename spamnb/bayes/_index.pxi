# The vocabulary's hash index: open addressing with linear probing.
# Included in spamnb.bayes._score (a cold ``spamnb classify`` builds a small
# index of its message's entries: one compiled module to load, not two).
#
# ``keys`` (uint64, 0 = empty slot) and ``values`` (int32 feature index), both
# of a power-of-two ``capacity``, kept at most half full.  Token hashes are
# already well mixed 64-bit values (never 0), so the slot is their low bits.
# The probe, ``_find_slot``, is in ``_index.pxd`` (the scorer uses it too).
# Nothing here imports numpy; the buffers are taken with
# ``spamnb/buffers.pxd``; callers go through ``spamnb.bayes.token_kernels``,
# which checks shapes first.

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc

from spamnb.buffers cimport SIGNED, UNSIGNED, length_of, release, take

# the item types the buffers are taken as
cdef enum:
    _KEYS = 0      # uint64, read
    _KEYS_W = 1    # uint64, written
    _INDEX = 2     # int32, read
    _INDEX_W = 3   # int32, written


cdef int _take(Py_buffer *views, int *held, object obj, int what) except -1:
    if what == _KEYS or what == _KEYS_W:
        take(&views[held[0]], obj, UNSIGNED, 8, what == _KEYS_W, "uint64_t")
    else:
        take(&views[held[0]], obj, SIGNED, 4, what == _INDEX_W, "int32_t")
    held[0] += 1
    return 0


def lookup(keys, values, hashes, out):
    """Feature index of each hash (-1 when unknown): ``out[j]`` for ``hashes[j]``.

    Returns the number of known hashes.  ``len(out) == len(hashes)``.
    """
    cdef Py_buffer v[4]
    cdef int held = 0
    try:
        _take(v, &held, keys, _KEYS)
        _take(v, &held, values, _INDEX)
        _take(v, &held, hashes, _KEYS)
        _take(v, &held, out, _INDEX_W)
        return _lookup(<const uint64_t *>v[0].buf, length_of(&v[0]), <const int32_t *>v[1].buf,
                       <const uint64_t *>v[2].buf, length_of(&v[2]), <int32_t *>v[3].buf)
    finally:
        release(v, held)


cdef Py_ssize_t _lookup(const uint64_t *keys, Py_ssize_t capacity, const int32_t *values,
                        const uint64_t *hashes, Py_ssize_t n, int32_t *out) noexcept:
    cdef uint64_t mask = capacity - 1
    cdef Py_ssize_t j, slot, known = 0
    with nogil:
        for j in range(n):
            slot = _find_slot(keys, mask, hashes[j])
            if keys[slot] == 0 or keys[slot] != hashes[j]:
                out[j] = -1
            else:
                out[j] = values[slot]
                known += 1
    return known


def insert(keys, values, hashes, out, int32_t next_index, new_positions):
    """Look up each hash, giving unknown ones the next free feature index.

    ``out[j]`` receives the index of ``hashes[j]``; the positions ``j`` of first
    occurrences of new hashes are written to ``new_positions`` (same length as
    ``hashes``).  The caller guarantees the table stays at most half full.
    Returns the number of new hashes.
    """
    cdef Py_buffer v[5]
    cdef int held = 0
    try:
        _take(v, &held, keys, _KEYS_W)
        _take(v, &held, values, _INDEX_W)
        _take(v, &held, hashes, _KEYS)
        _take(v, &held, out, _INDEX_W)
        _take(v, &held, new_positions, _INDEX_W)
        return _insert(<uint64_t *>v[0].buf, length_of(&v[0]), <int32_t *>v[1].buf, <const uint64_t *>v[2].buf,
                       length_of(&v[2]), <int32_t *>v[3].buf, next_index, <int32_t *>v[4].buf)
    finally:
        release(v, held)


cdef int32_t _insert(uint64_t *keys, Py_ssize_t capacity, int32_t *values, const uint64_t *hashes, Py_ssize_t n,
                     int32_t *out, int32_t next_index, int32_t *new_positions) noexcept:
    cdef uint64_t mask = capacity - 1
    cdef Py_ssize_t j, slot
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


def rehash(old_keys, old_values, keys, values):
    """Insert every entry of the old table into the (empty, larger) new one."""
    cdef Py_buffer v[4]
    cdef int held = 0
    try:
        _take(v, &held, old_keys, _KEYS)
        _take(v, &held, old_values, _INDEX)
        _take(v, &held, keys, _KEYS_W)
        _take(v, &held, values, _INDEX_W)
        _rehash(<const uint64_t *>v[0].buf, length_of(&v[0]), <const int32_t *>v[1].buf, <uint64_t *>v[2].buf,
                length_of(&v[2]), <int32_t *>v[3].buf)
    finally:
        release(v, held)


cdef void _rehash(const uint64_t *old_keys, Py_ssize_t n_old, const int32_t *old_values, uint64_t *keys,
                  Py_ssize_t capacity, int32_t *values) noexcept:
    cdef uint64_t mask = capacity - 1
    cdef Py_ssize_t i, slot
    with nogil:
        for i in range(n_old):
            if old_keys[i] != 0:
                slot = _find_slot(keys, mask, old_keys[i])
                keys[slot] = old_keys[i]
                values[slot] = old_values[i]


def rehash_remap(old_keys, old_values, remap, keys, values):
    """Like ``rehash``, but renumbering features: old index ``i`` becomes
    ``remap[i]``, and entries whose ``remap`` is negative are dropped.
    ``len(remap)`` is the old vocabulary size: an old entry outside it raises
    ValueError (the entries before it are in the new table)."""
    cdef Py_buffer v[5]
    cdef int held = 0
    try:
        _take(v, &held, old_keys, _KEYS)
        _take(v, &held, old_values, _INDEX)
        _take(v, &held, remap, _INDEX)
        _take(v, &held, keys, _KEYS_W)
        _take(v, &held, values, _INDEX_W)
        _rehash_remap(<const uint64_t *>v[0].buf, length_of(&v[0]), <const int32_t *>v[1].buf,
                      <const int32_t *>v[2].buf, length_of(&v[2]), <uint64_t *>v[3].buf, length_of(&v[3]),
                      <int32_t *>v[4].buf)
    finally:
        release(v, held)


cdef int _rehash_remap(const uint64_t *old_keys, Py_ssize_t n_keys, const int32_t *old_values, const int32_t *remap,
                       Py_ssize_t n_old, uint64_t *keys, Py_ssize_t capacity, int32_t *values) except -1:
    cdef uint64_t mask = capacity - 1
    cdef Py_ssize_t i, slot
    cdef int32_t new_index
    cdef int bad = 0
    with nogil:
        for i in range(n_keys):
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
    return 0


def check_index(keys, values, int64_t n_features):
    """Validate a hash index read from a file; returns the number of entries.

    Raises ValueError unless the capacity is a power of two with at least one
    empty slot (so probing always ends), and the occupied slots hold each
    feature index in [0, n_features) exactly once.  This is what keeps a
    crafted file from making a lookup loop forever or read out of bounds.
    """
    cdef Py_buffer v[2]
    cdef int held = 0
    try:
        _take(v, &held, keys, _KEYS)
        _take(v, &held, values, _INDEX)
        return _check_index(<const uint64_t *>v[0].buf, length_of(&v[0]), <const int32_t *>v[1].buf,
                            length_of(&v[1]), n_features)
    finally:
        release(v, held)


cdef Py_ssize_t _check_index(const uint64_t *keys, Py_ssize_t cap, const int32_t *values, Py_ssize_t n_values,
                             int64_t n_features) except -1:
    cdef Py_ssize_t i, filled = 0
    cdef uint8_t *seen
    cdef int bad = 0
    if cap == 0 or (cap & (cap - 1)) != 0 or n_values != cap:
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
