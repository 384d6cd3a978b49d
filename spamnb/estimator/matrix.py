"""Scoring many messages at once and reading a fitted filter's weights: the
sparse matrix of messages' transformed token counts over a filter's
vocabulary (CSR, never dense), the batch kernel's log-odds, and the
strongest tokens (``spamnb info``).  One message is scored by
:mod:`spamnb.estimator.scoring` (``SpamFilter.classify``), which does not
load this module: a cold classify or learn of one message never runs it."""

from spamnb.bayes import arithmetic, token_kernels
from spamnb.estimator.defaults import COUNT_TRANSFORMS
from spamnb.estimator.scoring import message_data, message_features_of

__all__ = ["rows", "transform", "score_many", "strongest_tokens"]


def rows(spam_filter, messages, grow, features=None, pair_weight=1.0):
    """A CSRBuilder with the messages' transformed token counts (each word
    pair's times ``pair_weight``: 1 to count, the filter's to score); the
    messages' continuous features are appended to ``features`` when it is a list."""
    builder = token_kernels.CSRBuilder(COUNT_TRANSFORMS[spam_filter.counts], float(spam_filter.length_norm),
                                       float(pair_weight))
    stream = spam_filter.tokenizer_.stream
    index = spam_filter.vocabulary_.add if grow else (lambda s: spam_filter.vocabulary_.lookup(s.hashes))
    for message in messages:
        data = message_data(message)
        tokens = stream(data)
        builder.add_row(index(tokens), tokens.pairs_start)
        if features is not None:
            features.append(message_features_of(spam_filter, data))
    return builder


def _csr(spam_filter, builder):
    import numpy as np
    from scipy import sparse

    n_rows = builder.n_rows
    indptr = np.frombuffer(builder.indptr, dtype=np.int64)  # never empty: it starts with 0
    indices = np.frombuffer(builder.indices, dtype=np.int32) if len(builder.indices) else np.zeros(0, np.int32)
    data = np.frombuffer(builder.data, dtype=np.float64) if len(builder.data) else np.zeros(0, np.float64)
    return sparse.csr_matrix((data, indices, indptr), shape=(n_rows, spam_filter.vocabulary_.n_features))


def transform(spam_filter, messages):
    """Token-count vectors of messages over the fitted vocabulary, as scored (word
    pairs times the filter's ``pair_weight``): CSR (n_messages, n_features)."""
    spam_filter.require_fitted()
    return _csr(spam_filter, rows(spam_filter, messages, grow=False, pair_weight=spam_filter.pair_scoring()[0]))


def score_many(spam_filter, messages):
    """Log-odds of many messages through the sparse kernel: float64 array (n_messages,)."""
    import numpy as np

    from spamnb.bayes import kernels

    counts = spam_filter.sized_counts()
    messages = [message_data(m) for m in messages]
    jll = kernels.joint_log_likelihood(transform(spam_filter, messages), counts.log_theta(),
                                       np.asarray(counts.derived()[2], dtype=np.float64))
    with np.errstate(invalid="ignore"):
        log_odds = jll[:, 1] - jll[:, 0]
    log_odds[np.isneginf(jll).all(axis=1)] = 0.0  # impossible under both classes: even odds
    scale = spam_filter.pair_scoring()[1]
    if scale != 1.0:   # a learned model's pair-weight mixture (Scaled)
        log_odds = log_odds * scale
    if spam_filter.features_ is not None and spam_filter.feature_weight:
        features = [message_features_of(spam_filter, m) for m in messages]
        log_odds = log_odds + spam_filter.feature_weight * spam_filter.features_.log_likelihood_ratio(features)
    return log_odds


def strongest_tokens(spam_filter, n=10, min_count=5):
    """The ``n`` tokens pointing most to spam and to ham: two lists of
    ``(token, log theta_spam - log theta_ham, ham count, spam count)``,
    among tokens whose counts add up to at least ``min_count`` (the
    transformed counts: with ``length_norm`` > 0 each message's are
    scaled by its length, so they are not counts of occurrences)."""
    import numpy as np

    counts = spam_filter.sized_counts()
    fc = counts.matrix()
    log_count, log_norm, _log_prior = counts.derived()
    log_count = np.frombuffer(log_count, dtype=np.float64).reshape(fc.shape)
    weight = arithmetic.log_odds_weights(log_count[0], log_count[1], log_norm)
    eligible = np.flatnonzero(fc.sum(axis=0) >= min_count)
    order = eligible[np.argsort(weight[eligible], kind="stable")]
    token = spam_filter.vocabulary_.token

    def token_rows(indices):
        return [(token(i), float(weight[i]), float(fc[0, i]), float(fc[1, i])) for i in indices]

    return token_rows(order[::-1][:n]), token_rows(order[:n])
