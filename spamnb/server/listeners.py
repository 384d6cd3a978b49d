"""The server's listening sockets, bound before anything else happens (as
root when ``-u`` drops privileges afterwards, and before worker processes
are forked, so that every worker accepts on the same sockets), and the TLS
context of ``--ssl-listen``."""

from __future__ import annotations

import os
import socket
import ssl
import stat
from dataclasses import dataclass


@dataclass
class Listener:
    """A bound, listening socket: ``item`` is the parsed address
    (``("tcp", host, port)`` or ``("unix", path)``), ``tls`` the
    :class:`ssl.SSLContext` its connections are wrapped in, or None."""

    item: tuple
    sock: socket.socket
    tls: ssl.SSLContext | None = None

    @property
    def where(self):
        if self.item[0] == "unix":
            return self.item[1]
        return f"{self.item[1]}:{self.item[2]}" + (" (TLS)" if self.tls is not None else "")


def tls_context(cert, key=None):
    """A server-side TLS context from a PEM certificate (chain) and key;
    TLS 1.2 at least.  Raises OSError or ssl.SSLError when they cannot be
    read or do not match."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    return context


def bind_tcp(host, port, backlog=128):
    """A listening TCP socket (SO_REUSEADDR, IPv6 when ``host`` is one)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def bind_unix(path, mode, backlog=128):
    """A listening Unix socket at ``path`` (a socket left there by a server
    that is gone is replaced; any other file is not) with permissions ``mode``."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, mode)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def bind_all(settings, tls=None):
    """Listeners for ``settings.listen`` (plain) and ``settings.ssl_listen``
    (wrapped in ``tls``).  Raises OSError (the sockets bound so far closed)."""
    out = []
    try:
        for item in settings.listen:
            sock = bind_unix(item[1], settings.socket_mode) if item[0] == "unix" else bind_tcp(item[1], item[2])
            out.append(Listener(item, sock))
        for item in getattr(settings, "ssl_listen", ()):
            out.append(Listener(item, bind_tcp(item[1], item[2]), tls))
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
