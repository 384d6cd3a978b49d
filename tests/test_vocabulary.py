"""The vocabulary's compiled hash index, CSR builder and single-message scorer."""

import math
import random
from array import array

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spamnb.bayes import checks as _checks

from spamnb.bayes import token_kernels
from spamnb.bayes.vocabulary import Vocabulary, hash_index, index_pieces


class FakeStream:
    """Stands in for a TokenStream: hashes plus the token strings."""

    def __init__(self, tokens):
        self._tokens = list(tokens)
        self.hashes = array("Q", [self.hash(t) for t in self._tokens])

    @staticmethod
    def hash(token):
        # any stable non-zero 64-bit value will do for the index
        import hashlib

        return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little") or 1

    def __len__(self):
        return len(self._tokens)

    def token(self, j):
        return self._tokens[j]

    def write_tokens(self, positions, count, blob, offsets):
        for j in positions[:count]:
            blob += self._tokens[j].encode("utf-8", "surrogatepass")
            offsets.append(len(blob))


def test_add_assigns_indices_in_order_of_first_sight():
    vocab = Vocabulary()
    out = vocab.add(FakeStream(["b", "a", "b", "c", "a"]))
    assert list(out) == [0, 1, 0, 2, 1]
    assert vocab.tokens() == ["b", "a", "c"]
    out = vocab.add(FakeStream(["c", "d"]))
    assert list(out) == [2, 3]
    assert len(vocab) == 4


def test_lookup_marks_unknown_tokens():
    vocab = Vocabulary()
    vocab.add(FakeStream(["x", "y"]))
    assert list(vocab.lookup(FakeStream(["y", "zz", "x"]).hashes)) == [1, -1, 0]


def test_growth_keeps_every_mapping():
    vocab = Vocabulary()
    words = [f"w{i}" for i in range(20000)]
    vocab.add(FakeStream(words[:5000]))
    vocab.add(FakeStream(words))
    assert vocab.capacity >= 2 * len(words)
    assert list(vocab.lookup(FakeStream(words).hashes)) == list(range(len(words)))
    assert vocab.token(12345) == "w12345"


def test_round_trip_through_buffers_and_copy_on_write():
    vocab = Vocabulary()
    vocab.add(FakeStream(["alpha", "βeta", "gamma"]))
    blob, offsets = vocab.string_table()
    loaded = Vocabulary.from_buffers(bytes(memoryview(vocab.keys).cast("B")), bytes(memoryview(vocab.values).cast("B")),
                                     3, blob, bytes(memoryview(offsets).cast("B")))
    assert loaded.tokens() == ["alpha", "βeta", "gamma"]
    out = loaded.add(FakeStream(["gamma", "delta"]))  # read-only buffers are copied first
    assert list(out) == [2, 3]
    blob2, offsets2 = loaded.string_table()
    assert blob2.decode() == "alphaβetagammadelta"
    assert list(offsets2) == [0, 5, 10, 15, 20]


@pytest.mark.parametrize("keep", [[True, True, False, False], [False, True, True, False], [True, False, True, True]])
def test_compact_renumbers_survivors(keep):
    words = ["a", "b", "c", "d"]
    vocab = Vocabulary()
    vocab.add(FakeStream(words))
    vocab.compact(keep)
    kept = [w for w, k in zip(words, keep) if k]
    assert vocab.tokens() == kept
    assert list(vocab.lookup(FakeStream(words).hashes)) == [kept.index(w) if k else -1 for w, k in zip(words, keep)]


def test_check_index_rejects_crafted_tables():
    vocab = Vocabulary()
    vocab.add(FakeStream(["a", "b"]))
    keys, values = array("Q", vocab.keys), array("i", vocab.values)
    assert token_kernels.check_index(keys, values, 2) == 2
    slot = next(i for i, k in enumerate(keys) if k)
    bad = array("i", values)
    bad[slot] = 7  # out of range
    with pytest.raises(ValueError):
        token_kernels.check_index(keys, bad, 2)
    with pytest.raises(ValueError):  # no empty slot: probing would never end
        token_kernels.check_index(array("Q", [5, 6]), array("i", [0, 1]), 2)
    with pytest.raises(ValueError):  # not a power of two
        token_kernels.check_index(array("Q", [0, 0, 0]), array("i", [0, 0, 0]), 0)


@pytest.mark.parametrize("counts", [token_kernels.COUNTS_RAW, token_kernels.COUNTS_BINARY, token_kernels.COUNTS_LOG])
def test_csr_builder_counts_rows(counts):
    builder = token_kernels.CSRBuilder(counts)
    builder.add_row(array("i", [3, 1, 3, -1, 3]))
    builder.add_row(array("i"))
    builder.add_row(array("i", [0]))
    expected = {token_kernels.COUNTS_RAW: [1.0, 3.0, 1.0], token_kernels.COUNTS_BINARY: [1.0, 1.0, 1.0],
                token_kernels.COUNTS_LOG: [math.log(2), math.log(4), math.log(2)]}[counts]
    assert list(builder.indptr) == [0, 2, 2, 3]
    assert list(builder.indices) == [1, 3, 0]
    assert list(builder.data) == pytest.approx(expected, rel=1e-15)


def _patterns(rng, n):
    """Rows that are hard for a quicksort: random, sorted, reversed, equal, organ pipe, few values."""
    return {"random": [rng.randrange(1 << 31) for _ in range(n)], "sorted": list(range(n)),
            "reversed": list(range(n, 0, -1)), "equal": [7] * n,
            "organ pipe": list(range(n // 2)) + list(range(n - n // 2, 0, -1)),
            "few values": [rng.randrange(3) for _ in range(n)],
            "median-of-3 killer": [i if i % 2 else n - i for i in range(n)]}


@pytest.mark.parametrize("n", [0, 1, 2, 3, 16, 17, 18, 100, 1000, 20000])
def test_sort_int32_sorts_every_pattern(n):
    for name, values in _patterns(random.Random(n), n).items():
        row = array("i", values)
        token_kernels.sort_int32(row)
        assert list(row) == sorted(values), name


@pytest.mark.parametrize("counts", [token_kernels.COUNTS_RAW, token_kernels.COUNTS_BINARY, token_kernels.COUNTS_LOG])
def test_add_counts_equals_adding_the_csr_row(counts):
    rng = random.Random(counts)
    target = array("d", [0.5] * 40)
    expected = np.array(target)
    rows = [array("i", [rng.randrange(-1, 40) for _ in range(rng.randrange(0, 300))]) for _ in range(50)]
    rows.append(array("i", [5] * 63 + [6] * 64 + [7] * 65 + [8] * 1000))   # counts around the log1p table's end
    for idx in rows:
        builder = token_kernels.CSRBuilder(counts)
        builder.add_row(idx)
        expected[np.array(builder.indices, dtype=np.int64)] += np.array(builder.data)
        assert token_kernels.add_counts(idx, target, counts) == len(builder.indices)
    assert np.array_equal(np.array(target), expected)  # the same sums, bit for bit


def test_add_counts_refuses_out_of_range_indices_and_adds_nothing():
    target = array("d", [0.0] * 3)
    with pytest.raises(ValueError, match="out of range"):
        token_kernels.add_counts(array("i", [0, 1, 3]), target, token_kernels.COUNTS_RAW)
    assert list(target) == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="unknown counts"):
        token_kernels.add_counts(array("i", [0]), target, 9)
    assert token_kernels.add_counts(array("i", [-1, -1]), target, token_kernels.COUNTS_RAW) == 0


@pytest.mark.parametrize("counts", [token_kernels.COUNTS_RAW, token_kernels.COUNTS_BINARY, token_kernels.COUNTS_LOG])
def test_scorer_matches_the_formula(counts):
    rng = random.Random(3)
    words = [f"t{i}" for i in range(50)]
    vocab = Vocabulary()
    vocab.add(FakeStream(words))
    fc = np.array([[rng.randint(0, 9) for _ in words] for _ in range(2)], dtype=np.float64)
    alpha = 0.3
    log_norm = np.log(fc.sum(axis=1) + alpha * len(words))
    log_prior = np.log([0.7, 0.3])
    message = [rng.choice(words + ["unseen1", "unseen2"]) for _ in range(200)]
    scorer = token_kernels.Scorer(vocab.keys, vocab.values, np.log(fc + alpha).reshape(-1), len(words),
                                  log_norm, log_prior, counts)
    jll, evidence, n_tokens, n_known, spam_ev, ham_ev = scorer.score(FakeStream(message).hashes, 5)
    x = np.zeros(len(words))
    for w in message:
        if w in words:
            x[words.index(w)] += 1
    x = {token_kernels.COUNTS_RAW: x, token_kernels.COUNTS_BINARY: (x > 0) * 1.0,
         token_kernels.COUNTS_LOG: np.log1p(x)}[counts]
    log_theta = np.log(fc + alpha) - log_norm[:, None]
    expected = log_prior + log_theta @ x
    assert jll == pytest.approx(expected.tolist(), rel=1e-12)
    assert n_tokens == 200 and n_known == sum(w in words for w in message)
    weights = x * (log_theta[1] - log_theta[0])
    top = np.argsort(-np.abs(weights), kind="stable")[:5]
    assert [i for i, _ in evidence] == top.tolist()
    assert [w for _, w in evidence] == pytest.approx(weights[top].tolist(), rel=1e-12)
    assert spam_ev == pytest.approx(weights[weights > 0].sum(), rel=1e-12)
    assert ham_ev == pytest.approx(weights[weights < 0].sum(), rel=1e-12)


@pytest.mark.parametrize("counts", [token_kernels.COUNTS_RAW, token_kernels.COUNTS_BINARY, token_kernels.COUNTS_LOG])
@pytest.mark.parametrize("length", [0.0, 5.0])
def test_verdict_sums_are_score_and_part_max_bit_for_bit(counts, length):
    """Scorer.verdict_sums (one lookup per token, the batch path) gives what
    score(hashes, 0) and verdict.part_max give, with ==: the same floats."""
    from spamnb.estimator.verdict import part_max

    rng = random.Random(11)
    words = [f"t{i}" for i in range(300)]
    vocab = Vocabulary()
    vocab.add(FakeStream(words))
    fc = np.array([[rng.randint(0, 30) for _ in words] for _ in range(2)], dtype=np.float64)
    log_norm = np.log(fc.sum(axis=1) + 0.5 * len(words))
    scorer = token_kernels.Scorer(vocab.keys, vocab.values, np.log(fc + 0.5).reshape(-1), len(words), log_norm,
                                  np.log([0.6, 0.4]), counts, length)
    checked = 0
    for n in (0, 1, 7, 200, 1500):
        hashes = FakeStream([rng.choice(words + ["unseen"]) for _ in range(n)]).hashes
        cuts = sorted(rng.randrange(n + 1) for _ in range(4))
        for regions in ([], [(0, n)], [(cuts[0], cuts[1]), (cuts[2], cuts[3])], [(3, 2), (0, 0)],
                        [(-5, n + 10), (n, n + 3)], [(-n - 9, -1)]):
            for truncated in (False, True):
                jll, _, n_tokens, n_known, spam_ev, ham_ev = scorer.score(hashes, 0)
                expected = (jll[1] - jll[0], n_tokens, n_known, spam_ev, ham_ev,
                            part_max(scorer, hashes, regions, truncated))
                assert scorer.verdict_sums(hashes, regions, truncated) == expected
                checked += 1
    assert checked == 60
    assert scorer.verdict_sums(array("Q"), [], True)[5] == math.inf
    assert scorer.verdict_sums(array("Q"), [], False)[5] == -math.inf


def test_scorer_of_no_tokens_is_the_prior():
    vocab = Vocabulary()
    vocab.add(FakeStream(["a"]))
    scorer = token_kernels.Scorer(vocab.keys, vocab.values, array("d", [1, 1]), 1, [0.0, 0.0],
                                  [math.log(0.25), math.log(0.75)], 0)
    jll, evidence, n, known, spam_ev, ham_ev = scorer.score(array("Q"), 3)
    assert jll == pytest.approx([math.log(0.25), math.log(0.75)])
    assert evidence == [] and n == 0 and known == 0 and spam_ev == ham_ev == 0.0


def test_checksum_detects_every_single_bit_flip_of_a_small_buffer():
    data = bytearray(random.Random(1).randbytes(100))
    reference = _checks.checksum64(bytes(data))
    assert _checks.checksum64(bytes(data)) == reference
    for bit in range(len(data) * 8):
        data[bit // 8] ^= 1 << (bit % 8)
        assert _checks.checksum64(bytes(data)) != reference
        data[bit // 8] ^= 1 << (bit % 8)
    assert _checks.checksum64(bytes(data[:-1])) != reference


def _decodes(data):
    try:
        str(data, "utf-8", "surrogatepass")
        return True
    except UnicodeDecodeError:
        return False


@settings(max_examples=2000, deadline=None)
@given(st.one_of(st.binary(max_size=40),
                 st.text(max_size=20).map(lambda s: s.encode("utf-8", "surrogatepass")),
                 st.lists(st.sampled_from([b"a", b"abcdefgh", b"\xc3\xa9", b"\xe4\xb8\xad", b"\xf0\x9f\x98\x80",
                                           b"\xed\xbf\xbf", b"\xed\xa0\x80", b"\xc3", b"\xe4\xb8", b"\xf0\x9f\x98",
                                           b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xf5", b"\xff", b"\x80"]),
                          max_size=20).map(b"".join)))
@pytest.mark.slow
def test_check_utf8_accepts_what_surrogatepass_decodes(data):
    assert _checks.check_utf8(data) == _decodes(data)


def test_release_from_table_and_fill_keep_indices_and_index():
    """A vocabulary counted three quarters full numbers tokens as a half-full
    one does; what it releases (hashes, its own strings) makes, through
    from_table, the vocabulary add() makes of the same tokens: the same hash
    index, byte for byte, over the same bytearray (not a copy)."""
    words = [f"w{i}" for i in range(5000)] + ["βeta"]
    half, three_quarters = Vocabulary(), Vocabulary(fill=0.75)
    for chunk in range(0, len(words), 700):
        part = FakeStream(words[chunk:chunk + 700] + words[:50])
        assert list(half.add(part)) == list(three_quarters.add(part))
    assert three_quarters.capacity < half.capacity
    hashes, blob, offsets = three_quarters.release()
    assert len(three_quarters) == 0 and three_quarters.capacity == 1024
    rebuilt = Vocabulary.from_table(hashes, blob, offsets)
    assert rebuilt._blob is blob
    assert bytes(memoryview(rebuilt.keys).cast("B")) == bytes(memoryview(half.keys).cast("B"))
    assert bytes(memoryview(rebuilt.values).cast("B")) == bytes(memoryview(half.values).cast("B"))
    assert rebuilt.tokens() == half.tokens()
    assert list(rebuilt.add(FakeStream(["new", "w3"]))) == [len(words), 3]   # writable: it learns on
    with pytest.raises(ValueError):
        Vocabulary.from_table(hashes, blob, offsets[:-1])
    with pytest.raises(ValueError):
        Vocabulary(fill=0.9)


def test_string_table_view_is_the_table_itself():
    vocab = Vocabulary()
    vocab.add(FakeStream(["alpha", "βeta"]))
    view, offsets = vocab.string_table(copy=False)
    assert view.readonly and bytes(view) == vocab.string_table()[0]
    assert view.obj is vocab._blob   # no copy
    view.release()
    vocab.add(FakeStream(["gamma"]))
    assert vocab.tokens() == ["alpha", "βeta", "gamma"]


@pytest.mark.parametrize("n, zero_at", [(0, None), (1, None), (511, None), (700, 233), (70000, 0)])
def test_index_pieces_are_hash_index_byte_for_byte(n, zero_at):
    # the save's index, made from its slots a piece at a time: hash_index's keys and values, a hash of 0 included
    rng = random.Random(n)
    hashes = array("Q", rng.sample(sorted({rng.getrandbits(64) | 1 for _ in range(n)}), n))
    if zero_at is not None:
        hashes[zero_at] = 0
    keys, values = hash_index(hashes)
    piece_keys, piece_values = index_pieces(hashes, step=1000)
    assert b"".join(bytes(p) for p in piece_keys) == bytes(keys)
    assert b"".join(bytes(p) for p in piece_values) == bytes(values)


def test_index_pieces_refuse_a_hash_twice():
    with pytest.raises(ValueError, match="twice"):
        index_pieces(array("Q", [5, 7, 5]))
