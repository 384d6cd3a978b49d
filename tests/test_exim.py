"""Exim's ``spam =`` ACL condition against ``spamnb serve``: the real exim
binary with a private configuration, as a daemon on a loopback port with the
recipe of docs/serve.md (read from the page) delivering into Maildirs, and in
SMTP sessions on stdin (``exim -C FILE -bs -odq``: accepted messages left in a
private queue) for the headers and variables.  Needs an Exim built with content scanning (Debian's
exim4-daemon-heavy; the light daemon has no ``spam`` condition)."""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from spamnb.model.spam_filter import SpamFilter
from test_serve import MESSAGES, Daemon, _free_port

from conftest import REPO


def _exim():
    for name in ("exim", "exim4"):
        path = shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(f"/usr/sbin/{name}") else None)
        if path:
            return path
    return None


EXIM = _exim()


def _content_scanning():
    if EXIM is None:
        return False
    proc = subprocess.run([EXIM, "-bV"], capture_output=True, timeout=30)
    return b"Content_Scanning" in proc.stdout


pytestmark = pytest.mark.skipif(
    not _content_scanning(),
    reason="no exim with content scanning (Debian package exim4-daemon-heavy)" if EXIM
    else "exim is not installed (Debian package exim4-daemon-heavy)")

# The data ACL of the recipe in docs/serve.md, plus the report (for the test's eyes).
CONFIG = """\
primary_hostname = mx.test.example
spool_directory = {spool}
log_file_path = {spool}/%slog
spamd_address = {address}
acl_smtp_rcpt = acl_rcpt
acl_smtp_data = acl_data

begin acl
acl_rcpt:
  accept

acl_data:
  warn    spam       = nobody:true{defer_ok}
          add_header = X-Spam-Score: $spam_score ($spam_bar)
          add_header = X-Spam-Status: ${{if >={{$spam_score_int}}{{50}}{{Yes}}{{${{if >{{$spam_score_int}}{{0}}{{Unsure}}{{No}}}}}}}}
          add_header = X-Spam-Report: $spam_report
  deny    spam       = nobody{defer_ok}
          message    = This message was classified as spam ($spam_score)
  accept

begin routers
local:
  driver = accept
  transport = local

begin transports
local:
  driver = appendfile
  file = {spool}/mbox
"""


@pytest.fixture(scope="module")
def work(sample_model):
    """A folder the exim user can reach: Exim started by root receives as its
    own user (Debian-exim), so the spool belongs to it and the Unix socket is
    open to all (a root-only pytest temp folder would not do)."""
    root = Path(tempfile.mkdtemp(prefix="spamnb-exim-"))
    os.chmod(root, 0o755)
    home = root / "home"
    home.mkdir()
    os.chmod(home, 0o755)
    shutil.copyfile(sample_model, home / "model.spamnb")     # what `spamnb train -q corpora/` writes here
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon(work):
    d = Daemon(work / "home", "--socket-mode", "0666", "-v")     # -v: the tests read the per-request lines
    yield d
    assert d.stop() == 0


class Exim:
    """One private Exim configuration and queue."""

    def __init__(self, root, address, defer_ok=True):
        self.root = Path(tempfile.mkdtemp(prefix="exim-", dir=root))
        os.chmod(self.root, 0o755)
        self.spool = self.root / "spool"
        self.spool.mkdir()
        self.config = self.root / "exim.conf"
        self.config.write_text(CONFIG.format(spool=self.spool, address=address,
                                             defer_ok="/defer_ok" if defer_ok else ""))
        if os.geteuid() == 0:
            user = self.option("exim_user")
            group = self.option("exim_group")
            shutil.chown(self.spool, user, group)

    def option(self, name):
        proc = subprocess.run([EXIM, "-C", str(self.config), "-bP", name], capture_output=True, timeout=30,
                              check=True)
        return proc.stdout.decode().split("=", 1)[1].strip()

    def send(self, message):
        """One SMTP session (exim -bs, queue only).  Returns (the reply to the
        end of DATA, the queued message's header file text or None)."""
        lines = message.replace(b"\r\n", b"\n").split(b"\n")
        if lines and lines[0].startswith(b"From "):
            lines = lines[1:]            # the mbox separator is not part of the message
        data = b"\r\n".join(b"." + line if line.startswith(b".") else line for line in lines)
        session = (b"HELO client.example\r\nMAIL FROM:<sender@client.example>\r\n"
                   b"RCPT TO:<user@mx.test.example>\r\nDATA\r\n" + data + b"\r\n.\r\nQUIT\r\n")
        proc = subprocess.run([EXIM, "-C", str(self.config), "-odq", "-bs"], input=session,
                              capture_output=True, timeout=60)
        replies = proc.stdout.decode(errors="replace").splitlines()
        after_data = replies[replies.index(next(r for r in replies if r.startswith("354"))) + 1]
        match = re.match(r"250 OK id=(\S+)", after_data)
        if not match:
            return after_data, None
        header_file = self.spool / "input" / f"{match.group(1)}-H"
        return after_data, header_file.read_text(errors="replace")


def _header(spool_text, name):
    """A header field Exim added (spool format: length, flag, 'Name: value',
    continuation lines), unfolded."""
    match = re.search(rf"^\d{{3}}. {re.escape(name)}: (.*(?:\n[ \t].*)*)", spool_text, re.M)
    return None if match is None else " ".join(match.group(1).split())


def _variable(spool_text, name):
    match = re.search(rf"^-{name} (.*)$", spool_text, re.M)
    return None if match is None else match.group(1)


def _bar(score):
    # Exim's bar: one character per whole point, at most 51 (its loop stops
    # once past MAX_SPAM_BAR_CHARS = 50)
    n = min(int(abs(score)), 51)
    return "/" if n == 0 else ("+" if score > 0 else "-") * n


def _unsure_candidates():
    return [b"From: a@example.org\r\nSubject: hello\r\n\r\n" + w.encode() + b"\r\n" for w in
            ("click here now", "meeting tomorrow", "free offer", "the list", "money", "hi there friend",
             "please remove", "linux kernel", "unsubscribe", "order now", "call me")]


def test_exim_rejects_spam_and_tags_ham_and_unsure(daemon, work):
    exim = Exim(work, f"127.0.0.1 {daemon.port}")
    seen = set()
    site = SpamFilter.load(work / "home" / "model.spamnb")
    for message in [p.read_bytes() for p in MESSAGES] + _unsure_candidates():
        before = daemon.log_text().count("REPORT user=nobody")
        reply, spool = exim.send(message)
        log = daemon.log_text().splitlines()
        lines = [line for line in log if "REPORT user=nobody" in line]
        assert len(lines) == before + 1, (reply, log[-3:])     # one request per message (Exim caches it)
        label, score = re.search(r"REPORT user=nobody (\w+) (-?[\d.]+)/5\.0", lines[-1]).groups()
        score = float(score)
        seen.add(label)
        if label == "spam":
            assert reply.startswith("550 ") and f"classified as spam ({score:.1f})" in reply, reply
            assert spool is None
            continue
        assert reply.startswith("250 OK id="), reply
        status = {"ham": "No", "unsure": "Unsure"}[label]
        assert _header(spool, "X-Spam-Status") == status
        assert _header(spool, "X-Spam-Score") == f"{score:.1f} ({_bar(score)})"
        assert _variable(spool, "spam_score") == f"{score:.1f}"
        assert _variable(spool, "spam_bar") == _bar(score)
        # Exim computes (int)((score + 0.001) * 10): truncated, so -41.5 gives -414
        assert _variable(spool, "spam_score_int") == str(int((score + 0.001) * 10))
        report = _header(spool, "X-Spam-Report")
        assert report.startswith(f"spamnb verdict: {label}, score {score:.1f} / 5.0"), report
        assert "Content-length" not in report
        assert (label == "unsure") == (0.0 < score < 5.0)
    assert seen == {"spam", "ham", "unsure"}, seen
    # the verdicts are spamnb's: a message from the corpus that the model calls spam is refused
    spam = [p for p in MESSAGES if site.classify(p.read_bytes()).label == "spam"]
    assert spam and exim.send(spam[0].read_bytes())[0].startswith("550 ")


def test_exim_over_the_unix_socket(daemon, work):
    exim = Exim(work, daemon.sock)
    ham = MESSAGES[-1].read_bytes()
    reply, spool = exim.send(ham)
    assert reply.startswith("250 OK id="), reply
    assert _header(spool, "X-Spam-Status") == "No"
    assert "peer=unix" in daemon.log_text().splitlines()[-1]
    assert exim.send(MESSAGES[0].read_bytes())[0].startswith("550 ")


def test_exim_with_the_server_down(work):
    port = _free_port()                   # nothing listens there
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
    # defer_ok: the message is accepted unchecked, without spam headers
    reply, spool = Exim(work, f"127.0.0.1 {port}", defer_ok=True).send(MESSAGES[0].read_bytes())
    assert reply.startswith("250 OK id="), reply
    assert _header(spool, "X-Spam-Status") is None and _variable(spool, "spam_score") is None
    # without it the spam condition defers: a temporary error, the client retries later
    reply, spool = Exim(work, f"127.0.0.1 {port}", defer_ok=False).send(MESSAGES[0].read_bytes())
    assert reply.startswith("451 ") and spool is None, reply


SPAMC = shutil.which("spamc") or ("/usr/bin/spamc" if os.path.exists("/usr/bin/spamc") else None)


def _queued(exim):
    folder = exim.spool / "input"
    return sorted(folder.glob("*-H")) if folder.exists() else []


@pytest.mark.skipif(SPAMC is None, reason="spamc is not installed (Debian package spamc)")
def test_content_filter_through_spamc_reinjects_into_sendmail(daemon, work):
    """spamc's own reinjection, `spamc ... -e sendmail -oi -f SENDER RCPT`,
    with Exim's sendmail interface as the sendmail: the exit codes spamc gives
    when the server is down (the real Postfix with the recipe of docs/serve.md
    is in tests/test_postfix.py)."""
    exim = Exim(work, "127.0.0.1 1")
    original = MESSAGES[0].read_bytes().split(b"\n", 1)[1]          # without the mbox From_ line
    sendmail = [EXIM, "-C", str(exim.config), "-odq", "-oi", "-f", "sender@client.example", "user@mx.test.example"]

    def run(port, *flags):
        return subprocess.run([SPAMC, "-d", "127.0.0.1", "-p", str(port), "--connect-retries", "1", *flags,
                               "-e", *sendmail],
                              input=original, capture_output=True, timeout=60)

    assert run(daemon.port, "-x", "-X").returncode == 0
    [queued] = _queued(exim)
    text = queued.read_text(errors="replace")
    assert _header(text, "X-Spam-Flag") == "YES" and _header(text, "X-Spam-Status").startswith("Yes, score=")
    body = (exim.spool / "input" / queued.name.replace("-H", "-D")).read_bytes()
    assert body.endswith(original[original.find(b"\n\n") + 2:])
    down = _free_port()
    # server down, -x -X: EX_TEMPFAIL (Postfix's pipe defers the mail), nothing passed on
    proc = run(down, "-x", "-X")
    assert proc.returncode == 75 and len(_queued(exim)) == 1
    # -x alone exits EX_UNAVAILABLE, which Postfix's pipe turns into a bounce: hence -X in the recipe
    assert run(down, "-x").returncode == 69 and len(_queued(exim)) == 1
    # without -x: the safe fallback passes the message on unchecked
    assert run(down).returncode == 0
    last = [p for p in _queued(exim) if p != queued]
    assert len(last) == 1 and _header(last[0].read_text(errors="replace"), "X-Spam-Status") is None


# ---------------------------------------------------------------- end to end: an Exim daemon, SMTP on loopback

from mailchain import (DOMAIN, WORD, IdleSockets, SpamdTap, Work, answer_key, check_hard,  # noqa: E402,F401
                       free_port, hard_messages, header, message_tag, messages, read_maildir, send, serving)

CHAIN_USERS = ("alice", "bob", "carol", "dave")

DAEMON_CONFIG = """\
primary_hostname = mx.test.example
spool_directory = {spool}
log_file_path = {spool}/%slog
local_interfaces = <; 127.0.0.1
daemon_smtp_ports = {smtp_port}
{main}
acl_smtp_rcpt = acl_rcpt
acl_smtp_data = acl_data
domainlist local_domains = {domain}

begin acl
acl_rcpt:
  accept  domains = +local_domains
  deny

acl_data:
{acl}
  accept

begin routers
local:
  driver = accept
  domains = +local_domains
  local_parts = {users}
  transport = maildir

begin transports
maildir:
  driver = appendfile
  directory = {mail}/$local_part_data
  maildir_format
  create_directory
  user = {delivery_user}
"""


def _doc_exim_recipe(spamd_address):
    """docs/serve.md's Exim block: (main-section lines, data ACL lines), the
    spamd_address pointed at the test's server."""
    text = (REPO / "docs" / "serve.md").read_text()
    blocks = re.findall(r"```exim\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/serve.md should show one exim block"
    main, _, acl = blocks[0].partition("# acl_check_data\n")
    main = re.sub(r"(?m)^spamd_address = .*$", f"spamd_address = {spamd_address}", main)
    assert "spamd_address = " + spamd_address in main and "spam " in acl
    return main.replace("# main section\n", ""), acl


class EximDaemon:
    """``exim -C FILE -bd`` on a loopback port, delivering into Maildirs."""

    def __init__(self, root, spamd_port):
        self.root = Path(tempfile.mkdtemp(prefix="exim-daemon-", dir=root))
        os.chmod(self.root, 0o755)
        self.spool = self.root / "spool"
        self.mail = self.root / "mail"
        self.spool.mkdir()
        self.mail.mkdir()
        # Exim run with -C by root keeps root to receive, but its delivery
        # processes lose it ("exim user lost privilege for using -C option"):
        # they deliver as the exim user
        delivery_user = "Debian-exim" if _has_user("Debian-exim") else "root"
        shutil.chown(self.mail, delivery_user)
        self.port = free_port()
        main, acl = _doc_exim_recipe(f"127.0.0.1 {spamd_port}")
        self.config = self.root / "exim.conf"
        self.config.write_text(DAEMON_CONFIG.format(
            spool=self.spool, smtp_port=self.port, main=main, acl=acl, domain=DOMAIN, mail=self.mail,
            users=" : ".join(CHAIN_USERS), delivery_user=delivery_user))
        if os.geteuid() == 0:
            shutil.chown(self.spool, delivery_user)
        self.proc = subprocess.Popen([EXIM, "-C", str(self.config), "-bd", "-oP", str(self.root / "pid")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"exim did not start: {self.proc.stderr.read() if self.proc.poll() is not None else ''}"
                                   f" {self.log('main')}")
            time.sleep(0.1)

    def log(self, which="main"):
        path = self.spool / f"{which}log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self):
        pid_file = self.root / "pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _has_user(name):
    import pwd
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


@pytest.fixture(scope="module")
def chain_work():
    w = Work()
    yield w
    w.cleanup()


def _exim_deliveries(exim):
    got = {}
    for user in CHAIN_USERS:
        for message in read_maildir(exim.mail / user):
            got.setdefault((message_tag(message), user), []).append(message)
    return got


def _send_chain(exim, batch, recipients_of, expected, refused, deadline, faults=None):
    for i, (tag, message, label) in enumerate(batch):
        if faults:
            faults(i)
        rcpts = recipients_of(i)
        answers = send(exim.port, message, rcpts, deadline)
        for rcpt, (code, reply) in answers.items():
            user = rcpt.split("@")[0]
            if label == "spam":
                assert code == 550 and b"classified as spam" in reply, (tag, rcpt, code, reply)
                refused.add((tag, user))
            else:
                assert code == 250, (tag, rcpt, code, reply)
                expected[(tag, user)] = label


def _check_exim(exim, expected, refused, deadline):
    while True:
        got = _exim_deliveries(exim)
        if set(expected) <= set(got) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert set(got) == set(expected), (sorted(set(expected) ^ set(got))[:5], exim.log()[-3000:])
    for key, label in expected.items():
        assert len(got[key]) == 1, key
        status = header(got[key][0], "X-Spam-Status")
        assert status == [WORD[label]], (key, status)
    assert refused and not set(refused) & set(got)
    assert "** " not in exim.log()           # Exim's mark of a failed (bounced) delivery


def _chain_recipients(i):
    if i % 3 == 0:
        return [f"{u}@{DOMAIN}" for u in ("alice", "bob", "dave")]
    return [f"{'dave' if i % 2 else 'alice'}@{DOMAIN}"]


@pytest.mark.slow
def test_exim_daemon_delivers_every_message_once_through_faults(chain_work, serving):
    """The docs' Exim recipe in a daemon on loopback, 40 messages (several with
    three recipients) while the server's connection limit is full, its model
    replaced and reloaded, and the server stopped and started again: ham
    arrives once per recipient with its header, spam is refused with 550,
    what met a fault got 451 and was accepted when sent again; no bounce."""
    serve = serving(chain_work, None, "--max-connections", "4", "--timeout", "30")
    exim = EximDaemon(chain_work.root, serve.port)
    batch = messages(chain_work.site)
    expected, refused = {}, set()
    state = {}

    def faults(i):
        if i == 10:
            state["idle"] = IdleSockets(serve.port, 4)
            threading.Timer(4, state["idle"].close).start()      # the fault clears while the client retries
        if i == 20:
            chain_work.replace_site_model()
            serve.reload()
        if i == 30:
            assert serve.stop() == 0
            threading.Timer(4, serve.start).start()

    try:
        _send_chain(exim, batch, _chain_recipients, expected, refused, time.monotonic() + 240, faults)
        _check_exim(exim, expected, refused, time.monotonic() + 60)
    finally:
        serve.stop()
        exim.stop()
    assert len(expected) + len(refused) == 40 + 2 * 14
    # the faults were met: temporary rejections at the end of DATA
    assert "451" in exim.log("reject") or "temporarily rejected" in exim.log("reject"), exim.log("reject")[-2000:]


@pytest.mark.slow
def test_exim_damaged_user_model_gets_the_site_verdict(chain_work, serving):
    """carol's model file is damaged: her mail gets the site model's verdict
    (and the server's log says so) instead of 451 until someone repairs it."""
    serve = serving(chain_work, None)
    exim = EximDaemon(chain_work.root, serve.port)
    batch = messages(chain_work.site)[:6]
    expected, refused = {}, set()
    try:
        _send_chain(exim, batch, lambda i: [f"carol@{DOMAIN}"], expected, refused, time.monotonic() + 20)
        _check_exim(exim, expected, refused, time.monotonic() + 30)
    finally:
        serve.stop()
        exim.stop()
    assert "temporarily rejected" not in exim.log("reject")
    assert any("carol" in line and "site" in line.lower() for line in serve.log_text().splitlines()), \
        serve.log_text()[-2000:]


@pytest.mark.slow
def test_exim_mail_near_the_cutoffs_gets_the_command_lines_verdict(chain_work, serving):
    """Twelve messages near a cutoff (mailchain.hard_messages, chosen as Exim
    hands them over: its From line, envelope and Received fields, then the
    message) through the docs' Exim recipe, Exim pointed at a relay that
    keeps each request (mailchain.SpamdTap): refused with 550 exactly when
    ``spamnb classify`` on the message of its request says spam, the others
    delivered once with that verdict's word in X-Spam-Status, which the
    recipe takes from the score alone (Unsure above 0, Yes from 5.0): unsure
    mail a hair above the ham cutoff must still score above 0, unsure mail
    just under the spam cutoff under 5.0."""
    serve = serving(chain_work, None)
    tap = SpamdTap(serve.port)
    exim = EximDaemon(chain_work.root, tap.port)
    expected, refused = {}, set()
    first = [m for m in messages(chain_work.site, 2) if m[2] == "ham"]
    try:
        _send_chain(exim, first, lambda i: [f"alice@{DOMAIN}"], expected, refused, time.monotonic() + 30)
        handed = tap.handed()[first[0][0]][0]
        trace = handed[:handed.index(b"Message-ID: <" + first[0][0].encode())]
        hard = hard_messages(chain_work.site, 2, trace)
        labels = {tag: None for tag, _, _ in hard}
        for i, (tag, message, _band) in enumerate(hard):
            (code, reply), = send(exim.port, message, [f"alice@{DOMAIN}"], time.monotonic() + 60).values()
            assert code in (250, 550), (tag, code, reply)
            labels[tag] = "spam" if code == 550 else None
            if code == 250:
                expected[(tag, "alice")] = None
        got = tap.handed()
        assert all(len(got[tag]) == 1 for tag in labels), {tag: len(got.get(tag, ())) for tag in labels}
        key = answer_key(chain_work.site, {tag: got[tag][0] for tag in labels})
        check_hard(chain_work.site, key)
        for tag, (label, _odds) in key.items():
            assert (labels[tag] == "spam") == (label == "spam"), (tag, key[tag], labels[tag])
            if label == "spam":
                refused.add((tag, "alice"))
            else:
                expected[(tag, "alice")] = label
        _check_exim(exim, expected, refused, time.monotonic() + 60)
    finally:
        serve.stop()
        exim.stop()
        tap.close()
