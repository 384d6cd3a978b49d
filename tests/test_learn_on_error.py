"""Users who only report mistakes (issue 46): a model that grows by learning starts with a wide
unsure band, narrowed to the defaults as held-out ham is counted (spamnb.estimator.prequential), so
a young model sends more of its mail to be sorted and calls less ham spam; the online protocol
runs the same rule; a correction through ``spamnb learn`` / ``forget`` leaves exactly the model,
the held-out scores and the cutoffs that learning the message once with its label (or never) leaves."""

import math
import random
from array import array

import pytest

from spamnb import SpamFilter
from spamnb.evaluation import online
from spamnb.estimator import calibrate
from spamnb.model import learning
from spamnb.estimator.defaults import DEFAULT_HAM_LOG_ODDS, DEFAULT_SPAM_CUTOFF
from spamnb.estimator.ledger import Tally
from spamnb.estimator.ledger_table import ledger_of
from spamnb.estimator.prequential import (BIN_WIDTH, LOW, N_BINS, THIN_HAM_LOG_ODDS, THIN_SPAM_LOG_ODDS, ScoreHistogram,
                                      refit_cutoffs)
from spamnb.estimator.verdict import logit

from conftest import run_spamnb

SHARED = [f"word{i}" for i in range(200)]
HAMMY = [f"agenda{i}" for i in range(60)]
SPAMMY = [f"bargain{i}" for i in range(60)]


def _mail(rng, spam, n, lean=0.3):
    """A message of shared words and, for ``lean`` of its words, its class's own."""
    own = SPAMMY if spam else HAMMY
    words = [rng.choice(own) if rng.random() < lean else rng.choice(SHARED) for _ in range(40)]
    return f"Subject: note {n}\nMessage-ID: <{n}.{int(spam)}@example.org>\n\n{' '.join(words)}\n".encode()


def _mails(n, seed=5):
    rng = random.Random(seed)
    return [(_mail(rng, spam, i), spam) for i, spam in enumerate(rng.random() < 0.4 for _ in range(n))]


def _state(sf):
    """What must be equal: tokens, messages per class, held-out scores, cutoffs (exactly), and
    the token counts (to the rounding of a sum that had a message's counts added and taken off)."""
    import numpy as np

    counts = sf.word_counts_
    return (sf.vocabulary_.tokens(), tuple(counts.class_count_),
            list(sf.held_out_.counts) if sf.held_out_ is not None else None, sf.cutoffs, sf.cutoffs_from,
            np.asarray(counts.feature_count_, dtype=np.float64))


def _same(a, b):
    a, b = _state(a), _state(b)
    assert a[:-1] == b[:-1]
    assert a[-1] == pytest.approx(b[-1], rel=1e-12, abs=1e-12)


def _learn_all(path, mails):
    with learning.session(path) as s:
        for data, spam in mails:
            s.learn(data, spam, Tally())


def test_the_band_starts_widest_narrows_as_ham_is_counted_and_stays_over_every_ham():
    spam = [30.0] * 60
    default_spam = logit(DEFAULT_SPAM_CUTOFF)
    previous = None
    for n_ham in (0, 1, 100, 250, 500, 750, 999):
        h = ScoreHistogram()
        for i in range(n_ham):
            h.add(-30.0 + (i % 7), False)
        for s in spam:
            h.add(s, True)
        spam_cut, ham_cut, rule = h.cutoffs()
        t = n_ham / calibrate.min_ham_for(calibrate.DEFAULT_TARGET_FPR)
        assert "thin evidence" in rule
        assert spam_cut == pytest.approx(THIN_SPAM_LOG_ODDS + (default_spam - THIN_SPAM_LOG_ODDS) * t)
        assert ham_cut == pytest.approx(THIN_HAM_LOG_ODDS + (DEFAULT_HAM_LOG_ODDS - THIN_HAM_LOG_ODDS) * t)
        assert default_spam < spam_cut <= THIN_SPAM_LOG_ODDS and THIN_HAM_LOG_ODDS <= ham_cut < DEFAULT_HAM_LOG_ODDS
        if previous is not None:
            assert spam_cut < previous[0] and ham_cut > previous[1]
        previous = spam_cut, ham_cut
    # one ham scored high: the spam cutoff over it (+ 1 margin), at most 36 (a probability's limit)
    h = ScoreHistogram()
    for i in range(900):
        h.add(-25.0, False)
    h.add(20.1, False)
    assert h.cutoffs()[0] == pytest.approx(LOW + (ScoreHistogram.bin_of(20.1) + 1) * BIN_WIDTH + 1.0)
    h.add(50.0, False)
    assert h.cutoffs()[0] == calibrate.MAX_LOG_ODDS
    # 1,000 ham and 50 spam: fitted as train fits them
    for i in range(200):
        h.add(-25.0, False)
    for s in spam:
        h.add(s, True)
    assert h.cutoffs()[2].startswith("fitted")


def test_a_new_model_that_learns_starts_with_the_widest_band(tmp_path):
    """``spamnb learn`` into a new model file: the cutoffs of no evidence, saved with the model; the
    online protocol's model starts with the same."""
    path = tmp_path / "m.spamnb"
    (data, spam), = _mails(1)
    proc = run_spamnb(["learn", "--spam" if spam else "--ham", "-m", path], stdin=data, text=False)
    assert proc.returncode == 0, proc.stderr
    model = SpamFilter.load(path)
    assert model.cutoffs_from == "held-out"
    assert logit(model.spam_cutoff) == pytest.approx(THIN_SPAM_LOG_ODDS, abs=0.1)    # P near 1: coarse
    assert logit(model.ham_cutoff) == pytest.approx(THIN_HAM_LOG_ODDS, abs=1e-9)
    assert online.OnlineModel().cutoffs() == (THIN_SPAM_LOG_ODDS, THIN_HAM_LOG_ODDS)
    info = run_spamnb(["info", "-m", path], text=True)
    assert info.returncode == 0 and "the scores learned messages had before each was learned" in info.stdout


def test_a_young_learned_model_leaves_mail_between_the_defaults_and_its_band_unsure(tmp_path):
    """A message whose log-odds the default cutoffs would call spam (>= 14) or ham (<= -4) is unsure
    to a young learned model (its band is wider): the user sorts it, and it is learned."""
    path = tmp_path / "m.spamnb"
    _learn_all(path, _mails(300))
    model = SpamFilter.load(path)
    spam_cut, ham_cut = logit(model.spam_cutoff), logit(model.ham_cutoff)
    assert spam_cut > logit(DEFAULT_SPAM_CUTOFF) + 1 and ham_cut < DEFAULT_HAM_LOG_ODDS - 1
    rng = random.Random(9)
    seen = set()
    for n in range(3000):
        spam = n % 2 == 0
        probe = _mail(rng, spam, 10_000 + n, lean=rng.choice((0.02, 0.05, 0.1)))
        verdict = model.classify(probe, evidence=False)
        score = verdict.log_odds
        if logit(DEFAULT_SPAM_CUTOFF) <= score < spam_cut - 1:     # (P near 1 is coarse: 1 of margin)
            assert verdict.label == "unsure"
            seen.add("over the default spam cutoff")
        elif ham_cut < score <= DEFAULT_HAM_LOG_ODDS:
            assert verdict.label == "unsure"
            seen.add("under the default ham cutoff")
        elif score >= spam_cut + 1:
            assert verdict.label == "spam"
    assert seen == {"over the default spam cutoff", "under the default ham cutoff"}


def test_on_error_the_wide_band_learns_more_and_calls_less_ham_spam():
    """The online protocol, on error or unsure, runs the model's own cutoffs: with the band more of the
    stream is sorted by the user (and learned) than with the default cutoffs."""
    mails = _mails(1500, seed=11)
    y = [spam for _, spam in mails]
    result = online.run_online([d for d, _ in mails], y, **online.feedback_options("error"))
    spam_cuts, ham_cuts = result.spam_cutoffs, result.ham_cutoffs
    assert spam_cuts[0] == THIN_SPAM_LOG_ODDS and ham_cuts[0] == THIN_HAM_LOG_ODDS
    s = result.log_odds
    unsure = [ham_cuts[i] < s[i] < spam_cuts[i] for i in range(len(y))]
    wrong = [(s[i] < spam_cuts[i]) if y[i] else (s[i] > ham_cuts[i]) for i in range(len(y))]
    assert list(result.trained) == wrong                      # learned: exactly the wrong or unsure
    default = [logit(DEFAULT_SPAM_CUTOFF) > s[i] > DEFAULT_HAM_LOG_ODDS for i in range(len(y))]
    assert sum(unsure) > sum(default)


def test_relabel_and_forget_of_a_correction_restore_the_model_exactly(tmp_path):
    """Through the command line (journaled learns, replayed on load): a message learned as ham and
    corrected to spam leaves the model (counts, held-out scores, cutoffs, ledger) that learning it as
    spam once leaves; forgetting it leaves the model that never learned it."""
    mails = _mails(260, seed=3)
    base, (probe, _) = mails[:-1], mails[-1]
    models = {}
    for name in ("relabelled", "spam once", "forgotten", "never"):
        path = tmp_path / f"{name}.spamnb"
        _learn_all(path, base)
        models[name] = path
    young = SpamFilter.load(models["never"])
    assert young.held_out_ is not None and 0 < young.held_out_.total(False) < 1000    # the thin band's regime
    message = tmp_path / "probe.eml"
    message.write_bytes(probe)

    def spamnb(*args):
        proc = run_spamnb([*args], text=True)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert "learned 1" in spamnb("learn", "--ham", "-m", models["relabelled"], message)
    assert "relabelled 1" in spamnb("learn", "--spam", "-m", models["relabelled"], message)
    assert "already known 1" in spamnb("learn", "--spam", "-m", models["relabelled"], message)
    spamnb("learn", "--spam", "-m", models["spam once"], message)
    spamnb("learn", "--ham", "-m", models["forgotten"], message)
    assert "forgot 1" in spamnb("forget", "-m", models["forgotten"], message)
    relabelled, once = SpamFilter.load(models["relabelled"]), SpamFilter.load(models["spam once"])
    forgotten, never = SpamFilter.load(models["forgotten"]), SpamFilter.load(models["never"])
    _same(relabelled, once)
    _same(forgotten, never)
    assert ledger_of(relabelled).to_arrays() == ledger_of(once).to_arrays()
    assert ledger_of(forgotten).to_arrays() == ledger_of(never).to_arrays()
    # the held-out score moved with the label: counted once, as spam
    assert relabelled.held_out_.total(True) == young.held_out_.total(True) + 1
    assert relabelled.held_out_.total(False) == young.held_out_.total(False)
    # the cutoffs are those of the histogram: refitting changes nothing
    for model in (relabelled, forgotten):
        assert not refit_cutoffs(model) and model.cutoffs_from == "held-out"


def test_a_trained_models_default_cutoffs_wait_for_evidence_enough(tmp_path):
    """``train`` that could not calibrate (too little mail) leaves the defaults: learns since then do not
    widen them (their held-out scores say nothing of the mail it was trained on); they are fitted once
    the held-out evidence is enough, as before."""
    model = SpamFilter().fit([d for d, _ in _mails(120, seed=7)], [s for _, s in _mails(120, seed=7)], tune=False)
    assert model.cutoffs_from == "defaults"
    before = model.cutoffs
    model.held_out_ = h = ScoreHistogram(array("d", [0.0] * (2 * N_BINS)))
    h.counts[ScoreHistogram.bin_of(-30.0)] = 300.0              # 300 ham at -30, 60 spam at 30
    h.counts[N_BINS + ScoreHistogram.bin_of(30.0)] = 60.0
    assert not refit_cutoffs(model) and model.cutoffs == before
    h.counts[ScoreHistogram.bin_of(-30.0)] = 1100.0
    assert refit_cutoffs(model) and model.cutoffs_from == "held-out"
    assert math.isclose(logit(model.spam_cutoff), LOW + (ScoreHistogram.bin_of(-30.0) + 1) * BIN_WIDTH + 1.0,
                        abs_tol=1e-6)
