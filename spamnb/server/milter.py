"""``spamnb serve --milter ADDR``: the milter front end, for Postfix's
``smtpd_milters`` (and Sendmail's ``INPUT_MAIL_FILTER``).

The milter protocol is read and written by the ``kilter.protocol`` package
(its message classes and its filter-side state machine, which checks that
every answer fits the event it answers); this module only does the I/O,
on the server's event loop, in the server's worker processes, and hands the
message to the request handler the SPAMD side uses (spamnb.server.handler);
connections are accepted as the SPAMD side's are (spamnb.server.accepting).

What it asks the MTA for at negotiation: no connect or DATA events and
no unknown commands; the HELO name (kept for the console's record), the
sender (with the ``{auth_authen}`` and ``{client_addr}`` macros), the recipients, the header fields (with their
leading space), the end of headers and the body, none of which it answers
(the ``NR`` flags), so the only round trip of a message is its end of
data.  There the policy (spamnb.server.policy) answers trusted,
authenticated, block- and allow-listed mail first, unscored; any other
message is checked and answered by its recipient domain's policy
(``--milter-spam-action``, ``--milter-reject-score``,
``--milter-unsure-action``): the ``X-Spam-*`` fields added (any the
sender put there removed, the subject tagged with ``--subject-tag``), and
for spam, under ``reject`` or above the reject score, ``550 5.7.1``
instead, under ``quarantine`` the fields and a quarantine request; unsure
mail under ``tempfail`` ``451 4.7.1``, once per triplet.  A message it
cannot check (over ``--max-size``, no usable model, an internal error) is
answered by ``--milter-on-error``: accepted unchanged, or a temporary
failure.

Bounds: a connection holds at most ``--max-size`` bytes of its message, in
one buffer whatever the packets' sizes (a larger one is dropped as it
comes, and only counted), at most ``--milter-max-packets`` packets of it
(past them the message is refused with a temporary failure), and a packet
of at most :data:`MAX_PACKET` bytes; its packets are handled in slices
(:data:`SLICE_PACKETS`, :data:`SLICE_SECONDS`), at most
:data:`PACKET_RATE` a second past a burst, so a flood of tiny packets
leaves the worker's other connections their turn; each header edit is
packed in a buffer of its own size; a connection silent for
``--milter-timeout`` seconds is closed; milter connections count against ``--max-connections``
of their own (an MTA holds one per SMTP session), so idle milter
connections never take the SPAMD side's.  A malformed or truncated packet
closes the connection (the MTA then applies its ``milter_default_action``).
"""

from __future__ import annotations

import asyncio
import socket
import time

from kilter.protocol import core, messages
from kilter.protocol.exceptions import InsufficientSpace

from spamnb.mail.headers import SPAM_FIELDS, mta_edits
from spamnb.server.handler import Request, run_eagerly
from spamnb.server.models import ModelUnavailable
from spamnb.server.policy import Triplets, address_of, allowlisted_fields
from spamnb.server.server_log import log_safe, one_line

MAX_PACKET = 1024 * 1024            # bytes of one milter packet (Postfix sends body chunks of 64 KiB)
SLICE_PACKETS = 64                  # whole packets handed to the state machine at a time, and
SLICE_SECONDS = 0.0005              # ... slices for this long at most: then the other connections' turn
PACKET_RATE = 20_000                # packets a second a connection gets past its burst (~10 % of a worker),
PACKET_BURST = 20_000               # ... and its burst (an MTA sends 10-200 packets a message)
_START_CAPACITY = 64 * 1024 + 64
_PF = messages.ProtocolFlags
_AF = messages.ActionFlags
_WANTED_PROTOCOL = (_PF.NO_CONNECT | _PF.NO_DATA | _PF.NO_UNKNOWN | _PF.NR_HELO
                    | _PF.NR_SENDER | _PF.NR_RECIPIENT | _PF.NR_HEADER | _PF.NR_END_OF_HEADERS | _PF.NR_BODY
                    | _PF.HEADER_LEADING_SPACE)
_WANTED_ACTIONS = _AF.ADD_HEADERS | _AF.CHANGE_HEADERS | _AF.QUARANTINE
_REJECT = b"550 5.7.1 Message refused as spam\x00"
_BLOCKED = b"550 5.7.1 Message refused: the sender or client is on the block list\x00"
_DEFER = b"451 4.7.1 Message deferred: unsure, try again later\x00"
ENVELOPE_RCPTS = 50                 # envelope recipients kept for the console's record (its history shows them)
_TRIPLETS = Triplets()              # unsure mail deferred lately (--milter-unsure-action tempfail), this process's


class PacketBuffer:
    """kilter.protocol's ``FixedSizeBuffer`` over one bytearray whose start
    moves: taking a packet off the front copies nothing (kilter's
    ``SimpleBuffer`` moves the rest of the buffer down each time)."""

    __slots__ = ("_data", "_start", "_end", "limit")

    def __init__(self, capacity=_START_CAPACITY):
        self._data = bytearray(capacity)
        self._start = self._end = 0
        self.limit = None           # while set: a reader sees the bytes before this offset only

    def __len__(self):
        return len(self._data) - self._start

    @property
    def filled(self):
        return (self._end if self.limit is None else self.limit) - self._start

    @property
    def available(self):
        return len(self._data) - self._end

    def __getitem__(self, items):
        start, stop, _ = items.indices(self.filled)
        return memoryview(self._data)[self._start + start:self._start + stop]

    def __setitem__(self, items, data):
        start = self.filled if items.start is None else items.start
        stop = start + len(data) if items.stop is None else items.stop
        if stop - start != len(data):
            raise ValueError("buffer __setitem__: the slice and the data differ in length")
        if self._start + stop > len(self._data):
            raise InsufficientSpace
        memoryview(self._data)[self._start + start:self._start + stop] = data
        self._end = self._start + stop

    def __delitem__(self, items):
        start, stop, _ = items.indices(self.filled)
        if start == 0:
            self._start += stop
        elif stop == self.filled and self.limit is None:
            self._end = self._start + start
        else:
            base = self._start
            self._data[base + start:self._end - (stop - start)] = self._data[base + stop:self._end]
            self._end -= stop - start
        if self._start == self._end:
            self._start = self._end = 0
            if self.limit is not None:
                self.limit = 0

    def get_free(self, size):
        if size > self.available:
            raise InsufficientSpace
        self._end += size
        return memoryview(self._data)[self._end - size:self._end]

    def take(self):
        """The bytes written so far, and the buffer emptied."""
        out = bytes(self._data[self._start:self._end])
        self._start = self._end = 0
        return out

    def feed(self, data, needed):
        """Append as much of ``data`` as fits (the bytes before the start
        moved down, the buffer grown to ``needed`` bytes at most when a
        packet needs it); returns how many bytes were taken.  Only between
        reads: no packet holds a view of the buffer then."""
        if self._start and self.available < len(data):
            n = self.filled
            self._data[:n] = self._data[self._start:self._end]
            self._start, self._end = 0, n
        if self.available < len(data) and len(self._data) < needed:
            self._data.extend(bytes(min(needed, self.filled + len(data)) - len(self._data)))
        n = min(len(data), self.available)
        self._data[self._end:self._end + n] = data[:n]
        self._end += n
        return n

    def next_size(self):
        """The size of the packet at the front (its length word plus 4), or
        None while its length word is not whole."""
        if self.filled < 4:
            return None
        return int.from_bytes(self._data[self._start:self._start + 4], "big") + 4

    def cut(self, most):
        """(the offset after the first ``most`` whole packets at the front, or
        the start when none is whole, for :attr:`limit`; how many); raises
        ValueError for a length word of 0 or over :data:`MAX_PACKET` among
        them or in the packet after them."""
        offset, data, end = self._start, self._data, self._end
        count = 0
        while count < most:
            if end - offset < 4:
                break
            size = int.from_bytes(data[offset:offset + 4], "big")
            if size == 0 or size > MAX_PACKET:
                raise ValueError(f"a packet of {size} bytes")
            if end - offset < 4 + size:
                break
            offset += 4 + size
            count += 1
        return offset, count

    def skip_macros(self, kinds=b"D"):
        """Drop the packet at the front when it is a whole packet of one of
        ``kinds`` (a macro packet, ``D``, by default); returns whether it did."""
        size = self.next_size()
        if size is None or size < 5 or self.filled < size or self._data[self._start + 4] not in kinds:
            return False
        del self[:size]
        return True


class MilterConnection(asyncio.Protocol):
    """One MTA connection of ``server`` (a spamnb.server.daemon.Server),
    accepted by ``acceptor`` (spamnb.server.accepting.Acceptor): packets in,
    kilter's state machine checking them, one message at a time held (its
    header fields and body, up to ``--max-size``), the message checked at its
    end of data by the server's request handler (spamnb.server.handler), the
    answer laid out as the MTA's header edits or reply."""

    def __init__(self, server, acceptor):
        self.acceptor = acceptor
        self.server = server
        self.transport = None
        self.peer = "unix"
        self.state = core.FilterProtocol()
        self.inbox = PacketBuffer()
        self.waiting = b""          # bytes read and not in the inbox yet (a memoryview of them)
        self.resume = None          # the next slice of work, scheduled (reading paused meanwhile)
        self.tokens = PACKET_BURST  # packets it may send now (a token bucket: PACKET_RATE, PACKET_BURST)
        self.tokens_at = 0.0
        self.timer = None
        self.last_heard = 0.0
        self.quickack = None        # the socket, for TCP_QUICKACK
        self.closed = False
        self.pending = None         # an end of data waiting for its model to load
        self.leading_space = False
        self.actions = _AF.NONE     # the header edits the MTA allows
        self.queue_id = "-"
        self.client = None          # the client's address ({client_addr}), for the policy
        self.helo = ""              # the client's HELO name (its HELO event), for the console's record
        self.helo_nr = False        # HELO events come unanswered (NR_HELO agreed)
        self._new_message()

    def _new_message(self):
        self.held = bytearray()     # the message as held: header lines and body, up to --max-size
        self.size = 0
        self.packets = 0            # packets of this message, up to --milter-max-packets
        self.too_big = False
        self.in_body = False
        self.users = set()          # the recipients' user names (two at most kept)
        self.our_fields = {}        # lower-case name -> occurrences of spamnb's X-Spam-* fields (a message not held)
        self.started = False
        self.sender = ""            # the envelope sender, {auth_authen} and the first recipient, for the policy
        self.authenticated = False
        self.auth = ""              # the SASL login ({auth_authen}), for the console's record
        self.first_rcpt = None
        self.rcpts = []             # the envelope recipients, for the console's record (ENVELOPE_RCPTS at most)
        self.trusted = None         # why a message is checked without action (--milter-trusted-action check)

    # ------------------------------------------------------------------ asyncio
    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else "unix"
        self.acceptor.connections.add(self)
        if self.peer != "unix":
            # the MTA sends the packets it wants no answer to back to back: with Nagle's algorithm on its
            # side (Postfix does not turn it off) each waits for the ACK of the one before, which the
            # kernel here delays up to 40 ms; acknowledged at once, the end of data is not held back
            sock = transport.get_extra_info("socket")
            if sock is not None and hasattr(socket, "TCP_QUICKACK"):
                self.quickack = sock
        self._arm()

    def connection_lost(self, exc):
        if self.started or self.pending is not None:
            self._done("-", "client closed the connection mid-message", "none")
        if self.pending is not None:
            self.pending.cancel()
        self.closed = True
        self.waiting = b""
        if self.resume is not None:
            self.resume.cancel()
            self.resume = None
        if self.timer is not None:
            self.timer.cancel()
        if self in self.acceptor.connections:
            self.acceptor.connections.discard(self)
            self.acceptor.freed()

    def busy(self):
        """A milter connection counts as in flight as long as the MTA holds it."""
        return True

    def stop(self):
        """The server stops: nothing is closed.  An MTA holds its connection
        for a whole SMTP session, and may have just opened it for a message
        it has not sent yet: closed now, that message would get the MTA's
        milter_default_action.  The server waits for the MTAs to close them,
        up to ``--timeout`` + 1 s."""

    def data_received(self, data):
        if self.quickack is not None:
            try:
                self.quickack.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            except OSError:
                self.quickack = None
        self._arm()
        if self.waiting:
            self.waiting = memoryview(bytes(self.waiting) + data)     # read before the pause took effect
        else:
            self.waiting = memoryview(data)
        if self.resume is None:
            self._work()

    def close(self):
        if not self.closed:
            self.closed = True
            self.transport.close()

    def _arm(self):
        """Note the time of the last packet; the timer, set once, is set again
        from it when it fires (not on every packet: an MTA sends dozens a message)."""
        loop = asyncio.get_running_loop()
        self.last_heard = loop.time()
        if self.timer is None:
            self.timer = loop.call_later(self.server.settings.milter_timeout, self._timed_out)

    def _timed_out(self):
        loop = asyncio.get_running_loop()
        left = self.last_heard + self.server.settings.milter_timeout - loop.time()
        if left > 0:
            self.timer = loop.call_later(left, self._timed_out)
            return
        self.timer = None
        if self.started:
            self._done("-", f"error 79 milter connection silent for {self.server.settings.milter_timeout:g} s"
                       " mid-message", "none")
            self.started = False
        self.close()

    # ------------------------------------------------------------------ packets
    def _work(self):
        """Hand the packets read to the state machine, whole packets only, a
        slice of at most :data:`SLICE_PACKETS` at a time; past
        :data:`SLICE_SECONDS` the rest waits for the event loop's next turn,
        reading paused (a client sending a flood of tiny packets then holds
        the worker's other connections up by one slice at most), and past
        its burst of packets until its bucket has tokens again (a flood
        then takes a tenth of the worker, whatever its packets' sizes)."""
        self.resume = None
        inbox = self.inbox
        loop = asyncio.get_running_loop()
        now = loop.time()
        self.tokens = min(PACKET_BURST, self.tokens + (now - self.tokens_at) * PACKET_RATE)
        self.tokens_at = now
        self.last_heard = now       # (reading paused here counts as heard: the wait is this side's)
        deadline = time.perf_counter() + SLICE_SECONDS
        while not self.closed:
            if self.tokens < 1:
                self.transport.pause_reading()
                self.resume = loop.call_later((1 - self.tokens) / PACKET_RATE, self._work)
                return
            try:
                cut, count = inbox.cut(min(SLICE_PACKETS, int(self.tokens)))
            except ValueError as exc:
                self._protocol_error(str(exc))
                return
            if not count:
                if not self.waiting:
                    break
                taken = inbox.feed(self.waiting, inbox.next_size() or 0)
                if taken == 0:      # a packet larger than the buffer can grow to
                    self._protocol_error("a packet larger than the buffer")
                    return
                self.waiting = self.waiting[taken:]
                continue
            inbox.limit = cut
            self.tokens -= count
            try:
                self._read_packets()
            finally:
                inbox.limit = None
            if not self.closed and time.perf_counter() > deadline:
                self.transport.pause_reading()
                self.resume = loop.call_soon(self._work)
                return
        if not self.closed and not self.transport.is_reading():
            self.transport.resume_reading()

    def _read_packets(self):
        """The whole packets the inbox shows, through kilter's state machine."""
        while not self.closed:
            try:
                # a packet sent before the answer to the end of data it follows is one
                # the state machine does not expect: an error
                for message in self.state.read_from(self.inbox):
                    self._event(message)
                    if self.closed:
                        break
                return
            except Exception as exc:  # noqa: BLE001 - kilter's parse errors, asserts, ...: the MTA's fault
                if isinstance(exc, UnicodeDecodeError) and self.inbox.skip_macros(b"DH" if self.helo_nr else b"D"):
                    continue    # a macro or a HELO name kilter cannot decode (not ASCII): not needed
                self._protocol_error(f"{type(exc).__name__}: {one_line(exc)}")
                return

    def _protocol_error(self, text):
        if not self.closed:
            self.server.log(f"milter protocol error from {self.peer}: {log_safe(text, 200)}; connection closed")
            if self.server.metrics is not None:
                self.server.metrics.error("protocol")
            if self.started:
                self.started = False
            self.close()

    def _event(self, message):
        self.packets += 1
        if self.packets > self.server.settings.milter_max_packets and not self.too_big:
            self.too_big = True     # counted, never held: refused at its end of data
            self.held = bytearray()
        kind = type(message)        # by type, not isinstance: kilter's messages are ABCs, slow to test
        if kind is messages.Header:
            self.started = True
            name = message.name
            lower = name.lower()
            if lower.encode() in SPAM_FIELDS:
                self.our_fields[lower] = self.our_fields.get(lower, 0) + 1
            self._hold(name.encode("ascii", "replace") + (b":" if self.leading_space else b": "))
            self._hold(message.value)
            self._hold(b"\r\n")
        elif self._other_event(message):
            return
        if message.ident not in self.state.nr and self.state.needs_response(message):
            self._send(messages.Continue())

    def _other_event(self, message):
        """Every event but a header field; True when it needs no Continue
        (answered already, or the connection closed)."""
        match message:
            case messages.Negotiate():
                self._negotiate(message)
                return True
            case messages.Macro():
                queue_id = message.macros.get("i")
                if queue_id:
                    self.queue_id = log_safe(queue_id, 32)
                if message.stage == ord("M"):
                    self.auth = message.macros.get("{auth_authen}", "")[:256]
                    self.authenticated = bool(self.auth)
                    self.client = message.macros.get("{client_addr}", self.client or "")[:64] or None
            case messages.Helo():
                self.helo = str(message.hostname)[:256]     # the console's record (no answer: NR_HELO)
            case messages.EnvelopeFrom():
                self.sender = address_of(message.sender)
            case messages.EnvelopeRecipient():
                self.started = True
                if len(self.users) < 2:
                    self.users.add(self._user_of(bytes(message.recipient)))
                if self.first_rcpt is None:
                    self.first_rcpt = address_of(message.recipient)
                if len(self.rcpts) < ENVELOPE_RCPTS:
                    self.rcpts.append(address_of(message.recipient)[:256])
            case messages.EndOfHeaders():
                self.started = True
                self.in_body = True
                self._hold(b"\r\n")
            case messages.Body():
                self.started = True
                if not self.in_body:
                    self.in_body = True
                    self._hold(b"\r\n")
                self._hold(message.content)
            case messages.EndOfMessage():
                if len(message.content):
                    self._hold(message.content)
                self._end_of_message()
                return True
            case messages.Abort():
                self._new_message()
            case messages.Close():
                self.close()
                return True
        return False

    def _negotiate(self, offer):
        protocol = offer.protocol_flags & _WANTED_PROTOCOL
        self.helo_nr = bool(protocol & _PF.NR_HELO)
        if not self.helo_nr:
            protocol |= offer.protocol_flags & _PF.NO_HELO     # a HELO would need an answer: not worth a round trip
        self.leading_space = bool(protocol & _PF.HEADER_LEADING_SPACE)
        self.actions = offer.action_flags & _WANTED_ACTIONS
        macros = {}
        if _AF.SETSYMLIST in offer.action_flags:
            # the queue ID, for the log, and at MAIL what the policy needs: the MTA's other macros
            # (TLS, ...) are packets to read for nothing, and may hold bytes that are not ASCII
            self.actions |= _AF.SETSYMLIST
            macros = {messages.Stage.ENVELOPE_FROM: ["i", "{auth_authen}", "{client_addr}"],
                      messages.Stage.ENVELOPE_RECIPIENT: ["i"], messages.Stage.END_HEADERS: ["i"],
                      messages.Stage.END_MESSAGE: ["i"]}
        self._send(messages.Negotiate(min(offer.version, 6), self.actions, protocol, macros))

    def _user_of(self, recipient):
        """The user name a recipient maps to (``--milter-user``): its local
        part (up to a ``+`` extension) or its whole address, lower case."""
        address = recipient.decode("utf-8", "replace").strip().strip("<>").strip().lower()
        if self.server.settings.milter_user == "local":
            address = address.rpartition("@")[0] or address
            address = address.split("+", 1)[0]
        return address

    def _hold(self, data):
        """Add ``data`` (bytes or a view of the inbox) to the message held, as
        long as it stays within --max-size (and its packets within
        --milter-max-packets): one bytearray, so a packet costs its bytes and
        nothing more, whatever its size."""
        self.size += len(data)
        if self.too_big:
            return
        if self.size > self.server.settings.max_size:
            self.too_big = True
            self.held = bytearray()     # over --max-size: counted, never held whole
            return
        self.held += data

    def _send(self, *answer):
        """Pack the answer's packets, each in a buffer of its own size (a
        header edit can be as large as the field it changes), and write them."""
        out = []
        for message in answer:
            buf = PacketBuffer(_room(message))
            self.state.write_to(buf, message)
            out.append(buf.take())
        self.transport.write(b"".join(out))

    # ------------------------------------------------------------------ the end of data
    def _end_of_message(self):
        started = time.perf_counter()
        server = self.server
        user = next(iter(self.users)) if len(self.users) == 1 else None
        if self.packets > server.settings.milter_max_packets:
            self._unchecked(started, user or "-", f"error 75 refused: more than {server.settings.milter_max_packets}"
                                                  " packets in one message", "tempfail")
            return
        if self._before_scoring(started, log_safe(user or "-")):
            return
        if self.too_big:
            self._unchecked(started, user or "-", f"too big, not checked (message larger than "
                                                  f"{server.settings.max_size} bytes)")
            return
        answered, task = run_eagerly(self._check(started, user, self._paths(user)))
        if not answered:
            self.pending = task     # its model is read in a thread first while the loop goes on

    def _paths(self, user):
        """The user's model paths (spamnb.server.handler), the recipient domain's
        model (--milter-domains) in place of the site model."""
        paths = self.server.handler.model_path(user)
        model = self.server.policy.for_recipient(self.first_rcpt or "").model
        return (model, paths[1]) if model and paths[0] == self.server.settings.model else paths

    def _before_scoring(self, started, user):
        """The policy before scoring (spamnb.server.policy): trusted mail
        passed (or marked to be checked without action), block-listed mail
        refused, allow-listed mail delivered with its fields; True when answered."""
        found = self.server.policy.before(self.sender, self.client, self.authenticated)
        if found is None:
            return False
        what, why = found
        if what == "check":
            self.trusted = why
            return False
        answers = {"accept": (messages.Continue(),), "block": (messages.ReplyCode(_BLOCKED),)}.get(what)
        if answers is None:     # allow-listed
            answers = (*self._edits(bytes(self.held), allowlisted_fields(why, self.server.settings.required_score),
                                    False),
                       messages.Continue())
        if not self.closed:
            self._send(*answers)
        outcome = {"accept": f"not checked trusted={why}", "block": f"blocklisted={why}"}.get(what, f"allowlisted={why}")
        self._done(user, outcome, {"block": "reject", "allow": "tag"}.get(what, "accept"), started)
        return True

    async def _check(self, started, user, paths):
        """The message held to the handler (spamnb.server.handler.RequestHandler.handle)
        and its answer sent.  Run with ``run_eagerly``: when its model is
        loaded it ends without waiting, in the callback that read the end of
        data; else it goes on in a task (:attr:`pending`) once the model is read."""
        settings = self.server.settings
        shown = log_safe(user or "-")
        message = bytes(self.held)
        self.held = bytearray()     # held once: the copy checked is the only one
        try:
            checked = await self.server.handler.handle(Request(message, user, True, paths))
        except ModelUnavailable as exc:
            self._unchecked(started, shown, f"error 69 {exc.text}")
            return
        except Exception as exc:  # noqa: BLE001 - answered by --milter-on-error, logged; the server goes on
            self._unchecked(started, shown, f"error 70 {type(exc).__name__}: {one_line(exc)}")
            return
        finally:
            self.pending = None
        action = self._action(checked)
        if self.closed:
            return
        if action in ("reject", "tempfail"):
            self._send(messages.ReplyCode(_REJECT if action == "reject" else _DEFER))
        elif action == "accept":
            self._send(messages.Continue())
        else:
            self._send(*self._edits(message, checked.fields(settings.report),
                                    checked.label == "spam" or action == "unsure-tag"),
                       *([messages.Quarantine(f"spamnb: spam, score {checked.score:.1f}")]
                         if action == "quarantine" and _AF.QUARANTINE in self.actions else ()),
                       messages.Continue())
        self._done(shown, checked.outcome + (f" trusted={self.trusted}" if self.trusted else ""),
                   "tag" if action == "unsure-tag" else action, started, len(message))

    def _action(self, checked):
        """What a checked message gets: its recipient domain's policy
        (spamnb.server.policy.DomainPolicy), a tempfail at most once per
        triplet in a window (:data:`_TRIPLETS`), ``accept`` (untouched) for
        trusted mail checked without action."""
        if self.trusted:
            return "accept"
        action = self.server.policy.for_recipient(self.first_rcpt or "").action(checked.label, checked.score)
        if action == "tempfail" and not _TRIPLETS.defer(self.client, self.sender, self.first_rcpt):
            return "tag"
        return action

    def _edits(self, message, fields, tag_subject):
        """The header edits of a tagged message (``message``: as held;
        ``fields``: spamnb's fields as (name, value) pairs): the edit
        :func:`spamnb.mail.headers.edit` makes of the bytes (PROCESS,
        ``classify -p``), as the MTA's operations (``mta_edits``): the
        sender's own X-Spam-* fields removed, each Subject tagged when
        ``tag_subject``, spamnb's fields added at the end of the header.  A
        message over --max-size is not held: its X-Spam-* fields are removed
        as the header events counted them."""
        settings = self.server.settings
        # the values as the fields are written, "Name: value": with HEADER_LEADING_SPACE agreed the MTA
        # adds no space after the colon itself, and a value that starts on the next line (X-Spam-Report)
        # gets none, as PROCESS writes it
        space = b" " if self.leading_space else b""
        fields = [(name, value if value[:1] == b"\n" and space else space + value) for name, value in fields]
        if _AF.CHANGE_HEADERS not in self.actions:
            return [messages.AddHeader(name.decode("ascii"), value) for name, value in fields]
        tag = settings.subject_tag.encode("utf-8") if settings.subject_tag and tag_subject else None
        if not tag and not self.our_fields:     # the header events saw nothing to change
            changes, add_subject = [], False
        elif self.too_big:                      # not held: the fields to remove as the events counted them
            changes = [(name.encode(), index, None) for name, count in self.our_fields.items()
                       for index in range(count, 0, -1)]
            add_subject = bool(tag)
        else:
            changes, add_subject = mta_edits(message, SPAM_FIELDS, tag)
        edits = [messages.ChangeHeader(index, name.decode("ascii", "replace"), b"" if value is None else space + value)
                 for name, index, value in changes]
        edits += [messages.AddHeader(name.decode("ascii"), value) for name, value in fields]
        if add_subject:     # after spamnb's fields, where the edit of the bytes puts it
            edits.append(messages.AddHeader("Subject", space + tag))
        return edits

    def _unchecked(self, started, user, outcome, action=None):
        """A message that could not be checked: --milter-on-error (or
        ``action``); trusted mail checked without action: passed."""
        action = action or ("accept" if self.trusted else self.server.settings.milter_on_error)
        if not self.closed:
            self._send(messages.Continue() if action == "accept" else messages.TemporaryFailure())
        self._done(user, outcome, action, started, self.size)

    def _done(self, user, outcome, action, started=None, size=None):
        ms = (time.perf_counter() - started) * 1000.0 if started is not None else 0.0
        size = self.size if size is None else size
        envelope = (self.client or "", self.helo, self.sender, ", ".join(self.rcpts), self.auth)
        self._new_message()
        self.server.request_done("EOM", user, f"{outcome} queue_id={self.queue_id}", size, ms, self.peer,
                                 protocol="milter", action=action, envelope=envelope)


def _room(message):
    """Bytes enough to pack ``message`` (a kilter message): its values' sizes
    (a str at four bytes a character) and room for the rest."""
    room = 4096
    for value in vars(message).values():
        if isinstance(value, (bytes, bytearray, memoryview)):
            room += len(value)
        elif isinstance(value, str):
            room += 4 * len(value)
    return room
