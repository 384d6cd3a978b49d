"""A learned model's pair weight chosen on its own stream (spamnb.estimator.variants)."""

import math

import numpy as np
import pytest

from spamnb.bayes.metrics import one_minus_auc_percent
from spamnb.evaluation.online import OnlineModel
from spamnb.mail.tokenizer import Tokenizer
from spamnb.estimator.defaults import LEARNED_PAIR_WEIGHT
from spamnb.estimator.variants import (BIN_WIDTH, CHOOSE_EVERY, LOW, MAX_COUNT, MIN_CLASS, N_BINS, WEIGHTS,
                                   PairWeightChooser, ranking_loss)
from spamnb.training.corpus import labelled_messages


def _histogram(scores):
    h = np.zeros(N_BINS)
    for s in scores:
        h[int(math.floor((s - LOW) / BIN_WIDTH))] += 1
    return h


def test_the_ranking_loss_is_one_minus_auc_with_ties_counted_half():
    rng = np.random.default_rng(0)
    ham = np.floor(rng.normal(-5, 6, 300))          # whole numbers: one score a bin, ties within a bin
    spam = np.floor(rng.normal(5, 6, 200))
    y = np.r_[np.zeros(ham.size, bool), np.ones(spam.size, bool)]
    expected = one_minus_auc_percent(y, np.r_[ham, spam]) / 100
    assert expected > 0.01
    assert ranking_loss(_histogram(ham), _histogram(spam)) == pytest.approx(expected, abs=1e-12)
    assert ranking_loss(np.zeros(N_BINS), _histogram(spam)) == 0.0


def _fed(words_spread, pairs_gain, n=400, seed=1):
    """A chooser fed n messages: ``words`` noisy around the label, ``pairs`` pulling toward it by ``pairs_gain``."""
    rng = np.random.default_rng(seed)
    chooser = PairWeightChooser()
    for i in range(n):
        spam = bool(i % 2)
        sign = 1.0 if spam else -1.0
        words = rng.normal(2 * sign, words_spread)
        pairs = pairs_gain * sign + rng.normal(0, 1.0)
        chooser.add(words, pairs, spam)
    return chooser


def test_the_weight_follows_the_variant_that_ranks_the_held_out_scores_better():
    helped = _fed(words_spread=8.0, pairs_gain=12.0)       # pairs separate what words confuse
    assert helped.weight == WEIGHTS[-1]
    hurt = _fed(words_spread=1.0, pairs_gain=-3.0)         # pairs pull each message the wrong way
    assert hurt.weight == WEIGHTS[0]
    losses = hurt.losses()
    assert losses[0] < losses[-1]


def test_the_default_stays_until_each_class_has_its_evidence():
    chooser = PairWeightChooser()
    for _ in range(4 * CHOOSE_EVERY):                      # only spam: no ranking to be had
        chooser.add(-3.0, 20.0, True)
    assert chooser.weight == LEARNED_PAIR_WEIGHT
    for i in range(2 * MIN_CLASS - 1):
        assert chooser.add(-3.0, -20.0, False) == LEARNED_PAIR_WEIGHT or i >= MIN_CLASS - 1


def test_a_score_taken_back_leaves_the_counts_as_they_were_and_old_evidence_is_halved():
    chooser = _fed(words_spread=3.0, pairs_gain=2.0, n=100)
    before = chooser.counts.copy()
    chooser.add(1.5, -0.7, True)
    chooser.add(1.5, -0.7, True, -1.0)
    assert np.array_equal(chooser.counts, before)
    chooser.add(float("nan"), 1.0, True)                   # no score: nothing counted
    assert np.array_equal(chooser.counts, before)
    big = PairWeightChooser(counts=np.zeros((len(WEIGHTS), 2, N_BINS)))
    big.counts[:, 1, 600] = MAX_COUNT
    big.add(100.0, 0.0, True)
    assert big.counts[0, 1].sum() == pytest.approx((MAX_COUNT + 1) / 2)
    with pytest.raises(ValueError):
        PairWeightChooser(counts=-np.ones((len(WEIGHTS), 2, N_BINS)))


def test_every_weight_s_log_odds_are_the_words_score_plus_the_weight_times_the_pairs(sample_corpus):
    """What the chooser rests on: one model's log-odds are linear in the pair weight,
    so two scores of the same counts give every variant's held-out score exactly."""
    items = labelled_messages([sample_corpus])
    items = [items[i] for i in np.random.default_rng(0).permutation(len(items))[:120]]   # both classes early
    model = OnlineModel(Tokenizer(word_pairs=2))
    checked = 0
    for item in items:
        stream = model.stream(item.data)
        model.pair_weight = 0.0
        words = model.log_odds(stream)
        model.pair_weight = 1.0
        pairs = model.log_odds(stream) - words
        if math.isfinite(words):
            for w in WEIGHTS + (0.37, 2.0):
                model.pair_weight = w
                assert model.log_odds(stream) == pytest.approx(words + w * pairs, rel=1e-9, abs=1e-9)
            checked += 1
        model.learn(stream, item.is_spam)
    assert checked > 50
