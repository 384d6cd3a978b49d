"""Reading labelled mail: folder trees, mbox files and Maildirs.

Layout of a training tree (``spamnb train DIR``): every file below ``DIR`` is
one message; it is spam when a folder on its way below ``DIR`` is named like
``spam*`` (case-insensitive, leading dots ignored, so a Maildir ``.Spam``
counts), ham otherwise.  Files directly in ``DIR`` take ``DIR``'s own name
(so ``spamnb train corpus/spam`` is all spam, while a corpus root called
``spamassassin`` does not make its ``easy_ham`` folder spam).  ``--spam PATH`` / ``--ham PATH`` label a
whole folder, Maildir (``cur/`` and ``new/``; ``tmp/`` is skipped) or mbox file.

What cannot be read is skipped and counted, never fatal (unless ``strict``):
unreadable files and folders, broken links and link loops, links to folders
(never followed: they may loop), sockets, devices and FIFOs, empty files,
files that are not mail (no header line at the top), hidden files.  The :class:`CorpusReport` says what was read and what was skipped.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field

__all__ = ["LabelledMessage", "CorpusReport", "CorpusError", "labelled_messages", "read_messages",
           "is_test_message", "looks_like_mail", "split_mbox"]

_HEADER_LINE = re.compile(rb"[\x21-\x39\x3b-\x7e]+[ \t]*:")
_MBOX_SEPARATOR = re.compile(rb"\n\n(?=From [^\n]*\n)")


class CorpusError(Exception):
    """A corpus path that cannot be used (missing, or a skipped file under ``strict``)."""


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
    examples: list = field(default_factory=list)  # (path, reason), the first few

    def skip(self, path, reason, strict=False):
        if strict:
            raise CorpusError(f"{path}: {reason}")
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        if len(self.examples) < 5:
            self.examples.append((os.fspath(path), reason))

    @property
    def n_skipped(self):
        return sum(self.skipped.values())

    def summary(self):
        if not self.skipped:
            return "nothing skipped"
        parts = ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items()))
        return f"skipped {self.n_skipped} ({parts})"


def is_test_message(relpath):
    """The project's fixed split: test when md5(relative path) % 5 == 0."""
    return int(hashlib.md5(relpath.encode("utf-8", "surrogateescape")).hexdigest(), 16) % 5 == 0


def looks_like_mail(data):
    """True when the first line (after an mbox ``From `` line) is a header field."""
    start = 0
    if data.startswith(b"From "):
        newline = data.find(b"\n")
        if newline < 0:
            return False
        start = newline + 1
    return _HEADER_LINE.match(data, start) is not None


def split_mbox(data):
    """The messages of an mbox file (each keeps its ``From `` line)."""
    return [part for part in _MBOX_SEPARATOR.split(data) if part.strip()]


def _is_spam_name(name):
    return name.lstrip(".").lower().startswith("spam")


def _walk_files(root, report, strict):
    """Regular files below ``root`` (sorted, hidden entries and Maildir tmp/ skipped)."""
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: report.skip(e.filename, "unreadable folder", strict)):
        maildir = {"cur", "new"} <= set(dirnames)  # a Maildir's tmp/ holds messages still being delivered
        kept = []
        for d in sorted(dirnames):
            if (d.startswith(".") and not _is_spam_name(d)) or (maildir and d == "tmp"):
                continue
            if os.path.islink(os.path.join(dirpath, d)):  # not followed (it may loop): said so
                report.skip(os.path.join(dirpath, d), "link to a folder (not followed)", strict)
                continue
            kept.append(d)
        dirnames[:] = kept
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if name.startswith("."):
                report.skip(path, "hidden file", strict)
                continue
            yield path


def _read_file(path, report, strict):
    try:
        st = os.stat(path)
    except OSError:
        report.skip(path, "broken link" if os.path.islink(path) else "unreadable", strict)
        return None
    if not stat.S_ISREG(st.st_mode):
        report.skip(path, "not a regular file", strict)
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        report.skip(path, "unreadable", strict)
        return None
    if not data.strip():
        report.skip(path, "empty", strict)
        return None
    return data


def read_messages(path, report=None, strict=False):
    """``(relpath, bytes)`` of each message in a folder, Maildir or mbox file."""
    report = CorpusReport() if report is None else report
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CorpusError(f"{path}: no such file or folder")
    if os.path.isdir(path):
        for file_path in _walk_files(path, report, strict):
            data = _read_file(file_path, report, strict)
            if data is None:
                continue
            if not looks_like_mail(data):
                report.skip(file_path, "not mail", strict)
                continue
            report.read += 1
            yield os.path.relpath(file_path, path).replace(os.sep, "/"), data
        return
    data = _read_file(path, report, strict)
    if data is None:
        return
    parts = split_mbox(data) if data.startswith(b"From ") else [data]
    for i, part in enumerate(parts):
        if not looks_like_mail(part):
            report.skip(f"{path}#{i}", "not mail", strict)
            continue
        report.read += 1
        yield (f"{os.path.basename(path)}#{i}" if len(parts) > 1 else os.path.basename(path)), part


def labelled_messages(trees=(), spam=(), ham=(), report=None, strict=False):
    """Messages with labels: ``trees`` labelled by folder names, ``spam``/``ham`` paths as given.

    Returns a list of :class:`LabelledMessage`.  Raises CorpusError for a path
    that does not exist (or, with ``strict``, for any skipped file).
    """
    report = CorpusReport() if report is None else report
    out = []
    for tree in trees:
        root_is_spam = _is_spam_name(os.path.basename(os.path.normpath(os.fspath(tree))))
        for relpath, data in read_messages(tree, report, strict):
            folders = relpath.split("/")[:-1]
            is_spam = any(_is_spam_name(part) for part in folders) if folders else root_is_spam
            out.append(LabelledMessage(relpath, data, is_spam))
    for paths, is_spam in ((spam, True), (ham, False)):
        for path in paths:
            out.extend(LabelledMessage(relpath, data, is_spam) for relpath, data in read_messages(path, report, strict))
    return out
