"""Cutoffs of a model that grows by learning (spamnb.estimator.prequential): the scores learned
messages had before each was learned, kept in the model file and its journal, fitted as the model grows."""

import random

import pytest

from spamnb import SpamFilter
from spamnb.model import learning
from spamnb.estimator import prequential
from spamnb.persistence import schema
from spamnb.estimator.ledger import Tally
from spamnb.estimator.prequential import N_BINS, ScoreHistogram
from spamnb.estimator.verdict import logit

from conftest import run_spamnb

HAM_WORDS = [f"meeting{i}" for i in range(300)] + ["project", "notes", "review", "lunch"]
SPAM_WORDS = [f"offer{i}" for i in range(300)] + ["cheap", "pills", "winner", "click"]


def _message(rng, spam, n):
    words = SPAM_WORDS if spam else HAM_WORDS
    body = " ".join(rng.choice(words) for _ in range(30))
    return f"Subject: {'deal' if spam else 'hello'} {n}\nMessage-ID: <{n}@example.org>\n\n{body}\n".encode()


def _stream(n_ham, n_spam, seed=1):
    rng = random.Random(seed)
    labels = [False] * n_ham + [True] * n_spam
    rng.shuffle(labels)
    return [(_message(rng, spam, n), spam) for n, spam in enumerate(labels)]


def _learn(path, stream, per_session=300):
    for start in range(0, len(stream), per_session):
        with learning.session(path) as s:
            tally = Tally()
            for data, spam in stream[start:start + per_session]:
                s.learn(data, spam, tally)


def test_learned_model_fits_its_cutoffs_from_held_out_scores(tmp_path):
    """A model grown by learns (journaled) gathers held-out scores, fits its cutoffs once it has 1,000 ham,
    and keeps both through the journal's replay and a whole save; info says where they came from."""
    path = tmp_path / "model.spamnb"
    stream = _stream(1450, 250)
    _learn(path, stream[:600])
    young = SpamFilter.load(path)
    assert young.cutoffs_from == "held-out"                 # fewer than 1,000 held-out ham: the thin band
    assert 0 < young.held_out_.total(False) < 1000
    thin_spam, thin_ham, rule = young.held_out_.cutoffs()
    assert "thin evidence" in rule and thin_spam > logit(SpamFilter().spam_cutoff) and thin_ham < -4.0
    assert logit(young.spam_cutoff) == pytest.approx(thin_spam, abs=1e-3)     # a probability near 1: 1e-14 apart
    assert logit(young.ham_cutoff) == pytest.approx(thin_ham, abs=1e-6)
    _learn(path, stream[600:-10])
    with learning.session(path) as s:       # the last learns journaled (the model file is left as it was)
        for data, spam in stream[-10:]:
            s.learn(data, spam, Tally())
        live = list(s.filter.held_out_.counts)
    assert not s.compacted
    grown = SpamFilter.load(path)
    assert grown.journal_ is not None and grown.journal_.status == "ok"     # replayed from the journal
    assert list(grown.held_out_.counts) == live
    assert grown.cutoffs_from == "held-out"
    assert grown.held_out_.total(False) >= 1000 and grown.held_out_.total(True) >= 50
    spam_cut, ham_cut, _rule = grown.held_out_.cutoffs()
    assert logit(grown.spam_cutoff) == pytest.approx(spam_cut, abs=1e-6)
    assert logit(grown.spam_cutoff) != pytest.approx(logit(SpamFilter().spam_cutoff))
    # a whole save (compaction) keeps the histogram and the source
    grown.save(tmp_path / "whole.spamnb")
    header, arrays = schema.read(tmp_path / "whole.spamnb")
    assert header["version"] == schema.VERSION and header["cutoff_source"] == "held-out"
    assert list(arrays["held_out"]) == list(grown.held_out_.counts) and len(arrays["held_out"]) == 2 * N_BINS
    info = run_spamnb(["info", "-m", str(path)], text=True)
    assert info.returncode == 0, info.stderr
    assert "cutoffs from:   the scores learned messages had before each was learned" in info.stdout


def test_one_class_first_counts_no_scores(tmp_path):
    """A folder of ham learned before any spam: a model of one class gives no held-out scores."""
    path = tmp_path / "model.spamnb"
    rng = random.Random(2)
    _learn(path, [(_message(rng, False, n), False) for n in range(200)])
    model = SpamFilter.load(path)
    assert model.held_out_ is None and model.cutoffs_from == "held-out"     # a learned model's, from no evidence
    assert (model.spam_cutoff, model.ham_cutoff) == learning.learned_model().cutoffs   # the widest band


def test_trained_cutoffs_stay(tmp_path):
    """Cutoffs cross-validated by train are not replaced by the learns' held-out scores."""
    stream = _stream(1100, 300, seed=3)
    model = SpamFilter().fit([d for d, _ in stream], [s for _, s in stream], word_pairs=0)
    assert model.cutoffs_from == "train"
    before = (model.spam_cutoff, model.ham_cutoff)
    for data, spam in stream[:50]:
        prequential.note_held_out(model, -30.0 if not spam else 30.0, spam)
    assert not model.refit_cutoffs() and (model.spam_cutoff, model.ham_cutoff) == before


def test_histogram_is_checked():
    with pytest.raises(ValueError):
        ScoreHistogram([0.0] * 10)
    with pytest.raises(ValueError):
        ScoreHistogram([float("nan")] * (2 * N_BINS))
    h = ScoreHistogram()
    h.add(float("inf"), True).add(float("-inf"), False).add(float("nan"), True)
    assert h.total(True) == 1 and h.total(False) == 1


def test_histogram_ages_when_a_class_total_passes_max_count(monkeypatch):
    """A class's counts are halved on the add that takes its total over MAX_COUNT, exactly when summing
    the row after every add would (the total is summed only when it could pass: the counts must match a
    histogram that sums each time, through takings back, relabels and ageings)."""
    monkeypatch.setattr(prequential, "MAX_COUNT", 40.0)
    rng = random.Random(3)
    h, plain = ScoreHistogram(), [0.0] * (2 * N_BINS)
    for n in range(400):
        score, spam = rng.uniform(-30.0, 30.0), rng.random() < 0.4
        weight = -1.0 if n % 7 == 3 else 1.0
        h.add(score, spam, weight)
        j = (N_BINS if spam else 0) + ScoreHistogram.bin_of(score)
        plain[j] = max(0.0, plain[j] + weight)
        start = N_BINS if spam else 0
        if weight > 0 and sum(plain[start:start + N_BINS]) > 40.0:
            plain = [c * 0.5 for c in plain]
        assert list(h.counts) == plain, n
    assert max(sum(plain[:N_BINS]), sum(plain[N_BINS:])) > 20.0   # the cap was reached (ageings happened)
