"""``spamnb serve --auto-learn`` (spamnb.server.autolearn) through the real ``spamc``: confident
verdicts learned in the checking model, marked in its ledger, relabelled exactly by a TELL;
unsure mail and another user's site model never learned; and the server's score map follows
cutoffs refitted by a followed journal (spamnb.server.models.ModelCache)."""

import random
import shutil
import time

import pytest

from spamnb import SpamFilter
from spamnb.model import learning
from spamnb.estimator.ledger import Tally, canonical, message_digest
from spamnb.estimator.prequential import ScoreHistogram
from spamnb.report.scale import ScoreMap
from spamnb.server import protocol as spamd
from spamnb.server.models import ModelCache

from test_autolearn import _message
from test_serve import Daemon, needs_spamc


def _train(path):
    rng = random.Random(5)
    data = [(_message(rng, n % 3 == 0, n), n % 3 == 0) for n in range(300)]
    SpamFilter().fit([d for d, _ in data], [s for _, s in data], tune=False).save(path)
    return path


def _wait_for(predicate, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _answered(out):
    """Whether ``spamc -c`` printed a server's answer (SCORE/THRESHOLD): with no server
    answering it prints 0/0 and exits 0, as for a ham."""
    score, _, threshold = out.stdout.decode().strip().partition("/")
    return float(threshold) > 0 and float(score) != 0.0


def _entry(path, data):
    ledger = SpamFilter.load(path).ledger_
    return None if ledger is None else ledger.entry(message_digest(canonical(data)))


@needs_spamc
def test_serve_auto_learn_through_spamc(tmp_path):
    home = tmp_path
    model = _train(home / "model.spamnb")
    twin = shutil.copy(model, home / "twin.spamnb")
    rng = random.Random(31)
    spam, unsure = _message(rng, True, 9000, 60), b"Subject: hmm\r\n\r\noffer1 meeting1 offer2 meeting2\r\n"
    assert SpamFilter.load(model).classify(unsure).label == "unsure"
    off = Daemon(home)
    try:       # off by default
        assert off.spamc("-c", stdin=spam).returncode == 1
    finally:
        off.stop()
    assert SpamFilter.load(model).class_count_ == SpamFilter.load(twin).class_count_
    daemon = Daemon(home, "--auto-learn", "--allow-tell", "--verbose")
    try:
        base = SpamFilter.load(model).class_count_
        out = daemon.spamc("-c", stdin=unsure)      # unsure: answered, never learned
        assert out.returncode == 0 and _answered(out), out   # spamc -c with no answer prints 0/0, exits 0
        out = daemon.spamc("-c", stdin=spam)
        assert out.returncode == 1, out             # spam, answered before it is learned
        _wait_for(lambda: "auto-learn" in daemon.log_text(), "the auto-learn's log line")
        assert f"auto-learn {model}: learned" in daemon.log_text(), daemon.log_text()
        assert SpamFilter.load(model).class_count_ == (base[0], base[1] + 1)      # the spam only
        assert _entry(model, spam)[:2] == (True, True)                             # marked auto-learned
        assert daemon.log_text().count("auto-learn") == 1
        # the user says it was ham (spamc -L, a TELL): relabelled exactly
        out = daemon.spamc("-L", "ham", stdin=spam)
        assert out.returncode == 0 and b"successfully" in out.stdout, out
        with learning.session(twin) as s:
            s.learn(spam, False, Tally())
        fixed, direct = SpamFilter.load(model), SpamFilter.load(twin)
        assert fixed.class_count_ == direct.class_count_ == (base[0] + 1, base[1])
        assert list(fixed.held_out_.counts) == list(direct.held_out_.counts)       # its score moved, once
        assert _entry(model, spam)[:2] == (False, False)                           # the user's label now
        # checked again: one ham lesson leaves it spam to the model, but the user's label stands (known)
        out = daemon.spamc("-c", stdin=spam)
        assert out.returncode == 1 and _answered(out), out
        _wait_for(lambda: f"auto-learn {model}: known" in daemon.log_text(), "the second auto-learn's log line")
        assert daemon.log_text().count("auto-learn") == 2, daemon.log_text()
        assert SpamFilter.load(model).class_count_ == (base[0] + 1, base[1])
    finally:
        daemon.stop()


@needs_spamc
def test_serve_auto_learn_never_teaches_the_site_model_for_a_user_without_one(tmp_path):
    home, users = tmp_path, tmp_path / "users"
    model = _train(home / "model.spamnb")
    (users / "alice").mkdir(parents=True)
    _train(users / "alice" / "model.spamnb")
    rng = random.Random(32)
    daemon = Daemon(home, "--auto-learn", "--models-dir", users, "--verbose")
    try:
        base = SpamFilter.load(model).class_count_
        for n in range(3):
            assert daemon.spamc("-c", "-u", "bob", stdin=_message(rng, True, 9100 + n, 60)).returncode == 1
            assert daemon.spamc("-c", stdin=_message(rng, True, 9200 + n, 60)).returncode == 1
        spam = _message(rng, True, 9300, 60)
        assert daemon.spamc("-c", "-u", "alice", stdin=spam).returncode == 1
        _wait_for(lambda: "auto-learn" in daemon.log_text(), "alice's auto-learn")
        assert _entry(users / "alice" / "model.spamnb", spam)[:2] == (True, True)
        assert SpamFilter.load(model).class_count_ == base        # the site model learned nothing
        assert daemon.log_text().count("auto-learn") == 1
    finally:
        daemon.stop()


@needs_spamc
def test_serve_auto_learn_holds_at_most_max_pending_learns(tmp_path):
    """While the model's lock is held (a long learn elsewhere), at most MAX_PENDING auto-learns
    wait; the verdicts offered beyond them are let go, not queued; once they are done, as many
    may wait again."""
    from spamnb.persistence.store import locked
    from spamnb.server.autolearn import MAX_PENDING

    from spamnb.server.autolearn import LOCK_WAIT

    assert (MAX_PENDING, LOCK_WAIT) == (4, 5.0)     # docs/serve.md: "waits at most 5 s ..., at most 4 waiting"
    home = tmp_path
    model = _train(home / "model.spamnb")
    rng = random.Random(34)
    daemon = Daemon(home, "--auto-learn", "--verbose")
    try:
        base = SpamFilter.load(model).class_count_
        for round_ in (1, 2):
            with locked(model):
                for n in range(MAX_PENDING + 2):
                    out = daemon.spamc("-c", stdin=_message(rng, True, 9500 + 10 * round_ + n, 60))
                    assert out.returncode == 1 and _answered(out), out        # answered, not held
            want = round_ * MAX_PENDING
            _wait_for(lambda: daemon.log_text().count(": learned") >= want, f"{want} auto-learns", timeout=60)
    finally:
        daemon.stop()       # it waits for the learns it scheduled: every one is counted below
    log = (home / f"serve-{daemon.port}.log").read_text(errors="replace")
    assert log.count(": learned") == 2 * MAX_PENDING and "not learned" not in log, log
    assert SpamFilter.load(model).class_count_ == (base[0], base[1] + 2 * MAX_PENDING)


def test_the_score_map_follows_cutoffs_refitted_by_the_journal(tmp_path):
    """A loaded model that follows its journal: a learn that refits the cutoffs (1,000 held-out ham
    reached) changes the score map the server answers with, without the model read again."""
    path = tmp_path / "model.spamnb"
    _train(path)
    sf = SpamFilter.load(path)
    held = ScoreHistogram()
    for _ in range(999):
        held.add(-30.0, False)
    for _ in range(60):
        held.add(30.0, True)
    sf.held_out_ = held
    sf.save(path)
    assert SpamFilter.load(path).cutoffs_from == "defaults"
    cache = ModelCache(4, lambda line: None, whole=True)
    loaded, before = cache.get(str(path), 5.0)
    rng = random.Random(33)
    with learning.session(path) as s:           # appended to the journal: the cutoffs are refitted
        s.learn(_message(rng, False, 9400, 60), False, Tally())
    assert not s.compacted
    fresh = SpamFilter.load(path)
    assert fresh.cutoffs_from == "held-out"
    same, after = cache.get(str(path), 5.0)
    assert same is loaded                      # followed in place, not read again
    expected = ScoreMap.from_cutoffs(fresh.cutoffs, 5.0)
    assert (after.ham_log_odds, after.spam_log_odds) != (before.ham_log_odds, before.spam_log_odds)
    assert after.ham_log_odds == pytest.approx(expected.ham_log_odds)
    assert after.spam_log_odds == pytest.approx(expected.spam_log_odds)


@needs_spamc
def test_an_auto_learn_that_fails_logs_why_in_one_line_and_the_mail_is_answered(tmp_path):
    """A model whose lock file cannot be opened (a folder stands in its
    place, which stops root as well as a user): the check is answered,
    nothing is learned, and the log says why: the error's own text on one
    line, not only its type."""
    home = tmp_path
    model = _train(home / "model.spamnb")
    base = SpamFilter.load(model).class_count_
    rng = random.Random(35)
    daemon = Daemon(home, "--auto-learn", "--verbose")
    (home / "model.spamnb.lock").mkdir()
    try:
        out = daemon.spamc("-c", stdin=_message(rng, True, 9600, 60))
        assert out.returncode == 1 and _answered(out), out
        _wait_for(lambda: "not learned" in daemon.log_text(), "the failed auto-learn's line")
        line = next(x for x in daemon.log_text().splitlines() if "not learned" in x)
        assert f"auto-learn {model}: not learned: " in line and "directory" in line, line
    finally:
        daemon.stop()
    assert SpamFilter.load(model).class_count_ == base
