"""``spamnb serve`` driven by the real ``spamc`` (and a raw socket client for
malformed requests), against ``spamnb classify`` on the same messages."""

import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

import spamnb
from spamnb.report.scale import ScoreMap
from spamnb.server import protocol as spamd
from spamnb.model.spam_filter import SpamFilter

from conftest import REPO, journal_without_records

PYTHONPATH = str(Path(spamnb.__file__).resolve().parents[1])
SPAMC = "/usr/bin/spamc" if os.path.exists("/usr/bin/spamc") else None
needs_spamc = pytest.mark.skipif(SPAMC is None, reason="spamc is not installed (Debian package spamc)")
MESSAGES = sorted((REPO / "corpora" / "spam").iterdir())[:6] + sorted((REPO / "corpora" / "easy_ham").iterdir())[:6]


def _env(home):
    env = dict(os.environ, SPAMNB_HOME=str(home), PYTHONPATH=PYTHONPATH)
    env.pop("SPAMNB_DEBUG", None)
    return env


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """A ``spamnb serve`` subprocess on a loopback port and a Unix socket."""

    def __init__(self, home, *extra):
        # one process unless a test asks for workers: the tests here read one
        # process's log and limits (tests/test_serve_production.py has the workers)
        if "--workers" not in extra and "-w" not in extra:
            extra = (*extra, "--workers", 1)
        self.home = Path(home)
        self.port = _free_port()
        self.sock = str(self.home / f"spamd-{self.port}.sock")
        self.log = open(self.home / f"serve-{self.port}.log", "wb+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{self.port}", "-l", self.sock,
             "-m", str(self.home / "model.spamnb"), *map(str, extra)],
            env=_env(home), stderr=self.log, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                if os.path.exists(self.sock) and "listening on" in self.log_text():
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"spamnb serve did not start: {self.log_text()}")
            time.sleep(0.05)

    def log_text(self):
        self.log.flush()
        return (self.home / f"serve-{self.port}.log").read_text(errors="replace")

    def spamc(self, *args, stdin=b"", unix=False):
        where = ["-U", self.sock] if unix else ["-p", str(self.port)]
        return subprocess.run([SPAMC, *where, *map(str, args)], input=stdin, capture_output=True, timeout=30)

    def rss(self):
        """The server process's resident memory, bytes (VmRSS)."""
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines())
        return int(fields["VmRSS"].split()[0]) * 1024

    def raw(self, data, half_close=True, timeout=10):
        """Send raw bytes, read the whole response."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(data)
            if half_close:
                s.shutdown(socket.SHUT_WR)
            return _read_all(s)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def _read_all(s):
    chunks = []
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _status(response):
    return int(response.split(b" ", 2)[1]) if response.startswith(b"SPAMD/") else None


def request(verb, message=b"", **headers):
    lines = [f"{verb} SPAMC/1.5"] + [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    if message is not None and verb not in ("PING", "SKIP"):
        lines.append(f"Content-length: {len(message)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (message or b"")


def unique_message(tag, n_words=40):
    words = " ".join(f"w{tag}x{i}" for i in range(n_words))
    return (f"From: someone{tag}@example.org\r\nSubject: note {tag}\r\nMessage-ID: <{tag}@example.org>\r\n\r\n"
            f"{words}\r\n").encode()


@pytest.fixture(scope="module")
def home(tmp_path_factory, sample_model):
    home = tmp_path_factory.mktemp("serve")
    shutil.copyfile(sample_model, home / "model.spamnb")     # what `spamnb train -q corpora/` writes here
    return home


@pytest.fixture(scope="module")
def daemon(home):
    d = Daemon(home, "--allow-tell", "--create-user-models", "--models-dir", home / "users")
    yield d
    assert d.stop() == 0


@pytest.fixture(scope="module")
def site_filter(home):
    return SpamFilter.load(home / "model.spamnb")


def classify_cli(home, path):
    proc = subprocess.run([sys.executable, "-m", "spamnb", "classify", str(path)], env=_env(home),
                          capture_output=True, timeout=60)
    return proc.stdout.decode().split()[0]


# ---------------------------------------------------------------------------- score mapping
def test_score_map_puts_each_verdict_on_its_side_of_the_boundaries():
    m = ScoreMap(0.0, 14.0, 5.0)
    assert m.score(14.0, "spam") == 5.0 and m.score(28.0, "spam") == 10.0
    assert m.score(13.99, "spam") == 5.0          # a spam verdict never prints below R
    assert m.score(13.99, "unsure") == 4.9         # 4.996 would round to 5.0: kept below R
    assert m.score(0.01, "unsure") == 0.1          # never 0.0 (that reads as ham)
    assert m.score(0.0, "ham") == 0.0 and m.score(-14.0, "ham") == -5.0
    assert m.score(1e300, "spam") == 999.9 and m.score(float("-inf"), "ham") == -999.9
    shifted = ScoreMap(-2.0, 10.0, 6.0)       # ham cutoff maps to 0, spam cutoff to R
    assert shifted.score(-2.0, "ham") == 0.0 and shifted.score(10.0, "spam") == 6.0
    assert shifted.score(4.0, "unsure") == 3.0
    with pytest.raises(ValueError):
        ScoreMap(3.0, 3.0)


def test_the_server_keeps_only_what_classifying_reads(home, site_filter, monkeypatch):
    """serve._load_filter drops the raw counts, last-seen days and ledger
    (TELL reads the whole model under its lock): same verdicts, less memory.
    The file is read into memory of its own (store._private_memory, an
    anonymous mapping tracemalloc does not see): the slim filter lets go of
    all of it, and what it keeps in its own buffers is under 0.9 x the file."""
    import gc
    import tracemalloc
    import weakref

    from spamnb.server import models as serve

    from spamnb.persistence import store

    path = home / "model.spamnb"
    reads = []
    real = store._private_memory

    def recorded(size):
        memory = real(size)
        reads.append(weakref.ref(memory.obj))
        return memory

    monkeypatch.setattr(store, "_private_memory", recorded)
    full = SpamFilter.load(path)
    gc.collect()
    assert len(reads) == 1 and reads[0]() is not None      # the full filter holds the file's bytes
    del full
    gc.collect()
    assert reads[0]() is None
    tracemalloc.start()
    try:
        slim = serve._load_filter(path)
        gc.collect()
        slim_bytes = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(reads) == 2 and reads[1]() is None           # let go of the file's bytes
    assert slim_bytes < 0.9 * path.stat().st_size, (slim_bytes, path.stat().st_size)
    assert slim.ages_.last_seen is None and slim.ledger_ is None and slim.source_ is None
    for message in [p.read_bytes() for p in MESSAGES]:
        assert slim.classify(message) == site_filter.classify(message)


def test_parse_head_rejects_malformed_requests():
    assert spamd.parse_head(b"CHECK SPAMC/1.5\r\nContent-length: 12\r\nX-Whatever: y").headers["content-length"] == "12"
    for head in (b"CHECK", b"check SPAMC/1.5", b"FROB SPAMC/1.5", b"CHECK HTTP/1.1",
                 b"CHECK SPAMC/1.5\r\nContent-length: 1e3", b"CHECK SPAMC/1.5\r\nContent-length: -1",
                 b"CHECK SPAMC/1.5\r\nno colon here", b"CHECK SPAMC/1.5\r\nCompress: gzip"):
        with pytest.raises(spamd.ProtocolError) as info:
            spamd.parse_head(head)
        assert info.value.code == 76


def test_decompress_is_bounded():
    bomb = zlib.compress(b"\0" * 10_000_000)
    assert spamd.decompress(bomb, 1000) is None
    assert spamd.decompress(zlib.compress(b"hello"), 1000) == b"hello"
    with pytest.raises(spamd.ProtocolError):
        spamd.decompress(zlib.compress(b"hello")[:-3], 1000)


def test_symbol_names_cannot_break_the_comma_list():
    assert spamd.symbol_name("a,b c%\u00e9") == "a%2Cb%20c%25%C3%A9"


# ---------------------------------------------------------------------------- with the real spamc
@needs_spamc
@pytest.mark.slow
def test_check_exit_code_and_score_follow_spamnb_classify(daemon, home, site_filter):
    labels = set()
    for path in MESSAGES:
        label = classify_cli(home, path)
        labels.add(label)
        proc = daemon.spamc("-c", stdin=path.read_bytes())
        score, required = map(float, proc.stdout.decode().strip().split("/"))
        assert required == 5.0
        assert proc.returncode == (1 if label == "spam" else 0), (path, label, proc.stdout)
        assert (score >= 5.0) == (label == "spam") and (score <= 0.0) == (label == "ham")
        verdict = site_filter.classify(path.read_bytes())
        assert score == ScoreMap.from_cutoffs(site_filter.cutoffs) \
            .score(verdict.log_odds, verdict.label)
    assert labels >= {"spam", "ham"}


@needs_spamc
def test_unsure_is_not_spam_for_spamc_and_scores_between_0_and_required(daemon, site_filter):
    # a short message with few known words: find one the model is unsure about
    candidates = [b"Subject: hello\r\n\r\n" + w.encode() + b"\r\n" for w in
                  ("click here now", "meeting tomorrow", "free offer", "the list", "money", "hi there friend",
                   "please remove", "linux kernel", "unsubscribe", "order now", "call me")]
    unsure = [m for m in candidates if site_filter.classify(m).label == "unsure"]
    if not unsure:
        pytest.fail("no unsure message among the candidates; add candidates")
    proc = daemon.spamc("-c", stdin=unsure[0])
    score, required = map(float, proc.stdout.decode().split("/"))
    assert proc.returncode == 0 and 0.0 < score < required


@needs_spamc
def test_symbols_are_the_rules_then_the_evidence(daemon, site_filter):
    message = MESSAGES[0].read_bytes()
    verdict = site_filter.classify(message)
    proc = daemon.spamc("-y", stdin=message)
    assert verdict.probability >= 0.999
    assert proc.stdout.decode().strip().split(",") == \
        ["BAYES_99", "BAYES_999", f"SPAMNB_{verdict.label.upper()}"] + [spamd.symbol_name(t) for t, _ in verdict.evidence]


@needs_spamc
def test_report_always_and_report_if_spam(daemon, site_filter):
    spam, ham = MESSAGES[0].read_bytes(), MESSAGES[-1].read_bytes()
    assert site_filter.classify(spam).label == "spam" and site_filter.classify(ham).label == "ham"
    full = daemon.spamc("-R", stdin=ham).stdout.decode()
    assert full.splitlines()[0].endswith("/5.0") and "spamnb verdict: ham" in full
    first_token = spamd.symbol_name(site_filter.classify(ham).evidence[0][0])
    assert first_token in full
    assert "spamnb verdict" not in daemon.spamc("-r", stdin=ham).stdout.decode()
    assert "spamnb verdict: spam" in daemon.spamc("-r", stdin=spam).stdout.decode()


@needs_spamc
def test_process_and_headers_add_status_and_keep_the_body(daemon, site_filter):
    first, rest = MESSAGES[0].read_bytes().split(b"\n", 1)
    forged = first + b"\nX-Spam-Status: No, forged by the sender\n" + rest
    assert site_filter.classify(forged).label == "spam"
    out = daemon.spamc(stdin=forged).stdout
    assert b"forged by the sender" not in out
    assert out.count(b"X-Spam-Status: Yes, score=") == 1 and b"X-Spam-Flag: YES" in out
    original = MESSAGES[0].read_bytes()
    split = original.find(b"\n\n")
    assert out.endswith(original[split + 2:])
    assert daemon.spamc("--headers", stdin=forged).stdout == out
    ham = daemon.spamc(unix=True, stdin=MESSAGES[-1].read_bytes()).stdout   # over the Unix socket
    assert b"X-Spam-Status: No, score=" in ham and b"X-Spam-Flag" not in ham


@needs_spamc
def test_ping_and_skip(daemon):
    assert daemon.spamc("-K").returncode == 0
    assert b" 0 PONG" in daemon.raw(b"PING SPAMC/1.5\r\n\r\n")
    assert daemon.raw(b"SKIP SPAMC/1.5\r\n\r\n") == b""


@needs_spamc
def test_tell_learns_and_forgets_in_the_users_model(daemon, home):
    message = unique_message("tell1")
    user_model = home / "users" / "carol" / "model.spamnb"
    base = SpamFilter.load(home / "model.spamnb").class_count_
    before = daemon.spamc("-c", "-u", "carol", stdin=message).stdout
    out = daemon.spamc("-L", "spam", "-u", "carol", stdin=message)
    assert out.returncode == 0 and b"successfully" in out.stdout
    learned = SpamFilter.load(user_model)
    assert learned.class_count_ == (base[0], base[1] + 1)      # the site model plus this one
    after = daemon.spamc("-c", "-u", "carol", stdin=message).stdout
    assert float(after.split(b"/")[0]) > float(before.split(b"/")[0])   # the user's model is used
    assert daemon.spamc("-c", "-u", "dave", stdin=message).stdout == before   # others keep the site model
    out = daemon.spamc("-L", "forget", "-u", "carol", stdin=message)
    assert b"successfully" in out.stdout
    assert SpamFilter.load(user_model).class_count_ == base
    assert b"already" in daemon.spamc("-L", "forget", "-u", "carol", stdin=unique_message("never")).stdout
    assert daemon.spamc("-L", "ham", "-u", "carol", stdin=message).returncode == 0
    assert SpamFilter.load(user_model).class_count_ == (base[0] + 1, base[1])



def test_tell_goes_through_the_ledger_like_spamnb_learn(daemon, home):
    """A message told twice counts once; told as the other class it moves;
    a forget without a class takes the ledger's (spamnb/estimator/ledger.py)."""
    message = unique_message("ledger1")
    user_model = home / "users" / "erin" / "model.spamnb"
    base = SpamFilter.load(home / "model.spamnb").class_count_
    for _ in range(2):
        assert daemon.spamc("-L", "spam", "-u", "erin", stdin=message).returncode == 0
    assert SpamFilter.load(user_model).class_count_ == (base[0], base[1] + 1)
    assert daemon.spamc("-L", "ham", "-u", "erin", stdin=message).returncode == 0
    assert SpamFilter.load(user_model).class_count_ == (base[0] + 1, base[1])
    assert b"successfully" in daemon.spamc("-L", "forget", "-u", "erin", stdin=message).stdout
    assert SpamFilter.load(user_model).class_count_ == base

def test_a_tell_that_relabels_or_forgets_folds_the_users_journal_in(daemon, home):
    """A TELL's learn appends to the user's journal; one that relabels or
    forgets saves the model whole (issue 51: a journal holding a forget would
    be replayed, the model read whole, by every CHECK and classify after it)."""
    user_model = home / "users" / "faye" / "model.spamnb"
    first, second, third = (unique_message(f"fold{i}") for i in range(3))
    assert daemon.spamc("-L", "spam", "-u", "faye", stdin=first).returncode == 0   # the user's model made
    for option, message in (("spam", second), ("ham", second), ("spam", third), ("forget", first)):
        assert b"successfully" in daemon.spamc("-L", option, "-u", "faye", stdin=message).stdout
        assert journal_without_records(user_model) == (option != "spam"), option   # a learn appended
    base = SpamFilter.load(home / "model.spamnb").class_count_
    assert SpamFilter.load(user_model).class_count_ == (base[0] + 1, base[1] + 1)


def test_bad_user_names_get_the_site_model_and_learn_nothing(daemon):
    """A name outside the allowed pattern is checked with the site model (an
    error would make spamc bounce the mail, or pass it unchecked), and the
    log says so; TELL for it is refused, and no folder is made."""
    message = b"Subject: x\r\n\r\nhi\r\n"
    site = daemon.raw(request("CHECK", message))
    assert site.startswith(b"SPAMD/1.5 0 EX_OK")
    for user in ("../etc", ".hidden", "a/b", "x" * 65, "o'brien"):
        assert daemon.raw(request("CHECK", message, User=user)) == site
        assert _status(daemon.raw(request("TELL", message, User=user, Message_class="spam", Set="local"))) == 67
    assert not (Path(daemon.home) / "etc").exists() and not (Path(daemon.home) / "users" / "o'brien").exists()
    time.sleep(0.1)
    assert "model=site (user name not allowed)" in daemon.log_text()


@needs_spamc
def test_compressed_requests(daemon):
    message = MESSAGES[0].read_bytes()
    plain = daemon.raw(request("CHECK", message))
    packed = zlib.compress(message)
    assert daemon.raw(request("CHECK", packed, Compress="zlib")) == plain
    if b"-z" in subprocess.run([SPAMC, "-h"], capture_output=True).stdout + \
            subprocess.run([SPAMC, "-h"], capture_output=True).stderr and \
            daemon.spamc("-z", "-c", stdin=message).returncode != 64:
        assert daemon.spamc("-z", "-c", stdin=message).stdout == daemon.spamc("-c", stdin=message).stdout
    assert _status(daemon.raw(request("CHECK", packed[:-4], Compress="zlib"))) == 65


# ---------------------------------------------------------------------------- malformed requests
def test_malformed_requests_get_protocol_errors_and_the_server_keeps_serving(daemon):
    good = request("CHECK", MESSAGES[0].read_bytes())
    expected = daemon.raw(good)
    assert expected.startswith(b"SPAMD/1.5 0 EX_OK")
    cases = {
        b"CHECK SPAMC/1.5\r\nContent-length: banana\r\n\r\nxx": 76,
        b"CHECK SPAMC/1.5\r\nContent-length: 100\r\n\r\nshort": 76,         # body shorter than announced
        b"CHECK SPAMC/1.5\r\nContent-length: 5\r\nhello": 76,               # no blank line
        b"GET / HTTP/1.0\r\n\r\n": 76,
        b"CHECK SPAMC/1.5\r\nX-Big: " + b"a" * 10_000_000 + b"\r\n\r\n": 76,   # 10 MB header
        b"CHECK SPAMC/1.5\r\n" + b"X-A: b\r\n" * 200_000 + b"\r\n": 76,
    }
    for data, code in cases.items():
        assert _status(daemon.raw(data)) == code, data[:60]
        assert daemon.raw(good) == expected
    # abrupt close mid-request
    s = socket.create_connection(("127.0.0.1", daemon.port))
    s.sendall(b"CHECK SPAMC/1.5\r\nContent-length: 1000\r\n\r\npartial")
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")   # RST on close
    s.close()
    assert daemon.raw(good) == expected
    assert daemon.proc.poll() is None


def test_a_request_in_pieces_is_answered_like_a_whole_one(daemon):
    """A request is answered in the event loop's callback once it is whole
    (spamnb.server.spamd_connection, its reader spamnb.server.request_reader):
    pieces that come apart, a head ending in bare LFs, and the other verbs
    (PING) all get the same answers as a request sent whole."""
    message = MESSAGES[0].read_bytes()
    whole = request("SYMBOLS", message)
    expected = daemon.raw(whole)
    assert expected.startswith(b"SPAMD/1.5 0 EX_OK") and b"SPAMNB_SPAM" in expected
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as s:
        for start in range(0, len(whole), 700):
            s.sendall(whole[start:start + 700])
            time.sleep(0.02)
        assert _read_all(s) == expected            # answered without the client's EOF
    lf = whole.replace(b"\r\n\r\n", b"\n\n", 1).replace(b"SPAMC/1.5\r\n", b"SPAMC/1.5\n")
    assert daemon.raw(lf) == expected
    assert b" 0 PONG" in daemon.raw(b"PING SPAMC/1.5\r\n\r\n")


def test_unknown_headers_are_ignored(daemon):
    message = MESSAGES[0].read_bytes()
    assert daemon.raw(request("CHECK", message, X_Anything="1", Foo="bar")) == daemon.raw(request("CHECK", message))


def test_spamc_1_2_requests_get_spamds_older_layout(daemon):
    """Exim sends REPORT SPAMC/1.2 and parses the answer with a fixed pattern
    (Spam header, blank line, report): spamd's layout for protocol < 1.3."""
    message = MESSAGES[0].read_bytes()
    old = daemon.raw(request("REPORT", message).replace(b"SPAMC/1.5", b"SPAMC/1.2"))
    head, _, body = old.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[1].startswith(b"Spam: True ; ") and b"Content-length" not in head
    assert body.startswith(b"spamnb verdict: spam")
    new = daemon.raw(request("REPORT", message))
    assert b"Content-length: %d" % len(body) in new and new.endswith(body)
    process = daemon.raw(request("PROCESS", message).replace(b"SPAMC/1.5", b"SPAMC/1.2"))
    head, _, body = process.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[1:] == [b"Content-length: %d" % len(body)] and b"X-Spam-Flag: YES" in body


def test_kept_alive_connection_serves_several_requests(daemon):
    message = MESSAGES[0].read_bytes()
    one = daemon.raw(request("CHECK", message))
    # an answer before a close is spamd's CHECK layout, without Content-length
    # (spamc reads it a byte at a time); on a kept-alive connection it says
    # where the answer ends
    assert b"Content-length" not in one and one.endswith(b" / 5.0\r\n\r\n")
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as s:
        for _ in range(3):
            s.sendall(request("CHECK", message, Connection="keep-alive"))
            head = b""
            while b"\r\n\r\n" not in head:
                head += s.recv(65536)
            assert head == one[:-2] + b"Content-length: 0\r\n\r\n"
        s.shutdown(socket.SHUT_WR)
        assert _read_all(s) == b""


@pytest.fixture(scope="module")
def tight(home):
    d = Daemon(home, "--max-size", 3000, "--timeout", 1, "--max-connections", 3)
    yield d
    assert d.stop() == 0


@needs_spamc
def test_oversized_messages_are_passed_on_unchanged(tight):
    big = MESSAGES[0].read_bytes() + b"x" * 5000
    proc = tight.spamc("-s", 10_000_000, "-c", stdin=big)
    assert proc.stdout.decode().strip() == "0.0/5.0" and proc.returncode == 0
    proc = tight.spamc("-s", 10_000_000, stdin=big)
    assert proc.stdout == big
    assert _status(tight.raw(request("PROCESS", big))) == 65
    # 50 MB announced and sent: read and dropped in chunks, answered
    with socket.create_connection(("127.0.0.1", tight.port), timeout=30) as s:
        s.sendall(b"CHECK SPAMC/1.5\r\nContent-length: 50000000\r\n\r\n")
        chunk = b"y" * 1_000_000
        for _ in range(50):
            s.sendall(chunk)
        s.shutdown(socket.SHUT_WR)
        assert b"Spam: False ; 0.0 / 5.0" in _read_all(s)


def test_slow_client_times_out_and_others_are_served(tight):
    slow = socket.create_connection(("127.0.0.1", tight.port), timeout=10)
    slow.sendall(b"CHECK SPAMC/1.5\r\nContent-le")
    started = time.monotonic()
    assert tight.raw(request("CHECK", MESSAGES[0].read_bytes())).startswith(b"SPAMD/1.5 0 EX_OK")
    assert time.monotonic() - started < 0.9
    response = _read_all(slow)
    assert _status(response) == 79 and time.monotonic() - started < 5
    slow.close()


def test_a_request_whose_body_stops_coming_times_out(tight):
    with socket.create_connection(("127.0.0.1", tight.port), timeout=10) as slow:
        slow.sendall(b"CHECK SPAMC/1.5\r\nContent-length: 500\r\n\r\nSubject: half")
        started = time.monotonic()
        assert _status(_read_all(slow)) == 79 and time.monotonic() - started < 5


@pytest.mark.slow
def test_sigterm_closes_silent_connections_at_once(home):
    d = Daemon(home, "--timeout", 30)
    silent = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    time.sleep(0.2)
    started = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    assert d.proc.wait(15) == 0 and time.monotonic() - started < 5
    assert _read_all(silent) == b""
    silent.close()
    d.stop()


@needs_spamc
@pytest.mark.slow
def test_past_the_connection_limit_clients_wait_and_get_a_verdict(home):
    """At --max-connections the server stops accepting: spamc waits in the
    listen backlog and gets its verdict once a slot frees (a silent socket
    is closed after --idle-timeout, a half-sent request after --timeout).
    An error answer instead would make `spamc -x -X` exit 76, which an MTA's
    pipe bounces, and plain `spamc -c` print 0/0 (the mail unchecked)."""
    d = Daemon(home, "--max-connections", 3, "--idle-timeout", 1, "--timeout", 2)
    try:
        message = MESSAGES[0].read_bytes()
        expected = d.spamc("-c", stdin=message)
        assert expected.returncode == 1 and b"/5.0" in expected.stdout
        processed = d.spamc(stdin=message).stdout
        assert b"X-Spam-Flag: YES" in processed
        for hold in (b"", b"CHECK"):        # silent sockets, then requests that never end
            held = [socket.create_connection(("127.0.0.1", d.port), timeout=10) for _ in range(3)]
            for s in held:
                s.sendall(hold)
            time.sleep(0.3)
            results = {}

            def run(name, *args, unix=False):
                results[name] = d.spamc(*args, stdin=message, unix=unix)

            threads = [threading.Thread(target=run, args=("check", "-x", "-X", "-c")),
                       threading.Thread(target=run, args=("process", "-x", "-X")),
                       threading.Thread(target=run, args=("unix", "-x", "-X", "-c"), kwargs={"unix": True})]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            for name in ("check", "unix"):
                assert (results[name].returncode, results[name].stdout) == (1, expected.stdout), (hold, name)
            assert (results["process"].returncode, results["process"].stdout) == (0, processed), hold
            for s in held:
                s.close()
        assert "not accepting until one closes" in d.log_text()
    finally:
        assert d.stop() == 0


def test_tell_is_refused_unless_allowed(tight):
    assert _status(tight.raw(request("TELL", unique_message("x"), Message_class="spam", Set="local"))) == 77


# ---------------------------------------------------------------------------- addresses
def test_non_loopback_needs_an_allow_list(home):
    proc = subprocess.run([sys.executable, "-m", "spamnb", "serve", "-l", "0.0.0.0:7999"], env=_env(home),
                          capture_output=True, timeout=60)
    assert proc.returncode == 64 and b"--allowed-ips" in proc.stderr


def test_clients_outside_the_allow_list_are_dropped(home):
    d = Daemon(home, "--allowed-ips", "10.0.0.0/8")
    try:
        try:    # closed at accept, before a byte is read: the client may see EOF, or its own send fail
            answer = d.raw(request("CHECK", b"Subject: x\r\n\r\nhi\r\n"))
        except (ConnectionResetError, BrokenPipeError, OSError) as exc:
            assert isinstance(exc, (ConnectionResetError, BrokenPipeError)) or exc.errno == errno.ENOTCONN, exc
            answer = b""
        assert answer == b""
        assert "not in --allowed-ips" in d.log_text()
    finally:
        d.stop()


# ---------------------------------------------------------------------------- SpamAssassin's fields
def part_spam_message():
    """Ham text twice in a first part, spam words in a second: P(spam) about 0,
    yet "unsure" (the second part leans to spam on its own)."""
    ham_body = MESSAGES[-6].read_bytes().split(b"\n\n", 1)[1]
    return (b"From: a@example.org\nSubject: notes\nMIME-Version: 1.0\n"
            b"Content-Type: multipart/mixed; boundary=XX\n\n--XX\nContent-Type: text/plain\n\n" + ham_body + ham_body
            + b"\n--XX\nContent-Type: text/plain\n\nclick here to order now, free offer, money back, please remove\n"
            b"--XX--\n")


def head_fields(message):
    head = message[:message.find(b"\n\n") + 1]
    fields = {}
    for line in head.split(b"\n"):
        if line[:1] in (b" ", b"\t"):
            fields[name][-1] += b"\n" + line
        elif b":" in line:
            name = line.split(b":", 1)[0].lower().decode()
            fields.setdefault(name, []).append(line)
    return head, fields


def unfold(field):
    """A folded field as one line (RFC 5322 unfolding), a list's ",<tab>" as ","."""
    return field.replace(b",\n\t", b",").replace(b"\n\t", b" ")


def test_level_bands_and_folding():
    from spamnb.report import headers

    assert headers.level(-3.0) == headers.level(0.9) == "" and headers.level(4.99) == "****"
    assert headers.level(999.9) == "*" * 50   # SpamAssassin's cap
    assert headers.bayes_tests(0.0) == ["BAYES_00"] and headers.bayes_tests(0.5) == ["BAYES_50"]
    assert headers.bayes_tests(0.995) == ["BAYES_99"] and headers.bayes_tests(1.0) == ["BAYES_99", "BAYES_999"]
    field = headers.fold("X-Spam-Status", ["Yes,"] + [f"w{i}" * 5 for i in range(40)])
    assert all(len(line) <= headers.LINE for line in field.split(b"\n"))
    import re

    for token in ("\u00e9" * 100, "a" * 38 + "\u00e9", "x," * 40):
        name = headers.short_symbol(token)
        assert len(name) <= 40 and re.fullmatch(r"(?:[A-Za-z0-9_.:/@+=!*-]|%[0-9A-F]{2})+", name), name
    assert headers.short_symbol("a,b") == "a%2Cb"


@needs_spamc
def test_process_adds_spamassassins_fields(daemon, site_filter):
    for path in (MESSAGES[0], MESSAGES[-1]):
        message = path.read_bytes()
        verdict = site_filter.classify(message)
        out = daemon.spamc(stdin=message).stdout
        head, fields = head_fields(out)
        score = float(fields["x-spam-score"][0].split(b":")[1])
        assert fields["x-spam-level"] == [b"X-Spam-Level: " + b"*" * min(50, max(0, int(score)))]
        assert fields["x-spam-checker-version"] == [f"X-Spam-Checker-Version: spamnb {spamnb.__version__}".encode()]
        status = fields["x-spam-status"][0]
        unfolded = unfold(status)
        band = b"BAYES_99,BAYES_999" if verdict.label == "spam" else b"BAYES_00"
        assert b"tests=" + band + b",SPAMNB_" + verdict.label.upper().encode() + b" " in unfolded
        tokens = unfolded.split(b" tokens=")[1].split(b",")
        assert tokens == [spamd.symbol_name(t).encode()[:40] for t, _ in verdict.evidence[:5]]
        assert "x-spam-report" not in fields   # off by default
        ours = b"\n".join(b"\n".join(v) for k, v in fields.items() if k.startswith("x-spam-"))
        assert all(len(line) <= 78 and line.isascii() for line in ours.split(b"\n"))
        assert (verdict.label == "spam") == (b"X-Spam-Flag: YES" in head)
        assert daemon.spamc("--headers", stdin=message).stdout == out


@needs_spamc
def test_unsure_because_of_a_part_says_so(daemon, site_filter, home):
    message = part_spam_message()
    verdict = site_filter.classify(message)
    assert verdict.label == "unsure" and verdict.probability < 1e-6 and verdict.reason == "part-leans-spam"
    out = daemon.spamc(stdin=message).stdout
    status = unfold(head_fields(out)[1]["x-spam-status"][0])
    assert status.startswith(b"X-Spam-Status: Unsure, ") and b"tests=BAYES_00,SPAMNB_UNSURE,SPAMNB_PART_SPAM " in status
    assert b"SPAMNB_PART_SPAM" in daemon.spamc("-y", stdin=message).stdout
    report = daemon.spamc("-R", stdin=message).stdout.decode()
    assert "a text part leans to spam on its own" in report
    verbose = subprocess.run([sys.executable, "-m", "spamnb", "classify", "-v"], input=message, env=_env(home),
                             capture_output=True, timeout=60)
    assert verbose.returncode == 2
    assert "unsure, not ham: a text part leans to spam on its own (its tokens: log-odds +" in verbose.stdout.decode()
    passed = subprocess.run([sys.executable, "-m", "spamnb", "classify", "-p"], input=message, env=_env(home),
                            capture_output=True, timeout=60).stdout
    assert b"X-Spamnb-Status: Unsure, log-odds=-" in passed and b", reason=part-leans-spam\n" in passed


@needs_spamc
def test_report_header_and_subject_tag_when_asked(home, site_filter):
    d = Daemon(home, "--report", "--subject-tag", "[SPAM]")
    try:
        spam, ham = MESSAGES[0].read_bytes(), MESSAGES[-1].read_bytes()
        out = d.spamc(stdin=spam).stdout
        head, fields = head_fields(out)
        assert fields["subject"][0].startswith(b"Subject: [SPAM] ") and len(fields["subject"]) == 1
        assert d.spamc(stdin=out).stdout.count(b"[SPAM]") == 1    # checked again: tagged once, not twice
        report = fields["x-spam-report"][0]
        lines = report.split(b"\n")
        assert lines[0] == b"X-Spam-Report:" and all(line.startswith(b"\t* ") or line == b"\t*" for line in lines[1:])
        assert b"BAYES_99" in report and 10 < len(lines) < 40 and len(report) < 3000
        ours = b"\n".join(b"\n".join(v) for k, v in fields.items() if k.startswith("x-spam-"))
        assert all(len(line) <= 78 and line.isascii() for line in ours.split(b"\n"))
        assert d.spamc("--headers", stdin=spam).stdout == out
        ham_head, ham_fields = head_fields(d.spamc(stdin=ham).stdout)
        assert b"[SPAM]" not in ham_head and "x-spam-report" in ham_fields
        # spamnb classify -p --sa-headers writes what the server's PROCESS writes
        for message in (spam, ham, part_spam_message()):
            local = subprocess.run([sys.executable, "-m", "spamnb", "classify", "-p", "--sa-headers", "--report",
                                    "--subject-tag", "[SPAM]"], input=message, env=_env(home),
                                   capture_output=True, timeout=60)
            assert local.returncode == 0 and local.stdout == d.spamc(stdin=message).stdout
    finally:
        assert d.stop() == 0


@needs_spamc
def test_telling_a_message_twice_says_already(daemon):
    message = unique_message("twice")
    assert b"successfully" in daemon.spamc("-L", "spam", "-u", "gina", stdin=message).stdout
    assert b"already" in daemon.spamc("-L", "spam", "-u", "gina", stdin=message).stdout
    assert b"successfully" in daemon.spamc("-L", "ham", "-u", "gina", stdin=message).stdout   # relabelled


@needs_spamc
def test_telling_a_delivered_copy_learns_the_mail_not_its_marks(home, site_filter):
    """The copy spamc -L gets back from a mailbox carries the server's
    X-Spam-* fields and --subject-tag: TELL takes them off, so it is the
    same message as the one delivered (spamc says "already")."""
    d = Daemon(home, "--allow-tell", "--subject-tag", "[SPAM]", "--report")
    try:
        spam = MESSAGES[0].read_bytes()
        delivered = d.spamc(stdin=spam).stdout
        assert b"Subject: [SPAM] " in delivered and b"X-Spam-Checker-Version: spamnb" in delivered
        assert d.spamc("-L", "spam", stdin=spam).returncode == 0
        again = d.spamc("-L", "spam", stdin=delivered)
        assert again.returncode == 0 and b"already" in again.stdout, again.stdout
    finally:
        assert d.stop() == 0


# ---------------------------------------------------------------------------- reloading, signals
@needs_spamc
def test_model_replaced_on_disk_and_sighup_settings(home, tmp_path):
    (tmp_path / "model.spamnb").write_bytes((home / "model.spamnb").read_bytes())
    config = tmp_path / "serve.conf"
    config.write_text("[serve]\nrequired-score = 5.0\n")
    d = Daemon(tmp_path, "--config", config)
    try:
        message = MESSAGES[0].read_bytes()
        assert d.spamc("-c", stdin=message).returncode == 1
        # a model trained with the labels swapped replaces the file (as a cron job's learn would)
        swapped = SpamFilter().fit([p.read_bytes() for p in MESSAGES], [p.parent.name != "spam" for p in MESSAGES])
        swapped.save(tmp_path / "new.spamnb")
        os.replace(tmp_path / "new.spamnb", tmp_path / "model.spamnb")
        # read again in a thread, the model loaded before serving meanwhile
        deadline = time.monotonic() + 10
        while d.spamc("-c", stdin=message).returncode != 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        config.write_text("[serve]\nrequired_score = 7.5\n")
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while b"/7.5" not in d.spamc("-c", stdin=message).stdout:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # a damaged file: the model loaded before keeps serving
        (tmp_path / "bad.spamnb").write_bytes(b"garbage")
        os.replace(tmp_path / "bad.spamnb", tmp_path / "model.spamnb")
        for _ in range(3):
            assert d.spamc("-c", stdin=message).returncode == 0
        deadline = time.monotonic() + 10
        while d.log_text().count("not reloaded") != 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert d.spamc("-c", stdin=message).returncode == 0
        time.sleep(0.2)
        assert d.log_text().count("not reloaded") == 1      # a damaged file is tried once, not per request
    finally:
        assert d.stop() == 0


def test_sigterm_lets_the_request_in_flight_finish(home):
    d = Daemon(home)
    message = MESSAGES[0].read_bytes()
    data = request("CHECK", message)
    with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
        s.sendall(data[:40])
        time.sleep(0.2)
        d.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        s.sendall(data[40:])
        s.shutdown(socket.SHUT_WR)
        assert _read_all(s).startswith(b"SPAMD/1.5 0 EX_OK")
    assert d.proc.wait(15) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", d.port), timeout=1).close()
    d.stop()


def test_one_log_line_per_request_with_v(home):
    d = Daemon(home, "-v")
    try:
        before = d.log_text().count("\n")
        d.raw(request("CHECK", MESSAGES[0].read_bytes(), User="erin"))
        time.sleep(0.1)
        lines = d.log_text().splitlines()[before:]
    finally:
        d.stop()
    assert len(lines) == 1 and "CHECK user=erin spam" in lines[0] and " ms " in lines[0]


def test_no_line_per_clean_request_by_default_but_errors_are_logged(daemon):
    before = daemon.log_text().count("\n")
    daemon.raw(request("CHECK", MESSAGES[0].read_bytes(), User="erin"))
    daemon.raw(b"BOGUS SPAMC/1.5\r\n\r\n")
    time.sleep(0.1)
    lines = daemon.log_text().splitlines()[before:]
    assert len(lines) == 1 and "error 76" in lines[0], lines


# ---------------------------------------------------------------------------- concurrency
@needs_spamc
def test_classifying_while_learning_counts_every_learn_once(daemon, home):
    user = "frank"
    base = SpamFilter.load(home / "model.spamnb").class_count_
    user_model = home / "users" / user / "model.spamnb"
    n_tellers, per_teller, n_cli = 3, 4, 3
    errors = []
    stop = threading.Event()

    def teller(k):
        for i in range(per_teller):
            proc = daemon.spamc("-L", "spam", "-u", user, stdin=unique_message(f"t{k}n{i}"))
            if b"successfully" not in proc.stdout:
                errors.append(proc.stdout + proc.stderr)

    def classifier():
        while not stop.is_set():
            proc = daemon.spamc("-c", "-u", user, stdin=MESSAGES[0].read_bytes())
            if proc.returncode != 1:
                errors.append(b"classify: " + proc.stdout + proc.stderr)

    # the first learn creates the user's model; then CLI learners join in on the same file
    assert b"successfully" in daemon.spamc("-L", "ham", "-u", user, stdin=unique_message("first")).stdout
    threads = [threading.Thread(target=teller, args=(k,)) for k in range(n_tellers)]
    threads += [threading.Thread(target=classifier) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(n_cli):
        subprocess.run([sys.executable, "-m", "spamnb", "learn", "--spam", "-q", "-m", str(user_model), "-"],
                       input=unique_message(f"cli{i}"), env=_env(home), check=True, timeout=120)
    for t in threads[:n_tellers]:
        t.join(120)
    stop.set()
    for t in threads[n_tellers:]:
        t.join(60)
    assert not errors, errors[:3]
    assert SpamFilter.load(user_model).class_count_ == (base[0] + 1, base[1] + n_tellers * per_teller + n_cli)


@needs_spamc
def test_postfix_pipe_recipe_spamc_e(daemon, tmp_path):
    # Postfix's content filter runs `spamc -e /usr/sbin/sendmail -oi -f ${sender} ${recipient}`:
    # spamc hands the checked message to the command; here the command writes it to a file
    out = tmp_path / "reinjected"
    message = MESSAGES[0].read_bytes()
    proc = subprocess.run([SPAMC, "-d", "127.0.0.1", "-p", str(daemon.port), "-e", "/bin/sh", "-c", f"cat > {out}"],
                          input=message, capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    delivered = out.read_bytes()
    assert b"X-Spam-Status: Yes, score=" in delivered and delivered.endswith(message[message.find(b"\n\n") + 2:])


def test_aiospamc_client(daemon, site_filter):
    aiospamc = pytest.importorskip("aiospamc", reason="aiospamc is not installed (pip install aiospamc)")
    import asyncio

    message = MESSAGES[0].read_bytes()
    verdict = site_filter.classify(message)

    async def calls():
        check = await aiospamc.check(message, host="127.0.0.1", port=daemon.port)
        pong = await aiospamc.ping(host="127.0.0.1", port=daemon.port)
        tell = await aiospamc.tell(unique_message("aio"), "spam", set_action="local", user="aio",
                                   host="127.0.0.1", port=daemon.port)
        return check, pong, tell

    check, pong, tell = asyncio.run(calls())
    spam = check.headers["Spam"]
    assert spam.value == (verdict.label == "spam") and spam.threshold == 5.0 and pong.message == "PONG"
    assert "DidSet" in tell.headers


def test_a_loaded_model_follows_its_journal_in_every_worker(tmp_path, monkeypatch):
    """With TELL on, a loaded model follows its journal: after a TELL (in its
    own worker, ``refresh``; in another worker, its next ``get``) only the new
    records are applied, in place, with no reading of the model and nothing
    left to a reload in the background, and it scores (with and without the
    evidence) as the file + journal read afresh, to the bit.  A model file
    replaced underneath is read again."""
    import asyncio
    import shutil

    from spamnb.model import learning
    from spamnb.server import models

    spam = sorted((REPO / "corpora" / "spam").iterdir())
    ham = sorted((REPO / "corpora" / "easy_ham").iterdir())
    path = tmp_path / "m.spamnb"
    SpamFilter().fit([p.read_bytes() for p in spam[:8] + ham[:8]], [True] * 8 + [False] * 8).save(path)
    monkeypatch.setattr(models, "_kept", learning.Kept())
    probes = [p.read_bytes() for p in spam[40:45] + ham[40:45]]
    loads = []
    real_load = models._load_filter
    monkeypatch.setattr(models, "_load_filter", lambda *args: loads.append(args) or real_load(*args))

    def scores(sf):
        return [(sf.classify(m, False).log_odds, sf.classify(m).log_odds, sf.classify(m).evidence) for m in probes]

    def background(function):   # a worker's reload in the background: none is expected
        raise AssertionError("read again in the background")

    teller, other = (models.ModelCache(4, print, whole=True) for _ in range(2))
    first = teller.get(str(path), 5.0)[0], other.get(str(path), 5.0)[0]
    teller.run = other.run = background
    assert len(loads) == 2
    for message, as_spam in ((spam[10], True), (ham[11], False), (spam[11], True)):
        models.tell(str(path), message.read_bytes(), as_spam, True, False)
        asyncio.run(teller.refresh(str(path), 5.0))
        fresh = scores(SpamFilter.load(path))
        assert (teller.get(str(path), 5.0)[0], other.get(str(path), 5.0)[0]) == first
        assert scores(first[0]) == fresh and scores(first[1]) == fresh
    assert len(loads) == 2                                   # followed, never read again
    shutil.copyfile(path, tmp_path / "copy.spamnb")
    os.replace(tmp_path / "copy.spamnb", path)               # replaced underneath: read again (in the background)
    teller.run = other.run = None
    assert teller.get(str(path), 5.0)[0] is not first[0] and len(loads) == 3
    other.get(str(path), 5.0)
    # a relabel or a forget folds the journal in (a whole save, issue 51): read again, as after any compaction
    for n, (message, as_spam, learn, remove) in enumerate(((spam[10], False, True, False),
                                                           (spam[10], None, False, True), (ham[3], None, False, True))):
        models.tell(str(path), message.read_bytes(), as_spam, learn, remove)
        assert journal_without_records(path)
        asyncio.run(teller.refresh(str(path), 5.0))
        fresh = scores(SpamFilter.load(path))
        assert scores(teller.get(str(path), 5.0)[0]) == fresh and scores(other.get(str(path), 5.0)[0]) == fresh
        assert len(loads) == 6 + 2 * n


def test_a_following_model_holds_what_its_journal_adds_until_the_journal_is_compacted(tmp_path, monkeypatch):
    """Nothing accumulates per TELL in a long-running server: what a followed
    model adds (side rows, tokens, the records' bytes) grows with its journal,
    which compaction bounds (at most 1 MiB); after a compaction the model is
    read again and the one before is let go (nothing else holds it)."""
    import gc
    import weakref

    from spamnb.persistence import journal
    from spamnb.model import learning
    from spamnb.server import models

    spam = sorted((REPO / "corpora" / "spam").iterdir())
    ham = sorted((REPO / "corpora" / "easy_ham").iterdir())
    path = tmp_path / "m.spamnb"
    SpamFilter().fit([p.read_bytes() for p in spam[:8] + ham[:8]], [True] * 8 + [False] * 8).save(path)
    monkeypatch.setattr(models, "_kept", learning.Kept())
    cache = models.ModelCache(4, print, whole=True)
    first = weakref.ref(cache.get(str(path), 5.0)[0])
    inode, compactions, told = path.stat().st_ino, 0, 0
    while compactions < 2:
        models.tell(str(path), unique_message(f"m{told}", 60), told % 2 == 0, True, False)
        told += 1
        followed = cache.get(str(path), 5.0)[0]
        size = os.path.getsize(journal.journal_path(path)) if os.path.exists(journal.journal_path(path)) else 0
        assert size <= journal.compact_at(path.stat().st_size) + 8192
        if path.stat().st_ino != inode:             # the journal was folded into a new model file
            inode, compactions = path.stat().st_ino, compactions + 1
            assert followed is not first()          # read again, not followed
            del followed
            gc.collect()
            assert first() is None                  # the model before is let go
            first = weakref.ref(cache.get(str(path), 5.0)[0])
        assert told < 2000


@needs_spamc
@pytest.mark.slow
def test_checks_after_tells_score_as_spamnb_classify_of_model_and_journal(home, tmp_path):
    """Through the server with two workers (each CHECK goes to either): after each
    TELL every CHECK scores as a fresh ``spamnb classify`` of the model file and
    its journal (the log-odds the log and the command print, to 3 decimals)."""
    import re
    import shutil

    shutil.copyfile(home / "model.spamnb", tmp_path / "model.spamnb")
    model = tmp_path / "model.spamnb"
    probes = MESSAGES[::3]
    told = [("spam", unique_message("w1")), ("ham", unique_message("w2")), ("ham", MESSAGES[1].read_bytes()),
            ("forget", unique_message("w1")), ("spam", MESSAGES[7].read_bytes())]
    d = Daemon(tmp_path, "--workers", 2, "--allow-tell", "-v")
    try:
        for option, message in told:
            assert b"successfully" in d.spamc("-L", option, stdin=message).stdout
            proc = subprocess.run([sys.executable, "-m", "spamnb", "classify", "-m", str(model), *map(str, probes)],
                                  env=_env(tmp_path), capture_output=True, timeout=60)
            expected = [line.split("\t")[-1] for line in proc.stdout.decode().splitlines()]   # path, label, p, log-odds
            assert len(expected) == len(probes), proc
            # a relabel or a forget folds the journal in (a whole save, issue 51): the worker that did not take
            # the TELL reads the model again in the background, as after any compaction, serving the one before
            # meanwhile; a learn is followed in place by both at once
            folded = journal_without_records(model)
            settle = time.monotonic() + 60
            while True:
                before, checks = d.log_text().count("\n"), d.log_text().count(" CHECK ")
                for probe in probes:
                    for _ in range(3):
                        d.spamc("-c", stdin=probe.read_bytes())
                deadline = time.monotonic() + 10
                while d.log_text().count(" CHECK ") < checks + 3 * len(probes) and time.monotonic() < deadline:
                    time.sleep(0.05)
                lines = [line for line in d.log_text().split("\n")[before:] if " CHECK " in line]
                got = [re.search(r"log-odds=([-+][0-9.]+)", line)[1] for line in lines]
                if got == [e for e in expected for _ in range(3)] or not folded or time.monotonic() > settle:
                    break
                time.sleep(0.2)
            assert got == [e for e in expected for _ in range(3)], (option, lines)
    finally:
        assert d.stop() == 0


# ---------------------------------------------------------------------------- under pressure (issues 24-26)
def _serve(home, *args, timeout=60):
    return subprocess.run([sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{_free_port()}", *map(str, args)],
                          env=_env(home), capture_output=True, timeout=timeout)


def test_no_usable_site_model_refuses_to_start(home, tmp_path):
    """Without a usable site model the server does not start (it would answer
    every check with an error, which spamc turns into 0/0: all mail unchecked)."""
    proc = _serve(tmp_path, "-m", tmp_path / "missing.spamnb")
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 3 and len(lines) == 1 and "no usable site model" in lines[0]
    (tmp_path / "bad.spamnb").write_bytes(b"garbage" * 100)
    proc = _serve(tmp_path, "-m", tmp_path / "bad.spamnb", "--models-dir", home / "users")
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 3 and len(lines) == 1 and "no usable site model" in lines[0]


def test_a_privileged_port_without_the_right_to_it_is_one_line(home):
    if int(Path("/proc/sys/net/ipv4/ip_unprivileged_port_start").read_text()) <= 783:
        pytest.skip("this machine lets anyone bind port 783")
    drop = ["setpriv", "--bounding-set=-net_bind_service"] if os.geteuid() == 0 else []
    if drop and not os.path.exists("/usr/bin/setpriv"):
        pytest.skip("root without setpriv: cannot drop CAP_NET_BIND_SERVICE")
    proc = subprocess.run([*drop, sys.executable, "-m", "spamnb", "serve", "-l", "127.0.0.1:783",
                           "-m", str(home / "model.spamnb")], env=_env(home), capture_output=True, timeout=60)
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 71 and len(lines) == 1, proc.stderr
    assert "cannot listen on 127.0.0.1:783" in lines[0] and "privileged" in lines[0]


@needs_spamc
def test_site_model_gone_while_running_keeps_serving_and_says_so(home, tmp_path):
    (tmp_path / "model.spamnb").write_bytes((home / "model.spamnb").read_bytes())
    d = Daemon(tmp_path)
    try:
        message = MESSAGES[0].read_bytes()
        before = d.spamc("-x", "-c", stdin=message)
        assert before.returncode == 1
        os.unlink(tmp_path / "model.spamnb")
        for _ in range(3):
            assert d.spamc("-x", "-c", stdin=message).stdout == before.stdout
        assert d.log_text().count("cannot be read") == 1     # said once, not per request
    finally:
        d.stop()


@needs_spamc
def test_a_damaged_or_unreadable_user_model_falls_back_to_the_site_model(home, tmp_path):
    (tmp_path / "model.spamnb").write_bytes((home / "model.spamnb").read_bytes())
    users = tmp_path / "users"
    for name, content in (("gina", b"garbage" * 50), ("hank", (home / "model.spamnb").read_bytes()[:5000])):
        (users / name).mkdir(parents=True)
        (users / name / "model.spamnb").write_bytes(content)
    (users / "ivan").mkdir()
    (users / "ivan" / "model.spamnb").mkdir()          # not a file at all
    d = Daemon(tmp_path, "--models-dir", users, "-v")   # -v: the lines of requests answered as asked
    try:
        message = MESSAGES[0].read_bytes()
        site = d.spamc("-x", "-X", "-c", stdin=message)
        assert site.returncode == 1
        for user in ("gina", "hank", "ivan", "nobody-here", "o'brien"):
            got = d.spamc("-x", "-X", "-c", "-u", user, stdin=message)
            assert (got.returncode, got.stdout) == (1, site.stdout), user
            processed = d.spamc("-x", "-X", "-u", user, stdin=message)
            assert processed.returncode == 0 and b"X-Spam-Flag: YES" in processed.stdout, user
        log = d.log_text()
        assert log.count("model=site (the user's model is not usable") >= 6
        assert "user=gina" in log and "model=site (the user has no model)" in log
    finally:
        d.stop()


def test_control_characters_in_user_cannot_forge_a_log_line(daemon):
    before = daemon.log_text().count("\n")
    forged = "mallory\rspamnb serve: CHECK user=root ham\nspamnb serve: forged"
    data = request("CHECK", MESSAGES[0].read_bytes()).replace(
        b"CHECK SPAMC/1.5\r\n", b"CHECK SPAMC/1.5\r\nUser: " + forged.encode() .replace(b"\n", b"\r") + b"\r\n")
    assert daemon.raw(data).startswith(b"SPAMD/1.5 0 EX_OK")
    time.sleep(0.1)
    new = daemon.log_text().split("\n")[before:]
    assert len([line for line in new if line]) == 1 and "\r" not in new[0] and "\\x0d" in new[0]
    before = daemon.log_text().count("\n")
    assert _status(daemon.raw(b"CHECK SPAMC/1.5\r\nCompress: x\rspamnb serve: forged\r\nContent-length: 1\r\n\r\nx")) == 76
    time.sleep(0.1)
    new = daemon.log_text().split("\n")[before:]
    assert len([line for line in new if line]) == 1 and "\r" not in new[0] and "\\x0d" in new[0]


def test_two_content_lengths_are_a_protocol_error(daemon):
    message = b"Subject: x\r\n\r\nhello\r\n"
    data = b"CHECK SPAMC/1.5\r\nContent-length: 5\r\nContent-length: %d\r\n\r\n" % len(message) + message
    assert _status(daemon.raw(data)) == 76
    with pytest.raises(spamd.ProtocolError):
        spamd.parse_head(b"CHECK SPAMC/1.5\r\nContent-length: 1\r\ncontent-LENGTH: 1")


@needs_spamc
def test_refused_and_failed_tells_make_spamc_exit_non_zero(home, tmp_path):
    """As against spamd: spamc -L exits non-zero when the server refuses a
    TELL (no --allow-tell) or cannot do it (no model for the user and no
    --create-user-models; past --max-user-models); repeating a learn says
    "already"; forgetting for a user without a model makes nothing on disk."""
    (tmp_path / "model.spamnb").write_bytes((home / "model.spamnb").read_bytes())
    users = tmp_path / "users"
    off = Daemon(tmp_path)
    try:
        proc = off.spamc("-L", "spam", stdin=unique_message("refused"))
        assert proc.returncode != 0 and b"successfully" not in proc.stdout and b"already" not in proc.stdout
    finally:
        off.stop()
    d = Daemon(tmp_path, "--allow-tell", "--models-dir", users)
    try:
        proc = d.spamc("-L", "spam", "-u", "judy", stdin=unique_message("nocreate"))
        assert proc.returncode != 0 and not users.exists()
        proc = d.spamc("-L", "forget", "-u", "judy", stdin=unique_message("nocreate"))
        assert proc.returncode == 0 and b"already" in proc.stdout and not users.exists()
    finally:
        d.stop()
    d = Daemon(tmp_path, "--allow-tell", "--create-user-models", "--max-user-models", 1, "--models-dir", users)
    try:
        message = unique_message("again")
        first = d.spamc("-L", "spam", "-u", "kim", stdin=message)
        assert first.returncode == 0 and b"successfully" in first.stdout
        again = d.spamc("-L", "spam", "-u", "kim", stdin=message)
        assert again.returncode == 0 and b"already" in again.stdout
        moved = d.spamc("-L", "ham", "-u", "kim", stdin=message)
        assert moved.returncode == 0 and b"successfully" in moved.stdout
        over = d.spamc("-L", "spam", "-u", "lee", stdin=message)       # a second user model: over the limit
        assert over.returncode != 0 and not (users / "lee").exists()
        assert sorted(p.name for p in users.iterdir()) == ["kim"]
    finally:
        d.stop()


@needs_spamc
def test_tell_without_a_user_name_never_teaches_the_site_model(home, tmp_path):
    """With --models-dir, the site model checks every user's mail: a TELL
    with no User: header or an empty one is refused (spamc -L exits non-zero,
    the site model unchanged, no folder made); checks without a name still
    get the site model's verdict.  A server without --models-dir keeps
    learning TELLs into its site model."""
    site = tmp_path / "model.spamnb"
    site.write_bytes((home / "model.spamnb").read_bytes())
    base = SpamFilter.load(site).class_count_
    users = tmp_path / "users"
    d = Daemon(tmp_path, "--allow-tell", "--create-user-models", "--models-dir", users)
    try:
        message = unique_message("nobody-named")
        check = d.raw(request("CHECK", message))
        assert check.startswith(b"SPAMD/1.5 0 EX_OK")
        assert d.raw(request("CHECK", message, User="")) == check
        proc = d.spamc("-x", "-L", "spam", "-u", "", stdin=message)
        assert proc.returncode != 0 and b"successfully" not in proc.stdout, proc
        assert _status(d.raw(request("TELL", message, Message_class="spam", Set="local"))) == 67
        assert _status(d.raw(request("TELL", message, User=" ", Message_class="ham", Set="local"))) == 67
        assert _status(d.raw(request("TELL", message, User="", Message_class="spam", Remove="local"))) == 67
        assert d.spamc("-L", "spam", "-u", "zed", stdin=message).returncode == 0      # a named user learns
    finally:
        assert d.stop() == 0
    assert SpamFilter.load(site).class_count_ == base
    assert sorted(p.name for p in users.iterdir()) == ["zed"]
    d = Daemon(tmp_path, "--allow-tell")
    try:
        proc = d.spamc("-L", "spam", stdin=unique_message("site-only"))
        assert proc.returncode == 0 and b"successfully" in proc.stdout
    finally:
        assert d.stop() == 0
    assert SpamFilter.load(site).class_count_ == (base[0], base[1] + 1)


def test_a_request_in_small_pieces_costs_linear_time(home):
    """The SPAMD reader looks for the end of the head only in the bytes
    new since its last look and parses the head once: a 4 MB body in
    300-byte pieces took 22.6 s of CPU when each piece rescanned the buffer."""
    sys.path.insert(0, str(REPO / "scripts" / "bench"))
    try:
        from bench_head_scan import cpu_seconds
    finally:
        sys.path.pop(0)
    assert cpu_seconds(str(home / "model.spamnb"), 4_000_000, 300) < 1.5


def test_a_changed_model_is_read_again_off_the_event_loop(home, tmp_path):
    """A model already loaded that changed on disk (a TELL, a nightly
    retrain) is read again in a thread; the loop answers with the model
    loaded before meanwhile, so a large model's reload blocks no check."""
    import asyncio
    import threading

    from spamnb.server.models import ModelCache

    path = tmp_path / "m.spamnb"
    path.write_bytes((home / "model.spamnb").read_bytes())
    message = MESSAGES[0].read_bytes()
    loop_thread = []

    async def run():
        loop = asyncio.get_running_loop()
        loads = []

        def in_thread(function):
            def recorded():
                loads.append(threading.current_thread() is not loop_thread[0])
                return function()
            return loop.run_in_executor(None, recorded)

        loop_thread.append(threading.current_thread())
        cache = ModelCache(10, lambda line: None)
        cache.run = in_thread
        old, _ = cache.get(str(path), 5.0)
        swapped = SpamFilter().fit([p.read_bytes() for p in MESSAGES], [p.parent.name != "spam" for p in MESSAGES])
        swapped.save(tmp_path / "new.spamnb")
        os.replace(tmp_path / "new.spamnb", path)
        served, _ = cache.get(str(path), 5.0)
        assert served is old                    # no load on the loop: the old model answers
        for _ in range(200):
            await asyncio.sleep(0.01)
            new, _ = cache.get(str(path), 5.0)
            if new is not old:
                break
        assert new is not old and loads == [True]
        assert new.classify(message).label == swapped.classify(message).label != old.classify(message).label
        # a model never loaded (a user's first request) is read in a thread as well
        other = tmp_path / "other.spamnb"
        other.write_bytes((home / "model.spamnb").read_bytes())
        assert not cache.loaded(str(other))
        await cache.first_load(str(other), 5.0)
        assert cache.loaded(str(other)) and loads == [True, True]
        (tmp_path / "bad.spamnb").write_bytes(b"garbage")
        await cache.first_load(str(tmp_path / "bad.spamnb"), 5.0)    # remembered, not read on every request
        assert cache.loaded(str(tmp_path / "bad.spamnb")) and loads == [True, True, True]

    asyncio.run(run())


def test_loaded_models_are_bounded_by_bytes_not_only_by_count(home, tmp_path):
    """Each user's model loaded costs about its file and journal: many users
    must not add up past --max-models-bytes (per worker, the site model
    apart), least recently used out first; the one just loaded stays even
    when larger than the bound alone.  On main only --max-models (1000)
    bounded them: 1000 x the site model's size."""
    from spamnb.server.models import ModelCache

    site = home / "model.spamnb"
    size = site.stat().st_size
    users = []
    for i in range(8):
        (tmp_path / f"u{i}").mkdir()
        os.link(site, tmp_path / f"u{i}" / "model.spamnb")
        users.append(str(tmp_path / f"u{i}" / "model.spamnb"))
    cache = ModelCache(1000, lambda line: None, pinned=str(site), max_bytes=int(size * 2.5))
    cache.get(str(site), 5.0)
    for path in users:
        cache.get(path, 5.0)
    assert len(cache) == 3 and cache.loaded_bytes() <= size * 2.5
    assert cache.loaded(str(site)) and cache.loaded(users[-1]) and cache.loaded(users[-2])
    assert not any(cache.loaded(path) for path in users[:-2])
    cache.get(users[-2], 5.0)           # used: the last one is now the oldest
    cache.get(users[0], 5.0)
    assert cache.loaded(users[-2]) and cache.loaded(users[0]) and not cache.loaded(users[-1])
    cache.max_bytes = 1
    cache.get(users[3], 5.0)
    assert len(cache) == 2 and cache.loaded(users[3]) and cache.loaded(str(site))


@needs_spamc
@pytest.mark.slow
def test_many_new_users_taught_by_tell_stay_within_max_models_bytes(home, tmp_path):
    """40 new users, each taught one message by spamc -L and checked: the
    server's resident memory grows by about --max-models-bytes (3 MB, so
    two of these 1.2 MB models), not a model per user (1.18 MiB each on
    main: 47 MiB for 40)."""
    (tmp_path / "model.spamnb").write_bytes((home / "model.spamnb").read_bytes())
    d = Daemon(tmp_path, "--allow-tell", "--create-user-models", "--models-dir", tmp_path / "users",
               "--max-models-bytes", 3_000_000)

    try:
        message = MESSAGES[0].read_bytes()
        for i in range(3):      # the learner's and the loop's first models, warm
            d.spamc("-L", "spam", "-u", f"warm{i}", stdin=unique_message(f"warm{i}"))
            d.spamc("-c", "-u", f"warm{i}", stdin=message)
        start = d.rss()
        for i in range(40):
            assert d.spamc("-L", "spam", "-u", f"many{i}", stdin=unique_message(f"many{i}")).returncode == 0
            assert d.spamc("-x", "-c", "-u", f"many{i}", stdin=message).returncode == 1
        grown = d.rss() - start
        assert grown < 12 * 2**20, grown / 2**20
    finally:
        assert d.stop() == 0


@needs_spamc
def test_a_new_users_model_is_their_journal_over_the_site_models_file(home, tmp_path):
    """TELL starts a user's model as the site model's file, hard-linked (no
    bytes copied), plus the site's journal; their learns go to their own
    journal.  The site model learned by `spamnb learn` (its journal) counts."""
    site = tmp_path / "model.spamnb"
    site.write_bytes((home / "model.spamnb").read_bytes())
    subprocess.run([sys.executable, "-m", "spamnb", "learn", "--ham", "-q", "-m", str(site), "-"],
                   input=unique_message("site-journal"), env=_env(tmp_path), check=True, timeout=120)
    assert (tmp_path / "model.spamnb.journal").exists()
    base = SpamFilter.load(site).class_count_
    users = tmp_path / "users"
    d = Daemon(tmp_path, "--allow-tell", "--create-user-models", "--models-dir", users)
    try:
        for i, user in enumerate(("mia", "ned", "oz")):
            proc = d.spamc("-L", "spam", "-u", user, stdin=unique_message(f"user{i}"))
            assert b"successfully" in proc.stdout
    finally:
        d.stop()
    for user in ("mia", "ned", "oz"):
        model = users / user / "model.spamnb"
        assert os.stat(model).st_ino == os.stat(site).st_ino          # the site model's bytes, shared
        assert (users / user / "model.spamnb.journal").stat().st_size < 64 * 1024
        assert SpamFilter.load(model).class_count_ == (base[0], base[1] + 1)
    assert SpamFilter.load(site).class_count_ == base                  # the site model did not learn
    on_disk = sum(p.stat().st_size for p in users.rglob("*") if p.is_file() and p.name != "model.spamnb")
    assert on_disk < site.stat().st_size / 4


@needs_spamc
def test_what_spamc_makes_of_an_error_answer():
    """The facts docs/serve.md's error table rests on, from the real spamc:
    once connected, spamc does not read the status code; an error answer is
    exit 76 (a blank line after the status line) or 74 (the status line
    alone, as spamd and spamnb answer; or a close) with -x: codes an MTA's
    pipe bounces on; without -x the mail passes unchecked (-c prints 0/0,
    exit 0).  spamc -L exits 74 on the status line alone, and exits 0
    ("already") when a blank line follows it.  Only a failed connect gives
    69, which -X turns into 75 (a deferral)."""
    def served(answer, *args):
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]

        def one():
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(5)
                while True:
                    try:
                        if not conn.recv(65536):
                            break
                    except OSError:
                        break
                if answer is not None:
                    conn.sendall(answer)

        t = threading.Thread(target=one)
        t.start()
        proc = subprocess.run([SPAMC, "-d", "127.0.0.1", "-p", str(port), *args], input=b"Subject: x\n\nhi\n",
                              capture_output=True, timeout=30)
        t.join(10)
        listener.close()
        return proc.returncode, proc.stdout

    blank, alone, close = b"SPAMD/1.5 75 EX_TEMPFAIL: busy\r\n\r\n", b"SPAMD/1.5 75 EX_TEMPFAIL: busy\r\n", None
    assert served(blank, "-x", "-X", "-c")[0] == 76 and served(alone, "-x", "-X", "-c")[0] == 74
    assert served(close, "-x", "-X")[0] == 74 and served(alone, "-x", "-X")[0] == 74
    assert served(alone, "-c") == (0, b"0/0\n") and served(alone) == (0, b"Subject: x\n\nhi\n")
    assert served(blank, "-L", "spam") == (0, b"Message was already un/learned\n")
    assert served(alone, "-L", "spam")[0] == 74
    port = _free_port()      # nothing listens there
    down = [subprocess.run([SPAMC, "--connect-retries=1", "-d", "127.0.0.1", "-p", str(port), *args],
                           input=b"Subject: x\n\nhi\n",
                           capture_output=True, timeout=60).returncode for args in (["-x", "-X"], ["-x"])]
    assert down == [75, 69]


def _tell_headers(response):
    """The fields of a SPAMD answer's head (name, value), the status line left out."""
    head = response.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")[1:]
    return [tuple(part.strip() for part in line.split(":", 1)) for line in head]


def test_tell_answers_what_it_did_with_a_models_folder_that_sorts_before_the_site_model(home, tmp_path):
    """The models folder's paths sort before the site model's here (every
    other test's sort after it), so a user's model is told apart from the
    site model by identity, not order: a new user's model starts from the
    site model's counts.  A TELL that asks nothing, and a forget for a user
    without a model, answer 0 with neither DidSet nor DidRemove (spamc says
    "already") and make no folder; a user model that cannot be read makes a
    TELL fail with EX_UNAVAILABLE (69), never reported as done."""
    site = tmp_path / "model.spamnb"
    site.write_bytes((home / "model.spamnb").read_bytes())
    base = SpamFilter.load(site).class_count_
    users = tmp_path / "aa-users"          # "aa-users/..." < "model.spamnb"
    d = Daemon(tmp_path, "--allow-tell", "--create-user-models", "--models-dir", users, "-v")
    try:
        message = unique_message("sorts-before")
        nothing = d.raw(request("TELL", message, User="ivan", Message_class="spam"))
        assert _status(nothing) == 0 and _tell_headers(nothing) == [("Content-length", "0")], nothing
        forget = d.raw(request("TELL", message, User="ivan", Remove="local"))
        assert _status(forget) == 0 and _tell_headers(forget) == [("Content-length", "0")], forget
        assert not users.exists()
        learned = d.raw(request("TELL", message, User="kim", Message_class="spam", Set="local"))
        assert _status(learned) == 0 and ("DidSet", "local") in _tell_headers(learned), learned
        assert ("DidRemove", "local") not in _tell_headers(learned)
        assert SpamFilter.load(users / "kim" / "model.spamnb").class_count_ == (base[0], base[1] + 1)
        forgot = d.raw(request("TELL", message, User="kim", Remove="local"))
        assert _status(forgot) == 0 and ("DidRemove", "local") in _tell_headers(forgot), forgot
        assert ("DidSet", "local") not in _tell_headers(forgot)
        assert SpamFilter.load(users / "kim" / "model.spamnb").class_count_ == base
        (users / "mal").mkdir()
        (users / "mal" / "model.spamnb").write_bytes(b"not a model\n" * 10)
        broken = d.raw(request("TELL", message, User="mal", Message_class="spam", Set="local"))
        assert _status(broken) == 69 and b"EX_UNAVAILABLE" in broken.split(b"\r\n", 1)[0], broken
        assert SpamFilter.load(site).class_count_ == base
        deadline = time.monotonic() + 30
        while "cannot update the model" not in d.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        log = d.log_text()
        assert "tell: nothing to do" in log and "tell - set=0 removed=0 (the user has no model)" in log, log
        assert "tell spam set=1 removed=0" in log and "tell - set=0 removed=1" in log, log
        assert "cannot update the model" in log, log
    finally:
        assert d.stop() == 0
