"""spamnb.mail._tokenize.pxi (in spamnb.mail._mail) and spamnb.mail.tokenizer: the hash, the stream, token families, hostile input."""

import base64
import json
import re
import subprocess
import sys
import time
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spamnb.mail._mail import Scanner, TokenStream, hash_token
from spamnb.mail.tokenizer import DEFAULTS, Tokenizer

from conftest import REPO, corpus_root

MASK = (1 << 64) - 1


def fnv1a_codepoints(s):
    """Reference FNV-1a 64 over code points, written independently of the extension."""
    h = 0xCBF29CE484222325
    for ch in s:
        h = ((h ^ ord(ch)) * 0x100000001B3) & MASK
    return h


def splitmix64_finaliser(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def reference_hash(s):
    return splitmix64_finaliser(fnv1a_codepoints(s)) or 1


def message(headers, body, eol=b"\n"):
    return eol.join(h.encode() if isinstance(h, str) else h for h in headers) + eol + eol + body


# -- hash -----------------------------------------------------------------------
def test_fnv_reference_matches_published_vector():
    # FNV-1a 64 of the single byte "a" (code point 0x61) is a published test vector.
    assert fnv1a_codepoints("a") == 0xAF63DC4C8601EC8C
    assert fnv1a_codepoints("") == 0xCBF29CE484222325


@pytest.mark.parametrize("s", ["", "a", "free", "subject:Free!!", "skip:x 30", "日本語", "emoji \U0001F600", "\udc80"])
def test_hash_token_matches_reference(s):
    assert hash_token(s) == reference_hash(s)


def test_hash_token_fixed_values_are_stable():
    # fixed values, computed once with the pure-Python reference above
    assert hash_token("a") == splitmix64_finaliser(0xAF63DC4C8601EC8C)
    assert hash_token("viagra") == reference_hash("viagra")
    assert hash_token("viagra") != hash_token("Viagra")
    assert 0 < hash_token("") < 2 ** 64


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_hash_token_property(s):
    assert hash_token(s) == reference_hash(s)


# -- scanner and stream ---------------------------------------------------------------
def test_scanner_words_joiners_skip_and_cjk():
    scanner = Scanner(min_len=1, max_len=12, word_chars="$", joiners="'.-@", max_len_joined=12)
    subject = scanner.prefix("subject:")
    assert scanner.prefix("subject:") == subject          # idempotent
    stream = scanner.stream()
    stream.add_words("Don't e-mail x@y.example. $19.99 -- end. supercalifragilistic 日本語です", 0)
    stream.add_words("Free  money", subject)
    stream.add_token("url:example.com")
    stream.add_tokens(["a", ("b", "", "c")], subject)
    assert stream.tokens() == [
        "Don't", "e-mail", "x@y.example", "$19.99", "end", "skip:s 20",
        "日本", "本語", "語で", "です", "subject:Free", "subject:money", "url:example.com",
        "subject:a", "subject:b", "subject:c"]
    assert len(stream) == 16


def test_scanner_longer_limit_for_joined_words():
    stream = Scanner(max_len=10, joiners=".@", max_len_joined=30).stream()
    stream.add_words("someone@mail.example.com abcdefghijklmnop. abcdefghijk.lmnopqrstuvwxyz0123456789")
    assert stream.tokens() == ["someone@mail.example.com", "skip:a 10", "skip:a 30"]


def test_scanner_min_len_and_cjk_runs():
    stream = Scanner(min_len=3, max_len=20, cjk_bigrams=False).stream()
    stream.add_words("a an the 中文 x 字")
    assert stream.tokens() == ["the", "中文", "字"]


def test_stream_token_hashes_to_stream_hash():
    tokenizer = Tokenizer()
    raw = message(["Subject: Cheap =?utf-8?B?" + base64.b64encode("Grüße".encode()).decode() + "?=",
                   "From: Spammer <s@spam.example>", "Received: from mx.spam.example ([10.1.2.3]) by mx.example.org"],
                  ("visit http://www.spam.example/buy-now?id=7 " + "x" * 45 + " 中文字 ").encode())
    stream = tokenizer.stream(raw)
    hashes = stream.hashes
    assert hashes.typecode == "Q" and len(hashes) == len(stream) > 10
    for j in range(len(stream)):
        assert hash_token(stream.token(j)) == hashes[j], stream.token(j)
    with pytest.raises(IndexError):
        stream.token(len(stream))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=8))
def test_write_tokens_appends_each_token_utf8(text, header):
    stream = Scanner(max_len=5, joiners="'.-@").stream()
    stream.add_words(text)
    stream.add_words(text, stream.local_prefix(header + ":"))     # prefixes that are not ASCII too
    stream.add_token("\udfff")                                    # a lone surrogate, as "surrogatepass" writes it
    blob, offsets = bytearray(b"old"), array("Q", [0, 3])
    positions = array("i", list(range(len(stream)))[::-1])
    stream.write_tokens(positions, len(stream), blob, offsets)
    expected = [stream.token(j).encode("utf-8", "surrogatepass") for j in positions]
    assert [bytes(blob[offsets[k + 1]:offsets[k + 2]]) for k in range(len(stream))] == expected
    assert bytes(blob[:3]) == b"old" and len(offsets) == len(stream) + 2


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.integers(min_value=1, max_value=16))
def test_add_pairs_strings_and_hashes_of_any_text(text, window):
    stream = Scanner(max_len=5, joiners="'.-@").stream()
    stream.add_words(text)
    stream.add_words(text, stream.local_prefix("x:"))      # tagged: no pairs of these
    stream.add_token("a:b")                                   # untagged but with ':' : none either
    stream.add_words(text[::-1] + "\u0100 \U00010400")        # another text (of another kind, often): words of both
    stream.add_token("whole")                                 # a token of its own text, untagged: a word
    start = len(stream)
    n = stream.add_pairs(window, stream.local_prefix("pair:"))
    assert stream.pairs_start == start and len(stream) == start + n
    words = [t for t in stream.tokens()[:start] if ":" not in t]
    assert stream.tokens()[start:] == [f"pair:{w} {d} {words[i + d]}" for i, w in enumerate(words)
                                       for d in range(1, window) if i + d < len(words)]
    assert list(stream.hashes) == [hash_token(t) for t in stream.tokens()]
    blob, offsets = bytearray(), array("Q", [0])
    positions = array("i", range(len(stream)))
    stream.write_tokens(positions, len(stream), blob, offsets)
    assert [bytes(blob[offsets[k]:offsets[k + 1]]) for k in range(len(stream))] == \
        [t.encode("utf-8", "surrogatepass") for t in stream.tokens()]


def test_add_names_adds_each_name_of_the_pairs():
    scanner = Scanner()
    stream = scanner.stream()
    stream.add_names([("subject", "x"), ("received", "a"), ("received", "b"), ("", "empty"), ("x-é", "y")],
                     scanner.prefix("hdr:"))
    assert stream.tokens() == ["hdr:subject", "hdr:received", "hdr:received", "hdr:x-é"]
    assert list(stream.hashes) == [hash_token(t) for t in stream.tokens()]
    with pytest.raises(TypeError):
        stream.add_names([(b"bytes", "x")])


def test_add_field_words_equals_add_words_per_value():
    scanner = Scanner()
    fields = (("subject", scanner.prefix("subject:")), ("to", scanner.prefix("to:")), ("cc", scanner.prefix("cc:")))
    by_name = {"to": ["Ann <A@X.org>", "bob@y.org"], "subject": ["Free MONEY now"], "received": ["from x"]}
    for lower in (True, False):
        compiled, reference = scanner.stream(), scanner.stream()
        compiled.add_field_words(by_name, fields, lower)
        for name, prefix in fields:
            for value in by_name.get(name, ()):
                reference.add_words(value.lower() if lower else value, prefix)
        assert compiled.tokens() == reference.tokens()
        assert "subject:free" in compiled.tokens() or not lower
    with pytest.raises(TypeError):
        scanner.stream().add_field_words({"to": [b"bytes"]}, fields)


def test_write_tokens_checks_positions_before_writing():
    stream = Scanner().stream()
    stream.add_words("two words")
    blob, offsets = bytearray(), array("Q", [0])
    for positions, count in [(array("i", [0, 2]), 2), (array("i", [-1]), 1), (array("i", [0]), 2)]:
        with pytest.raises((IndexError, ValueError)):
            stream.write_tokens(positions, count, blob, offsets)
        assert blob == bytearray() and list(offsets) == [0]
    with pytest.raises(TypeError):
        stream.write_tokens(array("i", [0]), 1, blob, array("d", [0.0]))


def test_stream_cannot_be_constructed_directly():
    with pytest.raises(TypeError):
        TokenStream()


# -- token families ---------------------------------------------------------------
SAMPLE = message(
    ["From: \"Bob Seller\" <bob@deals.example.com>",
     "To: alice@example.org, carol@example.org",
     "Subject: FREE Offer inside",
     "Message-ID: <123.456@mailer.deals.example.com>",
     "X-Mailer: Bulk  Mailer 5.0",
     "Received: from relay.deals.example.com (relay.deals.example.com [192.0.2.17]) by mx.example.org",
     "Content-Type: multipart/alternative; boundary=\"----=_NextPart_000_0012\""],
    b"------=_NextPart_000_0012\nContent-Type: text/plain; charset=us-ascii\n\nGreat offer, see www.deals.example.com now\n"
    b"------=_NextPart_000_0012\nContent-Type: text/html\nContent-Transfer-Encoding: quoted-printable\n\n"
    b"<html><body><p>Cl<!-- -->ick <a href=3D\"http://192.0.2.99/cgi/buy.cgi?x=3D1\">HERE</a>"
    b"<img src=3Dx.gif><font color=3D#ffffff>invisible words</font></body></html>\n"
    b"------=_NextPart_000_0012--\n")


def test_header_tokens_tagged_by_field():
    tokens = Tokenizer(headers="selected").tokens(SAMPLE)
    for expected in ["subject:free", "subject:offer", "from:bob", "from:bob@deals.example.com",
                     "to:alice@example.org", "message-id:@mailer.deals.example.com",
                     "x-mailer:bulk mailer 5.0", "received:relay.deals.example.com",
                     "received:example.com", "received:ip:192.0.2.17", "received:ip:192.0.2",
                     "received:ip:192.0", "hdr:subject", "hdr:received", "boundary:----=_AaAa_9_9"]:
        assert expected in tokens, expected
    assert "free" not in Tokenizer(headers="selected", subject_words=False).tokens(SAMPLE)  # tagged only


def test_subject_words_are_body_words_too():
    tagged = Tokenizer(subject_words=False).tokens(SAMPLE)
    both = Tokenizer().tokens(SAMPLE)
    assert Tokenizer().subject_words is True
    assert sorted(both) == sorted(tagged + ["free", "offer", "inside"])   # the tagged ones stay
    assert "free" not in Tokenizer(headers=["from", "to"]).tokens(SAMPLE)  # no Subject: words at all
    assert Tokenizer(headers="none").tokens(SAMPLE).count("free") == 0
    assert Tokenizer(version=2).tokens(SAMPLE) == Tokenizer(version=2, headers="selected").tokens(SAMPLE)
    assert "subject_words" not in Tokenizer(version=2).settings


def test_a_version_3_model_without_subject_words_keeps_its_tokens():
    """Models written before the setting existed store version 3 settings without it:
    they load with it off, and tokenize as they did."""
    settings = Tokenizer().settings
    del settings["subject_words"]
    old = Tokenizer.from_settings(settings)
    assert old.subject_words is False and old.tokens(SAMPLE) == Tokenizer(subject_words=False).tokens(SAMPLE)
    assert Tokenizer.from_settings(Tokenizer().settings).subject_words is True
    with pytest.raises(ValueError, match="subject_words"):
        Tokenizer(subject_words=1)


def _pairs_reference(tokens, window):
    """Word pairs as the tuning experiment built them, in Python: the untagged
    words (no ':' in the token) and each of the next window - 1."""
    words = [t for t in tokens if ":" not in t]
    return [f"pair:{w} {d} {words[i + d]}" for i, w in enumerate(words) for d in range(1, window)
            if i + d < len(words)]


@pytest.mark.parametrize("window", [2, 3, 5])
def test_word_pairs_follow_the_other_tokens(window):
    raw = message(["Subject: Cheap meds now", "From: Spammer <s@spam.example>"],
                  ("Buy now: http://www.spam.example/x " + "y" * 45 + " Grüße 中文字 don't stop\n"
                   "html:only is a word pair? no").encode())
    plain = Tokenizer().stream(raw)
    stream = Tokenizer(word_pairs=window).stream(raw)
    tokens = stream.tokens()
    assert plain.pairs_start == -1 and stream.pairs_start == len(plain)
    assert tokens[:stream.pairs_start] == plain.tokens()
    assert tokens[stream.pairs_start:] == _pairs_reference(plain.tokens(), window)
    assert "pair:cheap 1 meds" in tokens and "pair:grüße 1 中文" in tokens
    assert not any(t.startswith("pair:") and ("skip:" in t or "url:" in t) for t in tokens)
    assert list(stream.hashes) == [hash_token(t) for t in tokens]
    # the vocabulary's string table (written in C) holds the same strings
    blob, offsets = bytearray(), array("Q", [0])
    positions = array("i", range(len(stream)))
    stream.write_tokens(positions, len(stream), blob, offsets)
    assert [bytes(blob[offsets[k]:offsets[k + 1]]).decode() for k in range(len(stream))] == tokens
    with pytest.raises(ValueError, match="already"):
        stream.add_pairs(2, 0)


def test_word_pairs_setting_is_checked_and_old_models_have_none():
    settings = Tokenizer().settings
    assert settings["word_pairs"] == 0 and Tokenizer().tokens(SAMPLE) == Tokenizer(word_pairs=1).tokens(SAMPLE)
    del settings["word_pairs"]
    assert Tokenizer.from_settings(settings).word_pairs == 0
    assert Tokenizer.from_settings(Tokenizer(word_pairs=2).settings).word_pairs == 2
    assert "word_pairs" not in Tokenizer(version=2).settings
    for bad in (9, -1, "2", 2.0, True):
        with pytest.raises(ValueError, match="word_pairs"):
            Tokenizer(word_pairs=bad)


def test_header_modes():
    none = Tokenizer(headers="none", header_names=False).tokens(SAMPLE)
    assert not any(t.startswith(("subject:", "from:", "hdr:", "received:")) for t in none)
    all_ = Tokenizer(headers="all").tokens(SAMPLE)
    assert "subject:free" in all_


def test_url_pieces_and_body_and_html_tells():
    assert not any(t.startswith("html:") for t in Tokenizer(html_tells=False).tokens(SAMPLE))
    tokens = Tokenizer(html_tells=True).tokens(SAMPLE)
    for expected in ["great", "offer", "click", "here", "invisible",
                     "url:www.deals.example.com", "url:example.com", "url:192.0.2.99", "url:cgi",
                     "url:buy.cgi", "url:ip", "url:http",
                     "part:text/plain", "part:text/html", "part:charset:us-ascii", "part:cte:quoted-printable",
                     "html:img:1", "html:comment", "html:split-word", "html:invisible", "html:tag:font"]:
        assert expected in tokens, expected
    assert "html:only" not in tokens


def test_long_word_policy():
    tokens = Tokenizer(max_len=20).tokens(message(["Subject: s"], b"short " + b"z" * 37 + b" end"))
    assert "skip:z 30" in tokens and "short" in tokens and "end" in tokens
    assert not any(len(t) > 20 for t in tokens if not t.startswith(("skip:", "hdr:", "part:", "html:")))


def test_lowercase_setting():
    raw = message(["Subject: Hello"], b"MiXeD Case")
    assert "mixed" in Tokenizer().tokens(raw)
    assert "MiXeD" in Tokenizer(lowercase=False).tokens(raw)


def test_crlf_and_lf_give_identical_tokens():
    lf = SAMPLE
    crlf = SAMPLE.replace(b"\n", b"\r\n")
    tokenizer = Tokenizer()
    assert tokenizer.tokens(lf) == tokenizer.tokens(crlf)
    assert list(tokenizer.stream(lf).hashes) == list(tokenizer.stream(crlf).hashes)


def test_str_input_is_accepted():
    tokenizer = Tokenizer()
    assert tokenizer.tokens(SAMPLE.decode("ascii")) == tokenizer.tokens(SAMPLE)


def test_byte_limit_is_honoured():
    body = b"early " * 100 + b"late " * 100_000
    raw = message(["Subject: s"], body)
    stream = Tokenizer(max_bytes=2000).stream(raw)
    tokens = stream.tokens()
    assert stream.truncated and "mail:truncated" in tokens
    assert "early" in tokens and "late" in tokens
    assert tokens.count("late") < 400
    assert not Tokenizer().stream(message(["Subject: s"], b"small")).truncated


def test_attachment_summarised_not_tokenised():
    payload = base64.encodebytes(b"MZ" + bytes(range(256)) * 200)
    raw = message(["Content-Type: multipart/mixed; boundary=b"],
                  b"--b\nContent-Type: text/plain\n\nsee attached\n--b\nContent-Type: application/octet-stream; "
                  b"name=\"setup.exe\"\nContent-Transfer-Encoding: base64\n\n" + payload + b"--b--\n")
    tokens = Tokenizer().tokens(raw)
    assert "part:application/octet-stream" in tokens and "part:ext:exe" in tokens
    assert any(t.startswith("part:size:") for t in tokens)
    assert len(tokens) < 40


# -- settings -------------------------------------------------------------------------
def test_settings_round_trip_through_json():
    tokenizer = Tokenizer(min_len=2, headers="all")
    settings_ = json.loads(json.dumps(tokenizer.settings))
    assert settings_["version"] == Tokenizer.VERSION
    again = Tokenizer.from_settings(settings_)
    assert again.settings == tokenizer.settings
    assert again.tokens(SAMPLE) == tokenizer.tokens(SAMPLE)
    assert set(Tokenizer().settings) == set(DEFAULTS) | {"version"}


def test_from_settings_rejects_other_versions_and_keys():
    good = Tokenizer().settings
    with pytest.raises(ValueError):
        Tokenizer.from_settings({**good, "version": Tokenizer.VERSION + 1})
    with pytest.raises(ValueError):
        Tokenizer.from_settings({k: v for k, v in good.items() if k != "version"})
    with pytest.raises(ValueError):
        Tokenizer.from_settings({**good, "bogus": 1})
    with pytest.raises(TypeError):
        Tokenizer(bogus=1)
    with pytest.raises(ValueError):
        Tokenizer(headers="some")


# -- hostile input: tokens, no exception, bounded time --------------------------------------
def deep_mime(depth):
    body = b"innermost words"
    for d in range(depth):
        inner = b"multipart/mixed; boundary=b%d" % (d - 1) if d else b"text/plain"
        body = b"--b%d\nContent-Type: %s\n\n%s\n--b%d--\n" % (d, inner, body, d)
    return message([b"Content-Type: multipart/mixed; boundary=b%d" % (depth - 1)], body)


HOSTILE = {
    "nul bytes": message(["Subject: a\0b"], b"nul\0in\0body words"),
    "1 MB header line": message(["Subject: " + "word " * 200_000], b"body words"),
    "mime 1000 deep": deep_mime(1000),
    "10000 parts": message(["Content-Type: multipart/mixed; boundary=b"],
                           b"".join(b"--b\nContent-Type: text/plain\n\npart %d words\n" % i for i in range(10_000))),
    "boundary never closes": message(["Content-Type: multipart/mixed; boundary=b"], b"--b\n\nopen words " * 50),
    "unclosed html": message(["Content-Type: text/html"], b"<html><body>words <a href='http://x.example" + b"<b" * 20000),
    "utf-16 body": message(["Content-Type: text/plain; charset=utf-16"], "wide words".encode("utf-16")),
    "utf-7 body": message(["Content-Type: text/plain; charset=utf-7"], "seven words €".encode("utf-7")),
    "no separator": b"Subject: x\nFrom: y\nbody words right after the headers\n",
    "50 MB": message(["Subject: big"], b"huge words " * 5_000_000),
    "binary junk": bytes(range(256)) * 100,
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_messages_give_tokens_fast(name):
    tokenizer = Tokenizer()
    start = time.perf_counter()
    stream = tokenizer.stream(HOSTILE[name])
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5, f"{name}: {elapsed:.3f} s"
    if name != "empty":
        assert len(stream) > 0
        tokens = stream.tokens()
        if name == "mime 1000 deep":
            assert "mail:depth-limit" in tokens
        elif name != "binary junk":
            assert any("word" in t for t in tokens), name


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000))
def test_random_bytes_tokenize(raw):
    stream = Tokenizer().stream(raw)
    assert len(stream.hashes) == len(stream)


def test_import_cost_stays_low():
    code = ("import sys, spamnb.mail.tokenizer; "
            "bad = {'numpy', 'scipy', 'email', 'email.parser', 'dataclasses'} & set(sys.modules); assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_corpus_streams_are_consistent():
    tokenizer = Tokenizer()
    root, is_full = corpus_root("spamassassin")
    paths = sorted(p for p in root.glob("*/*") if p.is_file())[::50 if is_full else 5]
    assert len(paths) > (100 if is_full else 50)
    for path in paths:
        stream = tokenizer.stream(path.read_bytes())
        assert len(stream) > 0, path
        hashes = stream.hashes
        for j in range(0, len(stream), 17):
            assert hash_token(stream.token(j)) == hashes[j]


@pytest.mark.parametrize("bad", [{"max_bytes": "6144"}, {"max_bytes": 0}, {"fallback_charset": "no-such-codec"},
                                 {"fallback_charset": "base64"}, {"lowercase": 1}, {"min_len": 5, "max_len": 4},
                                 {"max_depth": 10 ** 9}, {"joiners": "\u00e9"}, {"word_chars": 7},
                                 {"max_text_chars": -1}, {"max_len_joined": 2.5}])
def test_invalid_setting_values_are_refused(bad):
    with pytest.raises(ValueError):
        Tokenizer(**bad)
    with pytest.raises(ValueError):
        Tokenizer.from_settings({**Tokenizer().settings, **bad})


def test_tokens_are_printable_utf8():
    raw = message(["X-Mailer: evil+2D0-mailer", "Subject: =?utf-7?Q?+2D0-?=", "Content-Type: text/plain; charset=utf-7"],
                  b"body +2D0- words")
    for token in Tokenizer().tokens(raw):
        token.encode("utf-8")


def test_stream_local_prefixes():
    stream = Scanner().stream()
    local = stream.local_prefix("x-odd:")
    assert stream.local_prefix("x-odd:") == local
    stream.add_words("one two", local)
    stream.add_token("three", local)
    assert stream.tokens() == ["x-odd:one", "x-odd:two", "x-odd:three"]
    assert list(stream.hashes) == [hash_token(t) for t in stream.tokens()]
    with pytest.raises(IndexError):
        stream.add_words("x", 12345)


def test_many_distinct_header_names_do_not_grow_the_shared_prefix_table():
    tokenizer = Tokenizer(headers="all")
    for i in range(400):
        raw = message([f"X-Random-{i}: value{i}", "Subject: s"], b"body")
        stream = tokenizer.stream(raw)
        assert f"x-random-{i}:value{i}" in stream.tokens()
        assert list(stream.hashes) == [hash_token(t) for t in stream.tokens()]
    assert len(tokenizer._scanner.prefixes) < 300


def test_text_budget_is_per_part_and_keeps_headers():
    # each text part has its own budget (version 3): a first part cannot use up
    # the second's (before, one budget of 100 characters spanned both parts)
    raw = message(["Subject: budget test", "Content-Type: multipart/mixed; boundary=b"],
                  b"--b\nContent-Type: text/plain\n\n" + b"alpha " * 100 + b"\n--b\nContent-Type: text/plain\n\n"
                  + b"beta " * 10 + b"gamma " * 100 + b"\n--b--\n")
    tokens = Tokenizer(max_text_chars=100).tokens(raw)
    assert tokens.count("alpha") == 16 and tokens.count("beta") == 10 and tokens.count("gamma") == 8
    assert "subject:budget" in tokens and "part:text/plain" in tokens
    unlimited = Tokenizer(max_text_chars=0).tokens(raw)
    assert unlimited.count("gamma") == 100


def test_thousands_of_distinct_header_names_are_linear():
    raw = b"".join(b"X-H%d: v%d\n" % (i, i) for i in range(20000)) + b"\nbody\n"
    tokenizer = Tokenizer(headers="all", max_bytes=len(raw))
    start = time.process_time()
    stream = tokenizer.stream(raw)
    assert time.process_time() - start < 0.5
    assert "x-h19999:v19999" in stream.tokens()


# ---------------------------------------------------------------------------- Received: relays
# The regular expressions TokenStream.add_received replaces: the reference.
_REF_RECEIVED_FROM = re.compile(r"from\s+((?:[\w-]+\.)*([\w-]+\.[a-z]{2,}))\b", re.A)
_REF_RECEIVED_BY = re.compile(r"by\s+((?:[\w-]+\.)*([\w-]+\.[a-z]{2,}))\b", re.A)
_REF_RECEIVED_IP = re.compile(r"\[((([0-9]{1,3}\.[0-9]{1,3})\.[0-9]{1,3})\.[0-9]{1,3})\]", re.A)


def _received_tokens(text):
    scanner = Scanner()
    host, ip = scanner.prefix("received:"), scanner.prefix("received:ip:")
    compiled = scanner.stream()
    compiled.add_received(text, host, ip)
    reference = scanner.stream()
    reference.add_tokens(_REF_RECEIVED_FROM.findall(text), host)
    reference.add_tokens(_REF_RECEIVED_BY.findall(text), host)
    reference.add_tokens(_REF_RECEIVED_IP.findall(text), ip)
    return compiled, reference


_RECEIVED_PIECES = ["from", "by", "fromby", " ", "  ", "\t", "\n", "\x0b", ".", "..", "-", "_", "[", "]", "a", "bc",
                    "com", "org", "x1", "co1", "Com", "9", "12", "123", "1234", "é", "ı", "\U0001f600", "mail",
                    "ex-ample", "com-x", "by.", "from.", "(", ";"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_RECEIVED_PIECES), max_size=40))
def test_add_received_finds_what_the_regular_expressions_find(pieces):
    compiled, reference = _received_tokens("".join(pieces))
    assert compiled.tokens() == reference.tokens()
    assert list(compiled.hashes) == list(reference.hashes)


@pytest.mark.parametrize("text", [
    "", "from", "from ", "from a.com", "from  a.b.c.example.org (x [10.0.0.1]) by mx.example.net",
    "from a.co1 b.com", "from a.b.c1.de", "from mail.example.com1.org", "from x.com-y.z", "xfrom a.bc",
    "from a..bc", "from a.b.", "by\ta.example.com", "[1.2.3.4] [1234.1.1.1] [1.2.3] [1.2.3.4.5] [001.002.003.004]",
    "[[1.2.3.4]]", "from a.b.c.dE", "from é.com a.com", "from a.b" + ".c" * 5000])
def test_add_received_edge_cases(text):
    compiled, reference = _received_tokens(text)
    assert compiled.tokens() == reference.tokens()


def test_add_received_on_the_corpus():
    from spamnb.mail import parser as mail

    root, is_full = corpus_root("spamassassin")
    n = 0
    for path in sorted(p for p in root.glob("*/*") if p.is_file()):
        received = mail.parse(path.read_bytes()).header_values("received")
        if received:
            compiled, reference = _received_tokens("\n".join(received[:16]).lower())
            assert compiled.tokens() == reference.tokens(), path.name
            n += 1
    assert n > (5000 if is_full else 250)


def test_with_pairs_raises_only_the_default_text_budget():
    """The tokenizer `spamnb train` uses with word pairs: the given tokenizer's
    settings, the window set, the text budget raised only when it is the default."""
    from spamnb.mail.tokenizer import DEFAULTS, PAIRS_TEXT_CHARS, with_pairs

    paired = with_pairs(2)
    assert paired.word_pairs == 2 and paired.max_text_chars == PAIRS_TEXT_CHARS != DEFAULTS["max_text_chars"]
    assert {k: v for k, v in paired.settings.items() if k not in ("word_pairs", "max_text_chars")} == \
        {k: v for k, v in Tokenizer().settings.items() if k not in ("word_pairs", "max_text_chars")}
    own = Tokenizer(max_text_chars=300, min_len=2)
    assert (with_pairs(3, own).max_text_chars, with_pairs(3, own).min_len, with_pairs(3, own).word_pairs) == (300, 2, 3)
    assert with_pairs(0, own) is own and with_pairs(0).settings == Tokenizer().settings
    # the budget is the budget: a long text gives pairs beyond 750 characters, not beyond 2,000
    words = " ".join(f"w{i:04d}" for i in range(1000))
    raw = f"Subject: x\n\n{words}\n".encode()
    assert "w0200" in " ".join(with_pairs(2).tokens(raw)) and "w0200" not in " ".join(Tokenizer().tokens(raw))
    assert "w0400" not in " ".join(with_pairs(2).tokens(raw))


def test_a_stream_takes_its_head_from_the_default_stream():
    """Tokenizer.stream(message, parsed, like): the paired tokenizer's stream
    takes the default one's header tokens, HTML converted and text
    lower-cased from that stream (count_variants' two variants) and is
    the stream it makes alone: every token, hash, region and the pairs'
    start; a like of another parse or of a tokenizer with other header
    settings is not used."""
    from spamnb.mail.tokenizer import Tokenizer, with_pairs
    from spamnb.training.corpus import labelled_messages

    plain = Tokenizer()
    paired = with_pairs(2, plain)
    messages = [m.data for m in labelled_messages([REPO / "corpora"])]
    html = (b"Subject: Cheap HTML\nFrom: a@b.example\nContent-Type: text/html\n\n<html><body>"
            + b"<style>" + b"x" * 8160 + b"</style><p>Buy cheap pills <a href='http://pills.example/x'>now</a>"
            + b" word" * 600 + b"</p></body></html>\n")
    multi = (b"Subject: two parts\nFrom: c@d.example\nMIME-Version: 1.0\n"
             b"Content-Type: multipart/alternative; boundary=XYZ\n\n--XYZ\nContent-Type: text/plain\n\n"
             + b"Plain WORDS Here " * 300 + b"\n--XYZ\nContent-Type: text/html\n\n<b>Bold</b> "
             + b"html words " * 400 + b"\n--XYZ--\n")
    assert len(messages) > 100
    for data in messages + [html, multi]:
        parsed = plain.parse(data)
        first = plain.stream(data, parsed, None, True)
        taken = paired.stream(data, parsed, first)
        alone = paired.stream(data)
        assert first.tokens() == plain.stream(data).tokens()
        assert taken.tokens() == alone.tokens() and taken.hashes == alone.hashes
        assert (taken.regions, taken.pairs_start, taken.truncated) == (alone.regions, alone.pairs_start,
                                                                       alone.truncated)
    # the HTML past its first 8 KiB (a style block filled them) converted in both, each its own way
    parsed = plain.parse(html)
    first = plain.stream(html, parsed, None, True)
    assert "pills" in first.tokens() and "pills" in paired.stream(html, parsed, first).tokens()
    # a like of another message, or of a tokenizer whose header tokens differ, is not taken from
    other = plain.stream(html, plain.parse(html), None, True)
    assert paired.stream(multi, plain.parse(multi), other).tokens() == paired.stream(multi).tokens()
    no_names = Tokenizer(header_names=False)
    unnamed = no_names.stream(multi, no_names.parse(multi), None, True)
    parsed = plain.parse(multi)
    assert plain.stream(multi, parsed, unnamed).tokens() == plain.stream(multi).tokens()
    # a stream made without share keeps nothing
    assert plain.stream(multi).reuse is None


def test_extend_copies_a_streams_head_and_checks_its_prefixes():
    """TokenStream.extend: the first count occurrences of another stream, the
    same hashes and strings; refused into a stream not empty, past the
    pairs, or when the prefix ids mean other prefixes in the other scanner."""
    one, two, odd = Scanner(), Scanner(), Scanner()
    for scanner in (one, two):
        scanner.prefix("subject:")
    odd.prefix("from:")
    source = one.stream()
    source.add_words("Hello world", one.prefix("subject:"))
    source.add_words("body text here")
    copy = two.stream()
    copy.extend(source, 2)
    assert copy.tokens() == ["subject:Hello", "subject:world"] and list(copy.hashes) == list(source.hashes)[:2]
    copy.add_words("more")
    assert copy.tokens()[-1] == "more" and len(copy) == 3
    with pytest.raises(ValueError):
        copy.extend(source, 1)   # not empty
    with pytest.raises(ValueError):
        odd.stream().extend(source, 2)   # "subject:" is another prefix there
    with pytest.raises(ValueError):
        two.stream().extend(source, len(source) + 1)
    source.add_pairs(2, one.prefix("pair:"))
    with pytest.raises(ValueError):
        two.stream().extend(source, len(source))


def test_one_parse_serves_a_tokenizer_and_its_pairs():
    """Tokenizer.stream(message, parsed): a parse by a tokenizer that
    parses_as this one gives the stream of the message alone, for the
    plain tokenizer and its with_pairs (a larger text budget, pairs)."""
    from spamnb.mail.tokenizer import Tokenizer, with_pairs
    from spamnb.training.corpus import labelled_messages

    plain = Tokenizer()
    paired = with_pairs(3, plain)
    assert paired.parses_as(plain) and plain.parses_as(paired)
    assert not Tokenizer(max_bytes=1000).parses_as(plain)
    messages = [m.data for m in labelled_messages([REPO / "corpora"])]
    assert len(messages) > 100
    for data in messages:
        parsed = plain.parse(data)
        for tokenizer in (plain, paired, plain):   # the parse is not changed by use
            shared, alone = tokenizer.stream(data, parsed), tokenizer.stream(data)
            assert shared.tokens() == alone.tokens() and shared.hashes == alone.hashes


def _same_streams(made, alone):
    return (made.tokens() == alone.tokens() and made.hashes == alone.hashes and made.regions == alone.regions
            and (made.pairs_start, made.truncated) == (alone.pairs_start, alone.truncated))


def test_both_streams_in_one_pass_are_each_tokenizers_own():
    """Tokenizer.streams: the default stream made in its word pairs' pass
    (the text scanned once to the larger budget, the words up to the
    smaller one's given to the default stream too) is the stream each
    tokenizer makes alone, on the sample corpus and on parts made to cut a
    word, a joined word, a long word, a Han run and a URL at the smaller
    budget, and HTML whose first 8 KiB fill the smaller budget only."""
    from spamnb.mail.tokenizer import with_pairs
    from spamnb.training.corpus import labelled_messages

    plain = Tokenizer()
    paired = with_pairs(2, plain)
    assert paired.marks(plain) and not plain.marks(paired) and not paired.marks(Tokenizer(min_len=2))
    messages = [m.data for m in labelled_messages([REPO / "corpora"])]
    assert len(messages) > 100
    words = " ".join(f"w{i:04d}" for i in range(400))
    cut = "x" * 746
    crafted = [f"Subject: long\n\n{words}\n".encode(),
               f"Subject: cut\n\n{cut} internationally more words\n".encode(),
               f"Subject: joined\n\n{cut} ab.cd-ef@gh.example more\n".encode(),
               f"Subject: skip\n\n{cut} {'y' * 40} more\n".encode(),
               f"Subject: han\n\n{cut} 漢字かなカナ漢字 more\n".encode(),
               f"Subject: url\n\n{cut} http://a.example/path/x www.b.example/y more\n".encode(),
               f"Subject: zw\n\n{cut[:-3]}\u200b\u200b ab\u200bcd ef\n".encode(),
               (b"Subject: html\nContent-Type: text/html\n\n<html><body><p>" + b"word " * 300
                + b"<a href='http://first.example/'>x</a></p><style>" + b"s" * 5000 + b"</style>" + b"<br>" * 500
                + b"<p>" + b"late " * 300
                + b"<a href='http://late.example/'>y</a></p></body></html>\n")]
    for data in messages + crafted:
        parsed = plain.parse(data)
        first, second = paired.streams(data, parsed, plain)
        assert _same_streams(first, plain.stream(data)) and _same_streams(second, paired.stream(data))
    # the HTML: the default stream keeps its first 8 KiB's conversion, the paired one converts it all
    first, second = paired.streams(crafted[-1], plain.parse(crafted[-1]), plain)
    assert "late" not in first.tokens() and "late" in second.tokens()
    assert "url:late.example" not in first.tokens() and "url:late.example" in second.tokens()
    # a pair it cannot mark is made apart, the same streams
    other = Tokenizer(min_len=2)
    first, second = paired.streams(messages[0], plain.parse(messages[0]), other)
    assert _same_streams(first, other.stream(messages[0])) and _same_streams(second, paired.stream(messages[0]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["ab", "c", "x" * 25, ".", "-", "@", "'", " ", "  ", "\n", "漢字", "カ", "\u200b",
                                 "\u00ad", "а", "://", "www.", "http://h.example/p", "<", "é"]), max_size=60),
       st.integers(0, 40), st.integers(0, 40))
def test_both_streams_of_random_text_at_small_budgets(pieces, small, extra):
    """Tokenizer.streams on random text at small budgets (every cut of a
    word, joiner, Han run, invisible character and URL at the smaller
    budget): each stream is its tokenizer's own."""
    text = "".join(pieces)
    plain = Tokenizer(max_text_chars=small)
    paired = Tokenizer(max_text_chars=small + extra, word_pairs=2)
    data = f"Subject: s\nContent-Type: text/plain; charset=utf-8\n\n{text}\n".encode()
    first, second = paired.streams(data, plain.parse(data), plain)
    assert paired.marks(plain) == (small > 0 or extra == 0)    # 0: no budget, larger than any
    assert _same_streams(first, plain.stream(data)) and _same_streams(second, paired.stream(data))


@given(st.text(alphabet=st.sampled_from("ab \n\t\u200b\u00ad\u2060аé\uff41"), max_size=80), st.integers(-1, 30),
       st.integers(0, 30))
def test_text_prefix_marked_is_the_smaller_budgets_length(text, small, extra):
    """text_prefix_marked(text, budget, smaller): text_prefix(text, budget) and
    the length of text_prefix(text, smaller), its first characters."""
    from spamnb.mail.parser import text_prefix, text_prefix_marked

    budget = -1 if small < 0 else small + extra
    prefix, mark = text_prefix_marked(text, budget, small)
    assert prefix == text_prefix(text, budget) and mark == len(text_prefix(text, small))
    assert prefix[:mark] == text_prefix(text, small)
    if budget >= 0:
        with pytest.raises(ValueError):
            text_prefix_marked(text, budget, budget + 1)


def test_a_twin_gets_every_token_and_the_words_before_a_mark():
    """TokenStream.twin: every token added after it goes to the twin too;
    add_words' mark keeps the words past it from the twin (the word cut
    there given as cut); refused for a stream of another scanner or one
    not new."""
    scanner = Scanner()
    stream, twin = scanner.stream(), scanner.stream()
    stream.twin(twin)
    stream.add_token("head", scanner.prefix("x:"))
    stream.add_words("one internationally three", 0, 8)
    stream.twin(None)
    stream.add_words("alone")
    assert stream.tokens() == ["x:head", "one", "internationally", "three", "alone"]
    assert twin.tokens() == ["x:head", "one", "inte"] and list(twin.hashes) == [hash_token(t) for t in twin.tokens()]
    stream.twin(twin)   # the same twin again
    stream.add_token("tail")
    assert twin.tokens()[-1] == "tail"
    stream.twin(None)
    used = scanner.stream()
    used.add_token("x")
    with pytest.raises(ValueError):
        stream.twin(used)
    with pytest.raises(ValueError):
        stream.twin(Scanner().stream())
