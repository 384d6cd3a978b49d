"""The check every front end of the server shares: a message and whose mail
it is in, out the verdict, its score, the ``X-Spam-*`` fields to add and the
action the administrator chose for it.  The SPAMD front end
(spamnb.server.daemon, spamnb.server.connection) lays the result out as a
spamd answer; the milter front end (spamnb.server.milter) as the MTA's
header edits and end-of-data reply.  Neither classifies by itself."""

from __future__ import annotations

from dataclasses import dataclass

from spamnb.server import protocol as spamd
from spamnb.server.models import classify

ACTIONS = ("tag", "reject", "quarantine")   # --milter-spam-action


@dataclass(frozen=True)
class Checked:
    """A message checked: ``verdict`` (spamnb's Verdict), ``score`` (spamd's
    one-decimal score), ``score_map`` (the model's
    :class:`~spamnb.server.protocol.ScoreMap`), ``note`` (why the site model
    answered for a user, for the log)."""

    verdict: object
    score: float
    score_map: spamd.ScoreMap
    note: str = ""

    @property
    def label(self):
        return self.verdict.label

    @property
    def outcome(self):
        """The request's log text (spamnb.server.metrics reads its first word)."""
        return (f"{self.verdict.label} {self.score:.1f}/{self.score_map.required:.1f}"
                f" log-odds={self.verdict.log_odds:+.3f}{self.note}")

    def spam_header(self):
        """spamd's ``Spam: True ; 7.2 / 5.0`` header as a (name, value) pair."""
        return spamd.spam_header(self.verdict, self.score, self.score_map.required)

    def fields(self, report=False):
        """The ``X-Spam-*`` fields to add, as (name, value) bytes pairs, the
        value folded with ``\\n\\t`` as spamd's PROCESS writes it."""
        from spamnb.model.headers import spam_fields

        out = []
        for field in spam_fields(self.verdict, self.score, self.score_map.required, self.score_map.points, report):
            name, _, value = field.partition(b":")
            out.append((name, value.lstrip(b" ")))
        return out

    def action(self, spam_action="tag"):
        """What to do with the message: ``spam_action`` (tag, reject or
        quarantine) for spam; unsure mail and ham are tagged, never refused."""
        return spam_action if self.verdict.label == "spam" else "tag"


def check(server, message, paths, evidence=True):
    """Check ``message`` (bytes) with the model ``paths`` names (the server's
    ``model_path(user)``: the user's own model, else the site model, see
    ``Server.verdict_model``); ``evidence``: keep the strongest tokens (for
    the fields and reports; CHECK answers without them).  Raises
    ModelUnavailable (spamnb.server.models) when no model can be used."""
    spam_filter, score_map, note = server.verdict_model(paths)
    verdict = classify(spam_filter, message, evidence)
    learner = getattr(server, "auto_learner", None)
    if learner is not None:     # --auto-learn (spamnb.server.autolearn): after the answer, in a thread
        learner.offer(message, paths, spam_filter, verdict)
    return Checked(verdict, score_map.score(verdict.log_odds, verdict.label), score_map, note)
