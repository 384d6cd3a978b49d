"""``spamnb evaluate --online`` gives the per-message log-odds it gave before its
filter became a ``SpamFilter`` (``evaluation.online.OnlineModel``): the first
1,000 messages of each shared corpus in arrival order, in each feedback mode,
against ``tests/data/online_reference.json`` (written by
``scripts/check/online_reference.py --write`` on the tree that still had the
online protocol's own incremental filter): every log-odds and cutoff within
1e-9, the same messages learned."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from conftest import slow_beyond

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "tests" / "data" / "online_reference.json"


def _script():
    spec = importlib.util.spec_from_file_location("online_reference", REPO / "scripts" / "check" / "online_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


@pytest.mark.parametrize("mode", ["full", "error", "auto"])
@pytest.mark.parametrize("corpus", slow_beyond(["spamassassin", "enron"], ["spamassassin"]))   # Enron-Spam: -m slow
def test_online_log_odds_are_those_of_the_reference(corpus, mode):
    root = SCRIPT.CORPORA[corpus]
    if not os.path.isdir(root):
        pytest.skip(f"the shared corpus {corpus} is not beside the repository ({os.path.normpath(root)})")
    stored = json.loads(REFERENCE.read_text())[corpus][mode]
    result = SCRIPT.run(root, mode, stored["n"])
    assert SCRIPT.compare(stored, result, 1e-9) == []


def test_the_comparison_sees_a_difference():
    """A change of 2e-9 in one log-odds, or a message learned that was not, is reported."""
    import numpy as np

    from spamnb.evaluation.online import OnlineResult

    y = np.array([True, False, True])
    result = OnlineResult(np.array([1.0, -2.0, np.inf]), y, np.ones(3, bool), 0.0, 0, np.zeros(3), np.zeros(3))
    stored = SCRIPT.record(result)
    assert SCRIPT.compare(stored, result) == []
    moved = result._replace(log_odds=np.array([1.0, -2.0 + 2e-9, np.inf]))
    assert "log_odds: message 1" in SCRIPT.compare(stored, moved)[0]
    assert SCRIPT.compare(stored, result._replace(log_odds=np.array([1.0, -2.0, 5.0])))
    assert "trained" in SCRIPT.compare(stored, result._replace(trained=np.array([True, False, True])))[0]
