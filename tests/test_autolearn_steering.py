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


def _attack(steering, tmp_path, interleave, parts=None, n_messages=10, select=None):
    steer, base, target, hams = steering
    tmp_path.mkdir(exist_ok=True)
    rows = steer.attack(str(base), str(tmp_path), target, hams, "victim", n_messages, n_messages, interleave,
                        lambda text: None, parts, select)
    return rows[0], rows[-1]


@pytest.mark.xfail(strict=True, reason="auto-learn can be steered from outside: no rule found that stops it "
                                       "without making auto-learn worse online (docs/reliability.md; the "
                                       "token-wise rule below holds and costs online)")
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
    rules.main([str(SAMPLE_CORPUS), "--rules", "none;parts:0:-1e9;tokens:1e9:learn"])
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    shipped = float(out.split("shipped run_online: (1-ROCA) ")[1].split()[0])
    assert float(lines["none"].split("(1-ROCA) ")[1].split()[0]) == shipped   # also checked by the script
    assert " ham stopped     0" in lines["none"]
    assert "ham stopped     0" not in lines["parts:0:-1e9"]   # every ham verdict stopped
    # the token rule that keeps every token is the shipped rule, to the bit
    assert float(lines["tokens:1e9:learn"].split("(1-ROCA) ")[1].split()[0]) == shipped
    assert rules.parse_rule("parts:0,32:16+spamparts:8:4+weight:0.5") == {
        "parts": ((0, 32), 16.0), "spamparts": ((8,), 4.0), "strong": None, "weight": 0.5, "tokens": None,
        "spamtokens": None}
    assert rules.parse_rule("tokens:L6:learn:scale+spamtokens:0")["tokens"] == (6.0, True, True)
    assert rules.parse_rule("tokens:L6:learn:scale+spamtokens:0")["spamtokens"] == (0.0, False, False)
    with pytest.raises(SystemExit, match="not a rule"):
        rules.parse_rule("parts:0")
    shutil.rmtree(REPO / "scripts" / "check" / "__pycache__", ignore_errors=True)


def test_the_token_rule_of_the_script_holds_the_target_and_learns_only_the_kept_tokens(steering, tmp_path):
    # the token-wise rule (not shipped: docs/reliability.md): a ham verdict learned without the
    # tokens leaning spam and the unknown ones; the same interleaved attack as the xfail test above
    steer, base, target, hams = steering
    _before, held = _attack(steering, tmp_path / "held", 4, select=(0.0, False, False, None))
    assert held["target"] == "spam" and held["target_log_odds"] >= 30, held
    assert held["outcomes"].get("learned as ham", 0) > 0, held     # ham was learned, but not the target's tokens
    # margin +inf with unknown tokens counted: every token kept, the message learned whole, as shipped
    _before, whole = _attack(steering, tmp_path / "whole", 4, select=(float("inf"), True, False, None))
    assert whole["target"] != "spam", whole


def test_token_mask_leaves_out_the_tokens_leaning_the_other_way_and_a_masked_learn_counts_only_the_rest():
    import numpy as np

    from spamnb.model import learning

    steer = _script("steer_autolearn")
    harness = steer.harness
    messages = steer.stream(str(SAMPLE_CORPUS))
    sf = learning.learned_model()
    for data, is_spam in messages[:120]:
        sf.learn(data, is_spam)
    data = next(d for d, s in messages[120:] if not s)
    stream = sf.tokenizer_.stream(data)
    idx = list(sf.vocabulary_.lookup(stream.hashes))
    weight = dict(sf.scorer().score(stream.hashes, len(stream.hashes), stream.pairs_start)[1])
    keep = harness.token_mask(sf, stream, False, 0.0)
    kept = set(keep)
    assert 0 < len(keep) < len(idx)
    for j, i in enumerate(idx):   # ham kept: known and not leaning spam; unknown left out
        assert (j in kept) == (i >= 0 and weight.get(i, 0.0) <= 0.0), (j, i, weight.get(i))
    assert set(harness.token_mask(sf, stream, False, 0.0, unknown=True)) == kept | {
        j for j, i in enumerate(idx) if i < 0}
    assert set(harness.token_mask(sf, stream, True, 0.0)) == {j for j, i in enumerate(idx)
                                                              if i >= 0 and weight.get(i, 0.0) >= 0.0}
    before = np.asarray(sf.word_counts_.matrix()).copy()
    n_features = sf.vocabulary_.n_features
    sf.learn(None, False, harness.MaskedStream(stream, keep))
    after = np.asarray(sf.word_counts_.matrix())
    assert sf.vocabulary_.n_features == n_features            # no unknown token came in
    changed = set(np.flatnonzero(after[0, :n_features] != before[0, :n_features]).tolist())
    assert changed == {idx[j] for j in keep}                 # ham counts of the kept tokens only
    assert (after[1, :n_features] == before[1, :n_features]).all()
