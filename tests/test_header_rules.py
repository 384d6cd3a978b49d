"""spamnb.mail.headers finds a message's header with bytes methods and the
parser's compiled run of fields (``spamnb.mail._mail.fields_end``), so that
``classify -p`` imports no ``re`` (issue 51): the same offsets, and the same
edited bytes, as the regular expressions it used before (written here as
the reference), on the sample corpus, the full corpora (when present) and
hostile input."""

import random
import re

import pytest

from conftest import SAMPLE_CORPUS, corpus_root
from spamnb.mail import _mail, headers, status

# the rules as they were (spamnb.mail.headers before issue 51)
HEADER_LINE = re.compile(rb"(?:From [^\n]*\n)?[\x21-\x39\x3b-\x7e]+[ \t]*:")
BLANK_LINE = re.compile(rb"\n\r?\n")
LINE_END = re.compile(rb"\r?\n")
FIELDS = re.compile(rb"(?:From [^\n]*\n)?"
                    rb"(?:[\x21-\x39\x3b-\x7e]+[ \t]*:[^\n]*(?:\n|\Z)"
                    rb"(?:[ \t][^\n]*(?:\n|\Z))*)*")


def header_end_ref(message, start=0):
    blank = BLANK_LINE.search(message, start)
    return blank.start() + 1 if blank is not None else len(message)


def split_ref(message):
    if not HEADER_LINE.match(message):
        return None
    end = header_end_ref(message)
    line_end = LINE_END.match(message, end)   # the blank line's, when there is one
    return (FIELDS.match(message).end(), end, line_end.end() if line_end else end)


def header_length_ref(message, limit=None):
    n = len(message) if limit is None else min(limit, len(message))
    if not HEADER_LINE.match(message, 0, n):
        return 0
    blank = BLANK_LINE.search(message, 0, n)
    if blank is None:
        return n
    end = blank.start()
    while end and message[end - 1] == 13:
        end -= 1
    return end


class _Verdict:
    label, log_odds, probability, reason = "spam", 12.5, 0.99999, ""


def check(message, monkeypatch=None):
    """The new rules give the reference's offsets; an edit made on them the reference's bytes."""
    assert headers.split(message) == split_ref(message), message[:200]
    for start in (0, 1, 7):
        assert headers.header_end(message, start) == header_end_ref(message, start), (message[:200], start)
    for limit in (None, 0, 1, 5, 64, 2000):
        assert headers.header_length(message, limit) == header_length_ref(message, limit), (message[:200], limit)
    if monkeypatch is not None:   # classify -p's bytes, then the same with the reference's split
        new = b"".join(status.passthrough_pieces(message, _Verdict(), subject_tag="[SPAM]"))
        sa = b"".join(status.passthrough_pieces(message, _Verdict(), fields=[b"X-Spam-Flag: YES", b"X-A: 1\n\tb"],
                                                remove=headers.SPAM_FIELDS))
        with monkeypatch.context() as m:
            m.setattr(headers, "split", lambda msg: None if split_ref(msg) is None else headers.Split(*split_ref(msg)))
            assert new == b"".join(status.passthrough_pieces(message, _Verdict(), subject_tag="[SPAM]")), message[:200]
            assert sa == b"".join(status.passthrough_pieces(message, _Verdict(), fields=[b"X-Spam-Flag: YES",
                                                                                        b"X-A: 1\n\tb"],
                                                            remove=headers.SPAM_FIELDS))


HOSTILE = [
    b"", b"\n", b"\r\n", b"\n\n", b":", b"A", b"A:", b"A :", b"A\t:", b" A: 1", b"\tA: 1", b"A B: 1", b"A: 1",
    b"From ", b"From \n", b"From x\n", b"From x\nA: 1\n\nbody", b"From : x\nbody", b"From : x\nA: 1\n\nb",
    b"From x", b"From x\n\nA: 1", b"From: a\nB: 2\n\nc", b"From x\r\nA: 1\r\n\r\nb", b"from x\nA: 1\n",
    b"A: 1\n\n", b"A: 1\r\n\r\n", b"A: 1\n\r\n", b"A: 1\r\n\n", b"A: 1\n\r\r\n", b"A: 1\n\rx\n\nb",
    b"A: 1\n b\n\tc\nD: 2\nbody\nmore\n\nrest", b"A: 1\nbody line\n", b"A: 1\n \n\nb", b"A: 1\n\t\n\n",
    b"\xffA: 1\n\nb", b"A\xff: 1\n", b"A\x00: 1\n", b"A\x7f: 1", b"~!: 1\n", b"A:\n:\n\n", b"A:1\n:B\n\nb",
    b"Subject: [SPAM] hi\n\nb", b"Subject:\n\nb", b"subject: x\n\tfolded\nX-Spam-Flag: YES\n\nb",
    b"X-Spamnb-Status: Yes\nx-spamnb-status: No\n\nb", b"A: 1\nX-Spam-Score: 3\nbody\nX-Spam-Level: **\n\nb",
    b"A: " + b"x" * 5000 + b"\r\n\r\nb", b"A: 1\n" * 3000 + b"\nb", b"N" * 10000 + b": v\n\nb",
    bytes(range(256)) * 4, b"\x00" * 100, b"A: 1\n" + bytes(range(256)),
]


def test_the_new_rules_give_the_old_on_hostile_input(monkeypatch):
    for message in HOSTILE:
        check(message, monkeypatch)


def test_the_new_rules_give_the_old_on_generated_input(monkeypatch):
    rng = random.Random(51)
    pieces = [b"From ", b"A", b"Subject", b"X-Spam-Flag", b":", b" ", b"\t", b"\n", b"\r", b"\r\n", b"\n\n",
              b"x", b"\x00", b"\xff", b"\x7f", b"[SPAM]", b"From x\n"]
    for _ in range(4000):
        check(b"".join(rng.choice(pieces) for _ in range(rng.randrange(0, 24))), monkeypatch)


def test_the_new_rules_give_the_old_on_the_sample_corpus(monkeypatch):
    paths = sorted(p for p in SAMPLE_CORPUS.rglob("*") if p.is_file() and p.name != "README.md")
    assert len(paths) > 100
    for path in paths:
        message = path.read_bytes()
        check(message, monkeypatch)
        check(message.replace(b"\n", b"\r\n"))   # CRLF line ends


@pytest.mark.slow
@pytest.mark.parametrize("name", ["spamassassin", "enron-spam"])
def test_the_new_rules_give_the_old_on_the_full_corpora(name, monkeypatch):
    root, full = corpus_root(name, fallback=False)
    assert full
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "README.md"):
        check(path.read_bytes(), monkeypatch)


def test_fields_end_is_the_parser_s_block():
    """``_mail.fields_end`` is split_headers' run of fields, from any start, on any bytes-like object."""
    for message in HOSTILE:
        assert _mail.fields_end(message) == len(_mail.split_headers(message)[0]), message[:80]
        assert _mail.fields_end(bytearray(message)) == _mail.fields_end(message)
        for start in range(0, min(len(message), 12)):
            assert _mail.fields_end(message, start) == start + len(_mail.split_headers(message[start:])[0])
    assert _mail.fields_end(b"A: 1", 4) == 4 and _mail.fields_end(b"A: 1", 9) == 9
