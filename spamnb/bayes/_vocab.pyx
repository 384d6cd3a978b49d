"""Compiled helpers for the vocabulary, counting and single-message scoring.

(The model file's checksum and checks are in ``_checks``.)

Nothing here imports numpy: every array is a typed memoryview over any buffer
(``array.array``, a model file's bytes, numpy), so a model file is
used by ``spamnb classify`` without numpy being imported.

The vocabulary's hash index (open addressing with linear probing) is in
``_index``: its functions are importable from here too, and its probe is
cimported from ``_index.pxd``.

Callers validate shapes and bounds first (bounds checks are off); the
functions here trust their arguments except where a docstring says otherwise.
"""

from cpython cimport array
from libc.math cimport INFINITY, log, log1p, fabs, sqrt
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, qsort
from libc.string cimport memcpy

import array

cdef extern from *:
    """
    #define _spamnb_prefetch(p) __builtin_prefetch((const void *)(p))
    """
    void _prefetch "_spamnb_prefetch"(const void *p) noexcept nogil

cdef enum:
    _RAW = 0
    _BINARY = 1
    _LOG = 2

COUNTS_RAW = _RAW          # x_i = count of token i in the message
COUNTS_BINARY = _BINARY    # x_i = 1 if token i occurs
COUNTS_LOG = _LOG          # x_i = log(1 + count)


# --------------------------------------------------------------------------
# hash index: spamnb.bayes._index (lookup, insert, rehash, check_index), _find_slot from its .pxd
# --------------------------------------------------------------------------
from spamnb.bayes._index cimport _find_slot
from spamnb.bayes._index import check_index, insert, lookup, rehash, rehash_remap


# --------------------------------------------------------------------------
# counting the features of one message
# --------------------------------------------------------------------------
# Sorting a message's feature indices (CSR rows: ``transform``, ``learn``; fit
# and single-message scoring count without sorting, see _count_distinct).  With
# qsort and a comparison callback, CSRBuilder.add_row took 10.9 us per corpus
# message (~174 tokens); with this introsort, comparisons inlined, 6.5 us
# (quicksort, median of three, insertion sort for short runs, heapsort when the
# depth runs out, so hostile input stays O(n log n)).
cdef inline void _insertion_sort(int32_t *a, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef int32_t v
    for i in range(1, n):
        v = a[i]
        j = i
        while j > 0 and a[j - 1] > v:
            a[j] = a[j - 1]
            j -= 1
        a[j] = v


cdef void _heap_sort(int32_t *a, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t start, end, root, child
    cdef int32_t t
    start = n // 2
    end = n
    while end > 1:
        if start > 0:
            start -= 1
        else:
            end -= 1
            t = a[0]
            a[0] = a[end]
            a[end] = t
        root = start
        while 2 * root + 1 < end:
            child = 2 * root + 1
            if child + 1 < end and a[child] < a[child + 1]:
                child += 1
            if a[root] < a[child]:
                t = a[root]
                a[root] = a[child]
                a[child] = t
                root = child
            else:
                break


cdef void _sort_int32(int32_t *a, Py_ssize_t n, int depth) noexcept nogil:
    """Sort ``a[:n]`` ascending; ``depth``: how many partitioning levels are left."""
    cdef Py_ssize_t i, j, mid
    cdef int32_t pivot, t
    while n > 16:
        if depth <= 0:
            _heap_sort(a, n)
            return
        depth -= 1
        mid = n // 2                      # median of a[0], a[mid], a[n-1] into a[0]
        if a[mid] < a[0]:
            t = a[mid]; a[mid] = a[0]; a[0] = t
        if a[n - 1] < a[0]:
            t = a[n - 1]; a[n - 1] = a[0]; a[0] = t
        if a[n - 1] < a[mid]:
            t = a[n - 1]; a[n - 1] = a[mid]; a[mid] = t
        t = a[mid]; a[mid] = a[0]; a[0] = t
        pivot = a[0]
        i = -1                            # Hoare partition: a[:j+1] <= pivot <= a[j+1:]
        j = n
        while True:
            i += 1
            while a[i] < pivot:
                i += 1
            j -= 1
            while a[j] > pivot:
                j -= 1
            if i >= j:
                break
            t = a[i]; a[i] = a[j]; a[j] = t
        if j + 1 < n - j - 1:             # recurse into the smaller side, loop on the larger
            _sort_int32(a, j + 1, depth)
            a += j + 1
            n -= j + 1
        else:
            _sort_int32(a + j + 1, n - j - 1, depth)
            n = j + 1
    _insertion_sort(a, n)


cdef inline int _depth_limit(Py_ssize_t n) noexcept nogil:
    cdef int depth = 0
    while n > 1:
        n >>= 1
        depth += 2
    return depth


def sort_int32(int32_t[::1] values):
    """Sort ``values`` in place (ascending) with the kernel's sort; for tests."""
    if values.shape[0] > 1:
        with nogil:
            _sort_int32(&values[0], values.shape[0], _depth_limit(values.shape[0]))


# log1p of the small counts, from the same log1p: most tokens occur once or
# twice in a message, and a table look-up is ~20x cheaper than the call.
cdef double _LOG1P_SMALL[64]
for _k in range(64):
    _LOG1P_SMALL[_k] = log1p(<double>_k)


cdef inline double _transform(double count, int counts) noexcept nogil:
    if counts == _BINARY:
        return 1.0
    if counts == _LOG:
        if count < 64.0:
            return _LOG1P_SMALL[<int>count]
        return log1p(count)
    return count


cdef Py_ssize_t _count_row(const int32_t *idx, Py_ssize_t n, int32_t *uniq, double *x, int counts) noexcept nogil:
    """Sorted distinct non-negative indices of ``idx[:n]`` with transformed counts.

    ``uniq`` and ``x`` have room for ``n`` entries; returns how many were
    written.  Negative entries (unknown tokens) are dropped.
    """
    cdef Py_ssize_t j, m = 0, k = 0
    for j in range(n):
        if idx[j] >= 0:
            uniq[m] = idx[j]
            m += 1
    if m == 0:
        return 0
    _sort_int32(uniq, m, _depth_limit(m))
    x[0] = 1.0
    for j in range(1, m):
        if uniq[j] == uniq[k]:
            x[k] += 1.0
        else:
            k += 1
            uniq[k] = uniq[j]
            x[k] = 1.0
    k += 1
    for j in range(k):
        x[j] = _transform(x[j], counts)
    return k


# Counting a message's features without sorting them.  Fitting and scoring
# need each distinct feature's count, not their order: a small hash table
# (Fibonacci hashing of the index, linear probing, at most half full) finds
# them in one pass, in order of first occurrence.  Per corpus message: sorting
# its ~174 indices took 4.1 us; add_counts went from 5.5 to 1.6 us and the
# single-message Scorer from 6.6 to 3.3 us.
cdef inline Py_ssize_t _table_size(Py_ssize_t n) noexcept nogil:
    """Slots of the counting table for ``n`` occurrences: a power of two >= 2n, at least 16."""
    cdef Py_ssize_t cap = 16
    while cap < 2 * n:
        cap <<= 1
    return cap


cdef Py_ssize_t _count_distinct(const int32_t *idx, Py_ssize_t n, int32_t *uniq, double *x, int counts,
                                int32_t *table, Py_ssize_t cap) noexcept nogil:
    """Distinct non-negative indices of ``idx[:n]`` in order of first occurrence,
    with transformed counts (as ``_count_row``, unsorted).

    ``uniq`` and ``x`` have room for ``n`` entries; ``table`` is scratch for
    ``2 * cap`` entries, ``cap = _table_size(n)``.  Returns how many were written.
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
        x[j] = _transform(x[j], counts)
    return m


cdef inline void _scale_to_length(double *x, Py_ssize_t m, double length) noexcept nogil:
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


cdef int _buffers(Py_ssize_t n_uniq, Py_ssize_t n_x, int32_t **uniq, double **x) except -1:
    """``n_uniq`` int32 and ``n_x`` doubles in two new buffers the caller frees
    (MemoryError, and neither kept, when either cannot be had)."""
    uniq[0] = <int32_t *>malloc(n_uniq * sizeof(int32_t))
    x[0] = <double *>malloc(n_x * sizeof(double))
    if uniq[0] == NULL or x[0] == NULL:
        free(uniq[0])
        free(x[0])
        uniq[0], x[0] = NULL, NULL
        raise MemoryError()
    return 0


cdef class CSRBuilder:
    """Accumulates message rows into CSR arrays (no numpy).

    ``add_row(indices)`` takes the feature index of each token occurrence
    (``-1`` for unknown tokens, dropped) and appends one row of counts,
    transformed by ``counts`` (COUNTS_RAW, COUNTS_BINARY or COUNTS_LOG), then
    scaled to Euclidean length ``length`` when it is > 0.
    ``indptr`` (int64), ``indices`` (int32) and ``data`` (float64) are
    ``array.array`` objects, ready for ``scipy.sparse.csr_matrix``.
    """
    cdef public array.array indptr
    cdef public array.array indices
    cdef public array.array data
    cdef int counts
    cdef double length

    def __init__(self, int counts=_RAW, double length=0.0):
        if counts not in (_RAW, _BINARY, _LOG):
            raise ValueError(f"unknown counts transform {counts}")
        self.counts = counts
        self.length = length
        self.indptr = array.array("q", [0])
        self.indices = array.array("i")
        self.data = array.array("d")

    def add_row(self, const int32_t[::1] idx):
        cdef Py_ssize_t n = idx.shape[0], k, start = len(self.indices)
        cdef int32_t *uniq
        cdef double *x
        if n:
            _buffers(n, n, &uniq, &x)
            with nogil:
                k = _count_row(&idx[0], n, uniq, x, self.counts)
                _scale_to_length(x, k, self.length)
            array.resize_smart(self.indices, start + k)
            array.resize_smart(self.data, start + k)
            memcpy(self.indices.data.as_ints + start, uniq, k * sizeof(int32_t))
            memcpy(self.data.data.as_doubles + start, x, k * sizeof(double))
            free(uniq)
            free(x)
        self.indptr.append(len(self.indices))

    @property
    def n_rows(self):
        return len(self.indptr) - 1


def add_counts(const int32_t[::1] idx, double[::1] target, int counts, double sign=1.0, double length=0.0):
    """Add (or, with ``sign`` -1, subtract) one message's transformed token
    counts to (from) one class's counts.

    ``idx`` holds the feature index of each token occurrence (``-1``: unknown,
    skipped); ``target[i] += sign * x_i`` for each distinct index ``i``, with
    ``x_i`` the count transformed by ``counts`` and scaled to Euclidean length
    ``length`` when it is > 0 (as ``CSRBuilder.add_row``).
    Raises ValueError, changing nothing, when an index is ``>= len(target)``
    or a count would become negative (by more than 1e-9 of itself: rounding
    of the log transform), which means the message was not learned; a count
    that ends within that tolerance below zero is set to 0.
    Returns the number of distinct indices.
    """
    return _add(idx, &target[0] if target.shape[0] else NULL, target.shape[0], NULL, 0, counts, sign, length,
                NULL, NULL, 0.0)[0]


cdef Py_ssize_t _distinct_counts(const int32_t[::1] idx, int counts, double length, int32_t **uniq_out,
                                 double **x_out, int32_t *largest) except -1:
    """The distinct indices of ``idx`` and their counts (``counts`` transform,
    scaled to ``length``) in two new buffers the caller frees (``*uniq_out``,
    ``*x_out``; NULL when ``idx`` is empty), and the largest index (-1:
    none).  Returns their number."""
    cdef Py_ssize_t n = idx.shape[0], k, j, cap
    cdef int32_t *uniq
    cdef double *x
    cdef int32_t big = -1
    uniq_out[0], x_out[0], largest[0] = NULL, NULL, -1
    if counts not in (_RAW, _BINARY, _LOG):
        raise ValueError(f"unknown counts transform {counts}")
    if n == 0:
        return 0
    cap = _table_size(n)
    _buffers(n + 2 * cap, n, &uniq, &x)   # uniq, then the counting table
    with nogil:
        k = _count_distinct(&idx[0], n, uniq, x, counts, uniq + n, cap)
        _scale_to_length(x, k, length)
        for j in range(k):
            if uniq[j] > big:
                big = uniq[j]
    uniq_out[0], x_out[0], largest[0] = uniq, x, big
    return k


def add_counts_twice(const int32_t[::1] idx, double[::1] first, double[::1] second, int counts,
                     double length=0.0):
    """``add_counts(idx, first, counts, 1.0, length)`` and the same into
    ``second``, the message counted once: the same values added to both (a
    class's counts and its cross-validation fold's).  Raises ValueError,
    changing nothing, when an index is out of range of either.  Returns the
    number of distinct indices."""
    cdef Py_ssize_t k, j
    cdef int32_t *uniq
    cdef double *x
    cdef int32_t largest
    k = _distinct_counts(idx, counts, length, &uniq, &x, &largest)
    if k == 0:
        return 0
    with nogil:
        if largest >= first.shape[0] or largest >= second.shape[0]:
            k = -1
        else:
            for j in range(k):
                first[uniq[j]] += x[j]
                second[uniq[j]] += x[j]
    free(uniq)
    free(x)
    if k == -1:
        raise ValueError(f"feature index out of range for {min(first.shape[0], second.shape[0])} counts")
    return k


def add_counts_split(const int32_t[::1] idx, double[::1] base, double[::1] tail, int counts, double sign,
                     double length, double[::1] log_base, double[::1] log_tail, double alpha):
    """``add_counts`` over one class's counts held in two buffers (feature ``i``
    in ``base[i]`` when ``i < len(base)``, else in ``tail[i - len(base)]``: a
    model file's row patched in place, and the tokens new since), setting
    log(count + alpha) of each count it changes in ``log_base``/``log_tail``
    (as long as their counts).  Returns ``(distinct indices, the sum of the
    changes)``: the class total's change.  Raises ValueError as ``add_counts``."""
    if log_base.shape[0] != base.shape[0] or log_tail.shape[0] != tail.shape[0]:
        raise ValueError("the logs and the counts differ in length")
    return _add(idx, &base[0] if base.shape[0] else NULL, base.shape[0], &tail[0] if tail.shape[0] else NULL,
                tail.shape[0], counts, sign, length, &log_base[0] if base.shape[0] else NULL,
                &log_tail[0] if tail.shape[0] else NULL, alpha)


cdef inline double *_at(double *base, Py_ssize_t n_base, double *tail, int32_t i) noexcept nogil:
    return base + i if i < n_base else tail + (i - n_base)


cdef tuple _add(const int32_t[::1] idx, double *base, Py_ssize_t n_base, double *tail, Py_ssize_t n_tail,
                int counts, double sign, double length, double *log_base, double *log_tail, double alpha):
    cdef Py_ssize_t k = 0, j
    cdef int32_t *uniq
    cdef double *x
    cdef double *t
    cdef int32_t largest
    cdef double new, total = 0.0
    cdef bint logs = log_base != NULL or log_tail != NULL
    if counts not in (_RAW, _BINARY, _LOG):
        raise ValueError(f"unknown counts transform {counts}")
    if sign != 1.0 and sign != -1.0:
        raise ValueError("sign must be 1 or -1")
    k = _distinct_counts(idx, counts, length, &uniq, &x, &largest)
    if k == 0:
        return 0, 0.0
    with nogil:
        if largest >= n_base + n_tail:
            k = -1
        elif sign < 0:
            for j in range(k):
                t = _at(base, n_base, tail, uniq[j])
                if t[0] - x[j] < -1e-9 * (t[0] if t[0] > 1.0 else 1.0):
                    k = -2
                    break
            if k >= 0:
                for j in range(k):
                    t = _at(base, n_base, tail, uniq[j])
                    new = t[0] - x[j]
                    new = new if new > 0.0 else 0.0
                    total += new - t[0]
                    t[0] = new
        else:
            for j in range(k):
                t = _at(base, n_base, tail, uniq[j])
                t[0] += x[j]
                total += x[j]
        if logs:
            for j in range(k):
                _at(log_base, n_base, log_tail, uniq[j])[0] = log(_at(base, n_base, tail, uniq[j])[0] + alpha)
    free(uniq)
    free(x)
    if k == -1:
        raise ValueError(f"feature index out of range for {n_base + n_tail} counts")
    if k == -2:
        raise ValueError("a token count would become negative: the message was not learned as that class")
    return k, total


# --------------------------------------------------------------------------
# scoring one message
# --------------------------------------------------------------------------
cdef inline bint _ranks_before(double w, int32_t i, double other_w, int32_t other_i) noexcept nogil:
    """Evidence order: larger |weight| first, then the smaller feature index."""
    return fabs(w) > fabs(other_w) or (fabs(w) == fabs(other_w) and i < other_i)


cdef inline double _log_at(const double *base, Py_ssize_t n_base, const double *tail, Py_ssize_t n_tail,
                           Py_ssize_t c, int32_t i) noexcept nogil:
    """log(N_ci + alpha): from the model's flat logs, or from the tail of the tokens new since."""
    return base[c * n_base + i] if i < n_base else tail[c * n_tail + i - n_base]


# What the scorer says of a hash index entry or a log-count no model is written
# with (a damaged file mapped without its full check: spamnb.model.store.map_model).
_DAMAGED = "the model file is damaged (a token's entry is out of range; spamnb info --check checks it whole)"


cdef class Scorer:
    """Joint log-likelihood of one message for every class, over one model.

    ``keys``/``values`` the vocabulary's hash index; ``log_count`` the
    flattened (n_classes, n_features) C-order matrix of log(N_ci + alpha);
    ``log_norm`` and ``log_prior`` sequences of n_classes floats,
    ``log_norm[c] = log(N_c + alpha * n_features)``, so log theta_ci =
    log_count[c, i] - log_norm[c]; ``counts`` the transform of a token's count
    (COUNTS_RAW, COUNTS_BINARY or COUNTS_LOG); ``length`` > 0 scales the
    message's known tokens' values to that Euclidean length (as
    ``CSRBuilder``; tokens the model does not know take no part); ``tail``: the
    flattened (n_classes, n_features - n_base) logs of the features from n_base
    on, when ``log_count`` holds only the first n_base (a model file's logs
    patched in place, and the tokens a journal added).  The buffers are taken once
    here, so scoring a message costs no buffer set-up (the ``spamnb
    classify`` and ``SpamFilter.score`` path).
    """
    cdef const uint64_t[::1] keys
    cdef const int32_t[::1] values
    cdef const double[::1] log_count
    cdef const double[::1] tail
    cdef Py_ssize_t n_features, n_classes, n_base
    cdef double *norm
    cdef double *prior
    cdef int counts
    cdef double length

    def __cinit__(self):
        self.norm = NULL
        self.prior = NULL

    def __init__(self, const uint64_t[::1] keys, const int32_t[::1] values, const double[::1] log_count,
                 Py_ssize_t n_features, log_norm, log_prior, int counts, double length=0.0,
                 const double[::1] tail=None):
        cdef Py_ssize_t c, n_classes = len(log_prior)
        cdef Py_ssize_t n_base = log_count.shape[0] // n_classes if n_classes > 0 else 0
        if keys.shape[0] == 0 or (keys.shape[0] & (keys.shape[0] - 1)) != 0 or values.shape[0] != keys.shape[0]:
            raise ValueError("hash index capacity is not a power of two")
        if tail is None:
            n_base = n_features
        if (n_classes < 1 or len(log_norm) != n_classes or not 0 <= n_base <= n_features
                or log_count.shape[0] != n_classes * n_base
                or (tail is not None and tail.shape[0] != n_classes * (n_features - n_base))):
            raise ValueError("log_norm, log_prior and log_count disagree on the number of classes")
        if counts not in (_RAW, _BINARY, _LOG):
            raise ValueError(f"unknown counts transform {counts}")
        self.norm = <double *>malloc(n_classes * sizeof(double))
        self.prior = <double *>malloc(n_classes * sizeof(double))
        if self.norm == NULL or self.prior == NULL:
            raise MemoryError()
        for c in range(n_classes):
            self.norm[c] = log_norm[c]
            self.prior[c] = log_prior[c]
        self.keys, self.values, self.log_count, self.tail = keys, values, log_count, tail
        self.n_features, self.n_classes, self.counts, self.n_base = n_features, n_classes, counts, n_base
        self.length = length

    def __dealloc__(self):
        free(self.norm)
        free(self.prior)

    def score(self, const uint64_t[::1] hashes, Py_ssize_t n_evidence=0):
        """``(jll, evidence, n_tokens, n_known, spam_evidence, ham_evidence)`` of
        a message's token ``hashes``.

        ``jll`` a list of n_classes floats (unknown tokens are ignored),
        ``evidence`` a list of up to ``n_evidence`` ``(feature_index, weight)``
        pairs with the largest |weight|, weight = x_i (log theta_1i - log
        theta_0i) (two classes; empty otherwise); ``spam_evidence`` and
        ``ham_evidence`` the sums of the positive and of the negative weights
        of all known tokens (two classes; 0.0 otherwise): what the verdict rule
        (spamnb.model.verdict) reads besides the log-odds.
        """
        cdef Py_ssize_t n_classes = self.n_classes, n_features = self.n_features
        cdef Py_ssize_t n = hashes.shape[0], j, c, k, m, e, n_ev = 0, n_known = 0, size, cap
        cdef uint64_t mask = self.keys.shape[0] - 1
        cdef Py_ssize_t slot
        cdef int32_t *idx = NULL
        cdef int32_t *uniq = NULL
        cdef double *x = NULL
        cdef double *jll = NULL
        cdef int32_t *ev_idx = NULL
        cdef double *ev_w = NULL
        cdef double w, spam_ev = 0.0, ham_ev = 0.0
        cdef const double *log_count = &self.log_count[0] if self.log_count.shape[0] else NULL
        cdef const double *tail = &self.tail[0] if self.tail is not None and self.tail.shape[0] else NULL
        cdef Py_ssize_t n_base = self.n_base, n_tail = n_features - n_base
        cdef double lc0, lc1
        cdef int damaged = 0
        if n_evidence < 0:
            n_evidence = 0
        if n_evidence > n:  # never more evidence than tokens (and no huge allocation)
            n_evidence = n
        if n_classes != 2:
            n_evidence = 0
        size = n if n > 0 else 1
        cap = _table_size(size)
        idx = <int32_t *>malloc((2 * size + 2 * cap) * sizeof(int32_t))   # idx, uniq, the counting table
        x = <double *>malloc((size + n_classes + 2 * n_evidence + 2) * sizeof(double))   # x, jll, ev_w
        ev_idx = <int32_t *>malloc((n_evidence + 1) * sizeof(int32_t))
        try:
            if idx == NULL or x == NULL or ev_idx == NULL:
                raise MemoryError()
            uniq = idx + size
            jll = x + size
            ev_w = jll + n_classes
            with nogil:
                for j in range(n):
                    slot = _find_slot(self.keys, mask, hashes[j])
                    if self.keys[slot] == 0 or self.keys[slot] != hashes[j]:
                        idx[j] = -1
                    elif self.values[slot] >= n_features:   # a damaged file mapped unchecked (-1: no count)
                        damaged = 1
                        idx[j] = -1
                    else:
                        idx[j] = self.values[slot]
                        n_known += 1
                m = _count_distinct(idx, n, uniq, x, self.counts, uniq + size, cap)
                _scale_to_length(x, m, self.length)
                for c in range(n_classes):
                    jll[c] = self.prior[c]
                for k in range(m):
                    for c in range(n_classes):
                        lc0 = _log_at(log_count, n_base, tail, n_tail, c, uniq[k])
                        if not fabs(lc0) < INFINITY:   # NaN or infinite: never written so
                            damaged = 1
                        jll[c] += x[k] * (lc0 - self.norm[c])
                    if n_classes == 2:
                        lc0 = _log_at(log_count, n_base, tail, n_tail, 0, uniq[k])
                        lc1 = _log_at(log_count, n_base, tail, n_tail, 1, uniq[k])
                        w = x[k] * (lc1 - lc0 - self.norm[1] + self.norm[0])
                        if w > 0:
                            spam_ev += w
                        else:
                            ham_ev += w
                    if n_evidence > 0:
                        # keep the n_evidence largest |w|, by |w| descending, then feature index
                        if n_ev < n_evidence or _ranks_before(w, uniq[k], ev_w[n_ev - 1], ev_idx[n_ev - 1]):
                            e = n_ev if n_ev < n_evidence else n_evidence - 1
                            while e > 0 and _ranks_before(w, uniq[k], ev_w[e - 1], ev_idx[e - 1]):
                                ev_w[e] = ev_w[e - 1]
                                ev_idx[e] = ev_idx[e - 1]
                                e -= 1
                            ev_w[e] = w
                            ev_idx[e] = uniq[k]
                            if n_ev < n_evidence:
                                n_ev += 1
            if damaged:
                raise ValueError(_DAMAGED)
            return ([jll[c] for c in range(n_classes)],
                    [(ev_idx[e], ev_w[e]) for e in range(n_ev)],
                    n, n_known, spam_ev, ham_ev)
        finally:
            free(idx)
            free(x)
            free(ev_idx)

    def verdict_sums(self, const uint64_t[::1] hashes, list regions, bint truncated=False):
        """``(log_odds, n_tokens, n_known, spam_evidence, ham_evidence, part_max)``
        of a message's token ``hashes``: what ``score(hashes, 0)`` and
        ``spamnb.model.verdict.part_max(self, hashes, regions, truncated)``
        give (log_odds = jll[1] - jll[0]), bit for bit, with each hash looked
        up once (the lookups are prefetched a few tokens ahead: the hash
        index of a large model does not fit in the cache).

        ``regions`` a list of ``(start, end)`` token ranges (a text part each,
        sliced as Python slices them); ``part_max`` the largest sum of a
        region's weights when scored on its own, -inf without regions, +inf
        when ``truncated`` and without regions.  Two classes only."""
        cdef Py_ssize_t n = hashes.shape[0], n_features = self.n_features
        cdef Py_ssize_t j, k, m, n_known = 0, size, cap, start, end, r, n_regions = len(regions)
        cdef uint64_t mask = self.keys.shape[0] - 1
        cdef const uint64_t *keys = &self.keys[0]
        cdef const int32_t *values = &self.values[0]
        cdef Py_ssize_t slot
        cdef int32_t *idx = NULL
        cdef int32_t *uniq = NULL
        cdef int32_t *table = NULL
        cdef Py_ssize_t *bounds = NULL
        cdef double *x = NULL
        cdef double w, spam_ev = 0.0, ham_ev = 0.0, part_spam, part_ham, best, jll0, jll1
        cdef double norm0, norm1
        cdef const double *log_count = &self.log_count[0] if self.log_count.shape[0] else NULL
        cdef const double *tail = &self.tail[0] if self.tail is not None and self.tail.shape[0] else NULL
        cdef Py_ssize_t n_base = self.n_base, n_tail = n_features - n_base
        cdef double lc0, lc1
        cdef int damaged = 0
        if self.n_classes != 2:
            raise ValueError("verdict_sums needs two classes")
        norm0, norm1 = self.norm[0], self.norm[1]
        size = n if n > 0 else 1
        cap = _table_size(size)
        idx = <int32_t *>malloc((2 * size + 2 * cap) * sizeof(int32_t))   # idx, uniq, the counting table
        x = <double *>malloc(size * sizeof(double))
        bounds = <Py_ssize_t *>malloc((2 * n_regions + 1) * sizeof(Py_ssize_t))
        try:
            if idx == NULL or x == NULL or bounds == NULL:
                raise MemoryError()
            uniq = idx + size
            table = uniq + size
            for r in range(n_regions):   # Python's slice bounds of hashes[start:end]
                start, end = regions[r]
                if start < 0:
                    start = start + n if start + n > 0 else 0
                elif start > n:
                    start = n
                if end < 0:
                    end = end + n if end + n > 0 else 0
                elif end > n:
                    end = n
                bounds[2 * r] = start
                bounds[2 * r + 1] = end
            with nogil:
                for j in range(n):
                    if j + 8 < n:
                        _prefetch(keys + (hashes[j + 8] & mask))
                        _prefetch(values + (hashes[j + 8] & mask))
                    slot = _find_slot(self.keys, mask, hashes[j])
                    if keys[slot] == 0 or keys[slot] != hashes[j]:
                        idx[j] = -1
                    elif values[slot] >= n_features:   # a damaged file mapped unchecked (-1: no count)
                        damaged = 1
                        idx[j] = -1
                    else:
                        idx[j] = values[slot]
                        n_known += 1
                # the whole message, as score(): jll and the evidence sums
                m = _count_distinct(idx, n, uniq, x, self.counts, table, cap)
                _scale_to_length(x, m, self.length)
                for k in range(m):
                    if uniq[k] < n_base:
                        _prefetch(log_count + uniq[k])
                        _prefetch(log_count + n_base + uniq[k])
                jll0 = self.prior[0]
                jll1 = self.prior[1]
                for k in range(m):
                    # the file's logs, or the tail's for the tokens a journal added (as score())
                    lc0 = _log_at(log_count, n_base, tail, n_tail, 0, uniq[k])
                    lc1 = _log_at(log_count, n_base, tail, n_tail, 1, uniq[k])
                    if not (fabs(lc0) < INFINITY and fabs(lc1) < INFINITY):   # NaN or infinite: never written so
                        damaged = 1
                    jll0 += x[k] * (lc0 - norm0)
                    jll1 += x[k] * (lc1 - norm1)
                    w = x[k] * (lc1 - lc0 - norm1 + norm0)
                    if w > 0:
                        spam_ev += w
                    else:
                        ham_ev += w
                # each region on its own, as score(hashes[start:end], 0) sums it
                best = INFINITY if truncated and n_regions == 0 else -INFINITY
                for r in range(n_regions):
                    start = bounds[2 * r]
                    end = bounds[2 * r + 1]
                    part_spam = 0.0
                    part_ham = 0.0
                    if end > start:
                        m = _count_distinct(idx + start, end - start, uniq, x, self.counts, table,
                                            _table_size(end - start))
                        _scale_to_length(x, m, self.length)
                        for k in range(m):
                            lc0 = _log_at(log_count, n_base, tail, n_tail, 0, uniq[k])
                            lc1 = _log_at(log_count, n_base, tail, n_tail, 1, uniq[k])
                            w = x[k] * (lc1 - lc0 - norm1 + norm0)
                            if w > 0:
                                part_spam += w
                            else:
                                part_ham += w
                    if part_spam + part_ham > best:
                        best = part_spam + part_ham
            if damaged:
                raise ValueError(_DAMAGED)
            return (jll1 - jll0, n, n_known, spam_ev, ham_ev, best)
        finally:
            free(idx)
            free(x)
            free(bounds)


cdef extern from "<unistd.h>" nogil:
    ssize_t pread(int fd, void *buf, size_t count, long offset)


cdef int _pread_all(int fd, void *buf, size_t count, long offset) noexcept nogil:
    """1 when ``count`` bytes were read at ``offset``, 0 on a short read or an error."""
    cdef ssize_t got
    cdef size_t done = 0
    while done < count:
        got = pread(fd, <char *>buf + done, count - done, offset + <long>done)
        if got <= 0:
            return 0
        done += <size_t>got
    return 1


def gather(int fd, Py_ssize_t keys_at, Py_ssize_t capacity, Py_ssize_t values_at, Py_ssize_t logs_at,
           Py_ssize_t n_features, Py_ssize_t n_classes, const uint64_t[::1] hashes):
    """The entries of a model file's hash index and log-counts that the token
    ``hashes`` of one message need, read from the open file ``fd`` with
    ``pread`` (nothing of the file mapped: no page of it enters this
    process's memory, and a file cut short meanwhile gives a short read, an
    error, never a fault).  ``keys_at``, ``values_at``, ``logs_at``: the byte
    offsets of the arrays ``keys`` (uint64, ``capacity`` slots, a power of
    two), ``values`` (int32) and ``log_count`` (float64, class-major,
    ``n_classes * n_features``).

    Returns ``(found, index, logs)``: ``array('Q')`` of the distinct hashes
    the index holds, ``array('i')`` their feature indices, ``array('d')``
    their log-counts (class-major: ``logs[c * len(found) + k]``).  Probing
    stops after ``capacity`` slots; an entry out of range, a log-count that
    is not finite, or a short read raise ValueError (a damaged or changed
    file)."""
    cdef Py_ssize_t n = hashes.shape[0], j, k, m = 0, cap = _table_size(n if n > 0 else 1)
    cdef uint64_t mask = <uint64_t>capacity - 1, h, slot, probes, block[8], key = 0
    cdef uint32_t tmask = <uint32_t>(cap - 1), t
    cdef uint64_t *seen = NULL
    cdef int64_t *order
    cdef uint64_t[::1] sf
    cdef int32_t[::1] si
    cdef double[::1] lg
    cdef int32_t v
    cdef double lc
    cdef int status = 0    # 1 short read, 2 out of range, 3 not finite
    cdef Py_ssize_t b, first
    if capacity <= 0 or capacity & (capacity - 1) or n_classes < 1 or n_features < 0:
        raise ValueError("bad hash index layout")
    found = array.array("Q", bytes(8 * n))
    index = array.array("i", bytes(4 * n))
    cdef uint64_t[::1] f = found
    cdef int32_t[::1] ix = index
    seen = <uint64_t *>malloc(cap * sizeof(uint64_t))
    if seen == NULL:
        raise MemoryError()
    try:
        with nogil:
            for j in range(cap):
                seen[j] = 0
            for j in range(n):
                h = hashes[j]
                if h == 0:
                    continue
                t = <uint32_t>(h ^ (h >> 32)) & tmask    # each distinct hash once
                while seen[t] != 0 and seen[t] != h:
                    t = (t + 1) & tmask
                if seen[t] == h:
                    continue
                seen[t] = h
                slot = h & mask
                probes = 0
                while probes <= mask:   # the slots from ``slot`` on, 8 (one read) at a time
                    first = <Py_ssize_t>(slot & ~(<uint64_t>7))
                    if not _pread_all(fd, block, 8 * 8 if first + 8 <= capacity else 8 * (capacity - first),
                                      keys_at + 8 * first):
                        status = 1
                        break
                    b = <Py_ssize_t>(slot - <uint64_t>first)
                    while b < 8 and first + b < capacity:
                        key = block[b]
                        if key == 0 or key == h:
                            break
                        b += 1
                        probes += 1
                    if b < 8 and first + b < capacity and (key == 0 or key == h):
                        slot = <uint64_t>(first + b)
                        break
                    slot = <uint64_t>(first + b) & mask
                if status:
                    break
                if probes > mask or key != h:
                    continue   # not in the index (or a full table: never written so)
                if not _pread_all(fd, &v, 4, values_at + 4 * <Py_ssize_t>slot):
                    status = 1
                    break
                if v >= n_features:
                    status = 2
                    break
                if v < 0:
                    continue   # no count (never in a model file)
                f[m] = h
                ix[m] = v
                m += 1
        if status == 0:   # in the order of their feature indices (position in the low bits: a stable order)
            order = <int64_t *>seen   # room for cap >= n entries
            for k in range(m):
                order[k] = ((<int64_t>ix[k]) << 32) | k
            qsort(order, m, sizeof(int64_t), _compare_int64)
            sorted_found = array.array("Q", bytes(8 * m))
            sorted_index = array.array("i", bytes(4 * m))
            logs = array.array("d", bytes(8 * n_classes * m))
            sf, si, lg = sorted_found, sorted_index, logs
            with nogil:
                for k in range(m):
                    j = <Py_ssize_t>(order[k] & <int64_t>0xFFFFFFFF)
                    sf[k] = f[j]
                    si[k] = ix[j]
                for k in range(m):
                    for j in range(n_classes):
                        if not _pread_all(fd, &lc, 8, logs_at + 8 * (j * n_features + si[k])):
                            status = 1
                            break
                        if not fabs(lc) < INFINITY:
                            status = 3
                            break
                        lg[j * m + k] = lc
                    if status:
                        break
    finally:
        free(seen)
    if status == 1:
        raise ValueError("the model file could not be read (cut short while in use?)")
    if status:
        raise ValueError(_DAMAGED)
    return sorted_found, sorted_index, logs


cdef int _compare_int64(const void *a, const void *b) noexcept nogil:
    cdef int64_t x = (<const int64_t *>a)[0], y = (<const int64_t *>b)[0]
    return (x > y) - (x < y)
