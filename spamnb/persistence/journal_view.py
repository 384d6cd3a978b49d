"""A model's journal as a load reads it (:func:`read`; :func:`replay`, called by
``spamnb.persistence.codec``: the records applied, :func:`apply_records`, or
scored without a replay), the read side of ``spamnb.persistence.journal``
(whose docstring describes the file; it keeps the writers and a follower's
reads, which a classify does not load); and a model read in part whose
journal is scored, not replayed: one message's tokens through the journal's
learns, the model's arrays left unread.

``spamnb classify`` of one message reads a model in part
(``SpamFilter.load(mapped=True)``: the header and the small arrays; a
message's entries of the hash index and log-counts by ``pread``).  Once mail
was learned, the journal's replay (``spamnb.persistence.journal``) needed the
hash index and the counts whole (on the Enron-Spam model 16 + 8 + 11 +
11 MiB read, for a journal of a few hundred KiB), so a classify's time and
memory followed the model's size until the journal was compacted.

A :class:`JournalView` stands for that replay when the journal holds only
learns (no forget), for scoring alone.  At load it checks the records fit
the model (each learn's vocabulary size), counts the held-out scores they
carry and refits the cutoffs, as the replay does.  A message is scored
from its own entries of the model file (``token_kernels.gather``), put
through the journal's learns with the replay's own arithmetic: every
recorded token is numbered in the order it first occurs (one
``token_kernels.insert`` over the journal's hashes), and each learn is one
``token_kernels.add_counts_split`` over rows as long as the journal's
distinct tokens, whose message entries start at the model file's counts.
So each class total changes by the same sum, in the same order, as in a
replay, and each of the message's tokens gets the same count and
log(count + alpha), to the bit; the journal's new tokens are numbered
after the file's, in the order they were added.  A Scorer over the
message's tokens alone then gives the sums a replayed model's Scorer gives
(``scripts/check/check_identical.py``, tests/test_journal_view.py).

Anything else a filter is asked (its vocabulary, counts, ages, ledger, a
learn, a save) replays the journal first, as before (:meth:`JournalView.replay`,
through ``deltas.read_whole``), without its held-out scores: those were
counted at load.  A journal with a forget, a record that does not fit, or
counts that are not held in place is replayed at load (:func:`view` returns
None), with the warnings the replay gives.
"""

import posix   # os's calls without os.py (a classify or learn through the journal never loads it)
from array import array

from spamnb.bayes import arithmetic, checks, token_kernels
from spamnb.persistence.attaching import attach
# the records' layouts and codes (deltas' too): a view of the learns loads no deltas (the replay's, 1.2 M instructions)
from spamnb.persistence.store import (JOURNAL_HEAD as HEAD, JOURNAL_MAGIC as MAGIC, JOURNAL_OPS_LAYOUT,
                                      JOURNAL_VERSIONS as VERSIONS, OP_HELD_OUT, OP_PAIR_SCORES, Journal, holds_lock,
                                      journal_path)
from spamnb.estimator.scoring import FileScorer

_NAN = float("nan")   # math's nan: a classify or learn through the journal loads no math module

__all__ = ["read", "replay", "apply_records", "JournalView", "view", "learner"]


def __getattr__(name):
    """``apply_records``, the records' replay: ``spamnb.persistence.deltas``',
    loaded when first asked for (PEP 562: a view of the learns replays none)."""
    if name == "apply_records":
        from spamnb.persistence.deltas import apply_records

        return apply_records
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------- the journal read at load
def _warn(message):
    import warnings

    from spamnb.errors import JournalWarning

    warnings.warn(message, JournalWarning, stacklevel=3)


def _read_bytes(path):
    fd = posix.open(path, posix.O_RDONLY | getattr(posix, "O_CLOEXEC", 0))
    try:
        want = max(posix.fstat(fd).st_size + 1, 65536)   # the whole file in one read, and its end seen
        chunks = []
        while True:
            chunk = posix.read(fd, want)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            want = 65536   # grown since (a writer appending): the rest (not another buffer the file's size)
    finally:
        posix.close(fd)


# a reader's journal is read through this many bytes (a record longer: through its own), not whole into new memory
_BUFFER = 32 << 10


def read(model_path, identity, scan=False):
    """Read the journal of the model at ``model_path`` whose file is ``identity``
    (``(length, checksum)``); never raises for what the journal holds.  With
    ``scan`` (a reader of a model read in part, no writer: its learns are
    viewed), the records are checked and their operations read through one
    small buffer (:func:`_scan`), the file kept open: the view reads the
    learns' hashes again when it scores (``token_kernels.journal_rows``), and the
    payloads are read whole only when asked for; a journal a view does not
    stand for (a forget) is read whole, as without ``scan``."""
    path = journal_path(model_path)
    if scan:
        try:
            journal = _scan(path, identity)
        except FileNotFoundError:
            return Journal(path, identity)
        except OSError as exc:
            _warn(f"{path}: cannot read the model's journal ({exc.strerror or exc}); the model is used without it")
            return Journal(path, identity, "stale")
        if journal is not None:
            return journal
    try:
        data = _read_bytes(path)
    except FileNotFoundError:
        return Journal(path, identity)
    except OSError as exc:
        _warn(f"{path}: cannot read the model's journal ({exc.strerror or exc}); the model is used without it")
        return Journal(path, identity, "stale")
    stale = _stale(path, identity, data, len(data))
    if stale is not None:
        return stale
    head = data[40:48]
    # each record's length, place and checksum checked; its payload's view (of data: no copy)
    payloads, at = checks.journal_records(data, head, HEAD.size, memoryview(data))
    return Journal(path, identity, "ok", payloads, at, len(data), head, HEAD.unpack_from(data)[1])


def _stale(path, identity, data, size):
    """The journal (``status`` "stale", of ``size`` bytes) at ``path`` whose first bytes
    are ``data`` when they are not the header of a journal of the model file
    ``identity`` (warned of when they are no journal of this spamnb); else None."""
    if len(data) < HEAD.size:
        # a journal is created whole (renamed into place): a short one is not ours to extend
        return Journal(path, identity, "stale", size=size)
    magic, version, _r, length, checksum, _r2, head_sum = HEAD.unpack_from(data)
    if magic != MAGIC or version not in VERSIONS or checks.checksum64(data[:40]) != head_sum:
        _warn(f"{path}: not a journal of this spamnb (or damaged); the model is used without it")
        return Journal(path, identity, "stale", size=size)
    if identity is None or (length, checksum) != tuple(identity):
        return Journal(path, identity, "stale", size=size)
    return None


def _scan(path, identity):
    """:func:`read` of the journal at ``path`` through one small buffer
    (``checks.journal_scan``: each record's length, place and checksum
    checked as ``checks.journal_records`` checks them, its operations read as
    ``checks.journal_learns`` reads them); None when a record holds what a
    view does not stand for (the journal is then read whole)."""
    file = open(path, "rb", buffering=0)   # kept open: the file scanned, whatever the path becomes
    try:
        fd = file.fileno()
        size = posix.fstat(fd).st_size
        data = posix.pread(fd, HEAD.size, 0)
        stale = _stale(path, identity, data, max(size, len(data)))
        if stale is not None:
            return stale
        head = data[40:48]
        scanned = checks.journal_scan(fd, head, HEAD.size, _BUFFER, _LAYOUT)
        if scanned is None:
            return None
        spans, end, seen = scanned[:3]
        journal = Journal(path, identity, "ok", (), end, max(size, seen), head, HEAD.unpack_from(data)[1],
                          scan=(_reread, len(spans) // 24, (file, scanned[10], scanned[:10])))
        file = None
        return journal
    finally:
        if file is not None:
            file.close()


def _reread(journal):
    """The payloads of a journal :func:`_scan` read, read whole
    (``journal_replay.reread``, loaded then: a verdict scores without them)."""
    from spamnb.persistence.journal_replay import reread

    return reread(journal)


def replay(spam_filter, model_path, header, arrays=None):
    """Apply the journal of the model at ``model_path`` to ``spam_filter``, just
    loaded from it (``header``, ``arrays``: what the store read; the arrays' writable
    bytes, when given, are patched in place).  Returns
    True when the model file read is no longer the one on disk and the
    journal goes with the new one: the caller reads the model again.  Called
    by :meth:`SpamFilter.load`; never raises for what the journal holds."""
    identity = header.get("_identity")
    # a model read in part whose journal no writer of this process holds: its learns viewed, read through a buffer
    journal = read(model_path, identity, scan=spam_filter.unread_ is not None and not holds_lock(model_path))
    if not attach(spam_filter, model_path, identity, journal, arrays):
        return True   # the model was replaced (a compaction) after it was read
    if journal.status != "ok" or not journal.n_records:
        if journal.damaged_tail:
            _warn_tail(journal, 0)
        return False
    if spam_filter.unread_ is not None:   # read in part: its learns scored, not replayed, if they can be
        pending = view(spam_filter, journal)
        if pending is not None:
            pending.count_scores(spam_filter)
            spam_filter.set_fitted(pending_journal_=pending)   # replayed by deltas.read_whole when needed
            if journal.damaged_tail:
                _warn_tail(journal, len(journal.payloads))
            return False
    from spamnb.persistence.deltas import apply_records, read_whole   # the replay's (a view scores without it)

    read_whole(spam_filter)   # what the records change (a model read in part: store.map_model)
    apply_records(spam_filter, journal)
    return False


def _warn_tail(journal, applied):
    """``journal_replay.warn_tail``: a damaged tail warned of (loaded then)."""
    from spamnb.persistence.journal_replay import warn_tail

    warn_tail(journal, applied)


# ---------------------------------------------------------------------------- its learns, scored without a replay
# the record layouts (store's, records' writes) the compiled pass reads, handed to it: it refuses others
_LAYOUT = JOURNAL_OPS_LAYOUT


def _parse(journal, n_base, base=None):
    """``(records, scores, journal, pairs)`` of ``journal``'s transactions (read
    whole), read in one compiled pass (``checks.journal_learns``): the learns' fields in
    their records (``(journal, fields, fields a learn)``, made learns by
    ``journal_replay.recorded`` when first asked for),
    each transaction's held-out scores ``[(op, class, log-odds), ...]``, the
    learns' hashes, bounds, classes, sums and places
    (:meth:`JournalView.concatenated`; with ``base``, the journal's bytes
    the payloads are views of, the hashes are read where they are, not
    copied: a classify's memory is the journal's once) and whether any
    transaction holds pair scores; None when a record is not what a view
    stands for (a forget, an unknown or malformed operation, a learn that
    does not follow the vocabulary of ``n_base`` tokens: the replay then decides)."""
    parsed = checks.journal_learns(journal.payloads, n_base, _LAYOUT, base)
    if parsed is None:
        return None
    return _parsed(journal, parsed, base)


def _scanned(journal, n_base):
    """:func:`_parse` of a journal :func:`_scan` read: its scan's learns (their
    hashes read from the file, through its buffer, when a message is scored)."""
    file, buffer, scanned = journal.scan[2]
    spans, _end, _seen, first = scanned[:4]
    if first not in (-1, n_base):   # the learns do not follow the model file's vocabulary: the replay decides
        return None
    import _thread

    # the buffer is one thread's at a time (a scoring thread that finds it taken reads through one of its own)
    source = ((file.fileno(), buffer, memoryview(spans).cast("q"), memoryview(scanned[4]).cast("q")),
              _thread.allocate_lock())
    return _parsed(journal, scanned[4:], None, source)


def _parsed(journal, parsed, base, source=None):
    """:func:`_parse`'s items of ``checks.journal_learns``' (or ``journal_scan``'s) ``parsed``."""
    learns, scores, hashes, bounds, classes, sums = parsed
    fields = memoryview(learns).cast("q")   # each learn's fields, as many a learn (checks.journal_learns)
    records = (journal, fields, len(fields) // len(classes) if classes else 0)
    places = None
    if base is not None:   # the third item: each learn's place in base (8-byte words)
        hashes, places = base, memoryview(hashes).cast("q")
    elif source is not None:   # each learn's place in the file (8-byte words)
        hashes, places = b"", memoryview(hashes).cast("q")
    pairs = [value for mine in scores for op, _cls, value in mine if op == OP_PAIR_SCORES]   # one pass
    if pairs:
        from spamnb.persistence.deltas import pair_scores_fit

        if not all(pair_scores_fit(*value) for value in pairs):
            return None
    return records, scores, (memoryview(hashes).cast("Q"), memoryview(bounds).cast("q"), classes,
                             memoryview(sums).cast("d"), places, source), bool(pairs)


def view(spam_filter, journal):
    """A :class:`JournalView` of ``journal`` (read, "ok", with records) over
    ``spam_filter`` (loaded in part, its arrays unread, its counts held in
    place: ``deltas.in_place``), or None when the journal must be replayed."""
    vocab, counts, _ages = spam_filter.replayed()   # as loaded: nothing read whole (spam_filter.Folded)
    arrays, mapped = spam_filter.unread_, spam_filter.mapped_file_
    if (counts is None or vocab is None or arrays is None or mapped is None or not counts.in_place
            or not counts.as_loaded or counts.n_holes or counts.n_classes != 2
            or "feature_count" not in arrays.offsets):
        return None
    n_base = vocab.n_features
    if counts.n_features_ != n_base:
        return None
    if journal.scan is not None:   # read through a buffer (_scan)
        parsed = _scanned(journal, n_base)
    else:
        data = journal.payloads[0].obj   # the journal's bytes (read), to its last record
        base = memoryview(data)[:journal.end - journal.end % 8] if isinstance(data, bytes) and journal.end else None
        parsed = _parse(journal, n_base, base)
    if parsed is None:
        return None
    records, scores, concatenated, pairs = parsed
    if pairs:
        from spamnb.estimator.defaults import cutoffs_from

        if cutoffs_from(spam_filter) not in ("defaults", "held-out"):   # count_scores would leave them to the replay
            return None
    _journal, fields, stride = records
    live = fields[2 - stride] + fields[3 - stride] if stride else n_base   # the last learn's features before, new tokens
    return JournalView(spam_filter, journal, None, scores, live, concatenated, records)


def learner(spam_filter):
    """The view a learner appends through (``spamnb.model.learning``): the
    filter's pending one, an empty one over a model file read in part whose
    journal has no record, or None (the model must be read whole: its
    journal was replayed at load, or the model is not one a view stands for)."""
    pending = spam_filter.pending_journal_
    if pending is not None:
        return pending
    from spamnb.persistence.records import unjournaled   # a learner's (what a learn writes, not the replay's module)

    if not unjournaled(spam_filter):
        return None
    return JournalView(spam_filter, spam_filter.journal_, [], [], spam_filter.replayed().vocabulary.n_features)


_MADE = {}   # _Indices (below), once made


def _indices():
    """The class ``_Indices``, made when first asked for (as ``spamnb.errors`` makes its
    groups): a class statement costs a cold classify about 0.1 million instructions,
    and only a message with tokens the journal alone holds makes one.  Two threads
    asking first may both make it: ``dict.setdefault`` keeps the first's."""
    made = _MADE.get("indices")
    if made is None:
        made = _MADE.setdefault("indices", _make_indices())
    return made


def _make_indices():
    class _Indices:
        """The feature indices of a message's tokens in a view's Scorer (:meth:`JournalView._build`),
        position by position (what ``FileScorer.score`` asks of its evidence): the file's tokens',
        then ``n_base`` + the id of each the journal added, numbered (``JournalView.numbering``:
        a table of every token of the journal) only when one of those is asked for, not for sums."""

        __slots__ = ("known", "added", "view")

        def __init__(self, known, added, view):
            self.known, self.added, self.view = known, added, view   # added: their hashes (array('Q')) until numbered

        def __getitem__(self, position):
            if position < len(self.known):
                return self.known[position]
            if not isinstance(self.added, list):
                self.added = self.view.added_indices(self.added)
            return self.added[position - len(self.known)]

    return _Indices


# what a view does besides scoring a message and a learner's append (journal_replay.ViewExtras'): made methods
# of the view when first asked for (JournalView.__getattr__)
_EXTRAS = frozenset(("learns", "extended", "extend", "token", "added_indices", "numbering", "joined_hashes",
                     "added_token"))


class JournalView(FileScorer):
    """The journal of a model read in part, for scoring (:func:`view`): a
    ``scoring.FileScorer`` whose message's entries go through the journal's learns."""

    # what a learner's copy (extended) shares with the view it extends
    _SHARED = ("max_tokens", "file_class_count", "prior", "journal", "scores", "arrays", "file",
               "offsets", "capacity", "n_base", "alpha", "transform", "length", "pair_weight", "log_norm",
               "file_totals", "scores_counted")

    def __init__(self, spam_filter, journal, learns, scores, n_features, concatenated=None, records=None):
        from spamnb.estimator.defaults import COUNT_TRANSFORMS

        # the learns (``journal_replay.Learn``), or None: made from the records (_parse's) when first asked for
        self._learns, self._records = learns, records
        # the learns' hashes, bounds and classes (concatenated): the compiled pass's (_parse), else on first use
        self._journal = concatenated

        counts = spam_filter.replayed().word_counts
        self.max_tokens = spam_filter.replayed().ages.max_tokens   # the model's size limit (a learner's commit)
        self.file_class_count, self.prior = tuple(counts.class_count_), counts.prior
        self.journal, self.scores, self.n_features = journal, scores, n_features
        self.arrays = spam_filter.unread_
        self.file, self.offsets, self.capacity = spam_filter.mapped_file_
        self.n_base = counts.n_features_
        self.alpha = float(counts.alpha)
        self.transform, self.length = COUNT_TRANSFORMS[spam_filter.counts], float(spam_filter.length_norm)
        self.pair_weight = float(spam_filter.pair_weight)
        log_norm, log_prior = counts.scorer_logs()[1:3]
        self.log_norm, self.log_prior = log_norm, log_prior
        if self._n_learns():   # as WordCounts.scorer_logs once the counts changed in place
            self.log_prior = arithmetic.plain_log_prior(self.prior, self.class_count())
        self.file_totals = [token_kernels.exp(v) - self.alpha * self.n_base for v in log_norm]   # as WordCounts.extend_in_place
        import _thread   # threading's lock, without threading's import (a classify's cold path)

        self._lock, self._state = _thread.RLock(), "pending"
        self._last = None  # (hashes, their set, _build(hashes)): the message last scored
        self._gathered = None   # (hashes, _gather(hashes)): the message's entries of the file last read
        self._held = None   # (hashes, wanted, first, m) of the message last built (_build): _journal_holds
        self.scores_counted = False   # the held-out scores counted at load (count_scores)
        self._ids = None   # (token ids of every recorded occurrence, number of distinct tokens), on first use

    def __getattr__(self, name):
        """What a view does besides scoring a message and a learner's append (its
        learns as objects, a learner's next message, a token's text): ``spamnb.persistence.journal_replay.ViewExtras``' methods and
        its property ``learns``, bound to this view when first asked for (that
        module loaded then: a classify or learn of one message does without it)."""
        if name not in _EXTRAS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        from spamnb.persistence.journal_replay import ViewExtras

        return getattr(ViewExtras, name).__get__(self, type(self))

    def _n_learns(self):
        return len(self._learns) if self._learns is not None else len(self._journal[2])

    def class_count(self):
        """Messages learned per class, [ham, spam]: the file's and the journal's learns."""
        class_count = list(self.file_class_count)
        if self._learns is None:   # the records' classes, as the compiled pass read them (whole counts: exact)
            classes = self._journal[2]
            class_count[0] += classes.count(0)
            class_count[1] += classes.count(1)
            return class_count
        for learn in self._learns:
            class_count[learn.cls] += 1.0
        return class_count

    # -- a learner's (spamnb.model.learning) -----------------------------------
    def new_tokens(self, hashes):
        """The positions in ``hashes`` (``array('Q')``, a message's occurrences) of
        the tokens neither the model file nor the journal's learns hold, each
        at its first occurrence, in order: where ``Vocabulary.add`` would
        number the message's new tokens, and so their text's order in a record."""
        if not len(hashes):
            return array("i")
        from spamnb.persistence.records import first_places   # a learner's (what a learn writes, not the replay's)

        held = self._held   # read once: another thread scoring through this view may set it meanwhile
        if held is not None and held[0] is hashes:   # scored last through the learns (_rows): the tokens that
            _hashes, wanted, first, m = held   # pass found in neither, as they are (no set of the occurrences)
            return first_places(hashes, {wanted[k] for k in range(m, len(wanted)) if first[k] < 0})
        # a learner scored the message first: the file read once; no Python loop over the occurrences
        new = set(hashes).difference(self._gather(hashes)[0])
        if new and self._n_learns():   # and not the journal's: those the message's pass through its learns found
            new.difference_update(self._journal_holds(hashes))
        return first_places(hashes, new)

    def copy_of(self, base):
        """This (new) view given ``base``'s file and settings, never replayed (a
        copy for a learner or for scoring), with nothing read or built yet."""
        import _thread

        for name in self._SHARED:
            setattr(self, name, getattr(base, name))
        self._lock, self._state = _thread.RLock(), "done"
        self._last = self._ids = self._gathered = self._journal = self._held = None

    def _journal_holds(self, hashes):
        """The tokens of ``hashes`` the model file lacks and the journal's learns hold:
        those :meth:`_build`'s pass through the learns found (``first`` >= 0), as the message
        was scored; no table of every journal token built (``journal_replay.ViewExtras.numbering``)."""
        held = self._held   # read once: another thread scoring through this view may set it meanwhile
        if held is not None and held[0] is hashes:
            _hashes, wanted, first, m = held
        else:   # not the message scored last through this view (a weighted copy scored it, or another thread since)
            found, _index, wanted, _changed, first, _totals = self._rows(hashes)
            m = len(found)
        return {wanted[k] for k in range(m, len(wanted)) if first[k] >= 0}

    def weighted(self, pair_weight):
        """This view scoring at ``pair_weight`` (a learned model's pair-weight
        mixture, ``spamnb.estimator.scoring.kernel``): a copy for scoring only."""
        other = object.__new__(type(self))
        other._weigh(self, pair_weight)
        return other

    def _weigh(self, base, pair_weight):
        """This (new) view made ``base`` scoring at ``pair_weight`` (:meth:`weighted`)."""
        self.copy_of(base)
        self._learns, self._records, self._journal = base._learns, base._records, base._journal
        self.n_features, self.log_prior = base.n_features, base.log_prior
        self.pair_weight = float(pair_weight)

    # -- at load ---------------------------------------------------------------
    def count_scores(self, spam_filter):
        """The held-out scores the records carry, counted and the cutoffs refitted
        after each transaction that had any (as ``deltas.apply`` does), when
        the cutoffs follow them (fitted on them, or the defaults); else (cutoffs
        from ``train`` or given) they are left to the replay, as the
        histogram, ``held_out_``, is (``deltas.Replayed``)."""
        from spamnb.estimator.defaults import cutoffs_from

        self.scores_counted = cutoffs_from(spam_filter) in ("defaults", "held-out")
        if not self.scores_counted:   # cutoffs from train or given: nothing here, nor prequential's import
            return
        from spamnb.estimator.prequential import note_held_out, refit_cutoffs

        for mine in self.scores:
            for op, cls, log_odds in mine:
                if op == OP_HELD_OUT:
                    note_held_out(spam_filter, log_odds, cls)
                    continue
                # as the replay counts them (its module loaded only for a journal that has such a score)
                from spamnb.persistence.deltas import note_pair_scores, take_back_held_out

                if op == OP_PAIR_SCORES:
                    note_pair_scores(spam_filter, cls, *log_odds)
                else:
                    take_back_held_out(spam_filter, cls, log_odds)
            if mine:
                refit_cutoffs(spam_filter)

    def replay(self, spam_filter):
        """Apply the records to ``spam_filter`` (its arrays read whole now), their
        held-out scores left out when they were counted at load: what the load
        would have done, for whatever needs the model whole.  Once: another thread that
        asks meanwhile waits for it (and scores through this view until then);
        the replay's own reads of the filter do not start it again.  Returns
        whether it is done (False: called by the replay itself)."""
        with self._lock:
            if self._state != "pending":   # done, or this thread's replay reading the filter
                return self._state == "done"
            self._state = "running"
            from spamnb.persistence.deltas import apply_records   # the replay's

            try:
                apply_records(spam_filter, self.journal, scores=not self.scores_counted, tail=False)
            finally:
                self._state = "done"
            return True

    # -- scoring ----------------------------------------------------------------
    def concatenated(self):
        """``(hashes, bounds, classes, sums, places, source)`` of the journal's learns: their
        token hashes one learn after the other (``array('Q')``), where each
        starts and ends (``array('q')``), each one's class (bytes), the sum and
        scale its record keeps (float64, two a learn; NaN, NaN: none, it is
        counted) and None; or, as the journal's read gave them (:func:`_parse`
        with its bytes), ``hashes`` the journal's bytes (uint64) and ``places``
        where each learn's hashes start in them (int64), ``bounds`` still
        those of the hashes one learn after the other; then the source the
        hashes are read from (:func:`_scanned`: the journal's file, read again
        through its buffer, ``places`` where each learn's start in it, ``hashes``
        empty; and the lock of its buffer), else None."""
        if self._journal is None:
            hashes, bounds = array("Q"), array("q", [0])
            for learn in self.learns:
                hashes.frombytes(learn.hashes)
                bounds.append(len(hashes))
            self._journal = (hashes, bounds, bytes(learn.cls for learn in self.learns),
                             array("d", [_NAN]) * (2 * len(self.learns)), None, None)
        return self._journal


    def _gather(self, hashes):
        """``scoring.gather`` of ``hashes`` from the model file: the message's
        entries of its hash index and log-counts (``pread``), read once for
        the message last asked about (a learner scores a message, then asks
        for its new tokens)."""
        cached = self._gathered
        if cached is not None and hashes is cached[0]:
            return cached[1]
        from spamnb.estimator.scoring import gather

        got = gather(self.file, (self.offsets["keys"], self.capacity, self.offsets["values"],
                                 self.offsets["log_count"]), self.n_base, 2, hashes)
        self._gathered = (hashes, got)
        return got

    def _rows(self, hashes):
        """``(found, index, wanted, changed, first, totals)``: the message's entries of the
        file (:meth:`_gather`), its distinct tokens (the file's, then the others) put
        through the journal's learns (``token_kernels.journal_rows``: their logs where a
        learn changed them, else the file's, class-major; each one's first position in
        the learns, -1 for none) and the class totals after the learns."""
        found, index, logs = self._gather(hashes)
        m = len(found)
        wanted = array("Q", found)   # the message's distinct tokens: the file's, then the others (in any order)
        wanted.extend(set(hashes).difference(found))
        w = len(wanted)
        where = array("i", index)
        where.extend(array("i", [-1]) * (w - m))
        changed, first = array("d", bytes(16 * w)), array("q", bytes(8 * w))
        journal_hashes, bounds, classes, sums, places, source = self.concatenated()
        taken = None
        if source is not None:   # (the journal's file, its buffer, ...), and the buffer's lock
            source, taken = source
            if not taken.acquire(False):   # another thread reads through the buffer: a buffer of this call's own
                source, taken = source[:1] + (bytearray(len(source[1])),) + source[2:], None
        # the file's tokens' logs merged in: the file's where no learn changed them
        try:
            totals = token_kernels.journal_rows(self.file.fileno(), self.offsets["feature_count"], self.n_base,
                                                journal_hashes, bounds, classes, wanted, where, self.transform,
                                                self.length, self.alpha, self.file_totals, changed, first, logs,
                                                sums, places, source)
        except OSError as exc:   # the journal's file read again (source) is not what was checked
            from spamnb.errors import ModelError

            raise ModelError(f"{self.journal.path}: {exc.strerror or exc}") from None
        finally:
            if taken is not None:
                taken.release()
        self._held = (hashes, wanted, first, m)   # which of its tokens the journal holds (_journal_holds)
        return found, index, wanted, changed, first, totals

    def _build(self, hashes):
        """``(scorer, index)``: a Scorer over the message's known tokens (the
        model's with the journal's learns), numbered in feature order, and
        their feature indices (a token the journal added: ``n_base`` + its
        id, in the order the replay numbers them)."""
        from spamnb.estimator.scoring import compact_scorer

        if not self._n_learns():   # no learn to put them through (a learner's first message): the file's, as they are
            found, index, logs = self._gather(hashes)
            return compact_scorer(found, logs, self.log_norm, self.log_prior, self.transform, self.length,
                                  self.pair_weight), index
        found, index, wanted, changed, first, totals = self._rows(hashes)
        m, w = len(found), len(wanted)
        log_norm = arithmetic.log_norms(list(totals), self.alpha, self.n_features)   # as WordCounts.scorer_state
        out_logs = changed[:m]
        out_logs.extend(changed[w:w + m])
        if m == w or max(first[m:]) < 0:   # no token only the journal holds: the file's, in their order
            return compact_scorer(found, out_logs, log_norm, self.log_prior, self.transform, self.length,
                                  self.pair_weight), index
        # and those the journal added, after the file's (all in feature order: gather gives the file's in
        # theirs, as above, so they stay where they are, copied whole, not token by token), in the order the
        # journal numbers them: its ids go by first occurrence (numbering), so first[] orders them without
        # numbering the journal
        added = sorted((k for k in range(m, w) if first[k] >= 0), key=first.__getitem__)
        sorted_hashes = found[:]
        sorted_hashes.extend(wanted[k] for k in added)
        log_alpha = token_kernels.log(self.alpha)   # WordCounts.resize: a new token's log in a class not learned
        sorted_logs = array("d")
        for c in range(2):
            row = changed[c * w:c * w + w]
            sorted_logs.extend(row[:m])
            sorted_logs.extend(log_alpha if row[k] != row[k] else row[k] for k in added)
        scorer = compact_scorer(sorted_hashes, sorted_logs, log_norm, self.log_prior, self.transform, self.length,
                                self.pair_weight)
        return scorer, _indices()(index.tolist(), sorted_hashes[m:], self)

    # -- what the scoring path calls ---------------------------------------------
    def compact(self, hashes):
        """:meth:`_build` of ``hashes``, or the one of the message they are part of
        (``verdict.part_max`` scores each text part's tokens: a Scorer over a
        message's tokens scores any of them alone as one over theirs)."""
        cached = self._last
        if cached is not None and (hashes is cached[0] or cached[1].issuperset(hashes)):
            return cached[2]
        made = self._build(hashes)
        self._last = (hashes, set(hashes), made)
        return made


