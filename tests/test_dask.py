"""Training and scoring on a real Dask cluster (distributed.LocalCluster, 2 worker processes)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed", reason="dask[distributed] is not installed (pip install spamnb[dask])")

import spamnb  # noqa: E402
from spamnb.training import cluster as spamnb_dask  # noqa: E402
from spamnb.estimator import counting
from spamnb.batch import classify as batch
from spamnb.batch import cluster as batch_cluster
from spamnb.training import pipeline
from spamnb.training import planning# noqa: E402
from spamnb.training.corpus import labelled_messages  # noqa: E402
from spamnb.model.spam_filter import SpamFilter  # noqa: E402

from tests.conftest import corpus_root  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "corpora"


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def file_bytes(spam_filter, path):
    spam_filter.save(path)
    return Path(path).read_bytes()


@pytest.mark.slow   # over 6 s in the default run: CI runs it in the slow step
def test_train_on_dask_writes_the_model_of_train_j(client, tmp_path):
    # 31 partitions: three levels, short last groups (the streaming tree against Dask's level by level)
    local = file_bytes(pipeline.train([SAMPLE], n_jobs=2, partition_size=10)[0], tmp_path / "local")
    on_dask = file_bytes(pipeline.train([SAMPLE], dask=client.scheduler.address, partition_size=10)[0],
                         tmp_path / "dask")
    assert local == on_dask


def test_score_returns_the_single_process_verdicts(client, tmp_path):
    model = tmp_path / "model.spamnb"
    spam_filter = pipeline.train([SAMPLE], n_jobs=1)[0]
    spam_filter.save(model)
    files = sorted(str(p) for p in (SAMPLE / "spam").iterdir())[:60]
    records = batch_cluster.score(model, files, partition_size=16).compute(scheduler=client.get)
    assert [r["message"] for r in records] == files
    for record, path in zip(records, files):
        verdict = spam_filter.classify(Path(path).read_bytes())
        assert record["verdict"] == verdict.label and record["log_odds"] == verdict.log_odds


def test_a_killed_worker_loses_results_that_dask_computes_again(client):
    """The partitions are counted and held on the workers; one worker is
    killed (SIGKILL) before the reduction; the scheduler reruns its lost
    tasks and the model is still exact."""
    from dask import delayed

    spec = counting.counting_spec(SpamFilter(counts="raw", length_norm=0))
    pieces = planning.plan_training([SAMPLE], partition_size=20)
    tasks = [delayed(planning.count_partition, pure=True)(spec, part)
             for part in planning.partitions(pieces, 20)]
    persisted = client.persist(tasks)
    distributed.wait(persisted)
    pids = client.run(os.getpid)
    held = client.has_what()
    victim = max(held, key=lambda address: len(held[address]))
    assert held[victim], "no results held on the worker to kill"
    os.kill(pids[victim], signal.SIGKILL)
    merged, _report = spamnb_dask._reduce(persisted, 8, client)
    ref = counting.Counts.from_filter(pipeline.train([SAMPLE], spam_filter=SpamFilter(counts="raw", length_norm=0), n_jobs=1,
                                                   partition_size=20)[0])
    assert np.array_equal(ref.hashes, merged.hashes) and np.array_equal(ref.feature_count, merged.feature_count)
    assert merged.class_count.tolist() == [200.0, 100.0]
    assert victim not in client.run(os.getpid) or client.run(os.getpid)[victim] != pids[victim]


@pytest.mark.slow
def test_a_worker_killed_while_counting_is_retried_exactly(client):
    # the full corpus: the sample is counted before a worker can be killed
    root, _full = corpus_root("spamassassin", fallback=False)
    ref = pipeline.train([root], spam_filter=SpamFilter(counts="raw", length_norm=0), n_jobs=2, partition_size=50)[0]
    pids = client.run(os.getpid)
    import threading

    result = {}

    def train():
        result["filter"] = pipeline.train([root], dask=client.scheduler.address,
                                          spam_filter=SpamFilter(counts="raw", length_norm=0), partition_size=50)[0]

    thread = threading.Thread(target=train)
    thread.start()
    deadline = time.monotonic() + 60
    while not any(client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    assert thread.is_alive(), "the job ended before a worker could be killed"
    os.kill(next(iter(pids.values())), signal.SIGKILL)
    thread.join(300)
    assert "filter" in result
    a, b = counting.Counts.from_filter(ref), counting.Counts.from_filter(result["filter"])
    assert np.array_equal(a.hashes, b.hashes) and np.array_equal(a.feature_count, b.feature_count)
    assert np.array_equal(a.class_count, b.class_count)


@pytest.mark.slow
def test_shared_corpus_on_dask_is_the_model_of_train_j(client, tmp_path):
    root, _full = corpus_root("spamassassin")
    local = file_bytes(pipeline.train([root], n_jobs=2)[0], tmp_path / "local")
    on_dask = file_bytes(pipeline.train([root], dask=client.scheduler.address)[0], tmp_path / "dask")
    assert local == on_dask


@pytest.mark.slow
def test_cli_train_dask(client, tmp_path):
    model = tmp_path / "dask.spamnb"
    env = dict(os.environ, PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-m", "spamnb", "train", "--dask", client.scheduler.address,
                           "--partition-size", "40", "--target-fpr", "0", "-m", str(model), str(SAMPLE)], capture_output=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "300 messages (100 spam, 200 ham)" in proc.stdout.decode()
    assert model.read_bytes() == file_bytes(pipeline.train([SAMPLE], n_jobs=1, partition_size=40)[0], tmp_path / "j1")


def test_train_with_cutoffs_scores_the_folds_on_the_workers(client, tmp_path):
    """``train --dask`` with the calibration: both passes run as Dask tasks
    (the held-out scoring too, of the spills the workers kept, with the fold
    models sent once a worker), and the model and cutoffs are those of -j 2
    with the same partitions."""
    options = {"target_fpr": 0.01}
    local, local_cal = pipeline.train([SAMPLE], n_jobs=2, partition_size=40, calibration=options)
    with distributed.get_task_stream(client) as stream:
        on_dask, dask_cal = pipeline.train([SAMPLE], dask=client.scheduler.address, partition_size=40,
                                           calibration=options)
    keys = [str(task["key"]) for task in stream.data]
    assert sum("score_spilled_bytes" in key for key in keys) == 8        # 300 messages in partitions of 40
    assert sum("count_partition_in_memory" in key for key in keys) == 8
    assert sum("_fold_models" in key for key in keys) == 1
    assert dask_cal.expected_fpr is not None and dask_cal == local_cal
    assert file_bytes(local, tmp_path / "local") == file_bytes(on_dask, tmp_path / "dask")


def test_spills_lost_with_a_worker_are_counted_again(client):
    """Between the two passes of the calibration the spills and the merged
    counts live in the workers' memory; a worker killed (SIGKILL) there
    loses its share, which the scheduler computes again: the held-out scores
    are still those of the spills and fold models computed here."""
    from spamnb.estimator import calibrate

    spam_filter = SpamFilter()
    spec = counting.counting_spec(spam_filter)
    spilled = spamnb_dask.count_corpus([SAMPLE], client=client, spec=spec, partition_size=20, n_folds=5, spill=True)
    distributed.wait(spilled.spills)
    pids = client.run(os.getpid)
    holders = {}
    for workers in client.who_has(spilled.spills + [spilled.root]).values():
        for address in workers:
            holders[address] = holders.get(address, 0) + 1
    victim = max(holders, key=holders.get)
    os.kill(pids[victim], signal.SIGKILL)
    fold_class_count, fold_feature_count = spilled.counts.folds()
    spilled.counts.to_filter(spam_filter)
    got = spamnb_dask.held_out_spilled(spilled, spam_filter, client)
    models = calibrate.FoldModels.from_counts(spam_filter, fold_class_count, fold_feature_count)
    parts = planning.partitions(planning.plan_training([SAMPLE], partition_size=20), 20)
    expected = [planning.score_spilled_bytes(planning.count_partition_in_memory(spec, part, n_folds=5)[2], models)
                for part in parts]
    assert len(got) == len(expected) == 16     # 300 messages, partitions of 20 within each folder
    for (ham, spam, per_fold), (ref_ham, ref_spam, ref_per_fold) in zip(got, expected):
        assert np.array_equal(ham, ref_ham) and np.array_equal(spam, ref_spam)
        assert np.array_equal(per_fold, ref_per_fold)
    assert sum(p[2] for p in got).tolist() == fold_class_count.tolist()
    assert client.run(os.getpid).get(victim) != pids[victim]


def test_connect_refuses_a_cluster_of_another_spamnb(client, monkeypatch):
    """The workers run spamnb 0.1.0 (this tree); a client claiming another
    version is refused before any work (a one-line error, the connection closed)."""
    assert spamnb_dask.connect(client.scheduler.address).close() is None
    monkeypatch.setattr(spamnb, "__version__", "0.0.0-other")
    with pytest.raises(spamnb_dask.ClusterError, match=r"runs spamnb .* this is 0\.0\.0-other"):
        spamnb_dask.connect(client.scheduler.address)


def test_score_lines_are_the_lines_of_classify_batch(client, tmp_path):
    import io

    model = tmp_path / "m.spamnb"
    pipeline.train([SAMPLE], n_jobs=1)[0].save(model)
    mbox = tmp_path / "in.mbox"
    mbox.write_bytes(b"".join(b"From a@b Mon Nov 23 10:40:20 2026\n" + m.data.replace(b"\nFrom ", b"\n>From ") + b"\n"
                              for m in labelled_messages([SAMPLE])[:40]))
    paths = [str(SAMPLE / "spam"), str(mbox), str(tmp_path / "missing.eml")]
    for json_lines in (False, True):
        out = io.StringIO()
        batch.classify_batch(model, paths, n_jobs=1, partition_size=25, json_lines=json_lines, out=out,
                                err=io.StringIO())
        got = "".join(batch_cluster.score_lines(model, paths, partition_size=25, json_lines=json_lines).compute())
        assert got == out.getvalue() and got.count("\n") == 50 + 40 + 1
        assert any("missing.eml" in line and "error" in line for line in got.splitlines())


@pytest.mark.slow
def test_connect_refuses_a_cluster_without_workers(monkeypatch):
    """A scheduler with no worker: the version check times out, a one-line
    ClusterError instead of waiting for ever."""
    monkeypatch.setattr(spamnb_dask, "CONNECT_TIMEOUT", 2.0)
    cluster = distributed.LocalCluster(n_workers=0, processes=True, host="127.0.0.1", dashboard_address=None)
    try:
        with pytest.raises(spamnb_dask.ClusterError, match="cannot run spamnb tasks"):
            spamnb_dask.connect(cluster.scheduler_address)
    finally:
        cluster.close()
