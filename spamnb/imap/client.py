"""One IMAP connection (the standard library's :mod:`imaplib`): TLS with
certificate verification (implicit TLS or STARTTLS), login, and the few
commands the jobs use, with MOVE where the server has it and COPY + STORE
\\Deleted + (UID) EXPUNGE where it does not.

The server is not trusted (issue 45): the whole connection has a deadline
(a watchdog shuts the socket down when it passes, whatever a read is doing),
a literal (``{n}``) over the size cap is refused before it is read, what one
command may read is bounded (lines and untagged responses), and a reply that
does not parse (a UID, UIDVALIDITY or RFC822.SIZE that is not a number) is
an :class:`ImapError`, exit 69, like a refused command."""

import imaplib
import ipaddress
import re
import socket
import ssl
import threading
import time

from spamnb.errors import ImapError, LoginRefused, SettingsError, Unreachable
from spamnb.imap import DEADLINE, MAX_SIZE     # a literal over MAX_SIZE is a protocol error

__all__ = ["ImapError", "LoginRefused", "Unreachable", "Connection", "connect", "check_security", "DEADLINE",
           "MAX_SIZE"]

COMMAND_LINES = 100_000    # lines (untagged responses) one command may read
FETCH_BYTES = 2            # one UID FETCH of bodies asks for at most this many times --max-size
_UID = re.compile(rb"\bUID (\d{1,10})\b")
_FLAGS = re.compile(rb"\bFLAGS \(([^)]*)\)")
_DATE = re.compile(rb'\bINTERNALDATE ("[ 0-9]{1,2}-[A-Za-z]{3}-[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} [+-][0-9]{4}")')
_SIZE = re.compile(rb"\bRFC822\.SIZE (\d{1,12})\b")
_FLAG = re.compile(r"\\?[A-Za-z0-9$_.\-]{1,100}")
_NUMBER = re.compile(rb"[0-9]{1,10}")
_IMAPLIB_PREFIX = re.compile(r"^command: [A-Z]+ => ")


def check_security(host, security):
    """SettingsError unless a connection without TLS goes to this host (a loopback
    address or ``localhost``): the password would cross the network in clear."""
    if security != "none":
        return
    if str(host).lower().rstrip(".") in ("localhost", "localhost.localdomain"):
        return
    try:
        if ipaddress.ip_address(str(host).strip("[]")).is_loopback:
            return
    except ValueError:
        pass
    raise SettingsError(f'[imap] security = "none" is only for a server on this host (127.0.0.1, ::1, '
                        f'localhost), not {host}: the password would cross the network in clear; '
                        f'use "tls" or "starttls"')


def _uid(text, what="a UID"):
    """A UID or UIDVALIDITY (RFC 3501: 1 to 2**32 - 1) from the server; ValueError otherwise."""
    if isinstance(text, str):
        text = text.encode("ascii", "replace")
    if not _NUMBER.fullmatch(text or b"") or not 0 < int(text) < 1 << 32:
        raise ValueError(f"{what} that is not a number from 1 to 2^32-1: {_text(text)!r}")
    return int(text)


class _Bounded:
    """What a hostile server can make :mod:`imaplib` do, bounded: ``deadline``
    (time.monotonic) for the whole connection, ``max_literal`` bytes per literal,
    ``COMMAND_LINES`` lines and ``budget`` bytes between two :meth:`begin`."""

    max_literal = MAX_SIZE
    deadline = float("inf")
    per_read = 60.0
    budget = 4 * MAX_SIZE

    def begin(self, budget):
        """A command starts: what it may read; old untagged responses dropped."""
        self.lines_left, self.bytes_left = COMMAND_LINES, budget
        self.untagged_responses = {}

    def expired(self):
        return time.monotonic() >= self.deadline

    def open(self, host="", port=None, timeout=None):
        super().open(host, port, timeout)
        self.lines_left, self.bytes_left = COMMAND_LINES, self.budget
        left = self.deadline - time.monotonic()
        self.watchdog = threading.Timer(max(0.0, left), self.cut)
        self.watchdog.daemon = True
        self.watchdog.start()

    def cut(self):
        """The deadline passed: the socket shut down under whatever read waits on it."""
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except (OSError, TypeError, AttributeError):
            pass

    def _spend(self, n):
        if self.expired():
            raise self.abort("no end before the deadline (--timeout)")
        self.bytes_left -= n
        if self.bytes_left < 0 or self.lines_left < 0:
            raise self.abort("the server sent more than one command may read (an endless reply?)")
        try:
            self.sock.settimeout(max(0.001, min(self.per_read, self.deadline - time.monotonic())))
        except OSError:
            pass

    def readline(self):
        self._spend(0)
        self.lines_left -= 1
        line = super().readline()
        self._spend(len(line))
        return line

    def read(self, size):
        if size > self.max_literal:
            raise self.abort(f"a literal of {size} bytes, over the --max-size of {self.max_literal}")
        self._spend(size)
        return super().read(size)

    def shutdown(self):
        watchdog = getattr(self, "watchdog", None)
        if watchdog is not None:
            watchdog.cancel()
        super().shutdown()


class _IMAP(_Bounded, imaplib.IMAP4):
    pass


class _IMAPS(_Bounded, imaplib.IMAP4_SSL):
    pass


def _bounded(cls, deadline, max_literal, per_read):
    """``cls`` with this connection's bounds (set before its __init__ connects and reads the greeting)."""
    return type(cls.__name__, (cls,), {"deadline": deadline, "max_literal": max_literal, "per_read": per_read,
                                       "budget": FETCH_BYTES * max_literal + (1 << 20)})


def _text(data):
    if isinstance(data, (list, tuple)):
        data = b" ".join(d if isinstance(d, bytes) else str(d).encode() for d in data if d is not None)
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    return " ".join(str(data).split())[:200]


def connect(host, port=None, user="", password="", security="tls", cafile=None, timeout=60, deadline=DEADLINE,
            max_size=MAX_SIZE):
    """A logged-in :class:`Connection`.  ``security``: "tls" (implicit TLS,
    port 993), "starttls" (port 143, then STARTTLS) or "none" (no TLS: only
    for a server on this host, else SettingsError).  Certificates are verified against the
    system's CAs, or ``cafile``'s.  ``timeout``: seconds one read may wait;
    ``deadline``: seconds the whole connection may last; ``max_size``: the
    largest message (and literal) read."""
    check_security(host, security)
    ends = time.monotonic() + deadline
    context = None
    if security != "none":
        try:
            context = ssl.create_default_context(cafile=cafile)
        except (OSError, ssl.SSLError) as exc:
            raise Unreachable(f"cannot read the CA file {cafile}: {exc.strerror or exc}") from None
    where = f"{host}:{port or (993 if security == 'tls' else 143)}"
    try:
        if security == "tls":
            imap = _bounded(_IMAPS, ends, max_size, timeout)(host, port or 993, ssl_context=context, timeout=timeout)
        else:
            imap = _bounded(_IMAP, ends, max_size, timeout)(host, port or 143, timeout=timeout)
            if security == "starttls":
                if "STARTTLS" not in imap.capabilities:
                    imap.shutdown()
                    raise Unreachable(f"{where} does not offer STARTTLS")
                imap.starttls(ssl_context=context)
    except ssl.SSLCertVerificationError as exc:
        raise Unreachable(f"{where}: TLS certificate not trusted ({exc.verify_message}); "
                          f"give the server's CA with --cafile") from None
    except (OSError, imaplib.IMAP4.error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        if isinstance(exc, socket.timeout):
            reason = "timed out"
        if time.monotonic() >= ends:
            reason = f"no end within the --timeout of {deadline:g} s"
        raise Unreachable(f"cannot connect to {where}: {_text(str(reason))}") from None
    try:
        imap.begin(imap.budget)
        imap.login(user, password)
    except imaplib.IMAP4.error as exc:
        try:
            imap.shutdown()
        except OSError:
            pass
        raise LoginRefused(f"{where} refused the login of {user!r}: {_text(str(exc))}") from None
    except OSError as exc:
        imap.shutdown()
        raise Unreachable(f"{where} closed the connection at login: {exc.strerror or exc}") from None
    return Connection(imap, where, max_size, deadline)


class Connection:
    """A logged-in connection; each method raises :class:`ImapError` with one line."""

    def __init__(self, imap, where, max_size=MAX_SIZE, deadline=DEADLINE):
        self.imap = imap
        self.where = where
        self.capabilities = set(imap.capabilities)
        self.max_size, self.deadline = max_size, deadline
        self.broken = False

    def _check(self, what, result):
        typ, data = result
        if typ != "OK":
            raise ImapError(f"{self.where}: {what}: {typ} {_text(data)}")
        return data

    def _call(self, what, method, *args):
        if self.broken:
            raise ImapError(f"{self.where}: {what}: the connection was given up")
        try:
            self.imap.begin(self.imap.budget)
            return self._check(what, method(*args))
        except (imaplib.IMAP4.error, OSError, ValueError) as exc:
            self.broken = True
            reason = _IMAPLIB_PREFIX.sub("", str(exc))
            if self.imap.expired():
                reason = f"no end within the --timeout of {self.deadline:g} s"
            raise ImapError(f"{self.where}: {what}: {_text(reason)}") from None

    def malformed(self, what, exc):
        """ImapError for a reply that does not parse (the connection is given up)."""
        self.broken = True
        return ImapError(f"{self.where}: {what}: a malformed reply ({_text(str(exc))})")

    @staticmethod
    def quote(folder):
        return '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'

    def select(self, folder, readonly=False):
        """Open ``folder``; returns its UIDVALIDITY."""
        self._call(f"SELECT {folder}", self.imap.select, self.quote(folder), readonly)
        data = self.imap.response("UIDVALIDITY")[1]
        if not data or data[0] is None:
            raise ImapError(f"{self.where}: {folder} has no UIDVALIDITY")
        try:
            return _uid(data[-1], "a UIDVALIDITY")
        except ValueError as exc:
            raise self.malformed(f"SELECT {folder}", exc) from None

    def create(self, folder):
        """Create ``folder`` unless it exists."""
        data = self._call(f"LIST {folder}", self.imap.list, '""', self.quote(folder))
        if not [d for d in data if d]:
            self._call(f"CREATE {folder}", self.imap.create, self.quote(folder))

    def uids(self, after=0):
        """The UIDs of the open folder above ``after``, ascending."""
        data = self._call("UID SEARCH", self.imap.uid, "SEARCH", None, f"UID {after + 1}:*")
        try:
            found = {_uid(x) for d in data if d for x in (d if isinstance(d, bytes) else b"").split()}
        except ValueError as exc:
            raise self.malformed("UID SEARCH", exc) from None
        return sorted(u for u in found if u > after)

    def sizes(self, uids):
        """``{uid: RFC822.SIZE}`` of each of ``uids`` still there."""
        data = self._call("UID FETCH", self.imap.uid, "FETCH", ",".join(map(str, uids)), "(UID RFC822.SIZE)")
        found = {}
        try:
            for item in data:
                head = item[0] if isinstance(item, tuple) else item
                if not isinstance(head, bytes):
                    continue
                uid, size = _UID.search(head), _SIZE.search(head)
                if uid is None and size is None:
                    continue        # an untagged FETCH of flags only, say
                if uid is None or size is None:
                    raise ValueError(f"a FETCH without a UID or RFC822.SIZE: {_text(head)!r}")
                found[_uid(uid.group(1))] = int(size.group(1))
        except (ValueError, TypeError, IndexError) as exc:
            raise self.malformed("UID FETCH", exc) from None
        return found

    def fetch(self, uids):
        """``(uid, raw, flags, internaldate)`` of each of ``uids`` still there,
        in UID order; ``raw`` is None for a message over ``max_size`` (not read).
        Bodies are fetched a few at a time, at most ``FETCH_BYTES * max_size`` bytes
        by one command."""
        if not uids:
            return []
        sizes = self.sizes(uids)
        found = [(uid, None, "", None) for uid in sorted(sizes) if sizes[uid] > self.max_size]
        wanted = [uid for uid in sorted(sizes) if sizes[uid] <= self.max_size]
        while wanted:
            group, total = [], 0
            while wanted and (not group or total + sizes[wanted[0]] <= FETCH_BYTES * self.max_size):
                total += sizes[wanted[0]]
                group.append(wanted.pop(0))
            found += self._bodies(group)
        return sorted(found, key=lambda item: item[0])

    def _bodies(self, uids):
        data = self._call("UID FETCH", self.imap.uid, "FETCH", ",".join(map(str, uids)),
                          "(UID FLAGS INTERNALDATE BODY.PEEK[])")
        found = {}
        try:
            for item in data:
                if not isinstance(item, tuple):
                    continue
                head, raw = item
                uid = _UID.search(head)
                if uid is None:
                    continue
                uid = _uid(uid.group(1))
                if uid not in uids or not isinstance(raw, bytes):
                    continue        # not asked for: not taken
                flags = _FLAGS.search(head)
                flags = " ".join(f for f in flags.group(1).decode("ascii", "replace").split()
                                 if _FLAG.fullmatch(f)) if flags else ""
                date = _DATE.search(head)
                found[uid] = (uid, raw, flags, date.group(1).decode("ascii") if date else None)
        except (ValueError, TypeError, IndexError) as exc:
            raise self.malformed("UID FETCH", exc) from None
        return list(found.values())

    def flag(self, uids, flag):
        if uids:
            self._call("UID STORE", self.imap.uid, "STORE", ",".join(map(str, uids)), "+FLAGS.SILENT", f"({flag})")

    def delete(self, uids):
        """Mark ``uids`` deleted and expunge them (UID EXPUNGE where the server has UIDPLUS)."""
        if not uids:
            return
        self.flag(uids, "\\Deleted")
        if "UIDPLUS" in self.capabilities:
            self._call("UID EXPUNGE", self.imap.uid, "EXPUNGE", ",".join(map(str, uids)))
        else:
            self._call("EXPUNGE", self.imap.expunge)

    def move(self, uids, folder):
        """Move ``uids`` of the open folder to ``folder``: MOVE (atomic), else
        COPY then delete (a run killed between the two leaves a copy in
        both folders, never none)."""
        if not uids:
            return
        uid_set = ",".join(map(str, uids))
        if "MOVE" in self.capabilities:
            self._call(f"UID MOVE to {folder}", self.imap.uid, "MOVE", uid_set, self.quote(folder))
        else:
            self._call(f"UID COPY to {folder}", self.imap.uid, "COPY", uid_set, self.quote(folder))
            self.delete(uids)

    def append(self, folder, raw, flags="", date=None):
        flags = " ".join(f for f in flags.split() if f.lower() != "\\recent")
        self._call(f"APPEND to {folder}", self.imap.append, self.quote(folder), f"({flags})" if flags else None,
                   date, raw)

    def logout(self):
        """LOGOUT; a connection given up (an error, the deadline) is only closed."""
        try:
            if self.broken or self.imap.expired():
                self.imap.shutdown()
            else:
                self.imap.begin(1 << 20)
                self.imap.logout()
        except (imaplib.IMAP4.error, OSError, ValueError):
            try:
                self.imap.shutdown()
            except OSError:
                pass
