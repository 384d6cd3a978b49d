"""The messages of a path as the command line names it: a message file, an
mbox (read one message at a time), a folder or Maildir (each message below
it), or ``-`` (stdin: a message, or an mbox).  Light to import: the
``spamnb classify`` cold path reads its one message here."""

from __future__ import annotations

import os
import stat
import sys

from spamnb.training.errors import CorpusError

__all__ = ["messages_of", "read_message_file"]


def read_message_file(path):
    """The bytes of a message file (the one reader: ``spamnb.model.messages.read_file``);
    CorpusError naming the path when it cannot be read (a folder: IsADirectoryError)."""
    from spamnb.model.messages import read_file

    try:
        return read_file(path)
    except IsADirectoryError:
        raise
    except OSError as exc:
        raise CorpusError(f"{path}: {exc.strerror or exc}") from None


def _mbox_messages(stream, name):
    """``(name, bytes)`` of each message of the mbox read from the binary
    ``stream`` (or held whole in ``bytes``), one at a time (a one-message
    mbox keeps the plain name)."""
    from spamnb.mail.mbox import iter_mbox, split_mbox

    messages = split_mbox(stream) if type(stream) is bytes else iter_mbox(stream)
    previous, i = next(messages, None), 0
    for message in messages:  # one ahead, to know whether there is more than one
        yield f"{name}#{i}", previous
        previous, i = message, i + 1
    if previous is not None:
        yield (f"{name}#{i}" if i else name), previous


_SMALL = 1 << 20   # a file up to this size is read whole at once (a larger mbox: one message at a time)


def _small_file(path):
    """The bytes of ``path`` when it is a regular file of at most ``_SMALL``
    bytes (one ``stat``, then ``read_file``'s one open and read); None for
    anything else, or when either fails (the caller's own way then reads it,
    or names the error)."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _SMALL:
            return None
        from spamnb.model.messages import read_file

        return read_file(path)
    except OSError:
        return None


def messages_of(path):
    """``(name, bytes)`` of each message in ``path``: a message file, an mbox
    (read one message at a time), a folder or Maildir (each message below it),
    or ``-`` (stdin: a message, or an mbox).  A single message is held once,
    never copied (a 50 MB message stays 50 MB)."""
    from spamnb.mail.mbox import is_mbox_start

    if path == "-":
        data = sys.stdin.buffer.read()
        if is_mbox_start(data):
            import io

            yield from _mbox_messages(io.BytesIO(data), "-")  # BytesIO shares the bytes, no copy
        else:
            yield "-", data
        return
    data = _small_file(path)
    if data is not None:   # a message (or small mbox) file: one open and one read
        if is_mbox_start(data):
            yield from _mbox_messages(data, path)  # cut as the map of the file is cut below
        else:
            yield path, data
    elif os.path.isdir(path):
        from spamnb.training.corpus import CorpusReport, read_messages

        report = CorpusReport()
        for relpath, data in read_messages(path, report):
            yield os.path.join(path, relpath), data
        if report.n_skipped:
            print(f"spamnb: {path}: {report.summary()}", file=sys.stderr)
    else:
        try:
            f = open(path, "rb")
        except OSError as exc:
            raise CorpusError(f"{path}: {exc.strerror or exc}") from None
        with f:
            head = f.read(5)
            seekable = f.seekable()
            if is_mbox_start(head):
                if seekable:
                    f.seek(0)
                    yield from _mbox_messages(f, path)
                else:  # a pipe: what was read cannot be read again
                    import io

                    yield from _mbox_messages(io.BytesIO(head + f.read()), path)
                return
            if not seekable:
                yield path, head + f.read()
                return
        yield path, read_message_file(path)  # read again, whole: one copy of the message
