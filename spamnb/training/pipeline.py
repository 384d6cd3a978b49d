"""``spamnb train`` as a library: a corpus counted on every core of one machine
(or a Dask cluster), the cutoffs chosen, the word pairs decided.

Counts add, so training is a map-reduce:

1. *plan* (the parent): the corpus becomes a stream of partitions of about
   ``partition_size`` messages: file paths, and byte ranges of mbox files cut
   at message boundaries, walked, labelled and skipped by spamnb.training.corpus's own
   rules (the parent finds the boundaries; it never holds a message);
2. *count* (worker processes): each partition is read, tokenized and counted
   (the filter's tokenizer settings, ``counts`` and ``length_norm``) over
   the worker's vocabulary, kept across the partitions it counts: its
   tokens by the worker's numbers, their rows, its class counts and day, and
   the hashes and strings of the tokens new to the worker alone;
3. *merge* (the parent): the partitions' tokens are numbered in the order of
   first sight over the corpus (a worker's numbers mapped by an array per
   worker, its new tokens looked up by hash) and their counts added at those numbers, in a
   tree of fixed shape (groups of ``fan_in`` consecutive partitions, level
   by level), so the result does not depend on which worker finished first
   (:func:`spamnb.training.planning.train_on_workers`).

Exactness.  Token order is the order of first sight over the corpus, as in
:meth:`SpamFilter.fit`; class counts are the same; feature counts are sums
of the same per-message values, in another order: bit-identical to ``fit``
for ``counts="raw"`` and ``"binary"`` (integers below 2**53 add exactly),
within float64 rounding for ``"log"`` (sums of log(1 + n)) or
``length_norm`` > 0.  The partitions and the tree depend on
``partition_size`` and ``fan_in`` only, never on the number of workers, so
the model file is byte-identical for every number of workers, one included
(``-j 1`` counts the same partitions in this process, each summed apart and
added in the same tree: :func:`~spamnb.estimator.counting.count_variants` with
``fan_in``), and on Dask (``train(dask=...)``) with the same
partitions.

Processes, not threads: the parser and tokenizer hold the GIL (only the
counting kernels release it).  Workers are forked from this process where
that is safe (Linux, one Python thread), else they come from a
``forkserver`` that has imported this module once; a partition's counts
come back as a handful of flat arrays (one buffer each on the pipe), never a
Python object per token.

:func:`train` (``spamnb train``) also chooses the cutoffs: the counting pass
writes each message's token indices to its cross-validation fold's file
(a worker's in its own vocabulary, kept across its partitions, numbered in
the corpus's by the parent), and the held-out pass sums each fold from its file and scores its
messages by the model without it (:mod:`spamnb.estimator.calibrate`,
``held_out_by_fold``), in this process (with workers, half of the folds in a
process forked for it: ``Workers.fork``).  The corpus is counted in one pass
(with workers too: below).

Near-duplicates (issue 46): a message whose near-duplicate key
(:func:`spamnb.estimator.calibrate.near_duplicate_key`: its body and the header
fields a copy keeps) an earlier message of the corpus with the same label
has is not counted,
and the summary says how many (``skipped N (N near-duplicates of an earlier
message (counted once): ...)``): the same message in two folders, a header
line added, would otherwise count twice and, held out in two folds, help
score its own twin.  With workers, each worker leaves out the copies
within its partition and of the partitions merged when its job was given
(their keys in a file the forked workers share) and sends its messages'
keys; the parent takes the other copies of an earlier partition's messages
out of that partition's counts
(:func:`spamnb.training.planning.train_on_workers`), so that ``-j N`` leaves
out the messages ``-j 1`` (the partitions read in order in this process)
leaves out as it meets them, without a second reading.

Memory: the parent holds the partitions in flight (at most ``2 * n_jobs``),
one running total per level of the tree (each at most the vocabulary) and
per worker the map of its numbers to the corpus's (4 bytes a token it sent);
a worker holds one partition's messages and counts, and its vocabulary's
hash index (at most the corpus's; its strings are sent, not kept).  Beside the vocabulary,
what grows with the number of messages is small: the ledger of the messages
counted (17 bytes each, at most 200,000 entries: spamnb.estimator.ledger), and
while training, the corpus's plan (a path each) and the near-duplicate keys
seen (an int each) (docs/scale.md).
"""

from __future__ import annotations

from spamnb.estimator.counting import DEFAULT_FAN_IN, counting_spec
from spamnb.estimator.calibrate import AUTO_PAIRS, PAIRS_MAX_MESSAGES
from spamnb.estimator.fitting import CorpusChanged, choose_from_parts, choose_pairs, take_counts, train_variants_here
from spamnb.training.planning import (DEFAULT_PARTITION_SIZE, partition_messages, partitions, plan_training,
                                     train_on_workers)
from spamnb.training.workers import Workers

__all__ = ["train", "CorpusChanged", "AUTO_PAIRS"]


def train(trees=(), spam=(), ham=(), spam_filter=None, n_jobs=1, partition_size=DEFAULT_PARTITION_SIZE,
          fan_in=DEFAULT_FAN_IN, report=None, strict=False, calibration=None, n_folds=None, dask=None,
          progress=None, word_pairs=0, follow_links=False, made=True):
    """The one library entry of training over a corpus (``spamnb train``;
    ``SpamFilter.fit`` is the other, over messages in memory): count a
    corpus and choose the cutoffs, streaming; and, with ``word_pairs`` W >= 2,
    choose between the filter's tokenizer and the same with word pairs of
    window W.  Returns ``(spam_filter, calibration)``: ``spam_filter``
    (default ``SpamFilter()``, or a new filter of its parameters with the
    paired tokenizer when that variant is kept) fitted, and the
    :class:`~spamnb.estimator.calibrate.Calibration` of its cutoffs (not
    applied), or None when ``calibration`` is None.

    The executor is chosen by the arguments, over one counting path (the
    corpus's partitions, of ``partition_size`` messages, added in a tree of
    fixed shape, ``fan_in``; the same near-duplicates left out): ``n_jobs``
    1 (or 0 on a one-core machine) counts in this process
    (:func:`~spamnb.estimator.fitting.train_variants_here` by partitions),
    ``n_jobs`` N (None: the cores available) on N worker processes, and
    ``dask`` (a scheduler address) on a Dask cluster
    (:func:`spamnb.training.cluster.count_corpus` with ``spill=True``: each
    partition's spill stays in the memory of the worker that counted it;
    then :func:`spamnb.training.cluster.held_out_spilled`: the fold models
    are built on a worker from the merged counts there, and each spill is
    scored where it is).  The model file is byte for byte the same for every
    executor and every ``n_jobs``.  Message features (``feature_weight > 0``)
    are not counted by partitions: with them the corpus is read twice in this
    process (``n_jobs`` 1, no ``dask``, else ValueError) and given to
    ``SpamFilter.fit`` (:func:`_train_with_features`).

    ``trees``, ``spam``, ``ham``, ``strict``, ``follow_links``: as
    :func:`spamnb.training.corpus.iter_labelled` (links to files outside a
    tree are skipped unless ``follow_links`` is true); ``report``: a
    :class:`~spamnb.training.corpus.CorpusReport` filled in.

    ``calibration``: a dict of :func:`spamnb.estimator.calibrate.calibration_check`
    and :func:`~spamnb.estimator.calibrate.from_scores` options (``target_fpr``,
    ``max_unsure``, ``margin``, ``min_ham``, ``min_spam``).  The counting
    pass also counts each message into its cross-validation fold
    (:func:`spamnb.estimator.calibrate.fold_of`, ``n_folds``) and spills its
    token hashes to a temporary file (one per partition; 8 bytes a token,
    removed as scored); the scoring pass, on the same executor, scores each
    message's hashes by its fold's model (the counts minus the fold's:
    :class:`~spamnb.estimator.calibrate.FoldModels`), keeping one float per
    message.  Memory: the vocabulary times 2 floats (the counts), the folds'
    non-zero entries (16 bytes each) and the fold models (about 30 bytes per
    token and fold it occurs in; with workers they are built from the merged
    counts before the filter is, and written to the folder the workers map
    one fold at a time), plus 8 bytes a message; no matrix of the corpus.

    ``word_pairs`` (with ``calibration``, when the corpus has enough mail for
    it): the corpus is also trained with the tokenizer's ``word_pairs`` set
    to W and its text budget raised (``tokenizer.with_pairs``; the same
    counts and cutoffs as training it alone, counted in the same pass:
    :func:`_train_variants`), and the
    variant the calibration's held-out log-odds (10-fold cross-validation
    inside the training mail) favour is kept: the one with pairs only when,
    at the cutoffs chosen for each, it misses at most :data:`PAIRS_GAIN`
    times the spam the other misses, and its 1-AUC is no higher
    (docs/accuracy.md, "word pairs, chosen on the user's own mail").  The
    calibration's ``word_pairs`` field holds ``(window kept, spam missed
    without, with, 1-AUC % without, with)`` (the four None when the corpus
    has more than :data:`PAIRS_MAX_MESSAGES` messages: not tried); each
    variant's model is the one training it alone gives.

    ``made`` False: the filter counted in this process or on workers comes
    as a :class:`~spamnb.estimator.fitting.Unfitted` (its ``spam_filter``
    unfitted, the cutoffs to be set there; its counts), whose ``save(path,
    backup)`` writes the model file the filter would, without making it
    (``spamnb train``: the memory of the counts, not of the filter); with
    message features or Dask a fitted filter still.
    """
    from spamnb.model.spam_filter import SpamFilter

    spam_filter = SpamFilter() if spam_filter is None else spam_filter
    if spam_filter.feature_weight:
        if dask or Workers(n_jobs).n_jobs != 1:
            raise ValueError("message features (feature_weight > 0) are trained in one process: n_jobs=1, no dask")
        return _train_with_features(spam_filter, trees, spam, ham, report, strict, follow_links,
                                    calibration["target_fpr"] if calibration else 0.0, progress)
    options = dict(trees=trees, spam=spam, ham=ham, n_jobs=n_jobs, partition_size=partition_size, fan_in=fan_in,
                   report=report, strict=strict, calibration=calibration, n_folds=n_folds, dask=dask,
                   progress=progress, limit=PAIRS_MAX_MESSAGES, follow_links=follow_links, deferred=True)

    def train_all(filters):
        return _train_variants(filters, **options)

    return choose_pairs(train_all, spam_filter, word_pairs, made)


def _train_variants(filters, trees=(), spam=(), ham=(), n_jobs=1, partition_size=DEFAULT_PARTITION_SIZE,
                   fan_in=DEFAULT_FAN_IN, report=None, strict=False, calibration=None, n_folds=None, dask=None,
                   progress=None, limit=None, follow_links=False, deferred=False):
    """:func:`train` of each unfitted filter of ``filters`` (a filter and
    its variant with word pairs: :func:`~spamnb.estimator.fitting.choose_pairs`):
    a generator of their ``(spam_filter, calibration, scores)``, in order,
    ``scores`` the held-out ``(ham_log_odds, spam_log_odds)`` the cutoffs were
    chosen from (None without them).

    The corpus is counted once for all of them (each message read and parsed
    once, tokenized by each filter's tokenizer:
    :func:`~spamnb.estimator.fitting.train_variants_here` by partitions with
    ``-j 1``; :func:`~spamnb.training.planning.train_on_workers` with ``-j
    N``: the same partitions, tree and near-duplicates, the partitions counted
    on workers and added here in ``-j 1``'s vocabulary order and tree), each
    variant into its own counts, tree and fold files, which are exactly those
    of training it alone; a variant's held-out pass is made when its result
    is asked for.  ``calibration`` None: the first
    filter only.  ``limit``: past
    that many messages counted the variants after the first are dropped
    (their result None).  On Dask each variant
    is trained by a pass of its own.  ``deferred`` (not on Dask): a variant
    scored comes as a :class:`~spamnb.estimator.fitting.Unfitted`, made a
    filter when :func:`~spamnb.estimator.fitting.choose_pairs` keeps it (the
    variant not kept is never made a filter).
    """
    from spamnb.estimator import calibrate
    from spamnb.training.corpus import CorpusReport

    for spam_filter in filters:
        if spam_filter.feature_weight:
            raise ValueError("message features (feature_weight > 0) are not trained by partitions; "
                             "use SpamFilter.fit")
    if partition_size < 1:
        raise ValueError("partition_size must be at least 1")
    n_folds = calibrate.DEFAULT_FOLDS if n_folds is None else n_folds
    folds = n_folds if calibration is not None else 0
    filters = filters if calibration is not None else filters[:1]
    report = CorpusReport() if report is None else report
    if dask:
        for i, spam_filter in enumerate(filters):
            yield _train_dask(spam_filter, trees, spam, ham, partition_size, fan_in, report if i == 0 else None,
                              strict, calibration, n_folds, folds, dask, follow_links)
        return
    if Workers(n_jobs).n_jobs == 1:   # -j 1 (-j 0 on one core): the same partitions and tree, in this process
        yield from train_variants_here(filters, _partitions_here(trees, spam, ham, partition_size, report, strict,
                                                                 follow_links, progress),
                                       calibration, folds, limit, group=False, deferred=deferred, fan_in=fan_in)
        return
    with Workers(n_jobs) as workers:   # the partitions counted on workers, added here as -j 1 adds them
        yield from train_on_workers(filters, workers, trees, spam, ham, partition_size, fan_in, report, strict,
                                    calibration, n_folds, folds, progress, limit, follow_links, deferred)


def _train_with_features(spam_filter, trees, spam, ham, report, strict, follow_links, target_fpr, progress):
    """:func:`train` of a filter with message features: ``SpamFilter.fit``
    over the corpus read twice (the labels, then the messages), one message
    at a time, in this process; its calibration keeps the default cutoffs
    (the fold scores have no features), none made when ``target_fpr`` is 0.
    Returns ``(spam_filter, its calibration_)``; CorpusError when the corpus
    holds no message, CorpusChanged when the second pass does not see what
    the first saw."""
    from spamnb.training.corpus import CorpusError, CorpusReport, iter_labelled

    report = CorpusReport() if report is None else report
    sources = dict(trees=trees, spam=spam, ham=ham, strict=strict, follow_links=follow_links)
    labels = bytearray(m.is_spam for m in iter_labelled(report=report, **sources))
    if not labels:
        raise CorpusError(f"no messages found ({report.summary()})")

    def again():   # the second pass must see what the first saw, or the labels would be off
        for i, message in enumerate(iter_labelled(report=CorpusReport(), **sources)):   # its folders counted once
            if i >= len(labels) or message.is_spam != labels[i]:
                raise CorpusChanged(message.relpath)
            yield message.data
            if progress is not None:
                progress.step("training")

    try:
        spam_filter.fit(again(), [bool(v) for v in labels], target_fpr=target_fpr)
    except CorpusChanged:
        raise
    except ValueError as exc:   # fewer messages than labels: the corpus changed
        raise CorpusChanged(str(exc)) from None
    return spam_filter, spam_filter.calibration_


def _partitions_here(trees, spam, ham, partition_size, report, strict, follow_links, progress):
    """The corpus's partitions (:func:`partitions` of :func:`plan_training`:
    the workers' own), each a generator of its ``(bytes, is_spam)``, read in
    order in this process: a near-duplicate of an earlier message left out
    as met."""
    seen = set()
    if progress is not None and hasattr(progress, "restart"):
        progress.restart()   # a pass of its own: counted from 0 again

    def messages(part):
        for _name, data, is_spam in partition_messages(part, report, strict, seen=seen):
            yield data, is_spam
            if progress is not None:
                progress.step("counting")

    try:
        for part in partitions(plan_training(trees, spam, ham, report, strict, partition_size, follow_links),
                               partition_size):
            yield messages(part)
    finally:
        if progress is not None and hasattr(progress, "close"):
            progress.close()


def _train_dask(spam_filter, trees, spam, ham, partition_size, fan_in, report, strict, calibration, n_folds, folds,
                dask, follow_links=False):
    """One variant of :func:`_train_variants` on a Dask cluster: both passes there
    (:func:`spamnb.training.cluster.count_corpus` with ``spill=True``: each
    partition's spill stays in the memory of the worker that counted it; then
    :func:`spamnb.training.cluster.held_out_spilled`: the fold models are built
    on a worker from the merged counts there, and each spill is scored where it is)."""
    from spamnb.training import cluster as spamnb_dask

    with spamnb_dask.connect(dask) as client:
        merged = spamnb_dask.count_corpus(trees, spam, ham, client=client, spec=counting_spec(spam_filter),
                                          partition_size=partition_size, fan_in=fan_in, report=report,
                                          strict=strict, n_folds=folds, spill=bool(folds), follow_links=follow_links,
                                          unique=True)
        if folds:
            spilled, merged = merged, merged.counts
        done, fold_class_count, fold_feature_count = take_counts(spam_filter, merged, calibration)
        if done is not None:
            return done
        del merged, fold_feature_count
        parts = spamnb_dask.held_out_spilled(spilled, spam_filter, client)
        del spilled
    chosen, scores = choose_from_parts(parts, fold_class_count, n_folds, calibration)
    return spam_filter, chosen, scores
