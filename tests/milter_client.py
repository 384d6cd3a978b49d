"""The MTA's side of the milter protocol, for scripts/bench/bench_milter.py
and tests/test_serve_paths.py (tests/raw_milter.py is the tests' own client,
without kilter): packets packed and read with kilter.protocol's
message classes, sent over a blocking socket the way Postfix's smtpd sends
them (negotiation offering what Postfix 3.7 offers, the recipients, each
header field, the end of headers, the body in chunks of at most 65,535
bytes with CRLF line ends, the end of data)."""

from kilter.protocol import messages
from kilter.protocol.buffer import SimpleBuffer

from raw_milter import RawMilter, split_message  # noqa: F401 - split_message: for scripts/bench/bench_milter.py

PF = messages.ProtocolFlags
AF = messages.ActionFlags
# what Postfix offers (milter protocol 6)
OFFER_PROTOCOL = PF(0x1fffff)
OFFER_ACTIONS = AF.ADD_HEADERS | AF.CHANGE_HEADERS | AF.CHANGE_BODY | AF.ADD_RECIPIENT | AF.DELETE_RECIPIENT \
    | AF.QUARANTINE | AF.CHANGE_FROM | AF.ADD_RECIPIENT_PAR | AF.SETSYMLIST
FINAL = (messages.Continue, messages.Accept, messages.Reject, messages.Discard, messages.TemporaryFailure,
         messages.ReplyCode)


def packet(message):
    """A message packed as the wire has it (bytes)."""
    buf = SimpleBuffer(4 * 1024 * 1024)
    message.pack(buf)
    return buf[:].tobytes()


class MilterClient(RawMilter):
    """One milter connection to ``address`` ((host, port) or a socket path),
    its packets kilter's messages (the connection is tests/raw_milter.py's)."""

    def send(self, *items):
        self.sock.sendall(b"".join(packet(m) if isinstance(m, messages.Message) else m for m in items))

    def read(self):
        """The next message from the filter, or None at the end of the stream."""
        while True:
            if len(self.pending) >= 4:
                size = int.from_bytes(self.pending[:4], "big")
                if len(self.pending) >= 4 + size:
                    buf = SimpleBuffer(size + 8)
                    buf[:] = self.pending[:4 + size]
                    self.pending = self.pending[4 + size:]
                    message, _ = messages.Message.unpack(buf)
                    message.freeze() if hasattr(message, "freeze") else None
                    return message
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.pending += chunk

    def negotiate(self, actions=OFFER_ACTIONS, protocol=OFFER_PROTOCOL):
        self.send(messages.Negotiate(6, actions, protocol))
        self.agreed = self.read()
        return self.agreed

    def _expects_answer(self, flag):
        return self.agreed is None or flag not in self.agreed.protocol_flags

    def _event(self, message, no_flag, nr_flag):
        """Send an event unless the filter asked not to see it; read the answer when it wants one."""
        if no_flag is not None and no_flag in self.agreed.protocol_flags:
            return None
        self.send(message)
        if nr_flag is not None and nr_flag in self.agreed.protocol_flags:
            return None
        answer = self.read()
        assert isinstance(answer, messages.Continue), answer
        return answer

    def message(self, raw, recipients=("alice@test.example",), queue_id="4ABC123"):
        """Send one message; returns the filter's messages up to and including
        its final answer to the end of data."""
        fields, body = split_message(raw)
        self._event(messages.EnvelopeFrom(b"<sender@client.example>"), PF.NO_SENDER, PF.NR_SENDER)
        for rcpt in recipients:
            self._event(messages.EnvelopeRecipient(b"<" + rcpt.encode() + b">"), PF.NO_RECIPIENT, PF.NR_RECIPIENT)
        self._event(messages.Data(), PF.NO_DATA, PF.NR_DATA)
        leading = PF.HEADER_LEADING_SPACE in self.agreed.protocol_flags
        for name, value in fields:
            self._event(messages.Header(name, value if leading else value.lstrip(b" ")), PF.NO_HEADERS,
                        PF.NR_HEADER)
        self._event(messages.EndOfHeaders(), PF.NO_END_OF_HEADERS, PF.NR_END_OF_HEADERS)
        for start in range(0, len(body), 65535):
            self._event(messages.Body(body[start:start + 65535]), PF.NO_BODY, PF.NR_BODY)
        self.send(messages.Macro(ord("E"), {"i": queue_id}), messages.EndOfMessage(b""))
        return self.answers()

    @staticmethod
    def is_final(answer):
        return isinstance(answer, FINAL)


def added_fields(answers):
    """{lower-case name: value} of the AddHeader edits in ``answers``."""
    return {m.name.lower(): bytes(m.value) for m in answers if isinstance(m, messages.AddHeader)}
