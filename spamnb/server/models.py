"""The models a daemon serves: loaded once and shared (a cache keyed by the
file's identity, so a replaced model is read again), scored read-only, and
learned by TELL under the model's lock."""

from __future__ import annotations

import mmap
import os
from collections import OrderedDict

from spamnb.server import protocol as spamd
from spamnb.server.protocol import EX, ProtocolError

MODEL_NAME = "model.spamnb"


# ============================================================================ the filter's API
# Every call into spamnb.model.spam_filter / spamnb.model.store is here, so a change of that
# API is adapted in one place.
def _load_filter(path):
    """The model at ``path``, holding in memory only what classifying reads:
    from the model the last TELL learned in when the file and its journal are
    still the ones that TELL left (no reading, checking and replaying), else
    read from the file."""
    from spamnb.model.spam_filter import SpamFilter

    spam_filter = _from_kept(path)
    return spam_filter if spam_filter is not None else _scoring_only(SpamFilter.load(path))


def _from_kept(path):
    import copy

    from spamnb.mail.tokenizer import Tokenizer
    from spamnb.model.store import resolve

    if _kept is None:
        return None
    real = resolve(path)
    entry = _kept.take(real)    # out of the way of a TELL while it is copied (that TELL reads the file)
    if entry is None:
        return None
    try:
        spam_filter = copy.copy(entry[1])   # the attributes replaced on the copy; the buffers copied from
        spam_filter.tokenizer_ = Tokenizer.from_settings(spam_filter.tokenizer_.settings)
        spam_filter._scorer = None
        return _scoring_only(spam_filter)
    finally:
        _kept.put_back(real, entry)


def _scoring_only(spam_filter):
    """Keep what ``classify`` reads (the hash index, log(count + alpha), the
    token strings for the evidence) in buffers of their own, and let go of
    the rest of the model file read into memory: the raw counts, last-seen
    days and ledger of learned messages (about a fifth of a model file).
    Such a filter only classifies; TELL learns in a whole model (:func:`tell`).
    Reads ``spam_filter``'s buffers and replaces its attributes: nothing it
    shares with another filter changes (:func:`_from_kept`)."""
    from spamnb.model.ages import Ages
    from spamnb.bayes.wordcounts import WordCounts

    # as the journal was replayed, in place: holes of forgets and all (spamnb.model.deltas.Folded);
    # the logs of the file and of the tokens new since joined, without numpy
    state = vars(spam_filter)
    vocab, counts = state["vocabulary_"], state["word_counts_"]
    if vocab is None or counts is None:
        return spam_filter
    counts.resize(vocab.n_features)
    log_count, log_norm, log_prior, tail = counts.scorer_logs()
    if tail is not None and len(tail):
        n_base, n_tail = len(log_count) // counts.n_classes, len(tail) // counts.n_classes
        joined = bytearray()
        for c in range(counts.n_classes):
            joined += memoryview(log_count)[c * n_base:(c + 1) * n_base].cast("B")
            joined += memoryview(tail)[c * n_tail:(c + 1) * n_tail].cast("B")
        log_count = joined
    state.pop("_holes", None)   # a scoring-only filter: never folded, never saved
    spam_filter.vocabulary_ = vocab.read_only_copy()
    # the raw counts' place: read-only anonymous pages, zeros the kernel maps
    # only when touched (classify never does), so they take no memory
    zeros = mmap.mmap(-1, max(1, counts.n_classes * counts.n_features_ * 8), prot=mmap.PROT_READ)
    spam_filter.word_counts_ = WordCounts.from_arrays(
        counts.alpha, counts.prior, counts.class_count_,
        memoryview(zeros)[:counts.n_classes * counts.n_features_ * 8].cast("d"),
        derived=(memoryview(bytearray(log_count)).cast("d"), log_norm, log_prior))
    spam_filter.ages_ = Ages()
    spam_filter.ledger_ = None
    spam_filter.source_ = None      # not a copy of the file: never to be saved
    return spam_filter


def _journal_signature(path):
    """The model's journal as it is now (spamnb.model.journal): a learn appends there."""
    from spamnb.model.journal import signature

    return signature(path)


def _classify(spam_filter, message, evidence=True):
    return spam_filter.classify(message, evidence)


def _cutoffs(spam_filter):
    """(ham cutoff, spam cutoff) as probabilities."""
    return spam_filter.ham_cutoff, spam_filter.spam_cutoff


def _site_model_path(path):
    from spamnb.model.store import default_model_path

    return os.fspath(path) if path else default_model_path()


def _model_error():
    from spamnb.model.store import ModelError

    return ModelError


_kept = None   # spamnb.model.learning.Kept: the models TELL learned in, kept loaded


def tell(path, message, spam, learn, remove, seed_path=None):
    """Learn and/or forget ``message`` in the model at ``path``: read, change and
    write the file under its lock, like ``spamnb learn``/``forget``, so a
    command-line learner and the server never lose each other's update.
    A model that does not exist yet starts as a copy of ``seed_path``'s (the
    site model) when there is one.  ``spam`` is True/False, or None for a
    removal of unknown class (the ledger's label, else tried as spam, then
    as ham).  Returns
    (did_learn, did_remove)."""
    from spamnb.model import learning
    from spamnb.model import ledger as ledgers

    # appended to the model's journal (spamnb.model.journal), as `spamnb learn`/`forget`; the model
    # stays loaded for the next TELL, read again only when another writer changed it (learning.Kept)
    global _kept
    if _kept is None:
        _kept = learning.Kept()
    with learning.session(path, wait=None, create=True, seed_path=seed_path, expire=False, kept=_kept) as session:
        spam_filter = session.filter
        # through the ledger of learned messages, as `spamnb learn`/`forget`:
        # a message told twice counts once, told with the other class it moves
        tally = ledgers.Tally()
        did_remove = False
        if remove and spam_filter.is_fitted:
            for as_spam in ((spam,) if spam is not None else (None, True, False)):
                try:
                    session.forget(message, as_spam, tally)
                except ValueError:
                    continue
                did_remove = True
                break
        if learn:
            session.learn(message, spam, tally)
    return bool(learn), did_remove


class ModelCache:
    """Loaded models by path, least recently used first out; each is checked
    against the file's (device, inode, size, mtime) and its journal's at every
    use and reloaded when either changed.  A failed reload keeps serving the model it had."""

    def __init__(self, max_models, log):
        self.max_models = max_models
        self.log = log
        self._entries = OrderedDict()   # path -> (stat key, filter, ScoreMap)
        self.on_load = None             # called with the path after each model read (spamnb.server.metrics)

    def clear(self):
        self._entries.clear()

    def __len__(self):
        return len(self._entries)

    def get(self, path, required):
        try:
            st = os.stat(path)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, _journal_signature(path))
        except OSError:
            key = None
        entry = self._entries.get(path)
        if entry is not None and (entry[0] == key or key is None):
            self._entries.move_to_end(path)
            return entry[1], entry[2]
        if key is None:
            raise ProtocolError(EX["EX_UNAVAILABLE"], f"no model at {path}")
        try:
            spam_filter = _load_filter(path)
            ham_cutoff, spam_cutoff = _cutoffs(spam_filter)
            score_map = spamd.ScoreMap.from_probabilities(ham_cutoff, spam_cutoff, required)
        except (_model_error(), ValueError, OSError) as exc:
            if entry is not None:
                self.log(f"model {path} not reloaded, serving the one loaded before: {_one_line(exc)}")
                self._entries[path] = (key, entry[1], entry[2])
                return entry[1], entry[2]
            raise ProtocolError(EX["EX_UNAVAILABLE"], f"model not usable: {_one_line(exc)}") from None
        self._entries[path] = (key, spam_filter, score_map)
        self._entries.move_to_end(path)
        if self.on_load is not None:
            self.on_load(path)
        while len(self._entries) > self.max_models:
            self._entries.popitem(last=False)
        return spam_filter, score_map


def _one_line(exc):
    return " ".join(str(exc).split())[:300] or type(exc).__name__
