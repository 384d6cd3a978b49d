"""``spamnb serve --pidfile PATH``: the server's process id in a file, locked
while it runs, so a second server given the same file refuses to start."""

from __future__ import annotations

import fcntl
import os


class PidfileError(Exception):
    """Another live server holds the pid file, or it cannot be written."""


class Pidfile:
    """Opened and locked (flock) by :meth:`acquire` — before the sockets are
    bound, so a second server leaves the first one's Unix socket alone —
    filled by :meth:`write` once the server listens, removed by
    :meth:`release` at exit.  A file left by a server that died is not
    locked, and is taken over."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.fd = None

    def acquire(self):
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise PidfileError(f"--pidfile {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            raise PidfileError(f"--pidfile {self.path}: another server (pid {held or '?'}) is running") from None
        self.fd = fd
        return self

    def write(self, pid=None):
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{pid or os.getpid()}\n".encode(), 0)
        os.fsync(self.fd)

    def close_inherited(self):
        """In a forked worker: let go of the descriptor (the parent keeps the lock)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def release(self):
        """Remove the file and unlock; a file the server may no longer remove
        (it dropped privileges) is emptied instead.  Returns an error text or None."""
        if self.fd is None:
            return None
        problem = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            os.ftruncate(self.fd, 0)
            problem = f"pid file {self.path} not removed ({exc.strerror}); emptied"
        os.close(self.fd)
        self.fd = None
        return problem
