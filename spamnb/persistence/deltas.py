"""The operations a model's journal records and replays (``spamnb.persistence.journal``).

A transaction (one command's changes) is a sequence of operations, each
padded to 8 bytes: LEARN/FORGET (the message's class, day, the vocabulary's
size before, its token hashes, and for LEARN the new tokens' UTF-8 text) and
RECORD/REMOVE of the ledger of learned messages (RECORD's flags: bit 0
spam, bit 1 auto-learned; its note: the held-out bin + 1, 0 for none),
HELD_OUT (a learned message's log-odds before it was learned,
``spamnb.estimator.prequential``), HELD_OUT_BACK (one taken back: the
message was relabelled or forgotten, so its score no longer counts under
its old class) and PAIR_SCORES (a learned model's two held-out scores of
the message, at pair weight 0 and the difference at 1, as doubles, and the
weight and scale its pair-weight mixture chose after counting them:
``spamnb.estimator.variants.PairMixture``; a reader that only scores takes
those, a learner recounts the scores) and LEARN_SUMS (journal version 2:
right after a LEARN, what that learn adds to its class total and the scale
its values were multiplied by, ``bayes/_score.learn_sums``: a reader that
scores one message through the journal, ``spamnb.persistence.journal_view``,
need not count every learn's tokens again; the replay recounts them).  :func:`apply` runs on a
loaded model what a learn or forget runs, with the recorded hashes; the
writers' side (:mod:`spamnb.persistence.journal`'s session) runs the same
functions and encodes them (``spamnb.persistence.records``, re-exported here).  The operations' layouts and codes are
``spamnb.persistence.store``'s (re-exported here: the journal's read side
finds them without this module).  Learns change the model in place where it was
read into private memory (:func:`in_place`), so replaying costs in
proportion to the journal, not the model.
"""

from array import array

from spamnb.estimator.ages import Ages, today
from spamnb.estimator.defaults import new_counts
from spamnb.persistence.attaching import attach, in_place   # noqa: F401 -- a replay's first step, here with the rest
# the operations' layouts (store.Layout: packed and read by the compiled checks, without _struct) and codes, and
# LAYOUT, all of them as the compiled passes over a journal's records take them (checks.journal_learns,
# journal_ledger: they refuse others): store's, where the journal's read side (journal_view) finds them without
# this module
from spamnb.persistence.store import (HELD_OUT_RECORD, JOURNAL_OPS_LAYOUT as LAYOUT, LEARN_SUMS_RECORD,  # noqa: F401
                                      LEDGER_RECORD, LEDGER_SIZE, OP_FORGET, OP_HELD_OUT, OP_HELD_OUT_BACK, OP_LEARN,
                                      OP_LEARN_SUMS, OP_PAIR_SCORES, OP_RECORD, OP_REMOVE, PAIR_SCORES_RECORD,
                                      TOKENS_RECORD)
# what a learn writes (encoders, a transaction's ledger operations, a learner's checks): records', re-exported here
from spamnb.persistence.records import (class_of, encode_held_out, encode_learn_sums, encode_ledger,  # noqa: F401
                                        encode_pair_scores, encode_tokens, first_places, float32,
                                        mixture_held_out, pad, unjournaled, without_sums)

__all__ = ["OP_LEARN", "OP_FORGET", "OP_RECORD", "OP_REMOVE", "apply", "apply_records", "in_place", "lazy_ages", "ledger_for",
           "learn", "forget", "forget_now", "n_live", "fold", "encode_tokens",
           "encode_ledger", "NoLedger", "drop_ages", "OP_HELD_OUT", "OP_HELD_OUT_BACK", "encode_held_out",
           "take_back_held_out", "read_whole", "OP_PAIR_SCORES", "encode_pair_scores",
           "note_pair_scores", "pair_scores_fit", "TOKENS_RECORD", "LEDGER_RECORD", "LEDGER_SIZE", "HELD_OUT_RECORD",
           "PAIR_SCORES_RECORD", "class_of", "float32", "mixture_held_out", "OP_LEARN_SUMS", "LEARN_SUMS_RECORD",
           "encode_learn_sums", "without_sums", "LAYOUT"]


class _Tokens:
    """A recorded message's tokens, standing for the tokenizer's TokenStream in
    ``Vocabulary.add``: its hashes, and the new tokens' text as recorded."""

    __slots__ = ("hashes", "lengths", "text", "n_new")

    def __init__(self, hashes, lengths, text):
        self.hashes, self.lengths, self.text = hashes, lengths, text
        self.n_new = None

    def write_tokens(self, positions, count, blob, offsets):
        if count != len(self.lengths):
            raise ValueError(f"the record has {len(self.lengths)} new tokens, the vocabulary found {count}")
        self.n_new = count
        from itertools import accumulate, islice   # a replay's: a classify through the journal runs none

        base = offsets[-1]
        blob += self.text
        offsets.extend(islice(accumulate(self.lengths, initial=base), 1, None))


def _transform(spam_filter):
    from spamnb.estimator.defaults import COUNT_TRANSFORMS

    return COUNT_TRANSFORMS[spam_filter.counts]


def learn(spam_filter, cls, day, stream):
    """``SpamFilter.learn`` after tokenizing (without message features):
    returns the token indices."""
    read_whole(spam_filter)
    if spam_filter.replayed().word_counts is None:
        spam_filter.set_fitted(word_counts_=new_counts(spam_filter))
    vocab, counts, ages = spam_filter.replayed()
    indices = vocab.add(stream)
    counts.learn(indices, cls, _transform(spam_filter), 1, vocab.n_features, float(spam_filter.length_norm))
    ages.seen(indices, vocab.n_features, day)
    spam_filter.counts_changed()
    return indices


def forget(spam_filter, cls, hashes):
    """``SpamFilter.forget`` after tokenizing: raises ValueError, changing
    nothing, when the message cannot have been learned as ``cls``.

    In place (:func:`in_place`) the tokens it leaves with no count in any
    class are taken out of the hash index and left as holes: zero counts
    that V (in log(N_c + alpha V)) does not count, until anything but
    scoring and learning reads the model (``spam_filter.Folded``), which folds
    them out of the vocabulary, counts and ages at once, as every forget
    of ``SpamFilter.forget`` would have; so the scores are those of the
    model forgotten and rewritten, and a whole save writes its file."""
    spam_filter.forget_hashes(hashes, bool(cls))


def forget_now(spam_filter, hashes, spam):
    """``SpamFilter.forget_hashes`` of a fitted filter, under its write lock: the
    message's transformed counts taken from class ``spam``'s; ValueError,
    changing nothing, when one of its tokens is unknown or a count would go
    negative.  It costs what a learn costs: the tokens the message leaves
    without counts leave the vocabulary's index at once (a later learn of one
    adds it anew, at the end) and are folded out of the vocabulary, counts and
    ages together on the next use of anything but scoring and learning
    (:func:`fold`), never by a scan of the whole model per message."""
    read_whole(spam_filter)
    vocab, counts, _ages = spam_filter.replayed()
    counts.resize(vocab.n_features)
    indices = vocab.lookup(hashes)
    unknown = indices.count(-1)
    if unknown:  # a learned message has every one of its tokens in the vocabulary
        raise ValueError(f"the message was not learned: {unknown} of its {len(indices)} tokens are unknown")
    transform, cls, length = _transform(spam_filter), int(bool(spam)), float(spam_filter.length_norm)
    zero = counts.forget_in_place(indices, cls, transform, vocab.n_features, length)
    if zero is None and counts.in_place:
        # counts held in place whose file has tokens without counts: those go first, once
        spam_filter.mark_holes()
        fold(spam_filter)
        vocab, counts, _ages = spam_filter.replayed()
        indices = vocab.lookup(hashes)   # the message's tokens have counts: none went
    if zero is None:
        zero = counts.forget_zeros(indices, cls, transform, vocab.n_features, length)
    spam_filter.counts_changed()
    if 1 in zero:
        counts.holes_left(vocab.remove(hashes, zero))
        spam_filter.mark_holes()


def n_live(spam_filter):
    """The vocabulary's size as a model saved whole would have it: without the holes."""
    vocab, counts, _ages = spam_filter.replayed()
    return vocab.n_features - (counts.n_holes if counts is not None else 0)


def fold(spam_filter):
    """Fold the holes forgets left in place (:func:`forget`) out of the
    vocabulary, counts and ages: what ``SpamFilter.forget`` does at each
    forget (every token without counts dropped), once."""
    if not spam_filter.take_holes():
        return
    vocab, counts, ages = spam_filter.replayed()
    counts.resize(vocab.n_features)
    keep = [not unused for unused in counts.unused()]
    ages.days(vocab.n_features)
    vocab.compact(keep)
    counts.compact(keep)
    ages.compact(keep)
    spam_filter.counts_changed()


def read_whole(spam_filter):
    """Read the arrays a model loaded ``mapped`` left unread (its hash index,
    counts and token strings: ``spamnb.persistence.store.map_model``) for what needs
    them whole (a learn, a forget, a journal's replay, a save, the library's
    attributes), and replay a journal that was only scored so far
    (``spamnb.persistence.journal_view``); ModelError when the file was rewritten in
    place since the load.  Nothing for any other model."""
    arrays = spam_filter.unread_
    if arrays is not None:
        arrays.fill()
        spam_filter.set_fitted(unread_=None)
    pending = spam_filter.pending_journal_
    if pending is not None and pending.replay(spam_filter):   # False: the replay's own read of the filter
        spam_filter.set_fitted(pending_journal_=None)


def pair_scores_fit(words, pairs, weight, scale):
    """Whether a PAIR_SCORES record's numbers are ones a learn writes (the
    scores not NaN, the weight in [0, 1], the scale positive and finite)."""
    return words == words and pairs == pairs and 0.0 <= weight <= 1.0 and 0.0 < scale < 1e6


def note_pair_scores(spam_filter, cls, words, pairs, weight, scale):
    """A PAIR_SCORES record replayed: counted by the filter's pair-weight mixture
    (``PairMixture.note``); a filter without one gets the mixture's prior first
    (a model saved before it had one, learned by a spamnb that gave it one)."""
    mixture = spam_filter.pair_mixture_
    if mixture is None:
        from spamnb.estimator.variants import PairMixture

        mixture = PairMixture(float(spam_filter.pair_weight))
        spam_filter.set_fitted(pair_mixture_=mixture)
    mixture.note(words, pairs, bool(cls), weight, scale)
    spam_filter.counts_changed()


def take_back_held_out(spam_filter, cls, log_odds):
    """Take a held-out score back from class ``cls``'s histogram (a relabel or a forget)."""
    held_out = spam_filter.held_out_
    if held_out is not None:
        held_out.add(log_odds, bool(cls), -1.0)


def apply(spam_filter, ledger, payload, scores=True):
    """Apply one transaction.  Raises ValueError when the record does not fit the model.
    ``scores`` False: its held-out scores left out (counted already:
    ``spamnb.persistence.journal_view``)."""
    payload = bytes(payload)
    at = 0
    n = len(payload)
    held_out = False
    while at < n:
        op = payload[at]
        if op == 0:   # padding at the end
            break
        if op in (OP_LEARN, OP_FORGET):
            op, cls, day, n_before, n_hashes, n_new, n_text = TOKENS_RECORD.unpack_from(payload, at)
            at += TOKENS_RECORD.size
            hashes = array("Q")
            hashes.frombytes(payload[at:at + 8 * n_hashes])
            at += 8 * n_hashes
            lengths = array("I")
            lengths.frombytes(payload[at:at + 4 * n_new])
            at += 4 * n_new
            text = payload[at:at + n_text]
            at += n_text
            at += pad(at)
            if len(hashes) != n_hashes or len(lengths) != n_new or len(text) != n_text or cls not in (0, 1):
                raise ValueError("a record is cut short")
            if n_live(spam_filter) != n_before:
                raise ValueError(f"a record was written for a vocabulary of {n_before} tokens, "
                                 f"the model has {n_live(spam_filter)}")
            if op == OP_LEARN:
                if sum(lengths) != n_text:
                    raise ValueError("a record's new tokens do not add up")
                stream = _Tokens(hashes, lengths, text)
                learn(spam_filter, cls, day, stream)
                if stream.n_new is None and n_new:
                    raise ValueError(f"the record has {n_new} new tokens, the vocabulary found none")
            else:
                forget(spam_filter, cls, hashes)
        elif op in (OP_RECORD, OP_REMOVE):
            op, label, note, digest = LEDGER_RECORD.unpack_from(payload, at)
            at += LEDGER_SIZE
            if ledger is None:
                raise ValueError("a ledger record without a ledger")
            if label > 3 or note > 512:
                raise ValueError("a ledger record of no label")
            if op == OP_RECORD:
                ledger.record(digest, bool(label & 1), bool(label & 2), note - 1 if note else None)
            else:
                ledger.remove(digest)
        elif op in (OP_HELD_OUT, OP_HELD_OUT_BACK):
            op, cls, log_odds = HELD_OUT_RECORD.unpack_from(payload, at)
            at += HELD_OUT_RECORD.size
            if cls not in (0, 1):
                raise ValueError("a held-out score of no class")
            if not scores:
                continue
            if op == OP_HELD_OUT:
                from spamnb.estimator.prequential import note_held_out

                note_held_out(spam_filter, log_odds, cls)
            else:
                take_back_held_out(spam_filter, cls, log_odds)
            held_out = True
        elif op == OP_PAIR_SCORES:
            _op, cls, words, pairs, weight, scale = PAIR_SCORES_RECORD.unpack_from(payload, at)
            at += PAIR_SCORES_RECORD.size
            if cls not in (0, 1) or not pair_scores_fit(words, pairs, weight, scale):
                raise ValueError("pair scores of no class, or out of range")
            if scores:
                note_pair_scores(spam_filter, cls, words, pairs, weight, scale)
        elif op == OP_LEARN_SUMS:   # for a reader that scores through the journal: the learn above is counted
            at += LEARN_SUMS_RECORD.size
        else:
            raise ValueError(f"unknown operation {op}")
    if held_out:
        from spamnb.estimator.prequential import refit_cutoffs

        refit_cutoffs(spam_filter)


def apply_records(spam_filter, journal, scores=True, tail=True):
    """Apply ``journal``'s records to ``spam_filter`` (``journal_view.replay``; ``scores``
    False: their held-out scores left out, counted already by a
    ``spamnb.persistence.journal_view.JournalView``, ``tail`` False: a damaged tail
    warned of already); a record that does not fit stops it, with a warning
    (``journal_replay``'s, loaded then)."""
    lazy_ages(spam_filter)
    ledger = ledger_for(spam_filter)
    applied = 0
    for payload in journal.payloads:
        try:
            apply(spam_filter, ledger, payload, scores=scores)
        except (ValueError, IndexError, TypeError, MemoryError) as exc:   # a layout's short read: ValueError
            from spamnb.persistence.journal_replay import warn

            warn(f"{journal.path}: record {applied} does not fit the model ({exc}); "
                 f"it and the {len(journal.payloads) - applied - 1} after it are ignored")
            journal.end = None   # a writer must not append after it: it compacts what applied
            break
        applied += 1
    if journal.damaged_tail and tail:
        from spamnb.persistence.journal_replay import warn_tail

        warn_tail(journal, applied)
    del journal.payloads[applied:]
    if not len(ledger):
        spam_filter.set_fitted(ledger_=None)   # as a model without a ledger loads


def lazy_ages(spam_filter):
    ages = spam_filter.replayed().ages
    if not isinstance(ages, _LazyAges):
        ages = _LazyAges.of(ages)
        spam_filter.replace_ages(ages)
    return ages


class _LazyAges(Ages):
    """Ages whose "seen" days are set when they are first needed (a save,
    expiry, ``spamnb info``), not at every replayed learn: setting them takes
    numpy, which a reader that only classifies never imports."""

    __slots__ = ("pending",)

    @classmethod
    def of(cls, ages):
        self = cls(ages.last_seen, ages.created, ages.last_learn, ages.max_tokens)
        self.pending = []
        return self

    def seen(self, indices, n_features, day=None):
        day = today() if day is None else day
        self.pending.append((indices, n_features, day))
        self.last_learn = max(self.last_learn, day)
        if self.created == 0:
            self.created = day
        return self

    def days(self, n_features):
        pending, self.pending = self.pending, []
        for indices, n, day in pending:
            Ages.seen(self, indices, n, day)
        return Ages.days(self, n_features)


class _NoAges(_LazyAges):
    """The ages of a filter that only scores and follows its journal
    (:func:`drop_ages`): no days kept, none recorded (scores never read them)."""

    __slots__ = ()

    def seen(self, indices, n_features, day=None):
        return self

    def days(self, n_features):
        return array("i")

    def compact(self, keep):
        return self


def drop_ages(spam_filter):
    """Let ``spam_filter`` keep no last-seen days from now on (the file's are let
    go, a learn records none): for a filter that only scores, whose learns are
    its journal's (``spamnb serve``).  Such a filter must not be saved."""
    ages = spam_filter.replayed().ages
    spam_filter.replace_ages(_NoAges(None, ages.created, ages.last_learn, ages.max_tokens))


class NoLedger:
    """Stands for the ledger of a filter that only scores and follows its journal:
    the ledger's records are let go (the scores never read them)."""

    def record(self, digest, is_spam, auto=False, held_out=None):
        pass

    def remove(self, digest):
        pass


def ledger_for(spam_filter):
    from spamnb.estimator.ledger_table import ledger_of

    ledger = ledger_of(spam_filter)
    spam_filter.set_fitted(ledger_=ledger)
    return ledger
