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

   With ``--hold-recorder`` the recorder is stopped (SIGSTOP) while the
   clients check, and let go after: the records wait in the workers'
   queues and spools, and the CPU a check is the workers' cost of the
   records alone.
3. ``--micro``: a worker's CPU a record (its whole path, its frames alone) and the
   recorder's, in this process.

    python scripts/bench/bench_console.py [--corpus ../shared/corpora/spamassassin] [--rows 100000] [--browser]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
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


def counts(history, spooled=False):
    """(records stored, records dropped) as the recorder last wrote them in the
    history file (and with ``spooled``, those of them read from the workers' spools)."""
    import sqlite3

    try:
        with sqlite3.connect(f"file:{history}?mode=ro", uri=True, timeout=10) as db:
            found = dict(db.execute("SELECT name, value FROM counters"))
    except sqlite3.Error:
        found = {}
    out = found.get("received", 0), found.get("dropped", 0)
    return (*out, found.get("spooled", 0)) if spooled else out


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
    started = time.perf_counter()
    indexed = history.index() if hasattr(history, "index") else 0     # the search index filled lazily
    if indexed:
        print(f"the search index of {indexed} rows filled at once (as a search or an idle recorder fills it) in "
              f"{time.perf_counter() - started:.2f} s")
    history.close()


# (promises read through playwright's evaluate: its wait_for_function polls with a string eval'd in the page,
# which the console's Content-Security-Policy refuses)
ROWS_AT = """new Promise(done => new PerformanceObserver(list => {
    for (const entry of list.getEntries()) if (entry.name === "spamnb-rows") done(entry.startTime);
}).observe({type: "mark", buffered: true}))"""     # the script's page drawn (app.js marks it)
ROWS_PAINTED = """new Promise(done => new PerformanceObserver(list => {
    for (const entry of list.getEntries()) if (entry.identifier === "history-rows") done(entry.renderTime);
}).observe({type: "element", buffered: true}))"""     # the last row painted (Element Timing: app.js marks it)
FCP_AT = "(performance.getEntriesByName('first-contentful-paint')[0] || {startTime: NaN}).startTime"
FLOOR_PAGE = b"<!DOCTYPE html><title>floor</title><p id=line>one line</p>"


def rows_page(rows):
    """The history page's 50 rows as a static table (escaped text; no script,
    no style sheet): what the rows' text alone costs the browser to show."""
    import html

    cells = ("t", "label", "score", "user", "sender", "subject", "front", "action", "ms")
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(row.get(c) or ''))}</td>" for c in cells)
                   + ("<td elementtiming=history-rows>last</td>" if n == len(rows) - 1 else "") + "</tr>"
                   for n, row in enumerate(rows))
    return f"<!DOCTYPE html><meta charset=utf-8><title>rows</title><table>{body}</table>".encode()


def floor_server(pages):
    """Static pages (``pages``: path -> bytes) on a loopback port: the
    browser's own floor (a one-line page: the least a page costs to be
    shown); (its URL, the server to shut down)."""
    import http.server

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the standard library's name
            path = self.path.split("?", 1)[0]
            page = FLOOR_PAGE if path == "/" else pages.get(path)
            try:
                if page is None:
                    self.send_error(404)        # the browser's favicon.ico
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(page)
            except OSError:
                pass        # the browser went on to the next page

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/", server


def browser_figures(ui, port, messages, rounds):
    """The history page in Debian's chromium (playwright), logged in: from
    the navigation's start (from a page of the console, as a reload or a
    link: the same renderer process) to the 50 rows painted (the last row's
    Element Timing entry: the console draws them in the page's HTML) and to
    the page drawn again by its script (``performance.mark('spamnb-rows')``),
    p50 and p95 of ``rounds`` loads; in the same run, alternated, the browser's
    own floor (a static one-line page's first contentful paint) and the same
    rows as a static table (their paint: what their text costs alone), each
    loaded from a page of its own site; and the page loaded from about:blank,
    which the console's Cross-Origin-Opener-Policy answers with a new
    renderer process.  Without checks, then with LOAD_CLIENTS clients checking meanwhile."""
    from playwright.sync_api import sync_playwright

    console = Console(ui)
    console.login("bench", "bench-pw")
    floor_url, floor = floor_server({"/rows": rows_page(json.loads(console.get("/api/v1/history?limit=50")[1])["rows"])})
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
            rows_at, painted, floor_at, seen, static_rows, fresh = [], [], [], [], [], []
            for n in range(rounds):
                # a load from a page of the console (a reload, a link followed): the renderer process is kept
                page.goto(base + f"/?from={n}#/history")
                page.evaluate(ROWS_AT)
                t = time.perf_counter()
                page.goto(base + f"/?n={n}#/history", wait_until="commit")
                page.locator("#history tbody tr").nth(49).wait_for()
                seen.append(time.perf_counter() - t)
                rows_at.append(page.evaluate(ROWS_AT) / 1000.0)
                painted.append(page.evaluate(ROWS_PAINTED) / 1000.0)
                # from another page (about:blank): the console's Cross-Origin-Opener-Policy asks for a new
                # renderer process, started within the load
                page.goto("about:blank")
                page.goto(base + f"/?fresh={n}#/history", wait_until="commit")
                fresh.append(page.evaluate(ROWS_PAINTED) / 1000.0)
                # the floor, loaded from a page of its own site as the console's is
                page.goto(floor_url + f"?from={n}")
                page.goto(floor_url + f"?n={n}")
                page.wait_for_function("performance.getEntriesByName('first-contentful-paint').length > 0",
                                       polling="raf")
                floor_at.append(page.evaluate(FCP_AT) / 1000.0)
                page.goto(floor_url + f"rows?n={n}")
                static_rows.append(page.evaluate(ROWS_PAINTED) / 1000.0)
            checking.set()
            if under_load:
                load.join()
            what = (f"with {LOAD_CLIENTS} clients checking meanwhile ({checking.checks} checks)" if under_load
                    else "no checks meanwhile")
            print(f"history page in chromium, {what}, {rounds} loads, load {os.getloadavg()[0]:.1f}: "
                  f"navigation start to the page drawn by its script p50 {q(rows_at, 0.5):.0f} ms, "
                  f"p95 {q(rows_at, 0.95):.0f} ms; to the rows painted p50 {q(painted, 0.5):.0f} ms, "
                  f"p95 {q(painted, 0.95):.0f} ms; the browser's floor (a static one-line page's first paint) "
                  f"p50 {q(floor_at, 0.5):.0f} ms, p95 {q(floor_at, 0.95):.0f} ms; the page over the floor, "
                  f"paired median {statistics.median(a - b for a, b in zip(painted, floor_at)) * 1000:.0f} ms; "
                  f"the same 50 rows as a static table (no script, no style sheet) painted p50 "
                  f"{q(static_rows, 0.5):.0f} ms, p95 {q(static_rows, 0.95):.0f} ms; "
                  f"the page loaded from another (about:blank: a new renderer process, the console's "
                  f"Cross-Origin-Opener-Policy) painted p50 {q(fresh, 0.5):.0f} ms, p95 {q(fresh, 0.95):.0f} ms; "
                  f"as playwright sees it (goto to the 50th row) p50 {q(seen, 0.5):.0f} ms, p95 {q(seen, 0.95):.0f} ms")
        browser.close()
    floor.shutdown()


class _Cutoffs:
    spam, ham = 0.9, 0.1


class _Model:
    cutoffs = _Cutoffs()


class _ScoreMap:
    required = 5.0


class _Verdict:
    label, log_odds, probability, reason, tokens = "spam", 9.0, 0.99, "", 120
    evidence = ()       # a CHECK's verdict (spamnb.server.spamd_connection: CHECK asks for no evidence)


class _Checked:
    verdict, score, score_map, model = _Verdict(), 9.0, _ScoreMap(), _Model()


def worker_micro(messages, n, sender_class=None):
    """A worker's CPU a record: :class:`RecordSender`'s whole path as a
    worker runs it (the verdict hook, the request hook, the flushes into the
    recorder's Unix socket, read by a process of its own that drops them:
    no share of this one's interpreter lock, so it keeps up and nothing is
    spooled), ``time.thread_time`` of the loop's thread alone; (CPU a record,
    bytes a record).  ``sender_class``: another tree's RecordSender."""
    import asyncio
    import socket

    from spamnb.console.records import RecordSender

    RecordSender = sender_class or RecordSender     # noqa: N806

    folder = Path(tempfile.mkdtemp(prefix="bench-console-sender-"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / "records"))
    listener.listen(1)
    counted, told = os.pipe()
    reader = os.fork()
    if reader == 0:
        try:
            os.close(counted)
            conn, _ = listener.accept()
            total = 0
            while data := conn.recv(1 << 20):
                total += len(data)
            os.write(told, str(total).encode())
        finally:
            os._exit(0)
    os.close(told)
    got = [0]
    checked = _Checked()

    async def run():
        sender = RecordSender(str(folder / "records"))
        await sender.connect()
        t = time.thread_time()
        for i in range(n):
            m = messages[i % len(messages)]
            sender.on_verdict(checked, m, "bench")
            sender.on_request("CHECK", "bench", "spam 9.0/5.0", len(m), 1.0, "127.0.0.1", "spamd", "none")
            if i % 8 == 7:
                await asyncio.sleep(0)      # the loop turns between checks: the flushes come due
        if hasattr(sender, "close"):
            sender.flush()      # to the socket (a stop puts what the worker still holds in its spool)
            while sender.transport.get_write_buffer_size():
                await asyncio.sleep(0.01)
            await sender.close()
        else:       # (a tree before the graceful stop's hand-over: the last flush, then the socket closed)
            sender.flush()
            while sender.transport.get_write_buffer_size():
                await asyncio.sleep(0.01)
            sender.transport.close()
        return (time.thread_time() - t) / n, sender

    cost, sender = asyncio.run(run())
    with os.fdopen(counted, "rb") as pipe:
        got[0] = int(pipe.read() or 0)
    os.waitpid(reader, 0)
    listener.close()
    shutil.rmtree(folder, ignore_errors=True)
    if sender.spooled or sender.dropped:
        print(f"(the reader fell behind: {sender.spooled} records spooled, {sender.dropped} dropped)")
    return cost, got[0] / n


def build_micro(messages, against=None, rounds=30, batch=200):
    """The frames alone: :meth:`RecordSender._build` on batches of
    ``batch`` held records (as a flush finds them; a CHECK's verdict, no
    evidence), ``time.thread_time``, the median of ``rounds`` rounds, and
    the header's end as spamnb.mail.headers finds it against the frame
    builder's own search where the tree has one.  ``against``: another
    tree's ``_build`` in the same rounds, the order turned each round."""
    import importlib.util

    from spamnb.console import records

    checked = _Checked()
    held = [((checked, m, "bench", 1.0), "CHECK", 1.0, "spamd", "none", None) for m in messages]
    senders = {"this tree's": records.RecordSender("/nonexistent")}
    if against:
        spec = importlib.util.spec_from_file_location("bench_other_records_build",
                                                      Path(against) / "spamnb" / "console" / "records.py")
        other = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(other)
        senders[f"{against}'s"] = other.RecordSender("/nonexistent")
    spent = {name: [] for name in senders}
    for number in range(rounds):
        names = list(senders)[number % len(senders):] + list(senders)[:number % len(senders)]
        for name in names:
            sender = senders[name]
            t = time.thread_time()
            for start in range(0, len(held), batch):
                sender.out, sender.out_records, sender.held = bytearray(), 0, held[start:start + batch]
                sender._build()
            spent[name].append((time.thread_time() - t) / len(held))
    print(f"the frames alone, RecordSender._build on batches of {batch} held records ({rounds} rounds, load "
          f"{os.getloadavg()[0]:.1f}): " + ", ".join(f"{name} {statistics.median(times) * 1e6:.2f} us a record"
                                                    for name, times in spent.items()))
    from spamnb.mail.headers import header_length

    ends = {"the pattern (spamnb.mail.headers)": header_length}
    try:
        from spamnb.console._frames import header_length as compiled
        ends["the frame builder's"] = compiled
    except ImportError:     # (a tree before the compiled frame builder)
        pass
    times = {}
    for name, find in ends.items():
        t = time.thread_time()
        for _ in range(10):
            for m in messages:
                find(m, records.HEAD_BYTES)
        times[name] = (time.thread_time() - t) / (10 * len(messages))
    print("  the header's end: " + ", ".join(f"{name} {v * 1e6:.2f} us" for name, v in times.items()))


def check_path_micro(model_path, messages, blocks=36, block=400, against=None):
    """A worker's whole check path (the filter's verdict on the message as a
    CHECK asks it, no evidence; its score) without the record, with the
    record's frame made at once (as the check is answered) and with it made
    at the flush (:class:`RecordSender`'s way: its hooks, frames and flushes
    into a Unix socket read by a process of its own), in blocks of ``block``
    messages, the three kinds in turn, the order rotated from round to round,
    ``time.thread_time`` of the loop's thread (the flushes included): the
    median CPU a check of each and what each way of the record adds to a
    check (median of the rounds' differences, cache effects included).
    ``against``: another tree (a folder holding ``spamnb/``): its
    ``spamnb/console/records.py``'s sender too, its frames made at the flush,
    a fourth kind of block in the same rounds (this tree's against it: the
    median of the rounds' differences, the one comparison of two trees a
    loaded machine does not blur)."""
    import asyncio
    import importlib.util
    import socket

    from spamnb.console.records import RecordSender
    from spamnb.model.spam_filter import SpamFilter as Filter
    from spamnb.report.scale import ScoreMap
    from spamnb.server.check import Checked
    from spamnb.server.models import classify

    spam_filter = Filter.load(model_path)
    score_map = ScoreMap.from_cutoffs(getattr(spam_filter, "cutoffs", None)) if getattr(spam_filter, "cutoffs", None) else None
    folder = Path(tempfile.mkdtemp(prefix="bench-console-path-"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / "records"))
    listener.listen(2)
    connections = 2 if against else 1

    reader = os.fork()      # the reader a process of its own: no share of this one's interpreter lock
    if reader == 0:
        try:
            import selectors

            select = selectors.DefaultSelector()
            select.register(listener, selectors.EVENT_READ)
            accepted = reading = 0
            while accepted < connections or reading:
                for key, _ in select.select():
                    if key.fileobj is listener:
                        select.register(listener.accept()[0], selectors.EVENT_READ)
                        accepted, reading = accepted + 1, reading + 1
                    elif not key.fileobj.recv(1 << 20):
                        select.unregister(key.fileobj)
                        reading -= 1
        finally:
            os._exit(0)

    kinds = ("without", "at once", "at the flush")
    other = None
    if against:
        spec = importlib.util.spec_from_file_location("bench_other_records",
                                                      Path(against) / "spamnb" / "console" / "records.py")
        other = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(other)
        kinds += ("the other tree's",)
        blocks = blocks // 3 * 4

    async def run():
        sender = RecordSender(str(folder / "records"))
        await sender.connect()
        senders = {kind: sender for kind in kinds[1:3]}
        if other is not None:
            senders[kinds[3]] = other.RecordSender(str(folder / "records"))
            await senders[kinds[3]].connect()
        times = {kind: [] for kind in kinds}
        for b in range(blocks):
            rounds = b // len(kinds)
            kind = kinds[(b + rounds) % len(kinds)]     # the order rotated from round to round
            chunk = [messages[(rounds * block + i) % len(messages)] for i in range(block)]
            sender.defer = kind == "at the flush"
            record = senders.get(kind)
            t = time.thread_time()
            for i, m in enumerate(chunk):
                verdict = classify(spam_filter, m, False)
                checked = Checked(verdict, score_map.score(verdict.log_odds, verdict.label) if score_map else 0.0,
                                  score_map or _ScoreMap(), "", (), spam_filter)
                if record is not None:
                    record.on_verdict(checked, m, "bench")
                    record.on_request("CHECK", "bench", "spam 9.0/5.0", len(m), 1.0, "127.0.0.1", "spamd", "none")
                if i % 8 == 7:
                    await asyncio.sleep(0)      # the loop turns between checks: the flushes come due
            times[kind].append((time.thread_time() - t) / block)
        for each in {id(s): s for s in senders.values()}.values():
            await each.close()
            if each.spooled or each.dropped:
                print(f"(the reader fell behind: {each.spooled} records spooled, {each.dropped} dropped)")
        return times

    times = asyncio.run(run())
    os.waitpid(reader, 0)
    listener.close()
    shutil.rmtree(folder, ignore_errors=True)
    rounds = blocks // len(kinds)
    base = times["without"]
    print(f"a worker's check path (verdict and score, no evidence; {rounds} rounds of {block}-message blocks, "
          f"load {os.getloadavg()[0]:.1f}): without the record {statistics.median(base) * 1e6:.1f} us a check")
    for kind in kinds[1:]:
        print(f"  the record's frame made {kind if kind in kinds[1:3] else 'at the flush by ' + str(against)}: "
              f"{statistics.median(times[kind]) * 1e6:.1f} us a check; the record "
              f"adds (median of the rounds) {statistics.median(b - a for a, b in zip(base, times[kind])) * 1e6:.1f} us: "
              f"{100 * statistics.median(a / b for a, b in zip(base, times[kind])):.1f} % of the checks left")
    if other is not None:
        print(f"  this tree's record against {against}'s, both made at the flush: "
              f"{statistics.median(a - b for a, b in zip(times[kinds[2]], times[kinds[3]])) * 1e6:+.2f} us a check "
              f"(median of the rounds' differences)")


READ_BYTES = 256 * 1024     # the recorder's read from a connection (spamnb.console.process.READ_BYTES)


def micro(messages, n=20_000, against=None):
    """The pieces' CPU a record, measured in this process: a worker's
    (:func:`worker_micro`) and the recorder's (the frames' bytes read as
    the recorder reads a connection's, spamnb.console.records.FrameReader,
    then decoded and stored as it does, spamnb.console.history, batches of
    2,000 in a file, no message kept; ``time.process_time``).  ``against``:
    another tree's ``spamnb/console/history.py`` stores the same batches in
    a file of its own, the two trees' batches alternated (the order turned
    each batch): each one's CPU a record and their ratio."""
    import importlib.util

    from spamnb.console import records

    worker, size = worker_micro(messages, n)
    if against:     # the two trees' worker side alternated, 5 runs each of n // 4 records: the medians
        spec = importlib.util.spec_from_file_location("bench_other_records_alone",
                                                      Path(against) / "spamnb" / "console" / "records.py")
        theirs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(theirs)
        alone = {"this": [], "other": []}
        for number in range(5):
            for name in (("this", "other") if number % 2 == 0 else ("other", "this")):
                alone[name].append(worker_micro(messages, n // 4, None if name == "this" else theirs.RecordSender)[0])
        print(f"the worker's CPU a record alone, 5 runs of {n // 4} each tree alternated (load {os.getloadavg()[0]:.1f}): "
              f"this tree's {statistics.median(alone['this']) * 1e6:.2f} us, {against}'s "
              f"{statistics.median(alone['other']) * 1e6:.2f} us (medians; this tree's "
              f"{', '.join(f'{v * 1e6:.2f}' for v in alone['this'])}, the other's "
              f"{', '.join(f'{v * 1e6:.2f}' for v in alone['other'])})")
    frames = [records._frame((1, time.time(), 9.0, 5.0, 9.0, 0.99, 1.0, 0.9, 0.1, len(m), 120, 0),
                             ("spam", "bench", "CHECK", "spamd", "none", ""), (), records.header_block(m), b"", None)
              for m in (messages[i % len(messages)] for i in range(n))]
    home = Path(tempfile.mkdtemp(prefix="bench-console-micro-"))
    stores = {"this tree's": History(str(home / "h.sqlite"), rows=n + 1, kept=0)}
    if against:
        spec = importlib.util.spec_from_file_location("bench_other_history",
                                                      Path(against) / "spamnb" / "console" / "history.py")
        other = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(other)
        stores[f"{against}'s"] = other.History(str(home / "other.sqlite"), rows=n + 1, kept=0)
    spent = dict.fromkeys(stores, 0.0)
    for number, start in enumerate(range(0, n, 2000)):
        names = list(stores)[number % len(stores):] + list(stores)[:number % len(stores)]
        for name in names:
            history = stores[name]
            t = time.process_time()
            if hasattr(history, "add_frames"):      # read as the recorder reads a connection, then stored
                stream, reader, batch = b"".join(frames[start:start + 2000]), records.FrameReader(), []
                for at in range(0, len(stream), READ_BYTES):
                    for frame in reader.feed(stream[at:at + READ_BYTES]):
                        records.peek(frame)
                        batch.append(frame)
                history.add_frames(batch, {"received": start})
            else:       # (a tree before the recorder stored the frames as they came)
                history.add([records.decode(frame[4:], packed=True) for frame in frames[start:start + 2000]],
                            {"received": start})
            spent[name] += time.process_time() - t
    indexing = {}
    for name, history in stores.items():
        if hasattr(history, "index"):   # the search index filled afterwards (a search, the recorder idle)
            t = time.process_time()
            history.index()
            indexing[name] = (time.process_time() - t) / n
    for history in stores.values():
        history.close()
    recorder = spent["this tree's"] / n
    size_on_disk = (home / "h.sqlite").stat().st_size
    shutil.rmtree(home, ignore_errors=True)
    print(f"CPU a record (load {os.getloadavg()[0]:.1f}): the worker's {worker * 1e6:.1f} us (hooks, frame and "
          f"flushes into the recorder's socket, {size:.0f} bytes a record), the recorder's {recorder * 1e6:.1f} us "
          f"(read from its connection's bytes, decoded and stored, batches of 2,000); the history "
          f"{size_on_disk / n:.0f} bytes a row on disk")
    mine = indexing.get("this tree's")
    if mine is not None:
        print(f"  the search index filled afterwards (by a search, or the recorder when idle): {mine * 1e6:.1f} us a row")
    if against:
        theirs = spent[f"{against}'s"] / n
        print(f"  the recorder's CPU a record, batches alternated with {against}'s: this tree's {recorder * 1e6:.1f} us, "
              f"the other's {theirs * 1e6:.1f} us: {100 * recorder / theirs:.1f} %")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpora" / "spamassassin"))
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=50, help="requests per kind of history page")
    parser.add_argument("--browser", action="store_true", help="also time the page in chromium (playwright)")
    parser.add_argument("--browser-rounds", type=int, default=60, help="navigations timed in chromium, each way")
    parser.add_argument("--throughput-only", action="store_true", help="only part 2: throughput, CPU, records")
    parser.add_argument("--micro", action="store_true", help="only the CPU a record of the worker and the recorder")
    parser.add_argument("--against", metavar="TREE",
                        help="with --micro: another tree's worker side of the records and its history's store too, "
                             "in the same rounds")
    parser.add_argument("--pages-only", action="store_true", help="only part 1: the history pages (and --browser)")
    parser.add_argument("--pairs", "--rounds", type=int, default=7,
                        help="throughput pairs: a run without and a run with the console, the order alternated")
    parser.add_argument("--hold-recorder", action="store_true",
                        help="stop the recorder (SIGSTOP) while the clients check: the workers' cost of the records "
                             "alone, apart from the recorder's work beside the checks")
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
    if args.micro:
        micro(messages, against=args.against)
        build_micro(messages, against=args.against)
        check_path_micro(home / "model.spamnb", messages, against=args.against)
        shutil.rmtree(home, ignore_errors=True)
        return

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
                browser_figures(ui, port, messages, args.browser_rounds)
        finally:
            stop(proc)

    if args.pages_only:
        shutil.rmtree(home, ignore_errors=True)
        return

    # 2. throughput without and with the console, in pairs
    throughput_pairs(home, messages, args)
    shutil.rmtree(home, ignore_errors=True)        # the history alone is 400 MiB at 100,000 rows


def machine_cpu():
    """(busy, all) CPU seconds of the whole machine so far (/proc/stat: every process, every core)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / tick, sum(fields[:8]) / tick


PATTERNS = {"console": r"console on \S+ \(pid (\d+)\)", "recorder": r"console's recorder \(pid (\d+)\)"}


def throughput_run(home, messages, args, with_console):
    """One run of the clients against a server started for it (with or
    without the console): its rate, its checks, the CPU seconds of the
    clients (this process), of the processes that answer checks (workers
    and parent), of the console's recorder, console and keeper, the
    machine's busy and total CPU seconds over the clients' run, the load;
    with the console the records stored, dropped, read from the spools,
    the lag, the processes' peak memory."""
    port, ui = free_port(), free_port()
    history = home / f"h-{port}.sqlite"
    log = home / f"serve-{port}.log"
    proc = start(home, port, ui if with_console else None,
                 ["-w", str(args.workers), "--ui-history", str(history)] if with_console else ["-w", str(args.workers)])
    out = {"with": with_console}
    try:
        throughput(port, messages[:20], 2, True)      # warm: the model in every worker
        pid_of = {}
        if with_console:
            deadline = time.monotonic() + 60
            while counts(history)[0] < 40 and time.monotonic() < deadline:
                time.sleep(0.1)     # the warm-up's records stored
            pid_of = {name: logged_pid(log, pattern) for name, pattern in PATTERNS.items()}
        pids = children(proc.pid) + [proc.pid]
        keeper = parent_of(pid_of["console"]) if with_console else None
        serving = [p for p in pids if p == proc.pid or (parent_of(p) == proc.pid and p != keeper)]
        others = {name: [pid] for name, pid in pid_of.items()}
        if keeper:
            others["keeper"] = [keeper]
        before = {"serving": sum(cpu_seconds(p) for p in serving),
                  **{name: sum(cpu_seconds(p) for p in ps) for name, ps in others.items()}}
        if with_console and args.hold_recorder:
            os.kill(pid_of["recorder"], signal.SIGSTOP)     # its records wait in the queues and spools
        load = os.getloadavg()[0]
        client_before, machine_before = os.times(), machine_cpu()
        try:
            rate = throughput(port, messages, args.clients, True)
        finally:
            if with_console and args.hold_recorder:
                os.kill(pid_of["recorder"], signal.SIGCONT)
        client_after, machine_after = os.times(), machine_cpu()
        checks = args.clients * len(messages)
        out.update(rate=rate, checks=checks, wall=checks / rate, load=load,
                   client=(client_after.user + client_after.system) - (client_before.user + client_before.system),
                   machine_busy=machine_after[0] - machine_before[0], machine_all=machine_after[1] - machine_before[1])
        # the CPU of the clients' run: read now (the recorder's work after it, storing what waited, apart)
        out["serving"] = sum(cpu_seconds(p) for p in serving) - before["serving"]
        for name, ps in others.items():
            out[name] = sum(cpu_seconds(p) for p in ps) - before[name]
        if with_console:        # every record stored (or counted as dropped): the lag and the recorder's total
            ended = time.monotonic()
            behind = checks + 40 - sum(counts(history)[:2])
            deadline = ended + 600
            while True:
                stored, lost, spooled_now = counts(history, spooled=True)
                if stored + lost >= checks + 40 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            out.update(lag=time.monotonic() - ended, behind=behind, stored=stored - 40, dropped=lost,
                       spooled=spooled_now, recorder_total=cpu_seconds(pid_of["recorder"]) - before["recorder"])
            for name, pid in pid_of.items():
                fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
                out[f"{name}_mib"] = int(fields["VmHWM"].split()[0]) / 1024
    finally:
        stop(proc)
    return out


def throughput_pairs(home, messages, args):
    """``--pairs`` pairs of runs, one without and one with the console, the
    order alternated from pair to pair (a drift of the machine's load hits
    both alike); the median of the pairs' ratios (throughput, and CPU a
    check of the processes that answer checks), each pair's load, and the
    CPU accounting of the runs with the console against the machine's
    cores: what the clients, the checking processes and the recorder take
    of ``cores x wall``."""
    cores = os.cpu_count() or 1
    pairs = []
    for n in range(args.pairs):
        order = (False, True) if n % 2 == 0 else (True, False)
        runs = {with_console: throughput_run(home, messages, args, with_console) for with_console in order}
        off, on = runs[False], runs[True]
        pair = {"off": off, "on": on, "rate": on["rate"] / off["rate"],
                "cpu": (off["serving"] / off["checks"]) / (on["serving"] / on["checks"])}
        pairs.append(pair)
        print(f"pair {n + 1} ({'without first' if n % 2 == 0 else 'with first'}; load {off['load']:.1f}, "
              f"{on['load']:.1f}): without {off['rate']:.0f}/s, with {on['rate']:.0f}/s: {100 * pair['rate']:.1f} %; "
              f"CPU a check of the checking processes {1e6 * off['serving'] / off['checks']:.1f} us, "
              f"{1e6 * on['serving'] / on['checks']:.1f} us: {100 * pair['cpu']:.1f} %; "
              f"the recorder during the run {1e6 * on['recorder'] / on['checks']:.1f} us a check; "
              f"{on['stored']} records stored, {on['dropped']} dropped", flush=True)
    med = statistics.median
    ratios = ", ".join(f"{100 * p['rate']:.0f}" for p in sorted(pairs, key=lambda p: p["rate"]))
    lags = ", ".join(f"{r['lag']:.1f} s ({r['behind']} behind)" for r in (p["on"] for p in pairs))
    on_runs = [p["on"] for p in pairs]
    off_runs = [p["off"] for p in pairs]
    print(f"CHECK throughput, {args.clients} kept-alive clients, -w {args.workers}, {len(messages)} messages each, "
          f"{len(pairs)} pairs (load {min(r['load'] for r in on_runs + off_runs):.1f} to "
          f"{max(r['load'] for r in on_runs + off_runs):.1f}): with the console / without, median of the pairs' "
          f"ratios {100 * med(p['rate'] for p in pairs):.1f} % (pairs {ratios} %); "
          f"medians {med(r['rate'] for r in off_runs):.0f}/s without, {med(r['rate'] for r in on_runs):.0f}/s with")
    print(f"CPU a check of the processes that answer checks (workers and parent): without / with, median of the "
          f"pairs' ratios {100 * med(p['cpu'] for p in pairs):.1f} % (without {1e6 * med(r['serving'] / r['checks'] for r in off_runs):.1f} us, "
          f"with {1e6 * med(r['serving'] / r['checks'] for r in on_runs):.1f} us)")

    def share(runs, key):
        return 100 * med(r[key] / (cores * r["wall"]) for r in runs)

    for name, runs in (("without", off_runs), ("with", on_runs)):
        extra = (f", recorder {share(runs, 'recorder'):.1f} %, console {share(runs, 'console'):.1f} %, "
                 f"keeper {share(runs, 'keeper'):.1f} %") if name == "with" else ""
        print(f"CPU accounting {name} the console, shares of {cores} cores x the clients' wall time (medians): "
              f"clients (this process) {share(runs, 'client'):.1f} %, checking processes {share(runs, 'serving'):.1f} %"
              f"{extra}; the machine busy {100 * med(r['machine_busy'] / r['machine_all'] for r in runs):.1f} % "
              f"(every process, other users' too)")
    print(f"the recorder: {1e6 * med(r['recorder'] / r['checks'] for r in on_runs):.1f} us a record during the "
          f"clients' run, {1e6 * med(r['recorder_total'] / r['checks'] for r in on_runs):.1f} us a record in all "
          f"(until every record stored); the clients {1e6 * med(r['client'] / r['checks'] for r in on_runs + off_runs):.1f} us "
          f"a check; the checks' share of the CPU the checking processes and the recorder take in all "
          f"(what a machine whose cores the checks fill keeps for them were every record stored at once): {100 * med((r['serving'] / r['checks']) / (r['serving'] / r['checks'] + r['recorder_total'] / r['checks']) for r in on_runs):.1f} % "
          f"")
    print(f"records: {sum(r['checks'] for r in on_runs)} checks, {sum(r['stored'] for r in on_runs)} stored by the "
          f"recorder ({sum(r['spooled'] for r in on_runs)} of them through the workers' spools), "
          f"{sum(r['dropped'] for r in on_runs)} dropped; the lag (the clients done until every record stored): "
          f"{lags}; at most "
          f"{max(r['console_mib'] for r in on_runs):.1f} MiB resident in the console process, "
          f"{max(r['recorder_mib'] for r in on_runs):.1f} MiB in the recorder")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
