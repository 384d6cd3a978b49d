"""Issue 46, item 1: every message ``train`` (``SpamFilter.fit``, ``load`` of a
dump, ``merge``) counts is in the ledger, so a later ``learn`` of it is a
no-op with its label and an exact relabel with the other, from the command
line and from ``spamc -L`` to ``spamnb serve``."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import spamnb
from spamnb import SpamFilter
from spamnb.estimator import ledger as ledgers
from spamnb.estimator import ledger_table

from conftest import REPO
from test_serve import Daemon, needs_spamc

PYTHONPATH = str(Path(spamnb.__file__).resolve().parents[1])
CORPUS = REPO / "corpora"
FIRST_SPAM = sorted((CORPUS / "spam").iterdir())[0]


def _env(home):
    env = dict(os.environ, SPAMNB_HOME=str(home), PYTHONPATH=PYTHONPATH)
    env.pop("SPAMNB_DEBUG", None)
    return env


def _run(home, *args, stdin=None):
    proc = subprocess.run([sys.executable, "-m", "spamnb", *map(str, args)], env=_env(home), input=stdin,
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def _counts(model):
    spam_filter = SpamFilter.load(model)
    ham, spam = spam_filter.class_count_
    return int(spam), int(ham)


def _rows(model):
    spam_filter = SpamFilter.load(model)
    return dict(zip(spam_filter.vocabulary_.tokens(), spam_filter.word_counts_.matrix().T.tolist()))


def _same_counts(before, after):
    """Every token's ham and spam counts equal (float rounding aside), tokens emptied by a move at 0."""
    for token, row in after.items():
        assert np.allclose(row, before.get(token, [0.0, 0.0]), atol=1e-9), token
    assert set(before) <= set(after)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, sample_model):
    """A home with the model ``spamnb train -q`` of the sample writes there (a copy of the session's)."""
    home = tmp_path_factory.mktemp("train-ledger")
    shutil.copyfile(sample_model, home / "model.spamnb")
    return home


def _relabel_round_trip(home, model):
    """learn --ham of a trained spam moves it; again is a no-op; --spam moves it back to the counts trained."""
    trained_rows = _rows(model)
    assert _counts(model) == (100, 200)
    message = FIRST_SPAM.read_bytes()
    out = _run(home, "learn", "-m", model, "--ham", stdin=message)
    assert "learned 0, already known 0, relabelled 1" in out, out
    assert _counts(model) == (99, 201)
    out = _run(home, "learn", "-m", model, "--ham", stdin=message)
    assert "learned 0, already known 1, relabelled 0" in out, out
    assert _counts(model) == (99, 201)
    out = _run(home, "learn", "-m", model, "--spam", stdin=message)
    assert "relabelled 1" in out, out
    assert _counts(model) == (100, 200)
    _same_counts(trained_rows, _rows(model))
    # a trained message learned with its own label is known: nothing counted twice
    out = _run(home, "learn", "-m", model, "--spam", CORPUS / "spam")
    assert "learned 0, already known 50, relabelled 0" in out, out
    assert _counts(model) == (100, 200)


def test_train_then_learn_relabels_exactly(trained, tmp_path):
    model = tmp_path / "m.spamnb"
    model.write_bytes((trained / "model.spamnb").read_bytes())
    _relabel_round_trip(tmp_path, model)


def test_info_says_what_the_ledger_knows(trained, tmp_path):
    out = _run(trained, "info", "--tokens", "0")
    assert "ledger:         300 of the 300 messages counted (100 spam, 200 ham)" in out, out
    # a model trained before the ledger recorded trained mail: said, with what to do
    old = SpamFilter.load(trained / "model.spamnb")
    old.ledger_ = None
    old.save(tmp_path / "old.spamnb")
    out = _run(tmp_path, "info", "--tokens", "0", "-m", tmp_path / "old.spamnb")
    assert "ledger:         0 of the 300 messages counted" in out, out
    assert "the other 100 spam and 200 ham are not in it" in out and "forget --spam/--ham" in out, out


def test_a_message_in_a_mbox_and_alone_is_one_message(tmp_path):
    """train reads an mbox (the envelope line is not the message's); learn of the
    message alone, with or without its envelope line, finds it in the ledger."""
    home = tmp_path
    spam, ham = home / "spam", home / "ham"
    spam.mkdir(), ham.mkdir()
    bodies = [FIRST_SPAM.read_bytes()] + [p.read_bytes() for p in sorted((CORPUS / "spam_2").iterdir())[:5]]
    mbox = b""
    for data in bodies:
        data = data if data.startswith(b"From ") else b"From someone@example.org Sat Jan  1 00:00:00 2000\n" + data
        mbox += data + b"\n"   # the blank line before the next envelope line is no message's
    (spam / "mbox").write_bytes(mbox)
    for p in sorted((CORPUS / "easy_ham").iterdir())[:10]:
        (ham / p.name).write_bytes(p.read_bytes())
    _run(home, "train", "-q", "--spam", spam, "--ham", ham, "-m", home / "m.spamnb")
    alone = FIRST_SPAM.read_bytes()
    if alone.startswith(b"From "):
        alone = alone.split(b"\n", 1)[1]
    out = _run(home, "learn", "-m", home / "m.spamnb", "--ham", stdin=alone)
    assert "relabelled 1" in out, out
    # the copy an IMAP server hands over (CRLF line ends) is the message trained (LF) too
    second = bodies[1].replace(b"\n", b"\r\n")
    out = _run(home, "learn", "-m", home / "m.spamnb", "--ham", stdin=second)
    assert "relabelled 1" in out, out
    assert _counts(home / "m.spamnb") == (4, 12)


@pytest.mark.slow   # several seconds: the default run stays near three minutes
def test_dump_load_and_merge_keep_the_trained_ledger(trained, tmp_path):
    dump = tmp_path / "d.txt"
    _run(trained, "dump", "-o", dump)
    _run(tmp_path, "load", "-m", tmp_path / "loaded.spamnb", dump)
    _relabel_round_trip(tmp_path, tmp_path / "loaded.spamnb")
    # merge: two models trained on parts; the merged one knows both parts' mail
    _run(tmp_path, "train", "-q", "--spam", CORPUS / "spam", "--ham", CORPUS / "easy_ham", CORPUS / "easy_ham_2",
         "-m", tmp_path / "a.spamnb")
    _run(tmp_path, "train", "-q", "--spam", CORPUS / "spam_2", "--ham", CORPUS / "hard_ham",
         "-m", tmp_path / "b.spamnb")
    _run(tmp_path, "merge", tmp_path / "a.spamnb", tmp_path / "b.spamnb", "-o", tmp_path / "merged.spamnb")
    _relabel_round_trip(tmp_path, tmp_path / "merged.spamnb")


@pytest.mark.parametrize("tune", [True, False])
def test_fit_records_what_it_counts(tune):
    paths = sorted((CORPUS / "spam").iterdir())[:20] + sorted((CORPUS / "easy_ham").iterdir())[:20]
    data = [p.read_bytes() for p in paths]
    labels = [True] * 20 + [False] * 20
    spam_filter = SpamFilter().fit(data, labels, tune=tune)
    ledger = ledger_table.ledger_of(spam_filter)
    assert len(ledger) == 40
    def rows():
        return dict(zip(spam_filter.vocabulary_.tokens(), spam_filter.word_counts_.matrix().T.tolist()))

    before = rows()
    tally = ledgers.Tally()
    assert ledgers.learn(spam_filter, ledger, data[0], False, tally) == "relabelled"
    assert tuple(spam_filter.class_count_) == (21, 19)
    assert ledgers.learn(spam_filter, ledger, data[0], False, tally) == "known"
    assert ledgers.learn(spam_filter, ledger, data[0], True, tally) == "relabelled"
    _same_counts(before, rows())


@needs_spamc
def test_spamc_tell_relabels_a_trained_message(trained):
    """spamc -L ham of a message the site model was trained on as spam moves it
    in the user's model (the site model plus the user's learns), once."""
    daemon = Daemon(trained, "--allow-tell", "--create-user-models", "--models-dir", trained / "users")
    try:
        message = FIRST_SPAM.read_bytes()
        user_model = trained / "users" / "frank" / "model.spamnb"
        for _ in range(2):
            out = daemon.spamc("-L", "ham", "-u", "frank", stdin=message)
            assert out.returncode == 0, out
        assert _counts(user_model) == (99, 201)
        assert daemon.spamc("-L", "spam", "-u", "frank", stdin=message).returncode == 0
        assert _counts(user_model) == (100, 200)
    finally:
        assert daemon.stop() == 0
