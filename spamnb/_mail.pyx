"""Compiled core of spamnb.mail: the end of a header block and its fields.

Per-line and per-character header work happens here, in C; ``spamnb.mail``
decodes the block (C-speed ``bytes.decode``) and RFC 2047 words (rare) in
Python.  Nothing here imports anything.

The results are exactly those of the regular expressions this module replaced
(kept as the reference in tests/test_mail.py, which compares the two on the
whole corpus, hand-written edge cases and generated header blocks):

- ``split_headers``: ``(?:[!-9;-~]+[ \\t]*:[^\\n]*(?:\\n|\\Z)(?:[ \\t][^\\n]*(?:\\n|\\Z))*)*``
  matched at position 0 of the bytes;
- ``parse_fields``: ``re.sub(r"\\n(?=[ \\t])", "", text)`` (unfolding), then
  ``re.findall(r"\\n([!-9;-~]+)[ \\t]*:[ \\t]*([^\\n]{0,max_chars})", "\\n" + text)``
  with the names lower-cased.

Speed (all 6,046 corpus messages cut to the tokenizer's 6,144 bytes, best CPU
time of 7 passes, per message): finding the block's end 3.8 us -> 0.86 us,
its fields with the name -> values table 13.5 us -> 4.7 us; the whole of
``mail.parse`` 29-31 us -> 15 us (docs/tokenizer.md, "Speed").
"""

from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ
from libc.string cimport memchr, memcpy

cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    object PyUnicode_Substring(object text, Py_ssize_t start, Py_ssize_t end)
    bint PyUnicode_IS_ASCII(object text)
    Py_UCS4 PyUnicode_MAX_CHAR_VALUE(object text)

__all__ = ["split_headers", "parse_fields"]


cdef inline bint _is_name(Py_UCS4 c) noexcept nogil:
    """A header name character: printable ASCII but ":" (the regex class [!-9;-~])."""
    return 0x21 <= c <= 0x7E and c != 0x3A


cdef inline bint _is_blank(Py_UCS4 c) noexcept nogil:
    return c == 0x20 or c == 0x09


# -- the header block's end ----------------------------------------------------
# One memchr per line instead of the regex engine's per-character loop: the name
# is checked character by character (it is short), the rest of the line skipped.
# 3.8 us -> 0.86 us per message (slicing block and body included).

cdef inline Py_ssize_t _after_line(const unsigned char *s, Py_ssize_t pos, Py_ssize_t n) noexcept nogil:
    """Position after the line starting at ``pos``: after its "\\n", or ``n``."""
    cdef const unsigned char *nl = <const unsigned char *>memchr(s + pos, 10, <size_t>(n - pos))
    return n if nl == NULL else (nl - s) + 1


cdef Py_ssize_t _header_end(const unsigned char *s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t pos = 0, i
    while pos < n and _is_name(s[pos]):
        i = pos + 1
        while i < n and _is_name(s[i]):
            i += 1
        while i < n and _is_blank(s[i]):
            i += 1
        if i >= n or s[i] != 0x3A:      # not "Name:": the block ends before this line
            break
        pos = _after_line(s, i, n)
        while pos < n and _is_blank(s[pos]):     # continuation lines
            pos = _after_line(s, pos, n)
    return pos


def split_headers(bytes data not None):
    """(header block, body, had_separator) of an entity (bytes, LF line ends).

    The block is the longest run of "Name: value" lines and their continuation
    lines from the start; a blank line right after it is the separator (dropped).
    Without one, the body starts at the first line that is neither, and
    had_separator is true only when the block runs to the end.
    """
    cdef Py_ssize_t n = len(data)
    cdef const unsigned char *s = <const unsigned char *>(<char *>data)
    cdef Py_ssize_t end = _header_end(s, n)
    if end < n and s[end] == 10:
        return data[:end], data[end + 1:], True
    return data[:end], data[end:], end == n


# -- fields ----------------------------------------------------------------------
# One pass to unfold (a copy without the "\n" before each continuation line,
# made only when there is one), then one pass over the lines: a line costs a
# memchr (for 1-byte strings) and a few comparisons; names are lower-cased
# while copied, values are substrings.  With the name -> values table filled in
# the same pass: 13.5 us -> 4.7 us per message (decoding the block included).
# A cache of name strings (to skip allocating and hashing them) saved only
# 0.1-0.35 us, within the noise, and was left out.

cdef inline Py_ssize_t _find_nl(int kind, const void *data, Py_ssize_t start, Py_ssize_t end) noexcept:
    """Index of the first "\\n" in data[start:end], or ``end``."""
    cdef const char *hit
    cdef Py_ssize_t i
    if kind == 1:
        hit = <const char *>memchr(<const char *>data + start, 10, <size_t>(end - start))
        return end if hit == NULL else hit - <const char *>data
    for i in range(start, end):
        if PyUnicode_READ(kind, data, i) == 10:
            return i
    return end


cdef str _unfold(str text):
    """``text`` without each "\\n" that is followed by a space or tab."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i, src = 0, dst = 0, n_folds = 0
    cdef int kind = PyUnicode_KIND(text)
    cdef const char *data = <const char *>PyUnicode_DATA(text)
    cdef char *out_data
    i = _find_nl(kind, data, 0, n)
    while i < n:
        if i + 1 < n and _is_blank(PyUnicode_READ(kind, data, i + 1)):
            n_folds += 1
        i = _find_nl(kind, data, i + 1, n)
    if n_folds == 0:
        return text
    # only "\n" characters go, so the copy keeps the text's kind and ASCII-ness
    # (a str must use the narrowest kind its characters allow)
    out = PyUnicode_New(n - n_folds, 127 if PyUnicode_IS_ASCII(text) else PyUnicode_MAX_CHAR_VALUE(text))
    out_data = <char *>PyUnicode_DATA(out)
    i = _find_nl(kind, data, 0, n)
    while i < n:
        if i + 1 < n and _is_blank(PyUnicode_READ(kind, data, i + 1)):
            memcpy(out_data + dst * kind, data + src * kind, <size_t>((i - src) * kind))
            dst += i - src
            src = i + 1
        i = _find_nl(kind, data, i + 1, n)
    memcpy(out_data + dst * kind, data + src * kind, <size_t>((n - src) * kind))
    return out


cdef inline bint _has_encoded_word(int kind, const void *data, Py_ssize_t start, Py_ssize_t end) noexcept:
    """True when data[start:end] contains "=?"."""
    cdef const char *p
    cdef const char *stop
    cdef Py_ssize_t i
    if kind == 1:
        p = <const char *>data + start
        stop = <const char *>data + end - 1          # "=" must have a character after it
        while p < stop:
            p = <const char *>memchr(p, 0x3D, <size_t>(stop - p))
            if p == NULL:
                return False
            if p[1] == 0x3F:
                return True
            p += 1
        return False
    for i in range(start, end - 1):
        if PyUnicode_READ(kind, data, i) == 0x3D and PyUnicode_READ(kind, data, i + 1) == 0x3F:
            return True
    return False


cdef str _lower_name(int kind, const void *data, Py_ssize_t start, Py_ssize_t end):
    """data[start:end] (ASCII name characters) lower-cased, as a new str."""
    cdef Py_ssize_t i
    cdef unsigned int c
    name = PyUnicode_New(end - start, 127)
    cdef unsigned char *out = <unsigned char *>PyUnicode_DATA(name)
    for i in range(start, end):
        c = PyUnicode_READ(kind, data, i)
        out[i - start] = <unsigned char>(c + 32 if 0x41 <= c <= 0x5A else c)
    return name


def parse_fields(str text not None, Py_ssize_t max_chars, decode=None, dict by_name=None):
    """[(lower-case name, value)] of a decoded header block.

    Lines are unfolded; a field is a line "Name[ \\t]*:[ \\t]*value" (other lines
    are skipped); a value is cut after ``max_chars`` characters (the rest of its
    line is dropped).  ``decode`` (e.g. ``mail.decode_header_value``), if given,
    is applied to each value containing "=?".  If ``by_name`` is given, each
    value is also appended to ``by_name[name]`` (a list, created when missing).
    """
    cdef Py_ssize_t n, pos = 0, eol, i, j, end
    cdef int kind
    cdef const void *data
    cdef list fields = []
    cdef list values
    if max_chars < 0:
        raise ValueError("max_chars must be >= 0")
    text = _unfold(text)
    n = PyUnicode_GET_LENGTH(text)
    kind = PyUnicode_KIND(text)
    data = PyUnicode_DATA(text)
    while True:
        eol = _find_nl(kind, data, pos, n)
        i = pos
        while i < eol and _is_name(PyUnicode_READ(kind, data, i)):
            i += 1
        if i > pos:
            j = i
            while j < eol and _is_blank(PyUnicode_READ(kind, data, j)):
                j += 1
            if j < eol and PyUnicode_READ(kind, data, j) == 0x3A:
                j += 1
                while j < eol and _is_blank(PyUnicode_READ(kind, data, j)):
                    j += 1
                end = j + max_chars if eol - j > max_chars else eol
                name = _lower_name(kind, data, pos, i)
                value = PyUnicode_Substring(text, j, end)
                if decode is not None and _has_encoded_word(kind, data, j, end):
                    value = decode(value)
                fields.append((name, value))
                if by_name is not None:
                    values = by_name.get(name)
                    if values is None:
                        by_name[name] = [value]
                    else:
                        values.append(value)
        if eol >= n:
            return fields
        pos = eol + 1
