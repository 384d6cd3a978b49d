"""The SPAMC/SPAMD protocol (SpamAssassin's ``spamd/PROTOCOL``), without I/O.

This module parses requests and formats responses; :mod:`spamnb.server.daemon` does
the sockets.  A request is a line ``VERB SPAMC/1.x``, header lines
``Name: value``, a blank line and, for the verbs that take one, a message of
``Content-length`` bytes (zlib-compressed when ``Compress: zlib``).  A
response is ``SPAMD/1.5 <code> <text>``, header lines, a blank line and a
body.  Codes are sysexits.h values (0 ``EX_OK``, 76 ``EX_PROTOCOL``, ...);
after a non-zero code nothing else is sent and the connection closes.

Score mapping
-------------
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
import re
import zlib
from collections import namedtuple

from spamnb.errors import ProtocolError
from spamnb.report.headers import symbol_name   # SYMBOLS' token names (re-exported)

__all__ = ["EX", "ProtocolError", "Request", "parse_head", "decompress", "ScoreMap", "response", "comma_words",
           "VERBS", "BODY_VERBS", "MAX_HEAD", "symbol_name"]

# sysexits.h
EX = {"EX_OK": 0, "EX_USAGE": 64, "EX_DATAERR": 65, "EX_NOINPUT": 66, "EX_NOUSER": 67,
      "EX_UNAVAILABLE": 69, "EX_SOFTWARE": 70, "EX_IOERR": 74, "EX_TEMPFAIL": 75,
      "EX_PROTOCOL": 76, "EX_NOPERM": 77, "EX_CONFIG": 78, "EX_TIMEOUT": 79}
_CODE_NAME = {code: name for name, code in EX.items()}

VERSION = b"SPAMD/1.5"
VERBS = ("CHECK", "SYMBOLS", "REPORT", "REPORT_IFSPAM", "PROCESS", "HEADERS", "PING", "SKIP", "TELL")
BODY_VERBS = frozenset(("CHECK", "SYMBOLS", "REPORT", "REPORT_IFSPAM", "PROCESS", "HEADERS", "TELL"))
MAX_HEAD = 64 * 1024            # bytes of request line + headers
MAX_HEADER_LINES = 100
_REQUEST_LINE = re.compile(rb"([A-Z_]{1,32}) SPAMC/(\d{1,3})\.(\d{1,3})")
_HEADER_NAME = re.compile(rb"[!-9;-~]{1,64}")   # printable ASCII but ':'


Request = namedtuple("Request", "verb version headers")
"""``verb`` (str), ``version`` ((major, minor)), ``headers`` ({lower-case name: value str})."""


def parse_head(head):
    """Parse the request line and header lines (``head``: bytes up to, not
    including, the blank line; lines end in CRLF or LF).  Raises
    :class:`ProtocolError` (EX_PROTOCOL) for anything malformed."""
    lines = head.split(b"\n")
    if len(lines) > MAX_HEADER_LINES + 1:
        raise ProtocolError(EX["EX_PROTOCOL"], "too many header lines")
    first = lines[0].rstrip(b"\r")
    match = _REQUEST_LINE.fullmatch(first)
    if match is None:
        raise ProtocolError(EX["EX_PROTOCOL"], "bad request line")
    verb = match.group(1).decode("ascii")
    if verb not in VERBS:
        raise ProtocolError(EX["EX_PROTOCOL"], f"unknown verb {verb}")
    headers = {}
    for line in lines[1:]:
        line = line.rstrip(b"\r")
        name, colon, value = line.partition(b":")
        if not colon or _HEADER_NAME.fullmatch(name) is None:
            raise ProtocolError(EX["EX_PROTOCOL"], "bad header line")
        key = name.decode("ascii").lower()
        if key == "content-length" and key in headers:
            # two lengths: which one a proxy or the client meant is anybody's guess
            raise ProtocolError(EX["EX_PROTOCOL"], "more than one Content-length")
        headers[key] = value.strip().decode("utf-8", "replace")
    length = headers.get("content-length")
    if length is not None and (not length.isdigit() or len(length) > 15 or not length.isascii()):
        raise ProtocolError(EX["EX_PROTOCOL"], "bad Content-length")
    compress = headers.get("compress")
    if compress is not None and compress.lower() != "zlib":
        raise ProtocolError(EX["EX_PROTOCOL"], f"unsupported Compress: {compress[:20]}")
    return Request(verb, (int(match.group(2)), int(match.group(3))), headers)


def content_length(request):
    value = request.headers.get("content-length")
    return None if value is None else int(value)


def decompress(data, limit):
    """Inflate a ``Compress: zlib`` body, reading at most ``limit`` + 1 bytes
    of output (a small bomb cannot blow up memory).  Returns the bytes, or None
    when the message is larger than ``limit``.  Raises ProtocolError
    (EX_DATAERR) for a broken stream."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error:
        raise ProtocolError(EX["EX_DATAERR"], "bad zlib data") from None
    if len(out) > limit:
        return None
    if not inflater.eof:
        raise ProtocolError(EX["EX_DATAERR"], "truncated zlib data")
    return out


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
        """The map of a filter's ``cutoffs`` (``spamnb.model.verdict.Cutoffs``: ``.spam``, ``.ham`` probabilities)."""
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


# ---------------------------------------------------------------------------- responses
def response(code, headers=(), body=b"", text=None):
    """``SPAMD/1.5 code text``, the headers ((name, value) pairs), a blank line, the body.
    It carries Content-length, so a client on a kept-alive connection knows
    where it ends (:func:`legacy_response` for answers before a close)."""
    if text is None:
        text = _CODE_NAME.get(code, "EX_UNKNOWN") if code else "EX_OK"
    lines = [VERSION + b" %d " % code + text.encode("ascii", "replace")]
    for name, value in headers:
        lines.append(name.encode("ascii") + b": " + value.encode("utf-8", "replace"))
    lines.append(b"Content-length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def legacy_response(spam, body=b"", message=False):
    """A successful answer in the layout spamd uses for a ``SPAMC/1.2`` (or
    older) request, which Exim's ``spam`` condition sends and parses with a
    fixed pattern, and for CHECK: ``Spam: ...``, a blank line, the body (no
    Content-length: the connection closes after it); for ``message``
    (PROCESS, HEADERS) Content-length and the message, no ``Spam`` header.
    ``spam`` is the (name, value) pair of the Spam header."""
    if message:
        return VERSION + b" 0 EX_OK\r\nContent-length: %d\r\n\r\n" % len(body) + body
    return VERSION + b" 0 EX_OK\r\n" + f"{spam[0]}: {spam[1]}".encode("ascii", "replace") + b"\r\n\r\n" + body


def error_response(code, text):
    """An error: the status line alone, no blank line after it, then the
    connection closes, as spamd answers.  spamc then fails reading the
    answer's headers (exit 74 with ``-x``, and ``spamc -L`` exits 74: a
    refused learn is not reported as done); with a blank line, spamc -L
    would print "Message was already un/learned" and exit 0."""
    name = _CODE_NAME.get(code, "EX_UNKNOWN")
    return VERSION + b" %d %s: %s\r\n" % (code, name.encode(), _one_line(text).encode("ascii", "replace"))


def comma_words(value):
    """The lower-case words of a comma-separated header value (TELL's ``Set:`` and ``Remove:``)."""
    return {w.strip().lower() for w in value.split(",")}


def _one_line(text):
    return " ".join(str(text).split())[:200]


def spam_header(verdict, score, required):
    flag = "True" if verdict.label == "spam" else "False"
    return ("Spam", f"{flag} ; {score:.1f} / {required:.1f}")


def symbols(verdict):
    """The verdict's symbols: its rules (Bayes band(s), SPAMNB_<LABEL>, the
    reason an unsure message is not ham), then the evidence tokens, strongest
    first (spamnb.report.headers)."""
    from spamnb.report import headers

    return headers.tests(verdict) + [symbol_name(token) for token, _ in verdict.evidence]


def report(verdict, score_map, score):
    """A plain-text report in spamd's layout: a summary line, the rules, then
    the strongest tokens apart (points, symbol, which class it points to)."""
    from spamnb.report import headers

    lines = headers.report_lines(verdict, score, score_map.required, score_map.points)
    return ("\r\n".join(lines) + "\r\n").encode("utf-8")


def header_end(message):
    """Offset just past the header block's last line (before the blank line),
    or None when the message has no header block (no field line first)."""
    if not message or message[:1] in (b" ", b"\t", b"\r", b"\n") or b":" not in message[:1000].split(b"\n", 1)[0]:
        return None
    hits = [p for p in (message.find(b"\n\n"), message.find(b"\n\r\n")) if p >= 0]
    return min(hits) + 1 if hits else len(message)


def marked_headers(message, verdict, score, required, report=False, subject_tag=None, points=None):
    """The message's header block with spamnb's X-Spam-* fields (any the
    sender put there removed; spamnb.report.headers), ending in its blank
    line; and the offset where the body starts in ``message``.  ``report``
    adds X-Spam-Report; ``subject_tag`` (str) starts the Subject of spam
    (once: a Subject that starts with it already is left alone)."""
    from spamnb.mail.status import field_name, header_fields, tag_subject
    from spamnb.report.headers import OUR_FIELDS, spam_fields

    end = header_end(message)
    newline = b"\r\n" if b"\r\n" in message[:2000] else b"\n"
    ours = [field.replace(b"\n", newline) for field in spam_fields(verdict, score, required, points, report)]
    tag = subject_tag.encode("utf-8") if subject_tag and verdict.label == "spam" else None
    if end is None:
        if tag:
            ours.append(b"Subject: " + tag)
        return newline.join(ours) + newline + newline, 0
    fields = [field for field in header_fields(message[:end]) if field_name(field) not in OUR_FIELDS]
    if tag and not tag_subject(fields, tag):
        ours.append(b"Subject: " + tag)
    head = b"".join(b"".join(field) for field in fields)
    if head and not head.endswith(b"\n"):
        head += newline
    body_start = end
    if message[end:end + 2] == b"\r\n":
        body_start += 2
    elif message[end:end + 1] == b"\n":
        body_start += 1
    return head + newline.join(ours) + newline + newline, body_start
