"""Checked entry points to the compiled kernels of one message at a time: the
vocabulary's hash index (``_index.pxi``, in ``spamnb.bayes._score``), counting a message's
tokens (``spamnb.bayes._count``) and scoring one message
(``spamnb.bayes._score``).  Every other module calls them through here.

The compiled functions run with bounds checks off.  What they do not check
in their own pass is checked here, before the call, in constant time (a
table's capacity, the lengths of the output buffers, a transform's code, the
length to scale to), so no Python loop over the tokens is added to a hot
path; what depends on the data (a feature index within the counts, a count
that would go negative, a hash index entry of a damaged file) the kernels
check as they go and raise ValueError, changing nothing.

- ``lookup``, ``insert``, ``rehash``, ``rehash_remap``, ``check_index``: the
  hash index (``keys`` uint64 with 0 for an empty slot, ``values`` int32
  feature indices, both of a power-of-two capacity);
- ``CSRBuilder``, ``add_counts``, ``add_counts_twice``, ``add_counts_split``,
  ``sort_int32``: a message's distinct features and their counts, transformed
  by ``COUNTS_RAW``, ``COUNTS_BINARY`` or ``COUNTS_LOG``, scaled to a length;
- ``VariantCounter``: the counting pass of several tokenizers' variants by
  partitions (``train -j 1``), one compiled call a message for all of them,
  over one hash index (it checks its own arguments);
- ``Scorer`` (its buffers checked when it is made) and ``gather`` (a
  message's entries read from a model file); ``journal_rows`` (a journal's
  learns put through for one message's tokens alone); ``first_places`` (a
  learned message's new tokens' first occurrences);
- ``mixture_add``, ``mixture_settle``: a learned message's held-out scores
  counted into a pair-weight mixture's state, and the weight and scale it
  then gives (``spamnb.bayes._mixture``, loaded by the first call: a process
  that counts many).

Nothing here imports numpy (``spamnb classify``'s cold path), and only
``_score`` is loaded with this module (the hash index, ``_index.pxi``, is
built into it): ``_count`` (counting for training and learning) is loaded
by its first use, so a cold ``spamnb classify`` of a model file
(``gather``, the message's entries indexed, ``Scorer``) loads one compiled
module of this package.
"""

from spamnb.bayes import _score

_count = None   # spamnb.bayes._count, once _count_module loaded it


def _count_module():
    global _count
    if _count is None:
        from spamnb.bayes import _count as module
        _count = module
    return _count


def __getattr__(name):
    """``CSRBuilder``, ``VariantCounter``: ``_count``'s, loaded when first asked for (PEP 562)."""
    if name in ("CSRBuilder", "VariantCounter"):
        return getattr(_count_module(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["add_counts_tree", "COUNTS_RAW", "COUNTS_BINARY", "COUNTS_LOG", "TRANSFORMS", "lookup", "insert", "rehash", "rehash_remap",
           "check_index", "CSRBuilder", "VariantCounter", "add_counts", "add_counts_twice", "add_counts_rows", "add_counts_split",
           "held_out_log_odds",
           "sort_int32", "Scorer", "gather", "journal_rows", "learn_sums", "first_places", "mixture_add",
           "mixture_settle", "exp", "log", "isfinite", "INF"]

COUNTS_RAW = _score.COUNTS_RAW          # x_i = count of token i in the message
COUNTS_BINARY = _score.COUNTS_BINARY    # x_i = 1 if token i occurs
COUNTS_LOG = _score.COUNTS_LOG          # x_i = log(1 + count)
TRANSFORMS = (COUNTS_RAW, COUNTS_BINARY, COUNTS_LOG)

# These check every argument themselves (the transform's code when made, each
# row's indices as they are counted; the Scorer its buffers' shapes and every
# hash index entry and log-count it reads).
Scorer = _score.Scorer
# math's exp, log, isfinite and inf, the same calls, results and errors, compiled into _score: the modules of a
# cold classify's path take them from here, and it loads no math module (a shared object: about 0.3 ms)
exp, log, isfinite, INF = _score.math_exp, _score.math_log, _score.math_isfinite, _score.INF
check_index = _score.check_index     # a hash index read from a file: checked whole


def _check_table(keys, values):
    capacity = len(keys)
    if capacity == 0 or capacity & (capacity - 1) or len(values) != capacity:
        raise ValueError("a hash index's keys and values must be of one power-of-two capacity")


def _check_out(n, *outs):
    if any(len(out) < n for out in outs):
        raise ValueError(f"an output buffer is shorter than the {n} hashes")


def _check_length(length):
    if not 0.0 <= length < INF:
        raise ValueError(f"the length to scale to must be a finite number >= 0, got {length!r}")


def lookup(keys, values, hashes, out):
    """Feature index of each hash (-1 when unknown) into ``out[j]`` for ``hashes[j]``;
    returns the number of known hashes."""
    _check_table(keys, values)
    _check_out(len(hashes), out)
    return _score.lookup(keys, values, hashes, out)


def insert(keys, values, hashes, out, next_index, new_positions):
    """Look up each hash, giving unknown ones the next feature indices from
    ``next_index``: ``out[j]`` the index of ``hashes[j]``, ``new_positions``
    the positions of the first occurrences of new hashes.  The caller keeps the
    table at most half full (a table without a free slot gives wrong indices,
    never a write out of bounds).  Returns the number of new hashes."""
    _check_table(keys, values)
    _check_out(len(hashes), out, new_positions)
    if not 0 <= next_index <= 2**31 - 1 - len(hashes):
        raise ValueError(f"feature index {next_index} out of range")
    return _score.insert(keys, values, hashes, out, next_index, new_positions)


def rehash(old_keys, old_values, keys, values):
    """Insert every entry of the old table into the new one (empty, no smaller)."""
    _check_table(old_keys, old_values)
    _check_table(keys, values)
    if len(keys) < len(old_keys):
        raise ValueError("a hash index is rehashed into one at least as large")
    _score.rehash(old_keys, old_values, keys, values)


def rehash_remap(old_keys, old_values, remap, keys, values):
    """``rehash``, renumbering: old feature ``i`` becomes ``remap[i]`` (dropped when
    negative); ``len(remap)`` is the old vocabulary's size (an entry beyond it:
    ValueError).  The new table must have room for the features kept."""
    _check_table(old_keys, old_values)
    _check_table(keys, values)
    _score.rehash_remap(old_keys, old_values, remap, keys, values)


def add_counts(idx, target, counts, sign=1.0, length=0.0):
    """Add (``sign`` -1: subtract) one message's transformed token counts to one
    class's counts: ``_count.add_counts`` (its docstring says what it checks)."""
    _check_length(length)
    return _count_module().add_counts(idx, target, counts, sign, length)


def add_counts_twice(idx, first, second, counts, length=0.0):
    """``add_counts`` into ``first`` and ``second`` at once, the message counted once."""
    _check_length(length)
    return _count_module().add_counts_twice(idx, first, second, counts, length)


def add_counts_rows(idx, bounds, rows_of, ham, spam, counts, length=0.0):
    """``add_counts`` of many messages into two rows, one compiled call: message
    ``j``'s indices ``idx[bounds[j]:bounds[j + 1]]`` (int64 bounds) into
    ``ham`` or ``spam`` by ``rows_of[j]`` (uint8): ``_count.add_counts_rows``."""
    _check_length(length)
    return _count_module().add_counts_rows(idx, bounds, rows_of, ham, spam, counts, length)


def held_out_log_odds(idx, bounds, local_of, log_count, log_norm, log_prior, counts, length=0.0):
    """The log-odds of each message ``idx[bounds[j]:bounds[j + 1]]`` (feature
    indices, int32; int64 bounds) under a two-class model of the features
    ``local_of`` maps them to (-1: unknown): ``log_count`` its flat ``(2, m)``
    logs, ``log_norm`` and ``log_prior`` two floats each; ``Scorer.log_odds_many``
    of their hashes, bit for bit, without a hash index: ``_count.held_out_log_odds``."""
    _check_length(length)
    return _count_module().held_out_log_odds(idx, bounds, local_of, log_count, float(log_norm[0]),
                                             float(log_norm[1]), float(log_prior[0]), float(log_prior[1]),
                                             counts, length)


def add_counts_tree(idx, bounds, rows_of, ends, fan_in, ham, spam, counts, length=0.0, local=None):
    """``add_counts_rows`` a partition at a time (partition ``p``: messages
    up to ``ends[p]``, int64), the partitions' sums added in the tree of
    ``TreeReduce(fan_in)``, written to ``ham`` and ``spam`` (``local``: each
    index's column, int32, or None): ``_count.add_counts_tree``."""
    _check_length(length)
    return _count_module().add_counts_tree(idx, bounds, rows_of, ends, fan_in, ham, spam, counts, length, local)


def add_counts_split(idx, base, tail, counts, sign, length, log_base, log_tail, alpha):
    """``add_counts`` over one class's counts held in two buffers, keeping their
    logs: ``_count.add_counts_split``."""
    _check_length(length)
    return _count_module().add_counts_split(idx, base, tail, counts, sign, length, log_base, log_tail, alpha)


def sort_int32(values):
    """Sort ``values`` (int32) in place with the counting kernel's sort (for tests)."""
    _count_module().sort_int32(values)


def gather(fd, keys_at, capacity, values_at, logs_at, n_features, n_classes, hashes):
    """The entries of an open model file's hash index and log-counts that the
    token ``hashes`` of one message need, read with ``pread``: ``(found,
    index, logs)`` (``_score.gather`` says what each is and what it checks)."""
    if min(keys_at, values_at, logs_at) < 0:
        raise ValueError("bad hash index layout")
    return _score.gather(fd, keys_at, capacity, values_at, logs_at, n_features, n_classes, hashes)


def journal_rows(fd, counts_at, n_base, hashes, bounds, classes, wanted, index, counts, length, alpha, totals,
                 logs, first, file_logs=None, sums=None, places=None, source=None):
    """A journal's learns put through for one message's distinct tokens
    ``wanted`` alone (``spamnb.persistence.journal_view``): the class
    ``totals`` after them, and, written, ``logs`` (log(count + alpha) of
    each count a learn changed, NaN elsewhere, or with ``file_logs`` the
    model file's log of each of the first tokens, those the file holds;
    class-major) and ``first`` (each token's first position in the
    journal's ``hashes``, -1: none); ``sums``: each learn's sum and scale
    as its record keeps them (:func:`learn_sums`; NaN: counted here);
    ``places``: where each learn's hashes start in ``hashes`` (the journal's
    bytes, read in place), else they are one after the other there, or with
    ``source`` (the journal's file and a buffer) where they start in the file;
    ``_score.journal_rows`` says what each is and what it checks."""
    n_learns, m = len(classes), len(wanted)
    if len(bounds) != n_learns + 1 or len(index) != m or len(logs) != 2 * m or len(first) != m or len(totals) != 2:
        raise ValueError("journal_rows: the buffers' lengths do not match")
    if counts not in TRANSFORMS or counts_at < 0 or n_base < 0:
        raise ValueError("journal_rows: bad transform or layout")
    return _score.journal_rows(fd, counts_at, n_base, hashes, bounds, classes, wanted, index, counts, float(length),
                               float(alpha), float(totals[0]), float(totals[1]), logs, first, file_logs, sums, places,
                               source)


def first_places(hashes, new):
    """The positions in ``hashes`` (uint64, a message's occurrences) of the
    tokens of ``new`` (a set of ints), each at its first occurrence, in order
    (``array('i')``), in one pass over the occurrences; ValueError for a token
    of ``new`` not among them (``_score.first_places``)."""
    return _score.first_places(hashes, new)


def learn_sums(hashes, counts, length):
    """``(sum, scale)`` of a learn of the token ``hashes`` (uint64, each
    occurrence): what it adds to its class total and the factor its values
    were scaled by, as :func:`journal_rows` counts a learn (``_score.learn_sums``)."""
    if counts not in TRANSFORMS:
        raise ValueError("learn_sums: bad transform")
    return _score.learn_sums(hashes, counts, float(length))


def mixture_add(counts, losses, spread, weights, words, pairs, spam, weight, low, bin_width, n_bins, min_class,
                max_count):
    """``spamnb.estimator.variants.PairMixture.add``'s counting (its arrays changed in
    place, their shapes checked by the kernel); True when the counts were halved."""
    global _mixture_add, _mixture_settle
    if _mixture_add is None:   # a replay's or the online protocol's: not a cold classify's
        from spamnb.bayes import _mixture

        _mixture_add, _mixture_settle = _mixture.mixture_add, _mixture.mixture_settle
    if not (n_bins > 0 and bin_width > 0):
        raise ValueError("a pair-weight mixture needs bins of a positive width")
    return _mixture_add(counts, losses, spread, weights, words, pairs, spam, weight, low, bin_width, n_bins,
                        min_class, max_count)


def mixture_settle(losses, spread, log_prior, weights, eta, centre):
    """``spamnb.estimator.variants.PairMixture._settle``'s ``(weight, scale)`` of a
    mixture that has counted messages, bit for bit (the shapes checked by the kernel)."""
    if _mixture_add is None:
        from spamnb.bayes import _mixture

        return _mixture.mixture_settle(losses, spread, log_prior, weights, eta, centre)
    return _mixture_settle(losses, spread, log_prior, weights, eta, centre)


_mixture_add = None   # bayes._mixture.mixture_add, imported by mixture_add's first call
_mixture_settle = None
