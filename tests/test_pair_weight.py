"""Word pairs weighed when scoring (``pair_weight``), the model a learned model starts as, and the
cutoffs of a young learned model raised, never lowered, before it has ham enough to fit them."""

import math
from array import array

import pytest

from spamnb import SpamFilter
from spamnb.bayes import token_kernels
from spamnb.mail.tokenizer import Tokenizer
from spamnb.model import learning
from spamnb.estimator.defaults import LEARNED_PAIR_WEIGHT, LEARNED_WORD_PAIRS, DEFAULT_HAM_LOG_ODDS
from spamnb.estimator.ledger import Tally
from spamnb.estimator.prequential import BIN_WIDTH, LOW, N_BINS, ScoreHistogram
from spamnb.training.corpus import labelled_messages

from conftest import run_spamnb


@pytest.fixture(scope="module")
def sample(sample_corpus):
    items = labelled_messages([sample_corpus])
    return [m.data for m in items], [m.is_spam for m in items]


def _fitted(sample, pair_weight, window=2):
    messages, y = sample
    return SpamFilter(Tokenizer(word_pairs=window), pair_weight=pair_weight).fit(messages[:-20], y[:-20], tune=False)


def test_weight_one_is_the_paired_model_and_a_weight_moves_only_the_pairs(sample):
    """Weight 1 scores as a paired model always did; weight 0 scores the words of a paired model alone
    (the pairs' share of the length still counted); a weight in between lies between the two."""
    messages, _ = sample
    one, half, none = (_fitted(sample, w) for w in (1.0, 0.5, 0.0))
    for message in messages[-20:]:
        s1, s_half, s0 = (f.score(message).log_odds for f in (one, half, none))
        assert min(s1, s0) - 1e-9 <= s_half <= max(s1, s0) + 1e-9
        assert s_half == pytest.approx((s1 + s0) / 2, rel=1e-9, abs=1e-9)   # linear in the weight
        assert abs(s1 - s0) > 1e-6          # and the weight moves the score (equal scores are linear too)
        stream = one.tokenizer_.stream(message)
        assert 0 < stream.pairs_start < len(stream.hashes)
        jll = half.scorer().score(stream.hashes, 0, stream.pairs_start)[0]
        assert s_half == pytest.approx(jll[1] - jll[0], rel=1e-12, abs=1e-9)   # score() weighs the pairs
        # the weight moves only the tokens from pairs_start on: without it, the weighed scorer is weight 1's
        unmarked = half.scorer().score(stream.hashes, 0)[0]
        assert unmarked == one.scorer().score(stream.hashes, 0)[0]
        assert half.scorer().score(stream.hashes, 0, stream.pairs_start)[0] != unmarked
    assert one.score(messages[-1]).log_odds == SpamFilter(Tokenizer(word_pairs=2)).fit(
        sample[0][:-20], sample[1][:-20], tune=False).score(messages[-1]).log_odds


def test_every_scorer_gives_a_weighed_model_the_same_score(sample, tmp_path):
    """The single-message scorer, its verdict sums, the batch kernel and a mapped model file agree."""
    messages, _ = sample
    fitted = _fitted(sample, LEARNED_PAIR_WEIGHT)
    path = tmp_path / "model.spamnb"
    fitted.save(path)
    mapped = SpamFilter.load(path, mapped=True)
    loaded = SpamFilter.load(path)
    assert loaded.pair_weight == mapped.pair_weight == LEARNED_PAIR_WEIGHT
    batch = fitted.score_many(messages[-20:])
    for k, message in enumerate(messages[-20:]):
        expected = fitted.score(message).log_odds
        assert loaded.score(message).log_odds == expected
        assert mapped.score(message).log_odds == pytest.approx(expected, rel=1e-12, abs=1e-9)
        assert fitted.evidence(message)[0] == pytest.approx(expected, rel=1e-12, abs=1e-9)
        assert batch[k] == pytest.approx(expected, rel=1e-9, abs=1e-9)
        assert fitted.classify(message).log_odds == pytest.approx(expected, rel=1e-12, abs=1e-9)


def test_the_checked_entry_points_refuse_a_weight_out_of_range(sample):
    with pytest.raises(ValueError, match="pair_weight"):
        SpamFilter(pair_weight=-1.0)
    with pytest.raises(ValueError, match="pair_weight"):
        SpamFilter(pair_weight=math.inf)
    with pytest.raises(ValueError, match="pair_weight"):
        token_kernels.CSRBuilder(token_kernels.COUNTS_LOG, 5.0, -0.5)
    keys, values = array("Q", bytes(8 * 16)), array("i", bytes(4 * 16))
    with pytest.raises(ValueError, match="pair_weight"):
        token_kernels.Scorer(keys, values, array("d"), 0, [0.0, 0.0], [0.0, 0.0], token_kernels.COUNTS_LOG, 5.0,
                             None, math.nan)


@pytest.mark.parametrize("pair_weight", [0.5, 0.0])
def test_train_s_held_out_scores_weigh_the_pairs_as_the_model_does(sample, pair_weight):
    """A filter whose pair weight is not 1 is fitted as `spamnb train` fits (its cutoffs from
    held-out scores): each message's held-out score is its score under a filter of that
    pair weight fitted on the other folds (the spill marks where each message's pairs start)."""
    import numpy as np

    from spamnb.estimator import calibrate, fitting

    messages, y = sample
    template = SpamFilter(Tokenizer(word_pairs=2), pair_weight=pair_weight)
    variant = next(fitting.train_variants_here([template], list(zip(messages, y)), {"target_fpr": 0.01}, 5))
    _fitted_filter, _calibration, (ham, spam) = variant
    fold = np.array([calibrate.fold_of(m, 5) for m in messages])
    y = np.asarray(y, dtype=bool)
    expected = np.empty(len(y))
    for k in range(5):
        test = np.flatnonzero(fold == k)
        train = np.flatnonzero(fold != k)
        fold_filter = SpamFilter(Tokenizer(word_pairs=2), pair_weight=pair_weight).fit(
            [messages[i] for i in train], y[train], tune=False)
        expected[test] = fold_filter.score_many([messages[i] for i in test])
    np.testing.assert_allclose(ham, expected[~y], rtol=1e-9, atol=1e-8)
    np.testing.assert_allclose(spam, expected[y], rtol=1e-9, atol=1e-8)
    fitted = SpamFilter(Tokenizer(word_pairs=2), pair_weight=pair_weight).fit(messages, y, target_fpr=0.01)
    assert fitted.pair_weight == pair_weight and fitted.calibration_ is not None


def test_a_model_made_by_learning_has_halved_pairs_and_info_says_so(sample_corpus, tmp_path):
    home = tmp_path / "home"
    ham = sorted((sample_corpus / "easy_ham").iterdir())[:3]
    spam = sorted((sample_corpus / "spam").iterdir())[:3]
    assert run_spamnb(["learn", "--ham", *ham], home=home).returncode == 0
    assert run_spamnb(["learn", "--spam", *spam], home=home).returncode == 0
    model = SpamFilter.load(home / "model.spamnb")
    assert model.tokenizer_.word_pairs == LEARNED_WORD_PAIRS and model.pair_weight == LEARNED_PAIR_WEIGHT
    info = run_spamnb(["info"], home=home, text=True)
    assert info.returncode == 0 and f"pair weight {LEARNED_PAIR_WEIGHT!r}" in info.stdout
    trained = tmp_path / "trained"
    assert run_spamnb(["train", sample_corpus], home=trained).returncode == 0
    assert SpamFilter.load(trained / "model.spamnb").pair_weight == 1.0     # train's models: unchanged


def test_a_learned_model_keeps_its_kind_as_it_grows(tmp_path):
    path = tmp_path / "model.spamnb"
    with learning.session(path) as s:
        s.learn(b"Subject: hello\n\nproject notes review lunch\n", False, Tally())
        s.learn(b"Subject: deal\n\ncheap pills winner click\n", True, Tally())
    with learning.session(path) as s:
        assert s.filter.pair_weight == LEARNED_PAIR_WEIGHT
        s.learn(b"Subject: again\n\nproject lunch\n", False, Tally())
    assert SpamFilter.load(path).pair_weight == LEARNED_PAIR_WEIGHT


def _histogram(ham_scores, spam_scores):
    h = ScoreHistogram()
    for s in ham_scores:
        h.add(s, False)
    for s in spam_scores:
        h.add(s, True)
    return h


def test_a_young_model_raises_its_spam_cutoff_over_its_ham_and_never_lowers_it():
    from spamnb.estimator.prequential import THIN_HAM_LOG_ODDS, THIN_SPAM_LOG_ODDS

    spam = [40.0] * 60
    top = LOW + (int((30.0 - LOW) / BIN_WIDTH) + 1) * BIN_WIDTH     # the top of a ham at 30's bin
    # no ham counted: the widest band
    spam_cut, ham_cut, rule = _histogram([], spam).cutoffs()
    assert (spam_cut, ham_cut) == (THIN_SPAM_LOG_ODDS, THIN_HAM_LOG_ODDS) and "thin evidence" in rule
    # 400 of the 1,000 ham a fit needs, one at 30: the band 40 % of the way to the defaults (spam 27.2,
    # ham -25.6), the spam cutoff over that ham (+ margin)
    spam_cut, ham_cut, rule = _histogram([-20.0] * 400 + [30.0], spam).cutoffs()
    assert spam_cut == pytest.approx(top + 1.0)
    assert ham_cut == pytest.approx(THIN_HAM_LOG_ODDS + (DEFAULT_HAM_LOG_ODDS - THIN_HAM_LOG_ODDS) * 401 / 1000)
    assert "thin evidence" in rule
    # every ham far below: the band alone, narrower with more ham, never narrower than the defaults
    wide = _histogram([-20.0] * 200, spam).cutoffs()
    narrow = _histogram([-20.0] * 800, spam).cutoffs()
    assert THIN_SPAM_LOG_ODDS > wide[0] > narrow[0] > 14.0 and THIN_HAM_LOG_ODDS < wide[1] < narrow[1] < -4.0
    # 1,000 ham and more: fitted as train fits them, lower than the young rule would place it
    fitted = _histogram([-20.0] * 1500 + [30.0], spam).cutoffs()
    assert fitted is not None and fitted[0] < spam_cut and "fitted" in fitted[2]
    assert len(_histogram([], []).counts) == 2 * N_BINS


def test_a_raised_cutoff_is_fitted_into_the_model_and_info_says_why():
    from spamnb.cli.models import cutoffs_from
    from spamnb.estimator.prequential import refit_cutoffs

    model = SpamFilter().fit([b"Subject: a\n\nhello there", b"Subject: b\n\ncheap pills"], [False, True], tune=False)
    model.held_out_ = _histogram([-20.0] * 300 + [30.0], [40.0] * 60)
    assert not refit_cutoffs(model) and model.cutoffs_from == "defaults"    # fitted or trained: thin evidence
    model.cutoff_source_ = "held-out"       # a model that grew by learning: its cutoffs follow its evidence
    assert refit_cutoffs(model) and model.cutoffs_from == "held-out"
    assert math.log(model.spam_cutoff / (1 - model.spam_cutoff)) == pytest.approx(30.25 + 1.0, abs=0.01)
    assert "the spam cutoff over every such ham" in cutoffs_from(model)
    assert not refit_cutoffs(model)     # the same evidence: the same cutoffs


def test_a_model_file_older_than_the_weight_scores_its_pairs_at_weight_one(tmp_path):
    """Files of schema versions before 7 have no ``pair_weight``: they load with 1, as they scored;
    a file written now says 7 or later and keeps the weight."""
    from pathlib import Path

    from spamnb.persistence import schema

    old = Path(__file__).parent / "data" / "models" / "corpora-4ac9e83.spamnb"
    header, _arrays = schema.read(old)
    assert header["version"] < 7 and "pair_weight" not in header["params"]
    model = SpamFilter.load(old)
    assert model.pair_weight == 1.0
    path = tmp_path / "learned.spamnb"
    learned = learning.learned_model().fit([b"Subject: a\n\nhello there friend", b"Subject: b\n\ncheap pills now"],
                                           [False, True], tune=False)
    learned.save(path)
    header, _arrays = schema.read(path)
    assert header["version"] == schema.VERSION >= 7 and header["params"]["pair_weight"] == LEARNED_PAIR_WEIGHT
