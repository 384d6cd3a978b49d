"""The CPython str API the compiled mail modules share (declarations and one
inline search): cimported by ``_headers``, ``_html``, ``_text`` and ``_mail``;
no module of its own at run time."""

from cpython.unicode cimport PyUnicode_READ
from libc.string cimport memchr

cdef extern from "Python.h":
    object PyUnicode_FromKindAndData(int kind, const void *buffer, Py_ssize_t size)
    object PyUnicode_FromOrdinal(int ordinal)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    object PyUnicode_Substring(object text, Py_ssize_t start, Py_ssize_t end)
    bint PyUnicode_IS_ASCII(object text)
    Py_UCS4 PyUnicode_MAX_CHAR_VALUE(object text)
    Py_ssize_t PyUnicode_Count(object text, object sub, Py_ssize_t start, Py_ssize_t end) except -1
    bint Py_UNICODE_ISSPACE(Py_UCS4 c)
    const Py_ssize_t PY_SSIZE_T_MAX
    enum: PyUnicode_4BYTE_KIND


cdef inline Py_ssize_t _find_char(int kind, const void *data, Py_UCS4 c, Py_ssize_t start,
                                  Py_ssize_t end) noexcept:
    """Index of the first ``c`` (ASCII) in data[start:end], or ``end``."""
    cdef const char *hit
    cdef Py_ssize_t i
    if start >= end:
        return end
    if kind == 1:
        hit = <const char *>memchr(<const char *>data + start, <int>c, <size_t>(end - start))
        return end if hit == NULL else hit - <const char *>data
    for i in range(start, end):
        if PyUnicode_READ(kind, data, i) == c:
            return i
    return end
