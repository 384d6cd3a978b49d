"""A private Postfix: the Debian package unpacked into a folder (not installed,
so it does not conflict with the exim4 packages), run by ``postfix -c DIR``
with a main.cf that points every directory into that folder and a test folder.

The one Postfix fixture of the tests (tests/test_postfix.py: the
content-filter recipe; tests/test_postfix_milter.py: the milter) and of
scripts/bench_milter.py.  :func:`unpacked_postfix` finds or makes the
unpacked package; :class:`Postfix` is one instance (configuration, queue,
Maildirs, log) on a loopback port; :func:`skip_reason`, the fixtures
:func:`pf_root`, :func:`work` and :func:`postfixes` (instances started for a
test, stopped after it), and :func:`wait_for` / :func:`check_deliveries`
(what reached the Maildirs) are what both test modules share.
"""

import grp
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import REPO
from mailchain import SPAMC, WORD, WRAPPER, Work, free_port, header, message_tag, read_maildir

USERS = ("alice", "bob", "carol", "dave")     # the Maildirs of every instance


def cache_dir():
    """Where the unpacked package is kept between runs: a folder the delivery
    agents' unprivileged users can reach (not root's home)."""
    return Path(os.environ.get("SPAMNB_TEST_CACHE") or "/var/tmp/spamnb-tests")


def unpacked_postfix():
    """The root of an unpacked Postfix package, or ``(None, reason)``.

    ``$SPAMNB_POSTFIX_ROOT`` when set (a folder holding ``usr/sbin/postfix``),
    else ``/var/tmp/spamnb-tests/postfix-root`` (``$SPAMNB_TEST_CACHE``), filled on first use by ``apt-get download postfix``
    and ``dpkg-deb -x`` (Debian's postfix conflicts with exim4, which the
    Exim tests need, so it is unpacked rather than installed).
    """
    given = os.environ.get("SPAMNB_POSTFIX_ROOT")
    root = Path(given) if given else cache_dir() / "postfix-root"
    if (root / "usr" / "sbin" / "postfix").exists():
        return root, None
    if given:
        return None, f"SPAMNB_POSTFIX_ROOT={given} holds no usr/sbin/postfix"
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        return None, "postfix is not unpacked and there is no apt-get/dpkg-deb to fetch it"
    root.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(root.parent, 0o755)
    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        os.chmod(tmp, 0o755)             # apt's sandbox user writes the download here
        proc = subprocess.run(["apt-get", "download", "-q", "postfix"], cwd=tmp, capture_output=True, timeout=300)
        debs = list(Path(tmp).glob("postfix_*.deb"))
        if proc.returncode != 0 or not debs:
            return None, f"apt-get download postfix failed: {proc.stderr.decode(errors='replace')[-300:]}"
        staging = Path(tmp) / "root"
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(staging)], check=True, timeout=300)
        os.chmod(staging, 0o755)
        staging.rename(root)
    return root, None


def missing_accounts():
    """Postfix's own account and group (``mail_owner``, ``setgid_group``)."""
    missing = []
    try:
        pwd.getpwnam("postfix")
    except KeyError:
        missing.append("user postfix")
    try:
        grp.getgrnam("postdrop")
    except KeyError:
        missing.append("group postdrop")
    return missing


MAIN_CF = """\
compatibility_level = 3.6
mail_owner = postfix
setgid_group = postdrop
myhostname = mx.test.example
mydomain = test.example
myorigin = test.example
mydestination =
inet_interfaces = loopback-only
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject
smtputf8_enable = no
biff = no
queue_directory = {queue}
data_directory = {data}
daemon_directory = {pf}/usr/lib/postfix/sbin
command_directory = {pf}/usr/sbin
shlib_directory = {pf}/usr/lib/postfix
meta_directory = {conf}
sendmail_path = {pf}/usr/sbin/sendmail
newaliases_path = {pf}/usr/bin/newaliases
mailq_path = {pf}/usr/bin/mailq
manpage_directory = {pf}/usr/share/man
html_directory = no
readme_directory = no
sample_directory = {conf}
import_environment = MAIL_CONFIG MAIL_DEBUG MAIL_LOGTAG TZ LANG=C LD_LIBRARY_PATH={pf}/usr/lib/postfix
export_environment = TZ MAIL_CONFIG LANG LD_LIBRARY_PATH
maillog_file = {log}
maillog_file_prefixes = {log}
alias_maps =
alias_database =
local_recipient_maps =
smtpd_banner = $myhostname ESMTP
# final delivery: virtual(8) into one Maildir a recipient
virtual_mailbox_domains = test.example
virtual_mailbox_base = {mail}
virtual_mailbox_maps = inline:{{ {mailboxes} }}
virtual_uid_maps = static:{uid}
virtual_gid_maps = static:{gid}
# nothing leaves this machine: a bounce (there must be none) ends here
default_transport = error:no mail leaves the test
relay_transport = error:no mail leaves the test
# retry deferred mail at once (the test waits for it)
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
"""

MASTER_CF = """\
pickup    unix  n       -       n       1       1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
virtual   unix  -       n       n       -       -       virtual
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
"""


class Postfix:
    """One private Postfix instance.

    ``main_cf`` and ``master_cf`` are added to the private configuration (the
    recipe under test: its ``smtpd`` on a loopback port, its content filter);
    mail for ``NAME@test.example`` (``NAME`` in ``users``) ends in the Maildir
    ``mail/NAME/``, delivered by virtual(8) as ``owner``.
    """

    def __init__(self, pf_root, work, main_cf, master_cf, users, owner="nobody"):
        self.pf = Path(pf_root)
        self.root = Path(tempfile.mkdtemp(prefix="postfix-", dir=work))
        os.chmod(self.root, 0o755)
        self.conf = self.root / "conf"
        self.queue = self.root / "queue"
        self.data = self.root / "data"
        self.mail = self.root / "mail"
        self.log = self.root / "maillog"
        for d in (self.conf, self.queue, self.data, self.mail):
            d.mkdir()
        owner = pwd.getpwnam(owner)
        shutil.chown(self.mail, owner.pw_uid, owner.pw_gid)
        shutil.chown(self.data, "postfix", "postfix")
        for name in ("postfix-files", "dynamicmaps.cf"):
            source = self.pf / "etc" / "postfix" / name
            if not source.exists():
                source = self.pf / "usr" / "share" / "postfix" / name
            shutil.copy(source, self.conf / name)
        for name in ("postfix-files.d", "dynamicmaps.cf.d"):
            (self.conf / name).mkdir()
        mailboxes = ", ".join(f"{u}@test.example={u}/" for u in users)
        (self.conf / "main.cf").write_text(MAIN_CF.format(
            queue=self.queue, data=self.data, pf=self.pf, conf=self.conf, log=self.log, mail=self.mail,
            mailboxes=mailboxes, uid=owner.pw_uid, gid=owner.pw_gid) + main_cf)
        (self.conf / "master.cf").write_text(MASTER_CF + master_cf)
        self.env = dict(os.environ, LD_LIBRARY_PATH=str(self.pf / "usr" / "lib" / "postfix"),
                        MAIL_CONFIG=str(self.conf))

    def command(self, name, *args, check=True):
        return subprocess.run([str(self.pf / "usr" / "sbin" / name), "-c", str(self.conf), *args],
                              env=self.env, capture_output=True, timeout=120, check=check)

    def start(self):
        self.command("postfix", "start")
        # the unpacked postdrop is not set-gid postdrop: let any user drop
        # mail (the reinjecting sendmail of a content filter) and wake pickup
        os.chmod(self.queue / "maildrop", 0o1733)
        os.chmod(self.queue / "public", 0o711)

    def stop(self):
        self.command("postfix", "stop", check=False)

    def wait_for_smtp(self, port, seconds=30):
        """Until smtpd accepts on 127.0.0.1:``port``; AssertionError (the log's
        tail) after ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                assert time.monotonic() < deadline, self.log_text()[-3000:]
                time.sleep(0.1)

    def flush(self):
        """Ask the queue manager to retry deferred mail now (``postqueue -f``)."""
        self.command("postqueue", "-f", check=False)

    def queued(self):
        """The queue IDs still in the queue (``postqueue -j``: one JSON object a message)."""
        out = self.command("postqueue", "-j", check=False).stdout.decode(errors="replace")
        return [line for line in out.splitlines() if line.strip()]

    def log_text(self):
        return self.log.read_text(errors="replace") if self.log.exists() else ""


# ---------------------------------------------------------------------------- docs/serve.md's recipes
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


def milter_main_cf(milter_port):
    """docs/serve.md's ``main.cf`` lines for the milter, pointed at ``milter_port``."""
    text = (REPO / "docs" / "serve.md").read_text()
    blocks = re.findall(r"```milter-main.cf\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "docs/serve.md should show one milter-main.cf block"
    main, n = re.subn(r"inet:127\.0\.0\.1:11332", f"inet:127.0.0.1:{milter_port}", blocks[0])
    assert n == 1, main
    return main


# ---------------------------------------------------------------------------- the fixture
def skip_reason():
    """Why Postfix cannot run here, or None."""
    if os.geteuid() != 0:
        return "Postfix starts as root (run the tests as root, as CI does)"
    if SPAMC is None:
        return "spamc is not installed (Debian package spamc)"
    missing = missing_accounts()
    if missing:
        return f"Postfix needs its {' and '.join(missing)} (.ci/run creates them)"
    return None


@pytest.fixture(scope="module")
def pf_root():
    """The unpacked package (the tests skip when it cannot be had)."""
    root, why = unpacked_postfix()
    if root is None:
        pytest.skip(why)
    return root


@pytest.fixture(scope="module")
def work():
    """The models and folders of the mail chain (tests/mailchain.Work)."""
    w = Work()
    yield w
    w.cleanup()


@pytest.fixture
def postfixes(pf_root, work):
    """``start(main_cf, master_cf_for)``: a private Postfix started with
    ``main_cf`` and ``master_cf_for(smtp_port)`` (its smtpd on a free
    loopback port, ``smtp_port`` on the instance), up and accepting SMTP;
    every one started is stopped after the test."""
    started = []

    def start(main_cf, master_cf_for):
        smtp_port = free_port()
        pf = Postfix(pf_root, work.root, main_cf, master_cf_for(smtp_port), USERS)
        pf.smtp_port = smtp_port
        pf.start()
        started.append(pf)
        pf.wait_for_smtp(smtp_port)
        return pf

    yield start
    for pf in started:
        pf.stop()


def wait_for(pf, expected, deadline):
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


def check_deliveries(pf, expected, got):
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
