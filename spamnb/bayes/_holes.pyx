"""Compiled helpers for forgetting in place (``spamnb.persistence.deltas``): the
tokens a forget leaves without a count leave the hash index, and stay in
the counts as holes until the model is next saved whole.

The hash index is ``_index.pxi``'s (in ``spamnb.bayes._score``): open addressing with linear
probing, ``keys`` (uint64, 0 = empty slot) and ``values`` (int32), of a
power-of-two capacity, a hash's slot its low bits.  A key is removed by
backward-shift deletion (the entries after it in its run move back when
their home slot allows), so the table stays one that ``_index``'s lookups
read as if the key had never been inserted: no tombstones.

Nothing here imports numpy.
"""

from libc.stdint cimport int32_t, uint8_t, uint64_t


def zero_counts(const int32_t[::1] idx, const double[::1] base, const double[::1] tail, uint8_t[::1] zero):
    """``zero[j] = zero[j] and count(idx[j]) == 0`` for one class's counts held
    in ``base`` (feature ``i < len(base)``) and ``tail`` (feature ``i -
    len(base)``); indices out of range or negative clear ``zero[j]``."""
    cdef Py_ssize_t j, n = idx.shape[0], n_base = base.shape[0], n_tail = tail.shape[0]
    cdef int32_t i
    cdef double count
    if zero.shape[0] != n:
        raise ValueError("zero and idx differ in length")
    with nogil:
        for j in range(n):
            if not zero[j]:
                continue
            i = idx[j]
            if i < 0 or i >= n_base + n_tail:
                zero[j] = 0
                continue
            count = base[i] if i < n_base else tail[i - n_base]
            if count != 0.0:
                zero[j] = 0


def remove(uint64_t[::1] keys, int32_t[::1] values, const uint64_t[::1] hashes, const uint8_t[::1] which):
    """Remove ``hashes[j]`` from the hash index for each ``j`` where
    ``which[j]`` (a hash not there, or there twice, is removed once).
    Returns the number of keys removed."""
    cdef uint64_t mask, h, home
    cdef Py_ssize_t j, n = hashes.shape[0], removed = 0
    cdef uint64_t i, k
    if which.shape[0] != n:
        raise ValueError("which and hashes differ in length")
    if keys.shape[0] == 0 or (keys.shape[0] & (keys.shape[0] - 1)) != 0 or values.shape[0] != keys.shape[0]:
        raise ValueError("hash index capacity is not a power of two")
    mask = keys.shape[0] - 1
    with nogil:
        for j in range(n):
            if not which[j]:
                continue
            h = hashes[j]
            i = h & mask
            while keys[i] != 0 and keys[i] != h:
                i = (i + 1) & mask
            if keys[i] == 0:
                continue
            k = i
            while True:
                k = (k + 1) & mask
                if keys[k] == 0:
                    break
                home = keys[k] & mask
                # the entry at k stays when its home lies cyclically in (i, k]
                if (i < k and i < home and home <= k) or (i > k and (home > i or home <= k)):
                    continue
                keys[i] = keys[k]
                values[i] = values[k]
                i = k
            keys[i] = 0
            values[i] = 0
            removed += 1
    return removed


def any_unused(const double[::1] flat, Py_ssize_t n_classes):
    """True when some feature of the class-major counts ``flat`` (``n_classes``
    rows) has no count above 0 in any class."""
    cdef Py_ssize_t c, i, n
    cdef bint used, found = False
    if n_classes < 1 or flat.shape[0] % n_classes:
        raise ValueError("the counts do not split into the classes")
    n = flat.shape[0] // n_classes
    with nogil:
        for i in range(n):
            used = False
            for c in range(n_classes):
                if flat[c * n + i] > 0.0:
                    used = True
                    break
            if not used:
                found = True
                break
    return found
