"""The SPAMC/SPAMD protocol (SpamAssassin's ``spamd/PROTOCOL``), without I/O.

This module parses requests and formats responses; :mod:`spamnb.server.daemon` does
the sockets.  A request is a line ``VERB SPAMC/1.x``, header lines
``Name: value``, a blank line and, for the verbs that take one, a message of
``Content-length`` bytes (zlib-compressed when ``Compress: zlib``).  A
response is ``SPAMD/1.5 <code> <text>``, header lines, a blank line and a
body.  Codes are sysexits.h values (0 ``EX_OK``, 76 ``EX_PROTOCOL``, ...);
after a non-zero code nothing else is sent and the connection closes.

The score spamd answers (``Spam: True ; <score> / <required>``) is
spamnb's log-odds on SpamAssassin's scale: :class:`spamnb.report.scale.ScoreMap`.
"""

from __future__ import annotations

import re
import zlib
from collections import namedtuple

from spamnb.errors import ProtocolError
from spamnb.report.headers import symbol_name   # SYMBOLS' token names (re-exported)

__all__ = ["EX", "ProtocolError", "Request", "parse_head", "decompress", "response", "comma_words",
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


def marked_headers(message, verdict, score, required, report=False, subject_tag=None, points=None):
    """PROCESS and HEADERS: ``message`` with spamnb's X-Spam-* fields (any
    the sender put there removed; spamnb.report.headers) and the Subject of
    spam tagged with ``subject_tag`` (str), as :func:`spamnb.mail.headers.edit`
    makes it (the edit ``classify -p --sa-headers`` makes): the edit and the
    header ending in its blank line (HEADERS' answer).  PROCESS answers
    ``edited.head + message[edited.at:]``."""
    from spamnb.mail import headers
    from spamnb.report.headers import spam_fields

    tag = subject_tag.encode("utf-8") if subject_tag and verdict.label == "spam" else None
    edited = headers.edit(message, spam_fields(verdict, score, required, points, report), headers.SPAM_FIELDS, tag)
    return edited, headers.header_block(message, edited)
