"""The TREC Spam Track jig adapter (scripts/trec/*, python -m spamnb.evaluation.trec), run as the jig runs it."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import spamnb
from spamnb.evaluation import online
from spamnb.training.corpus import labelled_messages

from conftest import REPO

JIG = REPO / "scripts" / "trec"


def _env(state):
    return dict(os.environ, SPAMNB_TREC_DIR=str(state), PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]),
                PYTHON=os.environ.get("PYTHON", __import__("sys").executable))


def _call(state, *args):
    return subprocess.run([str(JIG / args[0]), *map(str, args[1:])], capture_output=True, text=True,
                          env=_env(state))


@pytest.mark.skipif(shutil.which("sh") is None, reason="the jig's commands are sh scripts")
@pytest.mark.slow
def test_jig_commands_give_the_online_scores(tmp_path, sample_corpus):
    """initialize, then classify + train per message: the scores are those of
    spamnb.evaluation.online's full-feedback run over the same stream."""
    items = labelled_messages([sample_corpus])[::40]          # 5 ham, then 3 spam
    paths = []
    for i, m in enumerate(items):
        path = tmp_path / f"inmail.{i}"
        path.write_bytes(m.data)
        paths.append(path)
    state = tmp_path / "state"
    assert _call(state, "initialize").returncode == 0
    scores = []
    for path, m in zip(paths, items):
        out = _call(state, "classify", path)
        assert out.returncode == 0, out.stderr
        fields = dict(kv.split("=", 1) for kv in out.stdout.split())
        assert set(fields) == {"class", "score", "tfile"}
        score = float(fields["score"])
        assert fields["class"] == ("spam" if score >= 0 else "ham")
        scores.append(score)
        assert _call(state, "train", "spam" if m.is_spam else "ham", path).returncode == 0
    assert _call(state, "finalize").returncode == 0
    y = np.array([m.is_spam for m in items])
    expected = online.run_online([m.data for m in items], y).log_odds
    # before both classes were seen the adapter has no model and says 0
    first_both = next(i for i in range(len(y)) if y[:i].any() and not y[:i].all())
    np.testing.assert_allclose(scores[first_both:], expected[first_both:], atol=1e-5)
    assert all(s == 0.0 for s in scores[:first_both])
    # initialize starts over
    assert _call(state, "initialize").returncode == 0
    assert not (state / "model.spamnb").exists()


def test_usage_and_errors(tmp_path):
    assert _call(tmp_path, "train", "maybe", "x").returncode == 64
    assert _call(tmp_path, "classify").returncode == 64
    assert _call(tmp_path, "initialize").returncode == 0
    bad = _call(tmp_path, "train", "ham", tmp_path / "missing")
    assert bad.returncode == 3 and bad.stderr.count("\n") == 1 and "No such file" in bad.stderr
    assert not (tmp_path / "trained").exists() or (tmp_path / "trained").read_text() == ""
