# Included in spamnb.mail._mail (one compiled module for the parser and the
# tokenizer: a cold ``spamnb classify`` loads one, not five); spamnb.mail.tokenizer
# imports ``Scanner`` and ``hash_token`` from there.
#
# Compiled core of the tokenizer: the token hash, the word scanner, TokenStream.
#
# Everything per character or per token happens here, in C: Python code
# (``spamnb.mail.tokenizer``) works per message, per header and per MIME part only.
# The hash steps and the token strings' UTF-8 are inline C in ``_hash.pxd``, the
# relay patterns of Received: fields in ``_received.pxd`` (both cimported: no
# call goes through Python).  Nothing here imports numpy.
#
# Token hash
# ----------
# ``hash_token(s)`` is FNV-1a 64 over the string's code points (each code point
# is one 32-bit unit: ``h ^= cp; h *= 0x100000001b3`` from the offset basis
# 0xcbf29ce484222325), followed by splitmix64's finaliser so that the low bits
# (used as hash-table slots by the vocabulary) are well mixed; a result of 0 is
# mapped to 1, because 0 marks an empty slot.  The value is the same on every run
# and platform.  Two distinct tokens collide with probability about n^2 / 2^65,
# i.e. ~3e-8 for a vocabulary of a million tokens (they would share a feature).
#
# A token is ``prefix + text[start:end]``: the FNV state after a prefix (e.g.
# ``"subject:"``) is computed once per scanner, so tagging a header's words costs
# nothing extra, and no token string is built while scanning.  ``TokenStream``
# keeps references to the scanned texts plus (text id, start, end, prefix id) per
# occurrence and builds a token's string only on demand (``token(j)``).
#
# Word rules (the experiments behind them are in docs/tokenizer.md)
# ---------------------------------------------------------------------
# A word is a maximal run of word characters (Unicode letters and digits plus the
# configured extra ASCII characters), where single "joiner" characters (e.g.
# ``'.-@``) are kept when a word character follows them ("e-mail", "3.50",
# "user@example.com").  Words shorter than ``min_len`` are dropped; words longer
# than ``max_len`` become one summary token ``skip:<first char> <length // 10 * 10>``.
# Han and kana characters (scripts written without spaces) form runs that give
# one token per character bigram (a lone character gives itself), or one token per
# run when ``cjk_bigrams`` is false.


from cpython cimport array
from cpython.buffer cimport PyBuffer_Release
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ
from libc.stdint cimport int32_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

import array

from spamnb.buffers cimport SIGNED, length_of, take
from spamnb.mail._hash cimport (_FNV_OFFSET, _FNV_PRIME, _feed, _feed_ascii, _feed_data, _feed_int, _finish, _n_digits,
                                _utf8_size, _utf8_write, _write_digits)
from spamnb.mail._received cimport _ascii_space, _find, _match_host, _octets

cdef extern from "Python.h":
    bint Py_UNICODE_ISALNUM(Py_UCS4 ch) nogil
    bint PyUnicode_IS_ASCII(object o)

# (no __all__: this file is built into spamnb.mail._mail, which has none)

# character classes of the scanner
cdef enum:
    _SEP = 0
    _WORD = 1
    _JOIN = 2
    _CJK = 3

cdef enum:
    _SKIP_TEXT = -1     # occurrence record of a "skip:" summary token
    _PAIR_TEXT = -2     # ... of a word pair at distance d: text = _PAIR_TEXT - (d - 1), start/end the words' records

cdef enum:
    _LOCAL_BASE = 1 << 24   # prefix ids from here on are local to one TokenStream

cdef struct Occurrence:
    int32_t text        # index into TokenStream.texts, or _SKIP_TEXT
    int32_t start       # for a skip token: its first character
    int32_t end         # for a skip token: its length bucket
    int32_t prefix      # index into Scanner.prefixes


def hash_token(str s):
    """The stable 64-bit hash of token ``s`` (FNV-1a 64 over code points + splitmix64 finaliser, never 0)."""
    return _finish(_feed(_FNV_OFFSET, s, 0, PyUnicode_GET_LENGTH(s)))


cdef inline bint _is_cjk(Py_UCS4 c) noexcept nogil:
    """Han ideographs and kana: scripts written without spaces between words."""
    return ((0x3040 <= c <= 0x30FF) or (0x3400 <= c <= 0x4DBF) or (0x4E00 <= c <= 0x9FFF)
            or (0xF900 <= c <= 0xFAFF) or (0xFF66 <= c <= 0xFF9F) or (0x20000 <= c <= 0x2FA1F))


cdef class Scanner:
    """Word rules and token prefixes shared by the streams of one tokenizer.

    Parameters
    ----------
    min_len, max_len : int -- shorter words are dropped, longer ones become ``skip:`` tokens
    max_len_joined : int -- the limit instead of max_len for words with a joiner inside
        (addresses, host names: "user@mail.example.com"); at least max_len
    word_chars : str -- ASCII characters counted as word characters besides letters and digits
    joiners : str -- ASCII characters kept inside a word when a word character follows
    cjk_bigrams : bool -- Han/kana runs as character bigrams (else one token per run)
    """

    cdef uint8_t ascii_class[128]
    cdef readonly int min_len, max_len, max_len_joined
    cdef readonly bint cjk_bigrams
    cdef readonly list prefixes
    cdef dict prefix_index
    cdef uint64_t *prefix_state
    cdef Py_ssize_t n_prefixes, cap_prefixes

    def __cinit__(self):
        self.prefix_state = NULL
        self.n_prefixes = 0
        self.cap_prefixes = 0

    def __init__(self, int min_len=1, int max_len=20, str word_chars="", str joiners="",
                 bint cjk_bigrams=True, int max_len_joined=-1):
        cdef int c
        if min_len < 1 or max_len < min_len:
            raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
        self.min_len = min_len
        self.max_len = max_len
        self.max_len_joined = max(max_len, max_len_joined)
        self.cjk_bigrams = cjk_bigrams
        for c in range(128):
            self.ascii_class[c] = _WORD if chr(c).isalnum() else _SEP
        for ch in word_chars:
            if ord(ch) >= 128:
                raise ValueError(f"word_chars must be ASCII, got {ch!r}")
            self.ascii_class[ord(ch)] = _WORD
        for ch in joiners:
            if ord(ch) >= 128:
                raise ValueError(f"joiners must be ASCII, got {ch!r}")
            self.ascii_class[ord(ch)] = _JOIN
        self.prefixes = []
        self.prefix_index = {}
        self.prefix("")

    def __dealloc__(self):
        free(self.prefix_state)

    def prefix(self, str text):
        """Register a token prefix (idempotent); returns its id for ``TokenStream.add_*``."""
        cdef uint64_t *grown
        found = self.prefix_index.get(text)
        if found is not None:
            return found
        if self.n_prefixes == self.cap_prefixes:
            self.cap_prefixes = 2 * self.cap_prefixes + 16
            grown = <uint64_t *>realloc(self.prefix_state, self.cap_prefixes * sizeof(uint64_t))
            if grown == NULL:
                raise MemoryError()
            self.prefix_state = grown
        self.prefix_state[self.n_prefixes] = _feed(_FNV_OFFSET, text, 0, PyUnicode_GET_LENGTH(text))
        self.prefix_index[text] = self.n_prefixes
        self.prefixes.append(text)
        self.n_prefixes += 1
        return self.n_prefixes - 1

    def stream(self):
        """A new, empty ``TokenStream`` using these rules."""
        cdef TokenStream s = TokenStream.__new__(TokenStream)
        s.scanner = self
        s.texts = []
        s.regions = []
        return s

    cdef inline int char_class(self, Py_UCS4 c) noexcept nogil:
        if c < 128:
            return self.ascii_class[c]
        if _is_cjk(c):
            return _CJK
        if Py_UNICODE_ISALNUM(c):
            return _WORD
        if c == 0x2019:         # right single quotation mark, as in "don't"
            return _JOIN
        return _SEP


cdef inline Py_ssize_t _word(Scanner sc, int kind, void *data, Py_ssize_t i, Py_ssize_t n, uint64_t h0,
                              uint64_t *h_end, Py_ssize_t *last_end, int *joined) noexcept:
    """Scan the word at ``i`` (a word character) within ``[i, n)``: returns where the
    scan stopped; ``h_end`` is the FNV state of the word ``[i, last_end)`` (its
    last word character's), ``joined`` whether a joiner is inside it."""
    cdef Py_UCS4 c = PyUnicode_READ(kind, data, i)
    cdef uint64_t h = (h0 ^ <uint64_t>c) * _FNV_PRIME, h_last = h
    cdef int cls, prev = _WORD, inside = 0
    cdef Py_ssize_t end
    i += 1
    end = i
    while i < n:
        c = PyUnicode_READ(kind, data, i)
        cls = sc.char_class(c)
        if cls == _WORD:
            h = (h ^ <uint64_t>c) * _FNV_PRIME
            h_last = h
            i += 1
            end = i
            if prev == _JOIN:
                inside = 1
        elif cls == _JOIN and prev == _WORD:
            h = (h ^ <uint64_t>c) * _FNV_PRIME
            i += 1
        else:
            break
        prev = cls
    h_end[0], last_end[0], joined[0] = h_last, end, inside
    return i


cdef class TokenStream:
    """The tokens of one message, in order, one entry per occurrence.

    ``hashes`` -> ``array('Q')`` of shape (len(stream),); ``token(j)`` -> str with
    ``hash_token(token(j)) == hashes[j]``; ``truncated`` -> the message hit the byte limit;
    ``regions`` -> list of (start, end) token ranges (each text part's words).
    Create streams with ``Scanner.stream()``.
    """

    cdef Scanner scanner
    cdef list texts
    cdef Occurrence *occ
    cdef uint64_t *hash_buf
    cdef Py_ssize_t n, cap
    cdef object _hashes
    cdef list local_prefixes
    cdef list local_states
    cdef dict local_index
    cdef public bint truncated
    # [(start, end)] token ranges of the message's regions (the tokenizer
    # records each text part's words): the verdict rule scores them one by one
    cdef public list regions
    # where add_pairs began (the tokens before it: the stream without pairs), or -1
    cdef public Py_ssize_t pairs_start
    # what another tokenizer's stream of the same message may take from this
    # one's making (set and read by spamnb.mail.tokenizer), or None
    cdef public object reuse
    # the stream every token added here is added to as well (``twin``), or None
    cdef TokenStream _twin

    def __cinit__(self):
        self.occ = NULL
        self.hash_buf = NULL
        self.n = 0
        self.cap = 0
        self.truncated = False
        self.pairs_start = -1

    def __init__(self):
        raise TypeError("create a TokenStream with Scanner.stream()")

    def __dealloc__(self):
        free(self.occ)
        free(self.hash_buf)

    def __len__(self):
        return self.n

    cdef int _reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t cap
        cdef Occurrence *occ
        cdef uint64_t *hashes
        if self.n + extra <= self.cap:
            return 0
        cap = max(2 * self.cap, self.n + extra, 256)
        occ = <Occurrence *>realloc(self.occ, cap * sizeof(Occurrence))
        if occ == NULL:
            raise MemoryError()
        self.occ = occ
        hashes = <uint64_t *>realloc(self.hash_buf, cap * sizeof(uint64_t))
        if hashes == NULL:
            raise MemoryError()
        self.hash_buf = hashes
        self.cap = cap
        return 0

    cdef inline int _push(self, uint64_t h, int32_t text, int32_t start, int32_t end,
                          int32_t prefix) except -1:
        """Append the token of FNV state ``h`` (finished here), to the twin too."""
        cdef uint64_t finished = _finish(h)
        self._store(finished, text, start, end, prefix)
        if self._twin is not None:
            self._twin._store(finished, text, start, end, prefix)
        return 0

    cdef inline int _store(self, uint64_t finished, int32_t text, int32_t start, int32_t end,
                           int32_t prefix) except -1:
        if self.n == self.cap:
            self._reserve(1)
        self.hash_buf[self.n] = finished
        self.occ[self.n].text = text
        self.occ[self.n].start = start
        self.occ[self.n].end = end
        self.occ[self.n].prefix = prefix
        self.n += 1
        return 0

    cdef int32_t _add_text(self, str text) except -2:
        if PyUnicode_GET_LENGTH(text) > 0x7FFFFFFF:
            raise ValueError("text too long for a TokenStream")
        self._hashes = None
        self.texts.append(text)
        return <int32_t>(len(self.texts) - 1)

    cdef uint64_t _prefix_state(self, int prefix) except? 0:
        """FNV state of a shared (Scanner) or stream-local prefix id."""
        if 0 <= prefix < self.scanner.n_prefixes:
            return self.scanner.prefix_state[prefix]
        if self.local_prefixes is not None and 0 <= prefix - _LOCAL_BASE < len(self.local_prefixes):
            return self.local_states[prefix - _LOCAL_BASE]
        raise IndexError(f"unknown prefix id {prefix}")

    cdef str _prefix_text(self, int prefix):
        if prefix >= _LOCAL_BASE:
            return self.local_prefixes[prefix - _LOCAL_BASE]
        return self.scanner.prefixes[prefix]

    def local_prefix(self, str text):
        """Register a prefix for this stream only (e.g. a header name seen once);
        returns its id.  Keeps the shared prefix table from growing with every
        new header name a long-running process meets."""
        if self.local_prefixes is None:
            self.local_prefixes = []
            self.local_states = []
            self.local_index = {}
        found = self.local_index.get(text)
        if found is not None:
            return found
        self.local_index[text] = _LOCAL_BASE + len(self.local_prefixes)
        self.local_prefixes.append(text)
        self.local_states.append(_feed(_FNV_OFFSET, text, 0, PyUnicode_GET_LENGTH(text)))
        return _LOCAL_BASE + len(self.local_prefixes) - 1

    def extend(self, TokenStream other, Py_ssize_t count):
        """Start this stream (new, empty) with the first ``count`` occurrences
        of ``other``: the same hashes and strings, without scanning again (a
        tokenizer that gives another's header tokens copies them from that
        one's stream of the same message).  The prefixes those occurrences
        use must mean the same in both scanners (ValueError otherwise);
        ``other``'s stream-local prefixes are copied with them."""
        cdef Py_ssize_t j, n_texts = 0
        cdef int32_t p
        cdef Scanner mine = self.scanner, theirs = other.scanner
        if self.n or self.texts:
            raise ValueError("extend starts an empty stream")
        if not 0 <= count <= other.n:
            raise ValueError(f"count {count} out of range for {other.n} tokens")
        if other.pairs_start >= 0 and count > other.pairs_start:
            raise ValueError("extend copies no word pairs")
        if mine is not theirs:
            checked = set()
            for j in range(count):
                p = other.occ[j].prefix
                if p >= _LOCAL_BASE or p in checked:
                    continue
                if p >= mine.n_prefixes or mine.prefixes[p] != theirs.prefixes[p]:
                    raise ValueError("the streams' scanners give prefix ids different meanings")
                checked.add(p)
        if other.local_prefixes is not None:
            self.local_prefixes = list(other.local_prefixes)
            self.local_states = list(other.local_states)
            self.local_index = dict(other.local_index)
        for j in range(count):   # the texts the copied occurrences read (texts are added in order)
            if other.occ[j].text >= n_texts:
                n_texts = other.occ[j].text + 1
        self.texts = other.texts[:n_texts]
        if count:
            self._reserve(count)
            memcpy(self.occ, other.occ, count * sizeof(Occurrence))
            memcpy(self.hash_buf, other.hash_buf, count * sizeof(uint64_t))
            self.n = count
        self._hashes = None

    def twin(self, TokenStream other):
        """From now on every token added to this stream is added to ``other``
        as well (a new, empty stream of the same scanner, which then shares
        this one's texts, or its twin before), until ``twin(None)``; ``add_words``' ``mark`` keeps
        the words past it from ``other``.  Two streams of one message made
        in one pass (a tokenizer's and its word pairs' with a larger text
        budget: ``spamnb.mail.tokenizer.Tokenizer.streams``)."""
        if other is None:
            self._twin = None
            return
        if other is self or other.scanner is not self.scanner or other._twin is not None \
                or self._twin is not None or (other.texts is not self.texts and (other.n or other.texts)):
            raise ValueError("a twin is another stream of the same scanner, new or this one's twin before")
        if self.local_prefixes is not None:
            raise ValueError("a stream with local prefixes has no twin")
        other.texts = self.texts
        self._twin = other

    def add_words(self, str text, int prefix=0, Py_ssize_t mark=-1):
        """Scan ``text`` into words (see the module docstring), each tagged with
        ``prefix``.  With a ``twin`` and ``mark`` >= 0, the twin gets the words of
        ``text[:mark]`` instead (those of ``text`` that end by ``mark``, and
        the word cut there)."""
        if mark < 0 or self._twin is None or mark >= PyUnicode_GET_LENGTH(text):
            self._scan(text, prefix, -1, None)
            return
        twin, self._twin = self._twin, None
        try:
            self._scan(text, prefix, mark, twin)
        finally:
            self._twin = twin

    def add_field_words(self, dict by_name, tuple fields, bint lower=True, Py_ssize_t max_chars=-1):
        """For each ``(name, prefix)`` of ``fields``, the words of each value in
        ``by_name.get(name, ())`` (lower-cased if ``lower``), tagged ``prefix``: a
        message's header words (``Mail.by_name``) in one call.  With
        ``max_chars`` >= 0, only the first ``max_chars`` characters of a
        field's values (all of its lines together) are read."""
        cdef str value
        cdef int prefix
        cdef Py_ssize_t left
        for name, prefix in fields:
            values = by_name.get(name)
            if values:
                left = max_chars
                for value in values:
                    if left == 0:
                        break
                    if left > 0:
                        if PyUnicode_GET_LENGTH(value) > left:
                            value = value[:left]
                        left -= PyUnicode_GET_LENGTH(value)
                    self._scan(value.lower() if lower else value, prefix, -1, None)

    cdef int _scan(self, str text, int prefix, Py_ssize_t mark, TokenStream twin) except -1:
        """The words of ``text``; with ``twin``, those of ``text[:mark]`` added to it too."""
        cdef Scanner sc = self.scanner
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
        cdef int kind = PyUnicode_KIND(text)
        cdef void *data = PyUnicode_DATA(text)
        cdef Py_ssize_t i = 0, start, last_end
        cdef int cls, joined
        cdef uint64_t h0, h_end
        cdef int32_t tid
        h0 = self._prefix_state(prefix)
        if n == 0:
            return 0
        tid = self._add_text(text)
        while i < n:
            cls = sc.char_class(PyUnicode_READ(kind, data, i))
            if cls == _WORD:
                start = i
                i = _word(sc, kind, data, i, n, h0, &h_end, &last_end, &joined)
                self._add_word(h0, h_end, kind, data, start, last_end, joined, tid, prefix)
                if twin is not None and start < mark:
                    if last_end > mark:    # the word cut at the mark: the twin's is its part before it
                        _word(sc, kind, data, start, mark, h0, &h_end, &last_end, &joined)
                    twin._add_word(h0, h_end, kind, data, start, last_end, joined, tid, prefix)
            elif cls == _CJK:
                start = i
                i += 1
                while i < n and sc.char_class(PyUnicode_READ(kind, data, i)) == _CJK:
                    i += 1
                self._add_run(h0, text, kind, data, start, i, tid, prefix)
                if twin is not None and start < mark:
                    twin._add_run(h0, text, kind, data, start, min(i, mark), tid, prefix)
            else:
                i += 1
        return 0

    cdef inline int _add_word(self, uint64_t h0, uint64_t h_end, int kind, void *data, Py_ssize_t start,
                       Py_ssize_t last_end, int joined, int32_t tid, int prefix) except -1:
        """The token of the word ``[start, last_end)`` scanned by ``_word``: a ``skip:``
        token when too long, none when too short."""
        cdef Scanner sc = self.scanner
        cdef Py_ssize_t length = last_end - start
        cdef uint64_t h
        if length > (sc.max_len_joined if joined else sc.max_len):
            h = _feed_ascii(h0, b"skip:")
            h = (h ^ <uint64_t>PyUnicode_READ(kind, data, start)) * _FNV_PRIME
            h = (h ^ 32) * _FNV_PRIME
            h = _feed_int(h, <int32_t>(length // 10 * 10))
            self._push(h, _SKIP_TEXT, <int32_t>PyUnicode_READ(kind, data, start),
                       <int32_t>(length // 10 * 10), prefix)
        elif length >= sc.min_len:
            self._push(h_end, tid, <int32_t>start, <int32_t>last_end, prefix)
        return 0

    cdef inline int _add_run(self, uint64_t h0, str text, int kind, void *data, Py_ssize_t start, Py_ssize_t end,
                      int32_t tid, int prefix) except -1:
        """The tokens of the Han/kana run ``[start, end)``: its character bigrams, or itself."""
        cdef Py_ssize_t j
        cdef uint64_t h
        if self.scanner.cjk_bigrams and end - start > 1:
            self._reserve(end - start)
            for j in range(start, end - 1):
                h = (h0 ^ <uint64_t>PyUnicode_READ(kind, data, j)) * _FNV_PRIME
                h = (h ^ <uint64_t>PyUnicode_READ(kind, data, j + 1)) * _FNV_PRIME
                self._push(h, tid, <int32_t>j, <int32_t>(j + 2), prefix)
        else:
            self._push(_feed(h0, text, start, end), tid, <int32_t>start, <int32_t>end, prefix)
        return 0

    def add_token(self, str token, int prefix=0):
        """Append ``prefix + token`` as one token."""
        cdef uint64_t h0 = self._prefix_state(prefix)
        cdef int32_t tid = self._add_text(token)
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(token)
        self._push(_feed(h0, token, 0, n), tid, 0, <int32_t>n, prefix)

    def add_tokens(self, tokens, int prefix=0):
        """Append ``prefix + t`` for each string ``t`` of the iterable ``tokens``.

        Items may also be tuples of strings (e.g. the groups of ``re.findall``);
        empty strings are skipped.
        """
        cdef uint64_t h0
        h0 = self._prefix_state(prefix)
        for item in tokens:
            if type(item) is tuple:
                for token in <tuple>item:
                    self._add_one(h0, token, prefix)
            else:
                self._add_one(h0, item, prefix)

    def add_received(self, str text, int host_prefix, int ip_prefix):
        """The relay tokens of Received: text: for each ``from <host>`` and then
        each ``by <host>``, the host and its last two labels, tagged ``host_prefix``;
        then for each ``[a.b.c.d]``, the IP, ``a.b.c`` and ``a.b``, tagged ``ip_prefix``.

        The same tokens, in the same order, as ``re.findall`` (ASCII) of
        ``from\s+((?:[\w-]+\.)*([\w-]+\.[a-z]{2,}))\b``, the same with ``by``, and
        ``\[((([0-9]{1,3}\.[0-9]{1,3})\.[0-9]{1,3})\.[0-9]{1,3})\]``.
        """
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
        cdef int kind = PyUnicode_KIND(text)
        cdef void *data = PyUnicode_DATA(text)
        cdef Py_ssize_t pos, at, q, end, last_two = 0
        cdef Py_ssize_t ends[4]
        cdef int32_t tid
        cdef int pattern
        cdef uint64_t h_host = self._prefix_state(host_prefix), h_ip = self._prefix_state(ip_prefix)
        if n == 0:
            return
        tid = self._add_text(text)          # refuses a text too long for a TokenStream
        for pattern in range(2):              # "from", then "by"
            pos = 0
            while True:
                at = _find(kind, data, n, pos, b"from" if pattern == 0 else b"by", 4 if pattern == 0 else 2)
                if at < 0:
                    break
                q = at + (4 if pattern == 0 else 2)
                if q < n and _ascii_space(PyUnicode_READ(kind, data, q)):
                    while q < n and _ascii_space(PyUnicode_READ(kind, data, q)):
                        q += 1
                    end = _match_host(kind, data, n, q, &last_two)
                    if end >= 0:
                        self._push(_feed(h_host, text, q, end), tid, <int32_t>q, <int32_t>end, host_prefix)
                        self._push(_feed(h_host, text, last_two, end), tid, <int32_t>last_two, <int32_t>end,
                                   host_prefix)
                        pos = end
                        continue
                pos = at + 1
        pos = 0
        while True:
            at = _find(kind, data, n, pos, b"[", 1)
            if at < 0:
                break
            end = _octets(kind, data, n, at + 1, ends)
            if end < 0:
                pos = at + 1
                continue
            for q in (3, 2, 1):               # a.b.c.d, a.b.c, a.b
                self._push(_feed(h_ip, text, at + 1, ends[q]), tid, <int32_t>(at + 1), <int32_t>ends[q], ip_prefix)
            pos = end

    def add_names(self, list fields, int prefix=0):
        """Append ``prefix + name`` for each ``(name, value)`` pair of ``fields`` (a
        message's header fields: its ``hdr:<name>`` tokens); empty names are skipped."""
        cdef uint64_t h0 = self._prefix_state(prefix)
        cdef str name
        for item in fields:
            name = item[0]
            self._add_one(h0, name, prefix)

    def add_pairs(self, int window, int prefix):
        """Append the word pairs of the stream so far (orthogonal sparse
        bigrams): for each untagged word (prefix ``""``, no ``:`` in it, not a
        ``skip:`` token), in order, and each of the next ``window - 1`` such
        words at distance d, the token ``prefix + w1 + " " + d + " " + w2``.
        Returns the number of pairs added."""
        cdef Py_ssize_t n_words = 0, k, d, j, i, t, count = 0, n_texts
        cdef int32_t *words = NULL
        cdef const void **text_data = NULL
        cdef int *text_kind = NULL
        cdef Occurrence o, o2
        cdef uint64_t h0, h
        cdef int kind
        cdef const void *data
        cdef bint plain
        cdef str text
        if not 1 <= window <= 16:
            raise ValueError(f"window must be from 1 to 16, got {window}")
        if self.pairs_start >= 0:
            raise ValueError("the stream has its pairs already")
        self.pairs_start = self.n
        if window == 1 or self.n < 2:
            return 0
        h0 = self._prefix_state(prefix)
        # each text's kind and characters, looked up once (self.texts holds them through the call: a push
        # adds no text), and the words' occurrences
        n_texts = len(self.texts)
        words = <int32_t *>malloc(self.n * sizeof(int32_t))
        text_data = <const void **>malloc((n_texts if n_texts else 1) * sizeof(void *))
        text_kind = <int *>malloc((n_texts if n_texts else 1) * sizeof(int))
        try:
            if words == NULL or text_data == NULL or text_kind == NULL:
                raise MemoryError()
            for t in range(n_texts):
                text = <str>self.texts[t]
                text_kind[t] = PyUnicode_KIND(text)
                text_data[t] = PyUnicode_DATA(text)
            text = None
            for j in range(self.n):
                o = self.occ[j]
                if o.prefix != 0 or o.text < 0:
                    continue
                kind, data = text_kind[o.text], text_data[o.text]
                plain = True
                if kind == 1:
                    for i in range(o.start, o.end):
                        if (<const uint8_t *>data)[i] == 58:     # ':': a tagged token added with prefix ""
                            plain = False
                            break
                else:
                    for i in range(o.start, o.end):
                        if PyUnicode_READ(kind, data, i) == 58:
                            plain = False
                            break
                if plain:
                    words[n_words] = <int32_t>j
                    n_words += 1
            if n_words < 2:
                return 0
            self._reserve(n_words * (window - 1))
            for k in range(n_words - 1):
                o = self.occ[words[k]]
                h = (_feed_data(h0, text_kind[o.text], text_data[o.text], o.start, o.end) ^ 32) * _FNV_PRIME
                for d in range(1, window):
                    if k + d >= n_words:
                        break
                    o2 = self.occ[words[k + d]]
                    self._push(_feed_data((_feed_int(h, <int32_t>d) ^ 32) * _FNV_PRIME, text_kind[o2.text],
                                          text_data[o2.text], o2.start, o2.end),
                               <int32_t>(_PAIR_TEXT - (d - 1)), words[k], words[k + d], prefix)
                    count += 1
        finally:
            free(words)
            free(text_data)
            free(text_kind)
        return count

    cdef int _add_one(self, uint64_t h0, str token, int prefix) except -1:
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(token)
        cdef int32_t tid
        if n == 0:
            return 0
        tid = self._add_text(token)
        self._push(_feed(h0, token, 0, n), tid, 0, <int32_t>n, prefix)
        return 0

    def write_tokens(self, positions, Py_ssize_t count, bytearray blob, array.array offsets):
        """Append the UTF-8 strings (lone surrogates as with "surrogatepass") of the
        occurrences ``positions[:count]`` (int32, any buffer) to ``blob``, and the end
        offset of each in ``blob`` to ``offsets`` (``array('Q')``): the vocabulary's
        string table, without a Python string per token."""
        cdef Py_buffer view
        take(&view, positions, SIGNED, 4, False, "int32_t")
        try:
            self._write_tokens(<const int32_t *>view.buf, length_of(&view), count, blob, offsets)
        finally:
            PyBuffer_Release(&view)

    cdef int _write_tokens(self, const int32_t *positions, Py_ssize_t n_positions, Py_ssize_t count,
                           bytearray blob, array.array offsets) except -1:
        cdef Py_ssize_t k, j, total = 0, at, c, first
        cdef list pieces = []
        cdef bytes piece
        cdef char *out
        cdef Occurrence o, o1, o2
        if offsets.typecode != "Q":
            raise TypeError("offsets must be an array('Q')")
        if not 0 <= count <= n_positions:
            raise ValueError(f"count {count} out of range for {n_positions} positions")
        for k in range(count):       # first pass: validate, and the size of each string
            j = positions[k]
            if not 0 <= j < self.n:
                raise IndexError(f"token index {j} out of range for {self.n} tokens")
            o = self.occ[j]
            prefix = self._prefix_text(o.prefix)
            if o.text == _SKIP_TEXT or not PyUnicode_IS_ASCII(prefix):   # rare: through Python
                piece = self.token(j).encode("utf-8", "surrogatepass")
                pieces.append(piece)
                total += len(piece)
            elif o.text <= _PAIR_TEXT:      # prefix + w1 + " d " + w2
                o1 = self.occ[o.start]
                o2 = self.occ[o.end]
                total += (PyUnicode_GET_LENGTH(prefix) + _utf8_size(<str>self.texts[o1.text], o1.start, o1.end)
                          + 2 + _n_digits(_PAIR_TEXT - o.text + 1)
                          + _utf8_size(<str>self.texts[o2.text], o2.start, o2.end))
            else:
                total += PyUnicode_GET_LENGTH(prefix) + _utf8_size(<str>self.texts[o.text], o.start, o.end)
        at = PyByteArray_GET_SIZE(blob)
        PyByteArray_Resize(blob, at + total)
        first = len(offsets)
        array.resize_smart(offsets, first + count)
        out = PyByteArray_AS_STRING(blob)
        c = 0
        for k in range(count):
            j = positions[k]
            o = self.occ[j]
            prefix = self._prefix_text(o.prefix)
            if o.text == _SKIP_TEXT or not PyUnicode_IS_ASCII(prefix):
                piece = <bytes>pieces[c]
                c += 1
                memcpy(out + at, <char *>piece, len(piece))
                at += len(piece)
            elif o.text <= _PAIR_TEXT:
                memcpy(out + at, PyUnicode_DATA(prefix), PyUnicode_GET_LENGTH(prefix))
                at += PyUnicode_GET_LENGTH(prefix)
                o1 = self.occ[o.start]
                o2 = self.occ[o.end]
                at = _utf8_write(<str>self.texts[o1.text], o1.start, o1.end, out, at)
                out[at] = 32
                at = _write_digits(_PAIR_TEXT - o.text + 1, out, at + 1)
                out[at] = 32
                at = _utf8_write(<str>self.texts[o2.text], o2.start, o2.end, out, at + 1)
            else:
                memcpy(out + at, PyUnicode_DATA(prefix), PyUnicode_GET_LENGTH(prefix))  # ASCII: 1 byte each
                at += PyUnicode_GET_LENGTH(prefix)
                at = _utf8_write(<str>self.texts[o.text], o.start, o.end, out, at)
            offsets.data.as_ulonglongs[first + k] = <unsigned long long>at
        return 0

    @property
    def hashes(self):
        """``array('Q')`` of the token hashes, shape (len(self),)."""
        cdef array.array out
        if self._hashes is None or len(self._hashes) != self.n:
            out = array.clone(array.array("Q"), self.n, False)
            if self.n:
                memcpy(out.data.as_voidptr, self.hash_buf, self.n * sizeof(uint64_t))
            self._hashes = out
        return self._hashes

    def token(self, Py_ssize_t j):
        """The string of occurrence ``j`` (0 <= j < len(self))."""
        if not 0 <= j < self.n:
            raise IndexError(f"token index {j} out of range for {self.n} tokens")
        cdef Occurrence o = self.occ[j]
        prefix = self._prefix_text(o.prefix)
        if o.text == _SKIP_TEXT:
            return f"{prefix}skip:{chr(o.start)} {o.end}"
        if o.text <= _PAIR_TEXT:
            return f"{prefix}{self.token(o.start)} {_PAIR_TEXT - o.text + 1} {self.token(o.end)}"
        return prefix + (<str>self.texts[o.text])[o.start:o.end]

    def tokens(self):
        """All token strings, in order (a list: for inspection and tests)."""
        return [self.token(j) for j in range(self.n)]
