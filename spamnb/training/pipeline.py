"""``spamnb train`` as a library: a corpus counted on every core of one machine
(or a Dask cluster), the cutoffs chosen, the word pairs decided.

Counts add, so training is a map-reduce:

1. *plan* (the parent): the corpus becomes a stream of partitions of about
   ``partition_size`` messages: file paths, and byte ranges of mbox files cut
   at message boundaries, walked, labelled and skipped by spamnb.training.corpus's own
   rules (the parent finds the boundaries; it never holds a message);
2. *count* (worker processes): each partition is read, tokenized and counted
   (the filter's tokenizer settings, ``counts`` and ``length_norm``) into a
   :class:`Counts` of its own (its tokens' 64-bit hashes and strings, its
   class counts, its ``(classes, tokens)`` feature counts, its tokens' day)
   and dropped;
3. *merge* (the parent): the partitions' counts are added by token, in a tree
   of fixed shape (groups of ``fan_in`` consecutive partitions, level by
   level), so the result does not depend on which worker finished first.

Exactness.  Token order is the order of first sight over the corpus, as in
:meth:`SpamFilter.fit`; class counts are the same; feature counts are sums
of the same per-message values, in another order: bit-identical to ``fit``
for ``counts="raw"`` and ``"binary"`` (integers below 2**53 add exactly),
within float64 rounding for ``"log"`` (sums of log(1 + n)) or
``length_norm`` > 0.  The partitions and the tree depend on
``partition_size`` and ``fan_in`` only, never on the number of workers, so
the model file is byte-identical for every number of workers (and for
:func:`spamnb.training.cluster.fit` with the same partitions).

Processes, not threads: the parser and tokenizer hold the GIL (only the
counting kernels release it).  Workers are forked from this process where
that is safe (Linux, one Python thread), else they come from a
``forkserver`` that has imported this module once; a partition's counts
come back as a handful of flat arrays (one buffer each on the pipe), never a
Python object per token.

:func:`train` (``spamnb train``) also chooses the cutoffs: the counting pass
counts each message into its cross-validation fold too and spills its token
hashes; a scoring pass on the same workers scores them by the fold models
(:mod:`spamnb.model.calibrate`).  The corpus is read once.

Memory: the parent holds the partitions in flight (at most ``2 * n_jobs``)
and one running total per level of the tree (each at most the vocabulary);
a worker holds one partition's messages and counts.  Nothing grows with the
number of messages, only with the vocabulary they bring (docs/scale.md).
"""

from __future__ import annotations

import os

from spamnb.model.counting import DEFAULT_FAN_IN, count_messages, counting_spec, release_free_memory, tree_reduce
from spamnb.model.calibrate import AUTO_PAIRS
from spamnb.model.fitting import CorpusChanged, choose_from_parts, choose_pairs, take_counts
from spamnb.training.planning import (DEFAULT_PARTITION_SIZE, _merge_reports, _messages, count_partition, partitions,
                                     plan_training, score_spilled)
from spamnb.training.workers import Workers

__all__ = ["fit_counts", "fit", "train", "train_one", "CorpusChanged", "AUTO_PAIRS"]


def fit_counts(pieces, spec, n_jobs=None, partition_size=DEFAULT_PARTITION_SIZE, fan_in=DEFAULT_FAN_IN,
               report=None, strict=False, n_folds=0, workers=None, progress=None, spills=None):
    """The merged :class:`Counts` of labelled ``pieces`` (see :func:`plan_training`;
    ``n_folds``: as :func:`count_messages`; ``workers``: a :class:`Workers`
    to run on instead of ``n_jobs`` new ones; ``spills``: ``(folder, paths)``,
    each partition's token hashes spilled to a file in ``folder``, its path
    appended to the list ``paths``)."""
    from spamnb.training.corpus import CorpusReport

    report = CorpusReport() if report is None else report

    def spill(i):
        if spills is None:
            return None
        spills[1].append(os.path.join(spills[0], f"part-{i:09d}"))
        return spills[1][-1]

    jobs = ((spec, part, strict, n_folds, spill(i)) for i, part in enumerate(partitions(pieces, partition_size)))

    def counted(workers):
        for part_counts, part_report in workers.run_ordered(count_partition, jobs):
            _merge_reports(report, part_report)
            if progress is not None:
                progress.step("counting", n=int(part_counts.class_count[:2].sum()))
            yield part_counts

    if workers is not None:
        return tree_reduce(counted(workers), fan_in)
    with Workers(n_jobs) as workers:
        return tree_reduce(counted(workers), fan_in)


def fit(trees=(), spam=(), ham=(), spam_filter=None, n_jobs=None, partition_size=DEFAULT_PARTITION_SIZE,
        fan_in=DEFAULT_FAN_IN, report=None, strict=False):
    """Train ``spam_filter`` (default ``SpamFilter()``) on a corpus with ``n_jobs``
    processes (default: the cores available); returns the fitted filter.

    ``trees``, ``spam``, ``ham``: as :func:`spamnb.training.corpus.iter_labelled`.
    The message features (``feature_weight > 0``) are not counted in parallel:
    ValueError.
    """
    from spamnb.model.spam_filter import SpamFilter

    spam_filter = SpamFilter() if spam_filter is None else spam_filter
    if spam_filter.feature_weight:
        raise ValueError("message features (feature_weight > 0) are not trained in parallel; use -j 1")
    pieces = plan_training(trees, spam, ham, report, strict, partition_size)
    merged = fit_counts(pieces, counting_spec(spam_filter), n_jobs, partition_size, fan_in, report, strict)
    return merged.to_filter(spam_filter)


def train(trees=(), spam=(), ham=(), spam_filter=None, n_jobs=1, partition_size=DEFAULT_PARTITION_SIZE,
          fan_in=DEFAULT_FAN_IN, report=None, strict=False, calibration=None, n_folds=None, dask=None,
          progress=None, word_pairs=0):
    """``spamnb train``: count a corpus and choose the cutoffs, streaming;
    and, with ``word_pairs`` W >= 2, choose between the filter's tokenizer
    and the same with word pairs of window W.

    Returns ``(spam_filter, calibration)``: those :func:`train_one` (below)
    gives for the variant kept.

    ``word_pairs`` (with ``calibration``, when the corpus has enough mail for
    it): the corpus is trained a second time with the tokenizer's
    ``word_pairs`` set to W and its text budget raised (``tokenizer.with_pairs``;
    the same passes, counts and cutoffs), and the
    variant the calibration's held-out log-odds (10-fold cross-validation
    inside the training mail) favour is kept: the one with pairs only when,
    at the cutoffs chosen for each, it misses at most :data:`PAIRS_GAIN`
    times the spam the other misses, and its 1-AUC is no higher
    (docs/accuracy.md, "word pairs, chosen on the user's own mail").  The
    calibration's ``word_pairs`` field holds ``(window kept, spam missed
    without, with, 1-AUC % without, with)`` (the four None when the corpus
    has more than :data:`PAIRS_MAX_MESSAGES` messages: not tried); each
    variant's model is the one training it alone gives.
    """
    from spamnb.model.spam_filter import SpamFilter

    spam_filter = SpamFilter() if spam_filter is None else spam_filter
    options = dict(trees=trees, spam=spam, ham=ham, n_jobs=n_jobs, partition_size=partition_size, fan_in=fan_in,
                   strict=strict, calibration=calibration, n_folds=n_folds, dask=dask, progress=progress)
    first = [report]   # the first training's report is the caller's; the second's is dropped

    def train_variant(variant):
        fitted, cal, scores = train_one(spam_filter=variant, report=first.pop() if first else None, **options)
        return fitted, cal, scores

    return choose_pairs(train_variant, spam_filter, word_pairs)


def train_one(trees=(), spam=(), ham=(), spam_filter=None, n_jobs=1, partition_size=DEFAULT_PARTITION_SIZE,
              fan_in=DEFAULT_FAN_IN, report=None, strict=False, calibration=None, n_folds=None, dask=None,
              progress=None):
    """One training of :func:`train`: ``(spam_filter, calibration, scores)``,
    ``scores`` the held-out ``(ham_log_odds, spam_log_odds)`` the cutoffs were
    chosen from (None without them).

    ``spam_filter`` (default ``SpamFilter()``) fitted as :func:`fit` fits it (``n_jobs`` 1: in this
    process, one message at a time, the counts of ``SpamFilter.fit``; any
    other ``n_jobs``, 0 on a one-core machine included: by partitions, the
    model of every ``n_jobs`` != 1), and
    the :class:`~spamnb.model.calibrate.Calibration` of its cutoffs (not applied),
    or None when ``calibration`` is None.

    ``calibration``: a dict of :func:`spamnb.model.calibrate.calibration_check` and
    :func:`~spamnb.model.calibrate.from_scores` options (``target_fpr``,
    ``max_unsure``, ``margin``, ``min_ham``, ``min_spam``).  The counting pass
    also counts each message into its cross-validation fold
    (:func:`spamnb.model.calibrate.fold_of`) and spills its token hashes to a
    temporary file (one per partition; 8 bytes a token, removed as scored);
    the scoring pass, on the same workers, scores each message's hashes by
    its fold's model (the counts minus the fold's:
    :class:`~spamnb.model.calibrate.FoldModels`), keeping one float per message.
    Memory: the vocabulary times 2 floats (the counts), the folds' non-zero
    entries (16 bytes each, most tokens in one fold: :class:`Counts`) and the
    fold models (about 30 bytes per token and fold it occurs in), plus 8
    bytes a message; no matrix of the corpus, no dense fold rows.

    ``dask``: a scheduler address; both passes run there
    (:func:`spamnb.training.cluster.count_corpus` with ``spill=True``: each partition's
    spill stays in the memory of the worker that counted it; then
    :func:`spamnb.training.cluster.held_out_spilled`: the fold models are built on a
    worker from the merged counts there, and each spill is scored where it is).
    """
    import contextlib
    import tempfile

    from spamnb.model import calibrate
    from spamnb.training.corpus import CorpusReport
    from spamnb.model.spam_filter import SpamFilter

    spam_filter = SpamFilter() if spam_filter is None else spam_filter
    if spam_filter.feature_weight:
        raise ValueError("message features (feature_weight > 0) are not trained by partitions; use SpamFilter.fit")
    if partition_size < 1:
        raise ValueError("partition_size must be at least 1")
    n_folds = calibrate.DEFAULT_FOLDS if n_folds is None else n_folds
    folds = n_folds if calibration is not None else 0
    spec = counting_spec(spam_filter)
    report = CorpusReport() if report is None else report
    one = n_jobs == 1 and not dask   # asked for -j 1 (-j 0 on one core: partitions, here)
    with contextlib.ExitStack() as stack:
        # one process spills to an unnamed file; workers to files in a folder, which
        # goes once they have stopped (their files closed)
        work = None if one or dask or not folds else stack.enter_context(
            tempfile.TemporaryDirectory(prefix="spamnb-train-"))
        workers = stack.enter_context(Workers(1 if dask else n_jobs))
        spills = (work, []) if work is not None else None

        def plan(report):
            return plan_training(trees, spam, ham, report, strict, None if one else partition_size)

        if dask:
            from spamnb.training import cluster as spamnb_dask

            client = stack.enter_context(spamnb_dask.connect(dask))
            merged = spamnb_dask.count_corpus(trees, spam, ham, client=client, spec=spec, partition_size=partition_size,
                                              fan_in=fan_in, report=report, strict=strict, n_folds=folds,
                                              spill=bool(folds))
            if folds:
                spilled, merged = merged, merged.counts
        elif one:
            messages = ((data, is_spam) for _name, data, is_spam in _messages(plan(report), report, strict))
            if progress is not None:
                messages = progress.wrap(messages, "counting")
            spill = stack.enter_context(tempfile.TemporaryFile(prefix="spamnb-train-")) if folds else None
            merged = count_messages(spec, messages, n_folds=folds, spill=spill)
        else:
            merged = fit_counts(plan(report), spec, partition_size=partition_size, fan_in=fan_in, report=report,
                                strict=strict, n_folds=folds, workers=workers, progress=progress, spills=spills)
        done, fold_class_count, fold_feature_count = take_counts(spam_filter, merged, calibration)
        if done is not None:
            return done
        del merged
        release_free_memory()   # what the merge freed, before the fold models are built
        if dask:   # the fold models are built on the cluster, where the spills are
            del fold_feature_count
            parts = spamnb_dask.held_out_spilled(spilled, spam_filter, client)
            del spilled
        elif one:
            models = calibrate.FoldModels.from_counts(spam_filter, fold_class_count, fold_feature_count)
            del fold_feature_count
            spill.flush()
            parts = [calibrate.held_out_spilled(models, spill)]
        else:
            models = calibrate.FoldModels.from_counts(spam_filter, fold_class_count, fold_feature_count)
            del fold_feature_count
            folder = os.path.join(work, "folds")
            os.mkdir(folder)
            models.save(folder)
            parts = list(workers.run_ordered(score_spilled, ((folder, path) for path in spills[1])))
    chosen, scores = choose_from_parts(parts, fold_class_count, n_folds, calibration)
    return spam_filter, chosen, scores
