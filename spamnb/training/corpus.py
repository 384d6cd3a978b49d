"""Reading labelled mail: folder trees, mbox files and Maildirs, one message at a time.

Layout of a training tree (``spamnb train DIR``): every file below ``DIR`` is
a message, or an mbox of messages; it is spam when a folder on its way below
``DIR`` is a spam folder, ham otherwise.  A spam folder's name starts with
``spam`` or ``junk`` (case-insensitive); a Maildir++ folder's name is a
spam folder's when any of its dot-separated parts starts so (``.Junk``,
``.INBOX.Spam``, ``.Junk.2023``, ``.Spam.Archive``).  A bulk folder (a name,
or a Maildir++ part, starting with ``bulk``: Yahoo's and others' name for
their spam folder, which may hold wanted newsletters too) is neither: it
is skipped, and said so, unless it is inside a ``--spam`` path or given as
one.  Files directly in ``DIR`` take ``DIR``'s own name (so ``spamnb train
corpus/spam`` is all spam, while a corpus root called ``spamassassin`` does
not make its ``easy_ham`` folder spam).  ``--spam PATH`` / ``--ham PATH``
label a whole folder, Maildir or mbox file; the spam and bulk folders
inside a ``--ham`` path are left out (a Maildir's ``.Junk`` is not ham).

Maildir and Maildir++: a folder with ``cur/`` and ``new/`` is a Maildir; its
messages are the files in those two (``tmp/`` holds mail still being
delivered; files at its top, such as the ``maildirfolder`` marker and an IMAP
server's indexes, are not mail), and its hidden sub-folders (``.Junk``,
``.Archive``, ``.INBOX.Sent``) are Maildir++ folders, read like the others.
Trash folders are not read (deleted mail is neither spam nor ham).

What cannot be read is skipped, counted and named, never fatal (unless
``strict``): unreadable files and folders, broken links and link loops, links
to folders (never followed: they may loop), links to files outside the tree
given (unless ``follow_links``: ``spamnb train --follow-links``), sockets,
devices and FIFOs (never opened: their type is checked first), files larger
than :data:`~spamnb.model.messages.MAX_MESSAGE_SIZE` (64 MiB) that are not an
mbox (an mbox is read a message at a time, each cut at 64 MiB), empty files,
files that are not mail (no header line at the top), hidden files and
folders.  The :class:`CorpusReport` says what was read and what was skipped,
and which folders were read as which label.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from dataclasses import dataclass, field

from spamnb.mail.mbox import is_mbox_start, iter_mbox, looks_like_mail
from spamnb.model import messages as _messages
from spamnb.model.messages import MAX_MESSAGE_SIZE, Refused, display_name, read_checked
from spamnb.training.errors import CorpusError

__all__ = ["LabelledMessage", "CorpusReport", "CorpusError", "labelled_messages", "iter_labelled",
           "read_messages", "is_test_message", "looks_like_mail", "split_mbox", "walk_files", "file_messages",
           "shard_messages", "tree_label", "is_spam_name"]

_MBOX_MESSAGE = re.compile(r"#\d+$")   # the name of an mbox's message: "box#12"


@dataclass(frozen=True)
class LabelledMessage:
    relpath: str   # path relative to the corpus root, '/'-separated (mbox messages: "file#N")
    data: bytes
    is_spam: bool


@dataclass
class CorpusReport:
    """What reading a corpus did: messages read and files skipped, by reason."""

    read: int = 0
    skipped: dict = field(default_factory=dict)
    examples: dict = field(default_factory=dict)  # reason -> the first few paths skipped for it
    folders: dict = field(default_factory=dict)   # (is_spam, folder) -> messages read with that label

    EXAMPLES = 3
    FOLDERS = 8   # folders named per label in folders_summary()

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
        if name == path or _MBOX_MESSAGE.search(name):
            folder = path
        else:
            folder = os.path.dirname(path) or "."
            head, leaf = os.path.split(folder)
            if leaf in ("cur", "new"):
                folder = head or "."
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


def is_test_message(relpath):
    """The project's fixed split: test when md5(relative path) % 5 == 0."""
    return int(hashlib.md5(relpath.encode("utf-8", "surrogateescape")).hexdigest(), 16) % 5 == 0


def split_mbox(data):
    """The messages of an mbox held in memory (each keeps its ``From `` line);
    see :mod:`spamnb.mail.mbox` for where a message starts."""
    return [part for part in iter_mbox(io.BytesIO(data)) if part.strip()]


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


def _is_spam_name(name):
    return any(part.startswith(SPAM_FOLDER_PREFIXES) for part in _name_parts(name))


def _is_bulk_name(name):
    return not _is_spam_name(name) and any(part.startswith(BULK_FOLDER_PREFIXES) for part in _name_parts(name))


def _is_maildir(path, names):
    return {"cur", "new"} <= set(names)


def _inside(path, real_root):
    """True when the link ``path`` resolves to a file inside the folder ``real_root`` (a real path)."""
    target = os.path.realpath(path)
    return target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep)


def _walk_files(root, report, strict, spam_folders="read", follow_links=True):
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
    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror):
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
            if spam_folders == "skip" and _is_spam_name(d):
                report.skip(path, "spam folder inside a ham path", strict)
                continue
            if spam_folders != "read" and _is_bulk_name(d):
                report.skip(path, "bulk folder, neither spam nor ham (give it with --spam or --ham)", strict)
                continue
            if os.path.islink(path):  # not followed (it may loop): said so
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
            if real_root is not None and os.path.islink(path) and not _inside(path, real_root):
                report.skip(path, "link to a file outside the tree (--follow-links reads it)", strict)
                continue
            yield path


_READ_WHOLE = 4 << 20  # files up to this size are read whole (one read); larger mboxes are streamed


def _open_file(path, report, strict):
    """``(fd, size)`` of the regular file at ``path`` opened (its type checked
    before, so a FIFO or a device is never opened), or None (skipped and
    counted)."""
    try:
        return _messages.open_checked(path, max_size=None)   # through the module: the one opener
    except Refused as exc:
        report.skip(path, str(exc).partition(" (")[0], strict)   # "not a regular file": one reason for all kinds
    except OSError:
        report.skip(path, "broken link" if os.path.islink(path) else "unreadable", strict)
    return None


def _file_messages(path, name, report, strict):
    """``(name, bytes)`` of the message, or each message of the mbox, in the file
    at ``path``.  Files are read in one read, except an mbox over 4 MiB, which
    is read a message at a time; a file over 64 MiB that is not an mbox is
    skipped (``larger than 64 MiB``), unread."""
    opened = _open_file(path, report, strict)
    if opened is None:
        return
    fd, size = opened
    try:
        if size > _READ_WHOLE and is_mbox_start(os.pread(fd, 5, 0)):
            with os.fdopen(fd, "rb") as f:
                fd = None   # the file object closes it
                yield from _mbox_messages(path, name, f, report, strict)
            return
        try:
            data = read_checked(fd, size, MAX_MESSAGE_SIZE)
        except Refused as exc:
            report.skip(path, str(exc), strict)
            return
        os.close(fd)
        fd = None
        if is_mbox_start(data):
            yield from _mbox_messages(path, name, io.BytesIO(data), report, strict)
        elif not data.strip():
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


def _mbox_messages(path, name, stream, report, strict):
    messages = iter_mbox(stream)
    previous, i = next(messages, None), 0
    for message in messages:  # one ahead: a one-message mbox keeps the file's name
        yield from _mbox_message(path, f"{name}#{i}", previous, report, strict)
        previous, i = message, i + 1
    if previous is not None:
        yield from _mbox_message(path, f"{name}#{i}" if i else name, previous, report, strict)
    else:
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
        for file_path in _walk_files(path, report, strict, spam_folders, follow_links):
            relpath = os.path.relpath(file_path, path).replace(os.sep, "/")
            yield from _file_messages(file_path, relpath, report, strict)
        return
    yield from _file_messages(path, os.path.basename(path), report, strict)


def _tree_label(relpath, root_is_spam):
    folders = relpath.split("#", 1)[0].split("/")[:-1]
    if not folders:
        return root_is_spam
    return any(_is_spam_name(part) for part in folders)


def iter_labelled(trees=(), spam=(), ham=(), report=None, strict=False, follow_links=False):
    """:class:`LabelledMessage` one at a time: ``trees`` labelled by folder
    names, ``spam``/``ham`` paths as given (spam and bulk folders inside a
    ``ham`` path are left out: they are not ham; bulk folders of a tree
    too).  Links to files outside a tree are skipped unless
    ``follow_links``.  Raises CorpusError for a path that does not exist (or,
    with ``strict``, for any skipped file)."""
    report = CorpusReport() if report is None else report
    for tree in trees:
        tree = os.fspath(tree)
        root_is_spam = _is_spam_name(os.path.basename(os.path.normpath(tree)))
        is_dir = os.path.isdir(tree)
        for relpath, data in read_messages(tree, report, strict, "tree", follow_links):
            label = _tree_label(relpath, root_is_spam)
            report.add_folder(label, os.path.join(tree, relpath.partition("#")[0]) if is_dir else tree,
                              relpath if is_dir else tree)
            yield LabelledMessage(relpath, data, label)
    for paths, is_spam in ((spam, True), (ham, False)):
        for path in paths:
            path = os.fspath(path)
            is_dir = os.path.isdir(path)
            for relpath, data in read_messages(path, report, strict, "read" if is_spam else "skip", follow_links):
                report.add_folder(is_spam, os.path.join(path, relpath.partition("#")[0]) if is_dir else path,
                                  relpath if is_dir else path)
                yield LabelledMessage(relpath, data, is_spam)


# The pieces iter_labelled is made of, for spamnb.training.pipeline, which plans a corpus
# in one process and reads it in others by the same rules.
walk_files = _walk_files
file_messages = _file_messages
tree_label = _tree_label
is_spam_name = _is_spam_name


def shard_messages(path, name, start, end, first, report, strict=False):
    """``(name#N, bytes)`` of the messages of an mbox file's bytes ``start``
    to ``end`` (offsets of :func:`spamnb.mail.mbox.message_starts`), numbered from
    ``first``, read a message at a time, as :func:`read_messages` reads the
    whole file (the same skips)."""
    from spamnb.mail.mbox import iter_mbox_range

    for i, data in enumerate(iter_mbox_range(path, start, end)):
        yield from _mbox_message(path, f"{name}#{first + i}", data, report, strict)


def labelled_messages(trees=(), spam=(), ham=(), report=None, strict=False, follow_links=False):
    """:func:`iter_labelled` as a list (the whole corpus in memory: for
    evaluation, which needs it; training streams)."""
    return list(iter_labelled(trees, spam, ham, report, strict, follow_links))
