"""``spamnb imap scan`` and ``spamnb imap learn`` against a real Dovecot over
IMAPS (a self-signed certificate made here, given as the CA), driven as a
user runs them: whole ``spamnb`` processes with a settings file."""

import hashlib
import imaplib
import os
import re
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dovecot_private
from conftest import REPO, corpus_root, run_spamnb
from spamnb.model.spam_filter import SpamFilter
from test_dovecot import counts, trained  # noqa: F401  (the trained-model fixture)

import spamnb

pytestmark = pytest.mark.skipif(dovecot_private.missing() is not None, reason=str(dovecot_private.missing()))
USERS = {f"user{i}": f"pass-{i}-word" for i in range(8)}


def key(raw):
    """A message's identity whatever line endings the server gives it."""
    return hashlib.sha256(raw.replace(b"\r\n", b"\n").rstrip(b"\n")).hexdigest()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from imaps_dovecot(tmp_path_factory)


def imaps_dovecot(tmp_path_factory):
    """A private Dovecot over IMAPS with USERS, its certificate as ``.cert``; stopped after the yield."""
    tmp = tmp_path_factory.mktemp("imaps")
    cert, private = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(private),
                    "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True,
                   timeout=120)
    base = dovecot_private.base_folder(tmp / "dovecot")
    base.mkdir(exist_ok=True)
    dovecot = dovecot_private.Dovecot(base, USERS, cert=cert, key=private)
    dovecot.cert = cert
    yield dovecot
    dovecot.stop()
    if os.getuid() == 0:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


class Account:
    """One user's mailbox and a SPAMNB_HOME with the model and an [imap] settings table."""

    def __init__(self, server, user, home, model, **imap):
        self.server, self.user, self.home = server, user, Path(home)
        self.home.mkdir(exist_ok=True)
        self.model = self.home / "model.spamnb"
        self.model.write_bytes(Path(model).read_bytes())
        password = self.home / "imap-password"
        password.write_text(USERS[user] + "\n")
        password.chmod(0o600)
        values = {"host": "127.0.0.1", "port": server.ssl_port, "user": user, "security": "tls",
                  "cafile": str(server.cert), "password_file": str(password), **imap}
        lines = ["[imap]"] + [f"{k} = {self._toml(v)}" for k, v in values.items() if v is not None]
        (self.home / "settings.toml").write_text("\n".join(lines) + "\n")

    @staticmethod
    def _toml(value):
        if isinstance(value, list):
            return "[" + ", ".join(f'"{v}"' for v in value) + "]"
        return str(value) if isinstance(value, int) else f'"{value}"'

    def imap(self):
        context = ssl.create_default_context(cafile=str(self.server.cert))
        client = imaplib.IMAP4_SSL("127.0.0.1", self.server.ssl_port, ssl_context=context, timeout=60)
        client.login(self.user, USERS[self.user])
        return client

    def spamnb(self, *args, **kwargs):
        return run_spamnb(list(args), home=self.home, **kwargs)

    def folder(self, name):
        """The keys of the messages in folder ``name`` (a list: duplicates show)."""
        client = self.imap()
        try:
            if client.select(f'"{name}"', readonly=True)[0] != "OK":
                return []
            typ, data = client.uid("SEARCH", None, "ALL")
            uids = data[0].split()
            found = []
            for start in range(0, len(uids), 100):
                typ, data = client.uid("FETCH", b",".join(uids[start:start + 100]).decode(), "(BODY.PEEK[])")
                found += [key(item[1]) for item in data if isinstance(item, tuple)]
            return found
        finally:
            client.logout()

    def fill(self, paths, folder="INBOX"):
        client = self.imap()
        for path in paths:
            assert client.append(folder, None, None, path.read_bytes())[0] == "OK"
        client.logout()


def mixed(root, n):
    """``n`` messages, half spam and half ham, spread over the corpus's folders."""
    spam = sorted(p for d in ("spam", "spam_2") for p in (root / d).iterdir() if p.name != "cmds")
    ham = sorted(p for d in ("easy_ham", "hard_ham", "easy_ham_2") for p in (root / d).iterdir() if p.name != "cmds")
    picked = spam[::max(1, len(spam) // (n // 2))][:n // 2] + ham[::max(1, len(ham) // (n - n // 2))][:n - n // 2]
    return sorted(picked, key=lambda p: hashlib.md5(p.name.encode()).hexdigest())   # mixed order


def verdicts(home, paths):
    """The verdict ``spamnb classify`` gives each message with the model in ``home``, checked
    against the corpus's own labels (its folders) first, so a broken classifier cannot be the
    answer key the scan is held to: no ham called spam, at least 3/4 of the spam caught."""
    spam_filter = SpamFilter.load(Path(home) / "model.spamnb")
    found = [(key(p.read_bytes()), spam_filter.classify(p.read_bytes()).label) for p in paths]   # a list: the
    #                                                                   corpus holds a few messages twice
    spam = {key(p.read_bytes()) for p in paths if p.parent.name.startswith("spam")}
    called = {k for k, label in found if label == "spam"}
    assert called <= spam, f"{len(called - spam)} ham called spam"
    assert len(called) >= 0.75 * len(spam), f"{len(called)} of {len(spam)} spam caught"
    return found


def filled(server, trained, tmp_path, user, n):
    """A new account with ``n`` mixed messages of corpora/ in its INBOX, and their verdicts."""
    account = Account(server, user, tmp_path / "home", trained / "model.spamnb")
    paths = mixed(REPO / "corpora", n)
    expected = verdicts(account.home, paths)
    account.fill(paths)
    return account, expected


def scan_and_check(account, paths):
    expected = verdicts(account.home, paths)
    account.fill(paths)
    proc = account.spamnb("imap", "scan")
    assert proc.returncode == 0, proc.stderr
    junk, inbox = account.folder("Junk"), account.folder("INBOX")
    assert sorted(junk) == sorted(k for k, v in expected if v == "spam")
    assert sorted(inbox) == sorted(k for k, v in expected if v != "spam")
    return expected, junk, inbox


@pytest.mark.slow
def test_scan_moves_the_spam_with_classifys_verdicts_and_a_second_scan_touches_nothing(server, trained, tmp_path):
    account = Account(server, "user0", tmp_path / "home", trained / "model.spamnb")
    expected, junk, inbox = scan_and_check(account, mixed(REPO / "corpora", 60))
    assert 10 < len(junk) < 50
    state = (account.home / "imap-state.json").read_bytes()
    proc = account.spamnb("imap", "scan")
    assert proc.returncode == 0 and b"0 new in INBOX" in proc.stderr, proc.stderr
    assert (account.home / "imap-state.json").read_bytes() == state
    assert account.folder("Junk") == junk and account.folder("INBOX") == inbox
    # learn: exactly the Junk folder's messages as spam (no ham folder), then nothing more
    before = counts(account.model)
    settings = account.home / "settings.toml"
    settings.write_text(settings.read_text() + "ham = []\n")
    proc = account.spamnb("imap", "learn")
    assert proc.returncode == 0, proc.stderr
    # the model was trained on corpora/, and train records its mail in the ledger: a Junk message it was
    # trained on as spam is already known; the summary accounts for every message of Junk, and the spam
    # count rises by exactly the number learned
    summary = re.search(rb"learned (\d+), already known (\d+), relabelled 0", proc.stderr + proc.stdout)
    assert summary, proc.stderr
    learned, known = int(summary[1]), int(summary[2])
    assert learned + known == len(junk) and known > 0, (learned, known, len(junk))
    assert counts(account.model) == (before[0], before[1] + learned)
    assert account.spamnb("imap", "learn").returncode == 0
    assert counts(account.model) == (before[0], before[1] + learned)
    assert USERS["user0"].encode() not in proc.stderr + proc.stdout


@pytest.mark.slow
def test_scan_of_200_messages_of_the_spamassassin_corpus(server, trained, tmp_path, shared_corpus):
    root = shared_corpus("spamassassin")
    account = Account(server, "user1", tmp_path / "home", trained / "model.spamnb")
    expected, junk, inbox = scan_and_check(account, mixed(root, 200))
    assert len(junk) + len(inbox) == 200 and len(junk) > 50
    before = counts(account.model)
    proc = account.spamnb("imap", "learn", "--ham", "Junk-none")
    assert proc.returncode != 0                      # a ham folder that does not exist: an error, said
    settings = account.home / "settings.toml"
    settings.write_text(settings.read_text() + "ham = []\n")
    proc = account.spamnb("imap", "learn")
    assert proc.returncode == 0, proc.stderr
    # the sample in corpora/, which the model was trained on (its ledger knows it), is drawn from this corpus
    summary = re.search(rb"learned (\d+), already known (\d+), relabelled 0", proc.stderr + proc.stdout)
    assert summary and int(summary[1]) + int(summary[2]) == len(junk), proc.stderr
    assert counts(account.model) == (before[0], before[1] + int(summary[1]))


@pytest.mark.slow
def test_a_scan_killed_halfway_and_run_again_leaves_each_message_in_one_folder(server, trained, tmp_path):
    account, expected = filled(server, trained, tmp_path, "user2", 150)
    env = dict(os.environ, SPAMNB_HOME=str(account.home), PYTHONPATH=str(Path(spamnb.__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-m", "spamnb", "imap", "scan", "-q"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    state = account.home / "imap-state.json"
    deadline = time.monotonic() + 60
    while not state.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the scan ended before it could be killed halfway"
    # Dovecot finishes the MOVE it was given after its client died (a copy, then the source's expunge): read the
    # folders once it is done, and a message doubled or lost for good still fails the test
    want, deadline = sorted(k for k, _ in expected), time.monotonic() + 20
    while True:
        partway = account.folder("INBOX") + account.folder("Junk")
        if sorted(partway) == want or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert sorted(partway) == want                                      # nothing lost, nothing doubled, even now
    assert len(account.folder("INBOX")) > len([v for _, v in expected if v != "spam"])   # halfway
    assert account.spamnb("imap", "scan", "-q").returncode == 0
    junk, inbox = account.folder("Junk"), account.folder("INBOX")
    assert sorted(junk + inbox) == sorted(k for k, _ in expected)
    assert sorted(junk) == sorted(k for k, v in expected if v == "spam")


@pytest.mark.slow
def test_flag_only_marks_spam_and_moves_nothing(server, trained, tmp_path):
    account, expected = filled(server, trained, tmp_path, "user3", 20)
    assert account.spamnb("imap", "scan", "--flag-only").returncode == 0
    assert account.folder("Junk") == []
    client = account.imap()
    client.select("INBOX", readonly=True)
    typ, data = client.uid("SEARCH", None, "KEYWORD", "$Junk")
    flagged = data[0].split()
    typ, data = client.uid("FETCH", b",".join(flagged).decode(), "(BODY.PEEK[])")
    client.logout()
    assert sorted(key(i[1]) for i in data if isinstance(i, tuple)) == sorted(
        k for k, v in expected if v == "spam")


@pytest.mark.slow
def test_add_header_re_appends_each_message_with_its_verdict(server, trained, tmp_path):
    account = Account(server, "user4", tmp_path / "home", trained / "model.spamnb", security="starttls",
                      port=server.port)
    paths = mixed(REPO / "corpora", 10)
    account.fill(paths)
    assert account.spamnb("imap", "scan", "--add-header").returncode == 0
    client = account.imap()
    for folder in ("INBOX", "Junk"):
        client.select(folder, readonly=True)
        typ, data = client.uid("FETCH", "1:*", "(BODY.PEEK[HEADER.FIELDS (X-Spamnb-Status)])")
        heads = [i[1] for i in data if isinstance(i, tuple)]
        assert heads and all(h.startswith(b"X-Spamnb-Status: ") for h in heads)
        if folder == "Junk":
            assert all(h.startswith(b"X-Spamnb-Status: Yes") for h in heads)
    client.logout()
    assert len(account.folder("INBOX")) + len(account.folder("Junk")) == 10
    assert account.spamnb("imap", "scan", "--add-header").returncode == 0      # nothing re-appended twice
    assert len(account.folder("INBOX")) + len(account.folder("Junk")) == 10


@pytest.mark.slow
def test_errors_are_one_line_with_their_exit_code(server, trained, tmp_path):
    model = trained / "model.spamnb"
    wrong = Account(server, "user5", tmp_path / "wrong", model)
    (wrong.home / "imap-password").write_text("not-the-password\n")
    proc = wrong.spamnb("imap", "scan")
    assert proc.returncode == 77 and proc.stderr.count(b"\n") == 1 and b"refused the login" in proc.stderr
    assert b"not-the-password" not in proc.stderr
    closed = Account(server, "user5", tmp_path / "closed", model, port=dovecot_private.free_port())
    proc = closed.spamnb("imap", "scan")
    assert proc.returncode == 69 and proc.stderr.count(b"\n") == 1 and b"cannot connect" in proc.stderr
    untrusted = Account(server, "user5", tmp_path / "untrusted", model, cafile=None)
    proc = untrusted.spamnb("imap", "scan")
    assert proc.returncode == 69 and b"certificate not trusted" in proc.stderr, proc.stderr
    assert untrusted.spamnb("imap", "scan", "--cafile", server.cert).returncode == 0
    loose = Account(server, "user5", tmp_path / "loose", model)
    (loose.home / "imap-password").chmod(0o644)
    proc = loose.spamnb("imap", "scan")
    assert proc.returncode == 3 and b"chmod 600" in proc.stderr
    by_command = Account(server, "user5", tmp_path / "command", model, password_file=None,
                         password_command=f"cat {tmp_path / 'command' / 'imap-password'}")
    assert by_command.spamnb("imap", "scan").returncode == 0
    missing = Account(server, "user5", tmp_path / "missing", model, inbox="No/Such/Folder")
    proc = missing.spamnb("imap", "scan")      # a command the server refuses: exit 69, one line
    assert proc.returncode == 69 and proc.stderr.count(b"\n") == 1 and b"No/Such/Folder" in proc.stderr, proc.stderr
    settings = loose.home / "settings.toml"
    settings.write_text(settings.read_text() + 'password = "x"\n')
    proc = loose.spamnb("imap", "scan")
    assert proc.returncode == 3 and b"takes no password" in proc.stderr
