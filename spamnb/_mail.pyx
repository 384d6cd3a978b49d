"""Compiled core of spamnb.mail: the end of a header block and its fields,
Content-Type parameters, HTML tags and entities.

Per-line and per-character header work happens here, in C; ``spamnb.mail``
decodes the block (C-speed ``bytes.decode``) and RFC 2047 words (rare) in
Python.  Nothing here imports anything.

The results are exactly those of the regular expressions this module replaced
(kept as the reference in tests/test_mail.py, which compares the two on the
whole corpus, hand-written edge cases and generated input):

- ``split_headers``: ``(?:[!-9;-~]+[ \\t]*:[^\\n]*(?:\\n|\\Z)(?:[ \\t][^\\n]*(?:\\n|\\Z))*)*``
  matched at position 0 of the bytes;
- ``parse_fields``: ``re.sub(r"\\n(?=[ \\t])", "", text)`` (unfolding), then
  ``re.findall(r"\\n([!-9;-~]+)[ \\t]*:[ \\t]*([^\\n]{0,max_chars})", "\\n" + text)``
  with the names lower-cased;
- ``content_type``, ``strip_tags``, ``decode_entities``: the regular
  expressions in their docstrings, with the Python code around them.

Speed (all 6,046 corpus messages cut to the tokenizer's 6,144 bytes, best CPU
time of 7 passes, per message): finding the block's end 3.8 us -> 0.86 us,
its fields with the name -> values table 13.5 us -> 4.7 us; the whole of
``mail.parse`` 29-31 us -> 15 us (docs/tokenizer.md, "Speed").
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ
from libc.stdint cimport uint16_t, uint32_t
from libc.string cimport memchr, memcpy

cdef extern from "Python.h":
    object PyUnicode_FromKindAndData(int kind, const void *buffer, Py_ssize_t size)
    object PyUnicode_FromOrdinal(int ordinal)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    object PyUnicode_Substring(object text, Py_ssize_t start, Py_ssize_t end)
    bint PyUnicode_IS_ASCII(object text)
    Py_UCS4 PyUnicode_MAX_CHAR_VALUE(object text)

__all__ = ["split_headers", "parse_fields", "content_type", "strip_tags", "decode_entities"]


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


cdef inline Py_ssize_t _find_nl(int kind, const void *data, Py_ssize_t start, Py_ssize_t end) noexcept:
    """Index of the first "\\n" in data[start:end], or ``end``."""
    return _find_char(kind, data, 10, start, end)


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


# -- Content-Type parameters ------------------------------------------------------
# One pass over the parameters instead of re.findall plus a Python loop over the
# matches; the type itself stays with str.strip().lower() (Unicode rules).
# Before / after: 0.93 us -> 0.20 us per call (the 5,237 top-level Content-Type
# values of the corpus, best CPU time of 7 passes).

cdef inline bint _is_param_name(Py_UCS4 c) noexcept nogil:
    """[A-Za-z0-9_.*-]"""
    return (0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A or 0x30 <= c <= 0x39
            or c == 0x5F or c == 0x2E or c == 0x2A or c == 0x2D)


cdef inline bint _is_space(Py_UCS4 c) noexcept nogil:
    """\\s of an ASCII-only regular expression: [ \\t\\n\\r\\f\\v]"""
    return c == 0x20 or 0x09 <= c <= 0x0D


cdef inline Py_ssize_t _skip_spaces(int kind, const void *data, Py_ssize_t i, Py_ssize_t n) noexcept:
    while i < n and _is_space(PyUnicode_READ(kind, data, i)):
        i += 1
    return i


cdef str _param_key(int kind, const void *data, Py_ssize_t start, Py_ssize_t end):
    """The parameter name data[start:end] lower-cased and cut at its first "*"
    (RFC 2231 sections and charsets): ``name.lower().split("*", 1)[0]``."""
    return _lower_name(kind, data, start, _find_char(kind, data, 0x2A, start, end))


def content_type(str value not None):
    """(type/subtype, params) of a Content-Type (or Content-Disposition) value.

    The type is the text before the first ";", stripped and lower-cased
    ("text/plain" if empty); params maps each parameter name (lower case, cut at
    its first "*") to its first value: the results of
    ``re.findall(r";\\s*([A-Za-z0-9_.*-]+)\\s*=\\s*(?:"([^"]*)"?|'([^']*)'?|([^;\\s]*))",
    value[value.find(";"):])`` (ASCII classes).
    """
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(value), semi, i, name_start, name_end, start, end
    cdef int kind = PyUnicode_KIND(value)
    cdef const void *data = PyUnicode_DATA(value)
    cdef Py_UCS4 c
    cdef dict params = {}
    semi = _find_char(kind, data, 0x3B, 0, n)
    ctype = (value if semi == n else PyUnicode_Substring(value, 0, semi)).strip().lower()
    if not ctype:
        ctype = "text/plain"
    # Each ";" starts a match attempt; a failed one resumes at the next ";", a
    # match after its value.  What an attempt reads (blanks and name characters)
    # holds no ";", so every character is read at most twice: linear.
    while semi < n:
        i = _skip_spaces(kind, data, semi + 1, n)
        name_start = i
        while i < n and _is_param_name(PyUnicode_READ(kind, data, i)):
            i += 1
        name_end = i
        i = _skip_spaces(kind, data, i, n)
        if name_end == name_start or i >= n or PyUnicode_READ(kind, data, i) != 0x3D:
            semi = _find_char(kind, data, 0x3B, semi + 1, n)     # no match here
            continue
        i = _skip_spaces(kind, data, i + 1, n)
        c = PyUnicode_READ(kind, data, i) if i < n else 0
        if c == 0x22 or c == 0x27:                    # "quoted" or 'quoted', closing quote optional
            start = i + 1
            end = _find_char(kind, data, c, start, n)
            i = end + 1 if end < n else n
        else:                                         # bare: up to ";" or a blank
            start = end = i
            while end < n:
                c = PyUnicode_READ(kind, data, end)
                if c == 0x3B or _is_space(c):
                    break
                end += 1
            i = end
        key = _param_key(kind, data, name_start, name_end)
        if key not in params:
            params[key] = PyUnicode_Substring(value, start, end)
        semi = _find_char(kind, data, 0x3B, i, n)
    return ctype, params


# -- HTML tags -----------------------------------------------------------------------
# One pass instead of re.sub: memchr to each "<" (1-byte strings), then at most
# 4,001 characters to the next "<" or ">"; text between tags is copied with
# memcpy.  A tag that does not match (unclosed, too long, "<" inside) is left
# as text and the search goes on after its "<", as the regex's does.
# Before / after: 13.6 us -> 2.9 us per HTML part (the 1,236 HTML parts of the
# corpus cut at 6,144 bytes, lower-cased, comments and style/script removed as
# html_to_text does; best CPU time of 7 passes).

cdef enum:
    MAX_TAG_CHARS = 4000


cdef inline bint _tag_start(Py_UCS4 c, bint any_case) noexcept nogil:
    """[/a-z!], or [/A-Za-z!] with ``any_case``"""
    return c == 0x2F or c == 0x21 or 0x61 <= c <= 0x7A or (any_case and 0x41 <= c <= 0x5A)


cdef inline Py_ssize_t _tag_end(int kind, const void *data, Py_ssize_t i, Py_ssize_t n) noexcept:
    """For a "<" at ``i`` followed by a tag-start character: the index of the ">"
    ending the tag, or -1 (a "<" or the end comes first, or more than
    MAX_TAG_CHARS characters between the tag-start character and the ">")."""
    cdef Py_ssize_t j = i + 2
    cdef Py_ssize_t stop = i + 2 + MAX_TAG_CHARS + 1        # one past the last allowed ">"
    cdef Py_UCS4 c
    if stop > n:
        stop = n
    while j < stop:
        c = PyUnicode_READ(kind, data, j)
        if c == 0x3E:
            return j
        if c == 0x3C:
            return -1
        j += 1
    return -1


def strip_tags(str html not None, bint any_case=False):
    """``re.sub(r"<[/a-z!][^<>]{0,4000}>", " ", html)`` ([/A-Za-z!] with ``any_case``)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(html), i, end, pos = 0, out_len = 0
    cdef int kind = PyUnicode_KIND(html)
    cdef const char *data = <const char *>PyUnicode_DATA(html)
    cdef char *out = NULL
    i = _find_char(kind, data, 0x3C, 0, n)
    try:
        while i < n:
            end = -1
            if i + 1 < n and _tag_start(PyUnicode_READ(kind, data, i + 1), any_case):
                end = _tag_end(kind, data, i, n)
            if end < 0:
                i = _find_char(kind, data, 0x3C, i + 1, n)
                continue
            if out == NULL:                     # the result is never longer than html
                out = <char *>PyMem_Malloc(<size_t>(n * kind))
                if out == NULL:
                    raise MemoryError()
            memcpy(out + out_len * kind, data + pos * kind, <size_t>((i - pos) * kind))
            out_len += i - pos
            if kind == 1:
                out[out_len] = 0x20
            elif kind == 2:
                (<uint16_t *>out)[out_len] = 0x20
            else:
                (<uint32_t *>out)[out_len] = 0x20
            out_len += 1
            pos = end + 1
            i = _find_char(kind, data, 0x3C, pos, n)
        if out == NULL:
            return html
        memcpy(out + out_len * kind, data + pos * kind, <size_t>((n - pos) * kind))
        out_len += n - pos
        # copies to the narrowest kind the remaining characters allow (a str
        # must use it), e.g. when the only non-ASCII characters were in tags
        return PyUnicode_FromKindAndData(kind, out, out_len)
    finally:
        PyMem_Free(out)


# -- HTML entities -------------------------------------------------------------------
# One pass instead of re.sub with a Python function per match: numeric
# references are decoded here, the common names looked up in a dict, other
# names handed to ``unescape`` (html.unescape: rare, and its HTML5 table is big).
# Before / after: 2.7 us -> 0.6 us per text (the 375 of those HTML parts with
# an "&" left after "&nbsp;" and "&amp;" are replaced; best of 7 passes).

cdef dict _COMMON_ENTITIES = {"nbsp": " ", "amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'",
                    "copy": "\u00a9", "reg": "\u00ae", "middot": "\u00b7", "trade": "\u2122"}


cdef inline int _digit(Py_UCS4 ch, bint hexadecimal) noexcept nogil:
    """The value of an ASCII (hexadecimal) digit, or -1."""
    cdef long c = ch
    if 0x30 <= c <= 0x39:
        return <int>(c - 0x30)
    if hexadecimal:
        c |= 0x20                       # "A"-"F" -> "a"-"f"
        if 0x61 <= c <= 0x66:
            return <int>(c - 0x61 + 10)
    return -1


cdef inline bint _is_letter(Py_UCS4 c) noexcept nogil:
    return 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A


def decode_entities(str text not None, unescape):
    """``re.sub(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});?", entity, text)``
    where ``entity`` gives chr(code point) for a numeric reference (" " for 0,
    a surrogate or beyond U+10FFFF), the value of a name in ``_COMMON_ENTITIES``,
    else ``unescape(whole reference)``."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i, j, k, end, last = 0
    cdef int kind = PyUnicode_KIND(text)
    cdef const void *data = PyUnicode_DATA(text)
    cdef long cp
    cdef int d, base, max_digits
    cdef list pieces = None
    i = _find_char(kind, data, 0x26, 0, n)
    while i < n:
        j = i + 1
        end = -1
        if j < n and PyUnicode_READ(kind, data, j) == 0x23:          # "&#"
            k = j + 1
            base, max_digits = 10, 7
            if k < n and _digit(PyUnicode_READ(kind, data, k), False) < 0 and (
                    <long>PyUnicode_READ(kind, data, k) | 0x20) == 0x78:  # "&#x" (not a decimal digit)
                k += 1
                base, max_digits = 16, 6
            cp = 0
            end = k
            while end < n and end - k < max_digits:
                d = _digit(PyUnicode_READ(kind, data, end), base == 16)
                if d < 0:
                    break
                cp = cp * base + d
                end += 1
            if end == k:                                             # no digit: no match
                end = -1
            else:
                if end < n and PyUnicode_READ(kind, data, end) == 0x3B:
                    end += 1
                if 0 < cp < 0x110000 and not (0xD800 <= cp < 0xE000):
                    value = PyUnicode_FromOrdinal(<int>cp)
                else:
                    value = " "
        else:                                                        # "&name"
            end = j
            while end < n and end - j < 8 and _is_letter(PyUnicode_READ(kind, data, end)):
                end += 1
            if end - j < 2:
                end = -1
            else:
                value = _COMMON_ENTITIES.get(PyUnicode_Substring(text, j, end))
                if end < n and PyUnicode_READ(kind, data, end) == 0x3B:
                    end += 1
                if value is None:
                    value = unescape(PyUnicode_Substring(text, i, end))
        if end < 0:
            i = _find_char(kind, data, 0x26, i + 1, n)
            continue
        if pieces is None:
            pieces = []
        if i > last:
            pieces.append(PyUnicode_Substring(text, last, i))
        pieces.append(value)
        last = end
        i = _find_char(kind, data, 0x26, end, n)
    if pieces is None:
        return text
    if last < n:
        pieces.append(PyUnicode_Substring(text, last, n))
    return "".join(pieces)
