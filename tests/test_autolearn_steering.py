"""Auto-learn steered from outside (docs/reliability.md, "Auto-learn steered
from outside"): scripts/check/steer_autolearn.py's attack on the sample
corpus, and scripts/check/autolearn_rules.py, which measures rules against it
online.  No rule is shipped: the test that a target spam stays spam is an
expected failure until one is."""

import importlib.util
import shutil

import pytest

from conftest import REPO, SAMPLE_CORPUS

CHECK = REPO / "scripts" / "check"


def _script(name):
    spec = importlib.util.spec_from_file_location(name, CHECK / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def steering(tmp_path_factory):
    """(script, model path, target, cover ham): a model learned from the sample's first 200
    messages in arrival order and the first later spam it calls spam at log-odds 30 or more."""
    steer = _script("steer_autolearn")
    messages = steer.stream(str(SAMPLE_CORPUS))
    base = tmp_path_factory.mktemp("steer") / "model.spamnb"
    steer.learn_model(str(base), messages[:200])
    later = messages[200:]
    target = next(data for data, is_spam in later
                  if is_spam and steer.text_of(data) and _called_spam(steer.check(str(base), data)[1], 30))
    hams = [data for data, is_spam in later if not is_spam and len(steer.text_of(data).split()) >= 50]
    return steer, base, target, hams


def _called_spam(verdict, least):
    return verdict.label == "spam" and verdict.log_odds >= least


def _attack(steering, tmp_path, interleave, parts=None, n_messages=10):
    steer, base, target, hams = steering
    tmp_path.mkdir(exist_ok=True)
    rows = steer.attack(str(base), str(tmp_path), target, hams, "victim", n_messages, n_messages, interleave,
                        lambda text: None, parts)
    return rows[0], rows[-1]


@pytest.mark.xfail(strict=True, reason="auto-learn can be steered from outside: no rule found that stops it "
                                       "without making auto-learn worse online (docs/reliability.md)")
def test_a_target_spam_stays_spam_when_a_sender_steers_auto_learn(steering, tmp_path):
    # the target's text spread through a later ham's in runs of 4 words, under that ham's header
    # fields (on the sample's small model the appended form scores spam and is learned as spam;
    # on the shared corpora both forms steer: steer_autolearn.py)
    before, after = _attack(steering, tmp_path, 4)
    assert before["target"] == "spam"
    assert after["target"] == "spam", after


def test_the_parts_rule_of_the_script_stops_ham_learns_and_only_them(steering, tmp_path):
    # margin -inf: every ham verdict has a segment at or above it, so no ham is learned,
    # and the target cannot move toward ham; margin +inf: the shipped rule
    steer, base, target, hams = steering
    _before, blocked = _attack(steering, tmp_path / "blocked", 4, ((0,), float("-inf")))
    assert blocked["learned"] == 0 and blocked["outcomes"].get("parts disagree", 0) > 0, blocked
    assert blocked["target"] == "spam"
    _before, open_ = _attack(steering, tmp_path / "open", 4, ((0,), float("inf")))
    assert "parts disagree" not in open_["outcomes"] and open_["learned"] > 0, open_
    assert list(steer.harness.text_windows([(0, 10), (10, 12)], (0, 4))) == [
        (0, 10), (0, 4), (2, 6), (4, 8), (6, 10), (10, 12), (10, 12)]


def test_autolearn_rules_rule_none_is_the_shipped_run(capsys):
    rules = _script("autolearn_rules")
    rules.main([str(SAMPLE_CORPUS), "--rules", "none;parts:0:-1e9"])
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    shipped = float(out.split("shipped run_online: (1-ROCA) ")[1].split()[0])
    assert float(lines["none"].split("(1-ROCA) ")[1].split()[0]) == shipped   # also checked by the script
    assert " ham stopped     0" in lines["none"]
    assert "ham stopped     0" not in lines["parts:0:-1e9"]   # every ham verdict stopped
    assert rules.parse_rule("parts:0,32:16+spamparts:8:4+weight:0.5") == {
        "parts": ((0, 32), 16.0), "spamparts": ((8,), 4.0), "strong": None, "weight": 0.5}
    with pytest.raises(SystemExit, match="not a rule"):
        rules.parse_rule("parts:0")
    shutil.rmtree(REPO / "scripts" / "check" / "__pycache__", ignore_errors=True)
