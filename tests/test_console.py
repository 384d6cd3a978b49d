"""The web console (``spamnb serve --ui``, spamnb.console) without a browser:
its history store, users and sessions, the worker's record queue, and a
real server (SPAMD through the real ``spamc``) whose console is driven over
HTTP: login, CSRF and Origin checks, roles, a user's own rows, the login
rate limit and its log line, a learn that changes what ``spamc -c``
answers within a second on two workers.  The browser tests are in
tests/test_console_browser.py."""

import asyncio
import html
import http.client
import json
import random
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spamnb import SpamFilter
from spamnb.console import records
from spamnb.console.auth import MAX_FAILURES, LoginLimiter, Sessions, Users, hash_password, verify
from spamnb.console.history import History

from test_serve import SPAMC, _env, _free_port, needs_spamc

REPO = Path(__file__).resolve().parents[1]
USERS = {"admin": "admin", "viewer": "viewer", "trainer": "trainer", "bob": "user", "carol": "user"}
pytest.importorskip("h11")


# ---------------------------------------------------------------------------- a model and a server
def words(rng, n, prefix):
    return " ".join(prefix + "".join(rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(3))
                    for _ in range(n))


def mail(rng, spam, n, subject=None, user_words=""):
    body = words(rng, 60, "sp" if spam else "hm") + " " + user_words
    return (f"From: {'Offers <deals@spam.example>' if spam else 'Ann <ann@work.example>'}\n"
            f"To: bob@test.example\nSubject: {subject or ('cheap offer ' if spam else 'meeting ') + str(n)}\n"
            f"Message-ID: <{n}.{spam}@test.example>\n\n{body}\n").encode()


def train(path):
    rng = random.Random(7)
    data = [(mail(rng, n % 2 == 0, n), n % 2 == 0) for n in range(200)]
    SpamFilter().fit([d for d, _ in data], [s for _, s in data], tune=False).save(path)
    return path


def users_file(path):
    path.write_text("".join(f"{name} {role} {hash_password(name + '-pw', params=(2 ** 10, 8, 1))}\n"
                            for name, role in USERS.items()))
    return path


class ConsoleServer:
    """``spamnb serve --ui`` on loopback ports (SPAMD, milter, console)."""

    def __init__(self, home, *extra, workers=1, keep=100):
        self.home = Path(home)
        self.port, self.ui, self.milter = _free_port(), _free_port(), _free_port()
        if not (self.home / "model.spamnb").exists():
            train(self.home / "model.spamnb")
        users_file(self.home / "users")
        self.log_path = self.home / f"serve-{self.port}.log"
        self.log = open(self.log_path, "wb+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{self.port}", "--milter",
             f"127.0.0.1:{self.milter}", "-m", str(self.home / "model.spamnb"), "--allow-tell",
             "--ui", str(self.ui), "--ui-users", str(self.home / "users"), "--ui-keep-messages", str(keep),
             "--workers", str(workers), *map(str, extra)],
            env=_env(home), stderr=self.log, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            text = self.log_text()
            if "listening on" in text and "console on" in text and self._up(self.ui) and self._up(self.port):
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"spamnb serve --ui did not start: {text}")
            time.sleep(0.05)
        self.base = f"http://127.0.0.1:{self.ui}"

    @staticmethod
    def _up(port):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    def log_text(self):
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def spamc(self, *args, stdin=b""):
        return subprocess.run([SPAMC, "-p", str(self.port), *map(str, args)], input=stdin, capture_output=True,
                              timeout=30)

    def console_pid(self):
        return int(re.search(r"console on \S+ \(pid (\d+)\)", self.log_text()).group(1))

    def stop(self):
        """SIGTERM, then SIGKILL after 20 s; the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            self.log.close()


class Client:
    """An HTTP client of the console with its cookie and CSRF token."""

    def __init__(self, server):
        self.server = server
        self.cookie = None
        self.csrf = None

    def request(self, method, path, body=None, headers=None, csrf=True, origin=True):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.ui, timeout=30)
        head = {"Content-Type": "application/json"}
        if self.cookie:
            head["Cookie"] = self.cookie
        if method == "POST" and csrf and self.csrf:
            head["X-CSRF-Token"] = self.csrf
        if method == "POST" and origin:
            head["Origin"] = self.server.base
        head.update(headers or {})
        conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=head)
        answer = conn.getresponse()
        data = answer.read()
        conn.close()
        cookie = answer.getheader("Set-Cookie")
        if cookie:
            self.cookie = cookie.split(";", 1)[0]
        try:
            value = json.loads(data) if data else None
        except ValueError:
            value = data
        return answer.status, value, answer

    def login(self, name, password=None):
        status, value, answer = self.request("POST", "/api/v1/login",
                                             {"user": name, "password": password or name + "-pw"})
        if status == 200:
            self.csrf = value["csrf"]
        return status, value, answer


def wait_rows(client, n, timeout=20.0, **filters):
    query = "&".join(f"{k}={v}" for k, v in filters.items())
    deadline = time.monotonic() + timeout
    while True:
        status, value, _ = client.request("GET", f"/api/v1/history?limit=200&{query}")
        assert status == 200, value
        if len(value["rows"]) >= n or time.monotonic() > deadline:
            return value["rows"]
        time.sleep(0.05)


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    if SPAMC is None:
        pytest.skip("spamc is not installed (Debian package spamc)")
    server = ConsoleServer(tmp_path_factory.mktemp("console"))
    yield server
    server.stop()


# ---------------------------------------------------------------------------- units
def test_history_is_bounded_by_rows_and_searches_subject_and_sender(tmp_path):
    history = History(str(tmp_path / "h.sqlite"), rows=50, kept=5)
    for n in range(120):
        history.add([({"label": "spam" if n % 2 else "ham", "user": "bob" if n % 3 else "carol", "t": time.time()},
                      f"From: Sender {n} <s{n}@x.example>\nSubject: topic{n} \"quoted\" OR *\n".encode(),
                      b"kept message" if n % 2 else b"")])
    assert history.db.execute("SELECT count(*) FROM history").fetchone()[0] == 50
    assert history.db.execute("SELECT count(*) FROM kept").fetchone()[0] == 5
    assert [row["subject"] for row in history.page(query="topic119")] == ['topic119 "quoted" OR *']
    assert history.page(query='"quoted" OR *') and history.page(query="s100@x.example")
    assert all(row["user"] == "carol" for row in history.page(user="carol", limit=200))
    first = history.page(limit=10)
    second = history.page(limit=10, before=first[-1]["id"])
    assert [r["id"] for r in second] == list(range(first[-1]["id"] - 1, first[-1]["id"] - 11, -1))


def test_rows_are_stored_without_the_search_index_and_a_search_finds_every_one(tmp_path):
    """A store pays nothing for the full-text index (the rows wait for it);
    a search made at once, by this connection or another process's, finds
    every row stored; the recorder's idle indexing goes part of the way;
    rows pruned leave the index whether they were indexed or not."""
    path = str(tmp_path / "h.sqlite")
    history = History(path, rows=50, kept=0)

    def add(numbers):
        history.add([({"label": "ham", "t": time.time()},
                      f"From: Sender {n} <s{n}@x.example>\nSubject: topic{n} common\n".encode(), b"")
                     for n in numbers])

    add(range(1, 31))
    assert history.pending() == 30       # stored, not indexed
    other = History(path, rows=50, kept=0)      # the console's connection: its search indexes them first
    assert [row["id"] for row in other.page(query="topic30")] == [30]
    assert history.pending() == 0
    add(range(31, 71))          # rows 1 to 20 pruned (indexed), 31 to 70 wait
    assert history.pending() == 40
    assert history.index(15) == 15 and history.pending() == 25
    add(range(71, 81))          # rows 21 to 30 pruned (indexed), 31 to 45 (indexed) and 46 to 80 kept
    assert [row["id"] for row in history.page(query="s80@x.example")] == [80]
    assert history.page(query="topic25") == [] and history.page(query="topic5") == []
    assert [row["id"] for row in other.page(query="common", limit=200)] == list(range(80, 30, -1))
    add(range(81, 131))         # everything before 81 pruned, 81 to 130 not indexed yet
    assert history.pending() == 50
    assert history.index(1000) == 50 and history.index() == 0
    history.db.execute("INSERT INTO history_fts (history_fts) VALUES ('integrity-check')")   # the index is the rows
    assert [row["id"] for row in history.page(query="common", limit=200)] == list(range(130, 80, -1))
    other.close()


def test_a_history_emptied_by_its_age_bound_finds_the_rows_that_come_after(tmp_path):
    """Every row past its age: the table is empty and SQLite gives the next
    rows ids from 1 again, below the search index's mark; they are indexed
    and found all the same, and the index stays the rows'."""
    history = History(str(tmp_path / "h.sqlite"), rows=10, days=1.0)
    history.add([({"label": "ham", "t": time.time()}, f"Subject: old{n}\n".encode(), b"") for n in range(20)])
    assert [row["id"] for row in history.page(query="old15")] == [16]
    history.last_age_prune = 0.0
    history.prune(now=time.time() + 3 * 86400)
    assert history.db.execute("SELECT count(*) FROM history").fetchone()[0] == 0
    history.add([({"label": "ham", "t": time.time() + 3 * 86400}, b"Subject: new1\n", b"")])
    assert [row["subject"] for row in history.page(query="new1")] == ["new1"]
    assert history.page(query="old15") == []
    history.db.execute("INSERT INTO history_fts (history_fts) VALUES ('integrity-check')")


def test_a_history_written_before_columnsize_0_gets_its_search_index_made_again(tmp_path):
    """A history file whose full-text index was made with a row of column
    sizes a record (before columnsize=0) is opened with the index made again
    from its rows: a search finds what it found, and rows pruned after leave
    the index too (an external-content index is told of them by their own
    subject and sender)."""
    path = str(tmp_path / "h.sqlite")
    history = History(path, rows=30, kept=0)
    for n in range(40):
        history.add([({"label": "spam", "t": time.time()},
                      f"From: Sender {n} <s{n}@x.example>\nSubject: topic{n} word{n % 4}\n".encode(), b"")])
    before = {q: [row["id"] for row in history.page(query=q, limit=200)] for q in ("word1", "topic35", "s39@x.example")}
    with history.db:     # the index as it was made before
        history.db.execute("DROP TABLE history_fts")
        history.db.execute("CREATE VIRTUAL TABLE history_fts USING fts5(subject, sender, content='history',"
                           " content_rowid='id')")
        history.db.execute("INSERT INTO history_fts (history_fts) VALUES ('rebuild')")
    history.close()
    again = History(path, rows=30, kept=0)
    sql = again.db.execute("SELECT sql FROM sqlite_master WHERE name = 'history_fts'").fetchone()[0]
    assert "columnsize=0" in sql
    assert {q: [row["id"] for row in again.page(query=q, limit=200)] for q in before} == before
    assert len(before["word1"]) == 7
    for n in range(40, 70):
        again.add([({"label": "ham", "t": time.time()}, f"Subject: later{n} word1\n".encode(), b"")])
    assert [row["subject"] for row in again.page(query="topic35")] == []
    assert [row["id"] for row in again.page(query="word1", limit=200)] == list(range(70, 40, -1))
    assert again.page(query="topic39") == []
    again.db.execute("INSERT INTO history_fts (history_fts) VALUES ('integrity-check')")   # the index is the rows


def test_an_older_historys_search_index_is_made_again_once_by_two_processes_opening_it(tmp_path):
    """The console and the recorder open the history together: one makes
    the index again, the other waits for it; both search with it."""
    import multiprocessing

    path = str(tmp_path / "h.sqlite")
    history = History(path, rows=100_000, kept=0)
    history.add([({"label": "ham", "t": time.time()}, f"Subject: row{n} common\n".encode(), b"")
                 for n in range(20_000)])
    with history.db:
        history.db.execute("DROP TABLE history_fts")
        history.db.execute("CREATE VIRTUAL TABLE history_fts USING fts5(subject, sender, content='history',"
                           " content_rowid='id')")
        history.db.execute("INSERT INTO history_fts (history_fts) VALUES ('rebuild')")
    history.close()
    context = multiprocessing.get_context("fork")
    with context.Pool(2) as pool:
        found = pool.map(_open_and_search, [path, path])
    assert found == [(True, [20_000]), (True, [20_000])]


def _open_and_search(path):
    history = History(path, rows=100_000, kept=0)
    return history.fts, [row["id"] for row in history.page(query="row19999")]


@pytest.mark.slow
def test_two_processes_opening_a_new_history_at_once_both_open_it(tmp_path):
    """The console and the recorder open a new history together: both make
    its tables and the search index's mark; neither fails (the mark's insert
    raised a UNIQUE error in 3 of 300 such opens when one process made it
    first: that console died at its start)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    failures = []
    for n in range(150):
        path = str(tmp_path / f"h{n}.sqlite")
        start = time.time() + 0.05
        with context.Pool(2) as pool:
            failures += [error for error in pool.map(_open_at, [(path, start)] * 2) if error]
    assert failures == []


def _open_at(args):
    path, start = args
    while time.time() < start:
        pass
    try:
        History(path).close()
    except Exception as exc:  # noqa: BLE001 - reported by the test
        return f"{type(exc).__name__}: {exc}"
    return None


def test_a_history_another_process_holds_locked_at_its_start_is_waited_for(tmp_path):
    """The console and the recorder open the history together at their
    start: SQLite answered one of them "database is locked" at once (the
    WAL pragma waits for no busy timeout) and that console died at its
    start (test_console_life's killed console was gone before the test
    killed it).  A new file held in a write transaction for 0.3 s (as the
    other process's first statements hold it): the history opens after."""
    import sqlite3
    import threading

    path = tmp_path / "h.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE first (a)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO first VALUES (1)")
    threading.Timer(0.3, other.execute, ("COMMIT",)).start()
    history = History(str(path))
    assert history.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    history.close()
    other.close()


def test_history_drops_rows_past_their_age(tmp_path):
    history = History(":memory:", days=1.0)
    history.add([({"label": "ham", "t": time.time() - 3 * 86400}, b"Subject: old\n", b""),
                 ({"label": "ham", "t": time.time()}, b"Subject: new\n", b"")])
    history.last_age_prune = 0.0
    history.prune()
    assert [row["subject"] for row in history.page()] == ["new"]


def test_passwords_sessions_and_the_login_limit_are_bounded(tmp_path):
    stored = hash_password("right", params=(2 ** 10, 8, 1))
    assert verify("right", stored) and not verify("wrong", stored) and not verify("right", "scrypt$bad")
    (tmp_path / "users").write_text(f"ann viewer {stored}\n")
    assert Users(tmp_path / "users").check("ann", "right") == "viewer"
    assert Users(tmp_path / "users").check("nobody", "right") is None
    sessions = Sessions(limit=3)
    tokens = [sessions.open("ann", "viewer")[0] for _ in range(5)]
    assert len(sessions.table) == 3 and sessions.get(tokens[0]) is None and sessions.get(tokens[-1])
    limiter = LoginLimiter(limit=10)
    for _ in range(MAX_FAILURES):
        assert not limiter.blocked("10.0.0.1", now=100.0)
        limiter.failed("10.0.0.1", now=100.0)
    assert limiter.blocked("10.0.0.1", now=110.0) and not limiter.blocked("10.0.0.1", now=161.0)
    for n in range(50):
        limiter.failed(f"10.1.0.{n}", now=100.0)
    assert len(limiter.table) <= 10


def test_a_bad_users_file_is_one_clear_error(tmp_path):
    from spamnb.errors import SettingsError

    (tmp_path / "users").write_text("ann boss scrypt$1$2$3$x$y\n")
    with pytest.raises(SettingsError, match="line 1"):
        Users(tmp_path / "users")


def test_a_users_file_is_read_bounded_and_a_larger_one_is_one_line(tmp_path):
    """The file is read up to MAX_FILE_BYTES, never whole: a larger one (here
    a 64 MiB sparse file, each line a good user past the 10,000-user check's
    reach) is refused with one line naming the bound, as are a FIFO (opened
    without blocking) and a device; check-config says the same."""
    import os
    import threading

    from spamnb.console.auth import MAX_FILE_BYTES, users_file_problems
    from spamnb.errors import SettingsError

    good = f"ann viewer {hash_password('pw', params=(2 ** 4, 8, 1))}\n"
    big = tmp_path / "big"
    with open(big, "w") as f:
        f.write(good * (MAX_FILE_BYTES // len(good) + 1))
        f.truncate(64 * 1024 * 1024)
    for path in (big, "/dev/zero"):
        with pytest.raises(SettingsError) as caught:
            Users(path)
        assert "larger than 4 MiB" in str(caught.value) or "not a regular file" in str(caught.value)
        assert "\n" not in str(caught.value)
    assert users_file_problems(big) == [f"--ui-users {big}: larger than 4 MiB (at most 10000 users, a line each)"]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    answer = []
    reader = threading.Thread(target=lambda: answer.append(users_file_problems(fifo)), daemon=True)
    reader.start()
    reader.join(10)
    assert answer == [[f"--ui-users {fifo}: not a regular file"]]
    (tmp_path / "exact").write_text(good + "#" * (MAX_FILE_BYTES - len(good) - 1) + "\n")
    assert Users(tmp_path / "exact").role("ann") == "viewer"


class _Model:
    cutoffs = type("C", (), {"spam": 0.99, "ham": 0.01})()


class _Checked:
    verdict = type("V", (), {"label": "spam", "log_odds": 9.0, "probability": 0.9, "evidence": [("w", 1.0)],
                             "reason": "", "tokens": 3})()
    score, score_map, model, outcome = 9.0, type("S", (), {"required": 5.0})(), _Model(), "spam 9.0/5.0"


async def _records_to_a_stalled_recorder(path, n, message):
    """``n`` records sent to a socket whose reader never reads: (the sender,
    the slowest record's time, the transport's buffer at the end); the spool's
    last file handed over."""
    sender = records.RecordSender(path, keep=True)
    await sender.connect()
    slowest = 0.0
    for i in range(n):
        t = time.perf_counter()
        sender.on_verdict(_Checked(), message, "bob")
        sender.on_request("CHECK", "bob", "spam 9.0/5.0", len(message), 1.0, "127.0.0.1", "spamd", "none")
        slowest = max(slowest, time.perf_counter() - t)
        if i % 10 == 9:
            await asyncio.sleep(0)      # the loop turns: a flush now and then, as between checks
    deadline = time.monotonic() + 30
    while (sender.spool or sender.spool_fd is not None or sender.scheduled) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)       # the last flush and the last spool file's hand-over
    return sender, slowest, sender.transport.get_write_buffer_size()


def test_a_full_record_queue_spools_without_waiting_and_the_recorder_stores_every_record(tmp_path):
    """The recorder stops reading: the worker's writes never wait, the records
    past QUEUE_BYTES go to the worker's spool on disk, none is dropped; a
    recorder that reads again stores every record (the socket's and the
    spool's), and deletes the spool files it committed."""
    import threading

    from spamnb.console.process import Recorder

    path = str(tmp_path / "records")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)      # accepted by the kernel, not read yet
    message = b"Subject: x\nFrom: a@b.example\n\n" + b"y" * 100_000
    loop = asyncio.new_event_loop()
    try:
        sender, slowest, buffered = loop.run_until_complete(_records_to_a_stalled_recorder(path, 200, message))
        assert sender.dropped == 0 and sender.sent + sender.spooled == 200 and sender.spooled > 100
        assert buffered <= records.QUEUE_BYTES
        assert slowest < 0.5, slowest       # no write waits for the reader (generous: a loaded machine)
        assert records.spool_files(str(tmp_path)), "the spool's files handed over"
        history = History(":memory:", rows=1000, kept=1000)
        recorder = Recorder(history, listener)
        stop = threading.Event()
        thread = threading.Thread(target=recorder.run, args=(stop.is_set,))
        thread.start()
        deadline = time.monotonic() + 60
        while recorder.received < 200 and time.monotonic() < deadline:
            loop.run_until_complete(asyncio.sleep(0.05))    # the worker's loop writes its transport's buffer
        sender.transport.close()
        loop.run_until_complete(asyncio.sleep(0.05))
        stop.set()
        thread.join(30)
    finally:
        loop.close()
    rows = history.page(limit=200) + history.page(limit=200, before=history.page(limit=200)[-1]["id"])
    assert len(rows) == 200 and recorder.dropped() == 0
    assert history.message(rows[0]["id"]) == message and history.get(rows[0]["id"])["subject"] == "x"
    assert records.spool_files(str(tmp_path)) == [] and not list(tmp_path.glob("spool-*"))
    listener.close()


def test_an_idle_recorder_fills_the_search_index_in_bounded_transactions(tmp_path, monkeypatch):
    """The recorder stores rows without indexing them; idle, it adds them
    to the full-text index INDEX_ROWS at a time, until none waits (read
    straight from the index: a search would index them itself)."""
    import threading

    from spamnb.console import process
    from spamnb.console.process import Recorder

    monkeypatch.setattr(process, "IDLE_SECONDS", 0.3)
    monkeypatch.setattr(process, "INDEX_ROWS", 40)
    path = str(tmp_path / "records")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    history = History(str(tmp_path / "h.sqlite"), rows=1000, kept=0)
    reader = History(str(tmp_path / "h.sqlite"), rows=1000, kept=0)
    recorder = Recorder(history, listener)
    stop = threading.Event()
    thread = threading.Thread(target=recorder.run, args=(stop.is_set,))
    thread.start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as worker:
            worker.connect(path)
            worker.sendall(b"".join(records.encode({"label": "ham", "t": time.time(), "verb": "CHECK"},
                                                   f"Subject: idle{n} together\n".encode()) for n in range(100)))
            deadline = time.monotonic() + 60

            def indexed():
                return reader.db.execute("SELECT count(*) FROM history_fts WHERE history_fts MATCH 'together'"
                                         ).fetchone()[0]

            while (indexed() < 100 or reader.pending()) and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        stop.set()
        thread.join(30)
        listener.close()
    assert recorder.received == 100 and reader.pending() == 0 and indexed() == 100
    assert [row["subject"] for row in reader.page(query="idle7")] == ["idle7 together"]
    reader.db.execute("INSERT INTO history_fts (history_fts) VALUES ('integrity-check')")


def test_a_spool_past_its_bound_drops_and_counts(tmp_path, monkeypatch):
    """Past SPOOL_BYTES not yet read by the recorder, a record is dropped and
    counted (bounded disk), still without waiting."""
    monkeypatch.setattr(records, "SPOOL_BYTES", 2 * 1024 * 1024)
    path = str(tmp_path / "records")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    message = b"Subject: x\n\n" + b"y" * 100_000
    sender, slowest, buffered = asyncio.run(_records_to_a_stalled_recorder(path, 200, message))
    listener.close()
    assert sender.dropped > 0 and sender.sent + sender.spooled + sender.dropped == 200
    on_disk = sum(p.stat().st_size for p in tmp_path.glob("spool-*"))
    assert 0 < on_disk <= records.SPOOL_BYTES and buffered <= records.QUEUE_BYTES
    assert slowest < 0.5, slowest


def test_records_made_with_no_recorder_wait_in_the_spool(tmp_path):
    """The recorder's connection closed (it died; the keeper starts another):
    the records go to the spool, none dropped, and the files are there for
    the next recorder."""
    path = str(tmp_path / "records")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    async def run():
        sender = records.RecordSender(path)
        await sender.connect()
        listener.accept()[0].close()        # the recorder is gone
        listener.close()
        deadline = time.monotonic() + 30
        while not sender.transport.is_closing() and time.monotonic() < deadline:
            sender.on_verdict(_Checked(), b"Subject: s\n\nbody", "bob")
            sender.on_request("CHECK", "bob", "", 10, 1.0, "127.0.0.1", "spamd", "none")
            await asyncio.sleep(0.01)
        for _ in range(5):
            sender.on_verdict(_Checked(), b"Subject: s\n\nbody", "bob")
            sender.on_request("CHECK", "bob", "", 10, 1.0, "127.0.0.1", "spamd", "none")
        while (sender.spool or sender.spool_fd is not None or sender.scheduled) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return sender

    sender = asyncio.run(run())
    assert sender.dropped == 0 and sender.spooled >= 5
    frames = b"".join(Path(p).read_bytes() for p in records.spool_files(str(tmp_path)))
    assert len(records.FrameReader().feed(frames)) == sender.spooled


class _RecorderDied(Exception):
    pass


def test_a_recorder_that_dies_reading_a_spool_file_leaves_no_record_stored_twice(tmp_path, monkeypatch):
    """A recorder dies (here: raises out of its loop, no last write) after
    committing part of a spool file: the next one resumes that file where
    the committed records end (the offset is committed with them), so every
    record is stored once, and the file is deleted when read whole."""
    import threading

    from spamnb.console import process
    from spamnb.console.process import Recorder

    monkeypatch.setattr(process, "READ_BYTES", 1024)       # a file read in many pieces ...
    monkeypatch.setattr(process, "BATCH", 10)              # ... and committed in many batches
    frames = b"".join(records.encode({"label": "ham", "verb": "CHECK", "user": f"u{n}"},
                                     f"Subject: record {n}\n".encode()) for n in range(300))
    (tmp_path / "spool-1-0000000001.rec").write_bytes(frames)
    history = History(str(tmp_path / "history.sqlite"), rows=1000, kept=0)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "records"))
    listener.listen(1)

    def dies_after_a_commit():
        if history.counters().get("received", 0) >= 50:
            raise _RecorderDied
        return False

    first = Recorder(history, listener)
    with pytest.raises(_RecorderDied):
        first.run(dies_after_a_commit)
    stored = len(history.page(limit=200))
    assert 50 <= stored < 300 and (tmp_path / "spool-1-0000000001.rec").exists()
    again = History(str(tmp_path / "history.sqlite"), rows=1000, kept=0)
    second = Recorder(again, listener)
    stop = threading.Event()
    thread = threading.Thread(target=second.run, args=(stop.is_set,))
    thread.start()
    deadline = time.monotonic() + 60
    while (tmp_path / "spool-1-0000000001.rec").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join(30)
    users = [row["user"] for row in again.page(limit=200)]
    users += [row["user"] for row in again.page(limit=200, before=again.page(limit=200)[-1]["id"])]
    assert sorted(users) == sorted(f"u{n}" for n in range(300))       # each once
    assert not (tmp_path / "spool-1-0000000001.rec").exists()
    assert again.spool_offset(str(tmp_path / "spool-1-0000000001.rec")) == 0     # forgotten once deleted
    listener.close()


def _store_the_spool(history, listener, spool):
    """A recorder (the next start's) run until the spool files in ``spool`` are stored and deleted; it is returned."""
    import threading

    from spamnb.console.process import Recorder

    recorder = Recorder(history, listener, str(spool))
    stop = threading.Event()
    thread = threading.Thread(target=recorder.run, args=(stop.is_set,))
    thread.start()
    deadline = time.monotonic() + 60
    while records.spool_files(str(spool)) and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join(30)
    return recorder


def test_a_stop_leaves_what_is_not_stored_in_the_spool_and_the_next_start_stores_it(tmp_path, monkeypatch):
    """A graceful stop under a recorder that stores nothing more: the
    worker's records still gathered and in its spool's unfinished file go to
    its spool (written to disk), those in its transport's buffer reach the
    stopping recorder, which puts them (and the batch it held from the
    connection) in a spool file of its own instead of a transaction; the
    spool files read into the batch are read again from their committed
    offsets.  The next recorder stores every record once, the spool first,
    and deletes it.  (The old stop raced the keeper's deadline with
    transactions: under three CPU hogs 9 to 40 records of 40 were lost.)"""
    import threading

    from spamnb.console.process import Recorder

    monkeypatch.setattr(records, "SPOOL_CHUNK", 64 * 1024 * 1024)      # the spool's file not handed over ...
    monkeypatch.setattr(records, "SPOOL_SECONDS", 600.0)               # ... before the stop, however slow the loop
    path = str(tmp_path / "records")
    spool = tmp_path / "spool"
    spool.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)      # accepted by the kernel, not read yet: the records spool
    message = b"Subject: x\nFrom: a@b.example\n\n" + b"y" * 100_000
    history = History(str(tmp_path / "h.sqlite"), rows=1000, kept=1000)
    recorder = Recorder(history, listener, str(spool))
    stop = threading.Event()
    thread = threading.Thread(target=recorder.run, args=(stop.is_set,))

    async def run():
        sender = records.RecordSender(path, keep=True, spool=str(spool))
        await sender.connect()
        for i in range(80):
            sender.on_verdict(_Checked(), message, "bob")
            sender.on_request("CHECK", "bob", "spam 9.0/5.0", len(message), 1.0, "127.0.0.1", "spamd", "none")
            if i == 74:
                await asyncio.sleep(0.1)        # a flush: the transport's buffer full, a spool file begun
        # records in the transport's buffer, in a spool file not handed over, and gathered, not written yet
        assert sender.transport.get_write_buffer_size() and sender.spool_fd is not None and (sender.out or sender.held)
        thread.start()          # the recorder reads again, and is told to stop at once
        stop.set()
        await sender.close()
        return sender

    sender = asyncio.run(run())
    thread.join(30)
    assert not thread.is_alive()
    assert sender.dropped == 0 and recorder.dropped() == 0
    assert len(history.page(limit=200)) == 0        # stopping, it stored nothing ...
    left = records.spool_files(str(spool))
    assert len(left) >= 2 and not list(spool.glob("*.part"))       # ... the worker's spool and its own, on disk
    assert len(records.FrameReader().feed(b"".join(Path(p).read_bytes() for p in left))) == 80
    history.close()
    again = History(str(tmp_path / "h.sqlite"), rows=1000, kept=1000)
    second = _store_the_spool(again, listener, spool)
    assert sorted(row["id"] for row in again.page(limit=200)) == list(range(1, 81))
    assert second.received == 80 and not list(spool.glob("spool-*"))
    listener.close()


def test_what_a_stopping_worker_could_not_send_is_spooled_whole_and_stored_once(tmp_path, monkeypatch):
    """No recorder reads while a worker stops: past :data:`CLOSE_SECONDS`
    the frames its transport still holds (the one partly sent too) go to
    its spool and the connection is aborted; a recorder started then reads
    what the socket got (a frame cut short dropped), stops at once and
    spools it; the next one stores each of the 80 records once.  (The old
    stop lost the transport's buffer: the recorder had stopped reading.)"""
    import threading

    from spamnb.console.process import Recorder

    monkeypatch.setattr(records, "CLOSE_SECONDS", 0.2)
    path = str(tmp_path / "records")
    spool = tmp_path / "spool"
    spool.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)      # accepted by the kernel, never read while the worker stops
    message = b"Subject: x\nFrom: a@b.example\n\n" + b"y" * 100_000

    async def run():
        sender = records.RecordSender(path, keep=True, spool=str(spool))
        await sender.connect()
        for i in range(80):
            sender.on_verdict(_Checked(), message, f"u{i}")
            sender.on_request("CHECK", f"u{i}", "spam 9.0/5.0", len(message), 1.0, "127.0.0.1", "spamd", "none")
            if i % 10 == 9:
                await asyncio.sleep(0.05)       # flushes: the socket's and the transport's buffers fill
        assert sender.transport.get_write_buffer_size()
        await sender.close()
        return sender

    sender = asyncio.run(run())
    assert sender.dropped == 0
    history = History(str(tmp_path / "h.sqlite"), rows=1000, kept=1000)
    Recorder(history, listener, str(spool)).run(lambda: True)      # reads the socket, stores nothing
    assert len(history.page(limit=200)) == 0
    _store_the_spool(history, listener, spool)
    assert sorted(row["user"] for row in history.page(limit=200)) == sorted(f"u{i}" for i in range(80))
    listener.close()


def test_a_header_block_is_stored_only_with_a_kept_message(tmp_path):
    """The header block (the bulk of a row) is kept with the kept messages
    only; every row keeps its fields, and the message page shows them."""
    history = History(":memory:", rows=10, kept=5)
    header = b"From: a@b.example\nTo: c@d.example\nSubject: hello\nX-Long: " + b"z" * 2000
    ids = history.add([({"label": "ham"}, header, b""), ({"label": "ham"}, header, header + b"\n\nbody")])
    plain, kept = history.get(ids[0]), history.get(ids[1])
    assert plain["header"] == b"" and plain["subject"] == "hello" and plain["sender"] == "a@b.example"
    assert kept["header"] == header
    assert History(":memory:", rows=10, kept=0).get(1) is None


def test_frames_past_the_limit_are_refused():
    reader = records.FrameReader()
    frame = records.encode({"label": "ham"}, b"Subject: a\n", b"body")
    out = reader.feed(frame[:7]) + reader.feed(frame[7:])
    assert records.decode(out[0])[0]["label"] == "ham" and records.decode(out[0])[2] == b"body"
    with pytest.raises(ValueError):
        records.FrameReader().feed((records.MAX_FRAME + 1).to_bytes(4, "big") + b"x")


# ---------------------------------------------------------------------------- a real server
def test_the_console_needs_a_users_file_and_tls_off_loopback(tmp_path):
    train(tmp_path / "model.spamnb")
    from conftest import run_spamnb

    out = run_spamnb(["serve", "-m", tmp_path / "model.spamnb", "--ui", "8999"], home=tmp_path, text=True)
    assert out.returncode == 64 and "--ui needs --ui-users" in out.stderr
    users_file(tmp_path / "users")
    out = run_spamnb(["serve", "-m", tmp_path / "model.spamnb", "--ui", "0.0.0.0:8999", "--ui-users",
                      tmp_path / "users"], home=tmp_path, text=True)
    assert out.returncode == 64 and "needs --ui-tls and --allowed-ips" in out.stderr


@needs_spamc
def test_login_csrf_origin_and_roles(console):
    anonymous = Client(console)
    assert anonymous.request("GET", "/api/v1/history")[0] == 401
    status, _, answer = anonymous.request("GET", "/")
    assert status == 200 and "script-src 'self'" in answer.getheader("Content-Security-Policy")
    assert "unsafe-inline" not in answer.getheader("Content-Security-Policy")
    msg = mail(random.Random(1), True, 9001, subject="csrf check")
    assert console.spamc("-u", "bob", stdin=msg).returncode == 0
    admin = Client(console)
    status, value, answer = admin.login("admin")
    assert status == 200 and value["role"] == "admin"
    cookie = answer.getheader("Set-Cookie")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" not in cookie
    rows = wait_rows(admin, 1, q="csrf")
    record = rows[0]["id"]
    # a change without the CSRF token, or from a foreign origin: 403, nothing learned
    assert admin.request("POST", f"/api/v1/message/{record}/learn", {"label": "ham"}, csrf=False)[0] == 403
    assert admin.request("POST", f"/api/v1/message/{record}/learn", {"label": "ham"}, csrf=False,
                         headers={"X-CSRF-Token": "\xe9" + admin.csrf[1:]})[0] == 403
    assert admin.request("POST", f"/api/v1/message/{record}/learn", {"label": "ham"},
                         headers={"Origin": "http://evil.example"})[0] == 403
    assert admin.request("POST", f"/api/v1/message/{record}/learn", {"label": "ham"},
                         headers={"Sec-Fetch-Site": "cross-site"}, origin=False)[0] == 403
    assert admin.request("GET", "/api/v1/history", headers={"Host": "evil.example"})[0] == 400
    assert "refused a POST from origin 'http://evil.example'" in console.log_text()
    # a viewer reads but cannot learn
    viewer = Client(console)
    assert viewer.login("viewer")[0] == 200
    assert viewer.request("GET", f"/api/v1/message/{record}")[0] == 200
    status, value, _ = viewer.request("POST", f"/api/v1/message/{record}/learn", {"label": "ham"})
    assert status == 403 and "role" in value["error"]
    assert admin.request("GET", "/api/v1/actions")[0] == 200 and viewer.request("GET", "/api/v1/actions")[0] == 403
    # the message's evidence, cutoffs and ledger state
    status, value, _ = admin.request("GET", f"/api/v1/message/{record}")
    assert status == 200 and value["kept"] and value["evidence"] and None not in value["cutoffs_log_odds"]
    assert value["ledger"] == "not learned"
    status, value, _ = admin.request("GET", "/api/v1/model")
    assert status == 200 and value["vocabulary"] > 0 and value["messages"]["spam"] == 100


@needs_spamc
def test_a_user_sees_only_their_own_rows(console):
    rng = random.Random(3)
    for user, n in (("bob", 3), ("carol", 3)):
        for k in range(n):
            assert console.spamc("-u", user, stdin=mail(rng, k % 2 == 0, 9100 + k, subject=f"own-{user}-{k}")).returncode == 0
    admin = Client(console)
    admin.login("admin")
    every = wait_rows(admin, 6, q="own")
    carol_row = next(row["id"] for row in every if row["user"] == "carol")
    bob = Client(console)
    assert bob.login("bob")[0] == 200
    rows = wait_rows(bob, 3, q="own")
    assert rows and {row["user"] for row in rows} == {"bob"}
    assert {row["user"] for row in bob.request("GET", "/api/v1/history?limit=200")[1]["rows"]} == {"bob"}
    assert bob.request("GET", f"/api/v1/message/{carol_row}")[0] == 404
    assert bob.request("POST", f"/api/v1/message/{carol_row}/forget", {})[0] == 404
    assert bob.request("GET", "/api/v1/history?user=carol")[1]["rows"][0]["user"] == "bob"


@needs_spamc
def test_the_page_holds_the_first_history_page_for_a_logged_in_browser(console):
    """GET / with a session: the session and the first 50 history rows (a user
    role's own only) in a JSON data block and drawn as the table, so the rows
    show without another request; a Subject written to end the block or to
    open a tag in the table cannot (``<`` as a JSON escape, HTML-escaped in
    the table); never cached; without a session, the bare page."""
    rng = random.Random(5)
    hostile = "</script><script>alert(1)</script><!--"
    assert console.spamc("-u", "bob", stdin=mail(rng, True, 9300, subject=hostile)).returncode == 0
    bob = Client(console)
    assert bob.login("bob")[0] == 200
    assert any(row["subject"] == hostile for row in wait_rows(bob, 1, q="alert"))
    status, page, answer = bob.request("GET", "/")
    text = page.decode()
    assert status == 200 and answer.getheader("Cache-Control") == "no-store"
    block = re.search(r'<script type="application/json" id="boot">(.*?)</script>', text, re.S)
    assert block and "<" not in block.group(1) and text.count("<script") == 2, text[-400:]
    # the rows drawn in the page's HTML too (shown before the script runs), every text escaped
    assert hostile not in text and html.escape(hostile) in text and text.count('<tr class="row"') <= 50
    boot = json.loads(block.group(1))
    assert boot["session"] == {"user": "bob", "role": "user", "csrf": bob.csrf}
    rows = boot["history"]["rows"]
    assert rows and len(rows) <= 50 and {row["user"] for row in rows} == {"bob"}
    assert hostile in {row["subject"] for row in rows}
    assert rows == bob.request("GET", "/api/v1/history?limit=50")[1]["rows"]
    status, page, answer = Client(console).request("GET", "/")
    assert status == 200 and b'id="boot"' not in page and answer.getheader("Cache-Control") == "no-cache"


def test_nothing_of_the_page_holds_its_first_paint_and_the_csp_stays_strict(console):
    """GET / (with a session and without): its style inline in the head, no
    style sheet to fetch before the first paint, allowed by the SHA-256 of
    its exact text in the Content-Security-Policy (no 'unsafe-inline', no
    other inline style); the script the console's own file, loaded async as
    the body's last element, after the drawn rows and the data block."""
    import base64
    import hashlib

    client = Client(console)
    assert client.login("admin")[0] == 200
    for who in (client, Client(console)):
        status, page, answer = who.request("GET", "/")
        text = page.decode()
        csp = answer.getheader("Content-Security-Policy")
        assert status == 200 and "unsafe-inline" not in csp and "unsafe-eval" not in csp
        shell = re.sub(r'<section id="view">.*?</section>', "", text, flags=re.S)    # the page less mail's text
        assert "<link" not in shell and "style=" not in shell and text.count("<style") == 1
        style = re.search(r"<head>.*<style>(.*?)</style>.*</head>", text, re.S).group(1)
        digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
        style_src = re.search(r"style-src ([^;]*)", csp).group(1).split()
        assert style_src == ["'self'", f"'sha256-{digest}'"], csp
        assert re.search(r"script-src 'self';", csp)
        scripts = re.findall(r"<script[^>]*>", text)
        assert scripts[-1].startswith('<script src="/static/app.js?v=') and scripts[-1].endswith(" async>")
        assert re.search(r'<script src="/static/app\.js\?v=[0-9a-f]+" async></script>\s*</body>', text)
        assert text.index("</main>") < text.rindex("<script"), text[-300:]
        if who is client:       # the rows and the data block before the script
            assert text.index('id="history"') < text.index('id="boot"') < text.index("/static/app.js")


def test_the_sixth_bad_login_in_a_minute_is_429_and_logged(console):
    client = Client(console)
    answers = [client.login("trainer", "wrong")[0] for _ in range(6)]
    assert answers == [401] * 5 + [429]
    assert client.login("trainer")[0] == 429          # the right password too, until the minute is over
    log = console.log_text()
    assert len(re.findall(r"console: login failed for user=trainer from 127\.0\.0\.1", log)) == 5
    assert "console: login refused from 127.0.0.1: too many failed logins" in log


@needs_spamc
def test_the_console_process_stays_small(console):
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{console.console_pid()}/status").read_text().splitlines())
    assert int(fields["VmRSS"].split()[0]) * 1024 < 60 * 2 ** 20


def test_the_recorder_runs_only_on_cpu_the_checks_leave(console):
    """The recorder (the history's writer) is under SCHED_IDLE: it never
    takes a core's time from a check; the console's pages are not."""
    import os

    recorder = int(re.findall(r"console's recorder \(pid (\d+)\)", console.log_text())[-1])
    assert os.sched_getscheduler(recorder) == os.SCHED_IDLE
    assert os.sched_getscheduler(console.console_pid()) == os.SCHED_OTHER


@needs_spamc
def test_a_learn_in_the_console_changes_what_spamc_answers_within_a_second(tmp_path):
    server = ConsoleServer(tmp_path, workers=2, keep=5000)
    try:
        rng = random.Random(11)
        novel = mail(rng, False, 9500, subject="never seen words",
                     user_words=words(rng, 80, "zq"))     # tokens no model has seen: not spam
        before = server.spamc("-c", stdin=novel)
        assert before.returncode == 0, before        # not spam (spamc -c: 1 is spam)
        admin = Client(server)
        admin.login("trainer")
        record = wait_rows(admin, 1, q="never")[0]["id"]
        status, value, _ = admin.request("POST", f"/api/v1/message/{record}/learn", {"label": "spam"})
        assert status == 200 and value["result"] == "learned" and value["ledger"] == "learned spam", value
        learned = time.monotonic()
        answers = []
        while time.monotonic() - learned < 1.0:
            answers.append(server.spamc("-c", stdin=novel).returncode)
            if answers[-1] == 1:
                break       # on a quiet machine 200 checks more would push the row out of the audit's window
        assert answers and answers[-1] == 1, (before.stdout, answers)
        # both workers answer it so
        assert [server.spamc("-c", stdin=novel).returncode for _ in range(6)] == [1] * 6
        # in the ledger, the audit and the action log; forget undoes it
        status, value, _ = admin.request("GET", "/api/v1/audit")
        assert any(row["id"] == record and row["ledger"] == "learned spam" for row in value["rows"]), [(r["id"], r["ledger"]) for r in value["rows"]]
        assert value["actions"][0]["what"] == "learn spam" and value["actions"][0]["record"] == record
        status, value, _ = admin.request("POST", f"/api/v1/message/{record}/forget", {})
        assert status == 200 and value["ledger"] == "not learned", value
    finally:
        server.stop()


@needs_spamc
def test_http_limits_a_head_a_body_and_a_connections_requests(console):
    """A head past 16 KiB and a body past 256 KiB are refused (431, 413); a
    kept-alive connection's last allowed request is answered with
    Connection: close, never dropped unanswered."""
    from spamnb.console.http import KEEP_ALIVE, MAX_BODY

    with socket.create_connection(("127.0.0.1", console.ui), timeout=30) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: " + b"a" * 20000 + b"\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 431")
    with socket.create_connection(("127.0.0.1", console.ui), timeout=30) as s:
        s.sendall(b"POST /api/v1/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1))
        assert s.recv(100).startswith(b"HTTP/1.1 413")
    conn = http.client.HTTPConnection("127.0.0.1", console.ui, timeout=30)
    for n in range(KEEP_ALIVE + 5):
        conn.request("GET", "/static/app.css")
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 200, n
        assert (answer.getheader("Connection") == "close") == ((n + 1) % KEEP_ALIVE == 0), n
        if answer.getheader("Connection") == "close":
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", console.ui, timeout=30)
    conn.close()


def test_the_first_row_since_a_time_is_found_by_id():
    history = History(":memory:")
    now = time.time()
    history.add([({"label": "ham", "t": now - 100 + n}, b"Subject: s\n", b"") for n in range(100)])
    assert history.first_since(now - 100) == 1 and history.first_since(now - 50) == 51
    assert history.first_since(now + 10) == 101
    assert sum(row["n"] for row in history.stats(now - 50)["rows"]) == 50


@needs_spamc
def test_the_audit_lists_what_auto_learn_learned_first(tmp_path):
    server = ConsoleServer(tmp_path, "--auto-learn")
    try:
        rng = random.Random(31)
        sure = mail(rng, True, 9900, subject="cheap offer sure")      # the training spam's sender and subject words
        assert server.spamc("-c", stdin=sure).returncode == 1
        admin = Client(server)
        admin.login("admin")
        deadline = time.monotonic() + 20
        while True:
            status, value, _ = admin.request("GET", "/api/v1/audit")
            if value["rows"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert status == 200 and value["rows"][0]["ledger"] == "auto-learned spam", value
        record = value["rows"][0]["id"]
        status, value, _ = admin.request("POST", f"/api/v1/message/{record}/forget", {})
        assert status == 200 and value["ledger"] == "not learned", value
    finally:
        server.stop()


def test_a_record_that_cannot_be_made_is_dropped_and_counted_never_raised(tmp_path):
    class Checked:
        verdict = type("V", (), {"label": "spam", "log_odds": "not a number", "probability": 0.9, "evidence": (),
                                 "reason": "", "tokens": 3})()
        score, score_map, model = 9.0, type("S", (), {"required": 5.0})(), None

    async def run():
        path = str(tmp_path / "records")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        sender = records.RecordSender(path)
        await sender.connect()
        sender.on_verdict(Checked(), b"Subject: x\n\nbody", "bob")
        sender.on_request("CHECK", "bob", "spam", 16, 1.0, "127.0.0.1", "spamd", "none")
        sender.on_request("PING", "-", "pong", 0, 0.1, "127.0.0.1", "spamd", "none")   # no check: no record
        sender.flush()      # the records' frames are made at the flush
        sender.transport.abort()
        listener.close()
        return sender

    sender = asyncio.run(run())
    assert (sender.sent, sender.dropped) == (0, 1)
