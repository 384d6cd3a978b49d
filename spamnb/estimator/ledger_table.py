"""The ledger's table: each message learned through the ``spamnb`` command
(its 16-byte digest, :mod:`spamnb.estimator.ledger`) with its entry (the
label, whether auto-learn learned it, the bin of its held-out score), oldest
first, at most a capacity of them; its arrays in the model file, the ledger
of the messages ``train`` counted, and the filter's copy (``SpamFilter.ledger_``).

What a learn does through the ledger (learn, relabel, forget) and what is
digested are :mod:`spamnb.estimator.ledger`'s, which gives these names too.
A learn of one message into a model file does without this module: it looks
its digest up in the file's ledger in place (``spamnb.model.learning``)."""

from spamnb.estimator.ledger import AUTO_BIT, AUTO_NOTE, DEFAULT_CAPACITY, DIGEST_SIZE, SPAM_BIT

__all__ = ["Ledger", "from_trained", "ledger_of", "attach"]


class Ledger:
    """Digest -> label of the messages learned, oldest first, at most ``capacity`` of them."""

    def __init__(self, capacity=DEFAULT_CAPACITY, arrays=None):
        if capacity < 1:
            raise ValueError("a ledger's capacity must be at least 1")
        self.capacity = capacity
        self._table = {}    # digest -> code (see ledger.AUTO_BIT); insertion order is age
        self._arrays = arrays   # from_arrays' arrays, made into the table when first needed

    @property
    def _labels(self):
        """The table, made from :meth:`from_arrays`' arrays the first time it is
        needed: a model read to classify (mapped: ``spamnb classify``) never
        builds the ledger of the messages it was trained on."""
        if self._arrays is not None:
            self._build()
        return self._table

    def __len__(self):
        return len(self._labels)

    def label(self, digest):
        """True (spam), False (ham) or None (not in the ledger)."""
        value = self._labels.get(digest)
        return None if value is None else bool(value & SPAM_BIT)

    def entry(self, digest):
        """``(is_spam, auto, held-out bin or None)``, or None when not in the ledger."""
        value = self._labels.get(digest)
        if value is None:
            return None
        return bool(value & SPAM_BIT), bool(value & AUTO_BIT), (value >> 2) - 1 if value >> 2 else None

    def is_auto(self, digest):
        """Whether the message was learned by auto-learn (and no user has labelled it since)."""
        return bool(self._labels.get(digest, 0) & AUTO_BIT)

    def record(self, digest, is_spam, auto=False, held_out=None):
        """Record a learned message (the newest entry); drops the oldest beyond capacity.
        ``auto``: learned by auto-learn; ``held_out``: the bin of its held-out score."""
        self._labels.pop(digest, None)
        self._labels[digest] = (SPAM_BIT if is_spam else 0) | (AUTO_BIT if auto else 0) | \
            (0 if held_out is None else (int(held_out) + 1) << 2)
        while len(self._labels) > self.capacity:
            del self._labels[next(iter(self._labels))]

    def confirm(self, digest):
        """A user gave the label auto-learn had learned: the entry is the user's now (same place)."""
        value = self._labels.get(digest)
        if value is not None:
            self._labels[digest] = value & ~AUTO_BIT

    def remove(self, digest):
        self._labels.pop(digest, None)

    def to_arrays(self):
        """``(digests, labels)``: 16 bytes a message and one byte (0 ham, 1 spam), oldest first."""
        return b"".join(self._labels), bytes(v & SPAM_BIT for v in self._labels.values())

    def notes_array(self):
        """One 16-bit note a message, in :meth:`to_arrays`' order: ``AUTO_NOTE`` for an
        auto-learned one, or'ed with its held-out bin + 1 (0: none)."""
        from array import array

        return array("H", ((v >> 2) | (AUTO_NOTE if v & AUTO_BIT else 0) for v in self._labels.values()))

    @classmethod
    def from_arrays(cls, digests, labels, capacity=DEFAULT_CAPACITY, notes=None, lazy=False):
        """A ledger from :meth:`to_arrays` (and :meth:`notes_array`, or None); raises
        ValueError for arrays that do not fit together.  ``lazy``: the arrays
        (views of a mapped model file, say) are made into the ledger when it is
        first used, and the checks but their sizes' are made then (a model
        mapped to classify one message never builds the ledger of the
        messages it was trained on)."""
        n = len(labels)
        if len(digests) != DIGEST_SIZE * n:
            raise ValueError(f"ledger: {len(digests)} bytes of digests for {n} labels")
        if notes is not None and len(notes) not in (0, n):
            raise ValueError(f"ledger: {len(notes)} notes for {n} labels")
        ledger = cls(max(capacity, 1), arrays=(digests, labels, notes))
        if not lazy:
            ledger._build()
        return ledger

    def _build(self):
        """The table from :meth:`from_arrays`' arrays (ValueError for arrays that do not fit together)."""
        digests, labels, notes = self._arrays
        self._arrays = None
        digests, labels = bytes(digests), bytes(labels)
        n = len(labels)
        if labels.strip(b"\x00\x01"):
            raise ValueError("ledger: a label is neither 0 (ham) nor 1 (spam)")
        if not notes or _all_zero(notes):
            codes = labels
        else:
            from spamnb.estimator.defaults import HELD_OUT_BINS

            if any((note & ~AUTO_NOTE) > HELD_OUT_BINS for note in notes):
                raise ValueError("ledger: a note names no held-out bin")
            codes = [label | ((note & ~AUTO_NOTE) << 2) | (AUTO_BIT if note & AUTO_NOTE else 0)
                     for label, note in zip(labels, notes)]
        table = self._table = dict(zip([digests[i:i + DIGEST_SIZE] for i in range(0, DIGEST_SIZE * n, DIGEST_SIZE)],
                                       codes))
        if len(table) != n:
            self._table = {}
            raise ValueError("ledger: a digest is recorded twice")
        while len(table) > self.capacity:
            del table[next(iter(table))]


def _all_zero(notes):
    """Whether every note is 0: a buffer (an array, a view of the model file) in one
    pass over its bytes, or a sequence of ints."""
    try:
        return not memoryview(notes).cast("B").tobytes().strip(b"\x00")
    except TypeError:   # not a buffer: a list of ints
        return not any(notes)


def from_trained(digests, labels, capacity=DEFAULT_CAPACITY):
    """The ledger of the messages ``train`` (or ``SpamFilter.fit``) counted,
    in the order counted: ``digests`` (16 bytes a message, :func:`train_digest`)
    and ``labels`` (one byte a message, 0 ham, 1 spam).  As recorded one at a
    time by :meth:`Ledger.record` (a message counted twice has one entry, its
    last label; beyond ``capacity`` the first counted are dropped)."""
    digests, labels = bytes(digests), bytes(labels)
    if len(digests) != DIGEST_SIZE * len(labels):
        raise ValueError(f"ledger: {len(digests)} bytes of digests for {len(labels)} labels")
    ledger = Ledger(capacity)
    entries = ledger._labels
    keys = [digests[i:i + DIGEST_SIZE] for i in range(0, len(digests), DIGEST_SIZE)]
    entries.update(zip(keys, labels))
    if len(entries) != len(keys):   # a message counted twice: its last label, at its last place (record's order)
        entries.clear()
        for digest, label in zip(keys, labels):
            entries.pop(digest, None)
            entries[digest] = label
    while len(entries) > capacity:
        del entries[next(iter(entries))]
    return ledger


def ledger_of(spam_filter):
    """The filter's ledger (an empty one for a model saved without it)."""
    ledger = spam_filter.ledger_
    return Ledger() if ledger is None else ledger


def attach(spam_filter, ledger):
    """Give the filter its ledger back, to be saved with the model."""
    spam_filter.set_fitted(ledger_=ledger)
    return spam_filter
