"""The server under pressure, round two (docs/reliability.md, issue 34's figures).

Each mode starts its own ``spamnb serve`` (``python -m spamnb serve``) on a
free loopback port and a Unix socket in a temporary folder, with the model
given, does its thing with the real ``spamc`` and prints the figures:

``storm``   SIGHUPs at a high rate, then SIGTERM at once; how long the server
            (parent and workers) takes to be gone.  ``--runs`` times.
``reload``  two ``spamc -x -c`` loops (TCP and the Unix socket) while the
            server gets one SIGHUP every ``--every`` seconds for ``--seconds``;
            how many checks failed (exit other than 0/1, or ``0/0``).
            ``--kill-worker``: a worker SIGKILLed instead (the floor).
``tls``     ``--silent`` connections that send nothing to the TLS port from a
            refused address (127.0.0.2, outside ``--allowed-ips 127.0.0.1``),
            then a ``spamc -c`` on the Unix socket and on the plain port: the
            wall time of each, against the same checks before.
``users``   ``--users`` TELLs (``spamc -L spam -u userN``, each a new user,
            ``--create-user-models``) each followed by a check of that user:
            the worker's resident memory (``VmRSS``) before and after, and
            how many user models the limits let the server make.

    python scripts/bench/bench_pressure.py storm  --model M --runs 22
    python scripts/bench/bench_pressure.py reload --model M --seconds 60 MESSAGE
    python scripts/bench/bench_pressure.py tls    --model M --silent 300 MESSAGE
    python scripts/bench/bench_pressure.py users  --model M --users 1000 MESSAGE
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SPAMC = shutil.which("spamc") or "/usr/bin/spamc"
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))   # harness.py
from harness import free_port  # noqa: E402


class Server:
    """``spamnb serve -l 127.0.0.1:PORT -l FOLDER/spamd.sock -m MODEL ARGS``."""

    def __init__(self, folder, model, *args, cpu=None):
        self.folder = Path(folder)
        self.port = free_port()
        self.sock = str(self.folder / f"spamd-{self.port}.sock")
        self.log_path = self.folder / f"serve-{self.port}.log"
        self.log = open(self.log_path, "wb")
        command = [sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{self.port}", "-l", self.sock,
                   "-m", str(model), *map(str, args)]
        if cpu is not None:
            command = ["taskset", "-c", str(cpu), *command]
        env = dict(os.environ, PYTHONPATH=str(REPO), SPAMNB_HOME=str(self.folder))
        self.proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 60
        while "listening on" not in self.log_path.read_text(errors="replace") or not os.path.exists(self.sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not start: {self.log_path.read_text(errors='replace')}")
            time.sleep(0.05)
        time.sleep(0.3)     # the workers forked and listening

    def children(self):
        try:
            text = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def spamc(self, *args, stdin=b"", unix=False):
        where = ["-U", self.sock] if unix else ["-d", "127.0.0.1", "-p", str(self.port)]
        return subprocess.run([SPAMC, *where, *map(str, args)], input=stdin, capture_output=True, timeout=120)

    def stop(self, wait=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def _gone(pids):
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            return False
    return True


def storm(args, folder):
    """SIGHUPs, then SIGTERM: seconds until the parent and every worker are gone."""
    times, late = [], 0
    for run in range(args.runs):
        server = Server(folder, args.model, "--workers", args.workers, cpu=args.cpu)
        pause = args.over / args.hups
        seen = set(server.children())
        for _ in range(args.hups):
            server.proc.send_signal(signal.SIGHUP)
            time.sleep(pause)
            seen.update(server.children())
        seen.update(server.children())
        started = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        while not (server.proc.poll() is not None and _gone(seen)) and time.monotonic() - started < args.limit:
            time.sleep(0.02)
            if server.proc.poll() is None:
                seen.update(server.children())
        took = time.monotonic() - started
        up = server.proc.poll() is None or not _gone(seen)
        late += up or took > 10
        times.append(took)
        print(f"run {run + 1}: {'STILL UP' if up else 'gone'} {took:.2f} s after SIGTERM", flush=True)
        server.stop()
    times.sort()
    print(f"storm: {args.runs} runs of {args.hups} SIGHUPs in {args.over:g} s then SIGTERM: "
          f"{late} still up after 10 s; median {times[len(times) // 2]:.2f} s, max {times[-1]:.2f} s")


def reload(args, folder):
    """Two spamc -x -c loops while SIGHUPs come: how many checks failed."""
    data = Path(args.message).read_bytes()
    server = Server(folder, args.model, "--workers", args.workers)
    expected = server.spamc("-x", "-c", stdin=data)
    stop = threading.Event()
    tally = collections.Counter()
    failures = []

    def loop(unix):
        while not stop.is_set():
            proc = server.spamc("-x", "-c", stdin=data, unix=unix)
            ok = proc.returncode == expected.returncode and proc.stdout == expected.stdout
            tally["ok" if ok else "failed"] += 1
            if not ok:
                failures.append((proc.returncode, proc.stdout.strip()[:40]))

    threads = [threading.Thread(target=loop, args=(unix,)) for unix in (False, True)]
    for t in threads:
        t.start()
    hups = 0
    ends = time.monotonic() + args.seconds
    while time.monotonic() < ends:
        time.sleep(args.every)
        if args.kill_worker:
            workers = server.children()
            if workers:
                os.kill(workers[hups % len(workers)], signal.SIGKILL)
        else:
            server.proc.send_signal(signal.SIGHUP)
        hups += 1
    stop.set()
    for t in threads:
        t.join()
    code = server.stop()
    total = tally["ok"] + tally["failed"]
    what = "SIGKILLs of a worker" if args.kill_worker else "SIGHUPs"
    print(f"reload: {hups} {what} (one every {args.every:g} s) under two spamc -x -c loops, "
          f"--workers {args.workers}: {tally['failed']} of {total} checks failed; server exit {code}")
    for item, n in collections.Counter(failures).most_common(5):
        print(f"  {n} x exit {item[0]} {item[1]!r}")


def tls(args, folder):
    """Silent connections to the TLS port from a refused address: the delay of a check."""
    data = Path(args.message).read_bytes()
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost"], check=True, capture_output=True)
    tls_port = free_port()
    server = Server(folder, args.model, "--workers", args.workers, "--ssl-listen", f"127.0.0.1:{tls_port}",
                    "--ssl-cert", cert, "--ssl-key", key, "--allowed-ips", "127.0.0.1/32", *args.extra)

    def timed(unix):
        started = time.monotonic()
        proc = server.spamc("-x", "-c", stdin=data, unix=unix)
        return time.monotonic() - started, proc.returncode

    before = {name: timed(unix) for name, unix in (("unix", True), ("tcp", False))}
    held = []
    for _ in range(args.silent):
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        try:
            s.connect(("127.0.0.1", tls_port))
        except OSError:
            s.close()
            continue
        held.append(s)
    time.sleep(0.5)
    after = {name: timed(unix) for name, unix in (("unix", True), ("tcp", False))}
    for s in held:
        s.close()
    server.stop()
    for name in ("unix", "tcp"):
        print(f"tls: {len(held)} silent connections from 127.0.0.2 to the TLS port: spamc -x -c on {name}: "
              f"{before[name][0]:.3f} s (exit {before[name][1]}) before, {after[name][0]:.3f} s (exit {after[name][1]})"
              f" with them held; delay {after[name][0] - before[name][0]:+.3f} s")


def _rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def users(args, folder):
    """New users taught by TELL, each checked after: the worker's resident memory."""
    data = Path(args.message).read_bytes()
    model = folder / "model.spamnb"
    shutil.copyfile(args.model, model)
    server = Server(folder, model, "--workers", 1, "--allow-tell", "--create-user-models", "--models-dir",
                    folder / "users", *args.extra)
    server.spamc("-x", "-c", stdin=data)
    start = _rss_kib(server.proc.pid)
    made = refused = 0
    marks = []
    for i in range(args.users):
        message = data + f"\nuser {i} note w{i}x\n".encode()
        proc = server.spamc("-x", "-L", "spam", "-u", f"user{i}", stdin=message)
        if proc.returncode == 0:
            made += 1
        else:
            refused += 1
        server.spamc("-x", "-c", "-u", f"user{i}", stdin=message)
        if (i + 1) % max(1, args.users // 10) == 0:
            marks.append((i + 1, _rss_kib(server.proc.pid)))
            print(f"  {i + 1} users: VmRSS {marks[-1][1] / 1024:.1f} MiB", flush=True)
    end = _rss_kib(server.proc.pid)
    server.stop()
    print(f"users: {made} user models made by TELL ({refused} refused) on {args.model} "
          f"({os.path.getsize(args.model) / 2**20:.1f} MiB): worker VmRSS {start / 1024:.1f} MiB -> "
          f"{end / 1024:.1f} MiB (+{(end - start) / 1024:.1f} MiB, {(end - start) / max(1, made):.0f} KiB a user)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("storm", "reload", "tls", "users"))
    parser.add_argument("message", nargs="?", default=str(sorted((REPO / "corpora" / "spam").iterdir())[0]))
    parser.add_argument("--model", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=22, help="storm: servers started")
    parser.add_argument("--hups", type=int, default=60, help="storm: SIGHUPs per run")
    parser.add_argument("--over", type=float, default=3.0, help="storm: seconds the SIGHUPs take")
    parser.add_argument("--limit", type=float, default=40.0, help="storm: seconds to wait for the exit")
    parser.add_argument("--cpu", type=int, help="storm: pin the server to this CPU (taskset)")
    parser.add_argument("--seconds", type=float, default=60.0, help="reload: how long")
    parser.add_argument("--every", type=float, default=1.0, help="reload: seconds between SIGHUPs")
    parser.add_argument("--kill-worker", action="store_true",
                        help="reload: SIGKILL a worker (one, then the other) instead of the SIGHUPs")
    parser.add_argument("--silent", type=int, default=300, help="tls: silent connections")
    parser.add_argument("--users", type=int, default=1000, help="users: new users taught")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more arguments for spamnb serve")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="spamnb-pressure-"))
    try:
        {"storm": storm, "reload": reload, "tls": tls, "users": users}[args.mode](args, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
