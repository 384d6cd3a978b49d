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

from spamnb.mail import lazy_re

__all__ = ["STATUS_WORDS", "SA_FIELDS", "status_value", "passthrough_pieces", "strip_markup", "header_fields", "field_name",
           "tag_subject"]

STATUS_WORDS = {"spam": b"Yes", "unsure": b"Unsure", "ham": b"No"}
# The SpamAssassin-style fields spamnb writes (``spamnb serve``'s PROCESS and
# HEADERS, ``classify -p --sa-headers``), lower case; any the sender put there
# are removed before ours are added.
SA_FIELDS = (b"x-spam-status", b"x-spam-flag", b"x-spam-score", b"x-spam-level", b"x-spam-checker-version",
             b"x-spam-report")
_CHECKER = b"x-spam-checker-version"
_HEADER_LINE = lazy_re.pattern(rb"(?:From [^\n]*\n)?[\x21-\x39\x3b-\x7e]+[ \t]*:")


def status_value(verdict):
    """``Yes, log-odds=+27.104, probability=1.0000000`` for a Verdict; an
    unsure message that P(spam) alone would call ham ends in its reason
    (``, reason=part-leans-spam``: ``spamnb.model.verdict.REASONS``)."""
    value = (STATUS_WORDS[verdict.label] + b", log-odds=" + f"{verdict.log_odds:+.3f}".encode()
             + b", probability=" + f"{verdict.probability:.7f}".encode())
    reason = getattr(verdict, "reason", "")
    return value + b", reason=" + reason.encode("ascii") if reason else value


def _header_end(message):
    """Offset just past the last header line (the blank line and body follow):
    the header as procmail and maildrop read it, up to the first blank line."""
    positions = [p for p in (message.find(b"\n\n"), message.find(b"\n\r\n")) if p >= 0]
    return min(positions) + 1 if positions else len(message)


# The header fields from the top: an mbox envelope line, then fields (a name,
# a colon) and their continuation lines, up to the first line that is neither:
# the blank line, or the first body line of a message with no blank line
# after its header (which _header_end counts as header).
_FIELDS = lazy_re.pattern(rb"(?:From [^\n]*\n)?"                               # the envelope line
                          rb"(?:[\x21-\x39\x3b-\x7e]+[ \t]*:[^\n]*(?:\n|\Z)"   # a field
                          rb"(?:[ \t][^\n]*(?:\n|\Z))*)*")                     # its continuation lines


def _fields_end(message):
    """Offset just past the message's last header field (see ``_FIELDS``)."""
    return _FIELDS.match(message).end()


def _blank_line_at(message, offset):
    return message[offset:offset + 1] == b"\n" or message[offset:offset + 2] == b"\r\n"


def header_fields(head):
    """The header block as a list of fields, each a list of its lines (continuations included)."""
    fields = []
    for line in head.splitlines(keepends=True):
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1].append(line)
        else:
            fields.append([line])
    return fields


def field_name(field):
    return field[0].split(b":", 1)[0].strip().lower()


def tag_subject(fields, tag):
    """Put ``tag`` (bytes) before the text of each Subject field of ``fields``
    (:func:`header_fields`' lists, changed in place), once: a Subject that
    starts with it already is left alone.  Returns whether there was a Subject."""
    subjects = [f for f in fields if field_name(f) == b"subject"]
    for field in subjects:
        first = field[0]
        colon = first.index(b":") + 1
        text = first[colon:].lstrip(b" \t")
        if not text.startswith(tag):
            field[0] = first[:colon] + b" " + tag + (b" " if text.strip() else b"") + text
    return bool(subjects)


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
    if not _HEADER_LINE.match(message):   # no header block: the message is all body, or empty
        if tag:
            added.append(b"Subject: " + tag)
        if _blank_line_at(message, 0):   # an empty header block and its blank line: the header goes in it
            newline = message[:message.index(b"\n") + 1]
            return [newline.join(f.replace(b"\n", newline) for f in added) + newline, message]
        return [b"\n".join(added) + b"\n\n", message]
    end = _header_end(message)
    # a message with no blank line after its header: ours goes after its last header field, before
    # its first body line (at), not after the last line before a blank line (end); the fields of
    # that name between the two are removed all the same, as a mail program reads them as header
    at = _fields_end(message)
    head = message[:end]
    newline = b"\r\n" if head.find(b"\r\n", 0, 2000) >= 0 else b"\n"
    kept_fields = [f for f in header_fields(message[:at]) if field_name(f) not in drop]
    below = b"".join(b"".join(f) for f in header_fields(message[at:end]) if field_name(f) not in drop)
    if tag and not tag_subject(kept_fields, tag):
        added.append(b"Subject: " + tag)
    kept = b"".join(b"".join(f) for f in kept_fields)
    if kept and not kept.endswith(b"\n"):
        kept += newline
    return [kept + newline.join(f.replace(b"\n", newline) for f in added) + newline + below,
            memoryview(message)[end:]]


def strip_markup(message, header_name="X-Spamnb-Status", subject_tag=None):
    """The message as it was before ``passthrough_pieces`` (or the server)
    marked it: its leading mbox envelope line, every status header of that
    name, the ``X-Spam-*`` fields of :data:`SA_FIELDS` when spamnb's
    ``X-Spam-Checker-Version`` is among them, and the subject tag removed (the rest, body included, is left byte for byte).
    Learning the delivered copy of a message then learns the same bytes as
    learning the original (what ``sa-learn`` does with SpamAssassin's markup)."""
    if message[:5] == b"From ":
        newline = message.find(b"\n")
        message = message[newline + 1:] if newline >= 0 else b""
    if not _HEADER_LINE.match(message):
        return message
    end = _header_end(message)
    name = header_name.encode("ascii").lower()
    tag = subject_tag.encode("utf-8") if subject_tag else None
    fields = []
    changed = False
    given = header_fields(message[:end])
    # the SpamAssassin-style fields go too when spamnb wrote them (its
    # X-Spam-Checker-Version says so): learning a delivered copy must not
    # learn the verdict it was given as words of the message
    ours = any(field_name(f) == _CHECKER and b"".join(f).split(b":", 1)[1].strip().startswith(b"spamnb")
               for f in given)
    for field in given:
        this_name = field_name(field)
        if this_name == name or (ours and this_name in SA_FIELDS):
            changed = True
            continue
        if tag and this_name == b"subject":
            first = field[0]
            colon = first.index(b":") + 1
            text = first[colon:].lstrip(b" \t")
            if text.startswith(tag):
                rest = text[len(tag):]
                rest = rest[1:] if rest[:1] == b" " else rest
                field = [first[:colon] + b" " + rest] + field[1:]
                changed = True
        fields.append(field)
    if not changed:
        return message
    return b"".join(b"".join(f) for f in fields) + message[end:]
