"""CPU seconds ``spamnb serve`` spends on one request whose bytes come in small
pieces (docs/reliability.md, "The server under pressure").

A client that sends a large body a few hundred bytes at a time makes the
server's SPAMD connection (spamnb.server.spamd_connection.SpamdConnection) run once per
piece; this feeds such a request to it in-process, piece by piece, and
prints the CPU time taken (the verdict of the 4 MB message included).

    python scripts/bench/bench_head_scan.py -m MODEL [--size 4000000] [--piece 300]
"""

import argparse
import asyncio
import io
import time

from spamnb.server.accepting import Acceptor
from spamnb.settings import SERVER_DEFAULTS as DEFAULTS
from spamnb.server.daemon import Server
from spamnb.server.spamd_connection import SpamdConnection


class _Transport:
    def __init__(self):
        self.out = bytearray()

    def write(self, data):
        self.out += data

    def close(self):
        pass

    def abort(self):
        pass

    def get_write_buffer_size(self):
        return 0

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 1) if name == "peername" else default

    def pause_reading(self):
        raise RuntimeError("the request was not answered in the callback")

    def resume_reading(self):
        pass


def request(size):
    """A CHECK request with a message of ``size`` bytes: CRLF lines, no blank line in the body."""
    line = b"lorem ipsum dolor sit amet consectetur adipiscing elit sed do\r\n"
    body = b"From: a@example.org\r\nSubject: big\r\n\r\n" + line * (size // len(line))
    return b"CHECK SPAMC/1.5\r\nContent-length: %d\r\n\r\n" % len(body) + body


def cpu_seconds(model, size, piece):
    given = dict(DEFAULTS, model=model, max_size=2 * size)
    server = Server(given, log_stream=io.StringIO())
    server.models.get(server.settings.model, server.settings.required_score)   # loaded, as at a server's start
    data = request(size)

    async def feed():
        transport = _Transport()
        connection = SpamdConnection(server, Acceptor(server, [], SpamdConnection, "SPAMD"))
        connection.connection_made(transport)
        started = time.process_time()
        for start in range(0, len(data), piece):
            connection.data_received(data[start:start + piece])
        spent = time.process_time() - started
        return spent, bytes(transport.out)

    spent, answer = asyncio.run(feed())
    if not answer.startswith(b"SPAMD/1.5 0 EX_OK"):
        raise SystemExit(f"unexpected answer: {answer[:80]!r}")
    return spent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("--size", type=int, default=4_000_000)
    parser.add_argument("--piece", type=int, default=300)
    args = parser.parse_args()
    spent = cpu_seconds(args.model, args.size, args.piece)
    whole = cpu_seconds(args.model, args.size, args.size + 1000)
    print(f"{args.size} bytes in {args.piece}-byte pieces: {spent:.3f} s CPU; in one piece: {whole:.3f} s CPU")


if __name__ == "__main__":
    main()
