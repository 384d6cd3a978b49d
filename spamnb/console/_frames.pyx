"""Compiled frame builder of spamnb.console.records: one call appends a
check's record frame to a worker's bytearray.

``append_held`` appends the frames of the records a
:class:`~spamnb.console.records.RecordSender` holds at a flush in one call
(its ``_build``: each verdict's fields read here, a record that cannot be
made dropped and counted); ``append_frame``
appends the frame of given numbers and strings (the shape of
``records._append``'s arguments), the header block found here too;
``header_length`` is ``spamnb.mail.headers.header_length`` (the same cut:
a header only when the message starts with a field, or an envelope line
and a field; up to the first blank line, ``\\n\\r?\\n``, the CRs before it
dropped; within the first ``limit`` bytes).

The frames are byte for byte ``records._append``'s (the Python reference,
which ``records.encode`` uses; tests/test_console_frames.py compares the
two on hostile input): the numbers packed big-endian as ``_FRAME_HEAD``
does (an integer field refuses what ``struct``'s ``I`` refuses), the
evidence's weights, the strings joined by NUL and UTF-8 encoded with
``errors="replace"`` (each cleaned as ``records._clean`` does: not a str
-> ``str()``, NUL -> space, cut to ``STRING_CHARS``, when the joined text
is longer than ``STRING_CHARS`` or one of them is not clean), the header
block copied once from the message, the kept message.  Nothing is appended
when the record cannot be made (the exception propagates, as the
reference's).  The module imports nothing of spamnb's.
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.number cimport PyNumber_Index
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_AsEncodedString
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memchr, memcpy

cdef extern from "Python.h":
    ctypedef struct PyByteArrayObject:
        Py_ssize_t ob_alloc         # the bytes allocated (the size in use and its NUL at most)
    bint PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_FindChar(object s, Py_UCS4 ch, Py_ssize_t start, Py_ssize_t end, int direction) except -2

__all__ = ["append_frame", "append_held", "header_length"]

DEF NUMBERS_SIZE = 91       # records._NUMBERS.size: >BI8d4IHI
DEF HEAD_SIZE = 95          # records._FRAME_HEAD.size: the frame's length, then the numbers
DEF STACK = 32              # the evidence's weights held on the stack up to this many (more: allocated)

cdef double NAN = float("nan")
cdef tuple NO_ENVELOPE = ("", "", "", "", "")
cdef Py_ssize_t STRING_CHARS = 1000     # records.STRING_CHARS
cdef Py_ssize_t HEAD_BYTES = 8 * 1024   # records.HEAD_BYTES
cdef Py_ssize_t KEEP_BYTES = 1024 * 1024  # records.KEEP_BYTES
cdef Py_ssize_t EVIDENCE = 24           # records.EVIDENCE
BOUNDS = (STRING_CHARS, HEAD_BYTES, KEEP_BYTES, EVIDENCE)   # records.py's (its test holds them equal)


cdef extern from *:
    """
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* The first blank line (LF LF or LF CR LF) ending within p[0:n]: its start, or -1.  With SSE2, 16 starts a step
       (each compared with the byte after it and the two after it), the last ones one by one. */
    static Py_ssize_t spamnb_blank_line(const unsigned char *p, Py_ssize_t n) {
        Py_ssize_t i = 0;
    #if defined(__SSE2__)
        const __m128i lf = _mm_set1_epi8(10), cr = _mm_set1_epi8(13);
        for (; i + 18 <= n; i += 16) {
            __m128i a = _mm_loadu_si128((const __m128i *)(p + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(p + i + 1));
            __m128i c = _mm_loadu_si128((const __m128i *)(p + i + 2));
            __m128i at = _mm_cmpeq_epi8(a, lf);
            __m128i two = _mm_and_si128(at, _mm_cmpeq_epi8(b, lf));
            __m128i three = _mm_and_si128(_mm_and_si128(at, _mm_cmpeq_epi8(b, cr)), _mm_cmpeq_epi8(c, lf));
            int mask = _mm_movemask_epi8(_mm_or_si128(two, three));
            if (mask)
                return i + __builtin_ctz((unsigned)mask);
        }
    #endif
        for (; i + 2 <= n; i++) {
            if (p[i] == 10 && (p[i + 1] == 10 || (i + 3 <= n && p[i + 1] == 13 && p[i + 2] == 10)))
                return i;
        }
        return -1;
    }
    """
    Py_ssize_t spamnb_blank_line(const uint8_t *p, Py_ssize_t n) nogil


cdef inline bint _name_char(uint8_t c) noexcept nogil:
    return 0x21 <= c <= 0x7e and c != 0x3a


cdef inline bint _field_at(const uint8_t *p, Py_ssize_t at, Py_ssize_t n) noexcept nogil:
    """``[\\x21-\\x39\\x3b-\\x7e]+[ \\t]*:`` matches at ``at`` within ``n``."""
    cdef Py_ssize_t i = at
    while i < n and _name_char(p[i]):
        i += 1
    if i == at:
        return False
    while i < n and (p[i] == 32 or p[i] == 9):
        i += 1
    return i < n and p[i] == 58


cdef Py_ssize_t _header_length(const uint8_t *p, Py_ssize_t size, Py_ssize_t limit) noexcept nogil:
    cdef Py_ssize_t n = size if limit < 0 or limit > size else limit
    cdef Py_ssize_t i
    cdef const uint8_t *nl
    cdef bint field = False
    # the envelope line first (the pattern's optional group), then without it
    if n >= 5 and p[0] == 70 and p[1] == 114 and p[2] == 111 and p[3] == 109 and p[4] == 32:   # "From "
        nl = <const uint8_t *>memchr(p + 5, 10, n - 5)
        if nl != NULL:
            field = _field_at(p, nl - p + 1, n)
    if not field and not _field_at(p, 0, n):
        return 0
    i = spamnb_blank_line(p, n)     # the first "\n\n" or "\n\r\n" ending within n
    if i < 0:
        return n
    while i and p[i - 1] == 13:     # the CRs before it dropped
        i -= 1
    return i


def header_length(message, limit=None):
    """``spamnb.mail.headers.header_length(message, limit)``: the length of
    the header block of ``message`` (a bytes-like object) within its first
    ``limit`` bytes."""
    cdef Py_buffer view
    cdef Py_ssize_t n
    PyObject_GetBuffer(message, &view, PyBUF_SIMPLE)
    try:
        n = _header_length(<const uint8_t *>view.buf, view.len, -1 if limit is None else <Py_ssize_t>limit)
    finally:
        PyBuffer_Release(&view)
    return n


cdef inline void _put32(char *at, uint32_t v) noexcept nogil:
    at[0] = <char>(v >> 24)
    at[1] = <char>(v >> 16)
    at[2] = <char>(v >> 8)
    at[3] = <char>v


cdef inline void _put_double(char *at, double v) noexcept nogil:
    cdef uint64_t bits
    memcpy(&bits, &v, 8)
    bits = __builtin_bswap64(bits)
    memcpy(at, &bits, 8)


cdef extern from *:
    uint64_t __builtin_bswap64(uint64_t) nogil


cdef uint32_t _uint32(object value) except? 0xFFFFFFFF:
    """``struct``'s ``I``: an integer (``__index__``) in 0 .. 2**32 - 1."""
    cdef object index = PyNumber_Index(value)
    if index < 0 or index > 0xFFFFFFFF:
        raise OverflowError("argument out of range")
    return <uint32_t>index


cdef object _clean(object value):
    """records._clean: str(), NUL -> space, cut to STRING_CHARS."""
    text = str(value)
    if PyUnicode_FindChar(text, 0, 0, PyUnicode_GET_LENGTH(text), 1) >= 0:
        text = text.replace("\0", " ")
    return text[:STRING_CHARS]


cdef int _append(bytearray out, Py_ssize_t *used, numbers, tuple strings, envelope, evidence,
                 const uint8_t *source, Py_ssize_t head, message) except -1:
    """The frame appended to ``out``: ``numbers`` the 12 of records._NUMBERS
    after its version (pid, 8 floats, size, tokens, dropped); the header
    block the first ``head`` bytes of ``source``; ``message`` the kept one
    (a bytes-like object or b"").  The frame is written at ``used`` (the
    bytes of ``out`` in use: it may be longer, room made ahead), which it
    then ends at."""
    cdef list keep = []                 # the strings, then each an ASCII str or the bytes of its encoding
    cdef Py_ssize_t i, n
    cdef double stack[STACK]
    cdef double *weights = stack
    cdef double floats[8]
    cdef uint32_t pid
    cdef uint32_t ints[3]

    if envelope:
        if not isinstance(envelope, tuple):
            raise TypeError("the envelope is not a tuple")
    else:
        envelope = NO_ENVELOPE
    if len(numbers) != 12:
        raise ValueError("a record has 12 numbers")
    pid = _uint32(numbers[0])
    for i in range(8):
        floats[i] = numbers[1 + i]
    for i in range(3):
        ints[i] = _uint32(numbers[9 + i])
    n = len(evidence)
    if n > 0xFFFF:
        raise OverflowError("too much evidence in a record")
    if n > STACK:
        weights = <double *>PyMem_Malloc(8 * n)
        if weights == NULL:
            raise MemoryError()
    try:
        _append_into(out, used, pid, floats, ints, strings, <tuple>envelope, evidence, n, weights, keep, source,
                     head, message)
    finally:
        if weights != stack:
            PyMem_Free(weights)
    return 0


cdef int _append_into(bytearray out, Py_ssize_t *used, uint32_t pid, double *floats, uint32_t *ints, tuple strings, tuple envelope,
                      evidence, Py_ssize_t n, double *weights, list keep, const uint8_t *source, Py_ssize_t head,
                      message) except -1:
    cdef Py_ssize_t count = 0, chars = 0, i, text = 0, total, at, kept_len = 0, length, alloc
    cdef bint clean = True
    cdef object value, token, weight
    cdef Py_buffer kept_view
    cdef bint has_kept = False
    cdef char *p
    for value in strings:
        keep.append(value)
    for value in envelope:
        keep.append(value)
    i = 0
    for value in evidence:
        token, weight = value
        if i >= n:
            raise ValueError("the evidence changed")
        keep.append(token)
        weights[i] = weight
        i += 1
    if i != n:
        raise ValueError("the evidence changed")
    count = len(keep)
    for i in range(count):      # clean: all str, no NUL, the joined text within STRING_CHARS
        value = keep[i]
        if not isinstance(value, str):
            clean = False
            break
        chars += PyUnicode_GET_LENGTH(value)
        if PyUnicode_FindChar(value, 0, 0, PyUnicode_GET_LENGTH(value), 1) >= 0:
            clean = False
            break
    if clean and chars + count - 1 > STRING_CHARS:
        clean = False
    for i in range(count):
        value = keep[i] if clean else _clean(keep[i])
        if PyUnicode_IS_ASCII(value):
            text += PyUnicode_GET_LENGTH(value)
        else:
            value = PyUnicode_AsEncodedString(value, "utf-8", "replace")
            text += PyBytes_GET_SIZE(value)
        keep[i] = value
    if count:
        text += count - 1
    if message:
        PyObject_GetBuffer(message, &kept_view, PyBUF_SIMPLE)
        has_kept = True
        kept_len = kept_view.len
    try:
        total = HEAD_SIZE + 8 * n + text + 8 + head + kept_len
        if total - 4 > 0xFFFFFFFF:
            raise OverflowError("a record too large")
        at = used[0]
        if at + total > PyByteArray_GET_SIZE(out):
            alloc = (<PyByteArrayObject *>out).ob_alloc
            # within the allocation: its size set; past it: the allocation doubled (a frame a reallocation,
            # each 1/8 larger, copies a flush's buffer 8 times over)
            PyByteArray_Resize(out, at + total if at + total < alloc else max(at + total, 2 * alloc))
        p = PyByteArray_AS_STRING(out) + at
        used[0] = at + total
        _put32(p, <uint32_t>(total - 4))
        p[4] = 2
        _put32(p + 5, pid)
        for i in range(8):
            _put_double(p + 9 + 8 * i, floats[i])
        for i in range(3):
            _put32(p + 73 + 4 * i, ints[i])
        _put32(p + 85, 0)
        p[89] = <char>(n >> 8)
        p[90] = <char>n
        _put32(p + 91, <uint32_t>text)
        p += HEAD_SIZE
        for i in range(n):
            _put_double(p, weights[i])
            p += 8
        for i in range(count):
            if i:
                p[0] = 0
                p += 1
            value = keep[i]
            if isinstance(value, bytes):
                length = PyBytes_GET_SIZE(value)
                memcpy(p, PyBytes_AS_STRING(value), length)
            else:
                length = PyUnicode_GET_LENGTH(value)
                memcpy(p, PyUnicode_DATA(value), length)
            p += length
        _put32(p, <uint32_t>head)
        if head:
            memcpy(p + 4, source, head)
        p += 4 + head
        _put32(p, <uint32_t>kept_len)
        if kept_len:
            memcpy(p + 4, kept_view.buf, kept_len)
    finally:
        if has_kept:
            PyBuffer_Release(&kept_view)
    return 0


def append_frame(bytearray out, numbers, tuple strings, evidence, source, message=b"", envelope=None):
    """Append the frame of ``records._append(out, numbers, strings,
    evidence, source, header_length(source, HEAD_BYTES), message,
    envelope)`` to ``out``: ``numbers`` (pid, the 8 floats, size, tokens,
    dropped), ``strings`` (a tuple of the record's six), ``evidence`` (pairs
    of token and weight), ``source`` the checked message (its header block
    found and copied here), ``message`` the kept one or b"", ``envelope``
    the milter's tuple or None."""
    cdef Py_buffer view
    cdef Py_ssize_t used = PyByteArray_GET_SIZE(out)
    PyObject_GetBuffer(source, &view, PyBUF_SIMPLE)
    try:
        _append(out, &used, numbers, strings, envelope, evidence, <const uint8_t *>view.buf,
                _header_length(<const uint8_t *>view.buf, view.len, HEAD_BYTES), message)
    finally:
        PyBuffer_Release(&view)
        PyByteArray_Resize(out, used)


cdef int _check(bytearray out, Py_ssize_t *used, checked, message, user, when, verb, ms, protocol, action,
                envelope, pid, dropped, bint keep) except -1:
    cdef Py_buffer view
    verdict = checked.verdict
    cutoffs = getattr(checked.model, "cutoffs", None)
    if cutoffs is not None:
        spam_cut, ham_cut = cutoffs.spam, cutoffs.ham
    else:
        spam_cut = ham_cut = NAN
    tokens = verdict.tokens
    reason = verdict.reason
    strings = (verdict.label, user if user else "", verb, protocol, action, reason if reason else "")
    evidence = verdict.evidence[:EVIDENCE]
    PyObject_GetBuffer(message, &view, PyBUF_SIMPLE)
    try:
        _append(out, used, (pid, when, checked.score, checked.score_map.required, verdict.log_odds,
                            verdict.probability, ms, spam_cut, ham_cut, view.len, tokens if tokens else 0, dropped),
                strings, envelope, evidence, <const uint8_t *>view.buf,
                _header_length(<const uint8_t *>view.buf, view.len, HEAD_BYTES),
                message if keep and view.len <= KEEP_BYTES else b"")
    finally:
        PyBuffer_Release(&view)
    return 0


def append_held(bytearray out, list held, pid, Py_ssize_t dropped, bint keep):
    """Append the frames of the records ``held`` (RecordSender's: each
    ``((checked, message, user, when), verb, ms, protocol, action,
    envelope)``, ``checked`` a spamnb.server.check.Checked: its verdict, score,
    score map and model's cutoffs read here; the message kept whole with
    ``keep`` when at most ``KEEP_BYTES``) to ``out``, ``out`` grown by
    doubling (not a reallocation a frame); a record whose frame cannot be
    made is dropped and counted (each frame carries the count of drops so
    far: ``dropped`` at the start).  RecordSender._build's one call:
    (frames made, the count of drops after)."""
    cdef Py_ssize_t used = PyByteArray_GET_SIZE(out), made = 0
    try:
        for item in held:
            (checked, message, user, when), verb, ms, protocol, action, envelope = item
            try:
                _check(out, &used, checked, message, user, when, verb, ms, protocol, action, envelope, pid,
                       dropped, keep)
                made += 1
            except Exception:  # noqa: BLE001 - the check is answered; only its record is lost, and counted
                dropped += 1
    finally:
        PyByteArray_Resize(out, used)
    return made, dropped
