"""The real Postfix with ``spamnb serve --milter``: docs/serve.md's milter
main.cf lines (only the address changed) in a private Postfix
(tests/postfix_private.py, as tests/test_postfix.py runs it), mail sent over
SMTP on loopback, the server started as docs/serve.md says."""

import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("kilter.protocol")

from conftest import REPO, wait_until  # noqa: E402
from mailchain import (SPAMC, DOMAIN, answer_key, check_hard, env, free_port, hard_messages, header,  # noqa: E402,F401
                       messages, send, serving, trace_field)
from postfix_private import (check_deliveries, milter_main_cf, pf_root, postfixes, skip_reason,  # noqa: E402,F401
                             wait_for, work)
from test_milter import _unsure_message  # noqa: E402

from spamnb.model.spam_filter import SpamFilter  # noqa: E402

pytestmark = [pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason())), pytest.mark.slow]


@pytest.fixture
def milter_postfix(postfixes):
    """``make(milter_port, extra_main="")``: a Postfix whose smtpd asks the milter at ``milter_port``."""
    return lambda milter_port, extra_main="": postfixes(milter_main_cf(milter_port) + extra_main,
                                                        lambda smtp_port: f"127.0.0.1:{smtp_port} inet n - n - - smtpd\n")


def _serve(serving, work, milter_port, *extra):
    return serving(work, None, "--milter", f"127.0.0.1:{milter_port}", "-v", *extra)


def test_reject_refuses_spam_at_end_of_data_and_delivers_ham_once(work, milter_postfix, serving):
    """Under --milter-spam-action reject: spam refused with 550 5.7.1 during
    the SMTP session (nothing queued, nothing bounced), ham delivered once to
    each recipient with its X-Spam-* fields, a message for three recipients
    once to each, unsure mail tagged and delivered.  Besides the easy
    messages (the corpus label is their key), twelve near a cutoff
    (mailchain.hard_messages), whose key is ``spamnb classify`` on what
    Postfix handed the milter: refused exactly when that says spam, the
    others delivered with its word (Unsure ones too: never refused)."""
    milter_port = free_port()
    serve = _serve(serving, work, milter_port, "--milter-spam-action", "reject")
    pf = milter_postfix(milter_port)
    batch = messages(work.site, 12)
    expected = {}
    deadline = time.monotonic() + 120
    for i, (tag, message, label) in enumerate(batch):
        rcpts = [f"{u}@{DOMAIN}" for u in (("alice", "bob", "dave") if i % 4 == 1 else ("alice",))]
        answers = send(pf.smtp_port, message, rcpts, deadline)
        if label == "spam":
            assert all(code == 550 and b"5.7.1" in reply for code, reply in answers.values()), answers
        else:
            assert all(code == 250 for code, _ in answers.values()), answers
            expected.update({(tag, r.split("@")[0]): label for r in rcpts})
    unsure = b"Message-ID: <milter-unsure@test.example>\n" + _unsure_message(SpamFilter.load(work.site))
    answers = send(pf.smtp_port, unsure, [f"carol@{DOMAIN}"], deadline)
    assert all(code == 250 for code, _ in answers.values()), answers
    hard = hard_messages(work.site, 2)
    codes = {}
    for tag, message, _band in hard:
        (code, reply), = send(pf.smtp_port, message, [f"alice@{DOMAIN}"], deadline).values()
        assert code in (250, 550), (tag, code, reply)
        codes[tag] = code
    delivered = {(tag, "alice"): None for tag, code in codes.items() if code == 250}
    got = wait_for(pf, {**expected, **delivered, ("milter-unsure", "carol"): "unsure"}, deadline)
    unsure_got = got.pop(("milter-unsure", "carol"), [])
    key = answer_key(work.site, {tag: message for tag, message, _band in hard})
    check_hard(work.site, key)
    for tag, (label, _odds) in key.items():
        assert codes[tag] == (550 if label == "spam" else 250), (tag, key[tag], codes[tag])
        if label != "spam":
            expected[(tag, "alice")] = label
    check_deliveries(pf, expected, got)
    assert len(unsure_got) == 1
    status = header(unsure_got[0], "X-Spam-Status")
    assert len(status) == 1 and status[0].startswith("Unsure,"), status
    assert "milter-reject: END-OF-MESSAGE" in pf.log_text()
    # the milter logs a message once it has answered it: the last refusal's line may come after Postfix's 550
    rejects = 6 + sum(1 for label, _ in key.values() if label == "spam")
    wait_until(lambda: serve.log_text().count("action=reject") >= rejects, what=lambda: serve.log_text()[-2000:])
    assert serve.log_text().count("action=reject") == rejects
    # the macros asked for at negotiation (the queue ID only) came, and Postfix took the list
    assert re.search(r"queue_id=[0-9A-Za-z]{6,}", serve.log_text()), serve.log_text()[-2000:]
    assert not [line for line in pf.log_text().splitlines() if "warning" in line and "milter" in line.lower()]


def test_a_30_mb_message_is_delivered_unchecked_and_not_held(work, milter_postfix, serving):
    """A message over --max-size (4 MiB by default) is passed by
    --milter-on-error accept, delivered once, with no X-Spam-* fields; the
    server does not hold it (its memory stays far below the message)."""
    milter_port = free_port()
    serve = _serve(serving, work, milter_port, "--workers", "1")
    pf = milter_postfix(milter_port, "message_size_limit = 40000000\n")
    tag, message, label = messages(work.site, 2)[1]
    big = message + b"\n" + (b"a line of a large attachment, repeated to thirty megabytes\n" * 520_000)
    assert len(big) > 30_000_000
    before = _rss(serve.proc.pid, "VmRSS")
    answers = send(pf.smtp_port, big, [f"alice@{DOMAIN}"], time.monotonic() + 120)
    assert all(code == 250 for code, _ in answers.values()), answers
    got = wait_for(pf, {(tag, "alice"): label}, time.monotonic() + 120)
    assert len(got[(tag, "alice")]) == 1
    assert header(got[(tag, "alice")][0], "X-Spam-Status") == []
    wait_until(lambda: "too big, not checked" in serve.log_text(), what=lambda: serve.log_text()[-2000:])
    # the server's peak memory grew by far less than the message
    assert _rss(serve.proc.pid, "VmHWM") - before < 12_000_000, (before, _rss(serve.proc.pid, "VmHWM"))


def _rss(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(rf"{field}:\s+(\d+) kB", f.read()).group(1)) * 1024


def test_model_replaced_and_sighup_mid_stream(work, milter_postfix, serving):
    """20 messages while the site model is replaced and the server (two
    workers) reloaded: by a model with the labels the other way round from
    the 7th message (so its verdicts are the other way round: a reload that
    did nothing would show), by the first one again from the 14th; each
    delivered once with the verdict of the model in place when it came (to
    alice, who has no model of her own: bob's would answer for him)."""
    milter_port = free_port()
    serve = _serve(serving, work, milter_port, "--workers", "2")
    pf = milter_postfix(milter_port)
    original = work.root / "site-original.spamnb"
    shutil.copy(work.site, original)
    flipped = work.flipped_model()
    other = {"spam": "ham", "ham": "spam"}
    expected = {}
    deadline = time.monotonic() + 180
    try:
        for i, (tag, message, label) in enumerate(messages(work.site, 20)):
            if i in (6, 13):
                work.replace_site_model(flipped if i == 6 else original)
                old = serve.workers()
                serve.reload()
                _until_replaced(serve, i // 6, message, other[label] if i == 6 else label)
                # the replaced workers accept until they have handled their SIGTERM (late on a loaded
                # machine): until they are gone the next message may still meet the old model
                wait_until(lambda: not serve.workers() & old, what=lambda: serve.log_text()[-2000:])
            answers = send(pf.smtp_port, message, [f"alice@{DOMAIN}"], deadline)
            assert all(code == 250 for code, _ in answers.values()), answers
            # the answer key is the corpus folder's label (messages() keeps those the site model gets right)
            expected[(tag, "alice")] = other[label] if 6 <= i < 13 else label
    finally:
        work.replace_site_model(original)
    check_deliveries(pf, expected, wait_for(pf, expected, deadline))
    assert sum(1 for i, key in enumerate(expected) if expected[key] != key[0].split("-")[1]) == 7
    assert serve.log_text().count("SIGHUP") >= 2


def _until_replaced(serve, reloads, message, label, seconds=60):
    """Until the server has replaced its workers ``reloads`` times since it
    started and answers ``label`` for ``message`` (spamc -c on its SPAMD
    address): a model changed under a loaded one is read in the background
    while the old one serves the next message."""
    deadline = time.monotonic() + seconds
    while serve.log_text().count("worker(s) replaced") < reloads:
        assert time.monotonic() < deadline, serve.log_text()[-2000:]
        time.sleep(0.1)
    while True:
        result = subprocess.run([SPAMC, "-d", "127.0.0.1", "-p", str(serve.port), "-c"], input=message,
                                capture_output=True, timeout=30)
        if result.returncode == (1 if label == "spam" else 0) and not result.stdout.startswith(b"0/0"):
            return
        assert time.monotonic() < deadline, (result, serve.log_text()[-2000:])
        time.sleep(0.2)


def test_milter_killed_postfix_default_action_and_no_mail_lost(work, milter_postfix, serving):
    """The server killed (SIGKILL) mid-stream: Postfix's milter_default_action
    = tempfail answers 4xx, the sender retries, and once the server is back
    every message is delivered once, checked."""
    milter_port = free_port()
    serve = _serve(serving, work, milter_port, "--workers", "1")
    pf = milter_postfix(milter_port)
    expected = {}
    deadline = time.monotonic() + 180
    refused = []
    for i, (tag, message, label) in enumerate(messages(work.site, 12)):
        if i == 4:
            serve.proc.send_signal(signal.SIGKILL)
            serve.proc.wait()
        if i == 8:
            serve.start()
            for tag_, message_, label_ in refused:     # the sender kept them and tries again
                answers = send(pf.smtp_port, message_, [f"alice@{DOMAIN}"], deadline)
                assert all(code == 250 for code, _ in answers.values()), answers
        if 4 <= i < 8:
            # the milter down: Postfix's milter_default_action = tempfail, a 4xx to the sender
            with pytest.raises(AssertionError, match=r"still refused|451"):
                send(pf.smtp_port, message, [f"alice@{DOMAIN}"], time.monotonic() + 0.5)
            refused.append((tag, message, label))
        else:
            answers = send(pf.smtp_port, message, [f"alice@{DOMAIN}"], deadline)
            assert all(code == 250 for code, _ in answers.values()), answers
        expected[(tag, "alice")] = label
    check_deliveries(pf, expected, wait_for(pf, expected, deadline))
    assert "4.7.1" in pf.log_text(), pf.log_text()[-3000:]


def test_a_user_model_for_one_recipient(work, milter_postfix, serving):
    """dave has his own model (labels the other way round): spam for dave alone
    is ham to him; the same spam for dave and alice gets the site model's
    verdict, for both."""
    dave = work.users / "dave"
    dave.mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-m", "spamnb", "train", "-q", "-m", str(dave / "model.spamnb"),
                    "--spam", str(REPO / "corpora" / "easy_ham"), "--ham", str(REPO / "corpora" / "spam")],
                   env=env(work.home), check=True, capture_output=True, timeout=300)
    try:
        milter_port = free_port()
        _serve(serving, work, milter_port)
        pf = milter_postfix(milter_port)
        (tag1, spam1, _), (tag2, spam2, _) = [m for m in messages(work.site, 6) if m[2] == "spam"][:2]
        deadline = time.monotonic() + 60
        assert all(c == 250 for c, _ in send(pf.smtp_port, spam1, [f"dave@{DOMAIN}"], deadline).values())
        assert all(c == 250 for c, _ in send(pf.smtp_port, spam2, [f"dave@{DOMAIN}", f"alice@{DOMAIN}"],
                                             deadline).values())
        got = wait_for(pf, {(tag1, "dave"): 1, (tag2, "dave"): 1, (tag2, "alice"): 1}, deadline)
        assert header(got[(tag1, "dave")][0], "X-Spam-Status")[0].startswith("No,")
        assert header(got[(tag2, "dave")][0], "X-Spam-Status")[0].startswith("Yes,")
        assert header(got[(tag2, "alice")][0], "X-Spam-Status")[0].startswith("Yes,")
    finally:
        for p in dave.iterdir():
            p.unlink()
        dave.rmdir()


def test_tag_with_subject_tag_and_quarantine(work, milter_postfix, serving):
    """Under tag, spam is delivered with its Subject tagged and the sender's
    own X-Spam-* fields gone (one X-Spam-Status, spamnb's); under
    quarantine, spam is kept in Postfix's hold queue, ham delivered."""
    (tag1, spam1, _), (tag2, ham, _), (tag3, spam2, _) = messages(work.site, 4)[:3]
    forged = b"X-Spam-Status: No, score=-10.0\nX-Spam-Flag: NO\n"
    port_tag, port_hold = free_port(), free_port()
    _serve(serving, work, port_tag, "--subject-tag", "[SPAM]")
    _serve(serving, work, port_hold, "--milter-spam-action", "quarantine")
    tagging, holding = milter_postfix(port_tag), milter_postfix(port_hold)
    deadline = time.monotonic() + 60
    for pf, message in ((tagging, forged + spam1), (holding, spam2), (holding, ham)):
        assert all(c == 250 for c, _ in send(pf.smtp_port, message, [f"alice@{DOMAIN}"], deadline).values())
    got = wait_for(tagging, {(tag1, "alice"): 1}, deadline)
    delivered = got[(tag1, "alice")][0]
    assert header(delivered, "X-Spam-Status")[0].startswith("Yes,") and len(header(delivered, "X-Spam-Status")) == 1
    assert header(delivered, "X-Spam-Flag") == ["YES"]
    assert header(delivered, "Subject")[0].startswith("[SPAM] ")
    got = wait_for(holding, {(tag2, "alice"): 1}, deadline)
    assert (tag3, "alice") not in got
    held = holding.queued()
    assert len(held) == 1 and '"queue_name": "hold"' in held[0], held


def _procmail_folder(message, root):
    """Where docs/serve.md's procmail recipe files ``message`` (its filter
    step through spamc left out: the fields are in the message already):
    "Spam", "Unsure" or "inbox", by the real procmail."""
    import os

    block = re.search(r"```procmail\n(.*?)```", (REPO / "docs" / "serve.md").read_text(), re.S).group(1)
    rules = re.sub(r"(?m)^:0fw\n\| \$SPAMC\n", "", block)
    assert "X-Spam-Status: Yes" in rules and "$SPAMC" not in rules.split("\n", 1)[1], rules
    maildir = root / "Maildir"
    shutil.rmtree(maildir, ignore_errors=True)
    for sub in ("new", "cur", "tmp"):
        (maildir / sub).mkdir(parents=True)
    rc = root / "procmailrc"
    rc.write_text(rules.replace("MAILDIR=$HOME/Maildir/", f"MAILDIR={maildir}/"))
    subprocess.run(["procmail", "-m", str(rc)], input=message, check=True, timeout=60,
                   env=dict(os.environ, HOME=str(root)))
    for folder, name in ((".Spam", "Spam"), (".Unsure", "Unsure")):
        if (maildir / folder / "new").is_dir() and os.listdir(maildir / folder / "new"):
            return name
    assert os.listdir(maildir / "new"), "procmail delivered nothing"
    return "inbox"


@pytest.mark.parametrize("action", ["tag", "reject"])
def test_hostile_headers_get_their_verdict_and_the_fields_read_as_spamc_writes_them(work, milter_postfix, serving,
                                                                                  tmp_path, action):
    """Through the real Postfix, with --report and --subject-tag: a ham with
    300 X-Spam-Flag and 120 X-Spam-Status fields of its own, and a spam whose
    Subject is 3,000 and 90,000 characters (folded; Postfix's
    header_size_limit is 102,400), each get their verdict and action (a 4 KiB
    reply buffer closed the milter connection: Postfix's
    milter_default_action instead).  The delivered fields read
    ``X-Spam-Status: Yes, score=...`` byte for byte (spamc's layout), so
    docs/serve.md's procmail recipe files the spam in .Spam."""
    if shutil.which("procmail") is None:
        pytest.skip("procmail is not installed")
    milter_port = free_port()
    serve = _serve(serving, work, milter_port, "--report", "--subject-tag", "[SPAM]", "--milter-spam-action", action)
    pf = milter_postfix(milter_port)
    batch = messages(work.site, 4)
    (stag, spam, _), (htag, ham, _) = batch[0], batch[1]
    forged = b"X-Spam-Flag: YES\n" * 300 + b"X-Spam-Status: No, score=-10.0 forged\n" * 120
    deadline = time.monotonic() + 180
    expected = {(htag, "alice"): "ham"}
    assert all(c == 250 for c, _ in send(pf.smtp_port, forged + ham, [f"alice@{DOMAIN}"], deadline).values())
    subjects = {}
    for length in (3_000, 90_000):
        words = (b"cheap pills now " * (length // 16 + 1))[:length]
        folded = b"\n ".join(words[i:i + 70] for i in range(0, len(words), 70))
        head, _, body = spam.partition(b"\n\n")
        head = re.sub(rb"(?im)^subject:.*\n?(?:[ \t].*\n?)*", b"", head + b"\n").rstrip(b"\n")
        head = re.sub(rb"(?im)^message-id:.*", f"Message-ID: <{stag}-{length}@{DOMAIN}>".encode(), head)
        answers = send(pf.smtp_port, head + b"\nSubject: " + folded + b"\n\n" + body, [f"alice@{DOMAIN}"], deadline)
        if action == "reject":
            assert all(code == 550 and b"5.7.1" in reply for code, reply in answers.values()), answers
        else:
            assert all(code == 250 for code, _ in answers.values()), answers
            expected[(f"{stag}-{length}", "alice")] = "spam"
            subjects[f"{stag}-{length}"] = words
    got = wait_for(pf, expected, deadline)
    check_deliveries(pf, expected, got)
    delivered = got[(htag, "alice")][0].replace(b"\r\n", b"\n")
    head = delivered.partition(b"\n\n")[0]
    assert re.findall(rb"(?m)^X-Spam-Status: No, score=-?[0-9.]+ required=5\.0 tests=", head), head[-3000:]
    assert _procmail_folder(delivered, tmp_path) == "inbox"
    for tag, words in subjects.items():
        delivered = got[(tag, "alice")][0].replace(b"\r\n", b"\n")
        head = delivered.partition(b"\n\n")[0]
        assert len(re.findall(rb"(?m)^X-Spam-Status: Yes, score=[0-9.]+ required=5\.0 tests=", head)) == 1, head[:3000]
        assert re.findall(rb"(?m)^X-Spam-Flag: YES$", head) == [b"X-Spam-Flag: YES"]
        assert re.search(rb"(?m)^X-Spam-Report:\n\t\* spamnb verdict: spam", head)     # as PROCESS writes it
        subject = header(delivered, "Subject")
        assert len(subject) == 1 and subject[0].startswith("[SPAM] cheap pills"), subject
        # the whole Subject as Postfix passed it on (it keeps about 60,000 bytes of a field), tagged
        kept = "".join(subject[0].split())[len("[SPAM]"):]
        assert "".join(words.decode().split()).startswith(kept) and len(kept) > min(len(words) * 0.8, 45_000)
        assert _procmail_folder(delivered, tmp_path) == "Spam"
    # a message is logged once answered: the last one's line may come after Postfix's answer
    wait_until(lambda: serve.log_text().count(f"action={action}") >= 2, what=lambda: serve.log_text()[-3000:])
    log = serve.log_text()
    assert "protocol error" not in log, log[-3000:]
    assert not [line for line in pf.log_text().splitlines() if "warning" in line and "milter" in line.lower()]
