# Included in spamnb.mail._mail (one compiled module for the parser and the
# tokenizer: a cold ``spamnb classify`` loads one, not five).
#
# Compiled text code of spamnb.mail.parser: bytes to text (the declared charset,
# strict UTF-8 or the fallback; lenient base64) and the text budget (white space
# runs, invisible format characters, look-alike letters).


from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ
from libc.stdint cimport uint8_t, uint32_t

from spamnb.mail._unicode cimport (PY_SSIZE_T_MAX, Py_UNICODE_ISSPACE, PyUnicode_4BYTE_KIND,
                                   PyUnicode_FromKindAndData, PyUnicode_IS_ASCII, PyUnicode_Substring)

from spamnb.mail import lazy_re

# The charset table (names resolved once, misses cached).
from spamnb.mail.charsets import codec_cache as _codec_cache, codec as _codec

cdef object _MISSING = object()


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

LOOK_ALIKES = ("асеорхуіјѕһԁԛԝӏАВСЕНІЈКМОРЅТХУαορνικΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
               "aceopxyijshdqwlABCEHIJKMOPSTXYaopvikABEZHIKMNOPTYX")
cdef enum:
    _FOLD_SIZE = 0x530
cdef Py_UCS4 _fold_table[_FOLD_SIZE]


cdef void _fill_fold_table(str look, str like) noexcept:
    """``_fold_table``: each code point itself, but ``look``'s letters ``like``'s
    (a C loop: a loop of the module's body sets a global each turn, 1 M
    instructions of a cold ``spamnb classify``)."""
    cdef Py_ssize_t i
    for i in range(_FOLD_SIZE):
        _fold_table[i] = <Py_UCS4>i
    for i in range(min(len(look), len(like))):
        _fold_table[look[i]] = like[i]


_fill_fold_table(LOOK_ALIKES[0], LOOK_ALIKES[1])


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
    return _text_prefix(text, budget, budget)[0]


def text_prefix_marked(str text not None, Py_ssize_t budget, Py_ssize_t smaller):
    """``(text_prefix(text, budget), len(text_prefix(text, smaller)))`` in one
    pass, for ``smaller`` <= ``budget`` (< 0: all of the text): the smaller
    budget's prefix is the larger's first characters (the same characters
    kept, dropped and folded), so one scan of the larger can mark where the
    smaller ends (a tokenizer and its word pairs' larger budget)."""
    if (budget >= 0 and (smaller < 0 or smaller > budget)):
        raise ValueError(f"the smaller budget {smaller} is larger than {budget}")
    return _text_prefix(text, budget, smaller)


cdef tuple _text_prefix(str text, Py_ssize_t budget, Py_ssize_t smaller):
    """``text_prefix(text, budget)`` and the length of ``text_prefix(text, smaller)``
    (``smaller`` <= ``budget``, both < 0 for no budget)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0, j, used = 0, n_changed = 0, out_len = 0
    cdef Py_ssize_t n_invisible = 0, mark = -1
    cdef int kind = PyUnicode_KIND(text)
    cdef const void *data = PyUnicode_DATA(text)
    cdef Py_UCS4 c
    cdef Py_UCS4 *out
    cdef bint in_space = False, space
    cdef const uint8_t *one = <const uint8_t *>data
    cdef Py_ssize_t limit, counted
    if budget < 0:
        budget = PY_SSIZE_T_MAX
    if smaller < 0:
        smaller = PY_SSIZE_T_MAX
    while i < n:
        if kind == 1:   # PyUnicode_1BYTE_KIND
            # ASCII, the most of a text: never invisible nor folded, every character counted but a space after
            # a space, and no branch on which; the loop below takes the others and where a budget ends
            limit = smaller if mark < 0 else budget
            while i < n:
                c = one[i]
                space = Py_UNICODE_ISSPACE(c)
                counted = not (space and in_space)
                if c >= 0x80 or (counted and used >= limit):
                    break
                used += counted
                in_space = space
                i += 1
            if i == n:
                break
        c = PyUnicode_READ(kind, data, i)
        if Py_UNICODE_ISSPACE(c):
            if not in_space:
                if used == smaller and mark < 0:    # the smaller budget's prefix ends here
                    mark = i - n_invisible
                if used == budget:
                    break
                used += 1
                in_space = True
        elif c >= 0xAD and _is_invisible(c):
            n_changed += 1
            n_invisible += 1
        else:
            if used == smaller and mark < 0:
                mark = i - n_invisible
            if used == budget:
                break
            used += 1
            in_space = False
            if c >= 0xC0 and _fold(c) != c:
                n_changed += 1
        i += 1
    if mark < 0:
        mark = i - n_invisible
    if n_changed == 0:
        return (text if i == n else PyUnicode_Substring(text, 0, i)), mark
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
        return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, out_len), mark
    finally:
        PyMem_Free(out)


# -- lenient base64 (Python code: C-speed calls) ---------------------------------------
_NOT_BASE64 = lazy_re.pattern(rb"[^A-Za-z0-9+/]+", lazy_re.A)   # compiled when a damaged base64 needs it


def base64_lenient(data):
    """Lenient base64: ignores non-alphabet bytes, decodes the longest valid prefix."""
    binascii = _ascii()
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
