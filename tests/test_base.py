"""spamnb.bayes.base: log-sum-exp and the predictions derived from a joint log-likelihood."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spamnb.bayes.base import BayesClassifier, log_sum_exp


class FixedJoint(BayesClassifier):
    """A classifier whose joint log-likelihood is given: X is the jll itself."""

    def __init__(self, classes):
        self.classes_ = np.asarray(classes)

    def _joint_log_likelihood(self, X):
        return np.asarray(X, dtype=np.float64)


finite_jll = hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=6),
                        elements=st.floats(-1e3, 1e3))


@settings(max_examples=60, deadline=None)
@given(jll=finite_jll, shift=st.floats(-1e6, 1e6))
def test_log_sum_exp_matches_direct_sum_and_is_shift_equivariant(jll, shift):
    reference = np.array([np.log(np.sum(np.exp(np.float128(row) if hasattr(np, "float128") else row)))
                          for row in jll - jll.max(axis=1, keepdims=True)]) + jll.max(axis=1)
    np.testing.assert_allclose(log_sum_exp(jll), reference, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(log_sum_exp(jll + shift), log_sum_exp(jll) + shift, rtol=1e-12, atol=1e-9)


def test_log_sum_exp_infinities():
    jll = np.array([[-np.inf, -np.inf], [-np.inf, 0.0], [np.inf, 0.0], [-1e308, -1e308]])
    with np.errstate(all="raise"):
        out = log_sum_exp(jll)
    assert out[0] == -np.inf
    assert out[1] == 0.0
    assert out[2] == np.inf
    assert out[3] == pytest.approx(-1e308 + np.log(2))


@settings(max_examples=60, deadline=None)
@given(jll=finite_jll)
def test_probabilities_are_normalised_and_ordered_like_the_jll(jll):
    model = FixedJoint(np.arange(jll.shape[1]))
    proba = model.predict_proba(jll)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(model.predict(jll), np.argmax(jll, axis=1))
    log_proba = model.predict_log_proba(jll)
    assert np.all(log_proba <= 1e-12)
    # log P(c | x) differs from the jll by a per-row constant
    np.testing.assert_allclose(log_proba - jll, np.broadcast_to((log_proba - jll)[:, :1], jll.shape),
                               rtol=0, atol=1e-9 * max(1.0, np.abs(jll).max()))


def test_huge_log_likelihoods_do_not_underflow_to_nan():
    model = FixedJoint(["ham", "spam"])
    jll = np.array([[-2.0e7, -2.0e7 + 3.0], [-1e8, -1e8], [-5e6, -6e6]])
    proba = model.predict_proba(jll)
    assert np.isfinite(proba).all()
    # |jll| = 2e7 carries ~4e-9 absolute rounding through "jll - log_sum_exp": rtol 1e-8, not 1e-12
    np.testing.assert_allclose(proba[0], [1 / (1 + np.exp(3.0)), 1 / (1 + np.exp(-3.0))], rtol=1e-8)
    np.testing.assert_allclose(proba[1], [0.5, 0.5], rtol=1e-7)
    np.testing.assert_array_equal(proba[2], [1.0, 0.0])
    np.testing.assert_allclose(model.decision_function(jll), [3.0, 0.0, -1e6])


def test_impossible_classes():
    model = FixedJoint(["a", "b", "c"])
    jll = np.array([[-np.inf, -1.0, -2.0], [-np.inf, -np.inf, -np.inf]])
    proba = model.predict_proba(jll)
    assert proba[0, 0] == 0.0
    np.testing.assert_allclose(proba[0, 1:], [1 / (1 + np.exp(-1.0)), 1 / (1 + np.exp(1.0))])
    np.testing.assert_allclose(proba[1], [1 / 3] * 3)          # impossible everywhere: uniform
    assert not np.isnan(model.predict_log_proba(jll)).any()
    assert model.predict(jll)[0] == "b"


def test_decision_function_needs_two_classes_and_fitting():
    with pytest.raises(ValueError, match="two classes"):
        FixedJoint(["a", "b", "c"]).decision_function(np.zeros((1, 3)))

    class Unfitted(BayesClassifier):
        def _joint_log_likelihood(self, X):
            return np.zeros((1, 2))

    with pytest.raises(ValueError, match="not fitted"):
        Unfitted().predict(np.zeros((1, 2)))


def test_decision_function_is_not_nan_when_both_classes_are_impossible():
    model = FixedJoint(["ham", "spam"])
    assert model.decision_function(np.array([[-np.inf, -np.inf]]))[0] == 0.0


def test_probabilities_exact_at_extreme_magnitudes():
    proba = FixedJoint(["ham", "spam"]).predict_proba(np.array([[-1e12, -1e12], [-1e300, -1e300]]))
    np.testing.assert_allclose(proba, [[0.5, 0.5], [0.5, 0.5]], rtol=1e-12)
