"""What a viewed journal (``spamnb.persistence.journal_view``) does besides
scoring a message and a learner's append, loaded when first asked for: a
journal's warnings (a damaged tail's, :func:`warn_tail`; the records' replay,
``deltas.apply_records``, warns through :func:`warn`), the payloads of a
journal scanned through a buffer read whole (:func:`reread`), the learns as
objects (a learner's next message, a token's text), and :class:`ViewExtras`,
the methods a ``JournalView`` takes from here when first asked for
(``JournalView.__getattr__``): a learner's copy with one more learn, the
journal's tokens numbered and named.
A classify or learn of one message through a journal never loads this module
(its code is a third of the view's)."""

import posix   # os's calls without os.py
from array import array

from spamnb.bayes import arithmetic, checks, token_kernels
from spamnb.persistence.store import JOURNAL_HEAD as HEAD, JOURNAL_SUFFIX as SUFFIX, holds_lock

__all__ = ["warn", "reread", "warn_tail", "recorded", "Learn", "Recorded", "ViewExtras"]


def warn(message):
    import warnings

    from spamnb.errors import JournalWarning

    warnings.warn(message, JournalWarning, stacklevel=3)


def reread(journal):
    """The payloads of a journal ``journal_view._scan`` read, read whole from the file it
    scanned: ModelError when they are no longer the records it checked (the
    journal rewritten in place since)."""
    file, _buffer, scanned = journal.scan[2]
    spans = memoryview(scanned[0]).cast("q")
    data = checks.read_range(file.fileno(), 0, journal.end)
    payloads, at = checks.journal_records(data, journal.head, HEAD.size, memoryview(data))
    if at != journal.end or len(payloads) != len(spans) // 3 or any(
            int.from_bytes(data[spans[k] + 8:spans[k] + 16], "little", signed=True) != spans[k + 2]
            for k in range(0, len(spans), 3)):
        from spamnb.errors import ModelError

        raise ModelError(f"{journal.path}: the model's journal was rewritten in place while read")
    return payloads


def _writer_active(journal):
    """True while a writer holds the model's lock: a tail it is appending
    is incomplete until it is acknowledged, and is no damage to warn of."""
    real = journal.path[:-len(SUFFIX)]
    if holds_lock(real):   # this process is the writer: the tail is no append in progress
        return False
    lock_path = real + ".lock"
    try:
        fd = posix.open(lock_path, posix.O_RDONLY | posix.O_NONBLOCK | getattr(posix, "O_NOFOLLOW", 0)
                        | getattr(posix, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        return not checks.try_lock(fd, exclusive=False)   # flock(LOCK_SH | LOCK_NB): held by a writer?
    except OSError:
        return False
    finally:
        posix.close(fd)   # closing drops the shared lock taken


def warn_tail(journal, applied):
    if _writer_active(journal):
        return
    warn(f"{journal.path}: the last {journal.size - journal.end} bytes are incomplete or damaged "
          f"(a learn interrupted before it was acknowledged?) and are ignored; "
          f"the {applied} record{'s' if applied != 1 else ''} before them apply")


class Learn:
    """One learn of a viewed journal (a learner's, :meth:`ViewExtras.extended`): its
    class, token hashes (uint64 bytes, one an occurrence), the vocabulary's size
    before it, its new tokens' number, UTF-8 lengths and text."""

    __slots__ = ("cls", "hashes", "n_before", "n_new", "lengths", "text")

    def __init__(self, cls, hashes, n_before, n_new, lengths, text):
        self.cls, self.hashes, self.n_before, self.n_new = cls, hashes, n_before, n_new
        self.lengths, self.text = lengths, text


class Recorded(Learn):
    """A learn as the journal's record holds it (:func:`recorded`): its hashes,
    lengths and text read from the record when asked for (a classify reads
    the journal's hashes whole, once, and none of them)."""

    __slots__ = ("payload", "at")

    def __init__(self, payload, cls, n_before, n_new, hashes_at, text_at, n_text):
        self.payload, self.cls, self.n_before, self.n_new = payload, cls, n_before, n_new
        self.at = (hashes_at, text_at, n_text)

    @property
    def hashes(self):
        hashes_at, text_at, _n_text = self.at
        return self.payload[hashes_at:text_at - 4 * self.n_new]

    @property
    def lengths(self):
        _hashes_at, text_at, _n_text = self.at
        return self.payload[text_at - 4 * self.n_new:text_at].cast("I")

    @property
    def text(self):
        _hashes_at, text_at, n_text = self.at
        return self.payload[text_at:text_at + n_text]


def recorded(records):
    """The learns (:class:`Recorded`) of ``journal_view._parse``'s ``records``: what a
    learner or a token's text asks for; a classify scores without them."""
    journal, fields, stride = records   # each learn's fields (int64, stride a learn): payload index, then Recorded's
    payloads = journal.payloads   # (read through a buffer, _scan: read whole now)
    values = fields.tolist()
    return [Recorded(payloads[values[at]], *values[at + 1:at + 7]) for at in range(0, len(values), stride)]


class ViewExtras:
    """The methods (and the property ``learns``) a ``journal_view.JournalView`` takes
    from here, bound to it when first asked for (``JournalView.__getattr__``): what
    a view does besides scoring a message and a learner's append.  Never made:
    ``self`` is the view."""

    @property
    def learns(self):
        """The learns (:class:`Learn`): the journal's, made from its records when first
        asked for (a learner's, a token's text: a classify scores without them)."""
        if self._learns is None:
            self._learns = recorded(self._records)
        return self._learns

    def extended(self, cls, hashes, n_new, lengths, text):
        """This view with one more learn after the journal's (class ``cls``, the
        message's token ``hashes``, its ``n_new`` new tokens' UTF-8 ``lengths``
        and ``text``): what a learner that appends records without replaying
        scores its next message through.  This view is unchanged."""
        learn = Learn(cls, memoryview(bytes(memoryview(hashes).cast("B"))), self.n_features, n_new,
                      array("I", lengths), bytes(text))
        other = object.__new__(type(self))
        other.extend(self, learn)
        return other

    def extend(self, base, learn):
        """This (new) view made ``base`` with ``learn`` after its learns (:meth:`extended`)."""
        self.copy_of(base)
        self._learns, self._records = base.learns + [learn], None
        self.n_features = base.n_features + learn.n_new
        self.log_prior = arithmetic.plain_log_prior(self.prior, self.class_count())

    def numbering(self):
        """Each recorded occurrence's token id (distinct tokens numbered in the
        order they first occur in the journal) and the number of ids."""
        if self._ids is None:
            hashes = self.joined_hashes()
            n = len(hashes)
            size = 16
            while size < 2 * (n + 1):
                size <<= 1
            # zeroed by repetition: half the memory traffic of array(code, bytes(n)) (a zeroed copy, then copied)
            keys, values = array("Q", [0]) * size, array("i", [0]) * size
            ids, scratch = array("i", [0]) * n, array("i", [0]) * n
            distinct = token_kernels.insert(keys, values, hashes, ids, 0, scratch) if n else 0
            self._ids = (ids, distinct, keys, values)
        return self._ids

    def joined_hashes(self):
        """The learns' token hashes one learn after the other (``JournalView.concatenated``'s,
        copied out of the journal's bytes when read in place)."""
        hashes, bounds, _classes, _sums, places, source = self.concatenated()
        if places is None:
            return hashes
        joined = array("Q")
        if source is not None:   # in the file: the learns' (their payloads read whole now)
            for learn in self.learns:
                joined.frombytes(learn.hashes)
            return joined
        for place, start, stop in zip(places, bounds, bounds[1:]):
            joined.frombytes(hashes[place:place + stop - start].cast("B"))
        return joined

    def added_indices(self, hashes):
        """The feature indices of ``hashes``, tokens the journal added: ``n_base`` + each one's
        id (:meth:`numbering`: every token of the journal numbered, when first asked)."""
        _ids, _n, keys, values = self.numbering()
        ids = array("i", [-1]) * len(hashes)
        token_kernels.lookup(keys, values, hashes, ids)
        return [self.n_base + i for i in ids]

    def token(self, index):
        """The token string of feature ``index``: the file's, or one the journal added."""
        if index >= self.n_base:
            return self.added_token(index - self.n_base)
        if "strings" in self.arrays.unread:
            try:
                return self.arrays.token(index)
            except ValueError:
                if "strings" in self.arrays.unread:
                    raise
        # read whole meanwhile (another thread asked for the model whole): the file's strings, as read
        offsets = memoryview(self.arrays["offsets"]).cast("B").cast("Q")
        return bytes(self.arrays["strings"][offsets[index]:offsets[index + 1]]).decode("utf-8", "surrogatepass")

    def added_token(self, token_id):
        """The text of the journal's token ``token_id``: the learn it first occurs in
        recorded the text of its new tokens, in the order they first occur there
        (ids are numbered learn by learn, in that order)."""
        ids = self.numbering()[0]
        at, first = 0, 0
        for learn in self.learns:
            n = len(learn.hashes) // 8
            mine = ids[at:at + n]
            at += n
            end = max(first, max(mine) + 1) if n else first
            if not first <= token_id < end:
                first = end
                continue
            hashes = array("Q")
            hashes.frombytes(learn.hashes)
            candidates, seen = array("Q"), set()
            for h, i in zip(hashes, mine):   # the ids first numbered here, up to ours, in order
                if first <= i <= token_id and i not in seen:
                    seen.add(i)
                    candidates.append(h)
            from spamnb.estimator.scoring import gather

            known = set(gather(self.file, (self.offsets["keys"], self.capacity, self.offsets["values"],
                                           self.offsets["log_count"]), self.n_base, 2, candidates)[0])
            rank = sum(1 for h in candidates[:-1] if h not in known)
            start = sum(learn.lengths[:rank])
            return bytes(learn.text[start:start + learn.lengths[rank]]).decode("utf-8", "surrogatepass")
        raise IndexError(f"feature index {self.n_base + token_id} out of range")
