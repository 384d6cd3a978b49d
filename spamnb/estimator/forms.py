"""One interface for every form a model takes: :class:`Scorer`.

A model is scored in several forms, each holding what its user needs and
each giving the same scores, bit for bit:

========================  ==========================================  ==================================
form                      made by                                     its kernel
========================  ==========================================  ==================================
whole                     ``SpamFilter.load(path)``, ``fit``, learns   ``token_kernels.Scorer``
mapped                    ``SpamFilter.load(path, form="mapped")``     :class:`scoring.FileScorer`, or
                                                                      ``journal_view.JournalView`` (a journal of learns)
following (serve, TELL)   ``SpamFilter.load(path, form="following")``  ``token_kernels.Scorer``
scoring (serve)           ``SpamFilter.load(path, form="scoring")``    ``token_kernels.Scorer``
overlay (a user's)        ``spamnb.server.overlay.build``              its own (site file + journal)
fold ``k`` of a CV        ``forms.fold_form(models, k, tokenizer)``    ``token_kernels.Scorer``
========================  ==========================================  ==================================

"whole" is read whole into private memory and all of it checked; "mapped" is
read in part, never mapped (the header and every array's bounds checked, not
the checksum; the large arrays read when a learn needs them), so a message's
cost does not grow with the model; "following" is whole without its ledger
and last-seen days, and follows its journal (``follow_journal``); "scoring"
keeps only what scoring reads (the hash index, the log-counts, the token
strings).  The last two are never saved.

Every form is a :class:`Scorer`: it makes a message's token stream
(``tokens``), scores a stream through its :class:`Kernel` (``score_stream``,
the one path of :func:`spamnb.estimator.scoring.score_stream`), names the
evidence (``token_names``), holds its ``cutoffs`` and ``n_evidence``, and
gives a :class:`~spamnb.estimator.verdict.Verdict` (``classify``: for every form
but the whole filter, :func:`classify`, the same steps as
``SpamFilter.classify``).  The server, the command line and the evaluation
ask the model's owner for a form (``SpamFilter.load(form=...)``) and use it
through this interface, never through its attributes.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Kernel", "Scorer", "ScorerBase", "FoldScorer", "fold_form", "classify", "keep_scoring_only"]


@runtime_checkable
class Kernel(Protocol):
    """What scores a message's token hashes (``bayes/_score.Scorer``, compiled,
    and the forms' own: :class:`spamnb.estimator.scoring.FileScorer`, an overlay).

    ``score`` returns ``(jll, evidence, n_tokens, n_known, spam_evidence,
    ham_evidence)``, ``evidence`` the ``n_evidence`` strongest ``(feature
    index, weight)``; ``verdict_sums`` returns ``(log_odds, n_tokens,
    n_known, spam_evidence, ham_evidence, part_max)`` in one pass."""

    def score(self, hashes, n_evidence=0, pairs_start=-1): ...

    def verdict_sums(self, hashes, regions, truncated=False, pairs_start=-1): ...


@runtime_checkable
class Scorer(Protocol):
    """A model in any of its forms, as the server, the command line and the
    evaluation use it (the table above)."""

    cutoffs: object      # a spamnb.estimator.verdict.Cutoffs
    n_evidence: int

    def kernel(self) -> Kernel:
        """What scores token hashes, as the model stands now."""

    def tokens(self, message):
        """The token stream (``mail/tokenizer.TokenStream``) of ``message``: bytes, text or a ``Path``."""

    def score_stream(self, stream, n_evidence=0, parts=True):
        """A :class:`spamnb.estimator.verdict.MessageScore` of a token stream."""

    def token_names(self, evidence):
        """``(token, weight)`` of a score's evidence ``(feature index, weight)``."""

    def classify(self, message, evidence=True):
        """A :class:`spamnb.estimator.verdict.Verdict` of ``message``."""


def classify(form, message, evidence=True):
    """The verdict of ``message`` by a :class:`Scorer` ``form``: its tokens scored
    (:meth:`Scorer.score_stream`), the rule of :func:`spamnb.estimator.verdict.decide`
    with its cutoffs, the evidence named; what ``SpamFilter.classify`` does."""
    from spamnb.estimator import verdict

    scored = form.score_stream(form.tokens(message), int(form.n_evidence) if evidence else 0)
    named = form.token_names(scored.evidence) if evidence else ()
    return verdict.verdict_of(scored, form.cutoffs, named)


class ScorerBase:
    """A :class:`Scorer` made of a :meth:`kernel`, a ``tokenizer`` (a
    ``mail/tokenizer.Tokenizer``), ``cutoffs`` and ``n_evidence``, and a
    :meth:`token` naming a feature index: the rest is the shared path."""

    tokenizer = None

    def kernel(self):
        raise NotImplementedError

    def token(self, index):
        raise NotImplementedError

    def tokens(self, message):
        from spamnb.estimator.messages import message_bytes

        return self.tokenizer.stream(message_bytes(message))

    def score_stream(self, stream, n_evidence=0, parts=True):
        from spamnb.estimator.scoring import score_stream

        return score_stream(self.kernel(), stream, n_evidence, parts)

    def token_names(self, evidence):
        return tuple((self.token(i), w) for i, w in evidence)

    def classify(self, message, evidence=True):
        return classify(self, message, evidence)

    def follow_journal(self):
        """None: this form does not follow a journal (load the model again)."""
        return None


class FoldScorer(ScorerBase):
    """One fold's held-out model of a cross-validation
    (:func:`fold_form`): its kernel, the filter's
    tokenizer, ``cutoffs`` (the defaults unless given).  Its tokens' strings are
    not kept: the evidence is named by feature index (``#12``)."""

    n_evidence = 0

    def __init__(self, kernel, tokenizer, cutoffs=None):
        from spamnb.estimator.defaults import DEFAULT_HAM_CUTOFF, DEFAULT_SPAM_CUTOFF
        from spamnb.estimator.verdict import Cutoffs

        self._kernel, self.tokenizer = kernel, tokenizer
        self.cutoffs = Cutoffs(DEFAULT_SPAM_CUTOFF, DEFAULT_HAM_CUTOFF) if cutoffs is None else cutoffs

    def kernel(self):
        return self._kernel

    def token(self, index):
        return f"#{index}"


def fold_form(models, fold, tokenizer, cutoffs=None):
    """Fold ``fold`` of ``models`` (a :class:`spamnb.estimator.calibrate.FoldModels`)
    as a :class:`Scorer` (a :class:`FoldScorer`): ``tokenizer`` the filter's,
    ``cutoffs`` the defaults unless given.  Here, not a method of
    ``FoldModels``: the calibration never imports the forms (no circle)."""
    return FoldScorer(models.scorers_[fold], tokenizer, cutoffs)


def keep_scoring_only(spam_filter):
    """Make a loaded filter the "scoring" form (``SpamFilter.load(form="scoring")``):
    keep what ``classify`` reads (the hash index, log(count + alpha), the
    token strings for the evidence) in buffers of their own, and let go of
    the rest of the model file read into memory: the raw counts, last-seen
    days and ledger of learned messages (about a fifth of a model file).
    Here, not in ``spamnb.model.spam_filter``: a classify of one message
    (the "mapped" form) does not load its byte-code."""
    import mmap

    from spamnb.bayes.wordcounts import WordCounts
    from spamnb.estimator.ages import Ages

    # as the journal was replayed, in place: holes of forgets and all;
    # the logs of the file and of the tokens new since joined, without numpy
    vocab, counts, _ages = spam_filter.replayed()
    if vocab is None or counts is None:
        return
    counts.resize(vocab.n_features)
    log_count, log_norm, log_prior, tail = counts.scorer_logs()
    if tail is not None and len(tail):
        n_base, n_tail = len(log_count) // counts.n_classes, len(tail) // counts.n_classes
        joined = bytearray()
        for c in range(counts.n_classes):
            joined += memoryview(log_count)[c * n_base:(c + 1) * n_base].cast("B")
            joined += memoryview(tail)[c * n_tail:(c + 1) * n_tail].cast("B")
        log_count = joined
    spam_filter.take_holes()   # a scoring-only filter: never folded, never saved
    vocabulary = vocab.read_only_copy()
    # the raw counts' place: read-only anonymous pages, zeros the kernel maps
    # only when touched (classify never does), so they take no memory
    zeros = mmap.mmap(-1, max(1, counts.n_classes * counts.n_features_ * 8), prot=mmap.PROT_READ)
    word_counts = WordCounts.from_arrays(
        counts.alpha, counts.prior, counts.class_count_,
        memoryview(zeros)[:counts.n_classes * counts.n_features_ * 8].cast("d"),
        derived=(memoryview(bytearray(log_count)).cast("d"), log_norm, log_prior))
    # not a copy of the file (source_: never to be saved), without its counts (journal_: cannot follow its journal)
    spam_filter.set_fitted(vocabulary_=vocabulary, word_counts_=word_counts, ages_=Ages(), ledger_=None, source_=None,
                           journal_=None)
