"""A private Dovecot: the distribution's ``dovecot-imapd`` (and ``dovecot-sieve``
for IMAPSieve) run by ``dovecot -c CONFIG`` with every directory in a test
folder, a passwd-file for its users, Maildirs, and loopback ports.

Used by tests/test_dovecot.py and tests/test_imap.py.

As an ordinary user, every Dovecot process runs as that user.  As root (CI),
Dovecot will not run its login or mail processes as root: the login and
internal processes run as Dovecot's own accounts (``dovenull``/``dovecot``,
else ``nobody``) and the mail processes (and so the sieve pipe programs) as
``nobody``; the folder then lives under /var/tmp/spamnb-tests (root's pytest
folders are not reachable by other users).
"""

import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from conftest import wait_for_port

from mailchain import free_port

DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"
SIEVE_PLUGIN = Path("/usr/lib/dovecot/modules/lib95_imap_sieve_plugin.so")


def missing():
    """Why a private Dovecot cannot run here, or None."""
    if not os.path.exists(DOVECOT):
        return "dovecot is not installed (Debian packages dovecot-imapd dovecot-sieve)"
    return None


def missing_sieve():
    if not SIEVE_PLUGIN.exists():
        return "Pigeonhole's imap_sieve plugin is not installed (Debian package dovecot-sieve)"
    return None


def version():
    out = subprocess.run([DOVECOT, "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.split()[0] if out else "unknown"


def _account(*names):
    for name in names:
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    return "nobody"


def base_folder(tmp_path):
    """A folder the mail processes can reach: ``tmp_path`` as an ordinary
    user; as root, a new folder under /var/tmp/spamnb-tests."""
    if os.getuid() != 0:
        return Path(tmp_path)
    parent = Path(os.environ.get("SPAMNB_TEST_CACHE") or "/var/tmp/spamnb-tests")
    parent.mkdir(parents=True, exist_ok=True)
    os.chmod(parent, 0o755)
    path = Path(tempfile.mkdtemp(prefix="dovecot-", dir=parent))
    os.chmod(path, 0o755)
    return path


class Dovecot:
    """One Dovecot instance in ``base``: IMAP on ``port`` (STARTTLS when
    ``cert``), IMAPS on ``ssl_port`` (when ``cert``), users ``{name: password}``.

    ``plugin`` is extra text for the configuration (the imapsieve settings).
    """

    def __init__(self, base, users, extra_config="", cert=None, key=None):
        self.base = Path(base)
        self.users = dict(users)
        self.port = free_port()
        self.ssl_port = free_port() if cert else 0
        root = os.getuid() == 0
        me = pwd.getpwuid(os.getuid()).pw_name
        mail_account = pwd.getpwnam("nobody") if root else pwd.getpwuid(os.getuid())
        self.mail_uid, self.mail_gid = mail_account.pw_uid, mail_account.pw_gid
        internal = _account("dovecot") if root else me
        login = _account("dovenull") if root else me
        internal_group = grp.getgrgid(pwd.getpwnam(internal).pw_gid).gr_name
        for sub in ("run", "state", "home"):
            (self.base / sub).mkdir(exist_ok=True)
        os.chmod(self.base / "home", 0o755)
        self.passwd = self.base / "passwd"
        self.passwd.write_text("".join(f"{name}:{{PLAIN}}{password}\n" for name, password in self.users.items()))
        for name in self.users:
            self.home(name).mkdir(exist_ok=True)
            self._own(self.home(name))
        self.log = self.base / "dovecot.log"
        ssl = "no"
        ssl_lines = ""
        if cert:
            ssl = "yes"
            ssl_lines = f"ssl_cert = <{cert}\nssl_key = <{key}\n"
        self.config = self.base / "dovecot.conf"
        self.config.write_text(f"""\
base_dir = {self.base}/run
state_dir = {self.base}/state
log_path = {self.log}
protocols = imap
listen = 127.0.0.1
ssl = {ssl}
{ssl_lines}default_internal_user = {internal}
default_internal_group = {internal_group}
default_login_user = {login}
first_valid_uid = {min(self.mail_uid, 500)}
first_valid_gid = 0
auth_mechanisms = plain
disable_plaintext_auth = no
mail_location = maildir:~/Maildir
mail_max_userip_connections = 100
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {self.passwd}
}}
userdb {{
  driver = static
  args = uid={self.mail_uid} gid={self.mail_gid} home={self.base}/home/%u
}}
namespace inbox {{
  inbox = yes
  separator = .
  mailbox Junk {{
    special_use = \\Junk
  }}
  mailbox Trash {{
    special_use = \\Trash
  }}
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.ssl_port}
  }}
}}
service anvil {{
  chroot =
}}
service auth-worker {{
  user = {internal}
}}
service stats {{
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
{extra_config}
""")
        errors = self.base / "dovecot.stderr"
        with open(errors, "wb") as err:      # the daemon keeps it open: not a pipe
            proc = subprocess.run([DOVECOT, "-c", str(self.config)], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=err, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"dovecot did not start: {errors.read_text(errors='replace').strip()} "
                               f"{self.log_text()[-2000:]}")
        if not wait_for_port(self.port):
            raise RuntimeError(f"dovecot did not listen: {self.log_text()[-2000:]}")

    def home(self, user):
        return self.base / "home" / user

    def maildir(self, user, folder=None):
        path = self.home(user) / "Maildir"
        return path if folder in (None, "INBOX") else path / f".{folder}"

    def _own(self, path):
        if os.getuid() == 0:
            os.chown(path, self.mail_uid, self.mail_gid)

    def own_tree(self, path):
        """Give ``path`` and everything in it to the mail processes' user."""
        if os.getuid() != 0:
            return
        os.chown(path, self.mail_uid, self.mail_gid)
        for dirpath, dirnames, filenames in os.walk(path):
            os.chown(dirpath, self.mail_uid, self.mail_gid)
            for name in filenames:
                os.chown(os.path.join(dirpath, name), self.mail_uid, self.mail_gid)

    def log_text(self):
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self):
        pidfile = self.base / "run" / "master.pid"
        try:
            pid = int(pidfile.read_text().split()[0])
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
