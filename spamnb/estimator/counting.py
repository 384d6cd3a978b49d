"""Counts that add: a corpus's vocabulary and per-class token counts as flat
arrays (:class:`Counts`), the one counting pass over messages
(:func:`count_messages`: what ``SpamFilter.fit`` counts, plus the
cross-validation folds' rows the cutoffs are chosen from), and the merge of
partitions' counts in a tree of fixed shape (:func:`tree_reduce`), so that a
model counted by partitions does not depend on which worker finished first.

Exactness.  Token order is the order of first sight over the corpus, as in
:meth:`SpamFilter.fit`; class counts are the same; feature counts are sums
of the same per-message values, in another order: bit-identical to ``fit``
for ``counts="raw"`` and ``"binary"`` (integers below 2**53 add exactly),
within float64 rounding for ``"log"`` (sums of log(1 + n)) or
``length_norm`` > 0.
"""

from __future__ import annotations

import os
from array import array

__all__ = ["Counts", "StringSpill", "counting_spec", "count_messages", "count_variants", "merge_counts", "tree_reduce", "TreeReduce",
           "RowTree", "partition_fold_sums", "tree_levels"]

DEFAULT_FAN_IN = 8              # partitions merged per node of the reduction tree


class Counts:
    """The counts of a partition: what merging needs, as flat arrays.

    Attributes
    ----------
    hashes : uint64 array (n_features,)
        Token hashes in feature order.
    offsets : uint64 array (n_features + 1,), strings : bytes (or a bytes-like buffer)
        Token ``i``'s UTF-8 string is ``strings[offsets[i]:offsets[i + 1]]``.
    class_count : float64 array (n_classes,)
        Messages per class, [ham, spam].
    feature_count : float64 array (n_classes, n_features)
        The transformed token counts per class (``length_norm`` applied).
    last_seen : int32 array (n_features,)
        The day (spamnb.estimator.ages) each token was last counted; merged by maximum.

    Counted with ``n_folds`` > 0 (:func:`count_messages`), the classes are
    ``2 + 2 * n_folds``: ham and spam, then ham and spam of each
    cross-validation fold (:func:`spamnb.estimator.calibrate.fold_of`), merged alike;
    :meth:`model` is the first two, :meth:`folds` the rest.

    Sparse fold rows: merged counts (:class:`_Sum`) hold the fold rows as
    their non-zero entries only (most tokens are in one fold: a dense
    ``(2 * n_folds, n_features)`` is nine tenths zeros), in ``fold_keys``
    (int64, ``token * 2 * n_folds + row``, ascending) and ``fold_values``
    (float64), and ``dense`` (the array behind ``feature_count`` then) holds
    the two model rows; ``feature_count`` gives every row, dense, either way.
    """

    __slots__ = ("hashes", "offsets", "strings", "class_count", "dense", "last_seen", "fold_keys", "fold_values",
                 "digests", "labels", "spilled")

    def __init__(self, hashes, offsets, strings, class_count, feature_count, last_seen, fold_keys=None,
                 fold_values=None, digests=None, labels=None, spilled=None):
        # ``spilled``: a StringSpill holding the string table instead (``offsets`` and ``strings`` None until
        # :meth:`load_strings`): spamnb train's counts between the counting pass and the save
        self.hashes, self.offsets, self.strings, self.spilled = hashes, offsets, strings, spilled
        self.class_count, self.dense, self.last_seen = class_count, feature_count, last_seen
        self.fold_keys, self.fold_values = fold_keys, fold_values
        # the ledger of the messages counted (spamnb.estimator.ledger.train_digest), in the order counted:
        # 16 bytes a message and one label byte (0 ham, 1 spam); None: not recorded (the filter gets no ledger)
        self.digests, self.labels = digests, labels

    def __reduce__(self):   # the arrays: sent as one buffer each
        self.load_strings()
        strings = self.strings if isinstance(self.strings, bytes) else bytes(self.strings)
        return (Counts, (self.hashes, self.offsets, strings, self.class_count, self.dense,
                         self.last_seen, self.fold_keys, self.fold_values, self.digests, self.labels))

    @property
    def n_features(self):
        return len(self.hashes)

    def load_strings(self):
        """The string table read back into memory when it is spilled (:class:`StringSpill`); returns self."""
        if self.spilled is not None:
            spilled, self.spilled = self.spilled, None
            self.strings, self.offsets = spilled.load()
        return self

    @property
    def n_folds(self):
        return (len(self.class_count) - 2) // 2

    @property
    def feature_count(self):
        """``(n_classes, n_features)``, every row (sparse fold rows made dense: a new array)."""
        if self.fold_keys is None:
            return self.dense
        import numpy as np

        return np.concatenate([self.dense, self._dense_folds().reshape(-1, self.n_features)])

    def _dense_folds(self):
        """The sparse fold rows as a new dense ``(n_folds, 2, n_features)`` array."""
        import numpy as np

        n, cells = self.n_features, 2 * self.n_folds
        out = np.zeros(cells * n)
        keys = self.fold_keys
        out[(keys % cells) * n + keys // cells] = self.fold_values
        return out.reshape(self.n_folds, 2, n)

    def sparse_folds(self):
        """``(keys, values)`` of the fold rows' non-zero entries (see the class doc), dense rows or not."""
        import numpy as np

        if self.fold_keys is not None:
            return self.fold_keys, self.fold_values
        rows = self.dense[2:].T                      # (n_features, 2 * n_folds): token-major
        token, row = np.nonzero(rows)                # in key order
        return token.astype(np.int64) * rows.shape[1] + row, rows[token, row]

    def model(self):
        """These counts without the fold rows (ham and spam only)."""
        if len(self.class_count) == 2:
            return self
        dense = self.dense[:2] if self.fold_keys is not None else self.dense[:2].copy()
        return Counts(self.hashes, self.offsets, self.strings, self.class_count[:2], dense, self.last_seen,
                      digests=self.digests, labels=self.labels, spilled=self.spilled)

    def folds(self):
        """``(class_count, feature_count)`` of the folds: ``(n_folds, 2)`` and
        ``(n_folds, 2, n_features)`` (views; a new array when the fold rows are sparse)."""
        n_folds = self.n_folds
        if self.fold_keys is not None:
            return self.class_count[2:].reshape(n_folds, 2), self._dense_folds()
        return (self.class_count[2:].reshape(n_folds, 2),
                self.dense[2:].reshape(n_folds, 2, self.n_features))

    @property
    def nbytes(self):
        folds = 0 if self.fold_keys is None else self.fold_keys.nbytes + self.fold_values.nbytes
        ledger = 0 if self.digests is None else len(self.digests) + len(self.labels)
        table = self.offsets.nbytes + len(self.strings) if self.spilled is None else 0
        return (self.hashes.nbytes + table + self.class_count.nbytes
                + self.dense.nbytes + self.last_seen.nbytes + folds + ledger)

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

    def word_counts(self, alpha=1.0, prior="mle", copy=True):
        """These counts as a :class:`~spamnb.bayes.wordcounts.WordCounts` (over a
        copy; ``copy`` False: over the rows themselves, when they are contiguous)."""
        from spamnb.bayes.wordcounts import WordCounts

        import numpy as np

        rows = self.dense if len(self.class_count) == len(self.dense) else self.feature_count
        if not copy:
            return WordCounts.from_arrays(alpha, prior, self.class_count.tolist(),
                                          np.ascontiguousarray(rows).reshape(-1))
        flat = array("d")
        flat.frombytes(memoryview(np.ascontiguousarray(rows).reshape(-1)).cast("B"))   # one copy: the array's
        return WordCounts.from_arrays(alpha, prior, self.class_count.tolist(), flat)

    def vocabulary(self):
        """A new :class:`Vocabulary` of these tokens, in this order."""
        from spamnb.bayes.vocabulary import Vocabulary

        self.load_strings()
        vocabulary = Vocabulary()
        vocabulary.add(_Tokens(self))
        return vocabulary

    def to_filter(self, spam_filter, consume=False):
        """Give an unfitted ``spam_filter`` these counts (counted with its
        tokenizer, ``counts`` and ``length_norm``: :func:`counting_spec`) and
        the tokens' last-seen days (the model created on the latest); returns it.
        ``consume``: these counts' arrays are dropped as the filter's are made
        from them (the counts are unusable after; the filter is the same).
        The messages counted (``digests``, ``labels``) become the filter's
        ledger (:func:`spamnb.estimator.ledger_table.from_trained`), so that ``learn``
        of one of them later is a no-op or an exact relabel."""
        if spam_filter.is_fitted:
            raise ValueError("to_filter takes an unfitted SpamFilter")
        self.load_strings()
        self = self.take_model() if consume else self.model()
        if consume:   # the strings given to the vocabulary as they are (no copy beside them)
            from spamnb.bayes.vocabulary import Vocabulary

            strings, self.strings = self.strings, None
            spam_filter.set_fitted(vocabulary_=Vocabulary.from_table(self.hashes, strings, self.offsets))
            del strings
            self.hashes = self.offsets = None
        else:
            spam_filter.set_fitted(vocabulary_=self.vocabulary())
        spam_filter.set_fitted(word_counts_=self.word_counts(float(spam_filter.alpha), spam_filter.prior))
        if consume:
            self.dense = None
        spam_filter.set_fitted(ages_=self.ages(spam_filter.ages_.max_tokens))
        spam_filter.set_fitted(ledger_=self.ledger())
        return spam_filter

    def take_model(self):
        """:meth:`model`, these counts' arrays given up to it (dropped here
        when it is another object: no reference left to them but its)."""
        model = self.model()
        if model is not self:
            self.hashes = self.offsets = self.strings = self.dense = self.last_seen = self.spilled = None
            self.fold_keys = self.fold_values = None
        return model

    def ages(self, max_tokens, days=True):
        """The :class:`~spamnb.estimator.ages.Ages` of a filter of these counts:
        each token's last-seen day (``days`` False: none, the dates only), the
        model created and last learned on the latest (:meth:`to_filter`)."""
        from spamnb.estimator.ages import Ages, today

        day = int(self.last_seen.max()) if len(self.last_seen) else today()
        return Ages(array("i", self.last_seen.astype("int32").tobytes()) if days else None, day, day, max_tokens)

    def ledger(self):
        """The ledger of the messages counted (:func:`spamnb.estimator.ledger_table.from_trained`), or None."""
        from spamnb.estimator.ledger_table import from_trained

        return None if self.digests is None else from_trained(self.digests, self.labels)


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
        for chunk in range(0, count, 1 << 13):   # bounded temporaries: a byte index (8 B) per string byte
            part = pos[chunk:chunk + (1 << 13)]
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

    The running total is a :class:`spamnb.bayes.merging.MergeTable`: each
    part's tokens are looked up in a hash table (new ones numbered in the
    part's order, as :class:`~spamnb.bayes.vocabulary.Vocabulary` numbers
    them) and its counts added into the total's entries of its tokens, in
    one compiled loop: the work is the part's size, not the total's.  A
    part's tokens are distinct, so each count is one addition, in the order
    of the parts.

    The fold rows (parts counted with ``n_folds``) are summed sparse: the
    total keeps their non-zero entries only, a part's entries added to the
    entries of the same token and cell (one addition each, as the dense sum
    adds them; an entry the total lacks is the dense sum's ``0.0 + value``,
    the value itself), or inserted: the same sums, bit for bit, without the
    dense rows' zeros (nine tenths of them) to send, grow, add and copy."""

    def __init__(self, consume=False):
        self.n = 0
        self.first = self.table = self.class_count = None
        self.digests, self.labels = bytearray(), bytearray()   # the parts' ledgers, in order (None: one lacks it)
        self.consume = consume   # drop a merged part's arrays as they are added (TreeReduce's own sums)

    def __len__(self):
        return self.n

    def add(self, part):
        self.n += 1
        if self.n == 1:
            self.first = part
            return
        if self.n == 2:
            first, self.first = self.first, None
            if type(first) is _Sum and first.table is not None:
                # a lower level's running total, not taken apart (TreeReduce: result(pending=True)): its table
                # goes on as this one's.  The same sums: a new table's entries are 0.0 + the first part's, the
                # part's own values, so adding to the first part's table is adding to its copy
                self.table, first.table = first.table, None
                self.class_count, first.class_count = first.class_count, None
                self.digests, self.labels = first.digests, first.labels
                first.digests = first.labels = None
            else:
                import numpy as np

                from spamnb.bayes.merging import MergeTable

                n_classes = len(first.class_count)
                if n_classes < 2:
                    raise ValueError("counts have a ham and a spam class at least")
                self.table = MergeTable(n_classes - 2)
                self.class_count = np.zeros(n_classes)
                self._add(first)
        self._add(part)

    def _add(self, part):
        import numpy as np

        if type(part) is _Sum:   # a lower level's total handed over whole: its arrays, taken once (none kept)
            part = part.result()
        if len(part.class_count) != len(self.class_count):
            raise ValueError("cannot merge counts of different numbers of classes")
        keys = values = None
        if self.table.cells:
            keys, values = part.sparse_folds()
            keys, values = np.ascontiguousarray(keys, dtype=np.int64), np.ascontiguousarray(values, dtype=np.float64)
        rows = np.ascontiguousarray(part.dense[:2], dtype=np.float64)
        self.table.add(np.ascontiguousarray(part.hashes, dtype=np.uint64),
                       np.ascontiguousarray(part.offsets, dtype=np.uint64), part.strings, rows[0], rows[1],
                       np.ascontiguousarray(part.last_seen, dtype=np.int32), keys, values)
        self.class_count += part.class_count
        if self.digests is not None and part.digests is not None:
            self.digests += part.digests
            self.labels += part.labels
        else:
            self.digests = self.labels = None
        if self.consume and type(part) is _Merged:
            # a sum this tree made (nothing else holds it): its arrays go as soon as they are added
            part.hashes = part.offsets = part.strings = part.dense = part.last_seen = None
            part.fold_keys = part.fold_values = part.digests = part.labels = None

    def result(self, last=False, pending=False):
        """The sum (``last``: the tree's result, the largest, made with the
        least memory beside the total rather than the fastest).  ``pending``
        (:class:`TreeReduce`'s own sums): a sum of two parts or more comes as
        this object itself, its table not taken apart, for the level above to
        go on adding to (:meth:`add`: no copy of the group's total into a new
        table) or to take apart when it adds it."""
        if self.n == 0:
            return Counts.empty()
        if self.n == 1:
            first = self.first
            return first.result(last=last) if type(first) is _Sum else first
        if pending and self.consume:
            return self
        import numpy as np

        # once: each piece of the total is handed over (no copy), the
        # table's arrays freed as they go
        table, self.table = self.table, None
        n = table.n
        hashes, offsets, blob = table.take_tokens()
        hashes, offsets = np.frombuffer(hashes, dtype=np.uint64), np.frombuffer(offsets, dtype=np.uint64)
        strings = memoryview(blob).toreadonly()   # the strings' Block, viewed
        del blob
        rows, days = table.take_rows()
        dense, days = np.frombuffer(rows, dtype=np.float64).reshape(2, n), np.frombuffer(days, dtype=np.int32)
        keys = values = None
        if table.cells:
            keys, values = table.take_fold_entries(in_place=last)
            keys, values = np.frombuffer(keys, dtype=np.int64), np.frombuffer(values, dtype=np.float64)
        del table
        digests, labels = (None, None) if self.digests is None else (bytes(self.digests), bytes(self.labels))
        self.digests = self.labels = None
        return _Merged(hashes, offsets, strings, self.class_count.copy(), dense, days, keys, values, digests, labels)


class _Merged(Counts):
    """A :class:`Counts` that :class:`_Sum` made (a new object, its own arrays)."""

    __slots__ = ()


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
    (for other items than :class:`Counts`).  :class:`TreeReduce`: the same,
    fed one item at a time."""
    tree = TreeReduce(fan_in, merge)
    for item in items:
        tree.add(item)
    return tree.result()


class TreeReduce:
    """:func:`tree_reduce` fed one item at a time (:meth:`add`), so that one
    stream can feed several trees (the variants of one counting pass)."""

    def __init__(self, fan_in=DEFAULT_FAN_IN, merge=None):
        if fan_in < 2:
            raise ValueError("fan_in must be at least 2")
        self.fan_in, self.merge = fan_in, merge
        self.new = (lambda: _Sum(consume=True)) if merge is None else (lambda: _Gather(merge))
        self.levels = []

    def add(self, item):
        levels, level = self.levels, 0
        while True:
            if level == len(levels):
                levels.append(self.new())
            levels[level].add(item)
            if len(levels[level]) < self.fan_in:
                return
            item = levels[level].result(pending=True) if self.merge is None else levels[level].result()
            levels[level] = self.new()
            level += 1

    def result(self):
        levels, self.levels = self.levels, []
        if not levels:
            return merge_counts([]) if self.merge is None else self.merge([])
        # Flush bottom-up: each level's last, short group goes one level up, as
        # the level-by-level reduction merges it; the top level's group is the
        # last one (one item: the result itself).
        for level in range(len(levels)):
            if not any(len(higher) for higher in levels[level + 1:]):
                top = levels[level]
                return top.result(last=True) if isinstance(top, _Sum) else top.result()
            if len(levels[level]):
                lower = levels[level]
                levels[level + 1].add(lower.result(pending=True) if isinstance(lower, _Sum) else lower.result())
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


class RowTree:
    """:class:`TreeReduce`'s tree over dense rows: items of ``n_rows`` rows of
    float64 (a partition's counts, numbered in one vocabulary of the whole
    corpus) added in groups of ``fan_in`` consecutive items, level by level,
    each level one running total (zeros, then each item added in turn), so
    every entry is the sum :class:`TreeReduce` makes of the same items: the
    same additions in the same order (a token an item lacks adds 0.0, which
    changes nothing, as the merge leaves it), without a hash table, strings
    or a vocabulary per item.  Memory: ``n_rows`` rows as long as the widest
    item per level of the tree; a level's rows are one buffer, grown and cut
    to the result's width in place (:func:`_regrid`), never copied whole
    beside themselves.  ``spamnb train`` sums in the compiled tree
    (:func:`~spamnb.bayes.merging.RowLevels`, the same sums: tested), which
    holds its first level's group of items compact."""

    def __init__(self, fan_in=DEFAULT_FAN_IN, n_rows=2):
        if fan_in < 2:
            raise ValueError("fan_in must be at least 2")
        self.fan_in, self.n_rows, self.width = fan_in, n_rows, 0
        self.levels = []   # [items added, flat float64 buffer: n_rows rows of the level's capacity, back to back]

    def _level(self, i, width):
        import numpy as np

        if i == len(self.levels):
            self.levels.append([0, np.zeros(self.n_rows * max(width, 1024))])
        level = self.levels[i]
        capacity = level[1].size // self.n_rows
        if capacity < width:   # by a quarter at least: grown a bounded number of times, little room left unused
            level[1] = _regrid(level[1], self.n_rows, capacity, max(width, capacity + (capacity >> 2) + 1024))
        return level

    def _rows(self, level):
        """A level's rows (views)."""
        flat = level[1]
        capacity = flat.size // self.n_rows
        return [flat[r * capacity:(r + 1) * capacity] for r in range(self.n_rows)]

    def add_compact(self, rows, touched, width):
        """Add an item held compact: ``rows``, ``n_rows`` arrays whose entry
        ``j`` is column ``touched[j]``'s (distinct columns below ``width``;
        every other column 0.0, which adds nothing): as :meth:`add` of the
        dense rows, with ``touched``."""
        self.width = max(self.width, width)
        level = self._level(0, self.width)
        for total, row in zip(self._rows(level), rows):
            total[touched] += row[:len(touched)]
        level[0] += 1
        i = 0
        while level[0] == self.fan_in:   # a full group: its sum goes up a level as one item
            self._lift(i)
            i, level = i + 1, self.levels[i + 1]

    def add(self, rows, width, touched=None):
        """Add an item: ``rows``, ``n_rows`` arrays at least ``width`` long
        (read, not kept); ``touched``: the only columns where they may be
        non-zero (an int array), None: the first ``width``."""
        self.width = max(self.width, width)
        level = self._level(0, self.width)
        for total, row in zip(self._rows(level), rows):
            if touched is None:
                total[:width] += row[:width]
            else:
                total[touched] += row[touched]
        level[0] += 1
        i = 0
        while level[0] == self.fan_in:   # a full group: its sum goes up a level as one item
            self._lift(i)
            i, level = i + 1, self.levels[i + 1]

    def _lift(self, i, last=False):
        """Level ``i``'s sum added to level ``i + 1`` as one item; level ``i`` empty
        again.  ``last`` (:meth:`result`: level ``i`` is not added to again):
        when level ``i + 1`` is narrower, its sum is added into level ``i``'s
        rows and the two buffers change places (the same sums: a + b is b + a,
        and a column it lacks is 0.0 + b, b), level ``i + 1`` not grown."""
        w = self.width
        level = self._level(i, w)
        if last and i + 1 < len(self.levels) and self.levels[i + 1][1].size // self.n_rows < w:
            up = self.levels[i + 1]
            narrow = up[1].size // self.n_rows
            for total, row in zip(self._rows(level), self._rows(up)):
                total[:narrow] += row[:narrow]
            up[1], level[1] = level[1], None   # level i: never read again
        else:
            up = self._level(i + 1, w)
            for total, row in zip(self._rows(up), self._rows(level)):
                total[:w] += row[:w]
                row[:w] = 0.0
        up[0] += 1
        level[0] = 0

    def result(self, width=None):
        """The sum, a ``(n_rows, width)`` array (the tree is emptied: its
        other levels dropped, the sum's buffer cut or grown to the width in
        place); ``width`` (at least the widest item's; default that): the
        columns past the items' are zeros."""
        import numpy as np

        levels, w = self.levels, self.width
        width = w if width is None else width
        if width < w:
            raise ValueError("RowTree.result's width is below the items'")
        for i in range(len(levels)):   # flushed bottom-up as TreeReduce.result flushes
            if not any(higher[0] for higher in levels[i + 1:]):
                flat = self._level(i, w)[1]
                self.levels = []
                del levels
                capacity = flat.size // self.n_rows
                if capacity != width:
                    flat = _regrid(flat, self.n_rows, capacity, width, keep=w)
                return flat.reshape(self.n_rows, width)
            if levels[i][0]:
                self._lift(i, last=True)
            levels[i][1] = None   # lifted: never read again
        self.levels = []
        return np.zeros((self.n_rows, width))


def _regrid(flat, n_rows, old, new, keep=None, chunk=1 << 16):
    """``flat`` (a float64 array owning its data, ``n_rows`` rows of ``old``
    values back to back) made ``n_rows`` rows of ``new``: each row's first
    ``keep`` values (default all that fit) kept, the rest zeros.  In place:
    the buffer reallocated (``ndarray.resize``: a large one is remapped by
    the C library, not copied) and the rows moved within it a piece at a
    time, so the rows are never held twice (a copy would be the level's size
    beside it).  Returns the array (the same buffer, resized)."""
    keep = min(old, new) if keep is None else keep
    if new > old:
        flat.resize(n_rows * new, refcheck=False)   # zeros past the old end
        for r in range(n_rows - 1, 0, -1):   # moved right: the last row first
            _move(flat, r * old, r * new, keep, chunk)
        for r in range(n_rows - 1):   # past each row's values, what the old rows held there: zeros
            flat[r * new + keep:min((r + 1) * new, n_rows * old)] = 0.0
        return flat
    for r in range(1, n_rows):   # moved left: the first row first (the first stays)
        _move(flat, r * old, r * new, keep, chunk)
        flat[r * new + keep:(r + 1) * new] = 0.0
    flat[keep:new] = 0.0
    if new < old:
        flat.resize(n_rows * new, refcheck=False)
    return flat


def _move(flat, source, target, n, chunk):
    """``flat[target:target + n] = flat[source:source + n]`` a piece at a time
    (numpy copies an overlapping piece through a temporary: a piece's size
    at most, ``chunk`` values or the distance moved)."""
    if source == target or n == 0:
        return
    step = max(chunk, abs(target - source))
    starts = range(0, n, step)
    for a in (reversed(starts) if target > source else starts):
        b = min(a + step, n)
        flat[target + a:target + b] = flat[source + a:source + b]


def partition_fold_sums(fan_in, ends, spec):
    """The ``sum_fold`` of :func:`spamnb.estimator.calibrate.held_out_by_fold`
    for a :class:`~spamnb.estimator.calibrate.FoldSpill` written by partitions
    (:func:`count_variants` with ``fan_in``): ``ends[p][k]`` the messages
    fold ``k`` held at the end of partition ``p``.  Fold ``k``'s rows are
    summed a partition at a time and the partitions' sums added in the
    :class:`RowTree` of ``fan_in``: the fold rows the partitions' merged
    :class:`Counts` hold, bit for bit (``spec``: :func:`counting_spec`),
    given compact: ``(tokens, rows)``, the fold's tokens (ascending) and
    their ``(2, len(tokens))`` sums (the other tokens' are zeros)."""
    from spamnb.bayes.token_kernels import add_counts_tree
    from spamnb.estimator.defaults import COUNT_TRANSFORMS

    transform, length = COUNT_TRANSFORMS[spec["counts"]], float(spec.get("length_norm", 0.0))
    scratch = {}   # a mark and a local number per token, kept from fold to fold (the mark cleared after each)

    def sum_fold(k, indices, bounds, spam, n_features):
        import numpy as np

        # fold k's tokens numbered apart (in vocabulary order: a message's first-occurrence order kept, so
        # its counts are the same), its partitions summed and added over them only
        if scratch.get("n") != n_features:
            scratch.update(n=n_features, mark=np.zeros(n_features, dtype=bool),
                           local=np.empty(n_features, dtype=np.int32))
        mark, local = scratch["mark"], scratch["local"]
        mark[indices] = True
        tokens = np.flatnonzero(mark)
        mark[tokens] = False
        local[tokens] = np.arange(tokens.size, dtype=np.int32)
        part = np.zeros((2, tokens.size))
        add_counts_tree(indices, bounds, spam, np.array([end[k] for end in ends], dtype=np.int64), fan_in,
                        part[0], part[1], transform, length, local=local)   # mapped as read: no copy of indices
        return tokens, part

    return sum_fold


_TOKENIZERS = {}


def _tokenizer(settings):
    from spamnb.mail.tokenizer import Tokenizer

    key = repr(sorted(settings.items()))
    tokenizer = _TOKENIZERS.get(key)
    if tokenizer is None:
        if len(_TOKENIZERS) >= 4:   # a few at once: a job's variants
            _TOKENIZERS.clear()
        tokenizer = _TOKENIZERS[key] = Tokenizer.from_settings(settings)   # version 2 models too
    return tokenizer


def counting_spec(spam_filter):
    """What a worker needs to count as ``spam_filter.fit`` counts: its
    tokenizer's settings, ``counts`` and ``length_norm`` (a small dict)."""
    return {"tokenizer": spam_filter.tokenizer_.settings, "counts": spam_filter.counts,
            "length_norm": float(spam_filter.length_norm)}


def count_messages(spec, messages, day=None, n_folds=0, spill=None, group=True):
    """The :class:`Counts` of ``(message, is_spam)`` pairs (a message: bytes,
    a path or an ``email.message.Message``), counted as ``SpamFilter.fit``
    counts (``spec``: :func:`counting_spec`); every token seen on ``day``
    (default today).  ``n_folds`` > 0 also counts each message into its
    cross-validation fold's rows (:func:`spamnb.estimator.calibrate.fold_of`), for the
    calibration; the model's rows are the same either way.  ``spill``: a
    binary file to write each message's token hashes, class and fold to
    (:func:`spamnb.estimator.calibrate.spill`; needs ``n_folds``), for the calibration's
    scoring pass."""
    return count_variants([spec], messages, day, n_folds, [spill], group=group)[0]


def count_variants(specs, messages, day=None, n_folds=0, spills=None, limit=None, group=True, fold_spills=None,
                   fan_in=None):
    """:func:`count_messages` under several ``specs`` (e.g. a tokenizer and
    its :func:`~spamnb.mail.tokenizer.with_pairs`) in one pass over
    ``messages``: each message read, and parsed once for every tokenizer that
    :meth:`~spamnb.mail.tokenizer.Tokenizer.parses_as` the first, its fold
    found once; each variant's :class:`Counts` is the one
    :func:`count_messages` gives it alone (its own vocabulary, rows and
    ``spills[i]``).  ``limit``: past that many messages, the variants after
    the first are dropped (their result None: not worth counting further).
    ``group``: near-duplicates (:func:`spamnb.estimator.calibrate.near_duplicate_key`)
    are counted in their first copy's fold (so a copy never helps score its
    twin); False when the messages have none (``spamnb train`` left them out).
    ``fold_spills``: a :class:`~spamnb.estimator.calibrate.FoldSpill` per spec
    (with ``n_folds``): each message's token indices go to its fold's file
    there instead of into fold rows (the results then hold the model's rows
    and class counts only; :func:`~spamnb.estimator.calibrate.held_out_by_fold`
    scores them).  ``fan_in``: ``messages`` is an iterable of partitions
    (each an iterable of messages), the model's rows summed per partition
    and the partitions' sums added in :class:`TreeReduce`'s tree
    (:class:`RowTree`'s sums, compiled: :func:`~spamnb.bayes.merging.RowLevels`): the rows :func:`count_messages` of each partition
    merged by ``TreeReduce(fan_in)`` give, bit for bit (``spamnb train``'s
    partitions, counted in one process); then every variant's stream of a
    message is counted in one compiled call over one hash index for all
    (:class:`~spamnb.bayes.token_kernels.VariantCounter`: a token of both
    streams probed for once from memory), each variant still numbering its
    tokens in its own order of first sight, with its own strings and rows;
    each variant's strings are written out to a :class:`StringSpill` after
    each partition (the results' ``spilled``; a worker of ``spamnb train
    -j N`` counts its partitions over one :class:`PartitionCounting` too,
    its vocabulary kept between them)."""
    from spamnb.estimator.ages import today

    spills = [None] * len(specs) if spills is None else spills
    fold_spills = [None] * len(specs) if fold_spills is None else fold_spills
    if fan_in is not None:   # by partitions (spamnb train -j 1): every variant in one compiled call a message
        return _count_partitions(specs, messages, day, n_folds, fold_spills, limit, group, fan_in)
    counters = [_Counter(spec, n_folds, spill, by_fold) for spec, spill, by_fold in zip(specs, spills, fold_spills)]
    first = counters[0].tokenizer
    shared = [c.tokenizer.parses_as(first) for c in counters]
    n_messages = 0
    digests, labels = bytearray(), bytearray()   # the ledger of the messages counted
    for data, is_spam, fold in _ledgered(messages, digests, labels, _folds(n_folds, group)):
        parsed = first.parse(data) if len(counters) > 1 else None
        like = None   # the stream before, of the same parse: the next takes its head from it
        for counter, share in zip(counters, shared):
            stream = counter.tokenizer.stream(data, parsed, like, len(counters) > 1) if share else \
                counter.tokenizer.stream(data)
            counter.count(stream, is_spam, fold)
            like = stream if share else None
        like = stream = None
        n_messages += 1
        if limit is not None and n_messages > limit and len(counters) > 1:
            del counters[1:]
    day = today() if day is None else day
    results = [None] * len(specs)
    for i, counter in enumerate(counters):
        results[i] = counter.result(day)
        results[i].digests, results[i].labels = bytes(digests), bytes(labels)
        counters[i] = None
    return results


def _ledgered(messages, digests, labels, fold_of):
    """``(bytes, is_spam, fold)`` of each ``(message, is_spam)``, its ledger digest
    and label appended to ``digests`` and ``labels`` (:func:`count_variants`)."""
    from spamnb.estimator.ledger import train_digest
    from spamnb.estimator.messages import message_bytes

    for data, is_spam in messages:
        data = message_bytes(data)
        is_spam = bool(is_spam)
        digests += train_digest(data)
        labels.append(is_spam)
        yield data, is_spam, fold_of(data)


def _folds(n_folds, group):
    """The fold of a message's bytes (None without folds): its own
    (:func:`spamnb.estimator.calibrate.fold_of`), or with ``group`` a
    near-duplicate's first copy's (:func:`count_variants`)."""
    from spamnb.estimator.calibrate import fold_of, near_duplicate_key

    # near-duplicates (issue 46): a copy is counted in the fold of its first copy (spamnb train has
    # left the copies out before: spamnb.training.planning.unique_messages; SpamFilter.fit counts them)
    first_fold = {}

    def fold(data):
        if not n_folds:
            return None
        k = fold_of(data, n_folds)
        if group:
            key = near_duplicate_key(data)
            if key is not None:
                k = first_fold.setdefault(key, k)
        return k

    return fold


class PartitionCounting:
    """Partitions counted one at a time under ``specs`` over one
    :class:`~spamnb.bayes.token_kernels.VariantCounter` kept between them
    (``spamnb train -j 1``'s pass, :func:`count_variants` with ``fan_in``;
    a worker of ``-j N``, its vocabulary kept across the partitions it
    counts): the variants' streams of a message counted in one call, each
    variant its own numbers, strings and partition rows; two variants whose
    second tokenizer :meth:`~spamnb.mail.tokenizer.Tokenizer.marks` the
    first (``spamnb train``'s word-pair trial) have both streams made in one
    tokenizer pass (:meth:`~spamnb.mail.tokenizer.Tokenizer.streams`).
    ``keep_hashes``: the counter keeps its new tokens' hashes until taken
    (``VariantCounter.take_hashes``), and the indices written to the spills
    are the tokens' places in their partition (``local_out``)."""

    def __init__(self, specs, n_folds=0, group=True, keep_hashes=False):
        from spamnb.bayes.token_kernels import VariantCounter
        from spamnb.estimator.defaults import COUNT_TRANSFORMS

        self.tokenizers = [_tokenizer(spec["tokenizer"]) for spec in specs]
        self.counter = VariantCounter([COUNT_TRANSFORMS[spec["counts"]] for spec in specs],
                                      [float(spec.get("length_norm", 0.0)) for spec in specs],
                                      keep_hashes=keep_hashes, local_out=keep_hashes)
        first = self.tokenizers[0]
        self.shared = [t.parses_as(first) for t in self.tokenizers]
        # a tokenizer and its word pairs' trial (spamnb train): the default stream made in the trial's pass
        self.marked = len(self.tokenizers) == 2 and self.shared[1] and self.tokenizers[1].marks(first)
        self.active = len(specs)   # the variants still counted (past a limit: the first only)
        self.fold_of = _folds(n_folds, group)
        self.digests, self.labels = bytearray(), bytearray()   # the ledger of the messages counted
        self.counted = {False: 0, True: 0}   # messages of each class counted by every variant still counted

    def _streams(self, data):
        tokenizers, first, active = self.tokenizers, self.tokenizers[0], self.active
        if active == 2 and self.marked:   # both streams in one tokenizer pass
            return tokenizers[1].streams(data, first.parse(data), first)
        if active == 1:
            return [first.stream(data)]
        streams, parsed, like = [], first.parse(data), None
        for tokenizer, share in zip(tokenizers[:active], self.shared):
            # the stream before, of the same parse: the next takes its head from it
            stream = tokenizer.stream(data, parsed, like, True) if share else tokenizer.stream(data)
            streams.append(stream)
            like = stream if share else None
        return streams

    def count(self, part, spills):
        """Count a partition's ``(bytes, is_spam)`` messages into the
        counter's partition rows, each message's token indices written to
        ``spills[v]`` (a fold spill per variant, with folds); a generator,
        a step a message (the caller may set :attr:`active` to 1 between)."""
        count, counted = self.counter.count, self.counted
        for data, is_spam, fold in _ledgered(part, self.digests, self.labels, self.fold_of):
            streams = self._streams(data)
            indices = count(streams, is_spam)
            counted[is_spam] += 1
            if fold is not None:   # each stream's pairs_start too (a filter that weighs its pairs reads it)
                for v in range(self.active):
                    spills[v].write(indices[v], is_spam, fold, streams[v].pairs_start)
            streams = indices = None   # the counter's buffers released before its next call
            yield

    def class_count(self):
        """``[ham, spam]`` messages counted (every variant's), float64."""
        import numpy as np

        return np.array([self.counted[False], self.counted[True]], dtype=np.float64)


def _count_partitions(specs, messages, day, n_folds, fold_spills, limit, group, fan_in):
    """:func:`count_variants` by partitions (``fan_in``; fold spills, no fold
    rows), over one :class:`PartitionCounting`, each partition's rows added
    to the variant's tree (:func:`~spamnb.bayes.merging.RowLevels`,
    :class:`RowTree`'s sums, its group's level compact): the counts of
    :class:`_Counter`, bit for bit."""
    import numpy as np

    from spamnb.bayes.merging import RowLevels
    from spamnb.estimator.ages import today

    if n_folds and any(spill is None for spill in fold_spills):
        raise ValueError("counting by partitions in one process takes fold spills, not fold rows")
    counting = PartitionCounting(specs, n_folds, group)
    counter = counting.counter
    trees = [RowLevels(fan_in) for _ in specs]   # RowTree's sums, its group's level compact
    tables = [StringSpill() for _ in specs]   # each variant's strings, written out a partition at a time
    spills = fold_spills if n_folds else [None] * len(specs)
    n_messages = 0
    for part in messages:
        for _ in counting.count(part, spills):
            n_messages += 1
            if limit is not None and n_messages > limit and counting.active > 1:
                counting.active = 1
                trees[1:] = [None] * (len(specs) - 1)
                for table in tables[1:]:
                    if table is not None:
                        table.close()
                tables[1:] = [None] * (len(specs) - 1)
        for v in range(counting.active):   # the partition's rows added to the tree (its tokens' entries: the others add 0.0)
            touched, ham, spam_row = counter.partition(v)
            trees[v].add(touched, ham, spam_row, counter.n_features_of(v))
            del touched, ham, spam_row
            counter.clear_partition(v)
            if tables[v] is not None:   # the partition's new strings out of memory
                tables[v].append(*counter.strings(v))
    active = counting.active
    class_count = counting.class_count()   # [ham, spam], every variant's
    digests, labels = counting.digests, counting.labels
    del counting
    day = today() if day is None else day
    # every variant's rows summed first (RowLevels.result: the top level's rows handed over, the others unmapped), then its hashes
    # made and its last strings written out, and the hash index dropped: the hashes never beside the trees' levels
    rows = [None] * len(specs)
    for v in range(active):
        tree, trees[v] = trees[v], None
        n = counter.n_features_of(v)
        rows[v] = np.frombuffer(tree.result(n), dtype=np.float64).reshape(2, n)   # the top level's own rows
        del tree
    for v in range(active):   # the last strings (after a partition's end: none)
        tables[v].append(*counter.strings(v))
    hashes = [np.frombuffer(counter.hashes(v), dtype=np.uint64) for v in range(active)]
    counter.release()
    del counter
    results = [None] * len(specs)
    for v in range(active):
        dense, rows[v] = rows[v], None
        n = len(hashes[v])
        results[v] = Counts(hashes[v], None, None, class_count.copy(), dense, np.full(n, day, dtype=np.int32),
                            spilled=tables[v])
        hashes[v] = tables[v] = None
        results[v].digests, results[v].labels = bytes(digests), bytes(labels)
    return results


class StringSpill:
    """A string table (a vocabulary's UTF-8 strings and their end offsets, as
    :class:`Counts` holds them) in an unnamed temporary file, appended a
    piece at a time (:meth:`append`: a counter's strings since the last
    piece, their offsets counted from that piece's start): ``spamnb train``'s
    counting pass writes each variant's new strings out after each partition,
    so they are not held through the counting, the held-out pass and the
    choice of the variant (the save reads them back a piece at a time:
    :meth:`pieces`; :meth:`load`: in memory whole)."""

    CHUNK = 1 << 20   # bytes of a piece read back

    def __init__(self):
        import tempfile

        self.strings = tempfile.TemporaryFile(prefix="spamnb-train-strings-")
        self.offsets = tempfile.TemporaryFile(prefix="spamnb-train-offsets-")
        self.size = 0     # string bytes so far
        self.n = 0        # strings so far
        self.offsets.write(bytes(8))   # the table's first offset: 0

    def append(self, blob, offsets):
        """Add the strings ``blob`` whose end offsets in it are ``offsets[1:]``
        (``offsets[0]`` 0: a counter's table since the last piece)."""
        import numpy as np

        ends = np.frombuffer(offsets, dtype=np.uint64)[1:]
        if ends.size:
            self.strings.write(blob)
            self.offsets.write((ends + np.uint64(self.size)).tobytes())
            self.size += len(blob)
            self.n += ends.size

    def pieces(self, name):
        """The file's ``"strings"`` or ``"offsets"`` (uint64, ``n + 1``) in pieces of
        at most :attr:`CHUNK` bytes (a model file's writer: ``schema.write``'s makers)."""
        f = self.strings if name == "strings" else self.offsets
        f.flush()
        total, at = (self.size if name == "strings" else 8 * (self.n + 1)), 0
        while at < total:
            piece = os.pread(f.fileno(), min(self.CHUNK, total - at), at)
            if not piece:
                raise OSError(f"the training's spilled {name} were cut short")
            at += len(piece)
            yield piece

    def load(self):
        """``(strings, offsets)``: the whole table, a ``bytearray`` and a uint64 array."""
        import numpy as np

        strings, offsets = bytearray(), bytearray()
        for piece in self.pieces("strings"):
            strings += piece
        for piece in self.pieces("offsets"):
            offsets += piece
        return strings, np.frombuffer(offsets, dtype=np.uint64)

    def close(self):
        self.strings.close()
        self.offsets.close()


def _grow(row, n):
    """Make the ``array('d')`` ``row`` at least ``n`` long, zeros added: by a
    quarter at least, so that a row growing with the vocabulary is copied a
    bounded number of times, not at every message that brings a new token."""
    if len(row) < n:
        row.frombytes(bytes(8 * (max(n, len(row) + (len(row) >> 2) + 1024) - len(row))))


class _Counter:
    """One variant's counting in :func:`count_variants`: its tokenizer,
    vocabulary, model rows and the folds' rows (ham and spam of each fold,
    added to as ``WordCounts.add`` adds: ``add_counts`` into the class's
    row, 1 to its message count), and its spill file; with a ``fold_spill``
    (:class:`~spamnb.estimator.calibrate.FoldSpill`) no fold rows: each message's
    token indices go to its fold's file there."""

    def __init__(self, spec, n_folds, spill_file, fold_spill=None):
        from spamnb.bayes.token_kernels import add_counts, add_counts_twice
        from spamnb.bayes.vocabulary import Vocabulary
        from spamnb.estimator.calibrate import spill
        from spamnb.estimator.defaults import COUNT_TRANSFORMS

        self.add_counts, self.add_counts_twice, self.spill_record = add_counts, add_counts_twice, spill
        self.transform = COUNT_TRANSFORMS[spec["counts"]]
        self.length = float(spec.get("length_norm", 0.0))
        self.tokenizer = _tokenizer(spec["tokenizer"])
        # the index three quarters full at most, not half (a token's slot is found in a probe or two still): it is
        # the largest array of the counting pass, and dropped at its end (the filter's is made half full)
        self.vocabulary = Vocabulary(fill=0.75)
        self.scratch = [array("i"), array("i")]     # the vocabulary's per-message arrays, reused
        self.rows = [array("d"), array("d")]        # ham, spam (longer than the vocabulary: zeros)
        self.class_count = [0.0, 0.0]
        self.n_folds, self.spill, self.fold_spill = n_folds, spill_file, fold_spill
        if fold_spill is not None:   # the folds' counts come from its files later: no fold rows here
            self.n_folds = 0
        self.fold_rows = [array("d") for _ in range(2 * self.n_folds)]
        self.fold_messages = [0.0] * (2 * self.n_folds)

    def count(self, tokens, is_spam, fold):
        indices = self.vocabulary.add(tokens, self.scratch)
        n_features = self.vocabulary.n_features
        spam = 1 if is_spam else 0
        self.class_count[spam] += 1.0
        row = self.rows[spam]
        if len(row) < n_features:
            _grow(row, n_features)
        if fold is None or self.fold_spill is not None:
            self.add_counts(indices, row, self.transform, 1.0, self.length)
            if fold is not None:
                self.fold_spill.write(indices, is_spam, fold, tokens.pairs_start)
            return
        k = 2 * fold + spam
        fold_row = self.fold_rows[k]
        if len(fold_row) < n_features:
            _grow(fold_row, n_features)
        self.add_counts_twice(indices, row, fold_row, self.transform, self.length)   # the same values in both
        self.fold_messages[k] += 1.0
        if self.spill is not None:
            self.spill_record(self.spill, tokens.hashes, is_spam, fold)

    def result(self, day):
        """The :class:`Counts` (the counter's rows dropped as they are read)."""
        import numpy as np

        vocabulary, self.vocabulary, self.scratch = self.vocabulary, None, None
        n = vocabulary.n_features
        # the hashes and the strings taken (not copied) and the hash index dropped first: the counts' rows are
        # made without them beside
        hashes, blob, offsets = vocabulary.release()
        del vocabulary
        dense = np.zeros((2, n))
        for c in range(2):
            row, self.rows[c] = self.rows[c], None
            if row is None:
                continue
            m = min(n, len(row))
            dense[c, :m] = np.frombuffer(row, dtype=np.float64, count=m)
            del row
        class_count = np.array([*self.class_count, *self.fold_messages], dtype=np.float64)
        keys = values = None
        if self.n_folds:
            # the folds' rows as their non-zero entries (Counts: sparse fold rows), in one scan
            from spamnb.bayes.merging import fold_entries

            keys, values = fold_entries(self.fold_rows, n)
            self.fold_rows = None
            keys, values = np.frombuffer(keys, dtype=np.int64), np.frombuffer(values, dtype=np.float64)
        return Counts(hashes, np.frombuffer(offsets, dtype=np.uint64), blob, class_count, dense,
                      np.full(n, day, dtype=np.int32), keys, values)
