"""Exim's ``spam =`` ACL condition against ``spamnb serve``: the real exim
binary with a private configuration (``exim -C FILE -bs -odq``: an SMTP
session on stdin, accepted messages left in a private queue), the recipe of
docs/serve.md.  Needs an Exim built with content scanning (Debian's
exim4-daemon-heavy; the light daemon has no ``spam`` condition)."""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from spamnb.model.spam_filter import SpamFilter
from test_serve import MESSAGES, Daemon, _env, _free_port

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
def work():
    """A folder the exim user can reach: Exim started by root receives as its
    own user (Debian-exim), so the spool belongs to it and the Unix socket is
    open to all (a root-only pytest temp folder would not do)."""
    root = Path(tempfile.mkdtemp(prefix="spamnb-exim-"))
    os.chmod(root, 0o755)
    home = root / "home"
    home.mkdir()
    os.chmod(home, 0o755)
    subprocess.run([sys.executable, "-m", "spamnb", "train", "-q", str(REPO / "corpora")],
                   env=_env(home), check=True, capture_output=True, timeout=300)
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
    """The Postfix content-filter recipe's command, `spamc ... -e sendmail -oi
    -f SENDER RCPT`, with Exim's sendmail interface as the sendmail (Postfix
    itself conflicts with the exim packages, so it is not installed here)."""
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
