"""Benchmark of ``spamnb serve --milter`` (figures in docs/serve.md).

Trains the site model on the corpus (``spamnb train -j 1``) into a temporary
home, picks ``--messages`` messages of it (every k-th file, sorted; each
given a Message-ID of its own), and starts one ``spamnb serve`` with a SPAMD
address and a milter address.  Then:

1. ``latency``: through the milter protocol directly (no MTA; the client of
   tests/milter_client.py on one connection): for each message, the time
   from sending its end of data to reading the final answer (p50, p90,
   p99); beside it the SPAMD side on one kept-alive connection (CHECK round
   trip) and the real ``spamc -c`` (one process a message, wall time), the
   same messages, interleaved; with ``--baseline DIR``, each message through
   a second server of another tree (the code before a change) in turn too,
   the per-message ratios of this tree's times to its, and the ratio of the
   two servers' CPU time (user + system) over the run (steadier than the
   latencies on a machine busy with other jobs).
2. ``postfix`` (as root, with Debian's Postfix unpacked as tests/test_postfix.py
   does, tests/postfix_private.py): two private Postfix instances in the same
   run, one with docs/serve.md's milter ``main.cf`` lines, one with its
   ``content_filter`` recipe (spamc + spamnb-pipe + sendmail), both on the
   same server; the messages sent over SMTP on loopback by ``--clients``
   concurrent senders, one recipient each; messages per second from the first
   SMTP connection to the last message in the Maildir, ``--rounds`` times in
   alternating order; and every delivered message's ``X-Spam-Status``
   verdict against ``spamnb classify --batch``'s on the same files and model
   (the script stops with an error on any difference, loss or SMTP failure).

3. ``flood`` (issue 45): SPAMD CHECK latency on a server of one worker,
   first alone, then while one milter client floods the same worker with
   1-byte body packets (one message that never ends, sent as fast as the
   server reads): ``--checks`` CHECKs each way, every one on a new
   connection as spamc makes it, timed here (p50, p90, p99), and the real
   ``spamc -c`` (a process each, wall time) every ``--spamc-every``-th;
   the packets the server took meanwhile.

4. ``packets`` (issue 45): one message on a fresh server of one worker
   (``--max-size``, default 4 MiB), its body sent one byte a packet
   (``--body`` bytes), then one with ``--empty`` empty body packets: the
   answer to each, the server's peak memory (VmHWM) growth over each, the
   time from the end of data to the answer, and the whole message's time.

    python scripts/bench/bench_milter.py latency [--corpus ../shared/corpora/spamassassin] [--messages 1000]
                                                 [--baseline OTHER-CHECKOUT]
    python scripts/bench/bench_milter.py postfix [--messages 1000] [--clients 10] [--rounds 3]
    python scripts/bench/bench_milter.py flood [--corpus corpora] [--messages 200] [--checks 400]
    python scripts/bench/bench_milter.py packets [--corpus corpora] [--max-size 262144] [--body 250000] [--empty 400000]
                                                 [--max-packets N]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import smtplib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))   # harness.py
from harness import free_port  # noqa: E402


def env(home, tree=REPO):
    e = dict(os.environ, SPAMNB_HOME=str(home), PYTHONPATH=str(tree))
    e.pop("SPAMNB_DEBUG", None)
    return e


def pick_messages(corpus, n, folder):
    """``n`` messages of the corpus (every k-th file of its sorted list), each
    written to ``folder`` with its own Message-ID and without an mbox From_ line."""
    files = sorted(p for p in Path(corpus).rglob("*") if p.is_file() and p.parent != Path(corpus)
                   and not p.name.startswith(".") and not p.name.endswith(".md"))
    step = max(1, len(files) // n)
    out = []
    for i, path in enumerate(files[::step][:n]):
        raw = path.read_bytes()
        if raw.startswith(b"From "):
            raw = raw.split(b"\n", 1)[1]
        raw = raw.replace(b"\r\n", b"\n")
        head, sep, body = raw.partition(b"\n\n")
        head = re.sub(rb"(?im)^message-id:.*\n?(?:[ \t].*\n?)*", b"", head + b"\n").rstrip(b"\n")
        message = f"Message-ID: <bench-{i}@test.example>\n".encode() + head + b"\n\n" + body
        target = Path(folder) / f"bench-{i}"
        target.write_bytes(message)
        out.append((f"bench-{i}", target, message))
    return out


def classify_all(home, model, items):
    """{tag: label} from ``spamnb classify --batch`` on the files."""
    proc = subprocess.run([sys.executable, "-m", "spamnb", "classify", "--batch", "-m", str(model),
                           *[str(p) for _, p, _ in items]], env=env(home), capture_output=True, text=True,
                          timeout=600)
    out = {}
    for line in proc.stdout.splitlines():
        name, label = line.split("\t")[:2]
        out[Path(name).name] = label
    return out


class Server:
    def __init__(self, home, model, *extra, tree=REPO):
        self.port, self.milter_port = free_port(), free_port()
        self.log = open(Path(home) / f"serve-{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{self.port}",
             "--milter", f"127.0.0.1:{self.milter_port}", "-m", str(model), *extra],
            env=env(home, tree), stderr=self.log, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.milter_port), timeout=1).close()
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("spamnb serve did not start")
                time.sleep(0.1)

    def cpu(self):
        """The server's CPU time so far (user + system, seconds; one process with --workers 1)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)
        self.log.close()


def quantiles(values):
    values = sorted(values)
    pick = lambda q: values[min(len(values) - 1, int(q * len(values)))]   # noqa: E731
    return statistics.median(values), pick(0.9), pick(0.99)


def final_answer(sock):
    """The bytes of the filter's packets up to and including its final answer
    to an end of data (a packet of type c, a, r, d, t or y), read whole."""
    data = b""
    offset = 0
    while True:
        while len(data) - offset >= 5:
            size = int.from_bytes(data[offset:offset + 4], "big")
            if len(data) - offset < 4 + size:
                break
            kind = data[offset + 4:offset + 5]
            offset += 4 + size
            if kind in (b"c", b"a", b"r", b"d", b"t", b"y"):
                return data
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def latency(servers, items, spamc_every):
    """Each message through each server in turn (``servers``: {name: Server};
    the order alternating message by message): the milter's end of data, a
    SPAMD CHECK on a kept-alive connection, and ``spamc -c`` every
    ``spamc_every``-th; with two servers, the median of the per-message
    ratios of the first's time to the second's."""
    from kilter.protocol import messages as mm
    from milter_client import MilterClient, packet

    clients, spamds = {}, {}
    for name, server in servers.items():
        clients[name] = MilterClient(("127.0.0.1", server.milter_port))
        clients[name].negotiate()
        spamds[name] = socket.create_connection(("127.0.0.1", server.port))
    times = {name: {"milter": [], "spamd": [], "spamc": []} for name in servers}
    spamc = shutil.which("spamc")
    eom = packet(mm.Macro(ord("E"), {"i": "BENCH"})) + packet(mm.EndOfMessage(b""))
    names = list(servers)
    cpu = {name: server.cpu() for name, server in servers.items()}
    for i, (tag, path, message) in enumerate(items):
        for name in (names if i % 2 == 0 else names[::-1]):
            milter_ms, spamd_ms, spamc_ms = _one_message(clients[name], spamds[name], servers[name], message, eom,
                                                         spamc if i % spamc_every == 0 else None)
            times[name]["milter"].append(milter_ms)
            times[name]["spamd"].append(spamd_ms)
            if spamc_ms is not None:
                times[name]["spamc"].append(spamc_ms)
    cpu = {name: (server.cpu() - cpu[name]) * 1000 / len(items) for name, server in servers.items()}
    for name in servers:
        clients[name].close()
        spamds[name].close()
    print(f"messages: {len(items)}; load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name in servers:
        prefix = f"{name}: " if len(servers) > 1 else ""
        print(f"{prefix}milter end of data -> answer, one connection: p50 / p90 / p99 ms  %.3f / %.3f / %.3f"
              % quantiles(times[name]["milter"]))
        print(f"{prefix}SPAMD CHECK round trip, one kept-alive connection: p50 / p90 / p99 ms  %.3f / %.3f / %.3f"
              % quantiles(times[name]["spamd"]))
        if times[name]["spamc"]:
            print(f"{prefix}spamc -c (a process a message, {len(times[name]['spamc'])} messages): p50 / p90 / p99 ms"
                  "  %.3f / %.3f / %.3f" % quantiles(times[name]["spamc"]))
        print(f"{prefix}the server's CPU (user + system) a message, its milter, CHECK and spamc requests: "
              f"{cpu[name]:.3f} ms")
    if len(servers) == 2:
        first, second = names
        for kind in ("milter", "spamd", "spamc"):
            pairs = list(zip(times[first][kind], times[second][kind]))
            if pairs:
                print(f"{kind}: {first} / {second}, median of the per-message ratios "
                      f"{statistics.median(a / b for a, b in pairs):.3f}")
        print(f"server CPU: {first} / {second} {cpu[first] / cpu[second]:.3f}")


def _one_message(client, spamd, server, message, eom, spamc):
    """(milter end of data -> answer ms, SPAMD CHECK ms, spamc -c ms or None) of one message."""
    from kilter.protocol import messages as mm
    from milter_client import split_message

    fields, body = split_message(message)
    before = [mm.EnvelopeRecipient(b"<alice@test.example>")]
    before += [mm.Header(name, value) for name, value in fields]
    before.append(mm.EndOfHeaders())
    before += [mm.Body(body[s:s + 65535]) for s in range(0, len(body), 65535)]
    client.send(*before)
    started = time.perf_counter()
    client.sock.sendall(eom)
    data = final_answer(client.sock)        # the packets read whole, parsed after the clock stops
    milter_ms = (time.perf_counter() - started) * 1000
    client.pending = data
    answers = client.answers()
    assert answers and isinstance(answers[-1], mm.Continue), answers
    request = b"CHECK SPAMC/1.5\r\nConnection: keep-alive\r\nContent-length: %d\r\n\r\n" % len(message) + message
    started = time.perf_counter()
    spamd.sendall(request)
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += spamd.recv(65536)
    head, _, rest = answer.partition(b"\r\n\r\n")
    length = int(re.search(rb"Content-length: (\d+)", head).group(1))
    while len(rest) < length:
        rest += spamd.recv(65536)
    spamd_ms = (time.perf_counter() - started) * 1000
    spamc_ms = None
    if spamc:
        started = time.perf_counter()
        subprocess.run([spamc, "-d", "127.0.0.1", "-p", str(server.port), "-c"], input=message,
                       stdout=subprocess.DEVNULL, timeout=30)
        spamc_ms = (time.perf_counter() - started) * 1000
    return milter_ms, spamd_ms, spamc_ms


def _check_once(port, message):
    """One SPAMD CHECK on a new connection, as spamc makes it; seconds."""
    request = b"CHECK SPAMC/1.5\r\nContent-length: %d\r\n\r\n" % len(message) + message
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    elapsed = time.perf_counter() - started
    assert answer.startswith(b"SPAMD/1.5 0 EX_OK"), answer[:200]
    return elapsed


def _checks(server, items, n, spamc_every):
    """``n`` CHECKs (ms) and a spamc -c every ``spamc_every``-th (ms)."""
    spamc = shutil.which("spamc")
    check_ms, spamc_ms = [], []
    for i in range(n):
        message = items[i % len(items)][2]
        check_ms.append(_check_once(server.port, message) * 1000)
        if spamc and spamc_every and i % spamc_every == 0:
            started = time.perf_counter()
            subprocess.run([spamc, "-d", "127.0.0.1", "-p", str(server.port), "-c"], input=message,
                           stdout=subprocess.DEVNULL, timeout=60)
            spamc_ms.append((time.perf_counter() - started) * 1000)
    return check_ms, spamc_ms


def flood(server, items, n, spamc_every):
    """CHECK latency alone, then under a flood of 1-byte milter packets on the same worker."""
    from raw_milter import RawMilter, packet

    _checks(server, items, 20, 0)           # the model loaded, the caches warm
    alone = _checks(server, items, n, spamc_every)
    client = RawMilter(("127.0.0.1", server.milter_port), timeout=600)
    client.negotiate()
    client.start()
    client.header("Subject", b" a flood")
    client.end_of_headers()
    chunk = packet("B", b"x") * 10922          # 65,532 bytes: 10,922 packets of one byte
    stop = threading.Event()
    sent = [0]

    def flooder():
        while not stop.is_set():
            client.sock.sendall(chunk)
            sent[0] += 10922

    thread = threading.Thread(target=flooder, daemon=True)
    flood_started = time.perf_counter()
    thread.start()
    time.sleep(1.0)                         # the flood under way
    cpu_before, started = server.cpu(), time.perf_counter()
    flooded = _checks(server, items, n, spamc_every)
    elapsed, cpu = time.perf_counter() - started, server.cpu() - cpu_before
    took, flood_time = sent[0], time.perf_counter() - flood_started
    stop.set()
    thread.join(60)
    client.close()
    print(f"load average {os.getloadavg()[0]:.1f}; {n} CHECKs each way, a new connection each; one worker")
    for name, (check_ms, spamc_ms) in (("alone", alone), ("under a 1-byte-packet milter flood", flooded)):
        print(f"SPAMD CHECK {name}: p50 / p90 / p99 ms  %.2f / %.2f / %.2f" % quantiles(check_ms))
        if spamc_ms:
            print(f"spamc -c {name} ({len(spamc_ms)} processes): p50 / p90 / p99 ms  %.2f / %.2f / %.2f"
                  % quantiles(spamc_ms))
    print(f"CHECK p99 under the flood / alone: {quantiles(flooded[0])[2] / quantiles(alone[0])[2]:.2f}x"
          + (f"; spamc -c p99: {quantiles(flooded[1])[2] / quantiles(alone[1])[2]:.2f}x" if alone[1] else ""))
    print(f"the flood: {took:,} packets sent in {flood_time:.1f} s (the socket buffers' included); "
          f"server CPU during the CHECKs {100 * cpu / elapsed:.0f} %")


def _hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1)) * 1024


def packets(server, items, body_size, empty):
    """A body in 1-byte packets, then a message of empty body packets: answers, memory, times."""
    from raw_milter import RawMilter, packet

    client = RawMilter(("127.0.0.1", server.milter_port), timeout=3600)
    client.negotiate()
    assert client.message(items[0][2])[-1].kind == "c"      # the model loaded, the buffers in use
    line = b"hello world, a message sent one byte a packet\r\n"
    body = (line * (body_size // len(line) + 1))[:body_size]
    for name, data in ((f"a body of {body_size:,} bytes, one byte a packet",
                        b"".join(packet("B", body[i:i + 1]) for i in range(len(body)))),
                       (f"{empty:,} empty body packets", packet("B") * empty)):
        before, started = _hwm(server.proc.pid), time.perf_counter()
        client.start()
        client.header("Subject", b" packets")
        client.end_of_headers()
        client.send(data)
        eom = time.perf_counter()
        answers = client.end()
        done = time.perf_counter()
        kinds = "".join(a.kind for a in answers)
        print(f"{name}: answer {kinds!r} ({'tempfail' if kinds == 't' else 'verdict' if 'h' in kinds else kinds}); "
              f"peak memory +{(_hwm(server.proc.pid) - before) / 2 ** 20:.1f} MiB; end of data to answer "
              f"{1000 * (done - eom):.0f} ms (the packets still queued included); whole message {done - started:.1f} s")
    client.close()
    print(f"load average {os.getloadavg()[0]:.1f}")


def postfix(server, items, clients, labels, work, rounds=1):
    import postfix_private
    from mailchain import read_maildir, header
    from postfix_private import milter_main_cf, recipe

    root, why = postfix_private.unpacked_postfix()
    if root is None:
        sys.exit(f"bench_milter: {why}")
    milter_main = milter_main_cf(server.milter_port)
    results = {"milter": [], "content_filter": []}
    order = ["content_filter", "milter"]
    for name in [n for r in range(rounds) for n in (order if r % 2 == 0 else order[::-1])]:
        smtp_port = free_port()
        if name == "milter":
            main, master = milter_main, f"127.0.0.1:{smtp_port} inet n - n - - smtpd\n"
        else:
            main, master = recipe(root, smtp_port, server.port)
        pf = postfix_private.Postfix(root, work, main, master, ["alice"])
        pf.start()
        try:
            pf.wait_for_smtp(smtp_port)
            queue = list(items)
            lock = threading.Lock()
            failures = []

            def sender():
                with smtplib.SMTP("127.0.0.1", smtp_port, timeout=300) as smtp:
                    smtp.ehlo("client.example")
                    while True:
                        with lock:
                            if not queue:
                                return
                            tag, path, message = queue.pop()
                        try:
                            smtp.sendmail("sender@client.example", ["alice@test.example"], message)
                        except smtplib.SMTPException as exc:
                            failures.append((tag, str(exc)))

            cpu_before = server.cpu()
            started = time.perf_counter()
            threads = [threading.Thread(target=sender) for _ in range(clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            box = pf.mail / "alice" / "new"
            deadline = time.monotonic() + 1200
            while (len(os.listdir(box)) if box.is_dir() else 0) < len(items) and time.monotonic() < deadline:
                time.sleep(0.05)
            elapsed = time.perf_counter() - started
            cpu = server.cpu() - cpu_before
            delivered = read_maildir(pf.mail / "alice")
            word = {"Yes": "spam", "No": "ham", "Unsure": "unsure"}
            verdicts = {}
            for message in delivered:
                tag = header(message, "Message-ID")[0].strip("<>").split("@")[0]
                status = header(message, "X-Spam-Status")
                verdicts.setdefault(tag, []).append(word.get(status[0].split(",")[0]) if status else None)
            differ = [t for t, _, _ in items if verdicts.get(t) != [labels[t]]]
            results[name].append(len(delivered) / elapsed)
            assert len(delivered) == len(items) and not differ and not failures, (name, len(delivered), differ[:5])
            print(f"{name}: {len(delivered)} delivered of {len(items)} in {elapsed:.2f} s = "
                  f"{len(delivered) / elapsed:.1f} messages/s; verdicts differing from spamnb classify: "
                  f"{len(differ)} {differ[:5]}; SMTP failures: {len(failures)} {failures[:2]}; "
                  f"spamnb serve's CPU {1000 * cpu / len(items):.2f} ms a message; load average "
                  f"{os.getloadavg()[0]:.1f}")
        finally:
            pf.stop()
    ratios = [a / b for a, b in zip(results["milter"], results["content_filter"])]
    print(f"milter / content_filter messages per second, by round: {' '.join(f'{r:.2f}x' for r in ratios)}; "
          f"median {statistics.median(ratios):.2f}x (milter median {statistics.median(results['milter']):.1f}, "
          f"content_filter median {statistics.median(results['content_filter']):.1f} messages/s)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("latency", "postfix", "flood", "packets"))
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpora" / "spamassassin"))
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=10, help="postfix: concurrent SMTP senders (default 10)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="postfix: rounds of both set-ups, their order alternating (default 3)")
    parser.add_argument("--spamc-every", type=int, default=5,
                        help="latency, flood: run spamc on every N-th message")
    parser.add_argument("--checks", type=int, default=400, help="flood: CHECKs alone and under the flood")
    parser.add_argument("--max-size", type=int, help="packets: spamnb serve --max-size")
    parser.add_argument("--body", type=int, default=250_000, help="packets: body bytes sent one byte a packet")
    parser.add_argument("--empty", type=int, default=400_000, help="packets: empty body packets in one message")
    parser.add_argument("--max-packets", type=int, help="packets: spamnb serve --milter-max-packets")
    parser.add_argument("--workers", default="1", help="spamnb serve --workers (default 1)")
    parser.add_argument("--baseline", metavar="DIR",
                        help="latency: also a server of the spamnb tree in DIR (another checkout, its extensions "
                             "built), each message through both in turn; the ratios of this tree's times to its")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-milter-"))
    os.chmod(work, 0o755)
    try:
        home = work / "home"
        home.mkdir()
        os.chmod(home, 0o755)
        model = home / "model.spamnb"
        subprocess.run([sys.executable, "-m", "spamnb", "train", "-q", "-j", "1", "-m", str(model), args.corpus],
                       env=env(home), check=True, timeout=1800)
        folder = work / "messages"
        folder.mkdir()
        items = pick_messages(args.corpus, args.messages, folder)
        server = Server(home, model, "--workers", args.workers,
                        *(["--max-size", str(args.max_size)] if args.max_size else []),
                        *(["--milter-max-packets", str(args.max_packets)] if args.max_packets else []))
        baseline = None
        try:
            if args.what == "latency":
                servers = {"this tree": server}
                if args.baseline:
                    baseline = Server(home, model, "--workers", args.workers, tree=Path(args.baseline).resolve())
                    servers["baseline"] = baseline
                latency(servers, items, args.spamc_every)
            elif args.what == "flood":
                flood(server, items, args.checks, args.spamc_every)
            elif args.what == "packets":
                packets(server, items, args.body, args.empty)
            else:
                labels = classify_all(home, model, items)
                postfix(server, items, args.clients, labels, work, args.rounds)
        finally:
            server.stop()
            if baseline is not None:
                baseline.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
