# Included in spamnb.mail._mail (one compiled module for the parser and the
# tokenizer: a cold ``spamnb classify`` loads one, not five).
#
# Compiled header code of spamnb.mail.parser: the end of a header block, its
# fields (unfolded, RFC 2047 words decoded), Content-Type parameters.
#
# The results are exactly those of the regular expressions this module replaced
# (kept as the reference in tests/reference_mail.py; tests/test_mail.py compares
# the two on the whole corpus, hand-written edge cases and generated input):
#
# - ``split_headers``: ``(?:[!-9;-~]+[ \\t]*:[^\\n]*(?:\\n|\\Z)(?:[ \\t][^\\n]*(?:\\n|\\Z))*)*``
#   matched at position 0 of the bytes; ``fields_end`` the end of that match
#   (from any start, on any bytes-like object: spamnb.mail.headers.split's
#   fields; tests/test_header_rules.py);
# - ``parse_fields``: ``re.sub(r"\\n(?=[ \\t])", "", text)`` (unfolding), then
#   ``re.findall(r"\\n([!-9;-~]+)[ \\t]*:[ \\t]*([^\\n]{0,max_chars})", "\\n" + text)``
#   with the names lower-cased;
# - ``content_type``: the regular expression in its docstring, with the Python
#   code around it;
# - ``header_fields``: the Python function spamnb.mail.parser._parse_fields.
#
# Speed (all 6,046 corpus messages cut to the tokenizer's 6,144 bytes, best CPU
# time of 7 passes, per message): finding the block's end 3.8 us -> 0.86 us,
# its fields with the name -> values table 13.5 us -> 4.7 us (docs/tokenizer.md,
# "Speed").


from cpython.buffer cimport PyBuffer_Release
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ
from libc.string cimport memchr, memcpy

from spamnb.mail._unicode cimport (PyUnicode_IS_ASCII, PyUnicode_MAX_CHAR_VALUE, PyUnicode_New, PyUnicode_Substring,
                                   _find_char)
from spamnb.buffers cimport UNSIGNED, take

from spamnb.mail import lazy_re

cdef enum:
    _MAX_HEADER_CHARS = 16 * 1024
MAX_HEADER_CHARS = _MAX_HEADER_CHARS


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


def fields_end(data not None, Py_ssize_t start=0):
    """Offset just past the run of fields of ``data[start:]`` (any bytes-like
    object; its block in :func:`split_headers`: "Name: value" lines and their
    continuation lines, LF or CRLF line ends alike), ``start`` when it has
    none: ``spamnb.mail.headers.split``'s ``fields_end``, the same rule."""
    cdef Py_buffer view
    cdef Py_ssize_t n, end
    take(&view, data, UNSIGNED, 1, False, "unsigned char")
    try:
        n = view.len
        if start < 0 or start >= n:
            return start
        end = _header_end(<const unsigned char *>view.buf + start, n - start)
        return start + end
    finally:
        PyBuffer_Release(&view)


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


# -- RFC 2047 words (Python code: rare or C-speed calls) ----------------------------
_ENCODED_WORD = lazy_re.pattern(r"=\?([^?\s]+)\?([bBqQ])\?([^?\s]*)\?=", lazy_re.A)   # compiled on first use
_BETWEEN_ENCODED_WORDS = lazy_re.pattern(r"\?=\s+=\?", lazy_re.A)   # each match becomes "?==?" (a literal: a
# template with a backslash, r"\1\2", would import re to be parsed)


def _decode_encoded_word(match):
    charset, kind, payload = match.group(1).lower(), match.group(2), match.group(3)
    charset = charset.split("*", 1)[0]             # RFC 2231 language suffix
    try:
        raw = payload.encode("ascii", "replace")
        if kind in "bB":
            data = base64_lenient(raw)
        else:
            data = _ascii().a2b_qp(raw, header=True)
    except Exception:
        return match.group(0)
    return _decode_text(data, charset, "cp1252")


def decode_header_value(value):
    """Decode the RFC 2047 encoded words of a header value (str; bytes are decoded first)."""
    if isinstance(value, bytes):
        value = _decode_text(value, "", "cp1252")
    if "=?" in value:
        value = _BETWEEN_ENCODED_WORDS.sub("?==?", value)
        value = _ENCODED_WORD.sub(_decode_encoded_word, value)
    return value


# -- a header block's fields, decoded -----------------------------------------------

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
