"""Checked entry points to the compiled counts merge (``spamnb.bayes._merge``):
the running total of a counts merge (:class:`MergeTable`, used by
``spamnb.estimator.counting`` and ``spamnb.training.planning``), the tree of
two rows ``spamnb train -j N``'s parent adds partitions in (:class:`RowLevels`)
and the fold rows' non-zero entries
(:func:`fold_entries`).  Every other module calls them through here.

The kernels check their buffers' lengths against each other as they add; what
they take as plain numbers (a table's number of fold cells, a vocabulary's
width) is checked here, before the call.  Nothing here imports numpy.
"""

from __future__ import annotations

import operator

from spamnb.bayes import _merge

__all__ = ["MergeTable", "RowLevels", "first_sight", "fold_entries", "index_piece", "index_slots"]


def MergeTable(cells, rows=True):
    """An empty running total of a merge whose parts carry ``cells`` fold cells;
    ``rows`` False: of the parts' tokens alone (numbered, strings, days), their
    rows added by the caller at the numbers ``add(..., index_out=)`` gives."""
    cells = operator.index(cells)
    if cells < 0:
        raise ValueError(f"a merge's fold cells must be a count, not {cells!r}")
    return _merge.MergeTable(cells, bool(rows))


def RowLevels(fan_in):
    """An empty tree of two rows summed in groups of ``fan_in`` items, level by
    level (``spamnb.estimator.counting.RowTree``'s sums, compiled)."""
    fan_in = operator.index(fan_in)
    if fan_in < 2:
        raise ValueError(f"a tree's fan-in must be at least 2, not {fan_in!r}")
    return _merge.RowLevels(fan_in)


def first_sight(indices, n):
    """The distinct values of the int32 ``indices`` (each below ``n``) in the
    order of their first occurrence (a buffer of int32)."""
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"a vocabulary's width must be a count, not {n!r}")
    return _merge.first_sight(indices, n)


def fold_entries(rows, n):
    """The non-zero entries of ``rows`` (fold rows of ``n`` tokens each) as the
    ascending ``token * cells + cell`` keys and their values."""
    if not isinstance(rows, list):
        raise TypeError("fold rows are a list of buffers")
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"a vocabulary's width must be a count, not {n!r}")
    return _merge.fold_entries(rows, n)


def index_slots(hashes, capacity):
    """The slots of the hash index of the uint64 ``hashes`` in ``capacity``
    slots (a power of two, at least twice their number), a token number
    each, -1 where the index's key is 0, and how many were placed
    (``spamnb.bayes.vocabulary.index_pieces``)."""
    capacity = operator.index(capacity)
    return _merge.index_slots(hashes, capacity)


def index_piece(slots, hashes, start, keys, values):
    """The keys and values of :func:`index_slots`'s slots ``start ..`` written
    into ``keys`` (uint64) and ``values`` (int32)."""
    return _merge.index_piece(slots, hashes, operator.index(start), keys, values)
