"""``SpamFilter().fit`` and ``spamnb train`` make the same filter from the same
mail, whatever order the messages are given in (issue 36): one reader of a
message file (:mod:`spamnb.mail.reader`), one training pipeline
(:mod:`spamnb.estimator.fitting`), cross-validation folds from each message's
bytes (:func:`spamnb.estimator.calibrate.fold_of`)."""

import random
from pathlib import Path

import pytest

from conftest import SAMPLE_CORPUS, run_spamnb
from spamnb import SpamFilter
from spamnb.mail.reader import messages_of, read_messages
from spamnb.estimator.calibrate import fold_of
from spamnb.estimator.messages import message_bytes
from spamnb.training.corpus import labelled_messages

ENVELOPE = b"From sender@example.com Mon Nov 23 10:40:20 2026\n"
MAIL = b"From: a@example.com\nSubject: hi\n\nbody\n"


def test_a_file_gives_the_same_bytes_to_fit_as_to_train(tmp_path):
    """A message file that is an mbox of one message (most of the SpamAssassin
    corpus's spam: an envelope line, the message, a blank line) is the whole
    file to the corpus reader, the command line and the library alike, so its
    fold is the same."""
    one = tmp_path / "one"
    one.write_bytes(ENVELOPE + MAIL + b"\n")
    plain = tmp_path / "plain"
    plain.write_bytes(MAIL)
    two = tmp_path / "two"
    two.write_bytes(ENVELOPE + MAIL + b"\n" + ENVELOPE + MAIL + b"\n")
    corpus = dict(read_messages(tmp_path))
    assert corpus["one"] == one.read_bytes() == message_bytes(one)
    assert fold_of(message_bytes(one)) == fold_of(corpus["one"])
    assert [data for _name, data in messages_of(str(one))] == [one.read_bytes()]
    assert message_bytes(plain) == corpus["plain"] == MAIL
    assert corpus["two#0"] == corpus["two#1"] == ENVELOPE + MAIL   # an mbox of several: cut, blank lines dropped
    big = tmp_path / "big"   # over 4 MiB: the corpus reader streams it, the same bytes
    big.write_bytes(ENVELOPE + MAIL + b"x" * (5 << 20) + b"\n\n")
    assert dict(read_messages(big))["big"] == big.read_bytes()
    assert [data for _name, data in messages_of(str(big))] == [big.read_bytes()]


def _trained(root, tmp_path, *options):
    model = tmp_path / "model.spamnb"
    proc = run_spamnb(["train", "-q", "-m", model, *options, root], home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return SpamFilter.load(model)


def _orders(root):
    """The corpus's messages as ``spamnb train`` reads them, and its files
    (paths) sorted and shuffled: ``(name, messages, labels)`` of each order."""
    messages = labelled_messages([root])
    paths = sorted((Path(root) / m.relpath, m.is_spam) for m in messages)
    shuffled = list(paths)
    random.Random(36).shuffle(shuffled)
    return messages, [("the command line's order, bytes", [m.data for m in messages], [m.is_spam for m in messages]),
                      ("paths sorted", [p for p, _ in paths], [s for _, s in paths]),
                      ("paths shuffled", [p for p, _ in shuffled], [s for _, s in shuffled])]


def _check_same(root, trained, every=1, **options):
    messages, orders = _orders(root)
    for name, data, labels in orders:
        fitted = SpamFilter().fit(data, labels, **options)
        assert (fitted.spam_cutoff, fitted.ham_cutoff) == (trained.spam_cutoff, trained.ham_cutoff), name
        assert fitted.tokenizer_.settings == trained.tokenizer_.settings, name
        worst = max(abs(fitted.score(m.data).log_odds - trained.score(m.data).log_odds) for m in messages[::every])
        assert worst <= 1e-9, (name, worst)


def test_fit_in_any_order_matches_train_on_the_sample(tmp_path):
    """The shipped sample (300 messages; 48 of its spam files are one-message
    mboxes) at a target its 200 ham can choose cutoffs for."""
    trained = _trained(SAMPLE_CORPUS, tmp_path, "--target-fpr", "0.005", "--word-pairs", "0")
    assert trained.cutoff_source_ == "train"   # cutoffs chosen from the held-out scores, not the defaults
    _check_same(SAMPLE_CORPUS, trained, target_fpr=0.005, word_pairs=0)


@pytest.mark.slow
def test_fit_in_any_order_matches_train_on_the_shared_corpus(tmp_path, shared_corpus):
    """On the shared SpamAssassin corpus (6,046 messages: ``spamnb train`` as
    typed, on every core, against fits in three orders); this replaced
    scripts/check_fit_matches_train.py."""
    root = shared_corpus("spamassassin")
    _check_same(root, _trained(root, tmp_path), every=3)
