"""Learning shared through Redis (``--shared``, spamnb.shared): a real
redis-server started here on a loopback port, several ``spamnb serve``
processes each with its own model, TELLs through the real spamc."""

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, run_spamnb

REDIS_SERVER = shutil.which("redis-server") or ("/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server")
                                                else None)
needs_redis = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed (Debian redis-server)")
SPAMC = "/usr/bin/spamc" if os.path.exists("/usr/bin/spamc") else None
needs_spamc = pytest.mark.skipif(SPAMC is None, reason="spamc is not installed (Debian package spamc)")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """redis-server on a loopback port, its data in ``folder``; every write
    on disk before it is answered (appendonly, appendfsync always)."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.proc = None
        self.start()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
             "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no",
             "--protected-mode", "yes", "--logfile", str(self.folder / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port)


def _env(home):
    import spamnb

    env = dict(os.environ, SPAMNB_HOME=str(home), PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))
    env.pop("SPAMNB_DEBUG", None)
    return env


_RUNNING = []   # the hosts started by the test running: stopped at its end (fixture below)


class Host:
    """A ``spamnb serve --shared`` process with its own model directory."""

    def __init__(self, home, url, *extra, allow_tell=True):
        self.home, self.url, self.extra = Path(home), url, extra + (("--allow-tell",) if allow_tell else ())
        self.port = _free_port()
        self.start()

    def start(self):
        _RUNNING.append(self)
        self.log = open(self.home / "serve.log", "ab")
        self.log_start = self.log.tell()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{self.port}", "-m",
             str(self.home / "model.spamnb"), "--shared", self.url, "-w", "1", *self.extra],
            env=_env(self.home), stderr=self.log, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while "listening on" not in self.log_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"spamnb serve did not start: {self.log_text()}")
            time.sleep(0.05)

    def log_text(self):
        """What this run of the server logged."""
        self.log.flush()
        return (self.home / "serve.log").read_bytes()[self.log_start:].decode(errors="replace")

    def spamc(self, *args, stdin=b""):
        return subprocess.run([SPAMC, "-p", str(self.port), *map(str, args)], input=stdin, capture_output=True,
                              timeout=60)

    def position(self):
        try:
            return (self.home / "model.spamnb.shared" / "position").read_text().strip()
        except OSError:
            return None

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.log.close()
        _RUNNING.remove(self)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()


def unique_message(tag, n_words=30):
    words = " ".join(f"w{tag}x{i}" for i in range(n_words))
    return (f"From: someone{tag}@example.org\r\nSubject: note {tag}\r\nMessage-ID: <{tag}@example.org>\r\n\r\n"
            f"{words} shared common words\r\n").encode()


PROBES = ([p.read_bytes() for p in sorted((REPO / "corpora" / "spam").iterdir())[:15]]
          + [p.read_bytes() for p in sorted((REPO / "corpora" / "easy_ham").iterdir())[:15]])


def _log_odds(model):
    from spamnb.model.spam_filter import SpamFilter

    sf = SpamFilter.load(model)
    return [sf.classify(m, False).log_odds for m in PROBES + [unique_message(t) for t in range(40)]]


def _stream_lessons(redis_server):
    """The lessons on the stream, in its order: (flags, spam, message)."""
    from spamnb.shared.lessons import decode

    out = []
    for _id, fields in redis_server.client().xrange("spamnb:lessons"):
        lesson = decode(fields[b"r"])
        out.append((lesson.learn, lesson.forget, lesson.spam, lesson.message))
    return out


def _reference(base_model, lessons, folder):
    """The base model taught the lessons once, in order, as a local TELL does (no Redis)."""
    from spamnb.server.models import tell

    folder.mkdir()
    shutil.copy(base_model, folder / "model.spamnb")
    for learn, forget, spam, message in lessons:
        tell(str(folder / "model.spamnb"), message, spam, learn, forget)
    return folder / "model.spamnb"


def _wait_converged(redis_server, hosts, timeout=60):
    from spamnb.shared.host import stream_id

    last = redis_server.client().xrevrange("spamnb:lessons", count=1)
    if not last:
        return
    want = stream_id(last[0][0])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(h.position() and stream_id(h.position()) >= want for h in hosts):
            return
        time.sleep(0.1)
    raise AssertionError(f"hosts did not catch up: {[h.position() for h in hosts]} vs {want}")


def _assert_same(models, reference):
    expected = _log_odds(reference)
    for model in models:
        got = _log_odds(model)
        assert max(abs(a - b) for a, b in zip(got, expected)) <= 1e-9, model


@pytest.fixture
def redis_server(tmp_path):
    """A redis-server for the test; it and every host the test started are stopped at its end."""
    server = RedisServer(tmp_path / "redis")
    yield server
    while _RUNNING:
        _RUNNING.pop().stop()
    server.stop()


# ---------------------------------------------------------------------------- fast: the pieces
def test_lesson_round_trip_and_damage():
    from spamnb.shared.lessons import FORGET, LEARN, Lesson, decode, encode

    lesson = Lesson(LEARN | FORGET, True, "carol", unique_message("a"))
    data = encode(lesson)
    back = decode(data)
    assert (back.learn, back.forget, back.spam, back.user, back.message, back.digest, back.lesson_id) == (
        True, True, True, "carol", lesson.message, lesson.digest, lesson.lesson_id)
    for i in (0, 20, len(data) - 30, len(data) - 1):
        bad = bytearray(data)
        bad[i] ^= 1
        with pytest.raises(ValueError):
            decode(bytes(bad))
    with pytest.raises(ValueError):
        decode(data[:-1])


def test_a_lesson_is_the_documented_layout_and_every_bad_field_is_refused():
    """The layout of spamnb/shared/lessons.py's docstring, byte for byte; a lesson whose
    checksum holds but whose fields do not (a bug, or another version's writer) is refused."""
    import struct

    from spamnb.bayes.checks import checksum64
    from spamnb.estimator.ledger import message_digest
    from spamnb.shared.lessons import FORGET, LEARN, Lesson, decode, encode

    message = unique_message("layout")
    lesson = Lesson(FORGET, None, None, message, lesson_id=bytes(range(16)))
    assert (lesson.user, lesson.learn, lesson.forget, lesson.digest) == ("", False, True, message_digest(message))
    data = encode(lesson)
    assert data[:8] == b"SPAMNB\x00L" and struct.unpack_from("<HBBHH", data, 8) == (1, FORGET, 2, 0, 0)
    assert data[16:32] == bytes(range(16)) and data[32:48] == message_digest(message)
    assert struct.unpack_from("<II", data, 48) == (len(message), 0) and data[56:-8] == message
    assert struct.unpack("<Q", data[-8:])[0] == checksum64(data[:-8]) and len(data) == 56 + len(message) + 8
    back = decode(data)
    assert (back.flags, back.spam, back.user, back.learn, back.forget) == (FORGET, None, "", False, True)
    ham = decode(encode(Lesson(LEARN, False, "dave", message)))
    assert (ham.spam, ham.user, ham.learn, ham.forget) == (False, "dave", True, False)
    assert Lesson(LEARN, True, "", message).lesson_id != Lesson(LEARN, True, "", message).lesson_id

    def sealed(offset, fmt, value, body=data[:-8]):
        bad = bytearray(body)
        struct.pack_into(fmt, bad, offset, value)
        return bytes(bad) + struct.pack("<Q", checksum64(bytes(bad)))

    assert decode(sealed(8, "<H", 1)).message == message      # resealed unchanged: it decodes
    for offset, fmt, value in ((0, "<8s", b"SPAMNB\x00M"), (0, "<8s", b"SPAMNB\x00K"), (8, "<H", 2),
                               (8, "<H", 0), (10, "<B", 0), (10, "<B", 4), (10, "<B", 5), (11, "<B", 3),
                               (12, "<H", 1), (48, "<I", 1), (32, "<16s", bytes(16)), (32, "<16s", b"\xff" * 16)):
        with pytest.raises(ValueError):
            decode(sealed(offset, fmt, value))
    head = bytearray(data[:56])
    struct.pack_into("<I", head, 48, 10)            # a whole, checksummed lesson of 10 bytes, then more
    body = bytes(head) + message[:10]
    with pytest.raises(ValueError, match="wrong size"):
        decode(body + struct.pack("<Q", checksum64(body)) + b"more")
    named = decode(encode(Lesson(LEARN, True, "carolina", message)))     # a user name of 8 bytes
    assert (named.user, named.message) == ("carolina", message)
    # the largest message a lesson carries: 64 MiB
    big = b"x" * (64 * 1024 * 1024)
    assert len(decode(encode(Lesson(LEARN, True, "", big))).message) == len(big)
    head = bytearray(data[:56])
    struct.pack_into("<I", head, 48, len(big) + 1)
    body = bytes(head) + big + b"x"
    with pytest.raises(ValueError, match="wrong size"):
        decode(body + struct.pack("<Q", checksum64(body)))
    del big, body
    for n in (0, 55, 63):
        with pytest.raises(ValueError, match="cut short"):
            decode(data[:n])
    short = encode(Lesson(LEARN, True, "", b""))            # the shortest lesson: head and checksum only
    assert len(short) == 64 and decode(short).message == b""


def test_outbox_keeps_order_and_stops_at_the_first_failure(tmp_path):
    from spamnb.shared.outbox import Outbox

    box = Outbox(tmp_path / "outbox")
    for i in range(5):
        box.put(b"lesson %d" % i)
    sent = []

    def send(record):
        if record == b"lesson 3":
            raise ConnectionError("down")
        sent.append(record)

    with pytest.raises(ConnectionError):
        box.drain(send)
    assert sent == [b"lesson 0", b"lesson 1", b"lesson 2"] and len(box) == 2
    assert box.drain(sent.append) == 2 and sent[3:] == [b"lesson 3", b"lesson 4"] and len(box) == 0


@needs_redis
def test_a_lesson_sent_twice_is_added_once_and_order_is_kept(tmp_path, redis_server):
    from spamnb.shared.host import Sender
    from spamnb.shared.lessons import LEARN, Lesson, encode

    sender = Sender(redis_server.url, str(tmp_path / "state"))
    first, second = Lesson(LEARN, True, "", unique_message("1")), Lesson(LEARN, False, "", unique_message("2"))
    assert sender.send(first) is not None and sender.send(second) is not None
    # the host died after sending them from its outbox, before removing the files: sent again
    sender.outbox.put(encode(first))
    sender.outbox.put(encode(second))
    assert sender.drain() and len(sender.outbox) == 0
    # another sender (another process) is numbered on its own
    other = Sender(redis_server.url, str(tmp_path / "state2"))
    assert other.send(Lesson(LEARN, True, "", unique_message("3"))) is not None
    assert [m for *_, m in _stream_lessons(redis_server)] == [unique_message(t) for t in "123"]
    redis_server.kill()     # down: queued, acknowledged, then sent in order when it is back
    assert sender.send(Lesson(LEARN, True, "", unique_message("4"))) is None
    assert sender.send(Lesson(LEARN, True, "", unique_message("5"))) is None
    assert len(sender.outbox) == 2
    redis_server.start()
    assert sender.drain() and len(sender.outbox) == 0
    assert [m for *_, m in _stream_lessons(redis_server)] == [unique_message(t) for t in "12345"]


@needs_redis
def test_a_follower_applies_the_stream_in_order_by_user_and_resumes_at_its_position(tmp_path, redis_server):
    """spamnb.shared.host.Follower in this process against the real redis-server: consecutive
    lessons of one user in one apply, a damaged entry and a failing apply skipped (said), the
    position saved after each batch, a restarted follower applying only what came after."""
    from spamnb.shared.host import Follower, Sender, stream_id
    from spamnb.shared.lessons import LEARN, Lesson

    sender = Sender(redis_server.url, str(tmp_path / "sender"))
    told = [("alice", "1"), ("alice", "2"), ("bob", "3"), ("", "4"), ("alice", "5"), ("boom", "6"), ("bob", "7")]
    ids = []
    for n, (user, tag) in enumerate(told):
        if n == 3:
            redis_server.client().xadd("spamnb:lessons", {"r": b"not a lesson"})
        ids.append(sender.send(Lesson(LEARN, True, user, unique_message(tag))))
    applied, logged = [], []

    def apply(group):
        if group[0].user == "boom":
            raise RuntimeError("refused")
        applied.append([(lesson.user, lesson.message) for lesson in group])
        return [f"learned {lesson.message[-30:]!r}" for lesson in group]

    def follower():
        return Follower(redis_server.url, str(tmp_path / "follower"), apply, models=lambda: [],
                        model_for=lambda user: None, log=logged.append, snapshot_every=0, block_ms=100)

    first = follower()
    assert first.position is None and not first.applied(ids[0])
    started = time.monotonic()
    first.start(sync_timeout=60)
    assert time.monotonic() - started < 30       # caught up: it stops reading when the stream has no more
    try:
        assert first.connected is True
        m = {tag: unique_message(tag) for _, tag in told}
        assert applied == [[("alice", m["1"]), ("alice", m["2"])], [("bob", m["3"])], [("", m["4"])],
                           [("alice", m["5"])], [("bob", m["7"])]]
        assert first.position == ids[-1].decode() and first.applied(ids[-1]) and first.wait_applied(ids[-1], 0.1)
        assert (tmp_path / "follower" / "position").read_text().strip() == ids[-1].decode()
        assert sum("skipped" in line for line in logged) == 1
        assert sum("1 lesson(s) for boom not applied: RuntimeError: refused" in line for line in logged) == 1
        lessons = redis_server.client().xrange("spamnb:lessons")
        from spamnb.shared.lessons import decode

        outcome = {decode(f[b"r"]).lesson_id: first.outcomes.get(decode(f[b"r"]).lesson_id)
                   for _, f in lessons if f[b"r"] != b"not a lesson"}
        assert sorted(v for v in outcome.values() if v is not None) == sorted(
            f"learned {unique_message(t)[-30:]!r}" for u, t in told if u != "boom")
        assert list(outcome.values()).count(None) == 1
        later = str(stream_id(ids[-1])[0] + 10 ** 6) + "-0"
        started = time.monotonic()
        assert not first.wait_applied(later, 0.3) and time.monotonic() - started >= 0.29
        extra = sender.send(Lesson(LEARN, False, "carol", unique_message("8")))     # followed in the thread
        assert first.wait_applied(extra, 30)
        assert applied[-1] == [("carol", unique_message("8"))]
        redis_server.kill()             # said once, then followed again when it is back
        deadline = time.monotonic() + 30
        while not any("scoring goes on with the local models" in line for line in logged):
            assert time.monotonic() < deadline, logged
            time.sleep(0.05)
        redis_server.start()
        while not any("Redis reachable again" in line for line in logged):
            assert time.monotonic() < deadline + 30, logged
            time.sleep(0.05)
        assert sum("scoring goes on with the local models" in line for line in logged) == 1, logged
    finally:
        first.stop()
    count = len(applied)
    again = follower().start(sync_timeout=20)      # from its saved position: nothing applied twice
    try:
        assert again.position == extra.decode() and len(applied) == count
        last = sender.send(Lesson(LEARN, True, "dave", unique_message("9")))
        assert again.wait_applied(last, 30) and applied[count:] == [[("dave", unique_message("9"))]]
    finally:
        again.stop()


@needs_redis
def test_a_snapshot_carries_the_models_and_a_new_follower_starts_from_it(tmp_path, redis_server):
    from spamnb.shared.host import Follower, Sender
    from spamnb.shared.lessons import LEARN, Lesson

    sender = Sender(redis_server.url, str(tmp_path / "sender"))
    site, alice = tmp_path / "a" / "model.spamnb", tmp_path / "a" / "alice.spamnb"
    site.parent.mkdir()
    site.write_bytes(b"the site model")
    alice.write_bytes(b"alice's model")
    bob = tmp_path / "a" / "bob.spamnb"
    os.link(site, bob)                  # a new user's model: the site model's very file, linked
    (tmp_path / "a" / "alice.spamnb.journal").write_bytes(b"alice's journal")
    applied = []

    def apply(group):
        applied.extend(lesson.user for lesson in group)
        return [None] * len(group)

    publisher = Follower(redis_server.url, str(tmp_path / "pub"), apply,
                         models=lambda: [("", str(site)), ("bob", str(bob)), ("alice", str(alice)),
                                         ("gone", str(tmp_path / "none"))],
                         model_for=lambda user: None, snapshot_every=0, block_ms=100)
    assert publisher.publish_snapshot() is None            # no position yet: nothing to publish
    first = sender.send(Lesson(LEARN, True, "alice", unique_message("s1")))
    publisher.start(sync_timeout=20)
    publisher.stop()
    assert publisher.publish_snapshot() == first.decode()
    r = redis_server.client()
    assert r.hgetall("spamnb:snapshot") == {b"pos": first, b"m:": b"the site model", b"m:alice": b"alice's model",
                                            b"j:": b"", b"j:alice": b"alice's journal", b"m:bob": b"", b"j:bob": b""}
    assert r.get("spamnb:trimmed") is None
    second = sender.send(Lesson(LEARN, True, "bob", unique_message("s2")))
    publisher.start(sync_timeout=20)
    publisher.stop()
    assert publisher.publish_snapshot() == second.decode()
    assert r.get("spamnb:trimmed") == first and [i for i, _ in r.xrange("spamnb:lessons")] == [first, second]
    logged = []
    home = tmp_path / "b"
    where = {"": home / "model.spamnb", "alice": home / "users" / "alice.spamnb"}
    (home / "users").mkdir(parents=True)
    (home / "users" / "alice.spamnb.journal").write_bytes(b"an old journal")
    (home / "model.spamnb.journal").write_bytes(b"an old journal")
    late = Follower(redis_server.url, str(tmp_path / "late"), apply, models=lambda: [],
                    model_for=lambda user: str(where[user]) if user in where else None, log=logged.append,
                    snapshot_every=0, block_ms=100)
    late.start(sync_timeout=20)
    late.stop()
    assert late.position == second.decode() and applied == ["alice", "bob"]      # the snapshot, no lesson again
    assert where[""].read_bytes() == b"the site model" and where["alice"].read_bytes() == b"alice's model"
    assert (home / "users" / "alice.spamnb.journal").read_bytes() == b"alice's journal"    # the snapshot's
    assert not (home / "model.spamnb.journal").exists()          # none in the snapshot: the old one discarded
    assert any("started from the snapshot at " + second.decode() + " (2 models" in line for line in logged), logged


def test_bad_shared_url_is_one_line_and_exit_64(tmp_path):
    proc = run_spamnb(["serve", "-l", f"127.0.0.1:{_free_port()}", "--shared", "http://x", "-m",
                       tmp_path / "m.spamnb"], home=tmp_path, text=True, timeout=60)
    assert proc.returncode == 64 and "redis://HOST:PORT/DB" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_without_shared_nothing_of_it_is_imported():
    code = ("import sys, spamnb.cli.main, spamnb.cli.serve, spamnb.server.launch, spamnb.server.daemon;"
            "from spamnb.settings import ServerSettings; ServerSettings({'listen': ['127.0.0.1:7830']});"
            "bad = [m for m in sys.modules if m == 'redis' or m.startswith('spamnb.shared')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(REPO), timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_shared_runs_one_worker():
    from spamnb.settings import ServerSettings as Settings, SettingsError

    url = "redis://127.0.0.1:1/0"
    assert Settings({"shared": url}).workers == 1
    with pytest.raises(SettingsError, match="-w 1"):
        Settings({"shared": url, "workers": "2"})


# ---------------------------------------------------------------------------- three hosts
@pytest.fixture(scope="module")
def base_model(sample_model):
    return sample_model     # copied into each host's home, never changed in place


def _hosts(tmp_path, base_model, url, n, *extra):
    hosts = []
    for i in range(n):
        home = tmp_path / f"host{i}"
        home.mkdir()
        shutil.copy(base_model, home / "model.spamnb")
        hosts.append(Host(home, url, *extra))
    return hosts


def _publisher(home, base_model, url, *extra):
    """A host publishing a snapshot every second, once it published two (the
    stream is then trimmed below the first)."""
    home.mkdir()
    shutil.copy(base_model, home / "model.spamnb")
    host = Host(home, url, "--snapshot-interval", "1", *extra)
    deadline = time.monotonic() + 30
    while "stream trimmed" not in host.log_text():
        assert time.monotonic() < deadline, host.log_text()
        time.sleep(0.1)
    return host


def _lessons(rng, n):
    """(class, message): new messages, repeats and relabels."""
    told = []
    for i in range(n):
        roll = rng.random()
        if told and roll < 0.15:
            told.append(rng.choice(told))                      # told again: known
        elif told and roll < 0.3:
            kind, message = rng.choice(told)
            told.append(("ham" if kind == "spam" else "spam", message))   # relabelled
        else:
            told.append((rng.choice(("spam", "ham")), unique_message(f"{rng.random():.12f}"[2:])))
    return told


@pytest.mark.slow
@needs_redis
@needs_spamc
def test_three_hosts_converge_and_survive_kills(tmp_path, base_model, redis_server):
    hosts = _hosts(tmp_path, base_model, redis_server.url, 3, "--snapshot-interval", "0")
    # an MX host: it scans and follows, it takes no TELL
    (tmp_path / "mx").mkdir()
    shutil.copy(base_model, tmp_path / "mx" / "model.spamnb")
    mx = Host(tmp_path / "mx", redis_server.url, "--snapshot-interval", "0", allow_tell=False)
    rng = random.Random(39)
    acknowledged = []
    for kind, message in _lessons(rng, 40):
        host = rng.choice(hosts)
        proc = host.spamc("-L", kind, stdin=message)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        acknowledged.append((kind, message))
    _wait_converged(redis_server, hosts + [mx])
    # the answer key is what the test told, in order (one TELL at a time), not what the stream holds
    told = [(True, False, kind == "spam", message) for kind, message in acknowledged]
    assert _stream_lessons(redis_server) == told
    _assert_same([h.home / "model.spamnb" for h in hosts + [mx]],
                 _reference(base_model, told, tmp_path / "ref1"))
    # a lesson told on one host is scored on the others
    probe = unique_message("visible")
    before = [h.spamc("-c", stdin=probe).stdout for h in hosts + [mx]]
    assert hosts[0].spamc("-L", "spam", stdin=probe).returncode == 0
    _wait_converged(redis_server, hosts + [mx])
    after = [h.spamc("-c", stdin=probe).stdout for h in hosts + [mx]]
    assert all(a != b for a, b in zip(after, before)) and len(set(after)) == 1

    # SIGKILL a host while lessons flow, and redis-server too; restart both
    victim = hosts[1]
    for i, (kind, message) in enumerate(_lessons(rng, 30)):
        if i == 10:
            victim.kill()
        if i == 20:
            redis_server.kill()
        if i == 25:
            redis_server.start()
        alive = [h for h in hosts if h is not victim]
        proc = rng.choice(alive).spamc("-L", kind, stdin=message)
        assert proc.returncode == 0, proc.stdout + proc.stderr   # queued in the outbox while Redis is down
        acknowledged.append((kind, message))
    victim.start()
    deadline = time.monotonic() + 60
    while sum(1 for _ in _stream_lessons(redis_server)) < len(acknowledged) + 1:   # the outboxes drain
        assert time.monotonic() < deadline, "queued lessons never reached Redis"
        time.sleep(0.2)
    _wait_converged(redis_server, hosts + [mx])
    lessons = _stream_lessons(redis_server)
    assert len(lessons) == len(acknowledged) + 1        # every acknowledged lesson, once
    assert sorted(m for *_, m in lessons) == sorted([m for _, m in acknowledged] + [probe])
    # each as told (the order across hosts is the stream's: lessons queued while Redis was down)
    assert sorted(lessons) == sorted([(True, False, kind == "spam", m) for kind, m in acknowledged]
                                     + [(True, False, True, probe)])
    _assert_same([h.home / "model.spamnb" for h in hosts + [mx]],
                 _reference(base_model, lessons, tmp_path / "ref2"))
    # what the servers score with: a relabel folds a follower's journal in (a whole save, issue 51), which
    # its workers read again in the background, as after any compaction, serving the model before meanwhile
    deadline = time.monotonic() + 60
    for message in PROBES[:5] + [m for _, m in acknowledged[-5:]]:
        while len({h.spamc("-c", stdin=message).stdout for h in hosts + [mx]}) != 1:
            assert time.monotonic() < deadline, "the servers score apart"
            time.sleep(0.2)


@pytest.mark.slow
@needs_redis
@needs_spamc
def test_late_host_starts_from_the_snapshot_and_the_tail(tmp_path, base_model, redis_server):
    hosts = _hosts(tmp_path, base_model, redis_server.url, 2, "--snapshot-interval", "0")
    rng = random.Random(7)
    for kind, message in _lessons(rng, 20):
        assert rng.choice(hosts).spamc("-L", kind, stdin=message).returncode == 0
    _wait_converged(redis_server, hosts)
    down = hosts[1]
    down.kill()             # down while lessons go on and the stream is trimmed past its position
    for kind, message in _lessons(rng, 5):
        assert hosts[0].spamc("-L", kind, stdin=message).returncode == 0
    # a host publishing snapshots on a schedule joins
    hosts.append(_publisher(tmp_path / "publisher", base_model, redis_server.url))
    r = redis_server.client()
    assert r.xlen("spamnb:lessons") == 1      # trimmed to the snapshots' last lesson (no lesson between them)
    assert r.hget("spamnb:snapshot", "pos") == r.get("spamnb:trimmed")
    assert "started from the snapshot" not in hosts[0].log_text()   # it had the whole stream
    down.start()
    assert "started from the snapshot" in down.log_text()   # its position was trimmed away
    # a running host left behind (stopped, not killed) while the stream is trimmed past it
    behind = hosts[0]
    behind.proc.send_signal(signal.SIGSTOP)
    try:
        for kind, message in _lessons(rng, 5):
            assert down.spamc("-L", kind, stdin=message).returncode == 0
        from spamnb.shared.host import stream_id

        deadline = time.monotonic() + 30
        while stream_id(r.get("spamnb:trimmed")) <= stream_id(behind.position()):
            assert time.monotonic() < deadline, "the stream was not trimmed past the stopped host"
            time.sleep(0.1)
    finally:
        behind.proc.send_signal(signal.SIGCONT)
    _wait_converged(redis_server, hosts)
    assert "trimmed past this host's position" in behind.log_text()
    for kind, message in _lessons(rng, 10):   # the tail after the snapshot
        assert rng.choice(hosts).spamc("-L", kind, stdin=message).returncode == 0
    late_home = tmp_path / "late"
    late_home.mkdir()
    shutil.copy(base_model, late_home / "model.spamnb")   # an old model: the snapshot replaces it
    late = Host(late_home, redis_server.url, "--snapshot-interval", "0")
    hosts.append(late)
    assert "started from the snapshot" in late.log_text()
    _wait_converged(redis_server, hosts)
    expected = _log_odds(hosts[0].home / "model.spamnb")
    for h in hosts[1:]:
        got = _log_odds(h.home / "model.spamnb")
        assert max(abs(a - b) for a, b in zip(got, expected)) <= 1e-9


@pytest.mark.slow
@needs_redis
@needs_spamc
def test_learn_and_forget_commands_send_lessons_and_queue_while_redis_is_down(tmp_path, base_model, redis_server):
    hosts = _hosts(tmp_path, base_model, redis_server.url, 1, "--snapshot-interval", "0")
    model = hosts[0].home / "model.spamnb"
    first, second = unique_message("cli-one"), unique_message("cli-two")
    (tmp_path / "one.eml").write_bytes(first)
    (tmp_path / "two.eml").write_bytes(second)
    before = hosts[0].spamc("-c", stdin=first).stdout
    proc = run_spamnb(["learn", "--spam", "--shared", redis_server.url, "-m", model, tmp_path / "one.eml"],
                      home=hosts[0].home, text=True, timeout=120)
    assert proc.returncode == 0 and "sent 1 lesson" in proc.stdout, proc.stderr
    _wait_converged(redis_server, hosts)
    assert hosts[0].spamc("-c", stdin=first).stdout != before      # the server learned it from the stream
    redis_server.kill()
    (tmp_path / "settings.toml").write_text(f'shared = "{redis_server.url}"\n')     # as a setting this time
    proc = run_spamnb(["learn", "--ham", "--settings", tmp_path / "settings.toml", "-m", model, tmp_path / "two.eml"],
                      home=hosts[0].home, text=True, timeout=120)
    assert proc.returncode == 0 and "1 queued" in proc.stdout, proc.stdout + proc.stderr
    proc = run_spamnb(["forget", "--shared", redis_server.url, "-m", model, tmp_path / "one.eml"],
                      home=hosts[0].home, text=True, timeout=120)
    assert proc.returncode == 0 and "1 queued" in proc.stdout, proc.stdout + proc.stderr
    redis_server.start()
    deadline = time.monotonic() + 60
    while len(_stream_lessons(redis_server)) < 3:       # the server sends the outbox, in order
        assert time.monotonic() < deadline, hosts[0].log_text()
        time.sleep(0.2)
    _wait_converged(redis_server, hosts)
    lessons = _stream_lessons(redis_server)
    assert [(learn, forget, spam) for learn, forget, spam, _ in lessons] == [
        (True, False, True), (True, False, False), (False, True, None)]
    _assert_same([model], _reference(base_model, lessons, tmp_path / "ref"))
    from spamnb.estimator.ledger import canonical, message_digest
    from spamnb.estimator.ledger_table import ledger_of
    from spamnb.model.spam_filter import SpamFilter

    ledger = ledger_of(SpamFilter.load(model))
    assert ledger.label(message_digest(canonical(first))) is None       # forgotten
    assert ledger.label(message_digest(canonical(second))) is False     # learned as ham


@pytest.mark.slow
@needs_redis
@needs_spamc
def test_user_models_are_shared_by_user_and_in_the_snapshot(tmp_path, base_model, redis_server):
    hosts = []
    for i in range(2):
        home = tmp_path / f"host{i}"
        home.mkdir()
        shutil.copy(base_model, home / "model.spamnb")
        hosts.append(Host(home, redis_server.url, "--snapshot-interval", "0",
                          "--models-dir", home / "users", "--create-user-models"))
    rng = random.Random(3)
    for kind, message in _lessons(rng, 16):
        user = rng.choice(("alice", "bob"))
        assert rng.choice(hosts).spamc("-L", kind, "-u", user, stdin=message).returncode == 0
    # carol: told once, her model is the site model's file with a journal of its own
    assert hosts[1].spamc("-L", "spam", "-u", "carol", stdin=unique_message("carol")).returncode == 0
    _wait_converged(redis_server, hosts)
    hosts.append(_publisher(tmp_path / "publisher", base_model, redis_server.url, "--models-dir",
                            tmp_path / "publisher" / "users", "--create-user-models"))
    home = tmp_path / "late"
    home.mkdir()
    hosts.append(Host(home, redis_server.url, "--snapshot-interval", "0", "--models-dir", home / "users"))
    assert "started from the snapshot" in hosts[-1].log_text()
    for user in ("alice", "bob", "carol"):
        models = [h.home / "users" / user / "model.spamnb" for h in hosts]
        assert all(m.exists() for m in models), user
        expected = _log_odds(models[0])
        for m in models[1:]:
            assert max(abs(a - b) for a, b in zip(_log_odds(m), expected)) <= 1e-9, (user, m)
    site = [_log_odds(h.home / "model.spamnb") for h in hosts]
    assert all(s == site[0] for s in site)          # the site model learned nothing of the users'
    assert site[0] == _log_odds(base_model)


@pytest.mark.parametrize("again", [1, 2, 3, 5, 8])
def test_lessons_applied_again_after_a_crash_change_nothing(tmp_path, base_model, again):
    """A host killed after applying a batch and before saving its position
    applies the batch's last lessons again on restart (through the ledger,
    forgets through the ledger only): the model is the one applying them once gives."""
    from spamnb.server.models import tell, tell_many

    a, b, c = unique_message("again-a"), unique_message("again-b"), unique_message("again-c")
    d = PROBES[0]       # a spam the base model was trained on: forgetting it again could subtract it
    batch = [(a, True, True, False), (b, False, True, False), (a, False, True, False),    # a relabelled
             (b, None, False, True), (c, True, True, False), (c, None, False, True),      # b, c forgotten
             (d, True, True, False), (d, None, False, True)]
    once, twice, each = tmp_path / "once.spamnb", tmp_path / "twice.spamnb", tmp_path / "each.spamnb"
    for path in (once, twice, each):
        shutil.copy(base_model, path)
    tell_many(str(once), batch, ledger_only=True)
    tell_many(str(twice), batch, ledger_only=True)
    tell_many(str(twice), batch[-again:], ledger_only=True)
    # the answer key: the batch applied once, a lesson at a time through `tell` (not tell_many)
    for message, spam, learn, remove in batch:
        tell(str(each), message, spam, learn, remove, ledger_only=True)
    expected = _log_odds(each)
    assert max(abs(x - y) for x, y in zip(expected, _log_odds(base_model))) > 1e-3   # the batch changed it
    for model in (once, twice):
        assert max(abs(x - y) for x, y in zip(_log_odds(model), expected)) <= 1e-9, model.name


@needs_redis
def test_a_running_follower_publishes_on_schedule_goes_idle_and_installs_a_snapshot_past_its_position(
        tmp_path, redis_server):
    """Follower in this process against the real redis-server: with
    ``snapshot_every`` it publishes a snapshot of its own accord, not before
    the interval (and takes the snapshot lock for it); ``idle()`` runs when
    nothing comes; it keeps the outcomes of the last 1,024 lessons; a stream
    trimmed past a running follower's position makes it install the newest
    snapshot (said in one line, "1 model"); a follower started with Redis
    down says so and is not connected."""
    from spamnb.shared.host import SNAPSHOT, SNAPSHOT_LOCK, TRIMMED, Follower, Sender
    from spamnb.shared.lessons import LEARN, Lesson

    r = redis_server.client()
    sender = Sender(redis_server.url, str(tmp_path / "sender"))
    site = tmp_path / "a" / "model.spamnb"
    site.parent.mkdir()
    site.write_bytes(b"the site model")
    idle, logged = [], []

    def apply(group):
        return [f"did {lesson.message[-12:]!r}" for lesson in group]

    ids = [sender.send(Lesson(LEARN, True, "", unique_message(f"o{n}", 3))) for n in range(1030)]
    started = time.monotonic()
    pub = Follower(redis_server.url, str(tmp_path / "pub"), apply, models=lambda: [("", str(site))],
                   model_for=lambda user: None, log=logged.append, snapshot_every=1.0, block_ms=100,
                   idle=lambda: idle.append(1))
    pub.start(sync_timeout=60)
    try:
        assert pub.connected is True and pub.position == ids[-1].decode()
        assert len(pub.outcomes) == 1024 and list(pub.outcomes)[-1] != list(pub.outcomes)[0]
        from spamnb.shared.lessons import decode

        lesson_ids = [decode(f[b"r"]).lesson_id for _, f in r.xrange("spamnb:lessons")]
        assert list(pub.outcomes) == lesson_ids[-1024:]
        assert pub.outcomes[lesson_ids[-1]] == apply([decode(r.xrange("spamnb:lessons")[-1][1][b"r"])])[0]
        while time.monotonic() - started < 0.8:
            assert r.hget(SNAPSHOT, "pos") is None, "a snapshot before the interval"
            time.sleep(0.05)
        deadline = time.monotonic() + 30
        while r.hget(SNAPSHOT, "pos") != ids[-1]:
            assert time.monotonic() < deadline, logged
            time.sleep(0.05)
        assert time.monotonic() - started >= 1.0
        assert r.hget(SNAPSHOT, "m:") == b"the site model"
        assert 0 < r.ttl(SNAPSHOT_LOCK) <= 1
        while not idle:
            assert time.monotonic() < deadline, "idle() never called"
            time.sleep(0.05)
    finally:
        pub.stop()
    assert any(f"shared: snapshot published at {ids[-1].decode()}" in line for line in logged), logged

    home = tmp_path / "b"
    follower = Follower(redis_server.url, str(tmp_path / "follow"), apply, models=lambda: [],
                        model_for=lambda user: str(home / "model.spamnb") if user == "" else None,
                        log=logged.append, snapshot_every=0, block_ms=100)
    follower.start(sync_timeout=60)
    try:
        assert follower.position == ids[-1].decode()
        ahead = "99999999999999-0"        # the stream trimmed past the position while it runs
        r.hset(SNAPSHOT, mapping={"pos": ahead, "m:": b"a newer site model", "j:": b""})
        r.set(TRIMMED, ahead)
        assert follower.wait_applied(ahead, 30), logged
        assert (home / "model.spamnb").read_bytes() == b"a newer site model"
    finally:
        follower.stop()
    assert any(f"trimmed past this host's position {ids[-1].decode()}" in line for line in logged), logged
    assert any(f"started from the snapshot at {ahead} (1 model, " in line for line in logged), logged

    from spamnb.settings import SERVER_DEFAULTS
    from spamnb.shared.host import LESSON_OVERHEAD

    logged.clear()      # bookkeeping that is not a stream id: ignored, said once per value, at most 64 bytes read
    r.set(TRIMMED, b"garbage")
    r.hset(SNAPSHOT, "pos", b"x" * 64)
    assert follower.bookkeeping(TRIMMED) is None and follower.bookkeeping(SNAPSHOT, "pos") is None
    r.hset(SNAPSHOT, "pos", b"x" * 65)
    assert follower.bookkeeping(SNAPSHOT, "pos") is None and follower.bookkeeping(TRIMMED) is None
    assert logged == ["shared: spamnb:trimmed holds b'garbage', not a stream id: ignored",
                      f"shared: spamnb:snapshot pos holds {b'x' * 64!r}, not a stream id: ignored",
                      "shared: spamnb:snapshot pos holds b'(longer than 64 bytes)', not a stream id: ignored"], logged
    assert follower.max_entry == SERVER_DEFAULTS["max_size"] + LESSON_OVERHEAD     # the server's --max-size

    down = Follower(f"redis://127.0.0.1:{_free_port()}/0", str(tmp_path / "down"), apply, models=lambda: [],
                    model_for=lambda user: None, log=logged.append, snapshot_every=0, block_ms=100)
    down.start(sync_timeout=5)
    try:
        assert down.connected is False
        assert any("Redis unreachable at start" in line for line in logged), logged
    finally:
        down.stop()


@pytest.mark.slow   # over 6 s in the default run: CI runs it in the slow step
def test_a_quiet_follower_waits_between_reads_and_a_redis_that_hangs_times_out_after_the_wait_and_5_s(
        tmp_path, redis_server):
    """With no lessons a running Follower reads the stream once at the start
    of each wait of ``block_ms`` and then every POLL_QUIET (0.2 s) once none
    came for a second: idle() comes once per wait, never sooner, and the
    read script runs a few times a wait, not every 10 ms (nor without a
    pause).  Its Redis client gives up on a Redis that accepts and never
    answers after ``block_ms`` plus 5 s (a read's wait, then its answer),
    not before."""
    import redis

    from spamnb.shared.host import POLL_QUIET, TRIMMED, Follower

    r = redis_server.client()
    block = 0.3
    idle = []
    follower = Follower(redis_server.url, str(tmp_path / "f"), lambda group: [], models=lambda: [],
                        model_for=lambda user: None, snapshot_every=0, block_ms=int(block * 1000),
                        idle=lambda: idle.append((time.monotonic(), _script_calls(r))))
    follower.start(sync_timeout=30)
    try:
        deadline = time.monotonic() + 60
        while len(idle) < 8:
            assert time.monotonic() < deadline, idle
            time.sleep(0.05)
        waits = idle[:8]            # (a wait cut short by stop() also ends in idle())
    finally:
        follower.stop()
    times = [t for t, _ in waits]
    assert min(b - a for a, b in zip(times, times[1:])) >= block, str([round(b - a, 3) for a, b in zip(times, times[1:])])
    # from the 5th wait on, the last lesson (none: the start) is over a second old: quiet polling
    assert times[4] - follower.last_lesson > 1.0
    reads = (waits[7][1] - waits[4][1]) / 3
    assert 1 <= reads <= block / POLL_QUIET + 2, reads

    hang = socket.create_server(("127.0.0.1", 0))      # accepts (the kernel's backlog), never answers
    try:
        stuck = Follower(f"redis://127.0.0.1:{hang.getsockname()[1]}/0", str(tmp_path / "g"), lambda group: [],
                         models=lambda: [], model_for=lambda user: None, snapshot_every=0, block_ms=100)
        assert stuck.redis.connection_pool.connection_kwargs["socket_timeout"] == pytest.approx(5.1)
        started = time.monotonic()
        with pytest.raises(redis.TimeoutError):
            stuck.bookkeeping(TRIMMED)
        assert 5.1 <= time.monotonic() - started < 60
    finally:
        hang.close()


def _script_calls(r):
    """How many times Redis ran a script (EVALSHA, and EVAL for a script it did not have)."""
    stats = r.info("commandstats")
    return sum(stats.get(name, {}).get("calls", 0) for name in ("cmdstat_evalsha", "cmdstat_eval"))
