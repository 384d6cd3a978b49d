"""spamnb classify --auto-learn (spamnb.model.autolearn): confident verdicts learned through the
ledger, never unsure mail, relabelled exactly by a later learn, bounded in rate per model."""

import random
import time

import pytest

from spamnb import SpamFilter
from spamnb.model.autolearn import AUTO_LEARN_MARGIN, AUTO_LEARN_PER_HOUR, RateLimit, auto_label

from conftest import run_spamnb

HAM_WORDS = [f"meeting{i}" for i in range(200)] + ["project", "notes", "review", "lunch"]
SPAM_WORDS = [f"offer{i}" for i in range(200)] + ["cheap", "pills", "winner", "click"]


def _message(rng, spam, n, words=30):
    pool = SPAM_WORDS if spam else HAM_WORDS
    body = " ".join(rng.choice(pool) for _ in range(words))
    return f"Subject: {'deal' if spam else 'hello'} {n}\nMessage-ID: <{n}@example.org>\n\n{body}\n".encode()


@pytest.fixture
def model(tmp_path):
    rng = random.Random(5)
    data = [(_message(rng, n % 3 == 0, n), n % 3 == 0) for n in range(300)]
    path = tmp_path / "model.spamnb"
    SpamFilter().fit([d for d, _ in data], [s for _, s in data], tune=False).save(path)
    return path


def _count(path):
    return sum(SpamFilter.load(path).class_count_)


def test_auto_label_needs_the_margin():
    assert auto_label(16.1, 14.0, -4.0, 2.0) is True and auto_label(15.9, 14.0, -4.0, 2.0) is None
    assert auto_label(-6.0, 14.0, -4.0, 2.0) is False and auto_label(-5.9, 14.0, -4.0, 2.0) is None
    assert auto_label(float("nan"), 14.0, -4.0, 2.0) is None


def test_auto_label_edges():
    """The default margin (2 log-odds, docs/serve.md), a margin of 0 (the cutoff itself learns),
    a negative margin (refused: never inside the cutoffs' band), and the boundaries inclusive."""
    assert AUTO_LEARN_MARGIN == 2.0
    assert auto_label(16.0, 14.0, -4.0) is True and auto_label(15.99, 14.0, -4.0) is None
    assert auto_label(-6.0, 14.0, -4.0) is False and auto_label(-5.99, 14.0, -4.0) is None
    assert auto_label(14.0, 14.0, -4.0, 0.0) is True and auto_label(-4.0, 14.0, -4.0, 0.0) is False
    assert auto_label(30.0, 14.0, -4.0, -1.0) is None and auto_label(-30.0, 14.0, -4.0, -0.5) is None


def test_rate_limit_edges(tmp_path):
    hour = 100 * 3600.0
    limit = RateLimit(tmp_path / "m.spamnb", per_hour=1)
    assert limit.take(10.0) and not limit.take(20.0)      # the first clock hour (0) counts from 0 too
    assert limit.take(3600.0) and not limit.take(3601.0)
    (tmp_path / "m.spamnb.autolearn").write_text(f"{int(hour // 3600) + 1} 1\n")   # written in a later hour
    assert limit.take(hour)                                  # the clock went back: a new count
    (tmp_path / "m.spamnb.autolearn").write_text(f"{int(hour // 3600)} 5\n")       # over the limit
    assert not limit.take(hour + 1)
    assert AUTO_LEARN_PER_HOUR == 120 and RateLimit(tmp_path / "x").per_hour == 120   # docs/serve.md


def test_learn_verdict_needs_a_verdict_that_agrees_and_a_model(tmp_path, model):
    from spamnb.errors import ModelError
    from spamnb.model.autolearn import learn_verdict

    rng = random.Random(14)
    spam = _message(rng, True, 4000, 60)
    before = _count(model)
    for log_odds, label in ((30.0, "ham"), (30.0, "unsure"), (-30.0, "spam"), (-30.0, "unsure")):
        assert learn_verdict(model, spam, log_odds, label, 14.0, -4.0) == "not sure", label
    assert _count(model) == before
    assert learn_verdict(model, spam, 30.0, "".join(["sp", "am"]), 14.0, -4.0) == "learned"   # equal, not identical
    assert _count(model) == before + 1
    missing = tmp_path / "none.spamnb"
    with pytest.raises(ModelError):
        learn_verdict(missing, spam, 30.0, "spam", 14.0, -4.0)
    assert not missing.exists()


def test_learn_verdict_counts_the_hourly_cap_by_the_clock_it_is_given(tmp_path, model):
    # steer_autolearn.py sends 1,000 messages at the cap on a simulated clock (now=)
    from spamnb.model.autolearn import learn_verdict

    rng = random.Random(15)
    spams = [_message(rng, True, 5000 + n, 60) for n in range(3)]
    hour = 3600.0 * 1000
    assert learn_verdict(model, spams[0], 30.0, "spam", 14.0, -4.0, per_hour=1, now=hour) == "learned"
    assert learn_verdict(model, spams[1], 30.0, "spam", 14.0, -4.0, per_hour=1, now=hour + 3599) == "rate limit"
    assert learn_verdict(model, spams[1], 30.0, "spam", 14.0, -4.0, per_hour=1, now=hour + 3600) == "learned"
    assert (tmp_path / "model.spamnb.autolearn").read_text() == f"{int(hour // 3600) + 1} 1\n"
    # without now: the time (a simulated hour long past counts as another hour)
    assert learn_verdict(model, spams[2], 30.0, "spam", 14.0, -4.0, per_hour=1) == "learned"


def test_classify_auto_learn_learns_confident_verdicts_and_a_learn_relabels_them(tmp_path, model):
    rng = random.Random(9)
    spam = _message(rng, True, 1000, words=60)
    before = _count(model)
    plain = run_spamnb(["classify", "-m", str(model)], stdin=spam)
    assert plain.returncode == 0 and _count(model) == before        # off by default: nothing learned
    done = run_spamnb(["classify", "--auto-learn", "-v", "-m", str(model)], stdin=spam, text=False)
    assert done.returncode == 0, done.stderr                           # spam
    assert b"auto-learn: learned" in done.stderr
    assert _count(model) == before + 1 and SpamFilter.load(model).class_count_[1] > 0
    again = run_spamnb(["classify", "--auto-learn", "-v", "-m", str(model)], stdin=spam)
    assert b"auto-learn: known" in again.stderr and _count(model) == before + 1
    # the user says it was ham: the ledger relabels the auto-learned message exactly
    fix = run_spamnb(["learn", "--ham", "-m", str(model)], stdin=spam)
    assert fix.returncode == 0, fix.stderr
    assert b"relabelled 1" in fix.stdout + fix.stderr
    assert _count(model) == before + 1


def test_unsure_mail_is_never_learned(tmp_path, model):
    # as many spam words as ham words: unsure (log-odds about +3, between the cutoffs -4 and +14)
    mixed = b"Subject: hmm\n\n" + " ".join(SPAM_WORDS[:2] + HAM_WORDS[:2]).encode() + b"\n"
    assert SpamFilter.load(model).classify(mixed).label == "unsure"
    before = _count(model)
    out = run_spamnb(["classify", "--auto-learn", "-v", "-m", str(model)], stdin=mixed)
    assert out.returncode == 2, out.stderr                              # unsure
    assert b"auto-learn: not sure" in out.stderr and _count(model) == before


def test_passthrough_auto_learn_passes_the_mail_on_first(tmp_path, model):
    rng = random.Random(12)
    ham = _message(rng, False, 2000, words=60)
    before = _count(model)
    out = run_spamnb(["classify", "-p", "--auto-learn", "-m", str(model)], stdin=ham)
    assert out.returncode == 0 and out.stdout.endswith(ham.split(b"\n\n", 1)[1])
    assert _count(model) == before + 1


def test_rate_limit_per_model(tmp_path, model):
    hour = int(time.time() // 3600)
    (tmp_path / "model.spamnb.autolearn").write_text(f"{hour} {AUTO_LEARN_PER_HOUR}\n")
    rng = random.Random(13)
    before = _count(model)
    out = run_spamnb(["classify", "--auto-learn", "-v", "-m", str(model)], stdin=_message(rng, True, 3000, 60))
    assert b"auto-learn: rate limit" in out.stderr and _count(model) == before
    limit = RateLimit(tmp_path / "other.spamnb", per_hour=2)
    assert limit.take(7200.0) and limit.take(7300.0) and not limit.take(7400.0) and limit.take(10800.0)


def test_auto_learn_usage():
    out = run_spamnb(["classify", "--auto-learn", "--batch", "x"])
    assert out.returncode == 64


# ---------------------------------------------------------------- the ledger marks auto-learned entries (issue 40)
def _digest(data):
    from spamnb.estimator.ledger import canonical, message_digest

    return message_digest(canonical(data))


def _auto(path, data, spam):
    """Auto-learn ``data`` as its verdict, as classify/serve do (the model's own cutoffs)."""
    from spamnb.model.autolearn import learn_verdict
    from spamnb.estimator.verdict import logit

    sf = SpamFilter.load(path)
    verdict = sf.classify(data)
    assert verdict.label == ("spam" if spam else "ham")
    return learn_verdict(path, data, verdict.log_odds, verdict.label, logit(sf.spam_cutoff), logit(sf.ham_cutoff))


def _state(path):
    sf = SpamFilter.load(path)
    return list(sf.class_count_), list(sf.held_out_.counts) if sf.held_out_ is not None else [0.0] * 1024, sf


def test_a_correction_undoes_an_auto_learned_lesson_exactly(tmp_path, model):
    """Auto-learned as spam, then told it was ham: the model (counts, held-out histogram, ledger) is the
    model that learned the message as ham in the first place; the held-out score is moved, not counted twice."""
    import shutil

    from spamnb.model import learning
    from spamnb.estimator.ledger import Tally

    rng = random.Random(21)
    spam = _message(rng, True, 4000, words=60)
    probe = _message(rng, True, 4001, words=40)
    twin = tmp_path / "twin.spamnb"
    shutil.copy(model, twin)
    assert _auto(model, spam, True) == "learned"
    sf = SpamFilter.load(model)
    assert sf.ledger_.entry(_digest(spam))[:2] == (True, True)          # spam, auto-learned
    assert sf.ledger_.entry(_digest(spam))[2] is not None               # with its held-out bin
    with learning.session(model) as s:                                  # the user's correction (a move, a TELL)
        assert s.learn(spam, False, Tally()) == "relabelled"
    with learning.session(twin) as s:                                   # the user's label from the start
        assert s.learn(spam, False, Tally()) == "learned"
    fixed, direct = _state(model), _state(twin)
    assert fixed[0] == direct[0]
    assert fixed[1] == direct[1]                                        # one held-out score, under ham
    assert fixed[2].classify(probe).log_odds == pytest.approx(direct[2].classify(probe).log_odds, abs=1e-9)
    assert fixed[2].ledger_.entry(_digest(spam)) == direct[2].ledger_.entry(_digest(spam))
    assert fixed[2].ledger_.entry(_digest(spam))[:2] == (False, False)  # the user's label now
    # and the same after the journal is folded into the model file
    fixed[2].save(tmp_path / "whole.spamnb")
    whole = SpamFilter.load(tmp_path / "whole.spamnb")
    assert list(whole.held_out_.counts) == direct[1]
    assert whole.ledger_.entry(_digest(spam)) == direct[2].ledger_.entry(_digest(spam))


def test_a_user_label_that_agrees_makes_the_entry_the_users_and_a_verdict_never_overrides_one(tmp_path, model):
    from spamnb.model import learning
    from spamnb.estimator.ledger import Tally

    rng = random.Random(22)
    ham = _message(rng, False, 5000, words=60)
    assert _auto(model, ham, False) == "learned"
    counts = _state(model)
    with learning.session(model) as s:
        assert s.learn(ham, False, Tally()) == "known"
    again = _state(model)
    assert again[0] == counts[0] and again[1] == counts[1]              # nothing learned twice
    assert again[2].ledger_.entry(_digest(ham))[:2] == (False, False)   # but no longer auto-learned
    spam = _message(rng, True, 5001, words=60)
    with learning.session(model) as s:                                  # the user says ham (whatever it looks like)
        s.learn(spam, False, Tally())
    assert _auto(model, spam, True) == "known"                          # the verdict does not override it
    assert SpamFilter.load(model).ledger_.entry(_digest(spam))[:2] == (False, False)


def test_forget_takes_the_held_out_score_back(tmp_path, model):
    from spamnb.model import learning
    from spamnb.estimator.ledger import Tally

    rng = random.Random(23)
    before = _state(model)
    spam = _message(rng, True, 6000, words=60)
    with learning.session(model) as s:
        s.learn(spam, True, Tally())
    assert _state(model)[1] != before[1]
    with learning.session(model) as s:
        assert s.forget(spam) is True
    after = _state(model)
    assert after[0] == before[0] and after[1] == before[1]
