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
cross-validated cutoffs (``spamnb.estimator.calibrate.choose_cutoffs``) to the
histogram once it holds ``calibrate.min_ham_for(target_fpr)`` ham (1,000 for
the default 0.1 %) and ``calibrate.MIN_SPAM`` spam.  Before that the evidence
is thin and the cutoffs are conservative (:meth:`ScoreHistogram.thin_cutoffs`):
a wide unsure band, spam at log-odds >= ``THIN_SPAM_LOG_ODDS`` (36, the
highest a cutoff can be) and ham at <= ``THIN_HAM_LOG_ODDS`` (-40), that
narrows linearly to the defaults (14 and -4) as held-out ham is counted, the
spam cutoff never below every ham score counted (+ the margin).  A model that
learns only what its user corrects (a spam left in the inbox or the unsure
folder, a ham in Junk) sees little but its own mistakes: the wide band sends
it more mail to sort while it is young, each sorted message is learned, and
its false positives stay below the 0.1 % a fitted cutoff aims at
(docs/accuracy.md, "Cutoffs for a model that grows by learning").  A score
counts only when the model that gave it had learned ``MIN_CLASS`` messages of
each class (:func:`counts_scores`).  A ham score is taken at the top of its
bin (the spam cutoff can only come out higher, the safe side), and the spam
cutoff gets ``calibrate.DEFAULT_MARGIN`` log-odds of safety as in ``train``.

Stored in the model file as the array ``held_out`` (schema version 5):
``2 x N_BINS`` doubles, ham's bins then spam's.  Pure Python (``array``), so
nothing here needs numpy.
"""

from array import array

from spamnb.bayes.token_kernels import isfinite
from spamnb.estimator.defaults import (HELD_OUT_BIN_WIDTH, HELD_OUT_BINS, HELD_OUT_HIGH, HELD_OUT_LOW, MIN_CLASS,
                                      counts_scores, cutoffs_from, held_out_bin)

__all__ = ["ScoreHistogram", "N_BINS", "BIN_WIDTH", "LOW", "HIGH", "MAX_COUNT", "MIN_CLASS", "counts_scores",
           "THIN_SPAM_LOG_ODDS", "THIN_HAM_LOG_ODDS", "refit_cutoffs", "start_cutoffs"]

LOW, HIGH, BIN_WIDTH, N_BINS = HELD_OUT_LOW, HELD_OUT_HIGH, HELD_OUT_BIN_WIDTH, HELD_OUT_BINS   # 512 bins
MAX_COUNT = 20_000.0                         # a class's evidence is halved past this many messages
# The cutoffs of a model with no held-out ham counted yet (thin_cutoffs): the widest band, narrowed to the
# defaults as ham is counted.  -40 was chosen online, on error or unsure, on SpamAssassin (ham at -30, -40,
# -50, -60: 1-ROCA 0.2617, 0.2093, 0.1919, 0.1808 %; scripts/tune/tune_on_error.py) and checked on
# Enron-Spam and with auto-learn, where -50 was worse than before (docs/notes/2026-11-29-learn-on-error.md).
THIN_SPAM_LOG_ODDS = 36.0          # calibrate.MAX_LOG_ODDS: a cutoff is a probability, and 1 - P(36.7) is 0
THIN_HAM_LOG_ODDS = -40.0


class ScoreHistogram:
    """Held-out log-odds of learned messages, per class, in fixed bins."""

    __slots__ = ("counts", "_room")

    def __init__(self, counts=None):
        if counts is None:
            counts = array("d", bytes(8 * 2 * N_BINS))
        counts = array("d", counts)
        if len(counts) != 2 * N_BINS:
            raise ValueError(f"a score histogram holds {2 * N_BINS} counts, not {len(counts)}")
        if any(not (isfinite(c) and c >= 0) for c in counts):
            raise ValueError("a score histogram's counts must be finite and >= 0")
        self.counts = counts
        # per class, how many more messages may be counted before the class's total can pass
        # MAX_COUNT (-1: not known); the total is summed again only then, so each message does
        # not sum a whole row (the test and its answer are :meth:`total`'s, unchanged)
        self._room = [-1, -1]

    bin_of = staticmethod(held_out_bin)   # a score's bin: None for NaN (no evidence)

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
        if weight > 0 and self._over(int(j >= N_BINS), weight):
            self.age()
        return self

    def _over(self, c, weight):
        """Whether class ``c``'s total (:meth:`total`) is over MAX_COUNT once ``weight``
        was added: summed only when the totals since the last sum could be (each add
        raises it by at most its weight, an ageing halves it, a negative weight lowers it)."""
        room = self._room   # a list: a shallow copy, which shares the counts, shares it too
        if room[c] >= weight:
            room[c] -= weight
            return False
        total = self.total(bool(c))
        # 2 messages of slack for the rounding of a 512-term sum (it is at most 1e-9 here)
        room[c] = int((MAX_COUNT - 2.0 - total) // 1.0) if total <= MAX_COUNT - 2.0 else -1
        return total > MAX_COUNT

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
        """``(spam log-odds, ham log-odds, rule)``: fitted when there is evidence
        enough, else :meth:`thin_cutoffs`."""
        from spamnb.estimator import calibrate
        from spamnb.estimator.defaults import DEFAULT_HAM_LOG_ODDS

        target_fpr = calibrate.DEFAULT_TARGET_FPR if target_fpr is None else target_fpr
        max_unsure = calibrate.DEFAULT_MAX_UNSURE if max_unsure is None else max_unsure
        margin = calibrate.DEFAULT_MARGIN if margin is None else margin
        ham, spam = self.counts[:N_BINS], self.counts[N_BINS:]
        n_ham, n_spam = sum(ham), sum(spam)
        if n_ham < max(calibrate.MIN_HAM, calibrate.min_ham_for(target_fpr)) or n_spam < calibrate.MIN_SPAM:
            return self.thin_cutoffs(target_fpr, margin)
        allowed = int((target_fpr * n_ham + 1e-9) // 1.0)     # ham that may reach the cutoff
        above, top = 0.0, None
        for i in range(N_BINS - 1, -1, -1):
            above += ham[i]
            if above > allowed:
                top = i
                break
        spam_cut = min(LOW + (top + 1) * BIN_WIDTH + margin, calibrate.MAX_LOG_ODDS)
        ham_cut = min(DEFAULT_HAM_LOG_ODDS, spam_cut)
        total = n_ham + n_spam
        keep = int(max_unsure * total // 1.0)                 # messages allowed in the band
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

    def thin_cutoffs(self, target_fpr=None, margin=None):
        """``(spam log-odds, ham log-odds, rule)`` while there are too few held-out
        ham to fit the cutoffs (fewer than ``calibrate.min_ham_for(target_fpr)``,
        or too few spam): the band from ``THIN_SPAM_LOG_ODDS`` to
        ``THIN_HAM_LOG_ODDS``, narrowed linearly to the defaults as the ham
        counted grows to what a fit needs; the spam cutoff over every ham score
        counted (+ ``margin``), never above ``calibrate.MAX_LOG_ODDS``.  With
        little evidence a cutoff stays on the safe side."""
        from spamnb.estimator import calibrate
        from spamnb.estimator.defaults import DEFAULT_HAM_LOG_ODDS, DEFAULT_SPAM_CUTOFF
        from spamnb.estimator.verdict import logit

        target_fpr = calibrate.DEFAULT_TARGET_FPR if target_fpr is None else target_fpr
        margin = calibrate.DEFAULT_MARGIN if margin is None else margin
        ham = self.counts[:N_BINS]
        n_ham, n_spam = sum(ham), self.total(True)
        need = max(calibrate.MIN_HAM, calibrate.min_ham_for(target_fpr))
        t = min(1.0, n_ham / need)
        spam_cut = THIN_SPAM_LOG_ODDS + (logit(DEFAULT_SPAM_CUTOFF) - THIN_SPAM_LOG_ODDS) * t
        ham_cut = THIN_HAM_LOG_ODDS + (DEFAULT_HAM_LOG_ODDS - THIN_HAM_LOG_ODDS) * t
        if n_ham > 0:
            top = max(i for i in range(N_BINS) if ham[i] > 0)
            spam_cut = max(spam_cut, LOW + (top + 1) * BIN_WIDTH + margin)
        spam_cut = min(spam_cut, calibrate.MAX_LOG_ODDS)
        rule = (f"thin evidence, {n_ham:.0f} ham and {n_spam:.0f} spam scored before each was learned "
                f"({need} ham needed to fit): spam at log-odds >= {spam_cut:.2f}, ham at <= {ham_cut:.2f} "
                f"(a band from {THIN_SPAM_LOG_ODDS:g} / {THIN_HAM_LOG_ODDS:g} narrowing to the defaults as ham "
                f"is counted; the spam cutoff over every such ham, + {margin:g} margin)")
        return spam_cut, ham_cut, rule


# ---------------------------------------------------------------------------- a SpamFilter's held-out cutoffs
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
        spam_filter.set_fitted(held_out_=ScoreHistogram())
    spam_filter.held_out_.add(log_odds, bool(spam))


def refit_cutoffs(spam_filter):
    """Fit a filter's cutoffs on its held-out scores (:meth:`ScoreHistogram.cutoffs`)
    when they were fitted so before (a model that grew by learning from empty:
    :func:`start_cutoffs`; the thin band while the evidence is thin) or are
    the defaults and the evidence is enough to fit them (a model ``train``
    could not calibrate keeps its defaults until then: the held-out scores
    of the mail learned since say nothing of the mail it was trained on);
    cutoffs from ``train`` or given by the user stay.  Returns True when they
    changed.  A function of the histogram alone: a forget that takes a
    learn's score back gives the cutoffs back."""
    from spamnb.estimator.verdict import Cutoffs, probability

    source = cutoffs_from(spam_filter)
    if source not in ("defaults", "held-out") or (source == "defaults" and spam_filter.held_out_ is None):
        return False
    held_out = spam_filter.held_out_ if spam_filter.held_out_ is not None else ScoreHistogram()
    spam_cut, ham_cut, rule = held_out.cutoffs()
    if source == "defaults" and not rule.startswith("fitted"):
        return False
    cutoffs = Cutoffs(probability(spam_cut), probability(min(ham_cut, spam_cut)))
    changed = cutoffs != spam_filter.cutoffs
    spam_filter.set_cutoffs(cutoffs, "held-out")
    return changed


def start_cutoffs(spam_filter):
    """Give a new, empty model that will grow by learning the cutoffs of no
    evidence (:meth:`ScoreHistogram.thin_cutoffs`: the widest band), fitted
    on its held-out scores from then on (:func:`refit_cutoffs`)."""
    spam_filter.set_fitted(cutoff_source_="held-out")
    refit_cutoffs(spam_filter)
    return spam_filter
