"""``spamnb serve --auto-learn``: the server learns the verdicts it is sure of.

The rule is ``spamnb classify --auto-learn``'s (``spamnb.model.autolearn``):
a verdict is learned only when its log-odds are ``AUTO_LEARN_MARGIN``
beyond the checking model's own cutoff (never unsure mail, never mail
within or near the cutoffs' band), through the model's ledger, marked as
auto-learned (a later TELL, move or ``spamnb learn`` of the message
relabels it exactly), at most ``AUTO_LEARN_PER_HOUR`` per model and hour.

Which model learns: the one that checked the mail, and only when it is the
model TELL would teach for that request (the user's own model; the site
model only on a server without ``--models-dir``).  A user without a model
of their own is checked with the site model, which then learns nothing: no
client can teach a model it was not given, not even through its verdicts.

Off the request's path: the check is answered first; the learn runs in the
server's learning threads (TELL's), under the model's lock, and the loaded
model follows its journal at the next check.  At most ``MAX_PENDING``
learns wait at once (their messages held in memory); a verdict offered
beyond that is not learned (a flood of mail cannot queue work or memory).
"""

from __future__ import annotations

import asyncio

__all__ = ["AutoLearner", "MAX_PENDING", "LOCK_WAIT"]

MAX_PENDING = 4         # auto-learns waiting or running at once, per server process
LOCK_WAIT = 5.0         # seconds an auto-learn waits for the model's lock, then lets the message go


class AutoLearner:
    """One a server: :meth:`on_verdict` is one of the request handler's
    ``verdict_hooks`` (spamnb.server.handler): every check's verdict, from
    either front end, is offered to :meth:`offer`."""

    def __init__(self, server):
        self.server = server
        self.pending = 0

    def on_verdict(self, checked, message, user):
        """The verdict hook: offer ``checked``'s verdict (the check of ``message``
        for ``user``) when ``--auto-learn`` is on; quick, never raises."""
        if not self.server.settings.auto_learn:
            return "off"
        if checked.note:     # the site model answered for the user (none of their own, or not usable)
            return "not the user's model"
        return self.offer(message, checked.paths, checked.model, checked.verdict)

    def offer(self, message, paths, spam_filter, verdict):
        """Schedule the learn of ``verdict`` (the check of ``message`` by ``spam_filter``,
        the model at ``paths[0]``; ``paths`` as ``RequestHandler.model_path``) when the rule
        allows it.  Returns why not (a word) or "scheduled"; never raises."""
        settings = self.server.settings
        if not settings.auto_learn:
            return "off"
        path, own = paths
        if not own or path != own:
            return "not the user's model"
        from spamnb.model import auto_label
        from spamnb.model import logit

        cutoffs = spam_filter.cutoffs   # a SpamFilter or a user model held as an overlay
        spam_log_odds, ham_log_odds = logit(cutoffs.spam), logit(cutoffs.ham)
        spam = auto_label(verdict.log_odds, spam_log_odds, ham_log_odds)
        if spam is None or verdict.label != ("spam" if spam else "ham"):
            return "not sure"
        if self.pending >= MAX_PENDING:
            return "busy"
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return "no loop"
        self.pending += 1
        future = loop.run_in_executor(self.server.learners, _learn, path, bytes(message), verdict.log_odds,
                                      verdict.label, spam_log_odds, ham_log_odds, settings.subject_tag)
        future.add_done_callback(lambda done: self._done(done, path))
        return "scheduled"

    def _done(self, future, path):
        self.pending -= 1
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            text = " ".join(str(exc).split()) or type(exc).__name__
            self.server.log(f"auto-learn {path}: not learned: {text}")
            return
        if self.server.settings.verbose:
            self.server.log(f"auto-learn {path}: {future.result()}")


def _learn(path, message, log_odds, label, spam_log_odds, ham_log_odds, subject_tag):
    from spamnb.model import learn_verdict
    from spamnb.server.models import kept_models

    return learn_verdict(path, message, log_odds, label, spam_log_odds, ham_log_odds, wait=LOCK_WAIT,
                         subject_tag=subject_tag, kept=kept_models())
