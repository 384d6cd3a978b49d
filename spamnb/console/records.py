"""The worker side of the console: one record per check, handed to the
console process without ever delaying the check.

:class:`RecordSender` is installed by spamnb.console.process in the server
before the workers are forked: :meth:`RecordSender.on_verdict` is one of the
request handler's ``verdict_hooks`` (the one place both front ends reach:
spamnb.server.handler) and keeps the check; :meth:`RecordSender.on_request`,
one of the server's ``request_hooks`` (spamnb.server.daemon), completes it with
what only the front end knows (its protocol, the action taken, the time it
took) and sends it.  The record is written to a Unix stream socket connected
to the console, the records of :data:`FLUSH_SECONDS` in one write; the
asyncio transport's buffer is the queue: past :data:`QUEUE_BYTES` a
record is dropped and counted (the count travels in
the next record), so a slow or stopped console costs a check one ``send``
at most and bounded memory.

A frame (:func:`encode`): its length, the record's numbers and
length-prefixed strings, the message's header block (at most
:data:`HEAD_BYTES`) and, with ``--ui-keep-messages``,
the whole message when it is at most :data:`KEEP_BYTES`.  The socket is
the server's own (a 0700 folder); the console still reads every frame
bounded (:class:`FrameReader`, :func:`decode`)."""

from __future__ import annotations

import asyncio
import os
import struct
import time

__all__ = ["RecordSender", "encode", "decode", "FrameReader", "QUEUE_BYTES", "HEAD_BYTES", "KEEP_BYTES",
           "MAX_FRAME", "EVIDENCE", "ENVELOPE"]

QUEUE_BYTES = 4 * 1024 * 1024     # a worker's records waiting for the console, at most
HEAD_BYTES = 8 * 1024             # the header block kept in a record
FLUSH_SECONDS = 0.02              # records are written together, at most this long after the first
KEEP_BYTES = 1024 * 1024          # a message kept whole (--ui-keep-messages) only up to this size
MAX_FRAME = KEEP_BYTES + HEAD_BYTES + 64 * 1024
NOTICE_ROOM = 64 * 1024           # a count of drops is sent past QUEUE_BYTES, up to this much more
RECONNECT_SECONDS = 1.0           # a worker connects to a console started again at most this often
EVIDENCE = 24                     # the strongest tokens kept in a record
NOT_CHECKS = frozenset(("PING", "SKIP", "TELL", "-"))     # requests that are no check (their verdict hook did not run)


def header_block(message):
    """The header block of ``message`` (bytes), cut at :data:`HEAD_BYTES`."""
    from spamnb.mail.headers import header_of

    return header_of(message, HEAD_BYTES)


_NUMBERS = struct.Struct(">BI8d4IHI")      # version, worker pid, 8 floats, 4 counts, evidence, strings' bytes
_STRINGS = ("label", "user", "verb", "front", "action", "reason")
ENVELOPE = ("client", "helo", "mail_from", "rcpt_to", "auth")   # the milter's envelope (spamnb.server.milter)
_NAMES = _STRINGS + ENVELOPE
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
                  [head.get(name) or "" for name in _STRINGS], head.get("evidence") or (), header, message, envelope)


def _frame(numbers, strings, evidence, header, message, envelope):
    """A frame of the record's ``numbers`` (in :data:`_NUMBERS`' order),
    ``strings`` (the :data:`_STRINGS`), ``evidence``, header block, message
    and envelope: one ``struct`` call and one string joined and encoded, so
    a record costs a worker a few microseconds (no JSON, no pickle)."""
    strings = [*strings, *(envelope or _NO_ENVELOPE), *(token for token, _ in evidence)]
    try:
        text = "\0".join(strings)
        clean = len(text) <= STRING_CHARS and text.count("\0") == len(strings) - 1
    except TypeError:
        clean = False
    if not clean:       # a string too long, holding a NUL or not a str: each one cleaned
        text = "\0".join([_clean(value) for value in strings])
    text = text.encode("utf-8", "replace")
    packed = _NUMBERS.pack(2, *numbers, 0, len(evidence), len(text))
    weights = struct.pack(f">{len(evidence)}d", *(weight for _, weight in evidence)) if evidence else b""
    size = len(packed) + len(weights) + len(text) + 8 + len(header) + len(message)
    return b"".join((size.to_bytes(4, "big"), packed, weights, text, len(header).to_bytes(4, "big"), header,
                     len(message).to_bytes(4, "big"), message))


def decode(frame):
    """(head, header block, message) of a frame's body (after its length);
    ValueError (struct.error) when it is malformed.  ``head`` holds the
    :data:`ENVELOPE` strings too (empty for a SPAMD check) and ``pid``,
    the worker's process id."""
    values = _NUMBERS.unpack_from(frame, 0)
    if values[0] != 2:
        raise ValueError("unknown record version")
    at = _NUMBERS.size
    n = values[14]
    if n > EVIDENCE:
        raise ValueError("too much evidence in a record")
    weights = struct.unpack_from(f">{n}d", frame, at)
    at += 8 * n
    strings = bytes(frame[at:at + values[15]]).decode("utf-8", "replace").split("\0")
    at += values[15]
    if len(strings) != len(_NAMES) + n:
        raise ValueError("a record's strings do not add up")
    head = dict(zip(_NAMES, strings))
    head.update(pid=values[1], t=values[2], score=values[3], required=values[4], log_odds=values[5], p=values[6],
                ms=values[7], cutoffs=[None if v != v else v for v in values[8:10]], size=values[10],
                tokens=values[11], dropped=values[12],
                evidence=[[token, round(weight, 4)] for token, weight in zip(strings[len(_NAMES):], weights)])
    length = int.from_bytes(frame[at:at + 4], "big")
    start = frame[at + 4:at + 4 + length]
    at += 4 + length
    length = int.from_bytes(frame[at:at + 4], "big")
    return head, header_block(start), bytes(frame[at + 4:at + 4 + length])     # cut again: bounded whatever was sent


class FrameReader:
    """Frames out of a stream, each at most :data:`MAX_FRAME` (a larger one
    raises ValueError: the console closes that connection)."""

    def __init__(self):
        self.buffer = bytearray()

    def feed(self, data):
        self.buffer += data
        out = []
        while len(self.buffer) >= 4:
            (size,) = struct.unpack(">I", self.buffer[:4])
            if size > MAX_FRAME or size < 4:
                raise ValueError("record frame too large")
            if len(self.buffer) < 4 + size:
                break
            out.append(bytes(self.buffer[4:4 + size]))
            del self.buffer[:4 + size]
        return out


class RecordSender:
    """A worker's connection to the console (``path``: its Unix socket);
    ``keep``: send the messages too (``--ui-keep-messages``)."""

    def __init__(self, path, keep=False):
        self.path = path
        self.keep = keep
        self.transport = None
        self.out = bytearray()      # records not written yet: one write a FLUSH_SECONDS, not one a check
        self.pending = None
        self.sent = 0
        self.dropped = 0
        self.reported = 0           # the drops the console was told of (each frame carries the count)
        self.scheduled = False      # a flush is due
        self.tried = 0.0            # the last connection attempt (time.monotonic())
        self.connecting = None
        self.pid = os.getpid()

    async def connect(self):
        """Connect (a server's ``on_ready`` hook); no console: records are dropped and counted."""
        self.pid = os.getpid()      # the worker's (forked after this object was made): its drops are counted once
        self.tried = time.monotonic()
        try:
            self.transport, _ = await asyncio.get_running_loop().create_unix_connection(asyncio.Protocol, self.path)
        except OSError:
            self.transport = None

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
        checked, message, user, when = pending
        transport = self.transport
        if transport is None or transport.is_closing():
            self.dropped += 1
            self._reconnect()
            return
        verdict = checked.verdict
        cutoffs = getattr(checked.model, "cutoffs", None)
        spam_cut, ham_cut = (cutoffs.spam, cutoffs.ham) if cutoffs is not None else (_NAN, _NAN)
        frame = _frame((self.pid, when, checked.score, checked.score_map.required, verdict.log_odds,
                        verdict.probability, ms, spam_cut, ham_cut, len(message), verdict.tokens or 0, self.dropped),
                       (verdict.label, user or "", verb, protocol, action, verdict.reason or ""),
                       verdict.evidence[:EVIDENCE], header_block(message),
                       message if self.keep and len(message) <= KEEP_BYTES else b"", envelope)
        if transport.get_write_buffer_size() + len(self.out) + len(frame) > QUEUE_BYTES:
            self.dropped += 1
            self._schedule()        # the count reaches the console then, even if no record follows
            return
        self._schedule()
        self.out += frame
        self.reported = self.dropped
        self.sent += 1

    def _schedule(self):
        if not self.scheduled:
            self.scheduled = True
            asyncio.get_running_loop().call_later(FLUSH_SECONDS, self.flush)

    def flush(self):
        """Write the records gathered (the socket takes what it can at once, the
        transport keeps the rest: bounded by :data:`QUEUE_BYTES` above)."""
        self.scheduled = False
        transport = self.transport
        if transport is None or transport.is_closing():
            self.out.clear()
            return
        if self.dropped > self.reported and transport.get_write_buffer_size() + len(self.out) < QUEUE_BYTES + NOTICE_ROOM:
            # records were dropped since the last frame: a frame of the count alone (verb "-", not stored)
            self.out += encode({"pid": self.pid, "verb": "-", "dropped": self.dropped})
            self.reported = self.dropped
        if self.out:
            transport.write(self.out)       # (the transport copies what the socket does not take at once)
            self.out = bytearray()
