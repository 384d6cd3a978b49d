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
import struct
import time

__all__ = ["RecordSender", "encode", "decode", "FrameReader", "QUEUE_BYTES", "HEAD_BYTES", "KEEP_BYTES",
           "MAX_FRAME", "EVIDENCE"]

QUEUE_BYTES = 4 * 1024 * 1024     # a worker's records waiting for the console, at most
HEAD_BYTES = 8 * 1024             # the header block kept in a record
FLUSH_SECONDS = 0.02              # records are written together, at most this long after the first
KEEP_BYTES = 1024 * 1024          # a message kept whole (--ui-keep-messages) only up to this size
MAX_FRAME = KEEP_BYTES + HEAD_BYTES + 64 * 1024
RECONNECT_SECONDS = 1.0           # a worker connects to a console started again at most this often
EVIDENCE = 24                     # the strongest tokens kept in a record
NOT_CHECKS = frozenset(("PING", "SKIP", "TELL", "-"))     # requests that are no check (their verdict hook did not run)


def header_block(message):
    """The header block of ``message`` (bytes), cut at :data:`HEAD_BYTES`."""
    from spamnb.mail.headers import header_of

    return header_of(message, HEAD_BYTES)


_NUMBERS = struct.Struct(">B8d4I")       # version, 8 floats, 4 counts
_STRINGS = ("label", "user", "verb", "front", "action", "reason")
_NAN = float("nan")


def _string(out, text):
    data = str(text).encode("utf-8", "replace")[:1000]
    out += len(data).to_bytes(2, "big")
    out += data


def encode(head, header=b"", message=b""):
    """One frame (its length first): ``head`` (the record's fields: the
    :data:`_STRINGS` and numbers, ``cutoffs`` a pair, ``evidence`` a list of
    ``(token, weight)``), the header block and the kept message.  Numbers and length-prefixed
    strings (a record costs a worker microseconds: no JSON, no pickle)."""
    evidence = head.get("evidence") or ()
    cutoffs = head.get("cutoffs") or (None, None)
    out = bytearray(_NUMBERS.pack(
        1, head.get("t", 0.0), head.get("score", 0.0), head.get("required", 0.0), head.get("log_odds", 0.0),
        head.get("p", 0.0), head.get("ms", 0.0), _NAN if cutoffs[0] is None else cutoffs[0],
        _NAN if cutoffs[1] is None else cutoffs[1], head.get("size", 0), head.get("tokens", 0),
        head.get("dropped", 0), len(evidence)))
    out += struct.pack(f">{len(evidence)}d", *(weight for _, weight in evidence))
    for name in _STRINGS:
        _string(out, head.get(name) or "")
    for token, _ in evidence:
        _string(out, token)
    out += len(header).to_bytes(4, "big")
    out += header
    out += len(message).to_bytes(4, "big")
    out += message
    return len(out).to_bytes(4, "big") + out


def decode(frame):
    """(head, header block, message) of a frame's body (after its length);
    ValueError (struct.error) when it is malformed."""
    values = _NUMBERS.unpack_from(frame, 0)
    if values[0] != 1:
        raise ValueError("unknown record version")
    at = _NUMBERS.size
    n = min(values[12], EVIDENCE)
    weights = struct.unpack_from(f">{n}d", frame, at)
    at += 8 * n

    def string():
        nonlocal at
        length = int.from_bytes(frame[at:at + 2], "big")
        text = frame[at + 2:at + 2 + length].decode("utf-8", "replace")
        at += 2 + length
        return text

    head = {name: string() for name in _STRINGS}
    tokens = [string() for _ in range(n)]
    head.update(t=values[1], score=values[2], required=values[3], log_odds=values[4], p=values[5], ms=values[6],
                cutoffs=[None if v != v else v for v in values[7:9]], size=values[9], tokens=values[10],
                dropped=values[11], evidence=[[token, round(weight, 4)] for token, weight in zip(tokens, weights)])
    length = int.from_bytes(frame[at:at + 4], "big")
    start = frame[at + 4:at + 4 + length]
    at += 4 + length
    length = int.from_bytes(frame[at:at + 4], "big")
    return head, header_block(start), frame[at + 4:at + 4 + length]     # cut again: bounded whatever was sent


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
        self.tried = 0.0            # the last connection attempt (time.monotonic())
        self.connecting = None

    async def connect(self):
        """Connect (a server's ``on_ready`` hook); no console: records are dropped and counted."""
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

    def on_request(self, verb, user, outcome, size, ms, peer, protocol, action):
        """The request hook: send the check kept, completed, when this request
        was a check; never raises (a record that cannot be made is dropped and
        counted: the request was answered already)."""
        pending, self.pending = self.pending, None
        if pending is None or verb in NOT_CHECKS:
            return
        try:
            self._send(pending, verb, ms, protocol, action)
        except Exception:  # noqa: BLE001 - the check is answered; only its record is lost, and counted
            self.dropped += 1

    def _send(self, pending, verb, ms, protocol, action):
        checked, message, user, when = pending
        transport = self.transport
        if transport is None or transport.is_closing():
            self.dropped += 1
            self._reconnect()
            return
        verdict = checked.verdict
        cutoffs = getattr(checked.model, "cutoffs", None)
        head = {"t": when, "label": verdict.label, "score": checked.score, "required": checked.score_map.required,
                "log_odds": verdict.log_odds, "p": verdict.probability, "user": user or "", "verb": verb,
                "front": protocol, "action": action, "size": len(message), "ms": ms,
                "cutoffs": (cutoffs.spam, cutoffs.ham) if cutoffs is not None else None,
                "evidence": verdict.evidence[:EVIDENCE], "reason": verdict.reason, "dropped": self.dropped,
                "tokens": verdict.tokens or 0}
        frame = encode(head, header_block(message), message if self.keep and len(message) <= KEEP_BYTES else b"")
        if transport.get_write_buffer_size() + len(self.out) + len(frame) > QUEUE_BYTES:
            self.dropped += 1
            return
        if not self.out:
            asyncio.get_running_loop().call_later(FLUSH_SECONDS, self.flush)
        self.out += frame
        self.sent += 1

    def flush(self):
        """Write the records gathered (the socket takes what it can at once, the
        transport keeps the rest: bounded by :data:`QUEUE_BYTES` above)."""
        if self.out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(bytes(self.out))
        self.out.clear()
