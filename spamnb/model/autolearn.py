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

import os
import time

__all__ = ["AUTO_LEARN_MARGIN", "AUTO_LEARN_PER_HOUR", "auto_label", "RateLimit", "learn_verdict"]

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


class RateLimit:
    """At most ``per_hour`` auto-learns per model and clock hour, counted in a small
    file beside the model (``MODEL.autolearn``: one line, ``hour count``).  Read and
    written only under the model's lock (a learning session), replaced atomically."""

    def __init__(self, model_path, per_hour=AUTO_LEARN_PER_HOUR):
        self.path = os.fspath(model_path) + ".autolearn"
        self.per_hour = per_hour

    def _read(self):
        try:
            with open(self.path, "rb") as f:
                hour, count = f.read(64).split()
            return int(hour), int(count)
        except (OSError, ValueError):
            return 0, 0

    def take(self, now=None):
        """True (and counted) when one more auto-learn fits in this hour."""
        hour = int((time.time() if now is None else now) // 3600)
        last, count = self._read()
        count = count if last == hour else 0
        if count >= self.per_hour:
            return False
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{hour} {count + 1}\n")
        os.replace(tmp, self.path)
        return True


def learn_verdict(model_path, data, log_odds, label, spam_log_odds, ham_log_odds, margin=AUTO_LEARN_MARGIN,
                  per_hour=AUTO_LEARN_PER_HOUR, wait=None, header_name="X-Spamnb-Status", subject_tag=None,
                  kept=None, now=None):
    """Learn a classified message as its verdict when :func:`auto_label` says so and
    the verdict (``label``: "spam", "ham" or "unsure") agrees; through the model's
    ledger (a later ``spamnb learn``, move or TELL of the message with the other
    label relabels it exactly).  Returns what happened: "learned", "known",
    "relabelled" (the ledger's outcomes), "not sure" or "rate limit".  ``kept``: a
    ``learning.Kept`` of models kept loaded between learns (the server's)."""
    from spamnb.model import learning
    from spamnb.estimator.ledger import Tally

    spam = auto_label(log_odds, spam_log_odds, ham_log_odds, margin)
    if spam is None or label != ("spam" if spam else "ham"):
        return "not sure"
    with learning.session(model_path, wait=wait, create=False, expire=kept is None, kept=kept) as session:
        if session.ledger.label(_digest(data, header_name, subject_tag)) is not None:
            return "known"      # learned already (by the user, or auto): a verdict never overrides a label
        if not RateLimit(session.path, per_hour).take(now):
            return "rate limit"
        return session.learn(data, spam, Tally(), auto=True, header_name=header_name, subject_tag=subject_tag)


def _digest(data, header_name, subject_tag):
    from spamnb.estimator.ledger import canonical, message_digest

    return message_digest(canonical(data, header_name, subject_tag))
