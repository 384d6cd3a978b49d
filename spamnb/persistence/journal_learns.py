"""A viewed journal's learns as objects: what a learner (``spamnb.model.learning``)
and a token's text ask of a ``spamnb.persistence.journal_view.JournalView``; a
classify scores through the journal's hashes as its read left them, without these."""

__all__ = ["Learn", "Recorded", "recorded"]


class Learn:
    """One learn of a viewed journal: its class, token hashes (uint64 bytes, one an
    occurrence), the vocabulary's size before it, its new tokens' number, UTF-8
    lengths and text."""

    __slots__ = ("cls", "hashes", "n_before", "n_new", "lengths", "text")

    def __init__(self, cls, hashes, n_before, n_new, lengths, text):
        self.cls, self.hashes, self.n_before, self.n_new = cls, hashes, n_before, n_new
        self.lengths, self.text = lengths, text


class Recorded(Learn):
    """A learn as the journal's record holds it (``spamnb.persistence.journal_view``'s parse): its hashes,
    lengths and text read from the record when asked for (a classify reads
    the journal's hashes whole, once, and none of them)."""

    __slots__ = ("payload", "at")

    def __init__(self, payload, cls, n_before, n_new, hashes_at, text_at, n_text):
        self.payload, self.cls, self.n_before, self.n_new = payload, cls, n_before, n_new
        self.at = (hashes_at, text_at, n_text)

    @property
    def hashes(self):
        hashes_at, text_at, _n_text = self.at
        return self.payload[hashes_at:text_at - 4 * self.n_new]

    @property
    def lengths(self):
        _hashes_at, text_at, _n_text = self.at
        return self.payload[text_at - 4 * self.n_new:text_at].cast("I")

    @property
    def text(self):
        _hashes_at, text_at, n_text = self.at
        return self.payload[text_at:text_at + n_text]


def recorded(records):
    """The learns (:class:`Recorded`) of ``spamnb.persistence.journal_view``'s parse's ``records``: what a
    learner or a token's text asks for; a classify scores without them."""
    payloads, fields, stride = records   # each learn's fields (int64, stride a learn): payload index, then Recorded's
    return [Recorded(payloads[learn[0]], *learn[1:7])
            for learn in (fields[at:at + stride].tolist() for at in range(0, len(fields), stride))]
