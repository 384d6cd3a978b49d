"""The naive Bayes arithmetic, written once: from counts to log theta and log-odds.

For class c and token i, with N_ci the (transformed) count of token i in the
messages learned as c, N_c = sum_i N_ci, V the number of tokens and alpha the
Dirichlet soft count,

    log theta_ci = log(N_ci + alpha) - log(N_c + alpha V)
    log P(c)     = the class prior estimator's (``spamnb.bayes.priors.log_prior``;
                   :func:`plain_log_prior` is the same formula without numpy)
    w_i          = log theta_1i - log theta_0i   (a token's weight in the log-odds)

Every module of spamnb that derives these from counts calls this one: the
count model (``spamnb.bayes.wordcounts``, and ``MultinomialNB`` through it),
the cross-validation of ``spamnb train`` (``spamnb.estimator.calibrate``), pruning
(``spamnb.model.lifecycle``) and the evidence (``spamnb.estimator.scoring``); the
compiled kernels (``spamnb.bayes._count``, ``_score``) compute the same
expressions for one message's tokens.  ``tests/test_arithmetic.py`` scans the
sources for the formulas written anywhere else.

The numpy functions take float64 arrays; :func:`log_norms` and
:func:`plain_log_prior` are plain Python (a model that learns and scores one
message at a time imports no numpy for them).  Each keeps the exact order of
operations it has always had, so scores stay the same to the bit.
"""

from spamnb.bayes.token_kernels import INF, log

__all__ = ["smoothed_logs", "log_norm", "log_norms", "log_counts", "log_theta", "log_odds_weights",
           "plain_log_prior", "prior_log_odds"]


def smoothed_logs(feature_count, alpha, n_features=None):
    """``(log(N_ci + alpha_i), log(N_c + sum_i alpha_i))`` of a float64
    ``(n_classes, n_features)`` count matrix; ``alpha`` a scalar or an
    ``(n_features,)`` array; ``n_features`` the V of the norm when it is not
    the matrix's width (a scalar alpha only: tokens without counts that V
    leaves out).  log(0) is -inf (alpha = 0), without a warning."""
    import numpy as np

    if n_features is None:
        n_features = feature_count.shape[1]
    total_alpha = alpha * n_features if np.ndim(alpha) == 0 else np.sum(alpha)
    with np.errstate(divide="ignore"):
        return log_counts(feature_count, alpha), np.log(feature_count.sum(axis=1) + total_alpha)


def log_norm(totals, alpha, n_features):
    """log(N_c + alpha V), numpy: ``totals`` the class totals N_c (float64 ``(n_classes,)``)."""
    import numpy as np

    return np.log(totals + alpha * n_features)


def log_norms(totals, alpha, n_features):
    """log(N_c + alpha V) of plain floats, a tuple; -inf where that is 0 or less."""
    out = []
    for total in totals:
        smoothed = total + alpha * n_features
        out.append(log(smoothed) if smoothed > 0 else -INF)
    return tuple(out)


def log_counts(feature_count, alpha, out=None):
    """log(N_ci + alpha), numpy, elementwise; ``out=feature_count`` computes it in place."""
    import numpy as np

    if out is None:
        out = feature_count + alpha
        if out.dtype != np.float64:
            return np.log(out)
        return np.log(out, out=out)   # the sum's array takes its log: one array as long as the counts, not two
    np.add(feature_count, alpha, out=out)
    return np.log(out, out=out)


def log_theta(feature_count, alpha):
    """log theta: float64 ``(n_classes, n_features)``, read-only, the
    transpose of a C-contiguous ``(n_features, n_classes)`` array (the
    kernel reads one token's classes together).  A class whose smoothed total
    is 0 (no counts and alpha = 0) gets the uniform distribution."""
    import numpy as np

    n_classes, n_features = feature_count.shape
    log_count, norm = smoothed_logs(feature_count, alpha)
    by_feature = np.empty((n_features, n_classes), dtype=np.float64)
    with np.errstate(invalid="ignore"):
        by_feature[...] = (log_count - norm[:, None]).T
    empty = np.isneginf(norm)
    if np.any(empty) and n_features:
        by_feature[:, empty] = -np.log(n_features)
    out = by_feature.T
    out.flags.writeable = False
    return out


def log_odds_weights(log_count_ham, log_count_spam, norm):
    """Each token's weight in the log-odds, log theta_spam - log theta_ham, from
    the log-counts of the two classes and their ``norm`` (log(N_c + alpha V))."""
    return (log_count_spam - log_count_ham) - (norm[1] - norm[0])


def plain_log_prior(method, class_count):
    """:func:`spamnb.bayes.priors.log_prior` without numpy (the "map" prior
    with one pseudo-message per class, as the count model takes it)."""
    n_classes = len(class_count)
    uniform = (-log(n_classes),) * n_classes
    if method == "uniform":
        return uniform
    values = [v + 1.0 for v in class_count] if method == "map" else list(class_count)
    total = sum(values)
    if total <= 0:
        return uniform
    log_total = log(total)
    return tuple((log(v) - log_total) if v > 0 else -INF for v in values)


def prior_log_odds(method, n_ham, n_spam):
    """log P(spam) - log P(ham) of the prior ``method`` ("mle", "map": one
    pseudo-message per class, "uniform") after ``n_ham`` and ``n_spam``
    messages: +-inf when only one class has any, 0 when neither has."""
    if method == "uniform":
        return 0.0
    if method == "map":
        n_ham, n_spam = n_ham + 1.0, n_spam + 1.0
    if n_ham <= 0 or n_spam <= 0:
        return INF if n_ham <= 0 < n_spam else (-INF if n_spam <= 0 < n_ham else 0.0)
    return log(n_spam) - log(n_ham)
