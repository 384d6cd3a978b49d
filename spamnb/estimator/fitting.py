"""One training pipeline: count the mail, choose the cutoffs, decide the word pairs.

``spamnb train`` (over a corpus, on workers or a Dask cluster:
``spamnb.training.pipeline``) and ``SpamFilter.fit`` (over messages in
memory: :func:`_fit_tuned`) make the same three steps with the functions here:

1. *count* each message into the model's counts and into its
   cross-validation fold's (:func:`spamnb.estimator.counting.count_messages`,
   folds by :func:`spamnb.estimator.calibrate.fold_of`), spilling its token
   hashes;
2. *choose the cutoffs* from the held-out log-odds of every message under the
   model without its fold (:class:`~spamnb.estimator.calibrate.FoldModels`,
   :func:`choose_from_parts`), unless there is too little mail for them
   (:func:`check_calibration`);
3. *decide the word pairs* (:func:`choose_pairs`): train with pairs too
   (counted in the same pass: each message read and parsed once) and keep
   the variant the held-out figures favour
   (:func:`spamnb.estimator.calibrate.prefer_pairs`).
"""

from __future__ import annotations

from spamnb.errors import CorpusChanged
from spamnb.estimator import calibrate, scoring
from spamnb.bayes.vocabulary import Vocabulary
from spamnb.estimator.ages import Ages
from spamnb.estimator.heap import release_free_memory
from spamnb.estimator.counting import count_variants, counting_spec, partition_fold_sums
from spamnb.estimator.defaults import COUNT_TRANSFORMS, new_counts
from spamnb.estimator.labels import is_spam_label
from spamnb.estimator.ledger import train_digest
from spamnb.estimator.ledger_table import from_trained
from spamnb.estimator.messages import message_bytes

__all__ = ["CorpusChanged", "Unfitted", "fit", "check_calibration", "choose_from_parts", "choose_pairs",
           "pair_filters", "take_counts", "train_variants_here", "held_out_variants"]




def check_calibration(spam_filter, calibration, class_count=None):
    """The :class:`~spamnb.estimator.calibrate.Calibration` of the default cutoffs
    when the fitted ``spam_filter`` has too little mail to choose them (or
    message features), else None; ``calibration``: the options of
    :func:`~spamnb.estimator.calibrate.calibration_check`; ``class_count``: the
    ham and spam counted, for a filter not fitted yet."""
    n_ham, n_spam = (int(v) for v in (spam_filter.class_count_ if class_count is None else class_count))
    keys = ("target_fpr", "max_unsure", "min_ham", "min_spam")
    return calibrate.calibration_check(spam_filter, n_ham, n_spam,
                                       **{k: calibration[k] for k in keys if k in calibration})


def choose_from_parts(parts, fold_class_count, n_folds, calibration):
    """``(Calibration, (ham_log_odds, spam_log_odds))`` from the scoring pass's
    parts (each ``(ham_log_odds, spam_log_odds, per_fold)``: see
    :func:`~spamnb.estimator.calibrate.held_out_spilled`); CorpusChanged when the
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


def pair_filters(spam_filter, word_pairs):
    """The variants :func:`choose_pairs` may train: ``[spam_filter]`` and, with
    ``word_pairs`` W >= 2 that its tokenizer does not already have, a new
    unfitted filter of the same parameters with word pairs of window W and the
    pairs' text budget (``tokenizer.with_pairs``)."""
    from spamnb.mail.tokenizer import with_pairs

    if word_pairs and not 2 <= word_pairs <= 8:
        raise ValueError(f"word_pairs must be 0 or from 2 to 8, got {word_pairs!r}")
    tokenizer = spam_filter.tokenizer_
    if not word_pairs or tokenizer.word_pairs == word_pairs:
        return [spam_filter]
    try:
        paired = with_pairs(word_pairs, tokenizer)
    except ValueError:   # a tokenizer without pairs (version 2): choose_pairs says so if it comes to them
        return [spam_filter]
    return [spam_filter, type(spam_filter).from_params(spam_filter.get_params(), paired)]


def choose_pairs(train_variants, spam_filter, word_pairs, made=True):
    """Train ``spam_filter`` and, with ``word_pairs`` W >= 2, the same with
    word pairs of window W and the pairs' text budget (:func:`pair_filters`);
    keep the variant :func:`~spamnb.estimator.calibrate.prefer_pairs` favours.

    ``train_variants``: a function of the list of unfitted variants giving an
    iterator of their ``(fitted, calibration, held-out scores)``, in order,
    each made when asked for (one counting pass may count them all; the
    second is asked for only when the first was calibrated on at most
    :data:`~spamnb.estimator.calibrate.PAIRS_MAX_MESSAGES` messages, and may be
    None past that many; a variant may come as an :class:`Unfitted`, made a
    filter only when kept, and with ``made`` False not even then: returned
    as it is, to be saved from its counts).  Returns ``(fitted, calibration)``; the
    calibration's ``word_pairs`` field holds ``(window kept, spam missed
    without, with, 1-AUC % without, with)`` (the four None above
    :data:`~spamnb.estimator.calibrate.PAIRS_MAX_MESSAGES` messages: not tried)."""
    import contextlib

    import numpy as np

    from spamnb.bayes.metrics import one_minus_auc_percent

    from spamnb.mail.tokenizer import with_pairs

    template = spam_filter.get_params()
    filters = pair_filters(spam_filter, word_pairs)
    with contextlib.closing(iter(train_variants(filters))) as results:
        fitted, cal, scores = next(results)
        if not word_pairs or cal is None or cal.expected_fpr is None or fitted.tokenizer_.word_pairs == word_pairs:
            return _fitted(fitted, made), cal
        if cal.n_ham + cal.n_spam > calibrate.PAIRS_MAX_MESSAGES:   # the second training would cost more than it is worth
            return _fitted(fitted, made), cal._replace(word_pairs=(int(fitted.tokenizer_.word_pairs),
                                                                   None, None, None, None))
        if len(filters) > 1:
            fitted_pairs, cal_pairs, scores_pairs = next(results)
    if len(filters) == 1:   # not counted with the first (pair_filters could not make it): this raises why
        paired = type(spam_filter).from_params(template, with_pairs(word_pairs, fitted.tokenizer_))
        with contextlib.closing(iter(train_variants([paired]))) as results:
            fitted_pairs, cal_pairs, scores_pairs = next(results)

    def error(ham_spam):
        ham, spam_scores = ham_spam
        y = np.concatenate([np.zeros(ham.size, dtype=bool), np.ones(spam_scores.size, dtype=bool)])
        return one_minus_auc_percent(y, np.concatenate([ham, spam_scores]))

    figures = (cal.expected_spam_missed, cal_pairs.expected_spam_missed, error(scores), error(scores_pairs))
    if calibrate.prefer_pairs(*figures):
        del fitted   # the variant not kept: never made into a filter (Unfitted)
        return _fitted(fitted_pairs, made), cal_pairs._replace(word_pairs=(word_pairs, *figures))
    del fitted_pairs
    return _fitted(fitted, made), cal._replace(word_pairs=(int(fitted.tokenizer_.word_pairs), *figures))


def take_counts(spam_filter, merged, calibration):
    """Give the unfitted ``spam_filter`` the model rows of ``merged`` (a
    :class:`~spamnb.estimator.counting.Counts`); returns ``(done, fold_class_count,
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


class Unfitted:
    """A variant :func:`train_variants_here` counted and scored, its filter not
    made yet: :func:`choose_pairs` makes the one it keeps (:meth:`fitted`),
    so the variant not kept is never made into a filter (its counts are
    smaller than its filter: hash index, logs)."""

    __slots__ = ("spam_filter", "counts", "class_count_", "n_features")

    def __init__(self, spam_filter, counts):
        self.spam_filter, self.counts = spam_filter, counts
        self.class_count_ = [float(v) for v in counts.class_count[:2]]   # [ham, spam], as the filter's
        self.n_features = counts.n_features

    @property
    def tokenizer_(self):
        return self.spam_filter.tokenizer_

    def fitted(self):
        """The filter, given the counts (once; the counts are dropped)."""
        counts, self.counts = self.counts, None
        if counts is not None:
            release_free_memory()   # the held-out passes' temporaries, kept by the heap: not under the filter's arrays
            counts.to_filter(self.spam_filter, consume=True)
        return self.spam_filter

    def save(self, path=None, backup=None):
        """Write the model file of :meth:`fitted`'s filter (its cutoffs as
        ``spam_filter``'s now) without making the filter: ``SpamFilter.save_counts``
        (``spamnb train``: the counts' memory, not the filter's); once, the counts dropped."""
        counts, self.counts = self.counts, None
        if counts is None:
            raise ValueError("these counts were made into a filter or saved already")
        release_free_memory()   # as fitted(): the held-out passes' temporaries given back first
        self.spam_filter.save_counts(counts, path, backup)


def _fitted(variant, made=True):
    return variant.fitted() if made and isinstance(variant, Unfitted) else variant


def train_variants_here(filters, messages, calibration, n_folds, limit=None, group=True, deferred=False,
                        fan_in=None):
    """Train the unfitted ``filters`` in this process on ``messages``
    (``(bytes, is_spam)``), counted in one pass (each message read and parsed
    once: :func:`~spamnb.estimator.counting.count_variants`), as ``spamnb train
    -j 1`` (with ``fan_in``) and ``SpamFilter.fit`` train: a generator of each variant's ``(fitted, calibration,
    held-out scores)`` (:func:`choose_pairs`), its fold models built and its
    spill scored when asked for.  ``calibration`` None: the first variant
    only is counted.  ``limit``: as :func:`count_variants` (a variant dropped
    there gives None).  ``group``: as :func:`~spamnb.estimator.counting.count_variants`.
    ``deferred``: a variant scored is given as an :class:`Unfitted` (its
    filter made when :func:`choose_pairs` keeps it).  ``fan_in``:
    ``messages`` is an iterable of partitions (each an iterable of
    messages), the model's rows and each fold's summed a partition at a time
    and the partitions' sums added in ``TreeReduce(fan_in)``'s tree
    (:func:`~spamnb.estimator.counting.count_variants`,
    :func:`~spamnb.estimator.counting.partition_fold_sums`): the model and
    cutoffs of the same partitions counted on workers, byte for byte."""
    import contextlib

    filters = filters if calibration is not None else filters[:1]
    specs = [counting_spec(f) for f in filters]
    with contextlib.ExitStack() as stack:
        # each message's token indices to its fold's file (no fold rows: calibrate.FoldSpill), the
        # held-out pass a fold at a time from them (calibrate.held_out_by_fold)
        spills = [stack.enter_context(calibrate.FoldSpill(n_folds)) if n_folds else None for _ in filters]
        ends = []   # by partitions: the messages each fold holds at each partition's end

        def marked(parts):
            for part in parts:
                yield part
                ends.append([spill.class_count.sum(axis=1).astype("int64").tolist() if spill is not None else None
                             for spill in spills])

        if fan_in is not None:
            messages = marked(messages)
        merged = count_variants(specs, messages, n_folds=n_folds, limit=limit, group=group, fold_spills=spills,
                                fan_in=fan_in)
        yield from held_out_variants(filters, merged, spills, ends, calibration, n_folds, fan_in, deferred)


def held_out_variants(filters, merged, spills, ends, calibration, n_folds, fan_in=None, deferred=False, fork=None):
    """The second half of :func:`train_variants_here` (and of ``spamnb train
    -j N``'s, whose partitions are counted on workers): a generator of each
    variant's ``(fitted, calibration, held-out scores)`` from ``merged``
    (its model's :class:`~spamnb.estimator.counting.Counts`, None: dropped
    past the limit; the list's entries are dropped as taken) and ``spills``
    (its :class:`~spamnb.estimator.calibrate.FoldSpill` of the vocabulary
    indices, closed once scored); ``ends`` (with ``fan_in``): per partition,
    per variant, the messages each fold held at the partition's end;
    ``fork``: :func:`~spamnb.estimator.calibrate.held_out_by_fold`'s (half of
    the folds scored in a forked process)."""
    for i, spam_filter in enumerate(filters):
        counts, merged[i] = merged[i], None
        if counts is None:
            yield None
            continue
        fixed = None if calibration is None else check_calibration(spam_filter, calibration,
                                                                    counts.class_count[:2])
        if calibration is None or fixed is not None:   # no held-out scoring (as take_counts says)
            if deferred:
                variant = Unfitted(spam_filter, counts)
                del counts
                yield variant, fixed, None
                del variant
                continue
            counts.to_filter(spam_filter, consume=True)   # the counts' arrays dropped as the filter's are made
            del counts
            yield spam_filter, fixed, None
            continue
        release_free_memory()   # what the counting freed, before the held-out pass
        fold_class_count = spills[i].class_count
        sum_fold = None if fan_in is None else partition_fold_sums(fan_in, [end[i] for end in ends],
                                                                   counting_spec(spam_filter))
        parts = [calibrate.held_out_by_fold(spam_filter, spills[i], counts, sum_fold, fork)]   # no filter yet
        spills[i].close()
        chosen, scores = choose_from_parts(parts, fold_class_count, n_folds, calibration)
        variant = Unfitted(spam_filter, counts)
        del counts
        yield (variant if deferred else variant.fitted()), chosen, scores
        del variant


def fit(spam_filter, messages, labels, tune, target_fpr, word_pairs):
    """``SpamFilter.fit`` (its docstring says what), under the filter's write lock."""
    if tune and not spam_filter.feature_weight:
        y = [is_spam_label(label) for label in labels]
        data = [message_bytes(message) for message in messages]
        if len(data) != len(y):
            raise ValueError(f"{len(data)} messages but {len(y)} labels")
        spam_filter.set_fitted(vocabulary_=Vocabulary(), word_counts_=None, features_=None)
        spam_filter.counts_changed()
        fitted, calibration = _fit_tuned(spam_filter, data, y, target_fpr, word_pairs)
        spam_filter.set_fitted(calibration_=calibration)
        spam_filter.adopt(fitted)   # the variant kept (word pairs: another filter)
        _fitted_cutoffs(spam_filter, target_fpr)
        return spam_filter
    spam_filter.counts_changed()
    _fit_plain(spam_filter, messages, labels)
    spam_filter.set_fitted(calibration_=None)
    if tune and target_fpr > 0:   # message features: the default cutoffs (the fold scores have none)
        n_ham, n_spam = (int(v) for v in spam_filter.class_count_)
        spam_filter.set_fitted(calibration_=calibrate.calibration_check(spam_filter, n_ham, n_spam, target_fpr))
        calibrate.apply(spam_filter, spam_filter.calibration_)
    _fitted_cutoffs(spam_filter, target_fpr if tune else 0)
    return spam_filter


def _fitted_cutoffs(spam_filter, target_fpr):
    """After a fit: where the cutoffs came from; the held-out scores of learns start again."""
    spam_filter.set_fitted(held_out_=None)
    calibration = spam_filter.calibration_
    if target_fpr > 0 and calibration is not None and calibration.expected_fpr is not None:
        spam_filter.set_fitted(cutoff_source_="train")
    else:
        spam_filter.set_fitted(cutoff_source_=None)
        spam_filter.set_fitted(cutoff_source_=spam_filter.cutoffs_from)


def _fit_tuned(spam_filter, messages, labels, target_fpr=calibrate.DEFAULT_TARGET_FPR,
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

    def train_variants(filters):
        return train_variants_here(filters, pairs, calibration, n_folds, limit=calibrate.PAIRS_MAX_MESSAGES,
                                   deferred=True)

    fitted, chosen = choose_pairs(train_variants, spam_filter, word_pairs)
    if chosen is not None:
        calibrate.apply(fitted, chosen)
    return fitted, chosen


def _fit_plain(spam_filter, messages, labels):
    """``SpamFilter.fit(..., tune=False)``: count ``messages`` into ``spam_filter`` from
    scratch, one message at a time (and their continuous features, when on)."""
    y = [int(is_spam_label(label)) for label in labels]
    vocabulary = Vocabulary()
    spam_filter.set_fitted(vocabulary_=vocabulary, word_counts_=None, features_=None)
    features = [] if spam_filter.feature_weight else None
    counts = new_counts(spam_filter)
    add = counts.add
    transform = COUNT_TRANSFORMS[spam_filter.counts]
    length = float(spam_filter.length_norm)
    stream = spam_filter.tokenizer_.stream
    n_messages = 0
    digests = bytearray()   # the ledger of the messages counted (as train's: spamnb.estimator.counting)
    for message in messages:  # may be lazy (progress bars)
        data = message_bytes(message)
        indices = vocabulary.add(stream(data))
        if n_messages < len(y):
            add(indices, y[n_messages], transform, 1, vocabulary.n_features, length)
            digests += train_digest(data)
        if features is not None:
            features.append(scoring.message_features_of(spam_filter, data))
        n_messages += 1
    if n_messages != len(y):
        raise ValueError(f"{n_messages} messages but {len(y)} labels")
    counts.resize(vocabulary.n_features)
    spam_filter.set_fitted(word_counts_=counts)
    spam_filter.set_fitted(ages_=Ages.fresh(vocabulary.n_features, max_tokens=spam_filter.ages_.max_tokens))
    spam_filter.set_fitted(ledger_=from_trained(digests, bytes(y)))
    if features is not None:
        from spamnb.estimator.message_features import FeatureModel

        spam_filter.set_fitted(features_=FeatureModel().fit(features, [bool(v) for v in y]))
    return spam_filter
