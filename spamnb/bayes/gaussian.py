"""Gaussian class-conditional models for continuous features.

Each class c has a Gaussian density N(mu_c, Sigma_c); the class prior comes
from the shared :class:`spamnb.bayes.priors.ClassPrior`.  The joint log-likelihood is

    log P(c) - 1/2 log|Sigma_c| - 1/2 (x - mu_c)^T Sigma_c^{-1} (x - mu_c) - d/2 log(2 pi)

computed through a Cholesky factor of Sigma_c (no explicit inverse).

``covariance`` selects the family:

- ``"diag"``: independent features, one variance per class and feature
  (naive Bayes; :class:`GaussianNB` is this case with sklearn's semantics).
- ``"spherical"``: sigma_c^2 I per class; with equal variances and priors it
  is the nearest-mean (minimum-distance) classifier.
- ``"tied"``: one covariance shared by all classes (linear discriminant,
  hyperplane boundaries); the pooled within-class estimate divided by n - K.
- ``"full"``: one covariance per class (quadratic discriminant).

State.  Per class the model keeps mergeable sufficient statistics: the
(weighted) count (in ``prior_.class_count_``), the mean ``means_`` and the
centred scatter matrix ``scatter_`` (the sum of w (x - mu)(x - mu)^T: its
diagonal only for "diag"/"spherical", shape (K, d); the full matrix for
"tied"/"full", shape (K, d, d)).  Chunks are combined with the pairwise
(Chan et al.) update, so ``partial_fit`` over chunks and ``merge`` equal one
``fit`` up to rounding.  Covariances, Cholesky factors and the regularisation
are derived from the statistics on demand.

Regularisation.  ``reg`` times the largest per-feature variance of all the
training data (weighted, computed from the statistics) is added to every
variance (the diagonal of every covariance), as sklearn's ``var_smoothing``
does; if every feature is constant (to 1e-12 relative), ``reg`` itself is added.

Sample weights are frequency weights: a weight of 2 counts a row twice, so the
unbiased estimates divide by (sum of weights - 1) or (- K).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg

from .base import BayesClassifier
from .priors import ClassPrior

__all__ = ["GaussianBayes", "GaussianNB", "COVARIANCE_TYPES"]

COVARIANCE_TYPES = ("diag", "spherical", "tied", "full")
_FULL_SCATTER = ("tied", "full")  # families that need the off-diagonal scatter
_LOG_2PI = math.log(2.0 * math.pi)


# -- input validation -------------------------------------------------------
def _label(value):
    """A class label as plain Python, for error messages."""
    return value.item() if isinstance(value, np.generic) else value


def _check_X(X, n_features=None):
    """Return X as a 2-D, finite, float64 array of shape (n_samples, n_features)."""
    if hasattr(X, "toarray") or hasattr(X, "tocsr"):
        raise TypeError("sparse input is not supported: Gaussian models need a dense (n_samples, n_features) array")
    X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise ValueError(f"X must hold real numbers, got dtype {X.dtype}")
    if X.ndim != 2:
        hint = "; reshape a single feature with X.reshape(-1, 1)" if X.ndim == 1 else ""
        raise ValueError(f"X must be 2-D (n_samples, n_features), got a {X.ndim}-D array{hint}")
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.shape[1] == 0:
        raise ValueError("X has 0 features; at least one is needed")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinity")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but the model was fitted with {n_features}")
    return X


def _check_y(y, n_samples):
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D (n_samples,), got shape {y.shape}")
    if y.shape[0] != n_samples:
        raise ValueError(f"X has {n_samples} samples but y has {y.shape[0]}")
    return y


def _check_sample_weight(sample_weight, n_samples):
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (n_samples,):
        raise ValueError(f"sample_weight has shape {w.shape}, expected ({n_samples},)")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("sample_weight must be finite and >= 0")
    return w


# -- sufficient statistics --------------------------------------------------
def class_statistics(X, class_index, n_classes, sample_weight=None, full=True):
    """Per-class weighted count, mean and centred scatter of one chunk.

    X : (n, d) float64; class_index : (n,) ints in [0, n_classes).
    Returns count (K,), mean (K, d) and scatter (K, d, d) if ``full`` else its
    diagonal (K, d).  A class with no weight in the chunk gets zeros.
    """
    n_features = X.shape[1]
    count = np.zeros(n_classes)
    mean = np.zeros((n_classes, n_features))
    scatter = np.zeros((n_classes, n_features, n_features) if full else (n_classes, n_features))
    order = np.argsort(class_index, kind="stable")
    bounds = np.searchsorted(class_index[order], np.arange(n_classes + 1))
    for k in range(n_classes):
        rows = order[bounds[k] : bounds[k + 1]]
        if rows.size == 0:
            continue
        Xk = X[rows]
        w = None if sample_weight is None else sample_weight[rows]
        total = float(rows.size) if w is None else float(w.sum())
        if total <= 0.0:
            continue
        mu = (Xk.sum(axis=0) if w is None else w @ Xk) / total
        centred = Xk - mu
        weighted = centred if w is None else centred * w[:, None]
        count[k] = total
        mean[k] = mu
        if full:
            s = weighted.T @ centred
            scatter[k] = 0.5 * (s + s.T)
        else:
            scatter[k] = np.einsum("ij,ij->j", weighted, centred)
    return count, mean, scatter


def combine_statistics(count_a, mean_a, scatter_a, count_b, mean_b, scatter_b):
    """Pairwise (Chan et al.) combination of per-class count, mean and scatter.

    Shapes: count (K,), mean (K, d), scatter (K, d) or (K, d, d).  A class
    with zero count on one side takes the other side's statistics exactly.
    """
    count = count_a + count_b
    safe = np.where(count > 0, count, 1.0)
    frac_b = np.where(count > 0, count_b / safe, 0.0)
    delta = mean_b - mean_a
    mean = mean_a + delta * frac_b[:, None]
    cross = np.where(count > 0, count_a * count_b / safe, 0.0)
    if scatter_a.ndim == 3:
        correction = cross[:, None, None] * (delta[:, :, None] * delta[:, None, :])
    else:
        correction = cross[:, None] * delta * delta
    return count, mean, scatter_a + scatter_b + correction


class GaussianBayes(BayesClassifier):
    """Gaussian class-conditional Bayes classifier (diag / spherical / tied / full).

    Parameters
    ----------
    covariance : {"diag", "spherical", "tied", "full"}
    reg : float >= 0
        Added to the variances, relative to the largest feature variance of
        the training data.
    priors : array of shape (n_classes,), optional
        Fixed class probabilities (same as ``prior=ClassPrior("fixed", priors=...)``).
    prior : ClassPrior or {"mle", "map", "uniform"}, optional
        The class-prior estimator: a ClassPrior is a template (its parameters
        are copied); default ``ClassPrior("mle")``.
    unbiased : bool
        Divide per-class scatter by (n_c - 1) instead of n_c ("diag",
        "spherical", "full").  "tied" always divides the pooled scatter by n - K.

    Attributes
    ----------
    classes_ : (n_classes,)
    n_features_in_ : int
    prior_ : ClassPrior, the fitted prior estimator
    class_count_ : (n_classes,) float64, weighted sample counts
    means_ : (n_classes, n_features)
    scatter_ : (n_classes, n_features) or (n_classes, n_features, n_features)
    covariances_ : derived; (K, d) diag, (K,) spherical, (d, d) tied, (K, d, d) full
    coef_, intercept_ : "tied" only; jll = X @ coef_.T + intercept_ + const(x)
    """

    def __init__(self, covariance="diag", reg=1e-9, priors=None, prior=None, unbiased=False):
        self.covariance = covariance
        self.reg = reg
        self.priors = priors
        self.prior = prior
        self.unbiased = unbiased

    # -- learning ---------------------------------------------------------
    def fit(self, X, y, sample_weight=None):
        """Learn from scratch.  X: (n_samples, n_features), y: (n_samples,)."""
        X = _check_X(X)
        y = _check_y(y, X.shape[0])
        self._reset()
        self.partial_fit(X, y, classes=np.unique(y), sample_weight=sample_weight)
        try:
            self._derived()  # fail now, not at predict time, if a class is too small
        except ValueError:
            self._reset()
            raise
        return self

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Add a chunk of samples; ``classes`` (all labels) is required on the first call."""
        self._check_params()
        first = not hasattr(self, "classes_")
        X = _check_X(X, None if first else self.n_features_in_)
        y = _check_y(y, X.shape[0])
        weights = _check_sample_weight(sample_weight, X.shape[0])
        if X.shape[0] == 0:
            raise ValueError("X has no samples")
        if first:
            if classes is None:
                raise ValueError("classes must be given on the first call to partial_fit")
            prior = self._make_prior()
        else:
            prior = self.prior_
            if self.covariance in _FULL_SCATTER and self.scatter_.ndim != 3:
                raise ValueError(
                    f"covariance={self.covariance!r} needs the full scatter matrices, but this model "
                    "was fitted keeping only their diagonal; refit it"
                )
        prior.partial_fit(y[:0], classes=classes)  # sets or checks the classes, counts nothing
        class_index = prior.encode(y)  # unknown labels raise before any state changes
        n_classes = len(prior.classes_)
        full = (self.covariance in _FULL_SCATTER) if first else (self.scatter_.ndim == 3)
        count, mean, scatter = class_statistics(X, class_index, n_classes, weights, full)
        if first:
            self.prior_ = prior
            self.classes_ = prior.classes_
            self.n_features_in_ = X.shape[1]
            self.means_ = np.zeros_like(mean)
            self.scatter_ = np.zeros_like(scatter)
        _, self.means_, self.scatter_ = combine_statistics(
            prior.class_count_, self.means_, self.scatter_, count, mean, scatter
        )
        prior.add_counts(count)
        self._cache = None
        return self

    @classmethod
    def from_statistics(cls, class_count, means, scatter, classes, **params):
        """A fitted model over given statistics (e.g. restored from a file):
        ``class_count`` (K,), ``means`` (K, d), ``scatter`` (K, d) or
        (K, d, d), ``classes`` the K labels in order; ``params`` go to
        ``__init__``."""
        self = cls(**params)
        prior = self._make_prior()
        prior.partial_fit(np.asarray(classes)[:0], classes=classes)
        prior.add_counts(np.asarray(class_count, dtype=np.float64))
        means = np.array(means, dtype=np.float64)
        scatter = np.array(scatter, dtype=np.float64)
        if means.ndim != 2 or means.shape[0] != len(prior.classes_) or scatter.shape[:2] != means.shape:
            raise ValueError(f"statistics of shapes {means.shape} and {scatter.shape} do not fit {len(prior.classes_)} classes")
        self.prior_ = prior
        self.classes_ = prior.classes_
        self.n_features_in_ = means.shape[1]
        self.means_ = means
        self.scatter_ = scatter
        self._cache = None
        return self

    def merge(self, other):
        """Add the statistics of another model fitted on the same classes and features."""
        self._check_is_fitted()
        other._check_is_fitted()
        if not np.array_equal(self.classes_, other.classes_):
            raise ValueError(
                f"cannot merge models over different classes: {self.classes_.tolist()!r} vs {other.classes_.tolist()!r}"
            )
        if self.n_features_in_ != other.n_features_in_:
            raise ValueError(f"cannot merge models with {self.n_features_in_} and {other.n_features_in_} features")
        scatter_b = other.scatter_
        if self.scatter_.ndim != scatter_b.ndim:
            if self.scatter_.ndim == 3:
                raise ValueError("cannot merge: the other model kept only the diagonal of its scatter matrices")
            scatter_b = np.diagonal(scatter_b, axis1=1, axis2=2).copy()
        _, self.means_, self.scatter_ = combine_statistics(
            self.prior_.class_count_, self.means_, self.scatter_, other.prior_.class_count_, other.means_, scatter_b
        )
        self.prior_.merge(other.prior_)
        self._cache = None
        return self

    # -- prediction -------------------------------------------------------
    def log_likelihood(self, X):
        """log p(x | c) without the class prior: float64 (n_samples, n_classes)."""
        self._check_is_fitted()
        X = _check_X(X, self.n_features_in_)
        model = self._derived()
        n_features = self.n_features_in_
        out = np.empty((X.shape[0], len(self.classes_)))
        kind = model["kind"]
        means = self.means_
        if kind == "diag":
            var = model["covariance"]
            for k in range(len(self.classes_)):
                out[:, k] = -0.5 * np.sum(np.log(2.0 * np.pi * var[k]))
                out[:, k] -= 0.5 * np.sum((X - means[k]) ** 2 / var[k], axis=1)
        elif kind == "spherical":
            var = model["covariance"]
            for k in range(len(self.classes_)):
                sq = np.sum((X - means[k]) ** 2, axis=1)
                out[:, k] = -0.5 * n_features * np.log(2.0 * np.pi * var[k]) - 0.5 * sq / var[k]
        elif kind == "tied":
            chol = model["cholesky"]
            white_x = linalg.solve_triangular(chol, X.T, lower=True, check_finite=False).T
            white_means = linalg.solve_triangular(chol, means.T, lower=True, check_finite=False).T
            const = -0.5 * model["logdet"] - 0.5 * n_features * _LOG_2PI
            for k in range(len(self.classes_)):
                out[:, k] = const - 0.5 * np.sum((white_x - white_means[k]) ** 2, axis=1)
        else:  # full
            for k in range(len(self.classes_)):
                z = linalg.solve_triangular(model["cholesky"][k], (X - means[k]).T, lower=True, check_finite=False)
                out[:, k] = -0.5 * model["logdet"][k] - 0.5 * n_features * _LOG_2PI - 0.5 * np.sum(z * z, axis=0)
        return out

    def _joint_log_likelihood(self, X):
        return self.log_likelihood(X) + self.prior_.log_prior_

    # -- derived parameters -----------------------------------------------
    @property
    def class_count_(self):
        """Weighted number of training samples per class: float64 (n_classes,)."""
        if not hasattr(self, "prior_"):
            raise AttributeError("class_count_ is set by fit or partial_fit")
        return self.prior_.class_count_

    @property
    def covariances_(self):
        """The regularised covariances (shape depends on ``covariance``, see the class doc)."""
        self._require_fitted("covariances_")
        return self._derived()["covariance"].copy()

    @property
    def coef_(self):
        """"tied" only: Sigma^{-1} mu_c for each class, (n_classes, n_features)."""
        if self.covariance != "tied":
            raise AttributeError('coef_ exists for covariance="tied" only (the linear discriminant)')
        self._require_fitted("coef_")
        chol = self._derived()["cholesky"]
        return linalg.cho_solve((chol, True), self.means_.T, check_finite=False).T

    @property
    def intercept_(self):
        """"tied" only: log P(c) - 1/2 mu_c^T Sigma^{-1} mu_c, (n_classes,).

        The remaining term, const(x) = -1/2 x^T Sigma^{-1} x - 1/2 log|Sigma| - d/2 log(2 pi),
        is the same for every class.
        """
        coef = self.coef_
        return self.prior_.log_prior_ - 0.5 * np.sum(coef * self.means_, axis=1)

    @property
    def epsilon_(self):
        """The absolute amount added to every variance (reg x largest feature variance)."""
        self._require_fitted("epsilon_")
        return self._derived()["epsilon"]

    # -- helpers ------------------------------------------------------------
    def _require_fitted(self, name):
        if not hasattr(self, "classes_"):
            raise AttributeError(f"{name} is set by fit or partial_fit")

    def _reset(self):
        for name in ("classes_", "n_features_in_", "prior_", "means_", "scatter_", "_cache"):
            self.__dict__.pop(name, None)

    def _check_params(self):
        if self.covariance not in COVARIANCE_TYPES:
            raise ValueError(f"covariance must be one of {COVARIANCE_TYPES}, got {self.covariance!r}")
        reg = self.reg
        if isinstance(reg, bool) or not isinstance(reg, (int, float, np.integer, np.floating)):
            raise ValueError(f"reg must be a number, got {reg!r}")
        if not math.isfinite(reg) or reg < 0:
            raise ValueError(f"reg must be finite and >= 0, got {reg!r}")
        if self.priors is not None and self.prior is not None:
            raise ValueError("give either priors (fixed probabilities) or prior (an estimator), not both")

    def _make_prior(self):
        if self.priors is not None:
            return ClassPrior("fixed", priors=np.array(self.priors, dtype=np.float64))
        template = self.prior
        if template is None:
            return ClassPrior("mle")
        if isinstance(template, ClassPrior):
            alpha = template.alpha
            alpha = np.array(alpha, dtype=np.float64) if np.ndim(alpha) else alpha
            priors = None if template.priors is None else np.array(template.priors, dtype=np.float64)
            return ClassPrior(template.method, alpha=alpha, priors=priors)
        if isinstance(template, str):
            if template == "fixed":
                raise ValueError('prior="fixed" needs the probabilities: pass priors=[...] instead')
            return ClassPrior(template)
        raise TypeError(f"prior must be a ClassPrior or a method name, got {type(template).__name__}")

    def _min_count(self):
        """The smallest per-class (weighted) count the estimate needs."""
        return 2.0 if (self.unbiased and self.covariance != "tied") else 1.0

    def _derived(self):
        """Covariances, epsilon, Cholesky factors from the statistics (cached)."""
        self._check_params()
        key = (self.covariance, float(self.reg), bool(self.unbiased))
        cache = getattr(self, "_cache", None)
        if cache is not None and cache["key"] == key:
            return cache
        kind = self.covariance
        if kind in _FULL_SCATTER and self.scatter_.ndim != 3:
            raise ValueError(
                f"covariance={kind!r} needs the full scatter matrices, but this model was fitted keeping only "
                "their diagonal; refit it"
            )
        count = self.prior_.class_count_
        need = self._min_count()
        for k, label in enumerate(self.classes_):
            if count[k] < need:
                how = f"covariance={kind!r}" + (" with unbiased=True" if need == 2 else "")
                raise ValueError(
                    f"class {_label(label)!r} has {count[k]:g} training samples; "
                    f"{how} needs at least {need:g} per class"
                )
        n_classes, n_features = self.means_.shape
        total = count.sum()
        if kind == "tied" and total <= n_classes:
            raise ValueError(
                f'covariance="tied" divides the pooled scatter by n - K: it needs more than {n_classes} '
                f"samples in total (one per class plus one), got {total:g}"
            )
        scatter_diag = self.scatter_ if self.scatter_.ndim == 2 else np.diagonal(self.scatter_, axis1=1, axis2=2)
        # largest per-feature variance of all the data: within- plus between-class scatter
        grand_mean = count @ self.means_ / total
        total_scatter = scatter_diag.sum(axis=0) + count @ (self.means_ - grand_mean) ** 2
        max_var = float(np.max(total_scatter / total))
        # data constant up to rounding (relative spread below 1e-12), or a spread whose variance float64 cannot
        # hold (below its smallest normal number: reg's share of it would be 0): reg is used as an absolute variance
        rounding_level = max((1e-12 * float(np.max(np.abs(grand_mean)))) ** 2, float(np.finfo(np.float64).tiny))
        epsilon = float(self.reg) * max_var if max_var > rounding_level else float(self.reg)
        denom = count - 1.0 if self.unbiased else count
        out = {"key": key, "kind": kind, "epsilon": epsilon}
        if kind == "diag":
            out["covariance"] = scatter_diag / denom[:, None] + epsilon
        elif kind == "spherical":
            out["covariance"] = scatter_diag.sum(axis=1) / (n_features * denom) + epsilon
        elif kind == "tied":
            cov = self.scatter_.sum(axis=0) / (total - n_classes)
            cov[np.diag_indices(n_features)] += epsilon
            out["covariance"] = cov
            out["cholesky"] = self._cholesky(cov, "the pooled (tied) covariance")
            out["logdet"] = 2.0 * np.sum(np.log(np.diag(out["cholesky"])))
        else:
            cov = self.scatter_ / denom[:, None, None]
            cov[:, np.arange(n_features), np.arange(n_features)] += epsilon
            out["covariance"] = cov
            out["cholesky"] = np.stack(
                [
                    self._cholesky(cov[k], f"the covariance of class {_label(label)!r}")
                    for k, label in enumerate(self.classes_)
                ]
            )
            out["logdet"] = 2.0 * np.sum(np.log(np.diagonal(out["cholesky"], axis1=1, axis2=2)), axis=1)
        if kind in ("diag", "spherical") and np.any(out["covariance"] <= 0):
            bad = out["covariance"] <= 0
            k = int(np.argmax(bad.any(axis=1) if bad.ndim == 2 else bad))
            raise ValueError(
                f"class {_label(self.classes_[k])!r} has a zero variance and reg={self.reg!r} adds nothing; use reg > 0"
            )
        self._cache = out
        return out

    def _cholesky(self, cov, what):
        try:
            return linalg.cholesky(cov, lower=True, check_finite=False)
        except linalg.LinAlgError:
            raise ValueError(
                f"{what} is singular (not positive definite) with reg={self.reg!r}; increase reg"
            ) from None

    def __repr__(self):
        return (
            f"{type(self).__name__}(covariance={self.covariance!r}, reg={self.reg!r}, "
            f"priors={self.priors!r}, prior={self.prior!r}, unbiased={self.unbiased!r})"
        )


class GaussianNB(GaussianBayes):
    """Gaussian naive Bayes: ``GaussianBayes(covariance="diag")`` with sklearn's names.

    ``var_smoothing`` times the largest feature variance of the training data
    is added to every variance.  Unlike sklearn's ``partial_fit`` (which takes
    that variance from the first chunk), it is recomputed from the statistics
    of all the data, so chunked training equals one ``fit``.

    Attributes (besides GaussianBayes's): ``theta_`` (class means, (K, d)),
    ``var_`` (variances, (K, d)), ``epsilon_``, ``class_prior_`` ((K,)).
    """

    covariance = property(lambda self: "diag", doc='Always "diag".')
    unbiased = property(lambda self: False, doc="Always False: variances are the MLE, as in sklearn.")

    def __init__(self, var_smoothing=1e-9, priors=None, prior=None):
        self.var_smoothing = var_smoothing
        self.priors = priors
        self.prior = prior

    @property
    def reg(self):
        """Same as ``var_smoothing``."""
        return self.var_smoothing

    @property
    def theta_(self):
        self._require_fitted("theta_")
        return self.means_

    @property
    def var_(self):
        return self.covariances_

    @property
    def class_prior_(self):
        self._require_fitted("class_prior_")
        return self.prior_.prior_

    def __repr__(self):
        return f"GaussianNB(var_smoothing={self.var_smoothing!r}, priors={self.priors!r}, prior={self.prior!r})"
