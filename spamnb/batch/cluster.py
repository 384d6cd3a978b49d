"""Batch scoring on a Dask cluster (``pip install spamnb[dask]``):
``spamnb classify --batch``'s lines (:func:`score_lines`) or a bag of
records (:func:`score`).

Scoring loads the model file once per worker process (the path is shipped,
not the model: every worker must see the file) and returns a Dask bag of
records (``.to_dataframe()`` makes it a Dask dataframe where pandas is
installed).
"""

from __future__ import annotations

import os

from spamnb.batch import classify as batch
from spamnb.training import planning

__all__ = ["score", "score_lines"]


def _score_items(model_path, identity, items):
    """A bag partition of messages (bytes or paths) -> a list of records."""
    from pathlib import Path

    from spamnb.estimator.messages import message_bytes

    model = batch.worker_model(model_path, identity)
    out = []
    for item in items:
        verdict = model.classify(message_bytes(Path(item) if isinstance(item, str) else item))   # str: a path
        out.append({"message": item if isinstance(item, str) else None, "verdict": verdict.label,
                    "probability": verdict.probability, "log_odds": verdict.log_odds})
    return out


def score(model_path, paths_or_bag, partition_size=planning.DEFAULT_PARTITION_SIZE):
    """Classify a bag (or a sequence) of messages, bytes or paths, on the
    cluster: a Dask bag of records ``{"message": path or None, "verdict",
    "probability", "log_odds"}`` in input order (lazy: ``.compute()`` it,
    ``.to_dataframe()`` it (with pandas installed), or
    ``.map(...).to_textfiles(...)`` it as lines).  Each worker loads the
    model file once (the path is shipped, not the model); a model file
    replaced during the job fails the job."""
    import dask.bag as db

    model_path = os.path.abspath(os.fspath(model_path))
    identity = batch.file_identity(model_path)
    batch.worker_model(model_path, identity)   # a bad model fails here, before any task
    if hasattr(paths_or_bag, "map_partitions"):
        bag = paths_or_bag
    else:
        items = [os.fspath(p) if isinstance(p, os.PathLike) else p for p in paths_or_bag]
        bag = db.from_sequence(items, partition_size=partition_size)
    return bag.map_partitions(_score_items_of, model_path, identity)


def _score_items_of(items, model_path, identity):
    return _score_items(model_path, identity, items)


def _lines_of(pieces, model_path, identity, cutoffs, json_lines):
    return batch.score_partition(model_path, identity, cutoffs, pieces, json_lines)[0]


def score_lines(model_path, paths, partition_size=planning.DEFAULT_PARTITION_SIZE, json_lines=False, cutoffs=None):
    """``spamnb classify --batch`` (``json_lines``: ``--json``) on the cluster:
    ``paths`` (messages, mbox files, cut into shards, and folders) planned
    here, scored by the workers in partitions (the model file loaded once per
    worker process, as :func:`score`).  Returns a Dask bag of text, one
    string per partition, in input order: the lines the one-process batch
    writes for it (an unreadable path has its error line);
    ``"".join(bag.compute())`` or ``bag.to_textfiles(...)``."""
    import dask.bag as db

    model_path = os.path.abspath(os.fspath(model_path))
    identity = batch.file_identity(model_path)
    batch.worker_model(model_path, identity, cutoffs)   # a bad model fails here, before any task
    paths = [os.fspath(p) for p in paths]
    if "-" in paths:
        raise ValueError("'-' (stdin) is not read on a cluster")
    parts = list(planning.partitions(planning.plan_scoring(paths), partition_size))
    bag = db.from_sequence(parts, npartitions=max(1, len(parts)))
    return bag.map(_lines_of, model_path, identity, cutoffs, json_lines)
