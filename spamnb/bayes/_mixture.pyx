"""Compiled helper for a learned model's pair-weight mixture
(``spamnb.estimator.variants.PairMixture``): a learned message's two
held-out scores counted into each weight's loss, spread and histograms in
one call, for a process that counts many (a replay, the online protocol).
The arithmetic is the pure-Python ``PairMixture.add``'s, operation for
operation (its sums are of integers or halves of them, exact in any order).

Nothing here imports numpy.
"""

from libc.math cimport floor, fabs, isfinite


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
