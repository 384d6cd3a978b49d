"""A model read in part whose journal is scored, not replayed (spamnb.persistence.journal_view).

What must hold: ``SpamFilter.load(mapped=True)`` (``spamnb classify``'s
path) of a model whose journal holds learns gives every message the very
verdict a whole load with the journal replayed gives (log-odds, label,
evidence and its token names, cutoffs: equal, not close), without reading
the model's large arrays; anything else asked of such a filter replays the
journal first (held-out scores counted once); a journal with a forget, or
with a record that does not fit, is replayed as before.
"""

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from spamnb.model import learning
from spamnb.estimator import ledger as ledgers
from spamnb.estimator import ledger_table
from spamnb.model.spam_filter import SpamFilter

from conftest import REPO, journal_without_records, run_spamnb
from test_journal import HAM, SPAM, _env, model  # noqa: F401 -- the model fixture: 8 spam and 8 ham fitted

HARD = sorted((REPO / "corpora" / "hard_ham").iterdir())
PROBES = [p.read_bytes() for p in SPAM[40:50] + HAM[90:100] + HARD[:5]]
LARGE = ("keys", "values", "feature_count", "log_count", "strings")


def _learn(path, actions):
    with learning.session(path) as session:   # a forget journaled (the library's default), not folded in
        for action, message, label in actions:
            data = message.read_bytes() if isinstance(message, Path) else message
            if action == "learn":
                session.learn(data, label, ledgers.Tally())
            else:
                session.forget(data, label, ledgers.Tally())


def _learns(n=12):
    # the hard ham and spam the model never saw: hundreds of tokens new to it, and many it knows
    return ([("learn", SPAM[10 + i], True) for i in range(n // 2)]
            + [("learn", HARD[10 + i], False) for i in range(n // 2)])


def _verdicts(sf, messages, evidence=True):
    return [tuple(sf.classify(m, evidence)) for m in messages]   # every field: label, log-odds, evidence, ...


def _viewed(path):
    sf = SpamFilter.load(path, mapped=True)
    assert sf.pending_journal_ is not None, "the journal was replayed, not viewed"
    return sf


def test_a_viewed_journal_scores_as_the_replayed_one_to_the_bit_without_reading_the_model(model):
    _learn(model, _learns())
    learned = [p.read_bytes() for _, p, _ in _learns()]   # the journal's own tokens, its new ones among them
    messages = PROBES + learned
    replayed = SpamFilter.load(model)
    expected = _verdicts(replayed, messages)
    viewed = _viewed(model)
    assert _verdicts(viewed, messages) == expected
    assert [viewed.classify(m, False).log_odds for m in messages] == [e[2] for e in expected]
    assert viewed.cutoffs == replayed.cutoffs
    unread = viewed.unread_.unread
    assert set(LARGE) <= unread                              # nothing of the model read whole
    # evidence of tokens the journal added, named from its records
    viewed.n_evidence = replayed.n_evidence = 400
    assert _verdicts(viewed, learned) == _verdicts(replayed, learned)
    n_file = SpamFilter.load(model, mapped=True).pending_journal_.n_base   # the model file's tokens
    new = {t for v in _verdicts(viewed, learned) for t, _ in v[3]} - set(replayed.vocabulary_.tokens()[:n_file])
    assert new                                               # some evidence is the journal's own tokens


def test_a_verdict_without_evidence_numbers_no_journal_token(model):
    # a message with tokens only the journal holds is scored in the order the journal numbers them
    # (first occurrences) without the table of every journal token, which only evidence names need
    _learn(model, _learns())
    learned = [p.read_bytes() for _, p, _ in _learns()]
    replayed = SpamFilter.load(model)
    viewed = _viewed(model)
    view = viewed.pending_journal_
    assert [viewed.classify(m, False).log_odds for m in learned] == [replayed.classify(m, False).log_odds
                                                                      for m in learned]
    assert view._ids is None                                 # the journal's tokens never numbered
    viewed.n_evidence = replayed.n_evidence = 400
    assert _verdicts(viewed, learned[:1]) == _verdicts(replayed, learned[:1])
    assert view._ids is not None                             # evidence names them: numbered then


def test_a_learners_new_tokens_are_those_neither_the_file_nor_a_learn_holds(model):
    # from the message's pass through the learns, scored first or not: what the table of every journal token gives
    from array import array

    from spamnb.bayes import token_kernels
    from spamnb.persistence import deltas

    _learn(model, _learns())
    sf = _viewed(model)
    messages = [p.read_bytes() for _, p, _ in _learns()] + PROBES + [HARD[-1].read_bytes()]
    for scored in (False, True):
        view = _viewed(model).pending_journal_
        for message in messages:
            hashes = sf.tokenizer_.stream(message).hashes
            if scored:
                view.score(hashes)
            new = set(hashes).difference(view._gather(hashes)[0])
            _ids, _n, keys, values = view.numbering()
            candidates = array("Q", new)
            ids = array("i", [-1]) * len(candidates)
            token_kernels.lookup(keys, values, candidates, ids)
            expected = deltas.first_places(hashes, {h for h, i in zip(candidates, ids) if i < 0})
            assert list(view.new_tokens(hashes)) == list(expected)
    assert any(len(view.new_tokens(sf.tokenizer_.stream(m).hashes)) for m in messages)   # some tokens new to both


def test_anything_else_replays_the_journal_first_and_counts_held_out_scores_once(tmp_path):
    path = tmp_path / "learned.spamnb"   # a model grown by learning from empty: cutoffs fitted on held-out scores
    spam, ham = SPAM + [p for p in (REPO / "corpora" / "spam_2").iterdir()][:20], HAM[:70]
    for s, h in zip(spam, ham):   # each its own session: a record each, held-out scores once 50 of each are in
        _learn(path, [("learn", s, True), ("learn", h, False)])
    assert os.path.getsize(str(path) + ".journal") > 0
    replayed = SpamFilter.load(path)
    assert replayed.held_out_ is not None
    viewed = _viewed(path)
    assert viewed.cutoffs == replayed.cutoffs and viewed.cutoff_source_ == replayed.cutoff_source_
    assert bytes(viewed.held_out_.counts) == bytes(replayed.held_out_.counts)
    assert _verdicts(viewed, PROBES) == _verdicts(replayed, PROBES)
    assert _viewed(path).ledger_.to_arrays() == replayed.ledger_.to_arrays()   # the ledger: replayed first
    assert viewed.vocabulary_.tokens() == replayed.vocabulary_.tokens()   # replayed now
    assert viewed.pending_journal_ is None
    assert bytes(viewed.word_counts_.feature_count_) == bytes(replayed.word_counts_.feature_count_)
    assert bytes(viewed.held_out_.counts) == bytes(replayed.held_out_.counts)   # not counted twice
    assert ledger_table.ledger_of(viewed).to_arrays() == ledger_table.ledger_of(replayed).to_arrays()
    assert _verdicts(viewed, PROBES) == _verdicts(replayed, PROBES)


def test_the_command_line_gives_the_replayed_verdict(model, tmp_path):
    _learn(model, _learns(8))
    replayed = SpamFilter.load(model)
    for probe in (SPAM[45], HAM[95], SPAM[10]):
        out = subprocess.run([sys.executable, "-m", "spamnb", "classify", "--json", "-m", str(model), str(probe)],
                             env=_env(), capture_output=True)
        assert out.returncode in (0, 1, 2), out.stderr
        got = json.loads(out.stdout)
        v = replayed.classify(probe.read_bytes())
        assert (got["log_odds"], got["verdict"], got["known_tokens"]) == (v.log_odds, v.label, v.known_tokens)
        assert [tuple(e) for e in got["evidence"]] == list(v.evidence)


def test_a_journal_with_a_forget_is_replayed(model):
    _learn(model, _learns(6) + [("forget", SPAM[11], True)])
    sf = SpamFilter.load(model, mapped=True)
    assert sf.pending_journal_ is None and not journal_without_records(model)
    assert _verdicts(sf, PROBES) == _verdicts(SpamFilter.load(model), PROBES)


def test_a_relabel_or_a_forget_folds_the_journal_in_and_the_learns_after_it_are_viewed(model, tmp_path):
    # issue 51: a journal holding a forget is replayed by every classify (the model read whole) until it is
    # folded; a commit that forgets folds it at once, to the state the forget journaled replays to
    journaled = tmp_path / "journaled.spamnb"
    shutil.copyfile(model, journaled)
    for path in (model, journaled):
        _learn(path, _learns(6))
    _viewed(model)
    for args, action, new in ((["learn", "--ham"], ("learn", SPAM[10], False), SPAM[20]),   # learned as spam
                              (["forget"], ("forget", SPAM[11], None), SPAM[21])):
        proc = run_spamnb(args + ["-m", str(model), str(action[1])], text=True)
        assert proc.returncode == 0 and ("relabelled 1" in proc.stdout or "forgot 1" in proc.stdout), proc.stderr
        assert journal_without_records(model)                  # folded in: no forget left for a classify
        _learn(journaled, [action])
        assert not journal_without_records(journaled)
        _as_rewritten(SpamFilter.load(model, mapped=True), SpamFilter.load(journaled))
        assert run_spamnb(["learn", "--spam", "-m", str(model), str(new)]).returncode == 0   # a learn after it
        _learn(journaled, [("learn", new, True)])
        _as_rewritten(_viewed(model), SpamFilter.load(journaled))


def _as_rewritten(folded, replayed):
    """A forget folded in scores as its replay, which scores as the model rewritten (to the last bits of a
    sum's order: tests/test_journal.py, test_model_plus_journal_scores_as_learning_and_rewriting)."""
    for got, expected in zip(_verdicts(folded, PROBES), _verdicts(replayed, PROBES)):
        assert got[0] == expected[0] and [t for t, _ in got[3]] == [t for t, _ in expected[3]]
        assert got[2] == pytest.approx(expected[2], rel=1e-9, abs=1e-9)
        assert [w for _, w in got[3]] == pytest.approx([w for _, w in expected[3]], rel=1e-9, abs=1e-9)


def test_a_record_that_does_not_fit_is_replayed_with_its_warning(model, tmp_path):
    _learn(model, _learns(4))
    other = tmp_path / "other.spamnb"   # the journal of another model of the same file: its records do not fit
    messages = [p.read_bytes() for p in SPAM[:9] + HAM[:8]]
    SpamFilter().fit(messages, [True] * 9 + [False] * 8).save(other)
    data = Path(str(model) + ".journal").read_bytes()
    # the same header (it names the model file), the records of a learn into a larger vocabulary
    _learn(other, _learns(4))
    foreign = Path(str(other) + ".journal").read_bytes()
    Path(str(model) + ".journal").write_bytes(data[:48] + foreign[48:])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sf = SpamFilter.load(model, mapped=True)
    assert sf.pending_journal_ is None
    assert any("does not fit" in str(w.message) or "damaged" in str(w.message) for w in caught)


def test_threads_score_while_another_replays(model):
    import threading

    _learn(model, _learns())
    expected = [v[2] for v in _verdicts(SpamFilter.load(model), PROBES)]
    for _ in range(3):
        viewed = _viewed(model)
        results, start = [], threading.Barrier(5)

        def score():
            start.wait()
            results.append([viewed.classify(m).log_odds for m in PROBES])

        threads = [threading.Thread(target=score) for _ in range(4)]
        for t in threads:
            t.start()
        start.wait()
        tokens = viewed.vocabulary_.tokens()   # the journal replayed while they score
        for t in threads:
            t.join()
        assert results == [expected] * 4 and len(tokens) == len(SpamFilter.load(model).vocabulary_.tokens())
        assert [viewed.classify(m).log_odds for m in PROBES] == expected
    # the moment between another thread's read of the arrays and its replay: evidence still named
    viewed = _viewed(model)
    viewed.unread_.fill()
    assert _verdicts(viewed, PROBES) == _verdicts(SpamFilter.load(model), PROBES)


def test_given_cutoffs_leave_held_out_scores_to_the_replay(tmp_path):
    path = tmp_path / "given.spamnb"   # cutoffs given (or trained): they do not follow the held-out scores
    spam2 = sorted((REPO / "corpora" / "spam_2").iterdir())
    messages = [p.read_bytes() for p in SPAM + HAM[:60]]
    given = SpamFilter(spam_cutoff=0.99, ham_cutoff=0.1)
    given.fit(messages, [True] * len(SPAM) + [False] * 60, tune=False).save(path)
    _learn(path, [("learn", p, True) for p in spam2[:6]] + [("learn", p, False) for p in HAM[60:66]])
    replayed = SpamFilter.load(path)
    assert replayed.held_out_ is not None                    # the records carry held-out scores
    viewed = _viewed(path)
    assert vars(viewed).get("held_out_") is None             # not counted at load
    assert viewed.cutoffs == replayed.cutoffs
    assert _verdicts(viewed, PROBES) == _verdicts(replayed, PROBES)
    assert bytes(viewed.held_out_.counts) == bytes(replayed.held_out_.counts)   # counted by the replay it asked for
    assert viewed.pending_journal_ is None
    assert _verdicts(viewed, PROBES) == _verdicts(replayed, PROBES)


def test_the_view_reads_the_records_with_the_layouts_deltas_writes_them_with():
    """One definition of the journal's record layouts: ``persistence/store``'s (``deltas``, which
    writes and replays them, re-exports them); the view parses with those objects and defines none."""
    import inspect

    from spamnb.persistence import deltas, journal_view, store

    source = inspect.getsource(journal_view)
    assert "Struct(" not in source and "import struct" not in source and "Layout(" not in source
    assert "Layout(" not in inspect.getsource(deltas)
    assert "JOURNAL_OPS_LAYOUT" in source
    assert journal_view._LAYOUT is deltas.LAYOUT is store.JOURNAL_OPS_LAYOUT  # noqa: SLF001 -- its own constant
    for name in ("TOKENS_RECORD", "LEDGER_RECORD", "LEDGER_SIZE", "HELD_OUT_RECORD", "PAIR_SCORES_RECORD",
                 "LEARN_SUMS_RECORD", "OP_LEARN", "OP_FORGET", "OP_PAIR_SCORES", "OP_LEARN_SUMS"):
        assert getattr(deltas, name) is getattr(store, name), name
    for name in ("TOKENS_RECORD", "LEDGER_RECORD", "HELD_OUT_RECORD", "PAIR_SCORES_RECORD", "LEARN_SUMS_RECORD"):
        assert getattr(deltas, name).format in deltas.LAYOUT, name
    assert deltas.LEDGER_SIZE == len(deltas.encode_ledger(deltas.OP_RECORD, 1, bytes(16))) == 24


def test_the_compiled_pass_reads_each_record_as_deltas_writes_it_and_refuses_what_a_view_is_not():
    """``checks.journal_learns`` (the view's one compiled pass over the records): the learns' fields,
    hashes and held-out scores as ``deltas`` encodes them; None for a forget, a learn whose
    lengths do not sum to its text, a learn that does not follow the vocabulary, a bad
    ledger record; a ValueError for record layouts other than those it reads."""
    from array import array

    import pytest

    from spamnb.bayes import checks
    from spamnb.persistence import deltas, journal_replay, journal_view, store

    layout = journal_view._LAYOUT  # noqa: SLF001 -- the module's own constant, read by its test
    first = (deltas.encode_held_out(1, 2.5) + deltas.encode_tokens(deltas.OP_LEARN, 1, 7, 100, array("Q", [5, 6, 5]),
                                                                      array("I", [2]), b"ab")
             + deltas.encode_ledger(deltas.OP_RECORD, 1, bytes(16), held_out=3))
    second = (deltas.encode_tokens(deltas.OP_LEARN, 0, 8, 101, array("Q", [9]), array("I", [1, 3]), b"xyzw")
              + deltas.LEARN_SUMS_RECORD.pack(deltas.OP_LEARN_SUMS, 0, 2.5, 0.75))
    learns, scores, hashes, bounds, classes, sums = checks.journal_learns([memoryview(first), memoryview(second)], 100,
                                                                          layout)
    learns = [array("q", learns)[k:k + 8].tolist() for k in range(0, len(learns) // 8, 8)]   # 8 int64 a learn
    assert [learn[:4] for learn in learns] == [[0, 1, 100, 1], [1, 0, 101, 2]]
    assert [learn[4] for learn in learns] == [32, 24] and [learn[7] for learn in learns] == [3, 1]   # hashes: at, count
    assert bytes(memoryview(first)[learns[0][5]:learns[0][5] + learns[0][6]]) == b"ab"
    assert bytes(memoryview(second)[learns[1][5]:learns[1][5] + learns[1][6]]) == b"xyzw"
    assert scores == [[(deltas.OP_HELD_OUT, 1, 2.5)], []]
    assert array("Q", hashes).tolist() == [5, 6, 5, 9] and array("q", bounds).tolist() == [0, 3, 4]
    assert classes == b"\x01\x00"
    assert [repr(v) for v in array("d", sums)] == ["nan", "nan", "2.5", "0.75"]   # a learn without its sums: NaN
    # with the journal's bytes (base): the hashes not copied, each learn's place in them (8-byte words)
    base = memoryview(bytes(8) + first + second)
    views = [base[8:8 + len(first)], base[8 + len(first):]]
    _l, _s, places, in_place, _c, _sums = checks.journal_learns(views, 100, layout, base)
    words = base.cast("Q")
    assert [words[p:p + b - a].tolist() for p, a, b in zip(array("q", places), array("q", bounds), array("q", bounds)[1:])] == [
        [5, 6, 5], [9]]
    assert array("q", in_place).tolist() == [0, 3, 4]   # the bounds as if one after the other
    assert checks.journal_learns([memoryview(bytes(first))], 100, layout, base) is None   # not within the base
    with pytest.raises(ValueError, match="8-byte words"):
        checks.journal_learns(views, 100, layout, base[:-1])
    # the view's learns as the records hold them
    parsed = journal_view._parse(store.Journal("j", None, "ok", [memoryview(first), memoryview(second)]),  # noqa: SLF001
                                 100)
    assert [(bytes(learn.hashes), learn.lengths.tolist(), bytes(learn.text)) for learn in journal_replay.recorded(parsed[0])] == [
        (array("Q", [5, 6, 5]).tobytes(), [2], b"ab"), (array("Q", [9]).tobytes(), [1, 3], b"xyzw")]
    refused = {
        "a forget": deltas.encode_tokens(deltas.OP_FORGET, 1, 7, 100, array("Q", [5])),
        "lengths not the text's": deltas.encode_tokens(deltas.OP_LEARN, 1, 7, 100, array("Q", [5]), array("I", [3]),
                                                       b"ab"),
        "not after the vocabulary": deltas.encode_tokens(deltas.OP_LEARN, 1, 7, 99, array("Q", [5])),
        "a ledger's bin past 512": deltas.encode_ledger(deltas.OP_RECORD, 1, bytes(16), held_out=600),
        "a class past 1": deltas.encode_held_out(2, 1.0),
        "cut short": deltas.encode_tokens(deltas.OP_LEARN, 1, 7, 100, array("Q", [5, 6]))[:24 + 8],
        "sums of no learn": deltas.encode_held_out(1, 1.0) + deltas.LEARN_SUMS_RECORD.pack(8, 1, 1.0, 1.0),
        "sums of another class": deltas.encode_tokens(deltas.OP_LEARN, 1, 7, 100, array("Q", [5]))
        + deltas.LEARN_SUMS_RECORD.pack(8, 0, 1.0, 1.0),
        "sums not finite": deltas.encode_tokens(deltas.OP_LEARN, 1, 7, 100, array("Q", [5]))
        + deltas.LEARN_SUMS_RECORD.pack(8, 1, float("inf"), 1.0),
        "a scale of 0": deltas.encode_tokens(deltas.OP_LEARN, 1, 7, 100, array("Q", [5]))
        + deltas.LEARN_SUMS_RECORD.pack(8, 1, 1.0, 0.0),
    }
    for what, payload in refused.items():
        assert checks.journal_learns([memoryview(payload)], 100, layout) is None, what
    with pytest.raises(ValueError, match="layouts"):
        checks.journal_learns([memoryview(first)], 100, layout[:1] + ("<BBxxiIIIII",) + layout[2:])


def _as_version_1(path, target):
    """The journal of the model at ``path`` as a spamnb of journal version 1 wrote it, at ``target``:
    header version 1, each record without its LEARN_SUMS (``deltas.without_sums``)."""
    from spamnb.persistence import deltas, journal
    from spamnb.persistence.store import model_identity

    read = journal.read(str(path), model_identity(str(path)))
    header = journal._header(read.identity, 1)  # noqa: SLF001 -- the module's own layout, read by its test
    records = [journal._record_bytes(header[40:48], k, deltas.without_sums(p))  # noqa: SLF001
               for k, p in enumerate(read.payloads)]
    Path(target).write_bytes(header + b"".join(records))


def test_a_journal_of_version_1_is_scored_to_the_same_bits_and_appended_to_as_version_1(model, tmp_path):
    """Learns record their sums (LEARN_SUMS, journal version 2) so that the view need not count them
    again; a journal written before (version 1, no sums: the view counts them) is read and scored to
    the same bits, and a learn appends to it as version 1 wrote, so a reader of that version reads it."""
    import shutil
    from array import array

    from spamnb.bayes import checks
    from spamnb.persistence import journal, journal_view

    old = tmp_path / "old.spamnb"
    shutil.copyfile(model, old)   # the same file: its journal applies to either
    _learn(model, _learns(8))
    _as_version_1(model, str(old) + ".journal")
    new_bytes, old_bytes = (Path(str(p) + ".journal").read_bytes() for p in (model, old))
    assert new_bytes[8:12] == journal.VERSION.to_bytes(4, "little") == (2).to_bytes(4, "little")
    assert old_bytes[8:12] == (1).to_bytes(4, "little") and len(old_bytes) < len(new_bytes)
    payloads = [SpamFilter.load(p, mapped=True).pending_journal_.journal.payloads for p in (model, old)]
    n_base = SpamFilter.load(model, mapped=True).pending_journal_.n_base
    sums = [array("d", checks.journal_learns(p, n_base, journal_view._LAYOUT)[5]) for p in payloads]  # noqa: SLF001
    assert len(sums[0]) == 16 and all(v == v for v in sums[0])   # every learn's sums, recorded
    assert all(v != v for v in sums[1])                           # none: counted by the view
    messages = PROBES + [p.read_bytes() for _, p, _ in _learns(8)]
    expected = _verdicts(SpamFilter.load(model), messages)
    assert _verdicts(_viewed(model), messages) == expected
    assert _verdicts(_viewed(old), messages) == expected
    following = SpamFilter.load(old)   # a reader that follows the journal (spamnb serve): its version's header
    more = [("learn", SPAM[30], True), ("learn", HARD[30], False)]
    _learn(model, more)
    _learn(old, more)
    assert journal.follow(following) == 1
    _as_version_1(model, tmp_path / "expected.journal")
    assert Path(str(old) + ".journal").read_bytes() == (tmp_path / "expected.journal").read_bytes()
    expected = _verdicts(SpamFilter.load(model), messages)
    assert _verdicts(_viewed(old), messages) == expected == _verdicts(SpamFilter.load(old), messages)
    assert _verdicts(following, messages) == expected


def test_a_readers_journal_is_read_through_one_small_buffer_never_whole_for_a_verdict(model, monkeypatch):
    """A reader (no lock held) of a model read in part scans its journal through one small buffer
    (``journal_view._BUFFER``; a record longer than it through memory of its own) and reads the learns'
    hashes again through it when it scores: no read of the journal whole into new memory for a verdict,
    whatever the buffer's size against the records'; the replay's verdicts, to the bit."""
    from spamnb.persistence import journal_view

    for action in _learns():   # a record each
        _learn(model, [action])
    messages = PROBES + [p.read_bytes() for _, p, _ in _learns()]
    expected = _verdicts(SpamFilter.load(model), messages)
    reread = journal_view._reread  # noqa: SLF001 -- the module's own read whole, watched by its test
    asked = []
    monkeypatch.setattr(journal_view, "_reread", lambda journal: asked.append(journal) or reread(journal))
    for size in (64, 4096, 64 << 10):   # every record longer than the buffer; a few records a buffer; all of them
        monkeypatch.setattr(journal_view, "_BUFFER", size)
        viewed = _viewed(model)
        assert viewed.journal_.scan is not None and viewed.journal_.n_records == 12
        assert [viewed.classify(m, False).log_odds for m in messages] == [e[2] for e in expected]
        assert asked == []                                   # scored without the payloads
        assert _verdicts(viewed, messages) == expected        # the journal's tokens named: its payloads read then
        assert asked == [viewed.journal_] and len(viewed.journal_.payloads) == 12
        asked.clear()
    with learning.session(model):   # a writer of this process (a learn): the journal read whole, as before
        assert SpamFilter.load(model, mapped=True).journal_.scan is None


def test_a_journal_changed_under_its_reader_scores_what_it_checked_or_is_refused(model):
    """The view reads the learns' hashes again when it scores: records appended since its scan are not
    read (it scores the records it saw, as a reader of the bytes it read did), and a journal rewritten in
    place since (cut short, or other records of the same model in their places) is refused (ModelError:
    ``classify -p`` passes the message on, ``Unchecked, reason=model-unreadable``), never scored with
    other counts."""
    from spamnb.errors import ModelError

    other = model.parent / "other.spamnb"
    shutil.copyfile(model, other)   # the same model file: its journal applies to either
    _learn(other, [("learn", SPAM[31], True), ("learn", HARD[31], False), ("learn", SPAM[32], True)])
    others = Path(str(other) + ".journal").read_bytes()
    _learn(model, _learns(4))
    jpath = Path(str(model) + ".journal")
    expected = [v[2] for v in _verdicts(SpamFilter.load(model), PROBES)]
    viewed = _viewed(model)
    _learn(model, [("learn", SPAM[30], True), ("learn", HARD[30], False)])   # appended after the scan
    assert [viewed.classify(m).log_odds for m in PROBES] == expected
    assert [v[2] for v in _verdicts(SpamFilter.load(model), PROBES)] != expected
    data = jpath.read_bytes()
    assert others[:48] == data[:48] and others[48:64] != data[48:64]
    for change in ("cut", "other records"):
        viewed = _viewed(model)
        with open(jpath, "r+b") as f:   # in place: the file the reader holds open
            f.truncate(len(data) // 2 if change == "cut" else 0)
            if change != "cut":
                f.write(others)
        with pytest.raises(ModelError, match="rewritten in place"):
            viewed.classify(PROBES[0])
        with pytest.raises(ModelError, match="rewritten in place"):
            viewed.journal_.payloads
        jpath.write_bytes(data)


@pytest.mark.parametrize("cut", [5, 16, -1])
def test_a_torn_tail_is_warned_of_and_the_records_before_it_viewed(model, cut):
    """A journal whose last record is cut short: read through the buffer, the same warning as a
    whole read gives, and the records before it scored as a replay of them scores them."""
    from spamnb.persistence import journal

    for action in _learns(4):   # a record each
        _learn(model, [action])
    jpath = Path(str(model) + ".journal")
    good = jpath.read_bytes()
    expected = _verdicts(SpamFilter.load(model), PROBES)
    _learn(model, [("learn", SPAM[30], True)])
    whole = jpath.read_bytes()
    jpath.write_bytes(whole[:len(good) + cut if cut > 0 else len(whole) + cut])
    with pytest.warns(journal.JournalWarning, match="incomplete or damaged.*the 4 records before them apply"):
        viewed = _viewed(model)
    assert viewed.journal_.scan is not None and viewed.journal_.n_records == 4
    assert _verdicts(viewed, PROBES) == expected


def test_threads_scoring_at_once_read_the_journal_each_through_a_buffer_of_its_own(model, monkeypatch):
    """The view's buffer is one scoring thread's at a time: another scoring meanwhile reads the
    journal through a buffer of its own (the pass runs without the GIL), never bytes the other read."""
    import threading

    from spamnb.persistence import journal_view

    for action in _learns():
        _learn(model, [action])
    expected = [v[2] for v in _verdicts(SpamFilter.load(model), PROBES)]
    monkeypatch.setattr(journal_view, "_BUFFER", 4096)   # a record or two a read: many reads a message
    for _ in range(3):
        viewed = _viewed(model)
        results, start = [], threading.Barrier(4)

        def score():
            start.wait()
            results.append([viewed.classify(m, False).log_odds for m in PROBES])

        threads = [threading.Thread(target=score) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [expected] * 4


def test_the_views_other_half_is_loaded_only_when_first_asked_for(model):
    """A view scores (at its own pair weight or a copy at another) and its learner finds a message's new
    tokens without ``persistence.journal_replay``; what else it is asked (the learns as objects, a
    token's text) binds that module's ``ViewExtras`` to it then, and a name it has not is an
    AttributeError that loads nothing; its replay is ``deltas.apply_records``, once."""
    _learn(model, _learns(4))
    code = (f"import sys; from spamnb.model.spam_filter import SpamFilter; from spamnb.persistence import deltas\n"
            f"sf = SpamFilter.load({str(model)!r}, mapped=True); view = sf.pending_journal_\n"
            f"sf.classify({PROBES[0]!r}, False); hashes = sf.tokenizer_.stream({PROBES[0]!r}).hashes\n"
            f"new = view.new_tokens(hashes)\n"
            f"copy = view.weighted(0.5); copy.score(hashes)\n"
            f"assert getattr(view, 'no_such_name', None) is None and not hasattr(view, '_numbering')\n"
            f"before = 'spamnb.persistence.journal_replay' in sys.modules\n"
            f"from spamnb.persistence import journal_view\n"
            f"assert journal_view.apply_records is deltas.apply_records\n"
            f"learns = view.learns\n"
            f"print(before, 'spamnb.persistence.journal_replay' in sys.modules, len(learns), len(new) > 0,\n"
            f"      copy.pair_weight, view.token(0) == SpamFilter.load({str(model)!r}).vocabulary_.token(0),\n"
            f"      view.replay(sf), view.replay(sf))")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert proc.stdout.split() == ["False", "True", "4", "True", "0.5", "True", "True", "True"], proc.stdout
