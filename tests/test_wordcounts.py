"""The count model: one signed add, merge, and the formula it shares with MultinomialNB."""

from array import array

import numpy as np
import pytest

from spamnb.bayes import token_kernels
from spamnb.bayes.multinomial import MultinomialNB
from spamnb.bayes.arithmetic import log_theta
from spamnb.bayes.wordcounts import WordCounts

RAW, LOG = token_kernels.COUNTS_RAW, token_kernels.COUNTS_LOG
RNG = np.random.default_rng(11)
MESSAGES = [(array("i", RNG.integers(0, 40, size=RNG.integers(1, 30)).tolist()), int(RNG.integers(0, 2)))
            for _ in range(60)]


def counts_of(messages, transform=RAW, alpha=0.5, prior="mle"):
    counts = WordCounts(alpha, prior)
    for indices, cls in messages:
        counts.add(indices, cls, transform, 1, n_features=40)
    return counts


def test_forget_is_the_exact_inverse_of_learn_and_refuses_what_was_not_learned():
    counts = counts_of(MESSAGES[:30], LOG)
    before = counts.matrix().copy(), list(counts.class_count_)
    indices, cls = MESSAGES[40]
    counts.add(indices, cls, LOG, 1)
    counts.add(indices, cls, LOG, -1)
    np.testing.assert_allclose(counts.matrix(), before[0], rtol=0, atol=1e-12)
    assert counts.class_count_ == before[1]
    # a message never learned as that class: a count would become negative; nothing changes
    unseen = array("i", [39] * 5)
    fresh = WordCounts(0.5)
    fresh.add(array("i", [1, 2]), 0, RAW, 1, n_features=40)
    with pytest.raises(ValueError, match="negative|not learned|no message"):
        fresh.add(unseen, 0, RAW, -1)
    with pytest.raises(ValueError, match="no message"):
        fresh.add(array("i", [1]), 1, RAW, -1)
    assert fresh.class_count_ == [1.0, 0.0] and fresh.matrix()[0].sum() == 2.0


def test_merge_equals_learning_everything_in_one_model():
    whole = counts_of(MESSAGES)
    merged = counts_of(MESSAGES[:25]).merge(counts_of(MESSAGES[25:]))
    np.testing.assert_array_equal(merged.matrix(), whole.matrix())   # whole counts: exact
    assert merged.class_count_ == whole.class_count_
    assert merged.derived()[1:] == whole.derived()[1:]
    with pytest.raises(ValueError, match="settings"):
        merged.merge(counts_of(MESSAGES, alpha=1.0))


def test_the_estimator_and_the_count_model_share_log_theta_bit_for_bit():
    counts = counts_of(MESSAGES, LOG)
    nb = MultinomialNB.from_word_counts(counts)
    np.testing.assert_array_equal(nb.feature_log_prob_, counts.log_theta())
    np.testing.assert_array_equal(nb.class_log_prior_, np.array(counts.log_prior()))
    log_count, log_norm, _ = counts.derived()
    expected = np.frombuffer(log_count).reshape(2, -1) - np.array(log_norm)[:, None]
    np.testing.assert_array_equal(counts.log_theta(), expected)
    X = np.abs(RNG.normal(size=(5, 40)))
    fitted = MultinomialNB(alpha=0.5).fit(np.vstack([X, X]), [0] * 5 + [1] * 5)
    np.testing.assert_array_equal(fitted.feature_log_prob_, log_theta(fitted.feature_count_, 0.5))


def test_one_class_has_a_prior_of_minus_infinity_for_the_other():
    counts = counts_of([(m, 1) for m, _ in MESSAGES[:5]])
    assert counts.log_prior() == (-np.inf, 0.0)
    assert WordCounts(0.5, "map").log_prior()[0] == WordCounts(0.5, "map").log_prior()[1]


@pytest.mark.parametrize("start", ["fitted", "empty"])
def test_a_learn_and_the_score_after_it_never_derive_the_whole_vocabulary(sample_corpus, monkeypatch, start):
    """SpamFilter.learn changes the logs of the message's counts in place: once a
    filter learns in place, neither a learn nor the score after it derives log
    theta over the vocabulary (the online protocol did that after every message
    before), and the scores are those of the filter fitted on the same mail."""
    from spamnb import SpamFilter
    from spamnb.bayes import arithmetic
    from spamnb.training.corpus import labelled_messages

    items = labelled_messages([sample_corpus])
    items = [items[i] for i in np.random.default_rng(1).permutation(len(items))]
    first, rest = items[:100], items[100:160]
    sf = SpamFilter()
    if start == "fitted":
        sf.fit([m.data for m in first], [m.is_spam for m in first], tune=False)
    else:
        for m in first:
            sf.learn(m.data, m.is_spam)
    sf.learn(rest[0].data, rest[0].is_spam)   # a fitted filter takes its counts in place here, once

    def whole(*args, **kwargs):
        raise AssertionError("log theta derived over the whole vocabulary")

    monkeypatch.setattr(arithmetic, "smoothed_logs", whole)   # wordcounts imports it where it derives the logs
    scores = []
    for m in rest[1:]:
        sf.learn(m.data, m.is_spam)
        scores.append(sf.score(rest[0].data).log_odds)
    monkeypatch.undo()
    refit = SpamFilter().fit([m.data for m in first + rest], [m.is_spam for m in first + rest], tune=False)
    assert sf.score(rest[0].data).log_odds == pytest.approx(refit.score(rest[0].data).log_odds, rel=1e-9, abs=1e-9)
    assert len(set(scores)) > 1
