"""Hold a server's connection slots with idle sockets and see what spamc gets
(docs/reliability.md, "The server under pressure").

Opens ``--hold`` connections to the server that send nothing (re-opening
each one the server closes, as an attacker would), and meanwhile runs
``spamc -x -X -c`` on a message ``--checks`` times one after another;
prints how many runs got a verdict, how many exit codes of each kind, and
the wall time per run.

    python scripts/check/hold_connections.py --port 7830 --hold 64 --checks 50 MESSAGE
"""

import argparse
import collections
import socket
import statistics
import subprocess
import threading
import time


def hold(port, count, stop):
    sockets = []
    while not stop.is_set():
        sockets = [s for s in sockets if _alive(s)]
        while len(sockets) < count:
            try:
                sockets.append(socket.create_connection(("127.0.0.1", port), timeout=1))
            except OSError:
                break
        stop.wait(0.05)
    for s in sockets:
        s.close()


def _alive(s):
    s.setblocking(False)
    try:
        return s.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("message")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--hold", type=int, default=64)
    parser.add_argument("--checks", type=int, default=50)
    args = parser.parse_args()
    data = open(args.message, "rb").read()
    stop = threading.Event()
    holder = threading.Thread(target=hold, args=(args.port, args.hold, stop))
    holder.start()
    time.sleep(1.0)
    codes, outputs, times = collections.Counter(), collections.Counter(), []
    try:
        for _ in range(args.checks):
            started = time.monotonic()
            proc = subprocess.run(["spamc", "-x", "-X", "-c", "-d", "127.0.0.1", "-p", str(args.port)], input=data,
                                  capture_output=True, timeout=900)
            times.append(time.monotonic() - started)
            codes[proc.returncode] += 1
            outputs["0/0 (unchecked)" if proc.stdout.strip() == b"0/0" else "verdict"] += 1
    finally:
        stop.set()
        holder.join()
    print(f"{args.checks} x spamc -x -X -c with {args.hold} idle connections held: "
          f"{dict(outputs)}; exit codes {dict(sorted(codes.items()))}; "
          f"wall time p50 {statistics.median(times):.2f} s, max {max(times):.2f} s")


if __name__ == "__main__":
    main()
