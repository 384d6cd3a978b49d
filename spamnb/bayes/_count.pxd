"""The counting primitives ``_count`` and the single-message scorer (``_score``) share.

Only inline functions and constants: ``_score`` cimports them without
loading ``_count`` (training's and learning's counting, typed memoryviews).
"""

from libc.math cimport log1p, sqrt
from libc.stdint cimport int32_t, uint32_t


cdef enum:
    TRANSFORM_RAW = 0
    TRANSFORM_BINARY = 1
    TRANSFORM_LOG = 2


cdef inline Py_ssize_t table_size(Py_ssize_t n) noexcept nogil:
    """Slots of the counting table for ``n`` occurrences: a power of two >= 2n, at least 16."""
    cdef Py_ssize_t cap = 16
    while cap < 2 * n:
        cap <<= 1
    return cap


cdef inline double transform(double count, int counts, const double *log1p_small) noexcept nogil:
    """A token's value from its count in a message: ``counts`` a TRANSFORM_*;
    ``log1p_small[k]`` is ``log1p(k)`` for k < 64 (a table look-up is ~20x
    cheaper than the call), filled by each module that uses this."""
    if counts == TRANSFORM_BINARY:
        return 1.0
    if counts == TRANSFORM_LOG:
        if count < 64.0:
            return log1p_small[<int>count]
        return log1p(count)
    return count


cdef inline Py_ssize_t count_distinct(const int32_t *idx, Py_ssize_t n, int32_t *uniq, double *x, int counts,
                                      int32_t *table, Py_ssize_t cap, const double *log1p_small) noexcept nogil:
    """Distinct non-negative indices of ``idx[:n]`` in order of first occurrence,
    with transformed counts (as ``_count_row``, unsorted).

    ``uniq`` and ``x`` have room for ``n`` entries; ``table`` is scratch for
    ``2 * cap`` entries, ``cap = table_size(n)``; ``log1p_small`` the caller's
    table of ``log1p(k)``, k < 64 (``transform``).  Returns how many were written.
    """
    cdef Py_ssize_t j, m = 0
    cdef uint32_t mask = <uint32_t>(cap - 1), h
    cdef int32_t i
    cdef int32_t *where = table + cap
    for j in range(cap):
        table[j] = -1
    for j in range(n):
        i = idx[j]
        if i < 0:
            continue
        h = <uint32_t>i * 2654435769U
        h = (h ^ (h >> 16)) & mask
        while table[h] != -1 and table[h] != i:
            h = (h + 1) & mask
        if table[h] == -1:
            table[h] = i
            where[h] = <int32_t>m
            uniq[m] = i
            x[m] = 1.0
            m += 1
        else:
            x[where[h]] += 1.0
    for j in range(m):
        x[j] = transform(x[j], counts, log1p_small)
    return m


cdef inline double length_scale(const double *x, Py_ssize_t m, double length) noexcept nogil:
    """The factor :func:`scale_to_length` multiplies ``x[:m]`` by: ``length`` over
    their Euclidean length; 1.0 (nothing done) when ``length`` <= 0 or ``x`` is
    all zero.  A journal's learn records it (``spamnb.persistence.deltas``)."""
    cdef Py_ssize_t j
    cdef double s = 0.0
    if length <= 0.0:
        return 1.0
    for j in range(m):
        s += x[j] * x[j]
    if s > 0.0:
        return length / sqrt(s)
    return 1.0


cdef inline void scale_to_length(double *x, Py_ssize_t m, double length) noexcept nogil:
    """Scale ``x[:m]`` to Euclidean length ``length`` (length normalisation, Rennie
    et al. 2003); nothing when ``length`` <= 0 or ``x`` is all zero."""
    cdef Py_ssize_t j
    cdef double s = length_scale(x, m, length)
    if s != 1.0:   # x * 1.0 is x: the same values either way
        for j in range(m):
            x[j] *= s
