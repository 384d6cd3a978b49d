"""Checked entry points to the compiled kernels (``spamnb.bayes._kernels``).

The compiled kernels run with bounds checks off, so everything they are given
is validated here or on their way through the data:

- here, before the call: the format (any scipy.sparse format or a dense 2-D
  array, converted to CSR once; no copy for a CSR matrix with int32/int64
  indices and float32/float64 values), the dtypes, every shape, and
  ``indptr`` (length, starts at 0, never decreases, ends within the data);
- in the kernel's single pass, before each use: every column index lies in
  ``[0, n_columns)`` and every value is finite and >= 0.  A violation stops
  the pass and becomes a ``ValueError`` here; nothing is read out of bounds.
  Checking inside the pass costs nothing measurable, where a separate
  validation pass over ``indices`` and ``data`` costs 45 to 60 % of the
  scoring time (docs/kernel.md).

Stored zeros are treated as absent, so a zero count never multiplies a
``-inf`` log-probability (alpha = 0, unseen word) into NaN.

``IMPLEMENTATION`` is ``"cython"`` when the extension is in use, ``"numpy"``
when the pure numpy/scipy reference (``spamnb.bayes._reference``) is: after a
one-time warning if the extension cannot be imported, or always with the
environment variable ``SPAMNB_PUREPYTHON=1``.  Each function also takes
``implementation=`` to pick one explicitly (the tests run both; the
environment variable only changes the default).
"""

from __future__ import annotations

import os
import warnings

import numpy as np

# scipy (~170 ms to import) and the numpy reference load on first use: a
# SpamFilter that only derives its log-probabilities from fitted counts
# (``spamnb train``: fit, then save) never needs a sparse matrix.
__all__ = ["IMPLEMENTATION", "as_csr", "check_csr", "joint_log_likelihood", "count_features"]

try:
    from spamnb.bayes import _kernels as _compiled
except ImportError as exc:  # pragma: no cover - depends on the build
    _compiled = None
    _import_error = exc

if os.environ.get("SPAMNB_PUREPYTHON", "") not in ("", "0"):
    IMPLEMENTATION = "numpy"
elif _compiled is None:  # pragma: no cover - depends on the build
    IMPLEMENTATION = "numpy"
    warnings.warn(
        f"spamnb.bayes._kernels could not be imported ({_import_error}); using the slower numpy reference. "
        "Build it with: python setup.py build_ext --inplace",
        RuntimeWarning,
        stacklevel=2,
    )
else:
    IMPLEMENTATION = "cython"

_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
_VALUE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

# error codes shared with spamnb/bayes/_kernels.pyx
_OK, _BAD_INDPTR_START, _INDPTR_DECREASING, _INDPTR_BEYOND_DATA, _COLUMN_OUT_OF_RANGE, _BAD_VALUE, _BAD_CLASS = range(7)


def _implementation(implementation):
    if implementation is None:
        implementation = IMPLEMENTATION
    if implementation not in ("cython", "numpy"):
        raise ValueError(f'implementation must be "cython" or "numpy", got {implementation!r}')
    if implementation == "cython" and _compiled is None:
        raise RuntimeError("the compiled kernels (spamnb.bayes._kernels) are not available")
    return implementation


def as_csr(X):
    """``X`` as a CSR matrix the kernels accept, converting only what must be.

    X : scipy.sparse matrix/array of any format, or a dense 2-D array-like.
    Returns a scipy CSR matrix/array whose ``indptr`` and ``indices`` share one
    dtype (int32 or int64) and whose ``data`` is float32 or float64 (integer
    and boolean counts become float64), all C-contiguous.  ``X`` itself is
    returned when it already qualifies.  Values and indices are not checked
    here (see :func:`check_csr`).
    """
    import scipy.sparse as sp

    if sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got {X.ndim}-D")
        if X.format != "csr":
            X = X.tocsr()
    else:
        array = np.asarray(X)
        if array.ndim != 2:
            raise ValueError(f"X must be a 2-D array of counts, got shape {array.shape}")
        if array.dtype.kind not in "biuf":
            raise ValueError(f"X must hold numbers, got dtype {array.dtype}")
        X = sp.csr_matrix(array)
    data, indices, indptr = X.data, X.indices, X.indptr
    if data.dtype.kind not in "biuf":
        raise ValueError(f"X must hold real numbers, got dtype {data.dtype}")
    new_data = data if data.dtype in _VALUE_DTYPES else data.astype(np.float64)
    new_data = np.ascontiguousarray(new_data)
    if indices.dtype == indptr.dtype and indices.dtype in _INDEX_DTYPES:
        new_indices, new_indptr = indices, indptr
    else:
        new_indices, new_indptr = indices.astype(np.int64), indptr.astype(np.int64)
    new_indices = np.ascontiguousarray(new_indices)
    new_indptr = np.ascontiguousarray(new_indptr)
    if new_data is data and new_indices is indices and new_indptr is indptr:
        return X
    # build without scipy's constructor, which may re-cast the index arrays
    out = X.__class__(X.shape, dtype=new_data.dtype)
    out.data, out.indices, out.indptr = new_data, new_indices, new_indptr
    return out


def _check_indptr(X):
    """Validate ``X.indptr`` (length, start, monotonic, end); O(n_rows)."""
    indptr = X.indptr
    n_rows = X.shape[0]
    if indptr.ndim != 1 or indptr.shape[0] != n_rows + 1:
        raise ValueError(f"indptr has shape {indptr.shape}, expected ({n_rows + 1},)")
    if indptr[0] != 0:
        raise ValueError(f"indptr must start at 0, starts at {indptr[0]}")
    steps = np.diff(indptr)
    if steps.size and steps.min() < 0:
        row = int(np.flatnonzero(steps < 0)[0])
        raise ValueError(f"indptr decreases at row {row}: {indptr[row]} then {indptr[row + 1]}")
    if indptr[-1] > X.indices.shape[0] or indptr[-1] > X.data.shape[0]:
        raise ValueError(
            f"indptr ends at {indptr[-1]} but there are {X.indices.shape[0]} indices and {X.data.shape[0]} values"
        )


def _raise_for(code, position, X, n_columns):
    if code == _OK:
        return
    if code == _COLUMN_OUT_OF_RANGE:
        raise ValueError(
            f"column index {X.indices[position]} (non-zero {position}) is outside [0, {n_columns})"
        )
    if code == _BAD_VALUE:
        value = X.data[position]
        what = "negative" if value < 0 else "not finite"
        raise ValueError(f"X holds a {what} value {value!r} (non-zero {position}); counts must be finite and >= 0")
    if code == _BAD_CLASS:
        raise ValueError(f"row {position} has a class index outside the classes")
    raise ValueError(f"malformed CSR matrix (indptr), error code {code} at {position}")


def check_csr(X, n_columns=None, *, implementation=None):
    """Validate a CSR matrix from :func:`as_csr` completely; raises ValueError.

    Checks ``indptr``, that every stored column index is in
    ``[0, n_columns)`` (default ``X.shape[1]``) and that every stored value is
    finite and >= 0.  One pass over the non-zeros.
    """
    implementation = _implementation(implementation)
    n_columns = X.shape[1] if n_columns is None else int(n_columns)
    _check_indptr(X)
    nnz = int(X.indptr[-1])
    if implementation == "cython":
        code, position = _compiled.check_csr(X.indptr, X.indices, X.data, n_columns)
        _raise_for(code, position, X, n_columns)
        return
    indices, data = X.indices[:nnz], X.data[:nnz]
    bad = (indices < 0) | (indices >= n_columns)
    if np.any(bad):
        _raise_for(_COLUMN_OUT_OF_RANGE, int(np.flatnonzero(bad)[0]), X, n_columns)
    bad = ~((data >= 0) & np.isfinite(data))
    if np.any(bad):
        _raise_for(_BAD_VALUE, int(np.flatnonzero(bad)[0]), X, n_columns)


def joint_log_likelihood(X, feature_log_prob, class_log_prior, *, implementation=None):
    """log P(c) + sum_j X[r, j] * log P(word j | c): float64, (n_samples, n_classes).

    X : sparse (any format) or dense, shape (n_samples, n_columns) with
        n_columns <= n_features (missing columns count as zeros); finite,
        >= 0.
    feature_log_prob : float64 (n_classes, n_features).  Passing the
        transpose of a C-contiguous (n_features, n_classes) array (what
        ``MultinomialNB.feature_log_prob_`` is) avoids a copy.
    class_log_prior : float64 (n_classes,).
    implementation : None (``IMPLEMENTATION``), "cython" or "numpy".
    """
    implementation = _implementation(implementation)
    X = as_csr(X)
    feature_log_prob = np.asarray(feature_log_prob, dtype=np.float64)
    class_log_prior = np.ascontiguousarray(class_log_prior, dtype=np.float64)
    if feature_log_prob.ndim != 2:
        raise ValueError(f"feature_log_prob must be 2-D (n_classes, n_features), got shape {feature_log_prob.shape}")
    n_classes, n_features = feature_log_prob.shape
    if n_classes < 1:
        raise ValueError("feature_log_prob must have at least one class")
    if class_log_prior.shape != (n_classes,):
        raise ValueError(f"class_log_prior has shape {class_log_prior.shape}, expected ({n_classes},)")
    if X.shape[1] > n_features:
        raise ValueError(f"X has {X.shape[1]} features, the model only {n_features}")
    _check_indptr(X)
    if implementation == "numpy":
        check_csr(X, X.shape[1], implementation="numpy")
        from spamnb.bayes import _reference

        return _reference.joint_log_likelihood(X, feature_log_prob, class_log_prior)
    by_feature = np.ascontiguousarray(feature_log_prob.T)  # no copy for an F-ordered table
    out = np.empty((X.shape[0], n_classes), dtype=np.float64)
    code, position = _compiled.joint_log_likelihood_csr(X.indptr, X.indices, X.data, by_feature, class_log_prior, out)
    _raise_for(code, position, X, X.shape[1])
    return out


def count_features(X, row_class, n_classes, row_weight=None, *, out=None, implementation=None):
    """Per-class weighted column sums of ``X``: float64, (n_classes, n_columns).

    ``counts[c, j] = sum over rows r with row_class[r] == c of
    row_weight[r] * X[r, j]``.
    X : sparse (any format) or dense (n_samples, n_columns), finite, >= 0.
    row_class : ints in [0, n_classes), shape (n_samples,).
    row_weight : None (all 1) or finite floats >= 0, shape (n_samples,).
    out : None, or a C-contiguous float64 array (n_classes, >= n_columns) to
        add the sums into, in place (and return).  Everything is validated
        before ``out`` is touched, so on error it is unchanged.
    """
    implementation = _implementation(implementation)
    X = as_csr(X)
    n_samples, n_columns = X.shape
    row_class = np.ascontiguousarray(row_class, dtype=np.int64).reshape(-1)
    if row_class.shape != (n_samples,):
        raise ValueError(f"row_class has shape {row_class.shape}, expected ({n_samples},)")
    if n_samples and (row_class.min() < 0 or row_class.max() >= n_classes):
        raise ValueError(f"row_class must lie in [0, {n_classes})")
    if row_weight is None:
        row_weight = np.ones(n_samples, dtype=np.float64)
    else:
        row_weight = np.ascontiguousarray(row_weight, dtype=np.float64).reshape(-1)
        if row_weight.shape != (n_samples,):
            raise ValueError(f"sample_weight has shape {row_weight.shape}, expected ({n_samples},)")
        if not np.all((row_weight >= 0) & np.isfinite(row_weight)):
            raise ValueError("sample_weight must be finite and >= 0")
    if out is not None:
        if (not isinstance(out, np.ndarray) or out.dtype != np.float64 or not out.flags.c_contiguous
                or not out.flags.writeable or out.ndim != 2 or out.shape[0] != n_classes
                or out.shape[1] < n_columns):
            raise ValueError(f"out must be a writable C-contiguous float64 array of shape ({n_classes}, >= {n_columns})")
        check_csr(X, n_columns, implementation=implementation)   # complete before the first write
    else:
        _check_indptr(X)
    if implementation == "numpy":
        from spamnb.bayes import _reference

        if out is None:
            check_csr(X, n_columns, implementation="numpy")
            return _reference.count_features(X, row_class, row_weight, n_classes)
        out[:, :n_columns] += _reference.count_features(X, row_class, row_weight, n_classes)
        return out
    counts = np.zeros((n_classes, n_columns), dtype=np.float64) if out is None else out
    code, position = _compiled.count_features_csr(X.indptr, X.indices, X.data, row_class, row_weight, counts)
    _raise_for(code, position, X, n_columns)
    return counts
