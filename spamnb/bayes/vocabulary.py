"""The vocabulary: token -> feature index, growing while training.

Tokens are identified by their stable 64-bit hash (``spamnb.mail.tokenizer.hash_token``);
the index is a compiled open-addressing table (``spamnb.bayes.token_kernels``), so looking
up a message's tokens is one C loop, with no Python object per token.  The
token strings are kept too (for ``spamnb info`` and a verdict's evidence), as
one UTF-8 string table that the token stream appends a new token's bytes to
(``TokenStream.write_tokens``): no Python string per token while training.

Nothing here imports numpy: a vocabulary can sit on the buffers of a model file
(``Vocabulary.from_buffers``) and is copied into growable arrays only when it
learns something new.

Collisions: two distinct tokens share a 64-bit hash with probability about
n^2 / 2^65, i.e. 3e-8 for a vocabulary of a million tokens; they would then
share one feature.
"""

from array import array

from spamnb.bayes import checks

from spamnb.bayes import token_kernels

__all__ = ["Vocabulary", "hash_index", "index_capacity", "index_pieces"]

_MIN_CAPACITY = 1024


def _zeros(typecode, n):
    out = array(typecode)
    out.frombytes(bytes(n * out.itemsize))
    return out


def _view(buffer, typecode):
    """A memoryview of ``buffer`` with items of ``typecode``."""
    view = memoryview(buffer)
    return view if view.format == typecode else view.cast("B").cast(typecode)


def index_capacity(n_features):
    """The capacity of :func:`hash_index`'s index of ``n_features`` tokens: the
    smallest power of two (1024 at least) that leaves it at most half full."""
    capacity = _MIN_CAPACITY
    while 2 * n_features > capacity:
        capacity *= 2
    return capacity


def hash_index(hashes):
    """``(keys, values)``: a hash index of ``hashes`` (distinct, uint64), numbered
    in their order, in the smallest capacity that leaves it at most half full
    (:func:`index_capacity`): the index of a model file (a :class:`Vocabulary`
    made by :meth:`~Vocabulary.from_table`, or written without one:
    ``spamnb.persistence.saving.write_counts``)."""
    n = len(hashes)
    capacity = index_capacity(n)
    keys, values = _zeros("Q", capacity), _zeros("i", capacity)
    hashes = _view(hashes, "Q")
    step = 1 << 16   # inserted a run at a time, in order (the same index): scratch of a run, not of the vocabulary
    out, new = _zeros("i", min(n, step)), _zeros("i", min(n, step))
    for start in range(0, n, step):
        part = hashes[start:start + step]
        if token_kernels.insert(keys, values, part, out, start, new) != len(part):
            raise ValueError("the vocabulary holds a token hash twice")
    return keys, values


def index_pieces(hashes, step=1 << 16):
    """``(keys, values)``: :func:`hash_index`'s two arrays of ``hashes``, byte
    for byte, as two iterators of pieces of ``step`` slots (``array('Q')``,
    ``array('i')``), made from the index's slots alone
    (:func:`spamnb.bayes.merging.index_slots`: a token number a slot), each
    key read from ``hashes`` as its piece is made: a saved model's index
    never held whole (4 bytes a slot, where the two arrays take 12: on
    Enron-Spam's vocabulary 8 MiB, not 24).  ``hashes`` is kept until
    ``keys`` ends; ``values`` can be read after it."""
    from spamnb.bayes import merging

    hashes = _view(hashes, "Q")
    capacity = index_capacity(len(hashes))
    slots, placed = merging.index_slots(hashes, capacity)
    if placed != len(hashes):
        raise ValueError("the vocabulary holds a token hash twice")
    slots = _view(slots, "i")

    def pieces(typecode, hashes):
        for start in range(0, capacity, step):
            out = _zeros(typecode, min(step, capacity - start))
            if typecode == "Q":
                merging.index_piece(slots, hashes, start, out, array("i"))
            else:
                merging.index_piece(slots, hashes, start, array("Q"), out)
            yield out

    return pieces("Q", hashes), pieces("i", array("Q"))


def _copy(typecode, buffer):
    out = array(typecode)
    out.frombytes(memoryview(buffer).cast("B"))
    return out


class Vocabulary:
    """Map token hashes to feature indices ``0 .. n_features - 1`` (in order of first sight).

    Attributes
    ----------
    n_features : int
    keys : buffer of uint64, shape (capacity,) -- the hash index (0 = empty)
    values : buffer of int32, shape (capacity,) -- feature index per slot
    """

    _fill = 0.5   # the hash index's largest share of used slots (a file's index: at most half full)

    def __init__(self, fill=0.5):
        if not 0.0 < fill <= 0.75:
            raise ValueError("a vocabulary's hash index is filled to at most 3/4")
        self._fill = fill
        self.keys = _zeros("Q", _MIN_CAPACITY)
        self.values = _zeros("i", _MIN_CAPACITY)
        self.n_features = 0
        self._blob = bytearray()          # token strings, UTF-8, back to back (a read-only buffer when mapped)
        self._offsets = array("Q", [0])   # (n_features + 1,): token i is _blob[_offsets[i]:_offsets[i + 1]]
        self._writable = True
        self._tail = None                 # (first, blob, offsets) of the tokens added in place (extend_in_place)

    # -- construction from a model file ---------------------------------------
    @classmethod
    def from_buffers(cls, keys, values, n_features, blob, offsets, checked=True):
        """A read-only vocabulary over existing buffers (e.g. slices of a model file read into memory).

        ``keys`` uint64 (capacity,), ``values`` int32 (capacity,), ``blob`` the
        UTF-8 token strings back to back, ``offsets`` uint64 (n_features + 1,).
        Raises ValueError when the buffers are inconsistent (they come from a
        file: nothing here may index out of bounds).  ``checked=False`` checks
        only their lengths and the index's capacity, reading none of them (a
        model file mapped: the scorer checks each entry it reads, and a token's
        string is sliced within the blob).
        """
        self = cls.__new__(cls)
        keys, values, offsets, blob = _view(keys, "Q"), _view(values, "i"), _view(offsets, "Q"), _view(blob, "B")
        if len(keys) != len(values):
            raise ValueError("hash index keys and values differ in length")
        if len(offsets) != n_features + 1:
            raise ValueError("token string offsets do not match the vocabulary size")
        if not checked:
            capacity = len(keys)
            if capacity == 0 or capacity & (capacity - 1) or not 0 <= n_features < capacity:
                raise ValueError("hash index capacity is not a power of two above the vocabulary size")
        else:
            token_kernels.check_index(keys, values, n_features)
            if not checks.check_offsets(offsets, len(blob)):
                raise ValueError("token string offsets are out of order or out of range")
            if not checks.check_utf8(blob):
                raise ValueError("token strings are not valid UTF-8")
        self.keys = keys
        self.values = values
        self.n_features = n_features
        self._blob = blob
        self._offsets = offsets
        self._writable = False
        self._tail = None
        return self

    @classmethod
    def from_table(cls, hashes, blob, offsets):
        """A writable vocabulary of ``hashes`` (distinct, uint64, in feature
        order) and their strings (``blob`` and the uint64 ``offsets``
        (len(hashes) + 1,), as :meth:`string_table` gives them): the one
        :meth:`add` of the same tokens in that order makes (the same hash
        index), with ``blob`` taken as it is when it is a ``bytearray`` (the
        caller gives it up: no copy of the strings made beside it)."""
        n = len(hashes)
        if len(offsets) != n + 1 or (n and int(offsets[n]) > len(blob)):
            raise ValueError("token string offsets do not match the vocabulary")
        self = cls()
        if n:
            self.keys, self.values = hash_index(hashes)
        self._blob = blob if isinstance(blob, bytearray) else bytearray(blob)
        self._offsets = _copy("Q", offsets)
        self.n_features = n
        return self

    def read_only_copy(self):
        """A read-only vocabulary over copies of this one's hash index and
        strings (a server's scoring-only model, ``spamnb.server.models``);
        holes included (``remove``), so it is not checked as a file's is."""
        blob, offsets = bytearray(self._blob), _copy("Q", self._offsets)
        if self._tail is not None:   # the strings added in place, after the file's (this one unchanged)
            _first, tail_blob, tail_offsets = self._tail
            offsets.extend(map(offsets[-1].__add__, tail_offsets[1:]))
            blob += tail_blob
        return type(self).from_buffers(bytearray(self.keys), bytearray(self.values), self.n_features, blob, offsets,
                                       checked=False)   # holes and all: only the lengths and the capacity checked

    def extend_in_place(self, keys, values):
        """Learn new tokens without copying the vocabulary: ``keys``/``values`` are
        writable buffers holding this vocabulary's hash index (the private
        memory a model file was read into), new tokens go into them while the
        index stays at most half full, and the new tokens' strings into a side
        table; so a learn costs in proportion to the message, not the model."""
        if self._writable or self._tail is not None:
            return
        keys, values = _view(keys, "Q"), _view(values, "i")
        if keys.readonly or values.readonly or len(keys) != len(self.keys) or len(values) != len(self.values):
            raise ValueError("extend_in_place takes writable buffers of the hash index's size")
        self.keys, self.values = keys, values
        self._tail = (self.n_features, bytearray(), array("Q", [0]))

    # -- queries --------------------------------------------------------------
    def __len__(self):
        return self.n_features

    @property
    def capacity(self):
        return len(self.keys)

    def lookup(self, hashes):
        """Feature index of each hash, -1 for unknown tokens: ``array('i')``, shape (len(hashes),)."""
        out = _zeros("i", len(hashes))
        if len(hashes):
            token_kernels.lookup(self.keys, self.values, hashes, out)
        return out

    def token(self, index):
        """The token string of feature ``index``."""
        index = int(index)
        if not 0 <= index < self.n_features:
            raise IndexError(f"feature index {index} out of range for {self.n_features} features")
        blob, offsets = self._blob, self._offsets
        if self._tail is not None and index >= self._tail[0]:
            index -= self._tail[0]
            blob, offsets = self._tail[1], self._tail[2]
        start, end = offsets[index], offsets[index + 1]
        return bytes(blob[start:end]).decode("utf-8", "surrogatepass")

    def strings_since(self, first):
        """``(lengths, text)``: the UTF-8 lengths (``array('I')``) and the strings,
        back to back, of features ``first ..``: what a learn added."""
        blob, offsets = self._blob, self._offsets
        if self._tail is not None:
            if first < self._tail[0]:
                self._make_writable()
            else:
                first -= self._tail[0]
                blob, offsets = self._tail[1], self._tail[2]
        ends = offsets[first:]
        return array("I", map(int.__sub__, ends[1:], ends)), bytes(blob[ends[0]:ends[-1]])

    def tokens(self):
        """All token strings, in feature order (a list: for inspection, not hot paths)."""
        return [self.token(i) for i in range(self.n_features)]

    # -- learning -------------------------------------------------------------
    def add(self, stream, scratch=None):
        """Index the tokens of a ``TokenStream`` (``hashes``, ``write_tokens``), adding new
        ones; returns ``array('i')`` per occurrence.

        ``scratch``: a list of two ``array('i')`` that calls share (grown here
        as needed): the result is then a memoryview of the first, valid until
        the next call, and no array is made per call (a corpus counted
        message by message)."""
        hashes = stream.hashes
        n = len(hashes)
        if scratch is not None and self._tail is None and n:
            if len(scratch[0]) < n:
                scratch[:] = [_zeros("i", 2 * n), _zeros("i", 2 * n)]
            return self._insert(stream, memoryview(scratch[0])[:n], scratch[1])
        out = _zeros("i", n)
        if n == 0:
            return out
        if self._tail is not None:   # in place, while the index has room for every unknown occurrence
            unknown = n - token_kernels.lookup(self.keys, self.values, hashes, out)
            if 2 * (self.n_features + unknown) <= len(self.keys):
                new_positions = _zeros("i", n)
                n_new = token_kernels.insert(self.keys, self.values, hashes, out, self.n_features, new_positions)
                if n_new:
                    stream.write_tokens(new_positions, n_new, self._tail[1], self._tail[2])
                    self.n_features += n_new
                return out
        return self._insert(stream, out, _zeros("i", n))

    def _insert(self, stream, out, new_positions):
        """:meth:`add` into the writable table: ``out`` receives each occurrence's
        index, ``new_positions`` (as long) the positions of the new tokens."""
        hashes = stream.hashes
        self._make_writable()
        self._reserve(self.n_features + len(hashes))
        n_new = token_kernels.insert(self.keys, self.values, hashes, out, self.n_features, new_positions)
        if n_new:
            stream.write_tokens(new_positions, n_new, self._blob, self._offsets)
            self.n_features += n_new
        return out

    def compact(self, keep):
        """Drop features: ``keep`` is a sequence of booleans, one per feature.

        Surviving features keep their relative order and are renumbered
        ``0 .. n_kept - 1``; the hash index is built anew, the smallest one
        for them, their hashes inserted in feature order, so it depends on
        the tokens kept only (a model forgotten in place and folded at once,
        ``spamnb.persistence.deltas``, is the one compacted at every forget).
        Returns the number kept.
        """
        if len(keep) != self.n_features:
            raise ValueError(f"keep has {len(keep)} entries for {self.n_features} features")
        keep = list(map(bool, keep))
        first_dropped = keep.index(False) if False in keep else self.n_features
        if not any(keep[first_dropped:]):
            return self._truncate(first_dropped)
        token = self.token
        strings = [token(i) for i, flag in enumerate(keep) if flag]
        next_index = len(strings)
        import numpy as np

        self.keys, self.values = hash_index(self.hashes()[np.asarray(keep, dtype=bool)])
        from itertools import accumulate   # here: a classify builds no vocabulary

        encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
        self.n_features = next_index
        self._blob = bytearray(b"".join(encoded))
        self._offsets = array("Q", [0])
        self._offsets.extend(accumulate(map(len, encoded)))
        self._writable = True
        self._tail = None
        return next_index

    def _truncate(self, n_kept):
        """Keep features ``0 .. n_kept - 1`` (the common case of forgetting the
        message learned last: its new tokens are the tail)."""
        if n_kept == self.n_features:
            return n_kept
        self._make_writable()
        self.keys, self.values = hash_index(self.hashes()[:n_kept])
        del self._blob[self._offsets[n_kept]:]
        del self._offsets[n_kept + 1:]
        self.n_features = n_kept
        return n_kept

    def remove(self, hashes, which):
        """Take the tokens ``hashes[j]`` where ``which[j]`` out of the hash index
        (their feature indices stay unused: holes, see ``spamnb.persistence.deltas``);
        returns how many were there."""
        if not self._writable and self._tail is None:
            self._make_writable()   # a file's index, not extended in place: removed from a copy
        from spamnb.bayes import _holes   # a forget's: one compiled module less for a cold classify to load

        return _holes.remove(self.keys, self.values, hashes, which)

    def _make_writable(self):
        if self._writable:
            return
        self.keys = _copy("Q", self.keys)
        self.values = _copy("i", self.values)
        offsets = _copy("Q", self._offsets)
        blob = bytearray(self._blob)
        if self._tail is not None:   # the strings added in place join the table
            _first, tail_blob, tail_offsets = self._tail
            offsets.extend(map(offsets[-1].__add__, tail_offsets[1:]))
            blob += tail_blob
            self._tail = None
        self._offsets, self._blob = offsets, blob
        self._writable = True

    def _reserve(self, n_features):
        capacity, fill = len(self.keys), self._fill
        if n_features <= fill * capacity:
            return
        while n_features > fill * capacity:
            capacity *= 2
        keys = _zeros("Q", capacity)
        values = _zeros("i", capacity)
        token_kernels.rehash(self.keys, self.values, keys, values)
        self.keys, self.values = keys, values

    # -- serialisation ----------------------------------------------------------
    def string_table(self, copy=True):
        """``(blob, offsets)``: all token strings UTF-8 encoded back to back, and
        the uint64 offsets (n_features + 1,) delimiting them.  ``copy`` False:
        ``blob`` is a read-only memoryview of the vocabulary's own table, not
        a copy (a model file written from it): the caller releases it
        (``blob.release()``) before the vocabulary learns again (a table with
        a view on it cannot grow: BufferError)."""
        if self._tail is not None:
            self._make_writable()
        if not copy:
            return memoryview(self._blob).toreadonly(), self._offsets
        return bytes(self._blob), self._offsets

    def release(self):
        """``(hashes, blob, offsets)``: :meth:`hashes` and the string table
        (the vocabulary's own ``bytearray`` and ``array('Q')``, not copies),
        the vocabulary left empty: the end of counting, where the hash index
        is dropped before anything else is made (its memory, and a copy of the
        strings, not held beside the counts made of them)."""
        hashes = self.hashes()
        if self._tail is not None or not self._writable:
            self._make_writable()
        blob, offsets = self._blob, self._offsets
        self.__init__(self._fill)
        return hashes, blob, offsets

    def hashes(self):
        """The token hashes in feature order: a uint64 numpy array (n_features,)."""
        import numpy as np

        keys = np.frombuffer(self.keys, dtype=np.uint64)
        values = np.frombuffer(self.values, dtype=np.int32)
        used = keys != 0
        out = np.zeros(self.n_features, dtype=np.uint64)
        out[values[used]] = keys[used]
        return out
