"""Model lifecycle: the text dump, merge and prune.

A filter that learns for years has to be backed up, moved, combined and kept
small.  This module holds the operations on a whole model; the CLI commands
(``spamnb dump``, ``load``, ``merge``, ``prune``) are thin shells over them
(``spamnb.cli.models``).

The dump (format ``spamnb-dump 2``; version 1 is read too)
----------------------------------------------------------
UTF-8 text, one record per line (LF), written and read as a stream::

    spamnb-dump 2
    columns token ham spam last-seen
    settings {"alpha":0.01,"counts":"log",...,"tokenizer":{...}}
    features null
    created 2026-11-23
    last-learn 2026-11-23
    max-tokens -
    messages 2841 1973
    tokens 3
    subject:free\t0\t3.295836866004329\t2026-11-20
    hello\t12\t1\t2026-11-23
    a\\tb\t0.6931471805599453\t0\t-
    ledger 1
    0f1e2d3c4b5a69788796a5b4c3d2e1f0\tspam
    end 3 5f0c1e2a

- The header lines are ``key value``: ``settings`` and ``features`` are
  one-line JSON (the model's parameters and tokenizer settings; the Gaussian
  message-feature statistics, or ``null``), ``created``/``last-learn`` are
  days (``YYYY-MM-DD``, or ``-`` when unknown), ``max-tokens`` the size
  past which a learn prunes the model (``-`` or ``0``: never; else at least
  ``MIN_MAX_TOKENS``, 1000), ``messages`` the messages learned per class
  (ham, spam: whole numbers from 0 to 2**53), ``tokens`` how many token lines
  follow.
- A dump is hostile input: every field is checked against its range before
  the model is touched (the settings as ``SpamFilter`` checks them: alpha in
  (0, 1000], length_norm and feature_weight finite in [0, 1e6], the cutoffs in
  [0, 1]; counts from 0 to 2**53), and a value out of range is refused with
  one line naming the line of the dump, the model unchanged.
- One line per token, in the model's feature order, four tab-separated
  fields: the token, its (transformed) ham and spam counts, and the day it
  was last seen in a learned message (``-`` when unknown).  Counts are
  written exactly: an integer as digits, any other float as Python's
  shortest round-trip ``repr``.  The token is escaped so that any token
  (any code point, a lone surrogate included) fits on one line: ``\\\\``,
  ``\\t``, ``\\n``, ``\\r``, other control characters as ``\\xHH`` and lone
  surrogates as ``\\uDXXX``; every other character is itself, in UTF-8.
- Version 2: after the token lines, ``ledger M`` and M lines, the learned
  messages of the ledger (``spamnb.estimator.ledger``), oldest first: the 16-byte
  digest in hex, a tab, ``spam`` or ``ham``.  Version 1 has no ledger (it
  loads with an empty one).
- The last line is ``end N CRC``: the number of token lines again and the
  CRC-32 (hex) of every byte before that line.  A dump that does not end so
  was cut short; a checksum that does not match was damaged (or edited: a
  hand-written dump may give ``-`` for CRC).

``dump`` then ``load`` gives back the same model: same tokens in the same
order, the same counts to the last bit, so the same scores; ``dump | load |
dump`` is byte-identical.

Merge
-----
Models with the same settings (tokenizer, alpha, prior, count transform)
combine by adding their counts, token by token (tokens new to the first
model are appended in the order the other model has them, which is the
order in which training on the union would have met them).  With integer
counts (``counts="raw"`` or ``"binary"``) the result is bit-identical to
training on the union of the messages; with ``counts="log"`` the per-token
sums are the same numbers added in another grouping, equal to within
rounding (a few units in the last place).  A token's last-seen day is the
later of the two.

Prune
-----
Three policies, combinable; each drops whole tokens (their counts go,
the message counts stay, as if those tokens had never been counted):

- ``min_count``: drop tokens seen fewer than N times in all, a time being one
  occurrence in one message (a count of ``transform(1)``: 1, or log 2 with
  ``counts="log"``).  A model with ``length_norm`` > 0 (the default since
  length normalisation became one) scales each message's counts by its own
  length, so its counts do not tell occurrences: ``min_count`` is refused
  there (ValueError), and ``describe`` counts no hapaxes.
- ``max_age``: drop tokens not seen in a learned message for more than N days.
- ``target_size``: keep the N most useful tokens.  A token's usefulness is
  its share of the symmetric Kullback-Leibler (Jeffreys) divergence between
  the spam and ham token distributions,

      u_i = (theta_spam,i - theta_ham,i) (log theta_spam,i - log theta_ham,i) >= 0,

  i.e. how much the token separates the classes on average: a token that
  appears in a message moves its log-odds by w_i = log theta_spam,i - log
  theta_ham,i, and it appears with probability ~theta_c,i per token drawn,
  so u_i is the expected gap it opens between a spam and a ham.  Rare tokens
  (small theta) and even tokens (w ~ 0) are the least useful; ties go to
  the token seen most recently, then to the older feature.
  ``scripts/tune/prune_curve.py`` measures this against the alternatives
  (by total count; by |w| times count) in docs/lifecycle.md.

Everything here reads and writes a :class:`spamnb.SpamFilter` through a few
adapter functions (``state_of``/``build_filter``), the only code that knows where a
filter keeps its counts.
"""

from __future__ import annotations

import datetime
import math
from array import array

from spamnb.bayes import arithmetic
from spamnb.errors import DuplicateToken
from spamnb.estimator.ages import today

__all__ = ["merge", "prune", "prune_mask", "usefulness", "describe", "expire", "today", "day_text",
           "check_max_tokens", "DEFAULT_TARGET_SIZE", "MIN_MAX_TOKENS", "MAX_COUNT", "SETTINGS_THAT_MUST_MATCH"]
EPOCH = datetime.date(1970, 1, 1).toordinal()
SETTINGS_THAT_MUST_MATCH = ("tokenizer", "alpha", "prior", "counts", "feature_weight", "length_norm")
UNKNOWN_DAY = 0               # a last-seen day of 0 means "not known" (a model from before the field)

def day_text(day):
    """``YYYY-MM-DD`` of a day number, ``-`` for an unknown day."""
    if day <= UNKNOWN_DAY:
        return "-"
    return datetime.date.fromordinal(EPOCH + int(day)).isoformat()


def _settings(spam_filter):
    """The settings a dump and a merge compare: the tokenizer's and the hyper-parameters."""
    return {"tokenizer": spam_filter.tokenizer_.settings, **spam_filter.get_params()}


class State:
    """A filter's state as plain arrays: ``counts`` float64 (2, V) [ham, spam],
    ``hashes`` uint64 (V,), ``blob``/``offsets`` the UTF-8 token strings,
    ``days`` int32 (V,) last-seen days (0 unknown)."""

    __slots__ = ("settings", "class_count", "counts", "hashes", "blob", "offsets", "days", "features",
                 "created", "last_learn", "max_tokens")

    def __init__(self, settings, class_count, counts, hashes, blob, offsets, days, features=None,
                 created=UNKNOWN_DAY, last_learn=UNKNOWN_DAY, max_tokens=None):
        self.settings, self.class_count, self.counts = settings, class_count, counts
        self.hashes, self.blob, self.offsets, self.days = hashes, blob, offsets, days
        self.features, self.created, self.last_learn = features, created, last_learn
        self.max_tokens = max_tokens

    def replace(self, **changes):
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return State(**fields)

    @property
    def n_features(self):
        return len(self.hashes)


def state_of(spam_filter):
    import numpy as np

    spam_filter.require_fitted()
    vocab = spam_filter.vocabulary_
    n = vocab.n_features
    hashes = vocab.hashes()
    blob, offsets = vocab.string_table()
    offsets = np.frombuffer(offsets, dtype=np.uint64) if n else np.zeros(1, dtype=np.uint64)
    counts = _feature_counts(spam_filter, n)
    ages = spam_filter.ages_
    days = np.frombuffer(ages.days(n), dtype=np.int32)
    features = spam_filter.features_.to_dict() if spam_filter.features_ is not None else None
    return State(_settings(spam_filter), tuple(float(v) for v in spam_filter.class_count_), counts, hashes,
                  blob, offsets, days, features, ages.created, ages.last_learn, ages.max_tokens)


def _feature_counts(spam_filter, n):
    return spam_filter.sized_counts().matrix()


def build_filter(state):
    """A SpamFilter holding ``state`` (its arrays are copied)."""
    import numpy as np

    from spamnb.estimator.ages import Ages
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.mail.tokenizer import Tokenizer
    from spamnb.bayes.wordcounts import WordCounts

    s = state.settings
    spam_filter = SpamFilter.from_params(s, Tokenizer.from_settings(s["tokenizer"]))
    spam_filter.set_fitted(vocabulary_=_vocabulary(state.hashes, state.blob, state.offsets))
    flat = array("d")
    flat.frombytes(np.ascontiguousarray(state.counts, dtype=np.float64).tobytes())
    spam_filter.set_fitted(word_counts_=WordCounts.from_arrays(float(s["alpha"]), s["prior"], state.class_count, flat))
    if state.features is not None:
        from spamnb.estimator.message_features import FeatureModel

        spam_filter.set_fitted(features_=FeatureModel.from_dict(state.features))
    days = array("i")
    days.frombytes(np.ascontiguousarray(state.days, dtype=np.int32).tobytes())
    spam_filter.set_fitted(ages_=Ages(days, state.created, state.last_learn, state.max_tokens))
    return spam_filter


def _vocabulary(hashes, blob, offsets):
    """A Vocabulary of the tokens with these hashes and strings, in this order.
    Raises DuplicateToken when a hash repeats."""
    from spamnb.bayes import token_kernels
    from spamnb.bayes.vocabulary import Vocabulary

    n = len(hashes)
    capacity = 1024
    while 2 * n > capacity:
        capacity *= 2
    keys = array("Q", bytes(8 * capacity))
    values = array("i", bytes(4 * capacity))
    out = array("i", bytes(4 * n))
    new_positions = array("i", bytes(4 * n))
    if n:
        hash_view = array("Q")
        hash_view.frombytes(memoryview(hashes).cast("B"))
        n_new = token_kernels.insert(keys, values, hash_view, out, 0, new_positions)
        if n_new != n:
            first = next(j for j in range(n) if out[j] != j)
            raise DuplicateToken(first)
    offsets_array = array("Q")
    offsets_array.frombytes(memoryview(offsets).cast("B") if n else array("Q", [0]).tobytes())
    return Vocabulary.from_buffers(keys, values, n, bytes(blob), offsets_array)


# ---------------------------------------------------------------------------- dump


def _check_same_settings(a, b, what="models"):
    """ValueError naming each setting that differs, and only the fields of it
    that differ (``tokenizer word_pairs 0 vs 2``, not both whole settings)."""
    differences = []
    for key in SETTINGS_THAT_MUST_MATCH:
        if a[key] == b[key]:
            continue
        if isinstance(a[key], dict) and isinstance(b[key], dict):
            for field in sorted(set(a[key]) | set(b[key])):
                if a[key].get(field) != b[key].get(field):
                    differences.append(f"{key} {field} {a[key].get(field)!r} vs {b[key].get(field)!r}")
        else:
            differences.append(f"{key} {a[key]!r} vs {b[key]!r}")
    if differences:
        raise ValueError(f"the {what} differ in {', '.join(differences)}: only models with the same "
                         f"settings combine exactly")


def merge(filters):
    """One filter holding the counts of all of ``filters`` (same settings
    required, ValueError otherwise); the cutoffs are the first one's.  The
    inputs are not changed."""
    import numpy as np

    filters = list(filters)
    if not filters:
        raise ValueError("nothing to merge")
    states = [state_of(f) for f in filters]
    result = states[0]
    for other in states[1:]:
        _check_same_settings(result.settings, other.settings)
        if result.features is not None or other.features is not None:
            raise ValueError("models with message features (feature_weight > 0) cannot be merged exactly")
        result = _merge_two(result, other, np)
    merged = build_filter(result)
    merged.set_fitted(ledger_=_merge_ledgers([f.ledger_ for f in filters]))
    return merged


def _merge_ledgers(ledgers):
    """The union of the inputs' ledgers (a message in several keeps the first
    one's label), or None when none has one."""
    from spamnb.estimator.ledger_table import Ledger

    ledgers = [ledger for ledger in ledgers if ledger is not None]
    if not ledgers:
        return None
    out = Ledger()
    for ledger in ledgers:
        digests, labels = ledger.to_arrays()
        size = len(digests) // len(labels) if labels else 0
        for i, label in enumerate(labels):
            digest = digests[i * size:(i + 1) * size]
            if out.label(digest) is None:
                out.record(digest, bool(label))
    return out


def _merge_two(a, b, np):
    # where b's tokens are in a: a hash table of a's tokens, then b's looked up
    vocab = _vocabulary(a.hashes, a.blob, a.offsets)
    where = np.frombuffer(vocab.lookup(array("Q", b.hashes.tobytes())), dtype=np.int32) if b.n_features \
        else np.zeros(0, dtype=np.int32)
    new = np.flatnonzero(where < 0)
    n = a.n_features + len(new)
    counts = np.zeros((2, n), dtype=np.float64)
    counts[:, :a.n_features] = a.counts
    days = np.zeros(n, dtype=np.int32)
    days[:a.n_features] = a.days
    target = where.astype(np.int64)
    target[new] = a.n_features + np.arange(len(new))
    counts[:, target] += b.counts
    days[target] = np.maximum(days[target], b.days)
    hashes = np.concatenate([a.hashes, b.hashes[new]])
    blob, offsets = _gather_strings(b.blob, b.offsets, new)
    blob = bytes(a.blob) + blob
    offsets = np.concatenate([a.offsets, offsets[1:] + np.uint64(len(a.blob))])
    class_count = tuple(x + y for x, y in zip(a.class_count, b.class_count))
    return a.replace(class_count=class_count, counts=counts, hashes=hashes, blob=blob, offsets=offsets, days=days,
                     created=_earliest(a.created, b.created), last_learn=max(a.last_learn, b.last_learn))


def _earliest(x, y):
    known = [d for d in (x, y) if d > UNKNOWN_DAY]
    return min(known) if known else UNKNOWN_DAY


def _gather_strings(blob, offsets, indices):
    """The strings ``indices`` of a string table, as a new ``(blob, offsets)``."""
    import numpy as np

    offsets = np.asarray(offsets, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    starts = offsets[indices]
    lengths = offsets[indices + 1] - starts
    ends = np.cumsum(lengths)
    new_offsets = np.zeros(len(indices) + 1, dtype=np.uint64)
    new_offsets[1:] = ends
    total = int(ends[-1]) if len(indices) else 0
    source = np.frombuffer(bytes(blob), dtype=np.uint8)
    positions = np.repeat(starts - (ends - lengths), lengths) + np.arange(total)
    return source[positions].tobytes(), new_offsets


# ---------------------------------------------------------------------------- prune
def _unit(settings):
    """The count one occurrence in one message adds: transform(1); None when
    the message's length scales it (``length_norm`` > 0): no such unit."""
    if settings.get("length_norm", 0.0) > 0:
        return None
    return math.log(2.0) if settings["counts"] == "log" else 1.0


def usefulness(state, kind="jeffreys"):
    """Each token's usefulness (float64, (V,)); see the module's docstring.

    ``kind``: "jeffreys" (the default), "count" (total count), or
    "weighted" (|w_i| times the total count)."""
    import numpy as np

    counts = state.counts
    total = counts.sum(axis=0)
    if kind == "count":
        return total
    log_theta = arithmetic.log_theta(counts, state.settings["alpha"])
    w = log_theta[1] - log_theta[0]
    if kind == "weighted":
        return np.abs(w) * total
    if kind == "jeffreys":
        theta = np.exp(log_theta)
        return (theta[1] - theta[0]) * w
    raise ValueError(f"unknown usefulness {kind!r}")


def prune_mask(state, min_count=None, max_age=None, target_size=None, now=None, kind="jeffreys"):
    """Boolean (V,): the tokens each given policy keeps (all of them, ANDed)."""
    import numpy as np

    n = state.n_features
    keep = np.ones(n, dtype=bool)
    if min_count is not None:
        if min_count < 0:
            raise ValueError("min_count must be >= 0")
        unit = _unit(state.settings)
        if unit is None:
            raise ValueError(f"a minimum count needs counts of occurrences, and this model scales each message "
                             f"to length {state.settings['length_norm']:g} (length_norm): prune it by "
                             f"target size or age")
        keep &= state.counts.sum(axis=0) >= min_count * unit * (1 - 1e-9)
    if max_age is not None:
        if max_age < 0:
            raise ValueError("max_age must be >= 0 days")
        now = today() if now is None else now
        known = state.days > UNKNOWN_DAY
        keep &= ~known | (state.days >= now - max_age)
    if target_size is not None:
        if target_size < 0:
            raise ValueError("target_size must be >= 0")
        if int(keep.sum()) > target_size:
            candidates = np.flatnonzero(keep)
            useful = usefulness(state, kind)[candidates]
            # most useful first; ties: the most recently seen, then the older feature
            order = np.lexsort((candidates, -state.days[candidates].astype(np.int64), -useful))
            keep = np.zeros(n, dtype=bool)
            keep[candidates[order[:target_size]]] = True
    return keep


def _subset(state, keep):
    import numpy as np

    indices = np.flatnonzero(keep)
    blob, offsets = _gather_strings(state.blob, state.offsets, indices)
    return state.replace(counts=np.ascontiguousarray(state.counts[:, indices]), hashes=state.hashes[indices],
                         blob=blob, offsets=offsets, days=state.days[indices])


def prune(spam_filter, min_count=None, max_age=None, target_size=None, now=None, kind="jeffreys"):
    """A new filter without the tokens the policies drop; returns ``(filter, n_dropped)``."""
    state = state_of(spam_filter)
    keep = prune_mask(state, min_count, max_age, target_size, now, kind)
    dropped = int(state.n_features - keep.sum())
    if not dropped:
        return spam_filter, 0
    pruned = build_filter(_subset(state, keep))
    pruned.set_fitted(ledger_=spam_filter.ledger_)  # the messages were learned: a later forget still needs their labels
    pruned.set_fitted(pair_mixture_=spam_filter.pair_mixture_)   # the pair weight chosen on its mail (variants)
    return pruned, dropped


# ---------------------------------------------------------------------------- automatic expiry
DEFAULT_TARGET_SIZE = 150_000   # tokens; chosen from the measured cost of pruning (docs/lifecycle.md)
EXPIRE_TO = 0.9                 # automatic expiry prunes to this share of max_tokens (not at every learn)
MIN_MAX_TOKENS = 1000           # a smaller limit would prune a model to nothing useful at its next learn
MAX_COUNT = float(2 ** 53)      # message and token counts above this are no counts (floats lose units there)


def check_max_tokens(value):
    """The automatic-expiry limit ``value`` (None: off) or ValueError: an
    integer >= MIN_MAX_TOKENS.  (0 means off where a person gives it:
    ``spamnb prune --expire-at 0``, a dump's ``max-tokens 0``.)"""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_MAX_TOKENS <= value <= 2 ** 31:
        raise ValueError(f"the token limit must be - (off) or an integer from {MIN_MAX_TOKENS} "
                         f"to {2 ** 31}, got {value!r}")
    return value


def expire(spam_filter, now=None):
    """Automatic expiry: when the filter has more tokens than its
    ``ages_.max_tokens``, the least useful go until ``EXPIRE_TO`` of it is
    left (a limit below ``MIN_MAX_TOKENS``, which no command sets, is off).  Returns ``(filter, n_dropped)`` (the same filter when nothing goes)."""
    max_tokens = spam_filter.ages_.max_tokens
    if max_tokens is not None and max_tokens < MIN_MAX_TOKENS:
        max_tokens = None   # a limit no spamnb sets (a crafted model file): never prune a model to nothing
    if max_tokens is None or spam_filter.vocabulary_.n_features <= max_tokens:
        return spam_filter, 0
    return prune(spam_filter, target_size=int(max_tokens * EXPIRE_TO), now=now)


# ---------------------------------------------------------------------------- info
AGE_BINS = (7, 30, 90, 365)


def describe(spam_filter, now=None, min_count=2, max_age=365, target_size=DEFAULT_TARGET_SIZE):
    """Facts for ``spamnb info``: a dict with ``tokens``, ``hapax`` (tokens seen
    once), ``ages`` [(label, n)] of the last-seen days, and ``would_remove``
    {policy: n} for the given prune settings."""
    import numpy as np

    state = state_of(spam_filter)
    now = today() if now is None else now
    total = state.counts.sum(axis=0)
    unit = _unit(state.settings)
    hapax = None if unit is None else int(np.count_nonzero(total <= unit * (1 + 1e-9)))
    known = state.days > UNKNOWN_DAY
    age = now - state.days.astype(np.int64)
    ages = []
    low = 0
    for high in AGE_BINS:
        ages.append((f"{low}-{high} days", int(np.count_nonzero(known & (age >= low) & (age <= high)))))
        low = high + 1
    ages.append((f"over {AGE_BINS[-1]} days", int(np.count_nonzero(known & (age > AGE_BINS[-1])))))
    ages.append(("unknown", int(np.count_nonzero(~known))))
    n = state.n_features
    would = {f"--max-age {max_age}": int(n - prune_mask(state, max_age=max_age, now=now).sum())}
    if unit is not None:
        would = {f"--min-count {min_count}": int(n - prune_mask(state, min_count=min_count).sum()), **would}
    if target_size is not None:
        would[f"--target-size {target_size}"] = int(n - prune_mask(state, target_size=target_size).sum())
    return {"tokens": n, "hapax": hapax, "ages": ages, "would_remove": would,
            "created": day_text(state.created), "last_learn": day_text(state.last_learn)}
