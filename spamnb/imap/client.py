"""One IMAP connection (the standard library's :mod:`imaplib`): TLS with
certificate verification (implicit TLS or STARTTLS), login, and the few
commands the jobs use, with MOVE where the server has it and COPY + STORE
\\Deleted + (UID) EXPUNGE where it does not."""

import imaplib
import re
import socket
import ssl

from spamnb.errors import ImapError, LoginRefused, Unreachable

__all__ = ["ImapError", "LoginRefused", "Unreachable", "Connection", "connect"]

_UID = re.compile(rb"\bUID (\d+)")
_FLAGS = re.compile(rb"\bFLAGS \(([^)]*)\)")
_DATE = re.compile(rb'\bINTERNALDATE ("[^"]*")')


def _text(data):
    if isinstance(data, (list, tuple)):
        data = b" ".join(d if isinstance(d, bytes) else str(d).encode() for d in data if d is not None)
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    return " ".join(str(data).split())[:200]


def connect(host, port=None, user="", password="", security="tls", cafile=None, timeout=60):
    """A logged-in :class:`Connection`.  ``security``: "tls" (implicit TLS,
    port 993), "starttls" (port 143, then STARTTLS) or "none" (no TLS: only
    for a server on this host).  Certificates are verified against the
    system's CAs, or ``cafile``'s."""
    context = None
    if security != "none":
        try:
            context = ssl.create_default_context(cafile=cafile)
        except (OSError, ssl.SSLError) as exc:
            raise Unreachable(f"cannot read the CA file {cafile}: {exc.strerror or exc}") from None
    where = f"{host}:{port or (993 if security == 'tls' else 143)}"
    try:
        if security == "tls":
            imap = imaplib.IMAP4_SSL(host, port or 993, ssl_context=context, timeout=timeout)
        else:
            imap = imaplib.IMAP4(host, port or 143, timeout=timeout)
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
        raise Unreachable(f"cannot connect to {where}: {_text(str(reason))}") from None
    try:
        imap.login(user, password)
    except imaplib.IMAP4.error as exc:
        try:
            imap.shutdown()
        except OSError:
            pass
        raise LoginRefused(f"{where} refused the login of {user!r}: {_text(str(exc))}") from None
    except OSError as exc:
        raise Unreachable(f"{where} closed the connection at login: {exc.strerror or exc}") from None
    return Connection(imap, where)


class Connection:
    """A logged-in connection; each method raises :class:`ImapError` with one line."""

    def __init__(self, imap, where):
        self.imap = imap
        self.where = where
        self.capabilities = set(imap.capabilities)

    def _check(self, what, result):
        typ, data = result
        if typ != "OK":
            raise ImapError(f"{self.where}: {what}: {typ} {_text(data)}")
        return data

    def _call(self, what, method, *args):
        try:
            return self._check(what, method(*args))
        except (imaplib.IMAP4.error, OSError) as exc:
            raise ImapError(f"{self.where}: {what}: {_text(str(exc))}") from None

    @staticmethod
    def quote(folder):
        return '"' + folder.replace("\\", "\\\\").replace('"', '\\"') + '"'

    def select(self, folder, readonly=False):
        """Open ``folder``; returns its UIDVALIDITY."""
        self._call(f"SELECT {folder}", self.imap.select, self.quote(folder), readonly)
        data = self.imap.response("UIDVALIDITY")[1]
        if not data or data[0] is None:
            raise ImapError(f"{self.where}: {folder} has no UIDVALIDITY")
        return int(data[0])

    def create(self, folder):
        """Create ``folder`` unless it exists."""
        data = self._call(f"LIST {folder}", self.imap.list, '""', self.quote(folder))
        if not [d for d in data if d]:
            self._call(f"CREATE {folder}", self.imap.create, self.quote(folder))

    def uids(self, after=0):
        """The UIDs of the open folder above ``after``, ascending."""
        data = self._call("UID SEARCH", self.imap.uid, "SEARCH", None, f"UID {after + 1}:*")
        return sorted(u for u in (int(x) for x in b" ".join(d for d in data if d).split()) if u > after)

    def fetch(self, uids):
        """``(uid, raw, flags, internaldate)`` of each of ``uids`` still there."""
        if not uids:
            return []
        data = self._call("UID FETCH", self.imap.uid, "FETCH", ",".join(map(str, uids)),
                          "(UID FLAGS INTERNALDATE BODY.PEEK[])")
        found = []
        for item in data:
            if not isinstance(item, tuple):
                continue
            head, raw = item
            uid = _UID.search(head)
            if uid is None:
                continue
            flags = _FLAGS.search(head)
            date = _DATE.search(head)
            found.append((int(uid.group(1)), raw, flags.group(1).decode() if flags else "",
                          date.group(1).decode() if date else None))
        return found

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
        try:
            self.imap.logout()
        except (imaplib.IMAP4.error, OSError):
            pass
