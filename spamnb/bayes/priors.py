"""Class priors: the one estimator every spamnb model takes its P(c) from.

The state is the class counts (``class_count_``, float64, shape
``(n_classes,)``); ``log_prior_`` is derived from them on demand, so adding,
removing (``unlearn``) and merging counts is exact.

Estimators (``method``):

- ``"mle"``: P(c) = N_c / N.
- ``"map"``: Dirichlet smoothing with pseudo-counts ``alpha`` (a scalar, or
  one per class): P(c) = (N_c + alpha_c) / (N + sum(alpha)), the posterior
  mode under a Dirichlet(alpha + 1) prior.
- ``"fixed"``: the probabilities given in ``priors`` (one per class, summing
  to 1); the counts are still kept, so switching method later is exact.
- ``"uniform"``: 1 / n_classes.

Zero counts.  Under ``"mle"`` a class with no examples has prior 0, so its
log prior is ``-inf``: it is never predicted, and the models' probabilities
give it exactly 0 (their log-sum-exp ignores ``-inf`` terms, so no NaN).
Before anything at all has been counted (N = 0), ``"mle"`` falls back to
uniform rather than 0/0.  ``"map"`` with positive pseudo-counts never gives 0.
A zero in ``priors`` (``"fixed"``) likewise gives ``-inf`` on purpose.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ClassPrior", "PRIOR_METHODS", "log_prior"]

PRIOR_METHODS = ("mle", "map", "fixed", "uniform")


def log_prior(method, class_count, alpha=None):
    """log P(c) from class counts: the estimator's formula, shared by
    :class:`ClassPrior` and :class:`spamnb.bayes.wordcounts.WordCounts`.

    ``method`` "mle", "map" (``alpha``: float64 (n_classes,), added to the
    counts) or "uniform"; ``class_count`` float64 (n_classes,).  A class with
    no count under "mle" gets log P(c) = -inf; no counts at all give the
    uniform prior.
    """
    class_count = np.asarray(class_count, dtype=np.float64)
    n_classes = len(class_count)
    with np.errstate(divide="ignore"):
        if method == "uniform":
            return np.full(n_classes, -np.log(n_classes))
        counts = class_count + alpha if method == "map" else class_count
        total = counts.sum()
        if total <= 0:
            return np.full(n_classes, -np.log(n_classes))
        return np.log(counts) - np.log(total)


class ClassPrior:
    """Learns class counts and turns them into log prior probabilities.

    Parameters
    ----------
    method : {"mle", "map", "fixed", "uniform"}
    alpha : float or array of shape (n_classes,)
        Dirichlet pseudo-counts for ``"map"``; must be >= 0.
    priors : array of shape (n_classes,), optional
        The fixed class probabilities for ``"fixed"``.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    class_count_ : ndarray of float64, shape (n_classes,)
    log_prior_ : ndarray of float64, shape (n_classes,) (derived, read-only)
    """

    def __init__(self, method="mle", alpha=1.0, priors=None):
        self.method = method
        self.alpha = alpha
        self.priors = priors

    # -- learning ---------------------------------------------------------
    def fit(self, y, classes=None, sample_weight=None):
        """Count the classes of labels ``y`` (shape (n_samples,)) from scratch."""
        for name in ("classes_", "class_count_"):
            self.__dict__.pop(name, None)
        if classes is None:
            classes = np.unique(np.asarray(y))
        return self.partial_fit(y, classes=classes, sample_weight=sample_weight)

    def partial_fit(self, y, classes=None, sample_weight=None):
        """Add the class counts of ``y``; ``classes`` is required on the first call."""
        self._check_params()
        first = not hasattr(self, "classes_")
        if first:
            if classes is None:
                raise ValueError("classes must be given on the first call to partial_fit")
            self._init_classes(classes)
        elif classes is not None and not np.array_equal(np.unique(np.asarray(classes)), self.classes_):
            raise ValueError(f"classes={list(classes)!r} differ from the classes seen before {list(self.classes_)!r}")
        try:
            counts = self.count(y, sample_weight)
        except BaseException:
            if first:  # a failed first call leaves the estimator as it was
                del self.classes_, self.class_count_
            raise
        self.class_count_ += counts
        return self

    def unlearn(self, y, sample_weight=None):
        """Subtract the class counts of ``y``: the exact inverse of ``partial_fit``.

        Raises ValueError (changing nothing) if a count would become negative.
        """
        self._check_fitted()
        new = self.class_count_ - self.count(y, sample_weight)
        if np.any(new < -1e-9 * max(1.0, float(self.class_count_.max(initial=0.0)))):
            raise ValueError("unlearn would make a class count negative: those samples were not learned")
        self.class_count_ = np.maximum(new, 0.0)
        return self

    def add_counts(self, counts):
        """Add counts given per class (shape (n_classes,)); negative entries subtract."""
        self._check_fitted()
        counts = np.asarray(counts, dtype=np.float64)
        if counts.shape != self.class_count_.shape:
            raise ValueError(f"counts has shape {counts.shape}, expected {self.class_count_.shape}")
        new = self.class_count_ + counts
        if np.any(new < 0):
            raise ValueError("class counts cannot become negative")
        self.class_count_ = new
        return self

    def merge(self, other: "ClassPrior"):
        """Add another estimator's counts (same classes) into this one."""
        self._check_fitted()
        other._check_fitted()
        if not np.array_equal(self.classes_, other.classes_):
            raise ValueError("cannot merge priors over different classes")
        self.class_count_ = self.class_count_ + other.class_count_
        return self

    # -- encoding ---------------------------------------------------------
    def encode(self, y):
        """Class indices of labels ``y`` (int64, shape (n_samples,)); unknown labels raise."""
        self._check_fitted()
        y = np.asarray(y)
        if y.ndim != 1:
            y = y.reshape(-1)
        idx = np.searchsorted(self.classes_, y)
        idx = np.clip(idx, 0, len(self.classes_) - 1)
        bad = self.classes_[idx] != y
        if np.any(bad):
            unknown = np.unique(y[bad])
            raise ValueError(f"labels {list(unknown)!r} are not among the classes {list(self.classes_)!r}")
        return idx.astype(np.int64)

    def count(self, y, sample_weight=None):
        """Per-class (weighted) counts of labels ``y``: float64, shape (n_classes,)."""
        idx = self.encode(y)
        if sample_weight is None:
            weights = None
        else:
            weights = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
            if weights.shape != idx.shape:
                raise ValueError(f"sample_weight has shape {weights.shape}, expected {idx.shape}")
            if not np.all(np.isfinite(weights)) or np.any(weights < 0):
                raise ValueError("sample_weight must be finite and >= 0")
        return np.bincount(idx, weights=weights, minlength=len(self.classes_)).astype(np.float64)

    # -- the estimate -----------------------------------------------------
    @property
    def log_prior_(self):
        """log P(c) for each class, derived from the counts (float64, (n_classes,))."""
        self._check_fitted()
        self._check_params()
        n_classes = len(self.classes_)
        if self.method == "fixed":
            with np.errstate(divide="ignore"):
                return np.log(self._fixed_priors(n_classes))
        alpha = self._alpha_vector(n_classes) if self.method == "map" else None
        return log_prior(self.method, self.class_count_, alpha)

    @property
    def prior_(self):
        """P(c) for each class (float64, (n_classes,))."""
        return np.exp(self.log_prior_)

    # -- helpers ----------------------------------------------------------
    def _init_classes(self, classes):
        classes = np.asarray(classes)
        uniq = np.unique(classes)
        if len(uniq) != len(classes):
            raise ValueError("classes must not repeat")
        if len(uniq) < 1:
            raise ValueError("at least one class is needed")
        self.classes_ = uniq
        self.class_count_ = np.zeros(len(uniq), dtype=np.float64)
        if self.method == "fixed":
            self._fixed_priors(len(uniq))
        if self.method == "map":
            self._alpha_vector(len(uniq))

    def _check_params(self):
        if self.method not in PRIOR_METHODS:
            raise ValueError(f"method must be one of {PRIOR_METHODS}, got {self.method!r}")
        if self.method == "fixed" and self.priors is None:
            raise ValueError('method="fixed" needs priors')

    def _check_fitted(self):
        if not hasattr(self, "classes_"):
            raise ValueError("this ClassPrior has not counted any classes yet")

    def _alpha_vector(self, n_classes):
        alpha = np.asarray(self.alpha, dtype=np.float64)
        if alpha.ndim == 0:
            alpha = np.full(n_classes, float(alpha))
        if alpha.shape != (n_classes,):
            raise ValueError(f"alpha has shape {alpha.shape}, expected a scalar or ({n_classes},)")
        if np.any(alpha < 0) or not np.all(np.isfinite(alpha)):
            raise ValueError("alpha must be finite and >= 0")
        return alpha

    def _fixed_priors(self, n_classes):
        priors = np.asarray(self.priors, dtype=np.float64)
        if priors.shape != (n_classes,):
            raise ValueError(f"priors has shape {priors.shape}, expected ({n_classes},)")
        if np.any(priors < 0) or not np.all(np.isfinite(priors)):
            raise ValueError("priors must be finite and >= 0")
        if not np.isclose(priors.sum(), 1.0, rtol=0, atol=1e-8):
            raise ValueError(f"priors must sum to 1, they sum to {priors.sum()!r}")
        return priors

    def __repr__(self):
        parts = [f"method={self.method!r}"]
        if self.method == "map":
            parts.append(f"alpha={self.alpha!r}")
        if self.priors is not None:
            parts.append(f"priors={self.priors!r}")
        return f"ClassPrior({', '.join(parts)})"
