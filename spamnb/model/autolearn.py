"""Auto-learn: a model learns the verdicts it is sure of, carefully.

Off by default (``spamnb classify --auto-learn``).  A verdict is learned only
when its log-odds are at least ``AUTO_LEARN_MARGIN`` beyond the model's own
cutoff (spam over the spam cutoff, ham under the ham cutoff): never unsure
mail, never mail within the cutoffs' band or just outside it
(:func:`auto_label`).  What is learned goes through the ledger like any
learn (a digest and its label), so a later correction (``spamnb learn``,
a move, a TELL) relabels that message exactly.  At most ``AUTO_LEARN_PER_HOUR``
auto-learns per model and hour (:class:`RateLimit`, kept in a small file
beside the model), so a flood of look-alike mail cannot teach the model a
whole class in one go.
"""

from __future__ import annotations

import math
import os
import time

__all__ = ["AUTO_LEARN_MARGIN", "AUTO_LEARN_PER_HOUR", "auto_label", "RateLimit"]

AUTO_LEARN_MARGIN = 2.0     # log-odds beyond the cutoff
AUTO_LEARN_PER_HOUR = 120


def auto_label(log_odds, spam_log_odds, ham_log_odds, margin=AUTO_LEARN_MARGIN):
    """True (learn as spam), False (learn as ham) or None (do not learn)."""
    if log_odds != log_odds or margin < 0:
        return None
    if log_odds >= spam_log_odds + margin:
        return True
    if log_odds <= ham_log_odds - margin:
        return False
    return None
