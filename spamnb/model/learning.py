"""A learning session: the model and its journal loaded under the model's
lock, changed by ``learn``/``forget`` through the ledger, and committed as
records appended to the journal (:mod:`spamnb.model.journal`), or as a whole
model when the change cannot be journaled or the journal has grown past its
size.  ``spamnb learn``/``forget`` and the server's TELL use it."""

from __future__ import annotations

import os
import sys
from array import array

from spamnb.model import deltas
from spamnb.model.ages import today
from spamnb.errors import MustCompact
from spamnb.model.journal import append, compact, compact_at, follow

__all__ = ["Session", "session", "Kept"]


class _RecordingFilter:
    """Stands for a SpamFilter in ``spamnb.model.ledger.learn``/``forget``: each learn
    or forget is applied as replay would, and recorded."""

    def __init__(self, spam_filter, ops):
        self._filter, self._ops = spam_filter, ops
        self.forgot = False
        self.held_out_bin = None    # the last learn's held-out bin, for its ledger entry

    @property
    def filter(self):
        return self._filter

    @property
    def is_fitted(self):
        return self._filter.is_fitted

    def learn(self, message, spam):
        from spamnb.model.labels import is_spam_label
        from spamnb.model.messages import message_bytes
        from spamnb.model import prequential

        sf = self._filter
        cls = int(is_spam_label(spam))
        stream = sf.tokenizer_.stream(message_bytes(message))
        held_out = prequential.held_out_log_odds(sf, stream)   # its score before it is learned: a held-out score
        self.held_out_bin = None
        if held_out is not None:
            from spamnb.model.prequential import ScoreHistogram

            held_out = _float32(held_out)     # as the journal keeps it: replay counts the same bin
            prequential.note_held_out(sf, held_out, cls)
            self.held_out_bin = ScoreHistogram.bin_of(held_out)
            self._ops.append(deltas.encode_held_out(cls, held_out))
        vocab = sf.replayed().vocabulary   # holes and all (deltas.forget)
        first, n_before = vocab.n_features, deltas.n_live(sf)
        day = today()
        deltas.learn(sf, cls, day, stream)
        lengths, text = vocab.strings_since(first)
        self._ops.append(deltas.encode_tokens(deltas.OP_LEARN, cls, day, n_before, stream.hashes, lengths, text))
        return sf

    def forget(self, message, spam):
        from spamnb.model.labels import is_spam_label
        from spamnb.model.messages import message_bytes

        sf = self._filter
        cls = int(is_spam_label(spam))
        stream = sf.tokenizer_.stream(message_bytes(message))
        n_before = deltas.n_live(sf)
        hashes = array("Q")
        hashes.frombytes(memoryview(stream.hashes).cast("B"))
        deltas.forget(sf, cls, hashes)
        self._ops.append(deltas.encode_tokens(deltas.OP_FORGET, cls, 0, n_before, hashes))
        self.forgot = True
        return sf


class _RecordingLedger:
    """Stands for the Ledger in ``spamnb.model.ledger.learn``/``forget``: records its
    changes.  An entry replaced (a relabel) or removed (a forget) takes its held-out
    score back from its old class (the new learn counted the message's score again),
    so a message's score counts once, under the label it has now."""

    def __init__(self, ledger, ops, recorder):
        self._ledger, self._ops, self._recorder = ledger, ops, recorder

    def label(self, digest):
        return self._ledger.label(digest)

    def is_auto(self, digest):
        return self._ledger.is_auto(digest)

    def _take_back(self, digest):
        entry = self._ledger.entry(digest)
        if entry is None or entry[2] is None:
            return
        from spamnb.model.prequential import ScoreHistogram

        cls, log_odds = int(entry[0]), ScoreHistogram.center(entry[2])
        deltas.take_back_held_out(self._recorder.filter, cls, log_odds)
        self._ops.append(deltas.encode_held_out(cls, log_odds, back=True))

    def record(self, digest, is_spam, auto=False):
        held_out, self._recorder.held_out_bin = self._recorder.held_out_bin, None
        self._take_back(digest)
        self._ledger.record(digest, is_spam, auto, held_out)
        self._ops.append(deltas.encode_ledger(deltas.OP_RECORD, is_spam, digest, auto, held_out))

    def confirm(self, digest):
        self._ledger.confirm(digest)
        is_spam, auto, held_out = self._ledger.entry(digest)
        self._ops.append(deltas.encode_ledger(deltas.OP_RECORD, is_spam, digest, auto, held_out))

    def remove(self, digest):
        self._take_back(digest)
        self._ledger.remove(digest)
        self._ops.append(deltas.encode_ledger(deltas.OP_REMOVE, 0, digest))


def _float32(value):
    return array("f", (value,))[0]


class Session:
    """Changes to one model under its lock: :meth:`learn`/:meth:`forget` take a
    raw message through the ledger (``spamnb.model.ledger``), then :meth:`commit`
    appends them to the journal (or saves the model whole when it cannot be
    journaled), see :func:`session`."""

    def __init__(self, real, spam_filter, exists):
        self.path = real
        self.filter = spam_filter
        self.exists = exists
        self.transactions = []
        self.compacted = False
        self.failed = False
        self.forgot = False
        self._ledger = None
        self.compact_limit = None   # journal bytes past which commit compacts (None: journal.compact_at)
        if spam_filter.is_fitted:
            deltas.lazy_ages(spam_filter)

    @property
    def ledger(self):
        if self._ledger is None:
            self._ledger = deltas.ledger_for(self.filter)
        return self._ledger

    def _run(self, function, data, *args, **kwargs):
        ops = []
        recorder = _RecordingFilter(self.filter, ops)
        try:
            result = function(recorder, _RecordingLedger(self.ledger, ops, recorder), data, *args, **kwargs)
        except BaseException:
            self.failed = True   # the filter may differ from model + journal: not to be kept (Kept)
            raise
        self.forgot |= recorder.forgot
        if ops:
            self.transactions.append(b"".join(ops))
        return result

    def learn(self, data, is_spam, tally, auto=False, **markup):
        """``spamnb.model.ledger.learn`` of a raw message: "learned", "known" or
        "relabelled"; ``auto``: the model's own verdict (``spamnb.model.autolearn``)."""
        from spamnb.model import ledger as ledgers

        outcome = self._run(ledgers.learn, data, is_spam, tally, auto=auto, **markup)
        self.filter.refit_cutoffs()
        return outcome

    def forget(self, data, is_spam=None, tally=None, **markup):
        """``spamnb.model.ledger.forget`` of a raw message: the label forgotten."""
        from spamnb.model import ledger as ledgers

        label = self._run(ledgers.forget, data, is_spam, tally, **markup)
        self.filter.refit_cutoffs()
        return label

    def commit(self, expire=True):
        """Make the changes durable: appended to the journal (fsynced), or the
        model saved whole when there is no model file to journal against, the
        model has message features (the journal does not carry them), the
        journal passed its size, or ``expire`` and the model passed its size limit
        (``spamnb prune --expire-at``)."""
        sf = self.filter
        if expire and sf.is_fitted:
            limit = sf.replayed().ages.max_tokens
            if limit is not None and deltas.n_live(sf) > limit:
                from spamnb.model.lifecycle import expire as expire_tokens

                self.filter = sf = expire_tokens(sf)[0]
                return self.compact()
        if not self.transactions:
            return None
        journal = sf.journal_
        if not self.exists or sf.feature_weight or journal is None or journal.identity is None:
            return self.compact()
        try:
            # one record for the whole commit: a command learning many messages is all or nothing
            written = append(journal, [b"".join(self.transactions)])
        except MustCompact:
            return self.compact()
        try:
            model_size = os.path.getsize(self.path)
        except OSError:
            model_size = 0
        if written > (compact_at(model_size) if self.compact_limit is None else self.compact_limit):
            return self.compact()
        return written

    def compact(self):
        """Save the model whole (the journal folded in) and remove the journal.
        A model loaded mapped is checked whole first (its checksum): a damaged
        file is never written again under a new, valid checksum."""
        if self.filter.mapped_ and self.exists:
            from spamnb.model.store import verify_file

            verify_file(self.path)
        compact(self.filter, self.path)
        self.compacted = True
        return 0


class Kept:
    """Models kept loaded from one session to the next (``spamnb serve``'s
    TELL): a session takes its model from here when the model file and its
    journal are, under the lock, the very ones its last session left (their
    device, inode, size and modification time), instead of reading and
    replaying them again; else it reads them.  At most ``size`` models (the
    most recently used); thread-safe (a model is out while a session has it)."""

    def __init__(self, size=2):
        import threading
        from collections import OrderedDict

        self.size, self._lock, self._entries = size, threading.Lock(), OrderedDict()

    def take(self, real):
        """The model kept for ``real`` (out: put it back with :meth:`put`), as
        the file and journal are now: taken as it is when they are the ones
        its last session left, brought up to the journal when only the
        journal grew (another writer's learns: :func:`spamnb.model.journal.follow`,
        the records since), else None (read the model).  Call it under the model's lock."""
        with self._lock:
            entry = self._entries.pop(real, None)
        if entry is None:
            return None
        now = _signature(real)
        if entry[0] == now:
            return entry
        if now is None or entry[0] is None or entry[0][:4] != now[:4] or follow(entry[1]) is None:
            return None
        return (now, entry[1])

    def put_back(self, real, entry):
        """Return an entry :meth:`take` gave (unchanged: its signature is the
        one taken under the lock), unless a newer one came in meanwhile."""
        with self._lock:
            self._entries.setdefault(real, entry)

    def put(self, real, spam_filter):
        entry = (_signature(real), spam_filter)
        with self._lock:
            self._entries[real] = entry
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


def _signature(real):
    from spamnb.model.journal import signature

    try:
        st = os.stat(real)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, signature(real))


class _SessionContext:
    def __init__(self, path, wait, create, seed_path=None, expire=True, kept=None, mapped=False, compact_limit=None):
        self.shown, self.wait, self.create, self.seed_path, self.expire = path, wait, create, seed_path, expire
        self.kept, self.mapped, self.compact_limit = kept, mapped, compact_limit

    def __enter__(self):
        from spamnb.model.spam_filter import SpamFilter
        from spamnb.model.store import locked

        self._lock = locked(self.shown, wait=self.wait)
        real = self._lock.__enter__()
        try:
            exists = os.path.exists(real)
            entry = self.kept.take(real) if self.kept is not None and exists else None
            if entry is not None:
                spam_filter = entry[1]
            elif exists or not self.create:
                spam_filter = SpamFilter.load(real, mapped=self.mapped)
            elif self.seed_path and os.path.exists(self.seed_path):
                spam_filter = SpamFilter.load(self.seed_path)
                spam_filter.set_fitted(journal_=None)
            else:
                spam_filter = learned_model()
            self.session = Session(real, spam_filter, exists)
            self.session.compact_limit = self.compact_limit
        except BaseException:
            self._lock.__exit__(*sys.exc_info())
            raise
        return self.session

    def __exit__(self, kind, value, traceback):
        if kind is None:
            try:
                self.session.commit(expire=self.expire)
                session, journal = self.session, self.session.filter.journal_
                if (self.kept is not None and not (session.compacted or session.failed) and journal is not None
                        and journal.status == "ok" and journal.end is not None):
                    self.kept.put(session.path, session.filter)
            except BaseException:
                if not self._lock.__exit__(*sys.exc_info()):
                    raise
                return False
        return self._lock.__exit__(kind, value, traceback)


def learned_model():
    """A new, empty model that will grow by learning (``spamnb learn``, a move,
    TELL): word pairs of window ``LEARNED_WORD_PAIRS`` weighed
    ``LEARNED_PAIR_WEIGHT`` when scoring (``spamnb.model.defaults`` has the
    figures), its cutoffs fitted on the held-out scores of the mail it learns
    (``spamnb.model.prequential``: a wide unsure band while they are few);
    ``spamnb train`` makes its own (words, or pairs at weight 1, by
    cross-validation)."""
    from spamnb.mail.tokenizer import Tokenizer
    from spamnb.model.defaults import LEARNED_PAIR_WEIGHT, LEARNED_WORD_PAIRS
    from spamnb.model.prequential import start_cutoffs
    from spamnb.model.spam_filter import SpamFilter

    return start_cutoffs(SpamFilter(Tokenizer(word_pairs=LEARNED_WORD_PAIRS), pair_weight=LEARNED_PAIR_WEIGHT))


def session(path, wait=None, create=True, seed_path=None, expire=True, kept=None, mapped=False, compact_limit=None):
    """``with session(model) as s:`` the model (and its journal) loaded under
    its lock as ``s.filter``; ``s.learn``/``s.forget`` change it; leaving the
    block without an exception commits (:meth:`Session.commit`), with one
    throws the changes away.  ``create``: start a new model when there is
    none (from ``seed_path``'s when given), else ModelError; ``expire``: prune
    a model past its size limit (as ``spamnb learn`` does); ``kept``: a
    :class:`Kept` to take the model from and leave it in; ``mapped``: map the
    model file (``SpamFilter.load``), checked whole only before it is saved
    whole; ``compact_limit``: the journal size (bytes) past which the commit
    saves the model whole (default :func:`spamnb.model.journal.compact_at`)."""
    return _SessionContext(path, wait, create, seed_path, expire, kept, mapped, compact_limit)
