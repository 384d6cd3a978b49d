"""Dovecot learn-on-move (contrib/dovecot/) against a real Dovecot with
Pigeonhole's IMAPSieve, driven over IMAP by imaplib: a move into Junk
teaches spam, a move out of it ham, Trash nothing, through ``spamc -L`` to
``spamnb serve --allow-tell`` or through ``spamnb learn`` (the installed
``spamnb``, run as Dovecot's mail user: as root, ``nobody``)."""

import imaplib
import os
import pwd
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dovecot_private
import installed_spamnb
from conftest import REPO
from spamnb.model.spam_filter import SpamFilter
from test_serve import SPAMC, Daemon

CONTRIB = REPO / "contrib" / "dovecot"
USER, PASSWORD = "alice", "wonderland"

pytestmark = [
    pytest.mark.skipif(dovecot_private.missing() is not None, reason=str(dovecot_private.missing())),
    pytest.mark.skipif(dovecot_private.missing_sieve() is not None, reason=str(dovecot_private.missing_sieve())),
    pytest.mark.skipif(SPAMC is None, reason="spamc is not installed (Debian package spamc)"),
]


def message(tag, n):
    words = " ".join(f"w{tag}q{n}x{i}" for i in range(30))
    return (f"From: sender{n}@example.org\r\nTo: {USER}@example.net\r\nSubject: note {tag} {n}\r\n"
            f"Message-ID: <{tag}.{n}@example.org>\r\n\r\n{words}\r\n").encode()


def imapsieve_config(base):
    """contrib/dovecot/90-imapsieve.conf with its folders moved into ``base``."""
    text = (CONTRIB / "90-imapsieve.conf").read_text()
    return (text.replace("/etc/dovecot/sieve", str(base / "sieve"))
                .replace("/usr/lib/dovecot/sieve-pipe", str(base / "pipe")))


class LearnOnMove:
    """A Dovecot with contrib/dovecot/ installed in ``base`` and the route's settings."""

    def __init__(self, base, settings):
        self.base = Path(base)
        (self.base / "sieve").mkdir()
        (self.base / "pipe").mkdir()
        for name in ("report-spam.sieve", "report-ham.sieve"):
            shutil.copy(CONTRIB / name, self.base / "sieve" / name)
        shutil.copy(CONTRIB / "spamnb-learn", self.base / "pipe" / "spamnb-learn")
        self.learn_log = self.base / "learn.log"
        self.learn_log.touch()
        tmp = self.base / "tmp"         # the mail user's TMPDIR: a test machine's /tmp may not be world-writable
        tmp.mkdir()
        (self.base / "pipe" / "spamnb-learn.conf").write_text(
            settings + f'\nLOG="{self.learn_log}"\nTMPDIR="{tmp}"\nexport TMPDIR\n')
        for path in (self.base / "sieve", self.base / "pipe"):
            os.chmod(path, 0o755)
        self.server = dovecot_private.Dovecot(self.base, {USER: PASSWORD}, imapsieve_config(self.base))
        self.server.own_tree(self.base / "sieve")
        self.server.own_tree(self.learn_log)
        self.server.own_tree(tmp)

    def client(self):
        imap = imaplib.IMAP4("127.0.0.1", self.server.port, timeout=60)
        imap.login(USER, PASSWORD)
        for folder in ("Junk", "Trash", "Archive"):
            imap.create(folder)
        return imap

    def stop(self):
        self.server.stop()


def append(imap, folder, messages):
    for raw in messages:
        typ, _ = imap.append(folder, None, None, raw)
        assert typ == "OK"


def uids(imap, folder):
    imap.select(folder)
    typ, data = imap.uid("SEARCH", None, "ALL")
    assert typ == "OK"
    return data[0].split()


def move(imap, folder, uid_list, to, command="MOVE"):
    imap.select(folder)
    typ, data = imap.uid(command, b",".join(uid_list).decode(), to)
    assert typ == "OK", data


def counts(model):
    return tuple(int(n) for n in SpamFilter.load(model).class_count_)     # (ham, spam)


@pytest.fixture(scope="module")
def trained(sample_model):
    return sample_model.parent     # its model.spamnb is copied where it is used, never changed in place


@pytest.fixture
def served(trained, tmp_path):
    home = tmp_path / "serve"
    home.mkdir()
    shutil.copy(trained / "model.spamnb", home / "model.spamnb")
    daemon = Daemon(home, "--allow-tell", "--create-user-models", "--models-dir", home / "users")
    base = dovecot_private.base_folder(tmp_path / "dovecot")
    base.mkdir(exist_ok=True)
    site = LearnOnMove(base, f'ROUTE=spamc\nSPAMC={SPAMC}\nSPAMC_OPTIONS="-d 127.0.0.1 -p {daemon.port}"\n'
                             "PER_USER=yes\nTIMEOUT=5\n")
    site.daemon = daemon
    site.model = home / "users" / USER / "model.spamnb"
    site.site_counts = counts(home / "model.spamnb")
    yield site
    site.stop()
    site.daemon.stop()   # a test may have started another in its place (the catch-up)
    daemon.stop()
    if os.getuid() == 0:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_moves_into_and_out_of_junk_teach_the_users_model(served):
    """50 moved into Junk: 50 more spam; 10 of them back to INBOX: relabelled
    ham; a COPY into Junk learns too; a move to Trash learns nothing."""
    imap = served.client()
    append(imap, "INBOX", [message("move", n) for n in range(60)])
    inbox = uids(imap, "INBOX")
    ham0, spam0 = served.site_counts
    move(imap, "INBOX", inbox[:50], "Junk")
    assert counts(served.model) == (ham0, spam0 + 50), served.learn_log.read_text()
    assert len(uids(imap, "Junk")) == 50 and len(uids(imap, "INBOX")) == 10
    junk = uids(imap, "Junk")
    move(imap, "Junk", junk[:10], "INBOX")
    assert counts(served.model) == (ham0 + 10, spam0 + 40)
    move(imap, "Junk", junk[10:12], "INBOX")
    assert counts(served.model) == (ham0 + 12, spam0 + 38)
    move(imap, "Junk", junk[12:20], "Trash")          # out of Junk into Trash: nothing
    assert counts(served.model) == (ham0 + 12, spam0 + 38)
    inbox = uids(imap, "INBOX")
    move(imap, "INBOX", inbox[-5:], "Trash")          # INBOX to Trash: nothing
    assert counts(served.model) == (ham0 + 12, spam0 + 38)
    assert inbox[:3] == uids(imap, "INBOX")[:3]       # three never learned
    move(imap, "INBOX", inbox[:3], "Junk", command="COPY")   # a copy into Junk: spam
    assert counts(served.model) == (ham0 + 12, spam0 + 41)
    move(imap, "INBOX", inbox[:3], "Junk", command="COPY")   # the same again: the ledger makes it a no-op
    assert counts(served.model) == (ham0 + 12, spam0 + 41)
    relabelled = uids(imap, "INBOX")[-2:]             # two relabelled ham, back into Junk: spam again
    move(imap, "INBOX", relabelled, "Junk")
    assert counts(served.model) == (ham0 + 10, spam0 + 43)
    move(imap, "INBOX", uids(imap, "INBOX")[3:4], "Archive")   # a move between other folders: nothing
    assert counts(served.model) == (ham0 + 10, spam0 + 43)
    assert counts(served.daemon.home / "model.spamnb") == served.site_counts     # the site model is untouched
    assert served.learn_log.read_text() == ""
    imap.logout()


@pytest.mark.slow
def test_a_server_that_is_down_loses_no_move_and_the_catch_up_learns_it(served):
    imap = served.client()
    append(imap, "INBOX", [message("down", n) for n in range(20)])
    served.daemon.stop()
    start = time.monotonic()
    move(imap, "INBOX", uids(imap, "INBOX"), "Junk")
    took = time.monotonic() - start
    assert len(uids(imap, "Junk")) == 20 and uids(imap, "INBOX") == []
    assert took < 10, took
    log = served.learn_log.read_text()
    assert log.count("spam not learned for alice by spamc") == 20, log
    assert "<down.7@example.org>" in log
    assert not served.model.exists()
    # the catch-up: each message of Junk through spamc again, once the server is back
    daemon = Daemon(served.daemon.home, "--allow-tell", "--create-user-models", "--models-dir",
                    served.daemon.home / "users")
    served.daemon = daemon
    junk = served.server.maildir(USER, "Junk")
    files = sorted((junk / "cur").iterdir()) + sorted((junk / "new").iterdir())
    assert len(files) == 20
    for path in files:
        assert daemon.spamc("-L", "spam", "-u", USER, stdin=path.read_bytes()).returncode == 0
    ham0, spam0 = served.site_counts
    assert counts(served.model) == (ham0, spam0 + 20)
    for path in files[:5]:                             # a second catch-up learns nothing more
        assert b"already" in daemon.spamc("-L", "spam", "-u", USER, stdin=path.read_bytes()).stdout
    assert counts(served.model) == (ham0, spam0 + 20)
    imap.logout()


def burst(site, n):
    """``n`` single-message MOVEs into Junk, one command each; their time."""
    imap = site.client()
    append(imap, "INBOX", [message(f"burst{n}", i) for i in range(n)])
    inbox = uids(imap, "INBOX")
    start = time.monotonic()
    for uid in inbox:
        move(imap, "INBOX", [uid], "Junk")
    took = time.monotonic() - start
    imap.logout()
    return took


@pytest.mark.slow
def test_a_burst_of_50_moves_is_all_learned(served):
    took = burst(served, 50)
    ham0, spam0 = served.site_counts
    assert counts(served.model) == (ham0, spam0 + 50)
    assert took <= 30


@pytest.mark.slow
def test_a_burst_of_500_moves_is_all_learned_within_30_seconds(served):
    took = burst(served, 500)
    ham0, spam0 = served.site_counts
    assert counts(served.model) == (ham0, spam0 + 500), served.learn_log.read_text()[-2000:]
    assert took <= 30, took


@pytest.mark.slow
def test_a_server_that_hangs_does_not_hang_the_client(served, tmp_path):
    """A listener that accepts and never answers: the first move waits
    TIMEOUT (5 s) and is logged; the next ones back off at once."""
    import socket

    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    conf = served.base / "pipe" / "spamnb-learn.conf"
    conf.write_text(conf.read_text().replace(f"-p {served.daemon.port}", f"-p {port}"))
    imap = served.client()
    append(imap, "INBOX", [message("hang", n) for n in range(10)])
    start = time.monotonic()
    move(imap, "INBOX", uids(imap, "INBOX"), "Junk")
    took = time.monotonic() - start
    silent.close()
    assert len(uids(imap, "Junk")) == 10
    assert took < 12, took
    log = served.learn_log.read_text()
    assert "timed out after 5s" in log and log.count("backing off") == 9, log
    imap.logout()


@pytest.fixture(scope="module")
def installed():
    """spamnb installed as docs/imap.md's recipe installs it (the system's
    Python, a venv every user may read): its bin/spamnb."""
    if installed_spamnb.missing() is not None:
        pytest.skip(installed_spamnb.missing())
    return installed_spamnb.program()


@pytest.mark.slow
def test_the_learn_route_runs_the_installed_spamnb_as_the_mail_user(trained, installed, tmp_path):
    """ROUTE=learn: the installed ``spamnb learn`` run by Dovecot as the mail
    user (as root: ``nobody``) in the user's own ~/.spamnb; every move is
    learned.  As root, first the install the issue found broken: a program
    whose Python lives under /root (pyenv) cannot be run by ``nobody``; the
    move succeeds, the lesson is lost, and the log names the cause."""
    base = dovecot_private.base_folder(tmp_path / "dovecot")
    base.mkdir(exist_ok=True)
    site = LearnOnMove(base, f"ROUTE=learn\nSPAMNB={installed}\nTIMEOUT=60\n")
    conf = site.base / "pipe" / "spamnb-learn.conf"
    try:
        model = site.server.home(USER) / ".spamnb" / "model.spamnb"
        model.parent.mkdir()
        shutil.copy(trained / "model.spamnb", model)
        site.server.own_tree(model.parent)
        ham0, spam0 = counts(model)
        imap = site.client()
        if os.getuid() == 0:
            private = site.base / "pipe" / "private-spamnb"      # as `python3 -m venv` under /root makes it
            private.write_text(f"#!{sys.executable}\nfrom spamnb.cli.main import entry\nentry()\n")
            private.chmod(0o755)
            conf.write_text(conf.read_text().replace(f"SPAMNB={installed}", f"SPAMNB={private}"))
            append(imap, "INBOX", [message("private", 0)])
            move(imap, "INBOX", uids(imap, "INBOX"), "Junk")
            log = site.learn_log.read_text()
            assert "spam not learned for alice by learn (exit 126" in log, log
            assert f"{private} cannot be run by user nobody: its interpreter {sys.executable} cannot" in log, log
            assert "/usr/bin/python3 -m venv /opt/spamnb" in log and "<private.0@example.org>" in log, log
            assert counts(model) == (ham0, spam0)
            move(imap, "Junk", uids(imap, "Junk"), "Trash")
            conf.write_text(conf.read_text().replace(f"SPAMNB={private}", f"SPAMNB={installed}"))
            site.learn_log.write_text("")
        append(imap, "INBOX", [message("learn", n) for n in range(6)])
        move(imap, "INBOX", uids(imap, "INBOX"), "Junk")
        assert counts(model) == (ham0, spam0 + 6), site.learn_log.read_text()
        move(imap, "Junk", uids(imap, "Junk")[:2], "INBOX")
        assert counts(model) == (ham0 + 2, spam0 + 4), site.learn_log.read_text()
        assert os.stat(model).st_uid == site.server.mail_uid        # written by the mail user
        # the nightly catch-up over the Junk folder, run by the mail user with the installed spamnb: it runs
        # and learns nothing new (the ledger).  Dovecot pipes a message with CRLF line ends and stores it in
        # the Maildir with LF: the ledger finds the LF copy as the CRLF one the pipe taught
        mail_user = pwd.getpwuid(site.server.mail_uid).pw_name
        catch_up = ["env", f"SPAMNB_HOME={model.parent}", installed, "learn", "--spam",
                    site.server.maildir(USER, "Junk")]
        proc = installed_spamnb.run_as(mail_user, catch_up, timeout=120)
        assert proc.returncode == 0, proc.stderr
        after = counts(model)
        assert after == (ham0 + 2, spam0 + 4), after
        proc = installed_spamnb.run_as(mail_user, catch_up, timeout=120)
        assert proc.returncode == 0 and counts(model) == after, proc.stderr
        move(imap, "Junk", uids(imap, "Junk"), "Trash")
        assert counts(model) == after
        imap.logout()
        assert site.learn_log.read_text() == ""
    finally:
        site.stop()
        if os.getuid() == 0:
            shutil.rmtree(base, ignore_errors=True)


def test_the_pipe_program_names_a_program_the_mail_user_cannot_run(tmp_path):
    """SPAMNB whose interpreter cannot be executed (exit 126, as a venv of a
    Python under /root is for Dovecot's mail user): spamnb-learn exits 0 and
    its log line names the program, the interpreter and the install that works."""
    bindir = tmp_path / "pipe"
    bindir.mkdir()
    shutil.copy(CONTRIB / "spamnb-learn", bindir / "spamnb-learn")
    interpreter = tmp_path / "python3"
    interpreter.write_text("not a program\n")
    interpreter.chmod(0o644)
    program = tmp_path / "spamnb"
    program.write_text(f"#!{interpreter}\n")
    program.chmod(0o755)
    log = tmp_path / "learn.log"
    (bindir / "spamnb-learn.conf").write_text(f"ROUTE=learn\nSPAMNB={program}\nTIMEOUT=30\nLOG={log}\n")
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run([str(bindir / "spamnb-learn"), "spam", USER], input=message("denied", 1),
                          env={"HOME": str(home), "USER": USER, "PATH": "/usr/bin:/bin"}, capture_output=True,
                          timeout=120)
    assert proc.returncode == 0
    text = log.read_text()
    me = pwd.getpwuid(os.getuid()).pw_name
    assert "spam not learned for alice by learn (exit 126: " in text, text
    assert f"; {program} cannot be run by user {me}: its interpreter {interpreter} cannot (install spamnb" in text
    assert "/usr/bin/python3 -m venv /opt/spamnb, then runuser -u" in text and text.rstrip().endswith(
        ": <denied.1@example.org>"), text
    (bindir / "spamnb-learn.conf").write_text(f"ROUTE=learn\nSPAMNB={tmp_path}/missing\nTIMEOUT=30\nLOG={log}\n")
    subprocess.run([str(bindir / "spamnb-learn"), "spam", USER], input=message("denied", 2),
                   env={"HOME": str(home), "USER": USER, "PATH": "/usr/bin:/bin"}, capture_output=True, timeout=120)
    assert f"(exit 127: " in log.read_text() and f"; {tmp_path}/missing: not found (install" in log.read_text()


def test_the_pipe_program_learn_route_teaches_the_users_own_model(trained, tmp_path):
    """contrib/dovecot/spamnb-learn with ROUTE=learn, run as Dovecot runs it
    (message on stdin, HOME the user's): learns, relabels, exits 0 always."""
    import spamnb

    bindir = tmp_path / "pipe"
    bindir.mkdir()
    shutil.copy(CONTRIB / "spamnb-learn", bindir / "spamnb-learn")
    wrapper = tmp_path / "spamnb"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={Path(spamnb.__file__).resolve().parents[1]} "
                       f"exec {sys.executable} -m spamnb \"$@\"\n")
    wrapper.chmod(0o755)
    log = tmp_path / "learn.log"
    (bindir / "spamnb-learn.conf").write_text(f"ROUTE=learn\nSPAMNB={wrapper}\nTIMEOUT=30\nLOG={log}\n")
    home = tmp_path / "home"
    (home / ".spamnb").mkdir(parents=True)
    model = home / ".spamnb" / "model.spamnb"
    shutil.copy(trained / "model.spamnb", model)
    ham0, spam0 = counts(model)
    env = {"HOME": str(home), "USER": USER}            # Dovecot gives the program little more

    def pipe(*args, raw=message("route", 1)):
        return subprocess.run([str(bindir / "spamnb-learn"), *args], input=raw, env=env, capture_output=True,
                              timeout=120).returncode

    assert pipe("spam", USER) == 0 and counts(model) == (ham0, spam0 + 1)
    assert pipe("spam", USER) == 0 and counts(model) == (ham0, spam0 + 1)
    assert pipe("ham", USER) == 0 and counts(model) == (ham0 + 1, spam0)
    assert not log.exists()                            # nothing failed
    assert pipe("ham", "../etc") == 0 and pipe("bogus", USER) == 0 and counts(model) == (ham0 + 1, spam0)
    assert "user name '../etc' refused" in log.read_text()
    (bindir / "spamnb-learn.conf").write_text(f"ROUTE=learn\nSPAMNB={wrapper}\nMODEL={tmp_path}/%u.spamnb\n"
                                              f"TIMEOUT=30\nLOG={log}\n")
    assert pipe("spam", "bob") == 0
    assert counts(tmp_path / "bob.spamnb") == (0, 1)   # MODEL with %u: the user's own model file
