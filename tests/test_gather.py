"""``token_kernels.gather``: a message's entries of a model file's hash index
and log-counts read with ``pread``, the log-counts of nearby features in one
read (``_score._SPAN``): the same entries, and the same errors in the same
order, as reading each entry alone."""

import math
import os
from array import array

import pytest

from spamnb.bayes import token_kernels

CAPACITY = 64
N_FEATURES = 3000


def _model_file(path, features, logs):
    """A file of ``keys`` (uint64, CAPACITY slots), ``values`` (int32) and
    ``log_count`` (float64, 2 x N_FEATURES, class-major); ``features``:
    {hash: feature index}.  Returns the offsets."""
    keys, values = array("Q", bytes(8 * CAPACITY)), array("i", [-1] * CAPACITY)
    for h, feature in features.items():
        slot = h & (CAPACITY - 1)
        while keys[slot]:
            slot = (slot + 1) & (CAPACITY - 1)
        keys[slot], values[slot] = h, feature
    data = keys.tobytes() + values.tobytes() + array("d", logs).tobytes()
    path.write_bytes(data)
    return 0, 8 * CAPACITY, 12 * CAPACITY


def _gather(path, offsets, hashes, size=None):
    if size is not None:
        os.truncate(path, size)
    fd = os.open(path, os.O_RDONLY)
    try:
        keys_at, values_at, logs_at = offsets
        return token_kernels.gather(fd, keys_at, CAPACITY, values_at, logs_at, N_FEATURES, 2, array("Q", hashes))
    finally:
        os.close(fd)


# features near each other (one read) and far apart (reads of their own): 0..4, 600, 2999
FEATURES = {101: 4, 7: 0, 65: 2, 300: 600, 12: 2999, 44: 1, 90: 3}


def test_gather_reads_each_entry_as_alone(tmp_path):
    logs = [-(i % 97) - 0.5 - c for c in range(2) for i in range(N_FEATURES)]
    path = tmp_path / "m"
    offsets = _model_file(path, FEATURES, logs)
    found, index, got = _gather(path, offsets, [90, 12, 101, 5555, 7, 65, 90, 300, 44, 0])
    assert list(index) == [0, 1, 2, 3, 4, 600, 2999]
    assert list(found) == [7, 44, 65, 90, 101, 300, 12]
    m = len(index)
    assert list(got) == [logs[c * N_FEATURES + i] for c in range(2) for i in index]
    assert m == 7 and len(got) == 2 * m


def test_gather_errors_in_the_order_of_the_entries(tmp_path):
    logs = [-1.0] * (2 * N_FEATURES)
    path = tmp_path / "m"
    offsets = _model_file(path, FEATURES, logs)
    end = offsets[2] + 8 * 2 * N_FEATURES
    # the spam class's last entry cut off: the read of that entry falls short
    with pytest.raises(ValueError, match="could not be read"):
        _gather(path, offsets, list(FEATURES), size=end - 4)
    # a ham entry not finite before it: found first, as when each entry was read alone
    logs[600] = math.inf
    offsets = _model_file(path, FEATURES, logs)
    with pytest.raises(ValueError, match="damaged"):
        _gather(path, offsets, list(FEATURES), size=end - 4)
    # a spam entry not finite: damaged, whole or cut after it
    logs[600], logs[N_FEATURES + 2999] = -1.0, math.nan
    offsets = _model_file(path, FEATURES, logs)
    with pytest.raises(ValueError, match="damaged"):
        _gather(path, offsets, list(FEATURES))
    logs[N_FEATURES + 2999] = -1.0
    logs[N_FEATURES + 4] = math.nan
    offsets = _model_file(path, FEATURES, logs)
    with pytest.raises(ValueError, match="damaged"):
        _gather(path, offsets, list(FEATURES), size=end - 4)
