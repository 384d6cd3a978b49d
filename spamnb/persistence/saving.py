"""A SpamFilter to its model file: the header fields and arrays of
``spamnb.persistence.schema`` (versioned, checksummed, written atomically by
``spamnb.persistence.store``; never pickled), the writer's half of
:mod:`spamnb.persistence.codec`, which reads them.

``write`` takes the filter's counts, vocabulary, ages, ledger and message
features; ``write_counts`` writes the same file from ``spamnb train``'s
counts without making the filter.  Loaded by a save (``SpamFilter.save``,
``save_counts``): a classify or learn of one message does not load it.
"""

from spamnb.persistence import schema
from spamnb.persistence.store import default_model_path

__all__ = ["write", "write_counts"]


def write(spam_filter, path=None, backup=None):
    """Write ``spam_filter``'s model atomically to ``path`` (default:
    ``default_model_path()``); ``backup``: where to keep the model it
    replaces (None: nowhere).  See :meth:`SpamFilter.save`."""
    path = default_model_path() if path is None else path
    counts = spam_filter.sized_counts()
    log_count, log_norm, log_prior = counts.derived()
    vocab = spam_filter.vocabulary_
    blob, offsets = vocab.string_table(copy=False)   # the strings written from the table itself: no copy of them
    try:
        schema.write(path, _fields(spam_filter, vocab.n_features, counts, log_norm, log_prior, spam_filter.ages_), {
            "keys": vocab.keys,
            "values": vocab.values,
            "offsets": offsets,
            "strings": blob,
            "feature_count": counts.feature_count_,
            "log_count": log_count,  # derived from feature_count: saves the logs at load
            "last_seen": spam_filter.ages_.days(vocab.n_features),
            **_other_arrays(spam_filter, spam_filter.ledger_),
        }, backup=backup)
    finally:
        try:
            blob.release()
        except BufferError:   # a view of it still held (an exception's frames): released with them
            pass


def write_counts(spam_filter, counts, path=None, backup=None):
    """Write the model file of ``counts.to_filter(spam_filter)`` (``spam_filter``
    unfitted; ``counts`` a :class:`~spamnb.estimator.counting.Counts`, consumed)
    without making that filter: the file :func:`write` writes of it, byte for
    byte, each array made as it is written and the counts' arrays dropped
    once written, the hash index last, from the token hashes alone
    (``spamnb train``: the memory of the counts, not of the filter's hash
    index, strings, counts and logs together)."""
    from spamnb.bayes.vocabulary import index_capacity, index_pieces

    path = default_model_path() if path is None else path
    counts = counts.take_model()
    n = counts.n_features
    word_counts = [counts.word_counts(float(spam_filter.alpha), spam_filter.prior, copy=False)]
    log_norm, log_prior = word_counts[0].norms()
    fields = _fields(spam_filter, n, word_counts[0], log_norm, log_prior,
                     counts.ages(spam_filter.ages_.max_tokens, days=False))
    ledger = counts.ledger()
    counts.digests = counts.labels = None
    index = []

    spilled, counts.spilled = counts.spilled, None   # the string table in a file (spamnb train): read a piece at a time

    def taken(name):   # a buffer of the counts, given up as it is written
        def make():
            if spilled is not None:
                yield from spilled.pieces(name)
                return
            buffer = getattr(counts, name)
            setattr(counts, name, None)
            yield buffer
        return make

    def log_count():
        yield from word_counts[0].log_count_pieces()
        word_counts[0] = counts.dense = None   # written: feature_count then log_count

    def keys():
        from spamnb.estimator.heap import release_free_memory

        hashes, counts.hashes = counts.hashes, None
        release_free_memory()   # the arrays written so far, freed into the heap: given back before the index is made
        keys, values = index_pieces(hashes)   # its slots alone, each piece made as written: never the whole index
        del hashes
        index.append(values)
        yield from keys

    others = _other_arrays(spam_filter, ledger)
    del ledger
    arrays = {
        "keys": (index_capacity(n), keys),
        "values": (index_capacity(n), lambda: index.pop()),
        "offsets": (n + 1, taken("offsets")),
        "strings": (len(counts.strings) if spilled is None else spilled.size, taken("strings")),
        "feature_count": (2 * n, lambda: [word_counts[0].feature_count_]),
        "log_count": (2 * n, log_count),
        "last_seen": (n, lambda: [counts.last_seen.astype("int32", copy=False)]),
        **others,
    }
    # the counts' strings and rows first, each dropped once written; the hash index made last, beside the hashes only
    order = [name for name in arrays if name not in ("keys", "values")] + ["keys", "values"]
    schema.write(path, fields, arrays, backup=backup, order=order)


def _fields(spam_filter, n_features, word_counts, log_norm, log_prior, ages):
    """The header fields of a model file (:func:`write`, :func:`write_counts`)."""
    features = spam_filter.features_
    mixture = spam_filter.pair_mixture_
    return {
        "spamnb": _package_version(),
        "tokenizer": spam_filter.tokenizer_.settings,
        "params": spam_filter.get_params(),
        "features": features.to_dict() if features is not None else None,
        "n_features": n_features,
        "class_count": [float(v) for v in word_counts.class_count_],
        "log_prior": list(log_prior),
        "log_norm": list(log_norm),
        **ages.fields(),
        "cutoff_source": spam_filter.cutoff_source_,
        "pair_mixture": mixture.header() if mixture is not None else None,
    }


def _other_arrays(spam_filter, ledger):
    """The model file's arrays besides the vocabulary, counts and days: the
    ``ledger`` (a Ledger, or None: empty), the held-out scores, the pair mixture."""
    mixture = spam_filter.pair_mixture_
    return {
        **_ledger_arrays(ledger),
        "held_out": spam_filter.held_out_.counts if spam_filter.held_out_ is not None else b"",
        "pair_mixture": mixture.to_array() if mixture is not None else b"",
    }


def _ledger_arrays(ledger):
    """The model file's ledger arrays of a Ledger (or None: empty)."""
    digests, labels = ledger.to_arrays() if ledger is not None else (b"", b"")
    notes = ledger.notes_array() if ledger is not None else b""
    return {"ledger_digests": digests, "ledger_labels": labels, "ledger_notes": notes}


def _package_version():
    from spamnb import __version__

    return __version__
