# Included in spamnb.mail._mail (one compiled module for the parser and the
# tokenizer: a cold ``spamnb classify`` loads one, not five).
#
# Compiled HTML code of spamnb.mail.parser: tags and entities (one C pass each),
# and the HTML sniff and the "href" / "<img" / "://" counts of ``parse``.
#
# The results are exactly those of the regular expressions in the docstrings
# (kept as the reference in tests/reference_mail.py; tests/test_mail.py compares
# the two on the whole corpus, hand-written edge cases and generated input).


from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ
from libc.stdint cimport uint16_t, uint32_t
from libc.string cimport memchr, memcpy

from spamnb.mail._unicode cimport PyUnicode_FromKindAndData, PyUnicode_FromOrdinal, PyUnicode_Substring, _find_char


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
