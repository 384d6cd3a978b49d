"""The header ``spamnb classify -p`` adds, and the optional Subject tag.

The status header (``X-Spamnb-Status`` by default; ``--header-name`` or the
settings file change it) goes at the end of the message's header block (its
header fields from the top, up to the blank line or the first line that is
not one: a message with no blank line after its header gets it before its
first body line; a message with no header gets a header block of its own, in
front of its blank line when it starts with one)::

    X-Spamnb-Status: Yes, log-odds=+27.104, probability=1.0000000

The first word tells the verdict apart: ``Yes`` (spam), ``Unsure``, ``No``
(ham).  Headers of that same name already in the message are removed (a
sender must not pre-label its own mail); every other header stays, so an
upstream SpamAssassin's ``X-Spam-Status`` and ``X-Spam-Flag`` are kept.  With
a subject tag, the Subject of spam starts with it (once; a message without a
Subject gets one).  The body is never touched: it is written from a view of
the input, not a copy.
"""

from spamnb.mail import headers

__all__ = ["STATUS_WORDS", "status_value", "passthrough_pieces", "strip_markup"]

STATUS_WORDS = {"spam": b"Yes", "unsure": b"Unsure", "ham": b"No"}
_CHECKER = b"x-spam-checker-version"


def status_value(verdict):
    """``Yes, log-odds=+27.104, probability=1.0000000`` for a Verdict; an
    unsure message that P(spam) alone would call ham ends in its reason
    (``, reason=part-leans-spam``: ``spamnb.estimator.verdict.REASONS``)."""
    value = (STATUS_WORDS[verdict.label] + b", log-odds=" + f"{verdict.log_odds:+.3f}".encode()
             + b", probability=" + f"{verdict.probability:.7f}".encode())
    reason = getattr(verdict, "reason", "")
    return value + b", reason=" + reason.encode("ascii") if reason else value


def passthrough_pieces(message, verdict, header_name="X-Spamnb-Status", subject_tag=None, fields=None,
                       remove=()):
    """The message with the status header (and the Subject tag for spam), as
    pieces to write one after the other.  A message with no header block gets
    the header (and a Subject) and a blank line in front of it.  ``fields``
    (header fields as bytes, continuation lines after "\\n") replace the
    status header, and the fields named in ``remove`` (lower-case bytes) are
    taken out of the message (``classify -p --sa-headers``)."""
    name = header_name.encode("ascii")
    added = [name + b": " + status_value(verdict)] if fields is None else list(fields)
    drop = set(remove) if fields is not None else {name.lower()}
    tag = subject_tag.encode("utf-8") if subject_tag and verdict.label == "spam" else None
    edited = headers.edit(message, added, drop, tag)
    return [edited.head, memoryview(message)[edited.at:]]


def strip_markup(message, header_name="X-Spamnb-Status", subject_tag=None):
    """The message as it was before ``passthrough_pieces`` (or the server)
    marked it: its leading mbox envelope line, every status header of that
    name, the ``X-Spam-*`` fields of :data:`spamnb.mail.headers.SPAM_FIELDS` when spamnb's
    ``X-Spam-Checker-Version`` is among them, and the subject tag removed (the rest, body included, is left byte for byte).
    Learning the delivered copy of a message then learns the same bytes as
    learning the original (what ``sa-learn`` does with SpamAssassin's markup)."""
    if message[:5] == b"From ":
        newline = message.find(b"\n")
        message = message[newline + 1:] if newline >= 0 else b""
    where = headers.split(message)
    if where is None:
        return message
    end = where.end
    name = header_name.encode("ascii").lower()
    tag = subject_tag.encode("utf-8") if subject_tag else None
    fields = []
    changed = False
    given = headers.fields(message[:end])
    # the SpamAssassin-style fields go too when spamnb wrote them (its
    # X-Spam-Checker-Version says so): learning a delivered copy must not
    # learn the verdict it was given as words of the message
    ours = any(headers.field_name(f) == _CHECKER and b"".join(f).split(b":", 1)[1].strip().startswith(b"spamnb")
               for f in given)
    for field in given:
        this_name = headers.field_name(field)
        if this_name == name or (ours and this_name in headers.SPAM_FIELDS):
            changed = True
            continue
        if tag and this_name == b"subject":
            first = field[0]
            colon = first.index(b":") + 1
            rest = headers.untagged_subject(first[colon:], tag)
            if rest is not None:
                field = [first[:colon] + b" " + rest] + field[1:]
                changed = True
        fields.append(field)
    if not changed:
        return message
    return b"".join(b"".join(f) for f in fields) + message[end:]
