"""spamnb's log-odds on SpamAssassin's score scale, as ``spamnb serve``
answers SPAMD (``Spam: True ; <score> / <required>``), writes the X-Spam-*
fields of PROCESS, HEADERS and the milter, and ``classify -p --sa-headers``
writes them.

spamd answers ``Spam: True ; <score> / <required>``: ``spamc -c`` prints
``score/required`` and exits 1 for spam, Exim compares ``$spam_score``
(``$spam_score_int`` is ten times it).  spamnb decides by log-odds L against
two cutoffs, ham at L <= L_ham, spam at L >= L_spam, unsure between.  The
score is the affine map that sends L_ham to 0 and L_spam to the required
score R (default 5.0)::

    score = R * (L - L_ham) / (L_spam - L_ham)

so ``score <= 0`` is ham, ``0 < score < R`` is unsure, ``score >= R`` is
spam, and the ``Spam:`` flag is True exactly for spam.  Scores are sent with
one decimal, rounded so that the printed number keeps the verdict's side of
each boundary: spam is never below R, ham never above 0.0, unsure is kept in
[0.1, R - 0.1].  The cutoffs are the model's (``spamnb train`` chooses L_spam
for its mail); with the built-in defaults (L_ham = -4, L_spam = 14) and R =
5.0, one score point is 3.6 units of log-odds.  Exim's ``$spam_score_int > 0``
(or ``$spam_score > 0``) thus means "unsure or spam", ``>= R*10`` "spam".
"""

from __future__ import annotations

import math

__all__ = ["ScoreMap"]


class ScoreMap:
    """Maps spamnb's log-odds to spamd's ``score / required`` (module docstring).

    Parameters
    ----------
    ham_log_odds, spam_log_odds : float
        The filter's cutoffs as log-odds (L_ham < L_spam).
    required : float
        The required score R that the spam cutoff maps to.
    """

    def __init__(self, ham_log_odds, spam_log_odds, required=5.0):
        if not spam_log_odds > ham_log_odds:
            raise ValueError("the spam cutoff must lie above the ham cutoff")
        if not (required >= 0.2 and math.isfinite(required)):
            raise ValueError("the required score must be at least 0.2")
        self.ham_log_odds = float(ham_log_odds)
        self.spam_log_odds = float(spam_log_odds)
        self.required = round(float(required), 1)
        self.scale_ = self.required / (self.spam_log_odds - self.ham_log_odds)

    @classmethod
    def from_cutoffs(cls, cutoffs, required=5.0):
        """The map of a filter's ``cutoffs`` (``spamnb.estimator.verdict.Cutoffs``: ``.spam``, ``.ham`` probabilities)."""
        return cls(_logit(cutoffs.ham), _logit(cutoffs.spam), required)

    def score(self, log_odds, label):
        """The one-decimal score of a verdict, on the verdict's side of each boundary."""
        raw = self.scale_ * (log_odds - self.ham_log_odds)
        raw = max(min(raw, 999.9), -999.9) if math.isfinite(raw) else math.copysign(999.9, raw)
        tenths = math.floor(raw * 10.0)
        if label == "spam":
            tenths = max(tenths, round(self.required * 10))
        elif label == "ham":
            tenths = min(tenths, 0)
        else:
            tenths = min(max(tenths, 1), round(self.required * 10) - 1)
        return tenths / 10.0

    def points(self, weight):
        """A token's log-odds weight in score points."""
        return self.scale_ * weight


def _logit(p):
    p = min(max(float(p), 1e-300), 1.0 - 1e-16)
    return math.log(p) - math.log1p(-p)
