"""What a learn writes to a model's journal (``spamnb.persistence.journal``'s
records, :mod:`spamnb.persistence.deltas` describes their operations): each
operation encoded (padded to 8 bytes), a transaction as a journal of
version 1 keeps it (:func:`without_sums`), the places of a message's new
tokens, and whether a learner appends from the model file alone
(:func:`unjournaled`); and the append of a learn's transactions to the
journal (:func:`append`: framed, checksummed, fsynced under the model's
lock; ``spamnb.persistence.journal`` re-exports it beside the journal's
other writers), with the journal's size past which a learn folds it into
the model (:func:`compact_at`).  A transaction's ledger operations are read back by
one compiled pass (``spamnb.bayes.checks.journal_ledger``).  A learn
that appends (``spamnb.model.learning``) loads this module, not the
replay's (``deltas``, 1.1 M instructions to import); ``deltas`` re-exports
these names for the replay and the whole model's learners.
"""

import posix   # os's calls without os.py (a cold learn never loads it: spamnb.persistence.store)
import _stat as stat   # the S_IS* tests, which stat.py re-exports: its module not run
from array import array

# MustCompact named when raised (spamnb.errors makes each group's classes on first use: an append makes none)
from spamnb import errors
from spamnb.bayes import checks, token_kernels   # token_kernels: loaded by the vocabulary already
from spamnb.persistence.store import (JOURNAL_EMPTY_SIZE as EMPTY_SIZE, JOURNAL_HEAD as HEAD, JOURNAL_MAGIC as MAGIC,
                                      JOURNAL_RECORD as RECORD, JOURNAL_SUFFIX as SUFFIX, JOURNAL_VERSION as VERSION,
                                      JOURNAL_VERSIONS as VERSIONS)
from spamnb.persistence.store import (HELD_OUT_RECORD, LEARN_SUMS_RECORD, LEDGER_RECORD, LEDGER_SIZE, OP_FORGET,
                                      OP_HELD_OUT, OP_HELD_OUT_BACK, OP_LEARN, OP_LEARN_SUMS, OP_PAIR_SCORES,
                                      OP_RECORD, OP_REMOVE, PAIR_SCORES_RECORD, TOKENS_RECORD)

__all__ = ["pad", "encode_tokens", "encode_learn_sums", "without_sums", "encode_ledger", "encode_held_out",
           "encode_pair_scores", "unjournaled", "first_places", "mixture_held_out", "class_of",
           "float32", "compact_at", "header_bytes", "record_bytes", "append"]


def pad(n):
    """The zero bytes after ``n`` bytes of operations to the next 8-byte boundary."""
    return (-n) % 8


def _op_size(payload, at):
    """The size of the operation at ``at`` of ``payload``, its padding included;
    ValueError for one cut short or unknown."""
    op = payload[at]
    if op in (OP_LEARN, OP_FORGET):
        if at + TOKENS_RECORD.size > len(payload):
            raise ValueError("a record is cut short")
        _op, _cls, _day, _n_before, n_hashes, n_new, n_text = TOKENS_RECORD.unpack_from(payload, at)
        size = TOKENS_RECORD.size + 8 * n_hashes + 4 * n_new + n_text
        return size + pad(at + size)
    if op in (OP_RECORD, OP_REMOVE):
        return LEDGER_SIZE
    if op in (OP_HELD_OUT, OP_HELD_OUT_BACK):
        return HELD_OUT_RECORD.size
    if op == OP_PAIR_SCORES:
        return PAIR_SCORES_RECORD.size
    if op == OP_LEARN_SUMS:
        return LEARN_SUMS_RECORD.size
    raise ValueError(f"unknown operation {op}")


def encode_tokens(op, cls, day, n_before, hashes, lengths=b"", text=b""):
    hashes = memoryview(hashes).cast("B")
    lengths = memoryview(lengths).cast("B")
    head = TOKENS_RECORD.pack(op, cls, day, n_before, len(hashes) // 8, len(lengths) // 4, len(text))
    body = b"".join((head, hashes, lengths, text))
    return body + b"\0" * pad(len(body))


def encode_learn_sums(spam_filter, cls, hashes):
    """LEARN_SUMS of a learn of class ``cls`` of the token ``hashes`` into
    ``spam_filter``: the sum and scale ``bayes/_score.learn_sums`` gives under
    its counts transform and length, written right after the LEARN."""
    from spamnb.bayes.token_kernels import learn_sums

    from spamnb.estimator.defaults import COUNT_TRANSFORMS

    total, scale = learn_sums(hashes, COUNT_TRANSFORMS[spam_filter.counts], float(spam_filter.length_norm))
    return LEARN_SUMS_RECORD.pack(OP_LEARN_SUMS, cls, total, scale)


def without_sums(payload):
    """``payload`` (a transaction) without its LEARN_SUMS: what a journal of
    version 1 holds (a reader of that version knows no such operation)."""
    payload = memoryview(payload).cast("B")
    at, n, kept, start = 0, len(payload), [], 0
    while at < n and payload[at]:
        size = _op_size(payload, at)
        if payload[at] == OP_LEARN_SUMS:
            kept.append(payload[start:at])
            start = at + size
        at += size
    kept.append(payload[start:])
    return b"".join(kept)


def encode_ledger(op, label, digest, auto=False, held_out=None):
    """RECORD/REMOVE: ``label`` 0/1, ``auto`` learned by auto-learn, ``held_out`` its held-out bin (or None)."""
    note = 0 if held_out is None else int(held_out) + 1
    record = LEDGER_RECORD.pack(op, int(bool(label)) | (2 if auto else 0), note, digest)
    return record + b"\0" * (LEDGER_SIZE - len(record))


def encode_held_out(cls, log_odds, back=False):
    return HELD_OUT_RECORD.pack(OP_HELD_OUT_BACK if back else OP_HELD_OUT, cls, log_odds)


def encode_pair_scores(cls, words, pairs, weight, scale):
    return PAIR_SCORES_RECORD.pack(OP_PAIR_SCORES, cls, words, pairs, weight, scale)


def unjournaled(spam_filter):
    """Whether a learner can append to ``spam_filter`` (loaded in part, mapped)
    from the message's own entries of its file, with no journal record to
    view (``spamnb.persistence.journal_view.learner``): its counts held in
    place as loaded, of two classes, without holes, as long as its
    vocabulary, and its journal read and empty (or none)."""
    journal = spam_filter.journal_
    if (spam_filter.pending_journal_ is not None or spam_filter.unread_ is None or journal is None
            or (journal.status == "ok" and journal.n_records)):
        return False
    vocab, counts, _ages = spam_filter.replayed()   # nothing pending: as loaded
    return not (counts is None or vocab is None or spam_filter.mapped_file_ is None or not counts.in_place
                or not counts.as_loaded or counts.n_holes or counts.n_classes != 2
                or "feature_count" not in spam_filter.unread_.offsets or counts.n_features_ != vocab.n_features)


def first_places(hashes, new):
    """The positions in ``hashes`` (``array('Q')``, a message's occurrences) of
    the tokens of the set ``new``, each at its first occurrence, in order
    (``array('i')``): where ``Vocabulary.add`` numbers a message's new tokens,
    and so their text's order in a record.  One compiled pass over the
    occurrences (``token_kernels.first_places``); ValueError for a token of
    ``new`` not among them."""
    return token_kernels.first_places(hashes, new)


# ---------------------------------------------------------------------------- what a learn records (model/learning)


def mixture_held_out(mixture, kernel_of, stream, cls, ops, counts):
    """A learn's held-out score under a pair-weight mixture (``spamnb.estimator.variants``):
    None when the model's scores do not count yet (``counts`` False), else
    the log-odds at the mixture's weight and scale, from the two held-out
    scores (``variants.pair_scores``, one pass of the kernel ``kernel_of()``
    gives), which the mixture then counts (its weight moves) and a PAIR_SCORES
    operation records, as the online harness's ``OnlineModel`` does."""
    from spamnb.estimator.variants import held_out_score, pair_scores

    if not counts:
        return None
    words, pairs = pair_scores(kernel_of(), stream.hashes, stream.pairs_start)
    held_out = held_out_score(words, pairs, mixture.weight, mixture.scale)
    mixture.add(words, pairs, cls)
    ops.append(encode_pair_scores(cls, words, pairs, mixture.weight, mixture.scale))
    return held_out


def class_of(label):
    """0 (ham) or 1 (spam) of a label: True/False as it is (what the ledger hands
    a learn), any other through ``labels.is_spam_label`` (imported then only)."""
    if label is True or label is False:
        return int(label)
    from spamnb.estimator.labels import is_spam_label

    return int(is_spam_label(label))


def float32(value):
    """``value`` as a record keeps it (a float32): replay counts the same bin."""
    return array("f", (value,))[0]

# ---------------------------------------------------------------------------- the append (spamnb.persistence.journal's
# writer of a learn's records: here, so that a learn, first or appending, loads one module for what it writes)
# A journal is folded into the model once it is larger than this part of the
# model file, and never later than past _COMPACT_MAX bytes: replaying it costs
# every reader time in proportion to its size, folding it costs one whole save.
_COMPACT_FRACTION = 16
_COMPACT_MIN = 64 << 10
_COMPACT_MAX = 1 << 20


def compact_at(model_size):
    """The journal size (bytes) past which a writer folds it into a model of ``model_size`` bytes."""
    return min(_COMPACT_MAX, max(_COMPACT_MIN, model_size // _COMPACT_FRACTION))


def header_bytes(identity, version=VERSION):
    """The journal's 48-byte header naming the model file ``identity`` (its length and checksum), checksummed."""
    fields = (MAGIC, version, 0, identity[0], identity[1], 0)
    return HEAD.pack(*fields, checks.checksum64(HEAD.pack(*fields, 0)[:40]))


def record_bytes(head_checksum, sequence, payload):
    """Record ``sequence`` of ``payload`` (padded) in a journal whose header's checksum is ``head_checksum``."""
    payload = bytes(payload) + b"\0" * pad(len(payload))
    first = RECORD.pack(len(payload), sequence, 0)[:8]
    checksum = checks.checksum64(head_checksum + first + payload)
    return RECORD.pack(len(payload), sequence, checksum) + payload


def append(journal, transactions):
    """Append ``transactions`` (payloads) to ``journal`` (read under the lock
    by the load of the model it extends), fsynced; a damaged tail is cut off
    first, and a journal that is missing or stale is replaced by a new one.
    Returns the journal's size."""
    from spamnb.persistence.store import replace_file   # a journal's first record (a new file written whole)

    path = journal.path
    fd = None
    if journal.status == "none" and journal.size == EMPTY_SIZE:
        fd = _adopt(journal)   # a whole save's journal without records: appended to when it is this model's
    if journal.status == "ok" and journal.end is not None:
        if journal.version == 1:   # its readers know no LEARN_SUMS: records as version 1 wrote them
            transactions = list(map(without_sums, transactions))
        records = _framed(journal.head, len(journal.payloads), transactions)
        if fd is None:   # (an adopted journal's file is open, its checks made: _adopt)
            # never through a link planted at the journal's name (it is renamed into place, never a link)
            fd = posix.open(path, posix.O_WRONLY | getattr(posix, "O_NOFOLLOW", 0) | getattr(posix, "O_CLOEXEC", 0))
            try:
                st = posix.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise OSError(f"{path}: the model's journal is not a regular file")
                if st.st_size != journal.end:
                    posix.ftruncate(fd, journal.end)   # the damaged tail of an interrupted learn
            except BaseException:
                posix.close(fd)
                raise
        try:
            done = 0
            try:
                while done < len(records):
                    done += posix.pwrite(fd, records[done:], journal.end + done)
                posix.fsync(fd)
            except BaseException:   # not acknowledged: take it back (best effort), readers must not see it
                try:
                    posix.ftruncate(fd, journal.end)
                except OSError:
                    pass
                raise
        finally:
            posix.close(fd)
        journal.payloads.extend(transactions)
        journal.end += len(records)
        journal.size = journal.end
        return journal.end
    if journal.status == "ok":   # records that did not fit: start over only from a whole save
        raise errors.MustCompact()
    header = header_bytes(journal.identity)
    head = header[40:48]
    records = _framed(head, 0, transactions)
    model = journal.path[:-len(SUFFIX)]
    try:
        old = posix.stat(model)
    except OSError:
        old = None
    # the folder is not listed for killed writers' temporaries: the model's next save removes them;
    # the journal replaced is none, or one never applied (stale, damaged): renamed in before its fsync (losable)
    replace_file(path, lambda f: (f.write(header), f.write(records)), old, tidy=False, losable=True)
    journal.status, journal.head, journal.version = "ok", head, VERSION
    journal.payloads = list(transactions)
    journal.end = journal.size = len(header) + len(records)
    return journal.end


def _framed(head_checksum, first, transactions):
    """``transactions`` as records ``first``, ``first + 1``, ... (:func:`record_bytes`), back to back."""
    framed = []
    for payload in transactions:
        framed.append(record_bytes(head_checksum, first + len(framed), payload))
    return b"".join(framed)


def _adopt(journal):
    """Make ``journal`` (status "none", the load saw a file of a header's size at
    its name and read none of it: ``spamnb.persistence.codec``) the journal
    to append to when that file is the header of a journal of this very
    model file (``journal.identity``) without records; else leave it "none"
    (the caller replaces the file whole, as it replaces a stale one).  Returns
    the file, open for writing, when adopted (a regular file of the header's
    size: the append's checks, one open for both), else None."""
    flags = getattr(posix, "O_NOFOLLOW", 0) | getattr(posix, "O_CLOEXEC", 0)
    writable = True
    try:
        fd = posix.open(journal.path, posix.O_RDWR | flags)
    except OSError:   # not writable: read as before (the append's own open says why it cannot write)
        writable = False
        try:
            fd = posix.open(journal.path, posix.O_RDONLY | flags)
        except OSError:
            return None
    try:
        st = posix.fstat(fd)
        head = posix.pread(fd, EMPTY_SIZE, 0) if stat.S_ISREG(st.st_mode) and st.st_size == EMPTY_SIZE else b""
        version = int.from_bytes(head[8:12], "little") if len(head) == EMPTY_SIZE else None
        if version in VERSIONS and journal.identity is not None and head == header_bytes(journal.identity, version):
            journal.status, journal.head, journal.version = "ok", head[40:48], version
            journal.payloads, journal.end = [], EMPTY_SIZE
            if writable:
                fd, adopted = None, fd
                return adopted
    except OSError:
        pass
    finally:
        if fd is not None:
            posix.close(fd)
    return None
