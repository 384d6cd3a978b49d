"""Multinomial naive Bayes over word counts, with Dirichlet soft counts.

For class c and word i, with N_ci the (weighted) count of word i in the
training documents of class c and N_c = sum_i N_ci,

    theta_ci = (N_ci + alpha_i) / (N_c + sum_i alpha_i)

and a document x (word counts) scores

    log P(c) + sum_i x_i log theta_ci

with P(c) from a :class:`spamnb.bayes.priors.ClassPrior`.  The counts are the state
(``feature_count_``, ``class_count_``); the log-probabilities are derived from
them and cached, so ``partial_fit``, ``unlearn`` and ``merge`` are exact (for
integer counts and weights the floating-point sums are exact up to 2**53).

``alpha = 0`` is used as given (no clipping to a tiny positive value): a word
never seen in class c then has theta_ci = 0, log theta_ci = -inf, and any
document containing it is impossible under c (its joint log-likelihood is
``-inf``; its probability exactly 0).  A zero count is never multiplied by
``-inf`` (stored zeros are skipped), so no NaN arises.  A document impossible
under every class gets uniform probabilities from the base class.  A class
whose smoothed total N_c + sum(alpha) is 0 (no words and alpha = 0) has no
word distribution; it gets the uniform one, theta_ci = 1 / n_features.
"""

from __future__ import annotations

import numpy as np

from spamnb.bayes import kernels
from spamnb.bayes.base import BayesClassifier
from spamnb.bayes.priors import ClassPrior
from spamnb.bayes.arithmetic import log_theta

__all__ = ["MultinomialNB"]

_PRIOR_NAMES = ("mle", "map", "uniform")


class MultinomialNB(BayesClassifier):
    """Multinomial naive Bayes for word counts (spam filtering).

    Parameters
    ----------
    alpha : float or array of shape (n_features,), default 1.0
        Dirichlet soft counts added to every word count; >= 0, used as given.
        A per-feature alpha must match the number of features after each
        fit/partial_fit/merge (set a longer one when the vocabulary grows).
    fit_prior : bool, default True
        False means uniform class priors.
    class_prior : array of shape (n_classes,), optional
        Fixed class probabilities (``ClassPrior("fixed", priors=class_prior)``).
    prior : ClassPrior or {"mle", "map", "uniform"}, optional
        The class prior estimator; a ClassPrior is a template (its method,
        alpha and priors are copied).  Default ``ClassPrior("mle")``.

    Attributes
    ----------
    prior_ : ClassPrior, the learned class prior (holds the class counts)
    classes_ : ndarray (n_classes,)
    class_count_ : float64 (n_classes,), weighted documents per class
    feature_count_ : float64 (n_classes, n_features), weighted word counts
    n_features_in_ : int
    feature_log_prob_ : float64 (n_classes, n_features), log theta (derived,
        cached, read-only; stored feature-major for the kernel)
    class_log_prior_ : float64 (n_classes,), log P(c) (derived)
    """

    def __init__(self, alpha=1.0, fit_prior=True, class_prior=None, prior=None):
        self.alpha = alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.prior = prior

    # -- learned state ----------------------------------------------------
    @property
    def classes_(self):
        return self.prior_.classes_

    @property
    def class_count_(self):
        return self.prior_.class_count_

    @property
    def feature_count_(self):
        return self._feature_count

    @feature_count_.setter
    def feature_count_(self, value):
        self._feature_count = value
        self._log_prob_cache = None

    @property
    def n_features_in_(self):
        return self.feature_count_.shape[1]

    @property
    def class_log_prior_(self):
        """log P(c): float64 (n_classes,), from ``prior_`` (O(n_classes), not cached)."""
        return self.prior_.log_prior_

    @property
    def feature_log_prob_(self):
        """log theta_ci: float64 (n_classes, n_features), derived from the counts."""
        self._check_is_fitted()
        alpha = self._alpha_for(self.n_features_in_)
        cache = getattr(self, "_log_prob_cache", None)
        if cache is not None and cache[0] is self._feature_count and np.array_equal(cache[1], alpha):
            return cache[2]
        log_prob = self._log_prob(self._feature_count, alpha)
        self._log_prob_cache = (self._feature_count, alpha.copy(), log_prob)
        return log_prob

    @staticmethod
    def _log_prob(feature_count, alpha):
        # the formula is the spam filter's count model's: one implementation
        return log_theta(feature_count, alpha)

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_log_prob_cache", None)   # derived: recomputed after unpickling
        return state

    @classmethod
    def from_word_counts(cls, word_counts):
        """A model with a copy of a :class:`~spamnb.bayes.wordcounts.WordCounts`'s
        counts (classes ``0 .. n_classes - 1``), its alpha and prior."""
        return cls.from_counts(word_counts.class_count_, word_counts.matrix().copy(),
                               classes=np.arange(word_counts.n_classes), alpha=word_counts.alpha,
                               prior=word_counts.prior)

    @classmethod
    def from_counts(cls, class_count, feature_count, classes, alpha=1.0, prior="mle"):
        """A fitted estimator over given counts: ``class_count`` (n_classes,),
        ``feature_count`` float64 (n_classes, n_features) (used as given, not
        copied), ``classes`` the labels in order.  ``prior`` as in ``__init__``."""
        self = cls(alpha=alpha, prior=prior)
        template = self._make_prior()
        template.partial_fit(np.asarray(classes)[:0], classes=classes)
        template.add_counts(np.asarray(class_count, dtype=np.float64))
        feature_count = np.asarray(feature_count, dtype=np.float64)
        if feature_count.shape != (len(template.classes_), feature_count.shape[-1]) or feature_count.ndim != 2:
            raise ValueError(f"feature_count must be of shape (n_classes, n_features), got {feature_count.shape}")
        self._alpha_for(feature_count.shape[1])
        self.prior_ = template
        self.feature_count_ = feature_count
        return self

    # -- learning ---------------------------------------------------------
    def fit(self, X, y, sample_weight=None):
        """Learn from scratch: X (n_samples, n_features) counts, y (n_samples,) labels."""
        y = self._check_y(y)
        for name in ("prior_", "_feature_count", "_log_prob_cache"):
            self.__dict__.pop(name, None)
        return self.partial_fit(X, y, classes=np.unique(y), sample_weight=sample_weight)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Add the counts of X (n_samples, n_features) with labels y (n_samples,).

        ``classes`` (all labels) is required on the first call.  X may have
        more features than seen so far (a grown vocabulary): the counts are
        padded with zeros.  Nothing changes if anything is invalid.
        """
        y = self._check_y(y)
        first = not hasattr(self, "prior_")
        if first:
            if classes is None:
                raise ValueError("classes must be given on the first call to partial_fit")
            prior = self._make_prior()
            prior.partial_fit(np.asarray(classes)[:0], classes=classes)
        else:
            prior = self.prior_
            if classes is not None and not np.array_equal(np.unique(np.asarray(classes)), prior.classes_):
                raise ValueError(f"classes={list(classes)!r} differ from the classes seen before {list(prior.classes_)!r}")
        X = kernels.as_csr(X)
        row_class, class_delta, sample_weight = self._encode(X, y, sample_weight, prior)
        old_width = 0 if first else self.n_features_in_
        width = max(old_width, X.shape[1])
        self._alpha_for(width)
        n_classes = len(prior.classes_)
        current = None if first else self._feature_count
        if (width == old_width and isinstance(current, np.ndarray) and current.dtype == np.float64
                and current.flags.c_contiguous and current.flags.writeable):
            # in place (cheap for a message at a time); validates all before adding anything
            feature_count = kernels.count_features(X, row_class, n_classes, sample_weight, out=current)
        else:
            # into new counts (validated in the counting pass itself)
            feature_count = kernels.count_features(X, row_class, n_classes, sample_weight)
            if X.shape[1] != width:
                feature_count = np.pad(feature_count, ((0, 0), (0, width - X.shape[1])))
            if not first:
                feature_count[:, :old_width] += current
        # commit (nothing below can fail)
        prior.add_counts(class_delta)
        self.prior_ = prior
        self.feature_count_ = feature_count
        return self

    def unlearn(self, X, y, sample_weight=None):
        """Remove the counts of X, y: the exact inverse of ``partial_fit``.

        Raises ValueError, changing nothing, if a count would become negative
        (those documents were not learned) or X is wider than the model.
        """
        self._check_is_fitted()
        y = self._check_y(y)
        X, row_class, class_delta, feature_delta = self._counts(X, y, sample_weight, self.prior_)
        if X.shape[1] > self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the model only {self.n_features_in_}: not learned")
        feature_count = self.feature_count_.copy()
        feature_count[:, : X.shape[1]] -= feature_delta
        tolerance = -1e-9 * max(1.0, float(self.feature_count_.max(initial=0.0)))
        if np.any(feature_count < tolerance):
            raise ValueError("unlearn would make a word count negative: those documents were not learned")
        self.prior_.unlearn(y, sample_weight=sample_weight)  # checks its own counts, raises before changing
        np.maximum(feature_count, 0.0, out=feature_count)
        self.feature_count_ = feature_count
        return self

    def merge(self, other):
        """Add the counts of another fitted MultinomialNB (same classes) into this one."""
        self._check_is_fitted()
        if not isinstance(other, MultinomialNB):
            raise TypeError(f"can only merge a MultinomialNB, got {type(other).__name__}")
        other._check_is_fitted()
        if not np.array_equal(self.classes_, other.classes_):
            raise ValueError(f"cannot merge models over different classes: {list(self.classes_)!r} and {list(other.classes_)!r}")
        width = max(self.n_features_in_, other.n_features_in_)
        self._alpha_for(width)
        feature_count = np.zeros((len(self.classes_), width), dtype=np.float64)
        feature_count[:, : self.n_features_in_] = self.feature_count_
        feature_count[:, : other.n_features_in_] += other.feature_count_
        self.prior_.merge(other.prior_)
        self.feature_count_ = feature_count
        return self

    # -- prediction -------------------------------------------------------
    def _joint_log_likelihood(self, X):
        """log P(c) + sum_i x_i log theta_ci: float64 (n_samples, n_classes).

        X may have fewer features than the model (the rest count as 0), not more.
        """
        return kernels.joint_log_likelihood(X, self.feature_log_prob_, self.class_log_prior_)

    # -- helpers ----------------------------------------------------------
    def _make_prior(self):
        prior = self.prior
        if prior is not None:
            if self.class_prior is not None or not self.fit_prior:
                raise ValueError("give either prior, or class_prior/fit_prior, not both")
            if isinstance(prior, ClassPrior):
                return ClassPrior(prior.method, alpha=prior.alpha, priors=prior.priors)
            if isinstance(prior, str) and prior in _PRIOR_NAMES:
                return ClassPrior(prior)
            raise ValueError(f"prior must be a ClassPrior or one of {_PRIOR_NAMES}, got {prior!r}")
        if self.class_prior is not None:
            return ClassPrior("fixed", priors=self.class_prior)
        if not self.fit_prior:
            return ClassPrior("uniform")
        return ClassPrior("mle")

    def _alpha_for(self, n_features):
        """alpha as a scalar or (n_features,) float64; validated."""
        alpha = np.asarray(self.alpha, dtype=np.float64)
        if alpha.ndim == 1 and alpha.shape != (n_features,):
            raise ValueError(f"alpha has {alpha.shape[0]} entries, the model has {n_features} features")
        if alpha.ndim > 1:
            raise ValueError(f"alpha must be a scalar or of shape ({n_features},), got shape {alpha.shape}")
        if not np.all(np.isfinite(alpha)) or np.any(alpha < 0):
            raise ValueError("alpha must be finite and >= 0")
        return alpha

    @staticmethod
    def _check_y(y):
        y = np.asarray(y)
        if y.ndim == 2 and 1 in y.shape:
            y = y.reshape(-1)
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D (n_samples,), got shape {y.shape}")
        return y

    @staticmethod
    def _encode(X, y, sample_weight, prior):
        """(class index per row, class count delta, sample weights as float64 or None)."""
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} samples but y has {y.shape[0]}")
        row_class = prior.encode(y)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
        class_delta = prior.count(y, sample_weight)
        return row_class, class_delta, sample_weight

    @classmethod
    def _counts(cls, X, y, sample_weight, prior):
        """(X as CSR, class index per row, class count delta, feature count delta)."""
        X = kernels.as_csr(X)
        row_class, class_delta, sample_weight = cls._encode(X, y, sample_weight, prior)
        feature_delta = kernels.count_features(X, row_class, len(prior.classes_), sample_weight)
        return X, row_class, class_delta, feature_delta
