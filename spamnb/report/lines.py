"""A verdict as ``spamnb classify`` and its batch write it: the line of one
message, the JSON object, the sentence of an unsure verdict's reason, and
:class:`VerdictLines`, one line per message of a batch (``classify
--batch``, spamnb.batch.classify).  Output only: the verdict itself is
spamnb.estimator.verdict's."""

import sys

from spamnb.mail.checked import display_name
from spamnb.estimator.verdict import REASONS

__all__ = ["verdict_json", "format_verdict", "reason_text", "VerdictLines"]


def verdict_json(verdict, name=None):
    """A verdict as the JSON object ``spamnb classify --json`` writes."""
    out = {"verdict": verdict.label, "probability": verdict.probability, "log_odds": verdict.log_odds,
           "tokens": verdict.tokens, "known_tokens": verdict.known_tokens,
           "evidence": [[token, weight] for token, weight in verdict.evidence]}
    if verdict.reason:
        out["reason"] = verdict.reason
    if name is not None:
        out = {"message": name, **out}
    return out


def format_verdict(verdict):
    """A verdict as the line ``spamnb classify`` writes for one message."""
    return f"{verdict.label} {verdict.probability:.7f} log-odds {verdict.log_odds:+.3f}"


def reason_text(verdict):
    """The sentence of a verdict's ``reason`` ("" for none), with the part's own log-odds when it is one."""
    if not verdict.reason:
        return ""
    text = REASONS[verdict.reason][1]
    if verdict.reason == "part-leans-spam" and verdict.part_max is not None:
        text += f" (its tokens: log-odds {verdict.part_max:+.3f})"
    return text


class VerdictLines:
    """One line per message (tab-separated, or JSON), flushed as it is written;
    a message's name as :func:`spamnb.mail.checked.display_name` shows it
    (a tab or a line break in a file name cannot forge a line; JSON gets no
    lone surrogate)."""

    def __init__(self, spam_filter, json_lines=False, out=None):
        self.json, self.spam_filter = json_lines, spam_filter
        self.out = sys.stdout if out is None else out
        self.errors = 0

    def verdict(self, name, data):
        name = display_name(name)
        verdict = self.spam_filter.classify(data, evidence=self.json)   # the text line prints no evidence
        if self.json:
            import json

            self.out.write(json.dumps(verdict_json(verdict, name)) + "\n")
        else:
            self.out.write(f"{name}\t{verdict.label}\t{verdict.probability:.7f}\t{verdict.log_odds:+.3f}\n")
        self.out.flush()

    def error(self, name, reason):
        name, reason = display_name(name), display_name(reason)
        self.errors += 1
        if self.json:
            import json

            self.out.write(json.dumps({"message": name, "error": reason}) + "\n")
        else:
            self.out.write(f"{name}\terror\t{reason}\n")
        self.out.flush()
        print(f"spamnb: {name}: {reason}", file=sys.stderr)
