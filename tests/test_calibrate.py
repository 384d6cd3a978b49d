"""spamnb.estimator.calibrate: cutoffs from cross-validation inside the training mail."""

import math
import os
import re
import tempfile

import numpy as np

import pytest

from spamnb import SpamFilter

from spamnb.bayes import arithmetic
from spamnb.estimator import calibrate
from spamnb.training.corpus import labelled_messages
from spamnb.evaluation.crossval import md5_split
from spamnb.estimator.calibrate import stratified_folds
from spamnb.estimator.defaults import DEFAULT_HAM_CUTOFF, DEFAULT_HAM_LOG_ODDS, DEFAULT_SPAM_CUTOFF

from conftest import run_spamnb


@pytest.fixture(scope="module")
def sample(sample_corpus):
    items = labelled_messages([sample_corpus])
    return [m.data for m in items], np.array([m.is_spam for m in items])


# the default counts and binary ones in the default run, raw ones with -m slow
# (and in test_streaming_fold_scores_are_fold_log_odds's default cases)
@pytest.mark.parametrize("params", [{}, {"prior": "map", "counts": "binary"},
                                    pytest.param({"counts": "raw", "alpha": 0.5}, marks=pytest.mark.slow)])
def test_fold_scores_are_those_of_filters_fitted_on_the_other_folds(sample, params):
    messages, y = sample
    spam_filter = SpamFilter(**params).fit(messages, y)
    scores = calibrate.cross_val_log_odds(spam_filter, messages, y, n_folds=5, seed=0)
    for test in stratified_folds(y, 5, 0)[:3]:
        train = np.setdiff1d(np.arange(len(y)), test)
        fold_filter = SpamFilter(**params).fit([messages[i] for i in train], y[train])
        expected = fold_filter.score_many([messages[i] for i in test])
        np.testing.assert_allclose(scores[test], expected, rtol=1e-9, atol=1e-8)


def test_choose_cutoffs_rule():
    ham = np.arange(-80.0, 20.0)           # 100 ham scores, the largest 19
    spam = np.linspace(15.0, 70.0, 100)
    spam_cut, ham_cut = calibrate.choose_cutoffs(ham, spam, target_fpr=0.001, max_unsure=1.0, margin=0.0)
    assert 19.0 < spam_cut < 19.001 and ham_cut == DEFAULT_HAM_LOG_ODDS   # no ham may reach it; ham at -4
    # never below the floor (log-odds 0: the model's own evidence says ham below it), whatever the held-out ham
    assert calibrate.choose_cutoffs(ham - 30, spam, target_fpr=0.001, max_unsure=1.0, margin=0.0) == \
        (calibrate.SPAM_CUTOFF_FLOOR, DEFAULT_HAM_LOG_ODDS)
    spam_cut, _ = calibrate.choose_cutoffs(ham, spam, target_fpr=0.02, max_unsure=1.0, margin=0.0)
    assert 17.0 < spam_cut < 17.001                                   # 2 of 100 ham may reach it
    spam_cut, _ = calibrate.choose_cutoffs(ham, spam, target_fpr=0.02, max_unsure=1.0, margin=1.5)
    assert spam_cut == pytest.approx(18.5, abs=2e-9)                   # on the 1e-9 grid, above the ham
    # a wide band is narrowed: at most max_unsure of all messages between the cutoffs
    ham = np.linspace(-30.0, 5.0, 200)
    spam = np.linspace(-10.0, 30.0, 200)      # 54 of the 400 messages between 0 and 5
    spam_cut, ham_cut = calibrate.choose_cutoffs(ham, spam, target_fpr=0.0, max_unsure=0.05, margin=0.0)
    everything = np.concatenate([ham, spam])
    assert spam_cut == pytest.approx(5.0) and spam_cut > 5.0 and 0.0 < ham_cut < spam_cut
    assert ((everything > ham_cut) & (everything < spam_cut)).sum() == 20
    assert calibrate.choose_cutoffs(ham, spam, target_fpr=0.0, max_unsure=0.3, margin=0.0)[1] == DEFAULT_HAM_LOG_ODDS
    assert calibrate.choose_cutoffs(np.full(10, 80.0), spam, 0.0)[0] == calibrate.MAX_LOG_ODDS


def test_calibrate_and_apply(sample):
    messages, y = sample
    spam_filter = SpamFilter().fit(messages, y)
    cal = calibrate.calibrate(spam_filter, messages, y, target_fpr=0.005)   # 200 ham: one may reach the cutoff
    scores = calibrate.cross_val_log_odds(spam_filter, messages, y)
    assert cal.expected_fpr <= 0.005 and cal.spam_log_odds > np.sort(scores[~y])[-2]
    assert cal.expected_spam_missed == pytest.approx(float((scores[y] < cal.spam_log_odds).mean()))
    assert cal.expected_unsure <= 0.05 + 1e-12
    assert cal.spam_cutoff == pytest.approx(1 / (1 + math.exp(-cal.spam_log_odds)))
    assert (cal.n_ham, cal.n_spam, cal.n_folds) == (200, 100, calibrate.DEFAULT_FOLDS)
    calibrate.apply(spam_filter, cal)
    assert spam_filter.spam_cutoff == cal.spam_cutoff and spam_filter.ham_cutoff <= spam_filter.spam_cutoff
    assert "cross-validation" in calibrate.describe(cal)


def test_a_target_below_one_held_out_ham_keeps_the_defaults(sample):
    """0.1 % of 200 ham is no message: the cutoff would rest on the one highest
    ham score, so the defaults are kept and the rule says how much ham it needs."""
    messages, y = sample
    spam_filter = SpamFilter().fit(messages, y)
    cal = calibrate.calibrate(spam_filter, messages, y, target_fpr=0.001)
    assert (cal.spam_cutoff, cal.ham_cutoff) == (DEFAULT_SPAM_CUTOFF, DEFAULT_HAM_CUTOFF)
    assert "too little data" in cal.rule and "needs 1000 ham" in cal.rule
    assert calibrate.min_ham_for(0.001) == 1000 and calibrate.min_ham_for(0.01) == 200
    assert calibrate.min_ham_for(0.0001) == 10000 and calibrate.min_ham_for(0) == 200


def test_too_little_data_keeps_the_defaults(sample):
    messages, y = sample
    keep = np.r_[np.flatnonzero(y)[:30], np.flatnonzero(~y)[:100]]
    spam_filter = SpamFilter().fit([messages[i] for i in keep], y[keep])
    cal = calibrate.calibrate(spam_filter, [messages[i] for i in keep], y[keep])
    assert (cal.spam_cutoff, cal.ham_cutoff) == (DEFAULT_SPAM_CUTOFF, DEFAULT_HAM_CUTOFF)
    assert cal.expected_fpr is None and "too little data" in cal.rule and "100 ham, 30 spam" in cal.rule
    assert "too little data" in calibrate.describe(cal)
    with pytest.raises(ValueError):
        calibrate.calibrate(spam_filter, messages, y, target_fpr=1.5)
    with_features = SpamFilter(feature_weight=0.1).fit(messages, y)
    cal = calibrate.calibrate(with_features, messages, y, target_fpr=0.01)
    assert cal.spam_cutoff == DEFAULT_SPAM_CUTOFF and "features" in cal.rule


def _run(home, *args):
    return run_spamnb(args, home, text=True)


@pytest.mark.slow
def test_train_sets_and_prints_the_cutoffs(tmp_path, sample_corpus):
    out = _run(tmp_path, "train", sample_corpus)   # 200 ham: too few for the default 0.1 %
    assert out.returncode == 0, out.stderr
    assert "too little data" in out.stdout and "needs 1000 ham" in out.stdout
    assert SpamFilter.load(tmp_path / "model.spamnb").spam_cutoff == DEFAULT_SPAM_CUTOFF
    out = _run(tmp_path, "train", "--target-fpr", "0.01", sample_corpus)
    assert out.returncode == 0, out.stderr
    expected = re.search(r"expected: false positives ([0-9.]+) %", out.stdout)
    assert expected and float(expected.group(1)) <= 1.0, out.stdout
    model = SpamFilter.load(tmp_path / "model.spamnb")
    assert model.spam_cutoff != DEFAULT_SPAM_CUTOFF and model.spam_cutoff > 0.999
    info = _run(tmp_path, "info")
    shown = re.search(r"spam cutoff: +P\(spam\) >= ([0-9.e-]+) \(log-odds >= ([+-][0-9.]+)\)", info.stdout)
    assert shown, info.stdout   # the cutoff rounded for reading: 4 digits of 1 - p, the log-odds to 3 decimals
    assert abs((1 - float(shown[1])) / (1 - model.spam_cutoff) - 1) < 1e-3, (shown[1], model.spam_cutoff)
    assert float(shown[2]) == round(math.log(model.spam_cutoff / (1 - model.spam_cutoff)), 3), shown[2]
    plain = _run(tmp_path, "train", "--target-fpr", "0", sample_corpus)
    assert plain.returncode == 0 and "expected" not in plain.stdout
    assert SpamFilter.load(tmp_path / "model.spamnb").spam_cutoff == DEFAULT_SPAM_CUTOFF
    assert _run(tmp_path, "train", "--target-fpr", "1.5", sample_corpus).returncode == 64


@pytest.mark.slow
def test_cutoffs_hold_on_the_fixed_split(shared_corpus):
    """On both shared corpora: the cutoffs chosen on the train part keep the test
    part's false-positive rate within 0.1 % (figures in docs/accuracy.md)."""
    for name in ("spamassassin", "enron-spam"):
        items = labelled_messages([shared_corpus(name)])
        messages = [m.data for m in items]
        y = np.array([m.is_spam for m in items])
        train, test = md5_split([m.relpath for m in items])
        train_msgs = [messages[i] for i in train]
        spam_filter = SpamFilter().fit(train_msgs, y[train])
        cal = calibrate.calibrate(spam_filter, train_msgs, y[train])
        scores = spam_filter.score_many([messages[i] for i in test])
        fpr = float((scores[~y[test]] >= cal.spam_log_odds).mean())
        assert fpr <= 0.001, name


# ---------------------------------------------------------------------------- streaming
# the default counts and raw ones in the default run; a length norm of 50 and
# binary counts with -m slow (test_fold_scores_are_those_of_filters_fitted_on_the_other_folds
# meets binary counts in the default run)
@pytest.mark.parametrize("params", [{}, {"counts": "raw", "prior": "map"},
                                    pytest.param({"length_norm": 50.0}, marks=pytest.mark.slow),
                                    pytest.param({"counts": "binary", "prior": "uniform", "alpha": 0.5},
                                                 marks=pytest.mark.slow)])
def test_streaming_fold_scores_are_fold_log_odds(sample, params):
    """The counting pass's fold rows and the compiled scorer give the log-odds
    fold_log_odds computes from the corpus matrix, for the same folds."""
    from spamnb.estimator import counting

    messages, y = sample
    spec = counting.counting_spec(SpamFilter(**params))
    counts = counting.count_messages(spec, zip(messages, y), n_folds=5)
    spam_filter = counts.to_filter(SpamFilter(**params))
    reference = SpamFilter(**params).fit(messages, y)
    np.testing.assert_allclose(spam_filter.word_counts_.matrix(), reference.word_counts_.matrix(), rtol=1e-12)
    models = calibrate.FoldModels.from_counts(spam_filter, *counts.folds())
    ham, spam, per_fold = calibrate.held_out_log_odds(models, spam_filter.tokenizer_, zip(messages, y))
    fold = np.array([calibrate.fold_of(m, 5) for m in messages])
    folds = [np.flatnonzero(fold == k) for k in range(5)]
    assert all(len(f) for f in folds)
    expected = calibrate.fold_log_odds(reference.transform(messages), y, folds, float(reference.alpha),
                                       reference.prior, renormalise=float(reference.length_norm) or None)
    np.testing.assert_allclose(ham, expected[~y], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(spam, expected[y], rtol=1e-9, atol=1e-9)
    assert per_fold.tolist() == counts.folds()[0].astype(int).tolist()
    assert per_fold.sum() == len(y) and per_fold[:, 1].sum() == y.sum()
    # saved and mapped (what the workers load), and the spilled token hashes
    # (what the counting pass writes): the same scores
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        loaded = calibrate.FoldModels.load(models.save(folder))
        spill = os.path.join(folder, "spill")
        with open(spill, "wb") as out:
            counting.count_messages(spec, zip(messages, y), n_folds=5, spill=out)
        again = calibrate.held_out_spilled(loaded, spill)
        assert np.array_equal(again[0], ham) and np.array_equal(again[1], spam)
        assert np.array_equal(again[2], per_fold)
        with open(spill, "r+b") as f:
            f.truncate(os.path.getsize(spill) - 3)
        with pytest.raises(ValueError, match="damaged"):
            calibrate.held_out_spilled(loaded, spill)
        del loaded


def test_fold_of_depends_on_the_message_only(sample):
    messages, y = sample
    assert [calibrate.fold_of(m) for m in messages] == [calibrate.fold_of(m, calibrate.DEFAULT_FOLDS)
                                                        for m in messages]
    folds = [calibrate.fold_of(m, 5) for m in messages]
    assert folds == [calibrate.fold_of(bytes(m), 5) for m in messages] and set(folds) == set(range(5))
    assert calibrate.fold_of(messages[0], 3) in range(3)
    # each class spreads over the folds at random (stratified in expectation only:
    # 100 spam fall 18, 9, 21, 23, 29)
    for cls in (False, True):
        sizes = np.bincount(np.array(folds)[y == cls], minlength=5)
        assert sizes.min() > 0.05 * sizes.sum() and sizes.max() < 0.35 * sizes.sum()


def _dense_fold_scorers(spam_filter, class_count, feature_count):
    """The fold models as they were before they held only their fold's tokens:
    each over the whole vocabulary (its counts minus the fold's, the others'
    tokens -1 in a copy of the vocabulary's hash index): the reference."""
    from spamnb.bayes import token_kernels
    from spamnb.estimator.defaults import COUNT_TRANSFORMS

    alpha = float(spam_filter.alpha)
    total = np.asarray(spam_filter.word_counts_.matrix(), dtype=np.float64)
    keys = np.frombuffer(spam_filter.vocabulary_.keys, dtype=np.uint64)
    values = np.frombuffer(spam_filter.vocabulary_.values, dtype=np.int32)
    occupied = np.flatnonzero(keys != 0)
    present = (feature_count[:, 0] > 0) | (feature_count[:, 1] > 0)
    in_folds = present.sum(axis=0)
    scorers = []
    for k in range(feature_count.shape[0]):
        seen = in_folds - present[k] >= 1
        fc = total - feature_count[k]
        np.maximum(fc, 0.0, out=fc)
        fold_values = values.copy()
        fold_values[occupied] = np.where(seen[values[occupied]], values[occupied], -1)
        n_ham, n_spam = np.asarray(spam_filter.class_count_) - class_count[k]
        scorers.append(token_kernels.Scorer(keys, fold_values, np.log(fc + alpha).ravel(), total.shape[1],
                                            np.log(fc.sum(axis=1) + alpha * int(seen.sum())).tolist(),
                                            [0.0, arithmetic.prior_log_odds(spam_filter.prior, n_ham, n_spam)],
                                            COUNT_TRANSFORMS[spam_filter.counts], float(spam_filter.length_norm)))
    return scorers


@pytest.mark.parametrize("params", [{}, {"counts": "raw", "prior": "map"}, {"length_norm": 50.0}])
def test_fold_models_hold_their_folds_tokens_and_score_as_dense_ones(sample, params):
    """Fold k's model holds fold k's tokens only (spamnb train's peak memory),
    from the dense fold counts or their non-zero entries alike, and scores
    every message of fold k bit for bit as the model over the whole
    vocabulary does; it is much smaller than n_folds dense models."""
    from spamnb.estimator import counting

    messages, y = sample
    spec = counting.counting_spec(SpamFilter(**params))
    counts = counting.count_messages(spec, zip(messages, y), n_folds=calibrate.DEFAULT_FOLDS)
    spam_filter = counts.to_filter(SpamFilter(**params))
    class_count, feature_count = counts.folds()
    dense = calibrate.FoldModels.from_counts(spam_filter, class_count, feature_count)
    sparse = calibrate.FoldModels.from_counts(spam_filter, class_count, counts.sparse_folds())
    for name in calibrate.FoldModels._NAMES:
        assert np.array_equal(dense.arrays[name], sparse.arrays[name]), name
    # written to a folder one fold at a time (spamnb train -j N): the same arrays, loaded as saved ones load
    with tempfile.TemporaryDirectory() as folder:
        assert calibrate.FoldModels.from_counts(spam_filter, class_count, counts.sparse_folds(), folder) == folder
        written = calibrate.FoldModels.load(folder)
        for name in calibrate.FoldModels._NAMES:
            assert written.arrays[name].dtype == dense.arrays[name].dtype, name
            assert np.array_equal(written.arrays[name], dense.arrays[name]), name
        assert (written.transform, written.length) == (dense.transform, dense.length)
        del written
    reference = _dense_fold_scorers(spam_filter, class_count, feature_count)
    stream = spam_filter.tokenizer_.stream
    for message in messages:
        fold, hashes = calibrate.fold_of(message, calibrate.DEFAULT_FOLDS), stream(message).hashes
        jll = reference[fold].score(hashes)[0]
        assert dense.log_odds(fold, hashes) == jll[1] - jll[0]
    n_features = spam_filter.vocabulary_.n_features
    held = sum(a.nbytes for a in dense.arrays.values())
    n_slots = np.frombuffer(spam_filter.vocabulary_.keys, dtype=np.uint64).size
    assert held < 0.5 * calibrate.DEFAULT_FOLDS * (16 * n_features + 4 * n_slots)


def test_a_folds_counts_made_in_the_totals_are_the_copys_and_the_totals_are_left_as_they_were():
    # held_out_by_fold from a training's counts: total - the fold's own sums, clipped at 0, and the sums of the
    # totals' rows with those put at the fold's tokens (calibrate._fold_counts_in_place), bit for bit a copy's
    rng = np.random.default_rng(5)
    total = rng.random((2, 5000)) * 7.0
    tokens = np.sort(rng.choice(5000, 1200, replace=False))
    own = total[:, tokens] * rng.random((2, tokens.size))
    own[:, ::9] = total[:, tokens[::9]] * (1.0 + 1e-15) + 1e-12   # a fold's sum over the total (rounding): 0
    before = total.copy()
    fc = own.copy()
    sums = calibrate._fold_counts_in_place(total, tokens, fc)
    expected = np.maximum(before[:, tokens] - own, 0.0)
    assert np.array_equal(fc, expected) and not fc[:, ::9].any()
    for c in range(2):
        whole = before[c].copy()
        whole[tokens] = expected[c]
        assert sums[c] == whole.sum()
    assert np.array_equal(total, before)


def test_a_folds_indices_read_alone_are_the_ones_its_messages_give():
    with calibrate.FoldSpill(3) as spill:
        for j in range(20):
            spill.write(np.arange(j, 2 * j + 1, dtype=np.int32), j % 2, j % 3)
        for k in range(3):
            assert np.array_equal(spill.indices(k), spill.fold(k)[0])
        assert spill.indices(0).dtype == np.int32 and spill.indices(0).size == sum(j + 1 for j in range(0, 20, 3))
