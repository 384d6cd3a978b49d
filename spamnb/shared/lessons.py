"""A lesson: one accepted learn/forget/TELL as it travels on the shared stream.

Layout (little-endian), the value of the stream entry's field ``r``::

    0   8  magic b"SPAMNB\\x00L"
    8   2  format version (VERSION)
    10  1  flags: 1 learn ("Set: local"), 2 forget ("Remove: local")
    11  1  class: 0 ham, 1 spam, 2 none given (a forget; the ledger knows it)
    12  2  length U of the user name (0: the site model)
    14  2  reserved (0)
    16  16 lesson id: its sender's id (8 bytes) and number (8, big-endian), set when it is
           sent: Redis adds a lesson only past the last number of its sender (spamnb.shared.host)
    32  16 ledger key: the digest of the canonical bytes (spamnb.estimator.ledger)
    48  4  length M of the message
    52  4  reserved (0)
    56  U  user name (UTF-8), then M bytes: the message's canonical bytes
    ..  8  checksum64 of everything before it

Why not the local journal record itself: a journal record is written against
the exact vocabulary of the model it extends (its size, the new tokens' text),
so it applies only to that very model.  Lessons accepted at once on several
hosts extend different states; the stream orders them, and each host turns
each lesson, in that order, into its own journal record (the same session code
as a local TELL).  The lesson carries what that needs: the canonical bytes and
their ledger key (checked against each other on arrival).
"""

from __future__ import annotations

import os
import struct

__all__ = ["Lesson", "encode", "decode", "VERSION", "LEARN", "FORGET"]

MAGIC = b"SPAMNB\x00L"
VERSION = 1
LEARN, FORGET = 1, 2
_HEAD = struct.Struct("<8sHBBHH16s16sII")
_MAX_MESSAGE = 64 * 1024 * 1024


class Lesson:
    __slots__ = ("flags", "spam", "user", "lesson_id", "digest", "message")

    def __init__(self, flags, spam, user, message, digest=None, lesson_id=None):
        from spamnb.estimator.ledger import message_digest

        self.flags, self.spam, self.user, self.message = flags, spam, user or "", bytes(message)
        self.digest = digest if digest is not None else message_digest(self.message)
        self.lesson_id = lesson_id if lesson_id is not None else os.urandom(16)

    @property
    def learn(self):
        return bool(self.flags & LEARN)

    @property
    def forget(self):
        return bool(self.flags & FORGET)


def _checksum(data):
    from spamnb.bayes.checks import checksum64

    return checksum64(data)


def encode(lesson):
    user = lesson.user.encode("utf-8")
    cls = 2 if lesson.spam is None else int(bool(lesson.spam))
    body = _HEAD.pack(MAGIC, VERSION, lesson.flags, cls, len(user), 0, lesson.lesson_id, lesson.digest,
                      len(lesson.message), 0) + user + lesson.message
    return body + struct.pack("<Q", _checksum(body))


def decode(data):
    """The Lesson in ``data``; ValueError when it is not a whole, checksummed lesson of this format."""
    data = bytes(data)
    if len(data) < _HEAD.size + 8:
        raise ValueError("a lesson cut short")
    magic, version, flags, cls, n_user, _r, lesson_id, digest, n_message, _r2 = _HEAD.unpack_from(data)
    if magic != MAGIC or version != VERSION:
        raise ValueError("not a lesson of this spamnb")
    end = _HEAD.size + n_user + n_message
    if end + 8 != len(data) or n_message > _MAX_MESSAGE or cls > 2 or not flags or flags & ~3:
        raise ValueError("a lesson of the wrong size or with bad fields")
    if struct.unpack_from("<Q", data, end)[0] != _checksum(data[:end]):
        raise ValueError("a lesson whose checksum does not hold")
    user = data[_HEAD.size:_HEAD.size + n_user].decode("utf-8")
    message = data[_HEAD.size + n_user:end]
    lesson = Lesson(flags, None if cls == 2 else bool(cls), user, message, lesson_id=lesson_id)
    if lesson.digest != digest:
        raise ValueError("a lesson whose ledger key is not its message's")
    return lesson
