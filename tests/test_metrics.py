import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spamnb.bayes import metrics as m

sk_metrics = pytest.importorskip("sklearn.metrics")


# ---------------------------------------------------------------- hand-computed cases
Y = [True, True, False, False, True, False, False]
P = ["spam", "unsure", "ham", "spam", "ham", "unsure", "ham"]
# true ham:  ham, spam, unsure, ham   -> ham 2, unsure 1, spam 1
# true spam: spam, unsure, ham        -> ham 1, unsure 1, spam 1


def test_verdict_confusion_matrix_by_hand():
    cm = m.verdict_confusion_matrix(Y, P)
    assert cm.tolist() == [[2, 1, 1], [1, 1, 1]]
    assert m.VERDICT_COLUMNS == ("ham", "unsure", "spam")


def test_rates_by_hand_with_unsure():
    assert m.false_positive_rate(Y, P) == pytest.approx(1 / 4)   # unsure ham is not a false positive
    assert m.false_negative_rate(Y, P) == pytest.approx(2 / 3)   # unsure spam is missed
    assert m.recall(Y, P) == pytest.approx(1 / 3)
    assert m.specificity(Y, P) == pytest.approx(2 / 4)
    assert m.precision(Y, P) == pytest.approx(1 / 2)
    assert m.accuracy(Y, P) == pytest.approx(3 / 7)
    assert m.unsure_rate(Y, P) == pytest.approx(2 / 7)
    assert m.unsure_rate(Y, P, "ham") == pytest.approx(1 / 4)
    assert m.unsure_rate(Y, P, "spam") == pytest.approx(1 / 3)
    # f1 = 2TP / (2TP + FP + FN) with FN = 2 (one ham verdict, one unsure)
    assert m.f1(Y, P) == pytest.approx(2 / (2 + 1 + 2))


def test_labels_as_strings_bools_and_ints_agree():
    y_str = ["spam" if v else "ham" for v in Y]
    y_int = [int(v) for v in Y]
    for y in (Y, y_str, y_int, np.array(Y), ["SPAM" if v else "Ham" for v in Y]):
        assert m.verdict_confusion_matrix(y, P).tolist() == [[2, 1, 1], [1, 1, 1]]
    assert m.as_spam_labels(y_str).tolist() == Y


def test_bad_labels_raise():
    with pytest.raises(ValueError):
        m.as_spam_labels(["spam", "unsure"])  # unsure is a verdict, never a truth
    with pytest.raises(ValueError):
        m.as_verdicts(["spam", "eggs"])
    with pytest.raises(ValueError):
        m.as_spam_labels([0, 2])
    with pytest.raises(ValueError):
        m.verdict_confusion_matrix([True, False], ["spam"])


def test_empty_denominators_are_nan():
    assert math.isnan(m.precision([True, False], ["ham", "ham"]))
    assert math.isnan(m.false_positive_rate([True, True], ["spam", "ham"]))


def test_confusion_matrix_general_by_hand():
    y_true = ["a", "b", "a", "c", "b"]
    y_pred = ["a", "a", "c", "c", "b"]
    cm = m.confusion_matrix(y_true, y_pred)
    assert cm.tolist() == [[1, 0, 1], [1, 1, 0], [0, 0, 1]]
    # labels reorder rows and columns; pairs outside labels are dropped
    cm2 = m.confusion_matrix(y_true, y_pred, labels=["c", "a"])
    assert cm2.tolist() == [[1, 0], [1, 1]]


def test_roc_curve_by_hand_with_ties():
    y = [True, False, True, False, True, False]
    s = [0.9, 0.9, 0.5, 0.3, 0.3, 0.1]
    fpr, tpr, thr = m.roc_curve(y, s)
    assert thr.tolist() == [np.inf, 0.9, 0.5, 0.3, 0.1]      # one point per distinct score
    assert tpr.tolist() == pytest.approx([0, 1 / 3, 2 / 3, 1, 1])
    assert fpr.tolist() == pytest.approx([0, 1 / 3, 1 / 3, 2 / 3, 1])
    # pairs (spam, ham): 0.9 vs {0.9 tie, 0.3, 0.1} = 2.5; 0.5 vs {0.9, 0.3, 0.1} = 2;
    # 0.3 vs {0.9, 0.3 tie, 0.1} = 1.5  -> 6 / 9
    assert m.roc_auc(y, s) == pytest.approx(6 / 9)
    assert m.one_minus_auc_percent(y, s) == pytest.approx(100 * 3 / 9)


def test_all_tied_scores_give_half():
    y = [True, False, False, True, True]
    assert m.roc_auc(y, [1.0] * 5) == pytest.approx(0.5)
    fpr, tpr, thr = m.roc_curve(y, [1.0] * 5)
    assert len(thr) == 2 and fpr.tolist() == [0, 1] and tpr.tolist() == [0, 1]


def test_perfect_and_reversed_ranking():
    y = [False, False, True, True]
    assert m.roc_auc(y, [0, 1, 2, 3]) == 1.0
    assert m.roc_auc(y, [3, 2, 1, 0]) == 0.0
    assert math.isnan(m.roc_auc([True, True], [1, 2]))


def test_tpr_at_fpr_by_hand_and_ties_taken_whole():
    # 10 ham, 4 spam
    ham = [0, 1, 2, 3, 4, 5, 6, 7, 8, 20]
    spam = [7.5, 20, 30, 40]
    y = [False] * len(ham) + [True] * len(spam)
    s = ham + spam
    # FPR 0: threshold above 20 -> spam 30, 40 caught
    assert m.tpr_at_fpr(y, s, 0.0) == pytest.approx(2 / 4)
    # FPR <= 0.1 allows 1 false positive: threshold 20 takes the tied (ham 20, spam 20) group whole
    assert m.tpr_at_fpr(y, s, 0.1) == pytest.approx(3 / 4)
    # FPR 0.15 still allows only 1 ham; the spam at 7.5 needs the ham at 8 too
    assert m.tpr_at_fpr(y, s, 0.15) == pytest.approx(3 / 4)
    assert m.tpr_at_fpr(y, s, 0.2) == pytest.approx(4 / 4)
    # a tie of a spam with two ham at the top: needs FPR 2/10 to take it
    y2 = [True, False, False, True] + [False] * 8
    s2 = [5, 5, 5, 1] + [0] * 8
    assert m.tpr_at_fpr(y2, s2, 0.1) == 0.0
    assert m.tpr_at_fpr(y2, s2, 0.2) == pytest.approx(2 / 2)  # then the spam at 1 comes free


def test_threshold_sweep_counts():
    sweep = m.threshold_sweep(["spam", "ham", "spam"], [2.0, 1.0, 1.0])
    assert sweep.thresholds.tolist() == [np.inf, 2.0, 1.0]
    assert sweep.true_positives.tolist() == [0, 1, 2]
    assert sweep.false_positives.tolist() == [0, 0, 1]
    assert (sweep.n_spam, sweep.n_ham) == (2, 1)
    with pytest.raises(ValueError):
        m.threshold_sweep([True], [float("nan")])


def test_summary_and_report():
    s = [3, 1, 1, 2, 0.5, 0, -1]
    out = m.summary(Y, P, s)
    assert out["confusion"] == [[2, 1, 1], [1, 1, 1]]
    assert out["fpr"] == pytest.approx(0.25)
    assert out["auc"] == pytest.approx(m.roc_auc(Y, s))
    assert out["tpr_at_fpr_0.01"] == m.tpr_at_fpr(Y, s, 0.01)
    text = m.classification_report(Y, P, s)
    assert "unsure" in text and "1 - AUC" in text and "0.2500" in text


# ---------------------------------------------------------------- independent references
def _mann_whitney_brute(y, s):
    y = np.asarray(y, bool)
    s = np.asarray(s, float)
    pos, neg = s[y], s[~y]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(-3, 3)), min_size=2, max_size=40))
def test_auc_is_mann_whitney(pairs):
    y = [p[0] for p in pairs]
    s = [p[1] / 2 for p in pairs]  # few distinct values: many ties
    if all(y) or not any(y):
        assert math.isnan(m.roc_auc(y, s))
        return
    assert m.roc_auc(y, s) == pytest.approx(_mann_whitney_brute(y, s), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_against_sklearn_on_random_data_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = 500
    y = rng.random(n) < 0.4
    s = np.round(rng.normal(size=n) + 1.2 * y, 1)  # rounding makes ties
    assert m.roc_auc(y, s) == pytest.approx(sk_metrics.roc_auc_score(y, s), abs=1e-12)
    fpr, tpr, thr = m.roc_curve(y, s)
    sk_fpr, sk_tpr, sk_thr = sk_metrics.roc_curve(y, s, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr)
    np.testing.assert_allclose(tpr, sk_tpr)
    np.testing.assert_allclose(thr[1:], sk_thr[1:])
    # tpr_at_fpr: brute force over every candidate threshold
    for max_fpr in (0.0, 0.001, 0.01, 0.1, 0.5):
        best = 0.0
        for t in np.unique(s):
            called = s >= t
            if called[~y].mean() <= max_fpr:
                best = max(best, called[y].mean())
        assert m.tpr_at_fpr(y, s, max_fpr) == pytest.approx(best)
    pred = s >= 0.6
    assert m.precision(y, pred) == pytest.approx(sk_metrics.precision_score(y, pred))
    assert m.recall(y, pred) == pytest.approx(sk_metrics.recall_score(y, pred))
    assert m.f1(y, pred) == pytest.approx(sk_metrics.f1_score(y, pred))
    assert m.accuracy(y, pred) == pytest.approx(sk_metrics.accuracy_score(y, pred))
    tn, fp, fn, tp = sk_metrics.confusion_matrix(y, pred).ravel()
    assert m.false_positive_rate(y, pred) == pytest.approx(fp / (fp + tn))
    assert m.specificity(y, pred) == pytest.approx(tn / (fp + tn))


@pytest.mark.parametrize("seed", range(3))
def test_confusion_matrix_against_sklearn(seed):
    rng = np.random.default_rng(seed)
    names = np.array(["ham", "spam", "unsure"])
    y_true = names[rng.integers(0, 2, 300)]
    y_pred = names[rng.integers(0, 3, 300)]
    np.testing.assert_array_equal(m.confusion_matrix(y_true, y_pred), sk_metrics.confusion_matrix(y_true, y_pred))
    labels = ["unsure", "ham"]
    np.testing.assert_array_equal(m.confusion_matrix(y_true, y_pred, labels=labels),
                                  sk_metrics.confusion_matrix(y_true, y_pred, labels=labels))
    # the three-way matrix is the general one with the rows/columns picked out
    full = sk_metrics.confusion_matrix(y_true, y_pred, labels=["ham", "unsure", "spam"])
    np.testing.assert_array_equal(m.verdict_confusion_matrix(y_true, y_pred), full[[0, 2]])


def test_threshold_sweep_matches_direct_counts():
    rng = np.random.default_rng(7)
    y = rng.random(200) < 0.5
    s = rng.integers(0, 20, 200).astype(float)
    sweep = m.threshold_sweep(y, s)
    for t, tp, fp in itertools.islice(zip(sweep.thresholds, sweep.true_positives, sweep.false_positives), 1, None):
        assert tp == np.sum((s >= t) & y)
        assert fp == np.sum((s >= t) & ~y)


def test_object_arrays_of_booleans_are_labels():
    y = np.array([True, False, True], dtype=object)
    assert m.as_spam_labels(y).tolist() == [True, False, True]
    assert m.verdict_confusion_matrix(y, np.array(["spam", "unsure", "ham"], dtype=object)).tolist() == [[0, 1, 0],
                                                                                                       [1, 0, 1]]


labelled_verdicts = st.lists(st.tuples(st.booleans(), st.sampled_from(["spam", "ham", "unsure"])), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(labelled_verdicts)
def test_rate_identities(pairs):
    y = [p[0] for p in pairs]
    v = [p[1] for p in pairs]
    cm = m.verdict_confusion_matrix(y, v)
    assert cm.sum() == len(pairs) and cm[1].sum() == sum(y)
    if sum(y):
        assert m.recall(y, v) + m.false_negative_rate(y, v) == pytest.approx(1.0)
    if len(y) - sum(y):
        assert (m.specificity(y, v) + m.false_positive_rate(y, v) + m.unsure_rate(y, v, "ham")
                == pytest.approx(1.0))
    assert 0.0 <= m.accuracy(y, v) <= 1.0


scored = st.lists(st.tuples(st.booleans(), st.integers(-5, 5)), min_size=2, max_size=50).filter(
    lambda ps: any(p[0] for p in ps) and not all(p[0] for p in ps))


@settings(max_examples=150, deadline=None)
@given(scored)
def test_roc_invariances(pairs):
    y = [p[0] for p in pairs]
    s = np.array([p[1] for p in pairs], dtype=float)
    auc = m.roc_auc(y, s)
    assert m.roc_auc(y, np.exp(s) * 3 + 1) == pytest.approx(auc)      # only the order matters
    assert m.roc_auc(y, -s) == pytest.approx(1 - auc)                  # reversing the order
    caught = [m.tpr_at_fpr(y, s, x) for x in (0.0, 0.01, 0.1, 0.5, 1.0)]
    assert caught == sorted(caught) and caught[-1] == 1.0              # more FPR allowed, never less caught
    fpr, tpr, thr = m.roc_curve(y, s)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0) and np.all(np.diff(thr) < 0)
    assert len(thr) == len(np.unique(s)) + 1
