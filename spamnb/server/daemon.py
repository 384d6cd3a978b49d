"""``spamnb serve``: a daemon speaking the SPAMC/SPAMD protocol (spamnb.server.protocol).

One asyncio event loop serves every connection: a verdict costs tens of
microseconds of CPU under the GIL, so threads would add switching without
adding parallelism (docs/serve.md has the figures).  TELL (learning) is the
exception: it reads, changes and rewrites a model file under the model's lock
(as ``spamnb learn`` does) and may wait for that lock, so it runs in a small
thread pool while classification goes on.

- Listens on TCP (``--listen HOST:PORT``, loopback by default; any other
  address needs ``--allowed-ips``) and/or a Unix socket (``--listen PATH``).
- Models: the site model (``-m``), and with ``--models-dir DIR`` a model per
  user, ``DIR/<user>/model.spamnb`` (``User:`` header), used when it exists.
  A model is stat()ed at every request and reloaded when the file changed
  (models are replaced by rename, so a loaded model is always whole); a
  loaded model keeps only what classifying reads.
- A new connection's first request, when it is the plain one spamc or an MTA
  sends, is answered in the protocol's callback (:class:`_Connection`);
  anything else goes to the stream handler (:meth:`Server.handle`).
- SIGHUP re-reads ``--config`` and drops the loaded models; SIGTERM/SIGINT
  stop accepting, let requests in flight finish, then exit 0.
- Limits: ``--max-size`` (a larger message is read and thrown away in
  chunks, never held whole), ``--max-connections`` (more are answered
  EX_TEMPFAIL at once), ``--timeout`` (seconds to receive a whole request or
  send a response; EX_TIMEOUT after it), ``--max-models`` loaded at once.
- Logs on stderr (or syslog with ``--syslog``): start, stop, reloads and
  every request that went wrong; one line per request with ``-v``.
- Hooks for spamnb.server.launch (which binds the sockets, drops privileges
  and may fork worker processes around this class): ``listeners`` (bound
  sockets, else bound in :meth:`start`), ``owns_listeners`` (False in a
  forked worker: the parent removes the Unix sockets), ``metrics``
  (spamnb.server.metrics counters, or None) and ``on_ready`` (coroutine
  functions awaited once listening).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from spamnb.server import protocol as spamd
from spamnb.server.protocol import EX, ProtocolError
from spamnb.server.config import Settings, SettingsError, _words
from spamnb.server.listeners import bind_all, close_all
from spamnb.server.models import ModelCache, _classify, _model_error, _one_line, tell

MODEL_NAME = "model.spamnb"
_USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._@+-]{0,63}")
_CHUNK = 65536


class Server:
    """The asyncio server.  ``run()`` blocks until SIGTERM/SIGINT."""

    def __init__(self, given, config=None, log_stream=None):
        self.given = given
        self.config = config
        self.settings = Settings(given, config)
        self.log_stream = log_stream or sys.stderr
        self.models = ModelCache(self.settings.max_models, self.log)
        self.active = 0
        self.fast = set()       # connections waiting for their first request (_Connection)
        self.busy = set()
        self.idle = set()
        self.stopping = None
        self.learners = ThreadPoolExecutor(max_workers=2, thread_name_prefix="spamnb-tell")
        self._syslog = None
        # spamnb.server.launch's hooks (see the module's docstring)
        self.listeners = None
        self.owns_listeners = True
        self.metrics = None
        self.on_ready = []

    # ------------------------------------------------------------------ logging
    def log(self, line):
        if self.settings.syslog:
            if self._syslog is None:
                import syslog

                syslog.openlog("spamnb", syslog.LOG_PID, syslog.LOG_MAIL)
                self._syslog = syslog
            self._syslog.syslog(self._syslog.LOG_INFO, line)
            return
        try:
            self.log_stream.write(f"spamnb serve: {line}\n")
            self.log_stream.flush()
        except (OSError, ValueError):
            pass

    # ------------------------------------------------------------------ models
    def model_path(self, user):
        """The model for ``user``: theirs when it exists, else the site model;
        second item: where TELL learns for them."""
        site = self.settings.model
        if not user or not self.settings.models_dir:
            return site, site
        if _USER_NAME.fullmatch(user) is None or ".." in user:
            raise ProtocolError(EX["EX_NOUSER"], "bad user name")
        own = os.path.join(self.settings.models_dir, user, MODEL_NAME)
        return (own if os.path.exists(own) else site), own

    # ------------------------------------------------------------------ connections
    async def handle(self, reader, writer):
        task = asyncio.current_task()
        peer = writer.get_extra_info("peername")
        peer = peer[0] if isinstance(peer, tuple) else "unix"
        self.active += 1
        try:
            if peer != "unix" and not self.settings.allows(peer):
                self.log(f"refused {peer}: not in --allowed-ips")
                return
            if self.active > self.settings.max_connections or self.stopping is not None:
                if self.metrics is not None:
                    self.metrics.error("too_many_connections")
                await self._send_quietly(writer, spamd.error_response(EX["EX_TEMPFAIL"], "too many connections"), reader)
                self.log(f"{peer} refused: {self.active - 1} connections open (EX_TEMPFAIL)")
                return
            while self.stopping is None:
                self.idle.add(task)
                try:
                    keep_alive = await self.serve_one(reader, writer, peer, task)
                finally:
                    self.idle.discard(task)
                    self.busy.discard(task)
                if not keep_alive:
                    break
        except asyncio.CancelledError:
            pass
        finally:
            self.active -= 1
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the peer may be gone already
                pass

    async def serve_one(self, reader, writer, peer, task):
        """One request; returns True when the connection stays open for another."""
        settings = self.settings
        started = None
        verb, user, outcome, size = "-", "-", "", 0
        keep_alive = False
        try:
            async with asyncio.timeout(settings.timeout) as deadline:
                head = await _read_head(reader, first_byte_hook=lambda: self._begin(task, deadline))
                if head is None:
                    return False        # the client closed between requests
                started = time.perf_counter()
                request = spamd.parse_head(head)
                verb = request.verb
                user = request.headers.get("user", "-")[:64]
                keep_alive = request.headers.get("connection", "").lower() == "keep-alive"
                if verb == "SKIP":
                    outcome = "skipped"
                    return False
                if verb == "PING":
                    outcome = "pong"
                    await self._send(writer, spamd.VERSION + b" 0 PONG\r\n\r\n")
                    return keep_alive
                message = await self._read_body(reader, request, keep_alive)
                size = len(message) if message is not None else -1
                reply, outcome = await self.answer(request, message)
                await self._send(writer, reply)
                return keep_alive and reply.split(b" ", 2)[1] == b"0"
        except ProtocolError as exc:
            outcome = f"error {exc.code} {exc.text}"
            await self._send_quietly(writer, spamd.error_response(exc.code, exc.text), reader)
        except TimeoutError:
            if task in self.idle:
                return False    # idle between requests: close without a word
            outcome = f"error {EX['EX_TIMEOUT']} timed out after {settings.timeout:g} s"
            await self._send_quietly(writer, spamd.error_response(EX["EX_TIMEOUT"], "timed out"))
        except asyncio.IncompleteReadError:
            outcome = f"error {EX['EX_PROTOCOL']} request ended early"
            await self._send_quietly(writer, spamd.error_response(EX["EX_PROTOCOL"], "incomplete request"))
        except (ConnectionError, BrokenPipeError):
            outcome = "client closed the connection mid-request"
        except asyncio.LimitOverrunError:
            outcome = f"error {EX['EX_PROTOCOL']} header line too long"
            await self._send_quietly(writer, spamd.error_response(EX["EX_PROTOCOL"], "header too long"), reader)
        except MemoryError:
            outcome = f"error {EX['EX_SOFTWARE']} out of memory"
            await self._send_quietly(writer, spamd.error_response(EX["EX_SOFTWARE"], "out of memory"))
        finally:
            if started is not None or outcome:
                ms = (time.perf_counter() - started) * 1000.0 if started is not None else 0.0
                self.request_done(verb, user, outcome, size, ms, peer)
        return False

    def request_done(self, verb, user, outcome, size, ms, peer):
        """Count a request (``--metrics``) and log it when it went wrong, or
        with ``-v`` when it did not."""
        if self.metrics is not None:
            self.metrics.request(verb, self._user_class(user), outcome, ms / 1000.0)
        if self.settings.verbose or not _clean(outcome):
            self.log(f"{verb} user={user} {outcome} size={size} {ms:.2f} ms peer={peer}")

    def _user_class(self, user):
        """"user" when ``user``'s own model answers, else "site"."""
        if user == "-" or not self.settings.models_dir:
            return "site"
        try:
            return "user" if self.model_path(user)[0] != self.settings.model else "site"
        except ProtocolError:
            return "site"

    def _begin(self, task, deadline):
        """The first byte of a request came: the connection is busy, and its
        timeout counts from now (not from when it went idle)."""
        self.idle.discard(task)
        self.busy.add(task)
        deadline.reschedule(asyncio.get_running_loop().time() + self.settings.timeout)

    async def _read_body(self, reader, request, keep_alive):
        """The message (decompressed), or None when it is larger than --max-size
        (then read and dropped chunk by chunk)."""
        limit = self.settings.max_size
        length = spamd.content_length(request)
        if length is None:
            if keep_alive:
                raise ProtocolError(EX["EX_PROTOCOL"], "Content-length is required on a kept-alive connection")
            data = await reader.read(limit + 1)      # up to EOF
            while len(data) <= limit:
                more = await reader.read(limit + 1 - len(data))
                if not more:
                    break
                data += more
            if len(data) > limit:
                while await reader.read(_CHUNK):
                    pass
                return None
        elif length > limit:
            left = length
            while left:
                chunk = await reader.read(min(left, _CHUNK))
                if not chunk:
                    raise asyncio.IncompleteReadError(b"", left)
                left -= len(chunk)
            return None
        else:
            data = await reader.readexactly(length)
        if "compress" in request.headers:
            return spamd.decompress(data, limit)
        return data

    async def _send(self, writer, data):
        writer.write(data)
        await writer.drain()

    async def _send_quietly(self, writer, data, reader=None):
        """Send an error, then (a lingering close) read and drop what the client
        still sends, for a second at most, so the answer is not lost to a reset."""
        try:
            async with asyncio.timeout(1.0):
                await self._send(writer, data)
                if reader is not None and writer.can_write_eof():
                    writer.write_eof()
                    while await reader.read(_CHUNK):
                        pass
        except (TimeoutError, ConnectionError, OSError, asyncio.LimitOverrunError, ValueError):
            pass

    # ------------------------------------------------------------------ verbs
    async def answer(self, request, message):
        """(response bytes, log text) for a request with a message."""
        verb = request.verb
        required = self.settings.required_score
        reply = _layout(request)
        if message is None:
            text = f"message larger than {self.settings.max_size} bytes"
            if verb in ("PROCESS", "HEADERS", "TELL"):
                # spamc's safe fallback passes the message on unchanged
                return spamd.error_response(EX["EX_DATAERR"], text), f"error {EX['EX_DATAERR']} {text}"
            return reply(("Spam", f"False ; 0.0 / {required:.1f}")), f"too big, not checked ({text})"
        if verb == "TELL":
            return await self.answer_tell(request, message)
        return self.answer_verdict(request, message, reply)

    def answer_verdict(self, request, message, reply):
        """(response bytes, log text) for a request that asks for a verdict;
        ``reply(spam_header, body, whole_message)`` lays the answer out."""
        verb = request.verb
        required = self.settings.required_score
        path, _ = self.model_path(request.headers.get("user"))
        spam_filter, score_map = self.models.get(path, required)
        verdict = _classify(spam_filter, message, verb != "CHECK")   # CHECK answers without the tokens
        score = score_map.score(verdict.log_odds, verdict.label)
        spam_header = spamd.spam_header(verdict, score, score_map.required)
        outcome = f"{verdict.label} {score:.1f}/{score_map.required:.1f} log-odds={verdict.log_odds:+.3f}"
        if verb == "CHECK":
            return reply(spam_header), outcome
        if verb == "SYMBOLS":
            symbols = ",".join(spamd.symbols(verdict)).encode()
            return reply(spam_header, symbols + (b"\r\n" if request.version < (1, 3) else b"")), outcome
        if verb in ("REPORT", "REPORT_IFSPAM"):
            body = b"" if verb == "REPORT_IFSPAM" and verdict.label != "spam" else \
                spamd.report(verdict, score_map, score)
            return reply(spam_header, body), outcome
        head, body_start = spamd.marked_headers(message, verdict, score, score_map.required)
        if verb == "HEADERS":
            return reply(spam_header, head, True), outcome
        return reply(spam_header, head + message[body_start:], True), outcome  # PROCESS

    async def answer_tell(self, request, message):
        if not self.settings.allow_tell:
            raise ProtocolError(EX["EX_NOPERM"], "TELL is off (spamnb serve --allow-tell)")
        headers = request.headers
        kind = headers.get("message-class", "").strip().lower()
        learn = "local" in _words(headers.get("set", ""))
        remove = "local" in _words(headers.get("remove", ""))
        if kind not in ("spam", "ham", ""):
            raise ProtocolError(EX["EX_PROTOCOL"], "Message-class must be spam or ham")
        if learn and not kind:
            raise ProtocolError(EX["EX_PROTOCOL"], "Set: local needs a Message-class")
        if not (learn or remove):
            return spamd.response(0), "tell: nothing to do"
        spam = None if not kind else kind == "spam"
        current, own = self.model_path(headers.get("user"))
        seed = self.settings.model if own != self.settings.model else None
        loop = asyncio.get_running_loop()
        try:
            did_learn, did_remove = await loop.run_in_executor(
                self.learners, tell, own, message, spam, learn, remove, seed)
        except (_model_error(), OSError, ValueError) as exc:
            raise ProtocolError(EX["EX_UNAVAILABLE"], f"cannot update the model: {_one_line(exc)}") from None
        out = []
        if did_learn:
            out.append(("DidSet", "local"))
        if did_remove:
            out.append(("DidRemove", "local"))
        return spamd.response(0, out), f"tell {kind or '-'} set={int(did_learn)} removed={int(did_remove)}"

    # ------------------------------------------------------------------ life cycle
    def reload(self):
        """SIGHUP: re-read the settings (listening addresses stay) and drop the models."""
        try:
            fresh = Settings(self.given, self.config)
        except SettingsError as exc:
            self.log(f"SIGHUP: settings not reloaded: {exc}")
            return
        fresh.listen = self.settings.listen
        self.settings = fresh
        self.models.max_models = fresh.max_models
        self.models.clear()
        self.log("SIGHUP: settings reloaded, models will be read again")

    def stop(self):
        if self.stopping is None:
            self.stopping = asyncio.get_running_loop().create_future()
            self.stopping.set_result(None)
            for task in list(self.idle):
                task.cancel()
            for connection in [c for c in self.fast if not c.busy()]:
                connection.transport.close()

    async def start(self):
        loop = asyncio.get_running_loop()
        self.servers = []
        if self.listeners is None:
            self.listeners = bind_all(self.settings)
        for listener in self.listeners:
            if listener.item[0] == "unix":
                server = await loop.create_unix_server(lambda: _Connection(self), sock=listener.sock)
            else:
                server = await loop.create_server(
                    lambda: _Connection(self), sock=listener.sock, ssl=listener.tls,
                    ssl_handshake_timeout=self.settings.timeout if listener.tls is not None else None)
            self.servers.append(server)
        if self.owns_listeners:
            where = ", ".join(listener.where for listener in self.listeners)
            self.log(f"listening on {where}; site model {self.settings.model}"
                     + (f"; user models in {self.settings.models_dir}" if self.settings.models_dir else ""))

    async def serve(self):
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, lambda: (self.stop(), done.set()))
        loop.add_signal_handler(signal.SIGHUP, self.reload)
        await self.start()
        for hook in self.on_ready:
            await hook()
        await done.wait()
        for server in self.servers:
            server.close()

        def in_flight():
            return len(self.busy) + sum(1 for c in self.fast if c.busy())

        self.log(f"stopping: {in_flight()} request(s) in flight")
        deadline = loop.time() + self.settings.timeout + 1.0
        while in_flight() and loop.time() < deadline:
            await asyncio.sleep(0.02)
        self.learners.shutdown(wait=True)
        if self.owns_listeners:
            close_all(self.listeners, unlink=True)
            self.log("stopped")


def _clean(outcome):
    """Whether a request's log text says it was answered as asked."""
    return not outcome.startswith(("error", "client closed", "too big"))


def _layout(request):
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


_FAST_VERBS = frozenset(("CHECK", "SYMBOLS", "REPORT", "REPORT_IFSPAM", "PROCESS", "HEADERS"))


class _Connection(asyncio.Protocol):
    """A new connection.  Its first request is answered right in the event
    loop's callback when it is the plain request a spamc process or an MTA
    sends: well formed, a verdict verb, a Content-length within --max-size,
    not compressed, not kept alive.  That skips the streams and the task of
    the general handler (about a tenth of a millisecond of a spamc run).
    Anything else (an error, TELL, PING, keep-alive, a client over the
    limits, a request that ends early) is handed, with the bytes received
    so far, to :meth:`Server.handle`, which answers it as before.  Bounds
    while buffering: --timeout from the connection, at most the request head
    limit plus --max-size bytes."""

    def __init__(self, server):
        self.server = server
        self.transport = None
        self.buffer = bytearray()
        self.timer = None
        self.counted = False
        self.eof = False
        self.peer = "unix"

    def connection_made(self, transport):
        self.transport = transport
        server = self.server
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else "unix"
        if (server.stopping is not None or server.active >= server.settings.max_connections
                or (self.peer != "unix" and not server.settings.allows(self.peer))):
            self._hand_over()       # the general handler refuses it and says why
            return
        server.active += 1
        server.fast.add(self)
        self.counted = True
        self.timer = asyncio.get_running_loop().call_later(server.settings.timeout, self._timed_out)

    def data_received(self, data):
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

    def busy(self):
        return bool(self.buffer)

    def _release(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.counted:
            self.counted = False
            self.server.active -= 1
            self.server.fast.discard(self)

    def _hand_over(self):
        self._release()
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

    def _try_answer(self):
        buffer = self.buffer
        ends = [p for p in (buffer.find(b"\n\r\n"), buffer.find(b"\n\n")) if p >= 0]
        if not ends:
            if len(buffer) > spamd.MAX_HEAD:
                self._hand_over()
            return
        end = min(ends)
        body_start = end + (3 if buffer[end + 1:end + 2] == b"\r" else 2)
        try:
            request = spamd.parse_head(bytes(buffer[:end]).rstrip(b"\r\n"))
        except ProtocolError:
            self._hand_over()
            return
        headers = request.headers
        length = spamd.content_length(request)
        if (request.verb not in _FAST_VERBS or length is None or length > self.server.settings.max_size
                or "compress" in headers or headers.get("connection", "").lower() == "keep-alive"):
            self._hand_over()
            return
        if len(buffer) - body_start < length:
            return                  # more to come
        started = time.perf_counter()
        self._release()
        server = self.server
        message = bytes(buffer[body_start:body_start + length])
        self.buffer = bytearray()
        user = headers.get("user", "-")[:64]
        try:
            reply, outcome = server.answer_verdict(request, message, _layout(request))
        except ProtocolError as exc:
            reply, outcome = spamd.error_response(exc.code, exc.text), f"error {exc.code} {exc.text}"
        except Exception as exc:  # noqa: BLE001 - answered, logged; the server goes on
            reply = spamd.error_response(EX["EX_SOFTWARE"], "internal error")
            outcome = f"error {EX['EX_SOFTWARE']} {type(exc).__name__}: {_one_line(exc)}"
        transport = self.transport
        transport.write(reply)
        if transport.get_write_buffer_size():
            # a client that does not read its answer: dropped after --timeout
            asyncio.get_running_loop().call_later(server.settings.timeout, transport.abort)
        transport.close()
        ms = (time.perf_counter() - started) * 1000.0
        server.request_done(request.verb, user, outcome, length, ms, self.peer)


async def _read_head(reader, first_byte_hook):
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
