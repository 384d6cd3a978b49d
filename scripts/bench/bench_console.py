"""Benchmark of the web console (``spamnb serve --ui``; figures in docs/ui.md).

1. History of 100,000 rows (``--rows``): the SQLite file filled with rows
   whose header blocks are the corpus's own, then served by a real
   ``spamnb serve --ui``: the time of ``GET /api/v1/history`` (one page of
   50: the first, one filtered by verdict, a full-text search, a page deep
   in the history, a user's own rows), as the client sees it over a
   kept-alive connection, p50 and p95; with ``--browser``, the time from
   navigation until the history table's 50 rows are in the page in Debian's
   chromium (playwright), p50 and p95.
2. Throughput of CHECK with 8 kept-alive clients (the test part of the
   corpus, each client sending every message), the server without and with
   the console (records written, no message kept), rounds alternated so a
   change of the machine's load hits both alike: messages/s of each, their
   ratio, the records the console received and dropped, the console
   process's resident memory at the end.

    python scripts/bench/bench_console.py [--corpus ../shared/corpora/spamassassin] [--rows 100000] [--browser]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "scripts" / "bench"))

from harness import concurrently, corpus_split, free_port, wait_port  # noqa: E402
from spamnb.console.auth import hash_password  # noqa: E402
from spamnb.console.history import History  # noqa: E402
from spamnb.console.records import header_block  # noqa: E402
from spamnb.model.spam_filter import SpamFilter  # noqa: E402


def q(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))] * 1000.0


def throughput(port, messages, n_clients, _keep_alive=True):
    """CHECKs a second: ``n_clients`` threads, each sending every message on one kept-alive connection."""
    import socket

    requests = [b"CHECK SPAMC/1.5\r\nUser: bench\r\nConnection: keep-alive\r\nContent-length: %d\r\n\r\n%s"
                % (len(m), m) for m in messages]

    def client(_i):
        with socket.create_connection(("127.0.0.1", port)) as s, s.makefile("rb") as answers:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for data in requests:
                s.sendall(data)
                head = [answers.readline()]     # CHECK's answer: a status line and fields, no body
                while head[-1] not in (b"\r\n", b""):
                    head.append(answers.readline())
                if b" 0 EX_OK" not in head[0]:
                    raise RuntimeError(b"".join(head)[:200])

    return n_clients * len(messages) / concurrently(client, n_clients)


LOAD_CLIENTS = 2


def check_load(port, messages, stop):
    """CHECKs from LOAD_CLIENTS kept-alive clients until ``stop`` is set; their count in ``stop.checks``."""
    stop.checks = 0
    while not stop.is_set():
        throughput(port, messages[:50], LOAD_CLIENTS, True)
        stop.checks += 50 * LOAD_CLIENTS


def parent_of(pid):
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def cpu_seconds(pid):
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid):
    """``pid``'s descendants (the workers, the console's keeper, the console and its recorder)."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    direct = [int(p) for p in out.split()]
    return direct + [grandchild for child in direct for grandchild in children(child)]


def counts(history):
    """(records stored, records dropped) as the recorder last wrote them in the history file."""
    import sqlite3

    try:
        with sqlite3.connect(f"file:{history}?mode=ro", uri=True, timeout=10) as db:
            found = dict(db.execute("SELECT name, value FROM counters"))
    except sqlite3.Error:
        return 0, 0
    return found.get("received", 0), found.get("dropped", 0)


def logged_pid(path, pattern):
    found = re.search(pattern, Path(path).read_text())
    return int(found.group(1)) if found else None


def start(home, port, ui=None, extra=()):
    log = open(home / f"serve-{port}.log", "wb")
    args = [sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{port}", "-m", str(home / "model.spamnb"),
            *extra]
    if ui:
        args += ["--ui", str(ui), "--ui-users", str(home / "users")]
    env = dict(os.environ, PYTHONPATH=str(REPO), SPAMNB_HOME=str(home))
    proc = subprocess.Popen(args, env=env, stderr=log, stdout=subprocess.DEVNULL)
    wait_port(port, proc)
    if ui:
        wait_port(ui, proc)
    return proc


def stop(proc):
    proc.terminate()
    proc.wait(30)


class Console:
    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.cookie = ""

    def get(self, path):
        self.conn.request("GET", path, headers={"Cookie": self.cookie})
        answer = self.conn.getresponse()
        return answer.status, answer.read()

    def login(self, name, password):
        self.conn.request("POST", "/api/v1/login", body=json.dumps({"user": name, "password": password}),
                          headers={"Content-Type": "application/json"})
        answer = self.conn.getresponse()
        answer.read()
        self.cookie = answer.getheader("Set-Cookie").split(";", 1)[0]


def fill(path, rows, messages):
    history = History(str(path), rows=rows + 1, kept=0)
    heads = [header_block(m) for m in messages]
    now = time.time()
    batch = []
    for n in range(rows):
        batch.append(({"t": now - (rows - n) * 0.5, "label": ("spam", "ham", "unsure")[n % 3], "score": 1.0,
                       "log_odds": 1.0, "user": f"user{n % 50}", "front": "spamd", "verb": "CHECK",
                       "action": "none", "size": 1000, "ms": 1.0, "evidence": [["token", 1.0]] * 10},
                      heads[n % len(heads)], b""))
        if len(batch) == 5000:
            history.add(batch)
            batch = []
    if batch:
        history.add(batch)
    history.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpora" / "spamassassin"))
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=50, help="requests per kind of history page")
    parser.add_argument("--browser", action="store_true", help="also time the page in chromium (playwright)")
    parser.add_argument("--browser-rounds", type=int, default=40, help="navigations timed in chromium, each way")
    parser.add_argument("--throughput-only", action="store_true", help="only part 2: throughput, CPU, records")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds, each without then with the console")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--messages", type=int, default=1200, help="test messages each client sends a round")
    args = parser.parse_args()
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        corpus = REPO / "corpora"
    train, test = corpus_split(corpus)
    home = Path(tempfile.mkdtemp(prefix="bench-console-"))
    print(f"load before: {os.getloadavg()[0]:.2f}; corpus {corpus.name}: {len(train)} train, {len(test)} test")
    SpamFilter().fit([p.read_bytes() for p, _ in train], [s for _, s in train]).save(home / "model.spamnb")
    (home / "users").write_text(f"bench admin {hash_password('bench-pw')}\n")
    messages = [p.read_bytes() for p, _ in test][:args.messages]

    # 1. the history page with --rows rows
    if not args.throughput_only:
        started = time.perf_counter()
        fill(home / "history.sqlite", args.rows, messages)
        print(f"history of {args.rows} rows written in {time.perf_counter() - started:.1f} s "
              f"({(home / 'history.sqlite').stat().st_size / 2**20:.1f} MiB)")
        port, ui = free_port(), free_port()
        proc = start(home, port, ui, ["--ui-history", str(home / "history.sqlite"), "--ui-history-rows", str(args.rows + 1),
                                      "-w", "1"])
        try:
            console = Console(ui)
            console.login("bench", "bench-pw")
            word = re.sub(r"[^a-z]", "", (History(str(home / "history.sqlite")).page(limit=1)[0]["subject"] or "a").split()[0].lower()) or "re"
            middle = args.rows // 2
            kinds = {"first page": "/api/v1/history?limit=50", "spam only": "/api/v1/history?limit=50&label=spam",
                     f"search '{word}'": f"/api/v1/history?limit=50&q={word}",
                     "deep page": f"/api/v1/history?limit=50&before={middle}",
                     "deep spam page": f"/api/v1/history?limit=50&label=spam&before={middle}"}
            for name, path in kinds.items():
                times = []
                for _ in range(args.requests):
                    t = time.perf_counter()
                    status, body = console.get(path)
                    times.append(time.perf_counter() - t)
                    assert status == 200, body[:200]
                rows = len(json.loads(body)["rows"])
                print(f"GET history, {name}: p50 {q(times, 0.5):.1f} ms, p95 {q(times, 0.95):.1f} ms ({rows} rows)")
            if args.browser:
                from playwright.sync_api import sync_playwright

                with sync_playwright() as p:
                    browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                                args=["--no-sandbox"] if os.geteuid() == 0 else [])
                    page = browser.new_page()
                    base = f"http://127.0.0.1:{ui}"
                    page.goto(base + "/")
                    page.fill("#login-user", "bench")
                    page.fill("#login-password", "bench-pw")
                    page.click("#login-button")
                    page.wait_for_selector("#history tbody tr")
                    for under_load in (False, True):
                        checking = threading.Event()
                        load = threading.Thread(target=check_load, args=(port, messages, checking), daemon=True)
                        if under_load:
                            load.start()
                        times, floor = [], []
                        for _ in range(args.browser_rounds):
                            page.goto("about:blank")
                            t = time.perf_counter()
                            page.goto(base + "/#/history")
                            page.locator("#history tbody tr").nth(49).wait_for()
                            times.append(time.perf_counter() - t)
                            page.goto("about:blank")
                            t = time.perf_counter()
                            page.goto(base + "/static/app.css")     # the browser's own floor: one small file shown
                            floor.append(time.perf_counter() - t)
                        checking.set()
                        if under_load:
                            load.join()
                        what = (f"with {LOAD_CLIENTS} clients checking meanwhile ({checking.checks} checks, "
                                f"load {os.getloadavg()[0]:.1f})" if under_load else "no checks meanwhile")
                        print(f"history page usable in chromium (navigation to 50 rows shown), {what}: "
                              f"p50 {q(times, 0.5):.0f} ms, p95 {q(times, 0.95):.0f} ms; the browser's floor "
                              f"(a 1 KiB style sheet shown): p50 {q(floor, 0.5):.0f} ms, p95 {q(floor, 0.95):.0f} ms")
                    browser.close()
        finally:
            stop(proc)

    # 2. throughput without and with the console
    off, on, received, dropped, sent, memory = [], [], 0, 0, 0, {}
    cpu = {False: [0.0, 0], True: [0.0, 0]}     # server CPU seconds (workers, keeper, console, recorder), checks
    own = {"console": 0.0, "recorder": 0.0}
    checking = {False: 0.0, True: 0.0}      # CPU seconds of the processes that answer checks (workers, parent)
    patterns = {"console": r"console on \S+ \(pid (\d+)\)", "recorder": r"console's recorder \(pid (\d+)\)"}
    for _ in range(args.rounds):
        for with_console in (False, True):
            port, ui = free_port(), free_port()
            history = home / f"h-{port}.sqlite"
            log = home / f"serve-{port}.log"
            proc = start(home, port, ui if with_console else None,
                         ["-w", str(args.workers), "--ui-history", str(history)] if with_console else
                         ["-w", str(args.workers)])
            try:
                throughput(port, messages[:20], 2, True)      # warm: the model in every worker
                if with_console:
                    deadline = time.monotonic() + 30
                    while counts(history)[0] < 40 and time.monotonic() < deadline:
                        time.sleep(0.1)     # the warm-up's records stored
                    pid_of = {name: logged_pid(log, pattern) for name, pattern in patterns.items()}
                    own_before = {name: cpu_seconds(pid) for name, pid in pid_of.items()}
                pids = children(proc.pid) + [proc.pid]
                keeper = parent_of(pid_of["console"]) if with_console else None
                serving = [p for p in pids if p == proc.pid or (parent_of(p) == proc.pid and p != keeper)]
                before = sum(cpu_seconds(p) for p in pids)
                serving_before = sum(cpu_seconds(p) for p in serving)
                rate = throughput(port, messages, args.clients, True)
                (on if with_console else off).append(rate)
                checks = args.clients * len(messages)
                if with_console:        # every record stored (or counted as dropped), then the CPU read
                    deadline = time.monotonic() + 120
                    while True:
                        stored, lost = counts(history)
                        if stored + lost >= checks + 40 or time.monotonic() > deadline:
                            break
                        time.sleep(0.2)
                    received += stored - 40
                    dropped += lost
                    sent += checks
                    for name, pid in pid_of.items():
                        own[name] += cpu_seconds(pid) - own_before[name]
                        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
                        memory[name] = max(memory.get(name, 0), int(fields["VmHWM"].split()[0]) / 1024)
                cpu[with_console][0] += sum(cpu_seconds(p) for p in pids) - before
                cpu[with_console][1] += checks
                checking[with_console] += sum(cpu_seconds(p) for p in serving) - serving_before
            finally:
                stop(proc)
    paired = sorted(b / a for a, b in zip(off, on))
    print(f"CHECK throughput, {args.clients} kept-alive clients, -w {args.workers}, {len(messages)} messages each: "
          f"without the console {statistics.median(off):.0f}/s (rounds {', '.join(f'{r:.0f}' for r in off)}), "
          f"with it {statistics.median(on):.0f}/s (rounds {', '.join(f'{r:.0f}' for r in on)}): "
          f"{100 * statistics.median(on) / statistics.median(off):.1f} %; each round's with/without: "
          f"{', '.join(f'{100 * r:.0f} %' for r in paired)} (median {100 * statistics.median(paired):.0f} %)")
    per = {k: 1e6 * v[0] / v[1] for k, v in cpu.items()}
    served = {k: 1e6 * checking[k] / cpu[k][1] for k in checking}
    print(f"CPU time a check in the processes that answer checks (workers and parent; the records' cost to a "
          f"check): without the console {served[False]:.1f} us, with it {served[True]:.1f} us: "
          f"{100 * served[False] / served[True]:.1f} % (the share of a saturated machine's checks left when the "
          f"recorder gets only the CPU the checks leave)")
    print(f"server CPU time per check (workers, parent, the console's keeper, console and recorder; the load does "
          f"not change it much): without the console {per[False]:.0f} us, with it {per[True]:.0f} us: "
          f"{100 * per[False] / per[True]:.1f} % (the share of a saturated machine's checks left were the records "
          f"written at once); of it the recorder's {1e6 * own['recorder'] / max(1, cpu[True][1]):.0f} us a record, "
          f"the console's (pages) {1e6 * own['console'] / max(1, cpu[True][1]):.0f} us")
    print(f"records: {sent} checks, {received} stored by the recorder, {dropped} dropped; at most "
          f"{memory.get('console', 0):.1f} MiB resident in the console process, "
          f"{memory.get('recorder', 0):.1f} MiB in the recorder")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    shutil.rmtree(home, ignore_errors=True)        # the history alone is 400 MiB at 100,000 rows


if __name__ == "__main__":
    main()
