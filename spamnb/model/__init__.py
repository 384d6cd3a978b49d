"""The model package's public face: what the layers above it (the server, the
command line, the evaluation, ...) use of it, by name.

``from spamnb.model import SpamFilter, locked, logit`` imports only the module
that holds each name, on first use (PEP 562), so the ``spamnb classify``
cold path imports no more than it did (tests/test_cold_start.py).  The
layers above import from here, not from the modules inside
(tests/test_model_face.py counts them).  A name is the module's own, but
where two modules' names would clash: then it says which (``describe_model``,
``describe_calibration``, ``merge_models``, ...).

A model is used through its :class:`Scorer` interface whatever its form
(``SpamFilter.load(path, form=...)``: :mod:`spamnb.model.forms`).
"""

import sys

_EXPORTS = {
    # the filter and its forms (spam_filter, forms, scoring)
    "SpamFilter": ("spam_filter", "SpamFilter"),
    "FORMS": ("spam_filter", "FORMS"),
    "Scorer": ("forms", "Scorer"),
    "Kernel": ("forms", "Kernel"),
    "ScorerBase": ("forms", "ScorerBase"),
    "score_stream": ("scoring", "score_stream"),
    "compact_scorer": ("scoring", "compact_scorer"),
    "gather": ("scoring", "gather"),
    # a message, a label, a verdict
    "message_bytes": ("messages", "message_bytes"),
    "is_spam_label": ("labels", "is_spam_label"),
    "Cutoffs": ("verdict", "Cutoffs"),
    "EvidenceSums": ("verdict", "EvidenceSums"),
    "REASONS": ("verdict", "REASONS"),
    "logit": ("verdict", "logit"),
    "decide_many": ("verdict", "decide_many"),
    "evidence_sums": ("verdict", "evidence_sums"),
    "verdict_of": ("verdict", "verdict_of"),
    "probabilities": ("verdict", "probabilities"),
    # hyper-parameters and their defaults
    "COUNT_TRANSFORMS": ("defaults", "COUNT_TRANSFORMS"),
    "DEFAULT_ALPHA": ("defaults", "DEFAULT_ALPHA"),
    "DEFAULT_COUNTS": ("defaults", "DEFAULT_COUNTS"),
    "DEFAULT_LENGTH_NORM": ("defaults", "DEFAULT_LENGTH_NORM"),
    "DEFAULT_PAIR_WEIGHT": ("defaults", "DEFAULT_PAIR_WEIGHT"),
    "LEARNED_PAIR_WEIGHT": ("defaults", "LEARNED_PAIR_WEIGHT"),
    "LEARNED_WORD_PAIRS": ("defaults", "LEARNED_WORD_PAIRS"),
    "PRIORS": ("defaults", "PRIORS"),
    "DEFAULT_PRIOR": ("defaults", "DEFAULT_PRIOR"),
    "DEFAULT_HAM_CUTOFF": ("defaults", "DEFAULT_HAM_CUTOFF"),
    "DEFAULT_HAM_LOG_ODDS": ("defaults", "DEFAULT_HAM_LOG_ODDS"),
    "DEFAULT_SPAM_CUTOFF": ("defaults", "DEFAULT_SPAM_CUTOFF"),
    # cutoffs and cross-validation (calibrate)
    "AUTO_PAIRS": ("defaults", "AUTO_PAIRS"),
    "DEFAULT_MAX_UNSURE": ("calibrate", "DEFAULT_MAX_UNSURE"),
    "DEFAULT_TARGET_FPR": ("defaults", "DEFAULT_TARGET_FPR"),
    "SPAM_CUTOFF_FLOOR": ("calibrate", "SPAM_CUTOFF_FLOOR"),
    "FoldModels": ("calibrate", "FoldModels"),
    "apply_calibration": ("calibrate", "apply"),
    "describe_calibration": ("calibrate", "describe"),
    "held_out_spilled": ("calibrate", "held_out_spilled"),
    "stratified_folds": ("calibrate", "stratified_folds"),
    # a model that grows by learning (learning, ledger, autolearn, prequential)
    "Kept": ("learning", "Kept"),
    "learning_session": ("learning", "session"),
    "learned_model": ("learning", "learned_model"),
    "Tally": ("ledger", "Tally"),
    "canonical": ("ledger", "canonical"),
    "DEFAULT_LEDGER_CAPACITY": ("ledger", "DEFAULT_CAPACITY"),
    "AUTO_LEARN_MARGIN": ("autolearn", "AUTO_LEARN_MARGIN"),
    "auto_label": ("autolearn", "auto_label"),
    "learn_verdict": ("autolearn", "learn_verdict"),
    "ScoreHistogram": ("prequential", "ScoreHistogram"),
    "counts_scores": ("prequential", "counts_scores"),
    # the model file, its journal, its lock (store, journal)
    "DEFAULT_WAIT": ("store", "DEFAULT_WAIT"),
    "default_model_path": ("store", "default_model_path"),
    "spamnb_home": ("store", "spamnb_home"),
    "locked": ("store", "locked"),
    "map_model": ("store", "map_model"),
    "replace_file": ("store", "replace_file"),
    "resolve": ("store", "resolve"),
    "stat_existing": ("store", "stat_existing"),
    "JOURNAL_SUFFIX": ("journal", "SUFFIX"),
    "compact_at": ("journal", "compact_at"),
    "journal_path": ("journal", "journal_path"),
    "journal_signature": ("journal", "signature"),
    "save_whole": ("journal", "save_whole"),
    # what is done to a model whole (lifecycle, dumpfile)
    "check_max_tokens": ("lifecycle", "check_max_tokens"),
    "describe_model": ("lifecycle", "describe"),
    "expire_model": ("lifecycle", "expire"),
    "merge_models": ("lifecycle", "merge"),
    "prune_model": ("lifecycle", "prune"),
    "DUMP_FORMAT": ("dumpfile", "DUMP_FORMAT"),
    "DumpError": ("dumpfile", "DumpError"),
    "dump_model": ("dumpfile", "dump"),
    "load_dump": ("dumpfile", "load_dump"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    # not kept in this module's globals: a name looked up here is the module's own at each
    # use (a test's monkeypatch of spamnb.model.store.DEFAULT_WAIT is seen)
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module 'spamnb.model' has no attribute {name!r}")
    name = "spamnb.model." + where[0]
    __import__(name)   # not importlib.import_module: importlib is one module more on a cold classify's path
    return getattr(sys.modules[name], where[1])


def __dir__():
    return __all__
