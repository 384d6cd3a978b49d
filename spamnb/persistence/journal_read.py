"""A model's journal, read: the file checked and its records taken
(:func:`read`), and a model loaded with it (:func:`replay`: scored through
by ``spamnb.persistence.journal_view`` when the model was read in part,
else its records applied, :func:`apply_records`).  What a classify
through a journal loads; the writers (append, compaction) and a
follower's reads (``follow``) are ``spamnb.persistence.journal``'s,
whose docstring describes the file and its safety.
"""

import os
import _struct as struct   # what struct.py re-exports: a classify through the journal does without it

from spamnb.bayes import checks
from spamnb.persistence import deltas
from spamnb.persistence.store import JOURNAL_SUFFIX as SUFFIX, Journal, journal_path

__all__ = ["MAGIC", "VERSION", "VERSIONS", "HEAD", "RECORD", "read", "replay", "apply_records"]

MAGIC = b"SPAMNB\x00J"
VERSION = 2
VERSIONS = (1, 2)   # read: a journal of version 1 is appended to as version 1 (deltas.without_sums)
HEAD = struct.Struct("<8sIIQQQQ")      # magic, version, reserved, model length, model checksum, reserved, checksum
RECORD = struct.Struct("<IIQ")         # payload length, sequence number, checksum


def _warn(message):
    import warnings

    from spamnb.errors import JournalWarning

    warnings.warn(message, JournalWarning, stacklevel=3)


def _read_bytes(path):
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        chunks = []
        while True:
            chunk = os.read(fd, max(size + 1, 65536))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def read(model_path, identity):
    """Read the journal of the model at ``model_path`` whose file is ``identity``
    (``(length, checksum)``); never raises for what the journal holds."""
    path = journal_path(model_path)
    try:
        data = _read_bytes(path)
    except FileNotFoundError:
        return Journal(path, identity)
    except OSError as exc:
        _warn(f"{path}: cannot read the model's journal ({exc.strerror or exc}); the model is used without it")
        return Journal(path, identity, "stale")
    if len(data) < HEAD.size:
        # a journal is created whole (renamed into place): a short one is not ours to extend
        return Journal(path, identity, "stale", size=len(data))
    magic, version, _r, length, checksum, _r2, head_sum = HEAD.unpack_from(data)
    if magic != MAGIC or version not in VERSIONS or checks.checksum64(data[:40]) != head_sum:
        _warn(f"{path}: not a journal of this spamnb (or damaged); the model is used without it")
        return Journal(path, identity, "stale", size=len(data))
    if identity is None or (length, checksum) != tuple(identity):
        return Journal(path, identity, "stale", size=len(data))
    head = data[40:48]
    view = memoryview(data)
    spans, at = checks.journal_records(data, head, HEAD.size)   # each record's length, place and checksum
    return Journal(path, identity, "ok", [view[a:b] for a, b in spans], at, len(data), head, version)


def replay(spam_filter, model_path, header, arrays=None):
    """Apply the journal of the model at ``model_path`` to ``spam_filter``, just
    loaded from it (``header``, ``arrays``: what the store read; the arrays' writable
    bytes, when given, are patched in place).  Returns
    True when the model file read is no longer the one on disk and the
    journal goes with the new one: the caller reads the model again.  Called
    by :meth:`SpamFilter.load`; never raises for what the journal holds."""
    identity = header.get("_identity")
    journal = read(model_path, identity)
    if not deltas.attach(spam_filter, model_path, identity, journal, arrays):
        return True   # the model was replaced (a compaction) after it was read
    if journal.status != "ok" or not journal.payloads:
        if journal.damaged_tail:
            _warn_tail(journal, 0)
        return False
    if spam_filter.unread_ is not None:   # read in part: its learns scored, not replayed, if they can be
        from spamnb.persistence.journal_view import view

        pending = view(spam_filter, journal, apply_records)
        if pending is not None:
            pending.count_scores(spam_filter)
            spam_filter.set_fitted(pending_journal_=pending)   # replayed by deltas.read_whole when needed
            if journal.damaged_tail:
                _warn_tail(journal, len(journal.payloads))
            return False
    deltas.read_whole(spam_filter)   # what the records change (a model read in part: store.map_model)
    apply_records(spam_filter, journal)
    return False


def apply_records(spam_filter, journal, scores=True, tail=True):
    """Apply ``journal``'s records to ``spam_filter`` (:func:`replay`; ``scores``
    False: their held-out scores left out, counted already by a
    ``spamnb.persistence.journal_view.JournalView``, ``tail`` False: a damaged tail
    warned of already); a record that does not fit stops it, with a warning."""
    deltas.lazy_ages(spam_filter)
    ledger = deltas.ledger_for(spam_filter)
    applied = 0
    for payload in journal.payloads:
        try:
            deltas.apply(spam_filter, ledger, payload, scores=scores)
        except (ValueError, IndexError, TypeError, struct.error, MemoryError) as exc:
            _warn(f"{journal.path}: record {applied} does not fit the model ({exc}); "
                  f"it and the {len(journal.payloads) - applied - 1} after it are ignored")
            journal.end = None   # a writer must not append after it: it compacts what applied
            break
        applied += 1
    if journal.damaged_tail and tail:
        _warn_tail(journal, applied)
    del journal.payloads[applied:]
    if not len(ledger):
        spam_filter.set_fitted(ledger_=None)   # as a model without a ledger loads


def _writer_active(journal):
    """True while a writer holds the model's lock: a tail it is appending
    is incomplete until it is acknowledged, and is no damage to warn of."""
    from spamnb.persistence.store import holds_lock

    real = journal.path[:-len(SUFFIX)]
    if holds_lock(real):   # this process is the writer: the tail is no append in progress
        return False
    lock_path = real + ".lock"
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        return not checks.try_lock(fd, exclusive=False)   # flock(LOCK_SH | LOCK_NB): held by a writer?
    except OSError:
        return False
    finally:
        os.close(fd)   # closing drops the shared lock taken


def _warn_tail(journal, applied):
    if _writer_active(journal):
        return
    _warn(f"{journal.path}: the last {journal.size - journal.end} bytes are incomplete or damaged "
          f"(a learn interrupted before it was acknowledged?) and are ignored; "
          f"the {applied} record{'s' if applied != 1 else ''} before them apply")
