"""What the server says: one line a thing to syslog (``--syslog``) or
stderr, control characters escaped (no client starts a line of its own);
a line and the ``--metrics`` counters for each request; refused clients
logged at most once a second, however many."""

from __future__ import annotations

import sys


def one_line(exc):
    """An exception (or any text) as one line of at most 300 characters."""
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def log_safe(text, limit=64):
    """``text`` for a log line: control characters (CR, LF, ...) and
    backslashes escaped, so a client's ``User:`` cannot start a line of its own."""
    text = str(text)[:limit]
    return "".join(c if c.isprintable() and c != "\\" else (
        "\\\\" if c == "\\" else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}") for c in text)


class ServerLog:
    """The log of a server whose current settings ``settings()`` returns
    (``syslog``, ``verbose``, ``models_dir``, ``model``); ``metrics``
    (spamnb.server.metrics.Metrics, or None) counts the requests;
    ``user_model(user)`` says whether ``user``'s own model answers."""

    def __init__(self, settings, stream=None, user_model=None):
        self.settings = settings
        self.stream = stream or sys.stderr
        self.user_model = user_model
        self.metrics = None
        self.syslog = None
        self.refusals, self.refusal_logged = 0, float("-inf")

    def line(self, text):
        """One line to syslog or stderr."""
        if not text.isprintable():
            text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
                           for c in text)
        if self.settings().syslog:
            if self.syslog is None:
                import syslog

                syslog.openlog("spamnb", syslog.LOG_PID, syslog.LOG_MAIL)
                self.syslog = syslog
            self.syslog.syslog(self.syslog.LOG_INFO, text)
            return
        try:
            self.stream.write(f"spamnb serve: {text}\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def request(self, verb, user, outcome, size, ms, peer, protocol="spamd", action="none"):
        """Count a request (``--metrics``) and log it when it went wrong, or
        with ``-v`` when it did not; ``protocol``, ``action``: the milter's."""
        if self.metrics is not None:
            self.metrics.request(verb, self._user_class(user, outcome), outcome, ms / 1000.0, protocol, action)
        if self.settings().verbose or not clean(outcome):
            self.line(f"{verb} user={user} {outcome} size={size} {ms:.2f} ms peer={peer}"
                      + (f" milter action={action}" if protocol == "milter" else ""))

    def refused(self, peer, now):
        """A TCP client outside --allowed-ips, closed at accept (``now``: the
        loop's time): logged at most once a second, with how many more since."""
        self.refusals += 1
        if now - self.refusal_logged >= 1.0:
            more = f" ({self.refusals - 1} more refused since the last such line)" if self.refusals > 1 else ""
            self.line(f"refused {peer}: not in --allowed-ips{more}")
            self.refusal_logged, self.refusals = now, 0

    def _user_class(self, user, outcome):
        """"user" when ``user``'s own model answered, else "site"."""
        if user == "-" or not self.settings().models_dir or " model=site " in outcome:
            return "site"
        return "user" if self.user_model is not None and self.user_model(user) else "site"


def clean(outcome):
    """Whether a request's log text says it was answered as asked (logged with
    ``-v`` only): not an error, not a user's model that failed to load, not a
    user name refused (a user without a model of their own is not news)."""
    return (not outcome.startswith(("error", "client closed", "too big"))
            and "model is not usable" not in outcome and "user name not allowed" not in outcome)
