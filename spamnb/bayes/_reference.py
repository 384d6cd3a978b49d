"""Pure numpy/scipy reference of the compiled kernels in ``spamnb.bayes._kernels``.

Same semantics as the compiled versions, written for clarity: stored zeros
are absent (so a zero count never meets a ``-inf`` log-probability), values
must be finite and >= 0, column indices must lie in range.  ``spamnb.bayes.kernels``
falls back to these when the extension is missing or ``SPAMNB_PUREPYTHON=1``;
the tests compare the two.

The inputs here are already validated by ``spamnb.bayes.kernels`` (a canonical-dtype
CSR matrix with ``X.shape[1] <= n_features``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["joint_log_likelihood", "count_features"]


def _without_stored_zeros(X):
    """The CSR matrix ``X`` with explicit zeros removed (a copy only if there are any)."""
    if X.nnz and not np.all(X.data != 0):
        X = X.copy()
        X.eliminate_zeros()
    return X


def joint_log_likelihood(X, feature_log_prob, class_log_prior):
    """log P(c) + X @ log P(word | c).T: float64, shape (n_samples, n_classes).

    X : scipy CSR matrix (n_samples, n_columns), n_columns <= n_features
    feature_log_prob : float64 (n_classes, n_features)
    class_log_prior : float64 (n_classes,)
    """
    X = _without_stored_zeros(X)
    n_columns = X.shape[1]
    weights = np.asarray(feature_log_prob, dtype=np.float64)[:, :n_columns]
    jll = np.asarray(X @ weights.T, dtype=np.float64).reshape(X.shape[0], weights.shape[0])
    jll += np.asarray(class_log_prior, dtype=np.float64)
    return jll


def count_features(X, row_class, row_weight, n_classes):
    """Weighted per-class column sums: float64, shape (n_classes, n_columns).

    ``counts[c, j] = sum over rows r with row_class[r] == c of
    row_weight[r] * X[r, j]``; X is a CSR matrix, ``row_class`` int64
    (n_samples,), ``row_weight`` float64 (n_samples,).
    """
    n_samples = X.shape[0]
    membership = sp.csr_matrix(
        (np.asarray(row_weight, dtype=np.float64), (np.asarray(row_class), np.arange(n_samples))),
        shape=(n_classes, n_samples),
    )
    return np.asarray((membership @ X).toarray(), dtype=np.float64)
