"""The model file's container: one file, versioned, checksummed, never pickled.

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
bytes).  What the header and arrays mean is :mod:`spamnb.persistence.schema`'s.
Reading checks the file before it reads it: its type (a FIFO, a device is
never read: opened without blocking, then refused), its size against a limit
(:data:`MAX_MODEL_SIZE`, 1 GiB, or the ``max_size`` given: a 2 GB sparse file
is refused at once, unread) and its first 40 bytes (the magic, the version
and the length they state); then it reads the whole file into private memory
(an anonymous mapping, not the file's), and checks the magic, the
version, the length, the checksum, the JSON and every array's bounds and
alignment (and that no two overlap) before anything uses them, and returns
read-only memoryviews over that memory: nothing is parsed per token, and
nothing in a file is ever executed (JSON and raw numbers only).  The file is
not memory-mapped: a mapped file rewritten in place (``cp`` over it,
``rsync --inplace``) kills its readers with SIGBUS; a read copy cannot change
under a reader.  A file that changes while it is being read fails its checks
and is read again (a few times), then refused with the one-line error.

Writing is atomic: a temporary file in the same folder, flushed and fsynced,
renamed over the old one, then the folder fsynced.  A crash at any moment
leaves the old model or the new one, never a mix.  A writer killed mid-write
leaves its temporary file (``.NAME.PID.XXXX.tmp``); the next successful save
of that model removes those whose process no longer exists (its journal's,
``.NAME.journal.PID.XXXX.tmp``, included: a learn that starts a journal does
not list the folder).  Every temporary
file (the model's, a dump's, the journal's, the backup's ``.MODEL.bak.PID.XXXX.tmp``)
has a name no other process can predict and is created with O_EXCL (or is a
hard link made there, which fails on anything already there): nothing is
ever written through a link planted beside the model.  The model path
is resolved once: a symbolic link's target is replaced (the link stays), an
existing model keeps its owner, group and mode, a new one gets 0666 less the
umask, and anything but a regular file (a FIFO, ``/dev/null``) is refused.
Replacing a model by hand the same way (write a new file beside it, then
``mv`` it over the old one) is safe for readers; copying over it in place is
survived but not recommended.

Every failure to read a model raises :class:`ModelError` (one exception, one
line of message).
"""

import posix   # os's system calls, without os.py (its import loads _collections_abc: a tenth of a cold classify)
import _stat as stat   # the S_IS* tests and S_IMODE, which stat.py re-exports: its module not run (0.2 M instructions)
import sys
import time

from spamnb import errors   # ModelError, LockTimeout: named where raised or caught, made then (its docstring)
from spamnb.bayes import checks

__all__ = ["ModelError", "LockTimeout", "FORMAT_VERSION", "MAGIC", "DEFAULT_WAIT", "MAX_MODEL_SIZE", "write_model",
           "read_model", "map_model", "verify_file", "locked", "resolve"]


class Layout:
    """A record's layout: a little-endian struct format ("<", of B b H h I i Q q s x f d), as
    ``struct.Struct`` gives it (``format``, ``size``, ``pack``, ``unpack_from``), packed and read
    by ``bayes/checks`` (compiled: ``pack_layout``, ``unpack_layout``), so that a learn writing its
    journal record, and a reader of a model file or a journal, load no ``_struct`` (a standard shared
    object).  The model file's prefix, the journal's layouts and its operations'
    (``spamnb.persistence.records`` writes them)."""

    __slots__ = ("format", "size")

    def __init__(self, format):
        self.format, self.size = format, checks.layout_size(format)

    def pack(self, *values):
        """The bytes of ``values``, as ``struct.Struct(format).pack`` gives them."""
        return checks.pack_layout(self.format, values, self.size)

    def unpack_from(self, buffer, offset=0):
        """``struct.Struct(format).unpack_from``, but a ValueError (not ``struct.error``) for a
        buffer cut short: its callers need not load ``_struct`` to catch it."""
        return checks.unpack_layout(self.format, buffer, offset, self.size)


MAGIC = b"SPAMNB\x00M"
FORMAT_VERSION = 1
_PREFIX = Layout("<8sIIQQQ")  # magic, version, reserved, header length, file length, checksum
_ITEMSIZE = {"Q": 8, "q": 8, "I": 4, "i": 4, "H": 2, "d": 8, "B": 1}
_READ_TRIES = 5       # reads of a file that keeps changing under the reader
# Files from this size are read into an anonymous mapping advised to use huge
# pages: zero-filling and faulting in 4 KiB pages was most of the cold start
# with a large model.  `python scripts/bench/bench_model_read.py MODEL --fresh 9`
# (the read alone, medians of 9 fresh processes): the Enron-Spam model with
# word pairs (66.9 MiB) into a bytearray 55.6 ms, an anonymous mapping 42.9
# ms, the same with huge pages 17.1 ms (one run of the 9 took 145 ms: the
# kernel compacting memory for a huge page); the SpamAssassin one (8.3 MiB)
# 6.6 / 5.3 / 2.8 ms.
_HUGE_PAGES_FROM = 4 << 20
DEFAULT_WAIT = 60.0   # seconds a writer waits for another's lock
# The largest model file read (``read_model``'s ``max_size`` by default): 15 times the
# Enron-Spam model with word pairs (66.9 MiB); a larger file is refused unread.
MAX_MODEL_SIZE = 1 << 30
_ALIGN = 8

if sys.byteorder != "little":  # pragma: no cover - the arrays are stored little-endian
    raise ImportError("spamnb's model files need a little-endian machine")


def spamnb_home():
    """The folder of the model and of the settings file: ``$SPAMNB_HOME``, or ``~/.spamnb``."""
    home = _getenv("SPAMNB_HOME")
    if home:
        return home
    home = _getenv("HOME")
    if home is not None:   # os.path.expanduser("~"): HOME without its trailing slashes ("/" for none left)
        return home.rstrip("/") + "/.spamnb"
    import os   # no HOME: the password database's

    return os.path.join(os.path.expanduser("~"), ".spamnb")


def _getenv(name):
    """``os.environ.get(name)``, without loading os.py when it is not loaded:
    then nothing can have changed ``os.environ`` yet, and the process's
    environment (``posix.environ``, bytes) is read as os.py would decode it."""
    os = sys.modules.get("os")
    if os is not None:
        return os.environ.get(name)
    value = posix.environ.get(name.encode(sys.getfilesystemencoding(), "surrogateescape"))
    return None if value is None else value.decode(sys.getfilesystemencoding(), "surrogateescape")


def in_home(name):
    """``os.path.join(spamnb_home(), name)``: the file ``name`` of the model's folder."""
    return _join(spamnb_home(), name)


def default_model_path():
    """``$SPAMNB_HOME/model.spamnb``, or ``~/.spamnb/model.spamnb``."""
    return in_home("model.spamnb")


def resolve(path):
    """The model's real path: symbolic links followed, once, by every writer
    (``os.path.realpath``).  A path that is its own real path already (absolute,
    or under the working folder; no empty, ``.`` or ``..`` part; no part a
    symbolic link: the same ``lstat`` of each part as realpath's) is returned
    as it is, without loading os.py (a cold classify's journal path)."""
    path = posix.fspath(path)
    if isinstance(path, str):
        try:
            full = path if path.startswith("/") else posix.getcwd().rstrip("/") + "/" + path
            parts = full.split("/")
            if "" not in parts[1:] and "." not in parts and ".." not in parts and all(
                    not stat.S_ISLNK(posix.lstat("/".join(parts[:i])).st_mode) for i in range(2, len(parts) + 1)):
                return full
        except (OSError, ValueError):
            pass   # realpath decides
    import os

    return os.path.realpath(path)


def _umask():
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = posix.umask(0o022)  # no /proc: read it the only other way (not thread-safe)
    posix.umask(mask)
    return mask


def stat_or_none(path):
    """``posix.stat(path)``, None when there is nothing to stat (``os.path.exists``'s
    test: any OSError or ValueError), without os.py."""
    try:
        return posix.stat(path)
    except (OSError, ValueError):
        return None


def stat_existing(path, shown):
    """The stat of the model file at ``path`` (resolved), None if there is none;
    ModelError for anything that is not a regular file."""
    try:
        st = posix.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise errors.ModelError(f"{shown}: cannot use the model path: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise errors.ModelError(f"{shown}: not a regular file; refusing to replace it with a model")
    return st


def _pad(n):
    return (-n) % _ALIGN


def write_model(path, header, arrays, backup=None, order=None):
    """Write ``header`` (a JSON-able dict) and ``arrays`` ({name: (typecode, buffer)}) atomically.

    ``path`` is resolved (a symbolic link's target is written); an existing
    file keeps its owner, group and mode, and must be a regular file
    (ModelError otherwise).  ``backup``: a path where the model being
    replaced is kept (a hard link to it, or a copy), or None.

    An array may be made as it is written, not held before: ``(typecode,
    count, make)``, ``make()`` an iterable of buffers (``count`` items in
    all, ValueError otherwise), each dropped once written.  ``order``: the
    names in the order the arrays are written (default: the file's); in
    another order than the file's, the file is read back once, a piece at a
    time, to checksum it (a model written from its counts: each array made
    when the ones it no longer needs are gone, never the whole model in memory).
    """
    import os
    shown = os.fspath(path)
    path = resolve(path)
    old = stat_existing(path, shown)
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    header = dict(header)
    table, sections = {}, {}
    # header length depends on the offsets it lists: lay arrays out after a
    # header whose size is fixed first (offsets are relative to the array area)
    position = 0
    for name, (typecode, *source) in arrays.items():
        if typecode not in _ITEMSIZE:
            raise ValueError(f"unsupported typecode {typecode!r} for array {name!r}")
        if len(source) == 1:   # a buffer
            data = memoryview(source[0]).cast("B")
            if len(data) % _ITEMSIZE[typecode]:
                raise ValueError(f"array {name!r} is not a whole number of items")
            count, source = len(data) // _ITEMSIZE[typecode], (data,)
        else:   # (count, make)
            count, source = source[0], source[1]
        table[name] = [position, count, typecode]
        sections[name] = (position, count * _ITEMSIZE[typecode], source)
        position += count * _ITEMSIZE[typecode] + _pad(count * _ITEMSIZE[typecode])
    order = list(arrays) if order is None else list(order)
    if sorted(order) != sorted(arrays):
        raise ValueError("order must name every array once")
    header["arrays"] = table
    import json

    header_bytes = json.dumps(header, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")
    header_bytes += b" " * _pad(len(header_bytes))
    start = _PREFIX.size + len(header_bytes)
    total = start + position
    fields = (MAGIC, FORMAT_VERSION, 0, len(header_bytes), total)
    in_order = order == list(arrays)

    def write(f):
        # the body is checksummed and written piece by piece, never joined: the
        # arrays are not copied (a 67 MiB model does not cost 67 MiB more to save)
        body_checksum = checks.Checksum64()
        f.write(bytes(_PREFIX.size))   # the prefix holds the checksum: written last, over this
        f.write(header_bytes)
        if in_order:
            body_checksum.update(header_bytes)
        for name in order:
            offset, size, source = sections.pop(name)
            if not in_order:
                f.seek(start + offset)
            written = 0
            for piece in source if isinstance(source, tuple) else source():
                piece = memoryview(piece).cast("B")
                f.write(piece)
                if in_order:
                    body_checksum.update(piece)
                written += len(piece)
                del piece
            if written != size:
                raise ValueError(f"array {name!r}: {written} bytes made, {size} declared")
            f.write(b"\0" * _pad(size))
            if in_order:
                body_checksum.update(b"\0" * _pad(size))
            source = None
            if size >= _WRITEBACK_FROM:   # on its way to the disk while the next arrays are made (the fsync waits less)
                from spamnb.persistence.writeback import start_writeback

                f.flush()
                start_writeback(f.fileno(), start + offset, size)
        if not in_order:   # the body read back in file order, a piece at a time
            f.flush()
            piece = bytearray(1 << 20)
            offset = _PREFIX.size
            while offset < total:
                n = os.preadv(f.fileno(), [memoryview(piece)[:min(len(piece), total - offset)]], offset)
                if n <= 0:
                    raise OSError(f"{shown}: the model written is shorter than its layout")
                body_checksum.update(memoryview(piece)[:n])
                offset += n
        f.seek(0)
        f.write(_PREFIX.pack(*fields, _file_checksum(fields, body_checksum.digest())))

    replace_file(path, write, old, backup=backup)


_WRITEBACK_FROM = 4 << 20   # an array from this size goes to the disk once written (persistence.writeback)


def replace_file(path, write, old=None, mode=None, backup=None, tidy=True, losable=False):
    """Atomically replace the file at ``path`` (resolved) by what ``write(f)``
    writes to a binary file: a temporary file in the same folder, flushed and
    fsynced, renamed over ``path``, then the folder fsynced.  The new file
    gets ``old``'s owner, group and mode (``old``: the os.stat of the file
    replaced), else ``mode``, else 0666 less the umask.  ``backup``: see
    :func:`write_model`.  ``tidy``: then remove the temporary files that
    killed writers of ``path`` left (the folder listed); a journal started
    by a learn leaves that to the model's next save, which removes the
    journal's too (:func:`_remove_stale_temporaries`).  ``losable``: the file
    replaced holds nothing a reader uses (a journal's first learn: none, or
    a stale one), so the temporary, written whole, is renamed into place
    before its fsync: readers still see it whole or not at all, a crash
    before the fsyncs may leave it short or damaged at ``path`` instead (its
    write was not acknowledged), and the file's fsync then syncs its name
    too (one wait less on ext4, one journal commit less with a journal); a
    failed fsync removes it again.  The system is called through posix, not
    os (a learn's cold path loads no os.py)."""
    directory = _dirname(path)
    # the writer's pid in the name lets a later save remove what a killed writer left
    fd, tmp = _new_temporary(directory, f".{_basename(path)}.{posix.getpid()}.")
    try:
        with open(fd, "wb", buffering=1 << 16) as f:   # os.fdopen's io.open
            if old is not None:
                _same_owner(f.fileno(), old)
                posix.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
            else:
                posix.fchmod(f.fileno(), (0o666 & ~_umask()) if mode is None else mode)
            write(f)
            f.flush()
            if losable:
                posix.replace(tmp, path)
                tmp = path   # not acknowledged until synced: removed again when the sync fails
            posix.fsync(f.fileno())
        if backup is not None and old is not None:
            _keep_backup(path, posix.fspath(backup))
        if not losable:
            posix.replace(tmp, path)
    except BaseException:
        _remove_quietly(tmp)
        raise
    _fsync_directory(directory)
    if tidy:
        _remove_stale_temporaries(directory, _basename(path))


def _dirname(path):
    """``os.path.dirname(path)`` (posixpath's), without os.py."""
    sep = b"/" if isinstance(path, bytes) else "/"
    head = path[:path.rfind(sep) + 1]
    if head and head != sep * len(head):
        head = head.rstrip(sep)
    return head


def _basename(path):
    """``os.path.basename(path)`` (posixpath's), without os.py."""
    return path[path.rfind(b"/" if isinstance(path, bytes) else "/") + 1:]


def _join(directory, name):
    """``os.path.join(directory, name)`` of two parts (posixpath's), without os.py."""
    sep = b"/" if isinstance(name, bytes) else "/"
    if name.startswith(sep):
        return name
    return directory + name if not directory or directory.endswith(sep) else directory + sep + name


def _new_temporary(directory, prefix):
    """``(fd, path)`` of a new file ``PREFIX<16 random hex digits>.tmp`` in
    ``directory``, created with O_EXCL (never through a link planted at its
    name; another name is tried) and mode 0600, open for reading and writing (a model
    written out of order is read back to checksum it: :func:`write_model`): what
    ``tempfile.mkstemp`` makes, without its import (a learn's cold path)."""
    flags = (posix.O_RDWR | posix.O_CREAT | posix.O_EXCL | getattr(posix, "O_NOFOLLOW", 0)
             | getattr(posix, "O_CLOEXEC", 0))
    for _ in range(100):
        path = _join(directory or ".", prefix + posix.urandom(8).hex() + ".tmp")
        try:
            return posix.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"{directory}: no free name for a temporary file")


def _same_owner(fd, old):
    """Give the new file the old one's owner and group, as far as allowed
    (the group alone when the owner cannot be given, e.g. not as root)."""
    for uid in (old.st_uid, -1):
        try:
            posix.fchown(fd, uid, old.st_gid)
            return
        except OSError:
            continue


def _keep_backup(path, backup):
    """Make ``backup`` the current file at ``path`` (atomically replacing an older backup).

    The step between is a new name in the backup's folder that no other
    process can predict or have planted (``.BACKUP.PID.XXXX.tmp``, random
    digits): a hard link to ``path`` made there (``link`` never
    follows a link at the new name: it fails on anything already there, and
    another name is tried), or, where the file system has no hard links, a
    copy written into a file created with O_EXCL (never through a link).
    The rename that follows replaces ``backup`` itself, a symbolic link
    there included, never the file it points to."""
    import os
    import secrets

    directory = os.path.dirname(backup) or "."
    prefix = f".{os.path.basename(backup)}.{os.getpid()}."
    for _ in range(100):
        tmp = os.path.join(directory, prefix + secrets.token_hex(8) + ".tmp")
        try:
            os.link(path, tmp, follow_symlinks=False)
            break
        except FileExistsError:
            continue   # planted, or a collision: another unpredictable name
        except OSError:   # no hard links here (EPERM, EXDEV, ...): copy into a new file of our own
            tmp = _copy_exclusive(path, directory, prefix)
            break
    else:
        raise FileExistsError(f"{directory}: no free name for the backup's temporary file")
    try:
        os.replace(tmp, backup)
    except BaseException:
        _remove_quietly(tmp)
        raise
    _remove_stale_temporaries(directory, os.path.basename(backup))


def _copy_exclusive(path, directory, prefix):
    """A copy of the file at ``path`` in a new file (O_EXCL, so never a link) of
    ``directory``, with its mode; returns the copy's path."""
    import os
    fd, tmp = _new_temporary(directory, prefix)
    try:
        source = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(source)
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
            while True:
                chunk = os.read(source, 1 << 20)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(source)
    except BaseException:
        os.close(fd)
        _remove_quietly(tmp)
        raise
    os.close(fd)
    return tmp


def _remove_quietly(path):
    """Remove a temporary file of our own that a failed write leaves; one
    already gone (or a folder that refuses) is no second error."""
    try:
        posix.unlink(path)
    except OSError:
        pass


def _remove_stale_temporaries(directory, name):
    """Delete the temporary files of writers of ``name`` killed mid-write (their
    process is gone), and those of its journal's (``NAME.journal``: a learn
    that starts a journal does not list the folder).  Best effort: any error
    leaves the file where it is."""
    import os
    prefix = "." + name + "."
    journal = prefix + JOURNAL_SUFFIX[1:] + "."
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        if not (entry.startswith(prefix) and entry.endswith(".tmp")):
            continue
        pid = entry[len(journal if entry.startswith(journal) else prefix):].split(".", 1)[0]
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
    return _file_checksum(fields, checks.checksum64(body))


def _file_checksum(fields, body_checksum):
    """The file's checksum from the fixed fields and the body's ``checksum64``."""
    head = _PREFIX.pack(*fields, 0)[:32]
    return checks.checksum64(head + body_checksum.to_bytes(8, "little"))


def _fsync_directory(directory):
    try:
        fd = posix.open(directory, posix.O_RDONLY)
    except OSError:
        return
    try:
        posix.fsync(fd)
    except OSError:
        pass
    finally:
        posix.close(fd)


def read_model(path, max_size=None):
    """Read a model file into memory and check it; returns ``(header, arrays)``.

    ``max_size``: the largest file read (default :data:`MAX_MODEL_SIZE`); a
    larger one, anything but a regular file, and a file whose first 40 bytes
    are not a model's of its length are refused (ModelError) before the rest
    is read.

    ``arrays`` maps names to read-only memoryviews of the given typecode over
    the file's bytes (which they keep alive), read into private memory
    (``arrays.writable``: the same as writable bytes); the header's
    ``"_identity"`` is the file's (length, checksum).  Raises ModelError.  A file that
    changed while it was read (rewritten in place) is read again.
    """
    path = posix.fspath(path)
    max_size = MAX_MODEL_SIZE if max_size is None else max_size
    for attempt in range(_READ_TRIES):
        try:
            view, before = _read_whole(path, max_size)
        except errors.ModelError as exc:   # its prefix refused: read again if the file was changing
            before = getattr(exc, "signature", None)
            if before is None or attempt + 1 == _READ_TRIES or not _changed(path, before):
                raise
            time.sleep(0.01 * (attempt + 1))
            continue
        try:
            return _parse(path, view, len(view))
        except errors.ModelError:
            if attempt + 1 == _READ_TRIES or not _changed(path, before):
                raise
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


def map_model(path, max_size=None):
    """Read a model file in part, for one message's score; returns ``(header,
    arrays)`` as :func:`read_model` does, with ``header["_mapped"]`` True
    (the name is older than this reader: the file is no longer mapped).

    The file's type, size and first 40 bytes are checked as by
    :func:`read_model`; the header (JSON) and every array's bounds within
    the file (against the file's size), alignment and overlap are checked;
    then the arrays are read (``pread``) into private memory (an anonymous
    mapping the size of the file, whose pages cost nothing until written),
    all but those of :data:`ON_DEMAND`: the hash index, the counts and
    their logs, the token strings and the last-seen days, which a scorer
    reads a message's entries of from the file itself (``arrays.file``,
    kept open: ``spamnb.estimator.scoring``).  Those are read whole when
    something needs them (``arrays.fill()``: a journal's replay, a forget,
    a save; a learn appends to the journal without them,
    ``spamnb.model.learning``), in huge pages when this process holds the
    model's :func:`locked` (a writer: as :func:`read_model` reads); until
    then their memory holds zeros, so nothing but ``fill`` may read them.
    The ledger's arrays (:data:`LEDGER`) are left unread too, until their
    reader asks for them (``arrays.fill_unread(LEDGER)``).  The whole-file checksum is not
    checked: it would read every byte, the cost this reader exists to spare
    (``spamnb classify`` of one message); what a damaged array could do is
    bounded where it is read, and :func:`verify_file` checks the whole file
    (``spamnb info --check``).

    The file is never mapped: a mapped file cut short in place (``cp`` over
    it, ``truncate``) faults its reader on the first page touched past its
    new end, with SIGBUS, which Python cannot catch; a ``pread`` past the
    end is a short read, refused with one line.  A model is replaced by
    rename (:func:`write_model`): the file kept open stays the one read (its
    inode) however the path changes.  ``fill`` checks that the file has the
    size and times it had when opened, before and after it reads, and every
    read that comes short is refused: a file rewritten in place meanwhile is
    refused (ModelError) as far as its size or times show it (a rewrite of
    the same size within one tick of the file system's clock is not seen:
    what is read is then bounded as a damaged file's is).  A file that
    changes while it is opened and checked is read again (a few times), as
    by :func:`read_model`.
    """
    path = posix.fspath(path)
    max_size = MAX_MODEL_SIZE if max_size is None else max_size
    for attempt in range(_READ_TRIES):
        try:
            return _map_once(path, max_size)
        except errors.ModelError as exc:   # read again if the file was changing
            before = getattr(exc, "signature", None)
            if before is None or attempt + 1 == _READ_TRIES or not _changed(path, before):
                raise
            time.sleep(0.01 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


# The arrays a model read by map_model leaves unread until ``arrays.fill()``:
# the large ones, which a scorer reads a message's entries of with pread.
ON_DEMAND = frozenset({"keys", "values", "offsets", "strings", "feature_count", "log_count", "last_seen",
                       "pair_mixture"})
# ... and the ledger of learned messages, which a classify never reads (257 KiB of digests on the
# Enron-Spam model): read by ``arrays.fill_unread(LEDGER)`` where it is used (its readers: the filter's
# ``ledger_``, a learn's look-up of a digest), in small pages whoever reads it.
LEDGER = frozenset({"ledger_digests", "ledger_labels", "ledger_notes"})


def _map_once(path, max_size):
    with _opened(path, max_size) as (fd, st):
        size = st.st_size
        signature = _signature(st)
        try:
            # the prefix and the header are read first; the arrays' bounds are checked against the size
            prefix = posix.pread(fd, _PREFIX.size, 0)
            if len(prefix) < _PREFIX.size:   # cut short since it was checked
                raise errors.ModelError(f"{path}: model file is damaged (truncated to {len(prefix)} bytes)")
            header_length = _PREFIX.unpack_from(prefix)[3]
            wanted = _PREFIX.size + min(header_length, size - _PREFIX.size)
            head = posix.pread(fd, wanted, 0)
            if len(head) < wanted:   # cut short since the prefix was read
                raise errors.ModelError(f"{path}: model file is damaged (truncated to {len(head)} bytes)")
            # small pages until the large arrays are read (fill): a learn writes a few pages of it (the
            # header, the ledger), and a huge page is 2 MiB zeroed for each (and may wait for the kernel to
            # compact memory); a writer (it holds the model's lock) that reads them whole then advises huge
            # pages, as read_model's
            memory = _private_memory(size, huge=False)
            header, arrays = _parse(path, memory, size, verify=False, head=head)
            if _HELD and holds_lock(resolve(path)):   # (resolve: only when this process holds a lock)
                arrays.huge_later = memory
        except errors.ModelError as exc:
            exc.signature = signature
            raise
        file = open(posix.dup(fd), "rb", buffering=0)   # kept open: the file read, whatever the path becomes
    arrays.file = file
    arrays.path, arrays.signature = path, signature
    arrays.unread = set(name for name in arrays.offsets if name in ON_DEMAND or name in LEDGER)
    try:   # the small ones now (the held-out scores, ...); the large ones and the ledger when something needs them
        arrays.fill(set(arrays.offsets) - ON_DEMAND - LEDGER)
    except errors.ModelError as exc:
        file.close()
        exc.signature = signature
        raise
    header["_mapped"] = True
    return header, arrays


def verify_file(path, max_size=None):
    """Check a model file whole: what :func:`read_model` checks (the
    checksum of every byte included); ModelError when it fails."""
    read_model(path, max_size)


def _signature(st):
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _changed(path, before):
    try:
        return _signature(posix.stat(path)) != before
    except OSError:
        return True


def _private_memory(size, huge=True):
    """Writable zeroed memory of ``size`` bytes that no file backs (a rewrite of
    the model cannot change or remove it): an anonymous private mapping, which
    the kernel zero-fills as pages are first touched (huge pages from
    :data:`_HUGE_PAGES_FROM` where it gives them; ``checks.PrivateMemory``,
    not the standard library's ``mmap``, a module more on a cold classify's
    path); a bytearray where there is no such mapping."""
    try:
        return memoryview(checks.PrivateMemory(size, huge and size >= _HUGE_PAGES_FROM))
    except (OSError, ValueError, OverflowError):
        return memoryview(bytearray(size))


def _advise_huge(memory):
    """Advise huge pages for the pages of ``memory`` (a memoryview of
    :func:`_private_memory`'s mapping) not touched yet, from
    :data:`_HUGE_PAGES_FROM` bytes on."""
    mapping = memory.obj
    if isinstance(mapping, checks.PrivateMemory) and len(mapping) >= _HUGE_PAGES_FROM:
        mapping.advise_huge()


def _check_prefix(path, fd, size):
    """Refuse (ModelError) a file whose first bytes are not a model's prefix
    stating its length: read before the whole file is (a sparse file of
    zeros, a file of another kind, is refused at once)."""
    prefix = posix.pread(fd, _PREFIX.size, 0)
    if len(prefix) < _PREFIX.size:
        raise errors.ModelError(f"{path}: not a spamnb model (too short: {len(prefix)} bytes)")
    _check_fields(path, _PREFIX.unpack_from(prefix), size)


def _check_fields(path, fields, size):
    """Refuse (ModelError) a prefix's fields (``_PREFIX``) that do not name a
    model of this format ``size`` bytes long."""
    magic, version, _reserved, _header_length, total, _checksum = fields
    if magic != MAGIC:
        raise errors.ModelError(f"{path}: not a spamnb model file")
    if version != FORMAT_VERSION:
        newer = "newer than" if version > FORMAT_VERSION else "older than"
        raise errors.ModelError(f"{path}: model format version {version} is {newer} this spamnb's ({FORMAT_VERSION})")
    if total != size:
        raise errors.ModelError(f"{path}: model file is damaged (length {size}, expected {total}: truncated?)")


class _opened:   # noqa: N801 -- used as a function: with _opened(path, max_size) as (fd, st)
    """``(fd, posix.stat)`` of the model file at ``path``, opened without
    blocking (a FIFO never waits for a writer) and closed on leaving, once its
    type, its size (at most ``max_size``) and its 40-byte prefix are checked;
    every failure, there or in the block, as ModelError (a refused prefix
    carries the file's ``signature``: :func:`read_model` reads a file that
    changed again).  A class, not ``contextlib.contextmanager``: a cold
    ``spamnb classify`` opens a model and imports nothing for it."""

    __slots__ = ("path", "max_size", "fd")

    def __init__(self, path, max_size):
        self.path, self.max_size, self.fd = path, max_size, None

    def __enter__(self):
        path, max_size = self.path, self.max_size
        try:
            fd = self.fd = posix.open(path, posix.O_RDONLY | posix.O_NONBLOCK | getattr(posix, "O_CLOEXEC", 0))
            st = posix.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError
            if not stat.S_ISREG(st.st_mode):
                raise errors.ModelError(f"{path}: not a regular file, not a model")
            size = st.st_size
            if size > max_size:
                raise errors.ModelError(f"{path}: {size} bytes, larger than the {_size_text(max_size)} limit "
                                 "for a model file; not read")
            try:
                if size < _PREFIX.size:
                    raise errors.ModelError(f"{path}: not a spamnb model (too short: {size} bytes)")
                _check_prefix(path, fd, size)
            except errors.ModelError as exc:
                exc.signature = _signature(st)
                raise
        except BaseException as exc:
            self.__exit__(type(exc), exc, None)
            raise
        return fd, st

    def __exit__(self, kind, exc, traceback):
        if self.fd is not None:
            fd, self.fd = self.fd, None
            posix.close(fd)
        if kind is not None and issubclass(kind, OSError):
            raise _open_error(self.path, exc) from None


def _open_error(path, exc):
    """The ModelError of an OSError met opening or reading the model file at ``path``."""
    if isinstance(exc, IsADirectoryError):
        return errors.ModelError(f"{path}: is a directory, not a model file")
    if isinstance(exc, FileNotFoundError):
        return errors.ModelError(f"{path}: no model there (train one with 'spamnb train')")
    if isinstance(exc, PermissionError):
        return errors.ModelError(f"{path}: permission denied")
    return errors.ModelError(f"{path}: cannot read the model: {exc.strerror or exc}")


def _read_whole(path, max_size=MAX_MODEL_SIZE):
    """(memoryview of the file's bytes in private memory, its stat signature
    when opened); the file's type, size (at most ``max_size``) and prefix
    checked first (:func:`_opened`)."""
    with _opened(path, max_size) as (fd, st):
        size = st.st_size
        view = _private_memory(size)
        done = 0
        while done < size:
            n = posix.readv(fd, [view[done:]])
            if n == 0:  # shrank since fstat (rewritten in place): what was read fails the checks
                break
            done += n
    return view[:done], _signature(st)


def _size_text(n):
    for unit, name in ((1 << 30, "GiB"), (1 << 20, "MiB")):
        if n >= unit and not n % unit:
            return f"{n // unit} {name}"
    return f"{n} bytes"


def _parse(path, memory, size, verify=True, head=None):
    """``(header, arrays)`` of the model file in ``memory`` (``size`` bytes);
    ``head``: its prefix and header read apart (:func:`map_model`), else they
    are taken from ``memory``."""
    view = memory.toreadonly()
    if size < _PREFIX.size:
        raise errors.ModelError(f"{path}: model file is damaged (truncated to {size} bytes)")
    head = view if head is None else head
    fields = _PREFIX.unpack_from(head)
    _check_fields(path, fields, size)
    magic, version, _reserved, header_length, total, checksum = fields
    if header_length > size - _PREFIX.size or header_length % _ALIGN or len(head) < _PREFIX.size + header_length:
        raise errors.ModelError(f"{path}: model file is damaged (bad header length)")
    if verify and _checksum((magic, version, _reserved, header_length, total), view[_PREFIX.size:]) != checksum:
        raise errors.ModelError(f"{path}: model file is damaged (checksum mismatch)")
    try:
        header = _json_loads(bytes(head[_PREFIX.size:_PREFIX.size + header_length]))
        if not isinstance(header, dict) or not isinstance(header.get("arrays"), dict):
            raise ValueError("no array table")
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: JSON nested too deep
        raise errors.ModelError(f"{path}: model header is unreadable ({' '.join(str(exc).split())[:200]})") from None
    base = _PREFIX.size + header_length
    arrays = _Arrays()
    spans = []
    for name, entry in header["arrays"].items():
        try:
            offset, count, typecode = entry
            itemsize = _ITEMSIZE[typecode]
            if not (isinstance(offset, int) and isinstance(count, int)) or offset < 0 or count < 0:
                raise ValueError
        except (ValueError, TypeError, KeyError):
            raise errors.ModelError(f"{path}: model header describes array {name!r} wrongly") from None
        start = base + offset
        end = start + count * itemsize
        if start % _ALIGN or end > size:
            raise errors.ModelError(f"{path}: array {name!r} lies outside the model file")
        arrays[name] = view[start:end].cast(typecode) if typecode != "B" else view[start:end]
        arrays.writable[name] = memory[start:end]
        arrays.offsets[name] = start
        spans.append((start, end, name))
    spans.sort()
    for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
        if start < end:  # one byte read as two things: never written so, refuse it
            raise errors.ModelError(f"{path}: arrays {first!r} and {second!r} overlap in the model file")
    header["_identity"] = (total, checksum)   # which file this is: what a journal extends (spamnb.persistence.journal)
    return header, arrays


_JSON_SPACE = " \t\n\r"   # what JSON allows around a value


def _json_loads(data):
    """``json.loads(data)`` of a model's header without importing :mod:`json`
    (its four modules, a cold ``spamnb classify`` imported for this alone):
    the compiled scanner ``json`` itself uses (``_json``), with ``json.loads``'s settings, on the UTF-8
    text.  Anything it does not read whole and cleanly (an error, a byte
    order mark, another encoding) goes to ``json.loads``, which gives its
    value or its error: the result is ``json.loads``'s either way."""
    try:
        import _json

        text = data.decode("utf-8")
        start = len(text) - len(text.lstrip(_JSON_SPACE))
        value, end = _json.make_scanner(_JsonContext())(text, start)
        if text[end:].strip(_JSON_SPACE):
            raise ValueError("extra data")
        return value
    except Exception:   # noqa: BLE001 -- json.loads decides, and names the error
        import json

        return json.loads(data)


class _JsonContext:
    """The settings ``json.loads`` gives its scanner (``json.JSONDecoder()``'s)."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


class _Arrays(dict):
    """The arrays of a model file read (name -> read-only memoryview), and in
    ``writable`` the same as writable bytes of the reader's private copy: a
    journal's learns are applied there (``spamnb.persistence.journal``); ``offsets``
    where each starts in the file.  Read by :func:`map_model`: ``file`` the
    file itself, open (a message's entries are read from it: ``spamnb.estimator.scoring``),
    and ``unread`` the names of the arrays not read yet (:meth:`fill`)."""

    def __init__(self):
        super().__init__()
        self.writable = {}
        self.offsets = {}   # each array's byte offset in the file
        self.file = None    # a model's file, open, when read in part (spamnb.persistence.store.map_model)
        self.unread = set()
        self.path = self.signature = None
        self.huge_later = None   # a writer's private memory: advised huge pages when the large arrays are read
        self._lock = None

    def fill(self, names=None):
        """Read the arrays ``names`` (default: every one not read yet) from the
        file into their memory.  ModelError when the file is no longer the
        one opened (its size or times changed: rewritten in place) or comes
        short: nothing read is used then."""
        todo = set(self.unread) if names is None else set(names) & set(self.writable)
        if not todo:
            return
        import _thread   # threading's lock, without threading's import (a classify's cold path)

        if self._lock is None:
            self._lock = _thread.allocate_lock()
        with self._lock:
            todo &= set(self.writable) if names is not None else set(self.unread)
            fd = self.file.fileno()
            self._check_unchanged(fd)
            if self.huge_later is not None and todo & ON_DEMAND:   # before their pages are first touched
                _advise_huge(self.huge_later)
                self.huge_later = None
            for name in sorted(todo, key=self.offsets.get):
                target, at, done = self.writable[name], self.offsets[name], 0
                while done < len(target):
                    n = posix.preadv(fd, [target[done:]], at + done)
                    if n <= 0:
                        raise errors.ModelError(f"{self.path}: the model file was cut short while in use; read it again")
                    done += n
            self._check_unchanged(fd)
            self.unread -= todo

    def fill_unread(self, names):
        """:meth:`fill` of those of ``names`` not read yet (none: nothing done)."""
        todo = self.unread & set(names)
        if todo:
            self.fill(todo)

    def find_digest(self, name, digest, part=1 << 16, other=None):
        """``checks.find_digest`` of ``digest`` (and ``other``: both in one pass,
        a pair of places) among the 16-byte entries of the
        array ``name``: searched where it was read, or, unread, read from the
        file ``part`` bytes at a time, never into its memory (a learn's lookup
        in the model's ledger: the pages of a whole copy cost it more than the
        search).  The place of its first entry, or -1; ModelError as :meth:`fill`."""
        if name not in self.unread:
            return checks.find_digest(self[name], digest, other)
        at, size = self.offsets[name], len(self.writable[name])
        fd = self.file.fileno()
        found, other_found, done = -1, -1, 0
        while done < size:
            chunk = posix.pread(fd, min(part, size - done), at + done)   # whole entries: part is a multiple of 16
            if not chunk or len(chunk) % 16:
                raise errors.ModelError(f"{self.path}: the model file was cut short while in use; read it again")
            if other is None or other_found >= 0:   # the other's first place known: the digest's alone
                found = checks.find_digest(chunk, digest)
            else:
                found, other_found = checks.find_digest(chunk, digest, other)
                other_found += done // 16 if other_found >= 0 else 0
            if found >= 0:
                found += done // 16
                break
            done += len(chunk)
        self._check_unchanged(fd)   # the file as loaded, before and while it was read (its signature then)
        return found if other is None else (found, other_found)

    def _check_unchanged(self, fd):
        try:
            now = _signature(posix.fstat(fd))
        except OSError as exc:
            raise errors.ModelError(f"{self.path}: cannot read the model: {exc.strerror or exc}") from None
        if now != self.signature:
            raise errors.ModelError(f"{self.path}: the model file was rewritten in place while in use; read it again")

    def token(self, index):
        """The token string of feature ``index`` read from the file (``pread``:
        the token strings need not be read whole for a verdict's evidence)."""
        if "strings" not in self.unread:
            raise ValueError("the token strings are read: use the vocabulary")
        n = len(self["offsets"]) - 1
        if not 0 <= index < n:
            raise IndexError(f"feature index {index} out of range for {n} features")
        fd = self.file.fileno()
        ends = posix.pread(fd, 16, self.offsets["offsets"] + 8 * index)
        if len(ends) != 16:
            raise errors.ModelError(f"{self.path}: the model file was cut short while in use")
        start, end = int.from_bytes(ends[:8], "little"), int.from_bytes(ends[8:], "little")
        if not start <= end <= len(self["strings"]):
            raise ValueError(f"{self.path}: token string offsets are out of range")
        text = posix.pread(fd, end - start, self.offsets["strings"] + start) if end > start else b""
        if len(text) != end - start:
            raise errors.ModelError(f"{self.path}: the model file was cut short while in use")
        return text.decode("utf-8", "surrogatepass")


_HELD = set()   # the models whose lock this process holds (spamnb.persistence.journal asks)


def holds_lock(real):
    """True when this process holds the lock of the model at the resolved path ``real``."""
    return real in _HELD


class locked:   # noqa: N801 -- used as a function: with locked(path, wait) as real
    """Hold an exclusive lock for read-modify-write of the model at ``path``.

    The lock is ``resolve(path) + ".lock"`` (flock), opened without following
    a symbolic link; concurrent writers queue up instead of losing each
    other's updates.  The holder's pid is written in it.  A writer waits at
    most ``wait`` seconds (default ``DEFAULT_WAIT``; ``math.inf``: forever),
    then raises :class:`LockTimeout` naming the holder.  Yields the resolved
    model path (write to that).  Readers need no lock: a model is replaced by
    rename, so they see the old file or the new one.  A class, not
    ``contextlib.contextmanager``: a cold ``spamnb learn`` takes the lock and
    imports nothing for it.
    """

    __slots__ = ("path", "wait", "fd", "real")

    def __init__(self, path, wait=None):
        self.path, self.wait, self.fd, self.real = path, wait, None, None

    def __enter__(self):
        path = self.path
        wait = DEFAULT_WAIT if self.wait is None else float(self.wait)
        shown = posix.fspath(path)
        real = resolve(path)
        old = stat_existing(real, shown)
        lock_path = real + ".lock"
        folder = _dirname(lock_path)
        found = stat_or_none(folder)
        if found is None or not stat.S_ISDIR(found.st_mode):   # a model's first save into a new folder
            import os

            os.makedirs(folder, exist_ok=True)
        # the owner reads and writes the lock whatever the model's mode (a model of mode 000 gave its lock 000:
        # the owner's next write could not open it); the group and others get the model's read and write bits
        mode = (stat.S_IMODE(old.st_mode) & 0o066) | 0o600 if old is not None else 0o666
        flags = (posix.O_RDWR | posix.O_CREAT | posix.O_NONBLOCK | getattr(posix, "O_NOFOLLOW", 0)
                 | getattr(posix, "O_CLOEXEC", 0))
        try:
            fd = posix.open(lock_path, flags, mode)
        except OSError as exc:
            raise errors.ModelError(f"{lock_path}: cannot open the model's lock: {exc.strerror or exc}") from None
        try:
            st = posix.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise errors.ModelError(f"{lock_path}: the model's lock is not a regular file")
            if st.st_nlink != 1:   # a hard link planted there: writing the pid would truncate another file
                raise errors.ModelError(f"{lock_path}: the model's lock has other names (a hard link); refusing to write it")
            if st.st_uid == posix.geteuid() and st.st_mode & 0o600 != 0o600:   # left without them (an older spamnb,
                posix.fchmod(fd, stat.S_IMODE(st.st_mode) | 0o600)              # a umask): the owner's again
            deadline = time.monotonic() + wait
            while True:
                if checks.try_lock(fd):   # flock(LOCK_EX | LOCK_NB), compiled: no fcntl module to load
                    break
                if time.monotonic() >= deadline:
                    holder = posix.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                    raise errors.LockTimeout(f"{shown}: the model is locked by process {holder} "
                                      f"(waited {wait:g} s; see --wait)") from None
                time.sleep(0.02)
            if posix.fstat(fd).st_size:   # a holder's pid left (it was killed): emptied first; an empty lock is
                posix.ftruncate(fd, 0)     # not truncated again (each truncation changes its times on disk)
            posix.pwrite(fd, f"{posix.getpid()}\n".encode(), 0)
        except BaseException:
            posix.close(fd)
            raise
        self.fd, self.real = fd, real
        _HELD.add(real)
        return real

    def __exit__(self, *exc):
        fd, self.fd = self.fd, None
        try:
            _HELD.discard(self.real)
            posix.ftruncate(fd, 0)
        finally:
            posix.close(fd)
        return False


# ---------------------------------------------------------------------------- the journal beside the model
# (spamnb.persistence.journal writes it, spamnb.persistence.journal_view reads it; what a load of a model
# without one needs is here, so that the load imports neither, and the file's layout both share)
JOURNAL_SUFFIX = ".journal"
JOURNAL_MAGIC = b"SPAMNB\x00J"
JOURNAL_VERSION = 2
JOURNAL_VERSIONS = (1, 2)   # read: a journal of version 1 is appended to as version 1 (records.without_sums)
# the size of a journal without records, its header alone (JOURNAL_HEAD's): what a whole save leaves beside
# the model it wrote (spamnb.persistence.journal.save_whole), known by its size (a load reads none of it)
JOURNAL_EMPTY_SIZE = 48
# The journal's layouts (Layout: JOURNAL_HEAD, JOURNAL_RECORD) and its operations' (spamnb.persistence.records
# encodes them, deltas replays them; journal_view reads them, without the replay's module), made when first imported
# (__getattr__): a load of a model without a journal makes none
_JOURNAL_LAYOUTS = {
    "JOURNAL_HEAD": "<8sIIQQQQ",   # magic, version, reserved, model length, model checksum, reserved, checksum
    "JOURNAL_RECORD": "<IIQ",      # a record's payload length, sequence number, checksum
    "TOKENS_RECORD": "<BBxxiIIII",   # op, class, day, features before, hashes, new tokens, text bytes
    "LEDGER_RECORD": "<BBH16s",      # op, flags (bit 0 spam, bit 1 auto-learned), held-out bin + 1, digest
    "HELD_OUT_RECORD": "<BBxxf",    # op, class, log-odds (float32: a histogram bin is 0.25 wide)
    "PAIR_SCORES_RECORD": "<BBxxxxxxdddd",   # op, class, words, pairs, the mixture's weight and scale after
    "LEARN_SUMS_RECORD": "<BBxxxxxxdd",   # op, class, the learn's values' sum, their scale
}
# the operations' codes (spamnb.persistence.deltas describes each)
OP_LEARN, OP_FORGET, OP_RECORD, OP_REMOVE, OP_HELD_OUT, OP_HELD_OUT_BACK = 1, 2, 3, 4, 5, 6
OP_PAIR_SCORES = 7
OP_LEARN_SUMS = 8


def __getattr__(name):
    """The journal's layouts (``_JOURNAL_LAYOUTS``), ``LEDGER_SIZE`` (a RECORD/REMOVE with
    its padding) and ``JOURNAL_OPS_LAYOUT`` (the operations' layouts and codes, as the compiled
    passes over the records take them: ``checks.journal_learns``, ``journal_ledger``, which refuse
    others): made when first asked for (PEP 562); ``ModelError`` and ``LockTimeout``,
    :mod:`spamnb.errors`' (made when first named)."""
    if name == "LEDGER_SIZE":
        size = __getattr__("LEDGER_RECORD").size
        size = globals()[name] = size + (-size) % 8
        return size
    if name == "JOURNAL_OPS_LAYOUT":
        formats = [__getattr__(kind).format for kind in ("TOKENS_RECORD", "LEDGER_RECORD")]
        formats.append(__getattr__("LEDGER_SIZE"))
        formats.extend(__getattr__(kind).format for kind in ("HELD_OUT_RECORD", "PAIR_SCORES_RECORD",
                                                               "LEARN_SUMS_RECORD"))
        layout = globals()[name] = (*formats, OP_LEARN, OP_RECORD, OP_REMOVE, OP_HELD_OUT, OP_HELD_OUT_BACK,
                                    OP_PAIR_SCORES, OP_LEARN_SUMS)
        return layout
    if name not in _JOURNAL_LAYOUTS:
        return errors.reexported(__name__, name, ("ModelError", "LockTimeout"))
    layout = globals().get(name)
    if layout is None:
        layout = globals()[name] = Layout(_JOURNAL_LAYOUTS[name])
    return layout


def journal_path(model_path):
    """Where the journal of the model at ``model_path`` is: beside its real path."""
    return resolve(model_path) + JOURNAL_SUFFIX


class Journal:
    """What was read of a journal (``spamnb.persistence.journal.read``):
    ``status`` "none" (no journal), "stale" (it extends another model file),
    "ok"; the payloads of the good records (``n_records`` of them); ``end`` the offset after the
    last good record; ``size`` the file's size; ``version`` its format's
    (None: no journal read, one written is of the current version)."""

    def __init__(self, path, identity, status="none", payloads=(), end=0, size=0, head=b"", version=None, scan=None):
        self.path, self.identity, self.status = path, identity, status
        self._payloads, self.end, self.size, self.head = list(payloads) if scan is None else None, end, size, head
        self.version = version
        # a reader's records read through a small buffer, not kept (spamnb.persistence.journal_view.read):
        # (read them, how many, the scan), the payloads read again when first asked for
        self.scan = scan

    @property
    def payloads(self):
        if self._payloads is None:
            self._payloads = self.scan[0](self)
        return self._payloads

    @payloads.setter
    def payloads(self, payloads):
        self._payloads = payloads

    @property
    def n_records(self):
        """How many good records (a scanned journal's, not read again for it)."""
        return len(self._payloads) if self._payloads is not None else self.scan[1]

    @property
    def damaged_tail(self):
        return self.status == "ok" and self.end is not None and self.size > self.end


def model_identity(path):
    """(length, checksum) of the model file at ``path`` now, or None."""
    try:
        fd = posix.open(path, posix.O_RDONLY | posix.O_NONBLOCK | getattr(posix, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        raw = posix.pread(fd, _PREFIX.size, 0)
    except OSError:
        return None
    finally:
        posix.close(fd)
    if len(raw) < _PREFIX.size:
        return None
    fields = _PREFIX.unpack_from(raw)
    return (fields[4], fields[5])


def replaced_since(path, identity):
    """Whether the model file at ``path`` is no longer the one whose
    ``identity`` (``(length, checksum)``) was read: replaced (a compaction) since."""
    now = model_identity(path)
    return now is not None and identity is not None and now != tuple(identity)
