"""Learning shared by several hosts through Redis (``--shared redis://HOST:PORT/DB``).

Scoring stays local (each host's own mapped model); what is shared is the
learning.  Every learn, forget and TELL a host accepts becomes a *lesson*
(:mod:`spamnb.shared.lessons`: the message's canonical bytes, its ledger key,
the class, the user whose model it teaches, a lesson id; checksummed) appended
to one Redis stream, in one total order.  Every host follows the stream
(:mod:`spamnb.shared.host`) and applies each lesson to its own model exactly
as a local TELL is applied (a learning session, the local journal, the ledger
of learned messages), so all hosts apply the same lessons in the same order
and hold the same model.  Lessons accepted while Redis cannot be reached are
queued in a durable local outbox (:mod:`spamnb.shared.outbox`) and sent in
order when it returns.  Snapshots (a host's model files with the stream
position they include) let a new or long-down host start without the whole
stream, and let the stream be trimmed.

This package sits below the server and the CLI and above training/model:
it imports :mod:`spamnb.model` and the ``redis`` client (an optional extra,
``pip install spamnb[shared]``), never the server; the server hands it the
function that applies a lesson.  Without ``--shared`` nothing here is imported.
"""

from __future__ import annotations

from spamnb.errors import SharedError

__all__ = ["SharedError", "client", "parse_url"]


def parse_url(url):
    """Check ``redis://HOST:PORT/DB`` (or rediss://, unix://); returns it. Raises SharedError."""
    from urllib.parse import urlsplit

    url = (url or "").strip()
    try:
        parts = urlsplit(url)
        parts.port
    except ValueError as exc:
        raise SharedError(f"--shared {url}: {exc}") from None
    if parts.scheme not in ("redis", "rediss", "unix") or (parts.scheme != "unix" and not parts.hostname):
        raise SharedError(f"--shared {url}: give redis://HOST:PORT/DB")
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise SharedError(f"--shared {url}: the database must be a number (redis://HOST:PORT/DB)")
    return url


def client(url, timeout=2.0):
    """A Redis client for ``url`` (a connection is made at first use). SharedError without the redis package."""
    try:
        import redis
    except ImportError:
        raise SharedError("--shared needs the redis package: pip install 'spamnb[shared]'") from None
    return redis.Redis.from_url(parse_url(url), socket_timeout=timeout, socket_connect_timeout=timeout,
                                health_check_interval=0)
