"""The model's journal (spamnb.persistence.journal): learn/forget append, readers replay, compaction folds.

What must hold: model + journal scores as learning-and-rewriting would have
(to 1e-9; the counts, vocabulary and ledger exactly, and a compaction writes
the very file a rewrite would have); ``spamnb learn`` leaves the model file
alone; a torn or damaged tail is ignored with a warning and every record
before it applies (also after a learner is killed with SIGKILL mid-append);
a journal whose model was replaced is never applied; readers never crash.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import spamnb
from spamnb.persistence import journal, records
from spamnb.model import learning
from spamnb.estimator import ledger as ledgers
from spamnb.estimator import ledger_table
from spamnb.model.spam_filter import SpamFilter

from conftest import REPO, journal_without_records, run_spamnb

PYTHONPATH = str(Path(spamnb.__file__).resolve().parents[1])
SPAM = sorted((REPO / "corpora" / "spam").iterdir())
HAM = sorted((REPO / "corpora" / "easy_ham").iterdir())
PROBES = [p.read_bytes() for p in SPAM[40:50] + HAM[90:100]]


def _env():
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    env.pop("SPAMNB_DEBUG", None)
    return env


@pytest.fixture()
def model(tmp_path):
    path = tmp_path / "m.spamnb"
    messages = [p.read_bytes() for p in SPAM[:8] + HAM[:8]]
    SpamFilter().fit(messages, [True] * 8 + [False] * 8).save(path)
    return path


# the changes: (action, message, label); relabels and forgets included
ACTIONS = ([("learn", SPAM[10 + i], True) for i in range(6)] + [("learn", HAM[10 + i], False) for i in range(6)]
           + [("learn", SPAM[10], True),          # already known: nothing changes
              ("learn", SPAM[11], False),         # relabelled: forget as spam, learn as ham
              ("forget", HAM[12], None),          # the ledger knows the label
              ("forget", SPAM[3], True),          # learned by fit, not in the ledger: label given
              ("learn", HAM[12], True)]           # forgotten, learned again with the other label
           + [("learn", SPAM[20 + i], True) for i in range(4)])


def _rewrite(path, actions):
    """Each change as before the journal: load, change, save the whole model."""
    for action, message, label in actions:
        sf = SpamFilter.load(path)
        ledger = ledger_table.ledger_of(sf)
        tally = ledgers.Tally()
        if action == "learn":
            ledgers.learn(sf, ledger, message.read_bytes(), label, tally)
        else:
            ledgers.forget(sf, ledger, message.read_bytes(), label, tally)
        ledger_table.attach(sf, ledger)
        journal.compact(sf, str(path))


def _journaled(path, actions, per_session=1):
    for start in range(0, len(actions), per_session):
        with learning.session(path) as session:
            for action, message, label in actions[start:start + per_session]:
                if action == "learn":
                    session.learn(message.read_bytes(), label, ledgers.Tally())
                else:
                    session.forget(message.read_bytes(), label)


def _state(sf):
    counts = sf.word_counts_
    return (sf.vocabulary_.tokens(), bytes(counts.feature_count_), tuple(counts.class_count_),
            ledger_table.ledger_of(sf).to_arrays(), bytes(sf.ages_.days(sf.vocabulary_.n_features)))


def _scores(sf):
    return [sf.score(m).log_odds for m in PROBES] + [sf.classify(m).log_odds for m in PROBES]


@pytest.mark.parametrize("per_session", [1, 4])
def test_model_plus_journal_scores_as_learning_and_rewriting(model, tmp_path, per_session):
    rewritten = tmp_path / "rewritten.spamnb"
    shutil.copyfile(model, rewritten)
    _rewrite(rewritten, ACTIONS)
    before = model.read_bytes()
    _journaled(model, ACTIONS[:13], per_session)             # learns (and a message already known)
    assert model.read_bytes() == before                      # the model file is not rewritten
    assert journal.journal_path(model) == str(model) + ".journal" and os.path.exists(str(model) + ".journal")
    _journaled(model, ACTIONS[13:], per_session)             # forgets and relabels: journaled too
    assert model.read_bytes() == before
    expected = SpamFilter.load(rewritten)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # no warning for a sound journal
        replayed = SpamFilter.load(model)
    # scored as replayed: the file's counts and logs patched in place, the new tokens in side tables,
    # the tokens the forgets left unused out of the hash index (holes, not counted in V)
    state = vars(replayed)
    assert state.get("_holes") and state["word_counts_"].n_holes > 0
    assert len(state["word_counts_"].scorer_logs()[3]) > 0
    assert state["vocabulary_"].n_features - state["word_counts_"].n_holes == expected.vocabulary_.n_features
    assert _scores(replayed) == pytest.approx(_scores(expected), rel=1e-9, abs=1e-9)
    assert state.get("_holes")                               # scoring did not fold them
    assert [m for m in (replayed.classify(p).label for p in PROBES)] == [expected.classify(p).label for p in PROBES]
    assert ([[t for t, _ in replayed.classify(p).evidence] for p in PROBES]
            == [[t for t, _ in expected.classify(p).evidence] for p in PROBES])
    assert _state(replayed) == _state(expected)              # counts, vocabulary, ledger, days: exactly
    assert _scores(replayed) == pytest.approx(_scores(expected), rel=1e-9, abs=1e-9)   # and once joined
    # a compaction writes the file that learning and rewriting wrote, byte for byte
    with learning.session(model) as session:
        session.compact()
    assert journal_without_records(model)                   # its records folded in: the header alone left
    assert model.read_bytes() == rewritten.read_bytes()


def test_learns_only_replay_without_numpy(model, tmp_path):
    _journaled(model, [a for a in ACTIONS if a[0] == "learn"][:12])
    code = ("import sys; from spamnb.model.spam_filter import SpamFilter; sf = SpamFilter.load(sys.argv[1]); "
            "sf.classify(open(sys.argv[2], 'rb').read()); print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(model), str(SPAM[45])], env=_env(), capture_output=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == b"False"


def test_cli_learn_and_forget_append_and_classify_sees_them(model, tmp_path):
    inode, before = os.stat(model).st_ino, model.read_bytes()
    probe = SPAM[30]
    first = run_spamnb(["classify", "--json", "-m", model, probe], text=True).stdout
    proc = run_spamnb(["learn", "--spam", "-m", model, probe, SPAM[31]], text=True)
    assert proc.returncode == 0, proc.stderr
    assert "learned 2" in proc.stdout
    assert model.read_bytes() == before and os.stat(model).st_ino == inode
    learned = run_spamnb(["classify", "--json", "-m", model, probe], text=True).stdout
    assert learned != first
    reference = model.parent / "reference.spamnb"
    sf = SpamFilter.load(model)
    journal.compact(sf, str(reference))
    rewritten = json.loads(run_spamnb(["classify", "--json", "-m", reference, probe], text=True).stdout)
    replayed = json.loads(learned)
    assert replayed["verdict"] == rewritten["verdict"]
    assert replayed["log_odds"] == pytest.approx(rewritten["log_odds"], rel=1e-9)
    assert [t for t, _ in replayed["evidence"]] == [t for t, _ in rewritten["evidence"]]
    assert [w for _, w in replayed["evidence"]] == pytest.approx([w for _, w in rewritten["evidence"]], rel=1e-9)
    again = run_spamnb(["learn", "--spam", "-m", model, probe], text=True)
    assert "already known 1" in again.stdout
    proc = run_spamnb(["forget", "-m", model, probe, SPAM[31]], text=True)
    assert proc.returncode == 0 and "forgot 2" in proc.stdout, proc.stderr
    assert run_spamnb(["classify", "--json", "-m", model, probe], text=True).stdout == first
    assert os.stat(model).st_ino != inode and journal_without_records(model)   # a forget is folded in at once


def test_a_torn_tail_is_ignored_with_a_warning_and_cut_by_the_next_learn(model, tmp_path):
    _journaled(model, ACTIONS[:3])
    jpath = Path(str(model) + ".journal")
    good = jpath.read_bytes()
    expected = _state(SpamFilter.load(model))
    _journaled(model, ACTIONS[3:4])
    whole = jpath.read_bytes()
    for cut in (len(good) + 5, len(good) + 16, len(whole) - 1):
        jpath.write_bytes(whole[:cut])                                 # the last record, cut short
        with pytest.warns(journal.JournalWarning, match="incomplete or damaged.*the 3 records before them apply"):
            assert _state(SpamFilter.load(model)) == expected
    damaged = bytearray(whole)
    damaged[len(good) + 40] ^= 0x10                                    # one bit of the last record flipped
    jpath.write_bytes(bytes(damaged))
    with pytest.warns(journal.JournalWarning):
        assert _state(SpamFilter.load(model)) == expected
    damaged = bytearray(whole)
    damaged[100] ^= 0x01                                               # the first record damaged: none apply
    jpath.write_bytes(bytes(damaged))
    with pytest.warns(journal.JournalWarning, match="the 0 records before them"):
        assert SpamFilter.load(model).class_count_ == (8.0, 8.0)
    # the next learn cuts the damaged tail off, then appends: everything acknowledged is there
    jpath.write_bytes(whole[:len(good) + 7])
    with pytest.warns(journal.JournalWarning):
        _journaled(model, ACTIONS[3:4])
    assert jpath.read_bytes() == whole
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reference = model.parent / "ref.spamnb"
        shutil.copyfile(model, reference)
        os.unlink(str(reference) + ".journal") if os.path.exists(str(reference) + ".journal") else None
        _rewrite(reference, ACTIONS[:4])
        assert _state(SpamFilter.load(model)) == _state(SpamFilter.load(reference))


def test_the_warning_counts_the_bytes_after_the_last_whole_record(model, tmp_path):
    _journaled(model, ACTIONS[:2])
    jpath = Path(str(model) + ".journal")
    whole = jpath.read_bytes()
    jpath.write_bytes(whole + b"\x00" * 5)          # five bytes of no record after the whole ones
    proc = run_spamnb(["classify", "-m", model, SPAM[40]], text=True)
    assert proc.returncode == 0 and "the last 5 bytes are incomplete or damaged" in proc.stderr, proc.stderr


def test_the_cli_warns_in_one_line_and_classifies(model, tmp_path):
    _journaled(model, ACTIONS[:2])
    jpath = Path(str(model) + ".journal")
    jpath.write_bytes(jpath.read_bytes()[:-3])
    proc = run_spamnb(["classify", "-m", model, SPAM[40]], text=True)
    assert proc.returncode == 0, proc.stderr     # a spam, classified as spam
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr   # one line, not Python's warning with its source line
    assert lines[0].startswith("spamnb: warning: ") and "incomplete or damaged" in lines[0], proc.stderr


def test_a_stale_journal_is_never_applied(model, tmp_path):
    _journaled(model, ACTIONS[:5])
    jpath = Path(str(model) + ".journal")
    saved_journal = jpath.read_bytes()
    folded = _state(SpamFilter.load(model))
    # a compaction that saved the model, then died before removing the journal
    with learning.session(model) as session:
        session.compact()
    jpath.write_bytes(saved_journal)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _state(SpamFilter.load(model)) == folded            # not applied twice
    # learning on: the stale journal is replaced, not extended
    _journaled(model, ACTIONS[5:6])
    assert not jpath.read_bytes().startswith(saved_journal[:64])
    assert SpamFilter.load(model).class_count_[1] == folded[2][1] + 1
    # train replaces the model: its journal is dropped
    proc = run_spamnb(["train", "-q", "--target-fpr", "0", "--word-pairs", "0", "-m", model,
                       *[a for p in SPAM[:3] for a in ("--spam", p)], *[a for p in HAM[:3] for a in ("--ham", p)]],
                      text=True)
    assert proc.returncode == 0, proc.stderr
    assert SpamFilter.load(model).class_count_ == (3.0, 3.0)
    assert journal_without_records(model)                  # a journal of the new model, without records
    # a model moved in by hand (rename) over one with a journal
    _journaled(model, ACTIONS[:2])
    other = model.parent / "other.spamnb"
    SpamFilter().fit([p.read_bytes() for p in SPAM[:2] + HAM[:2]], [True, True, False, False]).save(other)
    os.replace(other, model)
    assert SpamFilter.load(model).class_count_ == (2.0, 2.0)


def test_a_first_learn_renames_its_journal_in_whole_before_its_fsync(model, tmp_path, monkeypatch):
    """The journal's first write (no journal, or a stale one in its place) is at its name, whole, when its
    fsync runs (the rename then synced with it: one wait less), and taken away again when that fsync fails."""
    import posix

    jpath = Path(str(model) + ".journal")
    jpath.write_bytes(b"stale")   # short: never applied, replaced
    seen, real_fsync = [], posix.fsync

    def spy(fd):
        if not seen:
            seen.append((jpath.exists() and os.fstat(fd).st_ino == jpath.stat().st_ino, jpath.read_bytes()))
        return real_fsync(fd)

    monkeypatch.setattr(posix, "fsync", spy)
    with learning.session(model, mapped=True, light=True) as session:
        session.learn(SPAM[30].read_bytes(), True, ledgers.Tally())
    monkeypatch.undo()
    assert seen == [(True, jpath.read_bytes())] and jpath.read_bytes().startswith(journal.MAGIC)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.spamnb", "m.spamnb.journal", "m.spamnb.lock"]

    def failing(fd):
        raise OSError(5, "Input/output error")

    jpath.unlink()
    monkeypatch.setattr(posix, "fsync", failing)
    with pytest.raises(OSError):
        with learning.session(model, mapped=True, light=True) as session:
            session.learn(SPAM[31].read_bytes(), True, ledgers.Tally())
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.spamnb", "m.spamnb.lock"]


def test_a_model_replaced_while_it_is_read_is_read_again(model, tmp_path, monkeypatch):
    old = model.parent / "old.spamnb"
    shutil.copyfile(model, old)
    _journaled(model, ACTIONS[:3])            # model + journal J (extends the model)
    expected = _state(SpamFilter.load(model))
    with learning.session(model) as session:  # compaction: the model replaced, J removed
        session.compact()
    _journaled(model, ACTIONS[3:4])           # a new journal extends the new model
    expected = _state(SpamFilter.load(model))
    from spamnb.persistence import schema

    real_read = schema.read
    calls = []

    def read_the_old_one_first(path):         # as if the model was replaced right after it was read
        calls.append(path)
        return real_read(old if len(calls) == 1 else path)

    monkeypatch.setattr(schema, "read", read_the_old_one_first)
    assert _state(SpamFilter.load(model)) == expected
    assert len(calls) == 2


def test_a_journal_past_its_size_is_folded_into_the_model(model, tmp_path, monkeypatch):
    monkeypatch.setattr(records, "_COMPACT_MAX", 4000)   # journal.compact_at's bounds (the append's module)
    monkeypatch.setattr(records, "_COMPACT_MIN", 4000)
    reference = tmp_path / "ref.spamnb"
    shutil.copyfile(model, reference)
    inode = os.stat(model).st_ino
    jpath = Path(str(model) + ".journal")
    sizes = []
    with open(model, "rb"):   # held open: a file written later cannot be given its inode again
        for action in ACTIONS[:8]:
            _journaled(model, [action])
            sizes.append(jpath.stat().st_size if jpath.exists() else 0)
        assert 48 in sizes and max(sizes) > 48 and 0 not in sizes   # folded: the header alone left and os.stat(model).st_ino != inode
    _rewrite(reference, ACTIONS[:8])
    assert _state(SpamFilter.load(model)) == _state(SpamFilter.load(reference))


def test_a_record_that_does_not_fit_the_model_stops_the_replay(model, tmp_path):
    _journaled(model, ACTIONS[:2])
    jpath = Path(str(model) + ".journal")
    data = bytearray(jpath.read_bytes())
    # rewrite the model's vocabulary size in the first record (and its checksum): it no longer fits
    at = 48 + 16 + 8
    data[at:at + 4] = (12345).to_bytes(4, "little")
    head = bytes(data[40:48])
    size = int.from_bytes(data[48:52], "little")
    checksum = journal.checks.checksum64(head + bytes(data[48:56]) + bytes(data[64:64 + size]))
    data[56:64] = checksum.to_bytes(8, "little")
    jpath.write_bytes(bytes(data))
    with pytest.warns(journal.JournalWarning, match="does not fit the model"):
        assert SpamFilter.load(model).class_count_ == (8.0, 8.0)
    with pytest.warns(journal.JournalWarning):
        _journaled(model, ACTIONS[2:3])       # the next learn saves the model whole
    assert journal_without_records(model)
    assert SpamFilter.load(model).class_count_ == (8.0, 9.0)


def test_a_new_model_and_a_model_with_features_are_saved_whole(tmp_path):
    path = tmp_path / "new.spamnb"
    proc = run_spamnb(["learn", "--spam", "-m", path, SPAM[0]], text=True)
    assert proc.returncode == 0, proc.stderr
    assert path.exists() and journal_without_records(path)
    featured = tmp_path / "f.spamnb"
    SpamFilter(feature_weight=0.5).fit([p.read_bytes() for p in SPAM[:3] + HAM[:3]], [1, 1, 1, 0, 0, 0]).save(featured)
    before = featured.read_bytes()
    _journaled(featured, ACTIONS[:1])
    assert featured.read_bytes() != before and journal_without_records(featured)


def test_readers_never_fail_while_learners_append_and_compact(model, tmp_path):
    writer = ("import sys; from spamnb.persistence import records; from spamnb.model import learning; from spamnb.estimator import ledger\n"
              "records._COMPACT_MAX = records._COMPACT_MIN = 6000\n"
              "for i, path in enumerate(sys.argv[2:]):\n"
              "    with learning.session(sys.argv[1]) as s:\n"
              "        s.learn(open(path, 'rb').read(), True, ledger.Tally())\n"
              "    if i % 3 == 2:\n"                      # forgets too: holes, folded by each compaction
              "        with learning.session(sys.argv[1]) as s:\n"
              "            s.forget(open(path, 'rb').read())\n")
    proc = subprocess.Popen([sys.executable, "-c", writer, str(model), *map(str, SPAM[10:40])], env=_env())
    reads = 0
    try:
        while proc.poll() is None:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                sf = SpamFilter.load(model)
            assert sf.classify(PROBES[0]).label in ("spam", "ham", "unsure")
            reads += 1
    finally:
        proc.wait()
    assert proc.returncode == 0 and reads > 5
    assert SpamFilter.load(model).class_count_ == (8.0, 28.0)


_KILLED_WRITER = r"""
import os, posix, sys, time
from spamnb.persistence import journal, records
from spamnb.model import learning
from spamnb.estimator import ledger
real_pwrite = os.pwrite
def half_then_wait(fd, data, offset):
    if len(data) < 100:                  # the lock's pid
        return real_pwrite(fd, data, offset)
    n = real_pwrite(fd, data[:len(data) // 2], offset)
    os.fsync(fd)
    print("half", flush=True)
    time.sleep(60)
    return n
for i, path in enumerate(sys.argv[2:]):
    if i == len(sys.argv) - 3:
        os.pwrite = posix.pwrite = half_then_wait   # the journal writes through posix (no os.py on a learn)
    with learning.session(sys.argv[1]) as s:
        s.learn(open(path, "rb").read(), True, ledger.Tally())
    print("acknowledged", path, flush=True)
"""


def test_sigkill_mid_append_keeps_every_acknowledged_learn(model, tmp_path):
    messages = SPAM[10:14]
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(model), *map(str, messages)],
                            env=_env(), stdout=subprocess.PIPE, text=True)
    lines = []
    while True:
        line = proc.stdout.readline()
        assert line, "the writer ended before its last append"
        lines.append(line)
        if line == "half\n":
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    acknowledged = [line.split()[1] for line in lines if line.startswith("acknowledged")]
    assert len(acknowledged) == 3
    reference = tmp_path / "ref.spamnb"
    shutil.copyfile(model, reference)
    os.unlink(str(reference) + ".journal") if os.path.exists(str(reference) + ".journal") else None
    _rewrite(reference, [("learn", Path(p), True) for p in acknowledged])
    with pytest.warns(journal.JournalWarning, match="the 3 records before them apply"):
        assert _state(SpamFilter.load(model)) == _state(SpamFilter.load(reference))
    with pytest.warns(journal.JournalWarning):
        _journaled(model, [("learn", messages[3], True)])      # learned again, after the cut
    _rewrite(reference, [("learn", messages[3], True)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _state(SpamFilter.load(model)) == _state(SpamFilter.load(reference))


@pytest.mark.slow
def test_sigkill_at_random_moments_of_cli_learns_loses_no_acknowledged_learn(model, tmp_path):
    import random

    rng = random.Random(23)
    acknowledged = 0
    killed = 0
    started = time.monotonic()   # a whole command's time on this machine now: the kills fall inside it
    assert run_spamnb(["classify", "-m", model, SPAM[0]]).returncode == 0      # a spam
    took = time.monotonic() - started
    for i in range(40):
        if i >= 16 and killed >= 3 and acknowledged >= 1:
            break
        message = SPAM[10 + i]
        proc = subprocess.Popen([sys.executable, "-m", "spamnb", "learn", "-q", "--spam", "-m", str(model),
                                 str(message)], env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, 2 * took))
        proc.send_signal(signal.SIGKILL)
        status = proc.wait()
        killed += status == -signal.SIGKILL
        acknowledged += status == 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spam = SpamFilter.load(model).class_count_[1]
        # every acknowledged learn is there; a killed one is there whole or not at all
        assert acknowledged <= spam - 8 <= i + 1
    assert killed >= 3 and acknowledged >= 1, (killed, acknowledged)


_KILLED_CHANGER = r"""
import os, posix, sys, time
from spamnb.persistence import journal, records
from spamnb.model import learning
from spamnb.estimator import ledger
real_pwrite = os.pwrite
def half_then_wait(fd, data, offset):
    if len(data) < 100:                  # the lock's pid
        return real_pwrite(fd, data, offset)
    n = real_pwrite(fd, data[:len(data) // 2], offset)
    os.fsync(fd)
    print("half", flush=True)
    time.sleep(60)
    return n
changes = sys.argv[2:]
for i, change in enumerate(changes):
    action, path = change.split(":", 1)
    if i == len(changes) - 1:
        os.pwrite = posix.pwrite = half_then_wait   # the journal writes through posix (no os.py on a learn)
    with learning.session(sys.argv[1]) as s:
        if action == "learn":
            s.learn(open(path, "rb").read(), True, ledger.Tally())
        else:
            s.forget(open(path, "rb").read())
    print("acknowledged", change, flush=True)
"""


def test_sigkill_mid_append_of_a_forget_keeps_every_acknowledged_change(model, tmp_path):
    changes = ([("learn", p, True) for p in SPAM[10:13]] + [("forget", SPAM[10], None), ("learn", HAM[10], True)]
               + [("forget", SPAM[11], None)])
    argv = [f"{action}:{path}" for action, path, _ in changes]
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_CHANGER, str(model), *argv],
                            env=_env(), stdout=subprocess.PIPE, text=True)
    lines = []
    while True:
        line = proc.stdout.readline()
        assert line, "the writer ended before its last append"
        lines.append(line)
        if line == "half\n":
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert sum(line.startswith("acknowledged") for line in lines) == 5
    done = changes[:5]
    reference = tmp_path / "ref.spamnb"
    shutil.copyfile(model, reference)
    _rewrite(reference, done)
    with pytest.warns(journal.JournalWarning, match="the 5 records before them apply"):
        replayed = SpamFilter.load(model)
    expected = SpamFilter.load(reference)
    assert _scores(replayed) == pytest.approx(_scores(expected), rel=1e-9, abs=1e-9)
    assert _state(replayed) == _state(expected)
    with pytest.warns(journal.JournalWarning):
        _journaled(model, [changes[5]])                      # forgotten again, after the cut
    _rewrite(reference, [changes[5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        replayed, expected = SpamFilter.load(model), SpamFilter.load(reference)
    assert _scores(replayed) == pytest.approx(_scores(expected), rel=1e-9, abs=1e-9)
    assert _state(replayed) == _state(expected)


@pytest.mark.slow
def test_sigkill_at_random_moments_of_cli_forgets_loses_no_acknowledged_forget(model, tmp_path):
    import random

    rng = random.Random(29)
    killed = 0
    for i in range(40):
        if i >= 12 and killed >= 3:
            break
        message = SPAM[10 + i]
        started = time.monotonic()   # a learn's time on this machine now: the forget's kill falls inside it
        assert run_spamnb(["learn", "-q", "--spam", "-m", model, message]).returncode == 0
        took = time.monotonic() - started
        proc = subprocess.Popen([sys.executable, "-m", "spamnb", "forget", "-q", "-m", str(model), str(message)],
                                env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, took))
        proc.send_signal(signal.SIGKILL)
        status = proc.wait()
        killed += status == -signal.SIGKILL
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sf = SpamFilter.load(model)
        spam = sf.class_count_[1]
        assert spam == 8 + 1 - (status == 0) or (status != 0 and spam == 8)   # acknowledged: gone; else whole or not
        if spam == 9:                                        # not forgotten: forget it now, for the next round
            assert run_spamnb(["forget", "-q", "-m", model, message]).returncode == 0
        assert SpamFilter.load(model).class_count_[1] == 8
    assert killed >= 3, killed


def test_removing_from_the_hash_index_leaves_the_index_of_the_rest():
    import random
    from array import array

    from spamnb.bayes import _holes, token_kernels

    rng = random.Random(5)
    for capacity, n in ((16, 8), (64, 32), (1024, 500)):
        hashes = array("Q", rng.sample(range(1, 1 << 12), n))   # small hashes: long runs, wrapping around
        hashes[0] = capacity - 1                                 # a run starting at the last slot
        keys, values = array("Q", bytes(8 * capacity)), array("i", bytes(4 * capacity))
        token_kernels.insert(keys, values, hashes, array("i", bytes(4 * n)), 0, array("i", bytes(4 * n)))
        which = bytearray(rng.random() < 0.4 for _ in range(n))
        assert _holes.remove(keys, values, hashes, which) == sum(which)
        out = array("i", bytes(4 * n))
        token_kernels.lookup(keys, values, hashes, out)
        assert list(out) == [-1 if gone else i for i, gone in enumerate(which)]
        assert sum(k != 0 for k in keys) == n - sum(which)
        assert _holes.remove(keys, values, hashes, which) == 0   # gone already


def test_forgets_replay_without_numpy_and_fold_on_any_other_use(model, tmp_path):
    _journaled(model, ACTIONS)
    code = ("import sys; from spamnb.model.spam_filter import SpamFilter; sf = SpamFilter.load(sys.argv[1]); "
            "sf.classify(open(sys.argv[2], 'rb').read()); print('numpy' in sys.modules, bool(vars(sf).get('_holes')))")
    out = subprocess.run([sys.executable, "-c", code, str(model), str(SPAM[45])], env=_env(), capture_output=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [b"False", b"True"]
    sf = SpamFilter.load(model)
    n = sf.vocabulary_.n_features                            # folded: the model saved whole would have n
    assert not vars(sf).get("_holes") and sf.word_counts_.n_holes == 0
    assert n == len(sf.vocabulary_.tokens()) == sf.word_counts_.n_features_ and min(sf.word_counts_.matrix().sum(0)) > 0


def test_a_model_file_with_unused_tokens_forgets_as_a_rewrite(model, tmp_path):
    sf = SpamFilter.load(model)
    sf.vocabulary_.add(sf.tokenizer_.stream(HAM[50].read_bytes()))   # tokens without counts, as no spamnb writes
    sf.word_counts_.resize(sf.vocabulary_.n_features)
    sf.ages_.days(sf.vocabulary_.n_features)
    sf.save(model)
    rewritten = tmp_path / "rewritten.spamnb"
    shutil.copyfile(model, rewritten)
    changes = [("learn", SPAM[10], True), ("forget", SPAM[10], None), ("learn", SPAM[11], True)]
    _rewrite(rewritten, changes)
    _journaled(model, changes)
    expected, replayed = SpamFilter.load(rewritten), SpamFilter.load(model)
    assert _scores(replayed) == pytest.approx(_scores(expected), rel=1e-9, abs=1e-9)
    assert _state(replayed) == _state(expected)


def _verdict_scores(sf):
    return [(sf.classify(m, False).log_odds, sf.classify(m).log_odds, sf.classify(m).evidence) for m in PROBES]


def test_classify_without_evidence_reads_the_logs_of_tokens_a_journal_added(model):
    """The verdict without evidence (``spamnb classify``, CHECK: Scorer.verdict_sums)
    scores a model whose journal added tokens as the one with evidence does
    (it read the logs past the file's as if the file had them all)."""
    _journaled(model, ACTIONS[:8])
    sf = SpamFilter.load(model)
    assert len(vars(sf)["word_counts_"].scorer_logs()[3])    # tokens past the file's, in the side rows
    for m in PROBES + [SPAM[10].read_bytes(), HAM[10].read_bytes()]:
        assert sf.classify(m, False).log_odds == sf.classify(m).log_odds == sf.score(m).log_odds
        assert sf.classify(m, False).label == sf.classify(m).label


def test_a_reader_follows_the_records_appended_since_and_scores_as_a_fresh_read(model):
    """journal.follow applies only the records new since the reader's last look, as
    replay does: the reader then scores (with and without evidence) and holds
    the counts of model + journal read afresh, to the bit; a record not whole
    yet waits; a journal replaced, or cut below what was applied, is not followed."""
    reader = SpamFilter.load(model)                          # no journal yet
    assert journal.follow(reader) == 0
    path = journal.journal_path(model)
    _journaled(model, ACTIONS[:3])
    assert journal.follow(reader) == 3
    assert _verdict_scores(reader) == _verdict_scores(SpamFilter.load(model))
    _journaled(model, ACTIONS[3:13] + ACTIONS[14:16], per_session=2)   # learns, a relabel, forgets
    whole = Path(path).read_bytes()
    with open(path, "r+b") as f:
        f.truncate(len(whole) - 24)                          # the last record half written
    assert journal.follow(reader) == 5
    assert journal.follow(reader) == 0
    Path(path).write_bytes(whole)                            # and now whole
    assert journal.follow(reader) == 1
    fresh = SpamFilter.load(model)
    assert _verdict_scores(reader) == _verdict_scores(fresh) and _state(reader) == _state(fresh)
    assert journal.follow(reader) == 0
    with open(path, "r+b") as f:
        f.truncate(len(whole) - 8)                           # cut below what was applied
    assert journal.follow(reader) is None
    with pytest.warns(journal.JournalWarning):
        other = SpamFilter.load(model)
    os.unlink(path)                                          # a journal started anew: its records are others
    _journaled(model, ACTIONS[:13])
    assert journal.follow(other) is None


def test_a_reader_of_a_journal_without_records_follows_the_records_appended_to_it(model):
    """A reader that found a whole save's journal (its header alone, not read) follows the learns
    appended to it, and scores as a fresh read; one of another model file is not followed."""
    with learning.session(model) as session:
        journal.save_whole(session.filter, session.path)
    reader = SpamFilter.load(model)
    assert journal.follow(reader) == 0
    _journaled(model, ACTIONS[:3])
    assert journal.follow(reader) == 3
    fresh = SpamFilter.load(model)
    assert _verdict_scores(reader) == _verdict_scores(fresh) and _state(reader) == _state(fresh)
    with learning.session(model) as session:
        journal.save_whole(session.filter, session.path)      # the records folded: a new header
    stale = SpamFilter.load(model)
    Path(journal.journal_path(model)).write_bytes(bytes(48))   # not this file's header
    assert journal.follow(stale) is None


def test_a_kept_model_follows_other_writers_learns_and_is_read_again_when_replaced(model):
    kept = learning.Kept()
    with learning.session(model, kept=kept) as session:
        session.learn(SPAM[10].read_bytes(), True, ledgers.Tally())
        first = session.filter
    with learning.session(model, kept=kept) as session:
        assert session.filter is first                       # the model and journal as it left them
        session.forget(SPAM[10].read_bytes())
    for i in (12, 13):                                       # another writer appends to the journal
        assert run_spamnb(["learn", "-q", "--spam", "-m", model, SPAM[i]]).returncode == 0
    with learning.session(model, kept=kept) as session:
        assert session.filter is first                       # its records applied: no reading of the model
        assert _state(SpamFilter.load(model)) == _state(first)
        assert _scores(SpamFilter.load(model)) == _scores(first)
        session.learn(SPAM[14].read_bytes(), True, ledgers.Tally())
    assert _state(SpamFilter.load(model)) == _state(first)   # and appends after them
    shutil.copyfile(model, str(model) + ".copy")
    os.replace(str(model) + ".copy", model)                  # the model file replaced (same bytes, other inode)
    with learning.session(model, kept=kept) as session:
        assert session.filter is not first                  # read again
        session.learn(SPAM[15].read_bytes(), True, ledgers.Tally())
        second = session.filter
    with pytest.raises(ValueError):
        with learning.session(model, kept=kept) as session:
            session.forget(SPAM[30].read_bytes())            # not learned: the session fails
    with learning.session(model, kept=kept) as session:
        assert session.filter is not second                  # a failed session's model is not kept
    assert SpamFilter.load(model).class_count_ == (8.0, 12.0)


# ---------------------------------------------------------------------------- forget costs what learn costs (issue 25, item 4)
def _tiny(n):
    return [b"Subject: tiny %d\n\nword%d other%d common text\n" % (i, i, i % 97) for i in range(n)]


def _library_forget_time(n):
    messages = _tiny(n)

    def work():
        sf = SpamFilter(length_norm=0)
        for m in messages:
            sf.learn(m, True)
        started = time.perf_counter()
        for m in messages:
            sf.forget(m, True)
        work.elapsed = time.perf_counter() - started
        assert sf.class_count_ == (0.0, 0.0)

    times = []
    for _ in range(3):
        work()
        times.append(work.elapsed)
    return min(times)


@pytest.mark.slow   # over 6 s in the default run: CI runs it in the slow step
def test_forgetting_four_times_the_messages_costs_about_four_times_not_sixteen():
    """SpamFilter.forget left each token without counts to a compaction of the
    whole vocabulary per message: 1k / 4k tiny messages took 1.2 / 16.6 s."""
    small, large = _library_forget_time(1000), _library_forget_time(4000)
    assert large < 8 * max(small, 0.002), (small, large)


def test_a_session_forgets_in_linear_time_in_a_model_with_unused_tokens(model, tmp_path):
    """A model file holding tokens without counts cannot forget in place; it
    folded the whole model after every message (quadratic under the lock)."""
    sf = SpamFilter.load(model)
    sf.vocabulary_.add(sf.tokenizer_.stream(HAM[50].read_bytes()))   # tokens without counts, as no spamnb writes
    sf.word_counts_.resize(sf.vocabulary_.n_features)
    sf.ages_.days(sf.vocabulary_.n_features)
    sf.save(model)
    shutil.copyfile(model, tmp_path / "reference.spamnb")

    messages = _tiny(2000)
    started = time.perf_counter()
    with learning.session(model) as session:
        for m in messages:
            session.learn(m, True, ledgers.Tally())
    learned = time.perf_counter() - started
    started = time.perf_counter()
    with learning.session(model) as session:
        for m in messages:
            session.forget(m)
    forgotten = time.perf_counter() - started
    assert SpamFilter.load(model).class_count_ == SpamFilter.load(tmp_path / "reference.spamnb").class_count_
    assert forgotten < 8 * learned + 2.0, (learned, forgotten)   # main: 0.21 s, 18.9 s (shared machine: slack)


def test_reading_a_journal_makes_no_error_class_until_one_is_named():
    """Importing the journal's module makes none of ``spamnb.errors``' journal
    classes (a class statement each: a classify through a journal that warns
    of nothing needs none); ``journal.JournalWarning`` is that module's class."""
    code = ("import spamnb.persistence.journal as journal, spamnb.errors as errors\n"
            "made = sorted(name for group in errors._MADE.values() for name in group)\n"
            "print(made, journal.JournalWarning is errors.JournalWarning)")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.stdout.split() == ["[]", "True"], proc.stderr[-500:]


# ---------------------------------------------------------------------------- a whole save leaves a journal without records
def test_a_whole_save_leaves_a_journal_the_first_learn_appends_to(model, tmp_path):
    """``train`` (any whole save: journal.save_whole) leaves the header of a journal of the file it
    wrote; a classify reads none of it (nor loads the journal's read side); the first learn appends its
    record to that very file, and model + journal is what a journal started by the learn gives."""
    other = tmp_path / "other.spamnb"
    shutil.copyfile(model, other)                                  # no journal: the learn starts one
    with learning.session(model) as session:
        journal.save_whole(session.filter, session.path)
    jpath = Path(str(model) + ".journal")
    assert journal_without_records(model) and jpath.stat().st_size == 48
    code = ("import sys; from spamnb.model.spam_filter import SpamFilter; "
            "sf = SpamFilter.load(sys.argv[1], mapped=True); sf.classify(open(sys.argv[2], 'rb').read()); "
            "print('spamnb.persistence.journal_view' in sys.modules, 'spamnb.persistence.journal' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(model), str(SPAM[45])], env=_env(), capture_output=True,
                         text=True)
    assert out.returncode == 0 and out.stdout.split() == ["False", "False"], out.stderr
    inode = jpath.stat().st_ino
    for path in (model, other):
        proc = run_spamnb(["learn", "--spam", "-q", "-m", path, SPAM[30]], text=True)
        assert proc.returncode == 0, proc.stderr
    assert jpath.stat().st_ino == inode and jpath.stat().st_size > 48     # appended to, not replaced
    assert jpath.read_bytes() == Path(str(other) + ".journal").read_bytes()   # the same journal, byte for byte
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _state(SpamFilter.load(model)) == _state(SpamFilter.load(other))
    jpath.unlink()                                                  # removed by hand: the next learn starts one
    proc = run_spamnb(["learn", "--ham", "-q", "-m", model, HAM[30]], text=True)
    assert proc.returncode == 0, proc.stderr
    assert SpamFilter.load(model).class_count_ == (9.0, 8.0)


def test_the_first_learn_after_a_whole_save_opens_its_journal_once(model, monkeypatch):
    """The journal a whole save left (its header alone, not read by the load) is checked, adopted and
    appended to through one descriptor (``records._adopt``): one open of the journal, one fsync."""
    with learning.session(model) as session:
        journal.save_whole(session.filter, session.path)
    jpath = os.path.realpath(str(model) + ".journal")
    opened, synced = [], []
    real_open, real_fsync = records.posix.open, records.posix.fsync
    monkeypatch.setattr(records.posix, "open", lambda path, *a, **k: (opened.append(path), real_open(path, *a, **k))[1])
    monkeypatch.setattr(records.posix, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    with learning.session(model, mapped=True, light=True) as session:
        assert session.learn(SPAM[30].read_bytes(), True, ledgers.Tally()) == "learned"
    assert [p for p in opened if str(p).endswith(".journal")] == [jpath] and len(synced) == 1
    assert os.path.getsize(jpath) > 48 and journal.read(str(model), journal.model_identity(str(model))).n_records == 1


@pytest.mark.parametrize("kind", ["another model's", "damaged"])
def test_a_journal_without_records_of_another_model_is_never_appended_to(model, tmp_path, kind):
    """A header-sized journal that is not this model file's (a model retrained or copied in; or damaged)
    applies nothing and warns of nothing; the learn replaces it with a journal of its own."""
    jpath = Path(str(model) + ".journal")
    if kind == "damaged":
        jpath.write_bytes(b"\x01" * 48)
    else:
        other = tmp_path / "other.spamnb"
        SpamFilter().fit([p.read_bytes() for p in SPAM[:4] + HAM[:4]], [True] * 4 + [False] * 4).save(other)
        with learning.session(other) as session:
            journal.save_whole(session.filter, session.path)
        shutil.copyfile(str(other) + ".journal", jpath)
        assert not journal_without_records(model)
    before = _state(SpamFilter.load(model))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _state(SpamFilter.load(model)) == before
    _journaled(model, ACTIONS[:1])
    assert jpath.stat().st_size > 48 and journal.read(str(model), journal.model_identity(str(model))).status == "ok"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert SpamFilter.load(model).class_count_ == (8.0, 9.0)
