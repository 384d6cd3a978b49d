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

from spamnb.estimator.counting import count_messages, count_variants

__all__ = ["Piece", "plan_training", "plan_scoring", "partitions", "count_partition", "count_partition_variants",
           "count_partition_in_memory", "partition_messages", "unique_messages", "partition_keys", "copies_of", "NEAR_DUPLICATE"]

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
    from spamnb.estimator.calibrate import near_duplicate_key

    key = near_duplicate_key(data)
    return None if key is None else key ^ (bool(is_spam) << 62)


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
    left out, the others' keys added: the messages :func:`copies_of` leaves
    out, without a keying pass."""
    return unique_messages(piece_messages(pieces, report, strict), report, seen=seen)


def count_partition(spec, pieces, strict=False, n_folds=0, spill=None, skip=None):
    """Read, tokenize and count one partition: ``(Counts, CorpusReport)``
    (``spec``: :func:`counting_spec`; ``n_folds``: as :func:`count_messages`;
    ``spill``: the path of the file to write its messages' token hashes to;
    ``skip``: the near-duplicates to leave out, as :func:`count_partition_variants`)."""
    from spamnb.training.corpus import CorpusReport

    report = CorpusReport()
    messages = _partition_messages(pieces, report, strict, skip)
    if spill is None:
        return count_messages(spec, messages, n_folds=n_folds, group=skip is None), report
    with open(spill, "wb", buffering=1 << 20) as out:
        return count_messages(spec, messages, n_folds=n_folds, spill=out, group=skip is None), report


def count_partition_variants(specs, pieces, strict=False, n_folds=0, spills=None, skip=None):
    """:func:`count_partition` under several ``specs`` in one reading
    (:func:`~spamnb.estimator.counting.count_variants`: each message read and
    parsed once): ``([Counts, ...], CorpusReport)``; ``spills``: a path (or
    None) per spec; ``skip``: the near-duplicates to leave out (:func:`copies_of`:
    the corpus's near-duplicates are found before; the others are grouped
    here: copies within the partition, an empty ``skip``)."""
    import contextlib

    from spamnb.training.corpus import CorpusReport

    report = CorpusReport()
    messages = _partition_messages(pieces, report, strict, skip)
    with contextlib.ExitStack() as stack:
        files = [None if path is None else stack.enter_context(open(path, "wb", buffering=1 << 20))
                 for path in (spills or [None] * len(specs))]
        return count_variants(specs, messages, n_folds=n_folds, spills=files, group=skip is None), report


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


def score_spilled(models, path):
    """The calibration's scoring pass over one partition's spill file (its token
    hashes, written by the counting pass: :func:`spamnb.estimator.calibrate.held_out_spilled`),
    removed once scored."""
    from spamnb.estimator.calibrate import held_out_spilled

    try:
        return held_out_spilled(_fold_models(models), path)
    finally:
        os.unlink(path)


def score_spilled_bytes(spilled, models):
    """The calibration's scoring pass over one partition's spill held in
    memory (:func:`count_partition_in_memory`): ``(ham_log_odds,
    spam_log_odds, per_fold)``."""
    import io

    from spamnb.estimator.calibrate import held_out_spilled

    return held_out_spilled(_fold_models(models), io.BytesIO(spilled))
