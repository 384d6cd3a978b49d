"""Compiled core of spamnb.mail.parser: ``parse`` (the MIME entities, their leaves and
counts), the end of a header block and its fields, Content-Type parameters,
text decoding, HTML tags and entities.

Per-message, per-line and per-character work happens here, in C.  The module
stands on its own: the records it makes come from ``spamnb.mail.records``, charset
names are resolved by ``spamnb.mail.charsets``, and the Python helpers ``parse``
calls (RFC 2047 words, lenient base64) are defined here;
``spamnb.mail._mail.parse(b"Subject: hi\n\nbody")`` works without ``spamnb.mail.parser``.

The results are exactly those of the regular expressions this module replaced
(kept as the reference in tests/test_mail.py, which compares the two on the
whole corpus, hand-written edge cases and generated input):

- ``split_headers``: ``(?:[!-9;-~]+[ \\t]*:[^\\n]*(?:\\n|\\Z)(?:[ \\t][^\\n]*(?:\\n|\\Z))*)*``
  matched at position 0 of the bytes;
- ``parse_fields``: ``re.sub(r"\\n(?=[ \\t])", "", text)`` (unfolding), then
  ``re.findall(r"\\n([!-9;-~]+)[ \\t]*:[ \\t]*([^\\n]{0,max_chars})", "\\n" + text)``
  with the names lower-cased;
- ``content_type``, ``strip_tags``, ``decode_entities``: the regular
  expressions in their docstrings, with the Python code around them;
- ``parse``, ``decode_text``, ``header_fields``: the Python functions of
  spamnb.mail.parser they replaced (parse, _parse_into, _leaf, _split_multipart,
  decode_text, _parse_fields).

Speed (all 6,046 corpus messages cut to the tokenizer's 6,144 bytes, best CPU
time of 7 passes, per message): finding the block's end 3.8 us -> 0.86 us,
its fields with the name -> values table 13.5 us -> 4.7 us; the whole of
``mail.parse`` 29-31 us -> 15 us, then (``parse`` compiled) 13.4 -> 9.9 us
(docs/tokenizer.md, "Speed").
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ
from libc.stdint cimport uint16_t, uint32_t
from libc.string cimport memchr, memcmp, memcpy, memset

cdef extern from "Python.h":
    object PyUnicode_FromKindAndData(int kind, const void *buffer, Py_ssize_t size)
    object PyUnicode_FromOrdinal(int ordinal)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    object PyUnicode_Substring(object text, Py_ssize_t start, Py_ssize_t end)
    bint PyUnicode_IS_ASCII(object text)
    Py_UCS4 PyUnicode_MAX_CHAR_VALUE(object text)
    Py_ssize_t PyUnicode_Count(object text, object sub, Py_ssize_t start, Py_ssize_t end) except -1
    const Py_ssize_t PY_SSIZE_T_MAX

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
    return _split_headers(data)


cdef tuple _split_headers(bytes data):
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
    return _parse_fields(text, max_chars, decode, by_name)


cdef list _parse_fields(str text, Py_ssize_t max_chars, decode, dict by_name):
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
    return _content_type(value)


cdef tuple _content_type(str value):
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


# -- the text budget ------------------------------------------------------------------
# A text part's budget counts what an attacker cannot add for free: a run of
# white space counts as one character (8 KB of blank lines used to fill the
# whole budget), and invisible format characters (zero-width space and joiners,
# word joiner, soft hyphen, BOM: used to split words) count as nothing and are
# dropped.  Letters of other scripts that look like Latin ones (Cyrillic, Greek,
# fullwidth forms: "vіаgrа" with Cyrillic і and а) are folded to them, in
# training and scoring alike.  One pass, stopping at the budget; a copy only
# when something is dropped or folded (str.translate with a table did the
# folding at ~145 us per non-ASCII text part, mostly failed look-ups).

cdef extern from "Python.h":
    bint Py_UNICODE_ISSPACE(Py_UCS4 c)
    enum: PyUnicode_4BYTE_KIND

LOOK_ALIKES = ("асеорхуіјѕһԁԛԝӏАВСЕНІЈКМОРЅТХУαορνικΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
               "aceopxyijshdqwlABCEHIJKMOPSTXYaopvikABEZHIKMNOPTYX")
cdef enum:
    _FOLD_SIZE = 0x530
cdef Py_UCS4 _fold_table[_FOLD_SIZE]
for _i in range(_FOLD_SIZE):
    _fold_table[_i] = _i
for _a, _b in zip(*LOOK_ALIKES):
    _fold_table[ord(_a)] = ord(_b)


cdef inline bint _is_invisible(Py_UCS4 c) noexcept nogil:
    return c == 0xAD or (0x200B <= c <= 0x200F) or (0x2060 <= c <= 0x2064) or c == 0xFEFF or c == 0x180E


cdef inline Py_UCS4 _fold(Py_UCS4 c) noexcept nogil:
    if c < _FOLD_SIZE:
        return _fold_table[c]
    if 0xFF01 <= c <= 0xFF5E:           # fullwidth ASCII forms
        return <Py_UCS4>(<uint32_t>c - 0xFEE0)
    return c


def text_prefix(str text not None, Py_ssize_t budget):
    """The prefix of ``text`` holding ``budget`` characters (all of it when
    ``budget`` < 0), where a run of white space counts as one and invisible
    format characters (U+00AD, U+180E, U+200B-U+200F, U+2060-U+2064, U+FEFF)
    count as none and are removed; look-alike letters (``LOOK_ALIKES``,
    fullwidth forms) are folded to Latin ones."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0, j, used = 0, n_changed = 0, out_len = 0
    cdef int kind = PyUnicode_KIND(text)
    cdef const void *data = PyUnicode_DATA(text)
    cdef Py_UCS4 c
    cdef Py_UCS4 *out
    cdef bint in_space = False
    if budget < 0:
        budget = PY_SSIZE_T_MAX
    while i < n:
        c = PyUnicode_READ(kind, data, i)
        if Py_UNICODE_ISSPACE(c):
            if not in_space:
                if used == budget:
                    break
                used += 1
                in_space = True
        elif c >= 0xAD and _is_invisible(c):
            n_changed += 1
        else:
            if used == budget:
                break
            used += 1
            in_space = False
            if c >= 0xC0 and _fold(c) != c:
                n_changed += 1
        i += 1
    if n_changed == 0:
        return text if i == n else PyUnicode_Substring(text, 0, i)
    out = <Py_UCS4 *>PyMem_Malloc(<size_t>(i if i else 1) * sizeof(Py_UCS4))
    if out == NULL:
        raise MemoryError()
    try:
        for j in range(i):
            c = PyUnicode_READ(kind, data, j)
            if c >= 0xAD and _is_invisible(c):
                continue
            out[out_len] = _fold(c)
            out_len += 1
        return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, out_len)
    finally:
        PyMem_Free(out)


# -- the whole message: mail.parse ----------------------------------------------------
# The entity loop, the leaves, the multipart split and the counts used to be
# Python (mail.parse, _parse_into, _leaf, _split_multipart, _parse_fields,
# decode_text; kept as the reference in tests/test_mail.py): the same steps in
# the same order, with the counts in a C struct (written to MailStats once), no
# Python call between the steps, the records made with object.__new__ and their
# slots set directly, the HTML sniff and the "href" / "<img" / "://" counts in C.
# Before / after: see docs/tokenizer.md, "Speed".

MAX_BYTES = 256 * 1024
MAX_DEPTH = 8
MAX_PARTS = 64
cdef enum:
    _MAX_HEADER_CHARS = 16 * 1024
MAX_HEADER_CHARS = _MAX_HEADER_CHARS

# The records the parser makes (plain Python classes) and the charset table.
from spamnb.mail.records import Mail as _Mail, MailStats as _MailStats, Part as _Part
from spamnb.mail.charsets import _cache as _codec_cache, codec as _codec

import binascii
import re

cdef object _object_new = object.__new__
cdef object _a2b_qp = binascii.a2b_qp
cdef object _MISSING = object()


# -- RFC 2047 words and lenient base64 (Python code: rare or C-speed calls) -----------
_ENCODED_WORD = re.compile(r"=\?([^?\s]+)\?([bBqQ])\?([^?\s]*)\?=", re.A)
_BETWEEN_ENCODED_WORDS = re.compile(r"(\?=)\s+(=\?)", re.A)
_NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/]+", re.A)


def _decode_encoded_word(match):
    charset, kind, payload = match.group(1).lower(), match.group(2), match.group(3)
    charset = charset.split("*", 1)[0]             # RFC 2231 language suffix
    try:
        raw = payload.encode("ascii", "replace")
        if kind in "bB":
            data = base64_lenient(raw)
        else:
            data = binascii.a2b_qp(raw, header=True)
    except Exception:
        return match.group(0)
    return _decode_text(data, charset, "cp1252")


def decode_header_value(value):
    """Decode the RFC 2047 encoded words of a header value (str; bytes are decoded first)."""
    if isinstance(value, bytes):
        value = _decode_text(value, "", "cp1252")
    if "=?" in value:
        value = _BETWEEN_ENCODED_WORDS.sub(r"\1\2", value)
        value = _ENCODED_WORD.sub(_decode_encoded_word, value)
    return value


def base64_lenient(data):
    """Lenient base64: ignores non-alphabet bytes, decodes the longest valid prefix."""
    try:
        return binascii.a2b_base64(data)
    except binascii.Error:
        pass
    data = _NOT_BASE64.sub(b"", data)
    data = data[: len(data) // 4 * 4]
    try:
        return binascii.a2b_base64(data)
    except binascii.Error:
        return b""


cdef struct _Counts:
    Py_ssize_t n_header_bytes, n_headers, n_received, n_recipients, n_parts, n_text_parts
    Py_ssize_t n_html_parts, n_attachments, max_depth, text_chars, html_chars, n_links, n_images


# -- text decoding ------------------------------------------------------------------

cdef str _without_surrogates(str text):
    """``text`` with lone surrogates (from UTF-7, UTF-16 and friends) replaced by
    U+FFFD.  Before: ``text.encode("utf-8")`` as the test (a copy of every
    non-ASCII text); now a scan for U+D800-U+DFFF (none possible in 1-byte kind)."""
    cdef int kind = PyUnicode_KIND(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i
    cdef const void *data = PyUnicode_DATA(text)
    cdef Py_UCS4 c
    if kind == 1:
        return text
    for i in range(n):
        c = PyUnicode_READ(kind, data, i)
        if 0xD800 <= c <= 0xDFFF:
            return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


cdef str _decode_text(bytes data, str charset, fallback):
    cdef str text
    codec = None
    if charset:
        codec = _codec_cache.get(charset, _MISSING)
        if codec is _MISSING:
            codec = _codec(charset)
    if codec is not None and codec != "utf-8":
        try:
            text = data.decode(codec, "replace")
        except Exception:  # codec-specific failures (e.g. utf-7 state errors)
            pass
        else:
            return text if PyUnicode_IS_ASCII(text) else _without_surrogates(text)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        if codec == "utf-8":
            return data.decode("utf-8", "replace")
        return _without_surrogates(data.decode(fallback, "replace"))


def decode_text(bytes data not None, str charset, fallback="cp1252"):
    """Bytes -> str: the declared charset if known, else strict UTF-8, else ``fallback``."""
    return _decode_text(data, charset, fallback)


cdef inline bint _all_ascii(const unsigned char *s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef unsigned long long word
    while i + 8 <= n:
        memcpy(&word, s + i, 8)
        if word & 0x8080808080808080ULL:
            return False
        i += 8
    while i < n:
        if s[i] & 0x80:
            return False
        i += 1
    return True


cdef list _block_fields(bytes block, dict by_name):
    """[(lower-case name, decoded value)] of a header block (bytes).  Before:
    ``block.decode("ascii")`` and, on UnicodeDecodeError, decode_text; now an
    8-bytes-at-a-time ASCII test first (no exception for 8-bit headers)."""
    cdef Py_ssize_t n = len(block)
    cdef const unsigned char *s = <const unsigned char *>(<char *>block)
    cdef str text
    if _all_ascii(s, n):
        text = PyUnicode_New(n, 127)
        memcpy(PyUnicode_DATA(text), s, <size_t>n)
    else:
        text = _decode_text(block, "", "cp1252")
    return _parse_fields(text, _MAX_HEADER_CHARS, decode_header_value, by_name)


def header_fields(bytes block not None, dict by_name=None):
    """[(lower-case name, decoded value)] of a header block (bytes): 8-bit bytes
    decoded, lines unfolded, RFC 2047 words decoded, values cut at MAX_HEADER_CHARS;
    each value also appended to ``by_name[name]`` if ``by_name`` (a dict) is given."""
    return _block_fields(block, by_name)


# -- HTML sniff and counts ----------------------------------------------------------
# Before: _HTML_SNIFF.match(data) (re, bytes: \A\s*<(?:!doctype|html|...|a)\b,
# re.I | re.A), text.lower().count("href") / .count("<img") (a lower-cased copy
# of every HTML part) and text.count("://"); now memchr to the first character
# and a case-insensitive compare.  No character outside ASCII lower-cases to
# ASCII except U+0130 ("i" + U+0307: never inside "href" or "<img") and U+212A
# ("k"), so comparing ASCII letters case-insensitively counts what lower() did.

cdef const char *_SNIFF_WORDS[11]
_SNIFF_WORDS[:] = [b"!doctype", b"html", b"head", b"body", b"table", b"div", b"p", b"font", b"center", b"br", b"a"]


cdef inline unsigned char _ascii_lower(unsigned char c) noexcept nogil:
    return c + 32 if 0x41 <= c <= 0x5A else c


cdef inline bint _is_word_byte(unsigned char c) noexcept nogil:
    return 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A or 0x30 <= c <= 0x39 or c == 0x5F


cdef bint _sniffs_html(bytes data):
    cdef Py_ssize_t n = len(data), i = 0, k, w
    cdef const unsigned char *s = <const unsigned char *>(<char *>data)
    cdef const char *word
    while i < n and (s[i] == 0x20 or 0x09 <= s[i] <= 0x0D):
        i += 1
    if i >= n or s[i] != 0x3C:
        return False
    i += 1
    for w in range(11):
        word = _SNIFF_WORDS[w]
        k = 0
        while word[k] != 0 and i + k < n and _ascii_lower(s[i + k]) == <unsigned char>word[k]:
            k += 1
        if word[k] == 0 and (i + k >= n or not _is_word_byte(s[i + k])):
            return True
    return False


cdef inline bint _word_at(int kind, const void *data, Py_ssize_t i, const char *word, Py_ssize_t m) noexcept:
    """data[i:i + m] is ``word`` (lower-case ASCII), ASCII letters in any case."""
    cdef Py_ssize_t k
    cdef Py_UCS4 c
    for k in range(m):
        c = PyUnicode_READ(kind, data, i + k)
        if c >= 0x80 or _ascii_lower(<unsigned char>c) != <unsigned char>word[k]:
            return False
    return True


cdef Py_ssize_t _count_ci(str text, const char *word, Py_ssize_t m):
    """Occurrences of ``word`` (lower-case ASCII, m >= 1, no self-overlap) in
    ``text``, ASCII letters compared case-insensitively: memchr to each
    candidate first character (both cases) in 1-byte strings."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i, count = 0
    cdef int kind = PyUnicode_KIND(text)
    cdef const void *data = PyUnicode_DATA(text)
    cdef const unsigned char *s = <const unsigned char *>data
    cdef const unsigned char *hit
    cdef unsigned char first = <unsigned char>word[0]
    cdef unsigned char other = first - 32 if 0x61 <= first <= 0x7A else first
    cdef int pass_
    if n < m:
        return 0
    for pass_ in range(1 if other == first else 2):
        i = 0
        while i <= n - m:
            if kind == 1:
                hit = <const unsigned char *>memchr(s + i, first if pass_ == 0 else other, <size_t>(n - m + 1 - i))
                if hit == NULL:
                    break
                i = hit - s
            if _word_at(kind, data, i, word, m):
                count += 1
                i += m
            else:
                i += 1
        if kind != 1:               # one pass compares both cases
            break
    return count


# -- records --------------------------------------------------------------------------

cdef object _new_part(str ctype, str charset, str cte, Py_ssize_t size, text, filename):
    part = _object_new(_Part)
    part.content_type = ctype
    part.charset = charset
    part.encoding = cte
    part.size = size
    part.text = text
    part.filename = filename
    return part


cdef object _new_stats(_Counts *c, Py_ssize_t n_bytes, Py_ssize_t n_defects):
    stats = _object_new(_MailStats)
    stats.n_bytes = n_bytes
    stats.n_header_bytes = c.n_header_bytes
    stats.n_headers = c.n_headers
    stats.n_received = c.n_received
    stats.n_recipients = c.n_recipients
    stats.n_parts = c.n_parts
    stats.n_text_parts = c.n_text_parts
    stats.n_html_parts = c.n_html_parts
    stats.n_attachments = c.n_attachments
    stats.max_depth = c.max_depth
    stats.text_chars = c.text_chars
    stats.html_chars = c.html_chars
    stats.n_links = c.n_links
    stats.n_images = c.n_images
    stats.n_defects = n_defects
    return stats


# -- leaves, multipart bodies, the entity loop -------------------------------------

cdef _leaf(list parts, _Counts *c, str ctype, dict params, str cte, str disposition, bytes body, fallback,
           Py_ssize_t max_part_bytes, list defects):
    cdef bytes data
    cdef str text
    cdef bint is_html
    cdef Py_ssize_t size
    c.n_parts += 1
    cdef str charset = params.get("charset", "").strip().lower()
    filename = params.get("name", "")
    if not filename and "filename" in disposition:
        filename = (<dict>_content_type("x/x;" + disposition.partition(";")[2])[1]).get("filename", "")
    if not (ctype.startswith("text/") or ctype == "message/delivery-status" or ctype == "application/x-unknown"):
        parts.append(_new_part(ctype, charset, cte, len(body), None, filename))
        c.n_attachments += 1
        return
    size = len(body)
    if 0 < max_part_bytes < size:
        body = body[:max_part_bytes]
        if "part-truncated" not in defects:
            defects.append("part-truncated")
    try:
        if cte == "base64":
            data = base64_lenient(body)
        elif cte == "quoted-printable":
            data = _a2b_qp(body)
        else:
            data = body
        text = _decode_text(data, charset, fallback)
        if _find_char(PyUnicode_KIND(text), PyUnicode_DATA(text), 0, 0, PyUnicode_GET_LENGTH(text)) \
                < PyUnicode_GET_LENGTH(text):
            text = text.replace("\0", "")
    except BaseException:
        # as before: the part is kept (no text) when decoding fails
        parts.append(_new_part(ctype, charset, cte, size, None, filename))
        raise
    if ctype == "text/html" or (ctype == "text/plain" and _sniffs_html(data)):
        c.n_html_parts += 1
        c.html_chars += PyUnicode_GET_LENGTH(text)
        c.n_links += _count_ci(text, b"href", 4)
        c.n_images += _count_ci(text, b"<img", 4)
        parts.append(_new_part("text/html", charset, cte, size, text, filename))
    else:
        c.n_text_parts += 1
        c.text_chars += PyUnicode_GET_LENGTH(text)
        c.n_links += _count_ci(text, b"://", 3)
        parts.append(_new_part(ctype, charset, cte, size, text, filename))


cdef tuple _split_multipart(bytes body, bytes boundary, Py_ssize_t max_parts):
    """Body parts between ``--boundary`` lines; (parts, closed, hit_limit)."""
    cdef bytes delimiter = b"--" + boundary
    cdef bytes line_delimiter = b"\n" + delimiter
    cdef Py_ssize_t n = len(body), d = len(delimiter), pos, start, nxt
    cdef const char *s = <char *>body
    cdef const char *nl
    cdef list parts = []
    if body.startswith(delimiter):
        pos = 0
    else:
        pos = body.find(line_delimiter)
        if pos < 0:
            return [], False, False
        pos += 1
    while True:
        start = -1
        if pos + d < n:
            nl = <const char *>memchr(s + pos + d, 10, <size_t>(n - pos - d))
            if nl != NULL:
                start = nl - s
        if pos + d + 2 <= n and s[pos + d] == 0x2D and s[pos + d + 1] == 0x2D:
            return parts, True, False               # close delimiter
        if start < 0:
            return parts, False, False
        start += 1
        nxt = body.find(line_delimiter, start - 1)
        if len(parts) == max_parts:
            return parts, False, True
        if nxt < 0:
            parts.append(body[start:])
            return parts, False, False
        parts.append(body[start:nxt])
        pos = nxt + 1


cdef inline str _first(dict by_name, str name):
    """``Mail.header(name)``: the first value, or ""."""
    values = by_name.get(name)
    return (<list>values)[0] if values else ""


def parse(raw, Py_ssize_t max_bytes=MAX_BYTES, Py_ssize_t max_depth=MAX_DEPTH, Py_ssize_t max_parts=MAX_PARTS,
          fallback_charset="cp1252", Py_ssize_t max_part_bytes=0):
    """Parse raw RFC 822 bytes (str is encoded as UTF-8) into a :class:`spamnb.mail.parser.Mail`;
    never raises on bytes or str.

    At most ``max_bytes`` of the message are looked at; with ``max_part_bytes``
    > 0, at most that many (encoded) bytes of each text part are decoded (defect
    "part-truncated"), so one big text part costs no more than that."""
    cdef _Counts c
    cdef list defects = [], parts = [], headers = [], fields, stack, children, entries
    cdef dict by_name = {}, names, child_headers, params
    cdef bint truncated = False, separated, closed, hit_limit
    cdef Py_ssize_t n_bytes, n_entities = 0, depth
    cdef bytes block, body, child_block, child_body, boundary, data
    cdef const char *nl
    cdef str ctype, ctype_value, cte, disposition, default
    memset(&c, 0, sizeof(c))
    if isinstance(raw, str):
        raw = (<str>raw).encode("utf-8", "surrogateescape")
    n_bytes = len(raw)
    if n_bytes > max_bytes:
        raw = raw[:max_bytes]
        truncated = True
        defects.append("truncated")
    if type(raw) is bytes:
        data = <bytes>raw
        if memchr(<char *>data, 13, <size_t>len(data)) != NULL:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if len(data) >= 5 and memcmp(<char *>data, b"From ", 5) == 0:    # mbox separator line
            nl = <const char *>memchr(<char *>data, 10, <size_t>len(data))
            data = data[nl - <char *>data + 1:] if nl != NULL else b""
        raw = data
    else:       # other types behave as before (bytes subclasses parse, others are a parse-error)
        if b"\r" in raw:
            raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if raw.startswith(b"From "):
            raw = raw[raw.find(b"\n") + 1:] if b"\n" in raw else b""

    try:
        if not isinstance(raw, bytes):
            raise TypeError("raw must be bytes or str")
        block, body, separated = _split_headers(raw)
        if memchr(<char *>block, 0, <size_t>len(block)) != NULL:
            block = block.replace(b"\0", b"")
            defects.append("nul")
        if not separated:
            defects.append("no-separator")
        c.n_header_bytes = len(block)
        names = {}
        fields = _block_fields(block, names)
        headers, by_name = fields, names
        c.n_headers = len(headers)
        c.n_received = len(by_name.get("received", ()))
        for name in ("to", "cc"):
            for value in by_name.get(name, ()):
                c.n_recipients += PyUnicode_Count(value, "@", 0, PY_SSIZE_T_MAX)
        # stack of (content-type value, transfer encoding, disposition, body, depth)
        stack = [(_first(by_name, "content-type"), _first(by_name, "content-transfer-encoding"),
                  _first(by_name, "content-disposition"), body, 0)]
        while stack:
            ctype_value, cte, disposition, body, depth = stack.pop()
            n_entities += 1
            if depth > c.max_depth:
                c.max_depth = depth
            ctype, params = _content_type(ctype_value)
            if ctype.startswith("multipart/") or ctype == "message/rfc822":
                if depth >= max_depth:
                    defects.append("depth-limit")
                    parts.append(_new_part(ctype, "", "", len(body), None, ""))
                    continue
                if ctype == "message/rfc822":
                    children = [body]
                else:
                    boundary = params.get("boundary", "").encode("utf-8", "replace")
                    hit_limit = False
                    if not boundary:
                        defects.append("no-boundary")
                        children = []
                    else:
                        children, closed, hit_limit = _split_multipart(
                            body, boundary, max(0, max_parts - n_entities - len(stack)))
                        if hit_limit:
                            defects.append("part-limit")
                        elif not closed:
                            defects.append("unclosed-boundary")
                    if not children:
                        if not (boundary and hit_limit):
                            # no parts found: read the body as text
                            stack.append(("text/plain", cte, "", body, depth + 1))
                        continue
                default = "message/rfc822" if ctype == "multipart/digest" else "text/plain"
                entries = []
                for child in children:
                    child_block, child_body, _ = _split_headers(child)
                    child_headers = {}
                    for name, value in _block_fields(child_block, None):
                        if (<str>name).startswith("content-") and name not in child_headers:
                            child_headers[name] = value
                    entries.append((child_headers.get("content-type", default),
                                    child_headers.get("content-transfer-encoding", ""),
                                    child_headers.get("content-disposition", ""),
                                    child_body, depth + 1))
                entries.reverse()
                stack.extend(entries)
                continue
            _leaf(parts, &c, ctype, params, cte.strip().lower(), disposition, body, fallback_charset,
                  max_part_bytes, defects)
    except Exception:       # a bug must not cost a message its tokens: keep what was parsed
        defects.append("parse-error")
    mail = _object_new(_Mail)
    mail.headers = headers
    mail.parts = parts
    mail.defects = defects
    mail.stats = _new_stats(&c, n_bytes, len(defects))
    mail.truncated = truncated
    mail._by_name = by_name
    return mail
