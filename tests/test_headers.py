"""spamnb/mail/headers.py function by function: where a header ends, its
fields, the Subject tag and the one edit, on small messages whose every
offset is worked out by hand (the module docstring is the rule).

tests/test_header_paths.py holds the paths (``classify -p``, SPAMD, the
milter, ``imap scan``) to the same bytes; these pin the module's own edge
cases, which a mutation run of the module showed no path test reaching: the
line feed after a CR, a blank line made of CRLF just before a plain one, a
header with no line end, a message with no header given a Subject, the
blank line kept after an edited header."""

import pytest

from spamnb.mail import headers
from spamnb.mail.headers import Edited, Split


@pytest.mark.parametrize("message, start, expected", [
    (b"A: 1\nB: 2\n\nbody", 0, 10),             # just past the last field's line
    (b"A: 1\r\nB: 2\r\n\r\nbody", 0, 12),       # a CRLF blank line
    (b"A: 1\nbody", 0, 9),                      # no blank line: the end of the message
    (b"A: 1\n\nx\n\r\ny", 0, 5),                # a CRLF blank line after the first plain one is body
    (b"A: b\n\r\n\nbody", 0, 5),                # a CRLF blank line just before a plain one comes first
    (b"A: 1\n\n\r\nbody", 0, 5),              # a CRLF blank line just after the plain one is body
    (b"\n\r\nbody", 0, 1),                      # an empty first line, then the CRLF blank line
    (b"\n\nbody", 0, 1),                        # the blank line at the very start
    (b"xx\n\nA: 1\n\nbody", 4, 9),              # from ``start`` (the ledger's mbox messages)
    (b"xx\n\nA: 1\r\n\r\nbody", 4, 10),
])
def test_header_end(message, start, expected):
    assert headers.header_end(message, start) == expected


@pytest.mark.parametrize("message, expected", [
    (b"A: 1\nB: 2\n\nbody", Split(10, 10, 11)),
    (b"A: 1\r\nB: 2\r\n\r\nbody", Split(12, 12, 14)),         # the body after the CR and its line feed
    (b"A: 1\nbody line\n", Split(5, 15, 15)),                  # no blank line: body lines are header to a reader
    (b"A: 1", Split(4, 4, 4)),                                 # no line end at all
    (b"From x@y Mon\nA: 1\n\nb", Split(18, 18, 19)),           # an mbox envelope line
    (b"A: 1\n \tfolded\nB: 2\n\nb", Split(19, 19, 20)),        # a continuation line is its field's
    (b"A: 1\r\n\rx", Split(6, 8, 8)),                          # a CR not followed by a line feed: no blank line
])
def test_split(message, expected):
    assert headers.split(message) == expected


@pytest.mark.parametrize("message", [b"body\n", b"\nA: 1\n", b"", b": no name\n", b"A b: 1\n"])
def test_split_of_a_message_with_no_header(message):
    assert headers.split(message) is None


@pytest.mark.parametrize("message, limit, expected", [
    (b"A: 1\nB: 2\n\nbody", None, b"A: 1\nB: 2"),
    (b"A: 1\r\nB: 2\r\n\r\nbody", None, b"A: 1\r\nB: 2"),     # the blank line's CR dropped too
    (b"A: 1\nB: 2", None, b"A: 1\nB: 2"),                     # no blank line: the whole message
    (b"A: 1\nB: 2\n\nbody", 7, b"A: 1\nB:"),                  # only the first ``limit`` bytes
    (b"body\n\nA: 1", None, b""),
])
def test_header_of(message, limit, expected):
    assert headers.header_of(message, limit) == expected


@pytest.mark.parametrize("text, expected", [
    (b" hello", b"[S] hello"),
    (b"\thello", b"[S] hello"),
    (b"hello", b"[S] hello"),
    (b" [S] hello", None),               # tagged once
    (b" ", b"[S]"),                      # an empty Subject: the tag alone, no trailing space
])
def test_tagged_subject(text, expected):
    assert headers.tagged_subject(text, b"[S]") == expected


@pytest.mark.parametrize("text, expected", [
    (b" [S] hello", b"hello"),
    (b"[S]hello", b"hello"),
    (b" [S]  two", b" two"),             # only the one space the tag put there
    (b" [S]", b""),
    (b" hello", None),
])
def test_untagged_subject(text, expected):
    assert headers.untagged_subject(text, b"[S]") == expected


def _edited(message, *args, **kwargs):
    edited = headers.edit(message, *args, **kwargs)
    return edited, edited.head + message[edited.at:]


def test_edit_adds_removes_and_tags():
    message = b"A: 1\nSubject: hi\n\nbody"
    edited, whole = _edited(message, [b"X-S: y"], remove=[b"a"], subject_tag=b"[S]")
    assert edited == Edited(b"Subject: [S] hi\nX-S: y\n", 17, 18, b"\n")
    assert whole == b"Subject: [S] hi\nX-S: y\n\nbody"


def test_edit_of_a_header_with_no_line_end():
    edited, whole = _edited(b"A: 1", [b"X: 2"])
    assert edited == Edited(b"A: 1\nX: 2\n", 4, 4, b"\n")
    assert whole == b"A: 1\nX: 2\n"


def test_edit_adds_a_subject_when_there_is_none():
    assert _edited(b"A: 1\n\nb", [], subject_tag=b"[S]")[1] == b"A: 1\nSubject: [S]\n\nb"
    assert _edited(b"A: 1\r\n\r\nb", [], subject_tag=b"[S]")[1] == b"A: 1\r\nSubject: [S]\r\n\r\nb"


def test_edit_of_body_lines_read_as_header():
    message = b"A: 1\nbody\nX-Spam-Flag: YES\n\nrest"
    edited, whole = _edited(message, [b"X-N: 1"], remove=[b"x-spam-flag"])
    assert edited == Edited(b"A: 1\nX-N: 1\nbody\n", 27, 28, b"\n")
    assert whole == b"A: 1\nX-N: 1\nbody\n\nrest"


@pytest.mark.parametrize("message, expected, body", [
    (b"body\n", b"X-A: 1\nSubject: [S]\n\nbody\n", 0),        # a header of its own and a blank line
    (b"\nbody", b"X-A: 1\nSubject: [S]\n\nbody", 1),           # an empty header: ours goes before its blank line
    (b"\r\nbody", b"X-A: 1\r\nSubject: [S]\r\n\r\nbody", 2),
    (b"", b"X-A: 1\nSubject: [S]\n\n", 0),
])
def test_edit_of_a_message_with_no_header(message, expected, body):
    edited, whole = _edited(message, [b"X-A: 1"], subject_tag=b"[S]")
    assert whole == expected
    assert edited.at == 0 and edited.body == body


def test_edit_writes_added_fields_in_the_headers_line_ends():
    edited, whole = _edited(b"A: 1\r\n\r\nb", [b"X-R: one\n\ttwo"])
    assert whole == b"A: 1\r\nX-R: one\r\n\ttwo\r\n\r\nb"


@pytest.mark.parametrize("message, expected", [
    (b"A: 1\n\nbody", b"A: 1\nX: 1\n\n"),              # the message's own blank line
    (b"A: 1\n", b"A: 1\nX: 1\n\n"),                    # none: one in its line ends
    (b"A: 1\r\n\r\nbody", b"A: 1\r\nX: 1\r\n\r\n"),
    (b"A: 1\r\n", b"A: 1\r\nX: 1\r\n\r\n"),
    (b"body", b"X: 1\n\n"),                            # a header of its own: its blank line is there already
    (b"\nbody", b"X: 1\n\n"),
])
def test_header_block_ends_in_one_blank_line(message, expected):
    assert headers.header_block(message, headers.edit(message, [b"X: 1"])) == expected


def test_mta_edits():
    message = b"Subject: hi\nX-Spam-Flag: YES\nx-spam-flag: NO\n\nbody"
    edits, add_subject = headers.mta_edits(message, remove=[b"x-spam-flag"], subject_tag=b"[S]")
    # removals last-first per name, so the indexes stay right; then the Subject's new text
    assert edits == [(b"x-spam-flag", 2, None), (b"X-Spam-Flag", 1, None), (b"Subject", 1, b"[S] hi")]
    assert add_subject is False


def test_mta_edits_subject_with_crlf_and_none():
    edits, add = headers.mta_edits(b"Subject: hi\r\nA: 1\r\n\r\nb", subject_tag=b"[S]")
    assert (edits, add) == ([(b"Subject", 1, b"[S] hi")], False)
    assert headers.mta_edits(b"A: 1\n\nb", subject_tag=b"[S]") == ([], True)
    assert headers.mta_edits(b"A: 1\n\nb") == ([], False)
    assert headers.mta_edits(b"body", subject_tag=b"[S]") == ([], True)
    assert headers.mta_edits(b"body") == ([], False)
    assert headers.mta_edits(b"Subject: [S] hi\n\nb", subject_tag=b"[S]") == ([], False)   # tagged once
