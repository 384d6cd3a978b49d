"""The local outbox: lessons accepted while Redis cannot take them, kept on disk, sent in order later.

Each lesson is one file ``NNNNNNNNNNNNNNNNNNNN-PID-N.lesson`` (its name sorts in
the order the lessons were accepted), written whole to a temporary name,
fsynced, renamed into place and its folder fsynced before the learn is
acknowledged: a crash of the host loses no acknowledged lesson.  Sending
(:meth:`Outbox.drain`) takes the files oldest first under the outbox's lock
(one sender at a time, also across processes: ``spamnb learn --shared`` and
``spamnb serve --shared`` on one host share it), and removes a file only
after Redis has the lesson.  A file sent but not yet removed when the host
dies is sent again: the lesson id makes Redis take it once
(:mod:`spamnb.shared.host`).  A file that is not a whole lesson is moved
aside (``.bad``), never sent.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import time

__all__ = ["Outbox"]

_SUFFIX = ".lesson"
_counter = itertools.count()


class Outbox:
    def __init__(self, folder):
        self.folder = folder
        os.makedirs(folder, mode=0o700, exist_ok=True)

    def names(self):
        try:
            return sorted(n for n in os.listdir(self.folder) if n.endswith(_SUFFIX))
        except FileNotFoundError:
            return []

    def __len__(self):
        return len(self.names())

    def put(self, record):
        """Keep ``record`` (an encoded lesson) durably; returns its file name."""
        from spamnb.persistence.store import replace_file

        name = f"{time.time_ns():020d}-{os.getpid()}-{next(_counter):06d}{_SUFFIX}"
        # written to a temporary file, fsynced, renamed into place, the folder fsynced
        replace_file(os.path.join(self.folder, name), lambda f: f.write(record), mode=0o600)
        return name

    def _sync_folder(self):
        fd = os.open(self.folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def drain(self, send, bad=None):
        """Send every lesson kept, oldest first, with ``send(record)``; stops at
        the first that raises (kept for later) and re-raises.  Returns the number sent."""
        lock = os.open(os.path.join(self.folder, ".lock"), os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0),
                       0o600)
        sent = 0
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            for name in self.names():
                path = os.path.join(self.folder, name)
                try:
                    with open(path, "rb") as f:
                        record = f.read()
                except FileNotFoundError:
                    continue
                try:
                    send(record)
                except ValueError as exc:   # not a lesson: moved aside, never sent
                    os.replace(path, path + ".bad")
                    if bad is not None:
                        bad(f"{path}: {exc}; moved aside")
                    continue
                os.unlink(path)
                sent += 1
            if sent:
                self._sync_folder()
        finally:
            os.close(lock)
        return sent
