"""The server's listening sockets, bound before anything else happens (as
root when ``-u`` drops privileges afterwards, and before worker processes
are forked, so that every worker accepts on the same sockets), and the TLS
context of ``--ssl-listen``."""

from __future__ import annotations

import errno
import os
import socket
import ssl
import stat
from dataclasses import dataclass

from spamnb.errors import CannotListen, ServerError

BACKLOG = 128   # connections the kernel queues while the server does not accept (--max-connections)


@dataclass
class Listener:
    """A bound, listening socket: ``item`` is the parsed address
    (``("tcp", host, port)`` or ``("unix", path)``), ``tls`` the
    :class:`ssl.SSLContext` its connections are wrapped in, or None;
    ``protocol`` what its clients speak: "spamd" or "milter"."""

    item: tuple
    sock: socket.socket
    tls: ssl.SSLContext | None = None
    protocol: str = "spamd"

    @property
    def where(self):
        where = self.item[1] if self.item[0] == "unix" else f"{self.item[1]}:{self.item[2]}"
        return where + (" (TLS)" if self.tls is not None else "") + (" (milter)" if self.protocol == "milter" else "")


def tls_context(cert, key=None):
    """A server-side TLS context from a PEM certificate (chain) and key;
    TLS 1.2 at least.  Raises OSError or ssl.SSLError when they cannot be
    read or do not match."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


def bind_tcp(host, port, backlog=BACKLOG):
    """Listening TCP sockets (non-blocking, SO_REUSEADDR) for every address
    ``host`` names (``localhost``: 127.0.0.1 and ::1; IPv6 ones IPv6-only).
    Raises :class:`CannotListen` saying which address and why."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CannotListen(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    out = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            out.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            _bind(sock, address, f"{host}:{port}")
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in out:
            sock.close()
        raise
    return out


def bind_unix(path, mode, backlog=BACKLOG):
    """A listening Unix socket at ``path`` (a socket left there by a server
    that is gone is replaced; any other file is not) with permissions ``mode``."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        umask = os.umask(0o177)   # the socket is made the owner's alone, never looser than ``mode`` until chmod
        try:
            _bind(sock, path, path)
        finally:
            os.umask(umask)
        os.chmod(path, mode)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def _bind(sock, address, shown):
    try:
        sock.bind(address)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno == errno.EACCES and isinstance(address, tuple) and address[1] < 1024:
            why += (f" (port {address[1]} is privileged: run as root and drop privileges with -u, or give the"
                    " program CAP_NET_BIND_SERVICE, e.g. systemd's AmbientCapabilities; or use a port >= 1024)")
        raise CannotListen(f"cannot listen on {shown}: {why}") from None


def bind_all(settings, tls=None):
    """Listeners for ``settings.listen`` (plain), ``settings.ssl_listen``
    (wrapped in ``tls``) and ``settings.milter`` (the milter protocol).  Raises :class:`CannotListen` (the sockets bound so
    far closed)."""
    out = []
    try:
        for item in settings.listen:
            if item[0] == "unix":
                out.append(Listener(item, bind_unix(item[1], settings.socket_mode)))
            else:
                out.extend(Listener(item, sock) for sock in bind_tcp(item[1], item[2]))
        for item in getattr(settings, "ssl_listen", ()):
            out.extend(Listener(item, sock, tls) for sock in bind_tcp(item[1], item[2]))
        for item in getattr(settings, "milter", ()):
            if item[0] == "unix":
                out.append(Listener(item, bind_unix(item[1], settings.socket_mode), protocol="milter"))
            else:
                out.extend(Listener(item, sock, protocol="milter") for sock in bind_tcp(item[1], item[2]))
    except BaseException:
        close_all(out, unlink=True)
        raise
    return out


def close_all(listeners, unlink=False):
    """Close the sockets; with ``unlink``, remove the Unix sockets' files."""
    for listener in listeners:
        listener.sock.close()
        if unlink and listener.item[0] == "unix":
            try:
                os.unlink(listener.item[1])
            except OSError:
                pass
