"""The console process's life cycle under ``spamnb serve --ui``: a console
that dies is started again by its keeper (spamnb.console.process.Keeper)
with a bounded back-off and one log line, the checks never stop meanwhile,
the records reach the new console; SIGHUP makes it re-read ``--ui-users``."""

from __future__ import annotations

import os
import random
import re
import signal
import threading
import time

import pytest

from spamnb.console.auth import hash_password
from test_console import Client, ConsoleServer, mail, users_file, wait_rows
from test_serve import needs_spamc

pytest.importorskip("h11")


def console_pids(server):
    return [int(pid) for pid in re.findall(r"console on \S+ \(pid (\d+)\)", server.log_text())]


def wait_for(condition, timeout=60.0, what=""):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Checks(threading.Thread):
    """``spamc -c`` in a loop until stopped: every answer's exit status."""

    def stop_with(self, server):
        """Stop the loop, then the server (exit 0); every check was answered (0 or 1)."""
        self.done.set()
        if self.is_alive():
            self.join(60)
        assert server.stop() == 0
        assert set(self.codes) <= {0, 1}, self.codes

    def __init__(self, server):
        super().__init__(daemon=True)
        self.server, self.codes, self.done = server, [], threading.Event()

    def run(self):
        import random

        rng = random.Random(3)
        n = 0
        while not self.done.is_set():
            n += 1
            self.codes.append(self.server.spamc("-c", stdin=mail(rng, n % 2 == 0, 20000 + n)).returncode)


def recorder_pids(server):
    return [int(pid) for pid in re.findall(r"console's recorder \(pid (\d+)\)", server.log_text())]


@needs_spamc
@pytest.mark.slow
def test_a_killed_recorder_is_started_again_and_the_records_go_on(tmp_path):
    """The recorder (the history's writer) killed while checks go on: every
    check answered, one log line, another recorder started by the keeper;
    the workers connect to it again and new rows reach the history; the
    records made while none was there wait in the workers' spools and the
    new recorder stores them: none dropped (those in the dead one's socket
    are lost uncounted); the console never stopped."""
    server = ConsoleServer(tmp_path, workers=2)
    checks = Checks(server)
    try:
        wait_for(lambda: recorder_pids(server), what="the recorder's log line")
        first = recorder_pids(server)[-1]
        console = console_pids(server)[-1]
        client = Client(server)
        assert client.login("admin")[0] == 200
        checks.start()
        wait_for(lambda: len(wait_rows(client, 3)) >= 3, what="the first rows")
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: f"recorder (pid {first}) was killed by SIGKILL" in server.log_text(), what="the log line")
        wait_for(lambda: len(recorder_pids(server)) == 2, what="a new recorder")
        newest = lambda: client.request("GET", "/api/v1/history?limit=1")[1]["rows"][0]["id"]  # noqa: E731
        before = newest()
        wait_for(lambda: newest() >= before + 5, what="rows from the new recorder")
        assert console_pids(server)[-1] == console and client.request("GET", "/api/v1/session")[0] == 200
        wait_for(lambda: client.request("GET", "/api/v1/stats?minutes=5")[1]["spooled"] >= 1,
                 what="the records made meanwhile read from the spools")
        assert client.request("GET", "/api/v1/stats?minutes=5")[1]["dropped"] == 0
        assert set(checks.codes) <= {0, 1}, checks.codes
    finally:
        checks.stop_with(server)


@pytest.mark.slow   # over 6 s in the default run: CI runs it in the slow step
@needs_spamc
def test_a_stop_leaves_the_records_not_stored_in_the_spool_and_the_next_start_stores_them(tmp_path):
    """The recorder held up (SIGSTOP) while checks go on: the workers' record
    queues fill and the rest go to their spools; the server is stopped at
    once (SIGTERM, the recorder let go): what the workers held and what the
    recorder had not stored stays in the spool beside the history, written
    to disk, however slow the recorder (a stop races no deadline); the next
    start stores it first: every check has its row, none dropped."""
    import sqlite3

    server = ConsoleServer(tmp_path, workers=2)
    try:
        wait_for(lambda: recorder_pids(server), what="the recorder's log line")
        recorder = recorder_pids(server)[-1]
        os.kill(recorder, signal.SIGSTOP)
        big = b"X-Pad: " + b"p" * 300_000 + b"\n"
        codes = [server.spamc("-c", "-s", 2_000_000, stdin=big + mail(random.Random(n), n % 2 == 0, 30000 + n))
                 .returncode for n in range(40)]
        assert set(codes) <= {0, 1}, codes
        server.proc.terminate()
        os.kill(recorder, signal.SIGCONT)
        assert server.proc.wait(60) == 0
    finally:
        server.stop()
    # (on a quiet machine the recorder, let go before its SIGTERM came, may have stored them all already)
    with sqlite3.connect(tmp_path / "history.sqlite") as db:
        first = dict(db.execute("SELECT name, value FROM counters"))
    assert first.get("dropped", 0) == 0, first
    server = ConsoleServer(tmp_path, workers=2)
    try:
        def stored():
            with sqlite3.connect(tmp_path / "history.sqlite", timeout=30) as db:
                return db.execute("SELECT count(*) FROM history").fetchone()[0]

        wait_for(lambda: stored() >= 40, timeout=120, what="the spool's records stored")
        assert stored() == 40
    finally:
        assert server.stop() == 0
    with sqlite3.connect(tmp_path / "history.sqlite") as db:
        counters = dict(db.execute("SELECT name, value FROM counters"))
    assert counters.get("dropped", 0) == 0, (counters, server.log_path.read_text())
    assert not list((tmp_path / "history.sqlite-spool").glob("spool-*"))


@needs_spamc
@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_killed_console_is_started_again_and_the_checks_never_stop(tmp_path, workers):
    server = ConsoleServer(tmp_path, workers=workers)
    checks = Checks(server)
    try:
        client = Client(server)
        assert client.login("admin")[0] == 200
        first = console_pids(server)[-1]        # the console that answered (none died at its start: no end line)
        assert f"console (pid {first})" not in server.log_text() and os.path.exists(f"/proc/{first}"), \
            server.log_text()
        checks.start()
        wait_for(lambda: len(checks.codes) >= 3, what="the first checks")
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: f"console (pid {first}) was killed by SIGKILL" in server.log_text(), what="the log line")
        assert re.search(rf"console \(pid {first}\) was killed by SIGKILL after \d+ s; starting another in 1 s",
                         server.log_text()), server.log_text()
        during = len(checks.codes)
        wait_for(lambda: len(console_pids(server)) == 2, what="a new console")
        second = console_pids(server)[-1]
        assert second != first
        wait_for(lambda: server._up(server.ui), what="the console's port")
        # it answers again (the sessions were the dead process's: a login anew)
        fresh = Client(server)
        assert fresh.login("admin")[0] == 200
        # the checks went on while the console was down, and their records reach the new one
        wait_for(lambda: len(checks.codes) >= during + 5, what="more checks")
        assert set(checks.codes) <= {0, 1}, checks.codes
        wait_rows(fresh, 3)
        assert len(wait_rows(fresh, 3)) >= 3
        # one that dies again at once waits twice as long: a bounded back-off
        os.kill(second, signal.SIGKILL)
        wait_for(lambda: f"console (pid {second}) was killed" in server.log_text(), what="the second log line")
        assert re.search(rf"console \(pid {second}\) was killed by SIGKILL after \d+ s; starting another in 2 s",
                         server.log_text()), server.log_text()
        wait_for(lambda: len(console_pids(server)) == 3, what="a third console")
        assert server.proc.poll() is None
    finally:
        checks.stop_with(server)


@needs_spamc
@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_sighup_makes_the_console_read_its_users_again(tmp_path, workers):
    server = ConsoleServer(tmp_path, workers=workers)
    try:
        viewer = Client(server)
        assert viewer.login("viewer")[0] == 200
        trainer = Client(server)
        assert trainer.login("trainer")[0] == 200
        dave = Client(server)
        assert dave.login("dave")[0] == 401
        users = server.home / "users"
        lines = [line for line in users.read_text().splitlines() if not line.startswith("viewer ")]
        users.write_text("\n".join(lines) + f"\ndave admin {hash_password('dave-pw', params=(2 ** 10, 8, 1))}\n")
        server.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "console: SIGHUP:" in server.log_text(), what="the console's reload")
        assert "console: SIGHUP: 5 user(s) read from" in server.log_text(), server.log_text()
        assert dave.login("dave")[0] == 200
        assert viewer.request("GET", "/api/v1/session")[0] == 401       # a user gone: the session ended
        assert Client(server).login("viewer")[0] == 401
        assert trainer.request("GET", "/api/v1/session")[0] == 200      # the others' go on
        # a file that cannot be read keeps the users as they were
        users.write_text("dave superuser scrypt$x\n")
        server.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "users not reloaded" in server.log_text(), what="the refused reload")
        assert "line 1" in server.log_text().split("users not reloaded", 1)[1].splitlines()[0]
        assert Client(server).login("dave")[0] == 200
        users_file(users)
    finally:
        assert server.stop() == 0
