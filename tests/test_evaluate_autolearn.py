"""``spamnb evaluate --online --train-on-error --auto-learn`` (issue 52, item 3):
the mode ``classify --auto-learn`` and ``serve --auto-learn`` run, measured
by the command line as scripts/bench/bench_online.py measures it ("on error
+ auto-learn"), through the same code (``spamnb.evaluation.online.feedback_options``
and ``run_online``): the same figures, to the bit."""

import importlib.util
import json

import pytest

from conftest import REPO, SAMPLE_CORPUS, run_spamnb, shared_corpora

BENCH = REPO / "scripts" / "bench" / "bench_online.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_online", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench_figures(corpus):
    """bench_online's "auto" row for ``corpus``, by its own functions."""
    import numpy as np

    from spamnb.evaluation.online import online_figures
    from spamnb.model.autolearn import AUTO_LEARN_MARGIN

    bench = _bench()
    _paths, labels, datas, _how = bench.stream_of(str(corpus))
    result = bench.run_spamnb(datas, np.asarray(labels, dtype=bool), "auto", {}, AUTO_LEARN_MARGIN)
    figures = online_figures(result, threshold=0.0)
    figures["n_auto"] = int(result.auto_learned.sum())
    return figures


def _cli_figures(corpus, tmp_path):
    out = tmp_path / "online.json"
    proc = run_spamnb(["evaluate", "--online", "--train-on-error", "--auto-learn", "--json", out, corpus], tmp_path,
                      timeout=3600)
    assert proc.returncode == 0, proc.stderr.decode()
    text = proc.stdout.decode()
    assert "train on error + auto-learn (margin 2 log-odds)" in text.splitlines()[0]
    report = json.loads(out.read_text())
    return report["figures"], text


def _same(cli, bench):
    for key in ("n", "n_spam", "n_trained", "n_auto", "one_minus_roca_percent", "lam", "hm", "sm",
                "ham_at_spam_0.001", "spam_at_ham_0.001", "n_features"):
        assert cli[key] == bench[key], (key, cli[key], bench[key])


def test_auto_learn_prints_what_bench_online_measures(tmp_path):
    cli, text = _cli_figures(SAMPLE_CORPUS, tmp_path)
    bench = _bench_figures(SAMPLE_CORPUS)
    _same(cli, bench)
    assert 0 < cli["n_auto"] < cli["n_trained"]   # both kinds of learning happened
    assert f"(1-ROCA) %: {bench['one_minus_roca_percent']:.4f}\n" in text
    assert f"({bench['n_auto']} auto-learned)" in text


def test_auto_learn_differs_from_train_on_error_alone(tmp_path):
    """The option changes what is learned (it is not ignored)."""
    auto, _ = _cli_figures(SAMPLE_CORPUS, tmp_path)
    proc = run_spamnb(["evaluate", "--online", "--train-on-error", "--json", tmp_path / "e.json", SAMPLE_CORPUS],
                      tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    alone = json.loads((tmp_path / "e.json").read_text())["figures"]
    assert alone["n_trained"] < auto["n_trained"]


@pytest.mark.parametrize("args, says", [
    (["--online", "--auto-learn"], "--auto-learn goes with --train-on-error"),
    (["--online", "--train-on-error", "--auto-learn", "--margin", "1"], "--margin is for --train-on-error"),
])
def test_auto_learn_usage_errors(tmp_path, args, says):
    proc = run_spamnb(["evaluate", *args, SAMPLE_CORPUS], tmp_path)
    assert proc.returncode == 64 and says in proc.stderr.decode(), proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", ["spamassassin", "enron-spam"])
def test_auto_learn_on_the_shared_corpora(tmp_path, name):
    corpus = shared_corpora() / name
    if not corpus.is_dir():
        pytest.skip(f"{corpus}: not here")
    cli, _ = _cli_figures(corpus, tmp_path)
    _same(cli, _bench_figures(corpus))
