"""Training and batch scoring on a Dask cluster (``pip install spamnb[dask]``).

Training is the map-reduce of :mod:`spamnb.parallel` with Dask as the
engine: one task per partition (a list of file paths or an mbox byte range,
read by the worker: the files must be readable there, e.g. on a shared file
system; or a partition of a Dask bag of messages) returns the partition's
:class:`~spamnb.parallel.Counts` (a few flat arrays); the counts are added by
token in a tree of fixed shape (``fan_in`` partitions per node), so what
crosses the network is one count model per partition and tree node, never a
record per token.  With the same partitions as ``spamnb train -j N``
(``partition_size``) the model file is byte-identical to it.

A worker lost mid-job loses its tasks' results; the scheduler runs them
again elsewhere, and since a task only reads its input, the result is the
same, exactly.

Scoring loads the model file once per worker process (the path is shipped,
not the model: every worker must see the file) and returns a Dask bag of
records (``.to_dataframe()`` makes it a Dask dataframe where pandas is
installed).
"""

from __future__ import annotations

import os

from spamnb import parallel

__all__ = ["fit", "fit_corpus", "count_corpus", "score"]


def _client(client=None, scheduler=None):
    """``(client, owned)``: the given client, or one connected to ``scheduler``."""
    if client is not None:
        return client, False
    try:
        from distributed import Client
    except ImportError:
        raise ImportError("Dask is not installed: pip install spamnb[dask] (dask[distributed])") from None

    if scheduler is None:
        from distributed import get_client

        return get_client(), False
    return Client(scheduler), True


def _merge_results(results):
    """Merge ``(Counts, CorpusReport)`` pairs (a node of the reduction tree)."""
    from spamnb.corpus import CorpusReport

    report = CorpusReport()
    for _counts, part_report in results:
        parallel._merge_reports(report, part_report)
    return parallel.merge_counts([counts for counts, _report in results]), report


def _count_items(spec, items):
    """A bag partition of ``(message, label)`` pairs -> ``(Counts, CorpusReport)``."""
    from spamnb.corpus import CorpusReport
    from spamnb.features import is_spam_label

    report = CorpusReport()
    items = list(items)
    report.read = len(items)
    return parallel.count_messages(spec, ((m, is_spam_label(y)) for m, y in items)), report


def _reduce(tasks, fan_in, client):
    """Compute the tree reduction of delayed ``(Counts, report)`` tasks."""
    from dask import delayed

    merge = delayed(_merge_results, pure=True)
    root = parallel.tree_levels(tasks, fan_in, merge=lambda group: merge(list(group)))
    return client.compute(root).result()


def fit(paths_or_bag, labels=None, client=None, spam_filter=None, partition_size=parallel.DEFAULT_PARTITION_SIZE,
        fan_in=parallel.DEFAULT_FAN_IN, scheduler=None):
    """Train ``spam_filter`` (default ``SpamFilter()``) on a Dask cluster; returns it.

    Parameters
    ----------
    paths_or_bag : sequence of paths, or dask.bag.Bag
        Message files (one message each) with ``labels`` (True/"spam" for
        spam), read by the workers in partitions of ``partition_size``; or a
        bag of ``(message, label)`` pairs (message: bytes or a ``pathlib.Path``), one
        partition per task (``labels`` must be None).
    client : distributed.Client, optional
        The cluster (default: ``scheduler``'s, or the current client).
    partition_size, fan_in : int
        Messages per task, and partitions merged per node of the reduction.
    """
    from dask import delayed

    from spamnb.features import is_spam_label
    from spamnb.filter import SpamFilter

    spam_filter = SpamFilter() if spam_filter is None else spam_filter
    if spam_filter.feature_weight:
        raise ValueError("message features (feature_weight > 0) are not trained on Dask")
    spec = parallel.counting_spec(spam_filter)
    client, owned = _client(client, scheduler)
    try:
        if hasattr(paths_or_bag, "to_delayed"):   # a dask bag
            if labels is not None:
                raise ValueError("with a bag of (message, label) pairs, give no labels")
            count = delayed(_count_items, pure=True)
            tasks = [count(spec, part) for part in paths_or_bag.to_delayed()]
        else:
            paths = [os.fspath(p) for p in paths_or_bag]
            labels = list(labels) if labels is not None else None
            if labels is None or len(labels) != len(paths):
                raise ValueError(f"{len(paths)} paths but {0 if labels is None else len(labels)} labels")
            pieces = (parallel.Piece("file", path, path, is_spam_label(y), 0, None, 0)
                      for path, y in zip(paths, labels))
            count = delayed(parallel.count_partition, pure=True)
            tasks = [count(spec, part) for part in parallel.partitions(pieces, partition_size)]
        merged, _report = _reduce(tasks, fan_in, client)
    finally:
        if owned:
            client.close()
    return merged.to_filter(spam_filter)


def fit_corpus(trees=(), spam=(), ham=(), client=None, scheduler=None, spam_filter=None,
               partition_size=parallel.DEFAULT_PARTITION_SIZE, fan_in=parallel.DEFAULT_FAN_IN, report=None,
               strict=False):
    """``spamnb train --dask ADDRESS`` without the calibration: a corpus laid
    out as for :func:`spamnb.corpus.labelled_messages` (folder trees,
    ``--spam``/``--ham`` folders and mbox files, cut into shards), trained on
    the cluster; the same partitions (and model) as ``spamnb train -j N``."""
    from spamnb.filter import SpamFilter

    spam_filter = SpamFilter() if spam_filter is None else spam_filter
    if spam_filter.feature_weight:
        raise ValueError("message features (feature_weight > 0) are not trained on Dask")
    merged = count_corpus(trees, spam, ham, client, scheduler, parallel.counting_spec(spam_filter), partition_size,
                          fan_in, report, strict)
    return merged.to_filter(spam_filter)


def count_corpus(trees=(), spam=(), ham=(), client=None, scheduler=None, spec=None,
                 partition_size=parallel.DEFAULT_PARTITION_SIZE, fan_in=parallel.DEFAULT_FAN_IN, report=None,
                 strict=False, n_folds=0):
    """The merged :class:`~spamnb.parallel.Counts` of a corpus, counted on the
    cluster (``spec``: :func:`spamnb.parallel.counting_spec`, default a
    ``SpamFilter()``'s; ``n_folds``: the fold rows of the calibration, as
    :func:`spamnb.parallel.count_messages`)."""
    from dask import delayed

    if spec is None:
        from spamnb.filter import SpamFilter

        spec = parallel.counting_spec(SpamFilter())
    pieces = parallel.plan_training(trees, spam, ham, report, strict, partition_size)
    count = delayed(parallel.count_partition, pure=True)
    tasks = [count(spec, part, strict, n_folds) for part in parallel.partitions(pieces, partition_size)]
    client, owned = _client(client, scheduler)
    try:
        merged, part_report = _reduce(tasks, fan_in, client)
    finally:
        if owned:
            client.close()
    if report is not None:
        parallel._merge_reports(report, part_report)
    return merged


def _score_items(model_path, identity, items):
    """A bag partition of messages (bytes or paths) -> a list of records."""
    from pathlib import Path

    from spamnb.filter import message_bytes

    model = parallel._model(model_path, identity)
    out = []
    for item in items:
        verdict = model.classify(message_bytes(Path(item) if isinstance(item, str) else item))   # str: a path
        out.append({"message": item if isinstance(item, str) else None, "verdict": verdict.label,
                    "probability": verdict.probability, "log_odds": verdict.log_odds})
    return out


def score(model_path, paths_or_bag, partition_size=parallel.DEFAULT_PARTITION_SIZE):
    """Classify a bag (or a sequence) of messages, bytes or paths, on the
    cluster: a Dask bag of records ``{"message": path or None, "verdict",
    "probability", "log_odds"}`` in input order (lazy: ``.compute()`` it,
    ``.to_dataframe()`` it (with pandas installed), or
    ``.map(...).to_textfiles(...)`` it as lines).  Each worker loads the
    model file once (the path is shipped, not the model); a model file
    replaced during the job fails the job."""
    import dask.bag as db

    model_path = os.path.abspath(os.fspath(model_path))
    identity = parallel._file_identity(model_path)
    parallel._model(model_path, identity)   # a bad model fails here, before any task
    if hasattr(paths_or_bag, "map_partitions"):
        bag = paths_or_bag
    else:
        items = [os.fspath(p) if isinstance(p, os.PathLike) else p for p in paths_or_bag]
        bag = db.from_sequence(items, partition_size=partition_size)
    return bag.map_partitions(_score_items_of, model_path, identity)


def _score_items_of(items, model_path, identity):
    return _score_items(model_path, identity, items)
