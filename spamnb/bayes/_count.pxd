"""The counting primitives ``_count`` and the single-message scorer (``_score``) share."""

from libc.math cimport sqrt
from libc.stdint cimport int32_t


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


cdef Py_ssize_t count_distinct(const int32_t *idx, Py_ssize_t n, int32_t *uniq, double *x, int counts,
                               int32_t *table, Py_ssize_t cap) noexcept nogil


cdef inline void scale_to_length(double *x, Py_ssize_t m, double length) noexcept nogil:
    """Scale ``x[:m]`` to Euclidean length ``length`` (length normalisation, Rennie
    et al. 2003); nothing when ``length`` <= 0 or ``x`` is all zero."""
    cdef Py_ssize_t j
    cdef double s = 0.0
    if length <= 0.0:
        return
    for j in range(m):
        s += x[j] * x[j]
    if s > 0.0:
        s = length / sqrt(s)
        for j in range(m):
            x[j] *= s
