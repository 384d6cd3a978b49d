"""The MTA's side of the milter protocol written out by hand, for the tests:
no ``kilter`` (the server uses ``kilter.protocol``; a client built on it
would share any encoding error with the server, and the slow Postfix tests
would be the only ones to see it).

The protocol, as libmilter and Postfix's milter8.c have it: each packet is a
4-byte big-endian length (of what follows), a 1-byte command, and the data.
The MTA sends ``O`` (negotiate: version, actions, protocol flags, each a
4-byte word), ``D`` (macros: the command they are for, then NUL-terminated
name and value pairs), ``R`` (a recipient, NUL-terminated), ``L`` (a header
field: name NUL value NUL), ``N`` (end of headers), ``B`` (a body chunk),
``E`` (end of data), ``A`` (abort), ``Q`` (quit).  The filter answers ``O``
(its choice of the three words, then for each stage a 4-byte stage number
and the NUL-terminated list of macros it wants), and at the end of data its
edits, ``h`` (add a header field: name NUL value NUL), ``m`` (change one:
4-byte index, name NUL value NUL; an empty value removes it), ``q``
(quarantine: reason NUL), then one final answer: ``c`` (continue), ``a``
(accept), ``r`` (reject), ``d`` (discard), ``t`` (temporary failure) or
``y`` (a reply code: text NUL)."""

from __future__ import annotations

import socket
import struct

# protocol flags (SMFIP_*)
NOCONNECT, NOHELO, NOMAIL, NORCPT, NOBODY, NOHDRS, NOEOH = 0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40
NR_HDR, NOUNKNOWN, NODATA, SKIP, RCPT_REJ = 0x80, 0x100, 0x200, 0x400, 0x800
NR_CONN, NR_HELO, NR_MAIL, NR_RCPT, NR_DATA, NR_UNKN, NR_EOH, NR_BODY = (
    0x1000, 0x2000, 0x4000, 0x8000, 0x10000, 0x20000, 0x40000, 0x80000)
HDR_LEADSPC = 0x100000
# action flags (SMFIF_*)
ADDHDRS, CHGBODY, ADDRCPT, DELRCPT, CHGHDRS, QUARANTINE, CHGFROM, ADDRCPT_PAR, SETSYMLIST = (
    0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40, 0x80, 0x100)
# what Postfix 3.7 offers (milter protocol 6)
OFFER_PROTOCOL = 0x1fffff
OFFER_ACTIONS = 0x1ff
FINAL = frozenset(b"cartdy")


def packet(command, data=b""):
    """One packet: the length word, the command byte, the data."""
    return struct.pack(">IB", len(data) + 1, ord(command)) + data


def cstrings(*values):
    return b"".join((v.encode() if isinstance(v, str) else bytes(v)) + b"\0" for v in values)


def split_message(raw):
    """(header fields as [name, value bytes], body with CRLF line ends) of a
    message (an mbox's From_ line dropped), as an MTA hands them to a milter."""
    raw = raw.replace(b"\r\n", b"\n")
    if raw.startswith(b"From "):        # an mbox's separator line: not part of the message an MTA sees
        raw = raw.partition(b"\n")[2]
    head, _, body = raw.partition(b"\n\n")
    fields = []
    for line in head.split(b"\n"):
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1][1] += b"\n" + line
        elif b":" in line:
            name, _, value = line.partition(b":")
            fields.append([name.decode("ascii", "replace").strip(), value])
    return fields, body.replace(b"\n", b"\r\n")


class Reply:
    """A packet from the filter: ``kind`` (its command letter) and, by kind,
    ``name``/``value`` (h, m), ``index`` (m), ``text`` (q, y), the three
    negotiated words and ``macros`` (O)."""

    def __init__(self, kind, data):
        self.kind, self.data = kind, data
        if kind == "h":
            self.index = None
            self.name, self.value = _split(data, 2)
        elif kind == "m":
            self.index = struct.unpack(">I", data[:4])[0]
            self.name, self.value = _split(data[4:], 2)
        elif kind in "qy":
            (self.text,) = _split(data, 1)
        elif kind == "O":
            self.version, self.actions, self.protocol = struct.unpack(">III", data[:12])
            self.macros, rest = {}, data[12:]
            while len(rest) >= 4:
                stage = struct.unpack(">I", rest[:4])[0]
                names, _, rest = rest[4:].partition(b"\0")
                self.macros[stage] = names.decode()

    @property
    def final(self):
        return ord(self.kind) in FINAL

    def __repr__(self):
        return f"Reply({self.kind!r}, {self.data[:80]!r})"


def _split(data, n):
    parts = data.split(b"\0")
    assert len(parts) == n + 1 and parts[-1] == b"", data[:200]
    return [p.decode("ascii") if i == 0 and n == 2 else p for i, p in enumerate(parts[:-1])]


class RawMilter:
    """One milter connection to ``address`` ((host, port) or a socket path)."""

    def __init__(self, address, timeout=30.0):
        family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(address)
        self.pending = b""
        self.agreed = None

    def close(self):
        self.sock.close()

    def send(self, *packets):
        self.sock.sendall(b"".join(packets))

    def read(self):
        """The next packet from the filter (a Reply), or None at the end of the stream."""
        while True:
            if len(self.pending) >= 4:
                size = struct.unpack(">I", self.pending[:4])[0]
                if len(self.pending) >= 4 + size:
                    kind, data = chr(self.pending[4]), self.pending[5:4 + size]
                    self.pending = self.pending[4 + size:]
                    return Reply(kind, data)
            try:
                chunk = self.sock.recv(65536)
            except ConnectionError:
                chunk = b""
            if not chunk:
                return None
            self.pending += chunk

    def negotiate(self, actions=OFFER_ACTIONS, protocol=OFFER_PROTOCOL, version=6):
        self.send(packet("O", struct.pack(">III", version, actions, protocol)))
        self.agreed = self.read()
        assert self.agreed is not None and self.agreed.kind == "O", self.agreed
        return self.agreed

    def wants(self, flag):
        return not self.agreed.protocol & flag

    def _event(self, data, no_flag, nr_flag):
        """Send an event unless the filter asked not to see it; read its answer when it wants one."""
        if no_flag and self.agreed.protocol & no_flag:
            return
        self.send(data)
        if not self.agreed.protocol & nr_flag:
            answer = self.read()
            assert answer is not None and answer.kind == "c", answer

    def start(self, recipients=("alice@test.example",)):
        """The envelope of a message: its sender and recipients."""
        self._event(packet("M", cstrings("<sender@client.example>")), NOMAIL, NR_MAIL)
        for rcpt in recipients:
            self._event(packet("R", cstrings(f"<{rcpt}>")), NORCPT, NR_RCPT)
        self._event(packet("T"), NODATA, NR_DATA)

    def header(self, name, value):
        """One header field; ``value`` as written after the colon (its leading
        space kept only when the filter asked for it, as Postfix does)."""
        if not self.agreed.protocol & HDR_LEADSPC:
            value = value.lstrip(b" ")
        self._event(packet("L", cstrings(name, value)), NOHDRS, NR_HDR)

    def end_of_headers(self):
        self._event(packet("N"), NOEOH, NR_EOH)

    def body(self, data, chunk=65535):
        for start in range(0, len(data), chunk):
            self._event(packet("B", data[start:start + chunk]), NOBODY, NR_BODY)

    def end(self, queue_id="4ABC123"):
        """The end of data; the filter's packets up to and including its final answer."""
        self.send(packet("D", b"E" + cstrings("i", queue_id)), packet("E"))
        return self.answers()

    def message(self, raw, recipients=("alice@test.example",), queue_id="4ABC123"):
        """Send one whole message; returns the filter's packets up to and
        including its final answer to the end of data."""
        fields, body = split_message(raw)
        self.start(recipients)
        for name, value in fields:
            self.header(name, value)
        self.end_of_headers()
        self.body(body)
        return self.end(queue_id)

    def answers(self):
        out = []
        while True:
            answer = self.read()
            if answer is None:
                return out
            out.append(answer)
            if self.is_final(answer):
                return out

    @staticmethod
    def is_final(answer):
        return answer.final


def added(answers):
    """{lower-case name: value} of the header fields added (h), values as sent."""
    return {a.name.lower(): a.value for a in answers if a.kind == "h"}


def status(answers):
    """The X-Spam-Status value added, unfolded, or None."""
    value = added(answers).get("x-spam-status")
    return None if value is None else " ".join(value.decode().split())
