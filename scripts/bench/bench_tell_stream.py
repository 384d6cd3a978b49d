"""CHECK latency while a stream of TELLs goes into the same (large) model
(docs/reliability.md, "The server under pressure").

Starts ``spamnb serve --allow-tell`` on a copy of MODEL; one thread runs
``spamc -L spam`` on a new message after another (each TELL changes the
model, which the server must read again for its checks), another sends the
same CHECK over a raw socket, one connection at a time; prints the CHECK
round trips (p50, p99, max) with and without the TELL stream.

    python scripts/bench/bench_tell_stream.py MODEL MESSAGE [--seconds 20] [--pythonpath DIR]
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # scripts/: harness.py
from harness import free_port  # noqa: E402


def check(port, data):
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        while s.recv(65536):
            pass
    return (time.perf_counter() - started) * 1000.0


def checks(port, data, seconds):
    times, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        times.append(check(port, data))
        time.sleep(0.002)
    return times


def summary(times):
    times = sorted(times)
    return (f"{len(times)} checks, p50 {statistics.median(times):.2f} ms, "
            f"p99 {times[int(0.99 * (len(times) - 1))]:.2f} ms, max {times[-1]:.2f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("message")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--pythonpath", default=None, help="run the spamnb found there (a checkout of main, say)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="bench_tell_stream.")
    model = os.path.join(folder, "model.spamnb")
    shutil.copyfile(args.model, model)
    port = free_port()
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    log = open(os.path.join(folder, "serve.log"), "wb")
    server = subprocess.Popen([sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{port}", "-m", model,
                               "--allow-tell"], env=env, stderr=log, cwd=folder)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start")
                time.sleep(0.1)
        message = open(args.message, "rb").read()
        data = b"CHECK SPAMC/1.5\r\nContent-length: %d\r\n\r\n" % len(message) + message
        check(port, data)
        quiet = checks(port, data, args.seconds / 2)
        stop, tells = threading.Event(), []

        def teller():
            n = 0
            while not stop.is_set():
                n += 1
                body = (f"From: t{n}@example.org\r\nSubject: tell {n}\r\nMessage-ID: <t{n}.{port}@example.org>\r\n\r\n"
                        + " ".join(f"w{n}x{i}" for i in range(60)) + "\r\n").encode()
                started = time.perf_counter()
                subprocess.run(["spamc", "-d", "127.0.0.1", "-p", str(port), "-L", "spam"], input=body,
                               capture_output=True, timeout=120)
                tells.append((time.perf_counter() - started) * 1000.0)

        thread = threading.Thread(target=teller)
        thread.start()
        try:
            busy = checks(port, data, args.seconds)
        finally:
            stop.set()
            thread.join()
        print(f"model {args.model} ({os.path.getsize(args.model) / 2**20:.1f} MiB), spamnb from "
              f"{args.pythonpath or 'the default path'}")
        print(f"  without TELLs: {summary(quiet)}")
        print(f"  during {len(tells)} TELLs (spamc -L spam, p50 {statistics.median(tells):.1f} ms): {summary(busy)}")
    finally:
        server.terminate()
        server.wait(30)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
