"""The spam filter's model file: what its header and arrays hold, by version.

The container (magic, checksum, alignment, atomic write, lock) is
:mod:`spamnb.persistence.store`'s; this module declares what goes in it and checks it on
the way in, so that nothing read from a file reaches the scorer unchecked.

Versions (the header's ``"version"``; files without it are version 1):

1. spamnb up to 658063e: the fields and arrays below; every logarithm finite.
2. a log P(c) or log-normaliser of minus infinity (a class with no message
   under the "mle" prior; an empty vocabulary) is written as ``null``
   (JSON has no infinities), so a model of one class can be saved.
3. the model's lifecycle (``spamnb.model.lifecycle``): per-token last-seen days
   (``last_seen``), the days the model was created and last learned from,
   and the size past which a learn prunes it (``max_tokens``, or null).  A
   file of version 1 or 2 loads with these unknown (converted in memory).
4. the ledger of learned messages (``spamnb.estimator.ledger``): a 16-byte digest a
   message (``ledger_digests``, oldest first) and its label (``ledger_labels``,
   0 ham, 1 spam).  Older files load with an empty ledger.
5. the held-out scores of learned messages (``held_out``: the histogram of
   ``spamnb.estimator.prequential``, 2 x 512 doubles, or empty) and where the
   cutoffs came from (``cutoff_source``: "defaults", "train", "given" or
   "held-out").  Older files load with neither (the source is then inferred).
6. a note a ledger entry (``ledger_notes``, uint16, empty or one per label:
   bit 15 learned by auto-learn, bits 0-14 the bin of its held-out score + 1,
   0 for none), so a correction relabels it exactly.  Older files load with
   every entry a user's and no bin.
7. the hyper-parameter ``pair_weight`` in ``params`` (what a word pair's value
   is multiplied by when a message is scored: ``spamnb.estimator.defaults``).
   Older files load with it 1, which is how they scored.
8. the pair weight a learned model chooses on its own mail
   (``spamnb.estimator.variants.PairMixture``): the header's
   ``pair_mixture`` (its ``centre``, the ``weight`` and ``scale`` it scores
   with, the ``n`` held-out messages counted; null for a model without
   one) and its state, the array ``pair_mixture`` (18,451 doubles, or
   empty).  Older files load without it (:mod:`spamnb.persistence.codec`
   gives a model that grows by learning the mixture's prior, whose weight
   is its ``pair_weight`` exactly: its scores are unchanged until it learns).

Days are counted from 1970-01-01 (UTC); 0 means "not known".

Adding an array or a header field is one line in ``ARRAYS`` or ``FIELDS``
with the version that brought it (older files lack it: the reader gets None)
and a bump of ``VERSION``; a reader refuses a file newer than itself.
"""

from spamnb import errors   # ModelError: named where raised or caught, made then
from spamnb.bayes import checks
from spamnb.bayes.token_kernels import INF, exp, isfinite, log
from spamnb.persistence.store import map_model, read_model, write_model
from spamnb.estimator.defaults import CLASSES

__all__ = ["FORMAT", "VERSION", "CLASSES", "FIELDS", "ARRAYS", "read", "write", "check_counts", "check_shapes"]

FORMAT = "spamnb-model"
VERSION = 8

# name: (JSON type, first version).  "format", "version" and "classes" are written here.
FIELDS = {
    "spamnb": (str, 1),               # the version of spamnb that wrote the file
    "tokenizer": (dict, 1),           # Tokenizer.settings
    "params": (dict, 1),              # SpamFilter's hyper-parameters
    "features": ((dict, type(None)), 1),  # FeatureModel.to_dict() or null
    "n_features": (int, 1),           # V, the vocabulary's size
    "class_count": (list, 1),         # messages per class, [ham, spam]
    "log_prior": (list, 1),           # log P(c) (derived)
    "log_norm": (list, 1),            # log(N_c + alpha V) (derived)
    "created": (int, 3),              # day the model was first trained
    "last_learn": (int, 3),           # day it last learned a message
    "max_tokens": ((int, type(None)), 3),  # automatic expiry past this many tokens (null: off)
    "cutoff_source": ((str, type(None)), 5),  # where the cutoffs came from (spamnb.estimator.prequential.SOURCES)
    "pair_mixture": ((dict, type(None)), 8),  # PairMixture.header() or null (spamnb.estimator.variants)
}
# name: (typecode of the array module, first version)
ARRAYS = {
    "keys": ("Q", 1),                 # the vocabulary's hash index: token hash per slot (0 = empty)
    "values": ("i", 1),               # ... feature index per slot
    "offsets": ("Q", 1),              # token strings: token i is strings[offsets[i]:offsets[i + 1]]
    "strings": ("B", 1),              # ... UTF-8, back to back
    "feature_count": ("d", 1),        # N_ci, (n_classes, n_features), class-major
    "log_count": ("d", 1),            # log(N_ci + alpha) (derived: saves the logs at load)
    "last_seen": ("i", 3),            # day each token was last seen in a learned message
    "ledger_digests": ("B", 4),       # learned messages: 16-byte digests, oldest first (spamnb.estimator.ledger)
    "ledger_labels": ("B", 4),        # ... and their labels, 0 ham, 1 spam
    "held_out": ("d", 5),             # scores of learned messages before each was learned (spamnb.estimator.prequential)
    "ledger_notes": ("H", 6),         # ledger entries: auto-learned (bit 15), held-out bin + 1 (spamnb.estimator.ledger)
    "pair_mixture": ("d", 8),         # the pair-weight mixture's state (spamnb.estimator.variants.PairMixture), or empty
}

_LOG_MAX = 710.0       # log of the largest double is ~709.8
_LOG_MIN = -746.0      # log of the smallest positive double is ~-744.4


def _encode_logs(values):
    out = []
    for v in values:
        v = float(v)
        if v != v or v == INF:
            raise ValueError(f"cannot save a model with a logarithm of {v}")
        out.append(None if v == -INF else v)
    return out


def write(path, fields, arrays, backup=None, order=None):
    """Write a model: ``fields`` the header fields of ``FIELDS``, ``arrays``
    {name: buffer} of ``ARRAYS`` (typecodes from there; a buffer may be
    ``(count, make)``, made as it is written); ``backup`` and ``order`` as in
    :func:`spamnb.persistence.store.write_model`."""
    missing = (set(FIELDS) - set(fields)) | (set(ARRAYS) - set(arrays))
    if missing:
        raise ValueError(f"a model needs {sorted(missing)}")
    header = dict(fields, format=FORMAT, version=VERSION, classes=list(CLASSES))
    header["log_prior"] = _encode_logs(fields["log_prior"])
    header["log_norm"] = _encode_logs(fields["log_norm"])
    write_model(path, header, {name: (ARRAYS[name][0], *(buffer if type(buffer) is tuple else (buffer,)))
                               for name, buffer in arrays.items()}, backup=backup, order=order)


def read(path, max_size=None, mapped=False):
    """Read and check a model file: ``(header, arrays)`` with every declared
    field and array of its version present and typed, logarithms decoded
    (``null`` is -inf) and in range.  Raises ModelError (``max_size``: as
    :func:`spamnb.persistence.store.read_model`).  ``mapped``: the file mapped,
    not read (:func:`spamnb.persistence.store.map_model`: its checksum not checked)."""
    header, arrays = map_model(path, max_size) if mapped else read_model(path, max_size)
    try:
        _check(header, arrays)
    except errors.ModelError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise errors.ModelError(f"{path}: the model is inconsistent ({exc})") from None
    return header, arrays


def _check(header, arrays):
    if header.get("format") != FORMAT:
        raise ValueError("not a spam filter model")
    version = header.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError("bad schema version")
    if version > VERSION:
        raise errors.ModelError(f"model schema version {version} is newer than this spamnb's ({VERSION}): upgrade spamnb")
    if header.get("classes") != CLASSES:
        raise ValueError("unexpected classes")
    for name, (kind, since) in FIELDS.items():
        if since > version:
            header.setdefault(name, None)
        elif not isinstance(header.get(name), kind) or isinstance(header.get(name), bool):
            raise ValueError(f"header field {name!r} missing or of the wrong type")
    for name, (typecode, since) in ARRAYS.items():
        if since > version:
            arrays.setdefault(name, None)
        elif name not in arrays or arrays[name].format != typecode:
            raise ValueError(f"array {name!r} missing or of the wrong type")
    n_classes = len(CLASSES)
    n_features = header["n_features"]
    if n_features < 0:
        raise ValueError("bad vocabulary size")
    if arrays["last_seen"] is not None and len(arrays["last_seen"]) != n_features:
        raise ValueError("last-seen days do not match the vocabulary")
    if arrays["held_out"] is not None and len(arrays["held_out"]) not in (0, 2 * 512):
        raise ValueError("the held-out scores are not a histogram of 2 x 512 bins")
    _check_mixture(header, arrays)
    if header["cutoff_source"] not in (None, "defaults", "train", "given", "held-out"):
        raise ValueError("unknown cutoff source")
    for name in ("class_count", "log_prior", "log_norm"):
        values = header[name]
        if len(values) != n_classes or not all(
                (isinstance(v, (int, float)) and not isinstance(v, bool)) or (v is None and name != "class_count")
                for v in values):
            raise ValueError("bad class statistics")
        header[name] = [-INF if v is None else float(v) for v in values]
    class_count = header["class_count"]
    if not all(isfinite(v) and 0 <= v <= 2.0 ** 53 for v in class_count):
        raise ValueError("bad class counts")
    log_prior = header["log_prior"]
    for count, v in zip(class_count, log_prior):
        # -inf only for a class without messages (the "mle" prior)
        if not ((_LOG_MIN <= v <= 0.0) or (v == -INF and count == 0)):
            raise ValueError("bad class priors")
    if abs(log(sum(exp(v) for v in log_prior) or 1e-300)) > 1e-6:
        raise ValueError("bad class priors (they do not sum to 1)")
    for v in header["log_norm"]:
        if not (_LOG_MIN <= v <= _LOG_MAX or (v == -INF and n_features == 0)):
            raise ValueError("bad normalisers")


def _check_mixture(header, arrays):
    mixture, state = header["pair_mixture"], arrays["pair_mixture"]
    if mixture is None and not state:   # a model without one (no import: the cold classify's path)
        return
    from spamnb.estimator.variants import PAIR_MIXTURE_SIZE

    if state is not None and len(state) not in (0, PAIR_MIXTURE_SIZE):
        raise ValueError(f"the pair-weight mixture is not {PAIR_MIXTURE_SIZE} numbers")
    if mixture is None:
        if state:
            raise ValueError("a pair-weight mixture's state without its header")
        return
    if not state:
        raise ValueError("a pair-weight mixture without its state")
    for name in ("centre", "weight", "scale", "n"):
        value = mixture.get(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not isfinite(value):
            raise ValueError(f"the pair-weight mixture's {name!r} is missing or not a number")
    if not (0 <= mixture["centre"] <= 1 and 0 <= mixture["weight"] <= 1 and 0 < mixture["scale"] < 1e6
            and mixture["n"] >= 0):
        raise ValueError("the pair-weight mixture's weight, scale or count is out of range")


def check_shapes(header, arrays):
    """What :func:`check_counts` checks without reading the arrays: their
    lengths against the vocabulary size (a mapped model, whose values the
    scorer checks as it reads them).  Raises ValueError."""
    n = len(CLASSES) * header["n_features"]
    if len(arrays["feature_count"]) != n or len(arrays["log_count"]) != n:
        raise ValueError("count matrix does not match the vocabulary")


def check_counts(header, arrays, alpha):
    """Check the counts against the vocabulary size and the derived logs
    against the counts (out-of-range logs would make every score infinite
    or NaN).  ``alpha``: the model's soft count.  Raises ValueError."""
    n_classes = len(CLASSES)
    n_features = header["n_features"]
    feature_count = arrays["feature_count"]
    if len(feature_count) != n_classes * n_features:
        raise ValueError("count matrix does not match the vocabulary")
    sums = checks.class_sums(feature_count, n_classes)
    if sums is None:
        raise ValueError("negative or non-finite counts")
    from spamnb.bayes.arithmetic import log_norms   # a whole read's check: a mapped load (a classify's) loads no arithmetic

    for expected, log_norm in zip(log_norms(sums, alpha, n_features), header["log_norm"]):
        if isfinite(expected) and not abs(log_norm - expected) <= 1e-9 * max(1.0, abs(log_norm)):
            raise ValueError("the normalisers do not match the counts")
    log_count = arrays["log_count"]
    if len(log_count) != len(feature_count) or not checks.check_range(log_count, log(alpha) - 1e-9, _LOG_MAX):
        raise ValueError("derived log-counts do not match the counts")
