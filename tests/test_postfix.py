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

import os
import re
import time

import pytest

from conftest import REPO, OneShotSpamd
from mailchain import (DOMAIN, SPAMC, WORD, WRAPPER, IdleSockets, Work, free_port, header,  # noqa: F401
                       message_tag, messages, read_maildir, send, serving)
import postfix_private

USERS = ("alice", "bob", "carol", "dave")


def _skip_reason():
    if os.geteuid() != 0:
        return "Postfix starts as root (run the tests as root, as CI does)"
    if SPAMC is None:
        return "spamc is not installed (Debian package spamc)"
    missing = postfix_private.missing_accounts()
    if missing:
        return f"Postfix needs its {' and '.join(missing)} (.ci/run creates them)"
    return None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))


@pytest.fixture(scope="module")
def pf_root():
    root, why = postfix_private.unpacked_postfix()
    if root is None:
        pytest.skip(why)
    return root


@pytest.fixture(scope="module")
def work():
    w = Work()
    yield w
    w.cleanup()


def _doc_block(kind):
    text = (REPO / "docs" / "serve.md").read_text()
    blocks = re.findall(rf"```{re.escape(kind)}\n(.*?)```", text, re.S)
    assert len(blocks) == 1, f"docs/serve.md should show one {kind} block"
    return blocks[0]


def recipe(pf_root, smtp_port, spamd_port, main_cf=None, master_cf=None):
    """docs/serve.md's main.cf and master.cf with this machine's paths: smtpd
    on 127.0.0.1:smtp_port (not chrooted), spamc to 127.0.0.1:spamd_port, the
    wrapper from contrib/, the unpacked sendmail, the pipe as nobody:postdrop."""
    master = master_cf if master_cf is not None else _doc_block("master.cf")
    main = main_cf if main_cf is not None else _doc_block("main.cf")
    master, n = re.subn(r"(?m)^smtp(\s+)inet(\s+)n(\s+)-(\s+)y", f"127.0.0.1:{smtp_port} inet n - n", master)
    assert n == 1, master
    replacements = {
        "/usr/local/libexec/spamnb-pipe": str(WRAPPER),
        "/usr/bin/spamc": f"{SPAMC} -d 127.0.0.1 -p {spamd_port}",
        "/usr/sbin/sendmail": str(pf_root / "usr" / "sbin" / "sendmail"),
        "user=spamnb": "user=nobody",
    }
    for old, new in replacements.items():
        assert old in master or (master_cf is not None and "spamnb-pipe" in old), (old, master)
        master = master.replace(old, new)
    return main, master


@pytest.fixture
def postfix_factory(pf_root, work):
    started = []

    def make(spamd_port, **kw):
        smtp_port = free_port()
        main, master = recipe(pf_root, smtp_port, spamd_port, **kw)
        pf = postfix_private.Postfix(pf_root, work.root, main, master, USERS)
        pf.smtp_port = smtp_port
        pf.start()
        started.append(pf)
        pf.wait_for_smtp(smtp_port)
        return pf

    yield make
    for pf in started:
        pf.stop()


def _wait_for(pf, expected, deadline):
    """Until every (tag, user) in ``expected`` is delivered (flushing the
    deferred queue meanwhile) or ``deadline``; returns {(tag, user): [messages]}."""
    while True:
        got = {}
        for user in USERS:
            for message in read_maildir(pf.mail / user):
                got.setdefault((message_tag(message), user), []).append(message)
        if set(expected) <= set(got) or time.monotonic() > deadline:
            return got
        pf.flush()
        time.sleep(1)


def _check_deliveries(pf, expected, got):
    """Each (tag, user) delivered exactly once with the X-Spam-Status of its
    verdict; nothing else delivered, nothing bounced, the queue empty."""
    missing = sorted(set(expected) - set(got))
    assert not missing, (missing[:5], pf.log_text()[-4000:])
    assert set(got) == set(expected), sorted(set(got) - set(expected))[:5]
    for key, label in expected.items():
        assert len(got[key]) == 1, (key, len(got[key]))
        status = header(got[key][0], "X-Spam-Status")
        assert len(status) == 1 and status[0].startswith(WORD[label] + ","), (key, label, status)
        assert header(got[key][0], "X-Spam-Flag") == (["YES"] if label == "spam" else [])
    log = pf.log_text()
    assert "status=bounced" not in log, [line for line in log.splitlines() if "status=bounced" in line][:3]
    assert not pf.queued()


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
        got = _wait_for(pf, expected, deadline)
        _check_deliveries(pf, expected, got)
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
        got = _wait_for(pf, expected, time.monotonic() + 30)
        _check_deliveries(pf, expected, got)
    finally:
        serve.stop()
    assert "status=deferred" not in pf.log_text()
    # the server's log names the user whose model it could not use and the fallback
    assert any("carol" in line and "site" in line.lower() for line in serve.log_text().splitlines()), \
        serve.log_text()[-2000:]


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
        got = _wait_for(deferring, {(tag, "alice"): label}, time.monotonic() + 60)
        _check_deliveries(deferring, {(tag, "alice"): label}, got)
    finally:
        serve.stop()
