"""The model file: atomic, versioned, checksummed, memory-mapped."""

import json
import os
import posix
import shutil
import struct
from array import array

import pytest

from spamnb.persistence import store
from spamnb.persistence.store import FORMAT_VERSION, ModelError, read_model, write_model

from conftest import SAMPLE_CORPUS


def _write(path, **extra):
    header = {"format": "test", "n": 3, **extra}
    arrays = {"a": ("Q", array("Q", [1, 2, 3])), "b": ("d", array("d", [0.5, -1.0])), "c": ("B", b"hello"),
              "d": ("i", array("i", [-1, 7, 9]))}
    write_model(path, header, arrays)
    return header, arrays


def test_round_trip(tmp_path):
    path = tmp_path / "m.spamnb"
    _write(path)
    header, arrays = read_model(path)
    assert header["format"] == "test" and header["n"] == 3
    assert list(arrays["a"]) == [1, 2, 3]
    assert list(arrays["b"]) == [0.5, -1.0]
    assert bytes(arrays["c"]) == b"hello"
    assert list(arrays["d"]) == [-1, 7, 9]
    assert arrays["a"].readonly


def test_every_array_is_aligned(tmp_path):
    path = tmp_path / "m.spamnb"
    _write(path)
    header, _ = read_model(path)
    for offset, _count, _typecode in header["arrays"].values():
        assert offset % 8 == 0


def test_truncation_at_any_length_is_refused(tmp_path):
    path = tmp_path / "m.spamnb"
    _write(path)
    data = path.read_bytes()
    broken = tmp_path / "broken"
    for cut in range(0, len(data)):
        broken.write_bytes(data[:cut])
        with pytest.raises(ModelError):
            read_model(broken)


def test_bit_flips_anywhere_are_refused(tmp_path):
    path = tmp_path / "m.spamnb"
    _write(path)
    data = bytearray(path.read_bytes())
    broken = tmp_path / "broken"
    for position in range(0, len(data), 3):
        data[position] ^= 0x10
        broken.write_bytes(bytes(data))
        with pytest.raises(ModelError):
            read_model(broken)
        data[position] ^= 0x10


def test_other_files_are_refused_with_one_line(tmp_path):
    cases = {"empty": b"", "text": b"From: someone\n\nhello\n" * 10, "pickle": b"\x80\x04\x95" + b"\0" * 60}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ModelError) as info:
            read_model(tmp_path / name)
        assert "\n" not in str(info.value)
    with pytest.raises(ModelError, match="directory"):
        read_model(tmp_path)
    with pytest.raises(ModelError, match="no model"):
        read_model(tmp_path / "missing")


def test_future_version_is_refused(tmp_path):
    path = tmp_path / "m.spamnb"
    _write(path)
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 8, FORMAT_VERSION + 1)
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError, match="newer"):
        read_model(path)


def test_array_outside_the_file_is_refused_even_with_a_valid_checksum(tmp_path):
    # a crafted file: consistent checksum, but an array table pointing past the end
    path = tmp_path / "m.spamnb"
    _write(path)
    header, _ = read_model(path)
    header["arrays"]["a"][1] = 10**9
    header_bytes = json.dumps(header).encode()
    header_bytes += b" " * ((-len(header_bytes)) % 8)
    old = path.read_bytes()
    old_header_length = struct.unpack_from("<Q", old, 16)[0]
    body = header_bytes + old[40 + old_header_length:]
    from spamnb.bayes import checks as _checks

    fields = (store.MAGIC, FORMAT_VERSION, 0, len(header_bytes), 40 + len(body))
    head = struct.pack("<8sIIQQ", *fields)
    prefix = head + struct.pack("<Q", _checks.checksum64(head + struct.pack("<Q", _checks.checksum64(body))))
    path.write_bytes(prefix + body)
    with pytest.raises(ModelError, match="outside"):
        read_model(path)


def test_checksum_given_in_pieces_is_the_checksum_of_the_whole():
    import random

    from spamnb.bayes import checks as _checks

    rng = random.Random(7)
    for n in [0, 1, 7, 8, 31, 32, 33, 63, 64, 65, 100, 1000] + [rng.randrange(5000) for _ in range(200)]:
        data = rng.randbytes(n)
        pieces = _checks.Checksum64()
        at = 0
        while at < n:
            step = rng.choice([0, 1, 3, 8, 31, 32, 33, 100, rng.randrange(300)])
            pieces.update(data[at:at + step])
            at += step
        assert pieces.digest() == _checks.checksum64(data), n
    assert _checks.Checksum64().digest() == _checks.checksum64(b"")


def test_the_file_written_by_pieces_is_the_header_and_arrays_joined(tmp_path):
    # the layout and checksum of a file built whole in memory, as the writer built it before
    path = tmp_path / "m.spamnb"
    header, arrays = _write(path)
    data = path.read_bytes()
    header_length = struct.unpack_from("<Q", data, 16)[0]
    body = data[40:40 + header_length]
    for offset, count, typecode in json.loads(body)["arrays"].values():
        assert offset % 8 == 0
    for name, (typecode, buffer) in arrays.items():
        raw = memoryview(buffer).cast("B").tobytes()
        body += raw + b"\0" * ((-len(raw)) % 8)
    assert data[40:] == body and struct.unpack_from("<Q", data, 24)[0] == len(data)
    fields = struct.unpack_from("<8sIIQQ", data)
    assert struct.unpack_from("<Q", data, 32)[0] == store._checksum(fields, body)


def test_arrays_made_as_written_in_another_order_give_the_same_file(tmp_path):
    # the model written from its counts (saving.write_counts): arrays made when written, not in the file's order
    # (the file read back to checksum it), is the file of the same arrays given whole
    _write(tmp_path / "whole")
    made = []

    def maker(name, buffer, pieces=2):
        def make():
            made.append(name)
            data = memoryview(buffer).cast("B")
            cut = len(data) // pieces
            yield data[:cut]
            yield data[cut:]
        return make

    arrays = {"a": ("Q", 3, maker("a", array("Q", [1, 2, 3]))), "b": ("d", array("d", [0.5, -1.0])),
              "c": ("B", 5, maker("c", b"hello")), "d": ("i", 3, maker("d", array("i", [-1, 7, 9])))}
    header = {"format": "test", "n": 3}
    for order in (None, ["d", "c", "b", "a"], ["b", "a", "d", "c"]):
        made.clear()
        write_model(tmp_path / "made", header, arrays, order=order)
        assert (tmp_path / "made").read_bytes() == (tmp_path / "whole").read_bytes(), order
        assert made == [name for name in (order or "abcd") if name != "b"]
    read_model(tmp_path / "made")   # its checksum checked
    assert sorted(p.name for p in tmp_path.iterdir()) == ["made", "whole"]


def test_a_large_array_goes_to_the_disk_once_written_and_the_file_is_the_same(tmp_path, monkeypatch):
    # an array of _WRITEBACK_FROM bytes or more: its writeback started once it is written, at its place in the
    # file (a hint: the bytes and the checksum are those of a file written without it), in either order
    from spamnb.persistence import writeback

    started, real = [], writeback.start_writeback

    def start(fd, offset, size):
        started.append((offset, size, real(fd, offset, size)))

    monkeypatch.setattr(writeback, "start_writeback", start)
    big = array("Q", range(store._WRITEBACK_FROM // 8))
    arrays = {"a": ("B", b"abc"), "big": ("Q", big), "c": ("i", array("i", [5, 6]))}
    write_model(tmp_path / "whole", {"format": "test"}, arrays)
    data = (tmp_path / "whole").read_bytes()
    assert [(size, data[offset:offset + size] == big.tobytes()) for offset, size, _ in started] == [(len(big) * 8, True)]
    if os.uname().sysname == "Linux":
        assert started[0][2] is True   # the call was made, and did not fail
    write_model(tmp_path / "made", {"format": "test"},
                {"a": ("B", b"abc"), "big": ("Q", len(big), lambda: [big]), "c": ("i", array("i", [5, 6]))},
                order=["big", "c", "a"])
    assert (tmp_path / "made").read_bytes() == data and len(started) == 2 and started[1][:2] == started[0][:2]
    read_model(tmp_path / "made")   # its checksum checked


def test_an_array_made_shorter_than_declared_leaves_the_old_model(tmp_path):
    path = tmp_path / "m.spamnb"
    _write(path, version_mark=1)
    for order in (None, ["b", "a"]):
        with pytest.raises(ValueError, match="'a': 16 bytes made, 24 declared"):
            write_model(path, {"format": "test"}, {"a": ("Q", 3, lambda: [array("Q", [1, 2])]),
                                                   "b": ("B", b"xy")}, order=order)
    with pytest.raises(ValueError, match="every array once"):
        write_model(path, {"format": "test"}, {"a": ("B", b"x")}, order=["a", "a"])
    assert read_model(path)[0]["version_mark"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.spamnb"]


def test_write_replaces_atomically_and_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "m.spamnb"
    _write(path, version_mark=1)
    os.chmod(path, 0o600)
    _write(path, version_mark=2)
    header, _ = read_model(path)
    assert header["version_mark"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.spamnb"]
    assert os.stat(path).st_mode & 0o777 == 0o600  # the old file's permissions are kept


def test_failed_write_keeps_the_old_model(tmp_path, monkeypatch):
    path = tmp_path / "m.spamnb"
    _write(path, version_mark=1)

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    monkeypatch.setattr(posix, "fsync", fail)   # what replace_file calls (a learn loads no os.py)
    with pytest.raises(OSError):
        _write(path, version_mark=2)
    monkeypatch.undo()
    header, _ = read_model(path)
    assert header["version_mark"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.spamnb"]


@pytest.mark.parametrize("size", [100, store._HUGE_PAGES_FROM + 12345])
def test_a_large_model_is_read_into_private_memory_not_the_file(tmp_path, monkeypatch, size):
    """Small and large files (the latter in an anonymous mapping with huge
    pages advised) read the same; the memory is not the file's: rewriting the
    file in place afterwards changes nothing read; without anonymous mappings
    the read falls back to a bytearray."""
    path = tmp_path / "m.spamnb"
    payload = bytes(range(256)) * (size // 256 + 1)
    write_model(path, {"format": "test"}, {"c": ("B", payload[:size])})
    header, arrays = read_model(path)
    assert bytes(arrays["c"]) == payload[:size] and arrays["c"].readonly
    with open(path, "r+b") as f:    # in place, as `cp` over it does
        f.write(b"\0" * os.path.getsize(path))
    assert bytes(arrays["c"]) == payload[:size]
    memory = store._private_memory(size)
    assert len(memory) == size and not memory.readonly and not any(memory[:4096])

    def no_mapping(*args, **kwargs):
        raise OSError("no anonymous mappings here")

    monkeypatch.setattr(store.checks, "PrivateMemory", no_mapping)
    write_model(path, {"format": "test"}, {"c": ("B", payload[:size])})
    assert bytes(read_model(path)[1]["c"]) == payload[:size]
    assert isinstance(store._private_memory(10).obj, bytearray)


# ---------------------------------------------------------------------------- planted links (issue 25, item 2)
def _train_home(tmp_path, sample_model):
    """The command line's entry and a model ``spamnb train -q -m MODEL corpora/`` writes (a copy of the session's)."""
    from spamnb.cli import main as cli

    model = tmp_path / "model.spamnb"
    shutil.copyfile(sample_model, model)
    return cli, model


def _plant(folder, victim):
    """Symbolic links at every name a writer of this process could predict beside the model."""
    pid = os.getpid()
    for name in (f"model.spamnb.bak.{pid}.tmp", f".model.spamnb.bak.{pid}.tmp", f"model.spamnb.{pid}.tmp",
                 f"model.spamnb.journal.{pid}.tmp", f"model.spamnb.lock.{pid}.tmp"):
        os.symlink(victim, folder / name)


@pytest.mark.parametrize("no_hard_links", [False, True])
def test_a_planted_symlink_at_the_backup_temporary_is_never_written_through(tmp_path, monkeypatch, no_hard_links,
                                                                            sample_model):
    cli, model = _train_home(tmp_path, sample_model)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    _plant(tmp_path, victim)
    if no_hard_links:   # a file system without hard links: the backup is copied, into a file of its own
        def no_link(*args, **kwargs):
            raise PermissionError(1, "Operation not permitted")
        monkeypatch.setattr(os, "link", no_link)
    assert cli.main(["dump", "-m", str(model), "-o", str(tmp_path / "d.txt")]) == 0
    before = model.read_bytes()
    assert cli.main(["train", "-q", "-m", str(model), str(SAMPLE_CORPUS)]) == 0
    assert victim.read_bytes() == b"precious\n"
    assert (tmp_path / "model.spamnb.bak").read_bytes() == before
    assert cli.main(["load", "-q", "-m", str(model), str(tmp_path / "d.txt")]) == 0
    assert cli.main(["prune", "-q", "-m", str(model), "--target-size", "100"]) == 0
    assert victim.read_bytes() == b"precious\n"
    assert os.path.islink(tmp_path / f"model.spamnb.bak.{os.getpid()}.tmp")   # left alone, not followed
    # the backup is a regular file of its own: a link planted at MODEL.bak is replaced, not followed
    (tmp_path / "model.spamnb.bak").unlink()
    os.symlink(victim, tmp_path / "model.spamnb.bak")
    assert cli.main(["prune", "-q", "-m", str(model), "--target-size", "50"]) == 0
    assert victim.read_bytes() == b"precious\n"
    assert not os.path.islink(tmp_path / "model.spamnb.bak")
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]
    assert leftovers == []


def test_a_hard_link_planted_as_the_lock_is_refused_not_truncated(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    os.link(victim, tmp_path / "model.spamnb.lock")
    with pytest.raises(ModelError, match="hard link"):
        with store.locked(tmp_path / "model.spamnb"):
            pass
    assert victim.read_bytes() == b"precious\n"


@pytest.mark.parametrize("model_mode, lock_mode", [(0o000, 0o600), (0o400, 0o600), (0o640, 0o640), (0o664, 0o664),
                                                   (0o604, 0o604)])
def test_the_lock_is_the_owners_to_read_and_write_whatever_the_models_mode(tmp_path, model_mode, lock_mode):
    """The lock took the model's mode: a model of mode 000 gave a lock of
    mode 000, which its owner's next write could not open (as root it can,
    so the mode itself is checked).  The owner reads and writes it; the
    group and others get the model's read and write bits."""
    model = tmp_path / "model.spamnb"
    _write(model)
    model.chmod(model_mode)
    old = os.umask(0o022)
    try:
        with store.locked(model):
            pass
    finally:
        os.umask(old)
    assert oct((tmp_path / "model.spamnb.lock").stat().st_mode & 0o777) == oct(lock_mode & ~0o022)


def test_a_lock_left_without_the_owners_read_and_write_gets_them_back(tmp_path):
    """A lock an older spamnb left with the model's mode 000, or one a umask
    made read-only: the owner's lock again at the next write."""
    model = tmp_path / "model.spamnb"
    _write(model)
    lock = tmp_path / "model.spamnb.lock"
    lock.write_bytes(b"")
    lock.chmod(0o000)
    if not os.access(lock, os.W_OK):
        pytest.skip("the lock of mode 000 cannot be opened here (not root): nothing to give back")
    with store.locked(model):
        pass
    assert lock.stat().st_mode & 0o777 == 0o600
    lock.unlink()
    old = os.umask(0o277)   # owner read only for files created meanwhile
    try:
        with store.locked(model):
            pass
    finally:
        os.umask(old)
    assert lock.stat().st_mode & 0o777 == 0o600


def test_the_compiled_lock_is_flocks_exclusive_and_shared_lock(tmp_path):
    """``bayes.checks.try_lock`` (the model's lock without the ``fcntl`` module) is ``flock``: it
    excludes and is excluded by ``fcntl.flock`` on another open file of the lock, shared locks share, and
    closing the file drops it."""
    import fcntl

    from spamnb.bayes.checks import try_lock

    path = tmp_path / "m.spamnb.lock"
    path.write_bytes(b"")
    first, second = os.open(path, os.O_RDWR), os.open(path, os.O_RDWR)
    try:
        assert try_lock(first) is True
        assert try_lock(second) is False and try_lock(second, exclusive=False) is False
        with pytest.raises(BlockingIOError):
            fcntl.flock(second, fcntl.LOCK_SH | fcntl.LOCK_NB)
        os.close(first)   # closing drops it
        first = None
        assert try_lock(second, exclusive=False) is True
        third = os.open(path, os.O_RDWR)
        try:
            assert try_lock(third, exclusive=False) is True   # shared with shared
            assert try_lock(third) is False                   # not exclusive while another shares it
        finally:
            os.close(third)
        fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)   # held through fcntl: excludes the compiled one
        other = os.open(path, os.O_RDWR)
        try:
            assert try_lock(other) is False
        finally:
            os.close(other)
    finally:
        for fd in (first, second):
            if fd is not None:
                os.close(fd)
    with pytest.raises(OSError):
        try_lock(-1)


def test_a_held_lock_times_out_naming_its_holder(tmp_path):
    """``store.locked`` waits at most ``wait`` seconds for a lock another open file holds, then
    :class:`LockTimeout` names the pid written in the lock; once released it is taken."""
    import fcntl
    import time

    from spamnb.errors import LockTimeout

    model = tmp_path / "m.spamnb"
    lock = os.open(str(model) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.write(lock, b"4242\n")
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = time.monotonic()
        with pytest.raises(LockTimeout, match="locked by process 4242"):
            with store.locked(model, wait=0.2):
                pass
        assert 0.2 <= time.monotonic() - started < 30
    finally:
        os.close(lock)
    with store.locked(model, wait=0.2) as real:
        assert real == str(model.resolve()) and store.holds_lock(real)
        assert (tmp_path / "m.spamnb.lock").read_bytes() == f"{os.getpid()}\n".encode()
    assert not store.holds_lock(str(model.resolve())) and (tmp_path / "m.spamnb.lock").read_bytes() == b""


def test_a_lock_holds_its_holders_pid_alone_whatever_a_killed_holder_left(tmp_path):
    """The lock names its holder alone: a longer pid a killed holder left is
    emptied first (only a lock with something in it is truncated), an empty
    lock gets the pid; each is emptied when the lock is let go."""
    model = tmp_path / "m.spamnb"
    lock = tmp_path / "m.spamnb.lock"
    for left in (b"99999999999\n", b""):
        lock.write_bytes(left)
        with store.locked(model, wait=0.2):
            assert lock.read_bytes() == f"{os.getpid()}\n".encode()
        assert lock.read_bytes() == b""


def test_a_writer_advises_huge_pages_only_when_it_reads_the_large_arrays(tmp_path, sample_model):
    """``map_model``'s private memory is in small pages until the large arrays are read
    (``fill``): a learn that appends writes a few pages of it (a huge page would be 2 MiB
    zeroed each), a writer that reads the model whole advises huge pages first."""
    model = tmp_path / "m.spamnb"
    shutil.copyfile(sample_model, model)
    _, reader = store.map_model(model)
    assert reader.huge_later is None   # a reader: small pages throughout
    reader.file.close()
    with store.locked(model) as real:
        _, arrays = store.map_model(real)
        try:
            assert arrays.huge_later is not None and arrays.unread
            arrays.fill(set(arrays.offsets) - store.ON_DEMAND)   # the small ones: no advice yet
            assert arrays.huge_later is not None
            arrays.fill()
            assert arrays.huge_later is None and not arrays.unread
            assert bytes(arrays["keys"]) == bytes(store.read_model(real)[1]["keys"])
        finally:
            arrays.file.close()


def test_a_mapped_model_reads_its_ledger_when_it_is_first_used(sample_model):
    """map_model leaves the ledger of learned messages unread (a classify never
    reads it: 257 KiB of digests on the Enron-Spam model); the filter's ledger
    and a learn's look-up read it first (``fill_unread``), the same entries."""
    from spamnb.model import SpamFilter

    whole = SpamFilter.load(sample_model).ledger_.to_arrays()
    header, arrays = store.map_model(sample_model)
    assert len(arrays["ledger_labels"]) and store.LEDGER <= arrays.unread
    assert not any(arrays["ledger_digests"])   # not read: zeros
    mapped = SpamFilter.load(sample_model, mapped=True)
    assert store.LEDGER <= mapped.unread_.unread
    assert mapped.ledger_.to_arrays() == whole and not store.LEDGER & mapped.unread_.unread
    mapped.unread_.fill_unread(store.LEDGER)   # read already: nothing read again
    arrays.file.close()


def test_a_layout_packs_and_reads_what_struct_does():
    """``store.Layout`` (the journal's layouts and its operations', ``persistence/deltas``): the bytes
    ``struct`` packs and the values it reads, without it (``bayes/checks``, compiled); a buffer cut
    short is a ValueError, a value out of its field's range an OverflowError, a count of values not
    the layout's a TypeError."""
    import random

    from spamnb.persistence import deltas

    rng = random.Random(48)
    layouts = [store.JOURNAL_HEAD, store.JOURNAL_RECORD, deltas.TOKENS_RECORD, deltas.LEDGER_RECORD,
               deltas.HELD_OUT_RECORD, deltas.PAIR_SCORES_RECORD, deltas.LEARN_SUMS_RECORD]
    for layout in layouts:
        reference = struct.Struct(layout.format)
        assert layout.size == reference.size, layout.format
        for _ in range(200):
            values = []
            for code in reference.format.lstrip("<").translate({ord(d): None for d in "0123456789x"}):
                if code == "s":
                    values.append(rng.randbytes(rng.randrange(20)))
                elif code in "fd":
                    values.append(rng.choice([rng.uniform(-1e9, 1e9), float("inf"), -0.0, 1e-300, 2.5]))
                else:
                    bits = 8 * struct.calcsize(code)
                    low = -(1 << bits - 1) if code.islower() else 0
                    values.append(rng.randrange(low, low + (1 << bits)))
            packed = layout.pack(*values)
            assert packed == reference.pack(*values), (layout.format, values)
            raw = rng.randbytes(3) + packed
            assert layout.unpack_from(raw, 3) == reference.unpack_from(raw, 3)
            raw = rng.randbytes(reference.size + 5)   # any bytes: NaNs, negative numbers
            assert reference.pack(*layout.unpack_from(raw, 5)) == reference.pack(*reference.unpack_from(raw, 5))
        with pytest.raises(ValueError):
            layout.unpack_from(packed[:-1])
        with pytest.raises(ValueError):
            layout.unpack_from(packed, -1)
        with pytest.raises(TypeError):
            layout.pack(*values, 0)
        with pytest.raises(TypeError):
            layout.pack(*values[:-1])
    with pytest.raises(OverflowError):
        deltas.TOKENS_RECORD.pack(256, 0, 0, 0, 0, 0, 0)
    with pytest.raises(OverflowError):
        deltas.TOKENS_RECORD.pack(1, 0, -(1 << 31) - 1, 0, 0, 0, 0)
    with pytest.raises(OverflowError):
        deltas.HELD_OUT_RECORD.pack(5, 1, 1e39)


def test_the_size_of_a_journal_without_records_is_its_header_s():
    """``JOURNAL_EMPTY_SIZE`` (a literal, so that a load tells a journal without
    records by its size without making the journal's layouts) is the size of
    ``JOURNAL_HEAD``: a whole save writes that header alone."""
    assert store.JOURNAL_EMPTY_SIZE == store.JOURNAL_HEAD.size
