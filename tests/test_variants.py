"""spamnb.estimator.variants: a learned model's pair weight chosen on its own stream."""

import numpy as np
import pytest

from spamnb.estimator.defaults import LEARNED_PAIR_WEIGHT
from spamnb.estimator.variants import MIN_CLASS, MIXTURE_WEIGHTS, PairWeightMixture, log_loss


def _stream(n, rng):
    """Held-out (words, pairs) of n messages where the pairs carry the ranking:
    words alone rank at chance, words + pairs perfectly."""
    y = rng.random(n) < 0.4
    words = rng.normal(0.0, 50.0, n)
    pairs = np.where(y, 1.0, -1.0) * 2.0 - words
    return y, words, pairs


@pytest.mark.parametrize("loss", ["rank", "log"])
def test_the_weight_moves_toward_the_variant_that_ranks_the_stream(loss):
    rng = np.random.default_rng(0)
    y, words, pairs = _stream(3000, rng)
    mixture = PairWeightMixture(eta=1.0, loss=loss)
    assert mixture.weight == pytest.approx(LEARNED_PAIR_WEIGHT, abs=1e-12)   # the prior's mean
    weights = [mixture.add(w, p, s) for w, p, s in zip(words, pairs, y)]
    assert weights[-1] > 0.9
    assert all(-1e-9 <= w <= 1.0 + 1e-9 for w in weights)
    # and toward words alone where the pairs misrank
    mixture = PairWeightMixture(eta=1.0, loss=loss)
    for w, p, s in zip(words, pairs, y):
        mixture.add(np.where(s, 20.0, -20.0), -2.0 * p, s)
    assert mixture.weight < 0.1


def test_without_a_learning_rate_the_weight_is_the_prior_s_and_a_take_back_undoes_a_message():
    rng = np.random.default_rng(1)
    y, words, pairs = _stream(400, rng)
    still = PairWeightMixture(eta=0.0, loss="rank")
    for w, p, s in zip(words, pairs, y):
        still.add(w, p, s)
    assert still.weight == pytest.approx(LEARNED_PAIR_WEIGHT, abs=1e-12)
    for loss in ("rank", "log"):
        mixture = PairWeightMixture(eta=0.05, loss=loss)
        for w, p, s in zip(words[:-1], pairs[:-1], y[:-1]):
            mixture.add(w, p, s)
        before = (mixture.losses.copy(), mixture.weight)
        mixture.add(words[-1], pairs[-1], y[-1])
        mixture.add(words[-1], pairs[-1], y[-1], -1.0)
        assert np.allclose(mixture.losses, before[0], atol=1e-9) and mixture.weight == pytest.approx(before[1])
    assert still.add(float("nan"), 1.0, True) == still.weight        # no finite score: nothing counted


def test_the_ranking_loss_of_a_message_is_its_share_of_the_other_class_on_the_wrong_side():
    mixture = PairWeightMixture(eta=0.0, loss="rank", weights=(0.0, 1.0))
    for k in range(MIN_CLASS):                           # ham at -1 .. -MIN_CLASS under both weights
        assert mixture.add(-k - 1.0, 0.0, False) == 0.5
    assert (mixture.losses == 0).all()                   # no spam yet: nothing to misrank against
    # a spam among them at weight 0 (half the ham above it), above them all at weight 1
    mixture.add(-MIN_CLASS / 2 - 0.5, MIN_CLASS + 10.0, True)
    assert mixture.losses[0, 0] - mixture.losses[1, 0] == pytest.approx(0.5, abs=1.0 / MIN_CLASS)


def test_the_log_loss_is_the_negative_log_likelihood_without_overflow():
    assert log_loss(0.0, True) == pytest.approx(np.log(2.0))
    assert log_loss(800.0, True) == pytest.approx(0.0) and log_loss(800.0, False) == pytest.approx(800.0)
    assert np.isfinite(log_loss(np.array([-1e6, 1e6]), True)).all()
    with pytest.raises(ValueError):
        PairWeightMixture(loss="hinge")
    with pytest.raises(ValueError):
        PairWeightMixture(losses=[float("inf")] * (len(MIXTURE_WEIGHTS) * 6))


def test_a_mixture_that_does_not_move_scores_the_stream_as_the_shipped_learned_model(sample_corpus):
    """run_online with variants: each message scored at weights 0 and 1 and given the variants'
    weight: while that weight is the shipped one, the log-odds are the shipped model's."""
    from spamnb.evaluation.online import run_online
    from spamnb.training.corpus import labelled_messages

    items = labelled_messages([sample_corpus])
    order = np.random.default_rng(3).permutation(len(items))
    datas = [items[i].data for i in order]
    y = np.array([items[i].is_spam for i in order], dtype=bool)
    shipped = run_online(datas, y)
    mixture = PairWeightMixture(eta=0.0)
    mixed = run_online(datas, y, variants=mixture)
    finite = np.isfinite(shipped.log_odds)
    assert np.array_equal(np.isfinite(mixed.log_odds), finite)
    assert np.allclose(mixed.log_odds[finite], shipped.log_odds[finite], rtol=1e-9, atol=1e-9)
    # every message learned once the model's scores count (prequential.counts_scores: 50 of each class)
    seen = np.cumsum(np.c_[~y, y], axis=0) - np.c_[~y, y]
    assert mixture.n == int((seen.min(axis=1) >= 50).sum()) > 100
    moving = PairWeightMixture(eta=1.0, loss="rank")
    run_online(datas, y, variants=moving)
    assert moving.n == mixture.n


def test_a_rescaled_mixture_keeps_the_spread_of_the_shipped_weight_s_scores():
    rng = np.random.default_rng(2)
    y, words, pairs = _stream(2000, rng)
    plain, scaled = PairWeightMixture(eta=1.0, loss="rank"), PairWeightMixture(eta=1.0, loss="rank", rescale=True)
    assert scaled.scale == 1.0                                 # no evidence yet
    for w, p, s in zip(words, pairs, y):
        plain.add(w, p, s)
        scaled.add(w, p, s)
    assert plain.scale == 1.0 and scaled.weight == pytest.approx(plain.weight)
    spread = {v: np.abs(words + v * pairs).mean() for v in (LEARNED_PAIR_WEIGHT, scaled.weight)}
    assert scaled.scale == pytest.approx(spread[LEARNED_PAIR_WEIGHT] / spread[scaled.weight], rel=0.05)
    assert scaled.scale > 1.0     # here the pairs shrink the scores: the weight that moved up is scaled back up
