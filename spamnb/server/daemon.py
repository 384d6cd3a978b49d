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
  user, ``DIR/<user>/model.spamnb`` (``User:`` header), used when it exists
  and loads.  The site model is loaded before the server listens (it does
  not start without one).  A model is stat()ed at every request and, when
  the file changed, read again in a thread while the one loaded before
  serves (models are replaced by rename, so a loaded model is always
  whole); a loaded model keeps only what classifying reads.  With
  ``--allow-tell`` it keeps its counts too, and when only its journal grew
  (a TELL in any worker, ``spamnb learn``) it follows the journal: the new
  records applied in place between two requests (spamnb.server.models).
- A new connection's first request, when it is the plain one spamc or an MTA
  sends, is answered in the protocol's callback (:class:`~spamnb.server.connection.Connection`);
  anything else goes to the stream handler (:meth:`Server.handle`).
- SIGHUP re-reads ``--config`` and drops the loaded models; SIGTERM/SIGINT
  stop accepting, let requests in flight finish, then exit 0.
- Limits: ``--max-size`` (a larger message is read and thrown away in
  chunks, never held whole), ``--max-connections`` (at the limit the server
  stops accepting: new clients wait in the listen backlog, never answered an
  error, see :meth:`Server._accept`), ``--idle-timeout`` (seconds a
  connection may stay silent before a request), ``--timeout`` (seconds to
  receive a whole request or send a response; EX_TIMEOUT after it),
  ``--max-models`` loaded at once.
- Errors and spamc: once connected, spamc turns any error answer into exit
  74/76 (a bounce for an MTA's pipe), and only a failed connect into 69
  (75 with ``-X``, a deferral); so conditions that are the server's own
  (load, a user's missing or damaged model) are answered with a verdict
  of the site model, never an error (docs/serve.md, "Errors").
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
from spamnb.server.protocol import EX, ProtocolError, comma_words
from spamnb.settings import ServerSettings, SettingsError
from spamnb.server.connection import Connection, layout, log_safe, read_head
from spamnb.server.listeners import BACKLOG, ServerError, bind_all
from spamnb.server.autolearn import AutoLearner
from spamnb.server.check import check
from spamnb.errors import ModelError
from spamnb.server.models import ModelCache, ModelUnavailable, one_line, tell

MODEL_NAME = "model.spamnb"
NO_USER = ""     # Server.model_path's TELL target for a request without a User: name, with --models-dir
_USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._@+-]{0,63}")
_CHUNK = 65536


class Server:
    """The asyncio server.  ``run()`` blocks until SIGTERM/SIGINT."""

    def __init__(self, given, config=None, log_stream=None):
        self.given = given
        self.config = config
        self.settings = ServerSettings(given, config)
        self.log_stream = log_stream or sys.stderr
        self.models = ModelCache(self.settings.max_models, self.log, pinned=self.settings.model,
                                 whole=self.settings.learns, max_bytes=self.settings.max_models_bytes)
        self.active = 0         # connections accepted and not closed (at most --max-connections)
        self.listeners = []     # listening sockets (spamnb.server.listeners.Listener)
        self.paused = False     # accepting stopped at --max-connections
        self.setting_up = 0     # accepted, transport not made yet
        self.pauses, self.pause_logged = 0, float("-inf")
        self.refusals, self.refusal_logged = 0, float("-inf")   # clients outside --allowed-ips (refused)
        self.fast = set()       # connections waiting for their first request (spamnb.server.connection.Connection)
        self.busy = set()
        self.idle = set()
        self.stopping = None
        self.learners = ThreadPoolExecutor(max_workers=2, thread_name_prefix="spamnb-tell")
        self.loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spamnb-load")
        self._syslog = None
        self.milter = None      # the milter front end (spamnb.server.milter), when --milter listens
        self.auto_learner = AutoLearner(self)   # --auto-learn (spamnb.server.autolearn)
        # spamnb.server.launch's hooks (see the module's docstring)
        self.owns_listeners = True
        self.metrics = None
        self.on_ready = []
        self.sharing = None     # spamnb.server.sharing.Sharing, with --shared

    # ------------------------------------------------------------------ logging
    def log(self, line):
        """One line to syslog or stderr; any control character in it (a
        client's text in an error, say) escaped, so no client starts a line."""
        if not line.isprintable():
            line = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
                           for c in line)
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
        second item: where TELL learns for them (None for a name outside
        ``[A-Za-z0-9_][A-Za-z0-9._@+-]{0,63}`` or with ``..``, and ""
        for no name or an empty one when there are user models: such a
        client is checked with the site model and can learn nothing; the
        site model learns through TELL only on a server without
        ``--models-dir``)."""
        site = self.settings.model
        if not self.settings.models_dir:
            return site, site
        if not user or not user.strip():
            return site, NO_USER
        if _USER_NAME.fullmatch(user) is None or ".." in user:
            return site, None
        own = os.path.join(self.settings.models_dir, user, MODEL_NAME)
        return (own if os.path.exists(own) else site), own

    def verdict_model(self, paths):
        """(filter, ScoreMap, note for the log) to check a user's mail with,
        ``paths`` their :meth:`model_path`: their model, else the site model,
        also when their name is not allowed or their model cannot be loaded
        (damaged, unreadable): never an error, which spamc would turn into a
        bounce or an unchecked pass."""
        required = self.settings.required_score
        path, own = paths
        site = self.settings.model
        note = ""
        if path != site:
            try:
                return (*self.models.get(path, required), "")
            except ModelUnavailable as exc:
                note = f" model=site (the user's model is not usable: {exc.text})"
        elif own is None:
            note = " model=site (user name not allowed)"
        elif own != site and own != NO_USER:
            note = " model=site (the user has no model)"
        return (*self.models.get(site, required), note)

    def load_site_model(self):
        """Load the site model (at start): raises :class:`ServerError` when it is
        missing or unusable, so the server never runs without one."""
        try:
            self.models.get(self.settings.model, self.settings.required_score)
        except ModelUnavailable as exc:
            raise ServerError(f"no usable site model: {exc.text} (train one with `spamnb train`, "
                              "or give its path with -m)") from None

    # ------------------------------------------------------------------ connections
    async def handle(self, reader, writer):
        """The general handler of a connection handed over by :class:`~spamnb.server.connection.Connection`
        (whose slot of --max-connections it takes over and frees at the end)."""
        task = asyncio.current_task()
        peer = writer.get_extra_info("peername")
        peer = peer[0] if isinstance(peer, tuple) else "unix"
        try:
            if peer != "unix" and not self.settings.allows(peer):
                self.log(f"refused {peer}: not in --allowed-ips")
                return
            first = True
            while first or self.stopping is None:   # a connection taken while stopping gets its answer
                # its first request came with the connection (handed over with its bytes): busy from
                # the start, never closed by a stop; a kept-alive one waits idle between requests
                (self.busy if first else self.idle).add(task)
                first = False
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
            await self._closed(writer)
            self.slot_freed()

    async def _closed(self, writer):
        """Close a connection once its answer is sent (a stopping server waits
        for its slot, so no answer is cut off at exit); a client that does not
        read it is dropped after --timeout."""
        try:
            writer.close()
            async with asyncio.timeout(self.settings.timeout):
                await writer.wait_closed()
        except (Exception, asyncio.CancelledError):  # noqa: BLE001 - the peer may be gone already
            writer.transport.abort()

    async def serve_one(self, reader, writer, peer, task):
        """One request; returns True when the connection stays open for another."""
        settings = self.settings
        started = None
        verb, user, outcome, size = "-", "-", "", 0
        keep_alive = False
        try:
            async with asyncio.timeout(settings.idle_timeout) as deadline:
                head = await read_head(reader, first_byte_hook=lambda: self._begin(task, deadline))
                if head is None:
                    return False        # the client closed between requests
                started = time.perf_counter()
                request = spamd.parse_head(head)
                verb = request.verb
                user = log_safe(request.headers.get("user", "-"))
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

    def request_done(self, verb, user, outcome, size, ms, peer, protocol="spamd", action="none"):
        """Count a request (``--metrics``) and log it when it went wrong, or
        with ``-v`` when it did not; ``protocol``, ``action``: the milter's."""
        if self.metrics is not None:
            self.metrics.request(verb, self._user_class(user, outcome), outcome, ms / 1000.0, protocol, action)
        if self.settings.verbose or not _clean(outcome):
            self.log(f"{verb} user={user} {outcome} size={size} {ms:.2f} ms peer={peer}"
                     + (f" milter action={action}" if protocol == "milter" else ""))

    def _user_class(self, user, outcome):
        """"user" when ``user``'s own model answered, else "site"."""
        if user == "-" or not self.settings.models_dir or " model=site " in outcome:
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
        reply = layout(request)
        if message is None:
            text = f"message larger than {self.settings.max_size} bytes"
            if verb in ("PROCESS", "HEADERS", "TELL"):
                # spamc's safe fallback passes the message on unchanged
                return spamd.error_response(EX["EX_DATAERR"], text), f"error {EX['EX_DATAERR']} {text}"
            return reply(("Spam", f"False ; 0.0 / {required:.1f}")), f"too big, not checked ({text})"
        if verb == "TELL":
            return await self.answer_tell(request, message)
        paths = self.model_path(request.headers.get("user"))
        await self.models.first_load(paths[0], required)
        return self.answer_verdict(request, message, reply, paths)

    def answer_verdict(self, request, message, reply, paths):
        """(response bytes, log text) for a request that asks for a verdict;
        ``reply(spam_header, body, whole_message)`` lays the answer out;
        ``paths``: :meth:`model_path` of its user."""
        verb = request.verb
        checked = check(self, message, paths, verb != "CHECK")     # CHECK answers without the tokens
        verdict, score, score_map = checked.verdict, checked.score, checked.score_map
        spam_header, outcome = checked.spam_header(), checked.outcome
        if verb == "CHECK":
            return reply(spam_header), outcome
        if verb == "SYMBOLS":
            symbols = ",".join(spamd.symbols(verdict)).encode()
            return reply(spam_header, symbols + (b"\r\n" if request.version < (1, 3) else b"")), outcome
        if verb in ("REPORT", "REPORT_IFSPAM"):
            body = b"" if verb == "REPORT_IFSPAM" and verdict.label != "spam" else \
                spamd.report(verdict, score_map, score)
            return reply(spam_header, body), outcome
        head, body_start = spamd.marked_headers(message, verdict, score, score_map.required, self.settings.report,
                                                self.settings.subject_tag, score_map.points)
        if verb == "HEADERS":
            return reply(spam_header, head, True), outcome
        return reply(spam_header, head + message[body_start:], True), outcome  # PROCESS

    async def answer_tell(self, request, message):
        """TELL.  Refusals and failures are answered with an error status line
        alone (as spamd does), on which ``spamc -L`` exits 74: a refused or
        failed learn is never reported as done."""
        settings = self.settings
        if not settings.allow_tell:
            raise ProtocolError(EX["EX_NOPERM"], "TELL is off (spamnb serve --allow-tell)")
        headers = request.headers
        kind = headers.get("message-class", "").strip().lower()
        learn = "local" in comma_words(headers.get("set", ""))
        remove = "local" in comma_words(headers.get("remove", ""))
        if kind not in ("spam", "ham", ""):
            raise ProtocolError(EX["EX_PROTOCOL"], "Message-class must be spam or ham")
        if learn and not kind:
            raise ProtocolError(EX["EX_PROTOCOL"], "Set: local needs a Message-class")
        if not (learn or remove):
            return spamd.response(0), "tell: nothing to do"
        spam = None if not kind else kind == "spam"
        _, own = self.model_path(headers.get("user"))
        if own is None:
            raise ProtocolError(EX["EX_NOUSER"], "user name not allowed for a model of its own")
        if own == NO_USER:      # the site model every user's mail is checked with: never a client's to teach
            raise ProtocolError(EX["EX_NOUSER"], "TELL needs a User: name (the site model does not learn by TELL"
                                                 " when there are user models, --models-dir)")
        if own != settings.model and not os.path.exists(own):
            if not learn:
                # nothing learned for this user: nothing to forget, and no folder or lock made
                return spamd.response(0), f"tell {kind or '-'} set=0 removed=0 (the user has no model)"
            if not settings.create_user_models:
                raise ProtocolError(EX["EX_UNAVAILABLE"],
                                    "the user has no model (spamnb serve --create-user-models)")
        seed = settings.model if own != settings.model else None
        limits = None
        if seed is not None:
            limits = (settings.models_dir, settings.max_user_models, settings.max_user_models_bytes)
        loop = asyncio.get_running_loop()
        try:
            if self.sharing is not None:    # sent to the shared stream, learned here as on every host
                did_learn, did_remove = await self.sharing.tell(own, headers.get("user"), message, spam, learn, remove)
            else:
                did_learn, did_remove = await loop.run_in_executor(
                    self.learners, tell, own, message, spam, learn, remove, seed, limits, settings.subject_tag)
        except ProtocolError:
            raise
        except (ModelError, OSError, ValueError) as exc:
            raise ProtocolError(EX["EX_UNAVAILABLE"], f"cannot update the model: {one_line(exc)}") from None
        # the next check sees what was learned (read in a thread: the loop goes on serving)
        await self.models.refresh(own, settings.required_score)
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
            fresh = ServerSettings(self.given, self.config)
        except SettingsError as exc:
            self.log(f"SIGHUP: settings not reloaded: {exc}")
            return
        fresh.listen, fresh.milter = self.settings.listen, self.settings.milter
        self.models.clear()
        self.models.whole = fresh.learns
        self.models.pinned = fresh.model
        try:
            self.models.get(fresh.model, fresh.required_score)
        except ModelUnavailable as exc:
            self.models.pinned, self.models.whole = self.settings.model, self.settings.learns
            self.log(f"SIGHUP: settings not reloaded: no usable site model: {exc.text}")
            return
        self.settings = fresh
        self.models.max_models = fresh.max_models
        self.models.max_bytes = fresh.max_models_bytes
        if self.paused and self.active < fresh.max_connections:
            self._resume()      # --max-connections raised
        self.log("SIGHUP: settings reloaded, models will be read again")

    def stop(self):
        """SIGTERM/SIGINT (and an old worker's end after SIGHUP): kept-alive
        connections idle between requests are closed; a connection accepted
        whose first request has not come yet is not (its client is about to
        send it: closing it would cost the check, spamc's 0/0 or exit 74),
        but given at most :data:`~spamnb.server.connection.STOP_GRACE` to begin."""
        if self.stopping is None:
            self.stopping = asyncio.get_running_loop().create_future()
            self.stopping.set_result(None)
            for task in list(self.idle):
                task.cancel()
            for connection in [c for c in self.fast if not c.busy()]:
                connection.last_call()
            if self.milter is not None:
                self.milter.stop()

    # ------------------------------------------------------------------ accepting
    def _set_accepting(self, on):
        loop = asyncio.get_running_loop()
        for listener in self.listeners:
            if listener.protocol != "spamd":
                continue            # the milter front end accepts on its own (spamnb.server.milter)
            fd = listener.sock.fileno()
            if on:
                loop.add_reader(fd, self._accept, listener)
            else:
                loop.remove_reader(fd)
        self.paused = not on

    def _accept(self, listener):
        """A listening socket is readable: accept while under --max-connections.
        At the limit stop accepting (the readers removed): clients wait in the
        kernel's listen backlog until a slot frees (:meth:`slot_freed`), rather
        than being answered an error, which spamc would turn into a bounce."""
        loop = asyncio.get_running_loop()
        for _ in range(BACKLOG):
            if self.active >= self.settings.max_connections and self.stopping is None:
                if not self.paused:
                    self._set_accepting(False)
                    self.pauses += 1
                    if self.metrics is not None:
                        self.metrics.error("connection_limit")
                    now = loop.time()
                    if now - self.pause_logged >= 60.0:     # at most a line a minute, however often
                        self.log(f"{self.active} connections open (--max-connections): not accepting until one"
                                 f" closes ({self.pauses} time(s) since the last such line)")
                        self.pause_logged, self.pauses = now, 0
                return
            try:
                conn, address = listener.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:      # out of file descriptors, ...: try again shortly
                self.log(f"accept failed: {exc.strerror or exc}; pausing 0.1 s")
                if not self.paused:
                    self._set_accepting(False)
                    loop.call_later(0.1, self._resume)
                return
            if listener.item[0] != "unix" and not self.settings.allows(address[0]):
                conn.close()    # before a byte is read or a TLS handshake begins, holding no slot
                self.refused(address[0])
                continue
            conn.setblocking(False)
            self.active += 1
            self.setting_up += 1
            loop.create_task(self._connected(conn, listener.tls))

    def refused(self, peer):
        """A TCP client outside --allowed-ips, closed at accept: logged at most
        once a second (with how many more since), so a flood cannot fill the log."""
        self.refusals += 1
        now = asyncio.get_running_loop().time()
        if now - self.refusal_logged >= 1.0:
            more = f" ({self.refusals - 1} more refused since the last such line)" if self.refusals > 1 else ""
            self.log(f"refused {peer}: not in --allowed-ips{more}")
            self.refusal_logged, self.refusals = now, 0

    async def _connected(self, conn, tls=None):
        # a TLS handshake is bounded like a silent client: --idle-timeout (at most --timeout)
        settings = self.settings
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: Connection(self), conn, ssl=tls,
                ssl_handshake_timeout=min(settings.idle_timeout, settings.timeout) if tls is not None else None)
        except Exception as exc:  # noqa: BLE001 - the client may be gone already
            conn.close()
            self.slot_freed()
            self.log(f"connection lost while set up: {one_line(exc)}")
        finally:
            self.setting_up -= 1

    def slot_freed(self):
        """A connection closed: its slot of --max-connections is free again."""
        self.active -= 1
        if self.paused and self.active < self.settings.max_connections:
            self._resume()

    def _resume(self):
        if self.paused and self.stopping is None and self.listeners:
            self._set_accepting(True)

    def _drain_backlog(self):
        """While stopping: take the clients already waiting in the listen
        backlog (they would be reset when the socket closes), to be answered."""
        for listener in self.listeners:
            if listener.protocol == "spamd":
                self._accept(listener)

    async def start(self):
        """Listen and accept: on :attr:`listeners` when set (spamnb.server.launch
        binds them), else on the --listen and --ssl-listen addresses
        (:func:`spamnb.server.listeners.bind_all`)."""
        loop = asyncio.get_running_loop()
        if not self.listeners:
            self.listeners = bind_all(self.settings)
        # a model that changed is read again in a thread while the one loaded before serves
        self.models.run = lambda function: loop.run_in_executor(self.loader, function)
        self._set_accepting(True)
        milter = [listener for listener in self.listeners if listener.protocol == "milter"]
        if milter:
            from spamnb.server.milter import MilterFrontEnd

            self.milter = MilterFrontEnd(self, milter)
            self.milter.start()
        if self.owns_listeners:
            where = ", ".join(listener.where for listener in self.listeners)
            self.log(f"listening on {where}; site model {self.settings.model}"
                     + (f"; user models in {self.settings.models_dir}" if self.settings.models_dir else ""))

    def close_listeners(self):
        if not self.paused:
            self._set_accepting(False)
        self._drain_backlog()
        if self.milter is not None:
            self.milter.close_listeners()
        for listener in self.listeners:
            listener.sock.close()
        self.listeners = []

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
        self.close_listeners()

        def in_flight():
            return (len(self.busy) + sum(1 for c in self.fast if c.busy()) + self.setting_up
                    + (self.milter.in_flight() if self.milter is not None else 0))

        self.log(f"stopping: {in_flight()} request(s) in flight")
        deadline = loop.time() + self.settings.timeout + 1.0
        # every connection to its end (self.active: SPAMD connections accepted and not closed, answers
        # sent included; the milter's: held until the MTA closes them)
        while (self.active > 0 or (self.milter is not None and self.milter.in_flight())) and loop.time() < deadline:
            await asyncio.sleep(0.02)
        self.learners.shutdown(wait=True)
        self.loader.shutdown(wait=True, cancel_futures=True)
        if self.owns_listeners:     # a forked worker leaves the Unix sockets to its parent
            for item in self.settings.listen + self.settings.milter:
                if item[0] == "unix":
                    try:
                        os.unlink(item[1])
                    except OSError:
                        pass
            self.log("stopped")


def _clean(outcome):
    """Whether a request's log text says it was answered as asked (logged with
    ``-v`` only): not an error, not a user's model that failed to load, not a
    user name refused (a user without a model of their own is not news)."""
    return (not outcome.startswith(("error", "client closed", "too big"))
            and "model is not usable" not in outcome and "user name not allowed" not in outcome)
