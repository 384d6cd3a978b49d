"""The token hash and the token strings' UTF-8 (inline C, cimported by
``_tokenize``; no module of its own at run time).

``hash_token(s)`` (spamnb.mail._mail, its _tokenize.pxi) is FNV-1a 64 over the string's code
points (each code point is one 32-bit unit: ``h ^= cp; h *= 0x100000001b3``
from the offset basis 0xcbf29ce484222325), followed by splitmix64's finaliser
(``_finish``); see ``_tokenize``'s docstring.
"""

from cpython.unicode cimport PyUnicode_DATA, PyUnicode_KIND, PyUnicode_READ
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from *:
    """
    #define SPAMNB_FNV_OFFSET 0xcbf29ce484222325ULL
    #define SPAMNB_FNV_PRIME 0x100000001b3ULL
    """
    const uint64_t _FNV_OFFSET "SPAMNB_FNV_OFFSET"
    const uint64_t _FNV_PRIME "SPAMNB_FNV_PRIME"


cdef inline uint64_t _finish(uint64_t z) noexcept nogil:
    """splitmix64's finaliser; 0 becomes 1 (0 marks an empty hash slot)."""
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL
    z = z ^ (z >> 31)
    return z if z != 0 else 1


cdef inline uint64_t _feed(uint64_t h, str s, Py_ssize_t start, Py_ssize_t end):
    """FNV-1a state after feeding the code points ``s[start:end]``."""
    cdef int kind = PyUnicode_KIND(s)
    cdef void *data = PyUnicode_DATA(s)
    cdef Py_ssize_t i
    for i in range(start, end):
        h = (h ^ <uint64_t>PyUnicode_READ(kind, data, i)) * _FNV_PRIME
    return h


cdef inline uint64_t _feed_data(uint64_t h, int kind, const void *data, Py_ssize_t start,
                                Py_ssize_t end) noexcept nogil:
    """``_feed`` of a string's ``kind`` and ``data`` (PyUnicode_KIND, PyUnicode_DATA): a loop
    for each kind, no branch on the kind a character."""
    cdef Py_ssize_t i
    cdef const uint8_t *one
    cdef const uint16_t *two
    cdef const uint32_t *four
    if kind == 1:
        one = <const uint8_t *>data
        for i in range(start, end):
            h = (h ^ one[i]) * _FNV_PRIME
    elif kind == 2:
        two = <const uint16_t *>data
        for i in range(start, end):
            h = (h ^ two[i]) * _FNV_PRIME
    else:
        four = <const uint32_t *>data
        for i in range(start, end):
            h = (h ^ four[i]) * _FNV_PRIME
    return h


cdef inline uint64_t _feed_ascii(uint64_t h, const char *s) noexcept nogil:
    while s[0] != 0:
        h = (h ^ <uint8_t>s[0]) * _FNV_PRIME
        s += 1
    return h


cdef inline uint64_t _feed_int(uint64_t h, int32_t value) noexcept nogil:
    """FNV-1a state after feeding the decimal digits of ``value >= 0``."""
    cdef char digits[16]
    cdef int n = 0
    if 0 <= value < 10:   # one digit (a word pair's distance, most often): no loop
        return (h ^ <uint64_t>(48 + value)) * _FNV_PRIME
    while value > 0 and n < 16:
        digits[n] = <char>(48 + value % 10)
        value = value // 10
        n += 1
    while n > 0:
        n -= 1
        h = (h ^ <uint8_t>digits[n]) * _FNV_PRIME
    return h


cdef inline Py_ssize_t _n_digits(Py_ssize_t value) noexcept nogil:
    cdef Py_ssize_t n = 1
    while value >= 10:
        value //= 10
        n += 1
    return n


cdef inline Py_ssize_t _write_digits(Py_ssize_t value, char *out, Py_ssize_t at) noexcept nogil:
    """Write ``value`` (>= 0) in decimal at ``out + at``; returns the end."""
    cdef Py_ssize_t n = _n_digits(value), k
    for k in range(n - 1, -1, -1):
        out[at + k] = <char>(48 + value % 10)
        value //= 10
    return at + n


cdef inline Py_ssize_t _utf8_size(str s, Py_ssize_t start, Py_ssize_t end):
    """Bytes of ``s[start:end]`` in UTF-8 (a surrogate takes 3, as with "surrogatepass")."""
    cdef int kind = PyUnicode_KIND(s)
    cdef void *data = PyUnicode_DATA(s)
    cdef Py_ssize_t i, size = 0
    cdef uint32_t c
    for i in range(start, end):
        c = <uint32_t>PyUnicode_READ(kind, data, i)
        size += 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4
    return size


cdef inline Py_ssize_t _utf8_write(str s, Py_ssize_t start, Py_ssize_t end, char *out, Py_ssize_t at):
    """Write ``s[start:end]`` as UTF-8 at ``out + at``; returns the new end."""
    cdef int kind = PyUnicode_KIND(s)
    cdef void *data = PyUnicode_DATA(s)
    cdef Py_ssize_t i
    cdef uint32_t c
    for i in range(start, end):
        c = <uint32_t>PyUnicode_READ(kind, data, i)
        if c < 0x80:
            out[at] = <char>c
            at += 1
        elif c < 0x800:
            out[at] = <char>(0xC0 | (c >> 6))
            out[at + 1] = <char>(0x80 | (c & 0x3F))
            at += 2
        elif c < 0x10000:
            out[at] = <char>(0xE0 | (c >> 12))
            out[at + 1] = <char>(0x80 | ((c >> 6) & 0x3F))
            out[at + 2] = <char>(0x80 | (c & 0x3F))
            at += 3
        else:
            out[at] = <char>(0xF0 | (c >> 18))
            out[at + 1] = <char>(0x80 | ((c >> 12) & 0x3F))
            out[at + 2] = <char>(0x80 | ((c >> 6) & 0x3F))
            out[at + 3] = <char>(0x80 | (c & 0x3F))
            at += 4
    return at
