"""Accepting connections, the same for every protocol the server speaks:
one :class:`Acceptor` for the SPAMD listeners, one for the milter
listeners, each with its own ``--max-connections`` slots.

- A TCP client outside ``--allowed-ips`` is closed at accept, before a
  byte is read or a TLS handshake begins, holding no slot, and logged at
  most once a second (the server's :meth:`refused`).
- At ``--max-connections`` open connections the acceptor stops accepting
  (its listeners' readers removed): clients wait in the kernel's listen
  backlog until a slot frees (:meth:`Acceptor.freed`), rather than being
  answered an error, which spamc would turn into a bounce.  Logged at most
  once a minute.
- ``accept()`` failing (out of file descriptors, ...) pauses accepting for
  0.1 s.
- A TLS handshake must end within ``--idle-timeout`` (at most ``--timeout``).
"""

from __future__ import annotations

import asyncio

from spamnb.server.listeners import BACKLOG
from spamnb.server.server_log import one_line

RETRY_AFTER_FAILED_ACCEPT = 0.1     # seconds


class Acceptor:
    """Accepts on ``listeners`` (spamnb.server.listeners.Listener, all of one
    protocol) for ``server`` (its settings, log, metrics, ``stopping``);
    ``make(server, acceptor)`` builds an accepted connection's
    asyncio.Protocol, which adds itself to :attr:`connections` when made
    and calls :meth:`freed` once when it is lost.  ``name`` names the
    protocol in the log; ``drain``: take the clients waiting in the listen
    backlog when the listeners close (they would be reset)."""

    def __init__(self, server, listeners, make, name, drain=True):
        self.server = server
        self.listeners = list(listeners)
        self.make = make
        self.name = name
        self.drain = drain
        self.active = 0             # connections accepted and not lost (at most --max-connections)
        self.setting_up = 0         # accepted, the transport (and TLS handshake) not made yet
        self.connections = set()    # the connections made, not lost
        self.paused = True
        self.pauses, self.pause_logged = 0, float("-inf")

    def start(self):
        self._set_accepting(True)

    def in_flight(self):
        """Connections with a request under way (or being set up)."""
        return self.setting_up + sum(1 for c in self.connections if c.busy())

    def stop(self):
        """The server stops: each connection is told (``stop()``)."""
        for connection in list(self.connections):
            connection.stop()

    def close_listeners(self):
        if not self.paused:
            self._set_accepting(False)
        if self.drain:
            for listener in self.listeners:
                self._accept(listener)
        self.listeners = []

    def freed(self):
        """A connection closed: its slot is free again."""
        self.active -= 1
        if self.paused and self.active < self.server.settings.max_connections:
            self._resume()

    def limit_changed(self):
        """--max-connections may have been raised (SIGHUP)."""
        if self.paused and self.active < self.server.settings.max_connections:
            self._resume()

    # ------------------------------------------------------------------ inside
    def _set_accepting(self, on):
        loop = asyncio.get_running_loop()
        for listener in self.listeners:
            if on:
                loop.add_reader(listener.sock.fileno(), self._accept, listener)
            else:
                loop.remove_reader(listener.sock.fileno())
        self.paused = not on

    def _resume(self):
        if self.paused and self.server.stopping is None and self.listeners:
            self._set_accepting(True)

    def _accept(self, listener):
        """A listening socket is readable: accept while under --max-connections."""
        server = self.server
        loop = asyncio.get_running_loop()
        for _ in range(BACKLOG):
            if self.active >= server.settings.max_connections and server.stopping is None:
                if not self.paused:
                    self._pause_at_the_limit(loop)
                return
            try:
                conn, address = listener.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:      # out of file descriptors, ...: try again shortly
                server.log(f"{self.name} accept failed: {exc.strerror or exc}; pausing {RETRY_AFTER_FAILED_ACCEPT:g} s")
                if not self.paused:
                    self._set_accepting(False)
                    loop.call_later(RETRY_AFTER_FAILED_ACCEPT, self._resume)
                return
            if listener.item[0] != "unix" and not server.settings.allows(address[0]):
                conn.close()    # before a byte is read or a TLS handshake begins, holding no slot
                server.refused(address[0])
                continue
            conn.setblocking(False)
            self.active += 1
            self.setting_up += 1
            loop.create_task(self._connected(conn, listener.tls))

    def _pause_at_the_limit(self, loop):
        server = self.server
        self._set_accepting(False)
        self.pauses += 1
        if server.metrics is not None:
            server.metrics.error("connection_limit")
        now = loop.time()
        if now - self.pause_logged >= 60.0:     # at most a line a minute, however often
            server.log(f"{self.active} {self.name} connections open (--max-connections): not accepting until one"
                       f" closes ({self.pauses} time(s) since the last such line)")
            self.pause_logged, self.pauses = now, 0

    async def _connected(self, conn, tls=None):
        settings = self.server.settings
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: self.make(self.server, self), conn, ssl=tls,
                ssl_handshake_timeout=min(settings.idle_timeout, settings.timeout) if tls is not None else None)
        except Exception as exc:  # noqa: BLE001 - the client may be gone already
            conn.close()
            self.freed()
            self.server.log(f"{self.name} connection lost while set up: {one_line(exc)}")
        finally:
            self.setting_up -= 1
