"""Compiled kernels of spamnb: scoring and counting over CSR word counts.

No numpy here: every argument is a typed memoryview, so any buffer works
(numpy arrays, ``array.array``, ``mmap``) and importing this module never
imports numpy.  The compiler directives (bounds checks off, ...) are in
setup.py.

Bounds checks are off, so every index is checked by hand before it is used:
the scoring and counting functions check ``indptr`` (starts at 0, ends within
``indices`` and ``data``, never decreases), each column index and each value
on their way through the data, stop at the first violation and return an
error code ``(code, position)`` instead of reading out of bounds.  Whatever
buffers they are given, they never read or write outside them (the output
shapes are checked too).  :func:`check_csr` does the same checks as a separate
pass, for callers that want validation without scoring.

A CSR matrix of ``n_rows`` rows is ``indptr`` (``n_rows + 1`` offsets),
``indices`` (column of each stored value) and ``data`` (the values).
``indptr`` and ``indices`` share one integer type (int32 or int64); ``data``
is float32 or float64.  Stored zeros are treated as absent everywhere, so a
zero count never multiplies a ``-inf`` log-probability into NaN.
"""

from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.math cimport INFINITY

ctypedef fused index_t:
    int32_t
    int64_t

ctypedef fused value_t:
    float
    double

# error codes of check_csr (mirrored in spamnb/bayes/kernels.py)
cdef enum:
    _OK = 0
    _BAD_INDPTR_START = 1     # indptr[0] != 0
    _INDPTR_DECREASING = 2    # indptr[r + 1] < indptr[r]; position = r
    _INDPTR_BEYOND_DATA = 3   # indptr[-1] > len(indices) or len(data)
    _COLUMN_OUT_OF_RANGE = 4  # indices[k] outside [0, n_columns); position = k
    _BAD_VALUE = 5            # data[k] negative, NaN or infinite; position = k
    _BAD_CLASS = 6            # row_class[r] outside [0, n_classes); position = r



cdef int _check_csr(const index_t[::1] indptr, const index_t[::1] indices,
                    const value_t[::1] data, int64_t n_columns,
                    int64_t* position) noexcept nogil:
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1
    cdef Py_ssize_t r, k
    cdef int64_t stop
    cdef value_t value
    if n_rows < 0 or indptr[0] != 0:
        position[0] = 0
        return _BAD_INDPTR_START
    for r in range(n_rows):
        if indptr[r + 1] < indptr[r]:
            position[0] = r
            return _INDPTR_DECREASING
    stop = indptr[n_rows]
    if stop > indices.shape[0] or stop > data.shape[0]:
        position[0] = n_rows
        return _INDPTR_BEYOND_DATA
    for k in range(stop):
        # one unsigned comparison covers both < 0 and >= n_columns
        if <uint64_t> indices[k] >= <uint64_t> n_columns:
            position[0] = k
            return _COLUMN_OUT_OF_RANGE
    for k in range(stop):
        value = data[k]
        # NaN fails every comparison, so "not (0 <= value < inf)" catches it
        if not (value >= 0 and value < INFINITY):
            position[0] = k
            return _BAD_VALUE
    position[0] = -1
    return _OK



def check_csr(const index_t[::1] indptr, const index_t[::1] indices,
              const value_t[::1] data, int64_t n_columns):
    """Validate a CSR matrix with ``n_columns`` columns: returns (code, position).

    ``code`` is 0 (``_OK``) when ``indptr`` starts at 0, never decreases,
    ends within ``indices`` and ``data``, every column index is in
    ``[0, n_columns)`` and every value is finite and >= 0; otherwise one of
    the codes above (their Python names are in ``spamnb.bayes.kernels``), with
    the offending row or non-zero in ``position``.
    """
    cdef int64_t position = -1
    cdef int code
    with nogil:
        code = _check_csr(indptr, indices, data, n_columns, &position)
    return code, position


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define SPAMNB_PREFETCH(p) __builtin_prefetch((p), 0, 1)
    #else
    #define SPAMNB_PREFETCH(p) ((void)(p))
    #endif
    """
    void SPAMNB_PREFETCH(const void* p) noexcept nogil

# How many non-zeros ahead the scoring loop prefetches the log-probabilities
# of the word it will need: the gathers, not the streaming of indices/data,
# bound this kernel (docs/kernel.md has the measurements).
cdef enum:
    PREFETCH_DISTANCE = 256
    # up to this many classes: two classes per pass over a row, in registers
    PAIRWISE_CLASSES = 6
    # more classes accumulate in a stack buffer of this size, or in ``out``
    LOCAL_CLASSES = 64


cdef int _jll(const index_t[::1] indptr, const index_t[::1] indices,
              const value_t[::1] data,
              const double[:, ::1] feature_log_prob_t,
              const double[::1] class_log_prior,
              double[:, ::1] out, int64_t n_columns,
              int64_t* position) noexcept nogil:
    # Up to PAIRWISE_CLASSES classes are scored two at a time in register
    # accumulators.  The pass for classes 0 and 1 streams the row's non-zeros
    # from memory, prefetches the table rows it will need, and checks each
    # column index and value right before using it (a compare per non-zero,
    # free next to the gather it guards), so bad input stops the loop with an
    # error code instead of reading out of bounds.  Classes 2-3, 4-5, ...
    # re-read the already checked row from L1 cache.  With more classes than
    # that, the one pass adds each non-zero into all classes' accumulators
    # (a local buffer, or the output row beyond LOCAL_CLASSES).
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1
    cdef Py_ssize_t n_classes = class_log_prior.shape[0]
    cdef Py_ssize_t nnz = indptr[n_rows]
    cdef Py_ssize_t second = 1 if n_classes > 1 else 0
    cdef bint pairwise = n_classes <= PAIRWISE_CLASSES
    cdef Py_ssize_t r, k, c, c2, start, stop, ahead
    cdef const double* logp
    cdef double acc0, acc1, x
    cdef double local[LOCAL_CLASSES]
    cdef double* acc = &local[0]
    cdef index_t j
    for r in range(n_rows):
        start = indptr[r]
        stop = indptr[r + 1]
        if stop < start or stop > nnz:
            position[0] = r
            return _INDPTR_DECREASING
        acc0 = 0.0
        acc1 = 0.0
        if not pairwise:
            if n_classes > LOCAL_CLASSES:
                acc = &out[r, 0]
            for c in range(n_classes):
                acc[c] = 0.0
        for k in range(start, stop):
            ahead = k + PREFETCH_DISTANCE
            if ahead < nnz and <uint64_t> indices[ahead] < <uint64_t> n_columns:
                logp = &feature_log_prob_t[indices[ahead], 0]
                SPAMNB_PREFETCH(logp)
                if n_classes > 2:   # the table row may span more cache lines
                    for c in range(8, n_classes, 8):
                        SPAMNB_PREFETCH(logp + c)
                    SPAMNB_PREFETCH(logp + n_classes - 1)
            j = indices[k]
            if <uint64_t> j >= <uint64_t> n_columns:
                position[0] = k
                return _COLUMN_OUT_OF_RANGE
            x = data[k]
            if x > 0 and x < INFINITY:
                logp = &feature_log_prob_t[j, 0]
                if pairwise:
                    acc0 += x * logp[0]
                    acc1 += x * logp[second]
                else:
                    for c in range(n_classes):
                        acc[c] += x * logp[c]
            elif x != 0:
                # negative, NaN or infinite; stored zeros are absent (skipping
                # them also keeps 0 * -inf from turning into NaN)
                position[0] = k
                return _BAD_VALUE
        if not pairwise:
            for c in range(n_classes):
                out[r, c] = class_log_prior[c] + acc[c]
            continue
        out[r, 0] = class_log_prior[0] + acc0
        out[r, second] = class_log_prior[second] + acc1
        c = 2
        while c < n_classes:
            c2 = c + 1 if c + 1 < n_classes else c   # an odd last class pairs with itself
            acc0 = 0.0
            acc1 = 0.0
            for k in range(start, stop):
                x = data[k]
                if x != 0:
                    logp = &feature_log_prob_t[indices[k], 0]
                    acc0 += x * logp[c]
                    acc1 += x * logp[c2]
            out[r, c] = class_log_prior[c] + acc0
            out[r, c2] = class_log_prior[c2] + acc1
            c += 2
    position[0] = -1
    return _OK


def joint_log_likelihood_csr(const index_t[::1] indptr, const index_t[::1] indices,
                             const value_t[::1] data,
                             const double[:, ::1] feature_log_prob_t,
                             const double[::1] class_log_prior,
                             double[:, ::1] out):
    """Write log P(c) + sum_k data[k] * log P(word indices[k] | c) into ``out``.

    ``feature_log_prob_t`` has shape (n_features, n_classes), C-contiguous (the
    transpose of the model's (n_classes, n_features) table, so the
    log-probabilities of one word for all classes are adjacent in memory);
    ``class_log_prior`` (n_classes,); ``out`` (n_rows, n_classes), written
    over.  Column indices must lie in [0, n_features) and values be finite
    and >= 0: they are checked on the way and the first violation is returned
    as ``(code, position)`` (``out`` is then incomplete); ``(0, -1)`` means
    success.  ``indptr`` itself is trusted: check it first (``check_csr`` or
    ``spamnb.bayes.kernels``), it sets the loop bounds.
    """
    cdef int64_t position = -1
    cdef int code
    if (out.shape[0] != indptr.shape[0] - 1
            or out.shape[1] != class_log_prior.shape[0]
            or feature_log_prob_t.shape[1] != class_log_prior.shape[0]
            or class_log_prior.shape[0] < 1):
        raise ValueError("joint_log_likelihood_csr: inconsistent shapes")
    if indptr.shape[0] < 1 or indptr[0] != 0 or indptr[indptr.shape[0] - 1] > indices.shape[0] \
            or indptr[indptr.shape[0] - 1] > data.shape[0]:
        raise ValueError("joint_log_likelihood_csr: indptr does not fit indices/data")
    with nogil:
        code = _jll(indptr, indices, data, feature_log_prob_t, class_log_prior,
                    out, feature_log_prob_t.shape[0], &position)
    return code, position


cdef int _count(const index_t[::1] indptr, const index_t[::1] indices,
                const value_t[::1] data, const int64_t[::1] row_class,
                const double[::1] row_weight, double[:, ::1] counts, int64_t* position) noexcept nogil:
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1
    cdef Py_ssize_t n_classes = counts.shape[0]
    cdef uint64_t n_columns = <uint64_t> counts.shape[1]
    cdef Py_ssize_t r, k
    cdef int64_t c
    cdef double w, x
    cdef index_t j
    cdef double* row_counts
    for r in range(n_rows):
        c = row_class[r]
        if <uint64_t> c >= <uint64_t> n_classes:
            position[0] = r
            return _BAD_CLASS
        w = row_weight[r]
        row_counts = &counts[c, 0]
        if indptr[r + 1] < indptr[r] or indptr[r + 1] > indptr[n_rows]:
            position[0] = r
            return _INDPTR_DECREASING
        for k in range(indptr[r], indptr[r + 1]):
            j = indices[k]
            if <uint64_t> j >= n_columns:
                position[0] = k
                return _COLUMN_OUT_OF_RANGE
            x = data[k]
            if x > 0 and x < INFINITY:
                row_counts[j] += w * x
            elif x != 0:
                position[0] = k
                return _BAD_VALUE
    position[0] = -1
    return _OK


def count_features_csr(const index_t[::1] indptr, const index_t[::1] indices,
                       const value_t[::1] data, const int64_t[::1] row_class,
                       const double[::1] row_weight, double[:, ::1] counts):
    """Add each row's weighted values into ``counts[row_class[row], column]``.

    ``row_class`` (n_rows,) holds class indices in [0, n_classes);
    ``row_weight`` (n_rows,) float64 multiplies the row's values; ``counts``
    (n_classes, n_columns) float64, C-contiguous, is added to.  Returns
    ``(code, position)`` like :func:`joint_log_likelihood_csr`; on error
    ``counts`` is partly updated, so pass a zeroed scratch array and add it
    when the code is 0.
    """
    cdef int64_t position = -1
    cdef int code
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1
    if n_rows < 0 or row_class.shape[0] != n_rows or row_weight.shape[0] != n_rows:
        raise ValueError("count_features_csr: inconsistent shapes")
    if indptr[0] != 0 or indptr[n_rows] > indices.shape[0] or indptr[n_rows] > data.shape[0]:
        raise ValueError("count_features_csr: indptr does not fit indices/data")
    with nogil:
        code = _count(indptr, indices, data, row_class, row_weight, counts, &position)
    return code, position
