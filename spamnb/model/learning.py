"""A learning session: the model and its journal loaded under the model's
lock, changed by ``learn``/``forget`` through the ledger, and committed as
records appended to the journal (:mod:`spamnb.persistence.journal`), or as a whole
model when the change cannot be journaled or the journal has grown past its
size.  ``spamnb learn``/``forget`` and the server's TELL use it."""

import posix   # os's calls without os.py (a cold learn never loads it: spamnb.persistence.store)
import sys
from array import array

from spamnb.bayes import checks
# what a learn writes and its append: not the replay's module (deltas), loaded when it replays, nor the journal's
# other writers' (spamnb.persistence.journal: a whole save's, a follower's read)
from spamnb.persistence import records
from spamnb.estimator.ages import today
from spamnb import errors   # MustCompact, MustReadWhole: named when raised or caught (made then: errors' groups)
from spamnb.persistence.store import JOURNAL_OPS_LAYOUT, LEDGER, OP_LEARN, OP_RECORD, locked, stat_or_none
from spamnb.estimator.defaults import COUNT_TRANSFORMS, counts_scores, held_out_bin   # no prequential for one learn
# every session learns or forgets through the ledger: its module imported once here, not at each use
from spamnb.estimator import ledger as ledgers
from spamnb.estimator.scoring import FileScorer, message_data

__all__ = ["Session", "session", "Kept", "learned_model"]


def __getattr__(name):
    """``Kept`` and ``learned_model``, from ``spamnb.model.whole_learning`` (loaded
    then: a learn of one message into a model file does without them)."""
    if name in ("Kept", "learned_model"):
        from spamnb.model import whole_learning

        return getattr(whole_learning, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")



class _LightLedger:
    """Stands for both the SpamFilter and the Ledger in ``spamnb.estimator.ledger.learn``
    while a session appends without reading the model whole (one class for the
    two: a class fewer for a cold learn to make).

    As the filter (:meth:`learn`): a learn is recorded as the replay will
    apply it, from the message's own entries of the model file and the journal
    (``spamnb.persistence.journal_view``): its held-out score, the
    vocabulary's size before it, the text of its tokens the model has not
    seen.  A forget (a relabel) raises :class:`spamnb.errors.MustReadWhole`.

    As the ledger: a digest is looked up in this session's ledger
    operations, then in the journal's (newest first: their digests as one
    compiled pass over its records gathered them, ``checks.journal_ledger``,
    not a Python object an operation; a session's own transactions are read
    by the same pass), then in the model file's ledger (its digests searched
    as the file has them, ``find``: at most the ledger's capacity of them).
    Its changes are recorded into the message's operations (:meth:`recording`),
    as ``whole_learning.RecordingLedger`` records them: a held-out score to
    take back (a relabel's) or a removal needs the model whole
    (:class:`spamnb.errors.MustReadWhole`); the ledger itself changes when the
    session's transaction is noted (:meth:`note_later`)."""

    def __init__(self, find, codes, journal_payloads):
        # a digest's place in the file's ledger (or -1; given another digest, both places in one pass); their codes
        self._find, self._codes = find, codes
        # the journal's ledger operations, newest first: digests (16 bytes each), heads (op, flags, note: 4 bytes
        # each); n_records: the RECORD operations since the file (a bound on the entries added), this session's too
        self._journal_digests, self._journal_heads, self.n_records = checks.journal_ledger(journal_payloads,
                                                                                          JOURNAL_OPS_LAYOUT)
        self._overlay = {}    # digest -> code, or None (removed): this session's operations
        self._found = {}      # digest -> code or None: the journal's or the file's, as searched
        self._unnoted = []    # this session's transactions, noted when a digest is next looked up
        self._ops = self._session = None   # the message's operations and the session that learns it (recording)
        self.held_out_bin = None   # the message's held-out bin, noted by learn for record

    def recording(self, ops, session):
        """This ledger, its changes (and a learn's, :meth:`learn`) recorded into
        ``ops`` (the message's operations) for ``session`` (None, None: let go
        of both after the message, so no session is left in a reference cycle)."""
        self._ops, self._session, self.held_out_bin = ops, session, None
        return self

    def learn(self, message, spam):
        session = self._session
        view, sf = session.view, session.filter
        cls = records.class_of(spam)
        stream = sf.tokenizer_.stream(message_data(message))   # bytes (ledger.learn's): no messages module
        hashes = stream.hashes
        self.held_out_bin = None
        mixture = session.light_mixture()
        if mixture is not None:   # the pair weight chosen on its own mail: two held-out scores, through the view
            held_out = records.mixture_held_out(mixture, lambda: view, stream, cls, self._ops,
                                         counts_scores(view.class_count()))
            if held_out is not None:
                held_out = records.float32(held_out)
                self.held_out_bin = held_out_bin(held_out)
                self._ops.append(records.encode_held_out(cls, held_out))
        elif counts_scores(view.class_count()):   # as prequential.held_out_log_odds, through the view
            jll = view.score(hashes, 0, stream.pairs_start)[0]
            held_out = records.float32(jll[1] - jll[0])
            self.held_out_bin = held_out_bin(held_out)
            self._ops.append(records.encode_held_out(cls, held_out))
        positions = view.new_tokens(hashes)
        blob, offsets = bytearray(), array("Q", [0])
        if positions:
            stream.write_tokens(positions, len(positions), blob, offsets)
        lengths = array("I", map(int.__sub__, offsets[1:], offsets[:-1]))   # each new token's: no Python loop
        self._ops.append(records.encode_tokens(OP_LEARN, cls, today(), view.n_features, hashes, lengths,
                                              bytes(blob)))
        self._ops.append(records.encode_learn_sums(sf, cls, hashes))
        session.extend_view(cls, hashes, len(positions), lengths, blob)
        return sf

    def forget(self, message, spam):
        raise errors.MustReadWhole()

    def note_later(self, payload):
        """:meth:`_note` of a session's transaction, when a digest is next looked up
        (a learn of one message looks up none after its own)."""
        self._unnoted.append(payload)

    def _note(self, payload):
        digests, heads, n_records = checks.journal_ledger((payload,), JOURNAL_OPS_LAYOUT)
        for at in range(len(heads) // 4 - 1, -1, -1):   # oldest first: a digest's newest operation stays
            self._overlay[digests[16 * at:16 * at + 16]] = _head_code(heads, at)
        self.n_records += n_records

    def code(self, digest):
        code = self._known(digest)
        if code is _IN_FILE:
            code = self._found[digest] = self._file_code(self._find(digest))   # the file's ledger, not a copy of it
        return code

    def known_of(self, digest, other):
        """``spamnb.estimator.ledger.known_digest``'s choice between a message's
        ``digest`` and ``other`` (its digest with the other line endings, or
        None), the model file's ledger searched for both in one pass when
        neither this session nor the journal decides them."""
        own = self._known(digest)
        theirs = _IN_FILE if other is None else self._known(other)
        if own is _IN_FILE and theirs is _IN_FILE and other is not None:
            at, other_at = self._find(digest, other)
            own = self._found[digest] = self._file_code(at)
            if own is None:   # the other's first place among all the entries: its code
                theirs = self._found[other] = self._file_code(other_at)
        if own is _IN_FILE:
            own = self.code(digest)
        if own is not None or other is None:
            return digest
        if theirs is _IN_FILE:
            theirs = self.code(other)
        return other if theirs is not None else digest

    def _known(self, digest):
        """The entry's code of ``digest`` as this session's operations, the
        searches so far or the journal's newest operation of it say (None: no
        entry), or _IN_FILE: the model file's ledger decides."""
        while self._unnoted:
            self._note(self._unnoted.pop(0))
        if digest in self._overlay:
            return self._overlay[digest]
        if digest in self._found:   # a learn asks for a digest three times: searched once
            return self._found[digest]
        at = checks.find_digest(self._journal_digests, digest)   # the journal's newest operation of it
        if at >= 0:
            code = self._found[digest] = _head_code(self._journal_heads, at)
            return code
        return _IN_FILE

    def _file_code(self, at):
        return self._codes(at) if at >= 0 else None

    def label(self, digest):
        entry = self.entry(digest)
        return None if entry is None else entry[0]

    def entry(self, digest):
        return ledgers.code_entry(self.code(digest))

    def is_auto(self, digest):
        entry = self.entry(digest)
        return entry is not None and entry[1]

    def record(self, digest, is_spam, auto=False):
        entry = self.entry(digest)
        if entry is not None and entry[2] is not None:   # its held-out score to take back
            raise errors.MustReadWhole()
        held_out, self.held_out_bin = self.held_out_bin, None
        self._ops.append(records.encode_ledger(OP_RECORD, is_spam, digest, auto, held_out))

    def confirm(self, digest):
        is_spam, _auto, held_out = self.entry(digest)
        self._ops.append(records.encode_ledger(OP_RECORD, is_spam, digest, False, held_out))

    def remove(self, digest):
        raise errors.MustReadWhole()


_IN_FILE = object()   # _LightLedger._known: a digest the model file's ledger decides


def _head_code(heads, at):
    """The entry's code (``ledger.entry_code``) of the ledger operation ``at`` of
    ``heads`` (``checks.journal_ledger``'s: op, flags, note), None for a REMOVE."""
    if heads[4 * at] != OP_RECORD:
        return None
    return ledgers.entry_code(heads[4 * at + 1], heads[4 * at + 2] | heads[4 * at + 3] << 8)


_MADE = {}   # _FileLearner, once made


def _file_learner():
    """The class ``_FileLearner`` (below), made when first asked for: a class
    statement costs a cold learn about 0.1 million instructions, and an
    appending learn (a journal with records: ``journal_view.learner``) never
    uses it.  Two threads asking first may both make it: ``dict.setdefault``
    keeps the first's (as ``spamnb.persistence.journal_view._indices``)."""
    made = _MADE.get("file_learner")
    if made is None:
        made = _MADE.setdefault("file_learner", _make_file_learner())
    return made


def _make_file_learner():
    class _FileLearner(FileScorer):
        """The view a light session learns through while the model file has no
        journal record (``records.unjournaled``: a model's first learn after
        ``train`` or a compaction): the file's entries, as a classify scores
        them (``scoring.FileScorer``), the message's read once for its held-out
        score and its new tokens.  What the learn leaves (:meth:`extended`) is
        put through ``spamnb.persistence.journal_view`` only when the session's
        next message asks for it: a learn of one message does without that module."""

        def __init__(self, spam_filter):
            vocab, counts, ages = spam_filter.replayed()
            log_norm, log_prior = counts.scorer_logs()[1:3]
            super().__init__(*spam_filter.mapped_file_, counts.n_features_, log_norm, log_prior,
                             COUNT_TRANSFORMS[spam_filter.counts], float(spam_filter.length_norm),
                             float(spam_filter.pair_weight))
            self.filter, self.n_features, self.max_tokens = spam_filter, vocab.n_features, ages.max_tokens
            self.file_class_count = tuple(counts.class_count_)
            self._gathered = None   # (hashes, their entries): the message last read

        def class_count(self):
            """Messages learned per class, [ham, spam]: the file's."""
            return list(self.file_class_count)

        def _entries(self, hashes):
            """``FileScorer._entries``, read once for the message last asked about (scored, then its new tokens)."""
            if self._gathered is None or self._gathered[0] is not hashes:
                self._gathered = (hashes, super()._entries(hashes))
            return self._gathered[1]

        def new_tokens(self, hashes):
            """As ``JournalView.new_tokens``: the first places of the tokens the file lacks."""
            if not len(hashes):
                return array("i")
            return records.first_places(hashes, set(hashes).difference(self._entries(hashes)[0]))

        def extended(self, cls, hashes, n_new, lengths, text):
            """``JournalView.extended`` of this view: the journal view of the model
            (``spamnb.persistence.journal_view``, loaded then) with that learn;
            a session asks for it only for its next message (:attr:`Session.view`)."""
            from spamnb.persistence.journal_view import learner

            return learner(self.filter).extended(cls, hashes, n_new, lengths, text)

    return _FileLearner


def _learner(spam_filter):
    """The view a light session appends through (``journal_view.learner``), or
    a :class:`_FileLearner` when the model file has no journal record to view."""
    if records.unjournaled(spam_filter):
        return _file_learner()(spam_filter)
    from spamnb.persistence.journal_view import learner

    return learner(spam_filter)


class Session:
    """Changes to one model under its lock: :meth:`learn`/:meth:`forget` take a
    raw message through the ledger (``spamnb.estimator.ledger``), then :meth:`commit`
    appends them to the journal (or saves the model whole when it cannot be
    journaled), see :func:`session`.  Its own context manager (a class fewer for a
    cold learn to make: about 0.06 million instructions): entering takes the lock
    and loads the model (:meth:`__enter__`), leaving commits (:meth:`__exit__`)."""

    def __init__(self, path, wait, create, seed_path, expire, kept, mapped, compact_limit, light, fold_forgets):
        self.shown, self.wait, self.create, self.seed_path, self.expire = path, wait, create, seed_path, expire
        self.kept, self.mapped, self.light_wanted = kept, mapped, light and mapped
        self.compact_limit = compact_limit   # journal bytes past which commit compacts (None: journal.compact_at)
        # True: a commit that forgot (a forget, a relabel) compacts (session(fold_forgets=): the spamnb learn and
        # forget commands)
        self.fold_forgets = fold_forgets

    def _start(self, real, spam_filter, exists, view=None):
        """The session's state once the lock is held and the model loaded (``real``: its resolved path)."""
        self.path = real
        self.filter = spam_filter
        self.exists = exists
        self.transactions = []
        self.compacted = False
        self.failed = False
        self.forgot = False
        self._ledger = None
        # light: the model file read in part and its journal's learns not replayed (spamnb.persistence.journal_view):
        # a learn appends its record from the message's own entries (_LightLedger.learn), until something needs
        # the model whole (a relabel, a forget, a compaction, expiry: _read_whole)
        self.view = view
        self._light_ledger = None
        self._light_mixture = None   # a light session's copy of the pair-weight mixture, with its learns
        if spam_filter.is_fitted and view is None:
            from spamnb.persistence import deltas   # the model read whole: the replay's module

            deltas.lazy_ages(spam_filter)

    def __enter__(self):
        from spamnb.model.spam_filter import SpamFilter

        self._lock = locked(self.shown, wait=self.wait)
        real = self._lock.__enter__()
        try:
            exists = stat_or_none(real) is not None   # os.path.exists
            entry = self.kept.take(real) if self.kept is not None and exists else None
            if entry is not None:
                spam_filter = entry[1]
            elif exists or not self.create:
                spam_filter = SpamFilter.load(real, mapped=self.mapped)
            elif self.seed_path and stat_or_none(self.seed_path) is not None:
                spam_filter = SpamFilter.load(self.seed_path)
                spam_filter.set_fitted(journal_=None)
            else:
                from spamnb.model.whole_learning import learned_model

                spam_filter = learned_model()
            view = None
            if self.light_wanted and entry is None and exists:
                view = _learner(spam_filter)
            self._start(real, spam_filter, exists, view)
        except BaseException:
            self._lock.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            try:
                self.commit(expire=self.expire)
                journal = self.filter.journal_
                if (self.kept is not None and not (self.compacted or self.failed) and journal is not None
                        and journal.status == "ok" and journal.end is not None):
                    self.kept.put(self.path, self.filter)
            except BaseException:
                if not self._lock.__exit__(*sys.exc_info()):
                    raise
                return False
        return self._lock.__exit__(kind, value, traceback)

    @property
    def view(self):
        """A light session's view (``spamnb.persistence.journal_view.JournalView``)
        with this session's learns, or None: extended by each learn when first
        asked for (a learn of one message scores through the journal's learns
        alone: its view is never extended, nor the journal's learns made
        objects for it)."""
        while self._unextended:
            self._view = self._view.extended(*self._unextended.pop(0))
        return self._view

    @view.setter
    def view(self, view):
        self._view, self._unextended = view, []

    def extend_view(self, cls, hashes, n_new, lengths, text):
        """The view with one more learn after the journal's and this session's
        (``JournalView.extended``'s arguments), made when next asked for."""
        self._unextended.append((cls, hashes, n_new, lengths, text))

    def _view_counts(self):
        """``(class counts, features)`` of :attr:`view` without extending it: its
        own and the learns it is yet to be extended by (``JournalView.extended``)."""
        class_count = list(self._view.class_count())
        n_features = self._view.n_features
        for cls, _hashes, n_new, _lengths, _text in self._unextended:
            class_count[cls] += 1.0
            n_features += n_new
        return class_count, n_features

    @property
    def light(self):
        return self._view is not None

    @property
    def ledger(self):
        self._read_whole()
        if self._ledger is None:
            from spamnb.persistence.deltas import ledger_for

            self._ledger = ledger_for(self.filter)
        return self._ledger

    def class_count(self):
        """Messages learned per class, [ham, spam], with this session's learns."""
        if self._view is not None:
            return tuple(self._view_counts()[0])
        return self.filter.class_count_

    def light_mixture(self):
        """A light session's pair-weight mixture (``spamnb.estimator.variants.PairMixture``):
        a copy of the model's (its state read, the journal's records counted),
        with this session's learns; None for a model without one."""
        if self._light_mixture is None and self.filter.pair_mixture_ is not None:
            self._light_mixture = self.filter.pair_mixture_.copy()
        return self._light_mixture

    def _read_whole(self):
        """Leave the light way: the model read whole and its journal replayed
        (``deltas.read_whole``), then this session's records so far applied as
        the replay applies them, so the filter is model + journal + them."""
        if self._view is None:
            return
        self.view = self._light_ledger = self._light_mixture = None   # the replay counts this session's records
        from spamnb.model.whole_learning import read_whole

        read_whole(self.filter, self.transactions)

    def _light_ledger_view(self):
        if self._light_ledger is None:
            arrays = self.filter.unread_   # the ledger left unread by the load (a classify never reads it)

            def array_of(name):   # a model saved before the ledger (or its notes) has none
                value = arrays[name] if name in arrays.offsets else None
                return value if value is not None else b""

            labels = array_of("ledger_labels")   # one byte an entry (its size: read when an entry is found)
            notes = array_of("ledger_notes")
            notes = notes if len(notes) == len(labels) else None

            def find(digest, other=None):   # the digests searched in parts as the file has them, not read into memory
                if "ledger_digests" not in arrays.offsets:
                    return -1 if other is None else (-1, -1)
                return arrays.find_digest("ledger_digests", digest, other=other)

            def codes(i):   # a message the ledger knows: its label and note read
                arrays.fill_unread(LEDGER - {"ledger_digests"})
                return ledgers.file_code(labels[i], notes[i] if notes is not None else 0)

            journal = self.filter.journal_
            payloads = journal.payloads if journal.status == "ok" else ()
            ledger = _LightLedger(find, codes, payloads)
            for payload in self.transactions:
                ledger._note(payload)
            # at the ledger's capacity a record drops the oldest entry: the model whole decides which
            self._light_ledger = ledger if len(labels) + ledger.n_records < ledgers.DEFAULT_CAPACITY else False
        return self._light_ledger or None

    def _journal_size(self, transactions):
        """What the journal's size would be with ``transactions`` appended as one record."""
        journal = self.filter.journal_
        payload = sum(map(len, transactions))
        return (journal.end if journal.status == "ok" and journal.end is not None else 48) + 16 + payload + (
            -payload) % 8

    def _compact_limit(self):
        if self.compact_limit is not None:
            return self.compact_limit
        journal = self.filter.journal_   # a light session's: the model file's length as loaded under the lock
        if journal is not None and journal.identity is not None:
            return records.compact_at(journal.identity[0])
        try:
            model_size = posix.stat(self.path).st_size   # os.path.getsize
        except OSError:
            model_size = 0
        return records.compact_at(model_size)

    def _run(self, function, data, *args, **kwargs):
        if self._view is not None and self._journal_size(self.transactions) > self._compact_limit():
            self._read_whole()   # the commit folds the journal anyway: the view stays as small as a journal
        if self._view is not None and function.__name__ == "learn":
            ledger = self._light_ledger_view()
            if ledger is not None:
                ops = []
                view = self.view
                try:   # the ledger stands for the filter too (_LightLedger.learn)
                    result = function(ledger.recording(ops, self), ledger, data, *args, **kwargs)
                except errors.MustReadWhole:
                    self.view = view   # as before the message: nothing of it was recorded
                else:
                    if ops:
                        transaction = b"".join(ops)
                        self.transactions.append(transaction)
                        ledger.note_later(transaction)
                    return result
                finally:   # the ledger let go of the session: no cycle left (the session freed when let go)
                    ledger.recording(None, None)
        self._read_whole()
        from spamnb.model.whole_learning import run

        return run(self, function, data, *args, **kwargs)

    def learn(self, data, is_spam, tally, auto=False, **markup):
        """``spamnb.estimator.ledger.learn`` of a raw message: "learned", "known" or
        "relabelled"; ``auto``: the model's own verdict (``spamnb.model.autolearn``)."""
        outcome = self._run(ledgers.learn, data, is_spam, tally, auto=auto, **markup)
        if self._view is None:
            self.filter.refit_cutoffs()
        return outcome

    def forget(self, data, is_spam=None, tally=None, **markup):
        """``spamnb.estimator.ledger.forget`` of a raw message: the label forgotten."""
        label = self._run(ledgers.forget, data, is_spam, tally, **markup)
        self.filter.refit_cutoffs()
        return label

    def _commit_light(self, expire):
        """:meth:`commit` of a light session: the records appended, or None when
        the model must be read whole first (expiry, a compaction, no journal to
        append to); nothing is written then."""
        sf = self.filter
        max_tokens = self._view.max_tokens   # the model's size limit (a view's extension shares it)
        if expire and max_tokens is not None and self._view_counts()[1] > max_tokens:
            return None
        if not self.transactions:
            return 0
        journal = sf.journal_
        if not self.exists or sf.feature_weight or journal is None or journal.identity is None:
            return None
        if journal.status == "ok" and journal.end is None:
            return None
        if self._journal_size(self.transactions) > self._compact_limit():
            return None   # past the journal's size: this learn folds it into the model (a whole save)
        return records.append(journal, [b"".join(self.transactions)])

    def commit(self, expire=True):
        """Make the changes durable: appended to the journal (fsynced), or the
        model saved whole when the session forgot a message (a forget, a
        relabel: :attr:`fold_forgets`), there is no model file to journal
        against, the model has message features (the journal does not carry
        them), the journal passed its size, or ``expire`` and the model passed
        its size limit (``spamnb prune --expire-at``)."""
        if self._view is not None:
            written = self._commit_light(expire)
            if written is not None:
                return written if self.transactions else None
            self._read_whole()
        from spamnb.model.whole_learning import commit

        return commit(self, expire)

    def compact(self):
        """Save the model whole (the journal folded in) and remove the journal.
        A model loaded mapped is checked whole first (its checksum): a damaged
        file is never written again under a new, valid checksum."""
        if self.filter.mapped_ and self.exists:
            from spamnb.persistence.store import verify_file

            verify_file(self.path)
        from spamnb.persistence.journal import compact   # a whole save: not a learn's module

        compact(self.filter, self.path)
        self.compacted = True
        return 0



def session(path, wait=None, create=True, seed_path=None, expire=True, kept=None, mapped=False, compact_limit=None,
            light=False, fold_forgets=False):
    """``with session(model) as s:`` the model (and its journal) loaded under
    its lock as ``s.filter``; ``s.learn``/``s.forget`` change it; leaving the
    block without an exception commits (:meth:`Session.commit`), with one
    throws the changes away.  ``create``: start a new model when there is
    none (from ``seed_path``'s when given), else ModelError; ``expire``: prune
    a model past its size limit (as ``spamnb learn`` does); ``kept``: a
    :class:`Kept` to take the model from and leave it in; ``mapped``: map the
    model file (``SpamFilter.load``), checked whole only before it is saved
    whole; ``compact_limit``: the journal size (bytes) past which the commit
    saves the model whole (default :func:`spamnb.persistence.journal.compact_at`);
    ``light`` (with ``mapped``): learns append their records without reading
    the model whole or replaying its journal (a message's own entries of the
    file and the journal are read, and the ledger's digests), as long as
    nothing needs it whole (a relabel, a forget, the journal past its size,
    expiry: then it is read and replayed, and the learns so far applied,
    before going on); ``s.filter`` is then the model as loaded, without the
    journal's learns or the session's (``s.class_count()`` counts them);
    ``fold_forgets``: a commit that forgot (a forget, a relabel) saves the
    model whole, since a fresh classify scores a journal of learns without
    reading the model whole (``journal_view``) but replays one holding a
    forget (the ``spamnb learn`` and ``forget`` commands; a server, shared
    host, console or imap session journals its forgets: its process holds
    the model and follows the journal, where a whole save would stall it)."""
    return Session(path, wait, create, seed_path, expire, kept, mapped, compact_limit, light, fold_forgets)
