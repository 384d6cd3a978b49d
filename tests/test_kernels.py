"""spamnb.bayes.kernels: compiled kernel == numpy reference == a dense closed form.

Every test that can runs against both implementations ("cython" and
"numpy"); the compiled one is skipped only if it is not built, and
``SPAMNB_REQUIRE_COMPILED=1`` (set in CI) turns that skip into a failure.
"""

import os

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from spamnb.bayes import _reference

from spamnb.bayes import kernels

try:
    from spamnb.bayes import _kernels
except ImportError:  # pragma: no cover - depends on the build
    _kernels = None

IMPLEMENTATIONS = [
    pytest.param("cython", marks=pytest.mark.skipif(_kernels is None, reason="spamnb.bayes._kernels not built")),
    "numpy",
]


def test_compiled_kernel_in_use_when_required():
    if os.environ.get("SPAMNB_REQUIRE_COMPILED") != "1":
        pytest.skip("SPAMNB_REQUIRE_COMPILED is not set")
    assert _kernels is not None, "spamnb.bayes._kernels failed to import"
    assert kernels.IMPLEMENTATION == "cython"


def test_implementation_name_matches_what_is_importable():
    if os.environ.get("SPAMNB_PUREPYTHON", "") not in ("", "0") or _kernels is None:
        # forced or missing: the reference is the default
        assert kernels.IMPLEMENTATION == "numpy"
    else:
        assert kernels.IMPLEMENTATION == "cython"


def test_importing_the_extension_does_not_import_numpy():
    import subprocess
    import sys

    code = "import sys, spamnb.bayes._kernels; print('numpy' in sys.modules)"
    if _kernels is None:
        pytest.skip("spamnb.bayes._kernels not built")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert result.stdout.strip() == "False"


def random_model(rng, n_classes, n_features, with_inf=False):
    log_prob = np.log(rng.dirichlet(np.ones(n_features), size=n_classes))
    if with_inf:
        log_prob[rng.random(log_prob.shape) < 0.2] = -np.inf
    prior = np.log(rng.dirichlet(np.ones(n_classes)))
    return log_prob, prior


def dense_jll(dense, log_prob, prior):
    """Closed form: prior[c] + sum over the non-zero x_j of x_j * log_prob[c, j]."""
    out = np.tile(prior, (dense.shape[0], 1)).astype(np.float64)
    for r in range(dense.shape[0]):
        nz = np.flatnonzero(dense[r])
        for c in range(log_prob.shape[0]):
            out[r, c] += np.sum(dense[r, nz].astype(np.float64) * log_prob[c, nz])
    return out


def random_counts(rng, n_samples, n_features, density=0.3, dtype=np.float64):
    dense = rng.integers(1, 6, size=(n_samples, n_features)) * (rng.random((n_samples, n_features)) < density)
    return dense.astype(dtype)


def in_format(dense, fmt, index_dtype, data_dtype):
    if fmt == "dense":
        return dense.astype(data_dtype)
    X = sp.csr_matrix(dense.astype(data_dtype))
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    if fmt == "csc":
        X = X.tocsc()
        X.indices = X.indices.astype(index_dtype)
        X.indptr = X.indptr.astype(index_dtype)
    elif fmt == "coo":
        X = X.tocoo()
        X.row = X.row.astype(index_dtype)
        X.col = X.col.astype(index_dtype)
    return X


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "dense"])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("data_dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, bool])
def test_jll_equals_closed_form_for_every_format_and_dtype(implementation, fmt, index_dtype, data_dtype):
    for n_classes in (1, 2, 3, 6, 7, 20, 70):   # every code path (in one test: 7 x 96 cases of a few ms each)
        rng = np.random.default_rng(n_classes)
        dense = random_counts(rng, 17, 11).astype(data_dtype)
        log_prob, prior = random_model(rng, n_classes, 11)
        expected = dense_jll(dense, log_prob, prior)
        got = kernels.joint_log_likelihood(in_format(dense, fmt, index_dtype, data_dtype), log_prob, prior,
                                           implementation=implementation)
        assert got.dtype == np.float64 and got.shape == (17, n_classes), n_classes
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=f"n_classes={n_classes}")


@settings(max_examples=60, deadline=None)
@given(
    n_samples=st.integers(0, 12),
    n_features=st.integers(1, 15),
    n_classes=st.integers(1, 9),
    density=st.floats(0, 1),
    seed=st.integers(0, 2**32 - 1),
    with_inf=st.booleans(),
    float32=st.booleans(),
)
def test_compiled_equals_reference(n_samples, n_features, n_classes, density, seed, with_inf, float32):
    if _kernels is None:
        pytest.skip("spamnb.bayes._kernels not built")
    rng = np.random.default_rng(seed)
    dense = random_counts(rng, n_samples, n_features, density, np.float32 if float32 else np.float64)
    log_prob, prior = random_model(rng, n_classes, n_features, with_inf)
    X = sp.csr_matrix(dense)
    compiled = kernels.joint_log_likelihood(X, log_prob, prior, implementation="cython")
    reference = kernels.joint_log_likelihood(X, log_prob, prior, implementation="numpy")
    assert not np.any(np.isnan(compiled))
    np.testing.assert_allclose(compiled, reference, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(np.isneginf(compiled), np.isneginf(reference))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_stored_zeros_are_absent_so_zero_times_minus_inf_is_not_nan(implementation):
    log_prob = np.array([[0.0, -np.inf, np.log(0.5)], [np.log(0.5), np.log(0.25), np.log(0.25)]])
    prior = np.log([0.5, 0.5])
    # row 0 stores an explicit zero for the -inf feature; row 1 really has it
    X = sp.csr_matrix((np.array([2.0, 0.0, 1.0]), np.array([0, 1, 1]), np.array([0, 2, 3])), shape=(2, 3))
    assert X.nnz == 3
    got = kernels.joint_log_likelihood(X, log_prob, prior, implementation=implementation)
    assert np.isfinite(got[0]).all()
    np.testing.assert_allclose(got[0], [np.log(0.5), np.log(0.5) + 2 * np.log(0.5)])
    assert got[1, 0] == -np.inf and got[1, 1] == pytest.approx(np.log(0.5) + np.log(0.25))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_fewer_columns_than_features_count_as_zeros(implementation):
    rng = np.random.default_rng(3)
    log_prob, prior = random_model(rng, 2, 10)
    dense = random_counts(rng, 5, 6)
    padded = np.hstack([dense, np.zeros((5, 4))])
    got = kernels.joint_log_likelihood(sp.csr_matrix(dense), log_prob, prior, implementation=implementation)
    np.testing.assert_allclose(got, dense_jll(padded, log_prob, prior), rtol=1e-12)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_empty_rows_and_no_rows(implementation):
    log_prob, prior = random_model(np.random.default_rng(0), 3, 4)
    got = kernels.joint_log_likelihood(sp.csr_matrix((3, 4)), log_prob, prior, implementation=implementation)
    np.testing.assert_array_equal(got, np.tile(prior, (3, 1)))
    assert kernels.joint_log_likelihood(sp.csr_matrix((0, 4)), log_prob, prior,
                                        implementation=implementation).shape == (0, 3)


def test_as_csr_does_not_copy_acceptable_csr():
    X = sp.csr_matrix(np.eye(3))
    assert kernels.as_csr(X) is X
    X32 = sp.csr_matrix(np.eye(3, dtype=np.float32))
    assert kernels.as_csr(X32) is X32
    Xi = sp.csr_matrix(np.eye(3, dtype=np.int64))
    converted = kernels.as_csr(Xi)
    assert converted.data.dtype == np.float64
    assert np.shares_memory(converted.indices, Xi.indices)  # only the values were converted


def test_as_csr_unifies_mixed_index_dtypes():
    X = sp.csr_matrix(np.eye(3))
    X.indices = X.indices.astype(np.int64)
    X.indptr = X.indptr.astype(np.int32)
    converted = kernels.as_csr(X)
    assert converted.indices.dtype == converted.indptr.dtype == np.int64


def test_works_on_plain_buffers_without_numpy_arrays():
    from array import array

    if _kernels is None:
        pytest.skip("spamnb.bayes._kernels not built")
    indptr = array("i", [0, 2, 3])
    indices = array("i", [0, 2, 1])
    data = array("d", [1.0, 2.0, 3.0])
    by_feature = array("d", [np.log(0.5), np.log(0.2), np.log(0.25), np.log(0.3), np.log(0.25), np.log(0.5)])
    prior = array("d", [np.log(0.4), np.log(0.6)])
    out = np.zeros((2, 2))
    code, position = _kernels.joint_log_likelihood_csr(indptr, indices, data, memoryview(by_feature).cast("B").cast("d", (3, 2)), prior, out)
    assert (code, position) == (0, -1)
    expected = [[np.log(0.4) + np.log(0.5) + 2 * np.log(0.25), np.log(0.6) + np.log(0.2) + 2 * np.log(0.5)],
                [np.log(0.4) + 3 * np.log(0.25), np.log(0.6) + 3 * np.log(0.3)]]
    np.testing.assert_allclose(out, expected)


# -- validation: ValueError, never a crash ----------------------------------

def raw_csr(data, indices, indptr, shape):
    """A CSR matrix with exactly these arrays (no scipy checks)."""
    X = sp.csr_matrix(shape, dtype=np.float64)
    X.data = np.asarray(data, dtype=np.float64)
    X.indices = np.asarray(indices, dtype=np.int32)
    X.indptr = np.asarray(indptr, dtype=np.int32)
    return X


MODEL = (np.log(np.full((2, 4), 0.25)), np.log([0.5, 0.5]))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    "X, message",
    [
        (raw_csr([1.0], [4], [0, 1, 1], (2, 4)), "outside"),
        (raw_csr([1.0], [-1], [0, 1, 1], (2, 4)), "outside"),
        (raw_csr([1.0], [2_000_000_000], [0, 1, 1], (2, 4)), "outside"),
        (raw_csr([1.0, 1.0], [0, 1], [0, 2, 1], (2, 4)), "decreases"),
        (raw_csr([1.0], [0], [0, 1, 5], (2, 4)), "ends at"),
        (raw_csr([1.0], [0], [1, 1, 1], (2, 4)), "start at 0"),
        (raw_csr([1.0], [0], [0, 1], (2, 4)), "shape"),
        (raw_csr([-1.0], [0], [0, 1, 1], (2, 4)), "negative"),
        (raw_csr([np.nan], [0], [0, 1, 1], (2, 4)), "not finite"),
        (raw_csr([np.inf], [0], [0, 1, 1], (2, 4)), "not finite"),
        (np.array([[1.0, -2.0, 0.0, 0.0]]), "negative"),
        (np.ones((2, 5)), "features"),
        (np.ones(4), "2-D"),
        (np.array([["a", "b", "c", "d"]]), "numbers"),
    ],
)
def test_wrapper_rejects_bad_input(implementation, X, message):
    with pytest.raises(ValueError, match=message):
        kernels.joint_log_likelihood(X, *MODEL, implementation=implementation)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_wrapper_rejects_bad_model_shapes(implementation):
    X = np.ones((1, 4))
    log_prob, prior = MODEL
    with pytest.raises(ValueError, match="class_log_prior"):
        kernels.joint_log_likelihood(X, log_prob, prior[:1], implementation=implementation)
    with pytest.raises(ValueError, match="2-D"):
        kernels.joint_log_likelihood(X, log_prob[0], prior, implementation=implementation)


def test_kernel_rejects_inconsistent_shapes_directly():
    if _kernels is None:
        pytest.skip("spamnb.bayes._kernels not built")
    indptr = np.array([0, 1], dtype=np.int32)
    indices = np.array([0], dtype=np.int32)
    data = np.array([1.0])
    by_feature = np.zeros((4, 2))
    with pytest.raises(ValueError):
        _kernels.joint_log_likelihood_csr(indptr, indices, data, by_feature, np.zeros(2), np.empty((2, 2)))
    with pytest.raises(ValueError):
        _kernels.joint_log_likelihood_csr(np.array([0, 5], dtype=np.int32), indices, data, by_feature, np.zeros(2),
                                          np.empty((1, 2)))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_check_csr_accepts_valid_and_rejects_invalid(implementation):
    kernels.check_csr(raw_csr([1.0, 2.0], [0, 3], [0, 1, 2], (2, 4)), implementation=implementation)
    with pytest.raises(ValueError, match="outside"):
        kernels.check_csr(raw_csr([1.0, 2.0], [0, 3], [0, 1, 2], (2, 4)), 3, implementation=implementation)
    with pytest.raises(ValueError, match="negative"):
        kernels.check_csr(raw_csr([1.0, -2.0], [0, 3], [0, 1, 2], (2, 4)), implementation=implementation)


# -- counting ----------------------------------------------------------------

@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "dense"])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("data_dtype", [np.float32, np.float64, np.int64])
def test_count_features_equals_closed_form(implementation, fmt, index_dtype, data_dtype):
    rng = np.random.default_rng(7)
    dense = random_counts(rng, 30, 9)
    row_class = rng.integers(0, 3, 30)
    weights = rng.integers(0, 4, 30).astype(np.float64)
    expected = np.zeros((3, 9))
    for r in range(30):
        expected[row_class[r]] += weights[r] * dense[r]
    got = kernels.count_features(in_format(dense, fmt, index_dtype, data_dtype), row_class, 3, weights,
                                 implementation=implementation)
    np.testing.assert_array_equal(got, expected)
    unweighted = kernels.count_features(in_format(dense, fmt, index_dtype, data_dtype), row_class, 3,
                                        implementation=implementation)
    np.testing.assert_array_equal(unweighted, np.stack([dense[row_class == c].sum(axis=0) for c in range(3)]))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_count_features_rejects_bad_input(implementation):
    X = np.ones((2, 3))
    with pytest.raises(ValueError, match="row_class"):
        kernels.count_features(X, [0, 2], 2, implementation=implementation)
    with pytest.raises(ValueError, match="row_class"):
        kernels.count_features(X, [0], 2, implementation=implementation)
    with pytest.raises(ValueError, match="sample_weight must be finite"):
        kernels.count_features(X, [0, 1], 2, [1.0, -1.0], implementation=implementation)
    with pytest.raises(ValueError, match="negative"):
        kernels.count_features(-X, [0, 1], 2, implementation=implementation)
    with pytest.raises(ValueError, match="outside"):
        kernels.count_features(raw_csr([1.0], [7], [0, 1, 1], (2, 3)), [0, 1], 2, implementation=implementation)


def test_reference_module_matches_scipy_product():
    rng = np.random.default_rng(11)
    X = sp.csr_matrix(random_counts(rng, 20, 8))
    log_prob, prior = random_model(rng, 2, 8)
    np.testing.assert_allclose(_reference.joint_log_likelihood(X, log_prob, prior), X.toarray() @ log_prob.T + prior)


def test_missing_extension_falls_back_to_reference_with_one_warning():
    import subprocess
    import sys

    code = """
import sys, warnings
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "spamnb.bayes._kernels":
            raise ImportError("blocked for the test")
sys.meta_path.insert(0, Block())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import spamnb.bayes.kernels as k
    import importlib; importlib.import_module("spamnb.bayes.kernels")
import numpy as np
jll = k.joint_log_likelihood(np.ones((1, 2)), np.log([[0.5, 0.5]]), np.zeros(1))
print(k.IMPLEMENTATION, sum("could not be imported" in str(w.message) for w in caught), jll[0, 0])
"""
    env = {key: value for key, value in os.environ.items() if key != "SPAMNB_PUREPYTHON"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    implementation, n_warnings, value = result.stdout.split()
    assert implementation == "numpy" and n_warnings == "1"
    assert float(value) == pytest.approx(2 * np.log(0.5))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_read_only_buffers_are_accepted(implementation):
    rng = np.random.default_rng(8)
    dense = random_counts(rng, 6, 5)
    X = sp.csr_matrix(dense)
    for array in (X.data, X.indices, X.indptr):
        array.flags.writeable = False
    log_prob, prior = random_model(rng, 2, 5)
    log_prob.flags.writeable = False
    prior.flags.writeable = False
    got = kernels.joint_log_likelihood(X, log_prob, prior, implementation=implementation)
    np.testing.assert_allclose(got, dense_jll(dense, log_prob, prior), rtol=1e-12)
    counts = kernels.count_features(X, [0, 1, 0, 1, 0, 1], 2, implementation=implementation)
    np.testing.assert_array_equal(counts, [dense[0::2].sum(axis=0), dense[1::2].sum(axis=0)])


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_count_features_into_out_adds_in_place_or_leaves_it_unchanged(implementation):
    rng = np.random.default_rng(9)
    dense = random_counts(rng, 8, 5)
    row_class = np.arange(8) % 2
    out = np.full((2, 7), 1.0)
    result = kernels.count_features(dense, row_class, 2, out=out, implementation=implementation)
    assert result is out
    np.testing.assert_array_equal(out[:, :5], 1.0 + np.stack([dense[0::2].sum(axis=0), dense[1::2].sum(axis=0)]))
    np.testing.assert_array_equal(out[:, 5:], 1.0)
    before = out.copy()
    bad = raw_csr([1.0, 2.0, -3.0], [0, 1, 2], [0, 2, 3], (2, 5))   # first row valid, second negative
    with pytest.raises(ValueError, match="negative"):
        kernels.count_features(bad, [0, 1], 2, out=out, implementation=implementation)
    np.testing.assert_array_equal(out, before)
    for wrong in (np.zeros((2, 4)), np.zeros((3, 7)), np.zeros((2, 7), dtype=np.float32), np.zeros((7, 2)).T):
        with pytest.raises(ValueError, match="out must be"):
            kernels.count_features(dense, row_class, 2, out=wrong, implementation=implementation)


def test_raw_kernels_refuse_a_decreasing_indptr_themselves():
    # indptr starts at 0 and ends within the data, but row 0 claims 100 non-zeros:
    # the compiled functions must refuse it even when called directly
    if _kernels is None:
        pytest.skip("spamnb.bayes._kernels not built")
    indptr = np.array([0, 100, 2], dtype=np.int64)
    indices = np.array([0, 1], dtype=np.int64)
    data = np.array([1.0, 1.0])
    code, position = _kernels.joint_log_likelihood_csr(indptr, indices, data, np.zeros((4, 2)), np.zeros(2),
                                                       np.empty((2, 2)))
    assert code == kernels._INDPTR_DECREASING and position == 0
    code, position = _kernels.count_features_csr(indptr, indices, data, np.zeros(2, dtype=np.int64), np.ones(2),
                                                 np.zeros((1, 4)))
    assert code == kernels._INDPTR_DECREASING and position == 0
    code, position = _kernels.check_csr(indptr, indices, data, 4)
    assert code == kernels._INDPTR_DECREASING and position == 1   # where it decreases
    with pytest.raises(ValueError):   # the last offset beyond the data
        _kernels.joint_log_likelihood_csr(np.array([0, 3], dtype=np.int64), indices, data, np.zeros((4, 2)),
                                          np.zeros(2), np.empty((1, 2)))


# ---------------------------------------------------------------------------- a journal's records and learns
def test_journal_records_takes_the_whole_records_and_stops_at_the_first_that_is_not():
    """``checks.journal_records`` (the journal's read, compiled): each record's
    length, place and checksum as ``persistence/journal`` writes them."""
    import struct

    from spamnb.bayes import checks

    head = bytes(range(8))
    payloads = [b"a" * 8, b"b" * 24, b"", b"d" * 72, b"c" * 16]   # checksums read in place: < 16, blocks, a tail
    data = bytearray(b"\0" * 48)
    for i, payload in enumerate(payloads):
        first = struct.pack("<II", len(payload), i)
        data += first + struct.pack("<Q", checks.checksum64(head + first + payload)) + payload
    spans, end = checks.journal_records(bytes(data), head, 48)
    assert [bytes(data[a:b]) for a, b in spans] == payloads and end == len(data)
    damaged = bytearray(data)
    damaged[48 + 16 + 8 + 16 + 3] ^= 1   # a byte of the second payload
    assert checks.journal_records(bytes(damaged), head, 48) == (spans[:1], 48 + 16 + 8)
    assert checks.journal_records(bytes(data[:-1]), head, 48) == (spans[:-1], spans[-2][1])   # the last cut short
    assert checks.journal_records(bytes(data), bytes(8), 48) == ([], 48)   # another journal's head
    # with a view of the bytes: each payload's view of them (no copy), the same records
    views, view_end = checks.journal_records(bytes(data), head, 48, memoryview(data))
    assert [bytes(v) for v in views] == payloads and view_end == end and all(v.obj is data for v in views)
    assert checks.journal_records(bytes(damaged), head, 48, memoryview(damaged))[0][0].tobytes() == payloads[0]


def test_journal_rows_sieve_passes_hashes_that_share_a_wanted_ones_low_bits_to_the_table():
    """``journal_rows`` sieves a learn's hashes by their low bits before its table of
    the tokens asked: hashes that share those bits with a token asked (and only
    differ above them) are not counted for it, and the tokens asked get the counts,
    logs and first places they get asked among all the learns' tokens."""
    import tempfile
    from array import array

    from spamnb.bayes import token_kernels

    n_base, alpha, length = 8, 0.5, 3.0
    counts = array("d", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0] * 2)
    learns = [(0, [3, 3 + (1 << 16), 5, 3 + (1 << 40), 9]), (1, [9 + (1 << 17), 5, 5, 3]),
              (1, [1 << 16, 3 + (2 << 16), 9])]
    hashes = array("Q", [t for _c, h in learns for t in h])
    bounds = array("q", [0])
    for _c, h in learns:
        bounds.append(bounds[-1] + len(h))
    classes = bytes(c for c, _h in learns)
    everything = sorted(set(hashes))
    sums = array("d")
    for _c, h in learns:
        sums.extend(token_kernels.learn_sums(array("Q", h), token_kernels.TRANSFORMS[0], length))

    def rows(tokens):
        index = array("i", [t if t < n_base else -1 for t in tokens])
        logs, first = array("d", bytes(16 * len(tokens))), array("q", bytes(8 * len(tokens)))
        totals = token_kernels.journal_rows(f.fileno(), 0, n_base, hashes, bounds, classes, array("Q", tokens),
                                            index, token_kernels.TRANSFORMS[0], length, alpha, [10.0, 20.0], logs,
                                            first, None, sums)
        return list(totals), {t: (repr(logs[k]), repr(logs[len(tokens) + k]), first[k]) for k, t in enumerate(tokens)}

    with tempfile.TemporaryFile() as f:
        f.write(counts.tobytes())
        f.flush()
        all_totals, of_all = rows(everything)
        for asked in ([3], [5, 9], [3, 1 << 16], [3 + (2 << 16)]):
            totals, of_asked = rows(asked)
            assert totals == all_totals and of_asked == {t: of_all[t] for t in asked}
        assert of_all[3] != of_all[3 + (1 << 16)]   # the hashes that share 3's low bits are tokens of their own


def test_journal_rows_counts_a_learn_as_add_counts_split_does_for_the_tokens_asked():
    """``token_kernels.journal_rows`` against ``add_counts_split`` over rows as
    long as every token: the class totals and the logs of the tokens asked,
    to the bit; bounds, classes and indices out of range are refused."""
    import math
    import tempfile
    from array import array

    from spamnb.bayes import token_kernels

    rng = np.random.default_rng(5)
    n_base, alpha, length = 50, 0.5, 3.0
    counts = array("d", rng.integers(0, 5, 2 * n_base).astype(float))
    learns = [(int(rng.integers(0, 2)), rng.integers(1, 90, int(rng.integers(0, 40)))) for _ in range(12)]
    tokens = sorted({int(t) for _c, h in learns for t in h} | {1, 2, 77, 500})
    hashes = array("Q", [int(t) for _c, h in learns for t in h])
    bounds = array("q", [0])
    for _c, h in learns:
        bounds.append(bounds[-1] + len(h))
    classes = bytes(c for c, _h in learns)
    index = array("i", [t if t < n_base else -1 for t in tokens])   # hash t < 50: the file's feature t
    for transform in token_kernels.TRANSFORMS:
        # the replay's way: every token a row, the file's counts first
        ids = {t: k for k, t in enumerate(tokens)}
        rows = [array("d", [counts[c * n_base + t] if t < n_base else 0.0 for t in tokens]) for c in range(2)]
        logs = [array("d", [math.nan]) * len(tokens) for _ in range(2)]
        totals = [10.0, 20.0]
        for c, h in learns:
            idx = array("i", [ids[int(t)] for t in h])
            totals[c] += token_kernels.add_counts_split(idx, rows[c], array("d"), transform, 1.0, length, logs[c],
                                                        array("d"), alpha)[1]
        with tempfile.TemporaryFile() as f:
            f.write(counts.tobytes())
            f.flush()
            out, first = array("d", bytes(16 * len(tokens))), array("q", bytes(8 * len(tokens)))
            got = token_kernels.journal_rows(f.fileno(), 0, n_base, hashes, bounds, classes,
                                             array("Q", tokens), index, transform, length, alpha, [10.0, 20.0],
                                             out, first)
            assert list(got) == totals
            assert [repr(v) for v in out] == [repr(v) for v in logs[0] + logs[1]]
            seen = [hashes.index(t) if t in hashes else -1 for t in tokens]
            assert list(first) == seen
            # with the file's logs of the first n tokens: theirs where no learn changed them, merged in
            n = len(tokens) // 2
            file_logs = array("d", [-1.0 - k for k in range(2 * n)])
            merged = array("d", bytes(16 * len(tokens)))
            again = token_kernels.journal_rows(f.fileno(), 0, n_base, hashes, bounds, classes, array("Q", tokens),
                                               index, transform, length, alpha, [10.0, 20.0], merged, first,
                                               file_logs)
            assert list(again) == totals
            want = [file_logs[c * n + k] if k < n and math.isnan(logs[c][k]) else logs[c][k]
                    for c in range(2) for k in range(len(tokens))]
            assert [repr(v) for v in merged] == [repr(v) for v in want]
            assert any(math.isnan(logs[c][k]) for c in range(2) for k in range(n))   # some were the file's
            with pytest.raises(ValueError):   # more file logs than tokens asked
                token_kernels.journal_rows(f.fileno(), 0, n_base, hashes, bounds, classes, array("Q", tokens),
                                           index, transform, length, alpha, [10.0, 20.0], merged, first,
                                           array("d", [0.0]) * (2 * len(tokens) + 2))
            # each learn's sum and scale as a journal records them (learn_sums): the same bits without
            # counting those learns again; NaN (a learn recorded without them, here every third): counted
            sums = array("d")
            for k, (_c, h) in enumerate(learns):
                sums.extend(token_kernels.learn_sums(array("Q", [int(t) for t in h]), transform, length)
                            if k % 3 else (math.nan, math.nan))
            for lengths_of in (length, 0.0):   # and without length normalisation (scale 1)
                plain = array("d", bytes(16 * len(tokens)))
                want_totals = token_kernels.journal_rows(f.fileno(), 0, n_base, hashes, bounds, classes,
                                                         array("Q", tokens), index, transform, lengths_of, alpha,
                                                         [10.0, 20.0], plain, first)
                if lengths_of == 0.0:
                    sums = array("d")
                    for _c, h in learns:
                        sums.extend(token_kernels.learn_sums(array("Q", [int(t) for t in h]), transform, 0.0))
                summed, first_too = array("d", bytes(16 * len(tokens))), array("q", bytes(8 * len(tokens)))
                got = token_kernels.journal_rows(f.fileno(), 0, n_base, hashes, bounds, classes, array("Q", tokens),
                                                 index, transform, lengths_of, alpha, [10.0, 20.0], summed,
                                                 first_too, None, sums)
                assert list(got) == list(want_totals)
                assert [repr(v) for v in summed] == [repr(v) for v in plain]
                assert list(first_too) == seen
                # the learns' hashes where they lie (a journal's bytes read in place): apart, in another order
                spread, places = array("Q", [7]), array("q", [0]) * len(learns)
                for k in reversed(range(len(learns))):
                    places[k] = len(spread)
                    spread.extend(hashes[bounds[k]:bounds[k + 1]])
                    spread.append(0xFFFF)   # between them, a hash no learn has
                placed, first_placed = array("d", bytes(16 * len(tokens))), array("q", bytes(8 * len(tokens)))
                got = token_kernels.journal_rows(f.fileno(), 0, n_base, spread, bounds, classes, array("Q", tokens),
                                                 index, transform, lengths_of, alpha, [10.0, 20.0], placed,
                                                 first_placed, None, sums, places)
                assert list(got) == list(want_totals)
                assert [repr(v) for v in placed] == [repr(v) for v in plain]
                assert list(first_placed) == seen   # positions as if one after the other
                for bad_places in (places[:-1], array("q", [len(spread)]) + places[1:], array("q", [-1]) + places[1:]):
                    if bad_places[0] == len(spread) and bounds[1] == bounds[0]:
                        continue   # an empty learn at the end fits
                    with pytest.raises(ValueError):
                        token_kernels.journal_rows(f.fileno(), 0, n_base, spread, bounds, classes, array("Q", tokens),
                                                   index, transform, lengths_of, alpha, [10.0, 20.0], placed,
                                                   first_placed, None, sums, bad_places)
            with pytest.raises(ValueError):   # not two a learn
                token_kernels.journal_rows(f.fileno(), 0, n_base, hashes, bounds, classes, array("Q", tokens),
                                           index, transform, length, alpha, [10.0, 20.0], merged, first, None,
                                           sums[:-1])
            for bad_bounds, bad_classes, bad_index in (
                    (array("q", [0, 5, 3] + list(bounds[3:])), classes, index),
                    (bounds, bytes([2]) + classes[1:], index),
                    (bounds, classes, array("i", [n_base] + list(index[1:])))):
                with pytest.raises(ValueError):
                    token_kernels.journal_rows(f.fileno(), 0, n_base, hashes, bad_bounds, bad_classes,
                                               array("Q", tokens), bad_index, transform, length, alpha,
                                               [10.0, 20.0], out, first)
