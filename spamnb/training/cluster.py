"""The Dask executor of training (``pip install spamnb[dask]``; batch
scoring on a cluster: :mod:`spamnb.batch.cluster`).  Training on Dask is
``spamnb.training.pipeline.train(..., dask=ADDRESS)`` (``spamnb train
--dask``), which counts through :func:`count_corpus` here.

Training is the map-reduce of :mod:`spamnb.training.pipeline` (and its counting, :mod:`spamnb.estimator.counting`) with Dask as the
engine: one task per partition (a list of file paths or an mbox byte range,
read by the worker: the files must be readable there, e.g. on a shared file
system) returns the partition's
:class:`~spamnb.training.counting.Counts` (a few flat arrays); the counts are added by
token in a tree of fixed shape (``fan_in`` partitions per node), so what
crosses the network is one count model per partition and tree node, never a
record per token.  With the same partitions as ``spamnb train -j N``
(``partition_size``) the model file is byte-identical to it.

A worker lost mid-job loses its tasks' results; the scheduler runs them
again elsewhere, and since a task only reads its input, the result is the
same, exactly.

"""

from __future__ import annotations

from typing import NamedTuple

from spamnb.errors import ClusterError
from spamnb.estimator import counting
from spamnb.training import planning

__all__ = ["ClusterError", "connect", "count_corpus", "held_out_spilled"]


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


def _worker_version():
    import spamnb

    return spamnb.__version__


CONNECT_TIMEOUT = 60.0   # seconds for a worker to run the version check


def connect(scheduler):
    """A ``distributed.Client`` of the cluster at ``scheduler`` (an address),
    to use as a context manager (it closes the connection, not the cluster).

    One task first checks that the cluster runs this version of spamnb (a
    worker without it, or with another version, could count otherwise):
    :class:`ClusterError` if not, or if no worker runs it within
    :data:`CONNECT_TIMEOUT` seconds (a cluster without workers)."""
    import spamnb

    if not scheduler:
        raise ValueError("no scheduler address")
    client = _client(None, scheduler)[0]
    try:
        version = client.submit(_worker_version, pure=False).result(timeout=CONNECT_TIMEOUT)
    except Exception as exc:   # no worker in time, or one that cannot unpickle spamnb's functions
        client.close()
        raise ClusterError(f"the Dask cluster at {scheduler} cannot run spamnb tasks ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''}); install spamnb[dask] "
                           f"{spamnb.__version__} on the scheduler and the workers") from None
    if version != spamnb.__version__:
        client.close()
        raise ClusterError(f"the Dask cluster at {scheduler} runs spamnb {version}, this is {spamnb.__version__}: "
                           "install the same version on the scheduler and the workers")
    return client


def _merge_results(results):
    """Merge ``(Counts, CorpusReport)`` pairs (a node of the reduction tree)."""
    from spamnb.training.corpus import CorpusReport

    report = CorpusReport()
    for _counts, part_report in results:
        planning.merge_reports(report, part_report)
    return counting.merge_counts([counts for counts, _report in results]), report


def _tree(tasks, fan_in):
    """The delayed tree reduction of delayed ``(Counts, report)`` tasks."""
    from dask import delayed

    merge = delayed(_merge_results, pure=True)
    return counting.tree_levels(tasks, fan_in, merge=lambda group: merge(list(group)))


def _reduce(tasks, fan_in, client):
    """Compute the tree reduction of delayed ``(Counts, report)`` tasks."""
    return client.compute(_tree(tasks, fan_in)).result()


def count_corpus(trees=(), spam=(), ham=(), client=None, scheduler=None, spec=None,
                 partition_size=planning.DEFAULT_PARTITION_SIZE, fan_in=counting.DEFAULT_FAN_IN, report=None,
                 strict=False, n_folds=0, spill=False, follow_links=False, unique=False):
    """The merged :class:`~spamnb.training.counting.Counts` of a corpus, counted on the
    cluster (``spec``: :func:`spamnb.training.counting.counting_spec`, default a
    ``SpamFilter()``'s; ``n_folds``: the fold rows of the calibration, as
    :func:`spamnb.training.counting.count_messages`).

    ``spill`` (with ``n_folds``): also keep each partition's token hashes
    (8 bytes a token) in the memory of the worker that counted it, and the
    merged counts where the reduction ended, for :func:`held_out_spilled`
    (Dask writes them to the worker's disk past its memory threshold, and
    computes them again if the worker is lost); returns a :class:`Spilled`.

    ``unique`` (``spamnb train --dask``): a near-duplicate of an earlier
    message of the corpus is left out, as ``spamnb train -j N`` leaves it out
    (a first pass of tasks keys each partition's messages:
    :func:`spamnb.training.planning.partition_keys`; the keys, 8 bytes a
    message, come here and :func:`~spamnb.training.planning.copies_of` finds
    the copies, whose skips go with the counting tasks)."""
    from operator import itemgetter

    from dask import delayed

    if spec is None:
        from spamnb.model.spam_filter import SpamFilter

        spec = counting.counting_spec(SpamFilter())
    if spill and not n_folds:
        raise ValueError("a spill needs the folds (n_folds > 0)")
    pieces = planning.plan_training(trees, spam, ham, report, strict, partition_size, follow_links)
    parts = planning.partitions(pieces, partition_size)
    client, owned = _client(client, scheduler)
    try:
        skips = None
        if unique:   # the near-duplicates first, as -j N finds them (spamnb.training.pipeline.train_variants)
            parts = list(parts)
            keys = client.gather(client.map(planning.partition_keys, parts, strict=strict, pure=True))
            skips = planning.copies_of(keys)
            del keys
        if spill:
            count = delayed(planning.count_partition_in_memory, pure=True)
            counted = [count(spec, part, strict, n_folds, None if skips is None else skips[i])
                       for i, part in enumerate(parts)]
            tasks = [delayed(itemgetter(0, 1), pure=True)(c) for c in counted]
            spills = [delayed(itemgetter(2), pure=True)(c) for c in counted]
        else:
            count = delayed(planning.count_partition, pure=True)
            tasks = [count(spec, part, strict, n_folds, None, None if skips is None else skips[i])
                     for i, part in enumerate(parts)]
            spills = None
        if spill:   # futures: the results stay on the workers until scored
            spills = client.compute(spills)
            root = client.compute(_tree(tasks, fan_in))
            merged, part_report = root.result()
        else:
            merged, part_report = _reduce(tasks, fan_in, client)
    finally:
        if owned:
            client.close()
    if report is not None:
        planning.merge_reports(report, part_report)
    return Spilled(merged, root, spills) if spill else merged


class Spilled(NamedTuple):
    """What :func:`count_corpus` returns with ``spill=True``."""

    counts: counting.Counts    #: the merged counts, with the fold rows
    root: object               #: their future on the cluster (``(Counts, CorpusReport)``)
    spills: list               #: one future per partition: its token hashes (bytes)


def _fold_models(root, params):
    """A task: the :class:`~spamnb.estimator.calibrate.FoldModels` of the merged counts
    ``root`` for a filter of ``params`` (:func:`held_out_spilled`)."""
    from spamnb.estimator.calibrate import FoldModels
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.mail.tokenizer import Tokenizer

    merged, _report = root
    fold_class_count, fold_feature_count = merged.class_count[2:].reshape(-1, 2), merged.sparse_folds()
    spam_filter = SpamFilter.from_params(params, Tokenizer.from_settings(params["tokenizer"]))
    return FoldModels.from_counts(merged.to_filter(spam_filter), fold_class_count, fold_feature_count)


def held_out_spilled(spilled, spam_filter, client):
    """The calibration's scoring pass on the cluster: the fold models of
    ``spilled.root`` (a :class:`Spilled`) built there by one task (for
    ``spam_filter``'s alpha, prior, counts and length_norm), then each
    partition's spill scored on the worker that holds it, each message by
    its fold's model; Dask copies the models once to each worker that needs
    them, and nothing big leaves or enters this process.  Returns one
    ``(ham_log_odds, spam_log_odds, per_fold)`` per partition, in order."""
    params = {"tokenizer": spam_filter.tokenizer_.settings, **spam_filter.get_params()}
    models = client.submit(_fold_models, spilled.root, params, pure=False)
    futures = client.map(planning.score_spilled_bytes, spilled.spills, models=models, pure=True)
    return client.gather(futures)
