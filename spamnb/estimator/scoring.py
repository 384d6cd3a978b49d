"""Scoring one message: a fitted filter's single-message scorer (the file's
entries read by :class:`FileScorer`, or the counts held), a message's
:class:`verdict.MessageScore` through it, its evidence named.  Scoring many
messages at once and a filter's strongest tokens are
:mod:`spamnb.estimator.matrix`'s (a classify or learn of one message does
not load that module's byte-code)."""

from array import array

from spamnb.bayes import token_kernels
from spamnb.estimator import verdict
from spamnb.estimator.defaults import COUNT_TRANSFORMS

__all__ = ["scorer", "kernel", "Scaled", "score_one", "score_stream", "gather",
           "compact_scorer", "evidence_tokens", "message_features_of", "message_data"]


def scorer(spam_filter, pair_weight=None):
    """The single-message scorer of a fitted filter (``SpamFilter.classify``) at the
    pair weight and scale it scores with (``SpamFilter.pair_scoring``: a scale
    other than 1 wraps the kernel in :class:`Scaled`), or at ``pair_weight``
    unscaled when given (a learn's two held-out scores,
    ``spamnb.estimator.variants``): :func:`kernel`."""
    weight, scale = spam_filter.pair_scoring()
    if pair_weight is not None:
        weight, scale = float(pair_weight), 1.0
    made = kernel(spam_filter, weight)
    return made if scale == 1.0 else _scaled()(made, scale)


def _scaled():
    """:class:`Scaled`, made when first needed (a model with a pair-weight mixture;
    PEP 562's ``__getattr__`` gives it by name): a class statement costs a cold
    classify of any other model about 0.2 million instructions."""
    global _SCALED
    if _SCALED is None:
        class Scaled:
            """A kernel whose log-odds, joint log-likelihoods and evidence are multiplied
            by ``scale`` (a learned model's pair-weight mixture keeps its scores on
            the scale of its centre weight: ``spamnb.estimator.variants.PairMixture``)."""

            __slots__ = ("kernel", "scale")

            def __init__(self, kernel, scale):
                self.kernel, self.scale = kernel, float(scale)

            def score(self, hashes, n_evidence=0, pairs_start=-1):
                s = self.scale
                jll, evidence, n_tokens, n_known, spam_ev, ham_ev = self.kernel.score(hashes, n_evidence, pairs_start)
                return ([v * s for v in jll], [(i, w * s) for i, w in evidence], n_tokens, n_known, spam_ev * s,
                        ham_ev * s)

            def verdict_sums(self, hashes, regions, truncated=False, pairs_start=-1):
                s = self.scale
                log_odds, n_tokens, n_known, spam_ev, ham_ev, part_max = self.kernel.verdict_sums(
                    hashes, regions, truncated, pairs_start)
                return log_odds * s, n_tokens, n_known, spam_ev * s, ham_ev * s, part_max * s

            def pair_sums(self, hashes, pairs_start=-1):
                """The kernel's own (unscaled: a learn's two held-out scores are of the counts,
                ``spamnb.estimator.variants.pair_scores``)."""
                return self.kernel.pair_sums(hashes, pairs_start)

        Scaled.__qualname__ = "Scaled"
        _SCALED = Scaled
    return _SCALED


_SCALED = None


def __getattr__(name):
    if name == "Scaled":
        return _scaled()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def kernel(spam_filter, pair_weight):
    """The single-message ``token_kernels.Scorer`` of a fitted filter at ``pair_weight``:
    over its hash index and log(count + alpha), or, for a model that learned
    or whose journal was replayed in place (``WordCounts.scorer_state``),
    the logs as they are held and the side rows of the tokens new since (no
    copy: a learn and the score after it cost the message's tokens); for a
    model read in part whose journal's learns were not replayed, the journal
    itself (``spamnb.persistence.journal_view``: the message's entries through them)."""
    pending = spam_filter.pending_journal_
    if pending is not None:
        return pending if pending.pair_weight == pair_weight else pending.weighted(pair_weight)
    vocab, counts, _ages = spam_filter.replayed()   # as replayed, holes and all (spam_filter.Folded)
    if counts is None:
        spam_filter.require_fitted()
    if not counts.as_loaded:   # changed since the load: a model read in part is read whole (SpamFilter.read_whole)
        spam_filter.read_whole()
    counts.resize(vocab.n_features)
    log_count, log_norm, log_prior, tail, stride = counts.scorer_state()
    mapped = spam_filter.mapped_file_
    if mapped is not None and counts.as_loaded and not tail:   # the file's entries are the model's
        return FileScorer(*mapped, vocab.n_features, log_norm, log_prior, COUNT_TRANSFORMS[spam_filter.counts],
                          float(spam_filter.length_norm), pair_weight)
    spam_filter.read_whole()   # a model read in part (SpamFilter.load(mapped=True)): its arrays whole now
    return token_kernels.Scorer(vocab.keys, vocab.values, log_count, vocab.n_features, log_norm, log_prior,
                                COUNT_TRANSFORMS[spam_filter.counts], float(spam_filter.length_norm), tail,
                                pair_weight, -1 if stride is None else stride)


class FileScorer:
    """The single-message scorer of a model file mapped and unchanged
    (``SpamFilter.load(mapped=True)``, no journal record applied): a
    message's entries of the hash index and its log-counts are read from
    the open file (``token_kernels.gather``: ``pread``, no page of the model
    mapped or faulted in, so memory does not grow with the model and a
    file cut short is an error, never a fault), into a ``token_kernels.Scorer``
    over those tokens alone, numbered in the order of their feature indices:
    the same sums in the same order as the whole model's Scorer, the
    evidence given with the model's feature indices."""

    def __init__(self, file, offsets, capacity, n_features, log_norm, log_prior, counts, length, pair_weight=1.0):
        self._file, self._layout = file, (offsets["keys"], capacity, offsets["values"], offsets["log_count"])
        self._n_features, self._log_norm, self._log_prior = n_features, log_norm, log_prior
        self._counts, self._length, self.pair_weight = counts, length, pair_weight

    def compact(self, hashes):
        """``(scorer, index)``: a Scorer over the message's known tokens and their model feature indices."""
        found, index, logs = self._entries(hashes)
        return compact_scorer(found, logs, self._log_norm, self._log_prior, self._counts, self._length,
                              self.pair_weight), index

    def _entries(self, hashes):
        """:func:`gather` of ``hashes`` from this scorer's file (a learner's view reads them once a message)."""
        return gather(self._file, self._layout, self._n_features, len(self._log_prior), hashes)

    def score(self, hashes, n_evidence=0, pairs_start=-1):
        scorer, index = self.compact(hashes)
        jll, evidence, *rest = scorer.score(hashes, n_evidence, pairs_start)
        return (jll, [(index[i], w) for i, w in evidence], *rest)

    def verdict_sums(self, hashes, regions, truncated=False, pairs_start=-1):
        return self.compact(hashes)[0].verdict_sums(hashes, regions, truncated, pairs_start)

    def pair_sums(self, hashes, pairs_start=-1):
        return self.compact(hashes)[0].pair_sums(hashes, pairs_start)


def gather(file, layout, n_features, n_classes, hashes):
    """``(found, index, logs)``: the distinct ``hashes`` the hash index of the
    model file open as ``file`` holds, their feature indices and their
    log-counts (class-major), read with ``pread`` (``token_kernels.gather``);
    ``layout``: the byte offsets ``(keys, capacity, values, log_count)``."""
    keys_at, capacity, values_at, logs_at = layout
    return token_kernels.gather(file.fileno(), keys_at, capacity, values_at, logs_at, n_features, n_classes, hashes)


def compact_scorer(found, logs, log_norm, log_prior, counts, length, pair_weight=1.0):
    """A ``token_kernels.Scorer`` over the tokens ``found`` alone (``array('Q')``),
    numbered in their order, with their log-counts ``logs`` (class-major)."""
    n = len(found)
    size = 16
    while size < 2 * (n + 1):
        size <<= 1
    keys, values = array("Q", bytes(8 * size)), array("i", bytes(4 * size))
    token_kernels.insert(keys, values, found, array("i", bytes(4 * n)), 0, array("i", bytes(4 * n)))
    return token_kernels.Scorer(keys, values, logs, n, log_norm, log_prior, counts, length, None, pair_weight)


def message_data(message):
    """``spamnb.estimator.messages.message_bytes`` of ``message``: a message given as
    bytes (a command's) is itself, and a cold classify loads no module for it."""
    if isinstance(message, bytes):
        return message
    from spamnb.estimator.messages import message_bytes

    return message_bytes(message)


def score_one(spam_filter, message, n_evidence, parts=True):
    """One message through the single-message scorer: a :class:`verdict.MessageScore`,
    its evidence the ``n_evidence`` strongest ``(token index, weight)`` (0:
    none; then the verdict's sums come from one pass over the tokens), its
    ``sums.part_max`` None unless ``parts``."""
    scorer = spam_filter.scorer()
    data = message_data(message)
    scored = score_stream(scorer, spam_filter.tokenizer_.stream(data), n_evidence, parts)
    if spam_filter.features_ is not None and spam_filter.feature_weight:
        ll_ham, ll_spam = spam_filter.features_.log_likelihood_one(message_features_of(spam_filter, data))
        scored = verdict.MessageScore(scored.log_odds + spam_filter.feature_weight * (ll_spam - ll_ham), *scored[1:])
    return scored


def score_stream(scorer, stream, n_evidence, parts=True):
    """:func:`score_one` of a message's token ``stream`` through ``scorer``, a
    :class:`spamnb.estimator.forms.Kernel` (a ``token_kernels.Scorer``, a :class:`FileScorer`,
    an overlay: any form's ``kernel()``), without the message features: a
    :class:`verdict.MessageScore`.  The one path of every form's ``score_stream``."""
    hashes = stream.hashes
    if parts and not n_evidence:   # the verdict's sums in one pass over the tokens (each looked up once)
        log_odds, n_tokens, n_known, spam_ev, ham_ev, part_max = scorer.verdict_sums(hashes, stream.regions,
                                                                                     stream.truncated,
                                                                                     stream.pairs_start)
        evidence = ()
    else:
        jll, evidence, n_tokens, n_known, spam_ev, ham_ev = scorer.score(hashes, n_evidence, stream.pairs_start)
        log_odds = jll[1] - jll[0]
        part_max = verdict.part_max(scorer, hashes, stream.regions, stream.truncated) if parts else None
    return verdict.MessageScore(log_odds, evidence, n_tokens, n_known, verdict.EvidenceSums(spam_ev, ham_ev, part_max))


def evidence_tokens(spam_filter, evidence):
    """``(token, weight)`` of a :class:`verdict.MessageScore`'s evidence (feature indices)."""
    pending = spam_filter.pending_journal_
    if pending is not None:   # spamnb.persistence.journal_view: the file's tokens and the journal's
        return tuple((pending.token(i), w) for i, w in evidence)
    unread = spam_filter.unread_
    if unread is not None and "strings" in unread.unread:   # the strings not read: each one from the file
        token = unread.token
    else:
        token = spam_filter.replayed().vocabulary.token   # holes (spam_filter.Folded) are never evidence
    return tuple((token(i), w) for i, w in evidence)


def message_features_of(spam_filter, data):
    """The continuous features of one message (``spamnb.estimator.message_features``),
    parsed with the limits of the filter's tokenizer."""
    from spamnb.estimator.message_features import raw_message_features

    tokenizer = spam_filter.tokenizer_
    return raw_message_features(data, max_bytes=tokenizer.max_bytes, max_depth=tokenizer.max_depth,
                                max_parts=tokenizer.max_parts, fallback_charset=tokenizer.fallback_charset)
