"""Throughput of ``spamnb serve --workers N`` with concurrent real spamc clients
(figures in docs/serve.md).

Trains a model on the train part of the fixed split, then starts, side by
side on loopback ports:

- ``--workers 1`` (one process, today's server),
- ``--workers 2`` (two pre-forked workers sharing the listening socket),
- the share-nothing ceiling: two independent ``--workers 1`` servers on two
  ports, the clients split between them (what two processes can do with no
  sharing at all).

Each round loads each set-up in turn (the order rotating from round to round)
for ``--seconds`` with ``--clients`` client threads, each a bash loop running the
real ``spamc -c`` once per message (a connection per message, as an MTA does),
messages taken in turn from the test part.  Reported: messages/s of every
round, the medians, and the ratios of the medians to ``--workers 1``; the
CPU time per message of the servers and of the clients; the load average
before and after (the machine may be shared); the memory of the
``--workers 1`` and ``--workers 2`` processes at the end (RSS, its shared
part, PSS: the model's pages are shared by the workers).

    python scripts/bench/bench_workers.py [--corpus ../shared/corpora/spamassassin] [--rounds 5] [--seconds 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from spamnb.model.spam_filter import SpamFilter  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
from harness import corpus_split, free_port  # noqa: E402  (the fixed split, as bench_serve.py reads it)


def start(model, env, work, workers):
    port = free_port()
    log = open(work / f"serve-{port}.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{port}", "-m", str(model),
                             "--workers", str(workers), "--max-connections", "256"],
                            env=env, stderr=log, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while "listening on" not in (work / f"serve-{port}.log").read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"spamnb serve --workers {workers} did not start")
        time.sleep(0.05)
    return proc, port


_CLIENT = r"""
mapfile -t files < "$1"; port=$2; i=$3; step=$4
end=$(( ${EPOCHREALTIME/./} + $5 )); n=0; failed=0
while (( ${EPOCHREALTIME/./} < end )); do
    spamc -x -p "$port" -c < "${files[i % ${#files[@]}]}" > /dev/null
    if (( $? <= 1 )); then (( n += 1 )); else (( failed += 1 )); fi
    (( i += step ))
done
echo "$n $failed"
"""


_RAW_CLIENT = r"""
import socket, sys, time
files = open(sys.argv[1]).read().split("\n")[:-1]
port, i, step, seconds = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
bodies = [open(f, "rb").read() for f in files]
requests = [b"CHECK SPAMC/1.5\r\nContent-length: %d\r\n\r\n" % len(m) + m for m in bodies]
n = failed = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(requests[i % len(requests)])
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    if answer.startswith(b"SPAMD/1.1 0 ") or answer.startswith(b"SPAMD/1.5 0 "):
        n += 1
    else:
        failed += 1
    i += step
print(n, failed)
"""


def load(ports, listing, n_clients, seconds, raw=False):
    """messages/s of ``n_clients`` clients (bash loops: a process costs the
    client side less than Python's subprocess) running ``spamc -c``, client
    i on ports[i % len(ports)], for ``seconds``; and the number of failed runs."""
    started = time.monotonic()
    if raw:
        clients = [subprocess.Popen([sys.executable, "-c", _RAW_CLIENT, str(listing), str(ports[i % len(ports)]),
                                     str(i), str(n_clients), str(seconds)], stdout=subprocess.PIPE)
                   for i in range(n_clients)]
    else:
        clients = [subprocess.Popen(["bash", "-c", _CLIENT, "client", str(listing), str(ports[i % len(ports)]),
                                     str(i), str(n_clients), str(int(seconds * 1e6))], stdout=subprocess.PIPE)
                   for i in range(n_clients)]
    counts = [tuple(map(int, c.communicate()[0].split())) for c in clients]
    return sum(n for n, _ in counts) / (time.monotonic() - started), sum(f for _, f in counts)


def server_cpu(pids):
    """CPU seconds (user + system) used so far by the processes and their children (workers)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            children = []
        for p in [pid, *map(int, children)]:
            try:
                fields = Path(f"/proc/{p}/stat").read_text().rsplit(") ", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def memory(pid):
    """(RSS, PSS, shared) of a process in MiB, from /proc/PID/smaps_rollup."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, value = line.split(":", 1)
        fields[key] = int(value.split()[0]) / 1024.0
    return fields["Rss"], fields["Pss"], fields["Shared_Clean"] + fields["Shared_Dirty"]


def children_cpu():
    """CPU seconds of this process's finished children and theirs (the clients and their spamc runs)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpora" / "spamassassin"))
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--raw", action="store_true",
                        help="clients are Python processes on raw sockets (a connection per message, CHECK) "
                             "instead of spamc: much cheaper on the client side, so the server is the bottleneck")
    args = parser.parse_args(argv)

    train, test = corpus_split(args.corpus)
    work = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    env = dict(os.environ, PYTHONPATH=str(REPO), SPAMNB_HOME=str(work))
    print(f"corpus: {args.corpus}: train {len(train)}, test {len(test)}; {os.cpu_count()} cores; "
          f"{args.clients} {'raw-socket' if args.raw else 'spamc'} clients, {args.rounds} rounds of {args.seconds:g} s", flush=True)
    spam_filter = SpamFilter().fit([p for p, _ in train], [s for _, s in train], tune=False)
    model = work / "model.spamnb"
    spam_filter.save(model)
    listing = work / "messages.txt"
    listing.write_text("".join(f"{p}\n" for p, _ in test))

    servers = []
    try:
        one = start(model, env, work, 1)
        two = start(model, env, work, 2)
        apart = (start(model, env, work, 1), start(model, env, work, 1))
        servers = [one, two, *apart]
        setups = {"--workers 1": [one[1]], "--workers 2": [two[1]],
                  "share-nothing: 2 x --workers 1": [apart[0][1], apart[1][1]]}
        for ports in setups.values():          # warm up: every process has answered
            load(ports, listing, args.clients, 0.5, args.raw)
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        setups_pids = {"--workers 1": [one[0].pid], "--workers 2": [two[0].pid],
                       "share-nothing: 2 x --workers 1": [apart[0][0].pid, apart[1][0].pid]}
        rates = {name: [] for name in setups}
        cpu_ms = {name: [] for name in setups}
        client_ms = {name: [] for name in setups}
        failures = 0
        names = list(setups)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                cpu, clients_cpu = server_cpu(setups_pids[name]), children_cpu()
                rate, failed = load(setups[name], listing, args.clients, args.seconds, args.raw)
                rates[name].append(rate)
                n = max(1, rate * args.seconds)
                cpu_ms[name].append((server_cpu(setups_pids[name]) - cpu) * 1000.0 / n)
                client_ms[name].append((children_cpu() - clients_cpu) * 1000.0 / n)
                failures += failed
            print(f"round {r + 1}: " + ", ".join(f"{name} {rates[name][-1]:.0f}" for name in names) + " msg/s",
                  flush=True)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        base = statistics.median(rates["--workers 1"])
        for name in names:
            median = statistics.median(rates[name])
            paired = statistics.median(a / b for a, b in zip(rates[name], rates["--workers 1"]))
            print(f"{name:32s} median {median:7.0f} msg/s  ({median / base:.2f}x --workers 1; "
                  f"median of the per-round ratios {paired:.2f}x); server CPU "
                  f"{statistics.median(cpu_ms[name]):.2f} ms/msg, clients' CPU {statistics.median(client_ms[name]):.2f} ms/msg")
        print(f"failed spamc runs: {failures}")
        for name, proc in (("--workers 1", one[0]), ("--workers 2", two[0])):
            pids = [proc.pid] + [int(p) for p in
                                 Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
            figures = [memory(pid) for pid in pids]
            print(f"memory, {name} (after the runs): " + "; ".join(
                f"{'parent' if i == 0 and len(pids) > 1 else 'worker' if len(pids) > 1 else 'process'} "
                f"RSS {rss:.1f} MiB (shared {shared:.1f})" for i, (rss, _, shared) in enumerate(figures))
                + f"; PSS total {sum(pss for _, pss, _ in figures):.1f} MiB")
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
