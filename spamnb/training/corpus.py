"""Labelled mail: a corpus's messages (read by :mod:`spamnb.mail.reader`,
the one reader of mail) labelled spam or ham by their folders, and the
project's fixed train/test split.

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

What a folder holds, and what is skipped (and said) when it cannot be read:
:mod:`spamnb.mail.reader`; the :class:`CorpusReport` says what was read and
skipped, and which folders were read as which label.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from spamnb.mail.reader import CorpusError, CorpusReport, is_spam_name, read_messages

__all__ = ["LabelledMessage", "CorpusReport", "CorpusError", "labelled_messages", "iter_labelled",
           "is_test_message", "tree_label"]


@dataclass(frozen=True)
class LabelledMessage:
    relpath: str   # path relative to the corpus root, '/'-separated (mbox messages: "file#N")
    data: bytes
    is_spam: bool


def is_test_message(relpath):
    """The project's fixed split: test when md5(relative path) % 5 == 0."""
    return int(hashlib.md5(relpath.encode("utf-8", "surrogateescape")).hexdigest(), 16) % 5 == 0


def tree_label(relpath, root_is_spam):
    folders = relpath.split("#", 1)[0].split("/")[:-1]
    if not folders:
        return root_is_spam
    return any(is_spam_name(part) for part in folders)


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
        root_is_spam = is_spam_name(os.path.basename(os.path.normpath(tree)))
        is_dir = os.path.isdir(tree)
        for relpath, data in read_messages(tree, report, strict, "tree", follow_links):
            label = tree_label(relpath, root_is_spam)
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


def labelled_messages(trees=(), spam=(), ham=(), report=None, strict=False, follow_links=False):
    """:func:`iter_labelled` as a list (the whole corpus in memory: for
    evaluation, which needs it; training streams)."""
    return list(iter_labelled(trees, spam, ham, report, strict, follow_links))
