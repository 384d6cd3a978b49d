"""SpamFilter(length_norm=S): each message's transformed counts scaled to Euclidean length S."""

import math

import numpy as np
import pytest

from spamnb import SpamFilter

from spamnb.bayes import token_kernels
from spamnb.training.corpus import labelled_messages


@pytest.fixture(scope="module")
def sample(sample_corpus):
    items = labelled_messages([sample_corpus])
    return [m.data for m in items], np.array([m.is_spam for m in items])


def test_builder_and_add_counts_scale_rows():
    idx = np.array([3, 1, 3, 3, 0, -1], dtype=np.int32)
    builder = token_kernels.CSRBuilder(token_kernels.COUNTS_LOG, 5.0)
    builder.add_row(idx)
    data = np.frombuffer(builder.data, dtype=np.float64)
    x = np.log1p([1.0, 1.0, 3.0])          # features 0, 1, 3 (the unknown -1 takes no part)
    np.testing.assert_allclose(data, 5.0 * x / np.linalg.norm(x))
    target = np.zeros(4)
    token_kernels.add_counts(idx, target, token_kernels.COUNTS_LOG, length=5.0)
    np.testing.assert_allclose(target[[0, 1, 3]], 5.0 * x / np.linalg.norm(x))
    plain = token_kernels.CSRBuilder(token_kernels.COUNTS_LOG)
    plain.add_row(idx)
    np.testing.assert_allclose(np.frombuffer(plain.data, dtype=np.float64), x)   # 0: off


def test_scores_equal_the_normalised_naive_bayes(sample):
    messages, y = sample
    assert y[:250].any() and not y[:250].all()
    spam_filter = SpamFilter(length_norm=5.0, alpha=0.001).fit(messages[:250], y[:250])
    X = SpamFilter(counts="log").fit(messages[:250], y[:250]).transform(messages[:250]).toarray()
    X = 5.0 * X / np.linalg.norm(X, axis=1, keepdims=True)
    fc = np.vstack([X[~y[:250]].sum(axis=0), X[y[:250]].sum(axis=0)])
    assert np.allclose(spam_filter.model_.feature_count_, fc)
    for m in messages[250:260]:
        one, many = spam_filter.score(m).log_odds, spam_filter.score_many([m])[0]
        assert one == pytest.approx(many, rel=1e-9)


def test_save_load_learn_forget(sample, tmp_path):
    messages, y = sample
    messages, y = messages[::-1], y[::-1]          # both classes in the first 200
    spam_filter = SpamFilter(length_norm=5.0).fit(messages[:200], y[:200])
    before = [spam_filter.score(m).log_odds for m in messages[200:210]]
    spam_filter.save(tmp_path / "m.spamnb")
    loaded = SpamFilter.load(tmp_path / "m.spamnb")
    assert loaded.length_norm == 5.0
    assert [loaded.score(m).log_odds for m in messages[200:210]] == pytest.approx(before)
    loaded.learn(messages[220], spam=bool(y[220]))
    loaded.forget(messages[220], spam=bool(y[220]))
    assert [loaded.score(m).log_odds for m in messages[200:210]] == pytest.approx(before, rel=1e-9)


@pytest.mark.parametrize("bad", [-1.0, math.inf, "5"])
def test_bad_length_norm(bad):
    with pytest.raises(ValueError):
        SpamFilter(length_norm=bad)
