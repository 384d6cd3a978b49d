"""Hostile servers for ``spamnb imap`` and a hostile stream for ``spamnb serve
--shared`` (issue 45, docs/reliability.md "Round three"): what each attack
does to the client's time, exit code and peak memory.

IMAP: a fake IMAP server on loopback (plain, ``security = "none"``) that
answers as a normal one until the attack: ``endless`` (untagged ``* n FETCH``
lines for ever in answer to the body fetch), ``literal`` (a 3 GB literal,
streamed as fast as it is read), ``trickle`` (one byte a second of a line
that never ends), ``uid`` (a UID SEARCH answer that is not a number),
``uidvalidity`` (UIDVALIDITY "abc").  Each attack runs ``spamnb imap scan``
in a fresh process and prints its exit code, wall time, peak RSS (the
child's VmHWM, read every 10 ms while it runs) and its stderr's first line.

Shared: ``--redis-port P`` adds ``XADD spamnb:lessons * r <--entry-mib MiB>``
``--entries`` times to a running redis-server and prints a follower's peak
RSS while it reads them (a ``spamnb serve --shared`` on that Redis).

    python scripts/check/hostile_servers.py --model MODEL [--timeout 20] [endless literal trickle uid uidvalidity]
    python scripts/check/hostile_servers.py --model MODEL --redis-port 6390 --entries 8 --entry-mib 60 shared
    python scripts/check/hostile_servers.py --model MODEL --redis-port 6390 trimmed

``trimmed``: garbage in ``spamnb:trimmed`` for ``--settle`` seconds; prints how many lines the
follower logged meanwhile (a follower that fails every second logs one a second).
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MESSAGE = (b"From: a@example.org\r\nTo: b@example.org\r\nSubject: hello\r\nMessage-ID: <1@example.org>\r\n\r\n"
           b"Hello, the minutes of the meeting are attached.\r\n")
ATTACKS = ("endless", "literal", "trickle", "uid", "uidvalidity")


class FakeImap:
    """An IMAP server on 127.0.0.1 (a thread, one connection at a time) with a
    mailbox of ``messages`` (UID 1..n); ``attack`` (one of ATTACKS, or None)
    changes one answer.  ``commands``: every command line received."""

    def __init__(self, attack=None, messages=(MESSAGE,), literal=3_000_000_000, sizes=None):
        self.attack, self.messages, self.literal = attack, list(messages), literal
        self.sizes = sizes or {}        # uid -> the RFC822.SIZE to announce (a lie, say)
        self.commands = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def close(self):
        self.stop.set()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)   # wakes the accept() the thread waits in (close alone does not)
        except OSError:
            pass
        self.listener.close()
        self.thread.join(10)

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            try:
                with conn:
                    self._session(conn)
            except OSError:
                pass

    def _session(self, conn):
        conn.settimeout(120)
        reader = conn.makefile("rb")
        conn.sendall(b"* OK [CAPABILITY IMAP4rev1 MOVE UIDPLUS] fake ready\r\n")
        while not self.stop.is_set():
            line = reader.readline(1 << 16)
            if not line:
                return
            self.commands.append(line)
            tag, _, rest = line.rstrip(b"\r\n").partition(b" ")
            word = rest.split(b" ", 1)[0].upper()
            if word == b"UID":
                word = b"UID " + rest.split(b" ", 2)[1].upper()
            ok = tag + b" OK done\r\n"
            if word == b"CAPABILITY":
                conn.sendall(b"* CAPABILITY IMAP4rev1 MOVE UIDPLUS\r\n" + ok)
            elif word == b"LOGOUT":
                conn.sendall(b"* BYE bye\r\n" + ok)
                return
            elif word == b"LIST":
                conn.sendall(b'* LIST () "/" "Junk"\r\n' + ok)
            elif word in (b"SELECT", b"EXAMINE"):
                validity = b"abc" if self.attack == "uidvalidity" else b"7"
                conn.sendall(b"* %d EXISTS\r\n* OK [UIDVALIDITY %s] ok\r\n" % (len(self.messages), validity) + ok)
            elif word == b"UID SEARCH":
                uids = b"1 x2" if self.attack == "uid" else b" ".join(b"%d" % (i + 1)
                                                                         for i in range(len(self.messages)))
                conn.sendall(b"* SEARCH " + uids + b"\r\n" + ok)
            elif word == b"UID FETCH" and b"BODY.PEEK[]" not in rest:
                conn.sendall(b"".join(b"* %d FETCH (UID %d RFC822.SIZE %d)\r\n"
                                      % (i + 1, i + 1, self.sizes.get(i + 1, len(m)))
                                      for i, m in enumerate(self.messages)) + ok)
            elif word == b"UID FETCH":
                wanted = {int(u) for u in rest.split(b" ")[2].split(b",")}
                self._bodies(conn, ok, wanted)
            else:
                conn.sendall(ok)

    def _bodies(self, conn, ok, wanted):
        if self.attack == "endless":
            chunk = b"".join(b"* %d FETCH (FLAGS (\\Seen))\r\n" % n for n in range(1, 1001))
            while not self.stop.is_set():
                conn.sendall(chunk)
        if self.attack == "literal":
            conn.sendall(b'* 1 FETCH (UID 1 FLAGS () INTERNALDATE "01-Jan-2026 00:00:00 +0000" BODY[] {%d}\r\n'
                         % self.literal)
            zeros = b"x" * (1 << 20)
            for _ in range(self.literal >> 20):
                if self.stop.is_set():
                    return
                conn.sendall(zeros)
            return
        if self.attack == "trickle":
            conn.sendall(b"* 1 FETCH (UID 1 FLAGS (")
            while not self.stop.wait(1.0):
                conn.sendall(b"x")
            return
        for i, m in enumerate(self.messages):
            if i + 1 not in wanted:
                continue
            conn.sendall(b'* %d FETCH (UID %d FLAGS (\\Seen) INTERNALDATE "01-Jan-2026 00:00:00 +0000" '
                         b'BODY[] {%d}\r\n' % (i + 1, i + 1, len(m)) + m + b")\r\n")
        conn.sendall(ok)


def write_home(home, port, model, host="127.0.0.1", security="none"):
    """A SPAMNB_HOME with ``model`` and an [imap] table for the fake server."""
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    (home / "model.spamnb").write_bytes(Path(model).read_bytes())
    password = home / "imap-password"
    password.write_text("secret\n")
    password.chmod(0o600)
    (home / "settings.toml").write_text(f'[imap]\nhost = "{host}"\nport = {port}\nuser = "alice"\n'
                                        f'security = "{security}"\npassword_file = "{password}"\n')
    return home


def run_measured(args, env, timeout, cwd=None):
    """Run ``args``; (exit code, seconds, peak RSS in MiB, stderr's first line); the
    process is killed after ``timeout`` seconds (exit code None).  The peak is the
    child's VmHWM, read every 10 ms while it runs (its ``ru_maxrss`` would count the
    pages of the process it was forked from: a test runner's hundreds of MiB)."""
    with tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=cwd)   # after its exec
        peak = [0.0]

        def watch():
            while proc.poll() is None:
                peak[0] = max(peak[0], _rss(proc.pid))
                time.sleep(0.01)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        watcher.join()
        took = time.monotonic() - started
        err.seek(0)
        first = err.read(400).split(b"\n")[0].decode("utf-8", "replace")
    code = None if proc.returncode == -9 else proc.returncode
    return code, took, peak[0], first


def spamnb_env(home):
    env = dict(os.environ, SPAMNB_HOME=str(home))
    env.setdefault("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    return env


def imap_attack(attack, model, timeout, kill_after):
    server = FakeImap(attack)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            home = write_home(tmp, server.port, model)
            extra = ["--timeout", str(timeout)] if timeout else []   # 0: none given (a spamnb without it)
            return run_measured([sys.executable, "-m", "spamnb", "imap", "scan", "-q", *extra],
                                spamnb_env(home), kill_after, cwd=home)   # not this folder: PYTHONPATH's spamnb
    finally:
        server.close()


def shared_attack(model, port, entries, mib, settle, trimmed=None):
    """A ``spamnb serve --shared`` following a stream into which ``entries`` entries of ``mib`` MiB are
    added; its peak RSS (VmHWM) before them and at its end, and how many
    entries its log says it skipped."""
    import redis

    r = redis.Redis(port=port)
    r.delete("spamnb:lessons", "spamnb:trimmed", "spamnb:snapshot")
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "model.spamnb"
        site.write_bytes(Path(model).read_bytes())
        spamd = socket.create_server(("127.0.0.1", 0))
        spamd_port = spamd.getsockname()[1]
        spamd.close()
        log_path = Path(tmp) / "serve.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "spamnb", "serve", "-m", str(site), "-w", "1",
                                     "-l", f"127.0.0.1:{spamd_port}", "--shared", f"redis://127.0.0.1:{port}/0",
                                     "--snapshot-interval", "0"],
                                    env=spamnb_env(tmp), stdout=subprocess.DEVNULL, stderr=log, cwd=tmp)
        deadline = time.monotonic() + 60
        while b"listening on" not in log_path.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(settle)
        before = _rss(proc.pid)
        if trimmed is not None:
            r.set("spamnb:trimmed", trimmed)
        body = b"x" * (mib << 20)
        for _ in range(entries):
            r.xadd("spamnb:lessons", {"r": body})
        del body
        time.sleep(settle)
        if trimmed is not None:
            r.delete("spamnb:trimmed")
        after = _rss(proc.pid)      # VmHWM: the peak since its start
        proc.terminate()
        proc.wait()
        text = log_path.read_text(errors="replace")
    return before, after, text.count("skipped"), text.count("shared:")


def _rss(pid):
    """The VmHWM (peak RSS) of process ``pid`` in MiB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("attacks", nargs="*", default=list(ATTACKS), help=f"of {', '.join(ATTACKS)}, shared, trimmed")
    parser.add_argument("--model", required=True, help="a model file for the scan")
    parser.add_argument("--timeout", type=float, default=20, help="spamnb imap --timeout (default 20; 0: not given)")
    parser.add_argument("--kill-after", type=float, default=60, help="kill a run still going after this long")
    parser.add_argument("--redis-port", type=int, help="a running redis-server (the shared attack)")
    parser.add_argument("--entries", type=int, default=8)
    parser.add_argument("--entry-mib", type=int, default=60)
    parser.add_argument("--settle", type=float, default=10, help="seconds the follower is given (default 10)")
    args = parser.parse_args()
    for attack in args.attacks:
        if attack == "shared":
            before, peak, skipped, _ = shared_attack(args.model, args.redis_port, args.entries, args.entry_mib,
                                                     args.settle)
            print(f"shared: {args.entries} x {args.entry_mib} MiB entries: follower peak RSS {before:.0f} -> "
                  f"{peak:.0f} MiB; {skipped} log lines with 'skipped'")
            continue
        if attack == "trimmed":
            _, _, _, lines = shared_attack(args.model, args.redis_port, 0, 0, args.settle, trimmed=b"garbage\xff")
            print(f"trimmed: spamnb:trimmed = 'garbage\\xff' for {args.settle:g} s: {lines} \"shared:\" log lines")
            continue
        code, took, peak, first = imap_attack(attack, args.model, args.timeout, args.kill_after)
        print(f"{attack}: exit {code if code is not None else 'killed'} after {took:.1f} s, peak RSS {peak:.0f} MiB:"
              f" {first}")


if __name__ == "__main__":
    main()
