"""The two jobs over an IMAP :class:`~spamnb.imap.client.Connection`.

:func:`scan`: classify what arrived in the inbox since the last scan and move
(or flag) it.  Batch by batch: fetch, classify, move, then record the highest
UID in the state file.  A MOVE is atomic on the server, so a run killed at
any point and run again finds each message in one folder: the moved ones are
no longer in the inbox, the others are read again.

:func:`learn`: every message of the spam folder as spam and of the ham
folders as ham; the learner (the model's ledger) skips what it holds.
"""

from spamnb.imap.client import ImapError
from spamnb.mail.headers import header_of

__all__ = ["scan", "learn", "BATCH", "JUNK_KEYWORD"]

BATCH = 25                # messages fetched, classified and moved at a time
JUNK_KEYWORD = "$Junk"    # the keyword --flag-only sets (RFC 5788's registry; clients show it as junk)


def _batches(uids, size=BATCH):
    for start in range(0, len(uids), size):
        yield uids[start:start + size]


def scan(conn, state, account, classify, inbox="INBOX", spam="Junk", unsure=None, flag_only=False,
         mark=None, header_name="X-Spamnb-Status", step=None):
    """Scan ``inbox``; returns ``{"spam": n, "unsure": n, "ham": n, "too large": n}``
    (a message over the connection's ``max_size`` is not read: it stays where it is).

    ``classify(raw)`` gives a verdict (its ``label``: spam, unsure or ham);
    ``mark(raw, verdict) -> bytes`` (when given)
    gives the message with the verdict header, re-appended in place of the
    original (a message that already has ``header_name`` is not re-appended
    again); ``step(n)`` after each batch of n messages.
    """
    counts = {"spam": 0, "unsure": 0, "ham": 0, "too large": 0}
    if not flag_only:
        for folder in filter(None, (spam, unsure)):
            conn.create(folder)
    uidvalidity = conn.select(inbox)
    after = state.last_uid(account, inbox, uidvalidity)
    marker = b"\n" + header_name.lower().encode("ascii") + b":"
    for batch in _batches(conn.uids(after)):
        where = {"spam": [], "unsure": [], "ham": []}
        appended = []
        for uid, raw, flags, date in conn.fetch(batch):
            if raw is None:
                counts["too large"] += 1
                continue
            verdict = classify(raw)
            label = verdict.label
            counts[label] += 1
            folder = {"spam": spam, "unsure": unsure}.get(label)
            if mark is not None and not flag_only and marker not in _head(raw).lower():
                conn.append(folder or inbox, mark(raw, verdict), flags, date)
                appended.append(uid)
            elif folder is not None:
                where[label].append(uid)
        conn.delete(appended)
        if flag_only:
            conn.flag(where["spam"], JUNK_KEYWORD)
        else:
            conn.move(where["spam"], spam)
            if unsure:
                conn.move(where["unsure"], unsure)
        state.record(account, inbox, uidvalidity, max(batch))
        if step is not None:
            step(len(batch))
    return counts


def _head(raw):
    return b"\n" + header_of(raw)


def learn(conn, learn_one, spam="Junk", ham=("INBOX",), step=None):
    """Learn ``spam`` as spam and each of ``ham`` as ham, message by message:
    ``learn_one(raw, is_spam)``; ``step(n)`` after each batch.  Returns the
    number of messages read."""
    seen = 0
    for folder, is_spam in [(spam, True)] + [(h, False) for h in ham]:
        conn.select(folder, readonly=True)
        for batch in _batches(conn.uids()):
            for _uid, raw, _flags, _date in conn.fetch(batch):
                if raw is None:         # over the connection's max_size: not read, not learned
                    continue
                learn_one(raw, is_spam)
                seen += 1
            if step is not None:
                step(len(batch))
    return seen

