"""The one reader of SPAMD requests: bytes in as they come from a
connection, whole requests out, no I/O.

A :class:`RequestReader` is fed what a connection receives
(:meth:`~RequestReader.feed`, :meth:`~RequestReader.end` at the client's
EOF) and gives a :class:`Received` request once its head and body are whole
(:meth:`~RequestReader.next`).  Its bounds, whatever the client sends:

- the head (request line and headers) at most ``protocol.MAX_HEAD`` bytes
  and ``protocol.MAX_HEADER_LINES`` lines, each byte scanned for the blank
  line once however small the pieces it comes in;
- the body at most ``max_size`` bytes held: a larger one (by its
  ``Content-length``, by what came before the EOF when there is none, or
  inflated from ``Compress: zlib``) is read and dropped as it comes, and
  the request given with ``message`` None;
- so at most ``MAX_HEAD + max_size`` bytes buffered, plus one piece.

Anything malformed raises :class:`~spamnb.server.protocol.ProtocolError`
with the code the server answers (EX_PROTOCOL, EX_DATAERR).  Time limits
are the connection's (spamnb.server.spamd)."""

from __future__ import annotations

from dataclasses import dataclass

from spamnb.server import protocol as spamd
from spamnb.server.protocol import EX, ProtocolError

NO_BODY_VERBS = frozenset(("PING", "SKIP"))   # answered without reading a body


@dataclass(frozen=True)
class Received:
    """A whole request: ``request`` (protocol.Request), ``message`` (the
    body, inflated; None when over --max-size; b"" for PING/SKIP)."""

    request: spamd.Request
    message: bytes | None

    @property
    def keep_alive(self):
        return self.request.headers.get("connection", "").lower() == "keep-alive"


class RequestReader:
    """Reads the requests of one connection, one after the other (module docstring)."""

    def __init__(self, max_size):
        self.max_size = max_size
        self.buffer = bytearray()
        self.scanned = 0            # the head's end is not before this offset
        self.head = None            # (request, body start, Content-length or None) once parsed
        self.dropping = False       # the body is over max_size: read and dropped as it comes
        self.dropped = 0            # body bytes dropped so far
        self.eof = False

    def started(self):
        """Whether any byte of a request came that has not been given yet."""
        return bool(self.buffer) or self.head is not None

    def feed(self, data):
        """Bytes the client sent.  A body over the limit is not kept."""
        if self.dropping:
            self._drop(data)
            return
        self.buffer += data
        if self.head is not None:
            self._check_body_size()

    def end(self):
        """The client's EOF (nothing more comes)."""
        self.eof = True

    def next(self):
        """The next whole request (:class:`Received`), or None while it is
        not whole; at the EOF, None when no byte of a request came, else
        ProtocolError (EX_PROTOCOL, the request ended early)."""
        if self.head is None:
            self.head = self._parse_head()
            if self.head is None:
                if self.eof and self.buffer:
                    raise ProtocolError(EX["EX_PROTOCOL"], "incomplete request")
                return None
            self._check_body_size()
        request, body_start, length = self.head
        if request.verb in NO_BODY_VERBS:
            return self._give(body_start, b"")
        if length is None:
            if request.headers.get("connection", "").lower() == "keep-alive":
                raise ProtocolError(EX["EX_PROTOCOL"], "Content-length is required on a kept-alive connection")
            if not self.eof:
                return None
            if self.dropping:
                return self._give(len(self.buffer), None)
            return self._give(len(self.buffer), self._inflated(request, bytes(self.buffer[body_start:])))
        if self.dropping:
            if self.dropped < length:
                if self.eof:
                    raise ProtocolError(EX["EX_PROTOCOL"], "incomplete request")
                return None
            return self._give(0, None)      # the buffer holds what came after the body
        if len(self.buffer) - body_start < length:
            if self.eof:
                raise ProtocolError(EX["EX_PROTOCOL"], "incomplete request")
            return None
        message = bytes(self.buffer[body_start:body_start + length])
        return self._give(body_start + length, self._inflated(request, message))

    # ------------------------------------------------------------------ inside
    def _parse_head(self):
        """(request, body start, length) once the head is whole, else None."""
        buffer = self.buffer
        if buffer[:1] == b"\n" or buffer[:2] == b"\r\n":
            end, body_start = 0, 1 if buffer[:1] == b"\n" else 2     # an empty request line
        else:
            start = max(0, self.scanned - 2)
            ends = [p for p in (buffer.find(b"\n\r\n", start), buffer.find(b"\n\n", start)) if p >= 0]
            if not ends:
                self.scanned = len(buffer)
                if len(buffer) > spamd.MAX_HEAD:
                    raise ProtocolError(EX["EX_PROTOCOL"], "request header too large")
                return None
            end = min(ends)
            if end > spamd.MAX_HEAD:
                raise ProtocolError(EX["EX_PROTOCOL"], "request header too large")
            body_start = end + (3 if buffer[end + 1:end + 2] == b"\r" else 2)
        request = spamd.parse_head(bytes(buffer[:end]).rstrip(b"\r\n"))
        return request, body_start, spamd.content_length(request)

    def _check_body_size(self):
        """Start dropping the body once it is known to be over the limit: the
        head (parsed) and the body so far let go of, what came after the
        body kept (a kept-alive client's next request)."""
        request, body_start, length = self.head
        if request.verb in NO_BODY_VERBS:
            return
        held = len(self.buffer) - body_start
        if (length is not None and length > self.max_size) or (length is None and held > self.max_size):
            self.dropping = True
            self.dropped = held if length is None else min(held, length)
            rest = self.buffer[body_start + self.dropped:]
            self.buffer = bytearray(rest)
            self.head = (request, 0, length)

    def _drop(self, data):
        length = self.head[2]
        take = len(data) if length is None else min(len(data), length - self.dropped)
        self.dropped += take
        if take < len(data):
            self.buffer += data[take:]

    def _give(self, end, message):
        request = self.head[0]
        del self.buffer[:end]
        self.head, self.scanned, self.dropped, self.dropping = None, 0, 0, False
        return Received(request, message)

    def _inflated(self, request, data):
        if "compress" in request.headers:
            return spamd.decompress(data, self.max_size)
        return data
