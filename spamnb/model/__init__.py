"""The model package's public face: what the layers above it (the server, the
command line, the evaluation, ...) use of it and of the two packages below
it, ``spamnb.estimator`` and ``spamnb.persistence``, by name.

``from spamnb.model import SpamFilter, locked, logit`` imports only the module
that holds each name, on first use (PEP 562), so the ``spamnb classify``
cold path imports no more than it did (tests/test_cold_start.py).  The
layers above import from here, not from the modules inside
(tests/test_model_face.py counts them).  A name is the module's own, but
where two modules' names would clash: then it says which (``describe_model``,
``describe_calibration``, ``merge_models``, ...).

A model is used through its :class:`Scorer` interface whatever its form
(``SpamFilter.load(path, form=...)``: :mod:`spamnb.estimator.forms`).
"""

import sys

_EXPORTS = {
    # the filter and its forms (spam_filter, forms, scoring)
    "SpamFilter": ("spamnb.model.spam_filter", "SpamFilter"),
    "FORMS": ("spamnb.model.spam_filter", "FORMS"),
    "Scorer": ("spamnb.estimator.forms", "Scorer"),
    "Kernel": ("spamnb.estimator.forms", "Kernel"),
    "ScorerBase": ("spamnb.estimator.forms", "ScorerBase"),
    "score_stream": ("spamnb.estimator.scoring", "score_stream"),
    "compact_scorer": ("spamnb.estimator.scoring", "compact_scorer"),
    "gather": ("spamnb.estimator.scoring", "gather"),
    "Scaled": ("spamnb.estimator.scoring", "Scaled"),
    "PairMixture": ("spamnb.estimator.variants", "PairMixture"),
    "mixture_setting": ("spamnb.estimator.variants", "mixture_setting"),
    "pair_scores": ("spamnb.estimator.variants", "pair_scores"),
    "held_out_score": ("spamnb.estimator.variants", "held_out_score"),
    # a message, a label, a verdict
    "message_bytes": ("spamnb.estimator.messages", "message_bytes"),
    "is_spam_label": ("spamnb.estimator.labels", "is_spam_label"),
    "Cutoffs": ("spamnb.estimator.verdict", "Cutoffs"),
    "EvidenceSums": ("spamnb.estimator.verdict", "EvidenceSums"),
    "REASONS": ("spamnb.estimator.verdict", "REASONS"),
    "logit": ("spamnb.estimator.verdict", "logit"),
    "decide_many": ("spamnb.estimator.verdict", "decide_many"),
    "evidence_sums": ("spamnb.estimator.verdict", "evidence_sums"),
    "verdict_of": ("spamnb.estimator.verdict", "verdict_of"),
    "probabilities": ("spamnb.estimator.verdict", "probabilities"),
    # hyper-parameters and their defaults
    "COUNT_TRANSFORMS": ("spamnb.estimator.defaults", "COUNT_TRANSFORMS"),
    "DEFAULT_ALPHA": ("spamnb.estimator.defaults", "DEFAULT_ALPHA"),
    "DEFAULT_COUNTS": ("spamnb.estimator.defaults", "DEFAULT_COUNTS"),
    "DEFAULT_LENGTH_NORM": ("spamnb.estimator.defaults", "DEFAULT_LENGTH_NORM"),
    "DEFAULT_PAIR_WEIGHT": ("spamnb.estimator.defaults", "DEFAULT_PAIR_WEIGHT"),
    "LEARNED_PAIR_WEIGHT": ("spamnb.estimator.defaults", "LEARNED_PAIR_WEIGHT"),
    "LEARNED_WORD_PAIRS": ("spamnb.estimator.defaults", "LEARNED_WORD_PAIRS"),
    "PRIORS": ("spamnb.estimator.defaults", "PRIORS"),
    "DEFAULT_PRIOR": ("spamnb.estimator.defaults", "DEFAULT_PRIOR"),
    "DEFAULT_HAM_CUTOFF": ("spamnb.estimator.defaults", "DEFAULT_HAM_CUTOFF"),
    "DEFAULT_HAM_LOG_ODDS": ("spamnb.estimator.defaults", "DEFAULT_HAM_LOG_ODDS"),
    "DEFAULT_SPAM_CUTOFF": ("spamnb.estimator.defaults", "DEFAULT_SPAM_CUTOFF"),
    # cutoffs and cross-validation (calibrate)
    "AUTO_PAIRS": ("spamnb.estimator.defaults", "AUTO_PAIRS"),
    "DEFAULT_MAX_UNSURE": ("spamnb.estimator.calibrate", "DEFAULT_MAX_UNSURE"),
    "DEFAULT_TARGET_FPR": ("spamnb.estimator.defaults", "DEFAULT_TARGET_FPR"),
    "SPAM_CUTOFF_FLOOR": ("spamnb.estimator.calibrate", "SPAM_CUTOFF_FLOOR"),
    "FoldModels": ("spamnb.estimator.calibrate", "FoldModels"),
    "apply_calibration": ("spamnb.estimator.calibrate", "apply"),
    "describe_calibration": ("spamnb.estimator.calibrate", "describe"),
    "held_out_spilled": ("spamnb.estimator.calibrate", "held_out_spilled"),
    "stratified_folds": ("spamnb.estimator.calibrate", "stratified_folds"),
    # a model that grows by learning (learning, ledger, autolearn, prequential)
    "Kept": ("spamnb.model.whole_learning", "Kept"),
    "learning_session": ("spamnb.model.learning", "session"),
    "learned_model": ("spamnb.model.whole_learning", "learned_model"),
    "Tally": ("spamnb.estimator.ledger", "Tally"),
    "canonical": ("spamnb.estimator.ledger", "canonical"),
    "DEFAULT_LEDGER_CAPACITY": ("spamnb.estimator.ledger", "DEFAULT_CAPACITY"),
    "AUTO_LEARN_MARGIN": ("spamnb.model.autolearn", "AUTO_LEARN_MARGIN"),
    "auto_label": ("spamnb.model.autolearn", "auto_label"),
    "learn_verdict": ("spamnb.model.autolearn", "learn_verdict"),
    "ScoreHistogram": ("spamnb.estimator.prequential", "ScoreHistogram"),
    "counts_scores": ("spamnb.estimator.prequential", "counts_scores"),
    # the model file, its journal, its lock (store, journal)
    "DEFAULT_WAIT": ("spamnb.persistence.store", "DEFAULT_WAIT"),
    "default_model_path": ("spamnb.persistence.store", "default_model_path"),
    "spamnb_home": ("spamnb.persistence.store", "spamnb_home"),
    "locked": ("spamnb.persistence.store", "locked"),
    "map_model": ("spamnb.persistence.store", "map_model"),
    "replace_file": ("spamnb.persistence.store", "replace_file"),
    "resolve": ("spamnb.persistence.store", "resolve"),
    "stat_existing": ("spamnb.persistence.store", "stat_existing"),
    "stat_or_none": ("spamnb.persistence.store", "stat_or_none"),
    "JOURNAL_SUFFIX": ("spamnb.persistence.journal", "SUFFIX"),
    "compact_at": ("spamnb.persistence.journal", "compact_at"),
    "journal_path": ("spamnb.persistence.journal", "journal_path"),
    "journal_signature": ("spamnb.persistence.journal", "signature"),
    "save_whole": ("spamnb.persistence.journal", "save_whole"),
    # what is done to a model whole (lifecycle, dumpfile)
    "check_max_tokens": ("spamnb.model.lifecycle", "check_max_tokens"),
    "describe_model": ("spamnb.model.lifecycle", "describe"),
    "expire_model": ("spamnb.model.lifecycle", "expire"),
    "merge_models": ("spamnb.model.lifecycle", "merge"),
    "prune_model": ("spamnb.model.lifecycle", "prune"),
    "DUMP_FORMAT": ("spamnb.model.dumpfile", "DUMP_FORMAT"),
    "DumpError": ("spamnb.model.dumpfile", "DumpError"),
    "dump_model": ("spamnb.model.dumpfile", "dump"),
    "load_dump": ("spamnb.model.dumpfile", "load_dump"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    # not kept in this module's globals: a name looked up here is the module's own at each
    # use (a test's monkeypatch of spamnb.persistence.store.DEFAULT_WAIT is seen)
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module 'spamnb.model' has no attribute {name!r}")
    name = where[0]
    __import__(name)   # not importlib.import_module: importlib is one module more on a cold classify's path
    return getattr(sys.modules[name], where[1])


def __dir__():
    return __all__
