"""scripts/tune/cross_corpus.py: settings chosen on one corpus and judged on another."""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts" / "tune"))
import cross_corpus  # noqa: E402


def test_each_family_is_chosen_per_corpus_and_on_both_by_the_ratio_to_the_shipped_setting():
    table = {("a", 1): 1.0, ("a", 2): 0.5, ("a", 3): 0.9,     # a prefers 2 (half of base)
             ("b", 1): 10.0, ("b", 2): 30.0, ("b", 3): 8.0}   # b prefers 3; 2 triples b's error
    families = {"x": [{"x": 1}, {"x": 2}, {"x": 3}]}
    chosen, rows = cross_corpus.choose(families, lambda c, s: table[(c, s["x"])], ["a", "b"], {"x": 1})
    assert chosen["x"]["a"] == {"x": 2} and chosen["x"]["b"] == {"x": 3}
    # geometric means of the ratios: 1 -> 1, 2 -> sqrt(0.5 * 3) = 1.22, 3 -> sqrt(0.9 * 0.8) = 0.85
    assert chosen["x"]["both"] == {"x": 3}
    assert [r[1] for r in rows] == ["x=1", "x=2", "x=3"]
    assert cross_corpus.combined({"x": 1, "y": 5}, chosen, "a") == {"x": 2, "y": 5}


def test_the_model_s_own_weight_scores_as_the_shipped_model_until_it_moves(sample_corpus):
    """The mixing run gives the learned model's log-odds exactly while its weight is the default,
    and each message's log-odds are those of the weight it was scored at."""
    from spamnb.evaluation.online import run_online
    from spamnb.estimator.defaults import LEARNED_PAIR_WEIGHT

    _none, labels, datas, _how = cross_corpus.arrival_order(str(sample_corpus))
    order = np.random.default_rng(3).permutation(len(datas))      # both classes early
    y, datas = np.asarray(labels, dtype=bool)[order], [datas[i] for i in order]
    settings = cross_corpus.shipped_online()
    mixed, weights = cross_corpus.mixing_run(datas, y, settings)
    shipped = run_online(datas, y)
    assert weights[0] == LEARNED_PAIR_WEIGHT
    same = weights == LEARNED_PAIR_WEIGHT
    assert same.sum() > 100
    a, b = mixed.log_odds[same], shipped.log_odds[same]
    finite = np.isfinite(b)
    assert np.array_equal(np.isfinite(a), finite)
    assert np.allclose(a[finite], b[finite], rtol=1e-9, atol=1e-9)
    for w in set(weights[~same].tolist()):
        at = run_online(datas, y, {"pair_weight": w}).log_odds
        here = (weights == w) & np.isfinite(at)
        assert np.allclose(mixed.log_odds[here], at[here], rtol=1e-9, atol=1e-9)


def _two_corpora(sample_corpus, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root, folders in ((a, ("easy_ham", "spam")), (b, ("easy_ham_2", "hard_ham", "spam_2"))):
        for folder in folders:
            shutil.copytree(Path(sample_corpus) / folder, root / folder)
    return a, b


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bogofilter") is None, reason="bogofilter is not installed")
def test_the_script_judges_each_corpus_with_the_settings_chosen_on_the_other(sample_corpus, tmp_path):
    a, b = _two_corpora(sample_corpus, tmp_path)
    out = tmp_path / "report.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "tune" / "cross_corpus.py"), str(a), str(b),
                           "--fixed", "--folds", "2", "--json", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())["fixed"]
    chosen = report["chosen"]
    judged = {(r["corpus"], r["chosen_on"]): r for r in report["judged"]}
    assert set(judged) == {(c, w) for c in ("a", "b")
                           for w in (f"{'b' if c == 'a' else 'a'} (the other)", f"{c} (itself)", "both", "shipped")}
    for corpus, other in (("a", "b"), ("b", "a")):
        row = judged[(corpus, f"{other} (the other)")]
        expected = dict(cross_corpus.shipped_fixed())
        for family in chosen.values():                   # every family's choice on the OTHER corpus
            expected.update(dict(kv.split("=") for kv in family[other].split(",")))
        assert row["settings"] == ",".join(f"{k}={expected[k]:g}" if isinstance(expected[k], float)
                                           else f"{k}={expected[k]}" for k in sorted(expected))
        assert 0 <= row["test_one_minus_auc_percent"] <= 100
        assert 0 <= row["bogofilter"] <= 100 and not math.isnan(row["bogofilter"])
        wins, losses = (int(v) for v in judged[(corpus, "shipped")]["wins_losses"].split("/"))
        assert wins == losses == 0                       # the shipped row is paired against itself
    assert "| a | b (the other) |" in proc.stdout and "| b | a (the other) |" in proc.stdout


def test_with_orders_a_setting_is_chosen_by_its_mean_over_random_orders_of_the_same_stream(sample_corpus):
    bench = cross_corpus.OnlineBench([str(sample_corpus)], orders=2)
    name = Path(sample_corpus).name
    streams = bench.orders[name]
    assert [s[3].startswith("shuffled") for s in streams] == [False, True, True]
    base_pairs = sorted(zip(streams[0][2], streams[0][1].tolist()))
    for _none, y, datas, _how in streams[1:]:
        assert datas != streams[0][2]                         # another order ...
        assert sorted(zip(datas, y.tolist())) == base_pairs   # ... of the same messages, each with its label
    settings = cross_corpus.shipped_online()
    runs = [bench.run(name, settings, "full", k)["one_minus_roca_percent"] for k in range(3)]
    assert len(set(runs)) > 1
    assert bench.figure(name, settings) == pytest.approx(sum(runs) / 3)


def test_variants_specs_name_the_rule_and_its_settings():
    from spamnb.estimator.variants import PairWeightChooser, PairWeightMixture

    assert isinstance(cross_corpus.variants_of("chooser"), PairWeightChooser)
    rank = cross_corpus.variants_of("rank:1:0.5:500")
    assert isinstance(rank, PairWeightMixture) and rank.loss == "rank" and rank.eta == 1.0
    assert rank.keep == pytest.approx(1 - 1 / 500)
    log = cross_corpus.variants_of("mixture:0.1:0.25:1")
    assert log.loss == "log" and log.temperatures.tolist() == [1.0] and log.keep == 1.0
    assert cross_corpus.variants_of("mixture").temperatures.size > 1
    with pytest.raises(ValueError, match="unknown variants"):
        cross_corpus.variants_of("argmax")


@pytest.mark.slow
def test_the_variants_table_pairs_each_order_with_the_shipped_model(sample_corpus, tmp_path):
    out = tmp_path / "variants.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "tune" / "cross_corpus.py"), str(sample_corpus),
                           "--variants", "rank:1,chooser", "--orders", "1", "--modes", "full,auto", "--json", str(out)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())["variants"]
    assert [(r["mode"], r["order"].startswith("shuffled")) for r in rows] == \
        [("full", False), ("full", True), ("auto", False), ("auto", True)]
    for r in rows:
        assert set(r["variants"]) == {"rank:1", "chooser"}
        assert 0 <= r["shipped"] <= 100 and all(0 <= v["final_weight"] <= 1 + 1e-9 for v in r["variants"].values())
    assert "mean over 2 orders" in proc.stdout and "wins/losses" in proc.stdout
