"""Benchmark of ``spamnb serve`` (figures in docs/serve.md).

Trains spamnb and bogofilter on the train part of the fixed split, starts
``spamnb serve`` on a loopback port, then measures on the test part:

1. one process per message, as an MTA runs a filter: the real ``spamc -c``
   against the server, ``spamnb classify FILE``, ``bogofilter -T < FILE``
   (wall time of each process: p50, p99);
2. time per message on one kept-alive connection (``Connection: keep-alive``;
   round trip seen by the client, and the server's own time from its log);
3. throughput with 8 concurrent clients, each on its own kept-alive
   connection, and with one connection per message; with ``--spamd``, the same
   8-client load (one connection per message) on SpamAssassin's ``spamd``;
4. resident memory of the server with 1 and with 100 per-user models.

The per-process figures also run the real ``spamc -U`` against a null
server (this script with ``--null-server SOCKET``: asyncio, it reads each
request and answers "not spam" at once, computing nothing): the floor of
the client's own process and one round trip, which no server can go below.

``--threads-only`` instead compares spamnb serve (asyncio) with a
thread-per-connection server answering CHECK the same way.

    python scripts/bench/bench_serve.py [--corpus ../shared/corpora/spamassassin] [--spamd] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
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
sys.path.insert(0, str(REPO / "scripts"))   # harness.py

from harness import (concurrently, corpus_split, free_port, paired_ratio, per_process, quantiles,  # noqa: E402,F401
                     wait_port)
from spamnb.model.spam_filter import SpamFilter  # noqa: E402


def request(message, keep_alive):
    head = b"CHECK SPAMC/1.5\r\nUser: bench\r\n"
    if keep_alive:
        head += b"Connection: keep-alive\r\n"
    return head + b"Content-length: %d\r\n\r\n" % len(message) + message


def read_response(sock, buffer):
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed")
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    return head, rest


def keep_alive_round_trips(port, messages):
    times = []
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffer = b""
        for m in messages:
            data = request(m, True)
            started = time.perf_counter()
            s.sendall(data)
            head, buffer = read_response(s, buffer)
            times.append(time.perf_counter() - started)
            assert b" 0 EX_OK" in head, head
    return times


def one_shot(port, message, user=b"bench"):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(request(message, False).replace(b"User: bench", b"User: " + user))
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk


def throughput(port, messages, n_clients, keep_alive):
    """Messages per second with n_clients threads, each sending all messages
    (client threads share this process: the clients' own cost is in the figure)."""
    errors = []

    def client(_i):
        try:
            if keep_alive:
                keep_alive_round_trips(port, messages)
            else:
                for m in messages:
                    if not one_shot(port, m).startswith(b"SPAMD/1."):
                        errors.append("bad response")
        except Exception as exc:  # noqa: BLE001
            errors.append(repr(exc))

    elapsed = concurrently(client, n_clients)
    if errors:
        raise RuntimeError(errors[:3])
    return n_clients * len(messages) / elapsed


def rss(pid):
    """Resident MiB: total, anonymous (the process's own), file-backed (mapped model pages)."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile"):
                fields[name] = int(value.split()[0]) / 1024.0
    return f"{fields['VmRSS']:.1f} MiB ({fields['RssAnon']:.1f} anonymous, {fields['RssFile']:.1f} file-backed)"


def server_times(log_path, verb=b"CHECK"):
    out = []
    with open(log_path, "rb") as f:
        for line in f:
            parts = line.split()
            if verb in parts and b"ms" in parts:
                out.append(float(parts[parts.index(b"ms") - 1]) / 1000.0)
    return out


def threaded_server(port, model):
    """The same CHECK answers from a thread-per-connection server (socketserver),
    for the asyncio-or-threads comparison: the one lock is held while a
    verdict is computed (it needs the GIL anyway), reading and writing run in
    parallel."""
    import socketserver

    from spamnb.server import models as serve

    from spamnb.server import protocol as spamd

    lock = threading.Lock()
    cache = serve.ModelCache(10, print)

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            while True:
                lines = []
                while True:
                    line = self.rfile.readline(65537)
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    lines.append(line)
                request = spamd.parse_head(b"".join(lines).rstrip(b"\r\n"))
                message = self.rfile.read(spamd.content_length(request))
                with lock:
                    spam_filter, score_map = cache.get(model, 5.0)
                    verdict = serve._classify(spam_filter, message)
                score = score_map.score(verdict.log_odds, verdict.label)
                self.wfile.write(spamd.response(0, [spamd.spam_header(verdict, score, score_map.required)]))
                if request.headers.get("connection", "").lower() != "keep-alive":
                    return

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    with Server(("127.0.0.1", port), Handler) as server:
        server.serve_forever()


def compare_threads(model, messages, n_clients, env, say):
    """asyncio (spamnb serve) against the threaded variant, same run, CHECK only."""
    for name in ("asyncio (spamnb serve)", "threads (socketserver)"):
        port = free_port()
        if name.startswith("asyncio"):
            argv = [sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{port}", "-m", str(model),
                    "--max-connections", "256", "--workers", "1"]
        else:
            argv = [sys.executable, __file__, "--threaded-server", str(port), str(model)]
        proc = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        try:
            wait_port(port, proc)
            one_shot(port, messages[0])
            trips = keep_alive_round_trips(port, messages)
            rate = throughput(port, messages, n_clients, keep_alive=True)
            rate_each = throughput(port, messages[:300], n_clients, keep_alive=False)
            say(f"  {name:24s} round trip p50 / p99 {quantiles(trips)[0]:.3f} / {quantiles(trips)[1]:.3f} ms; "
                f"{n_clients} clients kept-alive {rate:,.0f} msg/s, a connection per message {rate_each:,.0f} msg/s")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def null_server(path, port):
    """A SPAMD server on the Unix socket ``path`` and loopback ``port`` that answers every request
    "not spam" as soon as its body is read: the floor of a spamc round trip."""
    import asyncio

    from spamnb.server import protocol as spamd

    answer = b"SPAMD/1.1 0 EX_OK\r\nSpam: False ; 0.0 / 5.0\r\n\r\n"

    async def handle(reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request = spamd.parse_head(head[:-4])
            await reader.readexactly(spamd.content_length(request))
            writer.write(answer)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def serve():
        unix = await asyncio.start_unix_server(handle, path)
        tcp = await asyncio.start_server(handle, "127.0.0.1", port)
        async with unix, tcp:
            await asyncio.gather(unix.serve_forever(), tcp.serve_forever())

    asyncio.run(serve())


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--null-server"]:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        return null_server(argv[1], int(argv[2]))
    if argv[:1] == ["--threaded-server"]:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        return threaded_server(int(argv[1]), argv[2])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpora" / "spamassassin"))
    parser.add_argument("--processes", type=int, default=200, help="messages for the per-process figures")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--spamd", action="store_true", help="also load SpamAssassin's spamd")
    parser.add_argument("--baseline", metavar="DIR",
                        help="another spamnb checkout (extensions built): its serve joins the one-process-per-"
                             "message figures on a Unix socket of its own, for a same-run A/B of the server")
    parser.add_argument("--threads-only", action="store_true",
                        help="only the asyncio-against-threads comparison")
    args = parser.parse_args(argv)

    train, test = corpus_split(args.corpus)
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    env = dict(os.environ, PYTHONPATH=str(REPO), SPAMNB_HOME=str(work))
    lines = []

    def say(text):
        print(text, flush=True)
        lines.append(text)

    say(f"corpus: {args.corpus}: train {len(train)}, test {len(test)}")
    spam_filter = SpamFilter().fit([p for p, _ in train], [s for _, s in train], tune=False)
    model = work / "model.spamnb"
    spam_filter.save(model)
    bogo = work / "bogo"
    bogo.mkdir()
    for flag, want in (("-s", True), ("-n", False)):
        names = "\n".join(str(p) for p, s in train if s == want) + "\n"
        subprocess.run(["bogofilter", "-C", "-d", str(bogo), flag, "-b"], input=names.encode(), check=True)

    if args.threads_only:
        say("asyncio against threads (CHECK, all test messages; server log off):")
        compare_threads(model, [p.read_bytes() for p, _ in test], args.clients, env, say)
        shutil.rmtree(work, ignore_errors=True)
        return
    port = free_port()
    log = work / "serve.log"
    sock = work / "spamnb.sock"
    server = subprocess.Popen([sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{port}", "-l", str(sock),
                               "-m", str(model),
                               "--models-dir", str(work / "users"), "--max-connections", "256",
                               # one process (its memory is the figure; scripts/bench/bench_workers.py has the
                               # workers) and -v: a log line per request, the server's own time
                               "--workers", "1", "-v"],
                              env=env, stderr=open(log, "wb"))
    null_sock = work / "null.sock"
    null_port = free_port()
    null = subprocess.Popen([sys.executable, __file__, "--null-server", str(null_sock), str(null_port)], env=env,
                            stderr=subprocess.DEVNULL)
    baseline = None
    if args.baseline:
        base_sock = work / "baseline.sock"
        # started as this tree's server is (one process, a log line per request), on its own socket
        baseline = subprocess.Popen([sys.executable, "-m", "spamnb", "serve", "-l", str(base_sock), "-m", str(model),
                                     "--models-dir", str(work / "users"), "--max-connections", "256",
                                     "--workers", "1", "-v"],
                                    env=dict(env, PYTHONPATH=str(Path(args.baseline).resolve())),
                                    stderr=open(work / "baseline.log", "wb"))
    try:
        wait_port(port, server)
        test_bytes = [p.read_bytes() for p, _ in test]
        one_shot(port, test_bytes[0])                      # the model is loaded at the first request
        sample = [p for p, _ in test[:: max(1, len(test) // args.processes)]][: args.processes]

        # 1. one process per message, the commands interleaved message by message
        commands = {
            "spamc -d 127.0.0.1 -c (TCP)": lambda p: (["spamc", "-d", "127.0.0.1", "-p", str(port), "-c"], p),
            "spamc -U SOCKET -c": lambda p: (["spamc", "-U", str(sock), "-c"], p),
            "spamc -c (host 'localhost')": lambda p: (["spamc", "-p", str(port), "-c"], p),
            "spamnb classify FILE": lambda p: ([sys.executable, "-m", "spamnb", "classify", "-m", str(model),
                                                str(p)], None),
            "bogofilter -T < FILE": lambda p: (["bogofilter", "-C", "-d", str(bogo), "-T"], p),
            "floor: spamc -U NULL -c": lambda p: (["spamc", "-U", str(null_sock), "-c"], p),
            "floor: spamc -d 127.0.0.1 NULL -c": lambda p: (["spamc", "-d", "127.0.0.1", "-p", str(null_port), "-c"],
                                                            p),
        }
        deadline = time.monotonic() + 60
        while not null_sock.exists():
            if null.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the null server did not start")
            time.sleep(0.05)
        if baseline is not None:
            deadline = time.monotonic() + 60
            while not base_sock.exists():
                if baseline.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the baseline server did not start")
                time.sleep(0.05)
            commands["baseline: spamc -U SOCKET -c"] = lambda p: (["spamc", "-U", str(base_sock), "-c"], p)
        times = per_process(commands, sample)
        say(f"one process per message ({len(sample)} test messages, the commands interleaved), wall ms p50 / p99:")
        for name, values in times.items():
            say(f"  {name:34s} {quantiles(values)[0]:7.2f} / {quantiles(values)[1]:7.2f}")
        classify, bogofilter = times["spamnb classify FILE"], times["bogofilter -T < FILE"]
        for name, key in (("TCP", "spamc -d 127.0.0.1 -c (TCP)"), ("Unix socket", "spamc -U SOCKET -c"),
                          ("null server, TCP: the floor", "floor: spamc -d 127.0.0.1 NULL -c"),
                          ("null server, Unix socket: the floor", "floor: spamc -U NULL -c")):
            say(f"  spamc ({name}): {statistics.median(classify) / statistics.median(times[key]):.1f}x faster than "
                f"spamnb classify (p50s); time over bogofilter's, median of the same message's ratios: "
                f"{paired_ratio(times[key], bogofilter):.3f} (below 1: spamc faster)")
        if baseline is not None:
            ratio = paired_ratio(times["spamc -U SOCKET -c"], times["baseline: spamc -U SOCKET -c"])
            say(f"  spamc -U SOCKET -c: this server's time over the baseline's (--baseline {args.baseline}), median of "
                f"the same message's ratios: {ratio:.3f}")

        # 2. kept-alive connection
        mark = len(server_times(log))
        trips = keep_alive_round_trips(port, test_bytes)
        inside = server_times(log)[mark:]
        say(f"kept-alive connection, all {len(test_bytes)} test messages: client round trip p50 / p99 "
            f"{quantiles(trips)[0]:.3f} / {quantiles(trips)[1]:.3f} ms; server's own time (log) p50 / p99 "
            f"{quantiles(inside)[0]:.3f} / {quantiles(inside)[1]:.3f} ms")

        # 3. throughput
        for keep in (True, False):
            rate = throughput(port, test_bytes, args.clients, keep)
            say(f"throughput, {args.clients} concurrent clients, {'kept-alive connections' if keep else 'a connection per message'}: "
                f"{rate:,.0f} messages/s")

        # 4. memory
        say(f"resident memory with 1 model: {rss(server.pid)}; model file "
            f"{model.stat().st_size / 1024 / 1024:.1f} MiB")
        for i in range(100):
            user = work / "users" / f"user{i:03d}"
            user.mkdir(parents=True)
            shutil.copyfile(model, user / "model.spamnb")
            one_shot(port, test_bytes[i], user=f"user{i:03d}".encode())
        say(f"resident memory with 100 per-user models loaded (+ the site model): {rss(server.pid)}")
    finally:
        for proc in (server, baseline, null):
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)

    if args.spamd:
        spamd_bench(work, test_bytes[:200], args.clients, say)
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)


def spamd_bench(work, messages, n_clients, say):
    """SpamAssassin's spamd, its default rules, local tests only (-L: no DNS or
    network checks), Bayes without training data (so no BAYES_ rules fire)."""
    port = free_port()
    home = work / "sa-home"
    home.mkdir()
    os.chmod(home, 0o777)
    proc = subprocess.Popen(["spamd", "-L", "-p", str(port), "-i", "127.0.0.1", "-m", str(n_clients),
                             "--min-spare", str(n_clients), "--max-spare", str(n_clients),
                             "-u", "nobody", "-H", str(home)],
                            stdout=subprocess.DEVNULL, stderr=open(work / "spamd.log", "wb"))
    try:
        wait_port(port, proc, 180)
        for m in messages[:n_clients]:
            one_shot(port, m)          # warm every child
        started = time.perf_counter()
        rate = throughput(port, messages, n_clients, keep_alive=False)
        say(f"SpamAssassin spamd (default rules, -L local tests only, Bayes untrained), {n_clients} concurrent "
            f"clients, a connection per message, {len(messages)} messages each: {rate:,.1f} messages/s "
            f"({time.perf_counter() - started:.0f} s)")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
