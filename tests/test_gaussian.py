import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spamnb.bayes.gaussian import COVARIANCE_TYPES, GaussianBayes, GaussianNB, class_statistics, combine_statistics
from spamnb.bayes.priors import ClassPrior

sklearn = pytest.importorskip("sklearn")
from sklearn.datasets import load_iris  # noqa: E402
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis  # noqa: E402
from sklearn.naive_bayes import GaussianNB as SklearnGaussianNB  # noqa: E402


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


def two_blobs(n=(40, 60), d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(0.0, 1.0, (n[0], d)), rng.normal(1.5, 2.0, (n[1], d))])
    y = np.array(["ham"] * n[0] + ["spam"] * n[1])
    return X, y


# -- agreement with scikit-learn on Iris ------------------------------------
def test_gaussian_nb_matches_sklearn(iris):
    X, y = iris
    ours = GaussianNB().fit(X, y)
    ref = SklearnGaussianNB().fit(X, y)
    np.testing.assert_allclose(ours.predict_joint_log_proba(X), ref.predict_joint_log_proba(X), rtol=1e-9)
    np.testing.assert_allclose(ours.var_, ref.var_, rtol=1e-12)
    np.testing.assert_allclose(ours.theta_, ref.theta_, rtol=1e-12)
    np.testing.assert_allclose(ours.epsilon_, ref.epsilon_, rtol=1e-12)
    np.testing.assert_allclose(ours.class_prior_, ref.class_prior_, rtol=1e-12)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))


def test_gaussian_nb_fixed_priors_and_smoothing_match_sklearn(iris):
    X, y = iris
    priors = [0.2, 0.3, 0.5]
    ours = GaussianNB(var_smoothing=1e-3, priors=priors).fit(X, y)
    ref = SklearnGaussianNB(var_smoothing=1e-3, priors=priors).fit(X, y)
    np.testing.assert_allclose(ours.predict_joint_log_proba(X), ref.predict_joint_log_proba(X), rtol=1e-9)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(ours.var_, ref.var_, rtol=1e-12)


def test_tied_matches_sklearn_lda(iris):
    X, y = iris
    n, n_classes = X.shape[0], 3
    ours = GaussianBayes("tied", reg=0.0).fit(X, y)
    # hand-computed pooled within-class covariance, unbiased (n - K)
    centred = np.vstack([X[y == k] - X[y == k].mean(axis=0) for k in range(n_classes)])
    pooled = centred.T @ centred / (n - n_classes)
    np.testing.assert_allclose(ours.covariances_, pooled, rtol=1e-12)
    for solver in ("lsqr", "eigen"):
        ref = LinearDiscriminantAnalysis(solver=solver, store_covariance=True).fit(X, y)
        # sklearn stores the MLE pooled covariance (divided by n)
        np.testing.assert_allclose(ours.covariances_ * (n - n_classes) / n, ref.covariance_, rtol=1e-10)
        np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
        np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=0.01)
        # exact relation of the linear forms: Sigma_ours = Sigma_sklearn * n / (n - K)
        scale = (n - n_classes) / n
        np.testing.assert_allclose(ours.coef_, ref.coef_ * scale, rtol=1e-8)
        log_prior = np.log(np.bincount(y) / n)
        np.testing.assert_allclose(ours.intercept_ - log_prior, (ref.intercept_ - log_prior) * scale, rtol=1e-8)


def test_full_matches_sklearn_qda(iris):
    X, y = iris
    ref = QuadraticDiscriminantAnalysis(store_covariance=True, reg_param=0.0).fit(X, y)
    # older sklearn divides the class scatter by n_c - 1, newer by n_c: follow the installed one
    class0 = X[y == 0]
    unbiased = np.allclose(ref.covariance_[0], np.cov(class0, rowvar=False, bias=False), rtol=1e-10)
    assert unbiased or np.allclose(ref.covariance_[0], np.cov(class0, rowvar=False, bias=True), rtol=1e-10)
    ours = GaussianBayes("full", reg=0.0, unbiased=unbiased).fit(X, y)
    np.testing.assert_allclose(ours.covariances_, np.array(ref.covariance_), rtol=1e-10, atol=1e-14)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), rtol=1e-8, atol=1e-12)
    # sklearn's per-class decision values omit the -d/2 log(2 pi) term
    d = X.shape[1]
    np.testing.assert_allclose(
        ours.predict_joint_log_proba(X) + 0.5 * d * math.log(2 * math.pi), ref.decision_function(X), rtol=1e-9
    )


def test_full_unbiased_is_numpy_cov(iris):
    X, y = iris
    ours = GaussianBayes("full", reg=0.0, unbiased=True).fit(X, y)
    for k in range(3):
        np.testing.assert_allclose(ours.covariances_[k], np.cov(X[y == k], rowvar=False), rtol=1e-12)
    diag = GaussianBayes("diag", reg=0.0, unbiased=True).fit(X, y)
    np.testing.assert_allclose(diag.covariances_, [X[y == k].var(axis=0, ddof=1) for k in range(3)], rtol=1e-12)


def test_gaussian_nb_is_the_diag_case(iris):
    X, y = iris
    nb = GaussianNB(var_smoothing=1e-4).fit(X, y)
    gb = GaussianBayes("diag", reg=1e-4).fit(X, y)
    np.testing.assert_array_equal(nb.predict_joint_log_proba(X), gb.predict_joint_log_proba(X))
    assert nb.covariance == "diag" and nb.reg == 1e-4 and isinstance(nb, GaussianBayes)


# -- closed forms ---------------------------------------------------------
def test_1d_equal_variance_boundary():
    rng = np.random.default_rng(1)
    a, b = rng.normal(-1.0, 1.3, 30), rng.normal(2.0, 1.3, 50)
    X = np.concatenate([a, b])[:, None]
    y = np.array([0] * 30 + [1] * 50)
    p1, p2 = 0.3, 0.7
    model = GaussianBayes("tied", reg=0.0, priors=[p1, p2]).fit(X, y)
    mu1, mu2 = a.mean(), b.mean()
    sigma2 = (np.sum((a - mu1) ** 2) + np.sum((b - mu2) ** 2)) / (80 - 2)
    assert model.covariances_[0, 0] == pytest.approx(sigma2, rel=1e-12)
    boundary = (mu1 + mu2) / 2 + sigma2 * math.log(p1 / p2) / (mu2 - mu1)
    assert model.decision_function([[boundary]])[0] == pytest.approx(0.0, abs=1e-9)
    assert model.predict([[boundary - 1e-3], [boundary + 1e-3]]).tolist() == [0, 1]
    # the log-odds is linear in x with slope (mu2 - mu1) / sigma^2
    xs = np.array([[-3.0], [0.0], [4.0]])
    slope = np.diff(model.decision_function(xs)) / np.diff(xs[:, 0])
    np.testing.assert_allclose(slope, (mu2 - mu1) / sigma2, rtol=1e-10)


@pytest.mark.parametrize("covariance", ["full", "diag"])
def test_1d_unequal_variance_boundaries(covariance):
    rng = np.random.default_rng(2)
    a, b = rng.normal(0.0, 1.0, 40), rng.normal(1.0, 3.0, 60)
    X = np.concatenate([a, b])[:, None]
    y = np.array([0] * 40 + [1] * 60)
    model = GaussianBayes(covariance, reg=0.0).fit(X, y)
    m1, m2, v1, v2 = a.mean(), b.mean(), a.var(), b.var()
    p1, p2 = 0.4, 0.6
    # f1(x) - f2(x) = A x^2 + B x + C = 0
    A = -0.5 / v1 + 0.5 / v2
    B = m1 / v1 - m2 / v2
    C = -0.5 * m1**2 / v1 + 0.5 * m2**2 / v2 + math.log(p1 / p2) - 0.5 * math.log(v1 / v2)
    disc = B * B - 4 * A * C
    assert disc > 0
    roots = np.sort([(-B - math.sqrt(disc)) / (2 * A), (-B + math.sqrt(disc)) / (2 * A)])
    np.testing.assert_allclose(model.decision_function(roots[:, None]), 0.0, atol=1e-9)
    lo, hi = roots
    probes = np.array([[lo - 1.0], [(lo + hi) / 2], [hi + 1.0]])
    # class 0 (narrow) wins between the roots, class 1 (wide) outside
    assert model.predict(probes).tolist() == [1, 0, 1]


def test_2d_tied_direction_and_linear_form():
    rng = np.random.default_rng(3)
    cov = np.array([[2.0, 0.8], [0.8, 1.0]])
    chol = np.linalg.cholesky(cov)
    a = rng.normal(size=(50, 2)) @ chol.T
    b = rng.normal(size=(70, 2)) @ chol.T + [1.0, -2.0]
    X, y = np.vstack([a, b]), np.array([0] * 50 + [1] * 70)
    model = GaussianBayes("tied", reg=0.0).fit(X, y)
    mu1, mu2 = a.mean(axis=0), b.mean(axis=0)
    pooled = ((a - mu1).T @ (a - mu1) + (b - mu2).T @ (b - mu2)) / (120 - 2)
    np.testing.assert_allclose(model.coef_[1] - model.coef_[0], np.linalg.solve(pooled, mu2 - mu1), rtol=1e-10)
    # jll = X coef^T + intercept + const(x), const(x) computed by hand
    inv = np.linalg.inv(pooled)
    const = -0.5 * np.einsum("ij,jk,ik->i", X, inv, X) - 0.5 * np.log(np.linalg.det(pooled)) - math.log(2 * math.pi)
    jll = X @ model.coef_.T + model.intercept_ + const[:, None]
    np.testing.assert_allclose(model.predict_joint_log_proba(X), jll, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(model.intercept_, np.log([50 / 120, 70 / 120]) - 0.5 * np.array(
        [mu1 @ inv @ mu1, mu2 @ inv @ mu2]), rtol=1e-10)


def test_spherical_is_nearest_mean_with_equal_variances_and_priors():
    rng = np.random.default_rng(4)
    offsets = rng.normal(size=(25, 3))
    offsets -= offsets.mean(axis=0)
    centres = np.array([[0.0, 0.0, 0.0], [3.0, 1.0, -1.0], [-2.0, 2.5, 1.0]])
    X = np.vstack([c + offsets for c in centres])  # identical scatter in every class
    y = np.repeat([0, 1, 2], 25)
    model = GaussianBayes("spherical", reg=0.0).fit(X, y)
    expected_var = np.sum(offsets**2) / (25 * 3)
    np.testing.assert_allclose(model.covariances_, expected_var, rtol=1e-12)
    np.testing.assert_allclose(model.means_, centres, atol=1e-12)
    probes = rng.normal(0.0, 3.0, size=(500, 3))
    nearest = np.argmin(((probes[:, None, :] - centres[None]) ** 2).sum(axis=2), axis=1)
    np.testing.assert_array_equal(model.predict(probes), nearest)


def test_diag_likelihood_is_sum_of_1d_normals():
    X, y = two_blobs()
    model = GaussianBayes("diag", reg=0.0).fit(X, y)
    probes = np.array([[0.5, -1.0, 2.0], [3.0, 0.0, -4.0]])
    for k, label in enumerate(model.classes_):
        mu, var = X[y == label].mean(axis=0), X[y == label].var(axis=0)
        expected = np.sum(-0.5 * np.log(2 * np.pi * var) - (probes - mu) ** 2 / (2 * var), axis=1)
        np.testing.assert_allclose(model.log_likelihood(probes)[:, k], expected, rtol=1e-12)


# -- incremental learning ---------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    data=hnp.arrays(
        np.float64,
        st.tuples(st.integers(6, 40), st.integers(1, 4)),
        elements=st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
    )
    | hnp.arrays(  # few distinct values: constant columns, rounding-level variances
        np.float64, st.tuples(st.integers(6, 40), st.integers(1, 4)), elements=st.sampled_from([0.1, 1.1, 7.0])
    ),
    seed=st.integers(0, 2**32 - 1),
    covariance=st.sampled_from(COVARIANCE_TYPES),
    n_chunks=st.integers(1, 5),
)
# a column of zeros and one value near 1e-160: its variance underflows, so reg's share of it would be 0
@example(data=np.array([[1.23550778e-160], [0.0], [0.0], [0.0], [0.0], [0.0]]), seed=0, covariance="diag",
         n_chunks=1)
def test_chunked_partial_fit_equals_fit(data, seed, covariance, n_chunks):
    rng = np.random.default_rng(seed)
    n = data.shape[0]
    y = np.concatenate([[0, 1, 2, 0, 1, 2], rng.integers(0, 3, n - 6)])
    weights = rng.uniform(0.5, 2.0, n)
    one = GaussianBayes(covariance, reg=1e-6).fit(data, y, sample_weight=weights)
    chunked = GaussianBayes(covariance, reg=1e-6)
    order = rng.permutation(n)
    cuts = np.sort(rng.choice(np.arange(1, n), size=min(n_chunks - 1, n - 1), replace=False))
    for rows in np.split(order, cuts):
        chunked.partial_fit(data[rows], y[rows], classes=[0, 1, 2], sample_weight=weights[rows])
    scale = 1.0 + np.max(np.abs(data))
    np.testing.assert_allclose(chunked.class_count_, one.class_count_, rtol=1e-12)
    np.testing.assert_allclose(chunked.means_, one.means_, rtol=1e-9, atol=1e-9 * scale)
    np.testing.assert_allclose(chunked.scatter_, one.scatter_, rtol=1e-7, atol=1e-9 * scale**2 * n)
    np.testing.assert_allclose(chunked.covariances_, one.covariances_, rtol=1e-7, atol=1e-9 * scale**2)


def test_partial_fit_and_merge_equal_fit_predictions():
    X, y = two_blobs(n=(300, 500), d=4, seed=5)
    for covariance in COVARIANCE_TYPES:
        one = GaussianBayes(covariance).fit(X, y)
        # the right half holds spam only: a class with zero count merges exactly
        left = GaussianBayes(covariance).partial_fit(X[:350], y[:350], classes=["ham", "spam"])
        right = GaussianBayes(covariance).partial_fit(X[350:], y[350:], classes=["ham", "spam"])
        merged = left.merge(right)
        np.testing.assert_allclose(merged.predict_joint_log_proba(X), one.predict_joint_log_proba(X), rtol=1e-10)
        np.testing.assert_allclose(merged.class_count_, [300, 500])
        chunked = GaussianBayes(covariance)
        for start in range(0, 800, 97):
            chunked.partial_fit(X[start : start + 97], y[start : start + 97], classes=["ham", "spam"])
        np.testing.assert_allclose(chunked.predict_joint_log_proba(X), one.predict_joint_log_proba(X), rtol=1e-10)


def test_statistics_helpers_against_numpy():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(30, 3))
    idx = rng.integers(0, 2, 30)
    count, mean, scatter = class_statistics(X, idx, 3)
    assert count.tolist() == [np.sum(idx == 0), np.sum(idx == 1), 0]
    for k in (0, 1):
        np.testing.assert_allclose(scatter[k], np.cov(X[idx == k], rowvar=False, bias=True) * count[k], rtol=1e-12)
    assert np.all(scatter[2] == 0) and np.all(mean[2] == 0)
    a = class_statistics(X[:10], idx[:10], 3)
    b = class_statistics(X[10:], idx[10:], 3)
    combined = combine_statistics(*a, *b)
    for got, want in zip(combined, (count, mean, scatter)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_integer_weights_equal_repeated_rows():
    X, y = two_blobs(n=(20, 30), d=2, seed=7)
    w = np.random.default_rng(8).integers(0, 4, len(y))
    for covariance in COVARIANCE_TYPES:
        weighted = GaussianBayes(covariance, unbiased=True).fit(X, y, sample_weight=w)
        repeated = GaussianBayes(covariance, unbiased=True).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
        np.testing.assert_allclose(weighted.covariances_, repeated.covariances_, rtol=1e-10)
        np.testing.assert_allclose(weighted.predict_joint_log_proba(X), repeated.predict_joint_log_proba(X), rtol=1e-10)


# -- probabilities, priors ----------------------------------------------------
@pytest.mark.parametrize("covariance", COVARIANCE_TYPES)
def test_probabilities_sum_to_one_and_decision_is_log_odds(covariance, iris):
    X, y = iris
    model = GaussianBayes(covariance).fit(X, y)
    far = X * 3.0  # far from the training data: tiny likelihoods, still normalised
    for probe in (X, far):
        proba = model.predict_proba(probe)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
        assert np.all(proba >= 0)
        np.testing.assert_array_equal(model.predict(probe), model.classes_[np.argmax(proba, axis=1)])
    X2, y2 = two_blobs()
    binary = GaussianBayes(covariance).fit(X2, y2)
    log_proba = binary.predict_log_proba(X2)
    np.testing.assert_allclose(binary.decision_function(X2), log_proba[:, 1] - log_proba[:, 0], rtol=1e-9, atol=1e-9)


def test_log_likelihood_is_jll_without_prior():
    X, y = two_blobs()
    model = GaussianNB(priors=[0.1, 0.9]).fit(X, y)
    np.testing.assert_allclose(
        model.log_likelihood(X), model.predict_joint_log_proba(X) - np.log([0.1, 0.9]), rtol=1e-12
    )
    # the likelihood does not depend on the prior
    other = GaussianNB(prior="uniform").fit(X, y)
    np.testing.assert_array_equal(model.log_likelihood(X), other.log_likelihood(X))


def test_map_prior_follows_the_dirichlet_formula():
    X, y = two_blobs(n=(10, 30))
    model = GaussianNB(prior="map").fit(X, y)
    np.testing.assert_allclose(model.prior_.prior_, [(10 + 1) / (40 + 2), (30 + 1) / (40 + 2)])
    template = ClassPrior("map", alpha=[5.0, 0.0])
    model = GaussianBayes("full", prior=template).fit(X, y)
    expected = np.log([(10 + 5) / (40 + 5), 30 / (40 + 5)])
    np.testing.assert_allclose(model.predict_joint_log_proba(X) - model.log_likelihood(X), np.tile(expected, (40, 1)))
    assert model.prior_ is not template and not hasattr(template, "classes_")
    mle = GaussianBayes("full").fit(X, y)
    np.testing.assert_allclose(mle.prior_.prior_, [0.25, 0.75])
    assert mle.prior_.method == "mle"


def test_zero_fixed_prior_is_never_predicted():
    X, y = two_blobs()
    model = GaussianNB(priors=[0.0, 1.0]).fit(X, y)
    assert set(model.predict(X)) == {"spam"}
    assert np.all(model.predict_proba(X)[:, 0] == 0.0)


def test_prior_and_priors_conflict():
    X, y = two_blobs()
    with pytest.raises(ValueError, match="not both"):
        GaussianNB(priors=[0.5, 0.5], prior="map").fit(X, y)
    with pytest.raises(ValueError, match="priors must sum to 1"):
        GaussianNB(priors=[0.5, 0.6]).fit(X, y)


# -- errors and degenerate data --------------------------------------------------
def test_too_few_samples_errors():
    X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [5.0, 5.0]])
    y = np.array([0, 0, 0, 1])
    with pytest.raises(ValueError, match=r"class 1 has 1 training samples.*unbiased=True needs at least 2"):
        GaussianBayes("full", unbiased=True).fit(X, y)
    with pytest.raises(ValueError, match="class 1 has 1 training samples"):
        GaussianBayes("diag", unbiased=True).fit(X, y)
    GaussianBayes("full").fit(X, y)  # one sample is enough for the MLE (regularised)
    with pytest.raises(ValueError, match=r"more than 2 samples in total.*got 2"):
        GaussianBayes("tied").fit(X[[0, 3]], y[[0, 3]])
    # a class announced to partial_fit but never seen cannot be scored
    model = GaussianBayes("diag").partial_fit(X[:3], y[:3], classes=[0, 1])
    with pytest.raises(ValueError, match="class 1 has 0 training samples"):
        model.predict(X)
    model.partial_fit(X[3:], y[3:])
    assert model.predict(X).shape == (4,)


def test_failed_fit_leaves_model_unfitted():
    X = np.array([[0.0], [1.0], [5.0]])
    model = GaussianBayes("full", unbiased=True)
    with pytest.raises(ValueError):
        model.fit(X, [0, 0, 1])
    assert not hasattr(model, "classes_")


def test_singular_covariance_is_regularised():
    rng = np.random.default_rng(9)
    base = rng.normal(size=(40, 2))
    X = np.column_stack([base, base[:, 0] + base[:, 1]])  # rank 2 in 3-D
    y = np.repeat([0, 1], 20)
    X[y == 1] += 2.0
    for covariance in ("tied", "full"):
        with pytest.raises(ValueError, match="singular.*increase reg"):
            GaussianBayes(covariance, reg=0.0).fit(X, y)
        model = GaussianBayes(covariance, reg=1e-6).fit(X, y)
        jll = model.predict_joint_log_proba(X)
        assert np.all(np.isfinite(jll))
        assert np.all(model.predict(X) == y)
        np.testing.assert_allclose(model.predict_proba(X).sum(axis=1), 1.0)
    # a feature constant within a class: zero variance without reg
    Z = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0], [3.0, 0.5], [4.0, 1.5]])
    t = np.array([0, 0, 0, 1, 1])
    with pytest.raises(ValueError, match="zero variance"):
        GaussianNB(var_smoothing=0.0).fit(Z, t)
    assert np.all(np.isfinite(GaussianNB().fit(Z, t).predict_joint_log_proba(Z)))


def test_constant_data_does_not_give_nan():
    X = np.ones((6, 2))
    y = np.array([0, 0, 0, 1, 1, 1])
    model = GaussianNB().fit(X, y)
    assert model.epsilon_ == 1e-9
    np.testing.assert_allclose(model.predict_proba(X), 0.5)
    # constant up to rounding (1.1 is inexact and weighted means round differently by chunk):
    # the regularisation must not depend on the rounding noise
    rng = np.random.default_rng(10)
    X = np.full((20, 2), 1.1)
    y = np.array([0, 1, 2] * 6 + [0, 1])
    w = rng.uniform(0.5, 2.0, 20)
    one = GaussianBayes("diag", reg=1e-6).fit(X, y, sample_weight=w)
    chunked = GaussianBayes("diag", reg=1e-6)
    for rows in np.array_split(rng.permutation(20), 3):
        chunked.partial_fit(X[rows], y[rows], classes=[0, 1, 2], sample_weight=w[rows])
    assert one.epsilon_ == chunked.epsilon_ == 1e-6
    np.testing.assert_allclose(chunked.covariances_, one.covariances_, rtol=1e-12)


def test_input_validation():
    X, y = two_blobs()
    with pytest.raises(ValueError, match="2-D"):
        GaussianNB().fit(X[:, 0], y)
    with pytest.raises(ValueError, match="NaN or infinity"):
        GaussianNB().fit(np.where(X > 2, np.nan, X), y)
    with pytest.raises(ValueError, match="100 samples but y has 99"):
        GaussianNB().fit(X, y[:-1])
    with pytest.raises(ValueError, match="real numbers"):
        GaussianNB().fit(X.astype(str), y)
    model = GaussianNB().fit(X, y)
    with pytest.raises(ValueError, match="X has 2 features, but the model was fitted with 3"):
        model.predict(X[:, :2])
    with pytest.raises(ValueError, match="not among the classes"):
        model.partial_fit(X[:2], ["ham", "eggs"])
    with pytest.raises(ValueError, match="classes must be given"):
        GaussianNB().partial_fit(X, y)
    with pytest.raises(ValueError, match="covariance must be one of"):
        GaussianBayes("banana").fit(X, y)
    with pytest.raises(ValueError, match="reg must be finite"):
        GaussianBayes(reg=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="not fitted"):
        GaussianNB().predict(X)
    with pytest.raises(ValueError, match="sample_weight must be finite"):
        GaussianNB().fit(X, y, sample_weight=-np.ones(len(y)))
    with pytest.raises(AttributeError, match="tied"):
        GaussianBayes("full").fit(X, y).coef_
    assert not hasattr(GaussianNB(), "var_")


def test_diag_statistics_cannot_serve_full():
    X, y = two_blobs()
    model = GaussianBayes("diag").fit(X, y)
    model.covariance = "full"
    with pytest.raises(ValueError, match="refit"):
        model.predict(X)
    full = GaussianBayes("full").fit(X, y)
    full.covariance = "diag"  # the diagonal of a full scatter is enough
    diag = GaussianBayes("diag").fit(X, y)
    np.testing.assert_allclose(full.predict_joint_log_proba(X), diag.predict_joint_log_proba(X), rtol=1e-12)


def test_merge_checks_compatibility():
    X, y = two_blobs()
    a = GaussianNB().fit(X, y)
    with pytest.raises(ValueError, match="different classes"):
        a.merge(GaussianNB().fit(X, np.where(y == "ham", "x", "y")))
    with pytest.raises(ValueError, match="features"):
        a.merge(GaussianNB().fit(X[:, :2], y))


def test_package_exports_the_gaussian_models():
    import spamnb

    assert spamnb.GaussianNB is GaussianNB and spamnb.GaussianBayes is GaussianBayes
