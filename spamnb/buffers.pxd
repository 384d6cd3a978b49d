"""A one-dimensional contiguous buffer taken without Cython's typed memoryviews.

A typed memoryview (``const double[::1]``) brings Cython's memoryview
utility code into its extension, and each extension that has it makes its
four types (``array``, ``memoryview``, ...) and registers them with
``collections.abc.Sequence`` when it is loaded (importing ``collections``
if nothing had: the first such extension of a cold ``spamnb classify``
did, before the standard library's ``array``, which registers itself with
``collections.abc`` too).  The extensions on that path
(``spamnb.mail._mail``, with the tokenizer's ``_tokenize.pxi``, and
``spamnb.bayes._score``, with ``_index.pxi`` and ``_checks.pxi``) take
their buffers with ``take`` instead and give them back with
``PyBuffer_Release``.  What they
accept is what the memoryview accepted: any object with the buffer
protocol (``bytes``, ``array.array``, ``mmap``, numpy), one-dimensional,
C-contiguous, of the item type asked for; anything else is a ValueError
(a read-only buffer where a writable one is asked: BufferError).

Only inline functions: cimporting this file imports no module at run time.
"""

from cpython.buffer cimport PyBUF_FORMAT, PyBUF_STRIDES, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer

# The kinds of item: the struct format characters each accepts, of the
# native size (the machine's: 'l' and 'L' are 8 bytes on LP64, 4 elsewhere).
cdef enum:
    SIGNED = 0      # b h i l q n
    UNSIGNED = 1    # B H I L Q N
    FLOAT = 2       # f d


cdef inline bint _kind_of(char code, int kind) noexcept:
    if kind == SIGNED:
        return code in b"bhilqn"
    if kind == UNSIGNED:
        return code in b"BHILQN"
    return code in b"fd"


cdef inline int take(Py_buffer *view, object obj, int kind, Py_ssize_t itemsize, bint writable,
                     const char *what) except -1:
    """Fill ``view`` with ``obj``'s buffer: one dimension, contiguous, items
    of ``itemsize`` bytes and of ``kind``; the caller releases it
    (``PyBuffer_Release``) once done.  ``what`` names the item type in the
    error (``"uint64_t"``)."""
    cdef const char *fmt
    cdef Py_ssize_t at = 0
    PyObject_GetBuffer(obj, view, PyBUF_STRIDES | PyBUF_FORMAT | (PyBUF_WRITABLE if writable else 0))
    fmt = view.format
    if fmt == NULL:
        fmt = "B"
    while fmt[at] in b"@=<":
        at += 1
    if view.ndim != 1:
        PyBuffer_Release(view)
        raise ValueError(f"Buffer has wrong number of dimensions (expected 1, got {view.ndim})")
    if (fmt[at] == 0 or fmt[at + 1] != 0 or not _kind_of(fmt[at], kind) or view.itemsize != itemsize):
        got = (<bytes>fmt).decode("ascii", "replace")
        PyBuffer_Release(view)
        raise ValueError(f"Buffer dtype mismatch, expected '{what.decode()}' but got '{got}'")
    if view.shape[0] > 1 and view.strides != NULL and view.strides[0] != itemsize:
        PyBuffer_Release(view)
        raise ValueError("Buffer not C contiguous.")
    return 0


cdef inline Py_ssize_t length_of(const Py_buffer *view) noexcept nogil:
    """The number of items of a buffer ``take`` filled."""
    return view.shape[0]


cdef inline void release(Py_buffer *views, int n) noexcept:
    """Release the first ``n`` of ``views`` (those ``take`` filled)."""
    cdef int k
    for k in range(n):
        PyBuffer_Release(&views[k])
