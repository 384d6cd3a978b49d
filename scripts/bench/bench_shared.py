#!/usr/bin/env python
"""Learning shared through Redis (``spamnb serve --shared``): how fast a lesson
reaches the other hosts, what following costs a CHECK, how long a new host
takes to catch up.

    python scripts/bench/bench_shared.py MODEL MESSAGE_DIR [--rate 200] [--seconds 10]
           [--checks 101] [--tail 10000]

Starts its own redis-server (a temporary folder, a free loopback port,
appendonly with appendfsync always) and ``spamnb serve --shared`` hosts, each
over its own copy of MODEL, all with ``-w 1``.

1. Visibility: three hosts; lessons (TELL over the SPAMD protocol, the
   messages of MESSAGE_DIR, learned as the folder's name says: .../spam/... as
   spam, else ham) sent at ``--rate`` a second for ``--seconds``, each to a
   host chosen at random.  Every host's stream position (the file the host
   writes after applying a batch; the lessons are then in its model's journal,
   which the next CHECK follows) is polled every 2 ms; a lesson's delay is the
   time from Redis adding it (its stream id) to the first poll that sees
   every host past it.  p50, p99, max.  One lesson per host first, not
   counted: the first lesson after a start loads the model for learning.
2. CHECK through spamc (whole processes, wall time) on a host following the
   stream, against a host without ``--shared`` on the same model, interleaved
   request by request, while lessons arrive at 10 a second (to another host);
   medians and the ratio.
3. Catch-up: a snapshot of MODEL published (after one lesson), then ``--tail``
   lessons added to the stream; a new host started over an empty folder:
   the time from its start to its position reaching the stream's end.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(folder):
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
                             "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                             "--logfile", str(folder / "redis.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    for _ in range(400):
        try:
            client.ping()
            return proc, port, client
        except redis.ConnectionError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not start")


class Host:
    def __init__(self, folder, model, url, *extra):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        if model is not None:
            shutil.copy(model, self.folder / "model.spamnb")
        self.port = free_port()
        self.log_path = self.folder / "serve.log"
        env = dict(os.environ, SPAMNB_HOME=str(self.folder), PYTHONPATH=str(REPO))
        shared = ["--allow-tell", "--shared", url] if url else []
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{self.port}",
                                      "-w", "1", "-m", str(self.folder / "model.spamnb"), *shared, *extra],
                                     env=env, stdout=subprocess.DEVNULL, stderr=open(self.log_path, "wb"))

    def wait(self, seconds=600):
        deadline = time.monotonic() + seconds
        while b"listening on" not in self.log_path.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"spamnb serve did not start: {self.log_path.read_text()}")
            time.sleep(0.02)
        return self

    def position(self):
        try:
            text = (self.folder / "model.spamnb.shared" / "position").read_text().strip()
        except OSError:
            return (0, 0)
        ms, _, seq = text.partition("-")
        return (int(ms), int(seq or 0))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def tell(port, message, spam):
    head = (f"TELL SPAMC/1.5\r\nContent-length: {len(message)}\r\nMessage-class: {'spam' if spam else 'ham'}\r\n"
            f"Set: local\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(head + message)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    if b" 0 EX_OK" not in answer.split(b"\r\n", 1)[0]:
        raise SystemExit(f"TELL failed: {answer[:200]!r}")


def messages(folder, limit):
    files = sorted(p for p in Path(folder).rglob("*") if p.is_file())
    random.Random(39).shuffle(files)
    out = []
    for p in files[:limit]:
        data = p.read_bytes()
        if len(data) < 256 * 1024:
            out.append((data, "spam" in p.parts))
    return out


def entry_ids(client):
    return [tuple(int(x) for x in entry_id.split(b"-")) for entry_id, _ in client.xrange("spamnb:lessons")]


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def visibility(args, work, url, client, lessons):
    hosts = [Host(work / f"v{i}", args.model, url, "--snapshot-interval", "0") for i in range(3)]
    for h in hosts:
        h.wait()
    # the first lesson after a start loads the model for learning (a whole read, ~1 s for a large
    # model): one lesson to each host first, not counted
    for h in hosts:
        tell(h.port, *lessons[-1 - hosts.index(h)])
    warm = entry_ids(client)[-1]
    while min(h.position() for h in hosts) < warm:
        time.sleep(0.01)
    seen = []       # (time, min position over the hosts)
    stop = threading.Event()

    def poll():
        last = None
        while not stop.is_set():
            pos = min(h.position() for h in hosts)
            if pos != last:
                seen.append((time.time(), pos))
                last = pos
            time.sleep(0.002)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    n = int(args.rate * args.seconds)
    rng = random.Random(1)
    failures = []

    def send(i, port):
        data, spam = lessons[i % len(lessons)]
        try:
            tell(port, data, spam)
        except BaseException as exc:   # noqa: BLE001 - counted, the first few said
            failures.append(f"{type(exc).__name__}: {exc}")

    from concurrent.futures import ThreadPoolExecutor

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=48) as pool:
        for i in range(n):
            delay = start + i / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pool.submit(send, i, rng.choice(hosts).port)
    sent_for = time.monotonic() - start
    ids = [entry for entry in entry_ids(client) if entry > warm]
    deadline = time.monotonic() + 300
    while min(h.position() for h in hosts) < ids[-1] and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    poller.join()
    delays = []
    j = 0
    for entry in ids:
        while j < len(seen) and seen[j][1] < entry:
            j += 1
        if j < len(seen):
            delays.append(seen[j][0] - entry[0] / 1000)
    for h in hosts:
        h.stop()
    print(f"visibility: {len(ids)} lessons at {n / sent_for:.0f}/s offered ({args.rate:g}/s asked) to 3 hosts, "
          f"{len(failures)} TELLs failed {sorted(set(failures))[:3]}; delay from Redis to every host applied: "
          f"p50 {statistics.median(delays) * 1000:.0f} ms, p99 {percentile(delays, 99) * 1000:.0f} ms, "
          f"max {max(delays) * 1000:.0f} ms; load {os.getloadavg()[0]:.2f}", flush=True)


def spamc_check(port, data):
    start = time.perf_counter()
    subprocess.run(["spamc", "-d", "127.0.0.1", "-p", str(port), "-c"], input=data, capture_output=True)
    return time.perf_counter() - start


def check_latency(args, work, url, lessons, probes):
    following = Host(work / "follow", args.model, url, "--snapshot-interval", "0").wait()
    teacher = Host(work / "teach", args.model, url, "--snapshot-interval", "0").wait()
    plain = Host(work / "plain", args.model, None, "--allow-tell").wait()
    stop = threading.Event()

    def teach():
        i = 0
        while not stop.is_set():
            data, spam = lessons[-1 - (i % len(lessons))]
            tell(teacher.port, data, spam)
            i += 1
            stop.wait(0.1)

    background = threading.Thread(target=teach, daemon=True)
    background.start()
    spamc_check(following.port, probes[0])
    spamc_check(plain.port, probes[0])
    with_shared, without = [], []
    for i in range(args.checks):
        data = probes[i % len(probes)]
        pair = [(following, with_shared), (plain, without)]
        if i % 2:
            pair.reverse()
        for host, out in pair:
            out.append(spamc_check(host.port, data))
    stop.set()
    background.join()
    for h in (following, teacher, plain):
        h.stop()
    a, b = statistics.median(with_shared), statistics.median(without)
    print(f"CHECK via spamc: following host {a * 1000:.2f} ms, host without --shared {b * 1000:.2f} ms "
          f"(medians of {args.checks}); ratio {a / b:.3f}; load {os.getloadavg()[0]:.2f}", flush=True)


def catch_up(args, work, url, client, lessons):
    from spamnb.estimator.ledger import canonical
    from spamnb.shared.lessons import LEARN, Lesson, encode

    client.delete("spamnb:lessons", "spamnb:snapshot", "spamnb:trimmed", "spamnb:snapshot-lock")
    publisher = Host(work / "publisher", args.model, url, "--snapshot-interval", "1").wait()
    tell(publisher.port, *lessons[0])
    deadline = time.monotonic() + 120
    while b"snapshot published" not in publisher.log_path.read_bytes():
        if time.monotonic() > deadline:
            raise SystemExit("no snapshot published")
        time.sleep(0.1)
    publisher.stop()
    pipe = client.pipeline(transaction=False)
    for i in range(args.tail):
        data, spam = lessons[1 + i % (len(lessons) - 1)]
        pipe.xadd("spamnb:lessons", {"r": encode(Lesson(LEARN, spam, "", canonical(data)))})
        if i % 500 == 499:
            pipe.execute()
    pipe.execute()
    last = entry_ids(client)[-1]
    start = time.monotonic()
    newcomer = Host(work / "new", None, url, "--snapshot-interval", "0")
    newcomer.started = start
    # the new host has no model: the snapshot gives it one (a placeholder file lets the server start)
    newcomer.wait(1200)
    listening = time.monotonic() - start
    while newcomer.position() < last:
        time.sleep(0.01)
    done = time.monotonic() - start
    newcomer.stop()
    problems = [line for line in newcomer.log_path.read_text().splitlines() if "not applied" in line or "skipped" in line]
    if problems:
        raise SystemExit(f"catch-up: lessons not applied: {problems[:3]}")
    from spamnb.model.spam_filter import SpamFilter

    ham, spam = SpamFilter.load(newcomer.folder / "model.spamnb").class_count_
    before = SpamFilter.load(args.model).class_count_
    size = os.path.getsize(args.model)
    print(f"catch-up: a new host from a snapshot of a {size / 2**20:.1f} MiB model plus {args.tail} lessons: "
          f"listening after {listening:.1f} s, at the stream's end after {done:.1f} s "
          f"(messages in the model: {sum(before):.0f} before, {ham + spam:.0f} after); "
          f"load {os.getloadavg()[0]:.2f}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("messages")
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--checks", type=int, default=101)
    parser.add_argument("--tail", type=int, default=10000)
    parser.add_argument("--only", choices=("visibility", "check", "catch-up"))
    args = parser.parse_args(argv)
    lessons = messages(args.messages, max(int(args.rate * args.seconds), args.tail, 200) + 1)
    probes = [data for data, _ in lessons[:50]]
    with tempfile.TemporaryDirectory(prefix="bench-shared-") as tmp:
        work = Path(tmp)
        (work / "redis").mkdir()
        redis_proc, port, client = start_redis(work / "redis")
        url = f"redis://127.0.0.1:{port}/0"
        try:
            if args.only in (None, "visibility"):
                visibility(args, work, url, client, lessons)
            if args.only in (None, "check"):
                check_latency(args, work, url, lessons, probes)
            if args.only in (None, "catch-up"):
                catch_up(args, work, url, client, lessons)
        finally:
            redis_proc.terminate()
            redis_proc.wait()


if __name__ == "__main__":
    main()
