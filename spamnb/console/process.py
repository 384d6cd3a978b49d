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

The record socket lives in a private (0700) folder made for it; the parent
removes it at exit.  The console process dies with the parent (Linux's
PR_SET_PDEATHSIG) and ends on SIGTERM."""

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

__all__ = ["attach", "Receiver", "NICE"]

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
    """With ``--ui``: bind the console's address, fork the console process,
    and hook the record sender into ``server`` (its handler's verdict hooks,
    its request hooks, its ``on_ready``: each worker connects once
    listening).  Returns a function that stops the console, or None."""
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
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            for listener in server.listeners:
                listener.sock.close()
            for function in release:
                function()
            _term_with_parent()
            os.nice(NICE)       # the checks first: under a full load the records wait in their queue
            asyncio.run(_serve(server, users, records, http_socks))
            code = 0
        except BaseException as exc:  # noqa: BLE001 - logged; the server goes on without its console
            try:
                server.log(f"console: stopped: {type(exc).__name__}: {exc}")
            except BaseException:  # noqa: BLE001
                pass
        finally:
            os._exit(code)
    port = http_socks[0].getsockname()[1] if http_socks else settings.ui[2]
    records.close()
    for sock in http_socks:
        sock.close()
    sender = RecordSender(path, keep=settings.ui_keep_messages > 0)
    server.handler.verdict_hooks.append(sender.on_verdict)
    server.request_hooks.append(sender.on_request)
    server.on_ready.append(sender.connect)
    server.log(f"console on {'https' if settings.ui_tls else 'http'}://{settings.ui[1]}:{port}/ (pid {pid})")

    def stop():
        try:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10.0
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


def _term_with_parent():
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)     # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


async def _serve(server, users, records, http_socks):
    from spamnb.console.app import Console
    from spamnb.console.history import History
    from spamnb.console.http import HttpServer

    settings = server.settings
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, done.set)
    loop.add_signal_handler(signal.SIGHUP, lambda: None)    # the parent re-reads the settings; the console goes on
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
    http = HttpServer(app, server.log, tls, settings.allows)
    await http.start(http_socks)
    await done.wait()
    http.close()
    record_server.close()
    receiver.flush()
    history.close()
