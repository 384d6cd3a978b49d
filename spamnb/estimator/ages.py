"""The model's ages: the day each token was last seen in a learned message,
the days the model was created and last learned from, and the size past
which a learn prunes it.  What expiry (:mod:`spamnb.model.lifecycle`) reads; kept
beside the counts by :class:`spamnb.SpamFilter` and in the model file
(schema version 3).

Days count from 1970-01-01 (UTC); 0 means "not known" (a model written
before version 3, loaded: its tokens have no day until they are seen again).
Nothing here imports numpy unless a day is being set, so loading a model
for ``spamnb classify`` costs nothing more.
"""

import time
from array import array

__all__ = ["Ages", "today", "UNKNOWN"]

UNKNOWN = 0


def today():
    """Today (UTC) as days since 1970-01-01."""
    return int(time.time() // 86400)


class Ages:
    """Last-seen days per token and the model's dates.

    Attributes
    ----------
    last_seen : buffer of int32, (n_features,), or None (all unknown)
    created, last_learn : int, days (0 unknown)
    max_tokens : int or None
        When a learn leaves more tokens than this, the model is pruned
        (``spamnb.model.lifecycle.expire``); None: never.
    """

    __slots__ = ("last_seen", "created", "last_learn", "max_tokens")

    def __init__(self, last_seen=None, created=UNKNOWN, last_learn=UNKNOWN, max_tokens=None):
        self.last_seen, self.created, self.last_learn, self.max_tokens = last_seen, created, last_learn, max_tokens

    @classmethod
    def fresh(cls, n_features, day=None, max_tokens=None):
        """Every token seen on ``day`` (default today), the model created then."""
        day = today() if day is None else day
        return cls(array("i", [day]) * n_features, day, day, max_tokens)

    @classmethod
    def from_file(cls, header, arrays):
        """From a model file's header and arrays (schema.read: missing ones are None)."""
        return cls(arrays.get("last_seen"), header.get("created") or UNKNOWN, header.get("last_learn") or UNKNOWN,
                   header.get("max_tokens"))

    def days(self, n_features):
        """The last-seen days as a writable ``array('i')`` of ``n_features``
        (tokens without a day: UNKNOWN)."""
        days = self.last_seen
        if not isinstance(days, array):
            copy = array("i")
            if days is not None:
                copy.frombytes(memoryview(days).cast("B"))
            days = copy
        if len(days) < n_features:
            days.frombytes(bytes(4 * (n_features - len(days))))
        elif len(days) > n_features:
            del days[n_features:]
        self.last_seen = days
        return days

    def seen(self, indices, n_features, day=None):
        """Tokens ``indices`` (``array('i')``, the feature indices of a message's
        tokens) were seen on ``day`` (default today) in a learned message."""
        import numpy as np

        day = today() if day is None else day
        days = self.days(n_features)
        if len(indices):
            np.frombuffer(days, dtype=np.int32)[np.frombuffer(indices, dtype=np.int32)] = day
        self.last_learn = max(self.last_learn, day)
        if self.created == UNKNOWN:
            self.created = day
        return self

    def compact(self, keep):
        """Keep the days of the tokens where ``keep`` (bools, one per token) is true."""
        import numpy as np

        days = np.frombuffer(self.days(len(keep)), dtype=np.int32)
        self.last_seen = array("i", days[np.asarray(keep, dtype=bool)].tobytes())
        return self

    def fields(self):
        """The model file's header fields."""
        return {"created": int(self.created), "last_learn": int(self.last_learn), "max_tokens": self.max_tokens}
