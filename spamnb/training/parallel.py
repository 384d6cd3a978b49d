"""Training and batch scoring on every core of one machine.

Counts add, so training is a map-reduce:

1. *plan* (the parent): the corpus becomes a stream of partitions of about
   ``partition_size`` messages: file paths, and byte ranges of mbox files cut
   at message boundaries, walked, labelled and skipped by spamnb.training.corpus's own
   rules (the parent finds the boundaries; it never holds a message);
2. *count* (worker processes): each partition is read, tokenized and counted
   (the filter's tokenizer settings, ``counts`` and ``length_norm``) into a
   :class:`Counts` of its own (its tokens' 64-bit hashes and strings, its
   class counts, its ``(classes, tokens)`` feature counts, its tokens' day)
   and dropped;
3. *merge* (the parent): the partitions' counts are added by token, in a tree
   of fixed shape (groups of ``fan_in`` consecutive partitions, level by
   level), so the result does not depend on which worker finished first.

Exactness.  Token order is the order of first sight over the corpus, as in
:meth:`SpamFilter.fit`; class counts are the same; feature counts are sums
of the same per-message values, in another order: bit-identical to ``fit``
for ``counts="raw"`` and ``"binary"`` (integers below 2**53 add exactly),
within float64 rounding for ``"log"`` (sums of log(1 + n)) or
``length_norm`` > 0.  The partitions and the tree depend on
``partition_size`` and ``fan_in`` only, never on the number of workers, so
the model file is byte-identical for every number of workers (and for
:func:`spamnb.training.cluster.fit` with the same partitions).

Processes, not threads: the parser and tokenizer hold the GIL (only the
counting kernels release it).  Workers are forked from this process where
that is safe (Linux, one Python thread), else they come from a
``forkserver`` that has imported this module once; a partition's counts
come back as a handful of flat arrays (one buffer each on the pipe), never a
Python object per token.

:func:`train` (``spamnb train``) also chooses the cutoffs: the counting pass
counts each message into its cross-validation fold too and spills its token
hashes; a scoring pass on the same workers scores them by the fold models
(:mod:`spamnb.model.calibrate`).  The corpus is read once.

Memory: the parent holds the partitions in flight (at most ``2 * n_jobs``)
and one running total per level of the tree (each at most the vocabulary);
a worker holds one partition's messages and counts.  Nothing grows with the
number of messages, only with the vocabulary they bring (docs/scale.md).
"""

from __future__ import annotations

import os
import sys
from array import array
from collections import deque, namedtuple

__all__ = ["Counts", "available_cores", "plan_training", "plan_scoring", "partitions", "counting_spec",
           "count_partition", "count_messages", "merge_counts", "tree_reduce", "tree_levels", "fit_counts", "fit",
           "train", "score_spilled", "Workers", "warm_up", "CorpusChanged", "classify_batch", "add_arguments"]

DEFAULT_PARTITION_SIZE = 500    # messages per partition (~50-80 ms of counting): several per worker on a few thousand messages
DEFAULT_FAN_IN = 8              # partitions merged per node of the reduction tree
# -j of ``spamnb train`` and ``spamnb evaluate`` when not given: 0, every core
# available (docs/scale.md: faster than -j 1 on an idle two-core machine, from
# the shared corpus up; ``classify --batch`` keeps 1: it answers each path at once).
DEFAULT_JOBS = 0


def available_cores():
    """The number of cores this process may run on (``os.sched_getaffinity``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# ---------------------------------------------------------------------------- counts
class Counts:
    """The counts of a partition: what merging needs, as flat arrays.

    Attributes
    ----------
    hashes : uint64 array (n_features,)
        Token hashes in feature order.
    offsets : uint64 array (n_features + 1,), strings : bytes
        Token ``i``'s UTF-8 string is ``strings[offsets[i]:offsets[i + 1]]``.
    class_count : float64 array (n_classes,)
        Messages per class, [ham, spam].
    feature_count : float64 array (n_classes, n_features)
        The transformed token counts per class (``length_norm`` applied).
    last_seen : int32 array (n_features,)
        The day (spamnb.model.ages) each token was last counted; merged by maximum.

    Counted with ``n_folds`` > 0 (:func:`count_messages`), the classes are
    ``2 + 2 * n_folds``: ham and spam, then ham and spam of each
    cross-validation fold (:func:`spamnb.model.calibrate.fold_of`), merged alike;
    :meth:`model` is the first two, :meth:`folds` the rest.
    """

    __slots__ = ("hashes", "offsets", "strings", "class_count", "feature_count", "last_seen")

    def __init__(self, hashes, offsets, strings, class_count, feature_count, last_seen):
        self.hashes, self.offsets, self.strings = hashes, offsets, strings
        self.class_count, self.feature_count, self.last_seen = class_count, feature_count, last_seen

    def __reduce__(self):   # six arrays: sent as six buffers
        return (Counts, (self.hashes, self.offsets, self.strings, self.class_count, self.feature_count,
                         self.last_seen))

    @property
    def n_features(self):
        return len(self.hashes)

    @property
    def n_folds(self):
        return (len(self.class_count) - 2) // 2

    def model(self):
        """These counts without the fold rows (ham and spam only)."""
        if len(self.class_count) == 2:
            return self
        return Counts(self.hashes, self.offsets, self.strings, self.class_count[:2],
                      self.feature_count[:2].copy(), self.last_seen)

    def folds(self):
        """``(class_count, feature_count)`` of the folds: ``(n_folds, 2)`` and
        ``(n_folds, 2, n_features)`` (views)."""
        n_folds = self.n_folds
        return (self.class_count[2:].reshape(n_folds, 2),
                self.feature_count[2:].reshape(n_folds, 2, self.n_features))

    @property
    def nbytes(self):
        return (self.hashes.nbytes + self.offsets.nbytes + len(self.strings) + self.class_count.nbytes
                + self.feature_count.nbytes + self.last_seen.nbytes)

    @classmethod
    def empty(cls, n_classes=2):
        import numpy as np

        return cls(np.zeros(0, np.uint64), np.zeros(1, np.uint64), b"", np.zeros(n_classes),
                   np.zeros((n_classes, 0)), np.zeros(0, np.int32))

    @classmethod
    def from_word_counts(cls, vocabulary, word_counts, last_seen):
        """The counts of a :class:`Vocabulary` and a :class:`~spamnb.bayes.wordcounts.WordCounts`
        over it (copied: the result owns its arrays); ``last_seen``: one day
        for every token, or an int32 array of a day per token."""
        import numpy as np

        n = vocabulary.n_features
        hashes = vocabulary.hashes()
        blob, offsets = vocabulary.string_table()
        word_counts.resize(n)
        days = np.empty(n, dtype=np.int32)
        days[...] = last_seen
        return cls(hashes, np.frombuffer(offsets, dtype=np.uint64).copy(), bytes(blob),
                   np.array(word_counts.class_count_, dtype=np.float64), word_counts.matrix().copy(), days)

    @classmethod
    def from_filter(cls, spam_filter):
        """The counts of a fitted :class:`SpamFilter`."""
        import numpy as np

        if not spam_filter.is_fitted:
            raise ValueError("the filter has learned nothing yet")
        n = spam_filter.vocabulary_.n_features
        days = np.frombuffer(spam_filter.ages_.days(n), dtype=np.int32)
        return cls.from_word_counts(spam_filter.vocabulary_, spam_filter.word_counts_, days)

    def word_counts(self, alpha=1.0, prior="mle"):
        """These counts as a :class:`~spamnb.bayes.wordcounts.WordCounts` (over a copy)."""
        from spamnb.bayes.wordcounts import WordCounts

        flat = array("d")
        flat.frombytes(self.feature_count.tobytes())
        return WordCounts.from_arrays(alpha, prior, self.class_count.tolist(), flat)

    def vocabulary(self):
        """A new :class:`Vocabulary` of these tokens, in this order."""
        from spamnb.bayes.vocabulary import Vocabulary

        vocabulary = Vocabulary()
        vocabulary.add(_Tokens(self))
        return vocabulary

    def to_filter(self, spam_filter):
        """Give an unfitted ``spam_filter`` these counts (counted with its
        tokenizer, ``counts`` and ``length_norm``: :func:`counting_spec`) and
        the tokens' last-seen days (the model created on the latest); returns it."""
        from spamnb.model.ages import Ages, today

        if spam_filter.is_fitted:
            raise ValueError("to_filter takes an unfitted SpamFilter")
        self = self.model()
        spam_filter.vocabulary_ = self.vocabulary()
        spam_filter.word_counts_ = self.word_counts(float(spam_filter.alpha), spam_filter.prior)
        day = int(self.last_seen.max()) if self.n_features else today()
        spam_filter.ages_ = Ages(array("i", self.last_seen.astype("int32").tobytes()), day, day,
                                 spam_filter.ages_.max_tokens)
        return spam_filter


class _Tokens:
    """A :class:`Counts`' tokens in the shape :meth:`Vocabulary.add` reads (``hashes``,
    ``write_tokens``), so merging inserts hashes and copies strings without a
    Python object per token."""

    def __init__(self, counts):
        self.counts = counts
        self.hashes = counts.hashes
        self.new = None

    def write_tokens(self, positions, count, blob, offsets):
        import numpy as np

        c = self.counts
        pos = np.frombuffer(positions, dtype=np.int32)[:count]
        self.new = pos.copy()
        if count and count == c.n_features and pos[0] == 0 and (np.diff(pos) == 1).all():
            # every token new, in order (a first part, a filter built): the strings as they are
            base = len(blob)
            blob += c.strings
            offsets.frombytes((c.offsets[1:].astype(np.int64) + base).astype(np.uint64).tobytes())
            return
        strings = np.frombuffer(c.strings, dtype=np.uint8)
        for chunk in range(0, count, 1 << 16):   # bounded temporaries: a byte index per string byte
            part = pos[chunk:chunk + (1 << 16)]
            starts = c.offsets[part].astype(np.int64)
            lengths = c.offsets[part + 1].astype(np.int64) - starts
            ends = np.cumsum(lengths)
            base = len(blob)
            total = int(ends[-1]) if part.size else 0
            if total:
                source = np.repeat(starts - (ends - lengths), lengths) + np.arange(total)
                blob += strings[source].tobytes()
            offsets.frombytes((ends + base).astype(np.uint64).tobytes())


class _Sum:
    """Counts added one at a time, by token, folded left to right: what
    :func:`merge_counts` does to a list, holding one running total instead of
    the list.  One part added is the result as it is.

    Each part's counts are added into the total's columns of its tokens
    (``total[:, index] += part``; a part's tokens are distinct, so each
    count is one addition, in the order of the parts): the work is the
    part's size, not the total's; the total grows by doubling."""

    def __init__(self):
        self.n = 0
        self.first = self.vocabulary = self.total = self.days = self.class_count = None

    def __len__(self):
        return self.n

    def add(self, part):
        self.n += 1
        if self.n == 1:
            self.first = part
            return
        if self.n == 2:
            import numpy as np

            from spamnb.bayes.vocabulary import Vocabulary

            first, self.first = self.first, None
            self.vocabulary = Vocabulary()
            n_classes = len(first.class_count)
            self.total = np.zeros((n_classes, max(1024, 2 * first.n_features)))
            self.days = np.zeros(self.total.shape[1], dtype=np.int32)
            self.class_count = np.zeros(n_classes)
            self._add(first)
        self._add(part)

    def _add(self, part):
        import numpy as np

        if len(part.class_count) != len(self.class_count):
            raise ValueError("cannot merge counts of different numbers of classes")
        index = self.vocabulary.add(_Tokens(part)) if part.n_features else array("i")
        index = np.frombuffer(index, dtype=np.int32)
        n = self.vocabulary.n_features
        if n > self.total.shape[1]:
            capacity = max(n, 2 * self.total.shape[1])
            total = np.zeros((self.total.shape[0], capacity))
            total[:, :self.total.shape[1]] = self.total
            days = np.zeros(capacity, dtype=np.int32)
            days[:self.days.size] = self.days
            self.total, self.days = total, days
        self.total[:, index] += part.feature_count
        self.days[index] = np.maximum(self.days[index], part.last_seen)
        self.class_count += part.class_count

    def result(self):
        if self.n == 0:
            return Counts.empty()
        if self.n == 1:
            return self.first
        import numpy as np

        n = self.vocabulary.n_features
        blob, offsets = self.vocabulary.string_table()
        return Counts(self.vocabulary.hashes(), np.frombuffer(offsets, dtype=np.uint64).copy(), bytes(blob),
                      self.class_count.copy(), np.ascontiguousarray(self.total[:, :n]), self.days[:n].copy())


class _Gather:
    """A group of items handed to ``merge`` whole (one item: itself)."""

    def __init__(self, merge):
        self.merge, self.items = merge, []

    def __len__(self):
        return len(self.items)

    def add(self, item):
        self.items.append(item)

    def result(self):
        return self.items[0] if len(self.items) == 1 else self.merge(self.items)


def merge_counts(parts):
    """The sum of a sequence of :class:`Counts`, by token: exact (the counts
    of each token add: ``WordCounts.merge``), tokens in order of first sight
    along ``parts``.  One part is returned as it is; the sum is folded left
    to right."""
    total = _Sum()
    for part in parts:
        total.add(part)
    return total.result()


def tree_reduce(items, fan_in=DEFAULT_FAN_IN, merge=None):
    """Merge a stream of counts in a tree: groups of ``fan_in`` consecutive
    items per level, the last group of a level possibly smaller, until one is
    left; the same shape as merging whole levels (:func:`tree_levels`, what
    :mod:`spamnb.training.cluster` runs), so the same sums in the same order.

    Streaming: each level holds one running total (:func:`merge_counts`
    folded one part at a time), so memory is about the number of levels
    times the vocabulary.  ``merge``: a function of a list of items instead
    (for other items than :class:`Counts`)."""
    if fan_in < 2:
        raise ValueError("fan_in must be at least 2")
    new = _Sum if merge is None else (lambda: _Gather(merge))
    levels = []
    for item in items:
        level = 0
        while True:
            if level == len(levels):
                levels.append(new())
            levels[level].add(item)
            if len(levels[level]) < fan_in:
                break
            item = levels[level].result()
            levels[level] = new()
            level += 1
    if not levels:
        return merge_counts([]) if merge is None else merge([])
    # Flush bottom-up: each level's last, short group goes one level up, as
    # the level-by-level reduction merges it; the top level's group is the
    # last one (one item: the result itself).
    for level in range(len(levels)):
        if not any(len(higher) for higher in levels[level + 1:]):
            return levels[level].result()
        if len(levels[level]):
            levels[level + 1].add(levels[level].result())
    raise AssertionError("unreachable")


def tree_levels(items, fan_in=DEFAULT_FAN_IN, merge=merge_counts):
    """The same tree, level by level (for lazy/distributed ``merge``)."""
    if fan_in < 2:
        raise ValueError("fan_in must be at least 2")
    level = list(items)
    if not level:
        return merge([])
    if len(level) == 1:
        return merge(level)
    while len(level) > 1:
        level = [merge(level[i:i + fan_in]) for i in range(0, len(level), fan_in)]
    return level[0]


# ---------------------------------------------------------------------------- planning
# A piece of a partition: a file read as spamnb.training.corpus.read_messages reads it
# ("file": a message, or an mbox of messages), or messages ``first``.. of an
# mbox file's byte range ``start``..``end`` ("shard"); for scoring, a path of
# ``spamnb classify --batch`` ("path") or stdin's bytes ("data", in ``path``).
Piece = namedtuple("Piece", "kind path name is_spam start end first")

_SHARD_ABOVE = 1 << 20   # an mbox file larger than this is cut into shards of partition_size messages


def _file_pieces(path, name, is_spam, partition_size):
    """The pieces of one corpus file: shards of a large mbox (cut where
    :func:`spamnb.mail.mbox.message_starts` says :func:`spamnb.mail.mbox.iter_mbox`
    cuts, found with a search over a map of the file: no message is held
    here), else the file whole (read by the worker as the corpus reader reads
    it, with the same skips).  Shard messages are numbered by envelope line."""
    import mmap
    import stat

    from spamnb.mail.mbox import is_mbox_start, message_starts

    whole = Piece("file", path, name, is_spam, 0, None, 0)
    if partition_size is None:   # one process reads the corpus: no shards
        yield whole
        return
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size <= _SHARD_ABOVE:
            yield whole
            return
        f = open(path, "rb")
    except OSError:
        yield whole   # the worker skips it and says why, as the corpus reader does
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


def plan_training(trees=(), spam=(), ham=(), report=None, strict=False, partition_size=DEFAULT_PARTITION_SIZE):
    """The pieces of a labelled corpus, in the order and with the labels of
    :func:`spamnb.training.corpus.iter_labelled` (the same walk, Maildir and Maildir++
    rules and skips), lazily: no message is read here.  ``partition_size``
    None: large mbox files are not cut into shards."""
    from spamnb.training import corpus

    report = corpus.CorpusReport() if report is None else report
    sources = [(tree, None) for tree in trees] + [(p, True) for p in spam] + [(p, False) for p in ham]
    for root, is_spam in sources:
        root = os.fspath(root)
        if not os.path.exists(root):
            raise corpus.CorpusError(f"{root}: no such file or folder")
        root_is_spam = corpus.is_spam_name(os.path.basename(os.path.normpath(root))) if is_spam is None else is_spam
        if not os.path.isdir(root):
            yield from _file_pieces(root, os.path.basename(root), root_is_spam, partition_size)
            continue
        prefix, labels = os.path.join(root, ""), {}   # the walk's paths start with root: no relpath calls
        for path in corpus.walk_files(root, report, strict, "skip" if is_spam is False else "read"):
            relpath = path[len(prefix):] if path.startswith(prefix) else os.path.relpath(path, root)
            if os.sep != "/":
                relpath = relpath.replace(os.sep, "/")
            label = is_spam
            if label is None:   # by folder names: one label per folder
                folder = relpath.rpartition("/")[0]
                label = labels.get(folder)
                if label is None:
                    label = labels[folder] = corpus.tree_label(relpath, root_is_spam)
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


def partitions(pieces, partition_size=DEFAULT_PARTITION_SIZE):
    """Group pieces into lists of ``partition_size`` messages (an mbox shard
    is a partition of its own)."""
    if partition_size < 1:
        raise ValueError("partition_size must be at least 1")
    batch = []
    for piece in pieces:
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
def _messages(pieces, report, strict):
    """``(name, bytes, is_spam)`` of the messages of some training pieces,
    read as spamnb.training.corpus reads them (the same skips)."""
    from spamnb.training import corpus

    for piece in pieces:
        if piece.kind == "file":
            messages = corpus.file_messages(piece.path, piece.name, report, strict)
        elif piece.kind == "shard":
            messages = corpus.shard_messages(piece.path, piece.name, piece.start, piece.end, piece.first,
                                             report, strict)
        else:
            raise ValueError(f"unknown piece kind {piece.kind!r}")
        for name, data in messages:
            yield name, data, piece.is_spam


_TOKENIZERS = {}


def _tokenizer(settings):
    from spamnb.mail.tokenizer import Tokenizer

    key = repr(sorted(settings.items()))
    tokenizer = _TOKENIZERS.get(key)
    if tokenizer is None:
        _TOKENIZERS.clear()
        tokenizer = _TOKENIZERS[key] = Tokenizer.from_settings(settings)   # version 2 models too
    return tokenizer


def counting_spec(spam_filter):
    """What a worker needs to count as ``spam_filter.fit`` counts: its
    tokenizer's settings, ``counts`` and ``length_norm`` (a small dict)."""
    return {"tokenizer": spam_filter.tokenizer_.settings, "counts": spam_filter.counts,
            "length_norm": float(spam_filter.length_norm)}


def count_partition(spec, pieces, strict=False, n_folds=0, spill=None):
    """Read, tokenize and count one partition: ``(Counts, CorpusReport)``
    (``spec``: :func:`counting_spec`; ``n_folds``: as :func:`count_messages`;
    ``spill``: the path of the file to write its messages' token hashes to)."""
    from spamnb.training.corpus import CorpusReport

    report = CorpusReport()
    messages = ((data, is_spam) for _name, data, is_spam in _messages(pieces, report, strict))
    if spill is None:
        return count_messages(spec, messages, n_folds=n_folds), report
    with open(spill, "wb", buffering=1 << 20) as out:
        return count_messages(spec, messages, n_folds=n_folds, spill=out), report


def count_messages(spec, messages, day=None, n_folds=0, spill=None):
    """The :class:`Counts` of ``(message, is_spam)`` pairs (a message: bytes,
    a path or an ``email.message.Message``), counted as ``SpamFilter.fit``
    counts (``spec``: :func:`counting_spec`); every token seen on ``day``
    (default today).  ``n_folds`` > 0 also counts each message into its
    cross-validation fold's rows (:func:`spamnb.model.calibrate.fold_of`), for the
    calibration; the model's rows are the same either way.  ``spill``: a
    binary file to write each message's token hashes, class and fold to
    (:func:`spamnb.model.calibrate.spill`; needs ``n_folds``), for the calibration's
    scoring pass."""
    import numpy as np

    from spamnb.bayes._vocab import add_counts
    from spamnb.model.ages import today
    from spamnb.model.calibrate import fold_of, spill as spill_record
    from spamnb.model.spam_filter import COUNT_TRANSFORMS, message_bytes
    from spamnb.bayes.vocabulary import Vocabulary
    from spamnb.bayes.wordcounts import WordCounts

    transform = COUNT_TRANSFORMS[spec["counts"]]
    length = float(spec.get("length_norm", 0.0))
    stream = _tokenizer(spec["tokenizer"]).stream
    vocabulary = Vocabulary()
    word_counts = WordCounts(1.0, "mle", 2)
    add = word_counts.add
    # the folds' rows (ham and spam of each fold): added to as WordCounts.add adds
    fold_rows = [array("d") for _ in range(2 * n_folds)]
    fold_messages = [0.0] * (2 * n_folds)
    for data, is_spam in messages:
        data = message_bytes(data)
        tokens = stream(data)
        indices = vocabulary.add(tokens)
        n_features = vocabulary.n_features
        add(indices, int(bool(is_spam)), transform, 1, n_features, length)
        if n_folds:
            fold = fold_of(data, n_folds)
            k = 2 * fold + int(bool(is_spam))
            row = fold_rows[k]
            if len(row) < n_features:
                row.frombytes(bytes(8 * (n_features - len(row))))
            add_counts(indices, row, transform, 1.0, length)
            fold_messages[k] += 1.0
            if spill is not None:
                spill_record(spill, tokens.hashes, is_spam, fold)
    if not n_folds:
        return Counts.from_word_counts(vocabulary, word_counts, today() if day is None else day)
    # one matrix for the model's rows and the folds', each row copied once and dropped
    n = vocabulary.n_features
    matrix = np.zeros((2 + 2 * n_folds, n))
    word_counts.resize(n)
    matrix[:2] = word_counts.matrix()
    class_count = [*word_counts.class_count_, *fold_messages]
    word_counts = add = None
    for k in range(2 * n_folds):
        row, fold_rows[k] = fold_rows[k], None
        matrix[2 + k, :len(row)] = np.frombuffer(row, dtype=np.float64)
        del row
    hashes = vocabulary.hashes()
    blob, offsets = vocabulary.string_table()
    return Counts(hashes, np.frombuffer(offsets, dtype=np.uint64).copy(), bytes(blob),
                  np.array(class_count, dtype=np.float64), matrix,
                  np.full(n, today() if day is None else day, dtype=np.int32))


_MODELS = {}


def _file_identity(path):
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns)   # the same on every machine of a shared file system


def _model(path, identity, cutoffs=None):
    """The model at ``path``, loaded once per worker (``cutoffs``: the
    ``(spam, ham)`` cutoffs in effect, set on it); ModelError when the file
    is not the one the job started with (replaced while the job ran)."""
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.model.store import ModelError

    key = (path, identity)
    model = _MODELS.get(key)
    if model is None:
        model = SpamFilter.load(path)
        if identity is not None and _file_identity(path) != identity:
            raise ModelError(f"{path}: the model file was replaced while the job ran; run it again")
        _MODELS.clear()
        _MODELS[key] = model
    if cutoffs is not None:
        model.spam_cutoff, model.ham_cutoff = cutoffs
    return model


def score_partition(model_path, identity, cutoffs, pieces, json_lines=False):
    """``spamnb classify --batch`` over one partition with the model at
    ``model_path``: ``(text, stderr, n_errors)``, the lines the one-process
    batch writes for these pieces (an unreadable path: an error line, and
    the partition goes on), what it writes to stderr, and how many errors."""
    import contextlib
    import io
    from types import SimpleNamespace

    from spamnb.cli import main as cli
    from spamnb.mail.mbox import iter_mbox_range

    lines = cli._Lines(SimpleNamespace(json=json_lines), _model(model_path, identity, cutoffs))
    lines.out = io.StringIO()
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        for piece in pieces:
            try:
                if piece.kind == "shard":
                    messages = ((f"{piece.name}#{piece.first + i}", data)
                                for i, data in enumerate(iter_mbox_range(piece.path, piece.start, piece.end)))
                elif piece.kind == "data":
                    messages = [("-", piece.path)]
                else:
                    messages = cli._messages_of(piece.path)
                for name, data in messages:
                    lines.verdict(name, data)
            except (cli.CommandError, OSError) as exc:
                reason = str(exc) if isinstance(exc, cli.CommandError) else (exc.strerror or str(exc))
                lines.error(piece.name, reason.removeprefix(f"{piece.name}: "))
    return lines.out.getvalue(), errors.getvalue(), lines.errors


# ---------------------------------------------------------------------------- driving
_PRELOAD = ["spamnb.training.parallel", "spamnb.model.spam_filter", "spamnb.model.calibrate", "spamnb.mail.tokenizer", "numpy"]


def warm_up(n_jobs=None):
    """Start the forkserver the workers come from (it imports numpy and spamnb
    once), in the background, when ``n_jobs`` asks for workers: called first
    thing, its start-up overlaps this process's own imports and planning."""
    if n_jobs == 1 or _start_method() != "forkserver":
        return
    import multiprocessing
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(_PRELOAD)
    forkserver.ensure_running()   # spawns the server and returns; workers are forked once it is up


def _start_method():
    """"fork" where this process may fork safely (Linux, no other Python thread:
    the workers start at once with what this process has imported; the pool
    forks them all before its own threads start), else "forkserver"."""
    import threading

    if os.environ.get("SPAMNB_START_METHOD") in ("fork", "forkserver", "spawn"):
        return os.environ["SPAMNB_START_METHOD"]
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return "fork"
    return "forkserver"


def _executor(n_jobs, initializer=None, initargs=()):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = _start_method()
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(_PRELOAD)
    else:   # what the workers need, imported once here before they fork
        import importlib

        for name in _PRELOAD:
            importlib.import_module(name)
    return ProcessPoolExecutor(max_workers=n_jobs, mp_context=context, initializer=initializer, initargs=initargs)


class Workers:
    """``n_jobs`` worker processes (0 or None: every available core), started
    when a pass first has two jobs and shared by the passes of a job (the
    counting pass and the calibration's scoring pass of ``spamnb train``);
    with ``n_jobs`` 1 every job runs in this process.  A context manager."""

    def __init__(self, n_jobs=None):
        self.n_jobs = available_cores() if n_jobs is None or n_jobs <= 0 else int(n_jobs)
        self.pool = None

    def __enter__(self):
        if self.n_jobs > 1:
            warm_up(self.n_jobs)
        return self

    def __exit__(self, *exc):
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def run_ordered(self, function, jobs, window=2):
        """``function(*job)`` for each job, results in job order, at most
        ``window * n_jobs`` jobs in flight (``jobs`` is consumed lazily)."""
        from itertools import chain, islice

        jobs = iter(jobs)
        head = list(islice(jobs, 2))
        jobs = chain(head, jobs)
        if self.n_jobs == 1 or (len(head) < 2 and self.pool is None):   # one job: no start-up for nothing
            for job in jobs:
                yield function(*job)
            return
        if self.pool is None:
            self.pool = _executor(self.n_jobs)
        pending = deque()
        try:
            for job in jobs:
                pending.append(self.pool.submit(function, *job))
                if len(pending) >= window * self.n_jobs:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def run_ordered(function, jobs, n_jobs, window=2):
    """``function(*job)`` for each job, results in job order; with ``n_jobs``
    worker processes (0 or None: every available core; in this process for
    1, or for a single job), at most ``window * n_jobs`` jobs in flight
    (``jobs`` is consumed lazily)."""
    with Workers(n_jobs) as workers:
        yield from workers.run_ordered(function, jobs, window)


def _merge_reports(total, report):
    total.read += report.read
    for reason, n in report.skipped.items():
        total.skipped[reason] = total.skipped.get(reason, 0) + n
        paths = total.examples.setdefault(reason, [])
        paths.extend(report.examples.get(reason, [])[:max(0, total.EXAMPLES - len(paths))])


def fit_counts(pieces, spec, n_jobs=None, partition_size=DEFAULT_PARTITION_SIZE, fan_in=DEFAULT_FAN_IN,
               report=None, strict=False, n_folds=0, workers=None, progress=None, spills=None):
    """The merged :class:`Counts` of labelled ``pieces`` (see :func:`plan_training`;
    ``n_folds``: as :func:`count_messages`; ``workers``: a :class:`Workers`
    to run on instead of ``n_jobs`` new ones; ``spills``: ``(folder, paths)``,
    each partition's token hashes spilled to a file in ``folder``, its path
    appended to the list ``paths``)."""
    from spamnb.training.corpus import CorpusReport

    report = CorpusReport() if report is None else report

    def spill(i):
        if spills is None:
            return None
        spills[1].append(os.path.join(spills[0], f"part-{i:09d}"))
        return spills[1][-1]

    jobs = ((spec, part, strict, n_folds, spill(i)) for i, part in enumerate(partitions(pieces, partition_size)))

    def counted(workers):
        for part_counts, part_report in workers.run_ordered(count_partition, jobs):
            _merge_reports(report, part_report)
            if progress is not None:
                progress.step("counting", n=int(part_counts.class_count[:2].sum()))
            yield part_counts

    if workers is not None:
        return tree_reduce(counted(workers), fan_in)
    with Workers(n_jobs) as workers:
        return tree_reduce(counted(workers), fan_in)


def fit(trees=(), spam=(), ham=(), spam_filter=None, n_jobs=None, partition_size=DEFAULT_PARTITION_SIZE,
        fan_in=DEFAULT_FAN_IN, report=None, strict=False):
    """Train ``spam_filter`` (default ``SpamFilter()``) on a corpus with ``n_jobs``
    processes (default: the cores available); returns the fitted filter.

    ``trees``, ``spam``, ``ham``: as :func:`spamnb.training.corpus.iter_labelled`.
    The message features (``feature_weight > 0``) are not counted in parallel:
    ValueError.
    """
    from spamnb.model.spam_filter import SpamFilter

    spam_filter = SpamFilter() if spam_filter is None else spam_filter
    if spam_filter.feature_weight:
        raise ValueError("message features (feature_weight > 0) are not trained in parallel; use -j 1")
    pieces = plan_training(trees, spam, ham, report, strict, partition_size)
    merged = fit_counts(pieces, counting_spec(spam_filter), n_jobs, partition_size, fan_in, report, strict)
    return merged.to_filter(spam_filter)


class CorpusChanged(ValueError):
    """The corpus read again for the calibration is not the one counted."""


_FOLD_MODELS = {}


def _fold_models(models):
    """A :class:`~spamnb.model.calibrate.FoldModels`, or the folder it was saved to (mapped once per worker)."""
    from spamnb.model.calibrate import FoldModels

    if not isinstance(models, str):
        return models
    found = _FOLD_MODELS.get(models)
    if found is None:
        _FOLD_MODELS.clear()
        found = _FOLD_MODELS[models] = FoldModels.load(models)
    return found


def score_spilled(models, path):
    """The calibration's scoring pass over one partition's spill file (its token
    hashes, written by the counting pass: :func:`spamnb.model.calibrate.held_out_spilled`),
    removed once scored."""
    from spamnb.model.calibrate import held_out_spilled

    try:
        return held_out_spilled(_fold_models(models), path)
    finally:
        os.unlink(path)


def count_partition_in_memory(spec, pieces, strict=False, n_folds=0):
    """:func:`count_partition` with the spill kept in memory (on Dask, where
    the worker holds it for the scoring pass): ``(Counts, CorpusReport,
    bytes)``."""
    import io

    from spamnb.training.corpus import CorpusReport

    report = CorpusReport()
    out = io.BytesIO()
    messages = ((data, is_spam) for _name, data, is_spam in _messages(pieces, report, strict))
    return count_messages(spec, messages, n_folds=n_folds, spill=out), report, out.getvalue()


def score_spilled_bytes(spilled, models):
    """The calibration's scoring pass over one partition's spill held in
    memory (:func:`count_partition_in_memory`): ``(ham_log_odds,
    spam_log_odds, per_fold)``."""
    import io

    from spamnb.model.calibrate import held_out_spilled

    return held_out_spilled(_fold_models(models), io.BytesIO(spilled))


def train(trees=(), spam=(), ham=(), spam_filter=None, n_jobs=1, partition_size=DEFAULT_PARTITION_SIZE,
          fan_in=DEFAULT_FAN_IN, report=None, strict=False, calibration=None, n_folds=None, dask=None,
          progress=None, word_pairs=0):
    """``spamnb train``: count a corpus and choose the cutoffs, streaming;
    and, with ``word_pairs`` W >= 2, choose between the filter's tokenizer
    and the same with word pairs of window W.

    Returns ``(spam_filter, calibration)``: those :func:`train_one` (below)
    gives for the variant kept.

    ``word_pairs`` (with ``calibration``, when the corpus has enough mail for
    it): the corpus is trained a second time with the tokenizer's
    ``word_pairs`` set to W and its text budget raised (``tokenizer.with_pairs``;
    the same passes, counts and cutoffs), and the
    variant the calibration's held-out log-odds (10-fold cross-validation
    inside the training mail) favour is kept: the one with pairs only when,
    at the cutoffs chosen for each, it misses at most :data:`PAIRS_GAIN`
    times the spam the other misses, and its 1-AUC is no higher
    (docs/accuracy.md, "word pairs, chosen on the user's own mail").  The
    calibration's ``word_pairs`` field holds ``(window kept, spam missed
    without, with, 1-AUC % without, with)`` (the four None when the corpus
    has more than :data:`PAIRS_MAX_MESSAGES` messages: not tried); each
    variant's model is the one training it alone gives.
    """
    import numpy as np

    from spamnb.training.corpus import CorpusReport
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.bayes.metrics import one_minus_auc_percent
    from spamnb.mail.tokenizer import with_pairs

    spam_filter = SpamFilter() if spam_filter is None else spam_filter
    options = dict(trees=trees, spam=spam, ham=ham, n_jobs=n_jobs, partition_size=partition_size, fan_in=fan_in,
                   strict=strict, calibration=calibration, n_folds=n_folds, dask=dask, progress=progress)
    if word_pairs and not 2 <= word_pairs <= 8:
        raise ValueError(f"word_pairs must be 0 or from 2 to 8, got {word_pairs!r}")
    template = _params(spam_filter)
    fitted, cal, scores = train_one(spam_filter=spam_filter, report=report, **options)
    if not word_pairs or cal is None or cal.expected_fpr is None or fitted.tokenizer_.word_pairs == word_pairs:
        return fitted, cal
    if cal.n_ham + cal.n_spam > PAIRS_MAX_MESSAGES:   # the second training would cost more than it is worth
        return fitted, cal._replace(word_pairs=(int(fitted.tokenizer_.word_pairs), None, None, None, None))

    def error(ham_spam):
        ham, spam_scores = ham_spam
        y = np.concatenate([np.zeros(ham.size, dtype=bool), np.ones(spam_scores.size, dtype=bool)])
        return one_minus_auc_percent(y, np.concatenate([ham, spam_scores]))

    paired = SpamFilter(**dict(template, tokenizer=with_pairs(word_pairs, fitted.tokenizer_)))
    fitted_pairs, cal_pairs, scores_pairs = train_one(spam_filter=paired, report=CorpusReport(), **options)
    figures = (cal.expected_spam_missed, cal_pairs.expected_spam_missed, error(scores), error(scores_pairs))
    if prefer_pairs(*figures):
        return fitted_pairs, cal_pairs._replace(word_pairs=(word_pairs, *figures))
    return fitted, cal._replace(word_pairs=(int(fitted.tokenizer_.word_pairs), *figures))


def prefer_pairs(missed, missed_pairs, error, error_pairs):
    """The rule of :func:`train`: the variant with word pairs is kept when, at
    the cutoffs chosen for each, it misses at most :data:`PAIRS_GAIN` times
    the held-out spam the other misses (which must be some), and its held-out
    1-AUC (``error_pairs``) is no higher."""
    return missed > 0 and missed_pairs <= PAIRS_GAIN * missed and error_pairs <= error


def _params(spam_filter):
    """The hyper-parameters a ``SpamFilter`` was made with (``__init__``'s arguments)."""
    import inspect

    names = [n for n in inspect.signature(type(spam_filter).__init__).parameters if n != "self"]
    return {n: getattr(spam_filter, n) for n in names}


# Word pairs are kept only when they cut the spam missed at the held-out
# cutoffs by a fifth or more and do not rank worse (they make the model larger
# and scoring slower).  On the shared corpora (docs/accuracy.md): Enron-Spam
# 11.79 -> 7.96 % (0.68x), 1-AUC 0.0762 -> 0.0405 %: kept; SpamAssassin 3.48
# -> 6.22 % (1.79x), 1-AUC 0.0373 -> 0.0337 %: not kept.
PAIRS_GAIN = 0.8
# The choice trains the corpus a second time, with a vocabulary several times
# larger (pairs): on 96,736 messages (16 copies of the SpamAssassin corpus with
# varied bytes) `spamnb train -j 2` took 28.1 s against 5.9 s without the choice
# and peaked at 384 MiB against 245 (docs/scale.md, runs E and F).  Above this
# many messages it is not tried (``--word-pairs W`` still gives pairs).
PAIRS_MAX_MESSAGES = 20_000
# The window ``spamnb train --word-pairs auto`` tries (docs/accuracy.md: window 3
# ranked worse than 2 on both corpora).
AUTO_PAIRS = 2


def train_one(trees=(), spam=(), ham=(), spam_filter=None, n_jobs=1, partition_size=DEFAULT_PARTITION_SIZE,
              fan_in=DEFAULT_FAN_IN, report=None, strict=False, calibration=None, n_folds=None, dask=None,
              progress=None):
    """One training of :func:`train`: ``(spam_filter, calibration, scores)``,
    ``scores`` the held-out ``(ham_log_odds, spam_log_odds)`` the cutoffs were
    chosen from (None without them).

    ``spam_filter`` (default ``SpamFilter()``) fitted as :func:`fit` fits it (``n_jobs`` 1: in this
    process, one message at a time, the counts of ``SpamFilter.fit``; any
    other ``n_jobs``, 0 on a one-core machine included: by partitions, the
    model of every ``n_jobs`` != 1), and
    the :class:`~spamnb.model.calibrate.Calibration` of its cutoffs (not applied),
    or None when ``calibration`` is None.

    ``calibration``: a dict of :func:`spamnb.model.calibrate.calibration_check` and
    :func:`~spamnb.model.calibrate.from_scores` options (``target_fpr``,
    ``max_unsure``, ``margin``, ``min_ham``, ``min_spam``).  The counting pass
    also counts each message into its cross-validation fold
    (:func:`spamnb.model.calibrate.fold_of`) and spills its token hashes to a
    temporary file (one per partition; 8 bytes a token, removed as scored);
    the scoring pass, on the same workers, scores each message's hashes by
    its fold's model (the counts minus the fold's:
    :class:`~spamnb.model.calibrate.FoldModels`), keeping one float per message.
    Memory: the vocabulary times ``2 + 4 * n_folds`` floats (counts and fold
    models), plus 8 bytes a message; no matrix of the corpus.

    ``dask``: a scheduler address; both passes run there
    (:func:`spamnb.training.cluster.count_corpus` with ``spill=True``: each partition's
    spill stays in the memory of the worker that counted it; then
    :func:`spamnb.training.cluster.held_out_spilled`: the fold models are built on a
    worker from the merged counts there, and each spill is scored where it is).
    """
    import contextlib
    import tempfile

    import numpy as np

    from spamnb.model import calibrate
    from spamnb.training.corpus import CorpusReport
    from spamnb.model.spam_filter import SpamFilter

    spam_filter = SpamFilter() if spam_filter is None else spam_filter
    if spam_filter.feature_weight:
        raise ValueError("message features (feature_weight > 0) are not trained by partitions; use SpamFilter.fit")
    if partition_size < 1:
        raise ValueError("partition_size must be at least 1")
    n_folds = calibrate.DEFAULT_FOLDS if n_folds is None else n_folds
    folds = n_folds if calibration is not None else 0
    spec = counting_spec(spam_filter)
    report = CorpusReport() if report is None else report
    one = n_jobs == 1 and not dask   # asked for -j 1 (-j 0 on one core: partitions, here)
    with contextlib.ExitStack() as stack:
        # one process spills to an unnamed file; workers to files in a folder, which
        # goes once they have stopped (their files closed)
        work = None if one or dask or not folds else stack.enter_context(
            tempfile.TemporaryDirectory(prefix="spamnb-train-"))
        workers = stack.enter_context(Workers(1 if dask else n_jobs))
        spills = (work, []) if work is not None else None

        def plan(report):
            return plan_training(trees, spam, ham, report, strict, None if one else partition_size)

        if dask:
            from spamnb.training import cluster as spamnb_dask

            client = stack.enter_context(spamnb_dask.connect(dask))
            merged = spamnb_dask.count_corpus(trees, spam, ham, client=client, spec=spec, partition_size=partition_size,
                                              fan_in=fan_in, report=report, strict=strict, n_folds=folds,
                                              spill=bool(folds))
            if folds:
                spilled, merged = merged, merged.counts
        elif one:
            messages = ((data, is_spam) for _name, data, is_spam in _messages(plan(report), report, strict))
            if progress is not None:
                messages = progress.wrap(messages, "counting")
            spill = stack.enter_context(tempfile.TemporaryFile(prefix="spamnb-train-")) if folds else None
            merged = count_messages(spec, messages, n_folds=folds, spill=spill)
        else:
            merged = fit_counts(plan(report), spec, partition_size=partition_size, fan_in=fan_in, report=report,
                                strict=strict, n_folds=folds, workers=workers, progress=progress, spills=spills)
        fold_class_count, fold_feature_count = merged.folds() if folds else (None, None)
        merged.to_filter(spam_filter)
        if calibration is None:
            return spam_filter, None, None
        options = dict(calibration)
        n_ham, n_spam = (int(v) for v in spam_filter.class_count_)
        fixed = calibrate.calibration_check(spam_filter, n_ham, n_spam, **{
            k: options[k] for k in ("target_fpr", "max_unsure", "min_ham", "min_spam") if k in options})
        if fixed is not None:
            return spam_filter, fixed, None
        del merged
        if dask:   # the fold models are built on the cluster, where the spills are
            del fold_feature_count
            parts = spamnb_dask.held_out_spilled(spilled, spam_filter, client)
            del spilled
        elif one:
            models = calibrate.FoldModels.from_counts(spam_filter, fold_class_count, fold_feature_count,
                                                      overwrite=True)   # the fold counts become its log-counts
            del fold_feature_count
            spill.flush()
            parts = [calibrate.held_out_spilled(models, spill)]
        else:
            models = calibrate.FoldModels.from_counts(spam_filter, fold_class_count, fold_feature_count,
                                                      overwrite=True)   # the fold counts become its log-counts
            del fold_feature_count
            folder = os.path.join(work, "folds")
            os.mkdir(folder)
            models.save(folder)
            parts = list(workers.run_ordered(score_spilled, ((folder, path) for path in spills[1])))
    ham = np.concatenate([p[0] for p in parts])
    spam_scores = np.concatenate([p[1] for p in parts])
    per_fold = sum((p[2] for p in parts), np.zeros((n_folds, 2), dtype=np.int64))
    if not np.array_equal(per_fold, fold_class_count):
        raise CorpusChanged("other messages on the second reading")
    keys = ("target_fpr", "max_unsure", "margin")
    chosen = calibrate.from_scores(ham, spam_scores, n_folds, **{k: options[k] for k in keys if k in options})
    return spam_filter, chosen, (ham, spam_scores)


def classify_batch(model_path, paths, cutoffs=None, n_jobs=None, partition_size=DEFAULT_PARTITION_SIZE,
                   json_lines=False, out=None, err=None):
    """``spamnb classify --batch -j N``: the one-process batch's lines for
    ``paths`` (a path may be a message, an mbox, a folder or ``-``), in
    order, written to ``out`` as each partition is done, scored by
    ``n_jobs`` processes that load the model file once each.  Returns the
    number of paths that could not be read (each has an error line)."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    model_path = os.path.abspath(os.fspath(model_path))
    identity = _file_identity(model_path)
    _model(model_path, identity, cutoffs)   # a bad model fails here, once, not in every worker
    jobs = ((model_path, identity, cutoffs, part, json_lines)
            for part in partitions(plan_scoring(paths), partition_size))
    n_errors = 0
    for text, errors, n in run_ordered(score_partition, jobs, n_jobs):
        out.write(text)
        out.flush()
        err.write(errors)
        n_errors += n
    return n_errors


# ---------------------------------------------------------------------------- command line
def _jobs(text):
    import argparse

    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of jobs: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError("the number of jobs must be >= 0 (0: every available core)")
    return n


def add_arguments(parser, command):
    """Register ``-j/--jobs`` (and, for ``train``, ``--dask`` and
    ``--partition-size``) on a subcommand's parser (``train``, ``classify``)."""
    if command == "train":
        jobs_help = (f"worker processes (default {DEFAULT_JOBS}: every core available; 1 with "
                     "--feature-weight; 1: this process, the model of SpamFilter.fit; see docs/scale.md)")
    else:   # a batch answers each path at once in this process; -j N answers a partition at a time
        jobs_help = "worker processes (default 1: this process; 0: every core available; see docs/scale.md)"
    parser.add_argument("-j", "--jobs", type=_jobs, default=None if command == "train" else 1, metavar="N",
                        help=jobs_help)
    parser.add_argument("--partition-size", type=int, default=DEFAULT_PARTITION_SIZE, metavar="N",
                        help=f"messages per partition with -j (default {DEFAULT_PARTITION_SIZE}"
                             + ("; the model depends on it, not on -j)" if command == "train" else ")"))
    if command == "train":
        parser.add_argument("--dask", metavar="ADDRESS",
                            help="train on a Dask cluster (scheduler address; needs spamnb[dask])")
