"""The running total of a counts merge (``spamnb.model.counting._Sum``), compiled.

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
  with its value.  :meth:`fold_entries` lists them token-major, cell-minor:
  the ascending ``token * cells + cell`` keys of ``spamnb.model.counting.Counts``.

The arrays grow with ``realloc`` (by half), so growing does not copy what
the allocator can extend in place; the result is handed over, not copied:
each ``take_*`` method gives its array as a :class:`Block` (a buffer owning
the memory) and forgets it.  Nothing here imports numpy.
"""

cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memmove, memset

cdef extern from *:
    """
    #define _spamnb_merge_prefetch(p) __builtin_prefetch((const void *)(p))
    """
    void _prefetch "_spamnb_merge_prefetch"(const void *p) noexcept nogil

# Lookahead of the loops' prefetches (the total's arrays are far larger than
# the caches: each token's entries are random accesses): a slot is fetched
# _AHEAD tokens early, the entry it names _AHEAD // 2 tokens early.
DEF _AHEAD = 16


cdef char *_FORMAT = "B"


@cython.auto_pickle(False)
cdef class Block:
    """A block of memory from ``malloc`` handed over as a writable byte buffer
    (``numpy.frombuffer`` views it without a copy); freed with the last view."""

    cdef char *data
    cdef Py_ssize_t size
    cdef Py_ssize_t exports
    cdef Py_ssize_t shape[1]

    def __dealloc__(self):
        free(self.data)

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
        self.exports += 1

    def __releasebuffer__(self, Py_buffer *view):
        self.exports -= 1


cdef Block _block(void *data, Py_ssize_t size):
    """A Block owning ``data`` (``size`` bytes; shrunk to that size)."""
    cdef Block block = Block.__new__(Block)
    cdef void *shrunk
    if data != NULL and size > 0:
        shrunk = realloc(data, size)
        if shrunk != NULL:
            data = shrunk
    elif data != NULL:
        free(data)
        data = NULL
    block.data = <char *>data
    block.size = size
    return block


cdef int _grow(void **p, Py_ssize_t *capacity, Py_ssize_t needed, Py_ssize_t itemsize) except -1:
    """Make ``*p`` hold at least ``needed`` items (grown by half at least)."""
    cdef Py_ssize_t new_capacity
    cdef void *q
    if needed <= capacity[0]:
        return 0
    new_capacity = max(needed, capacity[0] + capacity[0] // 2, 1024)
    q = realloc(p[0], new_capacity * itemsize)
    if q == NULL:
        raise MemoryError()
    p[0] = q
    capacity[0] = new_capacity
    return 0


@cython.auto_pickle(False)
cdef class MergeTable:
    """Counts added part by part (see the module doc).

    Parameters
    ----------
    cells : int
        Fold cells per token (``2 * n_folds``; 0: the parts have no fold rows).
    """

    cdef readonly Py_ssize_t n            # tokens
    cdef readonly Py_ssize_t n_entries    # fold entries
    cdef readonly int cells
    cdef Py_ssize_t cap                   # token capacity of hashes, days, heads
    cdef Py_ssize_t row_cap               # token capacity of each model row
    cdef uint64_t *hashes
    cdef int32_t *days
    cdef double *rows                     # two rows, the second at rows + row_cap
    cdef int32_t *slots                   # token numbers, -1 empty
    cdef uint64_t mask
    cdef Py_ssize_t filled
    cdef uint8_t *blob
    cdef Py_ssize_t blob_size, blob_cap
    cdef uint64_t *offsets                # n + 1
    cdef Py_ssize_t offsets_cap
    cdef int32_t *heads                   # first fold entry of each token, -1 none
    cdef int32_t *next_entry
    cdef int32_t *entry_cell
    cdef double *entry_value
    cdef Py_ssize_t entries_cap

    def __cinit__(self, int cells=0):
        if cells < 0:
            raise ValueError("cells must be >= 0")
        self.cells = cells
        self.slots = <int32_t *>malloc(1024 * sizeof(int32_t))
        self.offsets = <uint64_t *>malloc(1024 * sizeof(uint64_t))
        if self.slots == NULL or self.offsets == NULL:
            raise MemoryError()
        memset(self.slots, 0xff, 1024 * sizeof(int32_t))
        self.mask = 1023
        self.offsets[0] = 0
        self.offsets_cap = 1024

    def __dealloc__(self):
        free(self.hashes)
        free(self.days)
        free(self.rows)
        free(self.slots)
        free(self.blob)
        free(self.offsets)
        free(self.heads)
        free(self.next_entry)
        free(self.entry_cell)
        free(self.entry_value)

    cdef int _reserve_tokens(self, Py_ssize_t needed) except -1:
        cdef Py_ssize_t cap = self.cap, row_cap = self.row_cap, new_cap
        cdef double *rows
        if needed > cap:
            _grow(<void **>&self.hashes, &cap, needed, sizeof(uint64_t))
            new_cap = self.cap
            _grow(<void **>&self.days, &new_cap, needed, sizeof(int32_t))
            if self.cells:
                new_cap = self.cap
                _grow(<void **>&self.heads, &new_cap, needed, sizeof(int32_t))
            self.cap = cap
        if needed > row_cap:
            new_cap = max(needed, row_cap + row_cap // 2, 1024)
            rows = <double *>realloc(self.rows, 2 * new_cap * sizeof(double))
            if rows == NULL:
                raise MemoryError()
            if self.n:   # the second row moves up to its new place
                memmove(rows + new_cap, rows + row_cap, self.n * sizeof(double))
            self.rows, self.row_cap = rows, new_cap
        _grow(<void **>&self.offsets, &self.offsets_cap, needed + 1, sizeof(uint64_t))
        return 0

    cdef int _rehash(self) except -1:
        cdef Py_ssize_t capacity = 2 * (self.mask + 1), i
        cdef uint64_t mask = capacity - 1, slot
        cdef int32_t *slots = <int32_t *>malloc(capacity * sizeof(int32_t))
        cdef int32_t t
        if slots == NULL:
            raise MemoryError()
        memset(slots, 0xff, capacity * sizeof(int32_t))
        with nogil:
            for i in range(self.mask + 1):
                t = self.slots[i]
                if t >= 0:
                    slot = self.hashes[t] & mask
                    while slots[slot] >= 0:
                        slot = (slot + 1) & mask
                    slots[slot] = t
        free(self.slots)
        self.slots, self.mask = slots, mask
        return 0

    def add(self, const uint64_t[::1] hashes, const uint64_t[::1] offsets, const uint8_t[::1] strings,
            const double[::1] ham, const double[::1] spam, const int32_t[::1] last_seen,
            const int64_t[::1] fold_keys=None, const double[::1] fold_values=None):
        """Add one part: its tokens' ``hashes`` (distinct but for 0s), their
        strings ``strings[offsets[j]:offsets[j + 1]]``, its model rows
        ``ham`` and ``spam``, ``last_seen`` days and (``cells`` > 0) its fold
        entries (keys ascending, ``token * cells + cell``).  Raises
        ValueError, adding nothing, when the arrays do not fit together."""
        cdef Py_ssize_t m = hashes.shape[0], j, e, k, n_new = 0, new_bytes = 0, n_keys = 0
        cdef uint64_t h, slot, mask
        cdef int32_t t, cell, at, prev
        cdef int32_t *index
        cdef int64_t key, token
        cdef double *ham_row
        cdef double *spam_row
        cdef uint64_t start, end
        if offsets.shape[0] != m + 1 or ham.shape[0] != m or spam.shape[0] != m or last_seen.shape[0] != m:
            raise ValueError("a part's arrays differ in length")
        if offsets[0] != 0 or offsets[m] != <uint64_t>strings.shape[0]:
            raise ValueError("a part's string offsets do not span its strings")
        for j in range(m):
            if offsets[j] > offsets[j + 1]:
                raise ValueError("a part's string offsets are out of order")
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
        index = <int32_t *>malloc((m if m else 1) * sizeof(int32_t))
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
                h = hashes[j]
                t = -1
                if h != 0:
                    mask = self.mask
                    slot = h & mask
                    while self.slots[slot] >= 0:
                        if self.hashes[self.slots[slot]] == h:
                            t = self.slots[slot]
                            break
                        slot = (slot + 1) & mask
                if t < 0:
                    t = <int32_t>self.n
                    self.n += 1
                    self.hashes[t] = h
                    self.days[t] = 0
                    self.rows[t] = 0.0
                    self.rows[self.row_cap + t] = 0.0
                    if self.cells:
                        self.heads[t] = -1
                    start, end = offsets[j], offsets[j + 1]
                    if end > start:
                        _grow(<void **>&self.blob, &self.blob_cap, self.blob_size + <Py_ssize_t>(end - start), 1)
                        memcpy(self.blob + self.blob_size, &strings[start], end - start)
                        self.blob_size += end - start
                    self.offsets[t + 1] = self.blob_size
                    if h != 0:
                        self.slots[slot] = t
                        self.filled += 1
                        if 2 * self.filled > <Py_ssize_t>self.mask + 1:
                            self._rehash()
                index[j] = t
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
            if n_keys:
                self._grow_entries(self.n_entries + n_keys)
                for e in range(n_keys):
                    if e + _AHEAD < n_keys:
                        _prefetch(&self.heads[index[fold_keys[e + _AHEAD] // self.cells]])
                    if e + _AHEAD // 2 < n_keys:
                        at = self.heads[index[fold_keys[e + _AHEAD // 2] // self.cells]]
                        if at >= 0:
                            _prefetch(&self.entry_cell[at])
                            _prefetch(&self.entry_value[at])
                            _prefetch(&self.next_entry[at])
                    key = fold_keys[e]
                    token = key // self.cells
                    cell = <int32_t>(key - token * self.cells)
                    t = index[token]
                    prev = -1
                    at = self.heads[t]
                    while at >= 0 and self.entry_cell[at] < cell:
                        prev = at
                        at = self.next_entry[at]
                    if at >= 0 and self.entry_cell[at] == cell:
                        self.entry_value[at] += fold_values[e]
                        continue
                    k = self.n_entries
                    self.n_entries += 1
                    self.entry_cell[k] = cell
                    self.entry_value[k] = fold_values[e]
                    self.next_entry[k] = at
                    if prev < 0:
                        self.heads[t] = <int32_t>k
                    else:
                        self.next_entry[prev] = <int32_t>k
        finally:
            free(index)

    cdef int _grow_entries(self, Py_ssize_t needed) except -1:
        cdef Py_ssize_t a, b, c
        if needed <= self.entries_cap:
            return 0
        a = b = c = self.entries_cap   # the three arrays share one capacity
        _grow(<void **>&self.next_entry, &a, needed, sizeof(int32_t))
        _grow(<void **>&self.entry_cell, &b, needed, sizeof(int32_t))
        _grow(<void **>&self.entry_value, &c, needed, sizeof(double))
        self.entries_cap = min(a, b, c)
        return 0

    def take_tokens(self):
        """``(hashes, offsets, strings)``: Blocks of the tokens' uint64 hashes
        (in token order), uint64 string offsets (n + 1) and UTF-8 strings."""
        cdef Block hashes = _block(self.hashes, self.n * sizeof(uint64_t))
        self.hashes = NULL
        cdef Block offsets = _block(self.offsets, (self.n + 1) * sizeof(uint64_t))
        self.offsets = NULL
        cdef Block blob = _block(self.blob, self.blob_size)
        self.blob = NULL
        free(self.slots)
        self.slots = NULL
        return hashes, offsets, blob

    def take_rows(self):
        """``(rows, days)``: Blocks of the two model rows (float64, ``(2, n)``
        row-major) and the int32 days."""
        if self.rows != NULL and self.n:
            memmove(self.rows + self.n, self.rows + self.row_cap, self.n * sizeof(double))
        cdef Block rows = _block(self.rows, 2 * self.n * sizeof(double))
        self.rows = NULL
        cdef Block days = _block(self.days, self.n * sizeof(int32_t))
        self.days = NULL
        return rows, days

    def take_fold_entries(self):
        """``(keys, values)``: Blocks of the fold entries' int64 keys
        (``token * cells + cell``, ascending) and float64 values."""
        cdef Py_ssize_t count = self.n_entries, i = 0, t
        cdef int32_t at
        cdef int64_t *keys = <int64_t *>malloc((count if count else 1) * sizeof(int64_t))
        cdef double *values = <double *>malloc((count if count else 1) * sizeof(double))
        if keys == NULL or values == NULL:
            free(keys)
            free(values)
            raise MemoryError()
        if count:
            with nogil:
                for t in range(self.n):
                    at = self.heads[t]
                    while at >= 0:
                        keys[i] = <int64_t>t * self.cells + self.entry_cell[at]
                        values[i] = self.entry_value[at]
                        i += 1
                        at = self.next_entry[at]
        free(self.heads)
        free(self.next_entry)
        free(self.entry_cell)
        free(self.entry_value)
        self.heads = self.next_entry = self.entry_cell = NULL
        self.entry_value = NULL
        self.entries_cap = 0
        return _block(keys, count * sizeof(int64_t)), _block(values, count * sizeof(double))
