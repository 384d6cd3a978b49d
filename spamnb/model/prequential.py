"""Cutoffs for a model that grows by learning: fitted on the scores messages had before they were learned.

A message's log-odds under the model as it stood just before the message was
learned is a held-out score (the prequential view of the online protocol:
the model had not seen the message).  :class:`ScoreHistogram` keeps a
bounded summary of them, per class: a fixed histogram of ``N_BINS`` bins of
``BIN_WIDTH`` log-odds from ``LOW`` to ``HIGH`` (scores outside fall in the
first or last bin), so its size does not grow with the mail learned.  The
counts are doubles so that old evidence can be aged (:meth:`ScoreHistogram.age`
halves them once a class holds ``MAX_COUNT``: the cutoffs follow the model
as it is now, not as it was when it was young).

:meth:`ScoreHistogram.cutoffs` applies the rule of ``spamnb train``'s
cross-validated cutoffs (``spamnb.model.calibrate.choose_cutoffs``) to the
histogram, with the same safeguards: with fewer than
``calibrate.MIN_HAM`` ham (200) or ``calibrate.MIN_SPAM`` spam the defaults
are kept; with fewer than ``calibrate.min_ham_for(target_fpr)`` ham (1,000
for the default 0.1 %) the cutoffs are not fitted, but the spam cutoff is
raised over every ham score counted (+ the margin) when the default is
below it, never lowered (a young model of pairs sends ham past the default:
docs/accuracy.md); and a score counts only
when the model that gave it had learned ``MIN_CLASS`` messages of each class
(:func:`counts_scores`).  A ham score is taken at
the top of its bin (the spam cutoff can only come out higher, the safe
side), and the spam cutoff gets ``calibrate.DEFAULT_MARGIN`` log-odds of
safety as in ``train``.

Stored in the model file as the array ``held_out`` (schema version 5):
``2 x N_BINS`` doubles, ham's bins then spam's.  Pure Python (``array``), so
nothing here needs numpy.
"""

from __future__ import annotations

import math
from array import array

__all__ = ["ScoreHistogram", "N_BINS", "BIN_WIDTH", "LOW", "HIGH", "MAX_COUNT", "MIN_CLASS", "counts_scores"]

LOW = -64.0
HIGH = 64.0
BIN_WIDTH = 0.25
N_BINS = int((HIGH - LOW) / BIN_WIDTH)      # 512
MAX_COUNT = 20_000.0                         # a class's evidence is halved past this many messages
# A score counts only when the model that gave it had learned this many messages of
# each class: a model of one class (a folder of ham learned before any spam) gives
# scores that say nothing of the model it becomes (infinite under the "mle" prior).
MIN_CLASS = 50


def counts_scores(class_count):
    """Whether a model with ``class_count`` ([ham, spam] messages) gives scores worth counting."""
    return min(class_count) >= MIN_CLASS


class ScoreHistogram:
    """Held-out log-odds of learned messages, per class, in fixed bins."""

    __slots__ = ("counts",)

    def __init__(self, counts=None):
        if counts is None:
            counts = array("d", bytes(8 * 2 * N_BINS))
        counts = array("d", counts)
        if len(counts) != 2 * N_BINS:
            raise ValueError(f"a score histogram holds {2 * N_BINS} counts, not {len(counts)}")
        if any(not (math.isfinite(c) and c >= 0) for c in counts):
            raise ValueError("a score histogram's counts must be finite and >= 0")
        self.counts = counts

    @staticmethod
    def bin_of(log_odds):
        if log_odds != log_odds:           # NaN: no evidence
            return None
        i = int(math.floor((log_odds - LOW) / BIN_WIDTH)) if math.isfinite(log_odds) else (
            0 if log_odds < 0 else N_BINS - 1)
        return min(max(i, 0), N_BINS - 1)

    @staticmethod
    def center(i):
        """The log-odds in the middle of bin ``i`` (:meth:`bin_of` gives ``i`` back)."""
        return LOW + (int(i) + 0.5) * BIN_WIDTH

    def add(self, log_odds, spam, weight=1.0):
        """Count a message's score before it was learned (``weight`` -1 takes it back)."""
        i = self.bin_of(float(log_odds))
        if i is None:
            return self
        j = (N_BINS if spam else 0) + i
        self.counts[j] = max(0.0, self.counts[j] + weight)
        if weight > 0 and self.total(spam) > MAX_COUNT:
            self.age()
        return self

    def move(self, log_odds, spam):
        """A message counted under the other class is relabelled ``spam``."""
        self.add(log_odds, not spam, -1.0)
        return self.add(log_odds, spam)

    def age(self):
        for j in range(len(self.counts)):
            self.counts[j] *= 0.5
        return self

    def total(self, spam):
        start = N_BINS if spam else 0
        return sum(self.counts[start:start + N_BINS])

    def cutoffs(self, target_fpr=None, max_unsure=None, margin=None):
        """``(spam log-odds, ham log-odds, rule)``, or None when there is too little evidence."""
        from spamnb.model import calibrate
        from spamnb.model.defaults import DEFAULT_HAM_LOG_ODDS

        target_fpr = calibrate.DEFAULT_TARGET_FPR if target_fpr is None else target_fpr
        max_unsure = calibrate.DEFAULT_MAX_UNSURE if max_unsure is None else max_unsure
        margin = calibrate.DEFAULT_MARGIN if margin is None else margin
        ham, spam = self.counts[:N_BINS], self.counts[N_BINS:]
        n_ham, n_spam = sum(ham), sum(spam)
        if n_ham < calibrate.MIN_HAM or n_spam < calibrate.MIN_SPAM:
            return None
        if n_ham < calibrate.min_ham_for(target_fpr):
            return self._raised(ham, n_ham, n_spam, margin)
        allowed = math.floor(target_fpr * n_ham + 1e-9)     # ham that may reach the cutoff
        above, top = 0.0, None
        for i in range(N_BINS - 1, -1, -1):
            above += ham[i]
            if above > allowed:
                top = i
                break
        spam_cut = min(LOW + (top + 1) * BIN_WIDTH + margin, calibrate.MAX_LOG_ODDS)
        ham_cut = min(DEFAULT_HAM_LOG_ODDS, spam_cut)
        total = n_ham + n_spam
        keep = math.floor(max_unsure * total)                 # messages allowed in the band
        lo_bin = self.bin_of(ham_cut) + 1 if ham_cut > LOW else 0
        hi_bin = self.bin_of(spam_cut)
        in_band = sum(ham[lo_bin:hi_bin]) + sum(spam[lo_bin:hi_bin])
        if in_band > keep:
            held = 0.0
            for i in range(hi_bin - 1, -1, -1):
                held += ham[i] + spam[i]
                if held > keep:
                    ham_cut = max(ham_cut, LOW + (i + 1) * BIN_WIDTH)
                    break
        if ham_cut >= spam_cut:     # a band, however narrow: the server's score scale needs one
            ham_cut = spam_cut - BIN_WIDTH
        rule = (f"fitted on the scores of {n_ham:.0f} ham and {n_spam:.0f} spam before each was learned: "
                f"spam at log-odds >= {spam_cut:.2f} (at most {100 * target_fpr:g} % of that ham, "
                f"+ {margin:g} margin), ham at <= {ham_cut:.2f}")
        return spam_cut, ham_cut, rule

    @staticmethod
    def _raised(ham, n_ham, n_spam, margin):
        """Too few ham to place the cutoffs (fewer than the target needs), enough
        (``calibrate.MIN_HAM``) to see that the default spam cutoff is too low: the
        spam cutoff over every ham score counted, + ``margin``, when that is
        above the default (else None: the defaults stay); the ham cutoff the
        default.  Never below the defaults: with little evidence a cutoff only
        ever moves to the safe side."""
        from spamnb.model import calibrate
        from spamnb.model.defaults import DEFAULT_HAM_LOG_ODDS, DEFAULT_SPAM_CUTOFF
        from spamnb.model.verdict import logit

        top = max(i for i in range(N_BINS) if ham[i] > 0)
        spam_cut = min(LOW + (top + 1) * BIN_WIDTH + margin, calibrate.MAX_LOG_ODDS)
        if spam_cut <= logit(DEFAULT_SPAM_CUTOFF):
            return None
        rule = (f"raised on the scores of {n_ham:.0f} ham and {n_spam:.0f} spam before each was learned "
                f"(too few ham to fit the cutoffs): spam at log-odds >= {spam_cut:.2f} (over every such ham, "
                f"+ {margin:g} margin), ham at the default <= {DEFAULT_HAM_LOG_ODDS:.2f}")
        return spam_cut, DEFAULT_HAM_LOG_ODDS, rule


# ---------------------------------------------------------------------------- a SpamFilter's held-out cutoffs
def cutoffs_from(spam_filter):
    """Where a filter's cutoffs came from: "train" (cross-validated by ``fit``),
    "held-out" (fitted here on the scores learned messages had before each
    was learned), "given" or "defaults"."""
    from spamnb.model.defaults import DEFAULT_HAM_CUTOFF, DEFAULT_SPAM_CUTOFF

    if spam_filter.cutoff_source_ is not None:
        return spam_filter.cutoff_source_
    if spam_filter.spam_cutoff == DEFAULT_SPAM_CUTOFF and spam_filter.ham_cutoff == DEFAULT_HAM_CUTOFF:
        return "defaults"
    return "given"   # a file older than schema 5: train's or the user's, not told apart


def held_out_log_odds(spam_filter, stream):
    """The log-odds of a tokenized message under the filter as it stands (None
    before it has learned ``MIN_CLASS`` messages of each class, or with
    message features, which the stream lacks)."""
    if not spam_filter.is_fitted or spam_filter.feature_weight or not counts_scores(spam_filter.class_count_):
        return None
    jll = spam_filter.scorer().score(stream.hashes, 0, stream.pairs_start)[0]
    return jll[1] - jll[0]


def note_held_out(spam_filter, log_odds, spam):
    """Count a learned message's score before it was learned (:func:`held_out_log_odds`)."""
    if spam_filter.held_out_ is None:
        spam_filter.held_out_ = ScoreHistogram()
    spam_filter.held_out_.add(log_odds, bool(spam))


def refit_cutoffs(spam_filter):
    """Fit a filter's cutoffs on its held-out scores when they are its defaults
    (or were fitted so before) and there is evidence enough
    (:meth:`ScoreHistogram.cutoffs`); cutoffs from ``train`` or given by the
    user stay.  Returns True when they changed."""
    from spamnb.model.verdict import Cutoffs, probability

    if spam_filter.held_out_ is None or cutoffs_from(spam_filter) not in ("defaults", "held-out"):
        return False
    fitted = spam_filter.held_out_.cutoffs()
    if fitted is None:
        return False
    spam_cut, ham_cut, _rule = fitted
    cutoffs = Cutoffs(probability(spam_cut), probability(min(ham_cut, spam_cut)))
    changed = cutoffs != spam_filter.cutoffs
    spam_filter.cutoffs, spam_filter.cutoff_source_ = cutoffs, "held-out"
    return changed
