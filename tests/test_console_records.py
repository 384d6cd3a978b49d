"""A worker's record as the console shows it: the frames a RecordSender
writes (the header block found by one search and copied once from the
message, the frames made at the flush) are byte for byte the frames of the
record's fields and the header block cut the way spamnb always cut it, for
hostile headers too."""

import asyncio
import re
import socket

import pytest

from spamnb.console import records
from spamnb.mail import headers

# the header block as the console's records have always cut it: the first
# HEAD_BYTES, a header only when they start with a field (or an envelope
# line and a field), up to the line before the first blank line, CRs dropped
_FIELD = re.compile(rb"(?:From [^\n]*\n)?[\x21-\x39\x3b-\x7e]+[ \t]*:")


def reference_block(message):
    head = message[:records.HEAD_BYTES]
    if not _FIELD.match(head):
        return b""
    end = headers.header_end(head)
    return head[:end - 1].rstrip(b"\r") if end < len(head) else head


BIG = b"".join(b"X-Filler-%05d: %s\n" % (i, b"v" * 40) for i in range(400))     # about 22 KB of fields
MESSAGES = {
    "lf": b"Subject: hello\nFrom: a@b.example\n\nbody\n",
    "crlf": b"Subject: hello\r\nFrom: a@b.example\r\n\r\nbody\r\n",
    "crlf, CRs doubled": b"Subject: x\r\r\nTo: y\r\r\n\r\nbody",
    "no blank line": b"Subject: hello\nFrom: a@b.example\nX-Last: z",
    "no header": b"just a body\n\nwith lines\n",
    "empty": b"",
    "envelope line": b"From a@b.example Sun Nov 29 00:00:00 2026\nSubject: x\n\nbody",
    "8 KB+ header": BIG + b"\nbody\n",
    "8 KB+ header, CRLF": BIG.replace(b"\n", b"\r\n") + b"\r\nbody\r\n",
    "blank line at the cut": b"S: " + b"v" * (records.HEAD_BYTES - 5) + b"\n\nbody",
    "blank line past the cut": b"S: " + b"v" * (records.HEAD_BYTES - 4) + b"\n\nbody",
    "CR at the cut": b"S: " + b"v" * (records.HEAD_BYTES - 5) + b"\r\n\r\nbody",
    "NUL and 8-bit": b"Subject: \x00\xff\xfe\nFrom: \xe9\n\n\x00",
    "lone CR lines": b"Subject: x\n\r\nTo: y\n\nbody",
}


class _Model:
    cutoffs = type("C", (), {"spam": 0.9, "ham": 0.1})()


def _checked(evidence):
    class Checked:
        verdict = type("V", (), {"label": "spam", "log_odds": 9.5, "probability": 0.99, "evidence": evidence,
                                 "reason": "na\0me", "tokens": 42})()
        score, score_map, model = 9.0, type("S", (), {"required": 5.0})(), _Model()
    return Checked()


def _frames_sent(tmp_path, cases, keep, defer):
    """The frames a RecordSender writes for ``cases`` (message, evidence,
    envelope), read from its socket; the times it stamped them with."""
    path = str(tmp_path / "records")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    async def run():
        sender = records.RecordSender(path, keep=keep)
        sender.defer = defer
        await sender.connect()
        sender.pid = 0
        conn, _ = listener.accept()
        whens = []
        for message, evidence, envelope in cases:
            sender.on_verdict(_checked(evidence), message, "bob")
            whens.append(sender.pending[3])
            sender.on_request("CHECK", "bob", "spam 9.0/5.0", len(message), 1.5, "127.0.0.1", "spamd", "none",
                              envelope)
        sender.flush()      # to the socket (what a stop still holds goes to the spool instead)
        while sender.transport.get_write_buffer_size():
            await asyncio.sleep(0.01)
        await sender.close()
        return conn, whens, sender

    conn, whens, sender = asyncio.run(run())
    data = b""
    conn.settimeout(30)
    while chunk := conn.recv(1 << 20):
        data += chunk
    conn.close()
    listener.close()
    assert (sender.dropped, sender.spooled) == (0, 0)
    return data, whens


@pytest.mark.parametrize("defer", [True, False], ids=["made at the flush", "made at once"])
@pytest.mark.parametrize("keep", [False, True], ids=["header", "kept message"])
def test_a_records_frames_are_the_fields_and_the_header_block_cut_as_always(tmp_path, keep, defer):
    evidence = [("tok\0en", 2.5), ("é", -1.25)]
    envelope = ("198.51.100.7", "helo\0x", "<a@b>", "<c@d>,<e@f>", "")
    cases = [(message, evidence if i % 2 else (), envelope if i % 3 == 0 else None)
             for i, message in enumerate(MESSAGES.values())]
    data, whens = _frames_sent(tmp_path, cases, keep, defer)
    frames = records.FrameReader().feed(data)
    assert len(frames) == len(cases)
    for (name, message), (_, evidence, envelope), frame, when in zip(MESSAGES.items(), cases, frames, whens):
        expected = records.encode({"pid": 0, "t": when, "score": 9.0, "required": 5.0, "log_odds": 9.5, "p": 0.99,
                                   "ms": 1.5, "cutoffs": (0.9, 0.1), "size": len(message), "tokens": 42,
                                   "dropped": 0, "label": "spam", "user": "bob", "verb": "CHECK", "front": "spamd",
                                   "action": "none", "reason": "na\0me", "evidence": evidence},
                                  reference_block(message), message if keep else b"", envelope)
        assert frame == expected[4:], name
        head, header, kept = records.decode(frame)
        assert header == reference_block(message) and kept == (message if keep else b""), name
        assert head["reason"] == "na me" and head["size"] == len(message), name


@pytest.mark.parametrize("message", list(MESSAGES.values()), ids=list(MESSAGES))
@pytest.mark.parametrize("limit", [None, 5, records.HEAD_BYTES])
def test_header_length_is_the_length_of_header_of(message, limit):
    assert headers.header_length(message, limit) == len(headers.header_of(message, limit))
    if limit == records.HEAD_BYTES:
        assert headers.header_of(message, limit) == reference_block(message)


def test_a_worker_holds_a_bounded_amount_of_messages_for_its_records(tmp_path):
    """The records' inputs are held until the flush only up to HOLD_BYTES of
    messages and HOLD_RECORDS records; a message that is not bytes (a buffer
    its owner may reuse) is never held."""
    big = b"Subject: big\n\n" + b"x" * (records.HOLD_BYTES // 3)

    async def run():
        sender = records.RecordSender(str(tmp_path / "none"))      # no recorder: the flush spools
        held = []
        for _ in range(12):
            sender.on_verdict(_checked(()), big, "bob")
            sender.on_request("CHECK", "bob", "spam", len(big), 1.0, "127.0.0.1", "spamd", "none")
            held.append(sender.held_bytes)
        for _ in range(2 * records.HOLD_RECORDS):
            sender.on_verdict(_checked(()), b"Subject: s\n\nb", "bob")
            sender.on_request("CHECK", "bob", "spam", 14, 1.0, "127.0.0.1", "spamd", "none")
            held.append(len(sender.held))
        buffer = bytearray(b"Subject: buffer\n\nbody")
        sender.on_verdict(_checked(()), buffer, "bob")
        sender.on_request("CHECK", "bob", "spam", len(buffer), 1.0, "127.0.0.1", "spamd", "none")
        unheld = not sender.held
        buffer[:7] = b"Changed"
        sender.flush()
        await sender.close()
        return sender, held, unheld

    sender, held, unheld = asyncio.run(run())
    assert max(held[:12]) <= records.HOLD_BYTES and max(held[12:]) < records.HOLD_RECORDS and unheld
    assert sender.spooled == 12 + 2 * records.HOLD_RECORDS + 1 and sender.dropped == 0
    frames = records.FrameReader().feed(b"".join(p.read_bytes() for p in sorted(tmp_path.glob("spool-*"))))
    assert [records.decode(frame)[1] for frame in frames[-1:]] == [b"Subject: buffer"]


# the fields as the console has always shown them: the first occurrence of each, by this pattern over the block
# (a line end put first), unfolded, encoded words decoded (the raw text when they do not decode), one line
_REF_FIELD = re.compile(rb"\n(from|to|subject|message-id)[ \t]*:(.*(?:\r?\n[ \t].*)*)", re.I)


def reference_fields(header):
    from email.header import decode_header, make_header

    out = {}
    for match in _REF_FIELD.finditer(b"\n" + header):
        name = match.group(1).lower()
        if name in out:
            continue
        raw = match.group(2)[:4 * 998]
        value = raw.decode("utf-8", "replace")
        if b"=?" in raw:
            try:
                value = str(make_header(decode_header(" ".join(value.split()))))
            except Exception:  # noqa: BLE001 - the raw text, as the console keeps it
                pass
        out[name] = " ".join(value.split())[:998]
    return tuple(out.get(name, "") for name in (b"from", b"to", b"subject", b"message-id"))


FIELDS = {
    **MESSAGES,
    "folded, CRLF": b"Subject: one\r\n two\r\n\tthree\r\nFrom: a\r\n  <a@b.example>\r\nTO:x\r\n\r\nbody",
    "encoded words": (b"Subject: =?utf-8?q?caf=C3=A9?= =?utf-8?b?w6k=?= plain\nFrom: =?iso-8859-1?q?Andr=E9?= <a@b>\n"
                      b"To: =?bogus?q?x?=, =?utf-8?q?broken\nMessage-ID: <=?utf-8?q?id?=@x>\n\nbody"),
    "fields twice, names' cases": b"sUbJeCt \t: first\nSUBJECT: second\nfrom:x\nFrom: y\nmessage-id:<1@x>\n\n",
    "names in values, near names": (b"X-Subject: no\nSubjects: no\nReceived: from a\n\tfrom b\nTo : yes\n"
                                    b"Tom: no\nMessage-Identity: no\nMessage-ID: <m@x>\n\n"),
    "NULs in names and values": b"Sub\0ject: no\nSubject: a\0b\nFrom\0: no\nFrom: c\r\0\n\n",
    "a 6 KB field": b"Subject: " + b"w " * 3000 + b"\nFrom: z\n\n",
    "8 KB+ header, fields past the cut": BIG + b"Subject: past\n\n",
    "the fields at the cut": BIG[:records.HEAD_BYTES - 30] + b"\nSubject: cut in the mid",
    "only line ends": b"\n\r\n\n",
}


@pytest.mark.parametrize("keep", [False, True], ids=["header", "kept message"])
def test_a_records_fields_in_the_history_are_those_of_its_header_block_as_always(tmp_path, keep):
    """What the console shows of a check (sender, recipients, subject,
    message id): each field of the header block the worker cut, as the
    reference pattern decodes it, the record sent through a worker's socket
    and stored by the recorder's way (History.add_frames)."""
    from spamnb.console.history import History

    cases = [(message, (), None) for message in FIELDS.values()]
    data, _ = _frames_sent(tmp_path, cases, keep, True)
    history = History(":memory:", rows=1000, kept=1000 if keep else 0)
    ids = history.add_frames([frame for frame in records.FrameReader().feed(data)])
    assert len(ids) == len(FIELDS)
    for (name, message), record in zip(FIELDS.items(), ids):
        row = history.get(record)
        shown = (row["sender"], row["recipients"], row["subject"], row["message_id"])
        assert shown == reference_fields(reference_block(message)), name
    assert history.get(ids[list(FIELDS).index("encoded words")])["subject"] == "caf\u00e9\u00e9 plain"


def test_fields_of_random_header_blocks_are_the_reference_fields():
    """Header blocks made of the pieces a field is found by (names in any
    case, colons, blanks, line ends, encoded words, NULs, 8-bit bytes)."""
    import random

    from spamnb.console.history import fields_of

    pieces = [b"\n", b"\r", b"\r\n", b" ", b"\t", b":", b"from", b"From", b"TO", b"to", b"Subject", b"message-ID",
              b"x", b"=?utf-8?q?a=20b?=", b"=?", b"?=", b"\0", b"\xff", b"-", b"f", b"s", b"m", b"t"]
    rnd = random.Random(50)
    for _ in range(5000):
        header = b"".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 40)))
        assert fields_of(header) == reference_fields(header), header
