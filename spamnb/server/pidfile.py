"""``spamnb serve --pidfile PATH``: the server's process id in a file, locked
while it runs, so a second server given the same file refuses to start."""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import time

from spamnb.errors import PidfileError, PidfileHeld


class Pidfile:
    """Opened and locked (flock) by :meth:`acquire` — before the sockets are
    bound, so a second server leaves the first one's Unix socket alone —
    filled by :meth:`write` once the server listens, removed by
    :meth:`release` at exit.  A file left by a server that died is not
    locked, and is taken over.  A server that drops root (``-u``) keeps a
    small process of root's (:meth:`keep_remover`) that removes the file
    from a folder only root may write to once the server is gone."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.fd = None
        self.remover = None         # (pid, the pipe's write end) of keep_remover's process

    def acquire(self):
        for _ in range(10):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise PidfileError(f"--pidfile {self.path}: is a symbolic link (refused: give the path"
                                       " of the file itself, in a folder only the server's user may write to)"
                                       ) from None
                raise PidfileError(f"--pidfile {self.path}: {exc.strerror or exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                os.close(fd)
                raise PidfileHeld(f"--pidfile {self.path}: another server (pid {held or '?'}) is running") from None
            if _same_file(fd, self.path):
                self.fd = fd
                return self
            os.close(fd)        # removed by the server that held it as we opened it: open the new one
        raise PidfileError(f"--pidfile {self.path}: replaced again and again while being opened")

    def keep_remover(self):
        """Fork a process that keeps the current (root's) rights, holds nothing
        but a pipe from this one, and when the pipe closes (this process is
        gone, or :meth:`release` let go of it) removes the pid file, if it
        is still this one's and no server holds it.  Called before the
        server drops privileges: USER may not be able to remove a file in
        /run.  It holds no socket, model or mail and reads nothing else."""
        identity = _identity(os.fstat(self.fd))
        r, w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid:
            os.close(r)
            self.remover = (pid, w)
            return
        try:
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, signal.SIG_IGN)   # a Ctrl-C to the group: the server decides
            os.closerange(3, r)
            os.closerange(r + 1, max(r + 2, os.sysconf("SC_OPEN_MAX")))
            while os.read(r, 1):
                pass
            _remove_if_unheld(self.path, identity)
        except BaseException:  # noqa: BLE001 - nothing to report to; the file stays
            pass
        finally:
            os._exit(0)

    def write(self, pid=None):
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{pid or os.getpid()}\n".encode(), 0)
        os.fsync(self.fd)

    def close_inherited(self):
        """In a forked worker: let go of the descriptors (the parent keeps the lock)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.remover is not None:
            os.close(self.remover[1])
            self.remover = None

    def release(self):
        """Remove the file and unlock; a file the server may no longer remove
        (it dropped privileges) is emptied and left to the remover
        (:meth:`keep_remover`), or left empty.  Returns an error text or None."""
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
        if self.remover is not None:
            pid, w = self.remover
            self.remover = None
            os.close(w)         # the remover removes the file now that it is not held
            try:
                os.waitpid(pid, 0)
                if problem is not None and not os.path.lexists(self.path):
                    problem = None
            except ChildProcessError:
                pass
        return problem


def _identity(st):
    return st.st_dev, st.st_ino


def _same_file(fd, path):
    try:
        return _identity(os.stat(path, follow_symlinks=False)) == _identity(os.fstat(fd))
    except OSError:
        return False


def _remove_if_unheld(path, identity):
    """Remove ``path`` if it is the file ``identity`` and no server holds its lock (taken while removing)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if _identity(os.fstat(fd)) != identity:
            return
        # the server's lock may outlive its end of the pipe by a moment (the kernel closes a dead
        # process's files in no set order); still held after 2 s: a new server took the file over
        for _ in range(100):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.02)
        else:
            return
        if _same_file(fd, path):
            os.unlink(path)
    finally:
        os.close(fd)
