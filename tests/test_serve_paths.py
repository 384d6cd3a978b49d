"""The server's one request path (docs/architecture.md, "A message to a
verdict"): the one SPAMD reader (spamnb.server.request_reader) against
hostile byte streams, and one in-process server whose SPAMD and milter
front ends both go through the one request handler and its hooks
(spamnb.server.handler: ``verdict_hooks``, ``teacher.lesson_hooks``)."""

import asyncio
import io
import socket
import threading
import zlib
from pathlib import Path

import pytest

from conftest import wait_until
from test_serve import MESSAGES, _free_port, _read_all, home, request  # noqa: F401

from spamnb.server import protocol as spamd
from spamnb.server.protocol import ProtocolError
from spamnb.server.request_reader import RequestReader


def _all(reader):
    out = []
    while True:
        received = reader.next()
        if received is None:
            return out
        out.append(received)


def test_the_reader_gives_pipelined_requests_in_any_pieces():
    """Three requests (CHECK, PING, TELL) back to back, fed whole, byte by
    byte and in 7-byte pieces: the same requests and messages each time."""
    one = request("CHECK", b"Subject: a\r\n\r\nbody one\r\n", Connection="keep-alive")
    two = b"PING SPAMC/1.5\r\nConnection: keep-alive\r\n\r\n"
    three = request("TELL", b"Subject: b\n\nbody two\n", User="carol", Message_class="spam", Set="local")
    data = one + two + three
    for size in (len(data), 1, 7):
        reader = RequestReader(max_size=1000)
        got = []
        for start in range(0, len(data), size):
            reader.feed(data[start:start + size])
            got += _all(reader)
        assert [r.request.verb for r in got] == ["CHECK", "PING", "TELL"], size
        assert got[0].message == b"Subject: a\r\n\r\nbody one\r\n" and got[0].keep_alive
        assert got[1].message == b"" and got[2].message == b"Subject: b\n\nbody two\n"
        assert got[2].request.headers["user"] == "carol"
        assert not reader.started()


def test_the_reader_drops_a_body_over_the_limit_and_keeps_what_follows():
    """A 5 MB body over a 1000-byte limit is never held (the buffer stays
    under the limit whatever the pieces), given as None, and the next
    request on the connection is read as it came."""
    big = b"x" * 5_000_000
    data = (b"CHECK SPAMC/1.5\r\nContent-length: %d\r\nConnection: keep-alive\r\n\r\n" % len(big) + big
            + request("CHECK", b"Subject: small\r\n\r\nhi\r\n"))
    reader = RequestReader(max_size=1000)
    got = []
    for start in range(0, len(data), 65536):
        reader.feed(data[start:start + 65536])
        assert len(reader.buffer) <= spamd.MAX_HEAD + 1000 + 65536
        got += _all(reader)
    assert [r.message for r in got] == [None, b"Subject: small\r\n\r\nhi\r\n"]
    # without a Content-length: read to the EOF, dropped past the limit
    reader = RequestReader(max_size=1000)
    reader.feed(b"CHECK SPAMC/1.5\r\n\r\n")
    for _ in range(100):
        reader.feed(b"y" * 10_000)
        assert reader.next() is None and len(reader.buffer) <= 2000
    reader.end()
    assert reader.next().message is None


def test_the_reader_refuses_what_it_must():
    cases = [
        b"CHECK SPAMC/1.5\r\nX-Big: " + b"a" * (spamd.MAX_HEAD + 10),      # a head past the limit, no blank line
        b"GET / HTTP/1.0\r\n\r\n",
        b"CHECK SPAMC/1.5\r\nConnection: keep-alive\r\n\r\nbody",          # kept alive without a length
    ]
    for data in cases:
        reader = RequestReader(max_size=1000)
        reader.feed(data)
        with pytest.raises(ProtocolError) as caught:
            reader.next()
        assert caught.value.code == 76, data[:40]
    reader = RequestReader(max_size=1000)
    reader.feed(b"CHECK SPAMC/1.5\r\nContent-length: 100\r\n\r\nshort")
    assert reader.next() is None
    reader.end()
    with pytest.raises(ProtocolError, match="incomplete"):
        reader.next()
    bomb = zlib.compress(b"z" * 100_000)
    reader = RequestReader(max_size=1000)
    reader.feed(request("CHECK", bomb, Compress="zlib"))
    assert reader.next().message is None      # inflated past the limit: not held
    reader = RequestReader(max_size=1000)
    reader.end()
    assert reader.next() is None              # a clean close before any byte


def test_spamd_and_milter_share_the_handler_and_its_hooks(home):
    """One in-process server with a SPAMD and a milter address: a CHECK, a
    milter message and a TELL all reach the handler's hooks, with the same
    verdict for the same message on both front ends."""
    pytest.importorskip("kilter.protocol")
    from milter_client import MilterClient, added_fields

    from spamnb.settings import SERVER_DEFAULTS as DEFAULTS
    from spamnb.server.daemon import Server

    spamd_port, milter_port = _free_port(), _free_port()
    given = dict(DEFAULTS, model=str(home / "model.spamnb"), listen=[f"127.0.0.1:{spamd_port}"],
                 milter=[f"127.0.0.1:{milter_port}"], allow_tell=True, models_dir=str(home / "users"),
                 create_user_models=True)
    server = Server(given, log_stream=io.StringIO())
    server.load_site_model()
    verdicts, lessons = [], []
    server.handler.verdict_hooks.append(lambda checked, message, user: verdicts.append((checked.label, user)))
    server.handler.teacher.lesson_hooks.append(lambda lesson, told, path: lessons.append((lesson.user, told.learned)))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
        message = MESSAGES[0].read_bytes()
        with socket.create_connection(("127.0.0.1", spamd_port), timeout=10) as s:
            s.sendall(request("CHECK", message, User="alice"))
            answer = _read_all(s)
        assert answer.startswith(b"SPAMD/1.5 0 EX_OK") and b"Spam: True" in answer
        client = MilterClient(("127.0.0.1", milter_port), timeout=10)
        client.negotiate()
        fields = added_fields(client.message(message, recipients=("bob@test.example",)))
        client.close()
        assert fields["x-spam-status"].startswith(b" Yes,")     # with the space: HEADER_LEADING_SPACE agreed
        with socket.create_connection(("127.0.0.1", spamd_port), timeout=10) as s:
            s.sendall(request("TELL", message, User="carol", Message_class="ham", Set="local"))
            assert b"DidSet: local" in _read_all(s)
        with socket.create_connection(("127.0.0.1", spamd_port), timeout=10) as s:     # changes nothing: no hook
            s.sendall(request("TELL", message, User="carol", Message_class="ham", Set="local"))
            again = _read_all(s)
        assert again.startswith(b"SPAMD/1.5 0 EX_OK") and b"DidSet" not in again and b"DidRemove" not in again
        with socket.create_connection(("127.0.0.1", spamd_port), timeout=10) as s:     # a forget: the hook again
            s.sendall(request("TELL", message, User="carol", Remove="local"))
            assert b"DidRemove: local" in _read_all(s)
        assert verdicts == [("spam", "alice"), ("spam", "bob")]
        assert lessons == [("carol", True), ("carol", False)]
    finally:
        async def stop():
            server.stop()
            server.close_listeners()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        server.learners.shutdown(wait=True)
        server.loader.shutdown(wait=True)


def _established(sock):
    """Whether the kernel still holds ``sock``'s TCP connection established
    (/proc/net/tcp: its local port, state 01)."""
    port = sock.getsockname()[1]
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
            return True
    return False


@pytest.mark.slow
def test_a_kept_alive_client_that_reads_no_answers_is_dropped_after_the_timeout(home):
    """A client that sends PROCESS requests on a kept-alive connection and
    never reads the answers: the server stops reading its requests once its
    answers back up, drops it after --timeout, and serves others meanwhile."""
    from test_serve import Daemon

    d = Daemon(home, "--timeout", 1)
    try:
        message = MESSAGES[0].read_bytes() + b"\n" + b"a line of the body to make the answer long\n" * 20_000
        one = request("PROCESS", message, Connection="keep-alive")
        hog = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        hog.settimeout(0.2)
        sent = 0
        try:
            for _ in range(40):
                hog.sendall(one)
                sent += 1
        except (socket.timeout, OSError):
            pass
        assert d.raw(request("CHECK", MESSAGES[0].read_bytes())).startswith(b"SPAMD/1.5 0 EX_OK")
        # past --timeout with the answers unread: the server drops it (a fixed wait raced a loaded machine's
        # server, and reading the answers before the drop would let it go on)
        wait_until(lambda: not _established(hog), what="the server kept the client that reads nothing")
        got = 0
        hog.settimeout(10)
        try:
            while True:
                chunk = hog.recv(1 << 20)
                if not chunk:
                    break
                got += len(chunk)
        except ConnectionResetError:
            pass
        answer = len(d.raw(request("PROCESS", message)))
        assert sent >= 2 and got < sent * answer, (sent, got, answer)      # dropped, its answers cut short
        hog.close()
        assert d.proc.poll() is None
    finally:
        assert d.stop() == 0
