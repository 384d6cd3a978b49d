"""Every executor of ``spamnb train`` gives the same model: in this process
(``-j 1``), on worker processes (``-j 2``) and on a Dask cluster (``--dask``),
near-duplicate copies of a message (one header line added) are counted once
(issue 46), so the counts, the ledger, the folds and the cutoffs are those of
the corpus without the copies."""

import sys
from pathlib import Path

import numpy as np
import pytest

from spamnb.model.spam_filter import SpamFilter
from spamnb.training import pipeline
from spamnb.training.corpus import CorpusReport
from spamnb.training.workers import Workers

from conftest import slow_beyond
from test_near_duplicates import with_copies

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "corpora"
NEAR = "near-duplicates of an earlier message (counted once)"


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed",
                                      reason="dask[distributed] is not installed (pip install spamnb[dask])")
    options = {"n_workers": 2, "threads_per_worker": 1, "processes": True, "host": "127.0.0.1",
               "dashboard_address": None}
    with distributed.LocalCluster(**options) as cluster, distributed.Client(cluster) as dask_client:
        yield dask_client


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """The sample corpus with every message twice (the copy with ``X-Copy: 2`` added)."""
    return with_copies(SAMPLE, tmp_path_factory.mktemp("copies") / "corpus", 2)


def _train(corpus, executor, client=None, raw=False, calibration=None):
    spam_filter = SpamFilter(counts="raw", length_norm=0) if raw else SpamFilter()
    options = {"n_jobs": 1} if executor == "j1" else {"n_jobs": 2} if executor == "j2" else \
        {"dask": client.scheduler.address}
    report = CorpusReport()
    fitted, cal = pipeline.train([corpus], spam_filter=spam_filter, partition_size=40, report=report,
                                 calibration=calibration, **options)
    return fitted, cal, report


def _counts(spam_filter):
    return (spam_filter.vocabulary_.tokens(), np.asarray(spam_filter.word_counts_.matrix()).tolist(),
            np.asarray(spam_filter.class_count_).tolist())


@pytest.fixture(scope="module")
def alone():
    """The sample without copies, exact counts, in this process."""
    return _train(SAMPLE, "j1", raw=True)[0]


@pytest.mark.parametrize("executor", ["j1", "j2", "dask"])
def test_every_executor_counts_a_near_duplicate_once(client, copies, alone, executor):
    """Exact counts (``counts="raw"``, no length norm: sums of integers), so that the
    model of each executor is compared bit for bit with the one without the copies."""
    fitted, _cal, report = _train(copies, executor, client, raw=True)
    assert report.skipped.get(NEAR) == 300, report.summary()
    assert _counts(fitted) == _counts(alone)
    assert len(fitted.ledger_) == 300


def test_dask_chooses_the_cutoffs_of_j2_with_copies(client, copies, tmp_path):
    """With the calibration: the folds and held-out scores on Dask are those of
    ``-j 2`` (the same partitions: the model file byte-identical, the same
    cutoffs), and those of the corpus without its copies."""
    options = {"target_fpr": 0.01}
    local, local_cal, local_report = _train(copies, "j2", calibration=options)
    on_dask, dask_cal, dask_report = _train(copies, "dask", client, calibration=options)
    alone, alone_cal, _report = _train(SAMPLE, "j2", calibration=options)
    assert dask_report.skipped.get(NEAR) == local_report.skipped.get(NEAR) == 300
    assert dask_cal.expected_fpr is not None and dask_cal == local_cal
    assert (dask_cal.spam_log_odds, dask_cal.ham_log_odds) == (alone_cal.spam_log_odds, alone_cal.ham_log_odds)
    local.save(tmp_path / "local")
    on_dask.save(tmp_path / "dask")
    assert (tmp_path / "local").read_bytes() == (tmp_path / "dask").read_bytes()


@pytest.mark.parametrize("params", [{}, {"counts": "raw", "length_norm": 0}, {"counts": "binary", "prior": "map"}])
def test_the_held_out_pass_by_fold_is_the_fold_models(params, monkeypatch):
    """``-j 1``'s held-out pass (each message's token indices in its fold's file,
    a fold's counts summed from it: calibrate.FoldSpill) scores every message
    bit for bit as the fold models built from dense fold rows do (the -j N and
    Dask path: FoldModels, held_out_spilled)."""
    import tempfile

    from spamnb.estimator import calibrate
    from spamnb.estimator.counting import count_messages, count_variants, counting_spec
    from spamnb.training.corpus import labelled_messages

    messages = [(m.data, m.is_spam) for m in labelled_messages([SAMPLE])]
    spec = counting_spec(SpamFilter(**params))
    with tempfile.TemporaryFile() as spilled:
        counts = count_messages(spec, messages, n_folds=10, spill=spilled, group=False)
        fold_class_count, folds = counts.class_count[2:].reshape(-1, 2), counts.sparse_folds()
        dense = counts.to_filter(SpamFilter(**params))
        spilled.flush()
        models = calibrate.FoldModels.from_counts(dense, fold_class_count, folds)
        expected = calibrate.held_out_spilled(models, spilled)
    with calibrate.FoldSpill(10) as spill:
        alone = count_variants([spec], messages, n_folds=10, group=False, fold_spills=[spill])[0]
        assert np.array_equal(spill.class_count, fold_class_count)
        rows = alone.dense.copy()
        # from the counts (train's path): each fold's model counts put in the counts' rows for their sums, then
        # their own put back (no row copied); from the filter: a copy of each row (another thread may read it)
        from_counts = calibrate.held_out_by_fold(SpamFilter(**params), spill, alone)
        assert alone.dense.tobytes() == rows.tobytes()
        fitted = alone.to_filter(SpamFilter(**params))
        assert np.array_equal(np.asarray(fitted.word_counts_.matrix()), np.asarray(dense.word_counts_.matrix()))
        got = calibrate.held_out_by_fold(fitted, spill)
        # -j N's: half of the folds scored in a process forked from this one, the same scores (forked even
        # when an earlier test left a thread here: what it runs takes no lock another thread may hold)
        monkeypatch.setenv("SPAMNB_START_METHOD", "fork")
        with Workers(2) as workers:
            workers.submit(int, 0).result()   # a worker started: forks are offered
            handles = []

            def fork(function, folds):
                handles.append(workers.fork(function, folds))
                return handles[-1]

            forked = calibrate.held_out_by_fold(fitted, spill, fork=fork)
            # train's path, both at once: from the counts' own rows, half of the folds in the forked process
            forked_counts = calibrate.held_out_by_fold(SpamFilter(**params), spill, alone, fork=fork)
        assert alone.dense.tobytes() == rows.tobytes()
    for a, b, c, d, e in zip(got, expected, forked, from_counts, forked_counts):
        assert a.dtype == b.dtype == c.dtype and a.tobytes() == b.tobytes() == c.tobytes() == d.tobytes() == e.tobytes()
    assert got[0].size == 200 and got[1].size == 100
    assert len(handles) == 2 and (all(h is not None for h in handles) or not sys.platform.startswith("linux"))   # forked


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks where fork is safe: Linux")
def test_a_forked_call_has_this_process_s_memory_and_answers_or_says_why_not(monkeypatch):
    """``Workers.fork``: ``function(*args)`` in a process forked now (what it
    reads is this process's, not sent), its answer or its exception given
    back, BrokenPool when it died; none with one job or before a worker
    started (the caller works alone); ``close`` ends a call at once."""
    import os
    import time

    from spamnb.errors import BrokenPool

    monkeypatch.setenv("SPAMNB_START_METHOD", "fork")   # as with no other thread here (an earlier test's)
    with Workers(1) as one:
        assert one.fork(len, []) is None
    with Workers(2) as workers:
        assert workers.fork(len, []) is None   # no worker yet: a job too small for them
        workers.submit(int, 0).result()
        data = np.arange(10)
        pid, total = workers.fork(lambda: (os.getpid(), int(data.sum()))).result()
        assert pid != os.getpid() and total == 45
        with pytest.raises(ValueError):
            workers.fork(int, "not a number").result()
        with pytest.raises(BrokenPool):
            workers.fork(os._exit, 3).result()
        slow = workers.fork(time.sleep, 120)
        process = slow.process
        start = time.monotonic()
        slow.close()
        assert process.exitcode is not None and time.monotonic() - start < 30


def _answer_of_arrays(n):
    return {"big": np.arange(n, dtype=np.float64), "strings": np.frombuffer(bytes(range(256)) * (n // 256), np.uint8),
            "small": np.arange(3), "strided": np.arange(2 * n)[::2], "names": ["a"] * 3}


def test_an_answer_s_arrays_come_back_out_of_the_pickle(monkeypatch):
    """A worker's answer (and a forked call's): its large arrays sent as they
    are after a pickle without them, each read into a buffer of its own (the
    arrays made on it, writable); small and strided ones in the pickle; every
    value as sent, whatever the socket's buffer (answers of megabytes)."""
    from spamnb.training import workers as workers_module

    monkeypatch.setenv("SPAMNB_START_METHOD", "fork")
    n = 1 << 19   # 4 MiB of float64: past the socket's buffer
    with Workers(2) as workers:
        answers = list(workers.run_ordered(_answer_of_arrays, [(n,), (n + 256,), (1024,)]))
        forked = workers.fork(_answer_of_arrays, n).result()
    for got, size in zip(answers + [forked], (n, n + 256, 1024, n)):
        want = _answer_of_arrays(size)
        assert got.keys() == want.keys() and got["names"] == want["names"]
        for key in ("big", "strings", "small", "strided"):
            assert got[key].dtype == want[key].dtype and np.array_equal(got[key], want[key])
    big = owner = answers[0]["big"]
    while isinstance(owner, np.ndarray):   # the array's memory: the buffer it was read into, not a pickle's bytes
        owner = owner.base
    owner = owner.obj if isinstance(owner, memoryview) else owner
    assert isinstance(owner, bytearray) and len(owner) == big.nbytes >= workers_module._OUT_OF_BAND_BYTES
    assert big.flags.writeable


def test_the_default_jobs_are_the_free_cores():
    """The cores available less the load average (rounded), at least one: a
    machine whose cores others keep busy trains in this process, which writes
    the model file of any ``-j`` (the test below)."""
    from spamnb.training.workers import available_cores, free_cores

    assert free_cores(2, 0.0) == 2 and free_cores(2, 0.4) == 2
    assert free_cores(2, 0.6) == 1 and free_cores(2, 1.0) == 1 and free_cores(2, 9.0) == 1
    assert free_cores(8, 2.2) == 6 and free_cores(8, 0.0) == 8 and free_cores(1, 0.0) == 1
    assert 1 <= free_cores() <= available_cores()


def test_the_busy_cores_are_the_smaller_of_the_average_and_the_tasks_running_now():
    """The load average lags (a job that just ended still counts in it); the tasks
    running now (``/proc/loadavg``, this process among them) are one instant: the
    smaller of the two."""
    from spamnb.training.workers import busy_cores, free_cores

    assert busy_cores(1.8, 1) == 0 and free_cores(2, busy_cores(1.8, 1)) == 2   # the average: jobs just ended
    assert busy_cores(0.2, 5) == 0.2 and busy_cores(9.0, 8) == 7 and free_cores(2, busy_cores(9.0, 8)) == 1
    assert busy_cores(3.0, None) <= 3.0 and busy_cores(None, 3) <= 2
    assert busy_cores() is not None and busy_cores() >= 0


def _digests(tmp_path, corpus, runs, partition_size=None):
    """The sha256 of the model file ``spamnb train`` writes for each ``(name, options)`` of ``runs``."""
    import hashlib

    from spamnb.cli.main import main

    small = [] if partition_size is None else ["--partition-size", str(partition_size)]
    digest = {}
    for name, options in runs:
        model = tmp_path / f"{name}.spamnb"
        assert main(["train", "-q", *small, *options, "-m", str(model), str(corpus)]) == 0
        digest[name] = hashlib.sha256(model.read_bytes()).hexdigest()
    return digest


@pytest.mark.parametrize("partition_size", slow_beyond([7, 40], [7]))     # 40: -m slow
def test_every_j_writes_the_same_model_file(tmp_path, monkeypatch, partition_size):
    """``-j 1`` (the partitions counted in this process, added in the same tree),
    ``-j 2``, ``-j 0`` and the default on a busy, an idle and a one-core machine
    write the same model file, byte for byte (log counts: a sum in another
    order differs in its last bits; CI once saw a default training's model
    change with the load).  Partitions of 7: 43 of them, a tree of three
    levels with its last groups short."""
    from spamnb.training import workers

    monkeypatch.setenv("SPAMNB_HOME", str(tmp_path / "home"))
    runs = [("one", ["-j", "1"]), ("two", ["-j", "2"]), ("every", ["-j", "0"])]
    digest = _digests(tmp_path, SAMPLE, runs, partition_size)
    for name, available, free in (("busy", 2, 1), ("idle", 2, 2), ("one-core", 1, 1)):
        monkeypatch.setattr(workers, "available_cores", lambda available=available: available)
        monkeypatch.setattr(workers, "free_cores", lambda *a, free=free, **k: free)
        digest.update(_digests(tmp_path, SAMPLE, [(name, [])], partition_size))
    assert len(set(digest.values())) == 1, digest


@pytest.mark.parametrize("options", [{"n_jobs": 1}, {"n_jobs": 2}, {"n_jobs": 1, "calibration": None}])
def test_the_model_written_from_the_counts_is_the_filters_file(tmp_path, options):
    """``spamnb train``'s save (``made=False``: the kept variant's counts written
    a piece at a time, the hash index last, no filter made) writes the file
    of the filter made from those counts, byte for byte, with the cutoffs set
    on its unfitted filter (and the default cutoffs without calibration)."""
    from spamnb.estimator.calibrate import apply
    from spamnb.estimator.fitting import Unfitted

    options = {"calibration": {"target_fpr": 0.01}, "word_pairs": 2, **options}
    results = []
    for made in (True, False):
        trained, cal = pipeline.train([SAMPLE], partition_size=40, made=made, **options)
        assert isinstance(trained, Unfitted) is (not made)
        spam_filter = trained if made else trained.spam_filter
        if cal is not None:
            apply(spam_filter, cal)
            spam_filter.set_cutoffs(spam_filter.cutoffs, "train")
        results.append((list(trained.class_count_), cal))
        trained.save(tmp_path / f"made-{made}")
        assert made or not spam_filter.is_fitted   # saving from the counts does not make the filter
    assert results[0] == results[1]
    assert (tmp_path / "made-True").read_bytes() == (tmp_path / "made-False").read_bytes()
    loaded = SpamFilter.load(tmp_path / "made-False")
    assert loaded.vocabulary_.n_features == trained.n_features > 0
    with pytest.raises(ValueError, match="saved already"):
        trained.save(tmp_path / "again")


def test_j1_writes_the_model_file_of_dask(client, tmp_path):
    """The Dask cluster's partitions and tree are those of ``-j 1`` too: the same
    model file, the same cutoffs."""
    options = {"target_fpr": 0.01}
    here, here_cal, _report = _train(SAMPLE, "j1", calibration=options)
    on_dask, dask_cal, _report = _train(SAMPLE, "dask", client, calibration=options)
    assert dask_cal.expected_fpr is not None and dask_cal == here_cal
    here.save(tmp_path / "here")
    on_dask.save(tmp_path / "dask")
    assert (tmp_path / "here").read_bytes() == (tmp_path / "dask").read_bytes()


@pytest.mark.slow
def test_every_j_writes_the_same_model_file_on_enron_spam(tmp_path, monkeypatch, shared_corpus):
    """The same on Enron-Spam with the defaults (partitions of 500, word pairs kept):
    ``-j 1`` and ``-j 2`` once wrote models that differed in their last bits."""
    monkeypatch.setenv("SPAMNB_HOME", str(tmp_path / "home"))
    digest = _digests(tmp_path, shared_corpus("enron-spam"), [("one", ["-j", "1"]), ("two", ["-j", "2"])])
    assert digest["one"] == digest["two"], digest


def test_log_odds_many_is_score_message_by_message():
    """``Scorer.log_odds_many`` (the held-out passes' one call per fold) gives
    ``score``'s log-odds of each message bit for bit, an empty message and
    unknown tokens included; bounds outside the hashes are refused."""
    from array import array

    from spamnb.bayes import token_kernels
    from spamnb.estimator import calibrate
    from spamnb.estimator.counting import count_messages, counting_spec
    from spamnb.training.corpus import labelled_messages

    messages = [(m.data, m.is_spam) for m in labelled_messages([SAMPLE])]
    spam_filter = SpamFilter()
    counts = count_messages(counting_spec(spam_filter), messages, n_folds=10, group=False)
    fold_class_count, folds = counts.class_count[2:].reshape(-1, 2), counts.sparse_folds()
    fitted = counts.to_filter(spam_filter)
    models = calibrate.FoldModels.from_counts(fitted, fold_class_count, folds)
    stream = fitted.tokenizer_.stream
    streams = [stream(data).hashes for data, _ in messages[:60]] + [array("Q"), array("Q", [12345, 678])]
    for k in (0, 3):
        scorer = models.scorers_[k]
        bounds = np.cumsum([0] + [len(h) for h in streams]).astype(np.int64)
        hashes = np.frombuffer(b"".join(streams), dtype=np.uint64)
        got = np.frombuffer(scorer.log_odds_many(hashes, bounds))
        expected = [models.log_odds(k, h) for h in streams]
        assert got.tobytes() == np.array(expected).tobytes()
        assert len(scorer.log_odds_many(hashes, bounds[:1])) == 0
        with pytest.raises(ValueError):
            scorer.log_odds_many(hashes, np.array([0, hashes.size + 1], dtype=np.int64))


@pytest.mark.parametrize("fan_in,ends", [(2, [3, 3, 9, 10, 17, 17, 20]), (3, [20]), (8, list(range(1, 21))),
                                         (2, [])])
def test_add_counts_tree_is_the_partitions_merged_in_the_tree(fan_in, ends):
    """``add_counts_tree`` (the held-out pass of ``-j 1``, a fold's sums) gives the
    rows of each partition counted alone and the partitions merged by
    ``TreeReduce`` (log counts, length-normalised: the order of the additions
    shows in the last bits), empty partitions and short last groups included."""
    from spamnb.bayes import token_kernels
    from spamnb.estimator.counting import Counts, TreeReduce

    rnd = np.random.default_rng(51)
    n, counts, length = 40, token_kernels.COUNTS_LOG, 5.0
    messages = [rnd.integers(0, n, size=rnd.integers(0, 30)).astype(np.int32) for _ in range(20)]
    rows_of = rnd.integers(0, 2, size=20).astype(np.uint8)
    bounds = np.cumsum([0] + [m.size for m in messages]).astype(np.int64)
    idx = np.concatenate(messages).astype(np.int32)
    ham, spam = np.zeros(n), np.zeros(n)
    assert token_kernels.add_counts_tree(idx, bounds, rows_of, np.array(ends, dtype=np.int64), fan_in, ham, spam,
                                         counts, length) == len(ends)
    tree = TreeReduce(fan_in)
    hashes = np.arange(1, n + 1, dtype=np.uint64)   # every partition over the same n tokens, in order
    offsets = np.zeros(n + 1, dtype=np.uint64)
    for start, stop in zip([0] + ends[:-1], ends):
        part = np.zeros((2, n))
        token_kernels.add_counts_rows(idx[bounds[start]:bounds[stop]], bounds[start:stop + 1] - bounds[start],
                                      rows_of[start:stop], part[0], part[1], counts, length)
        tree.add(Counts(hashes, offsets, b"", np.zeros(2), part, np.zeros(n, dtype=np.int32)))
    expected = tree.result().dense if ends else np.zeros((2, n))
    assert np.asarray(expected)[0].tobytes() == ham.tobytes() and np.asarray(expected)[1].tobytes() == spam.tobytes()
    with pytest.raises(ValueError):
        token_kernels.add_counts_tree(idx, bounds, rows_of, np.array([21], dtype=np.int64), fan_in, ham, spam,
                                      counts, length)
    # the indices of a wider vocabulary read through a map to these columns (partition_fold_sums): the same rows
    local = np.full(3 * n, -7, dtype=np.int32)
    wide = (3 * idx + 1).astype(np.int32)
    local[wide] = idx
    mapped = np.zeros((2, n))
    token_kernels.add_counts_tree(wide, bounds, rows_of, np.array(ends, dtype=np.int64), fan_in, mapped[0], mapped[1],
                                  counts, length, local=local)
    assert mapped[0].tobytes() == ham.tobytes() and mapped[1].tobytes() == spam.tobytes()
    if idx.size and ends:
        with pytest.raises(ValueError):   # an index past the map
            token_kernels.add_counts_tree(wide, bounds, rows_of, np.array(ends, dtype=np.int64), fan_in, mapped[0],
                                          mapped[1], counts, length, local=local[:int(wide.max())])


def test_message_features_go_through_the_one_entry(tmp_path):
    """``pipeline.train`` of a filter with message features is ``SpamFilter.fit``
    over the corpus (read in this process): the same model file, the same
    default cutoffs; it refuses workers and Dask with a ValueError."""
    from spamnb.training.corpus import labelled_messages

    options = {"target_fpr": 0.01}
    fitted, cal = pipeline.train([SAMPLE], spam_filter=SpamFilter(feature_weight=1.0), calibration=options)
    messages = labelled_messages([SAMPLE])
    by_fit = SpamFilter(feature_weight=1.0).fit([m.data for m in messages], [m.is_spam for m in messages],
                                                target_fpr=0.01)
    assert fitted.features_ is not None and cal == by_fit.calibration_ and cal is not None
    fitted.save(tmp_path / "train")
    by_fit.save(tmp_path / "fit")
    assert (tmp_path / "train").read_bytes() == (tmp_path / "fit").read_bytes()
    for executor in ({"n_jobs": 2}, {"dask": "tcp://127.0.0.1:9"}):
        with pytest.raises(ValueError, match="feature"):
            pipeline.train([SAMPLE], spam_filter=SpamFilter(feature_weight=1.0), **executor)


@pytest.mark.parametrize("counts, length", [("log", 1.0), ("raw", 0.0), ("binary", 2.5)])
def test_held_out_log_odds_by_index_is_the_scorer_by_hash(counts, length):
    """``token_kernels.held_out_log_odds`` (a fold's messages scored by their
    vocabulary indices, ``local_of`` giving each token's place in the model)
    is ``Scorer.log_odds_many`` of the same messages' hashes over a hash index
    that maps each token's hash to that place, bit for bit: repeated tokens,
    tokens unknown to the model (-1), empty messages; and out-of-range
    indices are refused."""
    from spamnb.bayes import token_kernels
    from spamnb.estimator.defaults import COUNT_TRANSFORMS

    rng = np.random.default_rng(7)
    n_vocab, m = 500, 300
    tokens = np.sort(rng.choice(n_vocab, m, replace=False))        # the model's tokens, in vocabulary order
    local_of = np.full(n_vocab, -1, dtype=np.int32)
    local_of[tokens] = np.where(rng.random(m) < 0.8, np.arange(m), -1)   # a fifth unknown to the model
    hashes = rng.integers(1, 2**63, n_vocab, dtype=np.uint64)
    lengths = rng.integers(0, 60, 40)
    lengths[3] = 0
    bounds = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    idx = rng.choice(tokens[:40], int(bounds[-1])).astype(np.int32)   # few tokens: repeats in a message
    log_count = np.log(rng.random(2 * m) * 50 + 1)
    log_norm, log_prior = [7.25, 6.5], [0.0, -0.3]
    capacity = 1024
    table, index = np.zeros(capacity, dtype=np.uint64), np.full(capacity, -1, dtype=np.int32)
    token_kernels.insert(table, index, np.ascontiguousarray(hashes[tokens]), np.empty(m, dtype=np.int32), 0,
                         np.empty(m, dtype=np.int32))
    occupied = np.flatnonzero(table != 0)
    index[occupied] = local_of[tokens[index[occupied]]]
    transform = COUNT_TRANSFORMS[counts]
    scorer = token_kernels.Scorer(table, index, log_count, m, log_norm, log_prior, transform, length)
    expected = np.frombuffer(scorer.log_odds_many(np.ascontiguousarray(hashes[idx]), bounds))
    got = np.frombuffer(token_kernels.held_out_log_odds(idx, bounds, local_of, log_count, log_norm, log_prior,
                                                        transform, length))
    assert got.tobytes() == expected.tobytes() and got[3] == log_prior[1] - log_prior[0]
    bad = idx.copy()
    bad[5] = n_vocab
    with pytest.raises(ValueError):
        token_kernels.held_out_log_odds(bad, bounds, local_of, log_count, log_norm, log_prior, transform, length)
    for short in (log_count[:-1], log_count[:20]):   # not two rows; a model without the places mapped to
        with pytest.raises(ValueError):
            token_kernels.held_out_log_odds(idx, bounds, local_of, short, log_norm, log_prior, transform, length)



def test_every_counting_path_writes_where_each_message_s_pairs_start():
    """Each message's pairs_start goes to the fold files by every counting
    path (-j 1's and a worker's by partitions, SpamFilter.fit's message by
    message): a filter whose pair weight is not 1 scores the held-out
    messages by them (calibrate.held_out_by_fold)."""
    from spamnb.estimator import calibrate
    from spamnb.estimator.counting import count_variants, counting_spec
    from spamnb.mail.tokenizer import Tokenizer
    from spamnb.training.corpus import labelled_messages

    messages = [(m.data, m.is_spam) for m in labelled_messages([SAMPLE])][::3]
    spec = counting_spec(SpamFilter(Tokenizer(word_pairs=2), pair_weight=0.5))
    starts = []
    for fan_in in (None, 8):
        with calibrate.FoldSpill(10) as spill:
            count_variants([spec], [messages] if fan_in else messages, n_folds=10, group=False, fold_spills=[spill],
                           fan_in=fan_in)
            starts.append([spill.pairs_starts(k).tolist() for k in range(10)])
    assert starts[0] == starts[1] and sum(s > 0 for fold in starts[1] for s in fold) > len(messages) // 2
