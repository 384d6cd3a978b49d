"""What SpamAssassin users read in a verdict: the ``X-Spam-*`` header fields
and the report, shared by ``spamnb serve`` (PROCESS, HEADERS, SYMBOLS,
REPORT) and ``spamnb classify -p --sa-headers``.

- ``tests=`` names rules a person can read: SpamAssassin's Bayes bands by
  P(spam) (:data:`BANDS`: ``BAYES_00`` below 1 %, ..., ``BAYES_99`` from 99 %,
  and ``BAYES_999`` too from 99.9 %, as SpamAssassin names them), the verdict
  (``SPAMNB_SPAM``, ``SPAMNB_UNSURE``, ``SPAMNB_HAM``) and, for a message
  whose P(spam) would make it ham but the rule calls unsure, why
  (``SPAMNB_PART_SPAM``: a text part leans to spam on its own; the others in
  :data:`spamnb.estimator.verdict.REASONS`).  The strongest tokens are listed
  apart (``tokens=``), each as :func:`symbol_name` (``%XX`` outside a safe
  ASCII set, cut to :data:`MAX_TOKEN_BYTES`), at most :data:`STATUS_TOKENS`.
- ``X-Spam-Level``: one ``*`` per whole point of the score, at most
  :data:`LEVEL_CAP` (SpamAssassin caps its stars at 50), none at or below
  0 (ham).
- ``X-Spam-Checker-Version: spamnb <version>``.
- ``X-Spam-Report`` (optional): the report's lines, folded.

Every field is folded at :data:`LINE` columns (a tab starts each
continuation line, after a space or a comma, as SpamAssassin folds) and is
ASCII; a field's size is bounded by the limits above whatever the message.
"""

from __future__ import annotations

from spamnb.estimator.verdict import REASONS

__all__ = ["BANDS", "LEVEL_CAP", "LINE", "STATUS_TOKENS", "MAX_TOKEN_BYTES", "symbol_name", "short_symbol", "bayes_tests", "tests",
           "level", "status_words", "fold", "spam_fields", "report_lines", "checker_version", "STATUS_WORDS"]

# (lowest P(spam) of the band, rule name, what SpamAssassin's description says)
BANDS = ((0.00, "BAYES_00", "0 to 1%"), (0.01, "BAYES_05", "1 to 5%"), (0.05, "BAYES_20", "5 to 20%"),
         (0.20, "BAYES_40", "20 to 40%"), (0.40, "BAYES_50", "40 to 60%"), (0.60, "BAYES_60", "60 to 80%"),
         (0.80, "BAYES_80", "80 to 95%"), (0.95, "BAYES_95", "95 to 99%"), (0.99, "BAYES_99", "99 to 100%"))
BAYES_999 = (0.999, "BAYES_999", "99.9 to 100%")
LEVEL_CAP = 50
LINE = 78
STATUS_TOKENS = 5
MAX_TOKEN_BYTES = 40
REPORT_TOKENS = 10
STATUS_WORDS = {"spam": "Yes", "ham": "No", "unsure": "Unsure"}
LABEL_SYMBOL = {"spam": "SPAMNB_SPAM", "ham": "SPAMNB_HAM", "unsure": "SPAMNB_UNSURE"}

_SYMBOL_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-/@+=!*")


def symbol_name(token, limit=200):
    """A token as a symbol: SYMBOLS' body and ``tokens=`` are comma-separated
    lists, so bytes outside a safe set (commas, spaces, '%', controls,
    non-ASCII) are %XX; at most ``limit`` bytes of the token are written."""
    data = token.encode("utf-8", "surrogatepass") if isinstance(token, str) else bytes(token)
    return "".join(chr(b) if b in _SYMBOL_SAFE else "%%%02X" % b for b in data[:limit])


def short_symbol(token):
    """:func:`symbol_name` of at most MAX_TOKEN_BYTES characters (cut before a partial %XX)."""
    name = symbol_name(token, MAX_TOKEN_BYTES)[:MAX_TOKEN_BYTES]
    cut = name.rfind("%", len(name) - 2)
    return name[:cut] if cut >= 0 else name


def bayes_tests(probability):
    """SpamAssassin's Bayes band(s) of P(spam): ``["BAYES_99", "BAYES_999"]`` from 0.999."""
    name = BANDS[0][1]
    for low, band, _ in BANDS:
        if probability >= low:
            name = band
    return [name, BAYES_999[1]] if probability >= BAYES_999[0] else [name]


def _band_text(name):
    for _, band, text in BANDS + (BAYES_999,):
        if band == name:
            return f"Bayes spam probability is {text}"
    return ""


def tests(verdict):
    """The verdict's rule names: its Bayes band(s), SPAMNB_<LABEL>, and the reason's symbol when it has one."""
    out = bayes_tests(verdict.probability) + [LABEL_SYMBOL[verdict.label]]
    if verdict.reason:
        out.append(REASONS[verdict.reason][0])
    return out


def level(score):
    """``X-Spam-Level``'s value: one ``*`` per whole point of ``score``, at most LEVEL_CAP; "" below 1."""
    return "*" * max(0, min(int(score), LEVEL_CAP)) if score >= 1 else ""


def checker_version():
    from spamnb import __version__

    return f"spamnb {__version__}"


def fold(name, words):
    """A header field ``name: words...`` as bytes (no line end), folded before
    a word that would pass LINE columns.  ``words`` are strings; a word
    starting with "," continues a list (no space before it; a fold goes
    after the comma, as SpamAssassin folds its ``tests=``)."""
    lines, line = [], f"{name}:"
    for word in words:
        joined = word.startswith(",")
        if joined:
            line += ","
            word = word[1:]
        glue = "" if joined or line == "\t" else " "
        if len(line) + len(glue) + len(word) > LINE and line not in (f"{name}:", "\t"):
            lines.append(line)
            line, glue = "\t", ""
        line += glue + word
    lines.append(line)
    return "\n".join(lines).encode("ascii", "replace")


def _list_words(key, items):
    """``key=a,b,c`` as words for :func:`fold` (breakable after each comma)."""
    if not items:
        return [f"{key}="]
    return [f"{key}={items[0]}"] + ["," + item for item in items[1:]]


def status_words(verdict, score, required):
    """The words of ``X-Spam-Status``: ``Yes, score=S required=R tests=... log-odds=L tokens=...``."""
    tokens = [short_symbol(token) for token, _ in verdict.evidence[:STATUS_TOKENS]]
    return ([f"{STATUS_WORDS[verdict.label]},", f"score={score:.1f}", f"required={required:.1f}"]
            + _list_words("tests", tests(verdict)) + [f"log-odds={verdict.log_odds:+.3f}"]
            + (_list_words("tokens", tokens) if tokens else []))


def report_lines(verdict, score, required, points):
    """The report: summary lines, the rules (the Bayes band carries the
    score), and apart from them the strongest tokens with their points
    (``points(weight)``; not added to the score: the score is the Bayes
    result they make together) and log-odds.  Lines of plain ASCII, each
    at most 66 characters."""
    lines = [f"spamnb verdict: {verdict.label}, score {score:.1f} / {required:.1f}",
             f"log-odds {verdict.log_odds:+.3f}, {verdict.known_tokens} of {verdict.tokens} tokens known",
             "",
             "  pts rule name          description",
             "----- ------------------ ------------------------------------------"]
    names = tests(verdict)
    for name in names:
        extra = None
        if name.startswith("BAYES_"):
            pts, text = (score if name == names[0] else 0.0), _band_text(name)
            extra = f"[P(spam) {verdict.probability:.6f}]" if name == names[0] else None
        elif name in LABEL_SYMBOL.values():
            pts, text = 0.0, f"spamnb's verdict: {verdict.label}"
        else:
            pts, text = 0.0, REASONS[verdict.reason][1]
            if verdict.reason == "part-leans-spam" and verdict.part_max is not None:
                extra = f"[its tokens: log-odds {verdict.part_max:+.3f}]"
        lines.append(f"{max(min(pts, 999.9), -999.9):5.1f} {name:<18} {text}")
        if extra:
            lines.append(" " * 25 + extra)
    if verdict.evidence:
        lines += ["", "strongest tokens (their points are not added: the Bayes", "score is what they make together)",
                  "  pts log-odds token"]
        for token, weight in verdict.evidence[:REPORT_TOKENS]:
            pts = max(min(points(weight), 999.9), -999.9)
            lines.append(f"{pts:5.1f} {max(min(weight, 9999.999), -9999.999):+8.3f} "
                         f"{short_symbol(token)}")
    return lines


def spam_fields(verdict, score, required, points=None, report=False):
    """The ``X-Spam-*`` fields of a verdict, as bytes without line ends, in
    the order they are added: ``X-Spam-Flag: YES`` (spam only),
    ``X-Spam-Status``, ``X-Spam-Score``, ``X-Spam-Level``,
    ``X-Spam-Checker-Version`` and, with ``report``, ``X-Spam-Report``
    (``points(weight)``: a token's weight in score points)."""
    fields = [b"X-Spam-Flag: YES"] if verdict.label == "spam" else []
    fields.append(fold("X-Spam-Status", status_words(verdict, score, required)))
    fields.append(b"X-Spam-Score: %.1f" % score)
    fields.append(b"X-Spam-Level: " + level(score).encode())
    fields.append(b"X-Spam-Checker-Version: " + checker_version().encode())
    if report:
        body = report_lines(verdict, score, required, points or (lambda w: 0.0))
        lines = ["* " + line if line else "*" for line in body if not line.startswith("----")]
        fields.append(b"X-Spam-Report:\n" + "\n".join("\t" + line for line in lines)
                      .encode("ascii", "replace"))
    return fields
