"""A message's header as every path of spamnb reads and edits it: where it
ends, its fields, and the one edit (fields added, fields of some names
removed, the Subject tagged) that ``classify -p``, SPAMD's PROCESS and
HEADERS, the milter and ``spamnb imap scan --add-header`` make.

Where the header ends (:func:`split`, the one function that looks for it):

- the header is there when the message starts with a field (a name of
  printable ASCII but ``:``, then ``:``), after an optional mbox envelope
  line (``From ...``); anything else (a body line, a blank line, nothing)
  is a message with no header;
- its **fields** run from the top through each field's continuation lines
  (a line starting with a space or tab) up to the first line that is
  neither (``fields_end``);
- the **header** as procmail and maildrop read it runs to the first blank
  line (``"\\n\\n"`` or ``"\\n\\r\\n"``) or the end of the message (``end``):
  in a message with no blank line after its fields, the body lines before
  the first blank line are header to them; the body starts after that blank
  line (``body``).

An edit (:func:`edit`) puts the fields added after the last field, before
the first body line of a message with no blank line after its header (not
after the body lines a mail program reads as header: ``fields_end``, not
``end``), removes every field of the names removed up to ``end`` (a mail
program reads them all as header), tags the text of each Subject field
(once: one that starts with the tag is left alone; a message without a
Subject gets one), writes its line ends as the header's (CRLF when its
first 2,000 bytes hold one), and leaves every other byte as it was, the
blank line and the body included.  A message with no header gets a header
of its own in front of it: before its blank line when it starts with one,
else with a blank line of its own.

The milter does not edit bytes: the MTA holds the message and is told what
to change.  :func:`mta_edits` gives the same edit as the MTA's operations
(the n-th field of a name changed or removed, fields added at the end).
"""

from spamnb.mail import lazy_re
from spamnb.mail._mail import fields_end as _fields_end

__all__ = ["SPAM_FIELDS", "NEWLINE_SCAN", "Split", "Edited", "header_end", "split", "header_of", "header_length", "newline_of",
           "fields", "field_name", "tagged_subject", "untagged_subject", "tag_subject", "edit", "header_block", "mta_edits"]

# The SpamAssassin-style fields spamnb writes (``spamnb serve``'s PROCESS and
# HEADERS, the milter, ``classify -p --sa-headers``), lower case: any the
# sender put there are removed before spamnb's are added.
SPAM_FIELDS = (b"x-spam-status", b"x-spam-flag", b"x-spam-score", b"x-spam-level", b"x-spam-checker-version",
               b"x-spam-report")
NEWLINE_SCAN = 2000     # the bytes of the header looked at for a CRLF

# The header is found with bytes methods and spamnb.mail._mail.fields_end (the
# parser's compiled run of fields), not regular expressions: ``classify -p``
# imports no ``re`` (nor ``enum``, ``collections``).  The rules are these
# expressions' (tests/test_header_rules.py compares the two):
#   the message has a header: (?:From [^\n]*\n)?[\x21-\x39\x3b-\x7e]+[ \t]*:   matched at 0
#   the first blank line:     \n\r?\n                                            searched
#   its fields' end:          (?:From [^\n]*\n)?(?:[\x21-\x39\x3b-\x7e]+[ \t]*:[^\n]*(?:\n|\Z)
#                             (?:[ \t][^\n]*(?:\n|\Z))*)*                       matched at 0
_NAME = bytes(range(0x21, 0x7F))   # a field name's characters (":" never reaches the check: the name ends at it)

# a field's name at the start of a line, and the rest of the field (its continuation lines) after its colon
# (the milter's mta_edits alone: compiled when it first edits)
_FIELD_START = lazy_re.pattern(rb"^([\x21-\x39\x3b-\x7e]+)[ \t]*:", lazy_re.M)
_FIELD_REST = lazy_re.pattern(rb"[^\n]*(?:\n[ \t][^\n]*)*")


class Split(tuple):
    """Offsets in a message with a header: just past its last field
    (``fields_end``), just past its last line before the first blank line or
    the end (``end``), and where its body starts, after that blank line (``body``)."""

    __slots__ = ()

    def __new__(cls, fields_end, end, body):
        return tuple.__new__(cls, (fields_end, end, body))

    fields_end = property(lambda self: self[0])
    end = property(lambda self: self[1])
    body = property(lambda self: self[2])


class Edited(tuple):
    """An edited message is ``head + message[at:]``: ``head`` the edited header
    (without the message's blank line), ``at`` where the message goes on (its
    blank line, or its body), ``body`` where its body starts."""

    __slots__ = ()

    def __new__(cls, head, at, body, newline):
        return tuple.__new__(cls, (head, at, body, newline))

    head = property(lambda self: self[0])
    at = property(lambda self: self[1])
    body = property(lambda self: self[2])
    newline = property(lambda self: self[3])


def _field_at(message, pos, n):
    """Whether a field's name and its colon start at ``pos`` of ``message[:n]``."""
    colon = message.find(b":", pos, n)
    if colon <= pos:
        return False
    name = message[pos:colon].rstrip(b" \t")
    return bool(name) and not name.translate(None, _NAME)


def _envelope_end(message, n):
    """Offset just past the mbox envelope line (``From ...`` and its line feed) of ``message[:n]``, or 0."""
    if not message.startswith(b"From ", 0, n):
        return 0
    return message.find(b"\n", 5, n) + 1


def _has_header(message, n):
    """Whether ``message[:n]`` starts with a field, or an envelope line and a field."""
    if _field_at(message, 0, n):
        return True
    after = _envelope_end(message, n)
    return after > 0 and _field_at(message, after, n)


def _blank_line(message, start, n):
    """Where the first ``"\\n\\n"`` or ``"\\n\\r\\n"`` of ``message[:n]`` at or after ``start`` starts, or -1."""
    lf = message.find(b"\n\n", start, n)
    crlf = message.find(b"\n\r\n", start, n if lf < 0 else lf + 2)   # one before lf ends by lf + 2
    return lf if crlf < 0 else crlf


def header_end(message, start=0):
    """Offset just past the last line before the first blank line (``"\\n\\n"``
    or ``"\\n\\r\\n"``) at or after ``start``, or ``len(message)`` when there is
    none: the one place spamnb looks for the end of a message's header (one
    search for either; :func:`header_length` the same search within a limit)."""
    blank = _blank_line(message, start, len(message))
    return blank + 1 if blank >= 0 else len(message)


def split(message):
    """:class:`Split` of ``message`` (bytes), or None when it has no header."""
    n = len(message)
    if not _has_header(message, n):
        return None
    end = header_end(message)
    body = end
    if message[end:end + 1] == b"\n":
        body += 1
    elif message[end:end + 2] == b"\r\n":
        body += 2
    return Split(_fields_end(message, _envelope_end(message, n)), end, body)


def header_of(message, limit=None):
    """The header of ``message`` up to its first blank line (the line end
    before it dropped), in its first ``limit`` bytes; b"" for a message with
    no header.  A cheap read (one search, no fields): the console's records,
    the online protocol's Date, the IMAP scan's look for its status field."""
    return message[:header_length(message, limit)]


def header_length(message, limit=None):
    """``len(header_of(message, limit))``, found without a copy of the
    message: :func:`header_end`'s one search for the first blank line, within
    the first ``limit`` bytes."""
    n = len(message) if limit is None else min(limit, len(message))
    if not _has_header(message, n):
        return 0
    end = _blank_line(message, 0, n)
    if end < 0:
        return n
    while end and message[end - 1] == 13:      # the CRs before it dropped
        end -= 1
    return end


def newline_of(message, end):
    """The line end the header of ``message`` (its first ``end`` bytes) uses: CRLF when its first
    :data:`NEWLINE_SCAN` bytes hold one, else LF."""
    return b"\r\n" if message.find(b"\r\n", 0, min(end, NEWLINE_SCAN)) >= 0 else b"\n"


def fields(head):
    """The header ``head`` as a list of fields, each a list of its lines (continuations included)."""
    out = []
    for line in head.splitlines(keepends=True):
        if line[:1] in (b" ", b"\t") and out:
            out[-1].append(line)
        else:
            out.append([line])
    return out


def field_name(field):
    """The lower-case name of a field (:func:`fields`' list of lines)."""
    return field[0].split(b":", 1)[0].strip().lower()


def tagged_subject(text, tag):
    """A Subject's text (after its colon, the leading space or tab left in or
    not) tagged with ``tag`` (bytes): the tag, a space and the text; None when
    the text starts with the tag already."""
    text = text.lstrip(b" \t")
    if text.startswith(tag):
        return None
    return tag + (b" " if text.strip() else b"") + text


def untagged_subject(text, tag):
    """A Subject's text without the tag :func:`tagged_subject` put there
    (and the space after it), or None when it does not start with ``tag``."""
    text = text.lstrip(b" \t")
    if not text.startswith(tag):
        return None
    rest = text[len(tag):]
    return rest[1:] if rest[:1] == b" " else rest


def tag_subject(field_list, tag):
    """Tag the text of each Subject field of ``field_list`` (:func:`fields`'
    lists, changed in place) with :func:`tagged_subject`.  Returns whether
    there was a Subject."""
    subjects = [f for f in field_list if field_name(f) == b"subject"]
    for field in subjects:
        first = field[0]
        colon = first.index(b":") + 1
        text = tagged_subject(first[colon:], tag)
        if text is not None:
            field[0] = first[:colon] + b" " + text
    return bool(subjects)


def edit(message, added, remove=(), subject_tag=None):
    """The edit of ``message`` (module docstring) as an :class:`Edited`:
    ``added`` fields (bytes, continuation lines after "\\n"; written with the
    header's line ends), the fields named in ``remove`` (lower-case bytes)
    taken out, each Subject tagged with ``subject_tag`` (bytes) when given."""
    added = list(added)
    drop = frozenset(remove)
    where = split(message)
    if where is None:   # no header: the message is all body, or empty
        if subject_tag:
            added.append(b"Subject: " + subject_tag)
        if message[:1] == b"\n" or message[:2] == b"\r\n":   # an empty header and its blank line: ours goes in it
            newline = message[:message.index(b"\n") + 1]
            return Edited(newline.join(f.replace(b"\n", newline) for f in added) + newline, 0, len(newline),
                          newline)
        newline = newline_of(message, len(message))
        return Edited(newline.join(f.replace(b"\n", newline) for f in added) + newline + newline, 0, 0, newline)
    at, end = where.fields_end, where.end
    newline = newline_of(message, end)
    kept_fields = [f for f in fields(message[:at]) if field_name(f) not in drop]
    below = b"".join(b"".join(f) for f in fields(message[at:end]) if field_name(f) not in drop) if at < end else b""
    if subject_tag and not tag_subject(kept_fields, subject_tag):
        added.append(b"Subject: " + subject_tag)
    kept = b"".join(b"".join(f) for f in kept_fields)
    if kept and not kept.endswith(b"\n"):
        kept += newline
    return Edited(kept + newline.join(f.replace(b"\n", newline) for f in added) + newline + below, end, where.body,
                  newline)


def header_block(message, edited):
    """The edited header ending in its blank line (SPAMD's HEADERS answer):
    the message's own blank line, or one in its line ends when it has none."""
    if edited.body > edited.at or edited.head.endswith(edited.newline + edited.newline):
        return edited.head + message[edited.at:edited.body]
    return edited.head + edited.newline


def mta_edits(message, remove=(), subject_tag=None):
    """The edit of :func:`edit` for an MTA that holds ``message`` (its header
    as the MTA passed it on: each field a line, then its blank line): a list
    of ``(name, index, value)``: the ``index``-th field (from 1) of that name
    gets ``value`` (the text after the colon and its space), or is removed
    when ``value`` is None; fields removed come last-first so the indexes
    stay right.  And whether a Subject must be added (a tag and no Subject).
    The fields to add go at the end of the header."""
    drop = frozenset(remove)
    if not _has_header(message, len(message)):
        return [], bool(subject_tag)
    end = header_end(message)
    counts, removed, subjects = {}, [], []
    for match in _FIELD_START.finditer(message, 0, end):
        name = match.group(1).lower()
        counts[name] = index = counts.get(name, 0) + 1
        if name in drop:
            removed.append((match.group(1), index))
        elif name == b"subject" and subject_tag:
            value = _FIELD_REST.match(message, match.end(), end).group()
            text = tagged_subject(value[:-1] if value.endswith(b"\r") else value, subject_tag)
            if text is not None:
                subjects.append((b"Subject", index, text))
    out = [(name, index, None) for name, index in sorted(removed, key=lambda r: (r[0].lower(), -r[1]))]
    return out + subjects, bool(subject_tag) and counts.get(b"subject", 0) == 0
