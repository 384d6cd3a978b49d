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

What else an entry says (issue 40).  Whether the message was learned by
auto-learn (``spamnb.model.autolearn``: the model's own verdict) rather than
given by a user, and the histogram bin of its held-out score (its log-odds
before it was learned, ``spamnb.estimator.prequential``), when one was counted.
So a later correction undoes exactly what was learned: a user's label
relabels an auto-learned message (forget as the verdict, learn as the user
says, its held-out score moved from the old class to the new one, never
counted twice), a user's label that agrees turns the entry into the user's,
and a verdict never overrides a label already in the ledger.

Storage hook.  The table of entries, ``Ledger``, is
:mod:`spamnb.estimator.ledger_table` (with ``from_trained``, ``ledger_of``
and ``attach``), which imports this module: a learn of one message into a
model file looks its digest up in the file's ledger in place
(``spamnb.model.learning``) and never loads it.  A ledger is flat
arrays, :meth:`Ledger.to_arrays` (16-byte digests, one label byte each,
oldest first), :meth:`Ledger.notes_array` (one 16-bit note each: bit 15
auto-learned, bits 0-14 the held-out bin + 1, 0 for none) and
:meth:`Ledger.from_arrays`, which checks them; the model file stores them
beside the counts, and a model saved without them loads with an empty
ledger (without notes: every entry a user's, no held-out bin).
:func:`ledger_of` and :func:`attach` are where the filter's copy is read and
set (``SpamFilter.ledger_``).
"""

# spamnb.mail.status is imported where a message's markup is removed: a reader
# replaying a journal's ledger records (spamnb.persistence.journal) does not need it.
# The digest is BLAKE2b compiled into spamnb.bayes._score (spamnb.bayes.checks.blake2b,
# hashlib's bit for bit): a learn loads no shared object of hashlib's for it.
from spamnb.bayes.checks import blake2b

__all__ = ["DIGEST_SIZE", "DEFAULT_CAPACITY", "AUTO_NOTE", "SPAM_BIT", "AUTO_BIT", "canonical", "message_digest",
           "learn", "forget", "Tally", "train_digest", "known_digest", "entry_code", "file_code", "code_entry"]

DIGEST_SIZE = 16
DEFAULT_CAPACITY = 200_000
SPAM_BIT, AUTO_BIT = 1, 2   # in an entry's code: bit 0 spam, bit 1 auto-learned, bits 2+ held-out bin + 1
AUTO_NOTE = 0x8000          # in a note (notes_array): auto-learned; the low 15 bits are the held-out bin + 1

def canonical(data, header_name="X-Spamnb-Status", subject_tag=None):
    """The bytes learned and digested for the raw message ``data``."""
    data = bytes(data)
    if subject_tag is None:
        plain = _unmarked(data, header_name)
        if plain is not None:
            return plain
    from spamnb.mail.status import strip_markup

    return strip_markup(data, header_name, subject_tag)


def _unmarked(data, header_name):
    """``data`` without its mbox envelope line when nothing else of
    :func:`~spamnb.mail.status.strip_markup` can apply (no field of that
    name nor an ``X-Spam-Checker-Version`` field, which ``strip_markup``
    needs before it removes the other ``X-Spam-`` fields, before the first
    blank line: a superset of the header), else None (ask ``strip_markup``).
    Neither name anywhere in the message (most mail): no look for the
    header's end, nor its module's import (a ``learn``'s cold path).
    What ``train`` digests each message with: a search, no parsing (nor a
    regular expression: SpamAssassin's own ``X-Spam-Level`` is left alone)."""
    start = 0
    if data[:5] == b"From ":
        newline = data.find(b"\n")
        if newline < 0:
            return None
        start = newline + 1
    name = header_name.encode("ascii").lower()
    whole = data.lower()   # neither name anywhere in the message: nowhere in its header, whose end need not be found
    if b"x-spam-checker-version" in whole or name in whole:
        from spamnb.mail.headers import header_end

        head = data[start:header_end(data, start)].lower()
        if b"x-spam-checker-version" in head or name in head:
            return None
    return data[start:] if start else data


def train_digest(data):
    """The ledger digest of a message ``train`` counts (its raw bytes): the
    one ``learn`` computes for the same bytes with the default markup
    settings (``message_digest(canonical(data))``), without canonical's
    work when the message has no markup to remove (most mail: one search
    for ``x-spam``, the status header's name's start, in it lower-cased)."""
    start = 0
    if data[:5] == b"From ":
        start = data.find(b"\n") + 1
        if not start:
            return message_digest(canonical(data))
    newline = data.find(b"\n", start)
    if newline > start and data[newline - 1] == 13:   # CRLF line ends: the general way
        return message_digest(canonical(data))
    if _TRAIN is None:
        _train_imports()
    header_end, digest = _TRAIN
    # "x-spam" (x-spamnb-status too) in the header: looked for in the whole message lower-cased first (most
    # mail has it nowhere: no look for the header's end, a search over the message's whole length when it
    # has no blank line, as Enron-Spam's); the header only, past _WHOLE_LOWER bytes (no copy of a large message)
    if len(data) > _WHOLE_LOWER or b"x-spam" in data.lower():
        head = data[start:header_end(data, start)]
        if b"x-spam" in head.lower():
            return message_digest(canonical(data))
    return digest(memoryview(data)[start:] if start else data, digest_size=DIGEST_SIZE).digest()


_TRAIN = None   # train_digest's (header_end, hashlib.blake2b), imported at its first message
_WHOLE_LOWER = 1 << 20   # train_digest lower-cases a message up to this size whole (4.4 against 9.5 us an Enron-Spam message)


def _train_imports():
    """:func:`train_digest`'s imports, once: hashlib's BLAKE2b (its digests
    the compiled one's bit for bit, and faster on a whole corpus; a learn's
    cold path loads neither) and the header's end."""
    global _TRAIN
    from hashlib import blake2b as digest

    from spamnb.mail.headers import header_end

    _TRAIN = header_end, digest


def message_digest(canonical_bytes):
    """The 16-byte digest of a message's canonical bytes."""
    return blake2b(canonical_bytes, DIGEST_SIZE)


class Tally:
    """What a run of learn/forget did, for the one-line report."""

    def __init__(self):
        self.learned = self.known = self.relabelled = self.forgotten = 0

    def learn_summary(self):
        return f"learned {self.learned}, already known {self.known}, relabelled {self.relabelled}"


def known_digest(ledger, message):
    """The digest ``message`` (canonical bytes) is known by in ``ledger``: its
    own, or when that is not in the ledger, that of the same message with
    the other line endings (CRLF for LF, LF for CRLF: a trained file and the
    copy an IMAP server or a mail client hands to ``learn``), when that one
    is; else its own.  The tokens of the two are the same (the tokenizer
    reads CRLF as LF), so forgetting one as the other is exact.  A ledger
    with a ``known_of`` (a light learn's, ``spamnb.model.learning``) is given
    both digests at once: it searches the model file's ledger for the two in
    one pass."""
    digest = message_digest(message)
    both = getattr(ledger, "known_of", None)
    if both is None and ledger.label(digest) is not None:
        return digest
    if b"\r\n" in message:
        other = message.replace(b"\r\n", b"\n")
    elif b"\n" in message:
        other = message.replace(b"\n", b"\r\n")
    else:
        return digest if both is None else both(digest, None)
    other = message_digest(other)
    if both is not None:
        return both(digest, other)
    return other if ledger.label(other) is not None else digest


def entry_code(flags, note):
    """An entry's code (as :class:`Ledger` keeps it) from a journal's RECORD
    (``flags``: bit 0 spam, bit 1 auto-learned; ``note``: the held-out bin + 1, 0 for none)."""
    return (flags & (SPAM_BIT | AUTO_BIT)) | (note << 2)


def file_code(label, note):
    """An entry's code from a model file's arrays: its label byte and its note (:meth:`Ledger.notes_array`)."""
    return label | ((note & ~AUTO_NOTE) << 2) | (AUTO_BIT if note & AUTO_NOTE else 0)


def code_entry(code):
    """:meth:`Ledger.entry` of an entry's code (None: no entry)."""
    if code is None:
        return None
    return bool(code & SPAM_BIT), bool(code & AUTO_BIT), (code >> 2) - 1 if code >> 2 else None


def learn(spam_filter, ledger, data, is_spam, tally, header_name="X-Spamnb-Status", subject_tag=None, auto=False):
    """Learn one raw message through the ledger: no-op when known with this
    label, a move when known with the other.  ``auto``: the model's own
    verdict (auto-learn), recorded as such; it never overrides a label in the
    ledger, and a user's label (``auto`` False) that agrees with an
    auto-learned entry makes it the user's.  Returns "learned", "known" or "relabelled"."""
    message = canonical(data, header_name, subject_tag)
    digest = known_digest(ledger, message)
    before = ledger.label(digest)
    if before is is_spam or (auto and before is not None):
        if not auto and ledger.is_auto(digest):
            ledger.confirm(digest)
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
    ledger.record(digest, is_spam, auto)
    return outcome


def forget(spam_filter, ledger, data, is_spam=None, tally=None, header_name="X-Spamnb-Status", subject_tag=None):
    """Forget one raw message: as the label the ledger has for it, or as
    ``is_spam`` for a message learned before the ledger.  Raises ValueError
    when neither says, or when they disagree.  Returns the label forgotten."""
    message = canonical(data, header_name, subject_tag)
    digest = known_digest(ledger, message)
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
