"""Reading mbox files as a stream of messages, in bounded memory.

An mbox is a file that starts with an envelope line (``From sender date``);
each message starts with one.  Where a new message starts:

- at a ``From `` line after a blank line (or at the top of the file): the
  classic rule, which is also what Python's :mod:`mailbox` does;
- at a ``From `` line that is an envelope line (a sender, then a date with a
  time and a year), even with no blank line before it: writers that leave out
  the blank line exist, and Python's :mod:`mailbox` splits there too;
- never at a ``From `` line inside a paragraph that is not an envelope line
  ("From here on, ..."), which an unescaped mbox may hold.

Lines may end in LF or CRLF.  The blank line before an envelope line belongs
to no message; each message keeps its own envelope line (the parser and
:func:`spamnb.mail.reader.looks_like_mail` skip it).  The file is read line by line
(lines cut at 64 KiB), so memory is bounded by the largest message, and a
message is cut at ``max_message_bytes`` (64 MiB by default: far beyond what
the tokenizer reads of a message).

This module imports only :mod:`io` and :mod:`re` (its patterns compiled on first use): ``spamnb classify`` reads mbox input
through it and must start fast.
"""

from __future__ import annotations

import io

from spamnb.mail import lazy_re

__all__ = ["is_mbox_start", "iter_mbox", "split_mbox", "iter_mbox_range", "message_starts", "MAX_MESSAGE_BYTES"]

MAX_MESSAGE_BYTES = 64 << 20
_MAX_LINE = 64 << 10
_MAX_ENVELOPE = 1000  # a longer line is no envelope line (and the pattern below stays linear)
# "From sender@example.com Mon Nov 23 10:40:20 2026", "From x  Sat Jan  3 01:05:34 1996 +0000", ...
_ENVELOPE = lazy_re.pattern(rb"From [^ \t\r\n]+[ \t]+[^\r\n]*?\b\d{1,2}:\d\d(?::\d\d)?\b[^\r\n]*?\b\d{4}\b")
_BLANK = (b"\n", b"\r\n")
# the bytes of a header field's name (RFC 5322: printable ASCII but the colon)


def is_mbox_start(head):
    """True when data starting with ``head`` is an mbox (begins with ``From ``)."""
    return head[:5] == b"From "


def is_envelope(line):
    """True when ``line`` (an mbox line) is an envelope line with a date."""
    return len(line) <= _MAX_ENVELOPE and _ENVELOPE.match(line) is not None


def iter_mbox(stream, max_message_bytes=MAX_MESSAGE_BYTES):
    """The messages (bytes, each with its envelope line) of an mbox read from
    the binary file object ``stream``, one at a time.  An envelope line with
    nothing after it (before the next one) is no message and is not yielded.

    An ``io.BytesIO`` (a file read whole), or a regular file opened ``"rb"``
    at its start (mapped, its pages dropped as they are passed), is cut at
    :func:`message_starts` (a search for ``From`` lines) instead of line by
    line: the same messages, 3-8x faster."""
    if type(stream) is io.BytesIO:
        position = stream.tell()
        data = stream.getvalue()
        stream.seek(0, io.SEEK_END)
        yield from _iter_mbox_buffer(data[position:] if position else data, max_message_bytes)
        return
    mapped = _mapped(stream)
    if mapped is None:
        yield from _iter_mbox_lines(stream, max_message_bytes)
        return
    with mapped:
        yield from _iter_mbox_buffer(mapped, max_message_bytes, stream.fileno())
    stream.seek(0, io.SEEK_END)


def split_mbox(data, max_message_bytes=MAX_MESSAGE_BYTES):
    """The messages of a whole mbox held in ``data`` (bytes): what
    :func:`iter_mbox` gives for ``io.BytesIO(data)``, without the file object."""
    return _iter_mbox_buffer(data, max_message_bytes)


def _mapped(stream):
    """A read-only map of a regular file opened at its start, or None."""
    if type(stream) is not io.BufferedReader:
        return None
    try:
        import mmap
        import os
        import stat

        if stream.tell() != 0 or not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            return None
        if os.fstat(stream.fileno()).st_size == 0:
            return None
        return mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, io.UnsupportedOperation):
        return None


_RELEASE = 16 << 20   # a map's pages passed are dropped every 16 MiB


def _iter_mbox_buffer(data, max_message_bytes, fd=None):
    """The messages of a whole mbox in ``data`` (bytes or a map of the file
    ``fd``), cut at :func:`message_starts`, as the line loop cuts them."""
    if data[:5] != b"From ":
        yield from _iter_mbox_lines(io.BytesIO(data[:]) if fd is None else _Range.reader(fd, 0, len(data)),
                                    max_message_bytes)
        return
    starts = message_starts(data)
    start = next(starts)
    released = 0
    while start < len(data):
        end = next(starts, len(data))
        if end - start > max_message_bytes:   # cut at the limit as the line loop cuts it (streamed)
            yield from _iter_mbox_lines(io.BytesIO(data[start:end]) if fd is None else _Range.reader(fd, start, end),
                                        max_message_bytes)
        else:
            # what the line loop does at the next start (or at the end): drop the
            # last line if blank (as readline(_MAX_LINE) cut it), then keep the
            # message if more than its envelope line is left
            previous = data.rfind(b"\n", start, end - 1) + 1 or start
            last = previous + _MAX_LINE * ((end - previous - 1) // _MAX_LINE)
            stop = last if data[last:end] in _BLANK else end
            first = data.find(b"\n", start, start + _MAX_LINE)
            first = start + _MAX_LINE if first < 0 else first + 1
            if stop > min(first, end):
                yield data[start:stop]
        if fd is not None and end - released >= _RELEASE and hasattr(data, "madvise"):
            import mmap

            done = end - end % mmap.PAGESIZE
            data.madvise(mmap.MADV_DONTNEED, 0, done)
            released = done
        start = end


class _Range(io.RawIOBase):
    """Bytes ``start`` to ``end`` of the open file ``fd``, read with ``pread``."""

    def __init__(self, fd, start, end):
        super().__init__()
        self.fd, self.position, self.end = fd, start, end

    @classmethod
    def reader(cls, fd, start, end):
        return io.BufferedReader(cls(fd, start, end))

    def readable(self):
        return True

    def readinto(self, buffer):
        import os

        n = min(len(buffer), self.end - self.position)
        if n <= 0:
            return 0
        data = os.pread(self.fd, n, self.position)
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)


def _iter_mbox_lines(stream, max_message_bytes):
    pieces = []
    size = 0
    line_start = True      # the next piece begins a line (readline may cut long lines)
    blank_before = True    # the previous line was blank (or there was none)
    while True:
        line = stream.readline(_MAX_LINE)
        if not line:
            break
        if (line_start and line[:5] == b"From " and pieces
                and (blank_before or is_envelope(line))):
            if blank_before and pieces[-1] in _BLANK:
                pieces.pop()
            if len(pieces) > 1:
                yield b"".join(pieces)
            pieces, size = [], 0
        line_start = line[-1:] == b"\n"
        blank_before = line in _BLANK
        if size < max_message_bytes:
            piece = line[:max_message_bytes - size]
            pieces.append(piece)
            size += len(piece)
    if blank_before and len(pieces) > 1 and pieces[-1] in _BLANK:
        pieces.pop()
    if len(pieces) > 1 or (pieces and pieces[0][:5] != b"From "):
        yield b"".join(pieces)



def one_message(data):
    """True when :func:`iter_mbox` of ``data`` (a whole mbox, at most
    :data:`MAX_MESSAGE_BYTES`) gives one message, ``data`` itself but a blank
    last line (what a message file that starts with an envelope line is,
    most of the time), found without cutting it: no other ``From`` line at
    a line's start, and more than the envelope line (a blank last line
    aside).  False: cut it (:func:`split_mbox`)."""
    if data[:5] != b"From " or len(data) > MAX_MESSAGE_BYTES or data.find(b"\nFrom ") >= 0:
        return False
    end = len(data)   # _iter_mbox_buffer's test of its one message
    previous = data.rfind(b"\n", 0, end - 1) + 1
    last = previous + _MAX_LINE * ((end - previous - 1) // _MAX_LINE)
    stop = last if data[last:end] in _BLANK else end
    first = data.find(b"\n", 0, _MAX_LINE)
    first = _MAX_LINE if first < 0 else first + 1
    return stop > min(first, end)


def message_starts(data):
    """The byte offsets where :func:`iter_mbox` starts a message in ``data`` (a
    whole mbox: bytes or a memory map), in order, without reading it line by
    line: a ``From `` line is found by a search, then judged as
    :func:`iter_mbox` judges it (its previous line as ``readline`` cut it, at
    ``_MAX_LINE``).  Cutting ``data`` at these offsets and reading each piece
    with :func:`iter_mbox` gives the messages of the whole (what
    ``spamnb.training.pipeline`` relies on to read an mbox in shards)."""
    if data[:5] != b"From ":
        return
    yield 0
    start = 0
    while True:
        start = data.find(b"\nFrom ", start) + 1   # a fast search (a regex with ^ tries every byte)
        if start == 0:
            return
        line_end = data.find(b"\n", start, start + _MAX_LINE)
        line = data[start:line_end + 1 if line_end >= 0 else start + _MAX_LINE]
        # the previous line's last piece as readline(_MAX_LINE) returned it
        previous = data.rfind(b"\n", 0, start - 1) + 1
        last_piece = data[previous + _MAX_LINE * ((start - previous - 1) // _MAX_LINE):start]
        if last_piece in _BLANK or is_envelope(line):
            yield start


def iter_mbox_range(path, start, end, max_message_bytes=MAX_MESSAGE_BYTES):
    """:func:`iter_mbox` over bytes ``start`` to ``end`` of the file at ``path``
    (a shard cut at :func:`message_starts`): read whole (one ``pread``) when
    it is at most 64 MiB, else a line at a time."""
    with open(path, "rb", buffering=0) as raw:
        fd = raw.fileno()
        if end - start <= 64 << 20:
            import os

            data = os.pread(fd, end - start, start)
            yield from _iter_mbox_buffer(data, max_message_bytes)
        else:
            yield from _iter_mbox_lines(_Range.reader(fd, start, end), max_message_bytes)
