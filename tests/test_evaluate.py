import argparse
import hashlib
import io
import json
import sys

import numpy as np
import pytest
from scipy import sparse

from spamnb.cli import evaluate as cli_evaluate
from spamnb.cli.progress import Progress
from spamnb.evaluation import crossval as ev
from spamnb.estimator.calibrate import stratified_folds
from spamnb.bayes import metrics
from spamnb.model.spam_filter import SpamFilter

SPAM_WORDS = "cheap pills winner offer money free click viagra loan prize".split()
HAM_WORDS = "meeting project notes review patch build release thanks lunch agenda".split()
SHARED = "the and to of a in is it for on".split()


def _message(rng, spam, i):
    own = SPAM_WORDS if spam else HAM_WORDS
    other = HAM_WORDS if spam else SPAM_WORDS
    words = list(rng.choice(own, 12)) + list(rng.choice(other, 3)) + list(rng.choice(SHARED, 10))
    rng.shuffle(words)
    subject = " ".join(rng.choice(own, 2))
    return (f"From: sender{i}@example.org\nTo: me@example.org\nSubject: {subject}\n\n"
            + " ".join(words) + "\n").encode()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A folder tree: spam/ with 24 messages, ham/ with 36."""
    root = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(1)
    for folder, spam, n in (("spam", True, 24), ("ham", False, 36)):
        (root / folder).mkdir()
        for i in range(n):
            (root / folder / f"{i:05d}.msg").write_bytes(_message(rng, spam, i))
    return root


def _args(*argv):
    parser = argparse.ArgumentParser()
    cli_evaluate.add_arguments(parser)
    return parser.parse_args([str(a) for a in argv])


# ---------------------------------------------------------------- folds
def test_stratified_folds_partition_and_balance():
    y = np.array([True] * 23 + [False] * 41)
    folds = stratified_folds(y, 5, seed=3)
    assert len(folds) == 5
    joined = np.concatenate(folds)
    assert sorted(joined.tolist()) == list(range(len(y)))          # every message tested exactly once
    spam_per_fold = [int(y[f].sum()) for f in folds]
    ham_per_fold = [int((~y[f]).sum()) for f in folds]
    assert max(spam_per_fold) - min(spam_per_fold) <= 1
    assert max(ham_per_fold) - min(ham_per_fold) <= 1
    again = stratified_folds(y, 5, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(folds, again))  # fixed seed, same folds
    other = stratified_folds(y, 5, seed=4)
    assert not all(np.array_equal(a, b) for a, b in zip(folds, other))
    with pytest.raises(ValueError):
        stratified_folds(y, 1)


def test_md5_split_is_the_project_rule():
    relpaths = [f"spam/{i:05d}.x" for i in range(200)]
    train, test = ev.md5_split(relpaths)
    expected = [i for i, p in enumerate(relpaths) if int(hashlib.md5(p.encode()).hexdigest(), 16) % 5 == 0]
    assert test.tolist() == expected
    assert sorted(train.tolist() + test.tolist()) == list(range(200))


# ---------------------------------------------------------------- scores and verdicts
def test_verdicts_from_log_odds_cutoffs():
    logit = lambda p: np.log(p / (1 - p))  # noqa: E731
    lo = np.array([logit(0.995), logit(0.5), logit(0.005), 800.0, -800.0, 0.0])
    v = ev.verdicts_from_log_odds(lo, 0.99, 0.01)
    assert v.tolist() == ["spam", "unsure", "ham", "spam", "ham", "unsure"]
    v2 = ev.verdicts_from_log_odds(lo, 0.5, 0.5)  # two-state: P = 0.5 is spam (>= spam_cutoff first)
    assert v2.tolist() == ["spam", "spam", "ham", "spam", "ham", "spam"]
    p = ev.spam_probability(np.array([-1000.0, 0.0, 1000.0, 2.0]))
    assert p.tolist() == pytest.approx([0.0, 0.5, 1.0, 1 / (1 + np.exp(-2.0))])


def test_count_transform():
    X = sparse.csr_matrix(np.array([[0, 2, 1], [3, 0, 0]], dtype=float))
    assert ev.count_transform(X, "raw").toarray().tolist() == [[0, 2, 1], [3, 0, 0]]
    assert ev.count_transform(X, "binary").toarray().tolist() == [[0, 1, 1], [1, 0, 0]]
    np.testing.assert_allclose(ev.count_transform(X, "log").toarray(), np.log1p(X.toarray()))
    assert X.toarray()[0, 1] == 2  # the input is not modified
    with pytest.raises(ValueError):
        ev.count_transform(X, "tfidf")


# ---------------------------------------------------------------- kNN
@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_knn_against_sklearn_brute_force(metric):
    neighbors = pytest.importorskip("sklearn.neighbors")
    rng = np.random.default_rng(5)
    X_train = sparse.random(120, 40, density=0.2, random_state=1, format="csr") * 3
    X_test = sparse.random(50, 40, density=0.2, random_state=2, format="csr") * 3
    y_train = rng.random(120) < 0.4
    ks = (1, 3, 7)
    ours = ev.knn_spam_fraction(X_train, y_train, X_test, ks, metric, chunk=16)
    for k in ks:
        knn = neighbors.KNeighborsClassifier(n_neighbors=k, metric=metric, algorithm="brute")
        knn.fit(X_train, y_train)
        dist, idx = knn.kneighbors(X_test)
        expected = y_train[idx].mean(axis=1)
        np.testing.assert_allclose(ours[k], expected)


def test_knn_by_hand():
    X_train = sparse.csr_matrix(np.array([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0], [6.0, 5.0]]))
    y_train = np.array([False, False, True, True])
    X_test = sparse.csr_matrix(np.array([[0.2, 0.1], [5.5, 5.0]]))
    out = ev.knn_spam_fraction(X_train, y_train, X_test, (1, 3), "euclidean")
    assert out[1].tolist() == [0.0, 1.0]
    assert out[3].tolist() == pytest.approx([1 / 3, 2 / 3])
    # k larger than the training set: all rows vote
    assert ev.knn_spam_fraction(X_train, y_train, X_test, (10,), "cosine")[10].tolist() == [0.5, 0.5]


# ---------------------------------------------------------------- evaluation
def _fold_and_matrix(root, n_folds, fold):
    """messages, labels, train and test indices of one stratified fold (seed 0),
    and the raw count matrix of every message of the corpus at ``root``."""
    from spamnb.training.corpus import labelled_messages

    items = labelled_messages(trees=[root])
    messages = [m.data for m in items]
    y = np.array([m.is_spam for m in items])
    test = stratified_folds(y, n_folds, seed=0)[fold]
    train = np.setdiff1d(np.arange(len(y)), test)
    return messages, y, train, test, SpamFilter(counts="raw", length_norm=0).fit(messages, y).transform(messages)


def test_compare_path_equals_a_filter_trained_on_the_fold(corpus):
    """The --compare variants (one matrix of the whole corpus, cut to the fold's
    training vocabulary) give the same log-odds as a SpamFilter fitted on the fold."""
    messages, y, train, test, X_all = _fold_and_matrix(corpus, 4, 1)
    seen = X_all[train].getnnz(axis=0) > 0
    for alpha, prior, counts in [(0.1, "mle", "binary"), (1.0, "map", "raw"), (0.3, "mle", "log")]:
        f = SpamFilter(alpha=alpha, prior=prior, counts=counts, length_norm=0).fit([messages[i] for i in train],
                                                                                   y[train])  # as --compare
        direct = f.score_many([messages[i] for i in test])
        model = ev._nb_model(alpha, prior).fit(ev.count_transform(X_all[train][:, seen], counts), y[train])
        via_matrix = model.decision_function(ev.count_transform(X_all[test][:, seen], counts))
        np.testing.assert_allclose(via_matrix, direct, rtol=1e-9, atol=1e-9)


def test_nb_model_uniform_prior_scores_as_fit_prior_false(sample_corpus):
    """The one builder (prior="uniform") gives the model fit_prior=False gave,
    to the last bit, on the sample corpus."""
    from spamnb.bayes.multinomial import MultinomialNB

    _, y, train, test, X = _fold_and_matrix(sample_corpus, 5, 0)
    for alpha in (0.1, 1.0):
        built = ev._nb_model(alpha, "uniform").fit(X[train], y[train])
        before = MultinomialNB(alpha=alpha, fit_prior=False).fit(X[train], y[train])
        assert np.array_equal(built.class_log_prior_, before.class_log_prior_)
        assert np.array_equal(built.class_log_prior_, np.log([0.5, 0.5]))
        assert np.array_equal(built.decision_function(X[test]), before.decision_function(X[test]))
        assert np.array_equal(built.predict(X[test]), before.predict(X[test]))


def _three_folds(corpus):
    """``(messages, y, splits)`` of the corpus in 3 stratified folds."""
    from spamnb.training.corpus import labelled_messages

    items = labelled_messages(trees=[corpus])
    messages = [m.data for m in items]
    y = np.array([m.is_spam for m in items])
    tests = stratified_folds(y, 3, seed=0)
    splits = [(str(i), np.setdiff1d(np.arange(len(y)), t), t) for i, t in enumerate(tests)]
    return messages, y, splits


def test_evaluate_figures_match_metrics(corpus):
    messages, y, splits = _three_folds(corpus)
    result = ev.evaluate(messages, y, splits, {"alpha": 0.5}, compare=True)
    assert len(result["folds"]) == 3
    # recompute fold 0 from scratch
    train, test = splits[0][1], splits[0][2]
    f = SpamFilter(alpha=0.5).fit([messages[i] for i in train], y[train])
    lo = f.score_many([messages[i] for i in test])
    assert result["folds"][0]["one_minus_auc_percent"] == pytest.approx(metrics.one_minus_auc_percent(y[test], lo))
    assert result["folds"][0]["fpr"] == pytest.approx(
        metrics.false_positive_rate(y[test], ev.verdicts_from_log_odds(lo, f.spam_cutoff, f.ham_cutoff)))
    # mean and sample std over the folds
    values = [r["accuracy"] for r in result["folds"]]
    assert result["mean"]["accuracy"] == pytest.approx(np.mean(values))
    assert result["std"]["accuracy"] == pytest.approx(np.std(values, ddof=1))
    # pooled confusion counts every message once
    assert np.sum(result["confusion"]) == len(y)
    assert np.sum(result["confusion"][1]) == int(y.sum())
    # compare: the filter's own row equals the main figures; kNN rows are there
    names = [r["name"] for r in result["compare"]]
    own = [r for r in result["compare"] if r["name"].endswith("(filter)")]
    assert len(own) == 1
    for key in ("one_minus_auc_percent", "fpr", "fnr", "accuracy"):
        assert own[0]["mean"][key] == pytest.approx(result["mean"][key])
    assert any(n.startswith("kNN cosine k=5") for n in names)
    assert any(" map " in n for n in names) and any(n.endswith(" raw") for n in names)
    assert any("alpha=1 " in n for n in names)


# ---------------------------------------------------------------- the command
def test_run_cross_validation_with_json(corpus, tmp_path, capsys):
    out = tmp_path / "eval.json"
    code = cli_evaluate.run(_args(corpus, "--folds", 3, "--json", out, "--no-progress"))
    assert code == 0
    text = capsys.readouterr().out
    assert "stratified 3-fold" in text and "mean" in text and "± std" in text and "unsure" in text
    data = json.loads(out.read_text())
    assert len(data["folds"]) == 3
    assert sum(r["n_test"] for r in data["folds"]) == 60
    assert data["settings"]["n_spam"] == 24
    assert data["mean"]["fpr"] == pytest.approx(np.mean([r["fpr"] for r in data["folds"]]))


def test_jobs_give_the_figures_of_one_process(corpus, tmp_path, capsys):
    """evaluate -j 2 (the folds on worker processes) writes the figures of -j 1."""
    figures = {}
    for jobs in ("1", "2", "0"):
        out = tmp_path / f"j{jobs}.json"
        assert cli_evaluate.run(_args(corpus, "--folds", 4, "--json", out, "--no-progress", "-j", jobs)) == 0
        data = json.loads(out.read_text())
        figures[jobs] = (data["folds"], data["mean"], data["std"], data["confusion"])
    capsys.readouterr()
    assert figures["1"] == figures["2"] == figures["0"]
    assert len(figures["2"][0]) == 4
    with pytest.raises(SystemExit):
        _args(corpus, "-j", "-1")


def test_run_md5_split_and_train_test(corpus, capsys):
    assert cli_evaluate.run(_args(corpus, "--split", "md5", "--no-progress")) == 0
    text = capsys.readouterr().out
    n_test = sum(int(hashlib.md5(f"{d}/{i:05d}.msg".encode()).hexdigest(), 16) % 5 == 0
                 for d, n in (("spam", 24), ("ham", 36)) for i in range(n))
    assert f"(n = {n_test})" in text
    assert cli_evaluate.run(_args("--train", corpus, "--test", corpus, "--no-progress")) == 0
    assert "(n = 60)" in capsys.readouterr().out


def test_run_usage_errors(corpus, tmp_path, capsys):
    assert cli_evaluate.run(_args()) == cli_evaluate.EXIT_USAGE
    assert cli_evaluate.run(_args("--train", corpus)) == cli_evaluate.EXIT_USAGE
    assert cli_evaluate.run(_args(corpus / "ham", "--folds", 3)) == cli_evaluate.EXIT_USAGE        # ham only
    assert cli_evaluate.run(_args(corpus, "--folds", 50)) == cli_evaluate.EXIT_USAGE                # fewer spam than folds
    assert cli_evaluate.run(_args(tmp_path / "missing")) == cli_evaluate.EXIT_ERROR
    err = capsys.readouterr().err
    assert "spamnb evaluate:" in err and "both spam and ham" in err


def test_plot_without_matplotlib_is_an_error(corpus, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    code = cli_evaluate.run(_args(corpus, "--folds", 3, "--plot", tmp_path / "roc.png"))
    assert code == cli_evaluate.EXIT_ERROR == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "matplotlib" in err[0]
    assert not (tmp_path / "roc.png").exists()


def test_plot_with_matplotlib(corpus, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "roc.png"
    assert cli_evaluate.run(_args(corpus, "--folds", 3, "--plot", png, "--no-progress")) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_progress_bar_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = Progress(4, stream=stream)
        bar.step("fold 1")
        bar.step("fold 2")
        bar.close()
    assert "2/4" in tty.getvalue() and "#" in tty.getvalue()
    assert pipe.getvalue() == ""


def test_module_import_is_light():
    """The CLI builds its parser from this module on every run: no numpy at import."""
    import subprocess

    code = ("import sys; import spamnb.evaluation.crossval; "
            "sys.exit(1 if 'numpy' in sys.modules or 'scipy' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_cli_wires_the_subcommand(corpus, capsys):
    from spamnb.cli.main import main

    assert main(["evaluate", str(corpus), "--folds", "3", "--compare", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "kNN cosine k=5" in out and "(filter)" in out and "3/3" in out


def test_the_cutoffs_are_printed_exactly(corpus, capsys):
    assert cli_evaluate.run(_args(corpus, "--folds", 3, "--plain", "--no-progress")) == cli_evaluate.EXIT_OK
    out = capsys.readouterr().out
    assert "spam if P >= 0.9999992, ham if P <= 0.01798620996209156" in out  # not rounded to 0.999999


def test_evaluate_word_pairs_trains_the_folds_with_pairs(corpus):
    """--word-pairs W: each fold's filter has the pairs (its log-odds are those
    of a filter with them and their text budget, as `spamnb train` makes it,
    not without); --compare's matrix has them too."""
    from spamnb.mail.tokenizer import PAIRS_TEXT_CHARS, Tokenizer, with_pairs

    messages, y, splits = _three_folds(corpus)
    result = ev.evaluate(messages, y, splits, {"word_pairs": 2}, compare=True)
    train, test = splits[0][1], splits[0][2]
    paired = SpamFilter(tokenizer=with_pairs(2)).fit([messages[i] for i in train], y[train])
    assert paired.tokenizer_.max_text_chars == PAIRS_TEXT_CHARS
    plain = SpamFilter().fit([messages[i] for i in train], y[train])
    assert ev.make_filter({"word_pairs": 2}).tokenizer.settings == with_pairs(2).settings != Tokenizer().settings
    lo = paired.score_many([messages[i] for i in test])
    assert not np.allclose(lo, plain.score_many([messages[i] for i in test]))
    assert result["folds"][0]["one_minus_auc_percent"] == pytest.approx(metrics.one_minus_auc_percent(y[test], lo))
    assert _args("--word-pairs", "3", corpus).word_pairs == 3 and _args(corpus).word_pairs == "auto"
    with pytest.raises(SystemExit):
        _args("--word-pairs", "1", corpus)


def test_evaluate_measures_what_train_builds(sample_corpus, tmp_path, capsys):
    """By default each split's filter is the one `spamnb train` builds from its
    training part (cutoffs chosen for --target-fpr, word pairs decided) and is
    scored at its own cutoffs; --plain is the counted model at the default cutoffs."""
    from conftest import run_spamnb
    from spamnb.estimator import defaults
    from spamnb.training.corpus import labelled_messages

    out = tmp_path / "tuned.json"
    argv = ("--train", sample_corpus, "--test", sample_corpus, "--no-progress", "-j", "1")
    assert cli_evaluate.run(_args(*argv, "--target-fpr", "0.01", "--json", out)) == 0
    assert "as spamnb train builds it" in capsys.readouterr().out
    fold = json.loads(out.read_text())["folds"][0]
    home = tmp_path / "home"
    assert run_spamnb(["train", "-q", "-j", "1", "--target-fpr", "0.01", sample_corpus], home).returncode == 0
    trained = SpamFilter.load(home / "model.spamnb")
    assert (fold["spam_cutoff"], fold["ham_cutoff"], fold["word_pairs"]) == \
        (trained.spam_cutoff, trained.ham_cutoff, trained.tokenizer_.word_pairs)
    # cutoffs chosen (word pairs tried: on this sample's 300 messages they are not kept since its
    # one-message mbox files are read whole, as the library reads them; issue 36)
    assert fold["spam_cutoff"] != defaults.DEFAULT_SPAM_CUTOFF and fold["word_pairs"] == 0
    items = labelled_messages(trees=[sample_corpus])
    labels = [trained.classify(m.data).label for m in items]
    y = np.array([m.is_spam for m in items])
    missed = np.mean([label != "spam" for label, s in zip(labels, y) if s])
    assert fold["fnr"] == pytest.approx(missed)
    plain = tmp_path / "plain.json"
    assert cli_evaluate.run(_args(*argv, "--plain", "--json", plain)) == 0
    fold = json.loads(plain.read_text())["folds"][0]
    assert (fold["spam_cutoff"], fold["ham_cutoff"], fold["word_pairs"]) == \
        (defaults.DEFAULT_SPAM_CUTOFF, defaults.DEFAULT_HAM_CUTOFF, 0)
    assert "plain (counts only)" in capsys.readouterr().out
    assert cli_evaluate.run(_args(*argv, "--plain", "--target-fpr", "0.01")) == cli_evaluate.EXIT_USAGE
