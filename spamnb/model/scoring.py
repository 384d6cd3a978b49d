"""Scoring many messages at once and reading a fitted filter's weights: the
sparse matrix of messages' transformed token counts over a filter's
vocabulary (CSR, never dense), the batch kernel's log-odds, and the
strongest tokens (``spamnb info``)."""

from __future__ import annotations

from array import array

from spamnb.bayes import _vocab
from spamnb.model import verdict
from spamnb.model.defaults import COUNT_TRANSFORMS
from spamnb.model.messages import message_bytes

__all__ = ["scorer", "rows", "transform", "score_many", "strongest_tokens", "score_one", "score_stream", "gather", "compact_scorer"]


def scorer(spam_filter):
    """The single-message ``_vocab.Scorer`` of a fitted filter (``SpamFilter.classify``):
    over its hash index and log(count + alpha), or, for a model whose
    journal was replayed in place (``spamnb.model.journal``), the file's
    logs and the side rows of the tokens new since."""
    state = vars(spam_filter)   # as replayed, holes and all (spamnb.model.deltas.Folded)
    vocab, counts = state["vocabulary_"], state["word_counts_"]
    if counts is None:
        spam_filter._require_fitted()
    counts.resize(vocab.n_features)
    log_count, log_norm, log_prior, tail = counts.scorer_logs()
    mapped = state.get("mapped_file_")
    if mapped is not None and counts.as_loaded and not tail:   # the file's entries are the model's
        return FileScorer(*mapped, vocab.n_features, log_norm, log_prior, COUNT_TRANSFORMS[spam_filter.counts],
                          float(spam_filter.length_norm))
    return _vocab.Scorer(vocab.keys, vocab.values, log_count, vocab.n_features, log_norm, log_prior,
                         COUNT_TRANSFORMS[spam_filter.counts], float(spam_filter.length_norm), tail)


class FileScorer:
    """The single-message scorer of a model file mapped and unchanged
    (``SpamFilter.load(mapped=True)``, no journal record applied): a
    message's entries of the hash index and its log-counts are read from
    the open file (``_vocab.gather``: ``pread``, no page of the model
    mapped or faulted in, so memory does not grow with the model and a
    file cut short is an error, never a fault), into a ``_vocab.Scorer``
    over those tokens alone, numbered in the order of their feature indices:
    the same sums in the same order as the whole model's Scorer, the
    evidence given with the model's feature indices."""

    def __init__(self, file, offsets, capacity, n_features, log_norm, log_prior, counts, length):
        self._file, self._layout = file, (offsets["keys"], capacity, offsets["values"], offsets["log_count"])
        self._n_features, self._log_norm, self._log_prior = n_features, log_norm, log_prior
        self._counts, self._length = counts, length

    def _compact(self, hashes):
        """``(scorer, index)``: a Scorer over the message's known tokens and their model feature indices."""
        found, index, logs = gather(self._file, self._layout, self._n_features, len(self._log_prior), hashes)
        return compact_scorer(found, logs, self._log_norm, self._log_prior, self._counts, self._length), index

    def score(self, hashes, n_evidence=0):
        scorer, index = self._compact(hashes)
        jll, evidence, *rest = scorer.score(hashes, n_evidence)
        return (jll, [(index[i], w) for i, w in evidence], *rest)

    def verdict_sums(self, hashes, regions, truncated=False):
        return self._compact(hashes)[0].verdict_sums(hashes, regions, truncated)


def gather(file, layout, n_features, n_classes, hashes):
    """``(found, index, logs)``: the distinct ``hashes`` the hash index of the
    model file open as ``file`` holds, their feature indices and their
    log-counts (class-major), read with ``pread`` (``_vocab.gather``);
    ``layout``: the byte offsets ``(keys, capacity, values, log_count)``."""
    keys_at, capacity, values_at, logs_at = layout
    return _vocab.gather(file.fileno(), keys_at, capacity, values_at, logs_at, n_features, n_classes, hashes)


def compact_scorer(found, logs, log_norm, log_prior, counts, length):
    """A ``_vocab.Scorer`` over the tokens ``found`` alone (``array('Q')``),
    numbered in their order, with their log-counts ``logs`` (class-major)."""
    n = len(found)
    size = 16
    while size < 2 * (n + 1):
        size <<= 1
    keys, values = array("Q", bytes(8 * size)), array("i", bytes(4 * size))
    _vocab.insert(keys, values, found, array("i", bytes(4 * n)), 0, array("i", bytes(4 * n)))
    return _vocab.Scorer(keys, values, logs, n, log_norm, log_prior, counts, length)


def rows(spam_filter, messages, grow, features=None):
    """A CSRBuilder with the messages' transformed token counts; the messages'
    continuous features are appended to ``features`` when it is a list."""
    builder = _vocab.CSRBuilder(COUNT_TRANSFORMS[spam_filter.counts], float(spam_filter.length_norm))
    stream = spam_filter.tokenizer_.stream
    index = spam_filter.vocabulary_.add if grow else (lambda s: spam_filter.vocabulary_.lookup(s.hashes))
    for message in messages:
        data = message_bytes(message)
        builder.add_row(index(stream(data)))
        if features is not None:
            features.append(spam_filter._message_features(data))
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
    """Token-count vectors of messages over the fitted vocabulary: CSR (n_messages, n_features)."""
    spam_filter._require_fitted()
    return _csr(spam_filter, rows(spam_filter, messages, grow=False))


def score_many(spam_filter, messages):
    """Log-odds of many messages through the sparse kernel: float64 array (n_messages,)."""
    import numpy as np

    from spamnb.bayes import kernels

    counts = spam_filter._counts()
    messages = [message_bytes(m) for m in messages]
    jll = kernels.joint_log_likelihood(transform(spam_filter, messages), counts.log_theta(),
                                       np.asarray(counts.derived()[2], dtype=np.float64))
    with np.errstate(invalid="ignore"):
        log_odds = jll[:, 1] - jll[:, 0]
    log_odds[np.isneginf(jll).all(axis=1)] = 0.0  # impossible under both classes: even odds
    if spam_filter.features_ is not None and spam_filter.feature_weight:
        features = [spam_filter._message_features(m) for m in messages]
        log_odds = log_odds + spam_filter.feature_weight * spam_filter.features_.log_likelihood_ratio(features)
    return log_odds


def strongest_tokens(spam_filter, n=10, min_count=5):
    """The ``n`` tokens pointing most to spam and to ham: two lists of
    ``(token, log theta_spam - log theta_ham, ham count, spam count)``,
    among tokens whose counts add up to at least ``min_count`` (the
    transformed counts: with ``length_norm`` > 0 each message's are
    scaled by its length, so they are not counts of occurrences)."""
    import numpy as np

    counts = spam_filter._counts()
    fc = counts.matrix()
    log_count, log_norm, _log_prior = counts.derived()
    log_count = np.frombuffer(log_count, dtype=np.float64).reshape(fc.shape)
    weight = (log_count[1] - log_norm[1]) - (log_count[0] - log_norm[0])
    eligible = np.flatnonzero(fc.sum(axis=0) >= min_count)
    order = eligible[np.argsort(weight[eligible], kind="stable")]
    token = spam_filter.vocabulary_.token

    def token_rows(indices):
        return [(token(i), float(weight[i]), float(fc[0, i]), float(fc[1, i])) for i in indices]

    return token_rows(order[::-1][:n]), token_rows(order[:n])


def score_one(spam_filter, message, n_evidence, parts=True):
    """One message through the single-message scorer: ``(log_odds, evidence,
    n_tokens, n_known, (spam_evidence, ham_evidence, part_max))``, the
    evidence the ``n_evidence`` strongest ``(token index, weight)`` (0: none;
    then the verdict's sums come from one pass over the tokens), ``part_max``
    None unless ``parts``."""
    data = message_bytes(message)
    log_odds, evidence, n_tokens, n_known, sums = score_stream(spam_filter._scoring(),
                                                               spam_filter.tokenizer_.stream(data), n_evidence, parts)
    if spam_filter.features_ is not None and spam_filter.feature_weight:
        ll_ham, ll_spam = spam_filter.features_.log_likelihood_one(spam_filter._message_features(data))
        log_odds += spam_filter.feature_weight * (ll_spam - ll_ham)
    return log_odds, evidence, n_tokens, n_known, sums


def score_stream(scorer, stream, n_evidence, parts=True):
    """:func:`score_one` of a message's token ``stream`` through ``scorer`` (a
    ``_vocab.Scorer``, or one with its ``score`` and ``verdict_sums``), without
    the message features."""
    hashes = stream.hashes
    if parts and not n_evidence:   # the verdict's sums in one pass over the tokens (each looked up once)
        log_odds, n_tokens, n_known, spam_ev, ham_ev, part_max = scorer.verdict_sums(hashes, stream.regions,
                                                                                     stream.truncated)
        evidence = ()
    else:
        jll, evidence, n_tokens, n_known, spam_ev, ham_ev = scorer.score(hashes, n_evidence)
        log_odds = jll[1] - jll[0]
        part_max = verdict.part_max(scorer, hashes, stream.regions, stream.truncated) if parts else None
    return log_odds, evidence, n_tokens, n_known, (spam_ev, ham_ev, part_max)
