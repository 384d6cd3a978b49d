"""A message as the filter takes it: bytes, text, a path or an
``email.message.Message``, and the one reader of a message file."""

from __future__ import annotations

import os
import stat

__all__ = ["message_bytes", "read_file"]


def message_bytes(message):
    """The raw bytes of a message given as bytes, a path (``os.PathLike``, such
    as ``pathlib.Path``), an ``email.message.Message``, or ``str`` text (encoded
    as UTF-8).  A ``str`` of one line naming an existing file is refused
    (TypeError): a path must be a ``pathlib.Path``, text must not pass for one."""
    if isinstance(message, bytes):
        return message
    if isinstance(message, (bytearray, memoryview)):
        return bytes(message)
    if isinstance(message, os.PathLike):
        return read_file(message)
    if isinstance(message, str):
        if "\n" not in message and os.path.exists(message):
            raise TypeError(f"a str message is the message's text, and {message!r} names a file: "
                            "pass pathlib.Path(...) to read a file")
        return message.encode("utf-8", "surrogateescape")
    if hasattr(message, "as_bytes"):  # email.message.Message, without importing email
        try:
            return message.as_bytes()
        except Exception:  # a Message that cannot be re-serialised (bad charset, ...)
            return str(message).encode("utf-8", "surrogateescape")
    raise TypeError(f"a message must be bytes, str text, a path (os.PathLike) or an email.message.Message, "
                    f"not {type(message).__name__}")


def read_file(path):
    """The whole content of the file at ``path``.  With ``os`` calls instead of
    ``open(path, "rb").read()``: 5.6 instead of 8.5 us per corpus message (no
    file object, and no second read to find the end of a regular file)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        chunks = []
        if stat.S_ISREG(info.st_mode):
            data = os.read(fd, info.st_size + 1)
            if len(data) <= info.st_size:   # a regular file reads short only at its end
                return data
            chunks.append(data)             # it grew since fstat: read on
        while True:                         # pipes and the like have no size to go by
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)
