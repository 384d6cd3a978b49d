"""The systemd readiness protocol (``Type=notify``), without libsystemd:
datagrams such as ``READY=1`` sent to the AF_UNIX socket named by
$NOTIFY_SOCKET (a path, or an abstract name starting with '@')."""

from __future__ import annotations

import os
import socket


class Notifier:
    """Connected when made (before privileges are dropped: the socket's
    folder may be closed to the user the server becomes); does nothing when
    $NOTIFY_SOCKET is not set."""

    def __init__(self, address=None):
        address = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")
        self.sock = None
        if not address:
            return
        if address.startswith("@"):
            address = "\0" + address[1:]
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            sock.connect(address)
        except OSError:
            sock.close()
            return
        self.sock = sock

    def notify(self, **fields):
        """Send ``KEY=value`` lines, e.g. ``notify(READY=1, MAINPID=pid)``; True when sent."""
        if self.sock is None:
            return False
        text = "\n".join(f"{key}={value}" for key, value in fields.items())
        try:
            self.sock.send(text.encode())
        except OSError:
            return False
        return True

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
