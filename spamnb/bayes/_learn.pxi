# What a learn needs of the system beside the model file's checks, compiled
# into spamnb.bayes._score (which a cold ``spamnb learn`` has loaded anyway):
# the model's lock (flock) and the ledger's message digest (BLAKE2b), so that
# a learn loads no shared object of its own for them (``fcntl``, ``_blake2``:
# about a millisecond of a cold learn), and the search of a digest among the
# model file's ledger (read in place: no copy of its 16 bytes a message).
# The layers above call these through spamnb.bayes.checks; and a learned
# message's new tokens' first places, through spamnb.bayes.token_kernels.

from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset, strerror

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.exc cimport PyErr_CheckSignals


cdef extern from "<sys/file.h>" nogil:
    int flock(int fd, int operation)
    int LOCK_SH
    int LOCK_EX
    int LOCK_NB


cdef extern from "<errno.h>" nogil:
    int errno
    int EINTR
    int EWOULDBLOCK


def try_lock(int fd, bint exclusive=True):
    """``flock(fd, LOCK_EX | LOCK_NB)`` (``LOCK_SH`` with ``exclusive``
    False): True when the lock was taken, False when another open file
    holds it (EWOULDBLOCK), OSError on any other failure (as
    ``fcntl.flock`` raises it; EINTR is retried).  The lock goes with the
    open file: closing ``fd`` drops it."""
    cdef int result, code
    cdef int operation = (LOCK_EX if exclusive else LOCK_SH) | LOCK_NB
    while True:
        with nogil:
            result = flock(fd, operation)
            code = errno
        if result == 0:
            return True
        if code == EWOULDBLOCK:
            return False
        if code == EINTR:
            PyErr_CheckSignals()
            continue
        raise OSError(code, strerror(code).decode("utf-8", "replace"))


# ---------------------------------------------------------------------------- BLAKE2b (RFC 7693), unkeyed
cdef uint64_t _B2B_IV[8]
_B2B_IV[:] = [0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
              0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179]

# the message schedule: round i uses row i % 10
cdef uint8_t _B2B_SIGMA[10][16]
_B2B_SIGMA[0][:] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
_B2B_SIGMA[1][:] = [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3]
_B2B_SIGMA[2][:] = [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4]
_B2B_SIGMA[3][:] = [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8]
_B2B_SIGMA[4][:] = [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13]
_B2B_SIGMA[5][:] = [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9]
_B2B_SIGMA[6][:] = [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11]
_B2B_SIGMA[7][:] = [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10]
_B2B_SIGMA[8][:] = [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5]
_B2B_SIGMA[9][:] = [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0]


cdef inline uint64_t _rotr64(uint64_t x, int n) noexcept nogil:
    return (x >> n) | (x << (64 - n))


cdef inline void _b2b_g(uint64_t *v, int a, int b, int c, int d, uint64_t x, uint64_t y) noexcept nogil:
    v[a] = v[a] + v[b] + x
    v[d] = _rotr64(v[d] ^ v[a], 32)
    v[c] = v[c] + v[d]
    v[b] = _rotr64(v[b] ^ v[c], 24)
    v[a] = v[a] + v[b] + y
    v[d] = _rotr64(v[d] ^ v[a], 16)
    v[c] = v[c] + v[d]
    v[b] = _rotr64(v[b] ^ v[c], 63)


cdef void _b2b_compress(uint64_t *h, const uint8_t *block, uint64_t counter, bint last) noexcept nogil:
    """RFC 7693's F: ``block`` (128 bytes) into the state ``h``; ``counter``:
    the bytes hashed so far, this block's included (below 2^64: its high word 0)."""
    cdef uint64_t v[16]
    cdef uint64_t m[16]
    cdef const uint8_t *s
    cdef int i, j
    for i in range(16):   # little-endian words (the models' byte order: store.py refuses other machines)
        memcpy(&m[i], block + 8 * i, 8)
    for i in range(8):
        v[i] = h[i]
        v[i + 8] = _B2B_IV[i]
    v[12] ^= counter
    if last:
        v[14] = ~v[14]
    for i in range(12):
        s = _B2B_SIGMA[i % 10]
        _b2b_g(v, 0, 4, 8, 12, m[s[0]], m[s[1]])
        _b2b_g(v, 1, 5, 9, 13, m[s[2]], m[s[3]])
        _b2b_g(v, 2, 6, 10, 14, m[s[4]], m[s[5]])
        _b2b_g(v, 3, 7, 11, 15, m[s[6]], m[s[7]])
        _b2b_g(v, 0, 5, 10, 15, m[s[8]], m[s[9]])
        _b2b_g(v, 1, 6, 11, 12, m[s[10]], m[s[11]])
        _b2b_g(v, 2, 7, 8, 13, m[s[12]], m[s[13]])
        _b2b_g(v, 3, 4, 9, 14, m[s[14]], m[s[15]])
    for j in range(8):
        h[j] ^= v[j] ^ v[j + 8]


cdef void _b2b(const uint8_t *data, size_t n, int digest_size, uint8_t *out) noexcept nogil:
    cdef uint64_t h[8]
    cdef uint8_t block[128]
    cdef size_t done = 0
    cdef int i
    for i in range(8):
        h[i] = _B2B_IV[i]
    h[0] ^= 0x01010000 ^ <uint64_t>digest_size   # depth 1, fanout 1, no key
    while n - done > 128:   # every block but the last (a full last block is the final one)
        _b2b_compress(h, data + done, done + 128, False)
        done += 128
    memset(block, 0, 128)
    if n > done:
        memcpy(block, data + done, n - done)
    _b2b_compress(h, block, n, True)
    memcpy(out, h, digest_size)   # little-endian words: their bytes in order


def blake2b(data, int digest_size=64):
    """BLAKE2b of the bytes of ``data`` (any contiguous buffer), unkeyed,
    ``digest_size`` bytes (1 to 64): what ``hashlib.blake2b(data,
    digest_size=...).digest()`` gives, bit for bit (RFC 7693)."""
    cdef Py_buffer view
    cdef uint8_t out[64]
    if not 1 <= digest_size <= 64:
        raise ValueError("digest_size must be between 1 and 64")
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            _b2b(<const uint8_t *>view.buf, <size_t>view.len, digest_size, out)
    finally:
        PyBuffer_Release(&view)
    return (<char *>out)[:digest_size]


# ---------------------------------------------------------------------------- a digest in the model file's ledger
def find_digest(digests, digest, other=None):
    """The place of the 16-byte ``digest`` among ``digests`` (a contiguous
    buffer of 16-byte digests back to back: the model file's ledger, as
    read), its first, or -1: searched in place, entry by entry (a trailing
    part of an entry is never matched).  With ``other`` (another 16-byte
    digest: the same message with the other line endings,
    ``spamnb.estimator.ledger.known_digest``), both in the same pass:
    ``(place, other's place)``, the other's its first before ``digest``'s
    (the whole buffer's when ``digest`` is not there), -1 for none.
    ValueError for a digest not 16 bytes."""
    cdef uint64_t first, second, other_first = 0, other_second = 0, word
    cdef const uint8_t *at
    cdef Py_ssize_t i, n, found = -1, other_found = -1
    cdef bint pair = other is not None
    _digest_words(digest, &first, &second)
    if pair:
        _digest_words(other, &other_first, &other_second)
    cdef Py_buffer hay
    PyObject_GetBuffer(digests, &hay, PyBUF_SIMPLE)
    try:
        n = hay.len // 16
        at = <const uint8_t *>hay.buf
        i = 0
        with nogil:
            if pair:   # both, until the other's first entry (or the digest's)
                while i < n:
                    memcpy(&word, at + 16 * i, 8)
                    if word == first:
                        memcpy(&word, at + 16 * i + 8, 8)
                        if word == second:
                            found = i
                            break
                        memcpy(&word, at + 16 * i, 8)
                    if word == other_first:
                        memcpy(&word, at + 16 * i + 8, 8)
                        if word == other_second:
                            other_found = i
                            i += 1
                            break
                    i += 1
            if found < 0:
                while i < n:
                    memcpy(&word, at + 16 * i, 8)
                    if word == first:
                        memcpy(&word, at + 16 * i + 8, 8)
                        if word == second:
                            found = i
                            break
                    i += 1
    finally:
        PyBuffer_Release(&hay)
    if pair:
        return found, other_found
    return found


cdef _digest_words(digest, uint64_t *first, uint64_t *second):
    """A 16-byte digest's two halves, as :func:`find_digest` compares them."""
    cdef Py_buffer needle
    PyObject_GetBuffer(digest, &needle, PyBUF_SIMPLE)
    try:
        if needle.len != 16:
            raise ValueError(f"a ledger digest is 16 bytes, not {needle.len}")
        memcpy(first, needle.buf, 8)
        memcpy(second, <const uint8_t *>needle.buf + 8, 8)
    finally:
        PyBuffer_Release(&needle)


# ---------------------------------------------------------------------------- a message's new tokens in a record
def first_places(hashes, new):
    """The positions in ``hashes`` (a contiguous buffer of uint64: a message's
    token occurrences) of the tokens of ``new`` (distinct ints: a set), each
    at its first occurrence, in order, as ``array('i')``: where
    ``Vocabulary.add`` numbers a message's new tokens, and so their text's
    order in a journal's record (``spamnb.persistence.records.first_places``,
    through ``spamnb.bayes.token_kernels``).
    One pass over the occurrences, the tokens looked up in a table of their
    own (no Python object an occurrence).  ValueError for a token of ``new``
    not among them."""
    cdef Py_buffer hv
    cdef const uint64_t *hs
    cdef uint64_t *keys = NULL
    cdef uint8_t *state = NULL   # a slot's: 0 empty, 1 a token of new, 2 that token found
    cdef Py_ssize_t n, k, i, found = 0, size = 16
    cdef uint64_t h, mask, slot
    cdef int zero = 0   # the token 0 (an empty slot's key), kept apart: 0 not in new, 1 in it, 2 found
    cdef array.array out
    cdef int32_t *o
    while size < 2 * (len(new) + 1):
        size <<= 1
    mask = <uint64_t>(size - 1)
    keys = <uint64_t *>malloc(size * sizeof(uint64_t))
    state = <uint8_t *>malloc(size)
    if keys == NULL or state == NULL:
        free(keys)
        free(state)
        raise MemoryError()
    try:
        memset(keys, 0, size * sizeof(uint64_t))
        memset(state, 0, size)
        k = 0   # the distinct tokens of new
        for token in new:
            h = <uint64_t>token
            if h == 0:
                k += zero == 0
                zero = 1
                continue
            slot = (h ^ (h >> 32)) & mask
            while state[slot] and keys[slot] != h:
                slot = (slot + 1) & mask
            k += state[slot] == 0
            keys[slot], state[slot] = h, 1
        out = array.array("i", bytes(4 * k))
        o = <int32_t *>out.data.as_ints
        PyObject_GetBuffer(hashes, &hv, PyBUF_SIMPLE)
        try:
            n = hv.len // 8
            hs = <const uint64_t *>hv.buf
            with nogil:
                for i in range(n):
                    if found == k:
                        break
                    h = hs[i]
                    if h == 0:
                        if zero == 1:
                            zero = 2
                            o[found] = <int32_t>i
                            found += 1
                        continue
                    slot = (h ^ (h >> 32)) & mask
                    while state[slot] and keys[slot] != h:
                        slot = (slot + 1) & mask
                    if state[slot] == 1:
                        state[slot] = 2
                        o[found] = <int32_t>i
                        found += 1
        finally:
            PyBuffer_Release(&hv)
        if found < k:
            for token in new:
                h = <uint64_t>token
                if h == 0:
                    if zero == 1:
                        raise ValueError(f"first_places: {token} is not among the hashes")
                    continue
                slot = (h ^ (h >> 32)) & mask
                while keys[slot] != h:
                    slot = (slot + 1) & mask
                if state[slot] == 1:
                    raise ValueError(f"first_places: {token} is not among the hashes")
    finally:
        free(keys)
        free(state)
    return out


# ---------------------------------------------------------------------------- the ledger operations of a journal
def journal_ledger(payloads, layout):
    """The ledger operations (RECORD, REMOVE) of a journal's transactions
    (``payloads``, the records of ``spamnb.persistence.journal``), newest
    first, read in one compiled pass over their operations (a learn's
    hashes and text skipped by their sizes): ``(digests, heads, records)``,
    their 16-byte digests back to back (a digest's newest operation:
    :func:`find_digest`), each one's first four bytes (op, flags, then the
    held-out note, 16 bits little-endian) back to back, and how many are
    RECORDs; what ``spamnb.persistence.records.ledger_ops`` gives each
    transaction, without a Python object an operation.  ``layout``: as
    :func:`journal_learns` takes it.  ValueError for a transaction cut short
    or with an unknown operation (as ``ledger_ops``)."""
    cdef Py_buffer d
    cdef const uint8_t *p
    cdef char *out
    cdef char swap[16]
    cdef Py_ssize_t i, k, n, at, size, count = 0, records = 0
    cdef uint8_t op
    cdef bytearray digests = bytearray(), heads = bytearray()
    if tuple(layout) != _JOURNAL_LAYOUT:   # as journal_learns: a change of store's layouts is refused, not misread
        raise ValueError(f"the journal's record layouts {tuple(layout)!r} are not those read here")
    for k in range(len(payloads)):
        take(&d, payloads[k], UNSIGNED, 1, False, "uint8_t")
        try:
            p = <const uint8_t *>d.buf
            n = length_of(&d)
            at = 0
            while at < n:
                op = p[at]
                if op == 0:   # its padding
                    break
                if op == 1 or op == 2:   # OP_LEARN, OP_FORGET: <BBxxiIIII>, hashes, lengths, text, padded
                    if at + 24 > n:
                        raise ValueError("a record is cut short")
                    size = 24 + 8 * <Py_ssize_t>_le(p + at + 12, 4) + 4 * <Py_ssize_t>_le(p + at + 16, 4) \
                        + <Py_ssize_t>_le(p + at + 20, 4)
                    size += (8 - (at + size) % 8) % 8
                elif op == 3 or op == 4:   # OP_RECORD, OP_REMOVE: <BBH16s>, padded to 24
                    if at + 20 > n:
                        raise ValueError("a record is cut short")
                    PyByteArray_Resize(digests, 16 * (count + 1))
                    PyByteArray_Resize(heads, 4 * (count + 1))
                    memcpy(PyByteArray_AS_STRING(digests) + 16 * count, p + at + 4, 16)
                    memcpy(PyByteArray_AS_STRING(heads) + 4 * count, p + at, 4)
                    count += 1
                    records += op == 3
                    size = 24
                elif op == 5 or op == 6:   # OP_HELD_OUT, OP_HELD_OUT_BACK
                    size = 8
                elif op == 7:   # OP_PAIR_SCORES
                    size = 40
                elif op == 8:   # OP_LEARN_SUMS
                    size = 24
                else:
                    raise ValueError(f"unknown operation {op}")
                at += size
            if at > n:
                raise ValueError("a record is cut short")
        finally:
            PyBuffer_Release(&d)
    for i in range(count // 2):   # newest first
        out = PyByteArray_AS_STRING(digests)
        memcpy(swap, out + 16 * i, 16)
        memcpy(out + 16 * i, out + 16 * (count - 1 - i), 16)
        memcpy(out + 16 * (count - 1 - i), swap, 16)
        out = PyByteArray_AS_STRING(heads)
        memcpy(swap, out + 4 * i, 4)
        memcpy(out + 4 * i, out + 4 * (count - 1 - i), 4)
        memcpy(out + 4 * (count - 1 - i), swap, 4)
    return bytes(digests), bytes(heads), records


# ---------------------------------------------------------------------------- record layouts
# struct's pack and unpack_from for the little-endian formats the journal's records use ("<" then
# B b H h I i Q q f d, Ns, Nx: spamnb.persistence.store.Layout), so that a learn writing its
# record, and a reader of a few, load no _struct (a standard shared object: about 0.8 M instructions)

cdef Py_ssize_t _field_width(Py_UCS4 code) except -1:
    if code in "Bbsx":
        return 1
    if code in "Hh":
        return 2
    if code in "Iif":
        return 4
    if code in "Qqd":
        return 8
    raise ValueError(f"a layout code not read here: {code!r}")


def layout_size(str fmt):
    """``struct.calcsize(fmt)`` of a layout (ValueError for one not little-endian, or of another code)."""
    cdef Py_ssize_t size = 0, count = -1, i
    cdef Py_UCS4 code
    if not fmt.startswith("<"):
        raise ValueError(f"a layout is little-endian, without alignment: {fmt!r}")
    for i in range(1, len(fmt)):
        code = fmt[i]
        if code >= u"0" and code <= u"9":
            count = (0 if count < 0 else count * 10) + (<Py_ssize_t>code - 48)
            continue
        size += (1 if count < 0 else count) * _field_width(code)
        count = -1
    if count >= 0:
        raise ValueError(f"a layout ends in a count: {fmt!r}")
    return size


def pack_layout(str fmt, tuple values, Py_ssize_t size):
    """``struct.pack(fmt, *values)`` of a layout of ``size`` bytes (:func:`layout_size`): integers
    out of their field's range an OverflowError, a float32 too large one too; a count of
    values not the layout's a TypeError."""
    cdef bytes out = PyBytes_FromStringAndSize(NULL, size)
    cdef char *p = out
    cdef Py_ssize_t at = 0, v = 0, count = -1, repeat, i, k, width, n
    cdef Py_UCS4 code
    cdef uint64_t u
    cdef int64_t s
    cdef double d
    cdef float f
    for i in range(1, len(fmt)):
        code = fmt[i]
        if code >= u"0" and code <= u"9":
            count = (0 if count < 0 else count * 10) + (<Py_ssize_t>code - 48)
            continue
        repeat, count = (1 if count < 0 else count), -1
        if code == u"x":
            memset(p + at, 0, repeat)
            at += repeat
            continue
        if code == u"s":
            if v >= len(values):
                raise TypeError(f"pack expected more items for packing (got {len(values)})")
            item = values[v]
            v += 1
            if not isinstance(item, bytes):
                raise TypeError("argument for 's' must be a bytes object")
            n = min(len(<bytes>item), repeat)
            memcpy(p + at, <const char *><bytes>item, n)
            memset(p + at + n, 0, repeat - n)
            at += repeat
            continue
        width = _field_width(code)
        for k in range(repeat):
            if v >= len(values):
                raise TypeError(f"pack expected more items for packing (got {len(values)})")
            item = values[v]
            v += 1
            if code == u"d":
                d = item
                memcpy(p + at, &d, 8)
            elif code == u"f":
                d = item
                f = <float>d
                if isinf(f) and not isinf(d):
                    raise OverflowError("float too large to pack with f format")
                memcpy(p + at, &f, 4)
            elif code in "bhiq":
                s = item
                if width < 8 and not (-(<int64_t>1 << (8 * width - 1)) <= s < (<int64_t>1 << (8 * width - 1))):
                    raise OverflowError(f"{item} out of range of a {width}-byte signed field")
                memcpy(p + at, &s, width)   # little-endian (spamnb.persistence.store refuses other machines)
            else:
                u = item
                if width < 8 and u >> (8 * width):
                    raise OverflowError(f"{item} out of range of a {width}-byte unsigned field")
                memcpy(p + at, &u, width)
            at += width
    if v != len(values) or at != size:
        raise TypeError(f"pack expected {v} items for packing (got {len(values)}), or a size not the layout's")
    return out


def unpack_layout(str fmt, buffer, Py_ssize_t offset, Py_ssize_t size):
    """``struct.unpack_from(fmt, buffer, offset)`` of a layout of ``size`` bytes; a ValueError
    for a buffer cut short (or a negative offset)."""
    cdef Py_buffer view
    cdef const char *p
    cdef Py_ssize_t at, count = -1, repeat, i, k, width
    cdef Py_UCS4 code
    cdef uint64_t u
    cdef int64_t s
    cdef double d
    cdef float f
    cdef list out = []
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        if offset < 0 or offset + size > view.len:
            raise ValueError(f"a record of {size} bytes at {offset} is cut short (the buffer has {view.len})")
        p = <const char *>view.buf + offset
        at = 0
        for i in range(1, len(fmt)):
            code = fmt[i]
            if code >= u"0" and code <= u"9":
                count = (0 if count < 0 else count * 10) + (<Py_ssize_t>code - 48)
                continue
            repeat, count = (1 if count < 0 else count), -1
            if code == u"x":
                at += repeat
                continue
            if code == u"s":
                out.append(PyBytes_FromStringAndSize(p + at, repeat))
                at += repeat
                continue
            width = _field_width(code)
            for k in range(repeat):
                if code == u"d":
                    memcpy(&d, p + at, 8)
                    out.append(d)
                elif code == u"f":
                    memcpy(&f, p + at, 4)
                    out.append(<double>f)
                elif code in "bhiq":
                    s = 0
                    memcpy(&s, p + at, width)
                    if width < 8 and (s >> (8 * width - 1)) & 1:   # the sign bit: extend it
                        s -= <int64_t>1 << (8 * width)
                    out.append(s)
                else:
                    u = 0
                    memcpy(&u, p + at, width)
                    out.append(u)
                at += width
    finally:
        PyBuffer_Release(&view)
    return tuple(out)
