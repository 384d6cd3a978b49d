# Compiled checks of a model file: its checksum, and the validation of what
# is read from it before anything uses it (counts, logarithms, token strings
# and their offsets).  Included in spamnb.bayes._score (one compiled module
# for a cold ``spamnb classify``, which checksums a journal); the layers above
# call these through spamnb.bayes.checks.
#
# Nothing here imports numpy; every array is any one-dimensional buffer,
# taken with ``spamnb/buffers.pxd``.  (The hash index's own check,
# ``check_index``, is the vocabulary's, in ``_index.pxi``.)

from libc.math cimport isfinite
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset
from libc.stdlib cimport free, malloc, realloc
from libc.errno cimport errno as c_errno
from cpython.bytes cimport PyBytes_FromStringAndSize

from cpython.buffer cimport PyBuffer_Release
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize

from spamnb.buffers cimport FLOAT, UNSIGNED, length_of, take


def check_range(values, double low, double high):
    """True when every value is finite and within [low, high] (validating
    derived logs read from a file)."""
    cdef Py_buffer view
    take(&view, values, FLOAT, 8, False, "double")
    try:
        return _check_range(<const double *>view.buf, length_of(&view), low, high)
    finally:
        PyBuffer_Release(&view)


cdef bint _check_range(const double *values, Py_ssize_t n, double low, double high) noexcept:
    cdef Py_ssize_t i
    cdef int ok = 1
    with nogil:
        for i in range(n):
            if not (isfinite(values[i]) and low <= values[i] <= high):
                ok = 0
                break
    return ok


def class_sums(values, Py_ssize_t n_classes):
    """The sum of each class's counts (``values`` class-major, ``n_classes``
    equal rows), or None when a count is negative or not finite."""
    cdef Py_buffer view
    take(&view, values, FLOAT, 8, False, "double")
    try:
        return _class_sums(<const double *>view.buf, length_of(&view), n_classes)
    finally:
        PyBuffer_Release(&view)


cdef _class_sums(const double *values, Py_ssize_t n_values, Py_ssize_t n_classes):
    cdef Py_ssize_t c, i, n
    cdef double total
    cdef int ok = 1
    if n_classes < 1 or n_values % n_classes:
        raise ValueError("the counts do not split into the classes")
    n = n_values // n_classes
    sums = []
    for c in range(n_classes):
        total = 0.0
        with nogil:
            for i in range(c * n, (c + 1) * n):
                if not (isfinite(values[i]) and values[i] >= 0.0):
                    ok = 0
                    break
                total += values[i]
        if not ok:
            return None
        sums.append(total)
    return sums


def check_utf8(data):
    """True when ``data`` decodes as UTF-8 with "surrogatepass" (what
    ``str(data, "utf-8", "surrogatepass")`` accepts), without building the str:
    validating a full-corpus model's token strings took 1.3 ms that way, of a
    ~50 ms ``spamnb classify``."""
    cdef Py_buffer view
    take(&view, data, UNSIGNED, 1, False, "uint8_t")
    try:
        return _check_utf8(<const uint8_t *>view.buf, length_of(&view))
    finally:
        PyBuffer_Release(&view)


cdef bint _check_utf8(const uint8_t *data, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i = 0, need
    cdef uint8_t b, lo, hi
    cdef uint64_t word
    cdef int ok = 1
    with nogil:
        while i < n:
            if i + 8 <= n:                              # ASCII, eight bytes at a time
                memcpy(&word, &data[i], 8)
                if (word & 0x8080808080808080ULL) == 0:
                    i += 8
                    continue
            b = data[i]
            if b < 0x80:
                i += 1
                continue
            lo, hi = 0x80, 0xBF                         # range of the first continuation byte
            if 0xC2 <= b <= 0xDF:
                need = 1
            elif 0xE0 <= b <= 0xEF:
                need = 2
                if b == 0xE0:
                    lo = 0xA0                           # no overlong forms; surrogates (ED A0..BF) pass
            elif 0xF0 <= b <= 0xF4:
                need = 3
                if b == 0xF0:
                    lo = 0x90
                elif b == 0xF4:
                    hi = 0x8F                           # nothing above U+10FFFF
            else:
                ok = 0
                break
            if i + need >= n:                             # the sequence runs past the end
                ok = 0
                break
            if not (lo <= data[i + 1] <= hi):
                ok = 0
                break
            if need >= 2 and not (0x80 <= data[i + 2] <= 0xBF):
                ok = 0
                break
            if need == 3 and not (0x80 <= data[i + 3] <= 0xBF):
                ok = 0
                break
            i += need + 1
    return ok


def check_offsets(offsets, uint64_t blob_size):
    """True when offsets start at 0, never decrease and end at ``blob_size``."""
    cdef Py_buffer view
    take(&view, offsets, UNSIGNED, 8, False, "uint64_t")
    try:
        return _check_offsets(<const uint64_t *>view.buf, length_of(&view), blob_size)
    finally:
        PyBuffer_Release(&view)


cdef bint _check_offsets(const uint64_t *offsets, Py_ssize_t n, uint64_t blob_size) noexcept:
    cdef Py_ssize_t i
    cdef int ok = 1
    if n == 0 or offsets[0] != 0 or offsets[n - 1] != blob_size:
        return False
    with nogil:
        for i in range(1, n):
            if offsets[i] < offsets[i - 1]:
                ok = 0
                break
    return ok


# --------------------------------------------------------------------------
# checksum of the model file
# --------------------------------------------------------------------------
cdef inline uint64_t _rotl(uint64_t v, int r) noexcept nogil:
    return (v << r) | (v >> (64 - r))


cdef uint64_t _P1 = 0x9E3779B185EBCA87ULL
cdef uint64_t _P2 = 0xC2B2AE3D27D4EB4FULL
cdef uint64_t _P3 = 0x165667B19E3779F9ULL


cdef inline uint64_t _round(uint64_t acc, uint64_t word) noexcept nogil:
    acc += word * _P2
    acc = _rotl(acc, 31)
    return acc * _P1


cdef inline void _blocks(uint64_t *v, const uint8_t *p, Py_ssize_t n_blocks) noexcept nogil:
    """The four lanes ``v`` over ``n_blocks`` 32-byte blocks at ``p``."""
    cdef uint64_t w
    cdef Py_ssize_t k
    for k in range(n_blocks):
        memcpy(&w, p, 8)
        v[0] = _round(v[0], w)
        memcpy(&w, p + 8, 8)
        v[1] = _round(v[1], w)
        memcpy(&w, p + 16, 8)
        v[2] = _round(v[2], w)
        memcpy(&w, p + 24, 8)
        v[3] = _round(v[3], w)
        p += 32


cdef inline uint64_t _finish(const uint64_t *v, uint64_t total, const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """The checksum of ``total`` bytes whose blocks gave the lanes ``v``, the
    last ``n`` (< 32) at ``p``: the tail, then the avalanche."""
    cdef Py_ssize_t i = 0
    cdef uint64_t h, w
    if total == 0:
        return 0x2545F4914F6CDD1DULL
    h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18) + total
    while i + 8 <= n:
        memcpy(&w, p + i, 8)
        h ^= _round(0, w)
        h = _rotl(h, 27) * _P1 + _P3
        i += 8
    while i < n:
        h ^= (<uint64_t>p[i]) * _P3
        h = _rotl(h, 11) * _P1
        i += 1
    h ^= h >> 33
    h *= _P2
    h ^= h >> 29
    h *= _P3
    h ^= h >> 32
    return h


cdef inline void _start(uint64_t *v) noexcept nogil:
    v[0] = _P1 + _P2
    v[1] = _P2
    v[2] = 0
    v[3] = 0 - _P1


cdef class Checksum64:
    """:func:`checksum64` of bytes given piece by piece: ``update(piece)``
    any number of times, then ``digest()`` is ``checksum64`` of the pieces
    joined (without joining them: a model file is checksummed as it is
    written, never built whole in memory)."""

    cdef uint64_t v[4]
    cdef uint64_t n
    cdef uint8_t pending[32]
    cdef Py_ssize_t n_pending

    def __cinit__(self):
        _start(self.v)
        self.n = 0
        self.n_pending = 0

    def update(self, data):
        """Add the bytes of ``data`` (any contiguous buffer)."""
        cdef Py_buffer view
        take(&view, data, UNSIGNED, 1, False, "uint8_t")
        try:
            self._update(<const uint8_t *>view.buf, length_of(&view))
        finally:
            PyBuffer_Release(&view)

    cdef void _update(self, const uint8_t *p, Py_ssize_t n) noexcept:
        cdef Py_ssize_t i = 0, take
        if n == 0:
            return
        self.n += <uint64_t>n
        with nogil:
            if self.n_pending:
                take = min(32 - self.n_pending, n)
                memcpy(&self.pending[self.n_pending], p, take)
                self.n_pending += take
                i = take
                if self.n_pending == 32:
                    _blocks(self.v, self.pending, 1)
                    self.n_pending = 0
            _blocks(self.v, p + i, (n - i) // 32)
            i += (n - i) // 32 * 32
            if i < n:
                memcpy(self.pending, p + i, n - i)
                self.n_pending = n - i

    def digest(self):
        """:func:`checksum64` of every byte given so far."""
        return _finish(self.v, self.n, self.pending, self.n_pending)


def checksum64(data):
    """64-bit checksum of a byte buffer: four multiply-rotate lanes over
    32-byte blocks, then the tail, then an avalanche.  Detects truncation,
    bit flips and reordering; it is not a cryptographic hash.
    """
    cdef Py_buffer view
    take(&view, data, UNSIGNED, 1, False, "uint8_t")
    try:
        return _checksum64(<const uint8_t *>view.buf, length_of(&view))
    finally:
        PyBuffer_Release(&view)


cdef uint64_t _checksum64(const uint8_t *p, Py_ssize_t n) noexcept:
    cdef uint64_t h
    with nogil:
        h = _checksum64_nogil(p, n)
    return h


cdef inline uint64_t _checksum64_nogil(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    cdef uint64_t v[4]
    if n == 0:
        return 0x2545F4914F6CDD1DULL
    _start(v)
    _blocks(v, p, n // 32)
    return _finish(v, <uint64_t>n, p + n // 32 * 32, n - n // 32 * 32)


cdef inline uint64_t _le(const uint8_t *p, int n) noexcept nogil:
    """The little-endian unsigned integer of the ``n`` bytes at ``p``."""
    cdef uint64_t v = 0
    cdef int k
    for k in range(n - 1, -1, -1):
        v = (v << 8) | p[k]
    return v


cdef uint64_t _record_checksum(const uint8_t *head, const uint8_t *record, const uint8_t *payload,
                               Py_ssize_t size) noexcept nogil:
    """``_checksum64`` of ``head`` (8 bytes), ``record`` (8 bytes) and ``payload``
    (``size`` bytes, a multiple of 8) joined, without joining them: the
    first block (or the whole, when shorter) put together, the rest read in place."""
    cdef uint8_t first[32]
    cdef uint64_t v[4]
    cdef Py_ssize_t rest
    memcpy(first, head, 8)
    memcpy(first + 8, record, 8)
    if size < 16:
        memcpy(first + 16, payload, size)
        return _checksum64_nogil(first, 16 + size)
    memcpy(first + 16, payload, 16)
    _start(v)
    _blocks(v, first, 1)
    rest = size - 16
    _blocks(v, payload + 16, rest // 32)
    return _finish(v, <uint64_t>(16 + size), payload + 16 + rest // 32 * 32, rest % 32)


def journal_records(data, head, Py_ssize_t at, view=None):
    """The whole records of a model's journal (``spamnb.persistence.journal``)
    in its bytes ``data`` from offset ``at``: each ``<IIQ>`` (payload length,
    sequence number, checksum) then the payload, taken while the length is
    a multiple of 8 and within ``data``, the sequence number is the record's
    place (0, 1, ...) and the checksum is ``checksum64`` of ``head`` (the
    journal header's 8 checksum bytes), the record's first 8 bytes and the
    payload (read where they are: no copy).  Returns ``(spans, end)``: each payload's ``(start, stop)`` and
    the offset after the last record taken; with ``view`` (a memoryview of ``data``), each payload's
    view, ``view[start:stop]``, instead of its span (made here: no tuple a record, nor a loop in Python)."""
    cdef Py_buffer d, h
    cdef const uint8_t *p
    cdef Py_ssize_t n, size, end
    cdef uint64_t sequence = 0
    spans = []
    take(&d, data, UNSIGNED, 1, False, "uint8_t")
    try:
        take(&h, head, UNSIGNED, 1, False, "uint8_t")
        try:
            if length_of(&h) != 8:
                raise ValueError("a journal's head checksum is 8 bytes")
            p, n = <const uint8_t *>d.buf, length_of(&d)
            while at >= 0 and at + 16 <= n:
                size = <Py_ssize_t>_le(p + at, 4)
                end = at + 16 + size
                if size % 8 or end > n or _le(p + at + 4, 4) != sequence:
                    break
                if _record_checksum(<const uint8_t *>h.buf, p + at, p + at + 16, size) != _le(p + at + 8, 8):
                    break
                if view is None:
                    spans.append((at + 16, end))
                else:
                    spans.append(view[at + 16:end])
                sequence += 1
                at = end
            return spans, at
        finally:
            PyBuffer_Release(&h)
    finally:
        PyBuffer_Release(&d)


# The journal's record layouts journal_learns reads (spamnb.persistence.store
# defines them, journal_view hands them in: a change there is refused here, not misread):
# the learn's, the ledger record's, its padded size, the held-out score's, the
# pair scores', a learn's sums'; then the ops (learn, record, remove, held-out,
# its taking back, pair scores, a learn's sums).
_JOURNAL_LAYOUT = ("<BBxxiIIII", "<BBH16s", 24, "<BBxxf", "<BBxxxxxxdddd", "<BBxxxxxxdd", 1, 3, 4, 5, 6, 7, 8)


_NO_SUMS = b"\x00\x00\x00\x00\x00\x00\xf8\x7f" * 2   # NaN, NaN (float64, little-endian): a learn without them
# journal_learns' fields of a learn (int64 each): payload index, class, features before, new tokens, start of its
# hashes, start of its text, text bytes, hashes
cdef enum:
    LEARN_FIELDS = 8


def journal_learns(payloads, Py_ssize_t n_base, layout, base=None):
    """The learns and held-out scores of a journal's records (``payloads``, the
    transactions of ``spamnb.persistence.journal``), for a classify that
    scores through them (``spamnb.persistence.journal_view``), read in one
    compiled pass; None when a record is not one a view stands for (a
    forget, an unknown or malformed operation, a learn that does not follow
    the vocabulary: ``n_before`` of each learn must be ``n_base`` and the
    new tokens of the learns before it).  The records (``spamnb.persistence.records``):
    a learn ``<BBxxiIIII>`` (op 1, class, day, features before, hashes, new
    tokens, text bytes) then its hashes (8 bytes each), the new tokens'
    UTF-8 lengths (4 bytes each, summing to the text's) and their text, padded
    to 8 bytes; a ledger record or removal (ops 3, 4: 24 bytes, flags <= 3,
    held-out bin <= 512); a held-out score or its taking back (ops 5, 6:
    ``<BBxxf>``); the pair scores (op 7: ``<BBxxxxxxdddd>``, their fit is the
    caller's to check); a learn's sums (op 8: ``<BBxxxxxxdd>``, class, the sum
    of its values and their scale, right after its learn, of its class, the
    sum finite, the scale finite and positive); op 0 ends a payload (its padding).

    Returns ``(learns, scores, hashes, bounds, classes, sums)``: each learn's
    payload index, class, features before, new tokens, start of its
    hashes, start of its text, text bytes and hashes (its lengths lie
    between its hashes' end and its text; a bytearray of int64, 8 a
    learn: no Python object made for each), each payload's ``[(op, class, value), ...]``
    of held-out scores (value: the log-odds, or ``(words, pairs, weight,
    scale)``), the learns' hashes one after the other (a bytearray of
    uint64), where each learn's start and end (a bytearray of int64: learns
    + 1 bounds), each learn's class (bytes) and each learn's sum and scale
    (a bytearray of float64, two per learn; NaN, NaN for a learn recorded
    without them).  ``layout``: the record layouts and ops as
    ``spamnb.persistence.store`` defines them (ValueError when they are not
    the ones read here).  With ``base`` (the buffer the payloads are views
    of: the journal's bytes, as many as a multiple of 8), the hashes are not
    copied: the third item is then where each learn's hashes start in
    ``base``, in 8-byte words (a bytearray of int64, one a learn), and a
    payload that is not within ``base`` gives None."""
    cdef _Learns got   # each learn's fields, class, sums and place, grown in C (no Python object a learn)
    if tuple(layout) != _JOURNAL_LAYOUT:
        raise ValueError(f"the journal's record layouts {tuple(layout)!r} are not those read here ({_JOURNAL_LAYOUT!r})")
    memset(&got, 0, sizeof(got))
    try:
        return _journal_learns(payloads, n_base, base, &got)
    finally:
        free(got.fields)
        free(got.classes)
        free(got.sums)
        free(got.places)


cdef _journal_learns(payloads, Py_ssize_t n_base, base, _Learns *got):
    """:func:`journal_learns`' pass, its learns grown in ``got``."""
    cdef Py_buffer d, b
    cdef const uint8_t *p
    cdef Py_ssize_t k, n, total = 0, live = n_base
    cdef Py_ssize_t offset = 0, n_base_bytes = 0
    cdef const uint8_t *base_at = NULL
    cdef bint with_base = base is not None
    cdef int fits
    scores = []
    if with_base:
        take(&b, base, UNSIGNED, 1, False, "uint8_t")
    try:
        if with_base:
            base_at, n_base_bytes = <const uint8_t *>b.buf, length_of(&b)
            if n_base_bytes % 8:
                raise ValueError("journal_learns: the base is not a whole number of 8-byte words")
        for k in range(len(payloads)):
            take(&d, payloads[k], UNSIGNED, 1, False, "uint8_t")
            try:
                p = <const uint8_t *>d.buf
                n = length_of(&d)
                if with_base:   # the payload's place in base (its learns' hashes are read there)
                    offset = p - base_at
                    if offset < 0 or offset % 8 or offset + n > n_base_bytes:
                        if _has_learn(p, n):
                            return None   # a learn's record not within base
                mine = []
                fits = _payload_learns(p, n, k, offset, &live, got, mine, &total)
                if not fits:
                    return None
                scores.append(mine)
            finally:
                PyBuffer_Release(&d)
    finally:
        if with_base:
            PyBuffer_Release(&b)
    return _learns_result(payloads, got, total, with_base, scores)


cdef bint _has_learn(const uint8_t *p, Py_ssize_t n) noexcept:
    """Whether the payload's first learn comes before anything that stops a view
    (journal_learns refused a payload outside its base only once it met a learn)."""
    cdef Py_ssize_t at = 0
    while at < n:
        if p[at] == 0:
            return False
        if p[at] == 1:
            return True
        if p[at] == 3 or p[at] == 4 or p[at] == 8:
            at += 24
        elif p[at] == 5 or p[at] == 6:
            at += 8
        elif p[at] == 7:
            at += 40
        else:
            return False
    return False


cdef int _payload_learns(const uint8_t *p, Py_ssize_t n, Py_ssize_t k, Py_ssize_t offset, Py_ssize_t *live,
                         _Learns *got, list mine, Py_ssize_t *total) except -1:
    """Payload ``k``'s operations (``n`` bytes at ``p``, at ``offset`` in the
    base or the file, 8-byte aligned) read as :func:`journal_learns` reads
    them: its learns added to ``got`` (their hashes' place ``(offset + at) //
    8``), its held-out scores to ``mine``; 0 when it is not one a view stands
    for (``live``: the vocabulary's size so far, -1 until a first learn sets it)."""
    cdef Py_ssize_t at = 0, end, n_hashes, n_new, n_text, h_at, l_at, i
    cdef uint64_t sum_lengths
    cdef uint8_t op, cls
    cdef float f
    cdef double w[4]
    cdef bint after_learn = False   # the op before was a learn (its sums may follow)
    while at < n:
        op = p[at]
        if op == 0:
            break
        if op == 8:   # OP_LEARN_SUMS: the learn just read's
            if at + 24 > n or not after_learn or p[at + 1] != got.classes[got.n - 1]:
                return 0
            memcpy(w, p + at + 8, 16)
            if not (isfinite(w[0]) and isfinite(w[1]) and w[1] > 0.0):
                return 0
            memcpy(got.sums + 2 * (got.n - 1), w, 16)
            after_learn = False
            at += 24
            continue
        after_learn = op == 1
        if op == 1:   # OP_LEARN
            if at + 24 > n:
                return 0
            cls = p[at + 1]
            n_hashes = <Py_ssize_t>_le(p + at + 12, 4)
            n_new = <Py_ssize_t>_le(p + at + 16, 4)
            n_text = <Py_ssize_t>_le(p + at + 20, 4)
            h_at = at + 24
            l_at = h_at + 8 * n_hashes
            end = l_at + 4 * n_new + n_text
            if end > n or cls > 1:
                return 0
            sum_lengths = 0
            for i in range(n_new):
                sum_lengths += _le(p + l_at + 4 * i, 4)
            if sum_lengths != <uint64_t>n_text:
                return 0
            if live[0] < 0:   # the vocabulary's size before the first learn: the caller's to check
                live[0] = <Py_ssize_t>_le(p + at + 8, 4)
            if <Py_ssize_t>_le(p + at + 8, 4) != live[0]:
                return 0
            live[0] += n_new
            _learns_add(got, k, cls, live[0] - n_new, n_new, h_at, end - n_text, n_text, n_hashes, (offset + h_at) // 8)
            total[0] += n_hashes
            at = end + (8 - end % 8) % 8   # end >= 0 (C division: the module's cdivision)
        elif op == 3 or op == 4:   # OP_RECORD, OP_REMOVE
            if at + 24 > n or p[at + 1] > 3 or _le(p + at + 2, 2) > 512:
                return 0
            at += 24
        elif op == 5 or op == 6:   # OP_HELD_OUT, OP_HELD_OUT_BACK
            if at + 8 > n or p[at + 1] > 1:
                return 0
            memcpy(&f, p + at + 4, 4)
            mine.append((op, p[at + 1], <double>f))
            at += 8
        elif op == 7:   # OP_PAIR_SCORES
            if at + 40 > n or p[at + 1] > 1:
                return 0
            memcpy(w, p + at + 8, 32)
            mine.append((op, p[at + 1], (w[0], w[1], w[2], w[3])))
            at += 40
        else:   # a forget (its holes renumber the vocabulary), or unknown: the replay decides
            return 0
    return 1


cdef _learns_result(payloads, _Learns *got, Py_ssize_t total, bint with_base, list scores):
    """journal_learns' tuple of the learns grown in ``got``."""
    cdef Py_ssize_t i, at
    learns = PyByteArray_FromStringAndSize(<char *>got.fields, 8 * LEARN_FIELDS * got.n)
    if with_base:   # the hashes where they are: each learn's place in base
        hashes = PyByteArray_FromStringAndSize(<char *>got.places, 8 * got.n)
    else:
        hashes = _joined_hashes(payloads, learns, got.n, total)
    bounds = PyByteArray_FromStringAndSize(NULL, 8 * (got.n + 1))
    at = 0
    memcpy(<char *>bounds, &at, 8)
    for i in range(got.n):
        at += got.fields[LEARN_FIELDS * i + 7]
        memcpy(<char *>bounds + 8 * (i + 1), &at, 8)
    return (learns, scores, hashes, bounds, PyBytes_FromStringAndSize(<char *>got.classes, got.n),
            PyByteArray_FromStringAndSize(<char *>got.sums, 16 * got.n))


cdef struct _Window:
    # a journal read through one reused buffer (journal_scan, _score.journal_rows with a source): the bytes
    # [start, start + length) of the file, at buf (cap bytes); a record longer than the buffer in big (its own)
    int fd
    uint8_t *buf
    Py_ssize_t cap
    int64_t start
    Py_ssize_t length
    uint8_t *big
    int error   # errno of a failed read


cdef const uint8_t *_window_get(_Window *w, int64_t at, Py_ssize_t n) noexcept nogil:
    """The ``n`` bytes at offset ``at`` of the file, read (``pread``) into the buffer from
    ``at`` on when it does not hold them; NULL when the file ends before them or a read fails."""
    cdef uint8_t *into = w.buf
    cdef Py_ssize_t want = w.cap, done = 0
    cdef ssize_t got
    if at >= w.start and at + n <= w.start + w.length:
        return w.buf + (at - w.start)
    if n > w.cap:   # a record longer than the buffer: read alone, into its own memory
        free(w.big)
        w.big = <uint8_t *>malloc(n)
        if w.big == NULL:
            w.error = 12   # ENOMEM
            return NULL
        into, want = w.big, n
    else:
        w.start, w.length = at, 0
    while done < want:
        got = pread(w.fd, <char *>into + done, want - done, <long>(at + done))
        if got < 0:
            w.error = c_errno
            break
        if got == 0:
            break
        done += got
    if into == w.buf:
        w.length = done
    return into if done >= n else NULL


def journal_scan(int fd, head, Py_ssize_t at, Py_ssize_t buffer_size, layout):
    """A journal's records read from ``fd`` (offset ``at`` on) through one buffer
    of ``buffer_size`` bytes (a bytearray, not zeroed, returned for the reads
    after: no memory the journal's size), checked as
    :func:`journal_records` checks them and their operations read as
    :func:`journal_learns` reads them, in one compiled pass, without a
    vocabulary size (each learn's ``features before`` follows the one before;
    the first's is returned for the caller to check).  None when a record is
    not one a view stands for.  Else ``(spans, end, seen, first, learns,
    scores, places, bounds, classes, sums, buffer)``: each record's offset, payload
    length and checksum (int64, three a record), the offset after the last
    record taken, the bytes of the file seen, the first learn's features
    before (-1: no learn), then :func:`journal_learns`' items, the third
    where each learn's hashes start in the file (8-byte words), and the
    buffer.  OSError when a read fails."""
    cdef _Window w
    cdef _Learns got
    cdef Py_buffer h
    cdef const uint8_t *rp
    cdef Py_ssize_t size, total = 0, live = -1, k = 0, n_spans = 0
    cdef int64_t *spans = NULL
    cdef uint64_t checksum
    if tuple(layout) != _JOURNAL_LAYOUT:
        raise ValueError(f"the journal's record layouts {tuple(layout)!r} are not those read here ({_JOURNAL_LAYOUT!r})")
    if buffer_size < 64:
        raise ValueError("journal_scan: a buffer of at least 64 bytes")
    buffer = PyByteArray_FromStringAndSize(NULL, buffer_size)   # every byte read before it is looked at
    memset(&got, 0, sizeof(got))
    memset(&w, 0, sizeof(w))
    try:
        take(&h, head, UNSIGNED, 1, False, "uint8_t")
        try:
            if length_of(&h) != 8:
                raise ValueError("a journal's head checksum is 8 bytes")
            w.fd, w.buf, w.cap, w.start = fd, <uint8_t *>PyByteArray_AS_STRING(buffer), buffer_size, at
            scores = []
            while at >= 0:
                rp = _window_get(&w, at, 16)
                if rp == NULL:
                    break
                size = <Py_ssize_t>_le(rp, 4)
                if size % 8 or _le(rp + 4, 4) != <uint64_t>k:
                    break
                rp = _window_get(&w, at, 16 + size)
                if rp == NULL:
                    break
                checksum = _le(rp + 8, 8)
                if _record_checksum(<const uint8_t *>h.buf, rp, rp + 16, size) != checksum:
                    break
                mine = []
                if not _payload_learns(rp + 16, size, k, at + 16, &live, &got, mine, &total):
                    return None
                scores.append(mine)
                if k == n_spans:
                    n_spans = 2 * n_spans if n_spans else 64
                    spans = <int64_t *>_grown(spans, 24 * n_spans)
                spans[3 * k], spans[3 * k + 1], spans[3 * k + 2] = at, size, <int64_t>checksum
                k += 1
                at += 16 + size
            if w.error:
                raise OSError(w.error, "cannot read the journal")
            seen = max(w.start + w.length, at)
            first = got.fields[2] if got.n else -1
            learns, scores, places, bounds, classes, sums = _learns_result(None, &got, total, True, scores)
            return (PyByteArray_FromStringAndSize(<char *>spans, 24 * k), at, seen, first, learns, scores, places,
                    bounds, classes, sums, buffer)
        finally:
            PyBuffer_Release(&h)
    finally:
        free(spans)
        free(w.big)
        free(got.fields)
        free(got.classes)
        free(got.sums)
        free(got.places)


cdef struct _Learns:
    # journal_learns' learns as it reads them: each one's fields (int64, LEARN_FIELDS), class, sum and scale
    # (NaN, NaN until its LEARN_SUMS) and its hashes' place in the base (8-byte words), in C arrays grown by
    # doubling (journal_learns frees them): a struct, not a class (a type more for _score's import)
    int64_t *fields
    uint8_t *classes
    double *sums
    int64_t *places
    Py_ssize_t n, capacity


cdef int _learns_add(_Learns *got, int64_t k, int64_t cls, int64_t before, int64_t n_new, int64_t h_at,
                     int64_t text_at, int64_t n_text, int64_t n_hashes, int64_t place) except -1:
    cdef Py_ssize_t cap
    cdef int64_t *fields
    if got.n == got.capacity:
        cap = 2 * got.capacity if got.capacity else 64
        got.fields = <int64_t *>_grown(got.fields, cap * 8 * LEARN_FIELDS)
        got.classes = <uint8_t *>_grown(got.classes, cap)
        got.sums = <double *>_grown(got.sums, cap * 16)
        got.places = <int64_t *>_grown(got.places, cap * 8)
        got.capacity = cap
    fields = got.fields + LEARN_FIELDS * got.n
    fields[0], fields[1], fields[2], fields[3] = k, cls, before, n_new
    fields[4], fields[5], fields[6], fields[7] = h_at, text_at, n_text, n_hashes
    got.classes[got.n] = <uint8_t>cls
    got.sums[2 * got.n] = got.sums[2 * got.n + 1] = NAN   # a learn without its sums
    got.places[got.n] = place
    got.n += 1
    return 0


cdef void *_grown(void *data, size_t size) except NULL:
    """``data`` reallocated to ``size`` bytes (MemoryError: ``data`` kept, freed by its owner)."""
    cdef void *grown = realloc(data, size)
    if grown == NULL:
        raise MemoryError()
    return grown


cdef bytearray _joined_hashes(payloads, bytearray learns, Py_ssize_t n_learns, Py_ssize_t total):
    """The learns' hashes (``learns``: journal_learns' fields of each) one after the other."""
    cdef Py_buffer d
    cdef Py_ssize_t i, k, h_at, n_hashes, at = 0
    cdef const int64_t *learn
    # not zeroed: every byte is written below
    cdef bytearray hashes = PyByteArray_FromStringAndSize(NULL, 8 * total)
    for i in range(n_learns):
        learn = <const int64_t *>PyByteArray_AS_STRING(learns) + LEARN_FIELDS * i
        k = learn[0]
        h_at = learn[4]
        n_hashes = learn[7]
        take(&d, payloads[k], UNSIGNED, 1, False, "uint8_t")
        try:
            memcpy(<char *>hashes + 8 * at, <const uint8_t *>d.buf + h_at, 8 * n_hashes)
        finally:
            PyBuffer_Release(&d)
        at += n_hashes
    return hashes


cdef extern from *:
    """
    #include <sys/mman.h>
    static void *spamnb_private_map(size_t n) {
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    static int spamnb_advise_huge(void *p, size_t n) {
    #ifdef MADV_HUGEPAGE
        return madvise(p, n, MADV_HUGEPAGE);
    #else
        (void)p; (void)n;
        return -1;
    #endif
    }
    static int spamnb_unmap(void *p, size_t n) { return munmap(p, n); }
    """
    void *spamnb_private_map(size_t n) nogil
    int spamnb_advise_huge(void *p, size_t n) nogil
    int spamnb_unmap(void *p, size_t n) nogil


from cpython.buffer cimport PyBuffer_FillInfo
from libc.errno cimport errno


cdef class PrivateMemory:
    """Writable zeroed memory of ``size`` bytes that no file backs: an anonymous
    private mapping (``mmap(2)``), which the kernel zero-fills as pages are
    first touched; with ``huge``, in transparent huge pages where the kernel
    gives them (``madvise(MADV_HUGEPAGE)``, its refusal ignored).  A buffer
    of bytes (``memoryview(PrivateMemory(n))``), unmapped once nothing holds
    it.  What ``spamnb.persistence.store`` reads a model into: the standard
    library's ``mmap`` does the same, a module (and a shared object) more on
    a cold ``spamnb classify``'s path.  OSError when the system refuses it."""

    cdef void *data
    cdef Py_ssize_t size
    cdef object __weakref__   # as the standard library's mmap: its holder may be watched for its release

    def __cinit__(self, Py_ssize_t size, bint huge=False):
        self.data = NULL
        if size < 0:
            raise ValueError(f"memory of {size} bytes")
        self.size = size
        self.data = spamnb_private_map(<size_t>(size if size > 0 else 1))
        if self.data == NULL:
            raise OSError(errno, f"no anonymous memory of {size} bytes")
        if huge:
            spamnb_advise_huge(self.data, <size_t>(size if size > 0 else 1))

    def __dealloc__(self):
        if self.data != NULL:
            spamnb_unmap(self.data, <size_t>(self.size if self.size > 0 else 1))

    def __getbuffer__(self, Py_buffer *buffer, int flags):
        PyBuffer_FillInfo(buffer, self, self.data, self.size, 0, flags)

    def __releasebuffer__(self, Py_buffer *buffer):
        pass

    def __len__(self):
        return self.size

    def advise_huge(self):
        """Advise transparent huge pages for the pages not touched yet (a
        writer that reads the model's large arrays whole asks it then, not at
        the mapping: see ``store.map_model``); the kernel's refusal ignored."""
        if self.data != NULL:
            spamnb_advise_huge(self.data, <size_t>(self.size if self.size > 0 else 1))
