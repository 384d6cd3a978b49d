"""What a learn writes to a model's journal (``spamnb.persistence.journal``'s
records, :mod:`spamnb.persistence.deltas` describes their operations): each
operation encoded (padded to 8 bytes), a transaction as a journal of
version 1 keeps it (:func:`without_sums`), the places of a message's new
tokens, and whether a learner appends from the model file alone
(:func:`unjournaled`).  A transaction's ledger operations are read back by
one compiled pass (``spamnb.bayes.checks.journal_ledger``).  A learn
that appends (``spamnb.model.learning``) loads this module, not the
replay's (``deltas``, 1.1 M instructions to import); ``deltas`` re-exports
these names for the replay and the whole model's learners.
"""

from array import array

from spamnb.persistence.store import (HELD_OUT_RECORD, LEARN_SUMS_RECORD, LEDGER_RECORD, LEDGER_SIZE, OP_FORGET,
                                      OP_HELD_OUT, OP_HELD_OUT_BACK, OP_LEARN, OP_LEARN_SUMS, OP_PAIR_SCORES,
                                      OP_RECORD, OP_REMOVE, PAIR_SCORES_RECORD, TOKENS_RECORD)

__all__ = ["pad", "encode_tokens", "encode_learn_sums", "without_sums", "encode_ledger", "encode_held_out",
           "encode_pair_scores", "unjournaled", "first_places", "mixture_held_out", "class_of",
           "float32"]


def pad(n):
    """The zero bytes after ``n`` bytes of operations to the next 8-byte boundary."""
    return (-n) % 8


def _op_size(payload, at):
    """The size of the operation at ``at`` of ``payload``, its padding included;
    ValueError for one cut short or unknown."""
    op = payload[at]
    if op in (OP_LEARN, OP_FORGET):
        if at + TOKENS_RECORD.size > len(payload):
            raise ValueError("a record is cut short")
        _op, _cls, _day, _n_before, n_hashes, n_new, n_text = TOKENS_RECORD.unpack_from(payload, at)
        size = TOKENS_RECORD.size + 8 * n_hashes + 4 * n_new + n_text
        return size + pad(at + size)
    if op in (OP_RECORD, OP_REMOVE):
        return LEDGER_SIZE
    if op in (OP_HELD_OUT, OP_HELD_OUT_BACK):
        return HELD_OUT_RECORD.size
    if op == OP_PAIR_SCORES:
        return PAIR_SCORES_RECORD.size
    if op == OP_LEARN_SUMS:
        return LEARN_SUMS_RECORD.size
    raise ValueError(f"unknown operation {op}")


def encode_tokens(op, cls, day, n_before, hashes, lengths=b"", text=b""):
    hashes = memoryview(hashes).cast("B")
    lengths = memoryview(lengths).cast("B")
    head = TOKENS_RECORD.pack(op, cls, day, n_before, len(hashes) // 8, len(lengths) // 4, len(text))
    body = b"".join((head, hashes, lengths, text))
    return body + b"\0" * pad(len(body))


def encode_learn_sums(spam_filter, cls, hashes):
    """LEARN_SUMS of a learn of class ``cls`` of the token ``hashes`` into
    ``spam_filter``: the sum and scale ``bayes/_score.learn_sums`` gives under
    its counts transform and length, written right after the LEARN."""
    from spamnb.bayes.token_kernels import learn_sums

    from spamnb.estimator.defaults import COUNT_TRANSFORMS

    total, scale = learn_sums(hashes, COUNT_TRANSFORMS[spam_filter.counts], float(spam_filter.length_norm))
    return LEARN_SUMS_RECORD.pack(OP_LEARN_SUMS, cls, total, scale)


def without_sums(payload):
    """``payload`` (a transaction) without its LEARN_SUMS: what a journal of
    version 1 holds (a reader of that version knows no such operation)."""
    payload = memoryview(payload).cast("B")
    at, n, kept, start = 0, len(payload), [], 0
    while at < n and payload[at]:
        size = _op_size(payload, at)
        if payload[at] == OP_LEARN_SUMS:
            kept.append(payload[start:at])
            start = at + size
        at += size
    kept.append(payload[start:])
    return b"".join(kept)


def encode_ledger(op, label, digest, auto=False, held_out=None):
    """RECORD/REMOVE: ``label`` 0/1, ``auto`` learned by auto-learn, ``held_out`` its held-out bin (or None)."""
    note = 0 if held_out is None else int(held_out) + 1
    record = LEDGER_RECORD.pack(op, int(bool(label)) | (2 if auto else 0), note, digest)
    return record + b"\0" * (LEDGER_SIZE - len(record))


def encode_held_out(cls, log_odds, back=False):
    return HELD_OUT_RECORD.pack(OP_HELD_OUT_BACK if back else OP_HELD_OUT, cls, log_odds)


def encode_pair_scores(cls, words, pairs, weight, scale):
    return PAIR_SCORES_RECORD.pack(OP_PAIR_SCORES, cls, words, pairs, weight, scale)


def unjournaled(spam_filter):
    """Whether a learner can append to ``spam_filter`` (loaded in part, mapped)
    from the message's own entries of its file, with no journal record to
    view (``spamnb.persistence.journal_view.learner``): its counts held in
    place as loaded, of two classes, without holes, as long as its
    vocabulary, and its journal read and empty (or none)."""
    journal = spam_filter.journal_
    if (spam_filter.pending_journal_ is not None or spam_filter.unread_ is None or journal is None
            or (journal.status == "ok" and journal.payloads)):
        return False
    vocab, counts, _ages = spam_filter.replayed()   # nothing pending: as loaded
    return not (counts is None or vocab is None or spam_filter.mapped_file_ is None or not counts.in_place
                or not counts.as_loaded or counts.n_holes or counts.n_classes != 2
                or "feature_count" not in spam_filter.unread_.offsets or counts.n_features_ != vocab.n_features)


def first_places(hashes, new):
    """The positions in ``hashes`` (``array('Q')``, a message's occurrences) of
    the tokens of the set ``new``, each at its first occurrence, in order
    (``array('i')``): where ``Vocabulary.add`` numbers a message's new tokens,
    and so their text's order in a record.  No Python loop over the occurrences."""
    if len(new) <= 64:   # a few: each one's first place by a search of the array's bytes (no int made per occurrence)
        raw, places = hashes.tobytes(), []
        for h in new:
            needle = array("Q", (h,)).tobytes()   # the array's own (native) order
            at = raw.find(needle)
            while at > 0 and at % 8:   # inside two occurrences: on from the next one
                at = raw.find(needle, at - at % 8 + 8)
            if at < 0:
                raise ValueError(f"first_places: {h} is not among the hashes")
            places.append(at // 8)
        return array("i", sorted(places))
    n = len(hashes)
    first = dict(zip(reversed(hashes), range(n - 1, -1, -1)))   # each token's first place (the last one put)
    return array("i", sorted(first[h] for h in new))


# ---------------------------------------------------------------------------- what a learn records (model/learning)


def mixture_held_out(mixture, kernel_of, stream, cls, ops, counts):
    """A learn's held-out score under a pair-weight mixture (``spamnb.estimator.variants``):
    None when the model's scores do not count yet (``counts`` False), else
    the log-odds at the mixture's weight and scale, from the two held-out
    scores (``variants.pair_scores``, one pass of the kernel ``kernel_of()``
    gives), which the mixture then counts (its weight moves) and a PAIR_SCORES
    operation records, as the online harness's ``OnlineModel`` does."""
    from spamnb.estimator.variants import held_out_score, pair_scores

    if not counts:
        return None
    words, pairs = pair_scores(kernel_of(), stream.hashes, stream.pairs_start)
    held_out = held_out_score(words, pairs, mixture.weight, mixture.scale)
    mixture.add(words, pairs, cls)
    ops.append(encode_pair_scores(cls, words, pairs, mixture.weight, mixture.scale))
    return held_out


def class_of(label):
    """0 (ham) or 1 (spam) of a label: True/False as it is (what the ledger hands
    a learn), any other through ``labels.is_spam_label`` (imported then only)."""
    if label is True or label is False:
        return int(label)
    from spamnb.estimator.labels import is_spam_label

    return int(is_spam_label(label))


def float32(value):
    """``value`` as a record keeps it (a float32): replay counts the same bin."""
    return array("f", (value,))[0]
