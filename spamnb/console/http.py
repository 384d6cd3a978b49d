"""HTTP/1.1 for the console: h11 (a sans-I/O parser, as the milter uses
``kilter.protocol``) on the console process's asyncio loop.

Bounded: a request head at most :data:`MAX_HEAD` bytes, a body at most
:data:`MAX_BODY` (an upload, to a path the application names, at most its
``--max-size`` and :data:`MAX_UPLOADS` of them read at once: 503 past
it), :data:`MAX_CONNECTIONS` connections at once (past it a
connection is closed at accept), :data:`TIMEOUT` seconds to read a request
and to write its answer, :data:`KEEP_ALIVE` requests a connection; a request
refused before its body was read is answered, then what the client still
sends is read and thrown away (:data:`LINGER_SECONDS`, :data:`LINGER_BYTES`)
so the answer is not lost to a reset.  Every
answer carries the console's security headers (:data:`SECURITY_HEADERS`:
a Content-Security-Policy that allows only the console's own script file,
its own style sheet given inline in the page (:data:`STYLE`, allowed by the
hash of its exact text, computed at start-up: no ``'unsafe-inline'``), no
inline script, no frames)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

__all__ = ["Request", "Response", "HttpServer", "SECURITY_HEADERS", "STYLE", "CSP"]

MAX_HEAD = 16 * 1024
MAX_BODY = 256 * 1024
MAX_UPLOADS = 2         # bodies larger than MAX_BODY (uploads) read at once, at most
MAX_CONNECTIONS = 64
TIMEOUT = 15.0
KEEP_ALIVE = 100
LINGER_SECONDS = 2.0        # a refused request's body read and thrown away for this long at most ...
LINGER_BYTES = 16 * 1024 * 1024     # ... and this much at most (then closed)


def _own_style():
    from importlib import resources

    text = (resources.files("spamnb.console") / "static" / "app.css").read_text(encoding="utf-8")
    if "<" in text:
        raise ValueError("the console's style sheet may not hold '<' (it goes inline in the page)")
    return text


# the console's style sheet, put inline in the page's head (an external one would hold the first paint until
# it is read, even from the cache); the policy allows that one text by its SHA-256, and no other inline style
STYLE = _own_style()
STYLE_HASH = "'sha256-" + base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode() + "'"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' " + STYLE_HASH + "; img-src 'self'; "
       "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = [("Content-Security-Policy", CSP), ("X-Content-Type-Options", "nosniff"),
                    ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"),
                    ("Cross-Origin-Opener-Policy", "same-origin"), ("Cross-Origin-Resource-Policy", "same-origin")]


@dataclass
class Request:
    method: str
    path: str
    query: dict
    headers: dict
    body: bytes
    peer: str
    tls: bool = False

    def arg(self, name, default=None):
        values = self.query.get(name)
        return values[0] if values else default

    def cookie(self, name):
        for part in self.headers.get("cookie", "").split(";"):
            key, _, value = part.strip().partition("=")
            if key == name:
                return value
        return None


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: list = field(default_factory=list)


class HttpServer:
    """Serves ``app(request) -> Response`` (a coroutine function) on the
    given listening sockets (``ssl``: a server SSLContext, or None;
    ``allows(address)``: whether a client may connect)."""

    def __init__(self, app, log, ssl=None, allows=None, upload_limit=None):
        """``upload_limit(path)``: the largest body a POST to ``path`` may
        have when it may be larger than :data:`MAX_BODY` (an upload), or None."""
        self.app, self.log, self.ssl, self.allows = app, log, ssl, allows
        self.upload_limit = upload_limit or (lambda path: None)
        self.uploads = 0        # upload bodies being read now
        self.active = 0
        self.servers = []

    async def start(self, socks):
        for sock in socks:
            self.servers.append(await asyncio.start_server(self.connection, sock=sock, ssl=self.ssl,
                                                           limit=MAX_HEAD))

    def close(self):
        for server in self.servers:
            server.close()

    async def connection(self, reader, writer):
        peer = writer.get_extra_info("peername")
        if self.allows is not None and isinstance(peer, tuple) and not self.allows(peer[0]):
            writer.close()      # outside --allowed-ips: closed before a byte is read
            return
        if self.active >= MAX_CONNECTIONS:
            writer.close()
            return
        self.active += 1
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.TimeoutError, OSError):
            pass
        except Exception as exc:  # noqa: BLE001 - a connection's failure is logged, the console goes on
            self.log(f"console: connection failed: {type(exc).__name__}")
        finally:
            self.active -= 1
            writer.close()

    async def _serve(self, reader, writer):
        import h11

        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        peer = writer.get_extra_info("peername")
        peer = peer[0] if isinstance(peer, tuple) else "local"
        for served in range(1, KEEP_ALIVE + 1):
            request = await asyncio.wait_for(self._read(conn, reader, peer), TIMEOUT)
            if request is None:
                return
            if isinstance(request, Response):
                response = request
            else:
                try:
                    response = await self.app(request)
                except Exception as exc:  # noqa: BLE001 - an internal error is a 500, logged
                    self.log(f"console: {request.method} {request.path[:200]!r}: {type(exc).__name__}: {exc}"[:500])
                    response = Response(500, b'{"error": "internal error"}')
            keep = (conn.our_state is h11.SEND_RESPONSE and not isinstance(request, Response)
                    and served < KEEP_ALIVE and request.headers.get("connection", "").lower() != "close")
            data = self._send(conn, response, keep)
            writer.write(data)
            await asyncio.wait_for(writer.drain(), TIMEOUT)
            if isinstance(request, Response):
                await self._linger(reader, writer)
                return
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE or not keep:
                return
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return

    @staticmethod
    async def _linger(reader, writer):
        """After a request refused before its body was read (413, 431, a bad
        request): our side closed for writing, what the client still sends
        read and thrown away, at most :data:`LINGER_BYTES` for at most
        :data:`LINGER_SECONDS`, then the connection closed.  Closed at once,
        the unread body would make the kernel answer with a reset, and the
        client could lose the answer it had not read yet."""
        if not writer.can_write_eof():
            return
        writer.write_eof()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LINGER_SECONDS
        drained = 0
        while drained < LINGER_BYTES:
            left = deadline - loop.time()
            if left <= 0:
                return
            try:
                data = await asyncio.wait_for(reader.read(65536), left)
            except asyncio.TimeoutError:
                return
            if not data:
                return
            drained += len(data)

    async def _read(self, conn, reader, peer):
        uploading = [False]
        try:
            return await self._read_request(conn, reader, peer, uploading)
        finally:
            if uploading[0]:
                self.uploads -= 1

    def _body_room(self, head, size, uploading):
        """None when a body of ``size`` bytes may be read for ``head``, else the answer."""
        if size <= MAX_BODY:
            return None
        limit = self.upload_limit(urlsplit(head.target.decode("ascii", "replace")).path)
        if limit is None or size > limit:
            return Response(413, b'{"error": "body too large"}')
        if not uploading[0]:
            if self.uploads >= MAX_UPLOADS:
                return Response(503, b'{"error": "other uploads are being read: try again"}')
            self.uploads += 1
            uploading[0] = True
        return None

    async def _read_request(self, conn, reader, peer, uploading):
        import h11

        head, body = None, bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                return Response(exc.error_status_hint or 400, b'{"error": "bad request"}')
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                if not data and conn.their_state is h11.IDLE:
                    return None
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                head = event
                # h11 bounds a head that arrives in parts; one that came whole is measured here
                if len(event.target) + sum(len(k) + len(v) + 4 for k, v in event.headers) > MAX_HEAD:
                    return Response(431, b'{"error": "request head too large"}')
                length = dict(event.headers).get(b"content-length")
                refused = self._body_room(head, int(length), uploading) if length is not None else None
                if refused is not None:
                    return refused
            elif isinstance(event, h11.Data):
                body += event.data
                refused = self._body_room(head, len(body), uploading)
                if refused is not None:
                    return refused
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                return None
        target = head.target.decode("ascii", "replace")
        split = urlsplit(target)
        headers = {}
        for name, value in head.headers:
            headers[name.decode("ascii", "replace").lower()] = value.decode("latin-1")
        return Request(head.method.decode("ascii", "replace"), split.path,
                       parse_qs(split.query, max_num_fields=32), headers, bytes(body), peer, self.ssl is not None)

    def _send(self, conn, response, keep):
        import h11

        headers = [("Content-Type", response.content_type), ("Content-Length", str(len(response.body))),
                   *SECURITY_HEADERS, *response.headers]
        if response.content_type.startswith("application/json"):
            headers.append(("Cache-Control", "no-store"))
        if not keep:
            headers.append(("Connection", "close"))
        reason = {200: b"OK", 204: b"No Content", 302: b"Found", 400: b"Bad Request", 401: b"Unauthorized",
                  403: b"Forbidden", 404: b"Not Found", 405: b"Method Not Allowed", 409: b"Conflict",
                  413: b"Payload Too Large", 429: b"Too Many Requests", 431: b"Request Header Fields Too Large", 500: b"Internal Server Error",
                  503: b"Service Unavailable"}.get(response.status, b"")
        try:
            out = conn.send(h11.Response(status_code=response.status, headers=headers, reason=reason))
            out += conn.send(h11.Data(data=response.body)) if response.body else b""
            out += conn.send(h11.EndOfMessage())
        except h11.LocalProtocolError:
            # no request head was read (a malformed one): an answer of our own, then close
            return b"HTTP/1.1 %d \r\nConnection: close\r\nContent-Length: 0\r\n\r\n" % response.status
        return out
