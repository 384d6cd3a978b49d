"""The milter's envelope in the console's history: the client's address,
its HELO name, MAIL FROM, every RCPT TO (up to 50) and the SASL login are
recorded with the verdict (spamnb.server.milter hands them to the record,
spamnb.console.records carries them, spamnb.console.history keeps them) and
shown by ``GET message/ID`` and the history page.  First through the milter
protocol as Postfix speaks it (the MAIL stage's macros), then through the
real Postfix (slow)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("h11")

from raw_milter import NOHELO, NR_HELO, RawMilter, packet  # noqa: E402
from test_milter_policy import _send as _send_as_postfix  # noqa: E402
from test_console import Client, ConsoleServer, mail, wait_rows  # noqa: E402


def _send(client, raw, sender, rcpts, helo, **macros):
    """One message as Postfix sends it (tests/test_milter_policy.py's), after a HELO event."""
    client.send(packet("H", helo + b"\x00"))
    return _send_as_postfix(client, raw, sender=sender, rcpts=rcpts, **macros)


def test_the_milters_envelope_is_recorded_and_shown(tmp_path):
    """A message through the milter with Postfix's MAIL-stage macros: its row
    has the client address, HELO, MAIL FROM, the recipients and the login; a
    message through SPAMD has none of them; the milter asks for the HELO
    name (``s``) at negotiation.  The 60 recipients of one message: the
    first 50 kept."""
    import random

    server = ConsoleServer(tmp_path)
    try:
        milter = RawMilter(("127.0.0.1", server.milter))
        try:
            agreed = milter.negotiate()
            assert not agreed.protocol & NOHELO and agreed.protocol & NR_HELO     # HELO asked for, unanswered
            rng = random.Random(5)
            answers = _send(milter, mail(rng, True, 1, subject="envelope one"), "Eve@Spam.Example",
                            ["bob@test.example", "carol@test.example"], b"mx.spam.example", auth="eve-login",
                            addr="192.0.2.77")
            assert answers[-1].kind in ("c", "y"), answers
            many = [f"u{n}@test.example" for n in range(60)]
            _send(milter, mail(rng, False, 2, subject="envelope two"), "", many, b"[198.51.100.9]",
                  addr="198.51.100.9")
            # a HELO name that does not decode: skipped (the HELO of before stays), the message still checked
            answers = _send(milter, mail(rng, False, 4, subject="envelope four"), "x@y.example", ["bob@test.example"],
                            b"bad\xff\xfe.example")
            assert answers[-1].kind == "c", answers
        finally:
            milter.close()
        assert server.spamc("-c", stdin=mail(rng, False, 3, subject="envelope three")).returncode in (0, 1)
        client = Client(server)
        assert client.login("admin")[0] == 200
        rows = wait_rows(client, 4)
        by_subject = {row["subject"]: row for row in rows}
        one, two, three = (by_subject[f"envelope {n}"] for n in ("one", "two", "three"))
        assert one["front"] == "milter" and one["client"] == "192.0.2.77" and one["mail_from"] == "eve@spam.example"
        status, row, _ = client.request("GET", f"/api/v1/message/{one['id']}")
        assert status == 200
        assert (row["client"], row["helo"], row["mail_from"], row["rcpt_to"], row["auth"]) == (
            "192.0.2.77", "mx.spam.example", "eve@spam.example", "bob@test.example, carol@test.example", "eve-login")
        status, row, _ = client.request("GET", f"/api/v1/message/{two['id']}")
        assert row["client"] == "198.51.100.9" and row["helo"] == "[198.51.100.9]" and row["auth"] is None
        assert row["mail_from"] is None         # the null sender: no address
        assert row["rcpt_to"] == ", ".join(many[:50])
        status, row, _ = client.request("GET", f"/api/v1/message/{by_subject['envelope four']['id']}")
        assert row["helo"] == "[198.51.100.9]" and row["mail_from"] == "x@y.example"
        status, row, _ = client.request("GET", f"/api/v1/message/{three['id']}")
        assert row["front"] == "spamd" and [row[k] for k in ("client", "helo", "mail_from", "rcpt_to", "auth")] \
            == [None] * 5
    finally:
        server.stop()


# ---------------------------------------------------------------------------- the real Postfix
from postfix_private import pf_root, postfixes, skip_reason, work  # noqa: E402,F401 - fixtures
from mailchain import DOMAIN, messages, send, serving  # noqa: E402,F401
from test_postfix_milter import milter_postfix  # noqa: E402,F401 - the fixture


@pytest.mark.slow
@pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))
def test_postfix_hands_the_envelope_to_the_console(work, milter_postfix, serving, tmp_path):
    """docs/serve.md's milter lines in a private Postfix: a message sent over
    SMTP (EHLO client.example, MAIL FROM sender@client.example, two
    recipients) is in the console's history with Postfix's client address,
    the HELO name, the sender and both recipients."""
    from mailchain import free_port
    from test_console import users_file

    milter_port, ui = free_port(), free_port()
    users_file(tmp_path / "users")
    serve = serving(work, None, "--milter", f"127.0.0.1:{milter_port}", "--ui", str(ui), "--ui-users",
                    tmp_path / "users", "--ui-history", tmp_path / "history.sqlite")
    pf = milter_postfix(milter_port)
    tag, message, _label = messages(work.site, 2)[0]
    rcpts = [f"alice@{DOMAIN}", f"bob@{DOMAIN}"]
    answers = send(pf.smtp_port, message, rcpts, time.monotonic() + 120)
    assert all(code in (250, 550) for code, _ in answers.values()), answers

    class Where:
        base = f"http://127.0.0.1:{ui}"

    Where.ui = ui
    client = Client(Where)
    deadline = time.monotonic() + 60
    while True:
        try:
            if client.login("admin")[0] == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, serve.log_text()[-2000:]
        time.sleep(0.2)
    rows = wait_rows(client, 1, timeout=60)
    status, row, _ = client.request("GET", f"/api/v1/message/{rows[0]['id']}")
    assert status == 200 and row["front"] == "milter", row
    assert row["client"] == "127.0.0.1" and row["helo"] == "client.example", row
    assert row["mail_from"] == "sender@client.example" and row["rcpt_to"] == ", ".join(rcpts), row
