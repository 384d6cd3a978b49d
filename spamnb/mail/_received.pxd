"""The relay patterns of Received: fields (inline C, cimported by ``_tokenize``
for ``TokenStream.add_received``; no module of its own at run time)."""

from cpython.unicode cimport PyUnicode_READ
from libc.stdint cimport uint8_t


# -- Received: relays ---------------------------------------------------------
# The relay hosts and IPs of Received: fields were three re.findall passes
# and a tuple per match (5.3-5.7 us per corpus message with Received: fields);
# the scan below finds the same matches in one pass per pattern and pushes the
# tokens as slices of the text (1.8 us).  ASCII classes, as the patterns' re.ASCII: \w = [A-Za-z0-9_],
# \s = [ \t\n\r\f\v].
cdef inline bint _ascii_word(Py_UCS4 c) noexcept nogil:
    return (c >= 97 and c <= 122) or (c >= 65 and c <= 90) or (c >= 48 and c <= 57) or c == 95


cdef inline bint _host_char(Py_UCS4 c) noexcept nogil:
    return _ascii_word(c) or c == 45          # [\w-]


cdef inline bint _ascii_space(Py_UCS4 c) noexcept nogil:
    return c == 32 or (c >= 9 and c <= 13)


cdef inline Py_ssize_t _match_host(int kind, void *data, Py_ssize_t n, Py_ssize_t q, Py_ssize_t *last_two) noexcept:
    """End of ``(?:[\w-]+\.)*([\w-]+\.[a-z]{2,})\b`` matched at ``q`` as re does
    (the most labels first), or -1; ``last_two[0]`` receives the start of the
    group of the last two labels."""
    cdef Py_ssize_t e, a, start, previous = -1
    # walk the chain of dot-joined labels; at each label try it as the last one
    # (re's greedy star tries the longest chain first: remember the last success)
    cdef Py_ssize_t found = -1
    start = q
    while True:
        e = start
        while e < n and _host_char(PyUnicode_READ(kind, data, e)):
            e += 1
        if e == start:
            break                             # no label here: the chain has ended
        if previous >= 0:                     # this label can end the match: [a-z]{2,} then \b
            a = start
            while a < e and 97 <= PyUnicode_READ(kind, data, a) <= 122:
                a += 1
            if a - start >= 2 and (a == n or not _ascii_word(PyUnicode_READ(kind, data, a))):
                found = a
                last_two[0] = previous
        if e < n and PyUnicode_READ(kind, data, e) == 46:    # "." : the chain goes on
            previous = start
            start = e + 1
        else:
            break
    return found


cdef inline Py_ssize_t _find(int kind, void *data, Py_ssize_t n, Py_ssize_t pos, const char *word,
                      Py_ssize_t length) noexcept:
    """Index of the next occurrence of the ASCII ``word`` at or after ``pos``, or -1."""
    cdef Py_ssize_t i, k
    for i in range(pos, n - length + 1):
        for k in range(length):
            if PyUnicode_READ(kind, data, i + k) != <Py_UCS4>(<uint8_t>word[k]):
                break
        else:
            return i
    return -1


cdef inline Py_ssize_t _octets(int kind, void *data, Py_ssize_t n, Py_ssize_t q, Py_ssize_t *ends) noexcept:
    """``[0-9]{1,3}(\.[0-9]{1,3}){3}\]`` at ``q``: the end of each octet in ``ends``
    and the position after "]", or -1."""
    cdef Py_ssize_t i = q, k, start
    for k in range(4):
        if k:
            if i >= n or PyUnicode_READ(kind, data, i) != 46:
                return -1
            i += 1
        start = i
        while i < n and 48 <= PyUnicode_READ(kind, data, i) <= 57:
            i += 1
        if i == start or i - start > 3:
            return -1
        ends[k] = i
    if i >= n or PyUnicode_READ(kind, data, i) != 93:
        return -1
    return i + 1
