"""The one reader of mail on disk and on stdin: every command, ``spamnb
train`` and ``SpamFilter`` given a ``pathlib.Path`` get their messages
(bytes) here: :func:`read_file` (one file: a ``Path``), :func:`messages_of`
(a path as the command line names it: a message file, an mbox, a folder or
Maildir, ``-``), :func:`read_messages` (a corpus: folder, Maildir or mbox,
skips counted in a :class:`CorpusReport`; ``spamnb.training.corpus`` labels
it), :func:`read_stdin` (``spamnb classify < msg``: light, no numpy; with
:func:`open_checked`, :func:`read_checked` and :func:`display_name` it is
:mod:`spamnb.mail.checked`'s, re-exported here).

Every file's type is checked before it is opened (:func:`open_checked`: a
FIFO, a device or a socket is never opened unasked), and a message file is
read to :data:`MAX_MESSAGE_SIZE`; an mbox is cut into messages by
:mod:`spamnb.mail.mbox`, except that a file holding one message (an
envelope line, the message, blank lines) is that file whole, however it is
read.  A path that cannot be read raises :class:`CorpusError`
(:class:`SkippedInput` when refused unread: a batch or a learn goes on
without it).  The bottom layer: nothing from the model or training.

A folder: every file below it is a message, or an mbox of messages; a
Maildir (``cur/`` and ``new/``) holds its messages there (not in ``tmp/``,
nor at its top), its hidden sub-folders are Maildir++ folders.  Trash
folders are never read; spam (``spam*``, ``junk*``) and bulk (``bulk*``)
folders as ``spam_folders`` says.  What cannot be read in a folder is
skipped, counted and named, never fatal (unless ``strict``): unreadable
files and folders, broken links, links to folders (never followed), links
to files outside the tree (unless ``follow_links``), sockets, devices and
FIFOs (never opened), files over 64 MiB that are not an mbox (an mbox is
read a message at a time, each cut at 64 MiB), empty files, files that are
not mail (no header line at the top), hidden files and folders.
"""

import io
import os
import stat
import sys

from spamnb.errors import CorpusError, Refused, SkippedInput, TooLarge
from spamnb.mail import lazy_re
# one message's checked read, stdin's, whether bytes look like mail, a name as output shows it: a module of their
# own (a cold classify's and a cold learn's path)
from spamnb.mail.checked import (MAX_MESSAGE_SIZE, display_name, looks_like_mail, open_checked,  # noqa: F401
                                 read_checked, read_stdin, stdin_message)

_mbox_module = None   # spamnb.mail.mbox, once _mbox() imported it


def _mbox():
    """:mod:`spamnb.mail.mbox`, imported by the first read that may meet an
    mbox (a file, a folder, ``-M``): reading the one message on stdin never
    does, and a cold ``spamnb classify`` does not load it."""
    global _mbox_module
    if _mbox_module is None:
        from spamnb.mail import mbox

        _mbox_module = mbox
    return _mbox_module

__all__ = ["MAX_MESSAGE_SIZE", "looks_like_mail", "CorpusError", "SkippedInput", "Refused", "TooLarge", "CorpusReport",
           "open_checked", "read_checked", "read_file", "read_message_file", "read_stdin",
           "messages_of", "read_messages", "walk_files", "file_messages", "shard_messages", "is_spam_name",
           "display_name", "SPAM_FOLDER_PREFIXES", "BULK_FOLDER_PREFIXES", "SKIPPED_FOLDER_NAMES"]


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


_MBOX_MESSAGE = lazy_re.pattern(r"#\d+$")   # the name of an mbox's message: "box#12"


class CorpusReport:
    """What reading a corpus did: messages read and files skipped, by reason."""

    EXAMPLES = 3
    FOLDERS = 8   # folders named per label in folders_summary()

    def __init__(self):
        self.read = 0
        self.skipped = {}    # reason -> files skipped for it
        self.examples = {}   # reason -> the first few paths skipped for it
        self.folders = {}    # (is_spam, folder) -> messages read with that label
        self._cut, self._folder = None, None   # add_folder's last path up to its last separator, and its folder

    def skip(self, path, reason, strict=False):
        if strict:
            raise CorpusError(f"{path}: {reason}")
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        paths = self.examples.setdefault(reason, [])
        if len(paths) < self.EXAMPLES:
            paths.append(display_name(os.fspath(path)))

    @property
    def n_skipped(self):
        return sum(self.skipped.values())

    def summary(self):
        if not self.skipped:
            return "nothing skipped"
        parts = []
        for reason, n in sorted(self.skipped.items()):
            paths = self.examples.get(reason, [])
            more = ", ..." if n > len(paths) else ""
            parts.append(f"{n} {reason}: {', '.join(paths)}{more}")
        return f"skipped {self.n_skipped} ({'; '.join(parts)})"

    def add_folder(self, is_spam, path, name):
        """Count a message read with the label ``is_spam`` from the file
        ``path`` (``name``: the message's, ``file#N`` in an mbox) under its
        folder: the mbox file itself, a file given itself (a corpus path
        that is a file: it is named by that path, ``name`` is ``path``),
        else the file's folder (a Maildir's, for its ``cur/`` and ``new/``)."""
        if name == path or ("#" in name and _MBOX_MESSAGE.search(name)):
            folder = path
        else:   # the folder of the path's part up to its last separator: the message before's, most often
            cut = path[:path.rfind(os.sep) + 1]
            if cut == self._cut:
                folder = self._folder
            else:
                folder = os.path.dirname(path) or "."
                head, leaf = os.path.split(folder)
                if leaf in ("cur", "new"):
                    folder = head or "."
                self._cut, self._folder = cut, folder
        key = (bool(is_spam), folder)
        self.folders[key] = self.folders.get(key, 0) + 1

    def labels_of(self, is_spam):
        """The folders read with the label ``is_spam``, with their numbers of messages."""
        return {folder: n for (label, folder), n in self.folders.items() if label == bool(is_spam)}

    def folders_summary(self):
        """Which folders were read as which label: ``read as spam: corpus/spam
        (50 messages), ...; as ham: ...`` (the first few folders of each, sorted)."""
        parts = []
        for is_spam, label in ((True, "spam"), (False, "ham")):
            found = sorted(self.labels_of(is_spam).items())
            names = [f"{display_name(f)} ({n} message{'s' if n != 1 else ''})" for f, n in found[:self.FOLDERS]]
            if len(found) > self.FOLDERS:
                names.append(f"{len(found) - self.FOLDERS} more")
            parts.append(f"{label}: {', '.join(names) if names else 'no folder'}")
        return "read as " + "; as ".join(parts)


# Maildir++ folders (".Junk", ".INBOX.Spam", ".Junk.2023", ...) and plain folders whose name says spam
SPAM_FOLDER_PREFIXES = ("spam", "junk")
# folders neither spam nor ham: read only inside a --spam path (or given as one)
BULK_FOLDER_PREFIXES = ("bulk",)
# folders never read: deleted mail is neither spam nor ham
SKIPPED_FOLDER_NAMES = ("trash", "deleted messages", "deleted items")


def _folder_name(name):
    """The last component of a Maildir++ folder name, lower case (".INBOX.Junk" -> "junk")."""
    return name.lstrip(".").rsplit(".", 1)[-1].lower() if name.startswith(".") else name.lower()


def _name_parts(name):
    """The parts of a folder name that say what it holds, lower case: a
    Maildir++ name's dot-separated parts (".Junk.2023" -> junk, 2023), a
    plain name whole."""
    return name[1:].lower().split(".") if name.startswith(".") else (name.lower(),)


def is_spam_name(name):
    return any(part.startswith(SPAM_FOLDER_PREFIXES) for part in _name_parts(name))


def _is_bulk_name(name):
    return not is_spam_name(name) and any(part.startswith(BULK_FOLDER_PREFIXES) for part in _name_parts(name))


def _is_maildir(path, names):
    return {"cur", "new"} <= set(names)


def _inside(path, real_root):
    """True when the link ``path`` resolves to a file inside the folder ``real_root`` (a real path)."""
    target = os.path.realpath(path)
    return target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep)


def _walk(top, onerror):
    """``os.walk(top, onerror=onerror)`` (top down, a link to a folder listed
    among the folders but not followed), each folder with the set of its
    names that are symbolic links, as its listing says them (``DirEntry``'s
    type: no ``lstat`` of each file; the folders left in ``dirnames`` when
    the caller resumes are walked)."""
    try:
        listing = os.scandir(top)
    except OSError as exc:
        onerror(exc)
        return
    dirnames, filenames, links = [], [], set()
    with listing:
        while True:
            try:
                entry = next(listing)
            except StopIteration:
                break
            except OSError as exc:
                onerror(exc)
                return
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            (dirnames if is_dir else filenames).append(entry.name)
            try:
                if entry.is_symlink():
                    links.add(entry.name)
            except OSError:
                pass
    yield top, dirnames, filenames, links
    for name in dirnames:
        if name not in links:
            yield from _walk(os.path.join(top, name), onerror)


def walk_files(root, report, strict, spam_folders="read", follow_links=True):
    """Regular files below ``root`` (sorted).  A Maildir's messages are in its
    ``cur/`` and ``new/`` (``tmp/`` holds mail still being delivered; files at
    its top, such as the ``maildirfolder`` marker or an IMAP server's indexes,
    are not mail); its hidden sub-folders are Maildir++ folders.  Other hidden
    folders and files are skipped and counted.  ``spam_folders``: "read"
    (every folder: a --spam path, or mail classified), "tree" (a training
    tree: its bulk folders are left out), "skip" (a ham path: its spam and
    bulk folders are left out); each folder left out is said.
    ``follow_links`` False: a link to a file outside ``root`` is skipped."""
    def onerror(exc):
        report.skip(exc.filename, "unreadable folder", strict)

    real_root = None if follow_links else os.path.realpath(root)
    for dirpath, dirnames, filenames, links in _walk(os.fspath(root), onerror):
        maildir = _is_maildir(dirpath, dirnames)
        kept = []
        for d in sorted(dirnames):
            path = os.path.join(dirpath, d)
            if maildir and d == "tmp":
                continue
            if d.startswith(".") and not maildir:
                report.skip(path, "hidden folder", strict)
                continue
            if _folder_name(d) in SKIPPED_FOLDER_NAMES:
                report.skip(path, "trash folder", strict)
                continue
            if spam_folders == "skip" and is_spam_name(d):
                report.skip(path, "spam folder inside a ham path", strict)
                continue
            if spam_folders != "read" and _is_bulk_name(d):
                report.skip(path, "bulk folder, neither spam nor ham (give it with --spam or --ham)", strict)
                continue
            if d in links:  # not followed (it may loop): said so
                report.skip(path, "link to a folder (not followed)", strict)
                continue
            kept.append(d)
        dirnames[:] = kept
        if maildir:
            continue  # the top of a Maildir holds its metadata, not mail
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if name.startswith("."):
                report.skip(path, "hidden file", strict)
                continue
            if real_root is not None and name in links and not _inside(path, real_root):
                report.skip(path, "link to a file outside the tree (--follow-links reads it)", strict)
                continue
            yield path


_READ_WHOLE = 4 << 20  # files up to this size are read whole (one read); larger mboxes are streamed


def _open_file(path, report, strict):
    """``(fd, size)`` of the regular file at ``path`` opened (its type checked
    before, so a FIFO or a device is never opened), or None (skipped and
    counted)."""
    try:
        return open_checked(path, max_size=None)
    except Refused as exc:
        report.skip(path, str(exc).partition(" (")[0], strict)   # "not a regular file": one reason for all kinds
    except OSError:
        report.skip(path, "broken link" if os.path.islink(path) else "unreadable", strict)
    return None


def file_messages(path, name, report, strict):
    """``(name, bytes)`` of the message, or each message of the mbox, in the file
    at ``path``.  Files are read in one read, except an mbox over 4 MiB, which
    is read a message at a time; a file over 64 MiB that is not an mbox is
    skipped (``larger than 64 MiB``), unread."""
    opened = _open_file(path, report, strict)
    if opened is None:
        return
    fd, size = opened
    try:
        if size > _READ_WHOLE and _mbox().is_mbox_start(os.pread(fd, 5, 0)):
            with os.fdopen(fd, "rb") as f:
                fd = None   # the file object closes it
                yield from _mbox_messages(path, name, f, report, strict, lambda: _file_bytes(f.fileno(), size))
            return
        try:
            data = read_checked(fd, size, MAX_MESSAGE_SIZE)
        except Refused as exc:
            report.skip(path, str(exc), strict)
            return
        os.close(fd)
        fd = None
        if _mbox().is_mbox_start(data):
            if _mbox().one_message(data):   # a message file with an envelope line: itself, as _mbox_messages gives it
                yield from _mbox_message(path, name, data, report, strict)
            else:
                yield from _mbox_messages(path, name, io.BytesIO(data), report, strict, lambda: data)
        elif not data or data.isspace():   # data.strip() empty, without its copy
            report.skip(path, "empty", strict)
        elif not looks_like_mail(data):
            report.skip(path, "not mail", strict)
        else:
            report.read += 1
            yield name, data
    except OSError:
        report.skip(path, "unreadable", strict)
    finally:
        if fd is not None:
            os.close(fd)


def _numbered(messages, name, whole=None):
    """``(name#N, bytes)`` of each of an mbox's ``messages``, numbered from 0.
    An mbox of one message keeps the plain ``name``, and is the whole file
    (``whole()``: its bytes, or None) when the file is that message and blank
    lines: a message file that starts with an envelope line (most of the
    SpamAssassin corpus's spam) is the same bytes, and falls in the same
    cross-validation fold, whether it is read as a file (``classify <
    FILE``, ``SpamFilter.fit(Path)``) or from a folder."""
    previous, i = next(messages, None), 0
    for message in messages:  # one ahead, to know whether there is more than one
        yield f"{name}#{i}", previous
        previous, i = message, i + 1
    if previous is not None:
        if not i and whole is not None:
            data = whole()
            if data is not None and data.startswith(previous) and not data[len(previous):].strip():
                previous = data
        yield (f"{name}#{i}" if i else name), previous


def _file_bytes(fd, size):
    """The bytes of the open regular file ``fd`` of ``size`` bytes (``pread``),
    or None when it is over :data:`MAX_MESSAGE_SIZE`."""
    return os.pread(fd, size, 0) if size <= MAX_MESSAGE_SIZE else None


def _mbox_messages(path, name, stream, report, strict, whole):
    """The messages of a corpus's mbox file, its skips counted in ``report``
    (``whole``: as :func:`_numbered`)."""
    empty = True
    for message_name, data in _numbered(_mbox().iter_mbox(stream), name, whole):
        empty = False
        yield from _mbox_message(path, message_name, data, report, strict)
    if empty:
        report.skip(path, "empty", strict)


def _mbox_message(path, name, data, report, strict):
    if not looks_like_mail(data):
        report.skip(f"{path}{name[name.rfind('#'):] if '#' in name else ''}", "not mail", strict)
        return
    report.read += 1
    yield name, data


def read_messages(path, report=None, strict=False, spam_folders="read", follow_links=True):
    """``(relpath, bytes)`` of each message in a folder, Maildir or mbox file,
    read one at a time (never the whole corpus at once); ``spam_folders`` and
    ``follow_links``: as :func:`walk_files`."""
    report = CorpusReport() if report is None else report
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CorpusError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        for file_path in walk_files(path, report, strict, spam_folders, follow_links):
            relpath = os.path.relpath(file_path, path).replace(os.sep, "/")
            yield from file_messages(file_path, relpath, report, strict)
        return
    yield from file_messages(path, os.path.basename(path), report, strict)


def shard_messages(path, name, start, end, first, report, strict=False):
    """``(name#N, bytes)`` of the messages of an mbox file's bytes ``start``
    to ``end`` (offsets of :func:`spamnb.mail.mbox.message_starts`), numbered from
    ``first``, read a message at a time, as :func:`read_messages` reads the
    whole file (the same skips)."""
    for i, data in enumerate(_mbox().iter_mbox_range(path, start, end)):
        yield from _mbox_message(path, f"{name}#{first + i}", data, report, strict)


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


def _path_mbox(stream, name, whole=None):
    """``(name, bytes)`` of each message of the mbox read from the binary
    ``stream`` (or held whole in ``bytes``), one at a time, none skipped
    (``whole``: as :func:`_numbered`)."""
    return _numbered(_mbox().split_mbox(stream) if type(stream) is bytes else _mbox().iter_mbox(stream), name, whole)


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
        if _mbox().is_mbox_start(head):
            yield from _path_mbox(io.BufferedReader(_Prefixed(head, stream), 1 << 16), name)
        else:
            yield name, _bounded_read(stream, name, head)
    elif _mbox().is_mbox_start(head):
        yield from _path_mbox(stream, name)
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
            if _mbox().is_mbox_start(head):
                yield from _path_mbox(stream, "-", lambda: _file_bytes(stream.fileno(), st.st_size))   # mapped
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
    are walked as :func:`read_messages` walks them
    (``spam_folders``, ``follow_links``: as there), what is skipped said on
    stderr."""
    if path == "-":
        if stdin_mbox:
            yield from _stdin_messages()
            return
        yield "-", stdin_message(sys.stdin.buffer)
        return
    try:
        fd, size = open_checked(path, max_size=None)
    except IsADirectoryError:
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
        large_mbox = size > _SMALL and _mbox().is_mbox_start(os.pread(fd, 5, 0))
    except OSError as exc:
        os.close(fd)
        raise CorpusError(f"{path}: {exc.strerror or exc}") from None
    if large_mbox:
        with os.fdopen(fd, "rb") as f:
            yield from _path_mbox(f, path, lambda: _file_bytes(f.fileno(), size))   # mapped, a message at a time
        return
    try:
        data = read_checked(fd, size, MAX_MESSAGE_SIZE)   # one read (a message: no file object)
    except Refused as exc:
        raise SkippedInput(f"{path}: {exc}, not an mbox; not read") from None
    except OSError as exc:
        raise CorpusError(f"{path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if _mbox().is_mbox_start(data):
        yield from _path_mbox(data, path, lambda: data)  # cut as the map of the file is cut above
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
