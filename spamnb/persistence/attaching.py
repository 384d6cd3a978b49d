"""A filter just read from its model file given its journal, its counts held in
place (the first step of a replay: ``spamnb.persistence.journal_view.replay``,
and ``spamnb.persistence.codec``'s load of a model without a journal).  A
module of its own, not :mod:`spamnb.persistence.deltas` (the journal's
records, which re-exports these): a classify of a model without a journal
loads neither the records' module nor their layouts (``_struct``)."""

from spamnb.persistence.store import replaced_since

__all__ = ["attach", "in_place"]


def in_place(spam_filter, arrays):
    """Learns and forgets change the model's counts, logs and hash index where
    the file was read into this process's private memory (new tokens in side
    tables): no copy of the model's arrays (``Vocabulary.extend_in_place``,
    ``WordCounts.extend_in_place``)."""
    writable = getattr(arrays, "writable", {})
    vocab, counts, _ages = spam_filter.replayed()
    if counts is None or not all(name in writable for name in ("keys", "values", "feature_count", "log_count")):
        return
    if counts.extend_in_place(writable["feature_count"], writable["log_count"]):
        vocab.extend_in_place(writable["keys"], writable["values"])


def attach(spam_filter, model_path, identity, journal, arrays):
    """False when ``journal`` could not be read as the model's (none, stale)
    and the model file read (``identity``) is no longer the one on disk (a
    compaction replaced it, its journal went into it: the caller reads it
    again); else True, ``journal`` given to the filter and its counts held
    in place (:func:`in_place`) for the journal's learns, or a writer's."""
    if journal.status != "ok" and replaced_since(model_path, identity):
        return False
    spam_filter.set_fitted(journal_=journal)
    in_place(spam_filter, arrays)
    return True
