"""The running total of a counts merge (``spamnb.estimator.counting._Sum``), compiled.

A :class:`MergeTable` adds parts (a partition's counts: token hashes and
UTF-8 strings, two model rows, each token's last day, and the fold rows'
non-zero entries) by token, in one C loop per part: its cost is the part's
size, never the total's.

* Tokens: numbered in order of first sight (a part's new tokens in the part's
  order), as ``Vocabulary`` numbers them; looked up in an open-addressing
  table of token numbers (linear probing, at most half full, doubled as it
  fills) that compares the hashes kept in token order, so the index costs 4
  bytes a slot on top of the 8-byte hash a token.  A hash of 0 (the
  vocabulary's empty slot) is new every time, as there.
* Model rows: ``row[token] += value`` (a new token's entry is ``0.0 +
  value``), the last day by maximum (from 0).
* Fold rows: their non-zero entries, per token a list of ``(cell, value)``
  kept in cell order; a part's entry is added to the entry of the same cell
  (one addition, in the order of the parts: the dense sum's) or inserted
  with its value.  :meth:`MergeTable.take_fold_entries` lists them
  token-major, cell-minor: the ascending ``token * cells + cell`` keys of
  ``spamnb.estimator.counting.Counts``.

Memory: every array is a memory mapping of its own, grown by half with
``mremap`` (no copy, no second array while it grows, and returned to the
system as soon as it is freed, where the C heap would keep it); the result
is handed over, not copied: each ``take_*`` method gives its arrays as
:class:`Block` s (buffers owning the mapping) and forgets them.  Nothing here
imports numpy.
"""

cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memmove, memset

from spamnb.bayes._maps cimport _grow, _map, _remap, _unmap

cdef extern from *:
    """
    #define _spamnb_merge_prefetch(p) __builtin_prefetch((const void *)(p))
    #include <sys/mman.h>
    /* A mapping read at random (a table's slots, hashes, days) asked for huge pages where the system gives them
       on request (Linux's transparent huge pages in "madvise" mode): a page-table walk per access otherwise. */
    static void _spamnb_merge_huge(void *p, size_t n) {
    #ifdef MADV_HUGEPAGE
        if (p != NULL && n >= ((size_t)2 << 20)) madvise(p, n, MADV_HUGEPAGE);
    #endif
    }
    """
    void _prefetch "_spamnb_merge_prefetch"(const void *p) noexcept nogil
    void _huge "_spamnb_merge_huge"(void *p, size_t n) noexcept nogil

# Lookahead of the loops' prefetches (the total's arrays are far larger than
# the caches: each token's entries are random accesses): a slot is fetched
# _AHEAD tokens early, the entry it names _AHEAD // 2 tokens early.
cdef enum:
    _AHEAD = 16

cdef char *_FORMAT = "B"


@cython.auto_pickle(False)
cdef class Block:
    """A memory mapping handed over as a writable byte buffer
    (``numpy.frombuffer`` views it without a copy); unmapped with the last view."""

    cdef char *data
    cdef Py_ssize_t size       # bytes in use
    cdef Py_ssize_t mapped     # bytes mapped
    cdef Py_ssize_t shape[1]

    def __dealloc__(self):
        _unmap(self.data, self.mapped)

    def __len__(self):
        return self.size

    def __getbuffer__(self, Py_buffer *view, int flags):
        self.shape[0] = self.size
        view.buf = self.data if self.data != NULL else <char *>&self.shape   # never NULL, even when empty
        view.obj = self
        view.len = self.size
        view.readonly = 0
        view.itemsize = 1
        view.format = _FORMAT if (flags & 0x0004) else NULL   # PyBUF_FORMAT
        view.ndim = 1
        view.shape = self.shape
        view.strides = NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer *view):
        pass


cdef Block _block(void *data, Py_ssize_t size, Py_ssize_t mapped):
    """A Block owning the mapping ``data`` of ``mapped`` bytes, ``size`` of them
    in use (the rest given back)."""
    cdef Block block = Block.__new__(Block)
    cdef void *shrunk
    if size == 0:
        _unmap(data, mapped)
        data, mapped = NULL, 0
    elif size < mapped:
        shrunk = _remap(data, mapped, size)
        if shrunk != NULL:
            data, mapped = shrunk, size
    block.data, block.size, block.mapped = <char *>data, size, mapped
    return block


cdef int _check_strings(const uint64_t[::1] offsets, const uint8_t[::1] strings, Py_ssize_t m) except -1:
    """A part's ``m`` strings: ``offsets`` (``m + 1``, checked by the caller)
    ascending from 0 to the end of ``strings``."""
    cdef Py_ssize_t j
    if offsets[0] != 0 or offsets[m] != <uint64_t>strings.shape[0]:
        raise ValueError("a part's string offsets do not span its strings")
    for j in range(m):
        if offsets[j] > offsets[j + 1]:
            raise ValueError("a part's string offsets are out of order")
    return 0


@cython.auto_pickle(False)
cdef class MergeTable:
    """Counts added part by part (see the module doc).

    Parameters
    ----------
    cells : int
        Fold cells per token (``2 * n_folds``; 0: the parts have no fold rows).
    rows : bool
        False: the tokens alone are merged (numbered, their strings kept, their
        days), not the model rows (the parts' ``ham`` and ``spam`` None), for a
        caller that adds the rows itself by the token numbers :meth:`add`
        gives (``index``).
    """

    cdef readonly Py_ssize_t n            # tokens
    cdef readonly Py_ssize_t n_entries    # fold entries
    cdef readonly int cells
    cdef readonly bint has_rows
    cdef Py_ssize_t cap                   # token capacity of hashes, days, heads
    cdef Py_ssize_t row_cap               # token capacity of each model row
    cdef uint64_t *hashes
    cdef int32_t *days
    cdef double *rows                     # two rows, the second at rows + row_cap
    cdef int32_t *slots                   # token numbers, -1 empty; mask + 1 of them
    cdef uint64_t mask
    cdef Py_ssize_t filled
    cdef uint8_t *blob
    cdef Py_ssize_t blob_size, blob_cap
    cdef uint64_t *offsets                # n - first + 1: the ends of tokens first.. in blob (offsets[0] 0)
    cdef Py_ssize_t offsets_cap
    cdef Py_ssize_t first                 # the first token whose string is still held (take_strings)
    cdef int32_t *heads                   # first fold entry of each token, -1 none
    cdef int32_t *links                   # per entry: (next entry or -1, cell); an int64 key once taken
    cdef double *entry_value
    cdef Py_ssize_t entries_cap

    def __cinit__(self, int cells=0, bint rows=True):
        if cells < 0:
            raise ValueError("cells must be >= 0")
        self.cells = cells
        self.has_rows = rows
        self.slots = <int32_t *>_map(1024 * sizeof(int32_t))
        if self.slots == NULL:
            raise MemoryError()
        memset(self.slots, 0xff, 1024 * sizeof(int32_t))
        self.mask = 1023
        _grow(<void **>&self.offsets, &self.offsets_cap, 1, sizeof(uint64_t))
        self.offsets[0] = 0

    def __dealloc__(self):
        _unmap(self.hashes, self.cap * sizeof(uint64_t))
        _unmap(self.days, self.cap * sizeof(int32_t))
        if self.heads != NULL:
            _unmap(self.heads, self.cap * sizeof(int32_t))
        _unmap(self.rows, 2 * self.row_cap * sizeof(double))
        if self.slots != NULL:
            _unmap(self.slots, (self.mask + 1) * sizeof(int32_t))
        _unmap(self.blob, self.blob_cap)
        _unmap(self.offsets, self.offsets_cap * sizeof(uint64_t))
        _unmap(self.links, self.entries_cap * 2 * sizeof(int32_t))
        _unmap(self.entry_value, self.entries_cap * sizeof(double))

    cdef int _reserve_tokens(self, Py_ssize_t needed) except -1:
        cdef Py_ssize_t cap, row_cap = self.row_cap, new_cap
        cdef double *rows
        if needed > self.cap:   # hashes, days and heads share one capacity
            cap = self.cap
            _grow(<void **>&self.hashes, &cap, needed, sizeof(uint64_t))
            new_cap = self.cap
            _grow(<void **>&self.days, &new_cap, needed, sizeof(int32_t))
            if self.cells:
                new_cap = self.cap
                _grow(<void **>&self.heads, &new_cap, needed, sizeof(int32_t))
            self.cap = cap
        if self.has_rows and needed > row_cap:
            new_cap = max(needed, row_cap + row_cap // 2, 1024)
            rows = <double *>_remap(self.rows, 2 * row_cap * sizeof(double), 2 * new_cap * sizeof(double))
            if rows == NULL:
                raise MemoryError()
            if self.n:   # the second row moves up to its new place
                memmove(rows + new_cap, rows + row_cap, self.n * sizeof(double))
            self.rows, self.row_cap = rows, new_cap
        _grow(<void **>&self.offsets, &self.offsets_cap, needed + 1 - self.first, sizeof(uint64_t))
        return 0

    cdef int _rehash(self) except -1:
        """The slots doubled: the old ones unmapped first and the new ones made
        from the hashes kept in token order (never two sets of slots: the
        last doubling's old slots beside the new were part of the parent's
        peak)."""
        cdef Py_ssize_t capacity = 2 * (self.mask + 1), t
        cdef uint64_t mask = capacity - 1, slot, h
        _unmap(self.slots, (self.mask + 1) * sizeof(int32_t))
        self.slots = <int32_t *>_map(capacity * sizeof(int32_t))
        if self.slots == NULL:
            self.mask = 0
            raise MemoryError()
        self.mask = mask
        _huge(self.slots, capacity * sizeof(int32_t))
        with nogil:
            memset(self.slots, 0xff, capacity * sizeof(int32_t))
            for t in range(self.n):
                h = self.hashes[t]
                if h != 0:   # a hash 0 is new every time (never in the slots)
                    slot = h & mask
                    while self.slots[slot] >= 0:
                        slot = (slot + 1) & mask
                    self.slots[slot] = <int32_t>t
        return 0

    cdef int _grow_entries(self, Py_ssize_t needed) except -1:
        cdef Py_ssize_t a, b
        if needed <= self.entries_cap:
            return 0
        a = b = self.entries_cap   # the two arrays share one capacity
        _grow(<void **>&self.links, &a, needed, 2 * sizeof(int32_t))
        _grow(<void **>&self.entry_value, &b, needed, sizeof(double))
        self.entries_cap = a
        return 0

    cdef inline int32_t _token(self, uint64_t h, const uint8_t *text, uint64_t start, uint64_t end) except -1:
        """The number of the token ``h`` (its string ``text[start:end]``):
        found, or numbered next (its entries 0, its string appended); room
        for it reserved before (:meth:`_reserve_tokens`)."""
        cdef uint64_t slot = 0
        cdef int32_t t = -1
        if h != 0:
            slot = h & self.mask
            while self.slots[slot] >= 0:
                if self.hashes[self.slots[slot]] == h:
                    return self.slots[slot]
                slot = (slot + 1) & self.mask
        t = <int32_t>self.n
        self.n += 1
        self.hashes[t] = h
        self.days[t] = 0
        if self.has_rows:
            self.rows[t] = 0.0
            self.rows[self.row_cap + t] = 0.0
        if self.cells:
            self.heads[t] = -1
        if end > start:
            _grow(<void **>&self.blob, &self.blob_cap, self.blob_size + <Py_ssize_t>(end - start), 1)
            memcpy(self.blob + self.blob_size, text + start, end - start)
            self.blob_size += end - start
        self.offsets[t + 1 - self.first] = self.blob_size
        if h != 0:
            self.slots[slot] = t
            self.filled += 1
            if 2 * self.filled > <Py_ssize_t>self.mask + 1:
                self._rehash()
        return t

    def add(self, const uint64_t[::1] hashes, const uint64_t[::1] offsets, const uint8_t[::1] strings,
            const double[::1] ham, const double[::1] spam, const int32_t[::1] last_seen,
            const int64_t[::1] fold_keys=None, const double[::1] fold_values=None, int32_t[::1] index_out=None):
        """Add one part: its tokens' ``hashes`` (distinct but for 0s), their
        strings ``strings[offsets[j]:offsets[j + 1]]``, its model rows
        ``ham`` and ``spam`` (None in a table without rows), ``last_seen``
        days and (``cells`` > 0) its fold entries (keys ascending, ``token *
        cells + cell``); ``index_out`` (int32, as long as ``hashes``): receives
        each of the part's tokens' number in the table.  Raises ValueError,
        adding nothing, when the arrays do not fit together."""
        cdef Py_ssize_t m = hashes.shape[0], j, e, k, n_keys = 0
        cdef uint64_t h, slot = 0
        cdef int32_t t, cell, at, prev
        cdef int32_t *index
        cdef int64_t key, token
        cdef double *ham_row
        cdef double *spam_row
        cdef const uint8_t *text
        cdef Py_ssize_t index_bytes = (m if m else 1) * sizeof(int32_t)
        if self.slots == NULL:
            raise ValueError("the merge's result was taken")
        if self.has_rows:
            if ham is None or spam is None or ham.shape[0] != m or spam.shape[0] != m:
                raise ValueError("a part's model rows are missing or differ in length")
        elif ham is not None or spam is not None:
            raise ValueError("model rows given to a merge of tokens alone")
        if offsets.shape[0] != m + 1 or last_seen.shape[0] != m:
            raise ValueError("a part's arrays differ in length")
        if index_out is not None and index_out.shape[0] != m:
            raise ValueError("a part's index differs in length")
        _check_strings(offsets, strings, m)
        if self.cells:
            if fold_keys is None or fold_values is None or fold_keys.shape[0] != fold_values.shape[0]:
                raise ValueError("a part's fold entries are missing or differ in length")
            n_keys = fold_keys.shape[0]
            for e in range(n_keys):
                if fold_keys[e] < 0 or fold_keys[e] // self.cells >= m or (e and fold_keys[e] <= fold_keys[e - 1]):
                    raise ValueError("a part's fold keys are out of range or not ascending")
        elif fold_keys is not None and fold_keys.shape[0]:
            raise ValueError("fold entries given to a merge without fold cells")
        if self.n + m > 0x7fffffff - 1 or self.n_entries + n_keys > 0x7fffffff - 1:
            raise ValueError("too many tokens to merge")
        text = &strings[0] if strings.shape[0] else NULL
        index = <int32_t *>_map(index_bytes)
        if index == NULL:
            raise MemoryError()
        try:
            self._reserve_tokens(self.n + m)
            # tokens: found, or numbered in the part's order
            for j in range(m):
                if j + _AHEAD < m:
                    _prefetch(&self.slots[hashes[j + _AHEAD] & self.mask])
                if j + _AHEAD // 2 < m:
                    t = self.slots[hashes[j + _AHEAD // 2] & self.mask]
                    if t >= 0:
                        _prefetch(&self.hashes[t])
                index[j] = self._token(hashes[j], text, offsets[j], offsets[j + 1])
            if self.has_rows:
                ham_row, spam_row = self.rows, self.rows + self.row_cap
                for j in range(m):
                    if j + _AHEAD < m:
                        t = index[j + _AHEAD]
                        _prefetch(&ham_row[t])
                        _prefetch(&spam_row[t])
                        _prefetch(&self.days[t])
                    t = index[j]
                    ham_row[t] += ham[j]
                    spam_row[t] += spam[j]
                    if last_seen[j] > self.days[t]:
                        self.days[t] = last_seen[j]
            else:
                for j in range(m):
                    t = index[j]
                    if last_seen[j] > self.days[t]:
                        self.days[t] = last_seen[j]
            if index_out is not None and m:
                memcpy(&index_out[0], index, m * sizeof(int32_t))
            if n_keys:
                self._grow_entries(self.n_entries + n_keys)
                for e in range(n_keys):
                    if e + _AHEAD < n_keys:
                        _prefetch(&self.heads[index[fold_keys[e + _AHEAD] // self.cells]])
                    if e + _AHEAD // 2 < n_keys:
                        at = self.heads[index[fold_keys[e + _AHEAD // 2] // self.cells]]
                        if at >= 0:
                            _prefetch(&self.links[2 * at])
                            _prefetch(&self.entry_value[at])
                    key = fold_keys[e]
                    token = key // self.cells
                    cell = <int32_t>(key - token * self.cells)
                    t = index[token]
                    prev = -1
                    at = self.heads[t]
                    while at >= 0 and self.links[2 * at + 1] < cell:
                        prev = at
                        at = self.links[2 * at]
                    if at >= 0 and self.links[2 * at + 1] == cell:
                        self.entry_value[at] += fold_values[e]
                        continue
                    k = self.n_entries
                    self.n_entries += 1
                    self.links[2 * k] = at
                    self.links[2 * k + 1] = cell
                    self.entry_value[k] = fold_values[e]
                    if prev < 0:
                        self.heads[t] = <int32_t>k
                    else:
                        self.links[2 * prev] = <int32_t>k
        finally:
            _unmap(index, index_bytes)

    def add_mapped(self, int32_t[::1] mapped, const int32_t[::1] tokens, Py_ssize_t j, Py_ssize_t first,
                   const uint64_t[::1] hashes, const uint64_t[::1] offsets, const uint8_t[::1] strings,
                   int32_t day, int32_t[::1] index_out, bint raise_days=True):
        """A worker's partition (``spamnb train -j N``): ``tokens`` its tokens
        by the worker's numbers, ``mapped`` the worker's number -> this
        table's (-1: not yet), the tokens it numbered ``first``.. sent with
        their ``hashes`` and strings.  From ``tokens[j]`` on, each token's
        number in the table goes to ``index_out`` (and to ``mapped``): mapped
        before, an array's look-up; else one sent, found by hash or numbered
        next, in the order of ``tokens``, as :meth:`add` would number the
        part; each seen on ``day`` (the last day by maximum; ``raise_days``
        False: the caller knows no token mapped before has an earlier day,
        and only those looked up are raised).  Stops at a
        token neither mapped nor sent (one the caller kept from before).
        Returns ``(where it stopped, len(tokens) when done; how many of
        those sent were numbered)``."""
        cdef Py_ssize_t m = tokens.shape[0], n_sent = hashes.shape[0], k, i, got = 0, stop, n_fresh = 0
        cdef int32_t t, g
        cdef int32_t *fresh
        cdef Py_ssize_t fresh_bytes
        cdef const uint8_t *text = &strings[0] if strings.shape[0] else NULL
        if self.slots == NULL:
            raise ValueError("the merge's result was taken")
        if self.has_rows or self.cells:
            raise ValueError("a worker's partition is added to a merge of tokens alone")
        if index_out.shape[0] != m or offsets.shape[0] != n_sent + 1 or j < 0 or first < 0:
            raise ValueError("a part's arrays differ in length")
        if first + n_sent > mapped.shape[0]:
            raise ValueError("the worker's map is shorter than its tokens")
        _check_strings(offsets, strings, n_sent)
        if self.n + n_sent > 0x7fffffff - 1:
            raise ValueError("too many tokens to merge")
        self._reserve_tokens(self.n + n_sent)
        for k in range(j, m):
            if not 0 <= tokens[k] < mapped.shape[0]:
                raise ValueError("a worker's token number out of its map")
        fresh_bytes = (m - j if m > j else 1) * sizeof(int32_t)
        fresh = <int32_t *>_map(fresh_bytes)
        if fresh == NULL:
            raise MemoryError()
        try:
            # 1. the tokens up to the first neither mapped nor sent: those sent and not mapped yet listed (``fresh``)
            stop = m
            for k in range(j, m):
                if k + _AHEAD < m:
                    _prefetch(&mapped[tokens[k + _AHEAD]])
                t = tokens[k]
                if mapped[t] < 0:
                    if t < first or t >= first + n_sent:
                        stop = k
                        break
                    fresh[n_fresh] = <int32_t>(k - j)
                    n_fresh += 1
            # 2. those looked up (found, or numbered next) in the order of ``tokens``: each one's slot fetched
            # _AHEAD of them early, the token that slot names (its hash compared, its day) _AHEAD // 2 early
            for i in range(n_fresh):
                if i + _AHEAD < n_fresh:
                    _prefetch(&self.slots[hashes[tokens[j + fresh[i + _AHEAD]] - first] & self.mask])
                if i + _AHEAD // 2 < n_fresh:
                    g = self.slots[hashes[tokens[j + fresh[i + _AHEAD // 2]] - first] & self.mask]
                    if g >= 0:
                        _prefetch(&self.hashes[g])
                        _prefetch(&self.days[g])
                t = tokens[j + fresh[i]]
                k = t - first
                g = self._token(hashes[k], text, offsets[k], offsets[k + 1])
                mapped[t] = g
                got += 1
                if day > self.days[g]:
                    self.days[g] = day
            # 3. every token's number (the map's), the days of those mapped before raised
            for k in range(j, stop):
                if raise_days and k + _AHEAD < stop:
                    g = mapped[tokens[k + _AHEAD]]
                    _prefetch(&self.days[g])
                g = mapped[tokens[k]]
                index_out[k] = g
                if raise_days and day > self.days[g]:
                    self.days[g] = day
        finally:
            _unmap(fresh, fresh_bytes)
        return stop, got

    def take_strings(self):
        """``(strings, offsets)``: Blocks of the UTF-8 strings of the tokens
        numbered since the last call (or since the start) and their uint64 end
        offsets in it, after a 0 (one more than the tokens); the table keeps
        numbering tokens, holding the strings of those after only (its caller
        keeps these elsewhere: ``spamnb train -j N``'s parent writes them out)."""
        if self.slots == NULL:
            raise ValueError("the merge's result was taken")
        cdef Py_ssize_t count = self.n - self.first
        cdef Block offsets = _block(self.offsets, (count + 1) * sizeof(uint64_t), self.offsets_cap * sizeof(uint64_t))
        self.offsets, self.offsets_cap = NULL, 0
        cdef Block blob = _block(self.blob, self.blob_size, self.blob_cap)
        self.blob, self.blob_size, self.blob_cap = NULL, 0, 0
        self.first = self.n
        _grow(<void **>&self.offsets, &self.offsets_cap, 1, sizeof(uint64_t))
        self.offsets[0] = 0
        return blob, offsets

    def take_tokens(self):
        """``(hashes, offsets, strings)``: Blocks of the tokens' uint64 hashes
        (in token order), uint64 string offsets (n + 1) and UTF-8 strings
        (after :meth:`take_strings`: of the tokens numbered since, their
        offsets counted from the first of them).  Nothing can be added after."""
        cdef Block hashes = _block(self.hashes, self.n * sizeof(uint64_t), self.cap * sizeof(uint64_t))
        self.hashes = NULL
        cdef Block offsets = _block(self.offsets, (self.n - self.first + 1) * sizeof(uint64_t),
                                    self.offsets_cap * sizeof(uint64_t))
        self.offsets, self.offsets_cap = NULL, 0
        cdef Block blob = _block(self.blob, self.blob_size, self.blob_cap)
        self.blob, self.blob_cap = NULL, 0
        if self.slots != NULL:
            _unmap(self.slots, (self.mask + 1) * sizeof(int32_t))
            self.slots = NULL
        return hashes, offsets, blob

    def take_rows(self):
        """``(rows, days)``: Blocks of the two model rows (float64, ``(2, n)``
        row-major; empty in a table without rows) and the int32 days."""
        if self.rows != NULL and self.n:
            memmove(self.rows + self.n, self.rows + self.row_cap, self.n * sizeof(double))
        cdef Block rows = (_block(self.rows, 2 * self.n * sizeof(double), 2 * self.row_cap * sizeof(double))
                           if self.has_rows else _block(NULL, 0, 0))
        self.rows, self.row_cap = NULL, 0
        cdef Block days = _block(self.days, self.n * sizeof(int32_t), self.cap * sizeof(int32_t))
        self.days = NULL
        return rows, days

    def take_fold_entries(self, bint in_place=False):
        """``(keys, values)``: Blocks of the fold entries' int64 keys
        (``token * cells + cell``, ascending) and float64 values.  New arrays,
        the entries' own freed once read; ``in_place``: made in the entries'
        own memory instead (a 4-byte position per entry besides, where the
        new arrays take 16: slower, for the largest result, the last)."""
        cdef Py_ssize_t count = self.n_entries, i = 0, t, start
        cdef Py_ssize_t size = (count if count else 1)
        cdef int32_t at, after, cell, goes
        cdef int64_t *keys
        cdef double *values
        cdef int32_t *position
        cdef int64_t held_key, next_key
        cdef double held_value, next_value
        if in_place:
            keys, values = <int64_t *>self.links, self.entry_value
            position = <int32_t *>_map(size * sizeof(int32_t))
            if position == NULL:
                raise MemoryError()
        else:
            keys = <int64_t *>_map(size * sizeof(int64_t))
            values = <double *>_map(size * sizeof(double))
            if keys == NULL or values == NULL:
                _unmap(keys, size * sizeof(int64_t))
                _unmap(values, size * sizeof(double))
                raise MemoryError()
        if count and not in_place:
            with nogil:
                for t in range(self.n):
                    if t + _AHEAD < self.n:
                        at = self.heads[t + _AHEAD]
                        if at >= 0:
                            _prefetch(&self.links[2 * at])
                            _prefetch(&self.entry_value[at])
                    at = self.heads[t]
                    while at >= 0:
                        keys[i] = <int64_t>t * self.cells + self.links[2 * at + 1]
                        values[i] = self.entry_value[at]
                        i += 1
                        at = self.links[2 * at]
        elif count:
            with nogil:
                # each entry's key, written over its link (read first), and its place in key order
                for t in range(self.n):
                    at = self.heads[t]
                    while at >= 0:
                        after, cell = self.links[2 * at], self.links[2 * at + 1]
                        keys[at] = <int64_t>t * self.cells + cell
                        position[at] = <int32_t>i
                        i += 1
                        at = after
                # entry e goes to position[e]: the permutation applied in place, cycle by cycle
                # (entries are mostly made in key order: most are in place already)
                for start in range(count):
                    if position[start] == start or position[start] < 0:
                        continue
                    held_key, held_value = keys[start], values[start]
                    t = start
                    while True:
                        goes = position[t]
                        position[t] = -1
                        if goes == start:
                            keys[start], values[start] = held_key, held_value
                            break
                        next_key, next_value = keys[goes], values[goes]
                        keys[goes], values[goes] = held_key, held_value
                        held_key, held_value = next_key, next_value
                        t = goes
        if self.heads != NULL:
            _unmap(self.heads, self.cap * sizeof(int32_t))
            self.heads = NULL
        if in_place:
            _unmap(position, size * sizeof(int32_t))
            key_block = _block(self.links, count * sizeof(int64_t), self.entries_cap * 2 * sizeof(int32_t))
            value_block = _block(self.entry_value, count * sizeof(double), self.entries_cap * sizeof(double))
        else:
            _unmap(self.links, self.entries_cap * 2 * sizeof(int32_t))
            _unmap(self.entry_value, self.entries_cap * sizeof(double))
            key_block = _block(keys, count * sizeof(int64_t), size * sizeof(int64_t))
            value_block = _block(values, count * sizeof(double), size * sizeof(double))
        self.links, self.entry_value, self.entries_cap, self.n_entries = NULL, NULL, 0, 0
        return key_block, value_block


def fold_entries(list rows, Py_ssize_t n):
    """``(keys, values)``: Blocks of the non-zero entries of dense fold rows
    (``rows``: ``cells`` float64 buffers, row ``k`` cell ``k``; entries past a
    row's end are zeros) over tokens ``0 .. n - 1``, as a part's
    :class:`~spamnb.estimator.counting.Counts` holds them: int64 keys ``token *
    cells + cell``, ascending, and their float64 values; one scan of the rows."""
    cdef Py_ssize_t cells = len(rows), k, t, count = 0, i = 0
    cdef const double[::1] row
    cdef const double **data = NULL
    cdef Py_ssize_t *length = NULL
    cdef int64_t *keys
    cdef double *values
    cdef double v
    views = [memoryview(r).cast("B").cast("d") for r in rows]
    if cells == 0:
        return _block(NULL, 0, 0), _block(NULL, 0, 0)
    data = <const double **>_map(cells * (sizeof(double *) + sizeof(Py_ssize_t)))
    if data == NULL:
        raise MemoryError()
    length = <Py_ssize_t *>(data + cells)
    for k in range(cells):
        row = views[k]
        length[k] = min(n, row.shape[0])
        data[k] = &row[0] if row.shape[0] else NULL
    with nogil:
        for k in range(cells):
            for t in range(length[k]):
                if data[k][t] != 0:
                    count += 1
    keys = <int64_t *>_map((count if count else 1) * sizeof(int64_t))
    values = <double *>_map((count if count else 1) * sizeof(double))
    if keys == NULL or values == NULL:
        _unmap(keys, (count if count else 1) * sizeof(int64_t))
        _unmap(values, (count if count else 1) * sizeof(double))
        _unmap(data, cells * (sizeof(double *) + sizeof(Py_ssize_t)))
        raise MemoryError()
    with nogil:
        for t in range(n):
            for k in range(cells):
                if t < length[k]:
                    v = data[k][t]
                    if v != 0:
                        keys[i] = <int64_t>t * cells + k
                        values[i] = v
                        i += 1
    _unmap(data, cells * (sizeof(double *) + sizeof(Py_ssize_t)))
    return (_block(keys, count * sizeof(int64_t), (count if count else 1) * sizeof(int64_t)),
            _block(values, count * sizeof(double), (count if count else 1) * sizeof(double)))


cdef enum:
    _MAX_LEVELS = 40
    _PIECE = 1 << 16     # bytes of the result's second row moved at a time (a whole number of pages)


@cython.auto_pickle(False)
cdef class RowLevels:
    """The tree of ``spamnb.estimator.counting.RowTree`` over two rows,
    compiled: items (a part's two rows, given compact at its tokens' numbers)
    added in groups of ``fan_in`` consecutive items, level by level, each
    level one running total (zeros, then each item added in turn; a full
    group's total added to the level above as one item), so every entry is
    the sum ``RowTree`` makes of the same items, in the same order.

    Memory: the first group (whose items hold every column so far) is dense
    and becomes level 1 at its lift (zeros plus it: itself, no copy); each
    later group is held compact, the columns its items touched only (a
    column's place among them, kept as place + 1 in a map as wide as the
    columns whose unwritten pages are zeros, and its two sums; given back at
    its lift); a column it lacks would add 0.0 to the level above, which
    changes nothing.  The levels above are dense rows.  Each array is a memory mapping grown with
    ``mremap`` (the new pages are zeros: no copy, no zeroing); :meth:`result`
    hands the top level's rows over as the result (the second row moved
    after the first a piece at a time, each piece unmapped once moved), the
    other levels unmapped first: never a copy of the rows beside them."""

    cdef int fan_in
    cdef Py_ssize_t width, n_levels
    cdef double *rows[_MAX_LEVELS][2]       # level 0: compact, a place each; above: dense, a column each
    cdef Py_ssize_t caps[_MAX_LEVELS]
    cdef Py_ssize_t items[_MAX_LEVELS]
    cdef int32_t *place                     # level 0: column -> its place + 1 (0: not in the group)
    cdef Py_ssize_t place_cap
    cdef int32_t *column                    # level 0: place -> column
    cdef Py_ssize_t column_cap, n_group
    cdef bint compact                       # level 0 compact (after the first lift; dense before)

    def __cinit__(self, int fan_in):
        if fan_in < 2:
            raise ValueError("fan_in must be at least 2")
        self.fan_in = fan_in

    def __dealloc__(self):
        self._release()

    cdef void _release(self) noexcept:
        cdef Py_ssize_t i
        for i in range(self.n_levels):
            _unmap(self.rows[i][0], self.caps[i] * sizeof(double))
            _unmap(self.rows[i][1], self.caps[i] * sizeof(double))
            self.rows[i][0] = self.rows[i][1] = NULL
            self.caps[i] = self.items[i] = 0
        _unmap(self.place, self.place_cap * sizeof(int32_t))
        _unmap(self.column, self.column_cap * sizeof(int32_t))
        self.place, self.column = NULL, NULL
        self.place_cap = self.column_cap = self.n_group = 0
        self.n_levels = self.width = 0
        self.compact = False

    cdef int _level(self, Py_ssize_t i, Py_ssize_t width) except -1:
        """Level ``i`` made (the levels below exist) and at least ``width``
        places (level 0) or columns (above) wide."""
        cdef Py_ssize_t cap, c
        cdef void *q
        if i >= _MAX_LEVELS:
            raise ValueError("too many levels")
        if i == self.n_levels:
            self.rows[i][0] = self.rows[i][1] = NULL
            self.caps[i] = 0
            self.items[i] = 0
            self.n_levels += 1
        if self.caps[i] < width or self.caps[i] == 0:
            cap = max(width, self.caps[i] + self.caps[i] // 2, 1024)
            for c in range(2):
                q = _remap(self.rows[i][c], self.caps[i] * sizeof(double), cap * sizeof(double))
                if q == NULL:
                    raise MemoryError()
                self.rows[i][c] = <double *>q
            self.caps[i] = cap
        return 0

    cdef int _lift(self, Py_ssize_t i) except -1:
        cdef Py_ssize_t w = self.width, t, p
        cdef int c
        cdef double *a
        cdef double *b
        cdef double *a1
        cdef double *b1
        if i == 0 and not self.compact:   # the first group, dense: level 1 (zeros) + it is it, handed over
            self._level(0, w)
            if self.n_levels == 1:
                self.rows[1][0], self.rows[1][1], self.caps[1] = self.rows[0][0], self.rows[0][1], self.caps[0]
                self.rows[0][0] = self.rows[0][1] = NULL
                self.caps[0], self.items[1], self.n_levels = 0, 0, 2
                self.compact = True
                self.items[1] += 1
                self.items[0] = 0
                return 0
        self._level(i + 1, w)
        if i == 0:   # the group's columns only (a column it lacks adds 0.0: nothing); its rows given back
            a, a1 = self.rows[0][0], self.rows[0][1]
            b, b1 = self.rows[1][0], self.rows[1][1]
            with nogil:
                for p in range(self.n_group):
                    t = self.column[p]
                    b[t] += a[p]
                    b1[t] += a1[p]
                    self.place[t] = 0
            _unmap(a, self.caps[0] * sizeof(double))
            _unmap(a1, self.caps[0] * sizeof(double))
            _unmap(self.column, self.column_cap * sizeof(int32_t))
            self.rows[0][0] = self.rows[0][1] = NULL
            self.column, self.caps[0], self.column_cap, self.n_group = NULL, 0, 0, 0
        else:
            self._level(i, w)
            for c in range(2):
                a, b = self.rows[i][c], self.rows[i + 1][c]
                for t in range(w):
                    b[t] += a[t]
                memset(a, 0, w * sizeof(double))
        self.items[i + 1] += 1
        self.items[i] = 0
        return 0

    def add(self, const int32_t[::1] index, const double[::1] ham, const double[::1] spam, Py_ssize_t width):
        """Add an item: ``ham[j]`` and ``spam[j]`` at column ``index[j]``
        (distinct columns below ``width``; every other column 0.0)."""
        cdef Py_ssize_t m = index.shape[0], j, i, n
        cdef double *r0
        cdef double *r1
        cdef int32_t t, p
        if ham.shape[0] < m or spam.shape[0] < m:
            raise ValueError("an item's rows are shorter than its index")
        for j in range(m):
            if index[j] < 0 or index[j] >= width:
                raise ValueError("an item's column is out of range")
        self.width = max(self.width, width)
        if not self.compact:   # the first group: dense (its columns are most of the width so far)
            self._level(0, self.width)
            r0, r1 = self.rows[0][0], self.rows[0][1]
            with nogil:
                for j in range(m):
                    if j + _AHEAD < m:
                        _prefetch(&r0[index[j + _AHEAD]])
                        _prefetch(&r1[index[j + _AHEAD]])
                    t = index[j]
                    r0[t] += ham[j]
                    r1[t] += spam[j]
            self.items[0] += 1
            if self.items[0] == self.fan_in:
                self._lift(0)
            return
        _grow(<void **>&self.place, &self.place_cap, self.width, sizeof(int32_t))
        self._level(0, self.n_group + m)
        _grow(<void **>&self.column, &self.column_cap, self.n_group + m, sizeof(int32_t))
        r0, r1 = self.rows[0][0], self.rows[0][1]
        n = self.n_group
        with nogil:
            for j in range(m):
                if j + _AHEAD < m:
                    _prefetch(&self.place[index[j + _AHEAD]])
                if j + _AHEAD // 2 < m:
                    p = self.place[index[j + _AHEAD // 2]]
                    if p > 0:
                        _prefetch(&r0[p - 1])
                        _prefetch(&r1[p - 1])
                t = index[j]
                p = self.place[t]
                if p == 0:   # new to the group: its sums start at 0.0 (the place's zeros)
                    self.column[n] = t
                    n += 1
                    p = <int32_t>n
                    self.place[t] = p
                r0[p - 1] += ham[j]
                r1[p - 1] += spam[j]
        self.n_group = n
        self.items[0] += 1
        i = 0
        while self.items[i] == self.fan_in:   # a full group: its sum goes up a level as one item
            self._lift(i)
            i += 1

    def result(self, Py_ssize_t width):
        """The sum: a Block of ``(2, width)`` float64, row-major (``width`` at
        least the widest item's; the columns past are zeros).  The tree is
        emptied."""
        cdef Py_ssize_t i, j, top = 0, p, done, size, keep, piece
        cdef double *out
        cdef char *second
        cdef void *q
        if width < self.width:
            raise ValueError("the result's width is below the items'")
        size = 2 * width * sizeof(double)
        for i in range(self.n_levels):   # flushed bottom-up as RowTree.result flushes
            top = i
            if not any(self.items[j] for j in range(i + 1, self.n_levels)):
                break
            if self.items[i]:
                self._lift(i)
        if width == 0 or self.n_levels == 0:
            self._release()
            out = <double *>_map(size if size else 8)
            if out == NULL:
                raise MemoryError()
            return _block(out, size, size if size else 8)
        for i in range(self.n_levels):   # the levels below and above the top (zeros) given back first
            if i != top:
                _unmap(self.rows[i][0], self.caps[i] * sizeof(double))
                _unmap(self.rows[i][1], self.caps[i] * sizeof(double))
                self.rows[i][0] = self.rows[i][1] = NULL
                self.caps[i] = 0
        _unmap(self.place, self.place_cap * sizeof(int32_t))
        _unmap(self.column, self.column_cap * sizeof(int32_t))
        self.place, self.column, self.place_cap, self.column_cap = NULL, NULL, 0, 0
        # the top's first row made the result's mapping (its columns past the width it was written to are
        # zeros), its second row moved after it a piece at a time, each piece unmapped once moved
        q = _remap(self.rows[top][0], self.caps[top] * sizeof(double), size)
        if q == NULL:
            raise MemoryError()
        out, self.rows[top][0] = <double *>q, NULL
        second = <char *>self.rows[top][1]
        keep = self.width * sizeof(double)   # the columns past it are zeros in both rows
        done = 0
        with nogil:
            while done < keep:
                piece = min(<Py_ssize_t>_PIECE, keep - done)
                memcpy(<char *>out + width * sizeof(double) + done, second + done, piece)
                done += piece
                if piece == _PIECE:
                    _unmap(second + done - piece, piece)
        done = (done // _PIECE) * _PIECE
        _unmap(second + done, self.caps[top] * sizeof(double) - done)
        self.rows[top][1] = NULL
        self.caps[top] = 0
        self._release()
        return _block(out, size, size)


def first_sight(const int32_t[::1] indices, Py_ssize_t n):
    """The distinct values of ``indices`` (each in ``0 .. n - 1``) in the
    order of their first occurrence: a Block of int32 (one scan; a byte a
    value of ``n`` for the marks).  ValueError when one is out of range."""
    cdef Py_ssize_t m = indices.shape[0], j, count = 0
    cdef int32_t t
    cdef uint8_t *mark
    cdef int32_t *out
    if n < 0:
        raise ValueError("n must be >= 0")
    mark = <uint8_t *>_map(n if n else 1)
    out = <int32_t *>_map((n if n else 1) * sizeof(int32_t))
    if mark == NULL or out == NULL:
        _unmap(mark, n if n else 1)
        _unmap(out, (n if n else 1) * sizeof(int32_t))
        raise MemoryError()
    with nogil:
        for j in range(m):
            t = indices[j]
            if t < 0 or t >= n:
                count = -1
                break
            if not mark[t]:
                mark[t] = 1
                out[count] = t
                count += 1
    _unmap(mark, n if n else 1)
    if count < 0:
        _unmap(out, (n if n else 1) * sizeof(int32_t))
        raise ValueError("a value is out of range")
    return _block(out, count * sizeof(int32_t), (n if n else 1) * sizeof(int32_t))


def index_slots(const uint64_t[::1] hashes, Py_ssize_t capacity):
    """The slots of ``spamnb.bayes.vocabulary.hash_index``'s index of
    ``hashes`` (numbered in their order, linear probing from a hash's low
    bits, as ``_score.insert`` places them), made without its keys: each slot
    the token number there, -1 where the index's key is 0 (an empty slot, or
    one a hash of 0 took: its key read as empty, as there).  A key is
    ``hashes[slot]`` (:func:`index_piece`), so the index costs 4 bytes a slot
    here, not 12.  Returns ``(Block of int32, n placed)``: fewer than
    ``len(hashes)`` when a hash (not 0) comes twice."""
    cdef Py_ssize_t n = hashes.shape[0], j, placed = 0
    cdef uint64_t mask = <uint64_t>capacity - 1, slot, h
    cdef int32_t t
    cdef int32_t *slots
    if capacity <= 0 or capacity & (capacity - 1) or 2 * n > capacity or n > 2147483647:
        raise ValueError(f"an index of {n} hashes in {capacity} slots")
    slots = <int32_t *>_map(capacity * sizeof(int32_t))
    if slots == NULL:
        raise MemoryError()
    with nogil:
        memset(slots, 0xff, capacity * sizeof(int32_t))
        for j in range(n):
            h = hashes[j]
            slot = h & mask
            while True:
                t = slots[slot]
                if t < 0 or hashes[t] == 0:   # the key 0: the slot is free
                    slots[slot] = <int32_t>j
                    placed += 1
                    break
                if hashes[t] == h:             # a hash twice: left out
                    break
                slot = (slot + 1) & mask
    return _block(slots, capacity * sizeof(int32_t), capacity * sizeof(int32_t)), placed


def index_piece(const int32_t[::1] slots, const uint64_t[::1] hashes, Py_ssize_t start,
                uint64_t[::1] keys, int32_t[::1] values):
    """Slots ``start ..`` of :func:`index_slots`'s index as ``hash_index``
    makes them: their keys (``hashes[slot]``, 0 where none) into ``keys`` and
    their values (the token number, 0 where none) into ``values``, as many as
    each holds (either may be empty)."""
    cdef Py_ssize_t i, m = max(keys.shape[0], values.shape[0])
    cdef int32_t t
    if start < 0 or start + m > slots.shape[0]:
        raise ValueError("a piece past the index's slots")
    with nogil:
        for i in range(keys.shape[0]):
            t = slots[start + i]
            keys[i] = hashes[t] if t >= 0 else 0
        for i in range(values.shape[0]):
            t = slots[start + i]
            values[i] = t if t >= 0 else 0
    return m
