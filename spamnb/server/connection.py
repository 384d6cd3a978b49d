"""A connection's first bytes: :class:`Connection` answers the plain first
request spamc or an MTA sends right in the event loop's callback, and hands
anything else to the server's general handler (``Server.handle``), which
reads requests with :func:`read_head`.  The layout of an answer
(:func:`layout`) and the escaping of client text in log lines
(:func:`log_safe`) are shared by both ways."""

from __future__ import annotations

import asyncio
import time

from spamnb.server import protocol as spamd
from spamnb.server.models import one_line
from spamnb.server.protocol import EX, ProtocolError


def log_safe(text, limit=64):
    """``text`` for a log line: control characters (CR, LF, ...) and
    backslashes escaped, so a client's ``User:`` cannot start a line of its own."""
    text = str(text)[:limit]
    return "".join(c if c.isprintable() and c != "\\" else (
        "\\\\" if c == "\\" else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}") for c in text)


def layout(request):
    """How answers to ``request`` are laid out: spamd's layouts when the
    connection closes after the answer (a SPAMC/1.2 client, Exim's spam
    condition, parses the older one; a CHECK answer has no body, so no
    Content-length: spamc reads an answer's head a byte at a time, five
    system calls a byte), else with Content-length."""
    closing = request.headers.get("connection", "").lower() != "keep-alive"
    legacy = closing and (request.version < (1, 3) or request.verb == "CHECK")

    def reply(spam, body=b"", whole_message=False):
        if legacy:
            return spamd.legacy_response(spam, body, whole_message)
        return spamd.response(0, [spam], body)

    return reply


STOP_GRACE = 1.0    # seconds a connection accepted before a stop has to begin its request (Connection.last_call)

_FAST_VERBS = frozenset(("CHECK", "SYMBOLS", "REPORT", "REPORT_IFSPAM", "PROCESS", "HEADERS"))


class Connection(asyncio.Protocol):
    """A new connection.  Its first request is answered right in the event
    loop's callback when it is the plain request a spamc process or an MTA
    sends: well formed, a verdict verb, a Content-length within --max-size,
    not compressed, not kept alive.  That skips the streams and the task of
    the general handler (about a tenth of a millisecond of a spamc run).
    Anything else (an error, TELL, PING, keep-alive, a client over the
    limits, a request that ends early) is handed, with the bytes received
    so far, to :meth:`Server.handle`, which answers it as before.  Bounds
    while buffering: --idle-timeout to the first byte, then --timeout; at
    most the request head limit plus --max-size bytes.  The head is looked
    for in the bytes that came since the last look only, and parsed once."""

    def __init__(self, server):
        self.server = server
        self.transport = None
        self.buffer = bytearray()
        self.timer = None
        self.counted = True         # holds a slot of --max-connections (taken at accept)
        self.eof = False
        self.peer = "unix"
        self.late = server.stopping is not None     # taken from the backlog while stopping
        self.scanned = 0            # the head's end is not before this offset
        self.request = None         # (request, body start, length) once the head is parsed

    def connection_made(self, transport):
        self.transport = transport
        server = self.server
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else "unix"
        if self.peer != "unix" and not server.settings.allows(self.peer):
            self._hand_over()       # the general handler refuses it and says why
            return
        server.fast.add(self)
        wait = min(server.settings.idle_timeout, STOP_GRACE) if self.late else server.settings.idle_timeout
        self.timer = asyncio.get_running_loop().call_later(wait, self._timed_out)

    def data_received(self, data):
        if not self.buffer and self.timer is not None:
            # the first byte: the request has --timeout from now
            self.timer.cancel()
            self.timer = asyncio.get_running_loop().call_later(self.server.settings.timeout, self._timed_out)
        self.buffer += data
        if len(self.buffer) > spamd.MAX_HEAD + self.server.settings.max_size:
            self._hand_over()
            return
        self._try_answer()

    def eof_received(self):
        self.eof = True
        return self._hand_over()    # the request is not whole: the general handler says so

    def connection_lost(self, exc):
        self._release()
        if self.counted:
            self.counted = False
            self.server.slot_freed()

    def busy(self):
        return bool(self.buffer) or self.late

    def last_call(self):
        """The server stops: a connection whose request has not begun is
        waited for, :data:`STOP_GRACE` seconds at most (--idle-timeout if shorter)."""
        self.late = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = asyncio.get_running_loop().call_later(
                min(self.server.settings.idle_timeout, STOP_GRACE), self._timed_out)

    def _release(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.server.fast.discard(self)

    def _hand_over(self):
        self._release()
        self.counted = False        # the slot goes with the connection to Server.handle
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=spamd.MAX_HEAD, loop=loop)
        inner = asyncio.StreamReaderProtocol(reader, self.server.handle, loop=loop)
        self.transport.set_protocol(inner)
        inner.connection_made(self.transport)
        if self.buffer:
            inner.data_received(bytes(self.buffer))
            self.buffer = bytearray()
        return inner.eof_received() if self.eof else None

    def _timed_out(self):
        self.timer = None
        server = self.server
        if self.buffer:
            self.transport.write(spamd.error_response(EX["EX_TIMEOUT"], "timed out"))
            server.request_done("-", "-", f"error {EX['EX_TIMEOUT']} timed out after {server.settings.timeout:g} s",
                                0, 0.0, self.peer)
        self._release()
        self.transport.close()

    def _head(self):
        """(request, body start, length) once the head is whole, else None;
        raises ProtocolError.  Each byte is scanned for the blank line once."""
        if self.request is not None:
            return self.request
        buffer = self.buffer
        start = max(0, self.scanned - 2)
        ends = [p for p in (buffer.find(b"\n\r\n", start), buffer.find(b"\n\n", start)) if p >= 0]
        if not ends:
            self.scanned = len(buffer)
            if len(buffer) > spamd.MAX_HEAD:
                raise ProtocolError(EX["EX_PROTOCOL"], "request header too large")
            return None
        end = min(ends)
        body_start = end + (3 if buffer[end + 1:end + 2] == b"\r" else 2)
        request = spamd.parse_head(bytes(buffer[:end]).rstrip(b"\r\n"))
        self.request = (request, body_start, spamd.content_length(request))
        return self.request

    def _try_answer(self):
        try:
            head = self._head()
        except ProtocolError:
            self._hand_over()
            return
        if head is None:
            return
        request, body_start, length = head
        headers = request.headers
        server = self.server
        if (request.verb not in _FAST_VERBS or length is None or length > server.settings.max_size
                or "compress" in headers or headers.get("connection", "").lower() == "keep-alive"):
            self._hand_over()
            return
        paths = server.model_path(headers.get("user"))
        if not server.models.loaded(paths[0]):
            self._hand_over()       # a model not loaded yet is loaded by the general handler, in a thread
            return
        buffer = self.buffer
        if len(buffer) - body_start < length:
            return                  # more to come
        started = time.perf_counter()
        self._release()
        message = bytes(buffer[body_start:body_start + length])
        self.buffer = bytearray()
        user = log_safe(headers.get("user", "-"))
        try:
            reply, outcome = server.answer_verdict(request, message, layout(request), paths)
        except ProtocolError as exc:
            reply, outcome = spamd.error_response(exc.code, exc.text), f"error {exc.code} {exc.text}"
        except Exception as exc:  # noqa: BLE001 - answered, logged; the server goes on
            reply = spamd.error_response(EX["EX_SOFTWARE"], "internal error")
            outcome = f"error {EX['EX_SOFTWARE']} {type(exc).__name__}: {one_line(exc)}"
        transport = self.transport
        transport.write(reply)
        if transport.get_write_buffer_size():
            # a client that does not read its answer: dropped after --timeout
            asyncio.get_running_loop().call_later(server.settings.timeout, transport.abort)
        transport.close()
        ms = (time.perf_counter() - started) * 1000.0
        server.request_done(request.verb, user, outcome, length, ms, self.peer)


async def read_head(reader, first_byte_hook):
    """The request line and headers up to the blank line (bytes, without it), or
    None at a clean end of stream before any byte."""
    byte = await reader.read(1)
    if not byte:
        return None
    first_byte_hook()
    lines = []
    total = 0
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except (asyncio.LimitOverrunError, ValueError):   # a line over the stream's limit
            raise ProtocolError(EX["EX_PROTOCOL"], "header line too long") from None
        if byte:
            line, byte = byte + line, b""
        if line in (b"\r\n", b"\n"):
            return b"".join(lines).rstrip(b"\r\n")
        total += len(line)
        if total > spamd.MAX_HEAD or len(lines) > spamd.MAX_HEADER_LINES:
            raise ProtocolError(EX["EX_PROTOCOL"], "request header too large")
        lines.append(line)
