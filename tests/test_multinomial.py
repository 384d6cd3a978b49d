"""spamnb.bayes.multinomial.MultinomialNB: against hand-computed posteriors, sklearn,
and its own algebra (chunked == batch, unlearn inverts, merge adds)."""

from fractions import Fraction
from math import log

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from spamnb.bayes import kernels
from spamnb.bayes.multinomial import MultinomialNB
from spamnb.bayes.priors import ClassPrior

sklearn_nb = pytest.importorskip("sklearn.naive_bayes")


def random_counts(rng, n_samples, n_features, density=0.3):
    dense = rng.integers(1, 6, size=(n_samples, n_features)) * (rng.random((n_samples, n_features)) < density)
    return sp.csr_matrix(dense.astype(np.float64))


def assert_same_state(a, b):
    np.testing.assert_array_equal(a.classes_, b.classes_)
    np.testing.assert_array_equal(a.class_count_, b.class_count_)
    np.testing.assert_array_equal(a.feature_count_, b.feature_count_)


# -- a word-count table worked by hand ----------------------------------------
#
# words:          free  money  meeting  lunch
# ham  doc 1:       0     0       2       1
# ham  doc 2:       0     1       1       2
# spam doc 1:       3     2       0       0
# spam doc 2:       1     1       0       1
# spam doc 3:       2     0       0       0
# N_ham  = (0, 1, 3, 3), total 7;  N_spam = (6, 3, 0, 1), total 10
# documents: 2 ham, 3 spam.  Test message x = (1, 1, 0, 1).

TABLE_X = np.array([[0, 0, 2, 1], [0, 1, 1, 2], [3, 2, 0, 0], [1, 1, 0, 1], [2, 0, 0, 0]])
TABLE_Y = np.array(["ham", "ham", "spam", "spam", "spam"])
MESSAGE = np.array([[1, 1, 0, 1]])


def posterior_spam(prior_ham, prior_spam, theta_ham, theta_spam):
    """P(spam | MESSAGE) from exact fractions: x = (1, 1, 0, 1) picks words 0, 1, 3."""
    joint_ham = prior_ham * theta_ham[0] * theta_ham[1] * theta_ham[3]
    joint_spam = prior_spam * theta_spam[0] * theta_spam[1] * theta_spam[3]
    return joint_spam / (joint_ham + joint_spam), log(joint_ham), log(joint_spam)


F = Fraction
HAND_CASES = {
    # alpha = 1: theta_ham = (0+1, 1+1, 3+1, 3+1) / (7+4), theta_spam = (6+1, 3+1, 0+1, 1+1) / (10+4)
    "scalar alpha, mle prior": (
        dict(alpha=1.0),
        (F(2, 5), F(3, 5)),
        [F(1, 11), F(2, 11), F(4, 11), F(4, 11)],
        [F(7, 14), F(4, 14), F(1, 14), F(2, 14)],
    ),
    # alpha = (0.5, 0.5, 2, 1), sum 4: theta_ham = (0.5, 1.5, 5, 4) / 11, theta_spam = (6.5, 3.5, 2, 2) / 14
    "per-feature alpha, mle prior": (
        dict(alpha=np.array([0.5, 0.5, 2.0, 1.0])),
        (F(2, 5), F(3, 5)),
        [F(1, 22), F(3, 22), F(10, 22), F(8, 22)],
        [F(13, 28), F(7, 28), F(4, 28), F(4, 28)],
    ),
    # Dirichlet MAP class prior with pseudo-counts (2, 0.5): P(ham) = (2+2)/(5+2.5), P(spam) = (3+0.5)/(5+2.5)
    "scalar alpha, map prior": (
        dict(alpha=1.0, prior=ClassPrior("map", alpha=[2.0, 0.5])),
        (F(8, 15), F(7, 15)),
        [F(1, 11), F(2, 11), F(4, 11), F(4, 11)],
        [F(7, 14), F(4, 14), F(1, 14), F(2, 14)],
    ),
    "per-feature alpha, map prior (alpha 1)": (
        dict(alpha=np.array([0.5, 0.5, 2.0, 1.0]), prior="map"),
        (F(3, 7), F(4, 7)),
        [F(1, 22), F(3, 22), F(10, 22), F(8, 22)],
        [F(13, 28), F(7, 28), F(4, 28), F(4, 28)],
    ),
}


@pytest.mark.parametrize("case", list(HAND_CASES))
def test_posterior_matches_hand_computation(case):
    params, (prior_ham, prior_spam), theta_ham, theta_spam = HAND_CASES[case]
    model = MultinomialNB(**params).fit(sp.csr_matrix(TABLE_X), TABLE_Y)
    np.testing.assert_allclose(np.exp(model.feature_log_prob_), [[float(t) for t in theta_ham],
                                                                 [float(t) for t in theta_spam]], rtol=1e-14)
    np.testing.assert_allclose(np.exp(model.class_log_prior_), [float(prior_ham), float(prior_spam)], rtol=1e-14)
    p_spam, jll_ham, jll_spam = posterior_spam(prior_ham, prior_spam, theta_ham, theta_spam)
    np.testing.assert_allclose(model.predict_joint_log_proba(MESSAGE), [[jll_ham, jll_spam]], rtol=1e-13)
    np.testing.assert_allclose(model.predict_proba(MESSAGE), [[1 - float(p_spam), float(p_spam)]], rtol=1e-13)
    assert model.predict(MESSAGE)[0] == ("spam" if p_spam > 0.5 else "ham")
    np.testing.assert_allclose(model.decision_function(MESSAGE), [jll_spam - jll_ham], rtol=1e-13)


def test_hand_table_counts():
    model = MultinomialNB().fit(TABLE_X, TABLE_Y)
    np.testing.assert_array_equal(model.feature_count_, [[0, 1, 3, 3], [6, 3, 0, 1]])
    np.testing.assert_array_equal(model.class_count_, [2, 3])
    assert model.n_features_in_ == 4


# -- parity with scikit-learn ---------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_samples=st.integers(1, 40),
    n_features=st.integers(1, 30),
    n_classes=st.integers(1, 4),
    alpha=st.one_of(st.floats(0.01, 10), st.just("vector")),
    prior_mode=st.sampled_from(["fit", "uniform", "fixed"]),
    weighted=st.booleans(),
)
def test_matches_sklearn(seed, n_samples, n_features, n_classes, alpha, prior_mode, weighted):
    rng = np.random.default_rng(seed)
    X = random_counts(rng, n_samples, n_features, density=0.5)
    y = rng.integers(0, n_classes, n_samples)
    classes = np.unique(y)
    if alpha == "vector":
        alpha = rng.uniform(0.01, 3, n_features)
    params = dict(alpha=alpha)
    if prior_mode == "uniform":
        params["fit_prior"] = False
    elif prior_mode == "fixed":
        params["class_prior"] = rng.dirichlet(np.ones(len(classes)))
    sample_weight = rng.integers(1, 4, n_samples).astype(float) if weighted else None
    ours = MultinomialNB(**params).fit(X, y, sample_weight=sample_weight)
    theirs = sklearn_nb.MultinomialNB(force_alpha=True, **params).fit(X, y, sample_weight=sample_weight)
    X_test = random_counts(rng, 15, n_features, density=0.5)
    np.testing.assert_array_equal(ours.classes_, theirs.classes_)
    np.testing.assert_allclose(ours.feature_count_, theirs.feature_count_, rtol=1e-12)
    np.testing.assert_allclose(ours.class_count_, theirs.class_count_, rtol=1e-12)
    np.testing.assert_allclose(ours.feature_log_prob_, theirs.feature_log_prob_, rtol=1e-12)
    np.testing.assert_allclose(ours.predict_joint_log_proba(X_test), theirs.predict_joint_log_proba(X_test), rtol=1e-9)
    np.testing.assert_allclose(ours.predict_proba(X_test), theirs.predict_proba(X_test), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("implementation", ["cython", "numpy"])
def test_matches_sklearn_with_both_kernels(monkeypatch, implementation):
    if implementation == "cython" and kernels._compiled is None:
        pytest.skip("spamnb.bayes._kernels not built")
    monkeypatch.setattr(kernels, "IMPLEMENTATION", implementation)
    rng = np.random.default_rng(5)
    X = random_counts(rng, 300, 60)
    y = rng.integers(0, 2, 300)
    ours = MultinomialNB(alpha=0.3).fit(X, y)
    theirs = sklearn_nb.MultinomialNB(alpha=0.3, force_alpha=True).fit(X, y)
    np.testing.assert_allclose(ours.predict_joint_log_proba(X), theirs.predict_joint_log_proba(X), rtol=1e-9)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


# -- the algebra of counts -------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), cuts=st.lists(st.integers(0, 60), max_size=5))
def test_chunked_partial_fit_equals_fit(seed, cuts):
    rng = np.random.default_rng(seed)
    X = random_counts(rng, 60, 12)
    y = rng.choice(["ham", "spam", "other"], 60)
    weights = rng.integers(0, 3, 60).astype(float)
    whole = MultinomialNB().fit(X, y, sample_weight=weights)
    chunked = MultinomialNB()
    bounds = [0] + sorted(cuts) + [60]
    for start, stop in zip(bounds[:-1], bounds[1:]):
        chunked.partial_fit(X[start:stop], y[start:stop], classes=["ham", "other", "spam"],
                            sample_weight=weights[start:stop])
    assert_same_state(chunked, whole)
    np.testing.assert_array_equal(chunked.predict_joint_log_proba(X), whole.predict_joint_log_proba(X))


def test_unlearn_restores_the_exact_state():
    rng = np.random.default_rng(1)
    X1, X2 = random_counts(rng, 40, 10), random_counts(rng, 25, 10)
    y1, y2 = rng.integers(0, 2, 40), rng.integers(0, 2, 25)
    w2 = rng.uniform(0.5, 2, 25)
    model = MultinomialNB().fit(X1, y1)
    before = (model.class_count_.copy(), model.feature_count_.copy(), model.predict_joint_log_proba(X1))
    model.partial_fit(X2, y2, sample_weight=w2)
    assert not np.array_equal(model.feature_count_, before[1])
    model.unlearn(X2, y2, sample_weight=w2)
    np.testing.assert_allclose(model.class_count_, before[0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.feature_count_, before[1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.predict_joint_log_proba(X1), before[2], rtol=1e-12)
    # integer counts and weights: bit-exact
    exact = MultinomialNB().fit(X1, y1)
    exact.partial_fit(X2, y2, sample_weight=np.arange(25) % 3)
    exact.unlearn(X2, y2, sample_weight=np.arange(25) % 3)
    assert_same_state(exact, MultinomialNB().fit(X1, y1))


def test_unlearn_refuses_and_changes_nothing():
    model = MultinomialNB().fit(TABLE_X, TABLE_Y)
    counts, class_counts = model.feature_count_.copy(), model.class_count_.copy()
    with pytest.raises(ValueError, match="negative"):
        model.unlearn([[0, 0, 5, 0]], ["ham"])          # more "meeting" than ham ever had
    with pytest.raises(ValueError, match="negative"):
        model.unlearn([[0, 0, 0, 0]] * 3, ["ham"] * 3)  # more ham documents than learned
    with pytest.raises(ValueError, match="not among"):
        model.unlearn([[0, 0, 1, 0]], ["eggs"])
    with pytest.raises(ValueError, match="features"):
        model.unlearn([[0, 0, 1, 0, 1]], ["ham"])
    np.testing.assert_array_equal(model.feature_count_, counts)
    np.testing.assert_array_equal(model.class_count_, class_counts)
    model.unlearn(TABLE_X, TABLE_Y)
    assert not model.feature_count_.any() and not model.class_count_.any()


def test_merge_of_two_halves_equals_fit_on_all():
    rng = np.random.default_rng(2)
    X = random_counts(rng, 80, 15)
    y = rng.choice(["ham", "spam"], 80)
    whole = MultinomialNB(alpha=0.5).fit(X, y)
    left = MultinomialNB(alpha=0.5).fit(X[:30], y[:30])
    right = MultinomialNB(alpha=0.5).fit(X[30:], y[30:])
    left.merge(right)
    assert_same_state(left, whole)
    np.testing.assert_allclose(left.predict_proba(X), whole.predict_proba(X), rtol=1e-12)


def test_merge_pads_different_widths_and_checks_classes():
    rng = np.random.default_rng(3)
    X = random_counts(rng, 50, 12)
    y = rng.integers(0, 2, 50)
    narrow = MultinomialNB().fit(X[:20, :7], y[:20])
    wide = MultinomialNB().fit(X[20:], y[20:])
    narrow.merge(wide)
    padded = sp.vstack([sp.hstack([X[:20, :7], sp.csr_matrix((20, 5))]), X[20:]]).tocsr()
    assert_same_state(narrow, MultinomialNB().fit(padded, y))
    with pytest.raises(ValueError, match="different classes"):
        narrow.merge(MultinomialNB().fit(X, y + 1))
    with pytest.raises(TypeError):
        narrow.merge(ClassPrior().fit(y))


def test_growing_vocabulary():
    rng = np.random.default_rng(4)
    X_old, X_new = random_counts(rng, 30, 5), random_counts(rng, 30, 9)
    y_old, y_new = rng.integers(0, 2, 30), rng.integers(0, 2, 30)
    grown = MultinomialNB().partial_fit(X_old, y_old, classes=[0, 1]).partial_fit(X_new, y_new)
    assert grown.n_features_in_ == 9
    padded = sp.vstack([sp.hstack([X_old, sp.csr_matrix((30, 4))]), X_new]).tocsr()
    reference = MultinomialNB().fit(padded, np.concatenate([y_old, y_new]))
    assert_same_state(grown, reference)
    # predicting with the old, narrower width: missing columns are zeros
    np.testing.assert_allclose(grown.predict_joint_log_proba(X_old), reference.predict_joint_log_proba(padded[:30]),
                               rtol=1e-12)
    with pytest.raises(ValueError, match="features"):
        grown.predict(random_counts(rng, 2, 10))


def test_growing_vocabulary_with_per_feature_alpha():
    rng = np.random.default_rng(5)
    model = MultinomialNB(alpha=np.full(5, 0.5)).fit(random_counts(rng, 10, 5), rng.integers(0, 2, 10))
    counts = model.feature_count_.copy()
    wider = random_counts(rng, 10, 7)
    with pytest.raises(ValueError, match="alpha has 5 entries"):
        model.partial_fit(wider, rng.integers(0, 2, 10))
    np.testing.assert_array_equal(model.feature_count_, counts)   # unchanged
    model.alpha = np.full(7, 0.5)
    model.partial_fit(wider, rng.integers(0, 2, 10))
    assert model.feature_log_prob_.shape == (2, 7)


# -- invariances and probabilities ---------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_permutation_invariance(seed):
    rng = np.random.default_rng(seed)
    X = random_counts(rng, 40, 10)
    y = rng.integers(0, 3, 40)
    alpha = rng.uniform(0.1, 2, 10)
    X_test = random_counts(rng, 8, 10)
    model = MultinomialNB(alpha=alpha).fit(X, y)
    rows = rng.permutation(40)
    cols = rng.permutation(10)
    by_rows = MultinomialNB(alpha=alpha).fit(X[rows], y[rows])
    np.testing.assert_allclose(by_rows.predict_joint_log_proba(X_test), model.predict_joint_log_proba(X_test),
                               rtol=1e-12)
    by_cols = MultinomialNB(alpha=alpha[cols]).fit(X[:, cols], y)
    np.testing.assert_allclose(by_cols.predict_joint_log_proba(X_test[:, cols]),
                               model.predict_joint_log_proba(X_test), rtol=1e-12)
    test_rows = rng.permutation(8)
    np.testing.assert_allclose(model.predict_joint_log_proba(X_test[test_rows]),
                               model.predict_joint_log_proba(X_test)[test_rows], rtol=0)
    proba = model.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    assert ((proba >= 0) & (proba <= 1)).all()


def test_huge_documents_empty_rows_and_unseen_words():
    model = MultinomialNB().fit(TABLE_X, TABLE_Y)
    huge = np.array([[1e6, 3e5, 0, 0], [0, 0, 1e6, 1e6], [0, 0, 0, 0], [5e5, 0, 5e5, 0]])
    log_proba = model.predict_log_proba(huge)
    proba = model.predict_proba(huge)
    assert np.isfinite(log_proba).all()
    assert np.isfinite(model.predict_joint_log_proba(huge)).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert proba[0, 1] == 1.0 and proba[1, 0] == 1.0          # overwhelming evidence
    np.testing.assert_allclose(proba[2], np.exp(model.class_log_prior_))  # no words: the prior
    # a word never seen in training (alpha > 0 gives it equal mass in both classes)
    wide = MultinomialNB().fit(np.hstack([TABLE_X, np.zeros((5, 1))]), TABLE_Y)
    np.testing.assert_allclose(wide.feature_log_prob_[:, 4], [np.log(1 / 12), np.log(1 / 15)])
    assert np.isfinite(wide.predict_proba([[0, 0, 0, 0, 1e6]])).all()


def test_alpha_zero_gives_zero_probability_not_nan():
    model = MultinomialNB(alpha=0.0).fit(TABLE_X, TABLE_Y)
    assert model.feature_log_prob_[0, 0] == -np.inf   # "free" never in ham
    assert model.feature_log_prob_[1, 2] == -np.inf   # "meeting" never in spam
    proba = model.predict_proba([[1, 0, 0, 0], [0, 0, 1, 0], [1, 0, 1, 0], [0, 0, 0, 0]])
    assert not np.isnan(proba).any()
    np.testing.assert_array_equal(proba[0], [0.0, 1.0])
    np.testing.assert_array_equal(proba[1], [1.0, 0.0])
    np.testing.assert_allclose(proba[2], [0.5, 0.5])      # impossible under both: uniform
    np.testing.assert_allclose(proba[3], [0.4, 0.6])      # nothing: the prior
    # explicit stored zeros of an impossible word change nothing
    X = sp.csr_matrix((np.array([0.0, 1.0]), np.array([0, 1]), np.array([0, 2])), shape=(1, 4))
    np.testing.assert_allclose(model.predict_proba(X), model.predict_proba([[0, 1, 0, 0]]))


def test_class_without_words_and_alpha_zero_is_uniform_over_words():
    model = MultinomialNB(alpha=0.0).fit([[0, 0, 0], [1, 2, 0]], ["a", "b"])
    np.testing.assert_allclose(model.feature_log_prob_[0], np.log(1 / 3))
    assert not np.isnan(model.predict_proba([[1, 1, 1]])).any()


# -- parameters, validation, state -------------------------------------------------------

def test_prior_options():
    X, y = TABLE_X, TABLE_Y
    assert MultinomialNB().fit(X, y).prior_.method == "mle"
    assert MultinomialNB(fit_prior=False).fit(X, y).prior_.method == "uniform"
    fixed = MultinomialNB(class_prior=[0.9, 0.1]).fit(X, y)
    np.testing.assert_allclose(np.exp(fixed.class_log_prior_), [0.9, 0.1])
    np.testing.assert_allclose(fixed.class_count_, [2, 3])   # counts still kept
    template = ClassPrior("map", alpha=3.0)
    model = MultinomialNB(prior=template).fit(X, y)
    assert model.prior_ is not template and not hasattr(template, "classes_")
    np.testing.assert_allclose(np.exp(model.class_log_prior_), [5 / 11, 6 / 11])
    with pytest.raises(ValueError, match="not both"):
        MultinomialNB(prior="map", class_prior=[0.5, 0.5]).fit(X, y)
    with pytest.raises(ValueError, match="prior must be"):
        MultinomialNB(prior="bogus").fit(X, y)


def test_partial_fit_adds_in_place_and_refuses_atomically():
    model = MultinomialNB().fit(TABLE_X, TABLE_Y)
    counts = model.feature_count_
    log_prob = model.feature_log_prob_
    model.partial_fit([[1, 0, 0, 0]], ["spam"])
    assert model.feature_count_ is counts and counts[1, 0] == 7     # same width: in place
    assert model.feature_log_prob_ is not log_prob                   # derived state recomputed
    before = counts.copy()
    bad = sp.csr_matrix((np.array([1.0, -1.0]), np.array([0, 1]), np.array([0, 1, 2])), shape=(2, 4))
    with pytest.raises(ValueError, match="negative"):
        model.partial_fit(bad, ["ham", "spam"])                      # the first row is fine, the second not
    np.testing.assert_array_equal(model.feature_count_, before)
    np.testing.assert_array_equal(model.class_count_, [2, 4])
    model.feature_count_ = np.asfortranarray(before)                 # not usable in place: copied
    model.partial_fit([[1, 0, 0, 0]], ["spam"])
    assert model.feature_count_[1, 0] == 8


def test_rejects_bad_input_and_changes_nothing():
    model = MultinomialNB().fit(TABLE_X, TABLE_Y)
    counts = model.feature_count_.copy()
    with pytest.raises(ValueError, match="negative"):
        model.partial_fit([[0, -1, 0, 0]], ["ham"])
    with pytest.raises(ValueError, match="negative"):
        model.predict([[0, -1, 0, 0]])
    with pytest.raises(ValueError, match="samples"):
        model.partial_fit([[0, 1, 0, 0]], ["ham", "spam"])
    with pytest.raises(ValueError, match="not among"):
        model.partial_fit([[0, 1, 0, 0]], ["eggs"])
    with pytest.raises(ValueError, match="differ"):
        model.partial_fit([[0, 1, 0, 0]], ["ham"], classes=["ham", "eggs"])
    with pytest.raises(ValueError, match="sample_weight must be finite"):
        model.partial_fit([[0, 1, 0, 0]], ["ham"], sample_weight=[-1.0])
    with pytest.raises(ValueError, match="alpha"):
        MultinomialNB(alpha=-1.0).fit(TABLE_X, TABLE_Y)
    with pytest.raises(ValueError, match="alpha"):
        MultinomialNB(alpha=np.ones(3)).fit(TABLE_X, TABLE_Y)
    np.testing.assert_array_equal(model.feature_count_, counts)
    with pytest.raises(ValueError, match="not fitted"):
        MultinomialNB().predict(TABLE_X)
    with pytest.raises(ValueError, match="classes must be given"):
        MultinomialNB().partial_fit(TABLE_X, TABLE_Y)
    fresh = MultinomialNB()
    with pytest.raises(ValueError, match="negative"):
        fresh.partial_fit([[0, -1, 0, 0]], ["ham"], classes=["ham", "spam"])
    assert not hasattr(fresh, "classes_")


def test_log_prob_cache_follows_counts_and_alpha():
    model = MultinomialNB(alpha=1.0).fit(TABLE_X, TABLE_Y)
    first = model.feature_log_prob_
    assert model.feature_log_prob_ is first            # cached
    assert not first.flags.writeable
    assert first.T.flags.c_contiguous                  # feature-major for the kernel
    model.partial_fit([[0, 0, 4, 0]], ["ham"])
    assert not np.array_equal(model.feature_log_prob_, first)
    model.alpha = 2.0
    np.testing.assert_allclose(np.exp(model.feature_log_prob_[0]), np.array([2, 3, 9, 5]) / 19)
    alpha = np.ones(4)
    model.alpha = alpha
    before = model.feature_log_prob_
    alpha[0] = 10.0                                    # in-place change is noticed
    assert model.feature_log_prob_[0, 0] != before[0, 0]


def test_dense_sparse_and_dtypes_agree():
    model = MultinomialNB().fit(TABLE_X, TABLE_Y)
    expected = model.predict_joint_log_proba(MESSAGE)
    for X in (sp.csr_matrix(MESSAGE), sp.csc_matrix(MESSAGE), sp.coo_matrix(MESSAGE),
              MESSAGE.astype(np.float32), MESSAGE.astype(np.uint8), MESSAGE.tolist()):
        np.testing.assert_allclose(model.predict_joint_log_proba(X), expected, rtol=1e-12)
    sparse_fit = MultinomialNB().fit(sp.csc_matrix(TABLE_X.astype(np.int64)), list(TABLE_Y))
    assert_same_state(sparse_fit, model)


def test_pickle_round_trip_keeps_counts_and_drops_the_cache():
    import pickle

    model = MultinomialNB(alpha=0.5).fit(TABLE_X, TABLE_Y)
    expected = model.predict_joint_log_proba(MESSAGE)
    copy = pickle.loads(pickle.dumps(model))
    assert "_log_prob_cache" not in copy.__dict__
    assert_same_state(copy, model)
    np.testing.assert_array_equal(copy.predict_joint_log_proba(MESSAGE), expected)
