"""Compiled scoring of one message: the ``Scorer`` over one model (hash
lookup, sum of x_i log theta_ci, the evidence the verdict rule reads, each
text part's sum) and ``gather``, which reads a message's entries of a model
file with ``pread`` (``spamnb classify``'s mapped model).

Nothing here imports numpy: every array is any buffer (``array.array``, a
model file's bytes, numpy), taken with ``spamnb/buffers.pxd`` rather than as
a typed memoryview (whose utility code makes four types when the module
loads: ``spamnb classify``'s cold path), so a model file is used by
``spamnb classify`` without numpy being imported.  The hash index probe is
cimported from ``_index.pxd``, the counting of a message's features from
``_count.pxd``.  The hash index itself (``_index.pxi``: ``lookup``,
``insert``, ``rehash``, ``rehash_remap``, ``check_index``) and the model
file's checks (``_checks.pxi``: ``checksum64``, ``Checksum64``,
``check_range``, ``class_sums``, ``check_offsets``, ``check_utf8``) are
included at the end: one compiled module for a cold classify.  Bounds checks are off: the Scorer checks its buffers when it
is made, and callers go through ``spamnb.bayes.token_kernels``.
"""

from libc.math cimport INFINITY, NAN, exp as c_exp, fabs, isfinite as c_isfinite, isinf, isnan, log, log1p
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, qsort
from libc.string cimport memset

from cpython cimport array
from cpython.buffer cimport PyBuffer_Release

import array

from spamnb.buffers cimport FLOAT, SIGNED, UNSIGNED, length_of, take

from spamnb.bayes._count cimport (TRANSFORM_BINARY, TRANSFORM_LOG, TRANSFORM_RAW, count_distinct, length_scale,
                                  scale_to_length, table_size, transform)
from spamnb.bayes._index cimport _find_slot

# The transforms' codes (_count.pxd's), for Python: spamnb.bayes.token_kernels
# takes them from here, the module a classify loads (not _count).
COUNTS_RAW = TRANSFORM_RAW          # x_i = count of token i in the message
COUNTS_BINARY = TRANSFORM_BINARY    # x_i = 1 if token i occurs
COUNTS_LOG = TRANSFORM_LOG          # x_i = log(1 + count)


# math's exp, log and isfinite of one number, its results and errors (the same C library calls; OverflowError for
# an exp out of range, ValueError for the log of a number <= 0 or -inf), for the modules of a cold classify's
# path (spamnb.bayes.token_kernels gives them as exp, log, isfinite): the math module is a shared object of its own to load
INF = INFINITY


def math_exp(double x):
    """``math.exp(x)``."""
    cdef double r = c_exp(x)
    if isinf(r) and c_isfinite(x):
        raise OverflowError("math range error")
    return r


def math_log(double x):
    """``math.log(x)`` of one argument (a float, or an int a float holds)."""
    if isnan(x) or x > 0.0:
        return log(x)
    raise ValueError("math domain error")


def math_isfinite(double x):
    """``math.isfinite(x)``."""
    return bool(c_isfinite(x))


# log1p of the small counts (count_distinct's transform), as _count fills its own
cdef double _LOG1P_SMALL[64]


cdef void _fill_log1p_small() noexcept:
    cdef int k
    for k in range(64):   # a C loop (the module body's loop set a global each turn)
        _LOG1P_SMALL[k] = log1p(<double>k)


_fill_log1p_small()

cdef extern from *:
    """
    #define _spamnb_prefetch(p) __builtin_prefetch((const void *)(p))
    """
    void _prefetch "_spamnb_prefetch"(const void *p) noexcept nogil


# --------------------------------------------------------------------------
# scoring one message
# --------------------------------------------------------------------------
cdef inline bint _ranks_before(double w, int32_t i, double other_w, int32_t other_i) noexcept nogil:
    """Evidence order: larger |weight| first, then the smaller feature index."""
    return fabs(w) > fabs(other_w) or (fabs(w) == fabs(other_w) and i < other_i)


cdef inline double _log_at(const double *base, Py_ssize_t n_base, const double *tail, Py_ssize_t stride,
                           Py_ssize_t c, int32_t i) noexcept nogil:
    """log(N_ci + alpha): from the model's flat logs, or from the tail of the tokens new since."""
    return base[c * n_base + i] if i < n_base else tail[c * stride + i - n_base]


cdef Py_ssize_t _message_weights(const int32_t *idx, Py_ssize_t n, int32_t *uniq, double *x, int counts,
                                 int32_t *table, Py_ssize_t cap, double length, Py_ssize_t pairs_start,
                                 double pair_weight) noexcept nogil:
    """A message's distinct features and their values (``count_distinct``, then
    ``scale_to_length`` over them all); with ``0 <= pairs_start < n`` and a
    ``pair_weight`` other than 1, the values of the features from
    ``idx[pairs_start:]`` on (the word pairs, which come after every other
    token) are then multiplied by ``pair_weight``.  Counted in two runs, words
    then pairs: the same features in the same order as one run (first
    occurrence), so the same values bit for bit before the weighting."""
    cdef Py_ssize_t m, m_pairs, k
    if pairs_start < 0 or pairs_start >= n or pair_weight == 1.0:
        m = count_distinct(idx, n, uniq, x, counts, table, cap, _LOG1P_SMALL)
        scale_to_length(x, m, length)
        return m
    m = count_distinct(idx, pairs_start, uniq, x, counts, table, table_size(pairs_start), _LOG1P_SMALL)
    m_pairs = count_distinct(idx + pairs_start, n - pairs_start, uniq + m, x + m, counts, table,
                             table_size(n - pairs_start), _LOG1P_SMALL)
    scale_to_length(x, m + m_pairs, length)
    for k in range(m, m + m_pairs):
        x[k] *= pair_weight
    return m + m_pairs


cdef Py_ssize_t _look_up(const uint64_t *keys, uint64_t mask, const int32_t *values, const uint64_t *hashes,
                         Py_ssize_t n, int32_t *idx, Py_ssize_t n_features, int *damaged) noexcept nogil:
    """Each of the ``n`` ``hashes``' feature index into ``idx`` (-1: unknown),
    in the hash index ``keys``/``values`` of ``mask + 1`` slots, its lines
    prefetched a few tokens ahead (a large model's index does not fit in the
    cache); ``damaged[0]`` set to 1 by an entry out of range (a damaged file
    mapped unchecked: that token taken as unknown).  Returns the number of
    known tokens."""
    cdef Py_ssize_t j, slot, n_known = 0
    for j in range(n):
        if j + 8 < n:
            _prefetch(keys + (hashes[j + 8] & mask))
            _prefetch(values + (hashes[j + 8] & mask))
        slot = _find_slot(keys, mask, hashes[j])
        if keys[slot] == 0 or keys[slot] != hashes[j]:
            idx[j] = -1
        elif values[slot] >= n_features:
            damaged[0] = 1
            idx[j] = -1
        else:
            idx[j] = values[slot]
            n_known += 1
    return n_known


# What the scorer says of a hash index entry or a log-count no model is written
# with (a damaged file mapped without its full check: spamnb.persistence.store.map_model).
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
    patched in place, and the tokens a journal or a learn added), class c's
    from ``tail[c * tail_stride]`` on (default, -1: n_features - n_base, the
    classes one after the other; larger: a growing buffer's capacity, so a
    learn adds tokens without moving the logs); ``pair_weight``: with a
    message's ``pairs_start`` (its token stream's: the word pairs come after
    every other token), each word pair's value, after the scaling to length,
    is multiplied by it (1: pairs count as any token; ``spamnb.estimator.defaults``
    says why a learned model halves them).  The buffers are taken once
    here, so scoring a message costs no buffer set-up (the ``spamnb
    classify`` and ``SpamFilter.score`` path).
    """
    cdef Py_buffer keys_view, values_view, log_view, tail_view
    cdef int n_views          # how many of the four views (in that order) are held
    cdef const uint64_t *keys
    cdef const int32_t *values
    cdef const double *log_count   # NULL when empty
    cdef const double *tail        # NULL when None or empty
    cdef Py_ssize_t capacity
    cdef Py_ssize_t n_features, n_classes, n_base, tail_stride
    cdef double *norm
    cdef double *prior
    cdef int counts
    cdef double length
    cdef readonly double pair_weight

    def __cinit__(self):
        self.norm = NULL
        self.prior = NULL
        self.n_views = 0

    def __init__(self, keys, values, log_count, Py_ssize_t n_features, log_norm, log_prior, int counts,
                 double length=0.0, tail=None, double pair_weight=1.0, Py_ssize_t tail_stride=-1):
        self._release()
        take(&self.keys_view, keys, UNSIGNED, 8, False, "uint64_t")
        self.n_views = 1
        take(&self.values_view, values, SIGNED, 4, False, "int32_t")
        self.n_views = 2
        take(&self.log_view, log_count, FLOAT, 8, False, "double")
        self.n_views = 3
        if tail is not None:
            take(&self.tail_view, tail, FLOAT, 8, False, "double")
            self.n_views = 4
        self._set_up(n_features, log_norm, log_prior, counts, length, tail is not None, pair_weight, tail_stride)

    cdef int _set_up(self, Py_ssize_t n_features, log_norm, log_prior, int counts, double length, bint has_tail,
                     double pair_weight, Py_ssize_t tail_stride) except -1:
        cdef Py_ssize_t c, n_classes = len(log_prior)
        cdef Py_ssize_t n_keys = length_of(&self.keys_view), n_log = length_of(&self.log_view)
        cdef Py_ssize_t n_tail = length_of(&self.tail_view) if has_tail else 0
        cdef Py_ssize_t n_base = n_log // n_classes if n_classes > 0 else 0
        if n_keys == 0 or (n_keys & (n_keys - 1)) != 0 or length_of(&self.values_view) != n_keys:
            raise ValueError("hash index capacity is not a power of two")
        if not has_tail:
            n_base = n_features
        if tail_stride < 0:
            tail_stride = n_features - n_base
        if (n_classes < 1 or len(log_norm) != n_classes or not 0 <= n_base <= n_features
                or n_log != n_classes * n_base
                or (has_tail and (tail_stride < n_features - n_base
                                  or n_tail < (n_classes - 1) * tail_stride + n_features - n_base
                                  or (tail_stride == n_features - n_base
                                      and n_tail != n_classes * tail_stride)))):
            raise ValueError("log_norm, log_prior and log_count disagree on the number of classes")
        if counts not in (TRANSFORM_RAW, TRANSFORM_BINARY, TRANSFORM_LOG):
            raise ValueError(f"unknown counts transform {counts}")
        if not 0.0 <= pair_weight < INFINITY:
            raise ValueError(f"pair_weight must be a finite number >= 0, got {pair_weight!r}")
        self.norm = <double *>malloc(n_classes * sizeof(double))
        self.prior = <double *>malloc(n_classes * sizeof(double))
        if self.norm == NULL or self.prior == NULL:
            raise MemoryError()
        for c in range(n_classes):
            self.norm[c] = log_norm[c]
            self.prior[c] = log_prior[c]
        self.keys = <const uint64_t *>self.keys_view.buf
        self.values = <const int32_t *>self.values_view.buf
        self.capacity = n_keys
        self.log_count = <const double *>self.log_view.buf if n_log else NULL
        self.tail = <const double *>self.tail_view.buf if n_tail else NULL
        self.n_features, self.n_classes, self.counts, self.n_base = n_features, n_classes, counts, n_base
        self.tail_stride = tail_stride
        self.length = length
        self.pair_weight = pair_weight
        return 0

    cdef void _release(self) noexcept:
        if self.n_views >= 4:
            PyBuffer_Release(&self.tail_view)
        if self.n_views >= 3:
            PyBuffer_Release(&self.log_view)
        if self.n_views >= 2:
            PyBuffer_Release(&self.values_view)
        if self.n_views >= 1:
            PyBuffer_Release(&self.keys_view)
        self.n_views = 0
        free(self.norm)
        free(self.prior)
        self.norm = NULL
        self.prior = NULL

    def __dealloc__(self):
        self._release()

    def score(self, hashes, Py_ssize_t n_evidence=0, Py_ssize_t pairs_start=-1):
        """``(jll, evidence, n_tokens, n_known, spam_evidence, ham_evidence)`` of
        a message's token ``hashes``.

        ``jll`` a list of n_classes floats (unknown tokens are ignored),
        ``evidence`` a list of up to ``n_evidence`` ``(feature_index, weight)``
        pairs with the largest |weight|, weight = x_i (log theta_1i - log
        theta_0i) (two classes; empty otherwise); ``spam_evidence`` and
        ``ham_evidence`` the sums of the positive and of the negative weights
        of all known tokens (two classes; 0.0 otherwise): what the verdict rule
        (spamnb.estimator.verdict) reads besides the log-odds.
        """
        cdef Py_buffer view
        take(&view, hashes, UNSIGNED, 8, False, "uint64_t")
        try:
            return self._score(<const uint64_t *>view.buf, length_of(&view), n_evidence, pairs_start)
        finally:
            PyBuffer_Release(&view)

    cdef _score(self, const uint64_t *hashes, Py_ssize_t n, Py_ssize_t n_evidence, Py_ssize_t pairs_start):
        cdef Py_ssize_t n_classes = self.n_classes, n_features = self.n_features
        cdef Py_ssize_t j, c, k, m, e, n_ev = 0, n_known = 0, size, cap
        cdef uint64_t mask = self.capacity - 1
        cdef Py_ssize_t slot
        cdef int32_t *idx = NULL
        cdef int32_t *uniq = NULL
        cdef double *x = NULL
        cdef double *jll = NULL
        cdef int32_t *ev_idx = NULL
        cdef double *ev_w = NULL
        cdef double w, spam_ev = 0.0, ham_ev = 0.0
        cdef const double *log_count = self.log_count
        cdef const double *tail = self.tail
        cdef Py_ssize_t n_base = self.n_base, n_tail = self.tail_stride
        cdef double lc0, lc1
        cdef int damaged = 0
        if n_evidence < 0:
            n_evidence = 0
        if n_evidence > n:  # never more evidence than tokens (and no huge allocation)
            n_evidence = n
        if n_classes != 2:
            n_evidence = 0
        size = n if n > 0 else 1
        cap = table_size(size)
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
                m = _message_weights(idx, n, uniq, x, self.counts, uniq + size, cap, self.length, pairs_start,
                                     self.pair_weight)
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

    def log_odds_many(self, hashes, bounds):
        """``jll[1] - jll[0]`` of ``score(hashes[bounds[j]:bounds[j + 1]])`` for
        each message ``j``, bit for bit, in one call (two classes; the held-out
        pass of ``spamnb train`` scoring a fold's messages): an ``array('d')``.
        ValueError when ``bounds`` do not fit ``hashes``."""
        cdef Py_buffer hashes_view, bounds_view
        take(&hashes_view, hashes, UNSIGNED, 8, False, "uint64_t")
        try:
            take(&bounds_view, bounds, SIGNED, 8, False, "int64_t")
            try:
                return self._log_odds_many(<const uint64_t *>hashes_view.buf, length_of(&hashes_view),
                                           <const int64_t *>bounds_view.buf, length_of(&bounds_view))
            finally:
                PyBuffer_Release(&bounds_view)
        finally:
            PyBuffer_Release(&hashes_view)

    cdef _log_odds_many(self, const uint64_t *hashes, Py_ssize_t n_hashes, const int64_t *bounds,
                        Py_ssize_t n_bounds):
        cdef Py_ssize_t n_messages = n_bounds - 1, j, i, k, c, n, m, most = 1
        cdef int64_t a, b
        cdef uint64_t mask = self.capacity - 1
        cdef Py_ssize_t slot, n_features = self.n_features
        cdef int32_t *idx = NULL
        cdef int32_t *uniq = NULL
        cdef double *x = NULL
        cdef double jll[2]
        cdef double lc
        cdef const double *log_count = self.log_count
        cdef const double *tail = self.tail
        cdef Py_ssize_t n_base = self.n_base, n_tail = n_features - n_base, size, cap
        cdef int damaged = 0
        cdef array.array out
        cdef double *view
        if self.n_classes != 2:
            raise ValueError("log_odds_many scores two classes")
        if n_messages < 0:
            raise ValueError("bounds hold one entry more than the messages")
        for j in range(n_messages):
            a, b = bounds[j], bounds[j + 1]
            if a < 0 or b < a or b > n_hashes:
                raise ValueError(f"message {j}: bounds {a}..{b} outside {n_hashes} hashes")
            if b - a > most:
                most = b - a
        out = array.array("d", bytes(8 * n_messages))
        if n_messages == 0:
            return out
        view = out.data.as_doubles
        size = most
        idx = <int32_t *>malloc((2 * size + 2 * table_size(size)) * sizeof(int32_t))   # idx, uniq, the table
        x = <double *>malloc(size * sizeof(double))
        try:
            if idx == NULL or x == NULL:
                raise MemoryError()
            uniq = idx + size
            with nogil:
                for j in range(n_messages):
                    a, n = bounds[j], bounds[j + 1] - bounds[j]
                    for i in range(n):   # as score: each hash looked up, -1 unknown
                        slot = _find_slot(self.keys, mask, hashes[a + i])
                        if self.keys[slot] == 0 or self.keys[slot] != hashes[a + i]:
                            idx[i] = -1
                        elif self.values[slot] >= n_features:
                            damaged = 1
                            idx[i] = -1
                        else:
                            idx[i] = self.values[slot]
                    cap = table_size(n if n > 0 else 1)
                    m = _message_weights(idx, n, uniq, x, self.counts, uniq + size, cap, self.length, -1,
                                         self.pair_weight)
                    for c in range(2):
                        jll[c] = self.prior[c]
                    for k in range(m):
                        for c in range(2):
                            lc = _log_at(log_count, n_base, tail, n_tail, c, uniq[k])
                            if not fabs(lc) < INFINITY:
                                damaged = 1
                            jll[c] += x[k] * (lc - self.norm[c])
                    view[j] = jll[1] - jll[0]
            if damaged:
                raise ValueError(_DAMAGED)
            return out
        finally:
            free(idx)
            free(x)

    def pair_sums(self, hashes, Py_ssize_t pairs_start=-1):
        """``(jll_words, jll_all)``: ``score(hashes, 0, pairs_start)[0]`` of a
        Scorer at pair weight 0 and of one at pair weight 1 over the same model,
        bit for bit, in one call (this Scorer's own ``pair_weight`` takes no
        part): each hash looked up once (prefetched, as ``verdict_sums``), the
        message's features counted and summed once per weight, in the order
        ``score`` counts and sums them.  A learned model's two held-out scores
        (``spamnb.estimator.variants.pair_scores``).  Two classes only."""
        cdef Py_buffer view
        take(&view, hashes, UNSIGNED, 8, False, "uint64_t")
        try:
            return self._pair_sums(<const uint64_t *>view.buf, length_of(&view), pairs_start)
        finally:
            PyBuffer_Release(&view)

    cdef _pair_sums(self, const uint64_t *hashes, Py_ssize_t n, Py_ssize_t pairs_start):
        cdef Py_ssize_t n_features = self.n_features
        cdef Py_ssize_t k, m, w, size, cap
        cdef int32_t *idx = NULL
        cdef int32_t *uniq = NULL
        cdef double *x = NULL
        cdef double jll[4]   # the class sums at weight 0, then 1
        cdef double lc0, lc1   # a token's logs
        cdef int damaged = 0
        cdef Py_ssize_t n_base = self.n_base, n_tail = self.tail_stride
        cdef const double *log_count = self.log_count
        cdef const double *tail = self.tail
        if self.n_classes != 2:
            raise ValueError("pair_sums needs two classes")
        size = n if n > 0 else 1
        cap = table_size(size)
        x = <double *>malloc(size * sizeof(double))   # the features' values
        idx = <int32_t *>malloc((2 * size + 2 * cap) * sizeof(int32_t))   # idx, uniq, the counting table
        try:
            if x == NULL or idx == NULL:
                raise MemoryError()
            uniq = idx + size
            with nogil:
                _look_up(self.keys, self.capacity - 1, self.values, hashes, n, idx, n_features, &damaged)   # as score: -1 unknown
                for w in range(2):   # pair weight 0, then 1: score's counting and sums at each
                    m = _message_weights(idx, n, uniq, x, self.counts, uniq + size, cap, self.length, pairs_start,
                                         <double>w)
                    jll[2 * w] = self.prior[0]
                    jll[2 * w + 1] = self.prior[1]
                    for k in range(m):
                        lc0 = _log_at(log_count, n_base, tail, n_tail, 0, uniq[k])
                        lc1 = _log_at(log_count, n_base, tail, n_tail, 1, uniq[k])
                        if not (fabs(lc0) < INFINITY and fabs(lc1) < INFINITY):   # NaN or infinite: never written so
                            damaged = 1
                        jll[2 * w] += x[k] * (lc0 - self.norm[0])
                        jll[2 * w + 1] += x[k] * (lc1 - self.norm[1])
            if damaged:
                raise ValueError(_DAMAGED)
            return [jll[0], jll[1]], [jll[2], jll[3]]
        finally:
            free(idx)
            free(x)

    def verdict_sums(self, hashes, list regions, bint truncated=False, Py_ssize_t pairs_start=-1):
        """``(log_odds, n_tokens, n_known, spam_evidence, ham_evidence, part_max)``
        of a message's token ``hashes``: what ``score(hashes, 0)`` and
        ``spamnb.estimator.verdict.part_max(self, hashes, regions, truncated)``
        give (log_odds = jll[1] - jll[0]), bit for bit, with each hash looked
        up once (the lookups are prefetched a few tokens ahead: the hash
        index of a large model does not fit in the cache).

        ``regions`` a list of ``(start, end)`` token ranges (a text part each,
        sliced as Python slices them); ``part_max`` the largest sum of a
        region's weights when scored on its own, -inf without regions, +inf
        when ``truncated`` and without regions.  Two classes only."""
        cdef Py_buffer view
        take(&view, hashes, UNSIGNED, 8, False, "uint64_t")
        try:
            return self._verdict_sums(<const uint64_t *>view.buf, length_of(&view), regions, truncated,
                                      pairs_start)
        finally:
            PyBuffer_Release(&view)

    cdef _verdict_sums(self, const uint64_t *hashes, Py_ssize_t n, list regions, bint truncated,
                       Py_ssize_t pairs_start):
        cdef Py_ssize_t n_features = self.n_features
        cdef Py_ssize_t k, m, n_known = 0, size, cap, start, end, r, n_regions = len(regions)
        cdef int32_t *idx = NULL
        cdef int32_t *uniq = NULL
        cdef int32_t *table = NULL
        cdef Py_ssize_t *bounds = NULL
        cdef double *x = NULL
        cdef double w, spam_ev = 0.0, ham_ev = 0.0, part_spam, part_ham, best, jll0, jll1
        cdef double norm0, norm1
        cdef const double *log_count = self.log_count
        cdef const double *tail = self.tail
        cdef Py_ssize_t n_base = self.n_base, n_tail = self.tail_stride
        cdef double lc0, lc1
        cdef int damaged = 0
        if self.n_classes != 2:
            raise ValueError("verdict_sums needs two classes")
        norm0, norm1 = self.norm[0], self.norm[1]
        size = n if n > 0 else 1
        cap = table_size(size)
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
                n_known = _look_up(self.keys, self.capacity - 1, self.values, hashes, n, idx, n_features, &damaged)
                # the whole message, as score(): jll and the evidence sums
                m = _message_weights(idx, n, uniq, x, self.counts, table, cap, self.length, pairs_start,
                                     self.pair_weight)
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
                        m = count_distinct(idx + start, end - start, uniq, x, self.counts, table,
                                           table_size(end - start), _LOG1P_SMALL)
                        scale_to_length(x, m, self.length)
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


cdef size_t _pread_some(int fd, void *buf, size_t count, long offset) noexcept nogil:
    """The bytes read of ``count`` at ``offset`` (fewer at the file's end or on an error)."""
    cdef ssize_t got
    cdef size_t done = 0
    while done < count:
        got = pread(fd, <char *>buf + done, count - done, offset + <long>done)
        if got <= 0:
            break
        done += <size_t>got
    return done


cdef int _pread_all(int fd, void *buf, size_t count, long offset) noexcept nogil:
    """1 when ``count`` bytes were read at ``offset``, 0 on a short read or an error."""
    return _pread_some(fd, buf, count, offset) == count


cdef enum:
    _SPAN = 512   # gather: log-counts this many entries apart at most (4 KiB) are read in one pread


def gather(int fd, Py_ssize_t keys_at, Py_ssize_t capacity, Py_ssize_t values_at, Py_ssize_t logs_at,
           Py_ssize_t n_features, Py_ssize_t n_classes, hashes):
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
    cdef Py_buffer view
    take(&view, hashes, UNSIGNED, 8, False, "uint64_t")
    try:
        return _gather(fd, keys_at, capacity, values_at, logs_at, n_features, n_classes,
                       <const uint64_t *>view.buf, length_of(&view))
    finally:
        PyBuffer_Release(&view)


cdef _gather(int fd, Py_ssize_t keys_at, Py_ssize_t capacity, Py_ssize_t values_at, Py_ssize_t logs_at,
             Py_ssize_t n_features, Py_ssize_t n_classes, const uint64_t *hashes, Py_ssize_t n):
    cdef Py_ssize_t j, k, m = 0, cap = table_size(n if n > 0 else 1)
    cdef uint64_t mask = <uint64_t>capacity - 1, h, slot, probes, block[8], key = 0
    cdef uint32_t tmask = <uint32_t>(cap - 1), t
    cdef uint64_t *seen = NULL
    cdef int64_t *order
    cdef Py_ssize_t *short_at = NULL
    cdef double span[_SPAN]
    cdef Py_ssize_t base
    cdef size_t got
    cdef uint64_t *sf
    cdef int32_t *si
    cdef double *lg
    cdef array.array found, index, sorted_found, sorted_index, logs
    cdef int32_t v
    cdef int status = 0    # 1 short read, 2 out of range, 3 not finite
    cdef Py_ssize_t b, first
    if capacity <= 0 or capacity & (capacity - 1) or n_classes < 1 or n_features < 0:
        raise ValueError("bad hash index layout")
    found = array.array("Q", bytes(8 * n))
    index = array.array("i", bytes(4 * n))
    cdef uint64_t *f = <uint64_t *>found.data.as_ulonglongs
    cdef int32_t *ix = <int32_t *>index.data.as_ints
    seen = <uint64_t *>malloc(cap * sizeof(uint64_t))
    short_at = <Py_ssize_t *>malloc(n_classes * sizeof(Py_ssize_t))
    if seen == NULL or short_at == NULL:
        free(seen)
        free(short_at)
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
            sf = <uint64_t *>sorted_found.data.as_ulonglongs
            si = <int32_t *>sorted_index.data.as_ints
            lg = logs.data.as_doubles
            with nogil:
                for k in range(m):
                    j = <Py_ssize_t>(order[k] & <int64_t>0xFFFFFFFF)
                    sf[k] = f[j]
                    si[k] = ix[j]
                # each class's log-counts of the tokens, in the order of their feature indices: the
                # entries within _SPAN entries of a run's first, in one pread (not one a token and class);
                # short_at[j]: the first token whose entry of class j could not be read (m: none)
                for j in range(n_classes):
                    short_at[j] = m
                    k = 0
                    while k < m and short_at[j] == m:
                        b = k + 1
                        while b < m and si[b] - si[k] < _SPAN:
                            b += 1
                        base = si[k]
                        got = _pread_some(fd, span, 8 * <size_t>(si[b - 1] - base + 1),
                                          logs_at + 8 * (j * n_features + base))
                        while k < b:
                            if 8 * <size_t>(si[k] - base + 1) > got:
                                short_at[j] = k
                                break
                            lg[j * m + k] = span[si[k] - base]
                            k += 1
                # checked in the order of the reads one entry at a time: token by token, class by class
                for k in range(m):
                    for j in range(n_classes):
                        if k >= short_at[j]:
                            status = 1
                            break
                        if not fabs(lg[j * m + k]) < INFINITY:
                            status = 3
                            break
                    if status:
                        break
    finally:
        free(seen)
        free(short_at)
    if status == 1:
        raise ValueError("the model file could not be read (cut short while in use?)")
    if status:
        raise ValueError(_DAMAGED)
    return sorted_found, sorted_index, logs


cdef int _compare_int64(const void *a, const void *b) noexcept nogil:
    cdef int64_t x = (<const int64_t *>a)[0], y = (<const int64_t *>b)[0]
    return (x > y) - (x < y)


# --------------------------------------------------------------------------
# a journal's learns, for one message's tokens (spamnb.persistence.journal_view)
# --------------------------------------------------------------------------
cdef inline uint32_t _probe(const int32_t *table, const uint64_t *keys, uint32_t mask, uint64_t h) noexcept nogil:
    """The slot of ``table`` (entries: places in ``keys``, -1 empty) that holds ``h``, or the empty one where it goes."""
    cdef uint32_t t = <uint32_t>(h ^ (h >> 32)) & mask
    while table[t] != -1 and keys[table[t]] != h:
        t = (t + 1) & mask
    return t


cdef inline bint _file_counts(int fd, Py_ssize_t counts_at, Py_ssize_t n_base, const int32_t *index, double *rows,
                              unsigned char *state, Py_ssize_t m, Py_ssize_t w, int c) noexcept nogil:
    """Wanted token ``w``'s count in class ``c`` starts at the model file's (``pread``
    once, when a learn of that class first has it: a class no learn of it
    changed keeps the file's log, never read here; none for a token the file
    lacks); False: a short read."""
    if state[w] & (8 << c):
        return True
    state[w] |= 8 << c
    if index[w] < 0:
        return True
    return _pread_all(fd, &rows[c * m + w], 8, counts_at + 8 * (c * n_base + index[w]))


cdef inline Py_ssize_t _learn_values(const uint64_t *hashes, Py_ssize_t n, int counts, double length, int32_t *table,
                                     uint64_t *distinct, int64_t *at, double *x, double *scale) noexcept nogil:
    """A learn's ``n`` token ``hashes`` counted as ``_count.add_counts_split`` counts
    a message: its distinct tokens in the order they first occur (``distinct``,
    their first places ``at``, their values ``x``: counts transformed, then
    scaled to ``length``, the factor in ``scale``); returns how many.  The
    buffers have room for ``n`` entries, ``table`` for ``table_size(n)``."""
    cdef Py_ssize_t cap = table_size(n), j, k = 0
    cdef uint32_t mask = <uint32_t>(cap - 1), t
    for j in range(cap):
        table[j] = -1
    for j in range(n):   # distinct tokens in order of first occurrence (count_distinct's)
        t = _probe(table, distinct, mask, hashes[j])
        if table[t] != -1:
            x[table[t]] += 1.0
            continue
        table[t], distinct[k], at[k], x[k] = <int32_t>k, hashes[j], j, 1.0
        k += 1
    for j in range(k):
        x[j] = transform(x[j], counts, _LOG1P_SMALL)
    scale[0] = length_scale(x, k, length)
    if scale[0] != 1.0:   # scale_to_length's
        for j in range(k):
            x[j] *= scale[0]
    return k


def learn_sums(hashes, int counts, double length):
    """``(sum, scale)`` of a learned message's token ``hashes`` (uint64, one per
    occurrence): its values (each distinct token's count transformed by
    ``counts``, scaled to ``length`` by ``scale``) summed in the order the
    tokens first occur, what a learn adds to its class total.  What a journal
    records beside the learn (``spamnb.persistence.deltas.encode_learn_sums``)
    so that :func:`journal_rows` need not count it again, computed by the
    very loop that counts it there."""
    cdef Py_buffer v
    cdef Py_ssize_t n, k, j
    cdef double s = 0.0, scale = 1.0
    cdef int32_t *table = NULL
    cdef uint64_t *distinct = NULL
    cdef int64_t *at = NULL
    cdef double *x = NULL
    if counts not in (TRANSFORM_RAW, TRANSFORM_BINARY, TRANSFORM_LOG):
        raise ValueError(f"unknown counts transform {counts}")
    take(&v, hashes, UNSIGNED, 8, False, b"uint64_t")
    try:
        n = length_of(&v)
        table = <int32_t *>malloc(table_size(n) * sizeof(int32_t))
        distinct = <uint64_t *>malloc((n + 1) * sizeof(uint64_t))
        at = <int64_t *>malloc((n + 1) * sizeof(int64_t))
        x = <double *>malloc((n + 1) * sizeof(double))
        if table == NULL or distinct == NULL or at == NULL or x == NULL:
            raise MemoryError()
        with nogil:
            k = _learn_values(<const uint64_t *>v.buf, n, counts, length, table, distinct, at, x, &scale)
            for j in range(k):
                s += x[j]
    finally:
        free(table)
        free(distinct)
        free(at)
        free(x)
        PyBuffer_Release(&v)
    return s, scale


def journal_rows(int fd, Py_ssize_t counts_at, Py_ssize_t n_base, hashes, bounds, classes, wanted, index,
                 int counts, double length, double alpha, double total_ham, double total_spam, logs, first,
                 file_logs=None, sums=None, places=None, source=None):
    """A journal's learns put through for the tokens of one message alone.

    ``hashes`` (uint64): every learn's token hashes, one learn after the
    other; learn ``l`` is ``hashes[bounds[l]:bounds[l + 1]]`` (``bounds``
    int64, one more than the learns), of class ``classes[l]`` (uint8, 0 ham
    or 1 spam).  ``wanted`` (uint64): the message's distinct hashes, and
    ``index`` (int32, as long) each one's feature index in the model file, -1
    for one the file does not hold.  Each learn's distinct tokens are
    counted in the order they first occur, transformed (``counts``), scaled
    to ``length`` and summed in that order, as ``_count.add_counts_split``
    counts a learn: the class totals ``total_ham``, ``total_spam`` change by
    those sums, learn by learn.  A wanted token's count starts at the model
    file's (``pread`` at ``counts_at``, class-major over ``n_base``
    features, read when a learn first has it) and each learn of it adds its
    value, in the same order.  Written: ``logs`` (float64, class-major, two
    rows as long as ``wanted``) log(count + alpha) of each count a learn
    changed, NaN where none did; ``first`` (int64, as long as ``wanted``)
    each token's first position in ``hashes``, -1 when no learn has it.
    With ``file_logs`` (float64, class-major, two rows as long as the
    first ``n`` wanted tokens: the model file's logs of those, which the
    file holds), each of those ``n`` a learn left unchanged gets the file's
    log in ``logs`` instead of NaN (the message's logs, merged here, not
    by a loop per token in Python).  With ``sums`` (float64, two per learn:
    the sum of its values and the factor :func:`learn_sums` gives, as its
    journal record keeps them; NaN, NaN for a learn that has none), a learn
    with its sums is not counted again: its sum goes to its class total and
    only the wanted tokens' counts in it are transformed and scaled, to the
    same bits.  With ``places`` (int64, one per learn), the learns' hashes are
    not one after the other in ``hashes`` but where each starts there (the
    journal's bytes, read in place: ``checks.journal_learns`` with a base),
    learn ``l``'s ``bounds[l + 1] - bounds[l]`` hashes from ``places[l]``;
    the positions in ``first`` are still those of the learns' hashes one after the other.
    With ``source`` (``(fd, buffer, spans, learns)``: the journal's
    file, a writable bytearray, ``checks.journal_scan``'s spans and learns) and ``places`` from that scan, the learns' hashes are
    read from the file through ``buffer`` (``hashes`` unused: no memory the
    journal's size), each record's head checked again as it is read (its
    length, place and checksum those the scan checked: other records written
    in place meanwhile, or a journal cut short, are an OSError, never other
    counts; its payload is not checksummed again, 0.55 M instructions on a
    664 KiB journal: bytes changed in place under an unchanged head, within
    the moment between the scan and the score, are read as a damaged
    file's are, bounded).
    Returns the two totals.  The caller (``spamnb.bayes.token_kernels``)
    checks the lengths; bounds out of order, a class or an index out of
    range or a short read raise ValueError."""
    cdef Py_buffer v[13]
    cdef int held = 0, k
    cdef _Window win
    cdef _Window *window = NULL
    cdef int source_fd = -1
    memset(&win, 0, sizeof(win))
    if source is not None:
        source_fd, buffer, spans, learns = source
        if places is None:
            raise ValueError("journal_rows: a source without the learns' places")
    else:
        buffer, spans, learns = bytearray(64), array.array("q"), array.array("q")
    try:
        for obj, kind, size, writable, what in ((hashes, UNSIGNED, 8, False, b"uint64_t"),
                                                (bounds, SIGNED, 8, False, b"int64_t"),
                                                (classes, UNSIGNED, 1, False, b"uint8_t"),
                                                (wanted, UNSIGNED, 8, False, b"uint64_t"),
                                                (index, SIGNED, 4, False, b"int32_t"),
                                                (logs, FLOAT, 8, True, b"double"),
                                                (first, SIGNED, 8, True, b"int64_t"),
                                                (file_logs if file_logs is not None else array.array("d"), FLOAT, 8, False,
                                                 b"double"),
                                                (sums if sums is not None else array.array("d"), FLOAT, 8, False,
                                                 b"double"),
                                                (places if places is not None else array.array("q"), SIGNED, 8, False,
                                                 b"int64_t"),
                                                (buffer, UNSIGNED, 1, True, b"uint8_t"),
                                                (spans, SIGNED, 8, False, b"int64_t"),
                                                (learns, SIGNED, 8, False, b"int64_t")):
            take(&v[held], obj, kind, size, writable, what)
            held += 1
        if file_logs is not None and (length_of(&v[7]) % 2 or length_of(&v[7]) > length_of(&v[5])):
            raise ValueError("journal_rows: the file's logs do not fit the tokens asked")
        if sums is not None and length_of(&v[8]) != 2 * (length_of(&v[1]) - 1):
            raise ValueError("journal_rows: the learns' sums do not match the learns")
        if places is not None and length_of(&v[9]) != length_of(&v[1]) - 1:
            raise ValueError("journal_rows: the learns' places do not match the learns")
        if source is not None:
            if (length_of(&v[10]) < 64 or length_of(&v[11]) % 3
                    or length_of(&v[12]) != LEARN_FIELDS * (length_of(&v[1]) - 1)):
                raise ValueError("journal_rows: the source does not match the learns")
            win.fd, win.buf, win.cap, win.start = source_fd, <uint8_t *>v[10].buf, length_of(&v[10]), -1
            window = &win
        return _journal_rows(fd, counts_at, n_base, <const uint64_t *>v[0].buf, length_of(&v[0]),
                             <const int64_t *>v[1].buf, length_of(&v[1]), <const unsigned char *>v[2].buf,
                             length_of(&v[2]), <const uint64_t *>v[3].buf, length_of(&v[3]),
                             <const int32_t *>v[4].buf, length_of(&v[4]), counts, length, alpha,
                             total_ham, total_spam, <double *>v[5].buf, length_of(&v[5]),
                             <int64_t *>v[6].buf, length_of(&v[6]),
                             <const double *>v[7].buf if file_logs is not None else NULL, length_of(&v[7]) // 2,
                             <const double *>v[8].buf if sums is not None else NULL,
                             <const int64_t *>v[9].buf if places is not None else NULL, window,
                             <const int64_t *>v[11].buf, length_of(&v[11]) // 3, <const int64_t *>v[12].buf)
    finally:
        free(win.big)
        for k in range(held):
            PyBuffer_Release(&v[k])


cdef _journal_rows(int fd, Py_ssize_t counts_at, Py_ssize_t n_base, const uint64_t *hashes, Py_ssize_t n_hashes,
                   const int64_t *bounds, Py_ssize_t n_bounds, const unsigned char *classes, Py_ssize_t n_classes,
                   const uint64_t *wanted, Py_ssize_t m, const int32_t *index, Py_ssize_t n_index, int counts,
                   double length, double alpha, double total_ham, double total_spam, double *logs,
                   Py_ssize_t n_logs, int64_t *first, Py_ssize_t n_first, const double *file_logs, Py_ssize_t n_file,
                   const double *sums, const int64_t *places, _Window *window, const int64_t *spans,
                   Py_ssize_t n_records, const int64_t *fields):
    cdef Py_ssize_t n_learns = n_bounds - 1, l, j, k, n, longest = 0, wcap, cap, w
    cdef const uint64_t *hl   # learn l's hashes
    cdef const uint8_t *rp = NULL   # the record read last (a source's), from rstart in the file
    cdef int64_t r, rk = -1, rstart = 0, rsize
    cdef int64_t a, b
    cdef uint32_t mask, wmask, t
    cdef int c, status = 0
    cdef double *rows = NULL   # the wanted tokens' counts, class-major
    cdef double s, scale
    cdef double *x = NULL      # a learn's distinct tokens: their values,
    cdef double totals[2]
    cdef uint64_t *distinct = NULL   # hashes,
    cdef int64_t *at = NULL          # and first places
    cdef int32_t *table = NULL       # the learn's counting table, and the wanted tokens' (places in wanted)
    cdef int32_t *wtable = NULL
    cdef unsigned char *state = NULL   # per wanted token: bits 1, 2 class 0, 1 changed, bits 3, 4 its file count read
    cdef double *seen = NULL           # per wanted token: its count in a learn with its sums
    cdef int32_t *touched = NULL       # the wanted tokens such a learn has, in the order they first occur
    cdef unsigned char *sieve = NULL   # a byte per value of a hash's low bits: 1 where a wanted token's are
    cdef uint64_t h, sieve_mask
    cdef Py_ssize_t n_sieve
    if n_learns < 0 or n_classes != n_learns or n_index != m or n_logs != 2 * m or n_first != m:
        raise ValueError("journal_rows: the buffers' lengths do not match")
    if counts not in (TRANSFORM_RAW, TRANSFORM_BINARY, TRANSFORM_LOG):
        raise ValueError(f"unknown counts transform {counts}")
    if n_learns and bounds[0] != 0:
        raise ValueError("journal_rows: the first learn must start at 0")
    for l in range(n_learns):
        if bounds[l + 1] < bounds[l] or classes[l] > 1:
            raise ValueError("journal_rows: a learn's bounds or class are out of range")
        if window != NULL:   # within its record, in the file: records in order
            r = fields[LEARN_FIELDS * l]
            if (r < 0 or r >= n_records or (l and r < fields[LEARN_FIELDS * (l - 1)]) or places[l] < 0
                    or 8 * places[l] < spans[3 * r] + 16
                    or 8 * places[l] + 8 * (bounds[l + 1] - bounds[l]) > spans[3 * r] + 16 + spans[3 * r + 1]):
                raise ValueError("journal_rows: a learn's hashes are out of range")
        elif (places == NULL and bounds[l + 1] > n_hashes) or (places != NULL and (
                places[l] < 0 or places[l] > n_hashes or bounds[l + 1] - bounds[l] > n_hashes - places[l])):
            raise ValueError("journal_rows: a learn's hashes are out of range")
        if bounds[l + 1] - bounds[l] > longest:
            longest = bounds[l + 1] - bounds[l]
    for w in range(m):
        if index[w] >= n_base:
            raise ValueError(f"feature index {index[w]} out of range for {n_base} features")
    totals[0], totals[1] = total_ham, total_spam
    wcap = table_size(4 * m if m > 0 else 1)   # at most 1 in 8 slots taken: a miss (most of the journal) stops at once
    cap = table_size(longest if longest > 0 else 1)
    rows = <double *>malloc((2 * m + 1) * sizeof(double))
    seen = <double *>malloc((m + 1) * sizeof(double))
    touched = <int32_t *>malloc((m + 1) * sizeof(int32_t))
    state = <unsigned char *>malloc(m + 1)
    wtable = <int32_t *>malloc(wcap * sizeof(int32_t))
    # 8 entries a slot of the table (at most 64 KiB): most journal tokens stop at their byte, a load and a test
    n_sieve = 8 * wcap if 8 * wcap <= 65536 else 65536
    sieve = <unsigned char *>malloc(n_sieve)
    table = <int32_t *>malloc(cap * sizeof(int32_t))
    x = <double *>malloc((longest + 1) * sizeof(double))
    distinct = <uint64_t *>malloc((longest + 1) * sizeof(uint64_t))
    at = <int64_t *>malloc((longest + 1) * sizeof(int64_t))
    try:
        if (rows == NULL or state == NULL or wtable == NULL or table == NULL or x == NULL or distinct == NULL
                or at == NULL or seen == NULL or touched == NULL or sieve == NULL):
            raise MemoryError()
        with nogil:
            wmask = <uint32_t>(wcap - 1)
            mask = <uint32_t>(cap - 1)
            for j in range(wcap):
                wtable[j] = -1
            sieve_mask = <uint64_t>(n_sieve - 1)
            memset(sieve, 0, n_sieve)
            for w in range(m):
                sieve[wanted[w] & sieve_mask] = 1
                rows[w] = rows[m + w] = seen[w] = 0.0
                state[w] = 0
                first[w] = -1
                t = _probe(wtable, wanted, wmask, wanted[w])
                if wtable[t] == -1:
                    wtable[t] = <int32_t>w
            for l in range(n_learns):
                a, b = bounds[l], bounds[l + 1]
                n, c = b - a, classes[l]
                if window != NULL:   # its record read (once) through the window, checked as the scan found it
                    r = fields[LEARN_FIELDS * l]
                    if r != rk:
                        rstart, rsize = spans[3 * r], spans[3 * r + 1]
                        rp = _window_get(window, rstart, 16 + rsize)
                        # its head as the scan checked it (length, place, checksum): not another record written
                        # in its place since (the scan checked the payload against that checksum)
                        if (rp == NULL or _le(rp, 4) != <uint64_t>rsize or _le(rp + 4, 4) != <uint64_t>r
                                or _le(rp + 8, 8) != <uint64_t>spans[3 * r + 2]):
                            status = 2
                            break
                        rk = r
                    hl = <const uint64_t *>(rp + (8 * places[l] - rstart))
                elif places != NULL:   # its hashes at places[l] (position a of the learns' one after the other)
                    hl = hashes + places[l]
                else:
                    hl = hashes + a
                if sums != NULL and sums[2 * l] == sums[2 * l]:   # its sum and scale recorded: not counted again
                    totals[c] += sums[2 * l]
                    scale = sums[2 * l + 1]
                    if m == 0:
                        continue
                    k = 0
                    for j in range(a, b):   # the wanted tokens' counts in it, in the order they first occur
                        h = hl[j - a]
                        if not sieve[h & sieve_mask]:   # not one wanted
                            continue
                        t = _probe(wtable, wanted, wmask, h)
                        if wtable[t] == -1:
                            continue
                        w = wtable[t]
                        if seen[w] == 0.0:
                            touched[k] = <int32_t>w
                            k += 1
                            if first[w] < 0:
                                first[w] = j
                        seen[w] += 1.0
                    for j in range(k):
                        w = touched[j]
                        s = transform(seen[w], counts, _LOG1P_SMALL) * scale   # as scale_to_length scales it
                        seen[w] = 0.0
                        if not _file_counts(fd, counts_at, n_base, index, rows, state, m, w, c):
                            status = 1
                            break
                        rows[c * m + w] += s
                        state[w] |= 2 << c
                    if status:
                        break
                    continue
                if n == 0:
                    totals[c] += 0.0
                    continue
                k = _learn_values(hl, n, counts, length, table, distinct, at, x, &scale)
                s = 0.0
                for j in range(k):
                    s += x[j]
                totals[c] += s
                for j in range(k):
                    if m == 0:
                        break
                    t = _probe(wtable, wanted, wmask, distinct[j])
                    if wtable[t] == -1:
                        continue
                    w = wtable[t]
                    if first[w] < 0:
                        first[w] = a + at[j]
                    if not _file_counts(fd, counts_at, n_base, index, rows, state, m, w, c):
                        status = 1
                        break
                    rows[c * m + w] += x[j]
                    state[w] |= 2 << c
                if status:
                    break
            if not status:
                for c in range(2):
                    for w in range(m):
                        if state[w] & (2 << c):
                            logs[c * m + w] = log(rows[c * m + w] + alpha)
                        elif file_logs != NULL and w < n_file:
                            logs[c * m + w] = file_logs[c * n_file + w]
                        else:
                            logs[c * m + w] = NAN
    finally:
        free(rows)
        free(seen)
        free(touched)
        free(state)
        free(wtable)
        free(sieve)
        free(table)
        free(x)
        free(distinct)
        free(at)
    if status == 2:   # an OSError, as a read that fails: the caller's to name (the journal's path)
        raise OSError(5, "the journal could not be read again as it was checked (rewritten in place while in use?)")
    if status:
        raise ValueError("the model file could not be read (cut short while in use?)")
    return totals[0], totals[1]


# --------------------------------------------------------------------------
# in this module too, so that a cold ``spamnb classify`` loads one compiled
# module of this package: the hash index (a classify indexes its message's
# entries of the model file) and the model file's checks and checksum
# --------------------------------------------------------------------------
include "_index.pxi"
include "_checks.pxi"
include "_learn.pxi"
