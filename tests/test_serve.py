"""``spamnb serve`` driven by the real ``spamc`` (and a raw socket client for
malformed requests), against ``spamnb classify`` on the same messages."""

import os
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
from spamnb.server import protocol as spamd
from spamnb.model.spam_filter import SpamFilter

from conftest import REPO

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
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("serve")
    subprocess.run([sys.executable, "-m", "spamnb", "train", "-q", str(REPO / "corpora")], env=_env(home),
                   check=True, capture_output=True, timeout=300)
    return home


@pytest.fixture(scope="module")
def daemon(home):
    d = Daemon(home, "--allow-tell", "--models-dir", home / "users")
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
    m = spamd.ScoreMap(0.0, 14.0, 5.0)
    assert m.score(14.0, "spam") == 5.0 and m.score(28.0, "spam") == 10.0
    assert m.score(13.99, "spam") == 5.0          # a spam verdict never prints below R
    assert m.score(13.99, "unsure") == 4.9         # 4.996 would round to 5.0: kept below R
    assert m.score(0.01, "unsure") == 0.1          # never 0.0 (that reads as ham)
    assert m.score(0.0, "ham") == 0.0 and m.score(-14.0, "ham") == -5.0
    assert m.score(1e300, "spam") == 999.9 and m.score(float("-inf"), "ham") == -999.9
    shifted = spamd.ScoreMap(-2.0, 10.0, 6.0)       # ham cutoff maps to 0, spam cutoff to R
    assert shifted.score(-2.0, "ham") == 0.0 and shifted.score(10.0, "spam") == 6.0
    assert shifted.score(4.0, "unsure") == 3.0
    with pytest.raises(ValueError):
        spamd.ScoreMap(3.0, 3.0)


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

    from spamnb.model import store

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
        assert score == spamd.ScoreMap.from_probabilities(site_filter.ham_cutoff, site_filter.spam_cutoff) \
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
def test_symbols_are_the_evidence(daemon, site_filter):
    message = MESSAGES[0].read_bytes()
    verdict = site_filter.classify(message)
    proc = daemon.spamc("-y", stdin=message)
    assert proc.stdout.decode().strip().split(",") == \
        [f"SPAMNB_{verdict.label.upper()}"] + [spamd.symbol_name(t) for t, _ in verdict.evidence]


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
    a forget without a class takes the ledger's (spamnb/model/ledger.py)."""
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

def test_bad_user_names_are_refused(daemon):
    for user in ("../etc", ".hidden", "a/b", "x" * 65):
        assert _status(daemon.raw(request("CHECK", b"Subject: x\r\n\r\nhi\r\n", User=user))) == 67
    assert not (Path(daemon.home) / "etc").exists()


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
    """A new connection's first request is answered in the event loop's
    callback once it is whole (serve._Connection): pieces that come apart,
    a head ending in bare LFs, and a request that is handed on (TELL, PING,
    keep-alive) all get the same answers as before."""
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
    # --max-connections counts per process: one process here
    d = Daemon(home, "--max-size", 3000, "--timeout", 1, "--max-connections", 3, "--workers", 1)
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


def test_connections_over_the_limit_get_tempfail(tight):
    held = [socket.create_connection(("127.0.0.1", tight.port), timeout=5) for _ in range(3)]
    for s in held:
        s.sendall(b"CHECK")       # busy, not finished
    time.sleep(0.2)
    assert _status(tight.raw(request("CHECK", b"Subject: x\r\n\r\nhi\r\n"))) == 75
    for s in held:
        s.close()
    time.sleep(0.2)
    assert _status(tight.raw(request("CHECK", b"Subject: x\r\n\r\nhi\r\n"))) == 0


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
        assert d.raw(request("CHECK", b"Subject: x\r\n\r\nhi\r\n")) == b""
        assert "not in --allowed-ips" in d.log_text()
    finally:
        d.stop()


# ---------------------------------------------------------------------------- reloading, signals
@needs_spamc
def test_model_replaced_on_disk_and_sighup_settings(home, tmp_path):
    (tmp_path / "model.spamnb").write_bytes((home / "model.spamnb").read_bytes())
    config = tmp_path / "serve.conf"
    config.write_text("required-score = 5.0\n")
    d = Daemon(tmp_path, "--config", config)
    try:
        message = MESSAGES[0].read_bytes()
        assert d.spamc("-c", stdin=message).returncode == 1
        # a model trained with the labels swapped replaces the file (as a cron job's learn would)
        swapped = SpamFilter().fit([p.read_bytes() for p in MESSAGES], [p.parent.name != "spam" for p in MESSAGES])
        swapped.save(tmp_path / "new.spamnb")
        os.replace(tmp_path / "new.spamnb", tmp_path / "model.spamnb")
        assert d.spamc("-c", stdin=message).returncode == 0
        config.write_text("required-score = 7.5\n")
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while b"/7.5" not in d.spamc("-c", stdin=message).stdout:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # a damaged file: the model loaded before keeps serving
        (tmp_path / "bad.spamnb").write_bytes(b"garbage")
        os.replace(tmp_path / "bad.spamnb", tmp_path / "model.spamnb")
        assert d.spamc("-c", stdin=message).returncode == 0
        assert "not reloaded" in d.log_text()
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


# ---------------------------------------------------------------------------- recipes
@needs_spamc
@pytest.mark.skipif(not os.path.exists("/usr/bin/procmail"), reason="procmail is not installed")
def test_procmail_recipe_with_spamc(daemon, tmp_path, site_filter):
    rc = tmp_path / "procmailrc"
    rc.write_text(f"MAILDIR={tmp_path}\nDEFAULT={tmp_path}/inbox/\nLOGFILE={tmp_path}/log\n"
                  f":0fw\n| {SPAMC} -p {daemon.port}\n\n"
                  ":0\n* ^X-Spam-Status: Yes\nspam/\n\n"
                  ":0\n* ^X-Spam-Status: Unsure\nunsure/\n")
    for path in MESSAGES:
        subprocess.run(["procmail", "-m", str(rc)], input=path.read_bytes(), check=True, timeout=60)
    spam = [p for p in MESSAGES if site_filter.classify(p.read_bytes()).label == "spam"]
    ham = [p for p in MESSAGES if site_filter.classify(p.read_bytes()).label == "ham"]
    assert len(list((tmp_path / "spam" / "new").iterdir())) == len(spam)
    assert len(list((tmp_path / "inbox" / "new").iterdir())) == len(ham)
    for delivered in (tmp_path / "spam" / "new").iterdir():
        assert b"X-Spam-Flag: YES" in delivered.read_bytes()


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


def test_the_check_after_a_tell_scores_the_model_the_tell_left(tmp_path, monkeypatch):
    """After a TELL the scoring model is made from the model the TELL kept
    loaded while the file and journal are still the ones it left, and read from
    the file otherwise; both score as the file + journal read afresh."""
    import shutil

    from spamnb.server import models
    from spamnb.model import learning

    spam = sorted((REPO / "corpora" / "spam").iterdir())
    ham = sorted((REPO / "corpora" / "easy_ham").iterdir())
    path = tmp_path / "m.spamnb"
    SpamFilter().fit([p.read_bytes() for p in spam[:8] + ham[:8]], [True] * 8 + [False] * 8).save(path)
    monkeypatch.setattr(models, "_kept", learning.Kept())
    probes = [p.read_bytes() for p in spam[40:45] + ham[40:45]]

    def scores(sf):
        return [(sf.classify(m).log_odds, [t for t, _ in sf.classify(m).evidence]) for m in probes]

    for message, as_spam, learn, remove in ((spam[10], True, True, False), (spam[10], False, True, False),
                                            (spam[10], None, False, True), (ham[3], None, False, True),
                                            (spam[11], True, True, False)):
        models.tell(str(path), message.read_bytes(), as_spam, learn, remove)
        copied = models._from_kept(str(path))
        fresh = models._scoring_only(SpamFilter.load(path))
        if message == ham[3]:    # tried as spam first, in vain: a session that failed is not kept
            assert copied is None
            continue
        assert [(pytest.approx(a, rel=1e-12, abs=1e-12), e) for a, e in scores(fresh)] == scores(copied)
    shutil.copyfile(path, tmp_path / "other.spamnb")
    os.utime(path, ns=(1, 1))                                 # another writer: the kept model is stale
    assert models._from_kept(str(path)) is None
