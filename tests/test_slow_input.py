"""Slow input: every regular expression of the parser and tokenizer gets its worst
case at the largest size the parser reads (``mail.MAX_BYTES``, 256 KiB) and
must finish within a time bound; so must the whole tokenizer.  Random charset
names must not make memory or time grow (the codec registry caches misses)."""

import random
import re
import signal
import time

import pytest

from spamnb.mail import _mail, lazy_re

from spamnb.mail import charsets

from spamnb.mail import parser as mail

from spamnb.mail import tokenizer
from spamnb.mail.tokenizer import Tokenizer

N = mail.MAX_BYTES
BOUND = 0.5         # seconds of CPU for one pattern on 256 KiB (linear: a few ms)


def _fill(unit, tail=""):
    """``unit`` repeated to N characters, then ``tail``."""
    return unit * ((N - len(tail)) // len(unit)) + tail


# Worst cases per pattern: long runs the pattern can split in many ways, many
# match starts that fail late, openings without a close.
WORST = {
    "_COMMENT": [_fill("<!--", "-->"), _fill("<!-- ", "-->")],
    "_WORD_COMMENT": [_fill("-->"), _fill("-->a")],
    "_LINK": ["href=" + _fill(" ", ">"), "href" + _fill(" "), _fill("href= ' "), "href='" + _fill(" ")],
    "_WHITE_COLOR": ["color:" + _fill(" ", ">"), "color=" + _fill(" ", "'"), _fill("color: "),
                     "color:#" + _fill("f")],
    "_TELLS": [_fill("<"), _fill("<b"), _fill("<scrip")],
    "_URL_AFTER_SCHEME": [_fill("://"), _fill(":// ")],
    "_URL_WWW": [_fill("www."), _fill("w"), _fill("www")],
    "_URL_DOMAIN": ["//" + _fill("a."), _fill("@"), "//" + _fill("a-"), _fill("//a."), _fill("a.\n"),
                    "@" + _fill("ab.", "1")],
    "_URL_IP": [_fill("//1.1.1."), _fill("//999.")],
    "_SHAPE_LOWER": [_fill("a")], "_SHAPE_UPPER": [_fill("A")], "_SHAPE_DIGIT": [_fill("9")],
    "_ENCODED_WORD": ["=?" + _fill("a"), _fill("=?"), _fill("=?a?q?"), "=?a?q?" + _fill("a"), _fill("=?a?")],
    "_BETWEEN_ENCODED_WORDS": ["?=" + _fill(" "), _fill("?= ")],
    "_NOT_BASE64": [_fill("!")],
}
MODULES = (mail, tokenizer, _mail)   # _mail: the compiled header and text code (_headers.pxi, _text.pxi)


def _patterns():
    for module in MODULES:
        for name, value in vars(module).items():
            if isinstance(value, lazy_re.pattern):   # compiled on first use
                value = value.compiled()
            if isinstance(value, re.Pattern):
                yield module, name, value


class _Timeout(Exception):
    pass


def _cpu_seconds(fn, limit=5.0):
    """CPU seconds of ``fn()``; stopped (and reported as ``limit``) after ``limit``
    seconds of wall time, so a quadratic pattern fails instead of hanging."""
    def alarm(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    start = time.process_time()
    try:
        fn()
    except _Timeout:
        return limit
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return time.process_time() - start


def test_every_pattern_has_a_worst_case():
    assert sorted(name for _, name, _ in _patterns()) == sorted(WORST)


@pytest.mark.parametrize("name", sorted(WORST))
def test_pattern_is_linear_on_its_worst_case(name):
    pattern = next(p for _, n, p in _patterns() if n == name)
    for text in WORST[name]:
        subject = text.encode("latin-1") if isinstance(pattern.pattern, bytes) else text
        if name == "_COMMENT":          # used through _remove_comments (cut at the last "-->")
            seconds = _cpu_seconds(lambda: mail._remove_comments(subject))
        else:
            seconds = _cpu_seconds(lambda: (pattern.findall(subject), pattern.sub(subject[:0], subject)))
        assert seconds < BOUND, (name, text[:20], seconds)


@pytest.mark.parametrize("case", ["_LINK", "_WHITE_COLOR", "_COMMENT", "_TELLS", "_URL_DOMAIN", "_ENCODED_WORD"])
def test_whole_message_at_the_limit_is_fast(case):
    """The tokenizer at its defaults on a message of the parser's full size
    (header, plain and HTML parts made of a pattern's worst case)."""
    body = WORST[case][0][: N // 3]
    raw = ("Subject: " + body[:2000] + "\nContent-Type: multipart/mixed; boundary=b\n\n--b\n"
           "Content-Type: text/html\n\n" + body + "\n--b\nContent-Type: text/plain\n\n" + body
           + "\n--b--\n").encode("utf-8")[:N]
    tok = Tokenizer()
    assert _cpu_seconds(lambda: tok.tokens(raw)) < 1.0


def test_a_message_id_domain_is_linear_on_its_worst_cases():
    """``tokenizer.message_id_domain`` (a Message-ID's domain, without re): runs the
    domain can end anywhere in, and "@" after "@" each followed by an end."""
    for text in (_fill("@"), "@" + _fill("a"), _fill("@>"), _fill("@ "), _fill("a@")):
        assert _cpu_seconds(lambda: tokenizer.message_id_domain(text)) < BOUND, text[:20]


def test_html_to_text_worst_cases_are_linear():
    for text in WORST["_LINK"] + WORST["_WHITE_COLOR"] + WORST["_COMMENT"]:
        assert _cpu_seconds(lambda: mail.html_to_text(text)) < BOUND


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_random_charset_names_do_not_accumulate():
    """Before: each unseen name went to codecs.lookup, whose search function
    caches misses forever (RSS 24 -> 362 MiB over 20,000 messages, ~9 ms each)."""
    import encodings

    rng = random.Random(7)
    spellings = ["utf--8", "UTF__8", "utf-8", "iso.8859.1", "koi8_r", "x-" + "a" * 60]
    for name in spellings:          # the known names and their spellings: cached once
        mail.parse(f"Subject: =?{name}?q?a?=\n\nbody".encode())
    cache_before, rss_before = len(encodings._cache), _rss_bytes()
    start = time.process_time()
    n = 20000
    for i in range(n):
        name = rng.choice(["x", "utf-", "iso-", "windows-", ""]) + "%x" % rng.getrandbits(48)
        if i % 10 == 0:
            name = rng.choice(spellings).replace("-", "-" * rng.randint(1, 5))
        mail.parse(f"Subject: =?{name}?q?a?= hi\nContent-Type: text/plain; charset={name}\n\nbody".encode())
    per_message = (time.process_time() - start) / n
    assert len(encodings._cache) - cache_before <= 2
    assert len(charsets.codec_cache) <= charsets.MAX_CACHE
    assert _rss_bytes() - rss_before < 8 * 1024 * 1024
    assert per_message < 0.001


def test_charset_names_still_resolve():
    assert charsets.codec("utf-8") == "utf-8"
    assert charsets.codec("koi8-r") == "koi8-r"
    assert charsets.codec("iso-8859-1") == "cp1252"
    assert charsets.codec("windows-1251") == "cp1251"
    assert charsets.codec("shift_jis") == "shift_jis"
    assert charsets.codec("utf--8") == "utf-8"
    for refused in ("punycode", "idna", "unicode_escape", "base64", "rot13", "zzz", "x" * 100, "é"):
        assert charsets.codec(refused) is None
    assert mail.decode_text("\u0416".encode("koi8-r"), "koi8-r") == "\u0416"
