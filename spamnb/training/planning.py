"""A corpus planned as partitions: file paths, and byte ranges of mbox files
cut at message boundaries, walked, labelled and skipped by
``spamnb.mail.reader``'s own rules (the planner finds the boundaries; it
never holds a message); and the reading and counting of one partition, which
a worker process does."""

from __future__ import annotations

import os
import stat
import sys
from collections import namedtuple

from spamnb.estimator.counting import count_messages

__all__ = ["Piece", "plan_training", "plan_scoring", "partitions", "count_partition", "count_partition_in_memory",
           "count_partition_spilled", "train_on_workers", "partition_messages", "unique_messages", "partition_keys",
           "copies_of", "NEAR_DUPLICATE"]

DEFAULT_PARTITION_SIZE = 500    # messages per partition (~50-80 ms of counting): several per worker on a few thousand messages

# ---------------------------------------------------------------------------- planning
# A piece of a partition: a file read as spamnb.mail.reader.read_messages reads it
# ("file": a message, or an mbox of messages), or messages ``first``.. of an
# mbox file's byte range ``start``..``end`` ("shard"); for scoring, a path of
# ``spamnb classify --batch`` ("path") or stdin's bytes ("data", in ``path``).
Piece = namedtuple("Piece", "kind path name is_spam start end first")

SHARD_ABOVE = 1 << 20   # an mbox file larger than this is cut into shards of partition_size messages


def _file_pieces(path, name, is_spam, partition_size):
    """The pieces of one corpus file: shards of a large mbox (cut where
    :func:`spamnb.mail.mbox.message_starts` says :func:`spamnb.mail.mbox.iter_mbox`
    cuts, found with a search over a map of the file: no message is held
    here), else the file whole (read by the worker as the corpus reader reads
    it, with the same skips).  Shard messages are numbered by envelope line."""
    import mmap

    from spamnb.mail.mbox import is_mbox_start, message_starts
    from spamnb.mail.reader import Refused, open_checked

    whole = Piece("file", path, name, is_spam, 0, None, 0)
    if partition_size is None:   # one process reads the corpus: no shards
        yield whole
        return
    try:   # a small regular file (most of a corpus): whole, known from a stat alone (not opened here)
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode) and st.st_size <= SHARD_ABOVE:
            yield whole
            return
    except OSError:
        pass
    try:
        fd, size = open_checked(path, max_size=None)   # type checked first: a FIFO or a device is never opened
    except (OSError, Refused):
        yield whole   # the worker skips it and says why, as the corpus reader does
        return
    f = os.fdopen(fd, "rb")
    if size <= SHARD_ABOVE:
        f.close()
        yield whole
        return
    with f:
        if not is_mbox_start(f.read(5)):
            yield whole
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            start, first, n = 0, 0, 0
            for offset in message_starts(data):
                if n == partition_size:
                    yield Piece("shard", path, name, is_spam, start, offset, first)
                    start, first, n = offset, first + n, 0
                    done = start - start % mmap.PAGESIZE   # the pages scanned leave this process
                    if done and hasattr(data, "madvise"):
                        data.madvise(mmap.MADV_DONTNEED, 0, done)
                n += 1
            size = len(data)
    yield whole if first == 0 else Piece("shard", path, name, is_spam, start, size, first)


def plan_training(trees=(), spam=(), ham=(), report=None, strict=False, partition_size=DEFAULT_PARTITION_SIZE,
                  follow_links=False):
    """The pieces of a labelled corpus, in the order and with the labels of
    :func:`spamnb.training.corpus.iter_labelled` (the same walk, Maildir and Maildir++
    rules and skips, the same ``follow_links``), lazily: no message is read
    here.  ``partition_size`` None: large mbox files are not cut into shards."""
    from spamnb.mail import reader
    from spamnb.training.corpus import tree_label

    report = reader.CorpusReport() if report is None else report
    sources = [(tree, None) for tree in trees] + [(p, True) for p in spam] + [(p, False) for p in ham]
    for root, is_spam in sources:
        root = os.fspath(root)
        if not os.path.exists(root):
            raise reader.CorpusError(f"{root}: no such file or folder")
        root_is_spam = reader.is_spam_name(os.path.basename(os.path.normpath(root))) if is_spam is None else is_spam
        if not os.path.isdir(root):
            yield from _file_pieces(root, root, root_is_spam, partition_size)   # named as given: its own folder
            continue
        prefix, labels = os.path.join(root, ""), {}   # the walk's paths start with root: no relpath calls
        mode = "tree" if is_spam is None else "read" if is_spam else "skip"
        for path in reader.walk_files(root, report, strict, mode, follow_links):
            relpath = path[len(prefix):] if path.startswith(prefix) else os.path.relpath(path, root)
            if os.sep != "/":
                relpath = relpath.replace(os.sep, "/")
            label = is_spam
            if label is None:   # by folder names: one label per folder
                folder = relpath.rpartition("/")[0]
                label = labels.get(folder)
                if label is None:
                    label = labels[folder] = tree_label(relpath, root_is_spam)
            yield from _file_pieces(path, relpath, label, partition_size)


def plan_scoring(paths):
    """The pieces of ``spamnb classify --batch`` paths: a large mbox file in
    shards, ``-`` as stdin's bytes, any other path whole (a message, an mbox
    or a folder, answered as the one-process batch answers it)."""
    for path in paths:
        if path == "-":
            yield Piece("data", sys.stdin.buffer.read(), "-", None, 0, None, 0)
        elif os.path.isdir(path):
            yield Piece("path", path, path, None, 0, None, 0)
        else:
            for piece in _file_pieces(path, path, None, DEFAULT_PARTITION_SIZE):
                yield piece._replace(kind="path") if piece.kind == "file" else piece


def partitions(pieces, partition_size=DEFAULT_PARTITION_SIZE, idle=None):
    """Group pieces into lists of ``partition_size`` messages (an mbox shard
    is a partition of its own).  ``idle``: a sentinel among the pieces (the
    source has nothing more ready) that ends the partition so far and is
    given itself after it."""
    if partition_size < 1:
        raise ValueError("partition_size must be at least 1")
    batch = []
    for piece in pieces:
        if idle is not None and piece is idle:
            if batch:
                yield batch
                batch = []
            yield idle
            continue
        if piece.kind == "shard":
            if batch:
                yield batch
                batch = []
            yield [piece]
            continue
        batch.append(piece)
        if len(batch) >= partition_size:
            yield batch
            batch = []
    if batch:
        yield batch


# ---------------------------------------------------------------------------- workers
def piece_messages(pieces, report, strict):
    """``(name, bytes, is_spam)`` of the messages of some training pieces,
    read as spamnb.mail.reader reads a corpus (the same skips)."""
    from spamnb.mail import reader

    for piece in pieces:
        if piece.kind == "file":
            messages = reader.file_messages(piece.path, piece.name, report, strict)
        elif piece.kind == "shard":
            messages = reader.shard_messages(piece.path, piece.name, piece.start, piece.end, piece.first,
                                             report, strict)
        else:
            raise ValueError(f"unknown piece kind {piece.kind!r}")
        for name, data in messages:
            report.add_folder(piece.is_spam, piece.path, name)
            yield name, data, piece.is_spam


# ---------------------------------------------------------------------------- near-duplicates
# ``spamnb train`` counts a message once (issue 46): a message whose near-duplicate key
# (spamnb.estimator.calibrate.near_duplicate_key: its body and its Subject, From, To, Cc,
# Date and Message-ID) an earlier message of the corpus with the same label has is
# skipped, said so, as a copy (the same message in two folders, with a header line
# added), so the model and the cutoffs it chooses are those of the corpus without the
# copies.
NEAR_DUPLICATE = "near-duplicates of an earlier message (counted once)"


def _labelled_key(data, is_spam):
    """A message's near-duplicate key with its label in it (bit 62 flipped for
    spam): copies with the same label are one message; the same message in a
    spam and a ham folder is two (a conflict the counts keep, as before)."""
    global _KEY
    if _KEY is None:   # once: not a from-import a message
        from spamnb.estimator.calibrate import near_duplicate_key as _KEY
    key = _KEY(data)
    return None if key is None else key ^ (bool(is_spam) << 62)


_KEY = None   # spamnb.estimator.calibrate.near_duplicate_key, imported at _labelled_key's first call


def unique_messages(messages, report, skip=None, seen=None):
    """The ``(name, bytes, is_spam)`` of ``messages`` but the near-duplicates,
    each skipped in ``report``: with ``skip`` (a dict, a message's index in
    ``messages`` -> its key, from :func:`copies_of`) those messages, checked
    against their key (CorpusChanged when the message is another one); else
    those whose key is in the set ``seen`` (keys added as met: one pass over
    the corpus in order)."""
    from spamnb.errors import CorpusChanged

    if skip is None:
        seen = set() if seen is None else seen
        for name, data, is_spam in messages:
            key = _labelled_key(data, is_spam)
            if key is not None:
                if key in seen:
                    report.skip(name, NEAR_DUPLICATE)
                    continue
                seen.add(key)
            yield name, data, is_spam
        return
    for i, (name, data, is_spam) in enumerate(messages):
        key = skip.get(i)
        if key is None:
            yield name, data, is_spam
        elif _labelled_key(data, is_spam) != key:
            raise CorpusChanged(f"{name}: another message on the second reading")
        else:
            report.skip(name, NEAR_DUPLICATE)


def partition_keys(pieces, strict=False):
    """The near-duplicate keys of one partition's messages, in order (0 for a
    message without one): an ``array('Q')``, the pass before counting."""
    from array import array

    from spamnb.training.corpus import CorpusReport

    keys = array("Q")
    for _name, data, is_spam in piece_messages(pieces, CorpusReport(), strict):
        keys.append(_labelled_key(data, is_spam) or 0)
    return keys


def copies_of(partition_key_arrays):
    """The messages to skip, from each partition's :func:`partition_keys`
    (in the corpus's order): a list, a dict per partition of the index of
    each near-duplicate of an earlier message -> its key (empty: none)."""
    seen = set()
    out = []
    for keys in partition_key_arrays:
        skip = {}
        for i, key in enumerate(keys):
            if not key:
                continue
            if key in seen:
                skip[i] = key
            else:
                seen.add(key)
        out.append(skip)
    return out


def _partition_messages(pieces, report, strict, skip):
    """``(bytes, is_spam)`` of a partition's messages; ``skip``: the
    near-duplicates to leave out (:func:`copies_of`), None: every message."""
    messages = piece_messages(pieces, report, strict)
    if skip is not None:
        messages = unique_messages(messages, report, skip)
    return ((data, is_spam) for _name, data, is_spam in messages)


def partition_messages(pieces, report, strict, seen):
    """``(name, bytes, is_spam)`` of a partition's messages read in this
    process, the partitions in order (``spamnb train -j 1``): a message whose
    near-duplicate key is in the set ``seen`` (the corpus's messages before)
    left out, the others' keys added."""
    return unique_messages(piece_messages(pieces, report, strict), report, seen=seen)


def count_partition(spec, pieces, strict=False, n_folds=0, spill=None, skip=None):
    """Read, tokenize and count one partition: ``(Counts, CorpusReport)``
    (``spec``: :func:`counting_spec`; ``n_folds``: as :func:`count_messages`;
    ``spill``: the path of the file to write its messages' token hashes to;
    ``skip``: the near-duplicates to leave out (:func:`copies_of`), None: every message,
    near-duplicates within the partition grouped in one fold)."""
    from spamnb.training.corpus import CorpusReport

    report = CorpusReport()
    messages = _partition_messages(pieces, report, strict, skip)
    if spill is None:
        return count_messages(spec, messages, n_folds=n_folds, group=skip is None), report
    with open(spill, "wb", buffering=1 << 20) as out:
        return count_messages(spec, messages, n_folds=n_folds, spill=out, group=skip is None), report


def count_partition_in_memory(spec, pieces, strict=False, n_folds=0, skip=None):
    """:func:`count_partition` with the spill kept in memory (on Dask, where
    the worker holds it for the scoring pass): ``(Counts, CorpusReport,
    bytes)``."""
    import io

    from spamnb.training.corpus import CorpusReport

    report = CorpusReport()
    out = io.BytesIO()
    messages = _partition_messages(pieces, report, strict, skip)
    return count_messages(spec, messages, n_folds=n_folds, spill=out, group=skip is None), report, out.getvalue()


def merge_reports(total, report):
    total.read += report.read
    for reason, n in report.skipped.items():
        total.skipped[reason] = total.skipped.get(reason, 0) + n
        paths = total.examples.setdefault(reason, [])
        paths.extend(report.examples.get(reason, [])[:max(0, total.EXAMPLES - len(paths))])
    for key, n in report.folders.items():
        total.folders[key] = total.folders.get(key, 0) + n


_FOLD_MODELS = {}


def _fold_models(models):
    """A :class:`~spamnb.estimator.calibrate.FoldModels`, or the folder it was saved to (mapped once per worker)."""
    from spamnb.estimator.calibrate import FoldModels

    if not isinstance(models, str):
        return models
    found = _FOLD_MODELS.get(models)
    if found is None:
        from spamnb.estimator.heap import release_free_memory

        _FOLD_MODELS.clear()
        # the counting jobs' arrays, freed but kept by the heap, go back to the system before the models'
        # pages are mapped in beside them (once a variant: the counting pass's heap reused job after job)
        release_free_memory()
        found = _FOLD_MODELS[models] = FoldModels.load(models)
    return found


def score_spilled_bytes(spilled, models):
    """The calibration's scoring pass over one partition's spill held in
    memory (:func:`count_partition_in_memory`): ``(ham_log_odds,
    spam_log_odds, per_fold)``."""
    import io

    from spamnb.estimator.calibrate import held_out_spilled

    return held_out_spilled(_fold_models(models), io.BytesIO(spilled))


# ---------------------------------------------------------------------------- spamnb train -j N
class _PartitionSpill:
    """A partition's :class:`~spamnb.estimator.calibrate.FoldSpill` in a worker's
    memory (the ``spills`` :meth:`~spamnb.estimator.counting.PartitionCounting.count`
    writes to): each message's token indices in the partition's own
    vocabulary, back to back, its number of them, class, fold and
    ``pairs_start``; sent back with the partition's counts, where the parent
    numbers them in the corpus's vocabulary (:class:`_VariantMerge`)."""

    __slots__ = ("indices", "lengths", "spam", "folds", "starts")

    def __init__(self):
        from array import array

        self.indices, self.lengths, self.starts = array("i"), array("q"), array("q")
        self.spam, self.folds = bytearray(), bytearray()

    def write(self, indices, is_spam, fold, pairs_start=-1):
        self.indices.frombytes(memoryview(indices).cast("B"))   # a view of the vocabulary's scratch: copied now
        self.lengths.append(len(indices))
        self.spam.append(1 if is_spam else 0)
        self.folds.append(fold)
        self.starts.append(pairs_start)

    def arrays(self):
        """``(indices, lengths, spam, folds, starts)``, numpy arrays, the messages in the order counted."""
        import numpy as np

        n = len(self.lengths)
        lengths = np.frombuffer(self.lengths, dtype=np.int64, count=n)
        return (np.frombuffer(self.indices, dtype=np.int32, count=int(lengths.sum())), lengths,
                np.frombuffer(self.spam, dtype=np.uint8, count=n), np.frombuffer(self.folds, dtype=np.uint8, count=n),
                np.frombuffer(self.starts, dtype=np.int64, count=n))


def _in_fold_order(index, indices, lengths, spam, folds, starts):
    """A partition's messages (:meth:`_PartitionSpill.arrays`; ``indices``
    places in the partition's tokens, which ``index`` numbers in the
    corpus's vocabulary) as :meth:`FoldSpill.write_many
    <spamnb.estimator.calibrate.FoldSpill.write_many>` takes them: in the
    order of their folds, each with its place in its class here, its tokens
    numbered in the corpus's vocabulary."""
    import numpy as np

    n = lengths.size
    place = np.empty(n, dtype=np.int64)
    for c in (0, 1):
        mine = np.flatnonzero(spam == c)
        place[mine] = np.arange(mine.size)
    order = np.argsort(folds, kind="stable")
    bounds = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    # each message's tokens, the messages in fold order: a slice a message joined (no array of a place a token
    # to gather by), then numbered
    runs = [indices[a:b] for a, b in zip(bounds[:-1][order].tolist(), bounds[1:][order].tolist())]
    gathered = np.concatenate(runs) if runs else indices[:0]
    del runs
    return index[gathered], lengths[order], spam[order], place[order], folds[order], starts[order]


def _gathered(blob, tokens, starts, stops, sizes, total):
    """The strings of the old numbers ``tokens`` (``starts``/``stops``/``sizes``:
    their byte ranges in ``blob``), in that order, as one ``bytes``
    (:func:`_without`).  Taking copies out renumbers few tokens: the new
    order is a few runs of consecutive old numbers, each one slice of
    ``blob`` (one join of the slices); when the runs are many (more than one
    in 64 tokens), a byte gather by numpy, the same bytes."""
    import numpy as np

    cut = np.flatnonzero(np.diff(tokens) != 1) + 1
    if 64 * (cut.size + 1) > tokens.size:
        ends = np.cumsum(sizes)
        take = np.repeat(starts - (ends - sizes), sizes) + np.arange(total)
        return np.frombuffer(blob, dtype=np.uint8)[take].tobytes()
    first = np.concatenate(([0], cut))
    last = np.append(cut, tokens.size) - 1
    view = memoryview(blob)
    return b"".join([view[a:b] for a, b in zip(starts[first].tolist(), stops[last].tolist())])


def _without(counts, spilled, drop, spec):
    """A partition's counts and messages (:func:`count_partition_spilled`'s,
    one variant: a :data:`_WorkerPart` and its messages' token indices, places
    in its ``touched``) as if the messages at the positions ``drop``
    (among those counted) had not been there: copies of a message of an
    earlier partition, which ``-j 1`` leaves out as it meets them.  The
    partition's tokens are listed again in the order of first sight over
    the messages kept (a token of the dropped messages alone goes: if new
    to the worker, the parent keeps its string for the worker's later
    partitions, :class:`_WorkerNumbers`), the rows summed again from the
    messages' token indices as the counting pass sums them
    (``add_counts_rows``: each message added in turn), the class counts and
    the ledger without them: the counts the worker gives without those
    messages, bit for bit."""
    import numpy as np

    from spamnb.bayes.merging import first_sight
    from spamnb.bayes.token_kernels import add_counts_rows
    from spamnb.estimator.defaults import COUNT_TRANSFORMS

    indices, lengths, spam, folds, starts = spilled
    keep = np.ones(lengths.size, dtype=bool)
    keep[drop] = False
    kept = indices[np.repeat(keep, lengths)]   # places in the partition's tokens (``touched``)
    touched = counts.touched
    # the places, in the order of first sight over the messages kept
    tokens = np.frombuffer(first_sight(np.ascontiguousarray(kept, dtype=np.int32), touched.size), dtype=np.int32)
    new_of = np.full(touched.size, -1, dtype=np.int32)
    new_of[tokens] = np.arange(tokens.size, dtype=np.int32)
    local = new_of[kept]
    lengths, spam, folds, starts = lengths[keep], spam[keep], folds[keep], starts[keep]
    bounds = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    rows = np.zeros((2, tokens.size))
    add_counts_rows(local, bounds, np.ascontiguousarray(spam, dtype=np.uint8), rows[0], rows[1],
                    COUNT_TRANSFORMS[spec["counts"]], float(spec.get("length_norm", 0.0)))
    class_count = counts.class_count.copy()
    dropped_spam = np.asarray(spilled[2])[drop]
    class_count[1] -= float(np.count_nonzero(dropped_spam))
    class_count[0] -= float(dropped_spam.size - np.count_nonzero(dropped_spam))
    digests = labels = None
    if counts.digests is not None:
        digests = np.frombuffer(counts.digests, dtype=np.uint8).reshape(-1, 16)[keep].tobytes()
        labels = np.frombuffer(counts.labels, dtype=np.uint8)[keep].tobytes()
    return (counts._replace(touched=touched[tokens], rows=rows, class_count=class_count, digests=digests,
                            labels=labels),
            (local, lengths, spam, folds, starts))


class _SeenKeys:
    """The near-duplicate keys of the partitions merged so far (the parent of
    ``spamnb train -j N``), each with its place in the order added; with
    ``shared``, also appended to an unnamed temporary file that the workers,
    forked after it is opened, hold open too (:meth:`Workers.shares_files`).
    A job is given :meth:`known` (the file and how many keys it holds then)
    and its worker leaves out the copies of those messages itself
    (:func:`_known_keys`): the parent takes out (:func:`_without`) only the
    copies of the partitions merged after the job was given."""

    def __init__(self, shared):
        import tempfile

        self.place = {}
        self.file = tempfile.TemporaryFile(prefix="spamnb-train-keys-") if shared else None
        st = os.fstat(self.file.fileno()) if self.file is not None else None
        self.identity = None if st is None else (self.file.fileno(), st.st_dev, st.st_ino)

    def __contains__(self, key):
        return key in self.place

    def add(self, keys):
        """A partition's keys (each of its messages'), the new ones at the end."""
        from array import array

        new = array("Q", [key for key in keys if key not in self.place])
        for key in new:
            self.place[key] = len(self.place)
        if self.file is not None and new:
            self.file.write(new.tobytes())
            self.file.flush()   # in the file before the next job is given

    def known(self):
        """What a job is given: ``(descriptor, device, inode, n)``, the first
        ``n`` keys added in the file; None without the file."""
        return None if self.identity is None else (*self.identity, len(self.place))

    def known_to(self, key, n):
        """Whether ``key`` is among the first ``n`` added (a worker given ``n`` left its copies out)."""
        return self.place[key] < n

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = self.identity = None


def _known_keys(known):
    """``(keys, n)``: the keys of :meth:`_SeenKeys.known` read from the
    parent's file (``os.pread``: the file's offset is the parent's), or an
    empty set and 0 where this process does not hold that file at that
    descriptor (a worker started before it was opened, or not forked)."""
    from array import array

    if known is None:
        return set(), 0
    fd, device, inode, n = known
    try:
        st = os.fstat(fd)
        data = os.pread(fd, 8 * n, 0) if (st.st_dev, st.st_ino) == (device, inode) else b""
    except OSError:
        data = b""
    if len(data) != 8 * n:
        return set(), 0
    keys = array("Q")
    keys.frombytes(data)
    return set(keys), n


# One variant's partition as a worker sends it (count_partition_spilled): the worker keeps its vocabulary across the
# partitions it counts and sends the tokens new to it alone (``hashes``, their UTF-8 ``strings`` (uint8: an array,
# out of the answer's pickle) and ``offsets`` (uint64, one more, from 0), numbered ``first``.. in the worker's order
# of first sight), the partition's tokens
# by the worker's numbers in the partition's order of first sight (``touched``, int32), their two rows (``rows``,
# float64 (2, m)), the class counts, the day counted and the ledger; ``worker``: ``(pid, serial)``, the worker
# and its vocabulary (a new serial: numbered from 0 again).
_WorkerPart = namedtuple("_WorkerPart", "worker first hashes offsets strings touched rows class_count day digests labels")

_KEPT = None      # a worker's counting kept between the jobs of one run: (run, PartitionCounting, serial)
_SERIAL = 0       # the vocabularies this process has started


def _counting(specs, n_folds, run):
    """``(PartitionCounting, serial)`` of a job: the one kept for ``run``
    (``(token, parent's pid)``) in a worker process, else a new one (kept
    if this is a worker: not the parent, which runs a small job itself, nor
    a call without ``run``)."""
    global _KEPT, _SERIAL
    from spamnb.estimator.counting import PartitionCounting

    if run is not None and _KEPT is not None and _KEPT[0] == run:
        counting = _KEPT[1]
        if len(specs) > counting.counter.n_variants:
            raise ValueError("more variants than the run's first job counted")
        counting.active = len(specs)   # past the run's limit: the first variant alone
        return counting, _KEPT[2]
    _KEPT = None   # another run's (or none): dropped before the new one is made
    _SERIAL += 1
    # a fold for each message (n_folds 1 without folds: every message's indices are kept, for _without)
    counting = PartitionCounting(specs, max(int(n_folds), 1), group=False, keep_hashes=True)
    if run is not None and run[1] != os.getpid():
        _KEPT = (run, counting, _SERIAL)
    return counting, _SERIAL


def count_partition_spilled(specs, pieces, strict=False, n_folds=0, known=None, run=None):
    """Read, tokenize and count one partition under each of ``specs`` (a
    worker's job of ``spamnb train -j N``), a copy of an earlier message of
    the partition, or of a message of the partitions ``known``
    (:meth:`_SeenKeys.known`) says, left out (not said: the parent says it,
    in order): ``([_WorkerPart, ...], [spilled, ...], CorpusReport, keys,
    names, n_known)``, each variant's partition (its model rows only, no
    fold rows; the worker's vocabulary kept between the jobs of ``run``:
    only the tokens new to it sent, :data:`_WorkerPart`), each variant's
    messages' token indices (their places in the partition's ``touched``), lengths, classes,
    folds and pair starts (:meth:`_PartitionSpill.arrays`; folds 0 without
    ``n_folds``), each message read's near-duplicate key (0: none; an
    ``array('Q')``) and name, in order, and how many of the keys ``known``
    gives were read (0: none): the parent leaves out the copies of the
    messages of the other earlier partitions from these (:func:`_without`),
    so no pass keys the corpus before."""
    global _KEPT
    from array import array

    import numpy as np

    from spamnb.estimator.ages import today
    from spamnb.training.corpus import CorpusReport

    report = CorpusReport()
    keys, names = array("Q"), []
    earlier, n_known = _known_keys(known)

    def messages():
        here = set()
        for name, data, is_spam in piece_messages(pieces, report, strict):
            key = _labelled_key(data, is_spam) or 0
            keys.append(key)
            names.append(name)
            if key:
                if key in here:
                    continue
                here.add(key)
                if key in earlier:
                    continue
            yield data, is_spam

    counting, serial = _counting(specs, n_folds, run)
    counting.digests, counting.labels, counting.counted = bytearray(), bytearray(), {False: 0, True: 0}
    spills = [_PartitionSpill() for _ in specs]
    counter, parts = counting.counter, []
    try:
        # every variant of a message in one compiled call over the worker's hash index: the partition's rows
        # are those of its tokens (the counts of each variant counted alone, bit for bit)
        for _ in counting.count(messages(), spills):
            pass
        class_count, day = counting.class_count(), today()
        digests, labels = bytes(counting.digests), bytes(counting.labels)
        for v in range(len(specs)):
            touched, ham, spam_row = counter.partition(v)
            touched, rows = np.array(touched, dtype=np.int32), np.array([ham, spam_row], dtype=np.float64)
            del ham, spam_row
            counter.clear_partition(v)
            hashes = np.frombuffer(counter.take_hashes(v), dtype=np.uint64)
            blob, offsets = counter.strings(v)   # the strings of the tokens new to the worker, given up
            parts.append(_WorkerPart((os.getpid(), serial), counter.n_features_of(v) - hashes.size, hashes,
                                     np.frombuffer(offsets, dtype=np.uint64), np.frombuffer(blob, dtype=np.uint8),
                                     touched, rows, class_count.copy(),
                                     day, digests, labels))
    except BaseException:
        _KEPT = None   # a partition counted in part: the vocabulary is not the one the parent will know
        raise
    return parts, [s.arrays() for s in spills], report, keys, names, n_known


class _WorkerNumbers:
    """One worker's token numbers (one variant's) mapped to the corpus's
    (:class:`_VariantMerge`): an array, -1 for a token the worker sent that
    no partition merged yet holds (one of copies taken out alone,
    :func:`_without`: its hash and string kept here, ``pending``, for the
    worker's later partitions, which do not send it again)."""

    def __init__(self):
        import numpy as np

        self.of = np.empty(0, dtype=np.int32)
        self.n = 0
        self.pending = None   # (numbers ascending, hashes, offsets from 0, strings)

    def number(self, part, table, raise_days=True):
        """The corpus's numbers of ``part.touched`` (int32), compiled
        (``MergeTable.add_mapped``): a token the worker sent before by this
        array, one new to it looked up in ``table`` by hash (numbered there
        if new to the corpus, in the partition's order: the order of first
        sight, as the partition's tokens whole would be), each seen on the
        partition's day (``raise_days`` False: the tokens mapped before all
        have that day or a later one, and are left as they are)."""
        import numpy as np

        if part.first != self.n:
            raise RuntimeError(f"a worker's tokens from {part.first}, {self.n} known: its partitions out of order")
        n_new = part.hashes.size
        end = self.n + n_new
        if end > self.of.size:   # grown by half (pages past ``end`` never touched): at most the worker's vocabulary
            grown = np.empty(max(end, self.of.size + (self.of.size >> 1), 1024), dtype=np.int32)
            grown[:self.n] = self.of[:self.n]
            self.of = grown
        self.of[self.n:end] = -1
        first, self.n = self.n, end
        touched, day = part.touched, int(part.day)
        sent = (np.ascontiguousarray(part.hashes, dtype=np.uint64), np.ascontiguousarray(part.offsets, dtype=np.uint64),
                part.strings)
        index = np.empty(touched.size, dtype=np.int32)
        j, got = table.add_mapped(self.of, touched, 0, first, *sent, day, index, raise_days)
        while j < touched.size:   # a token sent before in copies taken out alone
            t = int(touched[j])
            numbers, hashes, offsets, strings = self.pending if self.pending is not None else ((),) * 4
            at = int(np.searchsorted(numbers, t)) if len(numbers) else 0
            if at >= len(numbers) or numbers[at] != t:
                raise RuntimeError("a worker's partition names a token it never sent")
            a, b = int(offsets[at]), int(offsets[at + 1])
            j, _ = table.add_mapped(self.of, touched, j, t, hashes[at:at + 1], np.array([0, b - a], dtype=np.uint64),
                                    strings[a:b], day, index, raise_days)
            j, more = table.add_mapped(self.of, touched, j, first, *sent, day, index, raise_days)
            got += more
        if got < n_new:   # tokens only in copies taken out: kept for the worker's later partitions
            left = np.flatnonzero(self.of[first:end] < 0)
            kept = (left.astype(np.int32) + first, *_taken(part.hashes, part.offsets, part.strings, left))
            if self.pending is not None:
                numbers, hashes, offsets, strings = self.pending
                kept = (np.concatenate([numbers, kept[0]]), np.concatenate([hashes, kept[1]]),
                        np.concatenate([offsets, offsets[-1] + kept[2][1:]]), strings + kept[3])
            self.pending = kept
        return index


def _taken(hashes, offsets, strings, at):
    """The tokens ``at`` of a string table: ``(hashes, offsets from 0, strings)``."""
    import numpy as np

    offsets = np.asarray(offsets, dtype=np.int64)
    starts, stops = offsets[at], offsets[at + 1]
    sizes = stops - starts
    new_offsets = np.zeros(at.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=new_offsets[1:])
    blob = _gathered(strings, at, starts, stops, sizes, int(new_offsets[-1])) if at.size else b""
    return np.asarray(hashes)[at], new_offsets.view(np.uint64), blob


class _VariantMerge:
    """One variant's partitions added in the parent of ``spamnb train -j N``,
    as ``-j 1`` adds them in its one process
    (:func:`~spamnb.estimator.fitting.train_variants_here` by partitions):
    the tokens numbered in the order of first sight over the corpus (a
    :class:`~spamnb.bayes.merging.MergeTable` of the tokens alone: hashes,
    strings, days), each partition's model rows added at those numbers in the
    tree of ``fan_in`` (:class:`~spamnb.bayes.merging.RowLevels`: the sums
    of ``-j 1``'s :class:`~spamnb.estimator.counting.RowTree`, bit for bit,
    compiled), and its messages' token indices, numbered
    so, written to the :class:`~spamnb.estimator.calibrate.FoldSpill`
    ``-j 1`` writes; the held-out pass is then ``-j 1``'s
    (:func:`~spamnb.estimator.fitting.held_out_variants`)."""

    def __init__(self, fan_in, n_folds):
        import numpy as np

        from spamnb.bayes.merging import MergeTable, RowLevels
        from spamnb.estimator.calibrate import FoldSpill
        from spamnb.estimator.counting import StringSpill

        self.table, self.tree = MergeTable(0, rows=False), RowLevels(fan_in)
        self.workers = {}   # a worker's pid -> (its vocabulary's serial, _WorkerNumbers)
        self.floor = None   # the earliest day a partition merged was counted on: no token's last day before it
        self.strings = StringSpill()   # the tokens' strings written out a partition at a time, as -j 1 writes them
        self.class_count = np.zeros(2)
        self.digests, self.labels = bytearray(), bytearray()
        self.spill = FoldSpill(n_folds) if n_folds else None

    def add(self, part, spilled, poll=None):
        """One partition (a :data:`_WorkerPart`) and its messages added;
        ``poll`` (if any) called between the steps (:meth:`Workers.poll`)."""
        import numpy as np

        worker, serial = part.worker
        held = self.workers.get(worker)
        if held is None or held[0] != serial:   # a worker's first partition, or its vocabulary started again
            held = self.workers[worker] = (serial, _WorkerNumbers())
        # a token's last day: the latest of its partitions' (one counted past midnight raises those before)
        index = held[1].number(part, self.table, self.floor is not None and part.day > self.floor)
        self.floor = part.day if self.floor is None else min(self.floor, part.day)
        if poll is not None:
            poll()
        self.strings.append(*self.table.take_strings())
        self.tree.add(index, part.rows[0], part.rows[1], self.table.n)
        self.class_count += part.class_count[:2]
        if self.digests is not None and part.digests is not None:
            self.digests += part.digests
            self.labels += part.labels
        else:
            self.digests = self.labels = None
        if self.spill is not None:
            self.spill.write_many(*_in_fold_order(index, *spilled))

    def fold_ends(self):
        """The messages each fold holds so far (``partition_fold_sums``' ``ends``)."""
        return self.spill.class_count.sum(axis=1).astype("int64").tolist() if self.spill is not None else None

    def result(self):
        """The merged :class:`~spamnb.estimator.counting.Counts` (the model's rows); the merge is emptied."""
        import numpy as np

        from spamnb.estimator.counting import Counts

        table, self.table = self.table, None
        self.workers = {}   # the workers' numbers: not needed past the counting
        n = table.n
        hashes, offsets, blob = table.take_tokens()
        self.strings.append(blob, offsets)   # none: taken after each partition
        del offsets, blob
        _rows, days = table.take_rows()
        del table, _rows
        tree, self.tree = self.tree, None
        dense = np.frombuffer(tree.result(n), dtype=np.float64).reshape(2, n)
        del tree
        digests, labels = (None, None) if self.digests is None else (bytes(self.digests), bytes(self.labels))
        self.digests = self.labels = None
        strings, self.strings = self.strings, None
        return Counts(np.frombuffer(hashes, dtype=np.uint64), None, None, self.class_count.copy(), dense,
                      np.frombuffer(days, dtype=np.int32), digests=digests, labels=labels, spilled=strings)

    def close(self):
        if self.spill is not None:
            self.spill.close()
        if self.strings is not None:
            self.strings.close()
            self.strings = None


def train_on_workers(filters, workers, trees=(), spam=(), ham=(), partition_size=DEFAULT_PARTITION_SIZE,
                     fan_in=8, report=None, strict=False, calibration=None, n_folds=10, folds=0, progress=None,
                     limit=None, follow_links=False, deferred=False):
    """``spamnb train -j N``'s variants (``filters``; see
    :func:`spamnb.training.pipeline.train`), a generator of each one's
    ``(fitted, calibration, held-out scores)`` as
    :func:`~spamnb.estimator.fitting.train_variants_here` gives them, the same
    model and cutoffs bit for bit: ``workers`` count the partitions as they
    are planned (:func:`count_partition_spilled`: the model's rows, each
    message's token indices in the worker's vocabulary, kept between its
    jobs, and its near-duplicate key; the copies of the partitions merged when the job
    was given left out there: :class:`_SeenKeys`), this process takes them
    in order, leaves out the other copies of an earlier partition's
    messages (:func:`_without`: the messages ``-j 1`` leaves out as it meets
    them, with no pass keying the corpus before), adds them
    (:class:`_VariantMerge`: tokens numbered, rows in ``-j 1``'s tree,
    indices to ``-j 1``'s fold files; the answers sent meanwhile read
    between its steps, ``Workers.poll``) and makes ``-j 1``'s
    held-out pass (:func:`~spamnb.estimator.fitting.held_out_variants`).
    ``folds``: the folds counted (0: no calibration); ``limit``: past that
    many messages counted the variants after the first are dropped."""
    from spamnb.estimator.counting import counting_spec
    from spamnb.estimator.fitting import held_out_variants
    from spamnb.estimator.heap import map_large_blocks

    specs = [counting_spec(spam_filter) for spam_filter in filters]
    merges = [_VariantMerge(fan_in, folds) for _ in specs]
    state = {"variants": len(specs), "messages": 0}
    # the near-duplicate keys of the messages so far (each job told those of the partitions merged when it is
    # given); the folds' ends
    seen, ends = _SeenKeys(workers.shares_files()), []
    # this run: a worker keeps its vocabulary between its jobs of it (not this process, when it counts a job itself)
    run = (os.urandom(8).hex(), os.getpid())

    def jobs():   # the corpus planned as the workers count it (a partition given to them as soon as it is planned)
        for part in partitions(plan_training(trees, spam, ham, report, strict, partition_size, follow_links),
                               partition_size):
            yield specs[:state["variants"]], part, strict, folds, seen.known(), run

    try:
        if progress is not None and hasattr(progress, "restart"):
            progress.restart()   # a pass of its own: counted from 0 again
        try:
            for i, (part_counts, spilled, part_report, keys, names, n_known) in enumerate(
                    workers.run_ordered(count_partition_spilled, jobs())):
                if i == 0 and workers.pool is not None:
                    map_large_blocks()   # the workers are forked: this process's freed arrays go back at once
                merge_reports(report, part_report)
                # the copies left out, said in order: of a message before in the partition or of one of the
                # partitions the worker was told of (not counted there) or of another earlier one (counted
                # there: dropped here), as -j 1 meets them
                here, drop, counted = set(), [], 0
                for key, name in zip(keys, names):
                    if key:
                        if key in here:
                            report.skip(name, NEAR_DUPLICATE)
                            continue
                        here.add(key)
                        if key in seen:
                            report.skip(name, NEAR_DUPLICATE)
                            if seen.known_to(key, n_known):
                                continue
                            drop.append(counted)
                    counted += 1
                seen.add(here)
                del keys, names, here
                n = int(part_counts[0].class_count[:2].sum()) - len(drop)
                if progress is not None:
                    progress.step("counting", n=n)
                state["messages"] += n
                for v, (merge, spec) in enumerate(zip(merges[:len(part_counts)], specs)):   # (past the limit: one)
                    # each variant's answer dropped once added (before the next variant's, and the answers read)
                    counts, spill, part_counts[v], spilled[v] = part_counts[v], spilled[v], None, None
                    if merge is not None:
                        if drop:
                            counts, spill = _without(counts, spill, drop, spec)
                            workers.poll()
                        merge.add(counts, spill, workers.poll)
                    del counts, spill
                    workers.poll()   # the answers ready read between steps: no worker waits in its send
                del part_counts, spilled
                ends.append([None if merge is None else merge.fold_ends() for merge in merges])
                if limit is not None and state["messages"] > limit and state["variants"] > 1:
                    state["variants"] = 1
                    for merge in merges[1:]:
                        merge.close()
                    merges[1:] = [None] * (len(merges) - 1)
        finally:
            map_large_blocks()   # kept through the held-out pass and the save: their arrays of a few MiB given back when freed
            seen.close()
        del seen
        merged = [None if merge is None else merge.result() for merge in merges]
        spills = [None if merge is None else merge.spill for merge in merges]
        # the workers idle now: half of each variant's folds scored in a process forked for it (Workers.fork)
        yield from held_out_variants(filters, merged, spills, ends, calibration, n_folds, fan_in, deferred,
                                     workers.fork)
    finally:
        for merge in merges:
            if merge is not None:
                merge.close()
