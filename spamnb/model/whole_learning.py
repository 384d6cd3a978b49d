"""What a learning session (:mod:`spamnb.model.learning`) runs when the model
is read whole, and what a learn of one message into a model file does
without: the model read whole and replayed under a session's records
(:func:`read_whole`), a learn or a forget applied to the filter as the
replay applies it and recorded (:func:`run`, :class:`RecordingFilter`,
:class:`RecordingLedger`), the commit of such a session (:func:`commit`), a
new model that grows by learning (:func:`learned_model`), and the models
kept loaded from one session to the next (:class:`Kept`, ``spamnb serve``'s
TELL).  Loaded when first needed: a cold ``spamnb learn`` of a message the
model does not know appends its record without them."""

import os
from array import array

from spamnb import errors
from spamnb.persistence import deltas
from spamnb.estimator.ages import today
from spamnb.persistence.journal import append, compact_at, follow, signature

__all__ = ["RecordingFilter", "RecordingLedger", "Kept", "learned_model", "read_whole", "run", "commit"]


def read_whole(spam_filter, transactions):
    """``spam_filter`` (loaded in part, its journal not replayed: a light
    session's) read whole and its journal replayed (``deltas.read_whole``),
    then a session's ``transactions`` so far applied as the replay applies
    them, so the filter is model + journal + them."""
    deltas.read_whole(spam_filter)
    deltas.lazy_ages(spam_filter)
    if transactions:
        ledger = deltas.ledger_for(spam_filter)
        for payload in transactions:
            deltas.apply(spam_filter, ledger, payload)


def run(session, function, data, *args, **kwargs):
    """``function`` (``spamnb.estimator.ledger``'s ``learn`` or ``forget``) of a
    raw message on a ``session``'s model read whole: applied to its filter
    and ledger as the replay applies it, its operations recorded as one more
    of the session's transactions.  A failure marks the session failed (its
    filter may differ from model + journal: not kept, :class:`Kept`)."""
    ops = []
    recorder = RecordingFilter(session.filter, ops)
    try:
        result = function(recorder, RecordingLedger(session.ledger, ops, recorder), data, *args, **kwargs)
    except BaseException:
        session.failed = True
        raise
    session.forgot |= recorder.forgot
    if ops:
        session.transactions.append(b"".join(ops))
    return result


def commit(session, expire):
    """``Session.commit`` of a session's model read whole: compacted when
    ``expire`` and it passed its size limit (its tokens expired first), or
    when the session forgot a message (a forget, a relabel: a journal of
    learns alone is what a classify scores without reading the model whole),
    there is no model file to journal against, it has message
    features, or the records do not fit the journal or pass its size;
    else the session's transactions appended as one record.  Returns the
    journal's size, 0 for a compaction, None when nothing was written."""
    sf = session.filter
    if expire and sf.is_fitted:
        limit = sf.replayed().ages.max_tokens
        if limit is not None and deltas.n_live(sf) > limit:
            from spamnb.model.lifecycle import expire as expire_tokens

            session.filter = sf = expire_tokens(sf)[0]
            return session.compact()
    if not session.transactions:
        return None
    journal = sf.journal_
    # a forget (a relabel's too) is folded in at once: a classify views a journal of learns alone
    # (spamnb.persistence.journal_view) and replays one holding a forget, reading the model whole
    if ((session.forgot and session.fold_forgets) or not session.exists or sf.feature_weight or journal is None
            or journal.identity is None):
        return session.compact()
    try:
        # one record for the whole commit: a command learning many messages is all or nothing
        written = append(journal, [b"".join(session.transactions)])
    except errors.MustCompact:
        return session.compact()
    try:
        model_size = os.stat(session.path).st_size
    except OSError:
        model_size = 0
    if written > (compact_at(model_size) if session.compact_limit is None else session.compact_limit):
        return session.compact()
    return written


class RecordingFilter:
    """Stands for a SpamFilter in ``spamnb.estimator.ledger.learn``/``forget``: each learn
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
        from spamnb.estimator.messages import message_bytes
        from spamnb.estimator import prequential

        sf = self._filter
        cls = deltas.class_of(spam)
        stream = sf.tokenizer_.stream(message_bytes(message))
        if sf.pair_mixture_ is not None:   # the pair weight chosen on its own mail: two held-out scores
            held_out = deltas.mixture_held_out(sf.pair_mixture_, sf.scorer, stream, cls,
                                         self._ops, prequential.counts_scores(sf.class_count_) if sf.is_fitted
                                         else False)
            sf.counts_changed()   # the weight moved: the scorer is made again
        else:
            held_out = prequential.held_out_log_odds(sf, stream)   # its score before it is learned: held out
        self.held_out_bin = None
        if held_out is not None:
            from spamnb.estimator.prequential import ScoreHistogram

            held_out = deltas.float32(held_out)     # as the journal keeps it: replay counts the same bin
            prequential.note_held_out(sf, held_out, cls)
            self.held_out_bin = ScoreHistogram.bin_of(held_out)
            self._ops.append(deltas.encode_held_out(cls, held_out))
        vocab = sf.replayed().vocabulary   # holes and all (deltas.forget)
        first, n_before = vocab.n_features, deltas.n_live(sf)
        day = today()
        deltas.learn(sf, cls, day, stream)
        lengths, text = vocab.strings_since(first)
        self._ops.append(deltas.encode_tokens(deltas.OP_LEARN, cls, day, n_before, stream.hashes, lengths, text))
        self._ops.append(deltas.encode_learn_sums(sf, cls, stream.hashes))
        return sf

    def forget(self, message, spam):
        from spamnb.estimator.messages import message_bytes

        sf = self._filter
        cls = deltas.class_of(spam)
        stream = sf.tokenizer_.stream(message_bytes(message))
        n_before = deltas.n_live(sf)
        hashes = array("Q")
        hashes.frombytes(memoryview(stream.hashes).cast("B"))
        deltas.forget(sf, cls, hashes)
        self._ops.append(deltas.encode_tokens(deltas.OP_FORGET, cls, 0, n_before, hashes))
        self.forgot = True
        return sf


class RecordingLedger:
    """Stands for the Ledger in ``spamnb.estimator.ledger.learn``/``forget``: records its
    changes (as ``learning._LightLedger`` records them over a light ledger) and makes them.  An
    entry replaced (a relabel) or removed (a forget) takes its held-out score back
    from its old class (the new learn counted the message's score again), so a
    message's score counts once, under the label it has now."""

    def __init__(self, ledger, ops, recorder):
        self._ledger, self._ops, self._recorder = ledger, ops, recorder
        self.label, self.is_auto = ledger.label, ledger.is_auto   # its lookups are the ledger's own

    def _take_back(self, digest):
        entry = self._ledger.entry(digest)
        if entry is None or entry[2] is None:
            return
        from spamnb.estimator.prequential import ScoreHistogram

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
        journal grew (another writer's learns: :func:`spamnb.persistence.journal.follow`,
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
    try:
        st = os.stat(real)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, signature(real))


def learned_model():
    """A new, empty model that will grow by learning (``spamnb learn``, a move,
    TELL): word pairs of window ``LEARNED_WORD_PAIRS`` weighed
    ``LEARNED_PAIR_WEIGHT`` when scoring (``spamnb.estimator.defaults`` has the
    figures), its cutoffs fitted on the held-out scores of the mail it learns
    (``spamnb.estimator.prequential``: a wide unsure band while they are few);
    ``spamnb train`` makes its own (words, or pairs at weight 1, by
    cross-validation)."""
    from spamnb.mail.tokenizer import Tokenizer
    from spamnb.estimator.defaults import LEARNED_PAIR_WEIGHT, LEARNED_WORD_PAIRS
    from spamnb.estimator.prequential import start_cutoffs
    from spamnb.model.spam_filter import SpamFilter

    from spamnb.estimator import variants

    spam_filter = start_cutoffs(SpamFilter(Tokenizer(word_pairs=LEARNED_WORD_PAIRS), pair_weight=LEARNED_PAIR_WEIGHT))
    if variants.gets_mixture(spam_filter):   # its pair weight chosen on its own mail (the prior until it learns)
        spam_filter.set_fitted(pair_mixture_=variants.PairMixture(LEARNED_PAIR_WEIGHT))
    return spam_filter
