"""The SPAMD front end: one connection of a SPAMC client (spamc, Exim's
``spam`` condition, aiospamc), every request of it read by the one reader
(spamnb.server.request_reader), answered by the protocol-independent
handler (spamnb.server.handler) and laid out as spamd lays its answers out.

A request is handed to the handler as a spamnb.server.handler.Request by
one coroutine (:meth:`SpamdConnection._respond`), run eagerly: when its
model is loaded (the plain request of a spamc process or an MTA) it is
answered right in the event loop's callback that read it, no task, no
streams; TELL, and a check whose model is not loaded yet, go on in a task
while the loop serves on (the connection's reading paused meanwhile).

Time bounds: ``--idle-timeout`` for the first byte of a request (of the
first, or of the next on a kept-alive connection); ``--timeout`` from that
byte to the answer sent (EX_TIMEOUT after it); a connection taken while
the server stops, or waiting for its first request when it stops, has
:data:`STOP_GRACE` seconds to begin.  A client that does not read its
answer is dropped after ``--timeout``.  Memory: the reader's bounds."""

from __future__ import annotations

import asyncio
import time

from spamnb.server import protocol as spamd
from spamnb.server.handler import Request, run_eagerly
from spamnb.server.protocol import EX, ProtocolError, comma_words
from spamnb.server.request_reader import RequestReader
from spamnb.server.server_log import log_safe, one_line
from spamnb.server.tell import Lesson

STOP_GRACE = 1.0    # seconds a connection accepted before a stop has to begin its request
LINGER = 1.0        # seconds what a client still sends after an error answer is read and dropped
ANSWERED = spamd.VERSION + b" 0 "      # an answer's start when it is not an error


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


def verdict_answer(request, message, checked, settings):
    """(answer bytes, log text) of a verdict verb: ``checked`` (the
    handler's Checked for ``message``) laid out as spamd answers ``request``."""
    verb = request.verb
    reply = layout(request)
    verdict, score, score_map = checked.verdict, checked.score, checked.score_map
    spam_header, outcome = checked.spam_header(), checked.outcome
    if verb == "CHECK":
        return reply(spam_header), outcome
    if verb == "SYMBOLS":
        symbols = ",".join(spamd.symbols(verdict)).encode()
        return reply(spam_header, symbols + (b"\r\n" if request.version < (1, 3) else b"")), outcome
    if verb in ("REPORT", "REPORT_IFSPAM"):
        body = b"" if verb == "REPORT_IFSPAM" and verdict.label != "spam" else spamd.report(verdict, score_map, score)
        return reply(spam_header, body), outcome
    edited, head = spamd.marked_headers(message, verdict, score, score_map.required, settings.report,
                                        settings.subject_tag, score_map.points)
    if verb == "HEADERS":
        return reply(spam_header, head, True), outcome
    return reply(spam_header, edited.head + message[edited.at:], True), outcome     # PROCESS


def lesson_of(request, message):
    """The TELL request's :class:`~spamnb.server.tell.Lesson`; ProtocolError
    (EX_PROTOCOL) for a Message-class that is not spam or ham, or a learn without one."""
    headers = request.headers
    kind = headers.get("message-class", "").strip().lower()
    learn = "local" in comma_words(headers.get("set", ""))
    remove = "local" in comma_words(headers.get("remove", ""))
    if kind not in ("spam", "ham", ""):
        raise ProtocolError(EX["EX_PROTOCOL"], "Message-class must be spam or ham")
    if learn and not kind:
        raise ProtocolError(EX["EX_PROTOCOL"], "Set: local needs a Message-class")
    return Lesson(message, headers.get("user"), None if not kind else kind == "spam", learn, remove)


def told_outcome(lesson, told):
    """A TELL's log text (spamnb.server.metrics reads it)."""
    if not (lesson.learn or lesson.remove):
        return "tell: nothing to do"
    kind = "-" if lesson.spam is None else "spam" if lesson.spam else "ham"
    return (f"tell {kind} set={int(told.learned)} removed={int(told.removed)}"
            + (f" ({told.note})" if told.note else ""))


# the phases of a connection
WAITING = "waiting"         # for the first byte of a request
RECEIVING = "receiving"     # a request begun, not whole
ANSWERING = "answering"     # a task answers it (TELL, a model loading)
LINGERING = "lingering"     # an error answered: what the client still sends is dropped, then closed
CLOSED = "closed"


class SpamdConnection(asyncio.Protocol):
    """One SPAMD connection of ``server`` (a spamnb.server.daemon.Server),
    accepted by ``acceptor`` (spamnb.server.accepting.Acceptor, whose slot
    it frees when it is lost): the module docstring says how it reads,
    answers and times out."""

    def __init__(self, server, acceptor):
        self.server = server
        self.acceptor = acceptor
        self.transport = None
        self.reader = RequestReader(server.settings.max_size)
        self.phase = WAITING
        self.timer = None
        self.peer = "unix"
        self.served = 0             # requests answered on this connection
        self.late = server.stopping is not None     # taken from the backlog while stopping
        self.over_ssl = False
        self.write_paused = False
        self.task = None            # the task answering a request (TELL, a model loading)

    # ------------------------------------------------------------------ asyncio's calls
    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else "unix"
        self.over_ssl = transport.get_extra_info("sslcontext") is not None
        self.acceptor.connections.add(self)
        settings = self.server.settings
        self._arm(min(settings.idle_timeout, STOP_GRACE) if self.late else settings.idle_timeout)

    def data_received(self, data):
        if self.phase == LINGERING or self.phase == CLOSED:
            return
        if self.phase == WAITING:
            self.phase = RECEIVING      # the first byte: the request has --timeout from now
            self._arm(self.server.settings.timeout)
        self.reader.feed(data)
        if self.phase == RECEIVING:
            self._advance()

    def eof_received(self):
        self.reader.end()
        if self.phase == LINGERING or self.phase == WAITING:
            self._close()       # no request begun: the client closed between requests
        elif self.phase == RECEIVING:
            self._advance()
        return not self.over_ssl    # half-closed: the answer can still be sent (not over TLS)

    def connection_lost(self, exc):
        if self.phase == RECEIVING or self.phase == ANSWERING:
            head = self.reader.head
            self.server.request_done(head[0].verb if head else "-", "-", "client closed the connection mid-request",
                                     0, 0.0, self.peer)
        self.phase = CLOSED
        self._disarm()
        if self in self.acceptor.connections:
            self.acceptor.connections.discard(self)
            self.acceptor.freed()

    def pause_writing(self):
        """A client that does not read its answers: no more requests read
        from it, and dropped when its answer is still not read after --timeout."""
        self.write_paused = True
        self.transport.pause_reading()
        self._arm(self.server.settings.timeout, self.transport.abort)

    def resume_writing(self):
        """The client read its answer: the next request is read (kept alive)."""
        self.write_paused = False
        if self.phase != WAITING:
            return      # closing (dropped after --timeout if still unread), or lingering after an error
        self.transport.resume_reading()
        if self.reader.started():
            self.phase = RECEIVING
            self._arm(self.server.settings.timeout)
            self._advance()
        else:
            self._arm(self.server.settings.idle_timeout)

    # ------------------------------------------------------------------ the server's calls
    def busy(self):
        """Whether a request is under way (or, taken while stopping, about to be)."""
        return self.phase in (RECEIVING, ANSWERING) or (self.phase == WAITING and self.late)

    def stop(self):
        """The server stops: a kept-alive connection idle between requests is
        closed; one whose first request has not begun is given
        :data:`STOP_GRACE` seconds at most (--idle-timeout if shorter) to
        begin it (its client is about to send it: closing it would cost the
        check, spamc's 0/0 or exit 74); the others finish their request."""
        if self.phase != WAITING:
            return
        if self.served:
            self._close()
        elif not self.late:
            self.late = True
            self._arm(min(self.server.settings.idle_timeout, STOP_GRACE))

    # ------------------------------------------------------------------ requests
    def _advance(self):
        """Answer the requests that are whole, one after the other."""
        while self.phase == RECEIVING:
            try:
                received = self.reader.next()
            except ProtocolError as exc:
                self._error(exc, linger=not self.reader.eof)
                return
            if received is None:
                if self.reader.eof and not self.reader.started():
                    self._close()       # the client closed between requests
                return
            if not self._answer(received):
                return

    def _answer(self, received):
        """Answer ``received`` now, or start the task that will; True when
        the connection goes on to its next request at once."""
        started = time.perf_counter()
        request, message = received.request, received.message
        verb = request.verb
        if verb == "SKIP":
            self._done(received, "skipped", started)
            self._close()
            return False
        if verb == "PING":
            return self._send(received, spamd.VERSION + b" 0 PONG\r\n\r\n", "pong", started)
        if message is None:
            return self._send(received, *self._too_big(request), started)
        answered, outcome = run_eagerly(self._respond(received, started))
        if answered:
            return outcome      # answered at once: whether the connection goes on to its next request
        self.phase = ANSWERING     # the timer of --timeout from the request's first byte runs on
        self.transport.pause_reading()
        self.task = outcome         # the task that answers it
        return False

    async def _respond(self, received, started):
        """The request to the handler (spamnb.server.handler.RequestHandler.handle)
        and its answer laid out and sent.  Run by :meth:`_answer` with
        ``run_eagerly``: a check whose model is loaded ends without waiting,
        and its answer goes out at once (True when the connection goes on to
        its next request); a TELL, or a check whose model loads first, waits
        in a task, the connection's reading paused, the request's --timeout
        still running (:meth:`_timed_out` cancels it)."""
        request, message = received.request, received.message
        handler = self.server.handler
        try:
            if request.verb == "TELL":
                handler.teacher.check_allowed()     # refused before the lesson is read
                lesson = lesson_of(request, message)
                told = await handler.handle(Request(lesson=lesson))
                reply = spamd.response(0, [("DidSet", "local")] * told.learned
                                       + [("DidRemove", "local")] * told.removed)
                outcome = told_outcome(lesson, told)
            else:   # CHECK answers without the tokens
                checked = await handler.handle(Request(message, request.headers.get("user"), request.verb != "CHECK"))
                reply, outcome = verdict_answer(request, message, checked, self.server.settings)
        except asyncio.CancelledError:
            return False    # timed out: _timed_out answered
        except Exception as exc:  # noqa: BLE001 - answered, logged; the server goes on
            if self.phase == ANSWERING:
                self.phase = RECEIVING
            return self._failed(received, exc, started) if self.phase == RECEIVING else False
        finally:
            self.task = None
        if self.phase == RECEIVING:
            return self._send(received, reply, outcome, started)   # answered at once
        if self.phase != ANSWERING:
            return False    # the client went away meanwhile (logged by connection_lost)
        self.phase = RECEIVING
        if not self.write_paused:
            self.transport.resume_reading()
        if self._send(received, reply, outcome, started):
            self._advance()
        return False

    def _too_big(self, request):
        text = f"message larger than {self.server.settings.max_size} bytes"
        if request.verb in ("PROCESS", "HEADERS", "TELL"):
            # spamc's safe fallback passes the message on unchanged
            return spamd.error_response(EX["EX_DATAERR"], text), f"error {EX['EX_DATAERR']} {text}"
        required = self.server.settings.required_score
        return layout(request)(("Spam", f"False ; 0.0 / {required:.1f}")), f"too big, not checked ({text})"

    def _failed(self, received, exc, started):
        """An exception while answering: its code (ProtocolError's), else 70."""
        if isinstance(exc, ProtocolError):
            code, text, outcome = exc.code, exc.text, f"error {exc.code} {exc.text}"
        elif isinstance(exc, MemoryError):
            code, text, outcome = EX["EX_SOFTWARE"], "out of memory", f"error {EX['EX_SOFTWARE']} out of memory"
        else:
            code, text = EX["EX_SOFTWARE"], "internal error"
            outcome = f"error {code} {type(exc).__name__}: {one_line(exc)}"
        self._done(received, outcome, started)
        self._error(ProtocolError(code, text), linger=isinstance(exc, ProtocolError) and not self.reader.eof,
                    logged=True)
        return False

    def _send(self, received, reply, outcome, started):
        """Write an answer; True when the connection stays open for the next
        request (kept alive, answered without an error, not stopping)."""
        self.transport.write(reply)
        self.served += 1
        self._done(received, outcome, started)
        keep = (received.keep_alive and reply.startswith(ANSWERED) and self.server.stopping is None
                and not self.reader.eof)
        if not keep:
            self._close()
            return False
        if self.write_paused:
            self.phase = WAITING        # the next request is read once the client reads this answer
            return False
        self.phase = RECEIVING if self.reader.started() else WAITING
        settings = self.server.settings
        self._arm(settings.timeout if self.phase == RECEIVING else settings.idle_timeout)
        return True

    def _done(self, received, outcome, started):
        request, message = received.request, received.message
        ms = (time.perf_counter() - started) * 1000.0
        self.server.request_done(request.verb, log_safe(request.headers.get("user", "-")), outcome,
                                 len(message) if message is not None else -1, ms, self.peer)

    def _error(self, exc, linger=True, logged=False):
        """Answer an error (the status line alone, as spamd does); then, when
        ``linger``, read and drop what the client still sends for
        :data:`LINGER` seconds at most before closing, so the answer is not
        lost to a reset."""
        if not logged:
            head = self.reader.head
            self.server.request_done(head[0].verb if head else "-",
                                     log_safe(head[0].headers.get("user", "-")) if head else "-",
                                     f"error {exc.code} {exc.text}", 0, 0.0, self.peer)
        self.transport.write(spamd.error_response(exc.code, exc.text))
        if linger and self.transport.can_write_eof():
            self.transport.write_eof()
            self.phase = LINGERING
            self.transport.resume_reading()
            self._arm(LINGER, self._close)
        else:
            self._close()

    # ------------------------------------------------------------------ timers and closing
    def _arm(self, seconds, then=None):
        self._disarm()
        self.timer = asyncio.get_running_loop().call_later(seconds, then or self._timed_out)

    def _disarm(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _timed_out(self):
        self.timer = None
        if self.phase == WAITING:
            self._close()       # silent: closed without a word
            return
        if self.phase == ANSWERING:
            self.task.cancel()
        if self.phase in (RECEIVING, ANSWERING):
            timeout = self.server.settings.timeout
            head = self.reader.head
            self.phase = RECEIVING
            self.server.request_done(head[0].verb if head else "-", "-",
                                     f"error {EX['EX_TIMEOUT']} timed out after {timeout:g} s", 0, 0.0, self.peer)
            self._error(ProtocolError(EX["EX_TIMEOUT"], "timed out"), linger=False, logged=True)
            return
        self._close()

    def _close(self):
        """Close once the answer is sent; a client that does not read it is
        dropped after --timeout (its slot freed when the connection is lost)."""
        if self.phase == CLOSED:
            return
        self.phase = CLOSED
        self._disarm()
        transport = self.transport
        if transport.get_write_buffer_size():
            asyncio.get_running_loop().call_later(self.server.settings.timeout, transport.abort)
        transport.close()
