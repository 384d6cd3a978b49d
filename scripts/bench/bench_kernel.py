"""Benchmark the compiled scoring kernel on mail-shaped data (docs/kernel.md).

Data: a random CSR matrix shaped like a mail corpus: 200,000 documents x
500,000 features, 300 draws per document from a Zipf-like (s = 1,
log-uniform rank) column distribution, repeated columns merged (about 237
distinct words per document remain), counts geometric (p = 0.6), float64
values and int32 indices as scipy builds them.  Two classes.

Measured in one process, single-threaded (OMP/OPENBLAS/MKL threads = 1),
best of ``--repeats`` runs each:

- scoring: the compiled kernel (raw call, through ``spamnb.bayes.kernels``, and
  through ``MultinomialNB.predict_joint_log_proba``) against scipy's
  ``X @ feature_log_prob_.T + class_log_prior_``;
- the kernel's effective bandwidth (bytes of indptr + indices + data read per
  second) against a numpy copy and a numpy sum of as many bytes;
- a separate validation pass (``check_csr``), to show what checking indices
  and values inside the scoring pass saves;
- ``partial_fit`` throughput (non-zeros per second) with the compiled
  counting kernel and with the scipy reference;
- one message at a time: ``partial_fit`` and ``predict_joint_log_proba`` of
  a single row (the latter with the cached table, and right after learning,
  when the whole log-probability table is recomputed);
- peak memory: tracemalloc peak of each operation and the process's maximum
  resident set size.

With ``--layouts`` it also compiles (Cython, into a temporary directory) two
unchecked experimental variants of the scoring loop and times them on the
same data: the (n_features, n_classes) "feature-major" table the shipped
kernel uses against the model's natural (n_classes, n_features)
"class-major" one, each at several software-prefetch distances (0 = none).

Usage: python scripts/bench/bench_kernel.py [--quick] [--docs N] [--classes K] [--repeats N] [--float32] [--layouts]
(``--quick``: 20,000 documents, 3 repeats; a few seconds.)
"""

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402
import scipy  # noqa: E402
import scipy.sparse as sp  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from spamnb.bayes import kernels  # noqa: E402
from spamnb.bayes.multinomial import MultinomialNB  # noqa: E402


def mail_shaped_csr(n_docs, n_features, draws_per_doc, seed=0, dtype=np.float64):
    """Random word counts with a Zipf-like (s = 1) column law, sorted, merged."""
    rng = np.random.default_rng(seed)
    # rank = exp(U * log n) - 1: P(rank) ~ 1 / rank, i.e. Zipf's law with s = 1
    u = rng.random((n_docs, draws_per_doc), dtype=np.float32)
    columns = (np.exp(u * np.float32(np.log(n_features))) - 1).astype(np.int32)
    np.minimum(columns, n_features - 1, out=columns)
    columns.sort(axis=1)
    first = np.ones(columns.shape, dtype=bool)
    first[:, 1:] = columns[:, 1:] != columns[:, :-1]
    indptr = np.zeros(n_docs + 1, dtype=np.int32)
    np.cumsum(first.sum(axis=1), out=indptr[1:])
    indices = columns[first]
    data = rng.geometric(0.6, size=indices.shape[0]).astype(dtype)
    return sp.csr_matrix((data, indices, indptr), shape=(n_docs, n_features))


def best_of(repeats, function):
    """(best seconds, last result) over ``repeats`` calls."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def traced_peak(function):
    """Peak bytes allocated (tracemalloc) while ``function`` runs."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    function()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


LAYOUT_EXPERIMENT = r"""
# Experimental scoring loops for the layout/prefetch comparison (no checks).
from libc.stdint cimport int32_t

cdef extern from *:
    '''
    #define BENCH_PREFETCH(p) __builtin_prefetch((p), 0, 1)
    '''
    void BENCH_PREFETCH(const void* p) noexcept nogil

def feature_major(const int32_t[::1] indptr, const int32_t[::1] indices, const double[::1] data,
                  const double[:, ::1] by_feature, const double[::1] prior, double[:, ::1] out,
                  Py_ssize_t distance):
    cdef Py_ssize_t r, k, nnz = indptr[indptr.shape[0] - 1]
    cdef double acc0, acc1, x
    cdef int32_t j
    with nogil:
        for r in range(indptr.shape[0] - 1):
            acc0 = 0.0
            acc1 = 0.0
            for k in range(indptr[r], indptr[r + 1]):
                if distance and k + distance < nnz:
                    BENCH_PREFETCH(&by_feature[indices[k + distance], 0])
                x = data[k]
                j = indices[k]
                acc0 += x * by_feature[j, 0]
                acc1 += x * by_feature[j, 1]
            out[r, 0] = prior[0] + acc0
            out[r, 1] = prior[1] + acc1

def class_major(const int32_t[::1] indptr, const int32_t[::1] indices, const double[::1] data,
                const double[:, ::1] by_class, const double[::1] prior, double[:, ::1] out,
                Py_ssize_t distance):
    cdef Py_ssize_t r, k, nnz = indptr[indptr.shape[0] - 1]
    cdef double acc0, acc1, x
    cdef int32_t j
    with nogil:
        for r in range(indptr.shape[0] - 1):
            acc0 = 0.0
            acc1 = 0.0
            for k in range(indptr[r], indptr[r + 1]):
                if distance and k + distance < nnz:
                    BENCH_PREFETCH(&by_class[0, indices[k + distance]])
                    BENCH_PREFETCH(&by_class[1, indices[k + distance]])
                x = data[k]
                j = indices[k]
                acc0 += x * by_class[0, j]
                acc1 += x * by_class[1, j]
            out[r, 0] = prior[0] + acc0
            out[r, 1] = prior[1] + acc1
"""


def build_layout_experiment():
    """Compile LAYOUT_EXPERIMENT in a temporary directory and import it."""
    import importlib.util
    import subprocess
    import tempfile

    directory = tempfile.mkdtemp(prefix="spamnb-bench-")
    with open(os.path.join(directory, "bench_layouts.pyx"), "w") as handle:
        handle.write(LAYOUT_EXPERIMENT)
    with open(os.path.join(directory, "setup.py"), "w") as handle:
        handle.write(
            "from setuptools import Extension, setup\n"
            "from Cython.Build import cythonize\n"
            "setup(ext_modules=cythonize([Extension('bench_layouts', ['bench_layouts.pyx'], "
            "extra_compile_args=['-O3'])], compiler_directives={'language_level': 3, "
            "'boundscheck': False, 'wraparound': False, 'initializedcheck': False}))\n"
        )
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=directory, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    library = next(name for name in os.listdir(directory) if name.startswith("bench_layouts") and name.endswith(".so"))
    spec = importlib.util.spec_from_file_location("bench_layouts", os.path.join(directory, library))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20,000 documents, 3 repeats")
    parser.add_argument("--docs", type=int, default=None)
    parser.add_argument("--features", type=int, default=500_000)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--float32", action="store_true", help="float32 values instead of float64")
    parser.add_argument("--classes", type=int, default=2, help="number of classes (default 2)")
    parser.add_argument("--layouts", action="store_true", help="also time experimental layout/prefetch variants")
    args = parser.parse_args(argv)
    n_docs = args.docs or (20_000 if args.quick else 200_000)
    repeats = args.repeats or (3 if args.quick else 5)

    if kernels.IMPLEMENTATION != "cython":
        sys.exit("the compiled kernel is not in use: build it (SPAMNB_EXTENSIONS=_kernels python setup.py build_ext --inplace)")
    from spamnb.bayes import _kernels

    print(f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
          f"{platform.processor() or platform.machine()}, threads=1")
    start = time.perf_counter()
    X = mail_shaped_csr(n_docs, args.features, args.draws, dtype=np.float32 if args.float32 else np.float64)
    y = np.random.default_rng(1).integers(0, args.classes, n_docs)
    classes = list(range(args.classes))
    nnz = X.nnz
    print(f"data: {n_docs:,} docs x {args.features:,} features, {nnz:,} non-zeros "
          f"({nnz / n_docs:.1f} per doc), values {X.data.dtype}, indices {X.indices.dtype}; "
          f"generated in {time.perf_counter() - start:.1f} s")

    # -- learning -------------------------------------------------------------
    t_fit, model = best_of(repeats, lambda: MultinomialNB().partial_fit(X, y, classes=classes))
    t_ref_fit, _ = best_of(max(1, repeats // 2), lambda: kernels.count_features(X, y, args.classes, implementation="numpy"))
    t_count, _ = best_of(repeats, lambda: kernels.count_features(X, y, args.classes))
    print(f"partial_fit (compiled counting): {t_fit * 1e3:8.1f} ms  {nnz / t_fit / 1e6:7.1f} M non-zeros/s")
    print(f"  count_features compiled:       {t_count * 1e3:8.1f} ms  {nnz / t_count / 1e6:7.1f} M non-zeros/s")
    print(f"  count_features scipy reference:{t_ref_fit * 1e3:8.1f} ms  {nnz / t_ref_fit / 1e6:7.1f} M non-zeros/s")

    # -- scoring --------------------------------------------------------------
    log_prob = model.feature_log_prob_          # (2, n_features), feature-major in memory
    log_prior = model.class_log_prior_
    by_feature = log_prob.T                     # C-contiguous (n_features, n_classes), no copy
    out = np.empty((n_docs, args.classes))

    t_scipy, scipy_jll = best_of(repeats, lambda: X @ log_prob.T + log_prior)
    t_raw, _ = best_of(repeats, lambda: _kernels.joint_log_likelihood_csr(X.indptr, X.indices, X.data, by_feature,
                                                                         log_prior, out))
    t_wrapper, kernel_jll = best_of(repeats, lambda: kernels.joint_log_likelihood(X, log_prob, log_prior))
    t_model, _ = best_of(repeats, lambda: model.predict_joint_log_proba(X))
    t_check, _ = best_of(repeats, lambda: _kernels.check_csr(X.indptr, X.indices, X.data, args.features))
    difference = np.max(np.abs(kernel_jll - scipy_jll) / np.maximum(1.0, np.abs(scipy_jll)))

    n_bytes = X.indptr.nbytes + X.indices.nbytes + X.data.nbytes
    source = np.ones(n_bytes // 8)
    target = np.empty_like(source)
    t_copy, _ = best_of(repeats, lambda: np.copyto(target, source))
    t_sum, _ = best_of(repeats, lambda: source.sum())

    def row(name, seconds):
        return (f"{name:<42}{seconds * 1e3:8.1f} ms  {nnz / seconds / 1e6:7.1f} M nnz/s  "
                f"{n_bytes / seconds / 1e9:6.2f} GB/s  {t_scipy / seconds:5.2f}x scipy")

    print(f"scoring, {args.classes} classes ({n_bytes / 1e6:.0f} MB of indptr+indices+data), best of {repeats}:")
    print(row("scipy X @ feature_log_prob_.T + prior", t_scipy))
    print(row("kernel, raw call (_kernels)", t_raw))
    print(row("kernel via spamnb.bayes.kernels (checked)", t_wrapper))
    print(row("MultinomialNB.predict_joint_log_proba", t_model))
    print(row("separate check_csr pass (not used)", t_check))
    print(f"{'numpy copy of as many bytes':<42}{t_copy * 1e3:8.1f} ms  {n_bytes / t_copy / 1e9:6.2f} GB/s read "
          f"(+ as many written)")
    print(f"{'numpy sum over as many bytes':<42}{t_sum * 1e3:8.1f} ms  {n_bytes / t_sum / 1e9:6.2f} GB/s read")
    print(f"max relative difference kernel vs scipy: {difference:.2e}")

    if args.layouts:
        if X.data.dtype != np.float64 or X.indices.dtype != np.int32 or args.classes != 2:
            sys.exit("--layouts needs 2 classes, float64 values and int32 indices")
        layouts = build_layout_experiment()
        by_class = np.ascontiguousarray(log_prob)
        print("layout experiment (unchecked loops, same data):")
        for distance in (0, 64, 256):
            for name, table in (("feature_major", by_feature), ("class_major", by_class)):
                seconds, _ = best_of(repeats, lambda: getattr(layouts, name)(X.indptr, X.indices, X.data, table,
                                                                             log_prior, out, distance))
                print(row(f"{name}, prefetch distance {distance}", seconds))

    # -- one message at a time ------------------------------------------------
    one_x, one_y = X[:1], y[:1]
    calls = 200

    def per_call(function):
        seconds, _ = best_of(repeats, lambda: [function() for _ in range(calls)])
        return seconds / calls

    t_one_fit = per_call(lambda: model.partial_fit(one_x, one_y))
    t_one_score = per_call(lambda: model.predict_joint_log_proba(one_x))
    t_relearn = per_call(lambda: (model.partial_fit(one_x, one_y), model.predict_joint_log_proba(one_x)))
    print(f"one message ({one_x.nnz} non-zeros): partial_fit {t_one_fit * 1e3:.3f} ms, "
          f"predict_joint_log_proba {t_one_score * 1e3:.3f} ms (cached table), "
          f"partial_fit then predict {t_relearn * 1e3:.3f} ms (table recomputed)")

    # -- memory ---------------------------------------------------------------
    peaks = {
        "partial_fit": traced_peak(lambda: MultinomialNB().partial_fit(X, y, classes=classes)),
        "kernels.joint_log_likelihood": traced_peak(lambda: kernels.joint_log_likelihood(X, log_prob, log_prior)),
        "scipy X @ W + prior": traced_peak(lambda: X @ log_prob.T + log_prior),
    }
    for name, peak in peaks.items():
        print(f"tracemalloc peak, {name:<30}{peak / 1e6:8.1f} MB")
    print(f"process max RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB "
          f"(the data alone: {n_bytes / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
