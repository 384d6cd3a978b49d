"""The messages of a path as the command line names it: a message file, an
mbox (read one message at a time), a folder or Maildir (each message below
it), or ``-`` (stdin: a message, or an mbox).  Light to import: the
``spamnb classify`` cold path reads its one message here."""

from __future__ import annotations

import io
import os
import stat
import sys

from spamnb.mail.mbox import is_mbox_start, iter_mbox, split_mbox
from spamnb.model.messages import MAX_MESSAGE_SIZE, Refused, display_name, open_checked, read_checked, read_stdin
from spamnb.training.errors import CorpusError, SkippedInput

__all__ = ["messages_of", "read_message_file", "SkippedInput"]


def read_message_file(path):
    """The bytes of one message file (``classify -p FILE``, ``tokens FILE``):
    a regular file or a named pipe, read to :data:`MAX_MESSAGE_SIZE` bytes;
    CorpusError naming the path when it cannot be read, or is a device, a
    socket or a larger file (a folder: IsADirectoryError)."""
    try:
        fd, size = open_checked(path, max_size=MAX_MESSAGE_SIZE)
        try:
            return read_checked(fd, size, MAX_MESSAGE_SIZE)
        finally:
            os.close(fd)
    except IsADirectoryError:
        raise
    except Refused as exc:
        if "FIFO" in str(exc):
            with open(path, "rb") as f:
                return _bounded_read(f, path)
        raise SkippedInput(f"{path}: {exc}; not read") from None
    except OSError as exc:
        raise CorpusError(f"{path}: {exc.strerror or exc}") from None


def _mbox_messages(stream, name):
    """``(name, bytes)`` of each message of the mbox read from the binary
    ``stream`` (or held whole in ``bytes``), one at a time (a one-message
    mbox keeps the plain name)."""
    messages = split_mbox(stream) if type(stream) is bytes else iter_mbox(stream)
    previous, i = next(messages, None), 0
    for message in messages:  # one ahead, to know whether there is more than one
        yield f"{name}#{i}", previous
        previous, i = message, i + 1
    if previous is not None:
        yield (f"{name}#{i}" if i else name), previous


_SMALL = 1 << 20   # a file up to this size is read whole at once (a larger mbox: one message at a time)


class _Prefixed(io.RawIOBase):
    """A binary stream: ``head`` (bytes already read), then the rest of ``stream``."""

    def __init__(self, head, stream):
        super().__init__()
        self.head, self.stream = head, stream

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.head:
            n = min(len(buffer), len(self.head))
            buffer[:n], self.head = self.head[:n], self.head[n:]
            return n
        data = self.stream.read1(len(buffer)) if hasattr(self.stream, "read1") else self.stream.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _bounded_read(stream, name, head=b""):
    """``head`` and the rest of ``stream`` (a pipe: no size to go by), at most
    :data:`MAX_MESSAGE_SIZE` bytes; CorpusError past that (never more is read)."""
    data = head + stream.read(MAX_MESSAGE_SIZE + 1 - len(head))
    if len(data) > MAX_MESSAGE_SIZE:
        raise SkippedInput(f"{name}: larger than {MAX_MESSAGE_SIZE >> 20} MiB, not an mbox; not read")
    return data


def _stream_messages(stream, name):
    """The messages of a stream with no size (stdin, a named pipe): an mbox
    read a message at a time (each cut at 64 MiB), else one message of at most
    :data:`MAX_MESSAGE_SIZE` bytes."""
    head = stream.peek(5)[:5] if hasattr(stream, "peek") else b""   # not consumed: no copy of the message
    if len(head) < 5:   # a pipe gave less so far: read it (and join it to the rest)
        head = stream.read(5)
        if is_mbox_start(head):
            yield from _mbox_messages(io.BufferedReader(_Prefixed(head, stream), 1 << 16), name)
        else:
            yield name, _bounded_read(stream, name, head)
    elif is_mbox_start(head):
        yield from _mbox_messages(stream, name)
    else:
        yield name, _bounded_read(stream, name)


def _stdin_messages():
    """The messages of stdin: a device is refused unread, a regular file is read
    as a file is, a pipe as a stream."""
    stream = sys.stdin.buffer
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        st = None
    if st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)):
        raise SkippedInput("-: stdin is a device, not mail; not read")
    if st is not None and stat.S_ISREG(st.st_mode):
        try:
            position = stream.tell()
        except OSError:
            position = -1
        if position == 0:
            head = os.pread(stream.fileno(), 5, 0)
            if is_mbox_start(head):
                yield from _mbox_messages(stream, "-")   # a map of the file, a message at a time
                return
            try:   # one read of the file's size, as a file named is read
                yield "-", read_checked(stream.fileno(), st.st_size, MAX_MESSAGE_SIZE)
            except Refused:
                raise SkippedInput(f"-: larger than {MAX_MESSAGE_SIZE >> 20} MiB, not an mbox; not read") from None
            return
    yield from _stream_messages(stream, "-")


def messages_of(path, spam_folders="read", follow_links=True, pipes=False, stdin_mbox=False):
    """``(name, bytes)`` of each message in ``path``: a message file, an mbox
    (read one message at a time), a folder or Maildir (each message below it),
    or ``-`` (stdin: one message, whatever its first line, or with
    ``stdin_mbox`` an mbox: bogofilter's ``-M``).  A single message is held
    once, never copied (a 50 MB message stays 50 MB).

    Every file's type is checked before it is opened: a device or a socket is
    refused unread (:class:`SkippedInput`, a CorpusError), and so is a FIFO
    unless ``pipes`` (``spamnb classify FIFO`` reads it, a batch or a learn
    never: it could block them for ever, holding the model's lock).  A file
    over :data:`MAX_MESSAGE_SIZE` (64 MiB) that is not an mbox is refused
    unread; stdin and named pipes are read to that limit.  A folder's files
    are walked as :func:`spamnb.training.corpus.read_messages` walks them
    (``spam_folders``, ``follow_links``: as there), what is skipped said on
    stderr."""
    if path == "-":
        if stdin_mbox:
            yield from _stdin_messages()
            return
        try:
            yield "-", read_stdin(sys.stdin.buffer, MAX_MESSAGE_SIZE)
        except Refused as exc:
            raise SkippedInput(f"-: {exc}; not read") from None
        return
    try:
        fd, size = open_checked(path, max_size=None)
    except IsADirectoryError:
        from spamnb.training.corpus import CorpusReport, read_messages

        report = CorpusReport()
        for relpath, data in read_messages(path, report, spam_folders=spam_folders, follow_links=follow_links):
            yield os.path.join(path, relpath), data
        if report.n_skipped:
            print(f"spamnb: {display_name(path)}: {report.summary()}", file=sys.stderr)
        return
    except Refused as exc:
        if pipes and "FIFO" in str(exc):
            yield from _pipe_messages(path)
            return
        raise SkippedInput(f"{path}: {exc}; not read") from None
    except OSError as exc:
        raise CorpusError(f"{path}: {exc.strerror or exc}") from None
    try:
        large_mbox = size > _SMALL and is_mbox_start(os.pread(fd, 5, 0))
    except OSError as exc:
        os.close(fd)
        raise CorpusError(f"{path}: {exc.strerror or exc}") from None
    if large_mbox:
        with os.fdopen(fd, "rb") as f:
            yield from _mbox_messages(f, path)   # a map of the file, a message at a time
        return
    try:
        data = read_checked(fd, size, MAX_MESSAGE_SIZE)   # one read (a message: no file object)
    except Refused as exc:
        raise SkippedInput(f"{path}: {exc}, not an mbox; not read") from None
    except OSError as exc:
        raise CorpusError(f"{path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if is_mbox_start(data):
        yield from _mbox_messages(data, path)  # cut as the map of the file is cut above
    else:
        yield path, data


def _pipe_messages(path):
    """The messages of the named pipe at ``path`` (opened, waiting for its writer)."""
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise CorpusError(f"{path}: {exc.strerror or exc}") from None
    with f:
        if not stat.S_ISFIFO(os.fstat(f.fileno()).st_mode):   # replaced since it was checked
            raise SkippedInput(f"{path}: not a regular file; not read")
        yield from _stream_messages(f, path)
