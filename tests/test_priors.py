"""spamnb.bayes.priors.ClassPrior: closed forms of each estimator and exact count algebra."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spamnb.bayes.priors import ClassPrior

Y = np.array(["spam", "ham", "spam", "spam", "ham", "spam"])  # 2 ham, 4 spam


def test_mle_is_the_class_frequency():
    prior = ClassPrior("mle").fit(Y)
    np.testing.assert_array_equal(prior.classes_, ["ham", "spam"])
    np.testing.assert_array_equal(prior.class_count_, [2, 4])
    np.testing.assert_allclose(prior.prior_, [2 / 6, 4 / 6], rtol=1e-15)
    np.testing.assert_allclose(prior.log_prior_, np.log([1 / 3, 2 / 3]), rtol=1e-15)


@pytest.mark.parametrize("alpha, expected", [
    (1.0, [3 / 8, 5 / 8]),                 # (2+1)/(6+2), (4+1)/(6+2)
    (0.0, [2 / 6, 4 / 6]),                 # no pseudo-counts: the MLE
    ([4.0, 0.5], [6 / 10.5, 4.5 / 10.5]),  # per-class pseudo-counts
])
def test_map_adds_dirichlet_pseudo_counts(alpha, expected):
    prior = ClassPrior("map", alpha=alpha).fit(Y)
    np.testing.assert_allclose(prior.prior_, expected, rtol=1e-14)


def test_fixed_and_uniform_ignore_counts_but_keep_them():
    fixed = ClassPrior("fixed", priors=[0.25, 0.75]).fit(Y)
    np.testing.assert_allclose(fixed.prior_, [0.25, 0.75])
    np.testing.assert_array_equal(fixed.class_count_, [2, 4])
    uniform = ClassPrior("uniform").fit(["a", "b", "b", "c"])
    np.testing.assert_allclose(uniform.prior_, [1 / 3] * 3)
    fixed.method = "mle"                                   # switching method later is exact
    np.testing.assert_allclose(fixed.prior_, [1 / 3, 2 / 3])


def test_zero_counts():
    prior = ClassPrior("mle").partial_fit(["a", "a"], classes=["a", "b"])
    assert prior.log_prior_[1] == -np.inf and prior.log_prior_[0] == 0.0
    empty = ClassPrior("mle").partial_fit([], classes=["a", "b"])
    np.testing.assert_allclose(empty.prior_, [0.5, 0.5])   # nothing counted: uniform, not 0/0
    assert np.all(np.isfinite(ClassPrior("map", alpha=1.0).partial_fit(["a"], classes=["a", "b"]).log_prior_))
    np.testing.assert_allclose(ClassPrior("map", alpha=0.0).partial_fit([], classes=["a", "b"]).prior_, [0.5, 0.5])


def test_sample_weights_scale_counts():
    prior = ClassPrior().fit(["a", "b", "b"], sample_weight=[3.0, 0.5, 0.5])
    np.testing.assert_allclose(prior.class_count_, [3.0, 1.0])
    np.testing.assert_allclose(prior.prior_, [0.75, 0.25])
    with pytest.raises(ValueError, match="sample_weight has shape"):
        ClassPrior().fit(["a", "b"], sample_weight=[1.0])


@settings(max_examples=40, deadline=None)
@given(labels=st.lists(st.sampled_from("abc"), max_size=40), cut=st.integers(0, 40),
       weights_seed=st.integers(0, 1000))
def test_partial_fit_unlearn_merge_algebra(labels, cut, weights_seed):
    y = np.array(labels, dtype="<U1")
    weights = np.random.default_rng(weights_seed).integers(0, 4, len(y)).astype(float)
    cut = min(cut, len(y))
    whole = ClassPrior().fit(y, classes=list("abc"), sample_weight=weights)
    chunked = ClassPrior().partial_fit(y[:cut], classes=list("abc"), sample_weight=weights[:cut])
    chunked.partial_fit(y[cut:], sample_weight=weights[cut:])
    np.testing.assert_array_equal(chunked.class_count_, whole.class_count_)
    right = ClassPrior().partial_fit(y[cut:], classes=list("abc"), sample_weight=weights[cut:])
    merged = ClassPrior().partial_fit(y[:cut], classes=list("abc"), sample_weight=weights[:cut]).merge(right)
    np.testing.assert_array_equal(merged.class_count_, whole.class_count_)
    whole.unlearn(y[cut:], sample_weight=weights[cut:])
    np.testing.assert_array_equal(whole.class_count_,
                                  ClassPrior().partial_fit(y[:cut], classes=list("abc"),
                                                           sample_weight=weights[:cut]).class_count_)


def test_unlearn_refuses_and_changes_nothing():
    prior = ClassPrior().fit(Y)
    with pytest.raises(ValueError, match="negative"):
        prior.unlearn(["ham", "ham", "ham"])
    np.testing.assert_array_equal(prior.class_count_, [2, 4])
    with pytest.raises(ValueError, match="not among"):
        prior.unlearn(["eggs"])
    np.testing.assert_array_equal(prior.class_count_, [2, 4])


def test_add_counts():
    prior = ClassPrior().fit(Y)
    prior.add_counts([1, -2])
    np.testing.assert_array_equal(prior.class_count_, [3, 2])
    with pytest.raises(ValueError, match="negative"):
        prior.add_counts([-4, 0])
    with pytest.raises(ValueError, match="shape"):
        prior.add_counts([1, 2, 3])
    np.testing.assert_array_equal(prior.class_count_, [3, 2])


def test_encode_and_classes():
    prior = ClassPrior().fit(Y)
    np.testing.assert_array_equal(prior.encode(["spam", "ham"]), [1, 0])
    assert prior.encode(["spam"]).dtype == np.int64
    with pytest.raises(ValueError, match="not among"):
        prior.encode(["ham", "eggs"])
    with pytest.raises(ValueError, match="classes must be given"):
        ClassPrior().partial_fit(Y)
    with pytest.raises(ValueError, match="differ"):
        prior.partial_fit(Y, classes=["ham", "spam", "eggs"])
    with pytest.raises(ValueError, match="repeat"):
        ClassPrior().partial_fit(Y, classes=["ham", "ham", "spam"])
    with pytest.raises(ValueError, match="different classes"):
        prior.merge(ClassPrior().fit(["a", "b"]))
    with pytest.raises(ValueError, match="not counted"):
        ClassPrior().log_prior_


@pytest.mark.parametrize("kwargs, message", [
    (dict(method="bogus"), "method must be"),
    (dict(method="fixed"), "needs priors"),
    (dict(method="fixed", priors=[0.5, 0.6]), "sum to 1"),
    (dict(method="fixed", priors=[0.5, 0.25, 0.25]), "shape"),
    (dict(method="fixed", priors=[1.5, -0.5]), ">= 0"),
    (dict(method="map", alpha=-1.0), ">= 0"),
    (dict(method="map", alpha=[1.0, 2.0, 3.0]), "shape"),
])
def test_invalid_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ClassPrior(**kwargs).fit(Y)


def test_repr():
    assert repr(ClassPrior("map", alpha=2.0)) == "ClassPrior(method='map', alpha=2.0)"
    assert repr(ClassPrior()) == "ClassPrior(method='mle')"


# -- defects found in review, fixed --

def test_failed_first_partial_fit_changes_nothing():
    prior = ClassPrior()
    with pytest.raises(ValueError):
        prior.partial_fit(["eggs"], classes=["ham", "spam"])
    assert not hasattr(prior, "classes_")


def test_negative_sample_weight_is_rejected():
    prior = ClassPrior().fit(Y)
    with pytest.raises(ValueError):
        prior.partial_fit(["ham"], sample_weight=[-5.0])


def test_unknown_method_after_fit_is_an_error():
    prior = ClassPrior().fit(Y)
    prior.method = "bogus"
    with pytest.raises(ValueError):
        prior.log_prior_
