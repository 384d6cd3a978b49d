"""Prediction written once for every Bayes model in spamnb.

A model subclasses :class:`BayesClassifier` and implements
``_joint_log_likelihood(X) -> (n_samples, n_classes)``: log P(c) + log P(x | c)
for each sample and class, in the order of ``classes_``.  Everything else
(``predict``, the probabilities, the two-class log-odds) is derived here, in
log space, with a log-sum-exp that copes with ``-inf`` entries (a class with
prior 0) and never produces NaN for finite input.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BayesClassifier", "log_sum_exp"]


def log_sum_exp(jll):
    """Row-wise log(sum(exp(jll))) of a (n_samples, n_classes) array, stable.

    Rows whose entries are all ``-inf`` give ``-inf``; ``+inf`` entries give ``+inf``.
    """
    jll = np.asarray(jll, dtype=np.float64)
    peak = np.max(jll, axis=1, keepdims=True)
    safe_peak = np.where(np.isfinite(peak), peak, 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = np.log(np.sum(np.exp(jll - safe_peak), axis=1)) + safe_peak[:, 0]
    out = np.where(np.isposinf(peak[:, 0]), np.inf, out)
    return out


class BayesClassifier:
    """Base class: predictions from one ``_joint_log_likelihood``."""

    def _joint_log_likelihood(self, X):  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_is_fitted(self):
        if not hasattr(self, "classes_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet: call fit or partial_fit first")

    def predict_joint_log_proba(self, X):
        """log P(c) + log P(x | c): float64 array of shape (n_samples, n_classes)."""
        self._check_is_fitted()
        return self._joint_log_likelihood(X)

    def predict_log_proba(self, X):
        """log P(c | x): float64 array of shape (n_samples, n_classes)."""
        jll = np.asarray(self.predict_joint_log_proba(X), dtype=np.float64)
        peak = np.max(jll, axis=1, keepdims=True)
        finite = np.isfinite(peak[:, 0])
        # shift by the row maximum first: exact even when |jll| is huge
        with np.errstate(invalid="ignore", divide="ignore"):
            shifted = jll - np.where(finite[:, None], peak, 0.0)
            out = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
        # a row that is -inf everywhere (impossible under every class) is uniform, not NaN
        if not np.all(finite):
            out[~finite] = -np.log(jll.shape[1])
        return out

    def predict_proba(self, X):
        """P(c | x): float64 array of shape (n_samples, n_classes), rows sum to 1."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X):
        """The most probable class of each sample: shape (n_samples,)."""
        jll = self.predict_joint_log_proba(X)
        return self.classes_[np.argmax(jll, axis=1)]

    def decision_function(self, X):
        """Two classes: log P(classes_[1] | x) - log P(classes_[0] | x), shape (n_samples,)."""
        jll = self.predict_joint_log_proba(X)
        if jll.shape[1] != 2:
            raise ValueError("decision_function is defined for two classes; use predict_log_proba")
        with np.errstate(invalid="ignore"):
            log_odds = jll[:, 1] - jll[:, 0]
        log_odds[np.isneginf(jll).all(axis=1)] = 0.0  # impossible under both: even odds, as predict_proba
        return log_odds
