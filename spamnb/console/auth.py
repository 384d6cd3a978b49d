"""The console's users, sessions and the login rate limit.

Users file (``--ui-users FILE``), one user a line, ``#`` comments::

    name role scrypt$N$r$p$salt$hash

``role``: ``viewer`` (reads every row), ``trainer`` (reads, learns and
forgets), ``admin`` (as trainer, and the action log), ``user`` (reads and
teaches only the rows of the mail user of the same name).  The hash is
scrypt's (``hashlib.scrypt``; salt and hash in base64); ``spamnb serve
--ui-hash-password`` prints a line for a password read on stdin.

Sessions live in the console process only (a server-side table of at most
:data:`MAX_SESSIONS`, the oldest out first), named by a random token in an
HttpOnly SameSite=Strict cookie; each holds its CSRF token.  Failed logins
are counted per client address in a table of at most :data:`MAX_CLIENTS`
addresses: past :data:`MAX_FAILURES` in :data:`WINDOW` seconds a login is
answered 429 without checking the password."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict

from spamnb.errors import SettingsError

__all__ = ["ROLES", "Users", "Sessions", "LoginLimiter", "hash_password", "verify", "line_problem",
           "users_file_problems", "read_users_file", "MAX_FILE_BYTES"]

ROLES = {"viewer": {"read_all"}, "trainer": {"read_all", "learn"}, "admin": {"read_all", "learn", "admin"},
         "user": {"learn"}}
SCRYPT = (2 ** 14, 8, 1)
MAX_SESSIONS = 1000
SESSION_SECONDS = 8 * 3600.0
MAX_CLIENTS = 4096
MAX_FAILURES = 5
WINDOW = 60.0
MAX_USERS = 10000
MAX_FILE_BYTES = 4 * 1024 * 1024    # a users file is read up to this; a larger one is refused (one line)


def hash_password(password, salt=None, params=SCRYPT):
    salt = secrets.token_bytes(16) if salt is None else salt
    n, r, p = params
    key = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=64 * 1024 * 1024, dklen=32)
    return f"scrypt${n}${r}${p}${base64.b64encode(salt).decode()}${base64.b64encode(key).decode()}"


def verify(password, stored):
    """Whether ``password`` matches ``stored`` (a :func:`hash_password` string)."""
    try:
        kind, n, r, p, salt, key = stored.split("$")
        n, r, p = int(n), int(r), int(p)
        if kind != "scrypt" or n > 2 ** 20 or r > 32 or p > 16:
            return False
        got = hash_password(password, base64.b64decode(salt), (n, r, p)).rsplit("$", 1)[1]
    except (ValueError, MemoryError):
        return False
    return hmac.compare_digest(got, key)


_DUMMY = None


def line_problem(parts):
    """Why a users file's line (split in words) is no user, or None."""
    if len(parts) != 3 or parts[1] not in ROLES:
        return f"expected 'name role scrypt$...' with a role of {', '.join(ROLES)}"
    try:
        kind, n, r, p, salt, key = parts[2].split("$")
        n, r, p = int(n), int(r), int(p)
        ok = (kind == "scrypt" and 2 <= n <= 2 ** 20 and n & (n - 1) == 0 and 1 <= r <= 32 and 1 <= p <= 16
              and len(base64.b64decode(salt, validate=True)) >= 8 and len(base64.b64decode(key, validate=True)) == 32)
    except ValueError:
        ok = False
    if not ok:
        return "the hash is not 'scrypt$N$r$p$salt$hash' (spamnb serve --ui-hash-password prints one)"
    return None


def _entries(lines):
    """(line number, words, :func:`line_problem`) of each line of a users
    file that is neither empty nor a comment."""
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if line and not line.startswith("#"):
            parts = line.split()
            yield number, parts, line_problem(parts)


def read_users_file(path):
    """The lines of the users file at ``path``, read bounded: at most
    :data:`MAX_FILE_BYTES` (a larger file, one that is not a regular file
    — a FIFO, a device — or one not in UTF-8 is a SettingsError with one
    line, before any line is looked at); opened without blocking, so a FIFO
    cannot hold the start."""
    import os
    import stat

    where = f"--ui-users {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SettingsError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if stat.S_ISDIR(mode):
            raise SettingsError(f"{where}: a folder, not a file")
        if not stat.S_ISREG(mode):
            raise SettingsError(f"{where}: not a regular file")
        try:
            data = f.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise SettingsError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise SettingsError(f"{where}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB "
                            f"(at most {MAX_USERS} users, a line each)")
    try:
        return data.decode("utf-8").splitlines(), mode
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{where}: not UTF-8 (byte {exc.start})") from None


def users_file_problems(path):
    """``serve --check-config``: every problem of the users file at ``path``,
    one line each: it cannot be read, other users may read it (it holds the
    password hashes), a line is no user (each bad line), a name is given
    twice, or it names no user at all (nobody could log in).  An admin is
    not required: a console of viewers is a choice."""
    import stat

    where = f"--ui-users {path}"
    try:
        lines, mode = read_users_file(path)
    except SettingsError as exc:
        return [str(exc)]
    problems = []
    if mode & stat.S_IROTH:
        problems.append(f"{where}: every user may read it, and it holds the password hashes (chmod o-rwx)")
    names = set()
    for number, parts, wrong in _entries(lines):
        if wrong:
            problems.append(f"{where}, line {number}: {wrong}")
        elif parts[0] in names:
            problems.append(f"{where}, line {number}: {parts[0]} is given twice (the last line would count)")
        names.add(parts[0])
    if not names:
        problems.append(f"{where}: no user in it: nobody could log in")
    elif len(names) > MAX_USERS:
        problems.append(f"{where}: more than {MAX_USERS} users")
    return problems


class Users:
    """The users of ``path`` (a :data:`ROLES` role and a hash each)."""

    def __init__(self, path):
        self.users = {}
        lines, _ = read_users_file(path)
        for number, parts, wrong in _entries(lines):
            if wrong:
                raise SettingsError(f"--ui-users {path}, line {number}: {wrong}")
            if len(self.users) >= MAX_USERS:
                raise SettingsError(f"--ui-users {path}: more than {MAX_USERS} users")
            self.users[parts[0]] = (parts[1], parts[2])

    def role(self, name):
        """``name``'s role, or None when there is no such user."""
        return self.users.get(name, (None, None))[0]

    def check(self, name, password):
        """The user's role when ``password`` is theirs, else None (a hash is
        computed either way: the time does not tell which names exist)."""
        global _DUMMY
        role, stored = self.users.get(name, (None, None))
        if stored is None:
            if _DUMMY is None:
                _DUMMY = hash_password("-")
            verify(password, _DUMMY)
            return None
        return role if verify(password, stored) else None


class Sessions:
    """Server-side sessions: token -> (user, role, csrf token, expiry)."""

    def __init__(self, limit=MAX_SESSIONS, seconds=SESSION_SECONDS):
        self.limit, self.seconds = limit, seconds
        self.table = OrderedDict()

    def open(self, user, role):
        token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        while len(self.table) >= self.limit:
            self.table.popitem(last=False)
        self.table[token] = (user, role, csrf, time.monotonic() + self.seconds)
        return token, csrf

    def get(self, token):
        entry = self.table.get(token or "")
        if entry is None:
            return None
        if entry[3] < time.monotonic():
            del self.table[token]
            return None
        return entry

    def close(self, token):
        self.table.pop(token or "", None)

    def keep(self, allowed):
        """End the sessions whose ``allowed(user, role)`` is false; how many."""
        gone = [token for token, (user, role, _, _) in self.table.items() if not allowed(user, role)]
        for token in gone:
            del self.table[token]
        return len(gone)


class LoginLimiter:
    """Failed logins per client address in the last :data:`WINDOW` seconds."""

    def __init__(self, limit=MAX_CLIENTS):
        self.limit = limit
        self.table = OrderedDict()      # address -> (window start, failures)

    def blocked(self, address, now=None):
        now = time.monotonic() if now is None else now
        start, failures = self.table.get(address, (now, 0))
        if now - start >= WINDOW:
            self.table.pop(address, None)
            return False
        return failures >= MAX_FAILURES

    def failed(self, address, now=None):
        now = time.monotonic() if now is None else now
        start, failures = self.table.pop(address, (now, 0))
        if now - start >= WINDOW:
            start, failures = now, 0
        while len(self.table) >= self.limit:
            self.table.popitem(last=False)
        self.table[address] = (start, failures + 1)
        return failures + 1
