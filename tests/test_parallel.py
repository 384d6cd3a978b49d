"""Training and batch scoring in partitions on worker processes (spamnb.training.pipeline)."""

import io
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import spamnb
from spamnb.estimator import calibrate
from spamnb.estimator import counting
from spamnb.batch import classify as batch
from spamnb.training import pipeline
from spamnb.training import planning
from spamnb.training.corpus import CorpusReport, labelled_messages
from spamnb.model.spam_filter import SpamFilter
from spamnb.mail.mbox import _MAX_LINE, iter_mbox, message_starts

from tests.conftest import corpus_root

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "corpora"


def reference(counts="log", length_norm=0.0, **sources):
    sources = sources or {"trees": [SAMPLE]}
    messages = labelled_messages(**sources)
    return SpamFilter(counts=counts, length_norm=length_norm).fit([m.data for m in messages],
                                                                   [m.is_spam for m in messages])


def same_tokens(a, b):
    return np.array_equal(a.hashes, b.hashes) and a.strings == b.strings and np.array_equal(a.offsets, b.offsets)


def assert_same_counts(ref, got, exact=True):
    a, b = counting.Counts.from_filter(ref), counting.Counts.from_filter(got)
    assert same_tokens(a, b)   # the same tokens, in the same order (of first sight)
    assert np.array_equal(a.class_count, b.class_count)
    assert np.array_equal(a.last_seen, b.last_seen)
    if exact:
        assert np.array_equal(a.feature_count, b.feature_count)
    else:
        np.testing.assert_allclose(b.feature_count, a.feature_count, rtol=1e-12, atol=1e-12)


def test_tree_reduce_has_the_shape_of_the_level_by_level_reduction():
    def merge(group):
        return tuple(group) if len(group) != 1 else group[0]

    for fan_in in (2, 3, 8):
        for n in range(1, 70):
            items = list(range(n))
            assert counting.tree_reduce(iter(items), fan_in, merge) == counting.tree_levels(items, fan_in, merge)
    with pytest.raises(ValueError):
        counting.tree_reduce([1], 1)


def test_the_streaming_tree_drops_only_its_own_sums_and_sums_as_the_levels_do():
    """TreeReduce frees the sums it made as it adds them one level up (the
    merge's peak memory); the result is the level-by-level merge's, bit for
    bit, and the parts it was given are left whole."""
    messages = labelled_messages(trees=[SAMPLE])
    spec = counting.counting_spec(SpamFilter(counts="log"))
    parts = [counting.count_messages(spec, [(m.data, m.is_spam) for m in messages[i:i + 9]], day=20000,
                                     n_folds=calibrate.DEFAULT_FOLDS) for i in range(0, len(messages), 9)]
    before = [(p.hashes.copy(), p.dense.copy(), p.fold_keys.copy(), p.fold_values.copy()) for p in parts]
    for fan_in in (2, 3, 8):
        got = counting.tree_reduce(iter(parts), fan_in)
        want = counting.tree_levels(parts, fan_in, counting.merge_counts)
        assert same_tokens(got, want) and np.array_equal(got.last_seen, want.last_seen)
        for name in ("class_count", "dense", "fold_keys", "fold_values"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), name
        for part, (hashes, dense, keys, values) in zip(parts, before):
            assert np.array_equal(part.hashes, hashes) and np.array_equal(part.dense, dense)
            assert np.array_equal(part.fold_keys, keys) and np.array_equal(part.fold_values, values)


def test_the_streaming_tree_goes_on_adding_to_a_full_groups_table(monkeypatch):
    """A level's running total whose first item is a full group of the level
    below adopts that group's MergeTable instead of copying it into a new one
    (one table per chain of first groups: with fan_in 2 and 8 parts, the four
    bottom groups' tables and no other), and the sums, tokens, days and
    ledger are those of the level-by-level merge, bit for bit."""
    from spamnb.bayes import merging

    messages = labelled_messages(trees=[SAMPLE])
    spec = counting.counting_spec(SpamFilter(counts="log", length_norm=5.0))
    parts = [counting.count_messages(spec, [(m.data, m.is_spam) for m in messages[i:i + 6]], day=20000 + i,
                                     n_folds=calibrate.DEFAULT_FOLDS) for i in range(0, 48, 6)]
    for part in parts:
        part.digests, part.labels = bytes(part.digests), bytes(part.labels)
    made, make = [], merging.MergeTable

    def counted(cells):
        made.append(make(cells))
        return made[-1]

    monkeypatch.setattr(merging, "MergeTable", counted)
    got = counting.tree_reduce(iter(parts), 2)
    assert len(made) == 4
    monkeypatch.undo()
    want = counting.tree_levels(parts, 2, counting.merge_counts)
    assert same_tokens(got, want) and np.array_equal(got.last_seen, want.last_seen)
    for name in ("class_count", "dense", "fold_keys", "fold_values"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert got.digests == want.digests == b"".join(p.digests for p in parts)
    assert got.labels == want.labels == b"".join(p.labels for p in parts)


def test_the_merges_table_numbers_tokens_as_the_vocabulary_does():
    """The merge's running total (spamnb.bayes._merge.MergeTable, behind
    merge_counts) numbers every part's tokens, and keeps their hashes and
    strings, as a Vocabulary does, a hash of 0 (the hash index's empty slot)
    included."""
    from spamnb.bayes.vocabulary import Vocabulary

    messages = labelled_messages(trees=[SAMPLE])
    spec = counting.counting_spec(SpamFilter())
    parts = [counting.count_messages(spec, [(m.data, m.is_spam) for m in messages[i:i + 7]], day=20000)
             for i in range(0, len(messages), 7)]
    zero = counting.Counts(np.array([0, 7, 3], dtype=np.uint64), np.array([0, 1, 3, 6], dtype=np.uint64), b"abcdef",
                           np.zeros(2), np.zeros((2, 3)), np.zeros(3, dtype=np.int32))
    parts[3:3] = [zero, zero]
    vocabulary = Vocabulary()
    for part in parts:
        vocabulary.add(counting._Tokens(part))
    merged = counting.merge_counts(parts)
    blob, offsets = vocabulary.string_table()
    assert merged.n_features == vocabulary.n_features
    assert np.array_equal(merged.hashes, vocabulary.hashes())
    assert merged.strings == blob and np.array_equal(merged.offsets, np.frombuffer(offsets, dtype=np.uint64))


def test_the_merges_table_sums_as_the_dense_rows_do_past_its_growth():
    """MergeTable over parts large enough to grow its hash table and arrays
    several times: the model rows, days and fold entries are the dense sums
    (added in the parts' order), tokens numbered in order of first sight."""
    from spamnb.bayes._merge import MergeTable

    rng = np.random.default_rng(5)
    pool = rng.integers(1, 2**63, size=6000, dtype=np.uint64)
    cells, parts = 6, []
    for _ in range(5):
        hashes = rng.choice(pool, size=2500, replace=False)
        strings = [h.tobytes()[:int(h % 5)] for h in hashes]
        offsets = np.concatenate([[0], np.cumsum([len(x) for x in strings])]).astype(np.uint64)
        rows = rng.random((2, hashes.size))
        days = rng.integers(0, 100, hashes.size).astype(np.int32)
        folds = np.where(rng.random((hashes.size, cells)) < 0.3, rng.random((hashes.size, cells)), 0.0)
        token, cell = np.nonzero(folds)
        parts.append((hashes, offsets, b"".join(strings), rows, days, token * cells + cell, folds[token, cell],
                      folds, strings))
    table = MergeTable(cells)
    order, number = [], {}
    for hashes, offsets, blob, rows, days, keys, values, *_ in parts:
        table.add(hashes, offsets, blob, rows[0].copy(), rows[1].copy(), days, keys.astype(np.int64), values)
        for h in hashes.tolist():
            if h not in number:
                number[h] = len(order)
                order.append(h)
    n = len(order)
    want_rows, want_days, want_folds = np.zeros((2, n)), np.zeros(n, dtype=np.int32), np.zeros((n, cells))
    want_strings = [b""] * n
    for hashes, offsets, blob, rows, days, keys, values, folds, strings in parts:
        index = np.array([number[h] for h in hashes.tolist()])
        want_rows[:, index] += rows
        want_days[index] = np.maximum(want_days[index], days)
        want_folds[index] += folds
        for i, s in zip(index, strings):
            want_strings[i] = s
    assert table.n == n
    hashes, offsets, blob = (bytes(b) for b in table.take_tokens())
    assert np.frombuffer(hashes, dtype=np.uint64).tolist() == order
    assert blob == b"".join(want_strings)
    assert np.array_equal(np.frombuffer(offsets, dtype=np.uint64)[1:], np.cumsum([len(s) for s in want_strings]))
    rows, days = table.take_rows()
    assert np.array_equal(np.frombuffer(rows).reshape(2, n), want_rows)
    assert np.array_equal(np.frombuffer(days, dtype=np.int32), want_days)
    keys, values = table.take_fold_entries()
    token, cell = np.nonzero(want_folds)
    assert np.array_equal(np.frombuffer(keys, dtype=np.int64), token * cells + cell)
    assert np.array_equal(np.frombuffer(values), want_folds[token, cell])
    with pytest.raises(ValueError):
        MergeTable(cells).add(parts[0][0], parts[0][1], parts[0][2], parts[0][3][0].copy(), parts[0][3][1].copy(),
                              parts[0][4], parts[0][5][::-1].astype(np.int64), parts[0][6])


@pytest.mark.parametrize("counts", ["raw", "binary"])
def test_integer_counts_are_bit_identical_to_fit(counts):
    ref = reference(counts)
    for n_jobs, partition_size in ((1, 7), (2, 50), (1, 10_000)):
        got = pipeline.train([SAMPLE], spam_filter=SpamFilter(counts=counts, length_norm=0), n_jobs=n_jobs,
                           partition_size=partition_size)[0]
        assert_same_counts(ref, got)


@pytest.mark.parametrize("length_norm", [0.0, 50.0])
def test_log_counts_and_length_norm_agree_with_fit_to_rounding(length_norm):
    ref = reference("log", length_norm)
    got = pipeline.train([SAMPLE], spam_filter=SpamFilter(length_norm=length_norm), n_jobs=1, partition_size=7)[0]
    assert got.length_norm == length_norm
    assert_same_counts(ref, got, exact=False)
    # length_norm is applied per message: without it the counts are others
    if length_norm:
        plain = counting.Counts.from_filter(reference("log")).feature_count
        assert not np.allclose(counting.Counts.from_filter(got).feature_count, plain)


def test_merge_counts_adds_by_token_and_keeps_the_latest_day():
    spec = counting.counting_spec(SpamFilter(counts="raw", length_norm=0))
    messages = [(m.data, m.is_spam) for m in labelled_messages([SAMPLE])]
    whole = counting.count_messages(spec, messages, day=100)
    parts = [counting.count_messages(spec, messages[i:i + 40], day=100 + i) for i in range(0, len(messages), 40)]
    merged = counting.merge_counts(parts)
    assert same_tokens(whole, merged)
    assert np.array_equal(whole.feature_count, merged.feature_count)
    assert merged.class_count.tolist() == [200.0, 100.0]
    # a token's day is the last partition's that held it
    last = np.zeros(merged.n_features, dtype=np.int32)
    position = {h: i for i, h in enumerate(merged.hashes.tolist())}
    for part in parts:
        for h, day in zip(part.hashes.tolist(), part.last_seen.tolist()):
            last[position[h]] = max(last[position[h]], day)
    assert np.array_equal(merged.last_seen, last) and merged.last_seen.max() == 100 + 280
    assert counting.merge_counts(parts[:1]) is parts[0]
    assert counting.merge_counts([]).n_features == 0
    filtered = merged.to_filter(SpamFilter(counts="raw", length_norm=0))
    assert filtered.ages_.created == filtered.ages_.last_learn == 380
    assert np.array_equal(np.frombuffer(filtered.ages_.days(merged.n_features), dtype=np.int32), last)


def test_model_file_is_the_same_for_every_number_of_workers(tmp_path):
    paths = []
    for n_jobs in (1, 2, 3):
        path = tmp_path / f"j{n_jobs}.spamnb"
        pipeline.train([SAMPLE], n_jobs=n_jobs, partition_size=40)[0].save(path)
        paths.append(path.read_bytes())
    assert paths[0] == paths[1] == paths[2]


def _calibrated(counts, n_jobs, partition_size, length_norm=None):
    params = {} if length_norm is None else {"length_norm": length_norm}
    return pipeline.train([SAMPLE], spam_filter=SpamFilter(counts=counts, **params), n_jobs=n_jobs,
                          partition_size=partition_size, calibration={"target_fpr": 0.01})


@pytest.mark.slow
def test_train_calibrates_streaming_alike_for_every_number_of_workers():
    """The streaming calibration: the cutoffs of -j 1 and -j 2 (any partition
    size) are those of the held-out log-odds fold_log_odds computes from the
    corpus matrix over the same (hashed) folds; -j 1 counts as SpamFilter.fit."""
    from spamnb.estimator import calibrate

    messages = labelled_messages([SAMPLE])
    data, y = [m.data for m in messages], np.array([m.is_spam for m in messages])
    ref = SpamFilter().fit(data, y)
    k_folds = calibrate.DEFAULT_FOLDS
    fold = np.array([calibrate.fold_of(m) for m in data])
    scores = calibrate.fold_log_odds(ref.transform(data), y, [np.flatnonzero(fold == k) for k in range(k_folds)],
                                     float(ref.alpha), ref.prior, renormalise=float(ref.length_norm) or None)
    expected = calibrate.from_scores(scores[~y], scores[y], k_folds, target_fpr=0.01)
    one, cal_one = _calibrated("log", 1, planning.DEFAULT_PARTITION_SIZE)
    assert_same_counts(ref, one)                       # -j 1: the counts of fit, bit for bit
    for n_jobs, size in ((1, 40), (2, 40), (2, 7)):
        got, cal = _calibrated("log", n_jobs, size) if (n_jobs, size) != (1, 40) else (one, cal_one)
        assert cal.n_folds == k_folds and (cal.n_ham, cal.n_spam) == (int((~y).sum()), int(y.sum()))
        for field in ("spam_log_odds", "ham_log_odds", "expected_fpr", "expected_spam_missed", "expected_unsure"):
            assert getattr(cal, field) == pytest.approx(getattr(expected, field), rel=1e-9, abs=1e-9), field
    # integer counts (no length normalisation): the same sums whatever the partitions, the same cutoffs exactly
    assert (_calibrated("raw", 1, 40, 0.0)[1] == _calibrated("raw", 2, 7, 0.0)[1]
            == _calibrated("raw", 2, 64, 0.0)[1])
    # too little data: the defaults, no second reading
    _filter, few = pipeline.train([SAMPLE], n_jobs=2, partition_size=50,
                                  calibration={"target_fpr": 0.01, "min_ham": 10_000})
    assert few.expected_fpr is None and "too little data" in few.rule


# the first 300 random mboxes in the default run, all 1,500 with -m slow
@pytest.mark.parametrize("rounds", [300, pytest.param(1500, marks=pytest.mark.slow)])
def test_message_starts_cut_where_iter_mbox_cuts(rounds):
    rnd = random.Random(7)
    lines = [b"From a@b Mon Nov 23 10:40:20 2026\n", b"From here on\n", b"\n", b"\r\n", b"Subject: x\n",
             b"body text\n", b"From x  Sat Jan  3 01:05:34 1996 +0000\r\n", b"X" * (_MAX_LINE - 1) + b"\n",
             b"Y" * _MAX_LINE + b"\n", b"Z" * (2 * _MAX_LINE) + b"\n", b"From \n"]
    for _ in range(rounds):
        data = b"From s@x Mon Nov 23 10:40:20 2026\n" + b"".join(rnd.choice(lines) for _ in range(rnd.randint(0, 25)))
        starts = list(message_starts(data)) + [len(data)]
        pieces = [m for a, b in zip(starts, starts[1:]) for m in iter_mbox(io.BytesIO(data[a:b]))]
        assert pieces == list(iter_mbox(io.BytesIO(data)))
    assert list(message_starts(b"Subject: not an mbox\n")) == []


@pytest.mark.slow
def test_iter_mbox_over_bytes_cuts_as_the_line_loop(tmp_path):
    """An mbox in memory (io.BytesIO) is cut at message_starts, not line by
    line: the same messages, with long lines, CRLF, missing blank lines, an
    envelope line alone, a message cut at max_message_bytes, a stream read
    from the middle."""
    from spamnb.mail.mbox import _iter_mbox_lines, iter_mbox_range

    path = tmp_path / "box"
    rnd = random.Random(11)
    lines = [b"From a@b Mon Nov 23 10:40:20 2026\n", b"From here on\n", b"\n", b"\r\n", b"Subject: x\n",
             b"body text\n", b"From x  Sat Jan  3 01:05:34 1996 +0000\r\n", b"X" * (_MAX_LINE - 1) + b"\n",
             b"X" * _MAX_LINE + b"\n", b"X" * (_MAX_LINE + 1) + b"\n", b"From  \n", b"From"]
    for _ in range(1500):
        data = rnd.choice([b"From s@x Mon Nov 23 10:40:20 2026\n", b"", b"From x\n"]) + b"".join(
            rnd.choice(lines) for _ in range(rnd.randint(0, 25)))
        for limit in (1 << 26, 100):
            assert list(iter_mbox(io.BytesIO(data), limit)) == list(_iter_mbox_lines(io.BytesIO(data), limit))
        stream = io.BytesIO(b"head" + data)
        assert stream.read(4) == b"head"
        expected = list(_iter_mbox_lines(io.BytesIO(data), 1 << 26))
        assert list(iter_mbox(stream)) == expected
        assert stream.read() == b""
        if rnd.random() < 0.2:   # a file (mapped), and shards read whole
            path.write_bytes(data)
            for limit in (1 << 26, 100):
                with open(path, "rb") as f:
                    assert list(iter_mbox(f, limit)) == list(_iter_mbox_lines(io.BytesIO(data), limit))
            starts = list(message_starts(data)) + [len(data)]
            if data.startswith(b"From "):   # shards are cut from an mbox
                assert [m for a, b in zip(starts, starts[1:]) for m in iter_mbox_range(path, a, b)] == expected


def write_mbox(path, messages):
    with open(path, "wb") as f:
        for data in messages:
            if not data.startswith(b"From "):
                f.write(b"From sender@example.com Mon Nov 23 10:00:00 2026\n")
            f.write(data.rstrip(b"\n") + b"\n\n")


def test_mbox_files_are_cut_into_shards_with_the_same_counts(tmp_path, monkeypatch):
    messages = labelled_messages([SAMPLE])
    spam, ham = tmp_path / "spam.mbox", tmp_path / "ham.mbox"
    write_mbox(spam, [m.data for m in messages if m.is_spam])
    write_mbox(ham, [m.data for m in messages if not m.is_spam] + [b"not mail at all\n"])
    monkeypatch.setattr(planning, "SHARD_ABOVE", 0)   # every mbox is cut (else only those over 1 MiB)
    pieces = list(planning.plan_training(spam=[spam], ham=[ham], partition_size=30))
    assert sum(p.kind == "shard" for p in pieces) >= 9   # 100 spam and 201 ham in shards of 30
    ref_report, report = CorpusReport(), CorpusReport()
    ref = reference("raw", spam=[spam], ham=[ham], report=ref_report)
    got = pipeline.train(spam=[spam], ham=[ham], spam_filter=SpamFilter(counts="raw", length_norm=0), n_jobs=2, partition_size=30,
                       report=report)[0]
    assert_same_counts(ref, got)
    assert got.class_count_ == (200.0, 100.0)
    assert report.read == ref_report.read == 300 and report.skipped == ref_report.skipped == {"not mail": 1}


def write_message(path, subject, body="hello"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(f"From: a@example.com\nSubject: {subject}\n\n{body} {subject}\n".encode())


def test_maildir_rules_are_those_of_the_one_process_reader(tmp_path):
    """Maildir++ folders, tmp/, the maildirfolder marker, trash, spam folders
    inside a --ham path, hidden files, non-mail files: read and labelled as
    ``spamnb train`` without -j reads them."""
    mail = tmp_path / "Maildir"
    for folder in ("cur", "new", "tmp"):
        (mail / folder).mkdir(parents=True)
    write_message(mail / "cur" / "1:2,S", "inbox one")
    write_message(mail / "new" / "2", "inbox two")
    write_message(mail / "tmp" / "3", "being delivered")
    (mail / "maildirfolder").write_bytes(b"")
    (mail / "dovecot.index").write_bytes(b"\x00\x01 index")
    write_message(mail / ".INBOX.Junk" / "cur" / "4", "junk one", "buy now")
    (mail / ".INBOX.Junk" / "new").mkdir()
    write_message(mail / ".Trash" / "cur" / "5", "deleted")
    (mail / ".Trash" / "new").mkdir()
    write_message(mail / ".Archive" / "cur" / "6", "archived")
    (mail / ".Archive" / "new").mkdir()
    tree = tmp_path / "tree"
    write_message(tree / "Spam" / "a", "tree spam", "cheap pills")
    write_message(tree / "work" / "b", "tree ham")
    write_message(tree / "work" / ".hidden", "hidden")
    (tree / "work" / "c").write_bytes(b"no header here\n")
    for sources in ({"trees": [mail, tree]}, {"ham": [mail], "spam": [tree / "Spam"]}):
        ref_report, report = CorpusReport(), CorpusReport()
        ref = reference("raw", report=ref_report, **sources)
        got = pipeline.train(spam_filter=SpamFilter(counts="raw", length_norm=0), n_jobs=2, partition_size=2, report=report,
                           **sources)[0]
        assert_same_counts(ref, got)
        assert report.read == ref_report.read and report.skipped == ref_report.skipped
        assert report.examples == ref_report.examples
    assert got.class_count_ == (3.0, 1.0)   # the --ham Maildir's .INBOX.Junk is left out


def test_version_2_tokenizer_counts_as_fit():
    from spamnb.mail.tokenizer import Tokenizer

    ref_filter = SpamFilter(tokenizer=Tokenizer(version=2), counts="raw", length_norm=0)
    messages = labelled_messages([SAMPLE])
    ref = ref_filter.fit([m.data for m in messages], [m.is_spam for m in messages])
    got = pipeline.train([SAMPLE], spam_filter=SpamFilter(tokenizer=Tokenizer(version=2), counts="raw", length_norm=0), n_jobs=2,
                       partition_size=60)[0]
    assert got.tokenizer_.settings["version"] == 2
    assert_same_counts(ref, got)
    assert not same_tokens(counting.Counts.from_filter(got), counting.Counts.from_filter(reference("raw")))


def test_a_model_replaced_during_the_job_fails_it(tmp_path):
    from spamnb.persistence.store import ModelError

    model = tmp_path / "model.spamnb"
    reference().save(model)
    identity = batch.file_identity(model)
    batch._MODELS.clear()
    os.utime(model, ns=(1, 1))   # another file now (as after an atomic replace)
    with pytest.raises(ModelError, match="replaced"):
        batch.worker_model(str(model), identity)


def run(args, cwd, stdin=b""):
    env = dict(os.environ, SPAMNB_HOME=str(cwd), PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))
    env.pop("SPAMNB_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "spamnb", *map(str, args)], input=stdin, capture_output=True,
                          env=env, cwd=cwd, timeout=300)


@pytest.mark.slow
def test_cli_train_and_batch_classify_with_jobs(tmp_path):
    """train -j 2 (raw counts, no length normalisation: whole numbers) writes the model of train -j 1, byte for byte,
    cutoffs calibrated alike; classify --batch -j 2 writes the lines of the
    one-process batch, error lines and exit code included."""
    mbox = tmp_path / "inbox.mbox"
    write_mbox(mbox, [p.read_bytes() for p in sorted((SAMPLE / "spam").iterdir())[:30]])
    missing = tmp_path / "missing"
    outputs = {}
    for jobs in ("1", "2"):
        model = tmp_path / f"j{jobs}.spamnb"
        proc = run(["train", "-q", "--counts", "raw", "--length-norm", "0", "-j", jobs, "--partition-size", "64", "-m", model, SAMPLE],
                   tmp_path)
        assert proc.returncode == 0, proc.stderr.decode()
        proc = run(["classify", "--batch", "-j", jobs, "--partition-size", "16", "-m", model, SAMPLE / "spam",
                    missing, mbox, SAMPLE / "easy_ham"], tmp_path)
        assert proc.returncode == 3, proc.stderr.decode()
        outputs[jobs] = (model.read_bytes(), proc.stdout, proc.stderr)
    assert outputs["1"] == outputs["2"]
    lines = outputs["2"][1].decode().splitlines()
    n_files = len(os.listdir(SAMPLE / "spam")) + len(os.listdir(SAMPLE / "easy_ham"))
    assert len(lines) == n_files + 1 + 30 and lines[0].startswith(str(SAMPLE / "spam") + os.sep)
    assert f"{missing}\terror\t" in outputs["2"][1].decode() and f"{mbox}#29\t" in outputs["2"][1].decode()
    # -j 0 (every core) writes the model of -j 2
    proc = run(["train", "-q", "--counts", "raw", "--length-norm", "0", "-j", "0", "--partition-size", "64", "-m", tmp_path / "j0",
                SAMPLE], tmp_path)
    assert proc.returncode == 0 and (tmp_path / "j0").read_bytes() == outputs["1"][0]


@pytest.fixture(scope="module")
def batch_model(tmp_path_factory):
    """The model the batch tests classify with (``spamnb train -q -j 1 --target-fpr 0``
    of the sample), trained once a module: they only read it."""
    folder = tmp_path_factory.mktemp("batch-model")
    model = folder / "model.spamnb"
    assert run(["train", "-q", "-j", "1", "--target-fpr", "0", "-m", model, SAMPLE], folder).returncode == 0
    return model


def _batch_env(cwd):
    env = dict(os.environ, SPAMNB_HOME=str(cwd), PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))
    env.pop("SPAMNB_DEBUG", None)
    return env


def test_batch_default_jobs_on_a_path_list_writes_the_one_process_lines(tmp_path, batch_model):
    """classify --batch with its default -j (every core) reading a list of
    paths from a file on stdin (full partitions go to the workers) writes the
    lines of -j 1, in order, error line and exit code included."""
    model = batch_model
    paths = sorted((SAMPLE / "spam").iterdir()) + [tmp_path / "missing"] + sorted((SAMPLE / "easy_ham").iterdir())
    listing = tmp_path / "paths"
    listing.write_text("".join(f"{p}\n" for p in paths))
    outputs = {}
    for jobs in (["-j", "1"], []):
        with open(listing, "rb") as stdin:
            proc = subprocess.run([sys.executable, "-m", "spamnb", "classify", "--batch", *jobs, "--partition-size",
                                   "7", "-m", str(model)], stdin=stdin, capture_output=True, env=_batch_env(tmp_path),
                                  timeout=300)
        assert proc.returncode == 3, proc.stderr.decode()
        outputs[len(jobs)] = proc.stdout
    assert outputs[0] == outputs[2]
    lines = outputs[0].decode().splitlines()
    assert [line.split("\t")[0] for line in lines] == [str(p) for p in paths]


@pytest.mark.parametrize("jobs", [[], ["-j", "2"]])
def test_batch_with_workers_answers_a_writer_who_waits(tmp_path, batch_model, jobs):
    """A program that writes some paths to classify --batch and waits for their
    lines before it writes more gets them, with workers too (-j 2, the
    default): paths read are answered once nothing more is ready, however
    full the partition."""
    import select

    model = batch_model
    paths = sorted((SAMPLE / "spam").iterdir())[:23]
    proc = subprocess.Popen([sys.executable, "-m", "spamnb", "classify", "--batch", *jobs, "--partition-size", "4",
                             "-m", str(model)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=_batch_env(tmp_path),
                            bufsize=0)   # unbuffered: select sees every line not read yet
    try:
        for group in (paths[:10], paths[10:11], paths[11:]):
            proc.stdin.write("".join(f"{p}\n" for p in group).encode())
            proc.stdin.flush()
            for p in group:   # stdin still open: the answers must come now
                assert select.select([proc.stdout], [], [], 60)[0], f"no answer for {p} within 60 s"
                assert proc.stdout.readline().decode().split("\t")[0] == str(p)
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0


def _children(pid):
    """The pids of the live processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers die with their parent on Linux")
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_a_killed_batch_leaves_no_worker_holding_its_output(tmp_path, batch_model, signal_name):
    """classify --batch killed while its workers are up (a signal the parent
    cannot clean up after) takes them with it: its output reaches its end
    at once, for a reader that waits for it (the workers held the pipe open
    for ever before)."""
    import select
    import signal

    model = batch_model
    paths = sorted((SAMPLE / "easy_ham").iterdir())[:60]
    proc = subprocess.Popen([sys.executable, "-m", "spamnb", "classify", "--batch", "-j", "2", "--partition-size", "3",
                             "-m", str(model)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=_batch_env(tmp_path), bufsize=0)
    workers = []
    try:
        proc.stdin.write("".join(f"{p}\n" for p in paths).encode())
        proc.stdin.flush()
        for _ in paths:   # all answered; stdin still open: the batch waits for more, its workers up
            assert select.select([proc.stdout], [], [], 60)[0]
            assert proc.stdout.readline()
        workers = _children(proc.pid)
        assert workers, "the batch started no workers"
        proc.send_signal(getattr(signal, signal_name))
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:   # the end of the output, once no process holds the pipe
            if select.select([proc.stdout], [], [], 0.2)[0] and not proc.stdout.read(65536):
                break
        else:
            pytest.fail(f"the output was still open 10 s after {signal_name}: workers "
                        f"{[w for w in workers if os.path.exists(f'/proc/{w}')]} hold it")
    finally:
        for pid in workers + _children(proc.pid):   # none left behind by a failure either
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        proc.kill()
        proc.stdin.close()


def test_batch_pieces_are_plan_scorings(tmp_path):
    """classify --batch -j N plans its paths with one stat each (batch._pieces):
    the pieces of planning.plan_scoring, a large mbox in shards included."""
    big = tmp_path / "big.mbox"
    body = b"word " * 2000 + b"\n"
    write_mbox(big, [b"From: a@example.com\nSubject: %d\n\n" % i + body for i in range(1200)])
    assert big.stat().st_size > planning.SHARD_ABOVE
    large_plain = tmp_path / "large"
    large_plain.write_bytes(b"Subject: x\n\n" + body * 200)
    small = tmp_path / "small"
    small.write_bytes(b"Subject: x\n\nhello\n")
    paths = [str(p) for p in (SAMPLE / "spam", small, tmp_path / "missing", big, large_plain, tmp_path)]
    pieces = list(batch._pieces(paths))
    assert pieces == list(planning.plan_scoring(paths))
    assert sum(p.kind == "shard" for p in pieces) >= 2


def test_batch_workers_do_not_import_numpy(tmp_path):
    """classify --batch -j 2 scores without numpy (its import and thread pool
    would cost every batch ~0.1 s): the parent, whose imports the forked
    workers share, has not imported it when the batch is done."""
    model = tmp_path / "m.spamnb"
    proc = run(["train", "-q", "--target-fpr", "0", "--word-pairs", "0", "-m", model, SAMPLE], tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    code = ("import runpy, sys\n"
            f"sys.argv = ['spamnb', 'classify', '--batch', '-j', '2', '--partition-size', '20', '-m', {str(model)!r}, "
            f"*{sorted(str(p) for p in (SAMPLE / 'spam').iterdir())!r}]\n"   # 5 partitions: two workers
            "try:\n    runpy.run_module('spamnb', run_name='__main__')\nexcept SystemExit as exc:\n    assert not exc.code\n"
            "print('numpy' in sys.modules, file=sys.stderr)\n")
    env = dict(os.environ, SPAMNB_HOME=str(tmp_path), PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    assert len(proc.stdout.decode().splitlines()) == len(os.listdir(SAMPLE / "spam"))
    assert proc.stderr.decode().split() == ["False"]


def test_cli_train_jobs_with_default_counts_is_count_identical(tmp_path):
    for jobs in ("1", "2"):
        proc = run(["train", "-q", "--target-fpr", "0", "-j", jobs, "-m", tmp_path / f"j{jobs}", SAMPLE], tmp_path)
        assert proc.returncode == 0, proc.stderr.decode()
    one, two = SpamFilter.load(tmp_path / "j1"), SpamFilter.load(tmp_path / "j2")
    assert_same_counts(one, two, exact=False)


@pytest.mark.slow
def test_cli_errors_are_one_line(tmp_path):
    bad = tmp_path / "corpus" / "spam"
    bad.mkdir(parents=True)
    (bad / "a").write_bytes(b"this is not mail\n")
    proc = run(["train", "-j", "2", "--strict", "-m", tmp_path / "m", tmp_path / "corpus"], tmp_path)
    assert proc.returncode == 3 and len(proc.stderr.decode().strip().splitlines()) == 1
    assert "not mail" in proc.stderr.decode()
    proc = run(["train", "-j", "-1", tmp_path / "corpus"], tmp_path)
    assert proc.returncode == 64
    proc = run(["train", "-j", "2", "--feature-weight", "1", SAMPLE], tmp_path)
    assert proc.returncode == 64 and "-j 1" in proc.stderr.decode()
    # -j not given: every core, but the message features are counted in this process
    proc = run(["train", "-q", "--feature-weight", "1", "-m", tmp_path / "features", SAMPLE], tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert SpamFilter.load(tmp_path / "features").features_ is not None


@pytest.mark.slow
def test_shared_corpus_exact_with_two_workers():
    root, _full = corpus_root("spamassassin")
    ref = reference("raw", trees=[root])
    got = pipeline.train([root], spam_filter=SpamFilter(counts="raw", length_norm=0), n_jobs=2)[0]
    assert_same_counts(ref, got)


def test_word_pairs_are_chosen_by_the_held_out_figures(tmp_path):
    """train(word_pairs=2) trains both variants and keeps the one the rule
    favours; the model kept is the one training that variant alone gives
    (pairs with their text budget: ``tokenizer.with_pairs``)."""
    from spamnb.mail.tokenizer import with_pairs

    options = {"target_fpr": 0.01}
    plain, plain_cal = pipeline.train([SAMPLE], n_jobs=2, partition_size=40, calibration=options)
    paired, paired_cal = pipeline.train([SAMPLE], n_jobs=2, partition_size=40, calibration=options,
                                               spam_filter=SpamFilter(tokenizer=with_pairs(2)))
    chosen, cal = pipeline.train([SAMPLE], n_jobs=2, partition_size=40, calibration=options, word_pairs=2)
    window, missed, missed_pairs, error, error_pairs = cal.word_pairs
    assert (missed, missed_pairs) == (plain_cal.expected_spam_missed, paired_cal.expected_spam_missed)
    expected = paired if calibrate.prefer_pairs(missed, missed_pairs, error, error_pairs) else plain
    assert window == expected.tokenizer_.word_pairs == chosen.tokenizer_.word_pairs
    assert chosen.tokenizer_.settings == expected.tokenizer_.settings
    assert cal._replace(word_pairs=None) == (paired_cal if window else plain_cal)
    chosen.save(tmp_path / "chosen")
    expected.save(tmp_path / "expected")
    assert (tmp_path / "chosen").read_bytes() == (tmp_path / "expected").read_bytes()
    # nothing to choose: no calibration, too little mail for one, or pairs asked for already
    assert pipeline.train([SAMPLE], n_jobs=1, word_pairs=2)[1] is None
    few = pipeline.train([SAMPLE], n_jobs=1, calibration={"target_fpr": 0.001}, word_pairs=2)[1]
    assert few.word_pairs is None and few.expected_fpr is None
    with pytest.raises(ValueError, match="word_pairs"):
        pipeline.train([SAMPLE], word_pairs=1)


@pytest.mark.parametrize("figures, kept", [
    ((0.10, 0.08, 0.05, 0.04), True),      # a fifth fewer spam missed, ranks better
    ((0.10, 0.081, 0.05, 0.04), False),    # not a fifth fewer
    ((0.10, 0.05, 0.05, 0.06), False),     # fewer missed but ranks worse
    ((0.0, 0.0, 0.0, 0.0), False),         # nothing to gain
])
def test_prefer_pairs_rule(figures, kept):
    assert calibrate.prefer_pairs(*figures) is kept


def test_word_pairs_are_not_tried_on_a_large_corpus(monkeypatch):
    from spamnb.estimator.calibrate import describe

    monkeypatch.setattr(calibrate, "PAIRS_MAX_MESSAGES", 299)     # the sample has 300 messages
    chosen, cal = pipeline.train([SAMPLE], n_jobs=1, calibration={"target_fpr": 0.01}, word_pairs=2)
    assert cal.word_pairs == (0, None, None, None, None) and chosen.tokenizer_.word_pairs == 0
    assert "word pairs: off: not tried on more than 299 messages" in describe(cal)


def _counts_arrays(counts):
    return [counts.hashes, counts.offsets, np.frombuffer(counts.strings, dtype=np.uint8), counts.class_count,
            counts.dense, counts.last_seen, *((counts.fold_keys, counts.fold_values) if counts.fold_keys is not None
                                              else ())]


@pytest.mark.parametrize("params", [{}, {"counts": "raw", "length_norm": 0.0}])
def test_count_variants_counts_each_variant_as_alone(params):
    """One pass under a tokenizer and its with_pairs (each message parsed
    once) gives each variant the counts and the spill bytes count_messages
    gives it alone; past ``limit`` messages the second is dropped."""
    from spamnb.mail.tokenizer import with_pairs

    pairs = [(m.data, m.is_spam) for m in labelled_messages([SAMPLE])]
    specs = [counting.counting_spec(SpamFilter(**params)),
             counting.counting_spec(SpamFilter(tokenizer=with_pairs(2), **params))]
    spills = [io.BytesIO(), io.BytesIO()]
    together = counting.count_variants(specs, iter(pairs), day=100, n_folds=calibrate.DEFAULT_FOLDS, spills=spills)
    for spec, counts, spilled in zip(specs, together, spills):
        alone_spill = io.BytesIO()
        alone = counting.count_messages(spec, iter(pairs), day=100, n_folds=calibrate.DEFAULT_FOLDS,
                                        spill=alone_spill)
        for a, b in zip(_counts_arrays(counts), _counts_arrays(alone), strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert spilled.getvalue() == alone_spill.getvalue()
    assert together[1].n_features > together[0].n_features   # the pairs are there
    first, dropped = counting.count_variants(specs, iter(pairs), day=100, limit=len(pairs) - 1)
    assert dropped is None and np.array_equal(first.dense, together[0].dense)
    assert counting.count_variants(specs, iter(pairs), day=100, limit=len(pairs))[1] is not None


def _fold_spill_bytes(spill):
    return [(spill.fold(k)[0].tobytes(), spill.fold(k)[1].tobytes(), spill.fold(k)[2].tobytes(),
             spill.fold(k)[3].tobytes()) for k in range(spill.n_folds)]


@pytest.mark.parametrize("params", [{}, {"counts": "raw", "length_norm": 0.0}])
def test_count_variants_by_partitions_counts_each_variant_as_alone(params):
    """By partitions (train -j 1: fan_in, fold spills), both variants counted
    in one compiled call a message over one hash index give each variant
    the tokens, strings and rows of its partitions counted alone and merged
    by TreeReduce's tree, and the fold spills (feature numbers) of counting
    it alone, message by message; past ``limit`` the second is dropped."""
    from spamnb.mail.tokenizer import with_pairs

    pairs = [(m.data, m.is_spam) for m in labelled_messages([SAMPLE])]
    parts = [pairs[i:i + 37] for i in range(0, len(pairs), 37)]
    specs = [counting.counting_spec(SpamFilter(**params)),
             counting.counting_spec(SpamFilter(tokenizer=with_pairs(2), **params))]
    folds = calibrate.DEFAULT_FOLDS
    with calibrate.FoldSpill(folds) as s0, calibrate.FoldSpill(folds) as s1:
        together = counting.count_variants(specs, iter(parts), day=100, n_folds=folds, fold_spills=[s0, s1],
                                           fan_in=3)
        spilled = [_fold_spill_bytes(s0), _fold_spill_bytes(s1)]
    for spec, counts, spill_bytes in zip(specs, together, spilled):
        merged = counting.tree_reduce([counting.count_messages(spec, iter(part), day=100) for part in parts], 3)
        # the strings were written out a partition at a time (StringSpill), read back here whole
        assert counts.strings is None and counts.offsets is None and counts.spilled.n == counts.n_features
        counts.load_strings()
        for a, b in zip(_counts_arrays(counts), _counts_arrays(merged), strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        with calibrate.FoldSpill(folds) as alone_spill:
            counting.count_variants([spec], iter(pairs), day=100, n_folds=folds, fold_spills=[alone_spill])
            assert spill_bytes == _fold_spill_bytes(alone_spill)
    assert together[1].n_features > together[0].n_features   # the pairs are there
    first, dropped = counting.count_variants(specs, iter(parts), day=100, limit=len(pairs) - 1, fan_in=3)
    assert dropped is None and np.array_equal(first.dense, together[0].dense)
    assert counting.count_variants(specs, iter(parts), day=100, limit=len(pairs), fan_in=3)[1] is not None


def test_counts_with_their_strings_written_out_save_the_model_of_the_strings_held(tmp_path, monkeypatch):
    """train -j 1's counts hold their strings in a file (StringSpill, a
    partition's new strings appended at a time): the model saved from them
    (read back a piece at a time, pieces smaller than a string here) is the
    model of the same counts with the strings in memory, byte for byte, and
    of the filter made of them."""
    from spamnb.mail.tokenizer import with_pairs

    pairs = [(m.data, m.is_spam) for m in labelled_messages([SAMPLE])]
    parts = [pairs[i:i + 23] for i in range(0, len(pairs), 23)]
    spec = counting.counting_spec(SpamFilter(tokenizer=with_pairs(2)))
    monkeypatch.setattr(counting.StringSpill, "CHUNK", 7)
    files = []
    for how in ("spilled", "loaded", "filter"):
        counts, = counting.count_variants([spec], iter(parts), day=100, fan_in=3)
        assert counts.strings is None and counts.spilled.n == counts.n_features > 1000
        if how == "spilled":
            assert len(list(counts.spilled.pieces("strings"))) == -(-counts.spilled.size // 7)
        else:
            counts.load_strings()
            assert counts.spilled is None and len(counts.offsets) == counts.n_features + 1
        if how == "filter":
            counts.to_filter(SpamFilter(tokenizer=with_pairs(2)), consume=True).save(tmp_path / how)
        else:
            SpamFilter(tokenizer=with_pairs(2)).save_counts(counts, tmp_path / how)
        files.append((tmp_path / how).read_bytes())
    assert files[0] == files[1] == files[2]


def test_variant_counter_numbers_each_variant_in_its_own_order():
    """The shared hash index: a token met first by the second variant is numbered
    there first; each variant's hashes, strings and rows are its own."""
    from spamnb.bayes.token_kernels import COUNTS_RAW, VariantCounter
    from spamnb.mail.tokenizer import Tokenizer

    tok = Tokenizer()
    a, b = tok.stream(b"Subject: x\n\nalpha beta beta"), tok.stream(b"Subject: x\n\ngamma alpha")
    counter = VariantCounter([COUNTS_RAW, COUNTS_RAW], [0.0, 0.0])
    first, second = counter.count((a, b), True)
    assert list(first) == list(range(len(a.tokens()) - 1)) + [len(a.tokens()) - 2]
    assert counter.n_features_of(0) == len(set(a.tokens())) and counter.n_features_of(1) == len(b.tokens())
    counter.count((b,), False)   # the second variant dropped (count_variants' limit): the first only
    assert counter.n_features_of(0) == len(set(a.tokens()) | set(b.tokens()))
    for v, tokens in ((0, list(dict.fromkeys(a.tokens() + b.tokens()))), (1, b.tokens())):
        blob, offsets = counter.strings(v)
        got = [bytes(blob[offsets[i]:offsets[i + 1]]).decode() for i in range(len(offsets) - 1)]
        assert got == tokens
        from spamnb.mail.tokenizer import hash_token

        assert list(counter.hashes(v)) == [hash_token(t) for t in tokens]
    touched, ham, spam = counter.partition(0)
    assert sum(spam) == len(a.tokens()) and sum(ham) == len(b.tokens())
    del touched, ham, spam
    counter.clear_partition(0)
    assert [len(x) for x in counter.partition(0)] == [0, 0, 0]
    counter.release()
    with pytest.raises(ValueError):
        counter.hashes(0)


def test_variant_counter_keeps_every_token_as_its_index_grows():
    """The hash index's slots doubled many times (made again from its entries):
    every token of 40 messages of 5,000 found again with its number, each
    variant's hashes in the order of first sight; a hash 0 (no token's) is
    new each time, as the vocabulary has it."""
    from array import array

    from spamnb.bayes.token_kernels import COUNTS_RAW, VariantCounter

    class Stream:   # a token stream as count() reads it: its hashes, and its new tokens' strings (none here)
        def __init__(self, hashes):
            self.hashes, self.pairs_start = array("Q", hashes), -1

        def write_tokens(self, positions, count, blob, offsets):
            offsets.extend([len(blob)] * count)

    rng = np.random.default_rng(5)
    pool = rng.integers(1, 2 ** 63, size=120_000, dtype=np.uint64)
    counter = VariantCounter([COUNTS_RAW, COUNTS_RAW], [0.0, 0.0])
    seen = [{}, {}]
    for m in range(40):
        streams = [Stream(pool[rng.integers(0, pool.size, 5000)].tolist()) for _ in range(2)]
        numbers = counter.count(streams, m % 2 == 0)
        for v in range(2):
            for h, i in zip(streams[v].hashes, numbers[v]):
                assert seen[v].setdefault(h, len(seen[v])) == i
        counter.clear_partition(0)
        counter.clear_partition(1)
    for v in range(2):
        assert list(counter.hashes(v)) == list(seen[v]) and counter.n_features_of(v) > 60_000
    before = counter.n_features_of(0)
    numbers = counter.count([Stream([0, int(pool[0]), 0])], True)
    assert list(numbers[0]) == [before, seen[0][int(pool[0])], before + 1]


def test_variant_counter_tells_apart_hashes_whose_slot_and_top_bits_agree():
    """A slot holds the hash's top bits above the entry's number: hashes that
    share a slot and those bits (but differ between them), that share the
    slot only, and hashes with the top bit set are each their own token,
    found again with their number as the slots double."""
    from array import array

    from spamnb.bayes.token_kernels import COUNTS_RAW, VariantCounter

    class Stream:
        def __init__(self, hashes):
            self.hashes, self.pairs_start = array("Q", hashes), -1

        def write_tokens(self, positions, count, blob, offsets):
            offsets.extend([len(blob)] * count)

    low, top = (1 << 20) - 1, ((1 << 32) - 1) << 32
    hashes = []
    for k in range(1, 400):
        base = (k * 0x9E3779B97F4A7C15) & ~((1 << 64) - 1 - low - top) & ((1 << 64) - 1)
        hashes += [base | (m << 20) for m in range(1, 6)]                  # one slot, one top: 5 tokens
        hashes += [(base & ~top) | (m << 59) | (1 << 63) for m in range(4)]   # one slot, top bits apart
    counter = VariantCounter([COUNTS_RAW], [0.0])
    seen = {}
    for rnd in range(3):
        for at in range(0, len(hashes), 500):
            numbers = counter.count([Stream(hashes[at:at + 500])], rnd % 2 == 0)
            for h, i in zip(hashes[at:at + 500], numbers[0]):
                assert seen.setdefault(h, len(seen)) == i
        counter.clear_partition(0)
    assert len(seen) == len(set(hashes)) == counter.n_features_of(0)
    assert list(counter.hashes(0)) == list(seen)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_train_variants_in_one_pass_give_what_each_alone_gives(tmp_path, n_jobs):
    """train's variants (pipeline._train_variants) are counted in one pass; each
    variant's model file, cutoffs and held-out scores are those it gives
    alone, with one process or with workers (as many as -j 1 and
    -j 2 give alone)."""
    from spamnb.mail.tokenizer import with_pairs

    options = dict(n_jobs=n_jobs, partition_size=40, calibration={"target_fpr": 0.01})
    filters = [SpamFilter(), SpamFilter(tokenizer=with_pairs(2))]
    together = list(pipeline._train_variants(filters, [SAMPLE], **options))
    for i, (fitted, cal, scores) in enumerate(together):
        alone, alone_cal, alone_scores = next(iter(pipeline._train_variants(
            [SpamFilter(tokenizer=filters[i].tokenizer_)], [SAMPLE], **options)))
        assert cal == alone_cal
        assert all(np.array_equal(a, b) for a, b in zip(scores, alone_scores, strict=True))
        fitted.save(tmp_path / f"together-{i}")
        alone.save(tmp_path / f"alone-{i}")
        assert (tmp_path / f"together-{i}").read_bytes() == (tmp_path / f"alone-{i}").read_bytes()
    filters = [SpamFilter(), SpamFilter(tokenizer=with_pairs(2))]
    first, dropped = pipeline._train_variants(filters, [SAMPLE], limit=10, **options)
    assert dropped is None and first[1] == together[0][1]


@pytest.mark.parametrize("transform", [0, 1, 2])
@pytest.mark.parametrize("length", [0.0, 3.0])
def test_add_counts_twice_adds_what_two_add_counts_add(transform, length):
    """The counting pass adds a message to its class's row and its fold's in
    one call (token_kernels.add_counts_twice): the values two add_counts add, bit for
    bit; an index out of range of either row changes nothing."""
    from array import array

    from spamnb.bayes import token_kernels

    idx = array("i", [3, 1, 3, 0, 3, 1, 4])
    first, second = array("d", [0.5, 0.0, 2.25, 1e-3, 7.0]), array("d", [1.5] * 6)
    want_first, want_second = array("d", first), array("d", second)
    token_kernels.add_counts(idx, want_first, transform, 1.0, length)
    token_kernels.add_counts(idx, want_second, transform, 1.0, length)
    assert token_kernels.add_counts_twice(idx, first, second, transform, length) == 4
    assert first == want_first and second == want_second
    with pytest.raises(ValueError):
        token_kernels.add_counts_twice(array("i", [5]), second, first, transform, length)
    assert first == want_first and second == want_second


@pytest.mark.parametrize("transform", [0, 1, 2])
@pytest.mark.parametrize("length", [0.0, 3.0])
def test_a_partitions_compact_rows_are_what_add_counts_adds(transform, length):
    """spamnb train -j 1 sums a partition into rows as long as its own tokens
    (VariantCounter.partition: token i at its local place, new ones numbered
    as met and listed in touched); scattered back, the rows are the ones
    add_counts makes in rows as long as the vocabulary, bit for bit, and the
    tree adds them as it adds those (RowTree.add_compact)."""
    from array import array

    from spamnb.bayes import token_kernels
    from spamnb.mail.tokenizer import Tokenizer

    tok = Tokenizer()
    messages = [(tok.stream(m.data), m.is_spam) for m in labelled_messages([SAMPLE])][:40]
    counter = token_kernels.VariantCounter([transform], [length])
    numbered = []
    for stream, spam in messages:
        (idx,) = counter.count((stream,), spam)
        numbered.append((array("i", idx), spam))
    n = counter.n_features_of(0)
    dense = [array("d", bytes(8 * n)), array("d", bytes(8 * n))]
    for idx, spam in numbered:
        token_kernels.add_counts(idx, dense[spam], transform, 1.0, length)
    touched, ham, spam_row = counter.partition(0)
    touched, compact = np.array(touched), [np.array(ham), np.array(spam_row)]
    counter.release()
    assert sorted(touched) == sorted({i for idx, _ in numbered for i in idx})
    for c in range(2):
        scattered = np.zeros(n)
        scattered[touched] = compact[c]
        assert np.array_equal(scattered, np.asarray(dense[c]))
    trees = counting.RowTree(3), counting.RowTree(3)
    for _ in range(4):
        trees[0].add([np.asarray(row) for row in dense], n)
        trees[1].add_compact(compact, touched, n)
    assert np.array_equal(trees[0].result(), trees[1].result())
