"""A private Postfix: the Debian package unpacked into a folder (not installed,
so it does not conflict with the exim4 packages), run by ``postfix -c DIR``
with a main.cf that points every directory into that folder and a test folder.

Used by tests/test_postfix.py.  :func:`unpacked_postfix` finds or makes the
unpacked package; :class:`Postfix` is one instance (configuration, queue,
Maildirs, log) on a loopback port.
"""

import grp
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


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
