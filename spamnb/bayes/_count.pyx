"""Compiled counting of one message's tokens: its feature indices -> the
distinct features and their transformed counts (raw, binary or log(1 +
count)), scaled to a Euclidean length; the CSR rows of many messages
(``CSRBuilder``) and the signed add into a class's counts (``add_counts``).

Nothing here imports numpy: every array is a typed memoryview over any buffer
(``array.array``, a model file's bytes, numpy).  The counting primitives the
single-message scorer (``_score``) shares are declared in ``_count.pxd``.
Bounds checks are off: callers go through ``spamnb.bayes.token_kernels``,
which checks what the functions here do not (their docstrings say what they do).
"""

from cpython cimport array
from libc.math cimport INFINITY, log, log1p, sqrt
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset

from spamnb.bayes._maps cimport _grow, _map, _unmap

cdef extern from *:
    """
    #define SPAMNB_PREFETCH(p) __builtin_prefetch((p), 1, 1)
    """
    void SPAMNB_PREFETCH(const void *p) noexcept nogil

cdef enum:
    _AHEAD = 32   # a token's slot is fetched _AHEAD tokens early, the entry it names _AHEAD // 2 tokens early

import array

COUNTS_RAW = TRANSFORM_RAW          # x_i = count of token i in the message
COUNTS_BINARY = TRANSFORM_BINARY    # x_i = 1 if token i occurs
COUNTS_LOG = TRANSFORM_LOG          # x_i = log(1 + count)


# --------------------------------------------------------------------------
# counting the features of one message
# --------------------------------------------------------------------------
# Sorting a message's feature indices (CSR rows: ``transform``, ``learn``; fit
# and single-message scoring count without sorting, see count_distinct).  With
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
    return transform(count, counts, _LOG1P_SMALL)


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
# single-message Scorer from 6.6 to 3.3 us.  count_distinct is in _count.pxd
# (inline: _score uses it without loading this module).
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


cdef void _weigh_pairs(const int32_t *idx, Py_ssize_t n, Py_ssize_t pairs_start, const int32_t *uniq, double *x,
                       Py_ssize_t m, double weight, int32_t *scratch) noexcept nogil:
    """Multiply ``x[k]`` by ``weight`` for each feature ``uniq[k]`` (sorted) that
    occurs in ``idx[pairs_start:n]`` (the word pairs); ``scratch`` has room for
    ``n - pairs_start`` entries."""
    cdef Py_ssize_t j, p = 0, q = 0, k
    for j in range(pairs_start, n):
        if idx[j] >= 0:
            scratch[p] = idx[j]
            p += 1
    if p == 0:
        return
    _sort_int32(scratch, p, _depth_limit(p))
    for k in range(m):
        while q < p and scratch[q] < uniq[k]:
            q += 1
        if q < p and scratch[q] == uniq[k]:
            x[k] *= weight


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
    cdef double pair_weight

    def __init__(self, int counts=TRANSFORM_RAW, double length=0.0, double pair_weight=1.0):
        if counts not in (TRANSFORM_RAW, TRANSFORM_BINARY, TRANSFORM_LOG):
            raise ValueError(f"unknown counts transform {counts}")
        if not 0.0 <= pair_weight < INFINITY:
            raise ValueError(f"pair_weight must be a finite number >= 0, got {pair_weight!r}")
        self.counts = counts
        self.length = length
        self.pair_weight = pair_weight
        self.indptr = array.array("q", [0])
        self.indices = array.array("i")
        self.data = array.array("d")

    def add_row(self, const int32_t[::1] idx, Py_ssize_t pairs_start=-1):
        """One row; ``pairs_start`` (a token stream's): the occurrences from there
        on are word pairs, their values (after the scaling to length, which
        counts them) multiplied by the builder's ``pair_weight``."""
        cdef Py_ssize_t n = idx.shape[0], k, start = len(self.indices)
        cdef int32_t *uniq
        cdef double *x
        if n:
            _buffers(n, 2 * n, &uniq, &x)
            with nogil:
                k = _count_row(&idx[0], n, uniq, x, self.counts)
                scale_to_length(x, k, self.length)
                if 0 <= pairs_start < n and self.pair_weight != 1.0:
                    _weigh_pairs(&idx[0], n, pairs_start, uniq, x, k, self.pair_weight, <int32_t *>(x + n))
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
    if counts not in (TRANSFORM_RAW, TRANSFORM_BINARY, TRANSFORM_LOG):
        raise ValueError(f"unknown counts transform {counts}")
    if n == 0:
        return 0
    cap = table_size(n)
    _buffers(n + 2 * cap, n, &uniq, &x)   # uniq, then the counting table
    with nogil:
        k = count_distinct(&idx[0], n, uniq, x, counts, uniq + n, cap, _LOG1P_SMALL)
        scale_to_length(x, k, length)
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


cdef inline Py_ssize_t _add_local(const int32_t *uniq, const double *x, Py_ssize_t k, int32_t *local_of,
                                  int32_t *touched, Py_ssize_t n, double *target) noexcept nogil:
    """Add ``x[j]`` to ``target[local_of[uniq[j]]]`` for the ``k`` distinct
    features ``uniq``, a feature the partition has not met (``local_of`` < 0)
    numbered ``n``, ``n + 1``, ... and listed in ``touched``; returns the new ``n``."""
    cdef Py_ssize_t j
    cdef int32_t g, l
    for j in range(k):
        g = uniq[j]
        l = local_of[g]
        if l < 0:
            l = <int32_t>n
            local_of[g] = l
            touched[n] = g
            n += 1
        target[l] += x[j]
    return n


def add_counts_rows(const int32_t[::1] idx, const int64_t[::1] bounds, const unsigned char[::1] rows_of,
                    double[::1] ham, double[::1] spam, int counts, double length=0.0):
    """``add_counts(idx[bounds[j]:bounds[j + 1]], (ham, spam)[rows_of[j]],
    counts, 1.0, length)`` for each message ``j`` in order: the same additions
    as one call a message (the held-out pass of ``spamnb train -j 1``
    summing a fold's counts from its file).  Raises ValueError at the first
    message with an index out of range of its row or bounds that do not
    fit ``idx`` (the messages before it added)."""
    cdef Py_ssize_t j, m = bounds.shape[0] - 1, k, i
    cdef int64_t a, b
    cdef int32_t *uniq
    cdef double *x
    cdef int32_t largest
    cdef double[::1] row
    if m < 0 or rows_of.shape[0] < m:
        raise ValueError("bounds and rows disagree on the number of messages")
    for j in range(m):
        a, b = bounds[j], bounds[j + 1]
        if a < 0 or b < a or b > idx.shape[0]:
            raise ValueError(f"message {j}: bounds {a}..{b} outside {idx.shape[0]} indices")
        row = spam if rows_of[j] else ham
        k = _distinct_counts(idx[a:b], counts, length, &uniq, &x, &largest)
        if k == 0:
            continue
        if largest >= row.shape[0]:
            free(uniq)
            free(x)
            raise ValueError(f"feature index out of range for {row.shape[0]} counts")
        with nogil:
            for i in range(k):
                row[uniq[i]] += x[i]
        free(uniq)
        free(x)
    return m


cdef Py_ssize_t _longest(const int64_t[::1] bounds, Py_ssize_t n_items) except -1:
    """The length of the longest message ``j`` (``bounds[j]:bounds[j + 1]``; 1
    at least); ValueError for bounds that do not fit ``n_items`` indices."""
    cdef Py_ssize_t j, most = 1
    for j in range(bounds.shape[0] - 1):
        if bounds[j] < 0 or bounds[j + 1] < bounds[j] or bounds[j + 1] > n_items:
            raise ValueError(f"message {j}: bounds {bounds[j]}..{bounds[j + 1]} outside {n_items} indices")
        most = max(most, bounds[j + 1] - bounds[j])
    return most


def held_out_log_odds(const int32_t[::1] idx, const int64_t[::1] bounds, const int32_t[::1] local_of,
                      const double[::1] log_count, double norm0, double norm1, double prior0, double prior1,
                      int counts, double length=0.0):
    """The log-odds of each message ``j`` (its feature indices
    ``idx[bounds[j]:bounds[j + 1]]``) under a model of ``m`` features
    (``log_count``: the flat ``(2, m)`` logs), feature ``i`` of the message
    being the model's ``local_of[i]`` (-1: unknown to it): ``jll[1] -
    jll[0]``, ``jll[c] = prior_c + sum_k x_k (log_count[c, k] - norm_c)``
    over the message's distinct known features in order of first occurrence
    (``count_distinct``, ``scale_to_length``), an ``array('d')``.  Bit for bit
    ``Scorer.log_odds_many`` of the messages' token hashes over a hash index
    that maps token ``i``'s hash to ``local_of[i]`` (the same features, values
    and additions in the same order), without the hash index: the held-out
    pass of ``spamnb train -j 1`` scoring a fold's messages by the vocabulary
    indices it counted them with.  Raises ValueError for bounds that do not
    fit ``idx``, an index outside ``local_of`` or a ``local_of`` entry outside
    the model."""
    cdef Py_ssize_t n_messages = bounds.shape[0] - 1, n_local = log_count.shape[0] // 2, n_map = local_of.shape[0]
    cdef Py_ssize_t j, i, k, n, m, size
    cdef int32_t t, v
    cdef int bad = 0
    cdef double jll0, jll1
    cdef int32_t *lidx = NULL
    cdef int32_t *uniq = NULL
    cdef double *x = NULL
    cdef double *view
    cdef const double *logs
    cdef array.array out
    if counts not in (TRANSFORM_RAW, TRANSFORM_BINARY, TRANSFORM_LOG):
        raise ValueError(f"unknown counts transform {counts}")
    if log_count.shape[0] != 2 * n_local:
        raise ValueError("log_count holds two rows of the model's features")
    if n_messages < 0:
        raise ValueError("bounds hold one entry more than the messages")
    size = _longest(bounds, idx.shape[0])
    out = array.array("d", bytes(8 * n_messages))
    if not n_messages:
        return out
    view, logs = out.data.as_doubles, (&log_count[0] if n_local else NULL)
    # the message's model indices, its distinct ones and their counting table; their values
    _buffers(2 * size + 2 * table_size(size), size, &lidx, &x)
    uniq = lidx + size
    try:
        with nogil:
            for j in range(n_messages):
                n = bounds[j + 1] - bounds[j]
                for i in range(n):
                    t = idx[bounds[j] + i]
                    if t < 0 or t >= n_map:
                        bad = 1
                        v = -1
                    else:
                        v = local_of[t]
                        if v >= n_local:
                            bad = 1
                            v = -1
                    lidx[i] = v
                m = count_distinct(lidx, n, uniq, x, counts, uniq + size, table_size(n if n > 0 else 1),
                                   _LOG1P_SMALL)
                scale_to_length(x, m, length)
                jll0 = prior0
                jll1 = prior1
                for k in range(m):
                    jll0 += x[k] * (logs[uniq[k]] - norm0)
                    jll1 += x[k] * (logs[n_local + uniq[k]] - norm1)
                view[j] = jll1 - jll0
        if bad:
            raise ValueError("a feature index outside the map, or mapped outside the model")
        return out
    finally:
        free(lidx)
        free(x)


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
    if counts not in (TRANSFORM_RAW, TRANSFORM_BINARY, TRANSFORM_LOG):
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


cdef void _lift(double **rows, Py_ssize_t *items, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """Level ``i``'s running total (its two rows ``rows[2 * i]``, ``rows[2 * i + 1]``) added to
    level ``i + 1`` as one item; level ``i`` zeros again."""
    cdef Py_ssize_t t, c
    cdef double *low
    cdef double *high
    for c in range(2):
        low, high = rows[2 * i + c], rows[2 * i + 2 + c]
        for t in range(n):
            high[t] += low[t]
            low[t] = 0.0
    items[i + 1] += 1
    items[i] = 0


def add_counts_tree(const int32_t[::1] idx, const int64_t[::1] bounds, const unsigned char[::1] rows_of,
                    const int64_t[::1] ends, Py_ssize_t fan_in, double[::1] ham, double[::1] spam, int counts,
                    double length=0.0, const int32_t[::1] local=None):
    """``add_counts_rows`` of the messages a partition at a time, each
    partition summed apart and the partitions' sums added in the tree of
    ``spamnb.estimator.counting.TreeReduce(fan_in)`` (groups of ``fan_in``
    consecutive partitions, level by level, each level a running total:
    zeros, then each item added in turn; the last, short groups flushed
    bottom-up), the result written to ``ham`` and ``spam``: the rows the
    partitions' counts merged by that tree hold, bit for bit (a token a
    partition lacks adds nothing).  Partition ``p`` holds messages
    ``ends[p - 1]`` (0 for the first) to ``ends[p]``.  Memory: two rows per
    level of the tree and one partition's.  Raises ValueError for bounds or
    ends that do not fit, or an index out of range of the rows.  ``local``:
    the rows' column of each index (``local[idx[i]]``, read as each message
    is counted: no mapped copy of ``idx``), None: the index itself.  Returns
    the number of partitions."""
    cdef Py_ssize_t n = ham.shape[0], m = bounds.shape[0] - 1, n_parts = ends.shape[0]
    cdef Py_ssize_t p, j, i, k, c, n_levels = 2, reach = fan_in, top
    cdef int64_t a, b, start = 0, stop
    cdef int32_t t, largest = -1
    cdef int32_t *uniq
    cdef double *x = NULL
    cdef double *levels = NULL
    cdef double *part = NULL
    cdef double *row
    cdef Py_ssize_t *items = NULL
    cdef Py_ssize_t most, cap, levels_size = 0
    cdef double **rows_at = NULL
    cdef int32_t *scratch = NULL
    cdef int32_t *mapped = NULL
    cdef const int32_t *msg
    cdef Py_ssize_t n_local = 0 if local is None else local.shape[0]
    cdef bint bad = 0
    if counts not in (TRANSFORM_RAW, TRANSFORM_BINARY, TRANSFORM_LOG):
        raise ValueError(f"unknown counts transform {counts}")
    if spam.shape[0] != n:
        raise ValueError("the ham and spam rows differ in length")
    if fan_in < 2:
        raise ValueError("fan_in must be at least 2")
    if m < 0 or rows_of.shape[0] < m:
        raise ValueError("bounds and rows disagree on the number of messages")
    most = _longest(bounds, idx.shape[0])
    for p in range(n_parts):
        if ends[p] < (ends[p - 1] if p else 0) or ends[p] > m:
            raise ValueError(f"partition {p}: ends {ends[p]} outside 0..{m} or before the last")
    if n_parts == 0:
        return 0
    while reach < n_parts:
        reach *= fan_in
        n_levels += 1
    top = 0   # the level the sum ends in (the flush lifts each level below it): ham and spam themselves
    reach = n_parts
    while reach >= fan_in:
        reach //= fan_in
        top += 1
    # a mapping of its own (zero pages, given back when unmapped), not the C heap's: the held-out pass
    # sums each fold in turn, and a freed block of the heap is kept there past the pass's peak
    levels_size = (2 * n * n_levels + 2 * n + 1) * sizeof(double)   # level top's place never touched
    levels = <double *>_map(levels_size)
    items = <Py_ssize_t *>calloc(n_levels + 1, sizeof(Py_ssize_t))
    rows_at = <double **>calloc(2 * n_levels + 2, sizeof(double *))
    try:
        if levels == NULL or items == NULL or rows_at == NULL:
            raise MemoryError()
        for i in range(n_levels):
            rows_at[2 * i], rows_at[2 * i + 1] = levels + 2 * n * i, levels + 2 * n * i + n
        if n:
            rows_at[2 * top], rows_at[2 * top + 1] = &ham[0], &spam[0]   # its place in the levels never touched
            memset(&ham[0], 0, n * sizeof(double))
            memset(&spam[0], 0, n * sizeof(double))
        # one message's distinct indices, counts and counting table, for the largest message (what
        # _distinct_counts allocates a message at a time: the same count_distinct and scale_to_length)
        _buffers(most + 2 * table_size(most), most, &scratch, &x)
        uniq = scratch
        if n_local:
            mapped = <int32_t *>malloc(most * sizeof(int32_t))
            if mapped == NULL:
                raise MemoryError()
        part = levels + 2 * n * n_levels
        for p in range(n_parts):
            stop = ends[p]
            with nogil:
                for j in range(start, stop):   # the partition's messages into its own two rows, in order
                    a, b = bounds[j], bounds[j + 1]
                    if b == a:
                        continue
                    cap = table_size(b - a)
                    msg = &idx[a]
                    if n_local:   # the message's indices through ``local``
                        for i in range(b - a):
                            t = idx[a + i]
                            if t < 0 or t >= n_local:
                                bad = 1
                                break
                            mapped[i] = local[t]
                        if bad:
                            break
                        msg = mapped
                    k = count_distinct(msg, b - a, uniq, x, counts, uniq + most, cap, _LOG1P_SMALL)
                    scale_to_length(x, k, length)
                    largest = -1
                    for i in range(k):
                        if uniq[i] > largest:
                            largest = uniq[i]
                    if largest >= n:
                        break
                    row = part + n * (1 if rows_of[j] else 0)
                    for i in range(k):
                        row[uniq[i]] += x[i]
            if bad:
                raise ValueError(f"an index out of range of local's {n_local}")
            if largest >= n:
                raise ValueError(f"feature index out of range for {n} counts")
            with nogil:
                if stop > start:   # its tokens' sums into level 0 (a token twice: 0.0 the second time)
                    for i in range(bounds[start], bounds[stop]):
                        t = idx[i]
                        if n_local:
                            t = local[t]
                        if t < 0:
                            continue
                        for c in range(2):
                            rows_at[c][t] += part[c * n + t]
                            part[c * n + t] = 0.0
                items[0] += 1
                i = 0
                while items[i] == fan_in:   # a full group: its sum goes up a level as one item
                    _lift(rows_at, items, i, n)
                    i += 1
            start = stop
        with nogil:
            for i in range(top):   # flushed bottom-up as TreeReduce.result flushes, into level top: ham and spam
                if items[i]:
                    _lift(rows_at, items, i, n)
        return n_parts
    finally:
        _unmap(levels, levels_size)
        free(items)
        free(rows_at)
        free(scratch)
        free(x)
        free(mapped)


# --------------------------------------------------------------------------
# counting several variants of one corpus in one call a message
# --------------------------------------------------------------------------
# ``spamnb train -j 1`` counts the corpus under two tokenizers at once (the
# default one and its word pairs' trial, whose stream holds most of the
# default stream's tokens).  Each variant numbers its tokens in its own order
# of first sight, keeps its own strings and its partition's compact rows, as
# a Vocabulary and compact rows of its own (``_add_local``) would; the hash index is one
# for all of them: an entry holds a hash and each variant's number for it (-1:
# not met by that variant) side by side (16 bytes for two variants: one cache
# line read a hit), so a token of both streams is probed for in one table,
# the second time in an entry just read.  The entries are dense, in order of
# first sight (a mapping grown by ``mremap``: pages for the tokens met only),
# and the open-addressing slots hold 4-byte entry numbers: 4 bytes a slot and
# 16 a token, where slots of whole entries took 16 bytes a slot at up to 3/4
# full (SpamAssassin's 480 k tokens: 4 + 7.3 MiB against 16).  The slots are
# made again from the entries when they double (the old ones unmapped first).
# A slot's bits above the entry's number (``capacity`` slots: its number
# takes log2(capacity) bits, fewer than 32) hold as many of the hash's top
# bits: a probe reads only the entries whose bits agree (12 bits at 2^20
# slots: one in 4,096 of the others), where each slot it passed on its way
# cost a read of an entry (most a cache miss) before.

cdef extern from *:
    """
    #define SPAMNB_EMPTY_SLOT 0xffffffffu
    """
    # an empty slot (an entry's number never fills its bits: the slots are at most 3/4 full)
    const uint32_t _EMPTY "SPAMNB_EMPTY_SLOT"


cdef inline uint32_t _tag(uint64_t h, uint32_t low) noexcept nogil:
    """The hash's top bits, in a slot's bits above ``low`` (those of the entry's number)."""
    return <uint32_t>(h >> 32) & ~low


cdef class VariantCounter:
    """The counting pass of ``n_variants`` variants over one corpus, a
    message at a time (:meth:`count`: every variant's stream in one call),
    by partitions (:meth:`partition`, :meth:`clear_partition`): for each
    variant, what ``Vocabulary.add`` and ``_add_local`` into compact rows give it alone
    (its feature numbers, its strings, its partition's compact ham and
    spam rows, bit for bit), over one hash index for all."""
    cdef uint64_t *keys            # n_keys entries of ``stride`` words: the hash, then an int32 a variant
    cdef Py_ssize_t keys_cap       # entries mapped
    cdef uint32_t *slots           # capacity slots: an entry's number and its hash's top bits (_tag), _EMPTY empty
    cdef uint32_t low              # the slots' bits of the entry's number (capacity - 1, below 2^32)
    cdef Py_ssize_t capacity, n_keys, stride
    cdef readonly Py_ssize_t n_variants
    cdef double fill
    cdef int32_t *n_features       # per variant
    cdef Py_ssize_t *n_touched     # per variant: its partition's tokens so far
    cdef int *transforms
    cdef double *lengths
    cdef list blobs, offsets, out, new_positions, local_of, touched, ham, spam
    cdef list fresh_hashes         # per variant (keep_hashes): the hashes of its tokens numbered since the last take
    cdef bint local_out            # count() gives each token's number in its partition, not the variant's
    cdef int32_t *uniq             # one message's distinct numbers, counts and counting table (grown)
    cdef double *x
    cdef Py_ssize_t scratch_n

    def __cinit__(self):
        self.keys = NULL
        self.slots = NULL
        self.n_features = NULL
        self.n_touched = NULL
        self.transforms = NULL
        self.lengths = NULL
        self.uniq = NULL
        self.x = NULL

    def __init__(self, transforms, lengths, double fill=0.75, bint keep_hashes=False, bint local_out=False):
        """``keep_hashes``: each variant's new tokens' hashes kept too, in
        its order, until :meth:`take_hashes`; ``local_out``: :meth:`count`
        gives each token's place in its partition (in :meth:`partition`'s
        ``touched``) instead of its feature number (a worker that keeps its
        vocabulary across partitions sends only its new tokens, and its
        messages' tokens by their places in the partition)."""
        cdef Py_ssize_t v, n = len(transforms)
        if n < 1 or len(lengths) != n:
            raise ValueError("a transform and a length for each variant, one variant at least")
        if not 0.0 < fill <= 0.75:
            raise ValueError("the hash index is filled to at most 3/4")
        self.n_variants, self.fill, self.capacity, self.n_keys = n, fill, 1024, 0
        self.stride = 1 + (n + 1) // 2
        self.slots = <uint32_t *>_map(self.capacity * sizeof(uint32_t))
        self.low = <uint32_t>(self.capacity - 1)
        self.n_features = <int32_t *>calloc(n, sizeof(int32_t))
        self.n_touched = <Py_ssize_t *>calloc(n, sizeof(Py_ssize_t))
        self.transforms = <int *>calloc(n, sizeof(int))
        self.lengths = <double *>calloc(n, sizeof(double))
        if (self.slots == NULL or self.n_features == NULL or self.n_touched == NULL
                or self.transforms == NULL or self.lengths == NULL):
            raise MemoryError()
        memset(self.slots, 0xff, self.capacity * sizeof(uint32_t))
        _grow(<void **>&self.keys, &self.keys_cap, 1024, self.stride * sizeof(uint64_t))
        for v in range(n):
            if transforms[v] not in (TRANSFORM_RAW, TRANSFORM_BINARY, TRANSFORM_LOG):
                raise ValueError(f"unknown counts transform {transforms[v]}")
            if not 0.0 <= lengths[v] < INFINITY:
                raise ValueError(f"the length to scale to must be a finite number >= 0, got {lengths[v]!r}")
            self.transforms[v], self.lengths[v] = transforms[v], lengths[v]
        self.blobs = [bytearray() for v in range(n)]
        self.offsets = [array.array("Q", [0]) for v in range(n)]
        self.out = [array.array("i") for v in range(n)]
        self.new_positions = [array.array("i") for v in range(n)]
        self.local_of = [array.array("i") for v in range(n)]
        self.touched = [array.array("i") for v in range(n)]
        self.ham = [array.array("d") for v in range(n)]
        self.spam = [array.array("d") for v in range(n)]
        self.fresh_hashes = [array.array("Q") for v in range(n)] if keep_hashes else None
        self.local_out = local_out
        self.scratch_n = 0

    def __dealloc__(self):
        self._unmap_index()
        free(self.n_features)
        free(self.n_touched)
        free(self.transforms)
        free(self.lengths)
        free(self.uniq)
        free(self.x)

    cdef void _unmap_index(self) noexcept:
        _unmap(self.keys, self.keys_cap * self.stride * sizeof(uint64_t))
        _unmap(self.slots, self.capacity * sizeof(uint32_t))
        self.keys, self.slots, self.keys_cap, self.capacity = NULL, NULL, 0, 0

    def n_features_of(self, Py_ssize_t v):
        """Variant ``v``'s number of tokens."""
        self._variant(v)
        return self.n_features[v]

    cdef int _variant(self, Py_ssize_t v) except -1:
        if not 0 <= v < self.n_variants or self.slots == NULL:
            raise ValueError(f"no variant {v} (of {self.n_variants}), or its hash index given up")
        return 0

    cdef int _reserve(self, Py_ssize_t n_keys) except -1:
        """Room for ``n_keys`` entries (their mapping grown in place by
        ``mremap``), the slots doubled while they would be more than ``fill``
        full: the old slots unmapped first and the new ones made from the
        entries (never two sets of slots, never the entries twice)."""
        cdef Py_ssize_t capacity = self.capacity, e, slot, w = self.stride
        cdef uint64_t mask
        _grow(<void **>&self.keys, &self.keys_cap, n_keys, w * sizeof(uint64_t))
        if n_keys <= self.fill * capacity:
            return 0
        while n_keys > self.fill * capacity:
            capacity *= 2
        if capacity > (<Py_ssize_t>1 << 32):
            raise MemoryError("more tokens than the hash index's slots number")
        _unmap(self.slots, self.capacity * sizeof(uint32_t))
        self.slots = <uint32_t *>_map(capacity * sizeof(uint32_t))
        if self.slots == NULL:
            self.capacity = 0
            raise MemoryError()
        self.capacity = capacity
        self.low = <uint32_t>(capacity - 1)
        mask = capacity - 1
        with nogil:
            memset(self.slots, 0xff, capacity * sizeof(uint32_t))
            for e in range(self.n_keys):
                if self.keys[e * w] == 0:   # a hash 0 is new every time (never in the slots)
                    continue
                slot = <Py_ssize_t>(self.keys[e * w] & mask)
                while self.slots[slot] != _EMPTY:
                    slot = (slot + 1) & mask
                self.slots[slot] = _tag(self.keys[e * w], self.low) | <uint32_t>e
        return 0

    cdef int _scratch(self, Py_ssize_t n) except -1:
        """One message's scratch (distinct numbers, counts, counting table) for ``n`` tokens."""
        if n <= self.scratch_n:
            return 0
        free(self.uniq)
        free(self.x)
        self.uniq, self.x, self.scratch_n = NULL, NULL, 0
        n = max(n, 2 * self.scratch_n, 1024)
        _buffers(n + 2 * table_size(n), n, &self.uniq, &self.x)
        self.scratch_n = n
        return 0

    def count(self, streams, bint is_spam):
        """One message: ``streams[v]`` its token stream under variant ``v``
        (``hashes``, ``write_tokens``; the variants past ``len(streams)`` not
        counted), numbered (new tokens' strings written to the variant's
        table) and counted into the variant's partition row of its class.
        Returns a tuple of each variant's feature numbers of the stream's
        tokens (a memoryview of an int32 buffer, valid until the next call)."""
        cdef Py_ssize_t v, j, n, n_new, nv = self.n_variants, k, first, m
        cdef int32_t i, l, e, next_index
        cdef uint64_t h, mask
        cdef uint32_t s, tag, low
        cdef uint64_t *entry
        cdef int32_t *number
        cdef Py_ssize_t slot, w = self.stride
        cdef array.array hashes, out, fresh, local_of, touched, row
        cdef int32_t *o
        cdef int32_t *fp
        cdef const uint64_t *hp
        cdef int32_t *lo
        cdef int32_t *tc
        cdef double *r
        cdef list results = []
        if len(streams) > nv:
            raise ValueError(f"{len(streams)} streams for {nv} variants")
        if self.slots == NULL:
            raise ValueError("the hash index was given up")
        for v in range(len(streams)):
            stream = streams[v]
            hashes = stream.hashes
            if hashes.typecode != "Q":
                raise TypeError("a stream's hashes must be an array('Q')")
            n = len(hashes)
            out, fresh = self.out[v], self.new_positions[v]
            if len(out) < n:
                array.resize_smart(out, n)
                array.resize_smart(fresh, n)
            if n == 0:
                results.append(memoryview(out)[:0])
                continue
            next_index = self.n_features[v]
            if next_index > 0x7fffffff - n:
                raise ValueError(f"feature index {next_index} out of range")
            self._reserve(self.n_keys + n)
            self._scratch(n)
            o, fp = <int32_t *>out.data.as_ints, <int32_t *>fresh.data.as_ints
            hp = <const uint64_t *>hashes.data.as_ulonglongs
            n_new = 0
            mask = self.capacity - 1
            low = self.low
            with nogil:
                for j in range(n):
                    if j + _AHEAD < n:   # most probes miss the cache: a slot fetched ahead, then the entry it names
                        SPAMNB_PREFETCH(self.slots + <Py_ssize_t>(hp[j + _AHEAD] & mask))
                    if j + _AHEAD // 2 < n:
                        s = self.slots[<Py_ssize_t>(hp[j + _AHEAD // 2] & mask)]
                        if s != _EMPTY:
                            SPAMNB_PREFETCH(self.keys + <Py_ssize_t>(s & low) * w)
                    h = hp[j]
                    tag = _tag(h, low)
                    slot = <Py_ssize_t>(h & mask)
                    s = self.slots[slot]
                    e = -1
                    while s != _EMPTY:   # the slots are never full (fill <= 3/4)
                        if (s ^ tag) <= low and self.keys[<Py_ssize_t>(s & low) * w] == h:
                            e = <int32_t>(s & low)
                            break
                        slot = (slot + 1) & mask
                        s = self.slots[slot]
                    if e < 0 or h == 0:   # new to every variant (a hash 0 every time, never in the slots)
                        e = <int32_t>self.n_keys
                        self.n_keys += 1
                        entry = self.keys + <Py_ssize_t>e * w
                        entry[0] = h
                        number = <int32_t *>(entry + 1)
                        for k in range(nv):
                            number[k] = -1
                        if h != 0:
                            self.slots[slot] = tag | <uint32_t>e
                    number = <int32_t *>(self.keys + <Py_ssize_t>e * w + 1)
                    i = number[v]
                    if i < 0:   # new to this variant
                        i = next_index + <int32_t>n_new
                        number[v] = i
                        fp[n_new] = <int32_t>j
                        n_new += 1
                    o[j] = i
            if n_new:
                stream.write_tokens(fresh, n_new, self.blobs[v], self.offsets[v])
                self.n_features[v] = next_index + <int32_t>n_new
                if self.fresh_hashes is not None:
                    row = self.fresh_hashes[v]
                    first = len(row)
                    array.resize_smart(row, first + n_new)
                    for k in range(n_new):
                        row.data.as_ulonglongs[first + k] = hp[fp[k]]
            # the partition's compact rows (_add_local): local numbers of the tokens new to it
            local_of, touched = self.local_of[v], self.touched[v]
            first = len(local_of)
            if first < self.n_features[v]:
                array.resize_smart(local_of, max(self.n_features[v], first + (first >> 2) + 1024))
                memset(local_of.data.as_ints + first, 0xff, (len(local_of) - first) * sizeof(int32_t))
            m = self.n_touched[v]
            if len(touched) < m + n:
                first = len(touched)
                k = max(m + n, first + (first >> 2) + 1024)
                array.resize_smart(touched, k)
                for row in (self.ham[v], self.spam[v]):
                    array.resize_smart(row, k)
                    memset(row.data.as_doubles + first, 0, (k - first) * sizeof(double))
            row = self.spam[v] if is_spam else self.ham[v]
            lo, tc, r = <int32_t *>local_of.data.as_ints, <int32_t *>touched.data.as_ints, row.data.as_doubles
            with nogil:
                k = count_distinct(o, n, self.uniq, self.x, self.transforms[v], self.uniq + n, table_size(n),
                                   _LOG1P_SMALL)
                scale_to_length(self.x, k, self.lengths[v])
                m = _add_local(self.uniq, self.x, k, lo, tc, m, r)
                if self.local_out:   # each token's place in the partition (its entry just read: in the cache)
                    for j in range(n):
                        o[j] = lo[o[j]]
            self.n_touched[v] = m
            results.append(memoryview(out)[:n])
        return tuple(results)

    def partition(self, Py_ssize_t v):
        """Variant ``v``'s partition so far: ``(touched, ham, spam)``, its tokens'
        feature numbers in local order (int32) and their compact rows
        (float64), memoryviews of the counter's buffers: released before
        the next :meth:`count` or :meth:`clear_partition`."""
        self._variant(v)
        m = self.n_touched[v]
        return (memoryview(self.touched[v])[:m], memoryview(self.ham[v])[:m], memoryview(self.spam[v])[:m])

    def clear_partition(self, Py_ssize_t v):
        """Variant ``v``'s partition emptied (its rows zeros, its tokens unnumbered) for the next."""
        cdef Py_ssize_t j, m
        cdef array.array local_of = self.local_of[v]
        cdef array.array touched = self.touched[v]
        self._variant(v)
        m = self.n_touched[v]
        for j in range(m):
            (<int32_t *>local_of.data.as_ints)[touched.data.as_ints[j]] = -1
        memset((<array.array>self.ham[v]).data.as_doubles, 0, m * sizeof(double))
        memset((<array.array>self.spam[v]).data.as_doubles, 0, m * sizeof(double))
        self.n_touched[v] = 0

    def hashes(self, Py_ssize_t v):
        """Variant ``v``'s token hashes in its feature order: ``array('Q')``."""
        cdef Py_ssize_t e, w = self.stride
        cdef int32_t i
        cdef array.array out
        self._variant(v)
        out = array.clone(array.array("Q"), self.n_features[v], True)
        for e in range(self.n_keys):
            i = (<int32_t *>(self.keys + e * w + 1))[v]
            if i >= 0:
                out.data.as_ulonglongs[i] = self.keys[e * w]
        return out

    def take_hashes(self, Py_ssize_t v):
        """Variant ``v``'s hashes of the tokens it numbered since the last
        take, in its feature order (``array('Q')``, given up; the counter
        made with ``keep_hashes``)."""
        self._variant(v)
        if self.fresh_hashes is None:
            raise ValueError("the counter keeps no hashes (keep_hashes=False)")
        out, self.fresh_hashes[v] = self.fresh_hashes[v], array.array("Q")
        return out

    def strings(self, Py_ssize_t v):
        """Variant ``v``'s string table ``(blob, offsets)`` (the counter's own
        ``bytearray`` and ``array('Q')``, given up: the counter's left empty)."""
        self._variant(v)
        blob, offsets = self.blobs[v], self.offsets[v]
        self.blobs[v], self.offsets[v] = bytearray(), array.array("Q", [0])
        return blob, offsets

    def release(self):
        """Give up the hash index and every partition's buffers (after :meth:`hashes`)."""
        self._unmap_index()
        self.n_keys = 0
        self.out = self.new_positions = self.local_of = self.touched = self.ham = self.spam = None
