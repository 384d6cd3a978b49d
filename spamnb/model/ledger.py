"""The ledger of learned messages: ``learn``/``forget`` that can be repeated (sa-learn's semantics).

Each message learned through the ``spamnb`` command is recorded by its digest
with the label it was learned as.  Then:

- learning a message again with the same label changes nothing ("already known");
- learning it with the other label moves it: forget as the old label, learn as
  the new one ("relabelled");
- forgetting needs no label: the ledger knows it (a message not in the ledger
  can still be forgotten with an explicit label, as before the ledger).

What is digested.  BLAKE2b with a 16-byte digest over the message's bytes
after :func:`spamnb.mail.status.strip_markup`: the mbox envelope line (added by a
mailbox, different in every copy), spamnb's own status header and its subject
tag (added at delivery) are removed, so the original, its delivered copy and
its copy in an mbox are one message.  Nothing else is normalised: the bytes
digested are exactly the bytes learned, so "forget as the old label" subtracts
exactly the counts that were added (a CRLF copy of a message is another
message).  These same canonical bytes are what :func:`learn` and
:func:`forget` hand to the filter.

Bounded and safe.  The digest is 16 bytes whatever the message size, computed
in one linear pass; a cryptographic hash, so a sender cannot make a message
collide with one already learned (2^64 work for any collision, 2^128 for a
given message).  The ledger holds at most ``capacity`` entries (200,000 by
default: 3.4 MB in the model file, about 25 MB in memory while learning);
beyond that the oldest entry is dropped (a message that old, learned again,
counts again).  Nothing of the message but its digest is kept.

Storage hook.  A ledger is two flat byte arrays, :meth:`Ledger.to_arrays`
(16-byte digests, one label byte each, oldest first) and
:meth:`Ledger.from_arrays`, which checks them; the model file stores them
beside the counts, and a model saved without them loads with an empty ledger.
:func:`ledger_of` and :func:`attach` are where the filter's copy is read and
set (``SpamFilter.ledger_``).
"""

# hashlib and spamnb.mail.status are imported where a message is digested: a
# reader replaying a journal's ledger records (spamnb.model.journal) needs neither

__all__ = ["DIGEST_SIZE", "DEFAULT_CAPACITY", "Ledger", "canonical", "message_digest", "learn", "forget",
           "ledger_of", "attach", "Tally"]

DIGEST_SIZE = 16
DEFAULT_CAPACITY = 200_000
_HAM, _SPAM = 0, 1


def canonical(data, header_name="X-Spamnb-Status", subject_tag=None):
    """The bytes learned and digested for the raw message ``data``."""
    from spamnb.mail.status import strip_markup

    return strip_markup(bytes(data), header_name, subject_tag)


def message_digest(canonical_bytes):
    """The 16-byte digest of a message's canonical bytes."""
    try:   # hashlib's own BLAKE2, without hashlib's import (OpenSSL and every algorithm's constructor)
        from _blake2 import blake2b
    except ImportError:   # pragma: no cover - a Python built without it
        from hashlib import blake2b

    return blake2b(canonical_bytes, digest_size=DIGEST_SIZE).digest()


class Ledger:
    """Digest -> label of the messages learned, oldest first, at most ``capacity`` of them."""

    def __init__(self, capacity=DEFAULT_CAPACITY):
        if capacity < 1:
            raise ValueError("a ledger's capacity must be at least 1")
        self.capacity = capacity
        self._labels = {}   # digest -> 0 ham / 1 spam; insertion order is age

    def __len__(self):
        return len(self._labels)

    def label(self, digest):
        """True (spam), False (ham) or None (not in the ledger)."""
        value = self._labels.get(digest)
        return None if value is None else value == _SPAM

    def record(self, digest, is_spam):
        """Record a learned message (the newest entry); drops the oldest beyond capacity."""
        self._labels.pop(digest, None)
        self._labels[digest] = _SPAM if is_spam else _HAM
        while len(self._labels) > self.capacity:
            del self._labels[next(iter(self._labels))]

    def remove(self, digest):
        self._labels.pop(digest, None)

    def to_arrays(self):
        """``(digests, labels)``: 16 bytes a message and one byte (0 ham, 1 spam), oldest first."""
        return b"".join(self._labels), bytes(self._labels.values())

    @classmethod
    def from_arrays(cls, digests, labels, capacity=DEFAULT_CAPACITY):
        """A ledger from :meth:`to_arrays`; raises ValueError for arrays that do not fit together."""
        digests, labels = bytes(digests), bytes(labels)
        n = len(labels)
        if len(digests) != DIGEST_SIZE * n:
            raise ValueError(f"ledger: {len(digests)} bytes of digests for {n} labels")
        if labels.strip(b"\x00\x01"):
            raise ValueError("ledger: a label is neither 0 (ham) nor 1 (spam)")
        ledger = cls(max(capacity, 1))
        for i in range(n):
            ledger._labels[digests[DIGEST_SIZE * i:DIGEST_SIZE * (i + 1)]] = labels[i]
        if len(ledger._labels) != n:
            raise ValueError("ledger: a digest is recorded twice")
        while len(ledger._labels) > ledger.capacity:
            del ledger._labels[next(iter(ledger._labels))]
        return ledger


class Tally:
    """What a run of learn/forget did, for the one-line report."""

    def __init__(self):
        self.learned = self.known = self.relabelled = self.forgotten = 0

    def learn_summary(self):
        return f"learned {self.learned}, already known {self.known}, relabelled {self.relabelled}"


def ledger_of(spam_filter):
    """The filter's ledger (an empty one for a model saved without it)."""
    ledger = getattr(spam_filter, "ledger_", None)
    return Ledger() if ledger is None else ledger


def attach(spam_filter, ledger):
    """Give the filter its ledger back, to be saved with the model."""
    spam_filter.ledger_ = ledger
    return spam_filter


def learn(spam_filter, ledger, data, is_spam, tally, header_name="X-Spamnb-Status", subject_tag=None):
    """Learn one raw message through the ledger: no-op when known with this
    label, a move when known with the other.  Returns "learned", "known" or "relabelled"."""
    message = canonical(data, header_name, subject_tag)
    digest = message_digest(message)
    before = ledger.label(digest)
    if before is is_spam:
        tally.known += 1
        return "known"
    if before is not None:
        spam_filter.forget(message, before)
        spam_filter.learn(message, is_spam)
        tally.relabelled += 1
        outcome = "relabelled"
    else:
        spam_filter.learn(message, is_spam)
        tally.learned += 1
        outcome = "learned"
    ledger.record(digest, is_spam)
    return outcome


def forget(spam_filter, ledger, data, is_spam=None, tally=None, header_name="X-Spamnb-Status", subject_tag=None):
    """Forget one raw message: as the label the ledger has for it, or as
    ``is_spam`` for a message learned before the ledger.  Raises ValueError
    when neither says, or when they disagree.  Returns the label forgotten."""
    message = canonical(data, header_name, subject_tag)
    digest = message_digest(message)
    recorded = ledger.label(digest)
    if recorded is None and is_spam is None:
        raise ValueError("the message is not in the ledger of learned messages; "
                         "give --spam or --ham to forget a message learned without it")
    if recorded is not None and is_spam is not None and recorded is not is_spam:
        raise ValueError(f"the message was learned as {'spam' if recorded else 'ham'}, "
                         f"not {'spam' if is_spam else 'ham'}")
    label = recorded if recorded is not None else is_spam
    spam_filter.forget(message, label)
    ledger.remove(digest)
    if tally is not None:
        tally.forgotten += 1
    return label
