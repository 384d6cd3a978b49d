"""A light ``spamnb learn`` finds a message in a large ledger of the model file.

The light session (``spamnb.model.learning``, what ``spamnb learn`` runs)
looks a message's digest up in the model file's ledger without building the
ledger: a search of its digests.  On a ledger of 30,000 entries, the size of
a large trained corpus's: a message in it, at its first, a middle and its
last entry, is known (nothing written, the model not read whole); a message
whose digest's bytes straddle two entries is not; the copy with the other
line ends of a message in the ledger is known by that entry; each answer is
the one the ledger read whole gives.
"""

import os
import shutil

import pytest

from spamnb.estimator import ledger as ledgers
from spamnb.estimator import ledger_table
from spamnb.model import learning
from spamnb.model.spam_filter import SpamFilter

from conftest import REPO

SPAM = sorted((REPO / "corpora" / "spam").iterdir()) + sorted((REPO / "corpora" / "spam_2").iterdir())
HAM = sorted((REPO / "corpora" / "easy_ham").iterdir())
N_ENTRIES = 30_000


def _digest(data):
    return ledgers.message_digest(ledgers.canonical(data))


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A model of 40 spam and 40 ham whose ledger holds 30,000 entries (four of the
    trained messages' among random ones), and the messages placed in it."""
    folder = tmp_path_factory.mktemp("big")
    trained = [p.read_bytes() for p in SPAM[:40] + HAM[:40]]
    sf = SpamFilter().fit(trained, [True] * 40 + [False] * 40, tune=False)
    first, middle, last, plain = (p.read_bytes() for p in (SPAM[0], HAM[0], SPAM[1], SPAM[2]))   # trained
    straddled = HAM[51].read_bytes()
    target = _digest(straddled)
    rng = __import__("random").Random(48)
    digests = [rng.randbytes(16) for _ in range(N_ENTRIES)]
    labels = [rng.randrange(2) for _ in range(N_ENTRIES)]
    digests[0], labels[0] = _digest(first), 1
    digests[N_ENTRIES // 2], labels[N_ENTRIES // 2] = _digest(middle), 0
    digests[-1], labels[-1] = _digest(last), 1
    digests[777], labels[777] = _digest(plain), 1     # in the ledger with LF line ends, learned with CRLF below
    # the straddled message's digest in the bytes of two neighbours, at an offset of 8: no entry of its own
    digests[1234] = digests[1234][:8] + target[:8]
    digests[1235] = target[8:] + digests[1235][8:]
    assert len(set(digests)) == N_ENTRIES
    ledger = ledger_table.Ledger.from_arrays(b"".join(digests), bytes(labels))
    ledger_table.attach(sf, ledger)
    path = folder / "big.spamnb"
    sf.save(path)
    return path, {"first": (first, True), "middle": (middle, False), "last": (last, True),
                  "crlf": (plain.replace(b"\n", b"\r\n"), True), "straddled": (straddled, None)}


def _copy(big, tmp_path):
    path = tmp_path / "m.spamnb"
    shutil.copyfile(big[0], path)
    return path


@pytest.mark.parametrize("name", ["first", "middle", "last", "crlf"])
def test_a_message_in_a_large_ledger_is_known_without_reading_the_model(big, tmp_path, name):
    path, placed = _copy(big, tmp_path), big[1]
    data, is_spam = placed[name]
    with learning.session(path, mapped=True, light=True) as session:
        assert session.learn(data, is_spam, ledgers.Tally()) == "known"
        assert session.light                      # looked up in the file's ledger, the model not read whole
    assert not os.path.exists(str(path) + ".journal")   # nothing to write
    whole = SpamFilter.load(path).ledger_
    digest = ledgers.known_digest(whole, ledgers.canonical(data))
    assert whole.label(digest) is is_spam


def test_a_message_in_a_large_ledger_learned_with_the_other_label_is_moved(big, tmp_path):
    path, placed = _copy(big, tmp_path), big[1]
    data, is_spam = placed["middle"]
    with learning.session(path, mapped=True, light=True) as session:
        assert session.learn(data, not is_spam, ledgers.Tally()) == "relabelled"
    assert SpamFilter.load(path).ledger_.label(_digest(data)) is (not is_spam)


def test_a_digest_across_two_entries_is_not_an_entry(big, tmp_path):
    path, placed = _copy(big, tmp_path), big[1]
    data = placed["straddled"][0]
    assert big[0].read_bytes().count(_digest(data)) == 1    # its bytes are in the file's ledger, across two entries
    with learning.session(path, mapped=True, light=True) as session:
        assert session.learn(data, False, ledgers.Tally()) == "learned"
        assert session.light
    learned = SpamFilter.load(path)
    assert learned.ledger_.label(_digest(data)) is False and len(learned.ledger_) == N_ENTRIES + 1
    with learning.session(path, mapped=True, light=True) as session:   # now in the journal's records: known
        assert session.learn(data, False, ledgers.Tally()) == "known"


def test_find_digest_matches_whole_entries_only():
    """``checks.find_digest`` (the light learn's search of the model file's
    ledger, in place): the first entry holding the digest, -1 for a digest
    whose bytes straddle two entries or lie in a trailing part of one, or
    for an empty ledger; a digest not 16 bytes is refused."""
    import random

    from spamnb.bayes.checks import find_digest

    rng = random.Random(30)
    entries = [rng.randbytes(16) for _ in range(1000)]
    digests = b"".join(entries)
    for at in (0, 1, 500, 999):
        assert find_digest(memoryview(digests), entries[at]) == at
    assert find_digest(digests + entries[3], entries[3]) == 3   # the first of two
    assert find_digest(digests, digests[8:24]) == -1            # the halves of two neighbours
    assert find_digest(digests + b"x" * 8, entries[999][8:] + b"x" * 8) == -1   # into a trailing part
    assert find_digest(b"", entries[0]) == -1
    with pytest.raises(ValueError):
        find_digest(digests, entries[0][:8])


def test_the_ledger_is_searched_in_parts_of_the_file_not_read_into_memory(big, tmp_path):
    """The file's digests are searched as the file has them (``_Arrays.find_digest``, in parts
    into one buffer): a message the ledger does not know leaves the ledger's arrays unread, one it
    knows has its label and note read, never the digests; each place is the search of the array read."""
    from spamnb.bayes.checks import find_digest
    from spamnb.persistence.store import LEDGER

    path, placed = _copy(big, tmp_path), big[1]
    with learning.session(path, mapped=True, light=True) as session:
        assert session.learn(placed["straddled"][0], False, ledgers.Tally()) == "learned"
        assert session.light and LEDGER <= session.filter.unread_.unread
    with learning.session(path, mapped=True, light=True) as session:
        assert session.learn(placed["last"][0], True, ledgers.Tally()) == "known"
        arrays = session.filter.unread_
        assert arrays.unread & LEDGER == {"ledger_digests"}
        wanted = [_digest(placed[name][0]) for name in ("first", "middle", "last", "straddled")]
        parts = [arrays.find_digest("ledger_digests", d, part=16 * 1000) for d in wanted]
        assert parts == [arrays.find_digest("ledger_digests", d) for d in wanted] == [0, N_ENTRIES // 2,
                                                                                        N_ENTRIES - 1, -1]
        arrays.fill_unread(LEDGER)
        assert [find_digest(arrays["ledger_digests"], d) for d in wanted] == parts
        assert [arrays.find_digest("ledger_digests", d) for d in wanted] == parts   # read: searched in memory


def test_a_digest_and_its_other_line_ends_are_searched_in_one_pass(big, tmp_path):
    """``find_digest`` given two digests (a message's and its copy's with the other line
    ends, ``known_digest``): both places in one pass, the other's its first before the
    digest's (all entries' when the digest is not there), -1 for none, the same in parts
    of the file as in memory; a light learn of a new message searches the file's ledger
    once (it searched it for each digest), its answers those of two searches."""
    from spamnb.bayes.checks import find_digest
    from spamnb.persistence.store import LEDGER

    rng = __import__("random").Random(31)
    entries = [rng.randbytes(16) for _ in range(1000)]
    digests, none = b"".join(entries), bytes(16)
    assert find_digest(digests, entries[7], entries[9]) == (7, -1)   # the digest first: the other not reached
    assert find_digest(digests, entries[9], entries[7]) == (9, 7)
    assert find_digest(digests, none, entries[999]) == (-1, 999)
    assert find_digest(digests + entries[5], none, entries[5]) == (-1, 5)   # the other's first
    assert find_digest(digests, none, digests[8:24]) == (-1, -1)          # halves of two neighbours: none
    assert find_digest(digests, none, none) == (-1, -1)
    with pytest.raises(ValueError):
        find_digest(digests, entries[0], entries[1][:8])
    path, placed = _copy(big, tmp_path), big[1]
    with learning.session(path, mapped=True, light=True) as session:
        assert session.learn(placed["last"][0], True, ledgers.Tally()) == "known"
        arrays = session.filter.unread_
        wanted = [_digest(placed[name][0]) for name in ("first", "middle", "last", "straddled")]
        for own in wanted:
            for other in wanted:
                pair = arrays.find_digest("ledger_digests", own, part=16 * 1000, other=other)
                at = arrays.find_digest("ledger_digests", own)
                other_at = arrays.find_digest("ledger_digests", other)
                assert pair == (at, other_at if at < 0 or 0 <= other_at < at else -1), (own, other)
        arrays.fill_unread(LEDGER)
        for own in wanted:
            assert (arrays.find_digest("ledger_digests", own, other=wanted[1])
                    == find_digest(arrays["ledger_digests"], own, wanted[1]))
    searched = []

    class Counted(type(arrays)):
        def find_digest(self, name, digest, part=1 << 16, other=None):
            searched.append(other is not None)
            return super().find_digest(name, digest, part, other)

    for name, outcome in (("straddled", "learned"), ("crlf", "known"), ("first", "known")):
        searched.clear()
        with learning.session(path, mapped=True, light=True) as session:
            session.filter.unread_.__class__ = Counted
            assert session.learn(placed[name][0], placed[name][1] is not False, ledgers.Tally()) == outcome
            assert session.light
        assert searched == [True], name   # one pass for the message's two digests
    whole = SpamFilter.load(path).ledger_
    for name in ("straddled", "crlf", "first"):
        assert whole.label(ledgers.known_digest(whole, ledgers.canonical(placed[name][0]))) is True


def test_the_journals_ledger_operations_are_ledger_ops_newest_first():
    """``checks.journal_ledger`` (the one pass over a journal's records that reads their
    ledger operations: the light learn's of the journal and of its session's transactions):
    each transaction's RECORD/REMOVE operations as they were encoded (a learn's hashes and
    text, held-out scores, pair scores and sums skipped), newest first, and the RECORDs
    counted; a transaction cut short or with an unknown operation, and record layouts other
    than those it reads, are a ValueError."""
    import random
    from array import array

    from spamnb.bayes import checks
    from spamnb.persistence import deltas

    rng = random.Random(48)
    payloads, expected = [], []   # expected: (op, flags, note, digest) of each ledger operation, oldest first
    for k in range(40):
        ops = [deltas.encode_held_out(k % 2, 1.5)] if k % 3 else []
        n_new = rng.randrange(4)
        text = bytes(rng.randrange(97, 123) for _ in range(rng.randrange(12) if n_new else 0))
        lengths = array("I", [len(text)] + [0] * (n_new - 1)) if n_new else array("I")
        ops.append(deltas.encode_tokens(deltas.OP_LEARN, k % 2, 7, 100 + k, array("Q", rng.sample(range(1 << 40), 5)),
                                        lengths, text))
        ops.append(deltas.LEARN_SUMS_RECORD.pack(deltas.OP_LEARN_SUMS, k % 2, 2.5, 0.75))
        if k % 4 == 1:
            ops.append(deltas.encode_pair_scores(k % 2, 1.0, 2.0, 0.5, 1.0))
        for _ in range(rng.randrange(1, 3)):   # a digest seen before, at times: its newest operation decides
            digest = rng.choice([rng.randbytes(16), bytes(16)])
            op = deltas.OP_REMOVE if rng.random() < 0.3 else deltas.OP_RECORD
            label, auto, held_out = rng.randrange(2), rng.random() < 0.5, rng.choice([None, 0, 300, 511])
            ops.append(deltas.encode_ledger(op, label, digest, auto, held_out))
            expected.append((op, label | (2 if auto else 0), 0 if held_out is None else held_out + 1, digest))
        payloads.append(memoryview(b"".join(ops)))
    digests, heads, records = checks.journal_ledger(payloads, deltas.LAYOUT)
    expected.reverse()
    assert len(digests) == 16 * len(expected) and len(heads) == 4 * len(expected)
    assert [(heads[4 * i], heads[4 * i + 1], heads[4 * i + 2] | heads[4 * i + 3] << 8, digests[16 * i:16 * i + 16])
            for i in range(len(expected))] == expected
    assert records == sum(op[0] == deltas.OP_RECORD for op in expected) and records < len(expected)
    assert checks.find_digest(digests, bytes(16)) == next(i for i, op in enumerate(expected) if op[3] == bytes(16))
    assert checks.journal_ledger([], deltas.LAYOUT) == (b"", b"", 0)
    for bad in (payloads[0][:-8], payloads[1][:30], b"\x09" + bytes(7)):   # cut short, unknown
        with pytest.raises(ValueError):
            checks.journal_ledger([payloads[2], bad], deltas.LAYOUT)
    with pytest.raises(ValueError):
        checks.journal_ledger(payloads, deltas.LAYOUT[:-1] + (9,))
