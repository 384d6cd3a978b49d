"""``spamnb train -j N``'s parent adds the workers' partitions as ``-j 1`` adds
its own (training/planning.train_on_workers): the tokens numbered by a merge
of tokens alone (``MergeTable(rows=False)``, ``add(index_out=)``), the rows
summed in RowTree's tree compiled (``RowLevels``), each message's token
indices written to ``-j 1``'s fold files (``FoldSpill.write_many``), and
``-j 1``'s held-out pass: no fold models are built (those are Dask's), and no
pass keys the corpus before the workers count it (the copies of an earlier
partition's messages are taken out of a partition's counts in the parent)."""

from array import array
from pathlib import Path

import numpy as np
import pytest

from spamnb.bayes.merging import MergeTable, RowLevels
from spamnb.estimator import calibrate
from spamnb.estimator.counting import RowTree
from spamnb.model.spam_filter import SpamFilter
from spamnb.training import pipeline
from spamnb.training.corpus import CorpusReport

SAMPLE = Path(__file__).resolve().parents[1] / "corpora"


@pytest.mark.parametrize("fan_in", [2, 3, 8])
def test_row_levels_sum_as_row_tree_bit_for_bit(fan_in):
    """Items of random widths and columns (values whose sums round): the
    compiled tree's result is RowTree's, byte for byte, whatever the number
    of items (full groups, short ones, one, none)."""
    rng = np.random.default_rng(fan_in)
    for n_items in (0, 1, fan_in, fan_in + 1, 3 * fan_in * fan_in + 2):
        tree, levels, width = RowTree(fan_in), RowLevels(fan_in), 0
        for _ in range(n_items):
            width += int(rng.integers(0, 3000))
            m = int(rng.integers(0, width + 1))
            columns = rng.choice(width, size=m, replace=False).astype(np.int32) if m else np.zeros(0, np.int32)
            rows = rng.random((2, m)) * np.array([[1e-3], [1e5]])
            tree.add_compact((rows[0], rows[1]), columns, width)
            levels.add(columns, rows[0], rows[1], width)
        wide = width + 5
        expected = tree.result(wide)
        got = np.frombuffer(levels.result(wide), dtype=np.float64).reshape(2, wide)
        assert got.tobytes() == expected.tobytes()


def test_row_levels_refuse_a_column_past_the_width():
    levels = RowLevels(2)
    with pytest.raises(ValueError):
        levels.add(np.array([0, 5], dtype=np.int32), np.ones(2), np.ones(2), 5)


def test_a_merge_gives_its_strings_up_part_by_part_and_keeps_numbering():
    """``MergeTable.take_strings``: the strings of the tokens numbered since
    the last call, with their ends counted from the first of them; the
    numbers go on, and ``take_tokens`` gives the rest: joined, the table of
    one merge that kept them all."""
    parts = [[b"a", b"bb", b"c"], [b"c", b"dd", b"a"], [], [b"e", b"bb", b"fff"]]
    hashes = {t: 1000 + i for i, t in enumerate([b"a", b"bb", b"c", b"dd", b"e", b"fff"])}
    tables = [MergeTable(0, rows=False), MergeTable(0, rows=False)]
    pieces, numbers = [], [[], []]
    for tokens in parts:
        offsets = np.zeros(len(tokens) + 1, dtype=np.uint64)
        offsets[1:] = np.cumsum([len(t) for t in tokens])
        for table, got in zip(tables, numbers):
            index = np.empty(len(tokens), dtype=np.int32)
            table.add(np.array([hashes[t] for t in tokens], dtype=np.uint64), offsets, b"".join(tokens), None,
                      None, np.zeros(len(tokens), dtype=np.int32), None, None, index)
            got.append(index.tolist())
        blob, ends = tables[1].take_strings()
        pieces.append((bytes(blob), np.frombuffer(ends, dtype=np.uint64).tolist()))
    assert numbers[0] == numbers[1] and pieces[0] == (b"abbc", [0, 1, 3, 4]) and pieces[1] == (b"dd", [0, 2])
    assert pieces[2] == (b"", [0]) and pieces[3] == (b"efff", [0, 1, 4])
    _hashes, ends, blob = tables[1].take_tokens()
    assert bytes(blob) == b"" and np.frombuffer(ends, dtype=np.uint64).tolist() == [0]
    _hashes, ends, blob = tables[0].take_tokens()
    assert bytes(blob) == b"".join(p[0] for p in pieces) == b"abbcddefff"


def test_a_merge_of_tokens_alone_numbers_them_in_order_of_first_sight():
    """``MergeTable(0, rows=False)``: each part's tokens get their number in
    the order of first sight over the parts (``index_out``), their strings
    kept once; no rows are taken or given."""
    table = MergeTable(0, rows=False)
    parts = [[b"a", b"bb", b"c"], [b"c", b"dd", b"a"], [], [b"e", b"bb"]]
    hashes = {t: 1000 + i for i, t in enumerate([b"a", b"bb", b"c", b"dd", b"e"])}
    numbers = []
    for tokens in parts:
        offsets = np.zeros(len(tokens) + 1, dtype=np.uint64)
        offsets[1:] = np.cumsum([len(t) for t in tokens])
        index = np.full(len(tokens), -7, dtype=np.int32)
        table.add(np.array([hashes[t] for t in tokens], dtype=np.uint64), offsets, b"".join(tokens), None, None,
                  np.full(len(tokens), 3, dtype=np.int32), None, None, index)
        numbers.append(index.tolist())
    assert numbers == [[0, 1, 2], [2, 3, 0], [], [4, 1]]
    with pytest.raises(ValueError):   # rows given to a merge of tokens alone
        table.add(np.array([1], dtype=np.uint64), np.array([0, 1], dtype=np.uint64), b"x", np.ones(1), np.ones(1),
                  np.zeros(1, dtype=np.int32))
    hashes_block, offsets_block, blob = table.take_tokens()
    assert np.frombuffer(hashes_block, dtype=np.uint64).tolist() == [1000, 1001, 1002, 1003, 1004]
    assert bytes(blob) == b"abbcdde"
    rows, days = table.take_rows()
    assert len(rows) == 0 and np.frombuffer(days, dtype=np.int32).tolist() == [3] * 5


def test_write_many_is_write_of_each_message():
    """A partition's messages given in fold order with their places in their
    class: the fold files, counts, places and pair starts of ``write`` called
    message by message in the order counted."""
    rng = np.random.default_rng(5)
    n_folds = 4
    one, many = calibrate.FoldSpill(n_folds), calibrate.FoldSpill(n_folds)
    with one, many:
        for n in (0, 7, 30):
            lengths = rng.integers(0, 6, size=n)
            spam = rng.integers(0, 2, size=n)
            folds = rng.integers(0, n_folds, size=n)
            starts = rng.integers(-1, 4, size=n)
            tokens = [rng.integers(0, 100, size=k).astype(np.int32) for k in lengths]
            for t, s, f, p in zip(tokens, spam, folds, starts):
                one.write(array("i", t.tolist()), bool(s), int(f), int(p))
            place = np.zeros(n, dtype=np.int64)
            for c in (0, 1):
                place[spam == c] = np.arange(int(np.count_nonzero(spam == c)))
            order = np.argsort(folds, kind="stable")
            indices = np.concatenate([tokens[j] for j in order]) if n else np.zeros(0, np.int32)
            many.write_many(indices, lengths[order], spam[order], place[order], folds[order], starts[order])
        assert one.counts == many.counts and one.seen == many.seen
        for k in range(n_folds):
            for a, b in zip(one.fold(k), many.fold(k)):
                assert a.tobytes() == b.tobytes()
            assert one.pairs_starts(k).tolist() == many.pairs_starts(k).tolist()
        with pytest.raises(ValueError):   # folds not in order
            many.write_many(np.zeros(2, np.int32), [1, 1], [0, 0], [0, 1], [2, 1])


def test_a_partitions_messages_in_fold_order_are_each_message_s_tokens_numbered():
    """``_in_fold_order``: the messages sorted by fold (stable), each one's
    tokens (places in the partition) numbered by the partition's index, its
    class, its place in its class in the order counted, fold and pair start."""
    from spamnb.training.planning import _in_fold_order

    rng = np.random.default_rng(11)
    for n in (0, 1, 40):
        lengths = rng.integers(0, 7, size=n).astype(np.int64)
        indices = rng.integers(0, 30, size=int(lengths.sum())).astype(np.int32)
        index = rng.permutation(1000)[:30].astype(np.int32)
        spam = rng.integers(0, 2, size=n).astype(np.uint8)
        folds = rng.integers(0, 5, size=n).astype(np.uint8)
        starts = rng.integers(-1, 4, size=n).astype(np.int64)
        bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
        places = [int(np.count_nonzero(spam[:i] == spam[i])) for i in range(n)]
        order = sorted(range(n), key=lambda i: (int(folds[i]), i))
        got = _in_fold_order(index, indices, lengths, spam, folds, starts)
        want = [index[indices[bounds[i]:bounds[i + 1]]] for i in order]
        assert got[0].dtype == np.int32
        assert got[0].tolist() == (np.concatenate(want).tolist() if n else [])
        assert [a.tolist() for a in got[1:]] == [[int(x[i]) for i in order]
                                                 for x in (lengths, spam, places, folds, starts)]


def test_workers_make_the_held_out_pass_of_j1_without_fold_models(monkeypatch, tmp_path):
    """With the cutoffs chosen (the sample corpus at 1 %): ``-j 2`` builds no
    fold models (on main its parent built them from merged fold rows and the
    workers mapped them) and gives ``-j 1``'s model file and cutoffs."""
    options = {"target_fpr": 0.01}

    def train(n_jobs):
        fitted, cal = pipeline.train([SAMPLE], spam_filter=SpamFilter(), n_jobs=n_jobs, partition_size=40,
                                     report=CorpusReport(), calibration=options, word_pairs=2)
        fitted.save(tmp_path / f"j{n_jobs}")
        return cal

    here = train(1)

    def refused(*a, **k):
        raise AssertionError("fold models built")

    monkeypatch.setattr(calibrate.FoldModels, "from_counts", classmethod(refused))
    workers = train(2)
    assert here.expected_fpr is not None and workers == here
    assert (tmp_path / "j1").read_bytes() == (tmp_path / "j2").read_bytes()


@pytest.mark.parametrize("partition_size, start", [(7, "fork"), (40, None)])
def test_workers_leave_out_copies_without_a_keying_pass(monkeypatch, tmp_path, partition_size, start):
    """No pass keys the corpus before the workers count it (on main one read
    every message first): the copies of a message of the same partition and
    of an earlier one are left out as ``-j 1`` leaves them out, said in the
    same order, and the model file and cutoffs are ``-j 1``'s; forked
    workers (``start``) leave out those of the partitions merged when their
    job was given themselves (``_SeenKeys``), so the parent takes out fewer."""
    from test_near_duplicates import with_copies

    from spamnb.training import planning

    if start:
        monkeypatch.setenv("SPAMNB_START_METHOD", start)
    dropped = []
    without = planning._without

    def counted(counts, spilled, drop, spec):
        dropped.append(len(drop))
        return without(counts, spilled, drop, spec)

    monkeypatch.setattr(planning, "_without", counted)

    corpus = with_copies(SAMPLE, tmp_path / "corpus", 2)
    for folder in ("spam", "easy_ham"):   # copies beside their message too (within a partition)
        for path in sorted(p for p in (corpus / folder).iterdir() if p.is_file())[:25:3]:
            data = path.read_bytes()
            cut = data.index(b"\n") + 1 if data.startswith(b"From ") else 0   # after an mbox envelope line
            path.with_name(path.name + "-again").write_bytes(data[:cut] + b"X-Again: 1\n" + data[cut:])
    options = {"target_fpr": 0.01}

    def train(n_jobs):
        report = CorpusReport()
        fitted, cal = pipeline.train([corpus], spam_filter=SpamFilter(), n_jobs=n_jobs, partition_size=partition_size,
                                     report=report, calibration=options, word_pairs=2)
        fitted.save(tmp_path / f"j{n_jobs}")
        return cal, report

    here, here_report = train(1)

    def refused(*a, **k):
        raise AssertionError("a keying pass")

    monkeypatch.setattr(planning, "partition_keys", refused)
    monkeypatch.setattr(pipeline, "partition_keys", refused, raising=False)   # main imported it by name
    workers, report = train(2)
    assert here_report.skipped == report.skipped and here_report.examples == report.examples
    assert report.skipped["near-duplicates of an earlier message (counted once)"] == 300 + 2 * 9
    if start:   # the 300 copies of the first corpus, 300 / 7 partitions after their messages: most left out there
        assert 0 < sum(dropped) < 300 * 2 / 4
    assert here.expected_fpr is not None and workers == here
    assert (tmp_path / "j1").read_bytes() == (tmp_path / "j2").read_bytes()


def test_gathered_strings_are_the_tokens_strings_in_their_new_order():
    """``_without``'s gather of the kept tokens' strings: by slices of runs of
    consecutive old numbers (few runs: copies taken out renumber few tokens)
    or byte by byte (many runs): the strings of the tokens, in order, either way."""
    from spamnb.training.planning import _gathered

    rng = np.random.default_rng(5)
    for trial in range(200):
        n = int(rng.integers(0, 400))
        sizes = rng.integers(0, 9, n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        blob = rng.integers(0, 256, int(offsets[-1]), dtype=np.uint8).tobytes()
        if trial % 2:   # many runs
            tokens = rng.permutation(n)[:int(rng.integers(0, n + 1))].astype(np.int32)
        else:   # a few tokens gone or moved
            tokens = np.flatnonzero(rng.random(n) < 0.98).astype(np.int32)
            if tokens.size > 3:
                tokens[[1, -2]] = tokens[[-2, 1]]
        starts, stops = offsets[tokens], offsets[tokens + 1]
        got = _gathered(blob, tokens, starts, stops, stops - starts, int((stops - starts).sum()))
        assert got == b"".join(blob[a:b] for a, b in zip(starts, stops))


def test_first_sight_lists_values_in_order_of_first_occurrence():
    from spamnb.bayes.merging import first_sight

    values = np.array([5, 2, 5, 0, 2, 7, 0], dtype=np.int32)
    assert np.frombuffer(first_sight(values, 8), dtype=np.int32).tolist() == [5, 2, 0, 7]
    assert len(first_sight(np.zeros(0, dtype=np.int32), 0)) == 0
    with pytest.raises(ValueError):
        first_sight(values, 7)


def test_row_tree_levels_grow_and_are_cut_in_place():
    """RowTree's levels are one buffer each, grown and cut to the result's width in place
    (``_regrid``: the rows moved within the buffer a piece at a time, never copied whole
    beside it): every row keeps its values, the rest is zeros, whatever the sizes and pieces."""
    from spamnb.estimator.counting import _regrid

    rng = np.random.default_rng(7)
    for _ in range(500):
        n_rows, old, new = int(rng.integers(1, 4)), int(rng.integers(1, 300)), int(rng.integers(1, 300))
        keep = int(rng.integers(0, min(old, new) + 1))
        rows = np.zeros((n_rows, old))
        rows[:, :keep] = rng.random((n_rows, keep))
        want = np.zeros((n_rows, new))
        want[:, :keep] = rows[:, :keep]
        flat = rows.reshape(-1).copy()
        got = _regrid(flat, n_rows, old, new, keep=keep, chunk=int(rng.integers(1, 50)))
        assert got is flat and np.array_equal(got.reshape(n_rows, new), want), (n_rows, old, new, keep)
    tree = RowTree(2)
    tree.add_compact((np.ones(3), np.full(3, 2.0)), np.array([0, 5000, 9], dtype=np.int32), 5001)
    result = tree.result(6000)
    assert result.shape == (2, 6000) and result[0].sum() == 3.0 and result[1, 5000] == 2.0


def test_a_call_of_a_partition_waits_behind_the_running_job():
    """A call larger than the old 64 KiB bound (``spamnb train``'s partition of
    500 paths is about 66 KiB) but at most half the socket's send buffer is
    sent to a busy worker at once, queued behind its running job (so the
    worker starts it as soon as it has answered, not when the parent next
    reads); a call larger than that waits for the worker to be idle (a send
    that cannot block), and both answer."""
    import socket
    import time

    from spamnb.training.workers import process_pool

    with process_pool(1) as pool:
        first = pool.submit(time.sleep, 0.3)
        [worker] = pool.workers
        with socket.fromfd(worker.conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            assert pool.queued_bytes == sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // 2
        small = pool.submit(len, b"x" * min(80_000, pool.queued_bytes - 1024))
        assert len(worker.jobs) == 2 and not pool.queue
        large = pool.submit(len, b"x" * (pool.queued_bytes + 1))
        assert len(worker.jobs) == 2 and len(pool.queue) == 1
        assert first.result() is None and small.result() == min(80_000, pool.queued_bytes - 1024)
        assert large.result() == pool.queued_bytes + 1


def test_the_parent_reads_the_answers_between_its_merge_steps(monkeypatch, tmp_path):
    """``-j 2``'s parent polls its workers within and after each partition's
    merge (``Workers.poll``: the answers sent read, the jobs waiting given),
    so no worker waits in its send for the merge to end; the model file is
    ``-j 1``'s."""
    from spamnb.training.workers import Workers

    polls = []
    poll = Workers.poll

    def counted(self):
        polls.append(1)
        return poll(self)

    monkeypatch.setattr(Workers, "poll", counted)

    def train(n_jobs):
        fitted, _ = pipeline.train([SAMPLE], spam_filter=SpamFilter(), n_jobs=n_jobs, partition_size=40,
                                   report=CorpusReport(), calibration={"target_fpr": 0.01}, word_pairs=2)
        fitted.save(tmp_path / f"j{n_jobs}")

    train(1)
    assert not polls
    train(2)
    n_partitions = -(-300 // 40)
    assert len(polls) >= 2 * 2 * n_partitions   # two variants, twice each
    assert (tmp_path / "j1").read_bytes() == (tmp_path / "j2").read_bytes()


def test_a_worker_leaves_out_the_copies_of_the_partitions_it_is_told_of():
    """A job given the keys of the partitions merged so far (``_SeenKeys.known``:
    a file the workers share) leaves out their copies itself, so the parent
    takes out (``_without``) only those of the partitions merged since; where
    the worker does not hold that file (another file at the descriptor), it
    reads none and counts every message, as before."""
    from spamnb.estimator.counting import counting_spec
    from spamnb.training import planning

    specs = [counting_spec(SpamFilter())]
    part = next(planning.partitions(planning.plan_training([SAMPLE], partition_size=40), 40))
    counts, _, _, keys, _, n_known = planning.count_partition_spilled(specs, part, n_folds=10)
    n = len(keys)   # (the README at the top is no message)
    assert n_known == 0 and int(counts[0].class_count.sum()) == n >= 35 and len(set(keys)) == n
    seen = planning._SeenKeys(True)
    try:
        seen.add(set(keys[:25]) - {0})
        known = seen.known()
        assert known[-1] == len(seen.place) > 0
        again, _, _, keys_again, _, n_known = planning.count_partition_spilled(specs, part, n_folds=10, known=known)
        assert list(keys_again) == list(keys) and n_known == known[-1]
        left_out = sum(1 for key in keys if key in seen and seen.known_to(key, n_known))
        assert left_out >= 20 and int(again[0].class_count.sum()) == n - left_out
        elsewhere = known[:2] + (known[2] + 1, known[3])   # not the file at that descriptor
        whole, *_, n_known = planning.count_partition_spilled(specs, part, n_folds=10, known=elsewhere)
        assert n_known == 0 and int(whole[0].class_count.sum()) == n
    finally:
        seen.close()


def test_workers_keep_their_vocabulary_and_the_parent_maps_their_numbers(monkeypatch, tmp_path):
    """A worker keeps its vocabulary across the partitions it counts and
    sends only the tokens new to it (their hashes and strings) and the
    partition's tokens by its own numbers; the parent maps each worker's
    numbers to the corpus's (``_WorkerNumbers``), keeping the tokens sent in
    copies it takes out (``_without``) for that worker's later partitions.
    A token mapped wrongly would move a count, a string or the order: the
    model files of ``-j 1`` and ``-j 3`` (small partitions, three workers
    sharing most tokens, copies of earlier partitions' messages each with a
    token of its own) are the same bytes, and the cutoffs the same."""
    from test_near_duplicates import with_copies

    from spamnb.training import planning

    corpus = with_copies(SAMPLE, tmp_path / "corpus", 1)
    for folder in ("spam", "easy_ham"):   # a copy beside each message: in its partition or the next
        for i, path in enumerate(sorted(p for p in (corpus / folder).iterdir() if p.is_file())):
            data = path.read_bytes()
            cut = data.index(b"\n") + 1 if data.startswith(b"From ") else 0
            mark = b"X-Mark: only%s%dhere\n" % (folder.encode(), i)   # a token of this copy alone
            path.with_name(path.name + "-again").write_bytes(data[:cut] + mark + data[cut:])
    sent, listed, held = [], [], []
    number = planning._WorkerNumbers.number

    def numbered(self, part, table, *more):
        sent.append(part.hashes.size)
        listed.append(part.touched.size)
        index = number(self, part, table, *more)
        held.append(0 if self.pending is None else self.pending[0].size)
        return index

    monkeypatch.setattr(planning._WorkerNumbers, "number", numbered)

    def train(n_jobs):
        fitted, cal = pipeline.train([corpus], spam_filter=SpamFilter(), n_jobs=n_jobs, partition_size=5,
                                     report=CorpusReport(), calibration={"target_fpr": 0.01}, word_pairs=2)
        fitted.save(tmp_path / f"j{n_jobs}")
        return cal

    here = train(1)
    workers = train(3)
    assert here.expected_fpr is not None and workers == here
    assert (tmp_path / "j1").read_bytes() == (tmp_path / "j3").read_bytes()
    assert len(sent) >= 2 * 75   # two variants, every partition (of 5 of 600 files) through the workers' numbers
    assert sum(sent) < 0.8 * sum(listed)   # the tokens a worker had sent before were not sent again
    assert max(held) > 0   # tokens of copies taken out alone, kept for the worker's later partitions


def test_a_workers_numbers_map_as_the_tokens_whole_would_be_numbered():
    """``_WorkerNumbers`` against ``MergeTable.add`` of each partition's tokens
    whole (hashes and strings): two workers sharing tokens, a partition
    whose tokens new to its worker are not all in it (copies taken out: one
    kept for the worker's later partitions, then asked for again), the same
    numbers, strings and order."""
    from spamnb.training.planning import _WorkerNumbers, _WorkerPart

    rng = np.random.default_rng(5)
    words = [f"w{i}".encode() * (1 + i % 3) for i in range(400)]
    known = [[], []]   # each worker's tokens (word numbers), in its order

    def part(w, chosen, day, left_out=()):
        """Worker ``w``'s partition of the words ``chosen`` (in order), those of ``left_out`` new to it too."""
        mine = known[w]
        first = len(mine)
        for word in list(chosen) + list(left_out):
            if word not in mine:
                mine.append(word)
        new = mine[first:]
        offsets = np.zeros(len(new) + 1, dtype=np.uint64)
        np.cumsum([len(words[i]) for i in new], out=offsets[1:])
        return _WorkerPart((w, 1), first, np.array([1000 + i for i in new], dtype=np.uint64), offsets,
                           b"".join(words[i] for i in new), np.array([mine.index(i) for i in chosen], dtype=np.int32),
                           None, None, day, None, None)

    ours, whole = MergeTable(0, rows=False), MergeTable(0, rows=False)
    maps = [_WorkerNumbers(), _WorkerNumbers()]
    plan = [(0, rng.permutation(120)[:60], ()), (1, rng.permutation(150)[:70], ()),
            (0, rng.permutation(200)[:50], (390, 391)), (1, rng.permutation(200)[:80], (392,)),
            (0, np.concatenate([[391], rng.permutation(250)[:90]]), ()), (1, np.array([392, 5, 393]), ()),
            (0, np.concatenate([rng.permutation(300)[:100], [390]]), ())]
    for k, (w, chosen, left_out) in enumerate(plan):
        chosen = list(dict.fromkeys(int(i) for i in chosen))
        p = part(w, chosen, 20000 + k, left_out)
        got = maps[w].number(p, ours)
        hashes = np.array([1000 + i for i in chosen], dtype=np.uint64)
        offsets = np.zeros(len(chosen) + 1, dtype=np.uint64)
        np.cumsum([len(words[i]) for i in chosen], out=offsets[1:])
        want = np.empty(len(chosen), dtype=np.int32)
        whole.add(hashes, offsets, b"".join(words[i] for i in chosen), None, None,
                  np.full(len(chosen), 20000 + k, dtype=np.int32), None, None, want)
        assert got.tolist() == want.tolist()
    assert maps[0].pending is not None and maps[1].pending is not None
    for a, b in zip(ours.take_tokens(), whole.take_tokens()):
        assert bytes(a) == bytes(b)
    for a, b in zip(ours.take_rows(), whole.take_rows()):
        assert bytes(a) == bytes(b)
