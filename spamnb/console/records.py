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

A frame: 4 bytes (big-endian) of length, then 4 bytes of the JSON head's
length, the JSON head, the message's header block (at most
:data:`HEAD_BYTES`) and, with ``--ui-keep-messages``, the whole message
when it is at most :data:`KEEP_BYTES`."""

from __future__ import annotations

import asyncio
import json
import struct
import time

__all__ = ["RecordSender", "encode", "decode", "FrameReader", "QUEUE_BYTES", "HEAD_BYTES", "KEEP_BYTES",
           "MAX_FRAME", "EVIDENCE"]

QUEUE_BYTES = 4 * 1024 * 1024     # a worker's records waiting for the console, at most
HEAD_BYTES = 8 * 1024             # the header block kept in a record
FLUSH_SECONDS = 0.02              # records are written together, at most this long after the first
KEEP_BYTES = 1024 * 1024          # a message kept whole (--ui-keep-messages) only up to this size
MAX_FRAME = KEEP_BYTES + HEAD_BYTES + 64 * 1024
EVIDENCE = 24                     # the strongest tokens kept in a record


def header_block(message):
    """The header block of ``message`` (bytes), cut at :data:`HEAD_BYTES`."""
    head = message[:HEAD_BYTES]
    for sep in (b"\r\n\r\n", b"\n\n"):
        end = head.find(sep)
        if end >= 0:
            return head[:end]
    return head


def encode(head, header=b"", message=b""):
    """One frame: ``head`` (a dict, JSON), the header block, the message."""
    head = dict(head, hlen=len(header), mlen=len(message))
    data = json.dumps(head, separators=(",", ":")).encode()
    return struct.pack(">II", 4 + len(data) + len(header) + len(message), len(data)) + data + header + message


def decode(frame):
    """(head, header block, message) of a frame's body (after its length)."""
    (jlen,) = struct.unpack(">I", frame[:4])
    head = json.loads(frame[4:4 + jlen])
    at = 4 + jlen
    header = frame[at:at + int(head.get("hlen", 0))]
    at += len(header)
    return head, header, frame[at:at + int(head.get("mlen", 0))]


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

    async def connect(self):
        """Connect (a server's ``on_ready`` hook); no console: records are dropped and counted."""
        try:
            self.transport, _ = await asyncio.get_running_loop().create_unix_connection(asyncio.Protocol, self.path)
        except OSError:
            self.transport = None

    def on_verdict(self, checked, message, user):
        """The verdict hook: keep what the record needs until the front end is done."""
        verdict = checked.verdict
        cutoffs = getattr(checked.model, "cutoffs", None)
        self.pending = (time.time(), verdict, checked.score, checked.score_map.required, user, message,
                        (getattr(cutoffs, "spam", None), getattr(cutoffs, "ham", None)), checked.outcome)

    def on_request(self, verb, user, outcome, size, ms, peer, protocol, action):
        """The request hook: send the kept check, completed, when this request is its one."""
        pending, self.pending = self.pending, None
        if pending is None or not outcome.startswith(pending[7]):
            return
        when, verdict, score, required, user, message, cutoffs, _ = pending
        transport = self.transport
        if transport is None or transport.is_closing():
            self.dropped += 1
            return
        evidence = [[str(token), round(float(weight), 4)] for token, weight in list(verdict.evidence)[:EVIDENCE]]
        head = {"t": when, "label": verdict.label, "score": score, "required": required,
                "log_odds": round(float(verdict.log_odds), 4), "p": float(verdict.probability),
                "user": user or "", "verb": verb, "front": protocol, "action": action, "size": len(message),
                "ms": round(ms, 3), "cutoffs": cutoffs, "evidence": evidence, "reason": verdict.reason,
                "dropped": self.dropped, "tokens": int(verdict.tokens or 0)}
        kept = message if self.keep and len(message) <= KEEP_BYTES else b""
        frame = encode(head, header_block(message), kept)
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
