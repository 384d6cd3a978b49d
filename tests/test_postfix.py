"""The real Postfix in front of ``spamnb serve``: the content-filter recipe of
docs/serve.md (master.cf and main.cf read from the page; only paths, the port
and the pipe user changed), mail sent over SMTP on loopback.

Postfix is Debian's package unpacked into a private folder
(tests/postfix_private.py; Debian's postfix conflicts with the exim4 packages
the Exim tests need) and run with ``postfix -c DIR`` as root, which starts its
daemons as its own ``postfix`` user: that user and the ``postdrop`` group
must exist (.ci/run creates them).  The pipe runs as ``nobody``; the
unpacked postdrop is not set-gid, so the queue's maildrop folder is opened to
all (mode 1733, as Postfix allowed before it had a set-gid postdrop) for the
reinjecting sendmail.
"""

import time

import pytest

from conftest import OneShotSpamd
from mailchain import (DOMAIN, IdleSockets, SpamdTap, answer_key, check_hard, hard_messages, messages,  # noqa: F401
                       read_maildir, send, serving)
from postfix_private import (USERS, check_deliveries, pf_root, postfixes, recipe, skip_reason, wait_for,  # noqa: F401
                             work)

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))


@pytest.fixture
def postfix_factory(pf_root, postfixes):
    """``make(spamd_port, main_cf=, master_cf=)``: a Postfix with the recipe (:func:`recipe`)."""
    def make(spamd_port, main_cf=None, master_cf=None):
        main = recipe(pf_root, 0, spamd_port, main_cf, master_cf)[0]
        return postfixes(main, lambda smtp_port: recipe(pf_root, smtp_port, spamd_port, main_cf, master_cf)[1])

    return make


def _recipients(i):
    """Mostly one recipient; every third message three in one transaction."""
    if i % 3 == 0:
        return [f"{u}@{DOMAIN}" for u in ("alice", "bob", "dave")]
    return [f"{USERS[i % 2 * 3 if i % 2 else 0]}@{DOMAIN}"]


@pytest.mark.slow
def test_postfix_delivers_every_message_once_through_faults(work, postfix_factory, serving):
    """40 messages through the recipe while the server's connection limit is
    full, its model replaced and reloaded, and the server stopped and started
    again: every recipient gets each message once with the right header;
    what could not be checked was deferred, then delivered."""
    serve = serving(work, None, "--max-connections", "4", "--timeout", "30")
    pf = postfix_factory(serve.port)
    batch = messages(work.site)
    expected = {}
    deadline = time.monotonic() + 240
    try:
        for i, (tag, message, label) in enumerate(batch):
            rcpts = _recipients(i)
            if i == 10:
                idle = IdleSockets(serve.port, 4)           # the connection limit held full
            if i == 20:
                idle.close()
                work.replace_site_model()
                serve.reload()
            if i == 30:
                assert serve.stop() == 0                    # the server down ...
            if i == 35:
                time.sleep(3)                               # ... long enough for deferrals
                serve.start()                               # ... and back
            answers = send(pf.smtp_port, message, rcpts, deadline)
            assert all(code == 250 for code, _ in answers.values()), answers
            expected.update({(tag, r.split("@")[0]): label for r in rcpts})
            if i in (15, 34):
                time.sleep(2)                               # let deliveries meet the fault
        got = wait_for(pf, expected, deadline)
        check_deliveries(pf, expected, got)
    finally:
        serve.stop()
    log = pf.log_text()
    # the faults were met: deliveries deferred by the wrapper, then retried
    assert "dsn=4.3.0, status=deferred (spamnb-pipe: /usr/bin/spamc failed (exit status 69)" in log, log[-3000:]
    assert len(expected) == 40 + 2 * 14, len(expected)


@pytest.mark.slow
def test_postfix_damaged_user_model_gets_the_site_verdict(work, postfix_factory, serving):
    """carol's model file is damaged: her mail is checked with the site model
    (and the server says so in its log) rather than deferred until someone
    repairs the file."""
    serve = serving(work, None)
    pf = postfix_factory(serve.port)
    batch = messages(work.site)[:6]
    expected = {}
    deadline = time.monotonic() + 60
    try:
        for tag, message, label in batch:
            rcpts = [f"carol@{DOMAIN}", f"alice@{DOMAIN}"]
            answers = send(pf.smtp_port, message, rcpts, deadline)
            assert all(code == 250 for code, _ in answers.values()), answers
            expected.update({(tag, r.split("@")[0]): label for r in rcpts})
        got = wait_for(pf, expected, time.monotonic() + 30)
        check_deliveries(pf, expected, got)
    finally:
        serve.stop()
    assert "status=deferred" not in pf.log_text()
    # the server's log names the user whose model it could not use and the fallback
    assert any("carol" in line and "site" in line.lower() for line in serve.log_text().splitlines()), \
        serve.log_text()[-2000:]


@pytest.mark.slow
def test_postfix_mail_near_the_cutoffs_gets_the_command_lines_verdict(work, postfix_factory, serving):
    """Twelve messages near a cutoff (mailchain.hard_messages, chosen as the
    pipe hands them over, after one easy ham showed how) through the
    recipe, spamc pointed at a relay that keeps each request
    (mailchain.SpamdTap): each delivered once with the X-Spam-Status word
    (and X-Spam-Flag for spam only) of ``spamnb classify`` on the message of
    its request, the bytes Postfix's pipe handed spamc (its Received field
    and the message), not the server's own verdict; unsure mail is
    delivered, tagged Unsure."""
    serve = serving(work, None)
    tap = SpamdTap(serve.port)
    pf = postfix_factory(tap.port)
    deadline = time.monotonic() + 120
    try:
        first, message, _ = next(m for m in messages(work.site, 2) if m[2] == "ham")
        send(pf.smtp_port, message, [f"alice@{DOMAIN}"], deadline)
        while first not in tap.handed():
            assert time.monotonic() < deadline, pf.log_text()[-3000:]
            pf.flush()
            time.sleep(0.2)
        handed = tap.handed()[first][0]
        hard = hard_messages(work.site, 2, handed[:handed.index(b"Message-ID: <" + first.encode())])
        for tag, message, _band in hard:
            answers = send(pf.smtp_port, message, [f"alice@{DOMAIN}"], deadline)
            assert all(code == 250 for code, _ in answers.values()), answers
        got = wait_for(pf, {(tag, "alice"): None for tag, _, _ in hard}, deadline)
        handed = tap.handed()
        assert all(len(handed.get(tag, ())) == 1 for tag, _, _ in hard), {t: len(handed.get(t, ())) for t, _, _ in hard}
        key = answer_key(work.site, {tag: handed[tag][0] for tag, _, _ in hard})
        check_hard(work.site, key)
        check_deliveries(pf, {(first, "alice"): "ham", **{(tag, "alice"): label for tag, (label, _) in key.items()}},
                         got)
    finally:
        serve.stop()
        tap.close()


@pytest.mark.slow
def test_without_the_recipient_limit_multi_recipient_mail_is_lost(work, postfix_factory, serving):
    """Why docs/serve.md sets spamnb_destination_recipient_limit = 1: with
    several recipients in one delivery, `-u ${user}` becomes several words,
    spamc stops reading options at the second, never sees -e, prints the
    message and exits 0; Postfix counts it as sent to everyone and nothing
    arrives.  (The old recipe, run by the real Postfix.)"""
    serve = serving(work, None)
    old = ("smtp      inet  n       -       y       -       -       smtpd\n"
           "  -o content_filter=spamnb:dummy\n"
           "spamnb    unix  -       n       n       -       -       pipe\n"
           "  user=spamnb argv=/usr/bin/spamc -x -X -u ${user} -e /usr/sbin/sendmail -oi -f ${sender} ${recipient}\n")
    pf = postfix_factory(serve.port, main_cf="", master_cf=old)
    tag, message, label = messages(work.site)[1]
    try:
        answers = send(pf.smtp_port, message, [f"alice@{DOMAIN}", f"bob@{DOMAIN}"], time.monotonic() + 30)
        assert all(code == 250 for code, _ in answers.values())
        deadline = time.monotonic() + 30
        while pf.log_text().count("status=sent") < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2)
    finally:
        serve.stop()
    assert pf.log_text().count("relay=spamnb") >= 2 and "status=sent" in pf.log_text()
    assert not any(read_maildir(pf.mail / u) for u in USERS)     # "sent", and lost


@pytest.mark.slow
def test_an_error_answer_defers_with_the_wrapper_and_bounced_without(work, postfix_factory, serving):
    """A server that answers with an error status: `spamc -x -X -e sendmail`
    exits 76 and Postfix bounces the mail; the recipe's spamnb-pipe exits 75
    and Postfix defers it (and delivers it once the server answers)."""
    bad = OneShotSpamd(b"SPAMD/1.5 76 EX_PROTOCOL\r\n\r\n")   # every request answered an error
    old = ("smtp      inet  n       -       y       -       -       smtpd\n"
           "  -o content_filter=spamnb:dummy\n"
           "spamnb    unix  -       n       n       -       -       pipe\n"
           "  user=spamnb argv=/usr/bin/spamc -x -X -u ${user} -e /usr/sbin/sendmail -oi -f ${sender} -- ${recipient}\n")
    bouncing = postfix_factory(bad.port, master_cf=old)
    deferring = postfix_factory(bad.port)
    tag, message, label = messages(work.site)[0]
    try:
        for pf in (bouncing, deferring):
            answers = send(pf.smtp_port, message, [f"alice@{DOMAIN}"], time.monotonic() + 30)
            assert all(code == 250 for code, _ in answers.values())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not ("status=bounced" in bouncing.log_text()
                                                   and "status=deferred" in deferring.log_text()):
            time.sleep(0.5)
    finally:
        bad.close()
    assert "status=bounced" in bouncing.log_text(), bouncing.log_text()[-2000:]
    log = deferring.log_text()
    assert "status=deferred" in log and "dsn=4.3.0, status=deferred (spamnb-pipe: " in log and "status=bounced" not in log, log[-2000:]
    # the server answers again: the deferred message is delivered, once
    serve = serving(work, bad.port)
    try:
        got = wait_for(deferring, {(tag, "alice"): label}, time.monotonic() + 60)
        check_deliveries(deferring, {(tag, "alice"): label}, got)
    finally:
        serve.stop()
