"""``spamnb learn`` without reading the model (spamnb.model.learning: a light session).

What must hold: a learn that appends its record from the message's own
entries of the model file and the journal (``learning.session(light=True)``,
what ``spamnb learn`` runs) writes the very records, byte for byte, that
the session reading the whole model and replaying its journal writes, so
the model loaded afterwards has every count, token, ledger entry, held-out
score, cutoff and score of that path; already-known messages, relabels
(which read the model whole mid-session), learns of several messages in
one session, auto-learned entries confirmed, and the journal's compaction
included; and the model's large arrays stay unread by such a learn.
"""

import shutil
from pathlib import Path

import pytest

from spamnb.model import learning
from spamnb.estimator import ledger as ledgers
from spamnb.model.spam_filter import SpamFilter

from conftest import REPO, journal_without_records, run_spamnb

SPAM = sorted((REPO / "corpora" / "spam").iterdir()) + sorted((REPO / "corpora" / "spam_2").iterdir())
HAM = sorted((REPO / "corpora" / "easy_ham").iterdir()) + sorted((REPO / "corpora" / "easy_ham_2").iterdir())
HARD = sorted((REPO / "corpora" / "hard_ham").iterdir())
PROBES = [p.read_bytes() for p in SPAM[92:100] + HAM[130:140] + HARD[40:45]]
LARGE = ("keys", "values", "feature_count", "log_count", "strings")


@pytest.fixture
def model(tmp_path):
    """A model of 55 spam and 55 ham (enough of each for held-out scores to count)."""
    path = tmp_path / "m.spamnb"
    messages = [p.read_bytes() for p in SPAM[:55] + HAM[:55]]
    SpamFilter().fit(messages, [True] * 55 + [False] * 55, tune=False).save(path)
    return path


def _copies(model, tmp_path):
    light, whole = tmp_path / "light" / "m.spamnb", tmp_path / "whole" / "m.spamnb"
    for path in (light, whole):
        path.parent.mkdir()
        shutil.copyfile(model, path)
    return light, whole


# sessions of (action, message, label, auto): new mail, known mail, relabels, several messages at once
SESSIONS = ([[("learn", SPAM[60 + i], True, False)] for i in range(12)]
            + [[("learn", HAM[60 + i], False, False)] for i in range(12)]
            + [[("learn", HARD[i], False, False)] for i in range(6)]
            + [[("learn", SPAM[0], True, False)],                      # trained: known, nothing written
               [("learn", SPAM[61], True, False)],                     # learned: known
               [("learn", SPAM[62], False, False)],                    # relabelled: read whole
               [("learn", SPAM[80 + i], True, False) for i in range(5)],   # five in one session
               [("learn", HAM[80], False, False), ("learn", HAM[61], True, False),   # a relabel mid-session
                ("learn", HAM[81], False, False)],
               [("learn", SPAM[90], True, True)],                      # auto-learned
               [("learn", SPAM[90], True, False)],                     # the user agrees: confirmed
               [("learn", SPAM[91], True, True), ("learn", SPAM[91], False, True)],  # auto never overrides
               [("forget", HAM[60], None, False)]]                     # a forget: the whole model's way
            + [[("learn", HAM[90 + i], False, False)] for i in range(8)])


def _run(path, sessions, light, compact_limit=None, stayed_light=None):
    outcomes = []
    for actions in sessions:
        with learning.session(path, mapped=True, light=light, compact_limit=compact_limit) as session:
            for action, message, label, auto in actions:
                data = message.read_bytes()
                if action == "learn":
                    outcomes.append(session.learn(data, label, ledgers.Tally(), auto=auto))
                else:
                    outcomes.append(session.forget(data, label, ledgers.Tally()))
            outcomes.append(session.class_count())
        if stayed_light is not None:
            stayed_light.append(session.light)
    return outcomes


def _state(path):
    sf = SpamFilter.load(path)
    ledger = sf.ledger_
    return {"tokens": sf.vocabulary_.tokens(), "counts": list(sf.sized_counts().feature_count_),
            "class_count": sf.class_count_, "ledger": ledger.to_arrays() + (list(ledger.notes_array()),),
            "held_out": None if sf.held_out_ is None else list(sf.held_out_.counts), "cutoffs": sf.cutoffs,
            "scores": [tuple(sf.classify(m, True)) for m in PROBES]}


def test_light_learns_write_the_records_of_the_whole_model(model, tmp_path):
    light, whole = _copies(model, tmp_path)
    stayed_light = []
    assert _run(light, SESSIONS, True, stayed_light=stayed_light) == _run(whole, SESSIONS, False)
    # light but for the one whose record passed the journal's size (folded), the first relabel's and every
    # session after it (a journal holding a forget is replayed, until it is folded)
    assert stayed_light == [True] * 27 + [False] + [True] * 4 + [False] * 15
    journal = Path(str(light) + ".journal").read_bytes()
    assert journal == Path(str(whole) + ".journal").read_bytes()
    assert len(journal) > 20000                               # the learns are in it, not folded
    state = _state(light)
    assert state == _state(whole)
    assert state["held_out"] and len(state["ledger"][1]) == 110 + 47 - 1   # trained, learned, forgotten
    for path in (light, whole):                               # and a classify's view of it
        viewed = SpamFilter.load(path, mapped=True)
        assert [viewed.classify(m, False).log_odds for m in PROBES] == [v[2] for v in _state(whole)["scores"]]


def test_a_journal_past_its_size_is_folded_as_before(model, tmp_path):
    light, whole = _copies(model, tmp_path)
    sessions = SESSIONS[:20]
    assert _run(light, sessions, True, compact_limit=8000) == _run(whole, sessions, False, compact_limit=8000)
    for path in (light, whole):
        assert Path(str(path) + ".journal").stat().st_size <= 8000   # folded at least once
    assert _state(light) == _state(whole)


def test_a_session_that_passes_the_journals_size_reads_the_model_whole_and_folds(model, tmp_path):
    light, whole = _copies(model, tmp_path)   # a folder learned at once: the view never grows past a journal
    sessions = [[("learn", SPAM[60 + i], True, False) for i in range(12)]]
    stayed_light = []
    assert _run(light, sessions, True, 8000, stayed_light) == _run(whole, sessions, False, 8000)
    assert stayed_light == [False] and journal_without_records(light)
    assert _state(light) == _state(whole)


def test_a_first_session_of_several_learns_writes_the_records_of_the_whole_model(model, tmp_path):
    # no journal yet: the first message through the file's entries, the next ones through the journal view
    light, whole = _copies(model, tmp_path)
    sessions = [[("learn", SPAM[70 + i], True, False) for i in range(3)] + [("learn", HAM[70], False, False),
                                                                            ("learn", SPAM[70], True, False)]]
    stayed_light = []
    assert _run(light, sessions, True, stayed_light=stayed_light) == _run(whole, sessions, False)
    assert stayed_light == [True]
    assert Path(str(light) + ".journal").read_bytes() == Path(str(whole) + ".journal").read_bytes()
    assert _state(light) == _state(whole)


def test_a_learned_models_first_learns_after_a_fold_write_the_records_of_the_whole_model(tmp_path):
    # a model grown by learning chooses its pair weight (a mixture): scored twice per learn, through the file's
    # entries while it has no journal record, then through the journal view
    path = tmp_path / "m.spamnb"
    with learning.session(path, mapped=True, light=True, compact_limit=1) as session:   # folded at its commit
        for message in SPAM[:60] + HAM[:60]:
            session.learn(message.read_bytes(), message in SPAM, ledgers.Tally())
    assert SpamFilter.load(path).pair_mixture_ is not None and journal_without_records(path)
    light, whole = _copies(path, tmp_path)
    sessions = [[("learn", SPAM[70 + i], True, False) for i in range(3)] + [("learn", HAM[70], False, False)],
                [("learn", HAM[71], False, False)]]
    stayed_light = []
    assert _run(light, sessions, True, stayed_light=stayed_light) == _run(whole, sessions, False)
    assert stayed_light == [True, True]
    assert Path(str(light) + ".journal").read_bytes() == Path(str(whole) + ".journal").read_bytes()
    assert _state(light) == _state(whole)


def test_a_light_learn_leaves_the_model_unread(model, tmp_path):
    light, _whole = _copies(model, tmp_path)
    for i, actions in enumerate(SESSIONS[:3]):
        with learning.session(light, mapped=True, light=True) as session:
            for _action, message, label, auto in actions:
                assert session.learn(message.read_bytes(), label, ledgers.Tally(), auto=auto) == "learned"
        assert set(LARGE) <= session.filter.unread_.unread    # no large array read, the journal not replayed
        assert session.filter.pending_journal_ is (None if i == 0 else session.filter.pending_journal_)
        assert session.class_count() == (55.0, 56.0 + i)
    with learning.session(light, mapped=True, light=True) as session:   # a relabel reads it whole
        assert session.learn(SPAM[60].read_bytes(), False, ledgers.Tally()) == "relabelled"
    assert session.filter.unread_ is None and session.class_count() == (56.0, 57.0)


def test_an_appending_learn_reads_no_transaction_of_the_journal_in_python(model, tmp_path, monkeypatch):
    """A light learn appending to a journal looks its digest up among the journal's ledger
    operations as one compiled pass gathered them (``checks.journal_ledger``, counted: one
    call, over the journal's transactions), and leaves the journal's learns unmade
    (no ``_Recorded`` an earlier learn: its view is extended only for a next message);
    what it answers and writes is the whole model's way's, byte for byte."""
    from spamnb.bayes import checks
    from spamnb.persistence import journal_replay

    light, whole = _copies(model, tmp_path)
    sessions = [[("learn", SPAM[60 + i], True, False)] for i in range(4)] + [[("learn", HAM[60], False, True)]]
    assert _run(light, sessions, True) == _run(whole, sessions, False)
    real_ledger, real_recorded = checks.journal_ledger, journal_replay.recorded   # watched
    calls, passes = [], []

    def journal_ledger(payloads, layout):
        passes.append(len(payloads))
        return real_ledger(payloads, layout)

    def recorded(records):
        calls.append("recorded")
        return real_recorded(records)

    monkeypatch.setattr(checks, "journal_ledger", journal_ledger)
    monkeypatch.setattr(journal_replay, "recorded", recorded)
    # known (the journal's RECORD), confirmed (its auto-learned RECORD), new: one message a session
    later = [[("learn", SPAM[61], True, False)], [("learn", HAM[60], False, False)], [("learn", SPAM[70], True, False)]]
    stayed_light = []
    outcomes = _run(light, later, True, stayed_light=stayed_light)
    assert stayed_light == [True] * 3 and not calls
    assert passes == [5, 5, 6]   # a pass a session over the journal's transactions (a known message writes none)
    monkeypatch.undo()
    assert outcomes == _run(whole, later, False)
    assert [outcomes[0], outcomes[2], outcomes[4]] == ["known", "known", "learned"]
    assert Path(str(light) + ".journal").read_bytes() == Path(str(whole) + ".journal").read_bytes()


def test_the_command_learns_without_reading_the_model_and_says_the_counts(model, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    message = tmp_path / "new.eml"
    message.write_bytes(SPAM[70].read_bytes())
    out = run_spamnb(["learn", "--spam", "-m", str(model), str(message)], home=home, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("(56 spam, 55 ham)")
    out = run_spamnb(["learn", "--spam", "-m", str(model), str(message)], home=home, text=True)
    assert "already known 1" in out.stdout and out.stdout.strip().endswith("(56 spam, 55 ham)")
    assert Path(str(model) + ".journal").exists()


def test_a_learn_of_mail_without_markup_imports_no_pattern_module(model, tmp_path):
    # looks_like_mail and the ledger's canonical bytes need no regular expression for plain mail
    import os
    import subprocess
    import sys

    message = tmp_path / "plain.eml"
    message.write_bytes(b"From: a@example.com\nSubject: lunch on friday\n\nshall we meet at noon, usual place?\n")
    with open(message, "rb") as stdin:
        # -S: no site (an editable install's finder imports re itself), spamnb from the checkout
        proc = subprocess.run([sys.executable, "-S", "-m", "spamnb", "learn", "--ham", "-q", "-m", str(model)],
                              stdin=stdin,
                              capture_output=True, timeout=120, cwd=tmp_path,
                              env=dict(os.environ, PYTHONPROFILEIMPORTTIME="1", SPAMNB_HOME=str(tmp_path),
                                       PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    modules = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines()
               if line.startswith("import time:")}
    assert Path(str(model) + ".journal").exists()            # learned: a journal started
    # one message on stdin and looks_like_mail are mail/checked's: neither the reader of folders and mboxes
    # nor the mbox cutter is loaded
    assert "spamnb.mail.checked" in modules and not modules & {"spamnb.mail.reader", "spamnb.mail.mbox"}
    assert not modules & {"re", "enum", "tempfile"}
    # a model's first learn scores through the file's entries (learning._FileLearner): no journal view;
    # the label is True/False: no labels module
    assert not modules & {"spamnb.persistence.journal_view", "spamnb.estimator.labels"}


def test_learners_racing_each_other_lose_no_record(model, tmp_path):
    # each `spamnb learn` reads the journal under the model's lock and appends after the records before it
    import os
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    messages = SPAM[60:66] + HAM[60:66]
    env = dict(os.environ, SPAMNB_HOME=str(home))
    procs = [subprocess.Popen([sys.executable, "-m", "spamnb", "learn", "--spam" if m in SPAM else "--ham", "-q",
                               "--wait", "120", "-m", str(model), str(m)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for m in messages]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()
        proc.stderr.close()
    learned = SpamFilter.load(model)
    assert learned.class_count_ == (61.0, 61.0)
    assert all(learned.ledger_.label(ledgers.message_digest(ledgers.canonical(m.read_bytes()))) is (m in SPAM)
               for m in messages)


def test_a_learners_new_tokens_are_the_first_places_of_the_tokens_model_and_journal_lack(model, tmp_path):
    """``JournalView.new_tokens`` (where a light learn takes the text of its new
    tokens from): each token neither the model file nor the journal's learns
    hold, at its first occurrence, in order; with few new tokens and with
    many (over 64), repeated, mixed with the journal's own and the file's."""
    from spamnb.persistence.journal_view import learner

    with learning.session(model, mapped=True, light=True) as session:
        for path in SPAM[60:63]:
            session.learn(path.read_bytes(), True, ledgers.Tally())
    journal_text = SPAM[61].read_bytes().split(b"\n\n", 1)[1][:600]   # words the journal's learns added
    messages = [SPAM[63].read_bytes(), HAM[63].read_bytes() + b"\n" + journal_text]
    for n in (3, 40, 120):   # each new word twice (the tokenizer reads 750 characters of text)
        words = b" ".join(b"q%d q%d" % (i, max(i - 1, 0)) for i in range(n))
        messages.append(b"Subject: new words\n\n" + words + b"\n" + journal_text)
    sf = SpamFilter.load(model, mapped=True)
    view = learner(sf)
    assert view is not None and view.learns   # the journal's learns viewed, not replayed
    whole = SpamFilter.load(model)   # read whole, the journal replayed: what the model and journal hold
    for data in messages:
        hashes = sf.tokenizer_.stream(data).hashes
        known = whole.vocabulary_.lookup(hashes)
        expected, seen = [], set()
        for at, (h, i) in enumerate(zip(hashes, known)):
            if i < 0 and h not in seen:
                seen.add(h)
                expected.append(at)
        view.score(hashes)   # a learner scores the message first
        assert list(view.new_tokens(hashes)) == expected
    assert max(len(view.new_tokens(sf.tokenizer_.stream(data).hashes)) for data in messages) > 64


def test_first_places_are_whole_occurrences_never_bytes_across_two():
    """``deltas.first_places`` (a learn's few new tokens, searched in the
    hashes' bytes): each token's first whole occurrence, never a match of
    its 8 bytes across two neighbours; a token not among them is refused;
    with few and many (over 64) tokens, 0 and the largest hash among them,
    as ``array.index`` places them."""
    import random
    from array import array

    from spamnb.persistence.deltas import first_places

    rng = random.Random(51)
    a, b = rng.getrandbits(64), rng.getrandbits(64)
    across = int.from_bytes((array("Q", [a, b]).tobytes())[3:11], "little")   # the bytes of a and b, straddled
    hashes = array("Q", [a, b, a, b, across, 7, across])
    assert list(first_places(hashes, {across})) == [4]
    assert list(first_places(hashes, {7, b, across})) == [1, 4, 5]
    with pytest.raises(ValueError):
        first_places(hashes, {8})
    top = 2**64 - 1   # the table's empty key (0) and the largest hash are tokens too
    assert list(first_places(array("Q", [top, 0, 5, 0, top]), {0, top})) == [0, 1]
    with pytest.raises(ValueError):
        first_places(array("Q", [top, 5]), {0, top})
    for n_new in (1, 64, 65, 200):
        pool = [rng.getrandbits(64) for _ in range(n_new + 10)]
        hashes = array("Q", (rng.choice(pool) for _ in range(4 * n_new)))
        new = set(rng.sample(sorted(set(hashes)), min(n_new, len(set(hashes)))))
        assert list(first_places(hashes, new)) == sorted(hashes.index(h) for h in new)


def test_a_light_session_is_freed_when_let_go_without_the_collector(model, tmp_path):
    """A light session's ledger keeps no message's recorder (which holds the session):
    nothing of a session is left in a reference cycle, so a server's sessions, and the
    mapped model file each holds, go when let go, not at some later collection."""
    import gc
    import weakref

    light, _whole = _copies(model, tmp_path)
    gc.collect()
    gc.disable()
    try:
        with learning.session(light, mapped=True, light=True) as session:
            assert session.learn(SPAM[60].read_bytes(), True, ledgers.Tally()) == "learned"
            assert session.learn(SPAM[61].read_bytes(), True, ledgers.Tally()) == "learned"
            assert session.learn(SPAM[60].read_bytes(), True, ledgers.Tally()) == "known"
            assert session.light
        gone, filter_gone = weakref.ref(session), weakref.ref(session.filter)
        del session
        assert gone() is None and filter_gone() is None
    finally:
        gc.enable()
