"""A checked message, as every front end of the server gets it from the
request handler (spamnb.server.handler): the verdict, its score, the
``X-Spam-*`` fields to add (what is done with it is the milter's policy,
spamnb.server.policy).
The SPAMD front end (spamnb.server.spamd_connection) lays it out as a spamd
answer; the milter front end (spamnb.server.milter) as the MTA's header
edits and end-of-data reply.  Neither classifies by itself."""

from __future__ import annotations

from dataclasses import dataclass

from spamnb.report.scale import ScoreMap
from spamnb.server import protocol as spamd


@dataclass(frozen=True)
class Checked:
    """A message checked: ``verdict`` (spamnb's Verdict), ``score`` (spamd's
    one-decimal score), ``score_map`` (the model's
    :class:`~spamnb.report.scale.ScoreMap`), ``note`` (why the site model
    answered for a user, for the log), ``paths`` (the user's
    ``RequestHandler.model_path``) and ``model`` (the filter that checked it,
    for the verdict hooks)."""

    verdict: object
    score: float
    score_map: ScoreMap
    note: str = ""
    paths: tuple = ()
    model: object = None

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
        from spamnb.report.headers import spam_fields

        out = []
        for field in spam_fields(self.verdict, self.score, self.score_map.required, self.score_map.points, report):
            name, _, value = field.partition(b":")
            out.append((name, value.lstrip(b" ")))
        return out

