"""The model file: one file, versioned, checksummed, memory-mapped, never pickled.

Layout (little-endian)::

    offset  size  field
    0       8     magic b"SPAMNB\\x00M"
    8       4     format version (uint32, FORMAT_VERSION)
    12      4     reserved (0)
    16      8     header length H in bytes (uint64)
    24      8     file length in bytes (uint64)
    32      8     checksum (uint64): checksum64 of bytes [0, 32) followed by
                  the 8-byte checksum64 of bytes [40, file length)
    40      H     header: UTF-8 JSON, padded with spaces to a multiple of 8
    40+H    ...   arrays, each starting on an 8-byte boundary

The header's ``"arrays"`` maps each array name to ``[offset, count, typecode]``
(typecodes of :mod:`array`: ``Q`` uint64, ``i`` int32, ``d`` float64, ``B``
bytes).  Reading checks the magic, the version, the length, the checksum, the
JSON and every array's bounds and alignment (and that no two overlap) before
anything uses them, and returns zero-copy memoryviews over a read-only
``mmap``: nothing is parsed per token, and nothing in a file is ever executed
(JSON and raw numbers only).

Writing is atomic: a temporary file in the same folder, flushed and fsynced,
renamed over the old one, then the folder fsynced.  A crash at any moment
leaves the old model or the new one, never a mix.  A writer killed mid-write
leaves its temporary file (``.NAME.PID.XXXX.tmp``); the next successful save
of that model removes those whose process no longer exists.

Every failure to read a model raises :class:`ModelError` (one exception, one
line of message).
"""

from __future__ import annotations

import json
import mmap
import os
import stat
import struct
import sys
from contextlib import contextmanager

from spamnb import _vocab

__all__ = ["ModelError", "FORMAT_VERSION", "MAGIC", "write_model", "read_model", "locked"]

MAGIC = b"SPAMNB\x00M"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sIIQQQ")  # magic, version, reserved, header length, file length, checksum
_ITEMSIZE = {"Q": 8, "q": 8, "i": 4, "d": 8, "B": 1}
_ALIGN = 8

if sys.byteorder != "little":  # pragma: no cover - the arrays are stored little-endian
    raise ImportError("spamnb's model files need a little-endian machine")


class ModelError(Exception):
    """A model file is missing, unreadable, damaged, of another format or version,
    or was trained with other tokenizer settings."""


def _pad(n):
    return (-n) % _ALIGN


def write_model(path, header, arrays):
    """Write ``header`` (a JSON-able dict) and ``arrays`` ({name: (typecode, buffer)}) atomically."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    header = dict(header)
    chunks = []
    table = {}
    # header length depends on the offsets it lists: lay arrays out after a
    # header whose size is fixed first (offsets are relative to the array area)
    position = 0
    for name, (typecode, buffer) in arrays.items():
        if typecode not in _ITEMSIZE:
            raise ValueError(f"unsupported typecode {typecode!r} for array {name!r}")
        data = memoryview(buffer).cast("B")
        if len(data) % _ITEMSIZE[typecode]:
            raise ValueError(f"array {name!r} is not a whole number of items")
        table[name] = [position, len(data) // _ITEMSIZE[typecode], typecode]
        chunks.append(data)
        chunks.append(b"\0" * _pad(len(data)))
        position += len(data) + _pad(len(data))
    header["arrays"] = table
    header_bytes = json.dumps(header, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")
    header_bytes += b" " * _pad(len(header_bytes))
    body = b"".join([header_bytes, *chunks])
    total = _PREFIX.size + len(body)
    fields = (MAGIC, FORMAT_VERSION, 0, len(header_bytes), total)
    prefix = _PREFIX.pack(*fields, _checksum(fields, body))

    mode = 0o644
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        pass
    import tempfile

    # the writer's pid in the name lets a later save remove what a killed writer left
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.{os.getpid()}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(prefix)
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_directory(directory)
    _remove_stale_temporaries(directory, os.path.basename(path))


def _remove_stale_temporaries(directory, name):
    """Delete the temporary files of writers of ``name`` killed mid-write (their
    process is gone).  Best effort: any error leaves the file where it is."""
    prefix = "." + name + "."
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(prefix) and entry.endswith(".tmp")):
            continue
        pid = entry[len(prefix):].split(".", 1)[0]
        if not pid.isdigit() or int(pid) in (0, os.getpid()):
            continue
        try:
            os.kill(int(pid), 0)
            continue  # its writer is still running
        except ProcessLookupError:
            pass
        except OSError:  # EPERM: running, as another user
            continue
        try:
            os.unlink(os.path.join(directory, entry))
        except OSError:
            pass


def _checksum(fields, body):
    """The file's checksum: covers the fixed fields and the whole body."""
    head = _PREFIX.pack(*fields, 0)[:32]
    return _vocab.checksum64(head + struct.pack("<Q", _vocab.checksum64(body)))


def _fsync_directory(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_model(path):
    """Map a model file and check it; returns ``(header, arrays)``.

    ``arrays`` maps names to read-only memoryviews of the given typecode over
    the file's mmap (which they keep alive).  Raises ModelError.
    """
    path = os.fspath(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError
            if not stat.S_ISREG(st.st_mode):
                raise ModelError(f"{path}: not a regular file, not a model")
            size = st.st_size
            if size < _PREFIX.size:
                raise ModelError(f"{path}: not a spamnb model (too short: {size} bytes)")
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
    except IsADirectoryError:
        raise ModelError(f"{path}: is a directory, not a model file") from None
    except FileNotFoundError:
        raise ModelError(f"{path}: no model there (train one with 'spamnb train')") from None
    except PermissionError:
        raise ModelError(f"{path}: permission denied") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot read the model: {exc.strerror or exc}") from None
    view = memoryview(mapped)
    magic, version, _reserved, header_length, total, checksum = _PREFIX.unpack_from(view)
    if magic != MAGIC:
        raise ModelError(f"{path}: not a spamnb model file")
    if version != FORMAT_VERSION:
        newer = "newer than" if version > FORMAT_VERSION else "older than"
        raise ModelError(f"{path}: model format version {version} is {newer} this spamnb's ({FORMAT_VERSION})")
    if total != size:
        raise ModelError(f"{path}: model file is damaged (length {size}, expected {total}: truncated?)")
    if header_length > size - _PREFIX.size or header_length % _ALIGN:
        raise ModelError(f"{path}: model file is damaged (bad header length)")
    if _checksum((magic, version, _reserved, header_length, total), view[_PREFIX.size:]) != checksum:
        raise ModelError(f"{path}: model file is damaged (checksum mismatch)")
    try:
        header = json.loads(bytes(view[_PREFIX.size:_PREFIX.size + header_length]))
        if not isinstance(header, dict) or not isinstance(header.get("arrays"), dict):
            raise ValueError("no array table")
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: JSON nested too deep
        raise ModelError(f"{path}: model header is unreadable ({' '.join(str(exc).split())[:200]})") from None
    base = _PREFIX.size + header_length
    arrays = {}
    spans = []
    for name, entry in header["arrays"].items():
        try:
            offset, count, typecode = entry
            itemsize = _ITEMSIZE[typecode]
            if not (isinstance(offset, int) and isinstance(count, int)) or offset < 0 or count < 0:
                raise ValueError
        except (ValueError, TypeError, KeyError):
            raise ModelError(f"{path}: model header describes array {name!r} wrongly") from None
        start = base + offset
        end = start + count * itemsize
        if start % _ALIGN or end > size:
            raise ModelError(f"{path}: array {name!r} lies outside the model file")
        arrays[name] = view[start:end].cast(typecode) if typecode != "B" else view[start:end]
        spans.append((start, end, name))
    spans.sort()
    for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
        if start < end:  # one byte read as two things: never written so, refuse it
            raise ModelError(f"{path}: arrays {first!r} and {second!r} overlap in the model file")
    return header, arrays


@contextmanager
def locked(path):
    """Hold an exclusive lock for read-modify-write of the model at ``path``.

    The lock is ``path + ".lock"`` (flock): concurrent learners queue up
    instead of losing each other's updates.  Readers need no lock: a model is
    replaced by rename, so they see the old file or the new one.
    """
    import fcntl

    lock_path = os.fspath(path) + ".lock"
    os.makedirs(os.path.dirname(os.path.abspath(lock_path)), exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
