"""Compiled helper for a learned model's pair-weight mixture
(``spamnb.estimator.variants.PairMixture``): a learned message's two
held-out scores counted into each weight's loss, spread and histograms in
one call, for a process that counts many (a replay, the online protocol),
and the weight and scale they give (``mixture_settle``).  The arithmetic is
the pure-Python ``PairMixture.add``'s and ``_settle``'s, operation for
operation (the counts' sums are of integers or halves of them, exact in any
order; the shares' sums are ``math.fsum``'s algorithm).

Nothing here imports numpy.
"""

from libc.math cimport exp, fabs, floor, isfinite


def mixture_add(double[::1] counts, double[::1] losses, double[::1] spread, const double[::1] weights,
                double words, double pairs, bint spam, double weight, double low, double bin_width,
                Py_ssize_t n_bins, double min_class, double max_count):
    """Count one message (``PairMixture.add``'s body up to its ``_settle``):
    ``counts`` holds ``len(weights) x 2 x n_bins`` histogram counts (weight
    major, then ham, spam), ``losses`` and ``spread`` one number a weight.
    Returns whether the counts were halved."""
    cdef Py_ssize_t nw = weights.shape[0], k, b, j, start, other, mine, i
    cdef double s, n_other, below, at, wrong, lowest, x
    cdef Py_ssize_t bins[64]
    if nw > 64 or losses.shape[0] != nw or spread.shape[0] != nw or counts.shape[0] != nw * 2 * n_bins:
        raise ValueError("a pair-weight mixture's arrays do not fit its weights and bins")
    for k in range(nw):
        s = words + weights[k] * pairs
        spread[k] += weight * fabs(s)
        if isfinite(s):
            x = floor((s - low) / bin_width)
            if x < 0:
                b = 0
            elif x > n_bins - 1:
                b = n_bins - 1
            else:
                b = <Py_ssize_t>x
        else:
            b = 0 if s < 0 else n_bins - 1
        bins[k] = b
    other = 0 if spam else 1
    n_other = 0.0
    for j in range(other * n_bins, (other + 1) * n_bins):
        n_other += counts[j]
    if n_other >= min_class:
        for k in range(nw):
            start = (k * 2 + other) * n_bins
            below = 0.0
            for j in range(start, start + bins[k] + 1):
                below += counts[j]
            at = counts[start + bins[k]]
            if spam:
                wrong = n_other - below + 0.5 * at
            else:
                wrong = below - at + 0.5 * at
            losses[k] += weight * (wrong / n_other)
    lowest = losses[0]
    for k in range(1, nw):
        if losses[k] < lowest:
            lowest = losses[k]
    for k in range(nw):
        losses[k] -= lowest
    mine = 1 if spam else 0
    for k in range(nw):
        j = (k * 2 + mine) * n_bins + bins[k]
        x = counts[j] + weight
        counts[j] = x if x > 0.0 else 0.0
    if weight > 0:
        x = 0.0
        for j in range(mine * n_bins, (mine + 1) * n_bins):
            x += counts[j]
        if x > max_count:
            for i in range(counts.shape[0]):
                counts[i] *= 0.5
            return True
    return False


cdef double _fsum(const double *values, Py_ssize_t n) noexcept:
    """``math.fsum`` of ``n`` finite doubles, bit for bit: CPython's algorithm
    (Shewchuk's partials, then the sum rounded once, half-even corrected);
    its special values (inf, NaN, overflow) are not needed here (``n`` <= 64
    numbers of one sign: at most 64 partials)."""
    cdef double partials[64]
    cdef Py_ssize_t i, j, k, m = 0
    cdef double x, y, t, hi, lo = 0.0, yr
    for i in range(n):
        x = values[i]
        j = 0
        for k in range(m):
            y = partials[k]
            if fabs(x) < fabs(y):
                t = x
                x = y
                y = t
            hi = x + y
            lo = y - (hi - x)
            if lo != 0.0:
                partials[j] = lo
                j += 1
            x = hi
        m = j
        if x != 0.0:
            partials[m] = x
            m += 1
    hi = 0.0
    if m > 0:
        m -= 1
        hi = partials[m]
        while m > 0:
            x = hi
            m -= 1
            y = partials[m]
            hi = x + y
            yr = hi - x
            lo = y - yr
            if lo != 0.0:
                break
        if m > 0 and ((lo < 0.0 and partials[m - 1] < 0.0) or (lo > 0.0 and partials[m - 1] > 0.0)):
            y = lo * 2.0
            x = hi + y
            yr = x - hi
            if y == yr:
                hi = x
    return hi


cdef double _interp(double x, const double[::1] grid, const double[::1] values) noexcept:
    """``variants._interp``: numpy.interp(x, grid, values), the same operations."""
    cdef Py_ssize_t j = 0, last = grid.shape[0] - 1
    if x <= grid[0]:
        return values[0]
    if x >= grid[last]:
        return values[last]
    while grid[j + 1] < x:
        j += 1
    if x == grid[j + 1]:
        return values[j + 1]
    return (values[j + 1] - values[j]) / (grid[j + 1] - grid[j]) * (x - grid[j]) + values[j]


def mixture_settle(const double[::1] losses, const double[::1] spread, const double[::1] log_prior,
                   const double[::1] weights, double eta, double centre):
    """``(weight, scale)`` of a mixture that has counted messages
    (``PairMixture._settle``'s arithmetic, bit for bit: the shares
    ``exp(log_prior - eta * loss - top)`` summed by ``math.fsum``'s
    algorithm, the mean weight, the spread at the centre over that at the
    weight)."""
    cdef Py_ssize_t nw = weights.shape[0], k
    cdef double logits[64]
    cdef double p[64]
    cdef double top, total, weight, at_centre, at_weight
    if nw > 64 or nw < 1 or losses.shape[0] != nw or spread.shape[0] != nw or log_prior.shape[0] != nw:
        raise ValueError("a pair-weight mixture's arrays do not fit its weights")
    for k in range(nw):
        logits[k] = log_prior[k] - eta * losses[k]
    top = logits[0]
    for k in range(1, nw):
        if logits[k] > top:
            top = logits[k]
    for k in range(nw):
        p[k] = exp(logits[k] - top)
    total = _fsum(p, nw)
    for k in range(nw):
        logits[k] = p[k] / total * weights[k]
    weight = _fsum(logits, nw)
    at_centre = _interp(centre, weights, spread)
    at_weight = _interp(weight, weights, spread)
    return weight, (at_centre / at_weight if at_weight > 0 and at_centre > 0 else 1.0)
