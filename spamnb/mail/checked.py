"""One message's bytes, read with its file's type and size checked first
(:func:`open_checked`, :func:`read_checked`: a FIFO, a device or a socket
is never opened, a file over :data:`MAX_MESSAGE_SIZE` never read whole),
the one message on stdin (:func:`read_stdin`: ``spamnb classify < msg``;
:func:`stdin_message`: ``spamnb learn < msg``), whether bytes look like
mail (:func:`looks_like_mail`), and a path's name as a line of output shows
it (:func:`display_name`).
What a mail filter's command of one message needs of the reader of mail,
:mod:`spamnb.mail.reader` (which re-exports these names and reads folders,
mboxes and corpora with them), in a module of its own: its cold path loads
neither the folders' walk nor the mbox cutter's callers."""

import posix   # os's calls without os.py (a cold classify never loads it)
import _stat as stat   # the S_IS* tests and S_IMODE, which stat.py re-exports: its module not run (0.2 M instructions)

from spamnb import errors   # Refused, TooLarge, SkippedInput: named where raised or caught, made then
from spamnb.mail import lazy_re

__all__ = ["MAX_MESSAGE_SIZE", "Refused", "TooLarge", "open_checked", "read_checked", "read_stdin", "stdin_message",
           "looks_like_mail", "display_name"]


# The largest message file read (64 MiB, what an mbox's messages are cut at:
# spamnb.mail.mbox.MAX_MESSAGE_BYTES).  The tokenizer reads at most the first
# few tens of KiB of a message; a larger file is skipped with this reason.
MAX_MESSAGE_SIZE = 64 << 20
_OPEN_FLAGS = (posix.O_RDONLY | getattr(posix, "O_CLOEXEC", 0) | getattr(posix, "O_NONBLOCK", 0)
               | getattr(posix, "O_NOCTTY", 0))


def _kind(mode):
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def _size_text(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n} bytes"


def open_checked(path, max_size=MAX_MESSAGE_SIZE):
    """``(fd, size)`` of the regular file at ``path`` opened for reading
    (the caller closes ``fd``).  Its type is checked before it is opened
    (``stat``: a FIFO, a device or a socket is never opened) and again on
    what was opened (``fstat``: it may have been replaced between the two;
    the open does not block, and opens no terminal).  :class:`Refused` for
    anything but a regular file, and for a file over ``max_size`` bytes
    (None: no limit); OSError when it cannot be opened (IsADirectoryError
    for a folder)."""
    _check(path, posix.stat(path), max_size)   # before opening: a FIFO or a device is never opened
    fd = posix.open(path, _OPEN_FLAGS)
    try:
        st = posix.fstat(fd)
        _check(path, st, max_size)   # what was opened (replaced since the stat?)
    except BaseException:
        posix.close(fd)
        raise
    return fd, st.st_size


def _check(path, st, max_size):
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "Is a directory", posix.fspath(path))
    if not stat.S_ISREG(st.st_mode):
        raise errors.Refused(f"not a regular file ({_kind(st.st_mode)})")
    if max_size is not None and st.st_size > max_size:
        raise errors.Refused(f"larger than {_size_text(max_size)}")


def read_checked(fd, size, max_size=MAX_MESSAGE_SIZE):
    """The bytes of the regular file open at ``fd`` (``size`` bytes when it
    was checked), read in one ``read`` when it did not grow; :class:`Refused`
    when it grew past ``max_size`` meanwhile (never more than that is read)."""
    limit = size if max_size is None else min(size, max_size)
    data = posix.read(fd, limit + 1)
    if len(data) <= size:
        if max_size is not None and len(data) > max_size:
            raise errors.Refused(f"larger than {_size_text(max_size)}")
        return data
    chunks, total = [data], len(data)
    while max_size is None or total <= max_size:
        chunk = posix.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
    raise errors.Refused(f"larger than {_size_text(max_size)}")


def _is_null_device(st):
    try:
        return st.st_rdev == posix.stat("/dev/null").st_rdev
    except OSError:
        return False


def read_stdin(stream, max_size=MAX_MESSAGE_SIZE):
    """The one message on ``stream`` (standard input, a binary stream not yet
    read from): a pipe is read to ``max_size`` bytes, a regular file from its
    position by its size, the null device (``</dev/null``) is empty input;
    nothing is ever taken for an mbox (``-M`` reads stdin as one).
    :class:`Refused` for any other device (a terminal, ``/dev/zero``), and
    :class:`TooLarge` for a message over ``max_size`` (a regular file's size
    is checked before it is read; a pipe's is not held past the limit and a
    byte)."""
    try:
        fd = stream.fileno()
        st = posix.fstat(fd)
    except (OSError, ValueError, AttributeError):   # no file descriptor (a test's stream): read it
        fd, st = None, None
    if st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)):
        if stat.S_ISCHR(st.st_mode) and _is_null_device(st):
            return b""
        raise errors.Refused("stdin is a device, not mail")
    if st is not None and stat.S_ISREG(st.st_mode):
        try:
            position = posix.lseek(fd, 0, 1)   # SEEK_CUR
        except OSError:
            position = None
        if position is not None:
            size = st.st_size - position
            if size > max_size:
                raise errors.TooLarge(f"larger than {_size_text(max_size)}")
            try:
                return read_checked(fd, max(size, 0), max_size)
            except errors.Refused as exc:   # grew past the limit meanwhile
                raise errors.TooLarge(str(exc)) from None
    data = stream.read(max_size + 1)
    if len(data) > max_size:
        hint = " (-M reads stdin as an mbox)" if data.startswith(b"From ") else ""
        raise errors.TooLarge(f"larger than {_size_text(max_size)}{hint}", data)
    return data


def stdin_message(stream):
    """The one message on ``stream`` (standard input) as a command that reads
    messages takes it when not told it is an mbox (:func:`read_stdin`, to
    :data:`MAX_MESSAGE_SIZE`); :class:`SkippedInput` when refused unread (a
    device, a message over the limit)."""
    try:
        return read_stdin(stream, MAX_MESSAGE_SIZE)
    except errors.Refused as exc:
        raise errors.SkippedInput(f"-: {exc}; not read") from None


_NAME_BYTES = bytes(range(0x21, 0x3a)) + bytes(range(0x3b, 0x7f))   # a header field name: printable ASCII but the colon


def looks_like_mail(data):
    """True when the first line (after an mbox ``From `` line) is a header
    field: a name of printable ASCII but the colon, spaces or tabs, a colon
    (without a pattern: ``spamnb learn``'s cold path imports no ``re``)."""
    start = 0
    if data.startswith(b"From "):
        newline = data.find(b"\n")
        if newline < 0:
            return False
        start = newline + 1
    colon = data.find(b":", start)
    if colon < 0:
        return False
    name = data[start:colon].rstrip(b" \t")
    return bool(name) and not name.translate(None, _NAME_BYTES)


_UNPRINTABLE = lazy_re.pattern("[\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match):
    ch = match.group()
    code = ord(ch)
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    if 0xDC80 <= code <= 0xDCFF:   # a byte of a name that is not UTF-8 (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def display_name(name):
    """A file name as a line of output shows it: a backslash, a tab, a line
    break (CR, LF, NEL, U+2028/2029), any other control character and a
    byte that is not UTF-8 (a lone surrogate from ``os.fsdecode``) are
    written as backslash escapes (``\\\\``, ``\\t``, ``\\n``, ``\\xff``,
    ``\\u2028``): one name is always one field of one line, and text any
    encoder (JSON, UTF-8) takes."""
    return _UNPRINTABLE.sub(_escape, name) if _UNPRINTABLE.search(name) else name


def __getattr__(name):
    """``Refused`` and ``TooLarge``: :mod:`spamnb.errors`' (made when first named)."""
    return errors.reexported(__name__, name, ("Refused", "TooLarge"))
