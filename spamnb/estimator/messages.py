"""A message as the filter takes it: bytes, text, a path or an
``email.message.Message`` (:func:`message_bytes`).  Files are read by
:mod:`spamnb.mail.reader`, the one reader of mail."""

import os

from spamnb.mail.reader import read_file

__all__ = ["message_bytes"]


def message_bytes(message):
    """The raw bytes of a message given as bytes, a path (``os.PathLike``, such
    as ``pathlib.Path``: the whole file, :func:`spamnb.mail.reader.read_file`,
    as ``spamnb train`` reads a file of one message), an ``email.message.Message``, or ``str``
    text (encoded as UTF-8).  A ``str`` of one line naming an existing file is refused
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
