"""The ledger of learned messages: sa-learn's semantics, what is digested, its bounds and its arrays."""

from pathlib import Path

import pytest

from spamnb import SpamFilter
from spamnb.estimator import ledger as ledgers
from spamnb.estimator import ledger_table
from spamnb.mail.status import passthrough_pieces, strip_markup
from spamnb.estimator.ledger import DIGEST_SIZE, Tally
from spamnb.estimator.ledger_table import Ledger

from conftest import REPO

SPAM = [p.read_bytes() for p in sorted((REPO / "corpora" / "spam").iterdir())[:20]]
HAM = [p.read_bytes() for p in sorted((REPO / "corpora" / "easy_ham").iterdir())[:20]]
NEW = b"From: a@new.example\nSubject: zqxjv wombat\n\nzqxjv wombat fnord\n"


def _trained():
    return SpamFilter().fit(SPAM + HAM, [True] * len(SPAM) + [False] * len(HAM))


def _state(spam_filter):
    return spam_filter.class_count_, spam_filter.vocabulary_.tokens(), spam_filter.score(NEW)


def test_learning_twice_is_a_no_op():
    spam_filter, ledger, tally = _trained(), Ledger(), Tally()
    assert ledgers.learn(spam_filter, ledger, NEW, True, tally) == "learned"
    once = _state(spam_filter)
    assert ledgers.learn(spam_filter, ledger, NEW, True, tally) == "known"
    assert _state(spam_filter) == once
    assert tally.learn_summary() == "learned 1, already known 1, relabelled 0"


def test_learning_with_the_other_label_moves_the_message():
    spam_filter, ledger, tally = _trained(), Ledger(), Tally()
    ledgers.learn(spam_filter, ledger, NEW, True, tally)
    assert ledgers.learn(spam_filter, ledger, NEW, False, tally) == "relabelled"
    as_ham_only = _trained().learn(NEW, "ham")
    assert spam_filter.class_count_ == as_ham_only.class_count_
    assert spam_filter.score(NEW) == as_ham_only.score(NEW)
    assert ledger.label(ledgers.message_digest(ledgers.canonical(NEW))) is False
    assert tally.learn_summary() == "learned 1, already known 0, relabelled 1"


def test_forget_needs_no_label_and_restores_the_model():
    spam_filter, ledger = _trained(), Ledger()
    before = _state(spam_filter)
    ledgers.learn(spam_filter, ledger, NEW, False, Tally())
    assert ledgers.forget(spam_filter, ledger, NEW) is False
    assert _state(spam_filter) == before and len(ledger) == 0
    with pytest.raises(ValueError, match="not in the ledger"):
        ledgers.forget(spam_filter, ledger, NEW)


def test_forget_with_the_wrong_label_is_refused():
    spam_filter, ledger = _trained(), Ledger()
    ledgers.learn(spam_filter, ledger, NEW, True, Tally())
    with pytest.raises(ValueError, match="learned as spam"):
        ledgers.forget(spam_filter, ledger, NEW, False)


def test_the_delivered_copy_is_the_same_message():
    spam_filter = _trained()
    verdict = spam_filter.classify(SPAM[0])
    delivered = b"".join(passthrough_pieces(SPAM[0], verdict, "X-Spamnb-Status", "[SPAM]"))
    assert delivered != SPAM[0] and b"[SPAM]" in delivered
    assert delivered.startswith(b"From ")  # an envelope line, which an mbox writer replaces with its own
    in_mbox = b"From someone@example.com Mon Nov 23 10:40:20 2026\n" + delivered.partition(b"\n")[2]
    original = ledgers.canonical(SPAM[0])
    assert ledgers.canonical(in_mbox, subject_tag="[SPAM]") == original
    ledger = Ledger()
    ledgers.learn(spam_filter, ledger, SPAM[0], True, Tally())
    assert ledgers.learn(spam_filter, ledger, in_mbox, True, Tally(), subject_tag="[SPAM]") == "known"


def test_the_copy_marked_with_spamassassin_fields_is_the_same_message():
    # what spamnb serve's PROCESS and classify -p --sa-headers deliver: learning it
    # (spamc -L, spamnb learn on the Maildir) must not learn the verdict's fields as words
    from spamnb.report.headers import spam_fields

    spam_filter = _trained()
    verdict = spam_filter.classify(SPAM[1])
    fields = spam_fields(verdict, 9.5 if verdict.label == "spam" else -1.0, 5.0, report=True)
    delivered = b"".join(passthrough_pieces(SPAM[1], verdict, "X-Spamnb-Status", None, fields))
    assert b"X-Spam-Checker-Version: spamnb" in delivered and b"X-Spam-Report:" in delivered
    assert ledgers.canonical(delivered) == ledgers.canonical(SPAM[1])
    # an upstream SpamAssassin's fields (no spamnb checker) are the sender's: kept
    upstream = b"X-Spam-Flag: YES\nX-Spam-Checker-Version: SpamAssassin 4.0.1\n" + NEW
    assert ledgers.canonical(upstream) == upstream


def test_strip_markup_leaves_everything_else_byte_for_byte():
    message = (b"From: a@example.com\r\nX-Spam-Status: Yes, score=9\r\nSubject: [SPAM] hello\r\n"
               b"X-Spamnb-Status: Yes, log-odds=+30.000\r\n continued\r\n\r\nSubject: [SPAM] in the body\r\n")
    stripped = strip_markup(message, subject_tag="[SPAM]")
    assert stripped == (b"From: a@example.com\r\nX-Spam-Status: Yes, score=9\r\nSubject: hello\r\n"
                        b"\r\nSubject: [SPAM] in the body\r\n")
    assert strip_markup(NEW) is NEW or strip_markup(NEW) == NEW
    assert strip_markup(b"") == b"" and strip_markup(b"just text\n") == b"just text\n"


def test_the_digest_is_bounded_and_tells_messages_apart():
    big = NEW + b"x" * (20 << 20)
    assert len(ledgers.message_digest(big)) == DIGEST_SIZE == 16
    assert ledgers.message_digest(NEW) != ledgers.message_digest(NEW + b" ")
    assert ledgers.message_digest(NEW) != ledgers.message_digest(NEW.replace(b"\n", b"\r\n"))  # bytes learned differ


def test_capacity_drops_the_oldest():
    ledger = Ledger(capacity=3)
    keys = [bytes([i]) * DIGEST_SIZE for i in range(5)]
    for i, key in enumerate(keys):
        ledger.record(key, i % 2 == 0)
    assert len(ledger) == 3
    assert [ledger.label(k) for k in keys] == [None, None, True, False, True]
    ledger.record(keys[2], False)  # relabelled: now the newest
    ledger.record(bytes([9]) * DIGEST_SIZE, True)
    assert ledger.label(keys[3]) is None and ledger.label(keys[2]) is False


def test_arrays_round_trip_and_are_checked():
    ledger = Ledger()
    for i in range(100):
        ledger.record(ledgers.message_digest(str(i).encode()), i % 3 == 0)
    digests, labels = ledger.to_arrays()
    assert len(digests) == 1600 and len(labels) == 100
    again = Ledger.from_arrays(digests, labels)
    assert again.to_arrays() == (digests, labels)
    with pytest.raises(ValueError, match="bytes of digests"):
        Ledger.from_arrays(digests[:-1], labels)
    with pytest.raises(ValueError, match="label"):
        Ledger.from_arrays(digests, labels[:-1] + b"\x07")
    with pytest.raises(ValueError, match="twice"):
        Ledger.from_arrays(digests[:16] * 2, b"\x00\x00")
    assert len(Ledger.from_arrays(digests, labels, capacity=10)) == 10


def test_a_filter_without_a_ledger_gets_an_empty_one():
    spam_filter = _trained()
    assert len(ledger_table.ledger_of(spam_filter)) == len(SPAM) + len(HAM)   # fit records what it counts (issue 46)
    spam_filter.ledger_ = None
    assert len(ledger_table.ledger_of(spam_filter)) == 0
    ledger = Ledger()
    assert ledger_table.ledger_of(ledger_table.attach(spam_filter, ledger)) is ledger


def test_the_ledger_is_saved_with_the_model_and_kept_by_prune(tmp_path):
    from spamnb.model.lifecycle import prune

    spam_filter = _trained()
    ledger = ledger_table.ledger_of(spam_filter)
    tally = Tally()
    ledgers.learn(spam_filter, ledger, NEW, True, tally)
    ledger_table.attach(spam_filter, ledger)
    path = tmp_path / "model.spamnb"
    spam_filter.save(path)
    loaded = SpamFilter.load(path)
    assert loaded.ledger_ is not None and loaded.ledger_.to_arrays() == ledger.to_arrays()
    again = Tally()
    ledgers.learn(loaded, ledger_table.ledger_of(loaded), NEW, True, again)   # a second run: no-op
    assert (again.learned, again.known) == (0, 1)
    assert loaded.class_count_ == spam_filter.class_count_
    pruned, dropped = prune(loaded, target_size=100)   # (min_count needs a model without length_norm)
    assert dropped > 0 and pruned.ledger_.to_arrays() == ledger.to_arrays()


def test_learn_twice_from_the_command_line_counts_once(tmp_path):
    import os
    import subprocess
    import sys

    import spamnb

    env = dict(os.environ, SPAMNB_HOME=str(tmp_path),
               PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))

    def run(*args):
        return subprocess.run([sys.executable, "-m", "spamnb", *args], env=env, capture_output=True,
                              check=True, timeout=120).stdout.decode()

    run("train", "-q", str(REPO / "corpora" / "spam"), str(REPO / "corpora" / "easy_ham"))
    folder = REPO / "corpora" / "spam_2"
    first = run("learn", "--spam", str(folder))
    second = run("learn", "--spam", str(folder))
    learned = int(first.split("learned ")[1].split(",")[0])
    assert learned > 0, first
    assert f"learned 0, already known {learned}, relabelled 0" in second, second
    assert first.split("model:")[1].split("(")[1] == second.split("model:")[1].split("(")[1]  # same counts


def test_an_entrys_code_and_notes_round_trip_exactly():
    """Each entry's label, auto-learned mark and held-out bin, as recorded, through entry(),
    is_auto(), the notes array (AUTO_NOTE is bit 15) and back; a note naming no bin refused."""
    from spamnb.estimator.prequential import N_BINS

    assert ledgers.AUTO_NOTE == 1 << 15
    d = [bytes([i]) * DIGEST_SIZE for i in range(8)]
    ledger = Ledger()
    cases = [(True, False, None), (False, True, None), (True, True, 0), (False, False, 0), (True, False, 1),
             (False, True, 5), (True, True, N_BINS - 1), (False, False, 1000 % N_BINS)]
    for digest, (spam, auto, held) in zip(d, cases):
        ledger.record(digest, spam, auto=auto, held_out=held)
    for digest, case in zip(d, cases):
        assert ledger.entry(digest) == case and ledger.is_auto(digest) is case[1] and ledger.label(digest) is case[0]
    assert ledger.entry(b"x" * DIGEST_SIZE) is None and ledger.is_auto(b"x" * DIGEST_SIZE) is False
    notes = ledger.notes_array()
    assert list(notes) == [(0 if h is None else h + 1) | (1 << 15 if a else 0) for _, a, h in cases]
    back = Ledger.from_arrays(*ledger.to_arrays(), notes=notes)
    assert [back.entry(digest) for digest in d] == cases
    ledger.confirm(d[1])
    assert ledger.entry(d[1]) == (False, False, None) and not ledger.is_auto(d[1])
    digests, labels = ledger.to_arrays()
    for bad in (N_BINS + 1, (N_BINS + 1) | (1 << 15)):
        with pytest.raises(ValueError, match="no held-out bin"):
            Ledger.from_arrays(digests, labels, notes=[bad] + [0] * (len(d) - 1))
    assert Ledger.from_arrays(digests, labels, notes=[N_BINS] + [0] * (len(d) - 1)).entry(d[0])[2] == N_BINS - 1
    with pytest.raises(ValueError, match="twice"):
        Ledger.from_arrays(digests[:DIGEST_SIZE] * 2, labels[:2])
    for wrong in (digests + bytes(DIGEST_SIZE), digests[:-DIGEST_SIZE]):      # one digest too many, too few
        with pytest.raises(ValueError, match="bytes of digests"):
            Ledger.from_arrays(wrong, labels)
    for capacity in (0, -1):
        with pytest.raises(ValueError, match="capacity"):
            Ledger(capacity)
    assert Ledger(1).capacity == 1
