"""The ledger's fast paths (spamnb.estimator.ledger: ``canonical`` without a
parse, ``train_digest`` without a copy) give what the general path gives:
``strip_markup`` and ``message_digest(canonical(...))``, byte for byte, on
the shapes of mail where a search could go wrong: an mbox envelope line
(with and without its line end), CRLF line ends (in the header only, or
from the first line), spamnb's and SpamAssassin's fields, a header without
a body, no header at all."""

import pytest

from spamnb.mail.status import strip_markup
from spamnb.estimator import ledger as ledgers

HEAD = b"From: a@example.com\nSubject: hello\n"
BODY = b"some words of the body\nX-Spam-Status: Yes (in the body: not a field)\n"
SHAPES = {
    "plain": HEAD + b"\n" + BODY,
    "mbox line": b"From a@example.com Sat Nov 28 10:00:00 2026\n" + HEAD + b"\n" + BODY,
    "mbox line, nothing after it": b"From a@example.com Sat Nov 28 10:00:00 2026",
    "mbox line and its line end only": b"From a@example.com Sat Nov 28 10:00:00 2026\n",
    "an empty first line": b"\n" + HEAD + b"\n" + BODY,
    "crlf": (HEAD + b"\n" + BODY).replace(b"\n", b"\r\n"),
    "mbox line, then crlf": b"From a@example.com Sat Nov 28 10:00:00 2026\n"
                            + (HEAD + b"\n" + BODY).replace(b"\n", b"\r\n"),
    "crlf header, lf body": HEAD.replace(b"\n", b"\r\n") + b"\r\n" + BODY,
    "lf header, crlf body": HEAD + b"\n" + BODY.replace(b"\n", b"\r\n"),
    "crlf after the first lf line": b"From: a@example.com\nSubject: hi\r\n\r\n" + BODY,
    "a lone cr ends the first line": b"From: a@example.com\r" + b"Subject: hi\n\n" + BODY,
    "our status field": HEAD + b"X-Spamnb-Status: spam 0.99\n\n" + BODY,
    "our status field, crlf": (HEAD + b"X-Spamnb-Status: spam 0.99\n\n" + BODY).replace(b"\n", b"\r\n"),
    "spamassassin's fields, ours": HEAD + b"X-Spam-Flag: YES\nX-Spam-Status: Yes, score=9.0\n"
                                   b"X-Spam-Checker-Version: spamnb 0.1.0\n\n" + BODY,
    "spamassassin's fields, not ours": HEAD + b"X-Spam-Status: No, score=-1.0\n\n" + BODY,
    "mbox line and our field": b"From a@example.com Sat Nov 28 10:00:00 2026\n" + HEAD
                               + b"X-Spamnb-Status: ham 0.01\n\n" + BODY,
    "our field's name in the body only": HEAD + b"\n" + BODY + b"X-Spamnb-Status: spam 0.99 (quoted)\n",
    "spamassassin's version field in the body only": HEAD + b"\n" + b"x-spam-checker-version: quoted\n" + BODY,
    "header only": HEAD,
    "header only, our field": HEAD + b"X-Spamnb-Status: ham 0.01\n",
    "no header": BODY,
    "empty": b"",
    "From without the space": b"From:" + HEAD[5:] + b"\n" + BODY,
    "our status field in mixed case": HEAD + b"x-SpamNB-status: spam 0.99\n\n" + BODY,
    "spamassassin's fields in lower case": HEAD + b"x-spam-status: No\nx-spam-checker-version: spamnb\n\n" + BODY,
    "another x- field only": HEAD + b"X-Mailer: mutt\nx-loop: list\n\n" + BODY,
    "no blank line (Enron-Spam's)": b"Subject: hi\nsome words, x-spam in them\n",
    "no blank line, a field's name later": b"Subject: hi\nwords\nX-Spamnb-Status: spam 0.99\n",
    # over ledger._WHOLE_LOWER (the header searched alone): with and without the markup
    "large, our status field": HEAD + b"X-Spamnb-Status: spam 0.99\n\n" + BODY * (1 << 15),
    "large, no markup": HEAD + b"X-Mailer: mutt\n\n" + BODY * (1 << 15),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_fast_paths_give_the_general_paths_bytes_and_digest(name):
    data = SHAPES[name]
    general = strip_markup(data, "X-Spamnb-Status", None)
    assert ledgers.canonical(data) == general
    assert ledgers.train_digest(data) == ledgers.message_digest(general)
    assert ledgers.train_digest(bytearray(data)) == ledgers.message_digest(general)


def test_the_large_shapes_are_past_the_whole_message_search():
    assert len(SHAPES["large, no markup"]) > 1 << 20   # ledger.train_digest then searches the header alone
    assert ledgers.canonical(SHAPES["large, our status field"]) != SHAPES["large, our status field"]


def test_the_shapes_differ_where_they_should():
    """The cases above are not all alike: the envelope line and the markup
    are removed, the rest is kept byte for byte."""
    canonical = {name: ledgers.canonical(data) for name, data in SHAPES.items()}
    assert canonical["mbox line"] == canonical["plain"]
    assert canonical["our status field"] == canonical["plain"]
    assert canonical["spamassassin's fields, ours"] == canonical["plain"]
    assert canonical["spamassassin's fields, not ours"] != canonical["plain"]
    assert canonical["crlf"] != canonical["plain"]
    assert canonical["mbox line, then crlf"] == canonical["crlf"]
    assert canonical["mbox line, nothing after it"] == b""


def test_the_compiled_blake2b_is_hashlibs_bit_for_bit():
    """``bayes.checks.blake2b`` (RFC 7693, compiled into ``_score``: a learn loads no ``_blake2``) gives
    hashlib's digest for every length around the 128-byte block (empty, one block exactly, one byte over,
    many blocks), every digest size, any buffer; the ledger's digest is the stored format."""
    import hashlib
    import os
    import random

    from spamnb.bayes.checks import blake2b

    rng = random.Random(48)
    lengths = [*range(0, 300), 383, 384, 385, 1023, 1024, 1025, 4095, 4096, 65537, 1 << 20]
    for n in lengths:
        data = os.urandom(n)
        for size in (16, 1, 32, 64, rng.randint(1, 64)):
            assert blake2b(data, size) == hashlib.blake2b(data, digest_size=size).digest(), (n, size)
    assert blake2b(b"abc").hex().startswith("ba80a53f981c4d0d6a2797b69f12f6e9")   # RFC 7693, appendix A
    data = os.urandom(1000)
    assert blake2b(memoryview(data)[7:], 16) == blake2b(bytearray(data[7:]), 16) == \
        hashlib.blake2b(data[7:], digest_size=16).digest()
    assert ledgers.message_digest(data) == hashlib.blake2b(data, digest_size=ledgers.DIGEST_SIZE).digest()
    for bad in (0, 65):
        with pytest.raises(ValueError):
            blake2b(b"x", bad)
    with pytest.raises(TypeError):
        blake2b("text", 16)
