"""The model's journal: learned deltas appended beside the model instead of rewriting it.

``spamnb learn``/``forget`` (and TELL) change a few hundred counts of a model
of millions; rewriting the whole file for that made a learn cost several
classifies.  Instead each learned or forgotten message is one record appended
to ``MODEL.journal`` (beside the model's real path, like ``MODEL.lock``),
under the model's lock, flushed and fsynced before the command reports
success.  Every reader (:meth:`spamnb.SpamFilter.load`: ``classify``,
``serve``, the library) reads the model, then replays the journal over it.
A later compaction folds the journal into the model file (a whole, atomic
save) and removes the journal: automatically once the journal passes
:func:`compact_at` bytes, and whenever the model is saved whole anyway
(``train``, ``prune``, ``merge``, ``load``).

Layout (little-endian)::

    journal header, 48 bytes
      0   8  magic b"SPAMNB\\x00J"
      8   4  journal format version (VERSION, 2; 1 is read too: its records have no LEARN_SUMS)
      12  4  reserved (0)
      16  8  length of the model file the journal applies to
      24  8  that model file's checksum (its bytes 32..40, spamnb.persistence.store)
      32  8  reserved (0)
      40  8  checksum64 of bytes [0, 40)
    records, back to back, each starting on an 8-byte boundary
      0   4  payload length P
      4   4  sequence number (0, 1, 2, ... in the file)
      8   8  checksum64 of: the header's checksum, bytes [0, 8) of the record, the payload
      16  P  payload: one transaction (the changes of one message), padded to 8 bytes
             a sequence of operations, each padded to 8 bytes:
             LEARN/FORGET  <B op, B class, 2x, i day, I features before, I hashes, I new tokens, I text bytes>
                           then the message's token hashes (uint64, one per occurrence, as the
                           tokenizer gave them), and for LEARN the new tokens' UTF-8 lengths
                           (uint32 each) and their text, back to back
             RECORD/REMOVE <B op, B flags, H note, 16s digest>: the ledger of learned messages
                           (spamnb.estimator.ledger; flags bit 0 spam, bit 1 auto-learned; note: held-out bin + 1)
             HELD_OUT/HELD_OUT_BACK <B op, B class, 2x, f log-odds>: a held-out score counted / taken back
             PAIR_SCORES   <B op, B class, 6x, d words, d pairs, d weight, d scale>: a learned model's two
                           held-out scores (pair weight 0, and 1 minus that) and the pair weight and scale
                           its mixture chose after them (spamnb.estimator.variants.PairMixture)
             LEARN_SUMS    <B op, B class, 6x, d sum, d scale>: right after a LEARN (version 2), what it
                           adds to its class total and the factor its values were scaled by
                           (spamnb.bayes._score.learn_sums), so that a classify through the journal
                           (spamnb.persistence.journal_view) does not count each learn's tokens again;
                           a writer appending to a journal of version 1 leaves them out

Replay runs the very operations a learn or forget runs on a loaded model
(``Vocabulary.add`` with the recorded hashes, ``WordCounts.add``, the
ledger's record/remove), so model + journal gives the counts, vocabulary and
ledger of the model that learning and rewriting would have saved, to the
bit; a compaction writes that same file.  A reader replays in place: the
counts and logs of known tokens are changed where the model file was read
into its private memory, new tokens go to side tables, the class totals
are kept from the file's (``WordCounts.extend_in_place``,
``Vocabulary.extend_in_place``), so replaying costs in proportion to the
journal, not the model, and imports no numpy; its scores are those of the
rewritten model to rounding (the logs by C's log, not numpy's).

Safety.  The header names the model file it extends (its length and
checksum): a model replaced underneath (a compaction, ``train``, a model
moved in by hand) makes the journal stale, and a stale journal is never
applied (each replacement of the model removes or replaces it).  A record
is applied only when its checksum holds; replay stops at the first record
that is short or damaged (a learner killed mid-append; a disk error) with a
warning, and every record before it, each fsynced before its learn was
acknowledged, is kept.  The next writer cuts such a tail off before
appending.  Records must also fit the model they are replayed on (the
vocabulary size each names, the tokens a forget names): one that does not
stops the replay the same way.  A reader never crashes on a journal: any
failure to read or apply it is a warning, and the model is used as far as
the journal could be applied.
"""

import posix   # os's calls without os.py (a cold learn never loads it: spamnb.persistence.store)
import _stat as stat   # the S_IS* tests and S_IMODE, which stat.py re-exports: its module not run (0.2 M instructions)

# MustCompact and JournalWarning named when raised or warned (spamnb.errors makes each group's classes on first use:
# a reader that warns of nothing, a learn that appends, make neither)
from spamnb import errors
from spamnb.bayes import checks
# what a learn writes and its append (spamnb.persistence.records: a learn loads that module, not this one)
from spamnb.persistence.records import append, compact_at, pad as _pad  # noqa: F401 -- append, compact_at: re-exported
from spamnb.persistence.records import header_bytes as _header, record_bytes as _record_bytes
from spamnb.persistence.store import (JOURNAL_HEAD as HEAD, JOURNAL_MAGIC as MAGIC,
                                      JOURNAL_RECORD as RECORD, JOURNAL_SUFFIX as SUFFIX, JOURNAL_VERSION as VERSION,
                                      JOURNAL_VERSIONS as VERSIONS, Journal, journal_path, model_identity)

__all__ = ["SUFFIX", "MAGIC", "VERSION", "Journal", "JournalWarning", "journal_path", "model_identity",
           "compact_at", "read", "replay", "apply_records",
           "follow", "discard", "save_whole", "start", "signature"]

def signature(model_path):
    """(inode, size, mtime) of the model's journal, or None: a loaded model is
    out of date when this changed (``spamnb serve``'s model cache)."""
    try:
        st = posix.stat(journal_path(model_path))
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def __getattr__(name):
    """What this module's names stand for, loaded when first asked for (PEP 562):
    ``JournalWarning`` (``spamnb.errors``'s: its class is made then, which a
    classify through a journal that warns of nothing never does) and the
    journal's read at load (``read``, ``replay``, ``apply_records``:
    ``spamnb.persistence.journal_view``'s, which a first learn does without)."""
    if name == "JournalWarning":
        return errors.JournalWarning
    if name in ("read", "replay", "apply_records"):
        from spamnb.persistence import journal_view

        return getattr(journal_view, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------- a follower's reads (the load's: journal_view)
def follow(spam_filter, ledger=None):
    """Bring ``spam_filter`` (read by :meth:`SpamFilter.load`, its journal
    replayed then, and followed since) up to its journal as it is now: the
    records appended since the last one it applied are read (only those
    bytes) and applied as :func:`replay` applies them, the same operations
    in the same order, so the filter is the one model + journal read afresh
    give, to the bit.  ``ledger``: what the records' ledger operations
    change (default the filter's, :func:`deltas.ledger_for`; a reader that
    never forgets may pass one that ignores them).

    The caller has checked that the model file is still the one read (its
    device, inode, size and mtime).  Returns the number of records applied
    (0: nothing new, or the next record is not whole yet: a writer is
    appending it), or None when the filter cannot follow: the journal was
    replaced, is another model file's, was cut below what was applied, or a
    record does not fit (then the filter may hold part of that record, as a
    fresh reader would); the caller reads the model again.  Never raises
    for what the journal holds."""
    journal = spam_filter.journal_
    if (journal is None or journal.identity is None or journal.status not in ("none", "ok")
            or journal.end is None):
        return None
    known = journal.status == "ok"
    try:
        last = journal.payloads[-1] if known and journal.payloads else None
    except errors.ModelError:   # read through a buffer at load (journal_view.read), rewritten in place since
        return None
    # read again from the start of the last record applied: it must be there unchanged
    if last is not None:
        last = bytes(last) + b"\0" * _pad(len(last))   # as written (a writer keeps its payloads unpadded)
    at = (journal.end - RECORD.size - len(last)) if last is not None else (HEAD.size if known else 0)
    try:
        fd = posix.open(journal.path, posix.O_RDONLY | getattr(posix, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return 0 if not known else None
    except OSError:
        return None
    try:
        size = posix.fstat(fd).st_size
        if size < journal.end or size < HEAD.size:
            return None
        head = posix.pread(fd, HEAD.size, 0)
        data = checks.read_range(fd, at, size)
    except OSError:
        return None
    finally:
        posix.close(fd)
    version = journal.version if known else int.from_bytes(head[8:12], "little")   # a journal new since: either
    if version not in VERSIONS or head != _header(journal.identity, version):
        return None
    check = head[40:48]
    view = memoryview(data)
    n = len(journal.payloads) if known else 0
    offset = 0
    if last is not None:
        if bytes(view[:RECORD.size]) != _record_bytes(check, n - 1, last)[:RECORD.size]:
            return None
        offset = RECORD.size + len(last)
    elif not known:
        offset = HEAD.size
    payloads = []
    while offset + RECORD.size <= len(view):
        length, sequence, checksum = RECORD.unpack_from(view, offset)
        end = offset + RECORD.size + length
        if (length % 8 or end > len(view) or sequence != n + len(payloads)
                or checks.checksum64(check + view[offset:offset + 8].tobytes()
                                      + view[offset + 16:end].tobytes()) != checksum):
            break   # not whole yet (a writer appending), or damaged: a later look, or a writer, decides
        payloads.append(view[offset + RECORD.size:end])
        offset = end
    if not payloads:
        if known:
            journal.size = size
        return 0
    from spamnb.persistence import deltas

    if ledger is None:
        ledger = deltas.ledger_for(spam_filter)
    deltas.lazy_ages(spam_filter)
    if not known:
        journal.status, journal.head, journal.payloads, journal.end = "ok", check, [], HEAD.size
        journal.version = version
    for payload in payloads:
        try:
            deltas.apply(spam_filter, ledger, payload)
        except (ValueError, IndexError, TypeError, MemoryError):   # a layout's short read: ValueError (store.Layout)
            journal.end = None   # no more following, no appending after it
            return None
        journal.payloads.append(payload)
        journal.end += RECORD.size + len(payload)
    journal.size = size
    return len(payloads)


def start(real):
    """Leave a journal without records beside the model just saved whole at
    ``real`` (under its lock), in place of the one it had: its header alone,
    naming that file, written whole to a temporary file, renamed into
    place, then the file and its folder fsynced, as a learn starting a
    journal writes it.  The model's next learn then appends its record to
    it (one fsync) instead of starting the journal (a file written, renamed,
    and it and its folder fsynced); a reader knows it by its size and reads
    none of it (``spamnb.persistence.codec``).  Best effort: when it cannot
    be written, the old journal is removed (it is stale: the model was
    replaced) and the first learn starts one, as before."""
    from spamnb.persistence.store import replace_file

    identity = model_identity(real)
    if identity is not None:
        header = _header(identity)
        try:
            old = posix.stat(real)
            # what it replaces is never applied (none, or the model's journal before this save: stale now)
            replace_file(journal_path(real), lambda f: f.write(header), old, tidy=False, losable=True)
            return
        except OSError:
            pass
    discard(real)


def compact(spam_filter, real, backup=None):
    """Fold the journal into the model: save ``spamnb_filter`` (loaded, with its
    journal replayed, under the lock) whole at ``real``, then remove the
    journal.  The derived logs are computed afresh, so the file is the one
    learning and rewriting would have written."""
    save_whole(spam_filter, real, backup)


def save_whole(spam_filter, real, backup=None):
    """Save ``spam_filter`` whole at ``real`` (under its lock) and replace the
    model's journal by one without records (:func:`start`): the journal was
    replayed into the filter when the model was loaded, or belongs to the
    model replaced (``train``, ``load``, ``merge``, ``prune``).  With a
    ``backup`` (where the model replaced is kept), the journal goes beside
    it (``BACKUP.journal``): it extends that very file, so loading the
    backup gives the model replaced with its learns."""
    spam_filter.save(real, backup=backup)
    if backup is not None:
        _keep_with_backup(real, posix.fspath(backup))
    start(real)


def _keep_with_backup(real, backup):
    """Move the journal of the model at ``real`` to ``backup + SUFFIX`` (a
    rename: a link planted there is replaced, never followed), or remove an
    older backup's journal there when the model had none."""
    source, target = real + SUFFIX, backup + SUFFIX
    try:
        if stat.S_ISREG(posix.lstat(source).st_mode):
            posix.replace(source, target)
            return
    except OSError:
        pass
    try:
        posix.unlink(target)
    except OSError:
        pass


def discard(model_path):
    """Remove the journal of the model at ``model_path`` (after the model was
    saved whole: the journal is stale, and was read into the save when the
    model was loaded under the lock).  Best effort."""
    try:
        posix.unlink(journal_path(model_path))
    except OSError:
        pass
