"""Hostile mail and hostile corpora.

Every message here gets a verdict from the real ``spamnb classify`` command in
a subprocess (exit code 0, 1 or 2) within a bound of CPU time and peak memory.
The bounds follow from the tokenizer's limits: at most ``max_bytes`` of a
message is parsed (default 6 KiB), MIME nesting stops at ``max_depth`` (8) and
parts at ``max_parts`` (64), so the work beyond reading the input is bounded by
a constant whatever the message:

- CPU (user + sys of the ``spamnb classify`` process, start-up included):
  ``CPU_BOUND`` seconds;
- peak RSS: ``RSS_BASE`` MiB plus 1.1 times the input (the command holds the
  message it read; nothing may copy or decode all of it).

``max_bytes`` is a setting: the tokenizer must stay fast up to
``mail.MAX_BYTES`` (256 KiB) with no text budget, which
``test_parser_is_fast_at_its_largest_limit`` checks on every generated case.

Small hand-made messages live in tests/data/hostile/; large ones (a 1 MB
header line, 50 MB attachment, 10,000 parts, ...) are generated here at run
time.  The measured figures are in docs/reliability.md; set
``SPAMNB_HOSTILE_REPORT=FILE`` to append each case's measurement to FILE.

Then property tests (hypothesis) over parse -> tokenize -> score, and hostile
corpora for ``spamnb train``.
"""

import base64
import json
import os
import random
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spamnb
from spamnb.cli import main as cli
from spamnb.mail import parser as mail
from spamnb.mail.reader import looks_like_mail
from spamnb.model.spam_filter import SpamFilter
from spamnb.mail.tokenizer import Tokenizer

from conftest import REPO, run_spamnb, slow_beyond

DATA = Path(__file__).resolve().parent / "data" / "hostile"
PYTHONPATH = str(Path(spamnb.__file__).resolve().parents[1])
CPU_BOUND = 2.0          # seconds of CPU for one `spamnb classify`, start-up included
RSS_BASE = 48.0          # MiB on top of 1.1 x the input size
WALL_TIMEOUT = 20.0      # a hung command is killed (and the case fails) after this
MiB = 1024 * 1024

# Runs the command given on its argv with stdin from a file and reports the
# child's own exit code, wall time, CPU time and peak RSS (wait4).  A separate
# small launcher is needed because a forked child inherits its parent's peak
# RSS figure: measured straight from the test process, the pytest process's
# size would count.
_LAUNCHER = r"""
import json, os, subprocess, sys, time
stdin_path, out_path, err_path, timeout = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
with open(stdin_path, "rb") as fin, open(out_path, "wb") as fout, open(err_path, "wb") as ferr:
    started = time.perf_counter()
    child = subprocess.Popen(sys.argv[5:], stdin=fin, stdout=fout, stderr=ferr)
    timed_out = False
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - started > timeout:
            child.kill()
            timed_out = True
            pid, status, usage = os.wait4(child.pid, 0)
            break
        time.sleep(0.005)
    wall = time.perf_counter() - started
print(json.dumps({"code": os.waitstatus_to_exitcode(status), "wall": wall, "timed_out": timed_out,
                  "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024.0}))
"""


def _env(home):
    env = dict(os.environ, SPAMNB_HOME=str(home), PYTHONPATH=PYTHONPATH)
    env.pop("SPAMNB_DEBUG", None)
    return env


def measure(args, message_path, home, timeout=WALL_TIMEOUT):
    """Run ``spamnb ARGS < message_path``; returns (measurement dict, stdout bytes, stderr bytes)."""
    out, err = home / "out", home / "err"
    proc = subprocess.run([sys.executable, "-c", _LAUNCHER, str(message_path), str(out), str(err), str(timeout),
                           sys.executable, "-m", "spamnb", *map(str, args)],
                          capture_output=True, env=_env(home), cwd=home, timeout=timeout + 60)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout), out.read_bytes(), err.read_bytes()


@pytest.fixture(scope="module")
def home(tmp_path_factory, sample_model):
    """A folder with a model trained by `spamnb train` on the shipped sample corpus."""
    home = tmp_path_factory.mktemp("hostile")
    shutil.copyfile(sample_model, home / "model.spamnb")
    return home


@pytest.fixture(scope="module")
def spam_filter(home):
    return SpamFilter.load(home / "model.spamnb")


# ---------------------------------------------------------------------------- generated messages
def _head(subject, extra=""):
    return (f"From: sender@example.com\nTo: you@example.org\nSubject: {subject}\nMIME-Version: 1.0\n"
            f"Message-ID: <{abs(hash(subject))}@example.com>\n{extra}").encode()


def header_line_1mb():
    return _head("x") + b"X-Long: " + b"abcdefgh " * (MiB // 9) + b"\n\nshort body\n"


def subject_line_1mb():
    return b"From: a@example.com\nSubject: " + b"win " * (MiB // 4) + b"\n\nbody\n"


def mime_nested_1000():
    out = [_head("nested 1000")]
    for depth in range(1000):
        out.append(b'Content-Type: multipart/mixed; boundary="b%d"\n\n--b%d\n' % (depth, depth))
    out.append(b"Content-Type: text/plain\n\ninnermost words\n")
    out.extend(b"--b%d--\n" % depth for depth in reversed(range(1000)))
    return b"".join(out)


def rfc822_nested_1000():
    return _head("forwarded 1000 times") + b"Content-Type: message/rfc822\n\n" * 1000 + b"From: b\n\nhello\n"


def parts_10000():
    return (_head("10,000 parts", "Content-Type: multipart/mixed; boundary=zz\n\n")
            + b"".join(b"--zz\nContent-Type: text/plain\n\npart %d words\n" % i for i in range(10000)) + b"--zz--\n")


def attachment_50mb():
    payload = random.Random(50).randbytes(37 * MiB)  # base64 makes it ~50 MB
    return (_head("50 MB attachment", 'Content-Type: multipart/mixed; boundary="zz"\n\n')
            + b"--zz\nContent-Type: text/plain\n\nsee the attachment\n"
            + b'--zz\nContent-Type: application/octet-stream; name="big.bin"\nContent-Transfer-Encoding: base64\n\n'
            + base64.encodebytes(payload) + b"--zz--\n")


def text_part_50mb_base64():
    text = b"spam words and more words, all of them in one long text part\n" * (38 * MiB // 62)
    return _head("50 MB of base64 text", "Content-Type: text/plain\nContent-Transfer-Encoding: base64\n\n") \
        + base64.encodebytes(text)


def one_line_50mb():
    return b"a" * (50 * MiB)


def boundary_never_closes_big():
    return (_head("boundary never closes", 'Content-Type: multipart/mixed; boundary="open"\n\n')
            + b"--open\nContent-Type: text/plain\n\n" + b"a long first part that never ends\n" * 20000)


def delimiter_lines_only():
    return _head("delimiters", "Content-Type: multipart/mixed; boundary=zz\n\n") + b"--zz\n" * 200000


def header_explosion():
    """Many tiny header fields: every one is a token (header names and words)."""
    return b"".join(b"X-H%d: v%d\n" % (i, i) for i in range(60000)) + b"\nbody\n"


def one_char_words():
    """Expands: each 2-byte 'x ' becomes a token occurrence (24 bytes of stream state)."""
    return _head("one-char words") + b"\n" + b"x " * (128 * 1024) + "\U0001F600".encode()


def cjk_run():
    """Expands: one token per Han character (a bigram each), one long run."""
    return _head("cjk", "Content-Type: text/plain; charset=utf-8\n\n") + ("\u4e2d\u6587" * 45000).encode()


def encoded_words_many():
    return b"From: a@example.com\nSubject: " + b"=?utf-8?B?d2lu?= " * 15000 + b"\n\nbody\n"


def html_deep_nesting():
    return _head("deep html", "Content-Type: text/html\n\n") + b"<div><b><i><font color=red>" * 9000 + b"deep words"


def html_many_tags_and_links():
    return _head("links", "Content-Type: text/html\n\n") + b'<a href="http://x.example/a">w</a><img src=y>' * 5500


def html_unclosed_comments():
    return _head("unclosed comments", "Content-Type: text/html\n\n") + b"<!--" * 64000


def html_unclosed_style():
    return _head("unclosed style", "Content-Type: text/html\n\n") + b"<style>" * 36000


def html_unclosed_script():
    return _head("unclosed script", "Content-Type: text/html\n\n") + b"<script x>" * 25000


def content_type_params_long():
    """A 16 KB run of parameter-name characters without '=' in each part's Content-Type."""
    return (_head("long parameters", "Content-Type: multipart/mixed; boundary=zz\n\n")
            + b"".join(b"--zz\nContent-Type: text/plain; " + b"a" * 16000 + b"\n\nx\n" for _ in range(15)))


def utf16_large():
    return (_head("utf-16", "Content-Type: text/plain; charset=utf-16\n\n")
            + "a few words in UTF-16 \U0001F4B0 ".encode("utf-16") * 4000 + b"\x00\xd8" * 1000)


def utf7_large():
    return _head("utf-7", "Content-Type: text/plain; charset=utf-7\n\n") + b"+AGEAYgBj- +2D0- +ZeVnLA- +!!" * 9000


GENERATED = {f.__name__: f for f in (
    header_line_1mb, subject_line_1mb, mime_nested_1000, rfc822_nested_1000, parts_10000, attachment_50mb,
    text_part_50mb_base64, one_line_50mb, boundary_never_closes_big, delimiter_lines_only, header_explosion,
    one_char_words, cjk_run, encoded_words_many, html_deep_nesting, html_many_tags_and_links, utf16_large,
    utf7_large,
    # these four took 4 to 75 s of CPU each at max_bytes = 256 KiB while mail.py
    # used regexes that rescanned to the end of the text on every failed
    # match (fixed in 96457d4; figures in docs/reliability.md)
    html_unclosed_comments, html_unclosed_style, html_unclosed_script, content_type_params_long)}


def _check_bounds(name, size, measured, stdout, stderr):
    report = os.environ.get("SPAMNB_HOSTILE_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps({"case": name, "bytes": size, **measured}) + "\n")
    assert not measured["timed_out"], f"{name}: killed after {measured['wall']:.1f} s"
    assert measured["code"] in (0, 1, 2), (name, measured, stderr.decode(errors="replace"))
    assert stdout.split()[0] in (b"spam", b"ham", b"unsure"), stdout
    assert measured["cpu"] <= CPU_BOUND, (name, measured)
    assert measured["rss_mib"] <= RSS_BASE + 1.1 * size / MiB, (name, measured)


HAND_MADE = sorted(p.name for p in DATA.iterdir())
# one of each kind in the default run (base64, MIME boundaries, charsets, 8-bit,
# nesting, UTF-16/UTF-7, an empty file); the others run with -m slow
HAND_MADE_DEFAULT = ["base64_invalid.eml", "boundary_never_closes.eml", "charset_bogus.eml", "eight_bit_and_nul.eml",
                     "empty.eml", "mime_nested_rfc822.eml", "utf16_undeclared.eml", "utf7_body.eml"]
# the three 50 MB inputs (the memory bound), the deepest nesting, the most parts,
# the most header names and a case of the quadratic-regex family; the rest with -m slow
GENERATED_DEFAULT = ["attachment_50mb", "text_part_50mb_base64", "one_line_50mb", "mime_nested_1000", "parts_10000",
                     "header_explosion", "html_unclosed_comments"]


@pytest.fixture(scope="module")
def generated_paths(tmp_path_factory):
    """``generated_paths(name)``: the generated case written to a file once for
    the module (the 50 MB ones take a while to make)."""
    folder = tmp_path_factory.mktemp("generated")
    paths = {}

    def path(name):
        if name not in paths:
            data = GENERATED[name]()
            (folder / name).write_bytes(data)
            paths[name] = (folder / name, len(data))
        return paths[name]
    return path


def test_hand_made_cases_are_present():
    assert len(HAND_MADE) >= 20
    assert all(p.stat().st_size < 4096 for p in DATA.iterdir())  # large cases are generated, not committed


@pytest.mark.parametrize("name", slow_beyond(HAND_MADE, HAND_MADE_DEFAULT))
def test_hand_made_message_gets_a_verdict(home, name):
    path = DATA / name
    measured, stdout, stderr = measure(["classify", "-v"], path, home)
    _check_bounds(name, path.stat().st_size, measured, stdout, stderr)
    assert stderr == b""


@pytest.mark.parametrize("name", slow_beyond(sorted(GENERATED), GENERATED_DEFAULT))
def test_generated_message_gets_a_verdict_within_bounds(home, generated_paths, name):
    path, size = generated_paths(name)
    measured, stdout, stderr = measure(["classify"], path, home)
    _check_bounds(name, size, measured, stdout, stderr)


def test_tokens_with_lone_surrogates_can_be_printed(home):
    # UTF-7 and unicode_escape decode to lone surrogates; whole-value tokens
    # (x-mailer:, message-id:, part:ext:) kept them and printing them failed
    # with UnicodeEncodeError (exit 3) until 96457d4
    measured, stdout, stderr = measure(["tokens"], DATA / "surrogate_tokens.eml", home)
    assert measured["code"] == 0, stderr.decode()
    assert b"x-mailer:" in stdout
    stdout.decode("utf-8")  # strict: no surrogates escaped into the output


# Tokenizes each message file named with every limit at its largest (max_bytes
# = mail.MAX_BYTES, no text budget, all header words); prints the CPU seconds
# of each, one line a file (one process for every case: a fresh process each
# would add its start-up and imports to every case's wall time, not to its CPU).
_PARSE_TIMER = r"""
import sys, time
from spamnb.mail import parser as mail
from spamnb.mail.tokenizer import Tokenizer
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    tokenizer = Tokenizer(max_bytes=mail.MAX_BYTES, max_text_chars=0, headers="all")
    started = time.process_time()
    tokenizer.stream(data)
    print(time.process_time() - started, flush=True)
"""
PARSE_BOUND = 0.5  # CPU seconds to tokenize 256 KiB (linear work takes milliseconds)


def _parse_times(folder, paths, timeout):
    """The CPU seconds to tokenize each of ``paths``, in one process given
    ``timeout`` seconds a case; a case it did not finish is ``inf``."""
    try:
        proc = subprocess.run([sys.executable, "-c", _PARSE_TIMER, *map(str, paths)], capture_output=True,
                              env=_env(folder), timeout=timeout * len(paths))
        out, code, err = proc.stdout, proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as e:
        out, code, err = e.stdout or b"", 0, b""
    assert code == 0, err.decode()
    seconds = [float(line) for line in out.split()]
    return seconds + [float("inf")] * (len(paths) - len(seconds))


@pytest.fixture(scope="module")
def parse_times(tmp_path_factory, generated_paths):
    """Every generated case's tokenizing CPU seconds at the largest limits, by name."""
    names = sorted(GENERATED)
    times = _parse_times(tmp_path_factory.mktemp("parse"), [generated_paths(n)[0] for n in names], timeout=30)
    return dict(zip(names, times))


# header_explosion (60,000 distinct header names in 256 KiB) took 1.3 s while
# prefixes were found with list.index (fixed in d6f901e)
@pytest.mark.parametrize("name", sorted(GENERATED))
def test_parser_is_fast_at_its_largest_limit(parse_times, name):
    seconds = parse_times[name]
    report = os.environ.get("SPAMNB_HOSTILE_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps({"case": name, "tokenize_256k_cpu": seconds}) + "\n")
    assert seconds <= PARSE_BOUND


def test_limits_are_the_ones_the_bounds_assume():
    settings = Tokenizer().settings
    assert settings["max_bytes"] <= mail.MAX_BYTES and settings["max_depth"] <= 8 and settings["max_parts"] <= 64


@pytest.mark.parametrize("make", [mime_nested_1000, rfc822_nested_1000, parts_10000, attachment_50mb])
def test_parser_stops_at_its_limits(make):
    parsed = mail.parse(make())
    assert parsed.stats.max_depth <= mail.MAX_DEPTH
    assert len(parsed.parts) <= mail.MAX_PARTS
    assert parsed.stats.n_bytes >= len(parsed.parts)


@pytest.mark.slow
def test_passthrough_returns_a_50mb_message_intact(home, tmp_path):
    data = attachment_50mb()
    path = tmp_path / "message"
    path.write_bytes(data)
    measured, stdout, stderr = measure(["classify", "-p"], path, home)
    assert measured["code"] in (0, 1, 2), stderr
    kept = b"".join(line for line in stdout.splitlines(keepends=True) if not line.startswith(b"X-Spamnb-"))
    assert kept == data
    # passthrough holds the input, a copy of its body and the output (measured
    # ~3.3x the message; docs/reliability.md describes the fix to get ~1x)
    assert measured["rss_mib"] <= RSS_BASE + 3.5 * len(data) / MiB


@pytest.mark.slow
def test_passthrough_holds_about_one_copy_of_the_message(home, tmp_path):
    path = tmp_path / "message"
    path.write_bytes(one_line_50mb())
    measured, stdout, stderr = measure(["classify", "-p"], path, home)
    assert measured["code"] in (0, 1, 2), stderr
    assert measured["rss_mib"] <= RSS_BASE + 1.3 * path.stat().st_size / MiB


def test_verdict_does_not_depend_on_bytes_past_the_limit(spam_filter):
    base = (DATA / "html_unclosed.eml").read_bytes()
    limit = Tokenizer().max_bytes
    padded = base + b"x" * (limit - len(base))
    a = spam_filter.classify(padded + b"tail one " * 1000)
    b = spam_filter.classify(padded + b"\x00\xff other tail" * 1000)
    assert a.log_odds == b.log_odds


# ---------------------------------------------------------------------------- property tests
def _corpus_messages():
    files = sorted(p for p in (REPO / "corpora").rglob("*") if p.is_file() and p.name != "README.md")
    return [p.read_bytes() for p in files[::10]]


SEEDS = _corpus_messages()


def _assert_scores(spam_filter, data):
    parsed = mail.parse(data)
    assert isinstance(parsed.headers, list) and isinstance(parsed.parts, list)
    tokens = spam_filter.tokenizer_.tokens(data)
    assert all(isinstance(t, str) and t for t in tokens)
    verdict = spam_filter.classify(data)
    assert verdict.label in ("spam", "ham", "unsure")
    assert 0.0 <= verdict.probability <= 1.0
    assert verdict.log_odds == verdict.log_odds  # not NaN
    assert verdict.tokens == len(tokens)
    assert 0 <= verdict.known_tokens <= verdict.tokens


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=st.binary(max_size=4096))
def test_any_bytes_are_scored(spam_filter, data):
    _assert_scores(spam_filter, data)


_MIME_PIECES = [b"\n", b"\n\n", b"\r\n", b"--", b"--zz", b"--zz--", b"Content-Type: multipart/mixed; boundary=zz\n",
                b"Content-Type: message/rfc822\n", b"Content-Type: text/html; charset=utf-7\n",
                b"Content-Transfer-Encoding: base64\n", b"Content-Transfer-Encoding: quoted-printable\n",
                b"=?utf-8?B?", b"?=", b"=\n", b"=ZZ", b"<!--", b"-->", b"<style>", b"</style>", b"<a href=", b"&#x",
                b"\x00", b"\xff\xfe", b"+2D0-", b"http://", b"From ", b":", b" ", b"\t"]


@st.composite
def mutated_messages(draw):
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "splice", "duplicate"]))
        n = len(data)
        at = draw(st.integers(0, max(0, n)))
        if op == "flip" and n:
            data[min(at, n - 1)] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[at:]
        elif op == "insert":
            data[at:at] = draw(st.sampled_from(_MIME_PIECES)) * draw(st.integers(1, 50))
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 200))]
        elif op == "splice":
            other = draw(st.sampled_from(SEEDS))
            cut = draw(st.integers(0, len(other)))
            data[at:] = other[cut:]
        elif op == "duplicate":
            data[at:at] = data[at:at + draw(st.integers(1, 2000))] * draw(st.integers(1, 20))
    return bytes(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=mutated_messages())
def test_mutated_real_messages_are_scored(spam_filter, data):
    _assert_scores(spam_filter, data)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=300), charset=st.sampled_from(["utf-8", "utf-7", "utf-16", "iso-2022-jp", "cp1252",
                                                             "bogus", "unicode_escape", "koi8-r", "gb2312", ""]))
def test_headers_and_bodies_in_any_charset_are_tokenized(text, charset):
    raw = text.encode("utf-8", "surrogatepass")
    message = (b"Subject: " + raw.replace(b"\n", b" ") + b"\nContent-Type: text/plain; charset=" + charset.encode()
               + b"\n\n" + raw)
    tokens = Tokenizer().tokens(message)
    assert all(isinstance(t, str) and t for t in tokens)


# ---------------------------------------------------------------------------- hostile corpora
MAIL = b"From: a@example.com\nSubject: hello %d\n\nsome words %d\n"


def _run(args, home):
    return run_spamnb(args, home, cwd=home)


def _hostile_tree(root):
    for folder in ("spam", "ham"):
        (root / folder).mkdir(parents=True)
        for i in range(3):
            (root / folder / f"{i}.eml").write_bytes(MAIL % (i, i))
    (root / "ham" / "empty-folder").mkdir()
    os.mkfifo(root / "ham" / "fifo")                          # opening it would block: must be skipped unopened
    (root / "ham" / "loop").symlink_to(root / "ham" / "loop")  # a symbolic link loop
    (root / "ham" / "dirloop").symlink_to(root / "ham")        # a folder link back up (not followed)
    (root / "ham" / "proc-mem").symlink_to("/proc/self/mem")   # a regular file whose read fails (EIO)
    (root / "ham" / "null").symlink_to("/dev/null")            # a device
    (root / "ham" / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (root / "ham" / "notes.txt").write_text("shopping list\n")
    (root / "spam" / b"caf\xe9-latin1-name".decode("utf-8", "surrogateescape")).write_bytes(MAIL % (9, 9))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "spam" / "socket"))
    return sock


def test_train_skips_and_counts_what_it_cannot_read(tmp_path):
    corpus = tmp_path / "corpus"
    sock = _hostile_tree(corpus)
    try:   # --follow-links: the links to /dev/null and /proc/self/mem are tried (without: skipped, below)
        proc = _run(["train", "--follow-links", corpus, "-m", tmp_path / "m.spamnb"], tmp_path)
        plain = _run(["train", corpus, "-m", tmp_path / "m2.spamnb"], tmp_path)
    finally:
        sock.close()
    assert plain.returncode == 0 and "2 link to a file outside the tree" in plain.stdout.decode(), plain.stdout
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert "trained on 7 messages (4 spam, 3 ham)" in out
    for reason in ("1 broken link", "3 not a regular file", "2 not mail", "1 unreadable", "1 link to a folder"):
        assert reason in out, out
    # a file link loop, a folder link loop, 3 special files (FIFO, device, socket), 2 non-mail files,
    # 1 unreadable file
    assert "skipped 8 " in out, out
    assert SpamFilter.load(tmp_path / "m.spamnb").class_count_ == (3.0, 4.0)


def test_train_strict_fails_naming_the_file_and_writes_no_model(tmp_path):
    corpus = tmp_path / "corpus"
    sock = _hostile_tree(corpus)
    try:
        proc = _run(["train", "--strict", corpus, "-m", tmp_path / "m.spamnb"], tmp_path)
    finally:
        sock.close()
    err = proc.stderr.decode()
    assert proc.returncode == 3
    assert len(err.strip().splitlines()) == 1 and str(corpus) in err, err
    assert not (tmp_path / "m.spamnb").exists()


def test_train_on_empty_folders_is_a_one_line_error(tmp_path):
    (tmp_path / "corpus" / "spam").mkdir(parents=True)
    (tmp_path / "corpus" / "ham").mkdir()
    (tmp_path / "corpus" / "ham" / "README").write_text("not mail\n")
    proc = _run(["train", tmp_path / "corpus", "-m", tmp_path / "m.spamnb"], tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 3 and "no messages found" in err and "1 not mail" in err, err
    assert not (tmp_path / "m.spamnb").exists()


def test_unreadable_files_and_folders_are_counted(tmp_path, monkeypatch, capsys):
    # As root, permission bits do not stop reads: simulate EACCES on one file and one folder.
    corpus = tmp_path / "corpus"
    for folder in ("spam", "ham", "ham/locked"):
        (corpus / folder).mkdir(parents=True)
    for i, folder in enumerate(("spam", "spam", "ham", "ham", "ham/locked")):
        (corpus / folder / f"{i}").write_bytes(MAIL % (i, i))
    from spamnb.mail import reader as filter_module

    real_read, real_scandir = filter_module.open_checked, os.scandir  # the one opener of message files
    secret = str(corpus / "ham" / "2")

    def guarded_read(path, **options):
        if os.fspath(path) == secret:
            raise PermissionError(13, "Permission denied", path)
        return real_read(path, **options)

    def guarded_scandir(path="."):   # os.scandir also takes a file descriptor (shutil.rmtree)
        if not isinstance(path, int) and os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(filter_module, "open_checked", guarded_read)
    monkeypatch.setattr(os, "scandir", guarded_scandir)
    code = cli.main(["train", str(corpus), "-m", str(tmp_path / "m.spamnb")])
    out = capsys.readouterr().out
    assert code == 0
    assert "trained on 3 messages (2 spam, 1 ham)" in out
    assert "1 unreadable" in out and "1 unreadable folder" in out, out
    monkeypatch.setattr(os, "scandir", real_scandir)
    code = cli.main(["train", "--strict", str(corpus), "-m", str(tmp_path / "m2.spamnb")])
    err = capsys.readouterr().err
    assert code == 3 and secret in err and "unreadable" in err, err
    assert not (tmp_path / "m2.spamnb").exists()


def test_a_file_vanishing_during_training_is_counted(tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "corpus"
    (corpus / "spam").mkdir(parents=True)
    (corpus / "ham").mkdir()
    for i in range(3):
        (corpus / "spam" / f"{i}").write_bytes(MAIL % (i, i))
        (corpus / "ham" / f"{i}").write_bytes(MAIL % (i + 10, i))
    from spamnb.mail import reader as filter_module

    real_read = filter_module.open_checked  # the one opener of message files
    gone = str(corpus / "ham" / "1")

    def racing_read(path, **options):
        if os.fspath(path) == gone:  # listed, then deleted before it is read
            os.unlink(path)
        return real_read(path, **options)

    monkeypatch.setattr(filter_module, "open_checked", racing_read)
    code = cli.main(["train", str(corpus), "-m", str(tmp_path / "m.spamnb")])
    out = capsys.readouterr().out
    assert code == 0 and "trained on 5 messages" in out and "skipped 1 (1 unreadable: " in out, out


# ---------------------------------------------------------------------------- learning hostile mail
@pytest.mark.slow
def test_learning_hostile_mail_keeps_a_usable_model(home, tmp_path):
    """`spamnb learn` every hostile message (hand-made and the smaller generated
    ones), then the model reloads, classifies and describes itself."""
    model = tmp_path / "m.spamnb"
    model.write_bytes((home / "model.spamnb").read_bytes())
    folder = tmp_path / "hostile"
    folder.mkdir()
    for name in HAND_MADE:
        (folder / name).write_bytes((DATA / name).read_bytes())
    for name in ("mime_nested_1000", "parts_10000", "encoded_words_many", "cjk_run", "utf7_large",
                 "html_unclosed_comments", "content_type_params_long", "header_explosion"):
        (folder / name).write_bytes(GENERATED[name]())
    files = sorted(folder.iterdir())
    for label in ("--spam", "--ham"):
        proc = _run(["learn", "-q", label, "-m", model, *files], tmp_path)
        assert proc.returncode == 0, proc.stderr.decode()
    learned = SpamFilter.load(model)
    # the second run relabels: the ledger moves each message from spam to ham; what is not
    # mail (no header line at the top) is not learned, as train does not read it
    mail = [f for f in files if looks_like_mail(f.read_bytes())]
    assert 0 < len(mail) < len(files)
    assert learned.class_count_ == (200 + len(mail), 100)
    assert all(isinstance(token, str) for token in learned.vocabulary_.tokens())
    for args in (["info", "--tokens", "20", "-m", model], ["classify", "-v", "-m", model, *files[:3]]):
        proc = _run(args, tmp_path)
        assert proc.returncode == 0, (args, proc.stderr.decode())   # several messages: 0 once each got a verdict
        proc.stdout.decode("utf-8")
    lines = _run(["classify", "-m", model, *files[:3]], tmp_path).stdout.decode().splitlines()
    assert [line.split("\t")[:1] for line in lines] == [[str(f)] for f in files[:3]], lines   # a verdict each
    proc = _run(["classify", "--json", "-m", model, files[0]], tmp_path)
    verdict = json.loads(proc.stdout)["verdict"]        # one message: its verdict's exit code
    assert proc.returncode == {"spam": 0, "ham": 1, "unsure": 2}[verdict], proc.stderr.decode()
    # forgetting them all (the ledger knows their label) restores the original counts
    proc = _run(["forget", "-q", "-m", model, *files], tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert SpamFilter.load(model).class_count_ == SpamFilter.load(home / "model.spamnb").class_count_


def test_batch_classify_of_a_hostile_folder(home, tmp_path):
    folder = tmp_path / "inbox"
    folder.mkdir()
    for name in HAND_MADE:
        (folder / name).write_bytes((DATA / name).read_bytes())
    os.mkfifo(folder / "fifo")
    (folder / "mem").symlink_to("/proc/self/mem")
    (folder / "loop").symlink_to(folder / "loop")
    proc = _run(["classify", "--batch", folder], home)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    rows = [line.split("\t") for line in proc.stdout.decode().splitlines()]
    assert all(row[1] in ("spam", "ham", "unsure") for row in rows)
    # every hand-made message that looks like mail gets a line; the rest is counted on stderr
    assert len(rows) == sum(1 for name in HAND_MADE if (DATA / name).read_bytes().strip()
                            and looks_like_mail((DATA / name).read_bytes()))
    assert len(err.strip().splitlines()) == 1 and "1 unreadable" in err and "1 broken link" in err, err


# ---------------------------------------------------------------------------- files checked before they are read
def _maildir_with_traps(root):
    """A Maildir holding one message, a FIFO, a link to /dev/zero and a 100 GB sparse file."""
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True)
    (root / "cur" / "1.mail").write_bytes(MAIL % (1, 1))
    os.mkfifo(root / "cur" / "2.fifo")                   # opening it would block, for ever: never opened
    (root / "cur" / "3.zero").symlink_to("/dev/zero")     # read whole, memory grows without bound: never opened
    with open(root / "new" / "4.sparse", "wb") as f:      # read whole: 100 GB of memory; never read
        f.truncate(100 << 30)
    return root


@pytest.mark.parametrize("command", ["train", "learn", "batch", "batch-j2"])
def test_fifos_devices_and_huge_files_are_skipped_unread(home, tmp_path, command):
    """On main, the FIFO blocked every command for ever (learn holding the model's
    lock), /dev/zero grew memory without bound, the sparse file was read whole."""
    box = _maildir_with_traps(tmp_path / "Maildir")
    model = tmp_path / "m.spamnb"
    model.write_bytes((home / "model.spamnb").read_bytes())
    args = {"train": ["train", "--force", "--follow-links", "--ham", box, "-m", model],
            "learn": ["learn", "--ham", "--follow-links", box, box / "cur" / "2.fifo", box / "new" / "4.sparse",
                      "/dev/zero", "-m", model],
            "batch": ["classify", "--batch", box, box / "cur" / "2.fifo", box / "new" / "4.sparse", "/dev/zero",
                      "-m", model],
            "batch-j2": ["classify", "--batch", "-j", "2", box / "cur" / "2.fifo", box / "new" / "4.sparse",
                         "/dev/zero", box / "cur" / "1.mail", "-m", model]}[command]
    proc = run_spamnb(args, home, cwd=tmp_path, timeout=60)
    out, err = proc.stdout.decode(), proc.stderr.decode()
    if command == "train":
        assert proc.returncode == 0, err
        assert "trained on 1 messages" in out and "2 not a regular file" in out and "1 larger than 64 MiB" in out, out
    elif command == "learn":
        assert proc.returncode == 0, err
        assert "learned 1," in out, out
        # the folder's summary, then each path given that was refused: one line each
        assert "2 not a regular file" in err and "1 larger than 64 MiB" in err, err
        for path in (box / "cur" / "2.fifo", box / "new" / "4.sparse", "/dev/zero"):
            assert f"spamnb: {path}: " in err and "not read" in err, err
        assert SpamFilter.load(model).class_count_[0] == SpamFilter.load(home / "model.spamnb").class_count_[0] + 1
    else:
        assert proc.returncode == 3, err   # some paths could not be read: each has its line, the batch went on
        rows = [line.split("\t") for line in out.splitlines()]
        verdicts = [row for row in rows if row[1] in ("spam", "ham", "unsure")]
        errors = {row[0]: row[2] for row in rows if row[1] == "error"}
        assert len(verdicts) == 1 and verdicts[0][0].endswith("1.mail"), out
        assert errors[str(box / "cur" / "2.fifo")] == "not a regular file (a FIFO); not read"
        assert errors["/dev/zero"] == "not a regular file (a device); not read"
        assert errors[str(box / "new" / "4.sparse")] == "larger than 64 MiB, not an mbox; not read"


def test_stdin_is_read_within_the_limit(home, tmp_path):
    """`learn < /dev/zero` and 70 MB of zeros on a pipe: refused with one line
    (on main: memory grew without bound); an mbox on a pipe is still read."""
    model = tmp_path / "m.spamnb"
    model.write_bytes((home / "model.spamnb").read_bytes())
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, SPAMNB_HOME=str(home))
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run([sys.executable, "-m", "spamnb", "learn", "--ham", "-m", str(model)], stdin=zero,
                              capture_output=True, env=env, timeout=60)
    assert proc.returncode == 3 and proc.stderr.decode().count("\n") == 1, proc.stderr
    assert "stdin is a device" in proc.stderr.decode()
    proc = subprocess.run(f"head -c 70000000 /dev/zero | {sys.executable} -m spamnb learn --ham -m {model}",
                          shell=True, capture_output=True, env=env, timeout=60)
    assert proc.returncode == 3 and "larger than 64 MiB" in proc.stderr.decode(), proc.stderr
    assert proc.stderr.decode().count("\n") == 1
    mbox = b"".join(b"From x@example.com Mon Nov 23 10:40:20 2026\n" + MAIL % (i, i) + b"\n" for i in range(3))
    proc = subprocess.run(f"cat | {sys.executable} -m spamnb learn -M --ham -m {model}", shell=True, input=mbox,
                          capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0 and "learned 3," in proc.stdout.decode(), proc.stderr


def test_a_sparse_file_as_the_model_fails_fast(home, tmp_path):
    """`classify -m` a 2 GB sparse file: one line, at once (on main: 8.9 s and
    2 GB of memory); over the 1 GiB limit or not, it is refused unread."""
    import time

    message = (REPO / "corpora" / "spam").iterdir().__next__().read_bytes()
    for size in (2 << 30, 300 << 20):
        path = tmp_path / f"sparse-{size}"
        with open(path, "wb") as f:
            f.truncate(size)
        started = time.monotonic()
        proc = run_spamnb(["classify", "-m", path], home, stdin=message, cwd=tmp_path)
        elapsed = time.monotonic() - started
        err = proc.stderr.decode()
        assert proc.returncode == 3 and err.count("\n") == 1, err
        assert ("larger than the 1 GiB limit" if size > 1 << 30 else "not a spamnb model file") in err, err
        assert elapsed < 5, elapsed


def test_the_model_reader_checks_type_and_size_before_reading(home, tmp_path):
    """The reader the server relies on for per-user models: ``max_size`` given,
    a larger file is refused unread; a FIFO never blocks it."""
    from spamnb.persistence.store import ModelError

    path = home / "model.spamnb"
    size = path.stat().st_size
    assert SpamFilter.load(path, max_size=size).class_count_ == (200.0, 100.0)
    with pytest.raises(ModelError, match=f"{size} bytes, larger than the {size - 1} bytes limit"):
        SpamFilter.load(path, max_size=size - 1)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ModelError, match="not a regular file"):
        SpamFilter.load(fifo)


def test_passthrough_of_a_message_over_the_limit_passes_it_on_untouched(home, tmp_path):
    """`classify -p` of 70 MB on stdin: read to 64 MiB, then copied through
    untouched, exit 0 (on main: held whole, however large: `< /dev/zero` grew
    without bound)."""
    message = tmp_path / "big.eml"
    with open(message, "wb") as f:
        f.write(MAIL % (1, 1))
        f.write(b"x" * 70_000_000)
    with open(message, "rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "spamnb", "classify", "-p"], stdin=stdin, capture_output=True,
                              env=_env(home), cwd=home, timeout=120)
    assert proc.returncode == 0 and proc.stdout == message.read_bytes()
    assert proc.stderr.decode() == "spamnb: the message is larger than 64 MiB: passed on unchecked\n"
