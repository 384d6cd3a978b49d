"""A SpamFilter from its model file: the header fields and arrays of
``spamnb.persistence.schema`` (versioned, checksummed, written atomically by
``spamnb.persistence.store``; never pickled).

``read`` builds a filter whose counts, derived logs and vocabulary
hash index are views of the file read into memory, so scoring one message of
a loaded model needs neither numpy nor any per-token Python object (the
``spamnb classify`` cold path).  The writer's half of the format (``write``,
``write_counts``: the filter's counts, vocabulary, ages, ledger and message
features to the file) is :mod:`spamnb.persistence.saving`'s, which a classify
or learn of one message does not load.
"""

import posix   # os's calls without os.py (a cold classify never loads it)

from spamnb import errors   # ModelError: named where raised or caught, made then
from spamnb.bayes.vocabulary import Vocabulary
from spamnb.bayes.wordcounts import WordCounts
from spamnb.mail.tokenizer import Tokenizer
from spamnb.persistence import schema
from spamnb.estimator.ages import Ages
from spamnb.persistence.attaching import attach
from spamnb.persistence.store import (JOURNAL_EMPTY_SIZE, LEDGER, Journal, default_model_path,
                                      journal_path)

__all__ = ["read", "deferred", "DEFERRED"]


def read(cls, path=None, tokenizer=None, _tries=3, max_size=None, mapped=False):
    """A ``cls`` (a SpamFilter class) read from the model file at ``path``,
    with its journal of learned messages replayed (``spamnb.persistence.journal``);
    :class:`ModelError` for any missing, damaged, foreign or mismatched file,
    and for a file over ``max_size`` bytes (default
    :data:`spamnb.persistence.store.MAX_MODEL_SIZE`), refused unread.
    See :meth:`SpamFilter.load`."""
    path = default_model_path() if path is None else path
    where = posix.fspath(path)
    if mapped:
        header, arrays = schema.read(path, max_size, mapped=True)   # max_size None: the default limit
    else:
        header, arrays = schema.read(path) if max_size is None else schema.read(path, max_size)
    try:
        params = header["params"]
        try:
            model_tokenizer = Tokenizer.from_settings(header["tokenizer"])
        except (ValueError, TypeError, KeyError) as exc:
            raise errors.ModelError(f"{where}: the model was trained with tokenizer settings this spamnb "
                             f"cannot reproduce ({exc}); retrain it") from None
        if tokenizer is not None and tokenizer.settings != model_tokenizer.settings:
            raise errors.ModelError(f"{where}: the model was trained with other tokenizer settings "
                             f"than the ones given; retrain it or load it without a tokenizer")
        spam_filter = cls.from_params(params, model_tokenizer)
        if header.get("features") is not None:
            from spamnb.estimator.message_features import FeatureModel

            spam_filter.set_fitted(features_=FeatureModel.from_dict(header["features"]))
        n_features = header["n_features"]
        if mapped:   # only what needs no page of the arrays read (spamnb.persistence.store.map_model)
            schema.check_shapes(header, arrays)
        else:
            schema.check_counts(header, arrays, spam_filter.alpha)
        spam_filter.set_fitted(vocabulary_=Vocabulary.from_buffers(arrays["keys"], arrays["values"], n_features,
                                                                   arrays["strings"], arrays["offsets"],
                                                                   checked=not mapped))
        if arrays["ledger_labels"]:
            if mapped:   # made when first read (a classify of one message never reads it): its module too
                spam_filter.set_fitted(ledger_=deferred(lambda: _ledger(arrays, lazy=True)))
            else:
                spam_filter.set_fitted(ledger_=_ledger(arrays))
        if arrays["held_out"]:
            from spamnb.estimator.prequential import ScoreHistogram

            spam_filter.set_fitted(held_out_=ScoreHistogram(arrays["held_out"]))
        spam_filter.set_fitted(cutoff_source_=header["cutoff_source"])
        spam_filter.set_fitted(pair_mixture_=_pair_mixture(spam_filter, header, arrays))
    except errors.ModelError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise errors.ModelError(f"{where}: the model is inconsistent ({exc})") from None
    spam_filter.set_fitted(word_counts_=WordCounts.from_arrays(
        float(spam_filter.alpha), spam_filter.prior, header["class_count"], arrays["feature_count"],
        derived=(arrays["log_count"], tuple(header["log_norm"]), tuple(header["log_prior"]))))
    # a mapped load's arrays left unread are read when needed (deltas.read_whole)
    spam_filter.set_fitted(ages_=Ages.from_file(header, arrays), source_=where, mapped_=mapped,
                           mapped_file_=(arrays.file, arrays.offsets, len(arrays["keys"])) if mapped else None,
                           unread_=arrays if mapped and arrays.unread else None)
    try:
        replaced = _replay(spam_filter, where, header, arrays)
    except errors.ModelError:   # the file rewritten in place while its arrays were read for the journal
        if _tries > 0:
            return read(cls, path, tokenizer, _tries - 1, max_size, mapped)
        raise
    if replaced and _tries > 0:  # replaced while read: read the new one
        return read(cls, path, tokenizer, _tries - 1, max_size, mapped)
    return spam_filter


def _replay(spam_filter, where, header, arrays):
    """``spamnb.persistence.journal_view.replay`` of the model just read, that module
    loaded only when the model has a journal of records: without one (none
    beside it, or one without records: the header a whole save leaves,
    known by its size and not read), what the replay does then (the model
    read checked to be still the one on disk; the filter given an empty
    journal, its counts held in place).  A journal without records is
    nothing to apply, whichever model it names: its ``size`` tells a writer
    to check its header before it appends (``journal.append``)."""
    path = journal_path(where)
    try:
        size = posix.stat(path).st_size
    except FileNotFoundError:   # what journal.read gives then: no journal
        size = 0
    except OSError:
        size = None   # the replay says what cannot be read
    if size == 0 or size == JOURNAL_EMPTY_SIZE:
        identity = header.get("_identity")
        return not attach(spam_filter, where, identity, Journal(path, identity, size=size), arrays)
    from spamnb.persistence import journal_view   # the journal's read side: not its writers' (journal)

    return journal_view.replay(spam_filter, where, header, arrays)


def _ledger(arrays, lazy=False):
    """The ledger of learned messages of a model file's ``arrays``
    (``spamnb.estimator.ledger_table.Ledger.from_arrays``; ``lazy``: built when first used)."""
    from spamnb.estimator.ledger_table import Ledger

    arrays.fill_unread(LEDGER)   # a mapped load left them unread (a classify never reads them)
    return Ledger.from_arrays(arrays["ledger_digests"], arrays["ledger_labels"], notes=arrays["ledger_notes"],
                              lazy=lazy)


def deferred(make):
    """A fitted attribute of a filter read from a file, made when it is first
    read (``SpamFilter.ledger_`` of a mapped load: its module is not loaded by
    a classify, which never reads it): a function (``DEFERRED``, the type
    ``SpamFilter``'s attributes look for; a function, not a class of its own,
    whose statement would cost a cold classify more than the module it
    saves) that makes it once, for every copy of the filter that holds it
    (they share what it makes, as they share what the load made)."""
    import _thread   # threading's lock, without threading's import (a classify's cold path)

    made, lock = [], _thread.allocate_lock()

    def get():
        with lock:
            if not made:
                made.append(make())
            return made[0]

    return get


DEFERRED = type(deferred)   # what deferred gives: a plain function (no fitted attribute is one)


def _pair_mixture(spam_filter, header, arrays):
    """The filter's pair-weight mixture (``spamnb.estimator.variants.PairMixture``):
    the file's, its state read when a learn needs it; or, for a file without
    one, the prior when the model grows by learning and the setting is on
    (``variants.gets_mixture``), else None."""
    stored = header["pair_mixture"]
    if stored is None and spam_filter.cutoff_source_ != "held-out":   # not one that grows by learning
        return None
    from spamnb.estimator import variants

    if stored is None:
        return variants.PairMixture(float(spam_filter.pair_weight)) if variants.gets_mixture(spam_filter) else None

    def state():
        fill = getattr(arrays, "fill", None)
        if fill is not None and "pair_mixture" in getattr(arrays, "unread", ()):
            fill({"pair_mixture"})
        return arrays["pair_mixture"]

    return variants.PairMixture.stored(stored["centre"], stored["weight"], stored["scale"], stored["n"], state)
