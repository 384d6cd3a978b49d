"""One training pipeline: count the mail, choose the cutoffs, decide the word pairs.

``spamnb train`` (over a corpus, on workers or a Dask cluster:
``spamnb.training.pipeline``) and ``SpamFilter.fit`` (over messages in
memory: :func:`fit_tuned`) make the same three steps with the functions here:

1. *count* each message into the model's counts and into its
   cross-validation fold's (:func:`spamnb.model.counting.count_messages`,
   folds by :func:`spamnb.model.calibrate.fold_of`), spilling its token
   hashes;
2. *choose the cutoffs* from the held-out log-odds of every message under the
   model without its fold (:class:`~spamnb.model.calibrate.FoldModels`,
   :func:`choose_from_parts`), unless there is too little mail for them
   (:func:`check_calibration`);
3. *decide the word pairs* (:func:`choose_pairs`): train again with pairs
   and keep the variant the held-out figures favour
   (:func:`spamnb.model.calibrate.prefer_pairs`).
"""

from __future__ import annotations

import inspect
import tempfile

from spamnb.model import calibrate
from spamnb.bayes.vocabulary import Vocabulary
from spamnb.model.ages import Ages
from spamnb.model.counting import count_messages, counting_spec
from spamnb.model.defaults import COUNT_TRANSFORMS
from spamnb.model.labels import is_spam_label
from spamnb.model.messages import message_bytes

__all__ = ["CorpusChanged", "check_calibration", "choose_from_parts", "choose_pairs", "fit_tuned", "fit_plain", "params_of", "take_counts"]


class CorpusChanged(ValueError):
    """The corpus read again for the calibration is not the one counted."""


def params_of(spam_filter):
    """The hyper-parameters a ``SpamFilter`` was made with (``__init__``'s arguments)."""
    names = [n for n in inspect.signature(type(spam_filter).__init__).parameters if n != "self"]
    return {n: getattr(spam_filter, n) for n in names}


def check_calibration(spam_filter, calibration):
    """The :class:`~spamnb.model.calibrate.Calibration` of the default cutoffs
    when the fitted ``spam_filter`` has too little mail to choose them (or
    message features), else None; ``calibration``: the options of
    :func:`~spamnb.model.calibrate.calibration_check`."""
    n_ham, n_spam = (int(v) for v in spam_filter.class_count_)
    keys = ("target_fpr", "max_unsure", "min_ham", "min_spam")
    return calibrate.calibration_check(spam_filter, n_ham, n_spam,
                                       **{k: calibration[k] for k in keys if k in calibration})


def choose_from_parts(parts, fold_class_count, n_folds, calibration):
    """``(Calibration, (ham_log_odds, spam_log_odds))`` from the scoring pass's
    parts (each ``(ham_log_odds, spam_log_odds, per_fold)``: see
    :func:`~spamnb.model.calibrate.held_out_spilled`); CorpusChanged when the
    messages scored are not the ones counted."""
    import numpy as np

    ham = np.concatenate([p[0] for p in parts])
    spam = np.concatenate([p[1] for p in parts])
    per_fold = sum((p[2] for p in parts), np.zeros((n_folds, 2), dtype=np.int64))
    if not np.array_equal(per_fold, fold_class_count):
        raise CorpusChanged("other messages on the second reading")
    keys = ("target_fpr", "max_unsure", "margin")
    chosen = calibrate.from_scores(ham, spam, n_folds, **{k: calibration[k] for k in keys if k in calibration})
    return chosen, (ham, spam)


def choose_pairs(train_variant, spam_filter, word_pairs):
    """Train ``spam_filter`` with ``train_variant`` (a function of an unfitted
    filter giving ``(fitted, calibration, held-out scores)``) and, with
    ``word_pairs`` W >= 2, a second time with word pairs of window W and the
    pairs' text budget (``tokenizer.with_pairs``); keep the variant
    :func:`~spamnb.model.calibrate.prefer_pairs` favours.  Returns
    ``(fitted, calibration)``; the calibration's ``word_pairs`` field holds
    ``(window kept, spam missed without, with, 1-AUC % without, with)`` (the
    four None above :data:`~spamnb.model.calibrate.PAIRS_MAX_MESSAGES`
    messages: not tried)."""
    import numpy as np

    from spamnb.bayes.metrics import one_minus_auc_percent
    from spamnb.mail.tokenizer import with_pairs

    if word_pairs and not 2 <= word_pairs <= 8:
        raise ValueError(f"word_pairs must be 0 or from 2 to 8, got {word_pairs!r}")
    template = params_of(spam_filter)
    fitted, cal, scores = train_variant(spam_filter)
    if not word_pairs or cal is None or cal.expected_fpr is None or fitted.tokenizer_.word_pairs == word_pairs:
        return fitted, cal
    if cal.n_ham + cal.n_spam > calibrate.PAIRS_MAX_MESSAGES:   # the second training would cost more than it is worth
        return fitted, cal._replace(word_pairs=(int(fitted.tokenizer_.word_pairs), None, None, None, None))

    def error(ham_spam):
        ham, spam_scores = ham_spam
        y = np.concatenate([np.zeros(ham.size, dtype=bool), np.ones(spam_scores.size, dtype=bool)])
        return one_minus_auc_percent(y, np.concatenate([ham, spam_scores]))

    paired = type(spam_filter)(**dict(template, tokenizer=with_pairs(word_pairs, fitted.tokenizer_)))
    fitted_pairs, cal_pairs, scores_pairs = train_variant(paired)
    figures = (cal.expected_spam_missed, cal_pairs.expected_spam_missed, error(scores), error(scores_pairs))
    if calibrate.prefer_pairs(*figures):
        return fitted_pairs, cal_pairs._replace(word_pairs=(word_pairs, *figures))
    return fitted, cal._replace(word_pairs=(int(fitted.tokenizer_.word_pairs), *figures))


def take_counts(spam_filter, merged, calibration):
    """Give the unfitted ``spam_filter`` the model rows of ``merged`` (a
    :class:`~spamnb.model.counting.Counts`); returns ``(done, fold_class_count,
    fold_feature_count)``, ``done`` the result ``(spam_filter, calibration,
    None)`` when there is no held-out scoring to do (no calibration asked
    for, or too little mail: the default cutoffs), else None."""
    # the folds' counts as their non-zero entries (Counts.sparse_folds): never a dense (2 * folds, tokens)
    folds = (merged.class_count[2:].reshape(-1, 2), merged.sparse_folds()) if merged.n_folds else (None, None)
    merged.to_filter(spam_filter)
    if calibration is None:
        return (spam_filter, None, None), None, None
    fixed = check_calibration(spam_filter, calibration)
    return ((spam_filter, fixed, None) if fixed is not None else None), *folds


def _train_in_memory(spam_filter, pairs, calibration, n_folds):
    """One variant of :func:`fit_tuned`: ``spam_filter`` (unfitted) counted on
    ``pairs`` (``(bytes, is_spam)``, a list) in this process, as ``spamnb
    train -j 1`` counts, and its held-out calibration."""
    with tempfile.TemporaryFile(prefix="spamnb-train-") as spill:
        merged = count_messages(counting_spec(spam_filter), pairs, n_folds=n_folds, spill=spill)
        done, fold_class_count, fold_feature_count = take_counts(spam_filter, merged, calibration)
        if done is not None:
            return done
        del merged
        models = calibrate.FoldModels.from_counts(spam_filter, fold_class_count, fold_feature_count)
        del fold_feature_count
        spill.flush()
        parts = [calibrate.held_out_spilled(models, spill)]
    chosen, scores = choose_from_parts(parts, fold_class_count, n_folds, calibration)
    return spam_filter, chosen, scores


def fit_tuned(spam_filter, messages, labels, target_fpr=calibrate.DEFAULT_TARGET_FPR,
              word_pairs=calibrate.AUTO_PAIRS):
    """What ``spamnb train`` makes of ``messages`` (bytes; ``labels`` bools):
    ``(fitted filter, calibration)``, the filter's cutoffs set from the
    calibration.  The fitted filter is ``spam_filter`` or, when the word
    pairs are kept, a new filter of the same parameters with the paired
    tokenizer.  ``target_fpr`` 0 keeps the filter's cutoffs (no
    calibration); ``word_pairs`` 0 tries no pairs."""
    pairs = list(zip(messages, labels))
    calibration = {"target_fpr": target_fpr} if target_fpr > 0 else None
    n_folds = calibrate.DEFAULT_FOLDS if calibration is not None else 0

    def train_variant(variant):
        return _train_in_memory(variant, pairs, calibration, n_folds)

    fitted, chosen = choose_pairs(train_variant, spam_filter, word_pairs)
    if chosen is not None:
        calibrate.apply(fitted, chosen)
    return fitted, chosen


def fit_plain(spam_filter, messages, labels):
    """``SpamFilter.fit(..., tune=False)``: count ``messages`` into ``spam_filter`` from
    scratch, one message at a time (and their continuous features, when on)."""
    y = [int(is_spam_label(label)) for label in labels]
    spam_filter.vocabulary_ = vocabulary = Vocabulary()
    spam_filter.word_counts_ = spam_filter.features_ = None
    features = [] if spam_filter.feature_weight else None
    counts = spam_filter._new_counts()
    add = counts.add
    transform = COUNT_TRANSFORMS[spam_filter.counts]
    length = float(spam_filter.length_norm)
    stream = spam_filter.tokenizer_.stream
    n_messages = 0
    for message in messages:  # may be lazy (progress bars)
        data = message_bytes(message)
        indices = vocabulary.add(stream(data))
        if n_messages < len(y):
            add(indices, y[n_messages], transform, 1, vocabulary.n_features, length)
        if features is not None:
            features.append(spam_filter._message_features(data))
        n_messages += 1
    if n_messages != len(y):
        raise ValueError(f"{n_messages} messages but {len(y)} labels")
    counts.resize(vocabulary.n_features)
    spam_filter.word_counts_ = counts
    spam_filter.ages_ = Ages.fresh(vocabulary.n_features, max_tokens=spam_filter.ages_.max_tokens)
    if features is not None:
        from spamnb.model.message_features import FeatureModel

        spam_filter.features_ = FeatureModel().fit(features, [bool(v) for v in y])
    return spam_filter
