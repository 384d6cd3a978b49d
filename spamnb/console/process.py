"""Where the console runs: a process of its own, forked by the server's
parent (spamnb.server.launch calls :func:`attach`) once the site model is
loaded and privileges are dropped, before the workers are forked.

Why there: each worker runs one asyncio loop that answers checks; HTTP,
SQLite writes and page queries there would take that loop's time from the
checks, and with several workers there would be several histories.  The
parent forks (no threads) and only supervises.  A process of its own keeps
the console's memory and CPU apart and measurable, and a fault in it
costs no check: the workers write their records to its Unix socket without
waiting (spamnb.console.records), and go on if it is gone.  It runs
:data:`NICE` steps nicer than the server: on a machine whose cores the
checks fill, the console's work (SQLite, pages) waits for theirs, its
records held in the workers' bounded queues meanwhile.

The parent forks a :class:`Keeper` there, which forks the console process
and starts another when it dies (a bounded back-off, one log line each),
and passes the server's SIGHUP on: the console re-reads ``--ui-users``.
The record socket lives in a private (0700) folder made for it; the parent
removes it at exit.  The keeper dies with the parent and the console with
the keeper (Linux's PR_SET_PDEATHSIG); both end on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import struct
import tempfile
import time

from spamnb.console.records import FrameReader, RecordSender, decode
from spamnb.server.workers import (describe_status, ended_children, fork_holding, kill_quietly, run_child,
                                   term_with_parent)

__all__ = ["attach", "Keeper", "Receiver", "NICE"]

NICE = 10       # the console process's niceness above the server's


class Receiver:
    """The console's end of the record sockets: frames to the history, in
    one transaction per turn of the loop."""

    def __init__(self, history):
        self.history = history
        self.batch = []
        self.scheduled = False
        self.received = 0
        self.drops = {}             # connection -> the drops its worker last reported
        self.drops_closed = 0

    def dropped(self):
        return self.drops_closed + sum(self.drops.values())

    def protocol(self):
        receiver = self

        class RecordProtocol(asyncio.Protocol):
            def connection_made(self, transport):
                self.transport, self.frames = transport, FrameReader()
                receiver.drops[self] = 0

            def data_received(self, data):
                try:
                    frames = self.frames.feed(data)
                except ValueError:
                    self.transport.close()
                    return
                for frame in frames:
                    try:
                        head, header, message = decode(frame)
                    except (ValueError, TypeError, struct.error):
                        continue
                    receiver.drops[self] = int(head.get("dropped") or 0)
                    receiver.add(head, header, message)

            def connection_lost(self, exc):
                receiver.drops_closed += receiver.drops.pop(self, 0)

        return RecordProtocol()

    def add(self, head, header, message):
        self.received += 1
        self.batch.append((head, header, message))
        if not self.scheduled:
            self.scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self):
        self.scheduled = False
        batch, self.batch = self.batch, []
        if batch:
            self.history.add(batch)


def history_path(settings):
    return settings.ui_history or os.path.join(os.path.dirname(os.path.abspath(settings.model)), "history.sqlite")


def attach(server, release=()):
    """With ``--ui``: bind the console's address, fork the console's keeper
    (:class:`Keeper`: it forks the console process and starts another when
    one dies), and hook the record sender into ``server`` (its handler's
    verdict hooks, its request hooks, its ``on_ready``: each worker connects
    once listening) and the SIGHUP into its ``reload_hooks``.  ``release``:
    a list of what a forked process lets go of; the console's sockets are
    added to it (the workers close them).  Returns a function that stops the
    console, or None."""
    settings = server.settings
    if settings.ui is None:
        return None
    from spamnb.console.auth import Users
    from spamnb.server.listeners import bind_tcp

    users = Users(settings.ui_users)        # a bad users file stops the start, with its line
    folder = tempfile.mkdtemp(prefix="spamnb-ui-")
    path = os.path.join(folder, "records")
    records = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    records.bind(path)
    records.listen(256)
    http_socks = bind_tcp(settings.ui[1], settings.ui[2], backlog=64)
    port = http_socks[0].getsockname()[1] if http_socks else settings.ui[2]
    url = f"{'https' if settings.ui_tls else 'http'}://{settings.ui[1]}:{port}/"
    given = list(release)       # what the server's own children let go of (pid file, notifier, ...)
    parent = os.getpid()
    pid, _ = fork_holding(KEEPER_SIGNALS)     # the keeper keeps them blocked: it waits for them
    if pid == 0:
        def keep():
            for listener in server.listeners:
                listener.sock.close()
            for function in given:
                function()
            term_with_parent(parent)
            os.nice(NICE)       # the checks first: under a full load the records wait in their queue
            return Keeper(server, users, records, http_socks, url).run()

        # logged; the server goes on without its console
        run_child(keep, lambda exc: server.log(f"console: stopped: {type(exc).__name__}: {exc}"))
    records.close()
    for sock in http_socks:
        sock.close()
    sender = RecordSender(path, keep=settings.ui_keep_messages > 0)
    server.handler.verdict_hooks.append(sender.on_verdict)
    server.request_hooks.append(sender.on_request)
    server.on_ready.append(sender.connect)

    def hangup():
        if os.getpid() == parent:       # a worker that took a SIGHUP itself has no keeper to tell
            kill_quietly(pid, signal.SIGHUP)

    server.reload_hooks.append(hangup)

    def stop():
        try:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 15.0
            while time.monotonic() < deadline:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.02)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass        # reaped already (the supervisor reaps every child)
        shutil.rmtree(folder, ignore_errors=True)

    return stop


KEEPER_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)
BACKOFF_FIRST = 1.0         # seconds before a console that died is started again ...
BACKOFF_MAX = 60.0          # ... doubled while they keep dying, up to this
STEADY = 60.0               # a console that lived this long starts the back-off afresh


class Keeper:
    """The console process's keeper: a process forked by the server's parent
    that does nothing but fork the console, start another when it dies (after
    :data:`BACKOFF_FIRST` seconds, doubled for each one that dies within
    :data:`STEADY` seconds of its start, at most :data:`BACKOFF_MAX`; one log
    line each), pass SIGHUP on (the console re-reads ``--ui-users``), and
    stop it on SIGTERM.  It holds the console's listening sockets, so a new
    console answers on the same address and the workers' record connections
    made meanwhile wait in the socket's backlog.

    Why a process of its own and not the server's supervisor
    (spamnb.server.workers): with ``--workers 1`` there is none, and the
    single server runs threads (the model loader, TELL's learners) and an
    asyncio loop, from which a fork is not safe; the keeper is forked where
    the console always was, before any of them, and forks from a process
    that has no thread and no loop.  It waits with ``sigtimedwait`` on
    signals it keeps blocked: no handler, no race."""

    def __init__(self, server, users, records, http_socks, url):
        self.server, self.users, self.records, self.http_socks, self.url = server, users, records, http_socks, url
        self.pid = None
        self.started = 0.0
        self.delay = 0.0
        self.due = 0.0
        self.restarts = 0

    def run(self):
        self.spawn()
        while True:
            timeout = max(0.0, self.due - time.monotonic()) if self.pid is None else 5.0
            info = signal.sigtimedwait(KEEPER_SIGNALS, min(timeout, 5.0) or 0.001)
            self.reap()
            if info is not None and info.si_signo in (signal.SIGTERM, signal.SIGINT):
                return self.stop()
            if info is not None and info.si_signo == signal.SIGHUP and self.pid is not None:
                kill_quietly(self.pid, signal.SIGHUP)
            if self.pid is None and time.monotonic() >= self.due:
                self.spawn()

    def reap(self):
        for pid, status in ended_children():
            if pid != self.pid:
                continue
            self.pid = None
            lived = time.monotonic() - self.started
            self.delay = BACKOFF_FIRST if lived >= STEADY or not self.delay else min(self.delay * 2, BACKOFF_MAX)
            self.due = time.monotonic() + self.delay
            self.server.log(f"console (pid {pid}) {describe_status(status)} after {lived:.0f} s; "
                            f"starting another in {self.delay:.0f} s")

    def spawn(self):
        keeper = os.getpid()
        pid, _ = fork_holding(KEEPER_SIGNALS)
        if pid:
            self.pid, self.started = pid, time.monotonic()
            self.restarts += 1
            return
        def console():
            term_with_parent(keeper)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, KEEPER_SIGNALS)
            self.server.log(f"console on {self.url} (pid {os.getpid()})")
            asyncio.run(_serve(self.server, self.users, self.records, self.http_socks))

        run_child(console, self.stopped)      # logged; the keeper starts another

    def stopped(self, exc):
        self.server.log(f"console: stopped: {type(exc).__name__}: {exc}")

    def stop(self):
        if self.pid is not None:
            kill_quietly(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + 10.0
            while self.pid is not None and time.monotonic() < deadline:
                done, _ = os.waitpid(self.pid, os.WNOHANG)
                if done:
                    self.pid = None
                    break
                time.sleep(0.02)
            if self.pid is not None:
                kill_quietly(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        return 0


async def _serve(server, users, records, http_socks):
    from spamnb.console.app import Console
    from spamnb.console.history import History
    from spamnb.console.http import HttpServer

    settings = server.settings
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, done.set)
    server.models.run = lambda function: loop.run_in_executor(server.loader, function)
    history = History(history_path(settings), settings.ui_history_rows, settings.ui_history_days,
                      settings.ui_keep_messages)
    receiver = Receiver(history)
    record_server = await loop.create_unix_server(receiver.protocol, sock=records)
    tls = None
    if settings.ui_tls:
        from spamnb.server.listeners import tls_context

        tls = tls_context(settings.ssl_cert, settings.ssl_key)
    hosts = {settings.ui[1], "localhost", "127.0.0.1", "::1", "[::1]"}
    if settings.ui_origin:
        from urllib.parse import urlsplit

        hosts.add(urlsplit(settings.ui_origin).hostname or "")
    app = Console(history, users, server, server.log, hosts, settings.ui_origin, receiver)
    loop.add_signal_handler(signal.SIGHUP, app.reload_users)    # the keeper passes the server's SIGHUP on
    http = HttpServer(app, server.log, tls, settings.allows, app.upload_limit)
    await http.start(http_socks)
    await done.wait()
    http.close()
    record_server.close()
    receiver.flush()
    history.close()
