"""The worker side of the console: one record per check, handed to the
console process without ever delaying the check.

:class:`RecordSender` is installed by spamnb.console.process in the server
before the workers are forked: :meth:`RecordSender.on_verdict` is one of the
request handler's ``verdict_hooks`` (the one place both front ends reach:
spamnb.server.handler) and keeps the check; :meth:`RecordSender.on_request`,
one of the server's ``request_hooks`` (spamnb.server.daemon), completes it with
what only the front end knows (its protocol, the action taken, the time it
took) and keeps the record's inputs (the message itself, no copy: at most
:data:`HOLD_BYTES` of messages held, past which the frames are made at
once, or past :data:`HOLD_RECORDS`); :meth:`RecordSender.flush` makes their frames (one compiled call a
record, spamnb.console._frames.append_held: the verdict's fields read, the header block found and copied
once, straight from the message into the buffer; byte for byte :func:`_append`'s, the Python reference
``encode`` uses) and
hands them over :data:`FLUSH_SECONDS` after the first, to a Unix stream socket connected to the console's recorder in one
write; the asyncio transport's buffer is the queue.  Past
:data:`QUEUE_BYTES` (the recorder is behind: under SCHED_IDLE it waits
for the checks) or with no recorder connected, the records go to the worker's
**spool** instead: files in the socket's private folder, appended to once
a flush (one ``write``), handed to the recorder by a rename (``.part`` to
``.rec``) at :data:`SPOOL_CHUNK` bytes or :data:`SPOOL_SECONDS` after their
first record; the recorder reads them when it can and deletes each once
its records are committed.  A record is dropped (and counted: the count
travels in the next record) only past :data:`SPOOL_BYTES` of a worker's
spool not yet read, or when the disk refuses the write.  So a slow or
stopped recorder costs a check a share of one ``send`` or one ``write`` at
most, bounded memory and bounded disk, and loses no record; at a graceful
stop :meth:`RecordSender.close` hands over what the worker still holds.

A frame (:func:`encode`): its length, the record's numbers and
length-prefixed strings, the message's header block (at most
:data:`HEAD_BYTES`) and, with ``--ui-keep-messages``,
the whole message when it is at most :data:`KEEP_BYTES`.  The socket is
the server's own (a 0700 folder); the console still reads every frame
bounded (:class:`FrameReader`, :func:`decode`)."""

from __future__ import annotations

import asyncio
import collections
import os
import struct
import time

from spamnb.console._frames import append_held
from spamnb.mail.headers import header_length

__all__ = ["RecordSender", "encode", "decode", "unpack", "peek", "FrameReader", "QUEUE_BYTES", "HEAD_BYTES", "KEEP_BYTES",
           "MAX_FRAME", "EVIDENCE", "ENVELOPE", "SPOOL_BYTES", "SPOOL_CHUNK", "SPOOL_SECONDS", "SPOOL_READY",
           "spool_files", "evidence_of", "write_all"]

QUEUE_BYTES = 4 * 1024 * 1024     # a worker's records waiting for the console, at most
HEAD_BYTES = 8 * 1024             # the header block kept in a record
FLUSH_SECONDS = 0.02              # records are written together, at most this long after the first
KEEP_BYTES = 1024 * 1024          # a message kept whole (--ui-keep-messages) only up to this size
MAX_FRAME = KEEP_BYTES + HEAD_BYTES + 64 * 1024
SPOOL_BYTES = 256 * 1024 * 1024  # a worker's records on disk not yet read by the recorder, at most (then dropped)
SPOOL_CHUNK = 1024 * 1024         # a spool file is handed to the recorder at this size ...
SPOOL_SECONDS = 0.5               # ... or this long after its first record
SPOOL_READY = ".rec"              # a spool file the recorder may read (one being written ends in ".part")
NOTICE_ROOM = 64 * 1024           # a count of drops is sent past QUEUE_BYTES, up to this much more
CLOSE_SECONDS = 5.0               # a stopping worker waits this long at most for its records to reach the recorder
RECONNECT_SECONDS = 1.0           # a worker connects to a console started again at most this often
HOLD_BYTES = 1024 * 1024         # the messages a worker holds for the records not made yet, at most
HOLD_RECORDS = 2000               # ... and their records, at most
EVIDENCE = 24                     # the strongest tokens kept in a record
NOT_CHECKS = frozenset(("PING", "SKIP", "TELL", "-"))     # requests that are no check (their verdict hook did not run)


def header_block(message):
    """The header block of ``message`` (bytes), cut at :data:`HEAD_BYTES`."""
    return message[:header_length(message, HEAD_BYTES)]


_NUMBERS = struct.Struct(">BI8d4IHI")      # version, worker pid, 8 floats, 4 counts, evidence, strings' bytes
_FRAME_HEAD = struct.Struct(">IBI8d4IHI")   # the frame's length, then the numbers
_LENGTH = struct.Struct(">I")
_STRINGS = ("label", "user", "verb", "front", "action", "reason")
ENVELOPE = ("client", "helo", "mail_from", "rcpt_to", "auth")   # the milter's envelope (spamnb.server.milter)
_NAMES = _STRINGS + ENVELOPE
_COUNT = len(_NAMES)
STRING_CHARS = 1000         # a string of a record at most this long (the recipients: all of them, joined)
_NAN = float("nan")
_NO_ENVELOPE = ("", "", "", "", "")


def _clean(text):
    text = str(text)
    return (text if "\0" not in text else text.replace("\0", " "))[:STRING_CHARS]


def encode(head, header=b"", message=b"", envelope=None):
    """One frame (its length first): ``head`` (the record's fields: the
    :data:`_STRINGS` and numbers, ``cutoffs`` a pair, ``evidence`` a list of
    ``(token, weight)``), the header block, the kept message and the
    milter's ``envelope`` (a tuple of the :data:`ENVELOPE` strings, or
    None)."""
    cutoffs = head.get("cutoffs") or (None, None)
    return _frame((head.get("pid", 0), head.get("t", 0.0), head.get("score", 0.0), head.get("required", 0.0),
                   head.get("log_odds", 0.0), head.get("p", 0.0), head.get("ms", 0.0),
                   _NAN if cutoffs[0] is None else cutoffs[0], _NAN if cutoffs[1] is None else cutoffs[1],
                   head.get("size", 0), head.get("tokens", 0), head.get("dropped", 0)),
                  tuple(head.get(name) or "" for name in _STRINGS), head.get("evidence") or (), header, message, envelope)


def _frame(numbers, strings, evidence, header, message, envelope):
    """A frame of the record's ``numbers`` (in :data:`_NUMBERS`' order),
    ``strings`` (a tuple of the :data:`_STRINGS`), ``evidence``, header
    block, message and envelope (:func:`_append`'s, as bytes)."""
    out = bytearray()
    _append(out, numbers, strings, evidence, header, len(header), message, envelope)
    return bytes(out)


def _append(out, numbers, strings, evidence, source, head, message, envelope):
    """Append a frame to ``out`` (a bytearray): its header block the first
    ``head`` bytes of ``source`` (the checked message itself: copied once,
    straight into ``out``), the rest as :func:`_frame`'s.  One ``struct``
    call (the frame's length with the numbers) and one string joined and
    encoded, so a record costs a worker a few microseconds (no JSON, no
    pickle, no copy of the header block but the one in ``out``)."""
    n = len(evidence)
    strings = strings + (envelope or _NO_ENVELOPE)
    if n:
        strings = (*strings, *[token for token, _ in evidence])
    try:
        text = "\0".join(strings)
        clean = len(text) <= STRING_CHARS and text.count("\0") == len(strings) - 1
    except TypeError:
        clean = False
    if not clean:       # a string too long, holding a NUL or not a str: each one cleaned
        text = "\0".join([_clean(value) for value in strings])
    text = text.encode("utf-8", "replace")
    out += _FRAME_HEAD.pack(_NUMBERS.size + 8 * n + len(text) + 8 + head + len(message), 2, *numbers, 0, n,
                            len(text))
    if n:
        out += struct.pack(f">{n}d", *(weight for _, weight in evidence))
    out += text
    out += _LENGTH.pack(head)
    if head:
        out += source if head == len(source) else memoryview(source)[:head]
    out += _LENGTH.pack(len(message))
    if message:
        out += message


def unpack(frame):
    """A frame's body (after its length) as it lies: (its numbers, in
    :data:`_NUMBERS`' order, the version first; its strings, the
    :data:`_NAMES` then the evidence's tokens; its evidence packed as
    :func:`evidence_of` reads it, b"" for none; the header block; the
    message), no dict made (the recorder's way: spamnb.console.history's
    ``add_frames``); ValueError (struct.error) when it is malformed."""
    if type(frame) is not bytes:
        frame = bytes(frame)        # (its slices below are then bytes, no copy made twice)
    values = _NUMBERS.unpack_from(frame, 0)
    if values[0] != 2:
        raise ValueError("unknown record version")
    at = _NUMBERS.size
    n = values[14]
    if n:       # (a CHECK's record has none: that path is the recorder's usual one, a few steps shorter)
        if n > EVIDENCE:
            raise ValueError("too much evidence in a record")
        weights = frame[at:at + 8 * n]
        if len(weights) != 8 * n:
            raise ValueError("a record's evidence is cut short")
        at += 8 * n
    end = at + values[15]
    strings = frame[at:end].decode("utf-8", "replace").split("\0")
    if len(strings) != _COUNT + n:
        raise ValueError("a record's strings do not add up")
    evidence = bytes((n,)) + weights + "\0".join(strings[_COUNT:]).encode("utf-8", "replace") if n else b""
    length = int.from_bytes(frame[end:end + 4], "big")
    header = frame[end + 4:end + 4 + (length if length < HEAD_BYTES else HEAD_BYTES)]  # bounded whatever was sent
    at = end + 4 + length
    length = int.from_bytes(frame[at:at + 4], "big")
    return values, strings, evidence, header, frame[at + 4:at + 4 + length]


def peek(frame):
    """(worker pid, its count of drops, whether the frame is that count
    alone) of a frame's body: what the recorder reads of a frame at once
    (the rest when it stores the batch).  A count alone (:meth:`RecordSender.flush`)
    has no label and the verb "-"; a check always has a label."""
    values = _NUMBERS.unpack_from(frame, 0)
    at = _NUMBERS.size + 8 * values[14]
    return values[1], values[12], frame[at:at + 4] == b"\0\0-\0"


def decode(frame, packed=False):
    """(head, header block, message) of a frame's body (after its length);
    ValueError (struct.error) when it is malformed.  ``head`` holds the
    :data:`ENVELOPE` strings too (empty for a SPAMD check) and ``pid``,
    the worker's process id; its ``evidence`` a list of ``[token, weight]``,
    or with ``packed`` as the frame holds it (:func:`evidence_of` reads it)."""
    values, strings, evidence, header, message = unpack(frame)
    head = dict(zip(_NAMES, strings))
    head.update(pid=values[1], t=values[2], score=values[3], required=values[4], log_odds=values[5], p=values[6],
                ms=values[7], cutoffs=[None if v != v else v for v in values[8:10]], size=values[10],
                tokens=values[11], dropped=values[12],
                evidence=(evidence or []) if packed else evidence_of(evidence) if evidence else [])
    return head, header, message


def evidence_of(packed):
    """The evidence packed by :func:`decode` (its count, the weights, the
    tokens joined by NUL) as a list of ``[token, weight]`` (the weight to 4
    places); ValueError when it does not add up."""
    n = packed[0]
    tokens = packed[1 + 8 * n:].decode("utf-8", "replace").split("\0")
    if len(tokens) != n:
        raise ValueError("packed evidence does not add up")
    weights = struct.unpack_from(f">{n}d", packed, 1)
    return [[token, round(weight, 4)] for token, weight in zip(tokens, weights)]


class FrameReader:
    """Frames out of a stream, each at most :data:`MAX_FRAME` (a larger one
    raises ValueError: the console closes that connection)."""

    def __init__(self):
        self.buffer = bytearray()

    def feed(self, data):
        buffer = self.buffer
        buffer += data
        out = []
        at, end = 0, len(buffer)
        with memoryview(buffer) as view:       # each frame copied once, the frames read cut off at once
            while end - at >= 4:
                size = int.from_bytes(view[at:at + 4], "big")
                if size > MAX_FRAME or size < 4:
                    raise ValueError("record frame too large")
                if end - at - 4 < size:
                    break
                out.append(bytes(view[at + 4:at + 4 + size]))
                at += 4 + size
        del buffer[:at]
        return out


def frames_within(frames, room):
    """(bytes, count) of the first of ``frames`` (each length-prefixed) that
    fit in ``room`` bytes."""
    at, n = 0, 0
    while at + 4 <= len(frames):
        end = at + 4 + int.from_bytes(frames[at:at + 4], "big")
        if end > room:
            break
        at, n = end, n + 1
    return at, n


def write_all(fd, data):
    """Write all of ``data`` to ``fd`` (OSError as ``os.write``)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def spool_files(folder):
    """The spool files ready in ``folder`` (full paths), oldest first by each
    worker's sequence (their names: ``spool-PID-SEQ.rec``)."""
    try:
        names = [name for name in os.listdir(folder) if name.startswith("spool-") and name.endswith(SPOOL_READY)]
    except OSError:
        return []
    return [os.path.join(folder, name) for name in sorted(names)]


class RecordSender:
    """A worker's connection to the console (``path``: its Unix socket);
    ``keep``: send the messages too (``--ui-keep-messages``).  Its spool
    (the module's docstring) is in the socket's folder."""

    defer = True        # a record's frame made at the flush (False: at once, as the check is answered)

    def __init__(self, path, keep=False, spool=None):
        self.path = path
        self.folder = spool or os.path.dirname(path)     # the spool's folder (the server's: beside the history)
        self.keep = keep
        self.transport = None
        self.out = bytearray()      # records not handed over yet: one write a FLUSH_SECONDS, not one a check
        self.out_records = 0        # ... how many
        self.held = []              # the inputs of the records whose frames are not made yet (:meth:`_build`)
        self.held_bytes = 0         # ... the bytes of their messages: at most HOLD_BYTES
        self.pending = None
        self.sent = 0
        self.dropped = 0
        self.spooled = 0            # records put in the spool (on disk, for the recorder to read when it can)
        self.reported = 0           # the drops the console was told of (each frame carries the count)
        self.scheduled = False      # a flush is due
        self.tried = 0.0            # the last connection attempt (time.monotonic())
        self.connecting = None
        self.pid = os.getpid()
        self.spool = bytearray()    # records for the spool, written at the next flush
        self.spool_records = 0      # ... how many
        self.spool_fd = None        # the spool file being written (``.part``), its name, size and first write
        self.spool_name, self.spool_size, self.spool_started = "", 0, 0.0
        self.spool_file_records = 0
        self.spool_seq = 0
        self.handed = collections.deque()   # (path, size) of the spool files handed over, maybe not read yet
        self.spool_bytes = 0        # their bytes and the current file's: bounded by SPOOL_BYTES
        self.handing = False        # a hand-over of the current spool file is due
        self.written = collections.deque()  # what was written to the transport and may not be sent yet: at
        self.written_bytes = 0              # least its buffer's bytes (:meth:`_unsent`), whole frames

    async def connect(self):
        """Connect (a server's ``on_ready`` hook); no console: records are spooled."""
        self.pid = os.getpid()      # the worker's (forked after this object was made): its drops are counted once
        self.tried = time.monotonic()
        try:
            self.transport, _ = await asyncio.get_running_loop().create_unix_connection(asyncio.Protocol, self.path)
        except OSError:
            self.transport = None

    async def close(self):
        """At a graceful stop (a server's ``on_stop`` hook, the requests
        answered): the records gathered go to the spool (not to the socket:
        a stopping recorder stores nothing more), the transport's buffer is
        given :data:`CLOSE_SECONDS` to reach the recorder (which puts what it
        reads at a stop in a spool file of its own), the frames it still
        holds then go to the spool too (:meth:`_unsent`) and the connection
        is aborted; the spool's file is written to disk (``fsync``) and
        handed over.  The spool is the history's (spamnb.console.process):
        the next start's recorder stores it first."""
        self._build()
        if self.out:
            out, n = self.out, self.out_records
            self.out, self.out_records = bytearray(), 0
            self._to_spool(out, n)
        transport = self.transport
        if transport is not None and not transport.is_closing():
            deadline = time.monotonic() + CLOSE_SECONDS
            while transport.get_write_buffer_size() and time.monotonic() < deadline and not transport.is_closing():
                await asyncio.sleep(0.01)
            unsent = self._unsent(transport.get_write_buffer_size())
            if unsent:      # the recorder did not take them in time: spooled, whole (the one begun too)
                self._to_spool(unsent, frames_within(unsent, len(unsent))[1])
        if self.spool:
            self._write_spool()
        if self.spool_fd is not None:
            try:
                os.fsync(self.spool_fd)
            except OSError:
                pass
        self._close_spool()
        if transport is not None:
            transport.abort()       # its buffer is in the spool now: not sent as well (a frame cut short is
            # dropped by the recorder's reader at the connection's end)

    def _unsent(self, pending):
        """The frames of which the transport still holds some of the last
        ``pending`` bytes written (the one partly sent, whole)."""
        if not pending:
            return b""
        data = b"".join(self.written)
        return data[frames_within(data, len(data) - pending)[0]:]   # past the frames sent whole

    def _write(self, transport, data):
        """``transport.write(data)`` (whole frames), kept while some of it may
        be in the transport's buffer."""
        transport.write(data)
        self.written.append(data)
        self.written_bytes += len(data)
        pending = transport.get_write_buffer_size()
        while self.written and self.written_bytes - len(self.written[0]) >= pending:
            self.written_bytes -= len(self.written.popleft())

    def _reconnect(self):
        """The console's connection is gone (its process died and another
        is started): connect again, at most once a :data:`RECONNECT_SECONDS`."""
        if self.connecting is not None and not self.connecting.done():
            return
        if time.monotonic() - self.tried < RECONNECT_SECONDS:
            return
        self.tried = time.monotonic()
        self.connecting = asyncio.get_running_loop().create_task(self.connect())

    def on_verdict(self, checked, message, user):
        """The verdict hook: keep the check until the front end is done with it."""
        self.pending = (checked, message, user, time.time())

    def on_request(self, verb, user, outcome, size, ms, peer, protocol, action, envelope=None):
        """The request hook: send the check kept, completed, when this request
        was a check (``envelope``: the milter's, a tuple of the
        :data:`ENVELOPE` strings); never raises (a record that cannot be
        made is dropped and counted: the request was answered already)."""
        pending, self.pending = self.pending, None
        if pending is None or verb in NOT_CHECKS:
            return
        try:
            self._send(pending, verb, ms, protocol, action, envelope)
        except Exception:  # noqa: BLE001 - the check is answered; only its record is lost, and counted
            self.dropped += 1

    def _send(self, pending, verb, ms, protocol, action, envelope):
        """Keep the record's inputs (the message itself, not a copy): its
        frame is made at the flush, with the others (:meth:`_build`), or now
        past :data:`HOLD_BYTES` of messages held."""
        self.held.append((pending, verb, ms, protocol, action, envelope))
        self.held_bytes += len(pending[1])
        if (self.held_bytes > HOLD_BYTES or len(self.held) >= HOLD_RECORDS or not self.defer
                or type(pending[1]) is not bytes):     # a buffer its owner may change: its frame made now
            self._build()
        if not self.scheduled:      # where they go (the socket or the spool) is decided once a flush
            self.scheduled = True
            asyncio.get_running_loop().call_later(FLUSH_SECONDS, self.flush)

    def _build(self):
        """The frames of the records held, appended to :attr:`out` (the
        header block copied once, from the message); a record whose frame
        cannot be made is dropped and counted."""
        held, self.held, self.held_bytes = self.held, [], 0
        made, self.dropped = append_held(self.out, held, self.pid, self.dropped, self.keep)
        self.out_records += made

    def _to_spool(self, frames, n):
        """Put ``frames`` (``n`` records) in the spool; those past
        :data:`SPOOL_BYTES` of spool the recorder has not read are dropped
        and counted."""
        if self.spool_bytes + len(self.spool) + len(frames) > SPOOL_BYTES:
            self._forget_read()
            room = SPOOL_BYTES - self.spool_bytes - len(self.spool)
            if len(frames) > room:
                cut, fit = frames_within(frames, room)
                self.dropped += n - fit
                frames, n = frames[:cut], fit
        self.spool += frames
        self.spool_records += n
        self.spooled += n

    def _forget_read(self):
        """The spool files the recorder has read (and deleted) no longer count."""
        while self.handed and not os.path.exists(self.handed[0][0]):
            self.spool_bytes -= self.handed.popleft()[1]

    def flush(self):
        """Hand the records gathered over: to the recorder's socket as far as
        its queue has room (the socket takes what it can at once, the
        transport keeps the rest: at most :data:`QUEUE_BYTES`), the rest to
        the spool (the recorder is behind, or gone: to be read when it can),
        and the spool's to its file."""
        self.scheduled = False
        self._build()
        transport = self.transport
        out, n = self.out, self.out_records
        self.out, self.out_records = bytearray(), 0
        if out:
            if transport is None or transport.is_closing():
                self._reconnect()
                self._to_spool(out, n)
            else:
                cut, fit = len(out), n
                room = QUEUE_BYTES - transport.get_write_buffer_size()
                if cut > room:
                    cut, fit = frames_within(out, room)
                if fit:
                    self._write(transport, out if cut == len(out) else out[:cut])
                    self.sent += fit
                    self.reported = self.dropped
                if fit < n:     # the recorder is behind: these records wait on disk, the checks do not
                    self._to_spool(out[cut:], n - fit)
        if self.spool:
            self._write_spool()
        if (self.dropped > self.reported and transport is not None and not transport.is_closing()
                and transport.get_write_buffer_size() < QUEUE_BYTES + NOTICE_ROOM):
            # records were dropped since the last frame: a frame of the count alone (verb "-", not stored)
            self._write(transport, encode({"pid": self.pid, "verb": "-", "dropped": self.dropped}))
            self.reported = self.dropped

    def _write_spool(self):
        """Append the spool's records to the worker's spool file (one write),
        handed to the recorder once it is large or old enough."""
        data, n = self.spool, self.spool_records
        self.spool, self.spool_records = bytearray(), 0
        try:
            if self.spool_fd is None:
                self.spool_seq += 1
                self.spool_name = os.path.join(self.folder, f"spool-{os.getpid()}-{self.spool_seq:010d}")
                # the spool outlives the server: a file of an earlier worker of the same pid is never replaced
                while os.path.exists(self.spool_name + ".part") or os.path.exists(self.spool_name + SPOOL_READY):
                    self.spool_seq += 1
                    self.spool_name = os.path.join(self.folder, f"spool-{os.getpid()}-{self.spool_seq:010d}")
                self.spool_fd = os.open(self.spool_name + ".part",
                                        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o600)
                self.spool_size, self.spool_started = 0, time.monotonic()
            write_all(self.spool_fd, data)
        except OSError:     # the disk is full, the folder gone: the file's records are lost, and counted
            self.dropped += n + self.spool_file_records
            self._close_spool(hand_over=False)
            return
        self.spool_size += len(data)
        self.spool_file_records += n
        self.spool_bytes += len(data)
        if self.spool_size >= SPOOL_CHUNK or time.monotonic() - self.spool_started >= SPOOL_SECONDS:
            self._close_spool()
        elif not self.handing:
            self.handing = True
            asyncio.get_running_loop().call_later(SPOOL_SECONDS, self._hand_over_due)

    def _hand_over_due(self):
        self.handing = False
        if self.spool_fd is not None and not self.spool:
            self._close_spool()

    def _close_spool(self, hand_over=True):
        fd, self.spool_fd = self.spool_fd, None
        if fd is None:
            return
        self.spool_file_records = 0
        os.close(fd)
        try:
            if hand_over:
                os.rename(self.spool_name + ".part", self.spool_name + SPOOL_READY)
                self.handed.append((self.spool_name + SPOOL_READY, self.spool_size))
                return
            os.unlink(self.spool_name + ".part")
        except OSError:
            pass
        self.spool_bytes -= self.spool_size
