"""Cutoffs that fit the user's own mail: chosen by cross-validation inside the training data.

After ``SpamFilter.fit(messages, labels)``, :func:`calibrate` estimates the
log-odds the filter would give mail it has not seen: the training messages
are dealt into ``n_folds`` stratified folds, and each fold is scored by the
model of the other folds.  Counts are additive, so no fold model is trained:
its counts are the whole model's minus the fold's own rows (its vocabulary
the tokens with a count left), and its log-odds are exactly those of a
``SpamFilter`` fitted on the other folds (same alpha, counts transform and
class prior; ``tests/test_calibrate.py`` checks this).  Cost: one more
tokenizing pass over the training messages and a few sparse products.

The rule (:func:`choose_cutoffs`), on the held-out log-odds:

- spam cutoff: the lowest log-odds that at most ``target_fpr`` of the
  held-out ham reach (floor(target_fpr x n_ham) ham may reach it), plus
  ``margin`` (default 1) log-odds of safety, since the tail of ham scores
  is estimated from a handful of messages;
- ham cutoff: log-odds -4 (``spamnb.model.spam_filter.DEFAULT_HAM_LOG_ODDS``, P = 0.018),
  lowered to the spam cutoff when that is below it; raised when the unsure
  band between the two would hold more than ``max_unsure`` (default 5 %) of
  the held-out messages (the band holds exactly that share then);
- expected figures (held-out): false-positive rate, spam missed (spam below
  the spam cutoff: unsure counts as missed), unsure share.

Too little data: with fewer than ``min_ham`` (default 200) ham, or fewer
than 1 / ``target_fpr`` ham (1,000 for the default 0.1 %: a target that
allows no held-out ham over the cutoff puts it above the one highest ham
score, so a single message would decide it), or fewer than ``min_spam``
(default 50) spam, the tail cannot be estimated; the cutoffs
are then the documented defaults (``spamnb.model.spam_filter.DEFAULT_SPAM_CUTOFF``,
``DEFAULT_HAM_CUTOFF``), and ``Calibration.rule`` says so; the same with the
message features on (``feature_weight`` > 0), which the fold scores leave out.

Cutoffs are stored as probabilities; P(spam) rounds to 1.0 above log-odds
~36.7, so a spam cutoff is capped at log-odds 36 (``MAX_LOG_ODDS``).

Ten folds (``DEFAULT_FOLDS``; five before commit e553d40).  A fold model
holds (K - 1) / K of the training mail, and the held-out ham it scores
highest set the spam cutoff.  With fold models of 90 % instead of 80 %,
over 8 fold assignments of each train part of the fixed split
(``scripts/tune/cutoff_variance.py --salts 8 --folds 5 | 10 | 20``): SpamAssassin's
mean spam cutoff 11.80 / 9.34 / 9.08, test spam missed 4.92 ± 1.43 / 3.77
± 1.51 / 3.71 ± 1.92 %; Enron-Spam's 22.06 / 22.52 / 22.60, 7.84 ± 0.48 /
7.93 ± 0.36 / 8.00 ± 0.48 %; test ham called spam 0 of 841 and 1 of 2,383
under every assignment.  Cost: 2 x K count rows and K fold models per
vocabulary token (docs/scale.md); ``spamnb train`` took 1.30x (SpamAssassin)
and 1.43x (Enron-Spam) the time of five folds, its largest process 1.4x
and 1.3x the memory.
"""

from __future__ import annotations

import math
from array import array
from collections import namedtuple

from spamnb.bayes import arithmetic
from spamnb.estimator.defaults import AUTO_PAIRS, DEFAULT_TARGET_FPR   # the window auto tries, the FPR aimed at
from spamnb.estimator.verdict import logit as _logit
from spamnb.estimator.verdict import probability as _probability

__all__ = ["Calibration", "cross_val_log_odds", "fold_log_odds", "choose_cutoffs", "calibrate", "apply",
           "min_ham_for", "fold_of", "FoldModels", "held_out_log_odds", "spill", "held_out_spilled",
           "calibration_check", "from_scores", "DEFAULT_TARGET_FPR", "DEFAULT_MAX_UNSURE", "DEFAULT_MARGIN",
           "MIN_HAM", "MIN_SPAM", "MAX_LOG_ODDS", "near_duplicate_key", "SPAM_CUTOFF_FLOOR"]

DEFAULT_MAX_UNSURE = 0.05
DEFAULT_MARGIN = 1.0
DEFAULT_FOLDS = 10
MIN_HAM = 200
MIN_SPAM = 50
MAX_LOG_ODDS = 36.0
# The lowest spam cutoff train chooses: below log-odds 0 the model's own evidence says ham is the likelier
# class, so no held-out figure can make such a message spam.  Held-out ham scores that low tell of copies
# of a message in other folds than their first copy's (issue 46), which the folds group: the floor is the
# backstop, and info says so when the cutoff is at it.
SPAM_CUTOFF_FLOOR = 0.0

Calibration = namedtuple("Calibration", "spam_cutoff ham_cutoff spam_log_odds ham_log_odds expected_fpr "
                                        "expected_spam_missed expected_unsure n_ham n_spam n_folds rule word_pairs",
                         defaults=(None,))
Calibration.__doc__ = """Cutoffs chosen for a filter (probabilities and log-odds), the
held-out figures expected at them (fractions; None when the defaults were
used), the data they rest on and the rule that chose them (one line); and
``word_pairs``: None, or when ``spamnb.training.pipeline.train`` chose between word
pairs and none, ``(window kept (0: none), held-out spam missed without,
with, 1-AUC % without, with)`` (the four None: the corpus was too large to
try them)."""



def cross_val_log_odds(spam_filter, messages, labels, n_folds=DEFAULT_FOLDS, seed=0):
    """Held-out log-odds of each training message: float64 array (n_messages,).

    ``spam_filter`` must have been fitted on exactly ``messages``/``labels``.
    Message ``i`` is scored by the counts of the other folds (see the module doc).
    """
    import numpy as np

    from spamnb.estimator.labels import is_spam_label

    y = np.array([is_spam_label(v) for v in labels], dtype=bool)
    X = spam_filter.transform(messages)      # transformed counts; every token is known
    if X.shape[0] != y.size:
        raise ValueError(f"{X.shape[0]} messages but {y.size} labels")
    length = float(getattr(spam_filter, "length_norm", 0.0)) or None   # scoring normalises over known tokens
    return fold_log_odds(X, y, stratified_folds(y, n_folds, seed), float(spam_filter.alpha), spam_filter.prior,
                         renormalise=length)


def fold_log_odds(X, y, folds, alpha, prior="mle", min_df=1, renormalise=None):
    """Held-out log-odds of the rows of ``X`` (CSR of per-message token weights,
    ``y`` True for spam): the rows of each fold in ``folds`` (index arrays)
    scored by the naive Bayes of all the other rows, over the tokens those rows
    hold (in at least ``min_df`` of them: 2 drops the hapaxes).  With
    ``renormalise=S`` a held-out row is scaled to Euclidean length S over the
    tokens the fold model knows (an experiment: length normalisation)."""
    import numpy as np

    X = X.tocsr()
    y = np.asarray(y, dtype=bool)
    total = np.vstack([np.asarray(X[~y].sum(axis=0)).ravel(), np.asarray(X[y].sum(axis=0)).ravel()])
    present = X.copy()
    present.data = (present.data != 0).astype(np.float64)
    doc_freq = np.asarray(present.sum(axis=0)).ravel()
    class_count = np.array([(~y).sum(), y.sum()], dtype=np.float64)
    out = np.empty(y.size, dtype=np.float64)
    for test in folds:
        Xk, yk = X[test], y[test]
        fc = total - np.vstack([np.asarray(Xk[~yk].sum(axis=0)).ravel(), np.asarray(Xk[yk].sum(axis=0)).ravel()])
        np.maximum(fc, 0.0, out=fc)          # rounding of total - part
        seen = doc_freq - np.asarray(present[test].sum(axis=0)).ravel() >= max(1, min_df)
        n_features = int(seen.sum())
        norm = arithmetic.log_norm(fc.sum(axis=1), alpha, n_features)
        weight = arithmetic.log_odds_weights(arithmetic.log_counts(fc[0], alpha), arithmetic.log_counts(fc[1], alpha),
                                             norm)
        weight[~seen] = 0.0                    # tokens the fold model never saw are unknown to it
        n_ham, n_spam = class_count - np.array([(~yk).sum(), yk.sum()], dtype=np.float64)
        words = Xk @ weight
        if renormalise is not None:
            known = Xk.multiply(seen[None, :].astype(np.float64)).tocsr()
            norms = np.sqrt(np.asarray(known.multiply(known).sum(axis=1)).ravel())
            words = np.divide(renormalise * (known @ weight), norms, out=np.zeros_like(norms), where=norms > 0)
        out[test] = arithmetic.prior_log_odds(prior, n_ham, n_spam) + words
    return out


# ---------------------------------------------------------------------------- streaming
# What `spamnb train` runs (one process or -j N): no matrix of the corpus.  The
# counting pass adds each message to its class's counts and to its fold's
# (spamnb.training.pipeline.count_messages with n_folds); the fold models are then the
# whole counts minus each fold's (FoldModels), and a second pass scores each
# message with its fold's model through the filter's compiled scorer
# (held_out_log_odds), keeping one float per message.


def fold_of(data, n_folds=DEFAULT_FOLDS):
    """The cross-validation fold of a message (its bytes): the first 8 bytes
    of its BLAKE2b digest modulo ``n_folds``.

    It depends on the message alone, never on the order of reading or the
    number of workers, and copies of a message share a fold (so a copy never
    helps score its twin).  Each class spreads over the folds at random
    (stratified in expectation, not dealt exactly as
    :func:`spamnb.evaluation.crossval.stratified_folds` deals them)."""
    global _BLAKE2B
    if _BLAKE2B is None:
        from hashlib import blake2b as _BLAKE2B
    return int.from_bytes(_BLAKE2B(data, digest_size=8).digest(), "little") % n_folds


_BLAKE2B = None   # hashlib's, imported at fold_of's first call


# Near-duplicates (issue 46).  The same message in two folders differs by a
# header line or two (a copy's X-Copy, a forward's Received): fold_of gives
# each copy its own fold, and a copy then helps score its twin, so held-out
# ham scores look surer than unseen ham's and the spam cutoff falls.  A
# message's near-duplicate key is a digest of what such copies keep: its body
# (line ends and trailing blank lines aside) and the header fields below;
# every copy goes to the fold of the first one counted (fold_map).
_HEADER_BLOCK = None
_KEPT = None
_CRC32 = None


def near_duplicate_key(data):
    """The near-duplicate key of a message (its bytes): a non-zero int of 64
    bits, the CRC-32 of its body and the CRC-32 of its body's length and of
    its Subject, From, To, Cc, Date and Message-ID fields (lower-cased, white
    space collapsed, in the order given); None for a message with neither a
    body nor one of those fields.  Two copies of a message that differ only
    in other header fields, an mbox envelope line, CRLF or LF line ends, or
    blank lines at the end have the same key.  Not a cryptographic digest: a
    sender who makes two messages share a key puts them in one fold, no more.
    One regular-expression match for the header's end, one search over the
    header, one checksum of the body: linear in the message's size."""
    global _HEADER_BLOCK, _KEPT, _CRC32
    if _HEADER_BLOCK is None:   # once: not a from-import a message
        import re
        from zlib import crc32 as _CRC32

        _HEADER_BLOCK = re.compile(rb"(?:(?:[!-9;-~]+[ \t]*:|[ \t])[^\n]*(?:\n|\Z))*")
        _KEPT = re.compile(rb"\n(subject|from|to|cc|date|message-id)[ \t]*:([^\n]*(?:\n[ \t][^\n]*)*)")
    crc32 = _CRC32
    start = 0
    if data[:5] == b"From ":
        newline = data.find(b"\n")
        start = len(data) if newline < 0 else newline + 1
    end = _HEADER_BLOCK.match(data, start).end()
    fields = b"\0".join(name + b":" + b" ".join(value.split())
                        for name, value in _KEPT.findall(b"\n" + data[start:end].lower()))
    stop = len(data)
    while stop > end and data[stop - 1] in b"\r\n":   # blank lines at the end (a few: else rstrip's one pass)
        stop -= 1
        if len(data) - stop > 64:
            stop = end + len(data[end:].rstrip(b"\r\n"))
            break
    if stop <= end and not fields:
        return None
    body = memoryview(data)[end:stop]
    newline = data.find(b"\n", start)
    if newline > 0 and data[newline - 1] == 13:   # CRLF line ends (by the first line's): read as LF
        body = bytes(body).replace(b"\r\n", b"\n")
    return crc32(body) << 32 | crc32(fields, crc32(b"%d\0" % len(body))) | (1 << 63)


class FoldModels:
    """The ``n_folds`` held-out models of a filter's counts, as compiled scorers.

    Fold ``k``'s model is the filter's counts minus fold ``k``'s (clipped at
    0 against rounding), over the tokens some other fold holds (the others
    are unknown to it: their slots in its hash index say -1), with the
    filter's alpha, class prior estimator, counts transform and
    ``length_norm``: the model :func:`fold_log_odds` scores with.

    Fold ``k``'s model only ever scores fold ``k``'s messages, and each of
    their tokens is in fold ``k``: so its hash index and log-counts hold
    fold ``k``'s tokens only (numbered in vocabulary order; a message's
    tokens are counted in order of first occurrence, so the sums are the
    same, bit for bit, as over the whole vocabulary), while its ``log_norm``
    is summed over the whole vocabulary as before.  Memory: about 30 bytes
    per (token, fold) the token occurs in (most tokens are in one fold),
    instead of ``n_folds`` x (16 B per token + 4 B per hash slot).

    Parameters
    ----------
    arrays : dict
        ``keys`` (uint64) and ``values`` (int32): the folds' hash indexes back
        to back, fold ``k``'s at ``key_offsets[k]:key_offsets[k + 1]`` (a power
        of two each); ``log_count`` (float64): the folds' ``(2, m_k)``
        log-counts back to back, at ``count_offsets[k]:count_offsets[k + 1]``;
        ``log_norm`` and ``log_prior`` (float64, ``(n_folds, 2)``).
    transform : int
        The ``token_kernels.COUNTS_*`` code of the filter's ``counts``.
    length : float
        The filter's ``length_norm``.
    """

    _NAMES = ("keys", "values", "key_offsets", "log_count", "count_offsets", "log_norm", "log_prior")

    def __init__(self, arrays, transform, length):
        from spamnb.bayes import token_kernels

        self.arrays, self.transform, self.length = arrays, int(transform), float(length)
        self.n_folds = int(arrays["log_norm"].shape[0])
        keys_at, counts_at = arrays["key_offsets"].tolist(), arrays["count_offsets"].tolist()
        self.scorers_ = [token_kernels.Scorer(arrays["keys"][keys_at[k]:keys_at[k + 1]],
                                              arrays["values"][keys_at[k]:keys_at[k + 1]],
                                              arrays["log_count"][counts_at[k]:counts_at[k + 1]],
                                              (counts_at[k + 1] - counts_at[k]) // 2,
                                              arrays["log_norm"][k].tolist(), arrays["log_prior"][k].tolist(),
                                              self.transform, self.length)
                                for k in range(self.n_folds)]

    def __reduce__(self):   # the arrays, not the compiled scorers (rebuilt on arrival: Dask ships it once a worker)
        return type(self), ({name: self.arrays[name] for name in self._NAMES}, self.transform, self.length)

    @classmethod
    def from_counts(cls, spam_filter, fold_class_count, fold_feature_count, folder=None, counts=None, between=None):
        """The fold models of a fitted ``spam_filter`` (the whole counts) and
        its folds' counts: ``fold_class_count`` ``(n_folds, 2)`` messages per
        fold and class, ``fold_feature_count`` ``(n_folds, 2, n_features)``,
        or its non-zero entries ``(keys, values)`` (keys ``token * 2 *
        n_folds + 2 * fold + class``, ascending: :meth:`spamnb.estimator.counting.Counts.sparse_folds`).

        ``folder``: the models are not held but written there, one fold at a
        time as it is built (what :meth:`save` writes, for :meth:`load`), so
        that at most one fold's model is in memory; returns ``folder``.
        ``counts``: the merged :class:`~spamnb.estimator.counting.Counts` the
        filter is (or will be: ``spam_filter`` may be unfitted) made of, whose
        model rows, hashes and class counts are used instead of the filter's:
        the same models, built before the filter (not beside it).
        ``between`` (with ``folder``): a function called after each fold is
        written (``spamnb train -j N``: the workers' results read and more
        jobs given to them while this process builds the models)."""
        from spamnb.estimator.defaults import COUNT_TRANSFORMS

        if float(spam_filter.pair_weight) != 1.0:   # the spilled records hold no pair starts: held_out_by_fold does
            raise ValueError("fold models of a filter whose pair_weight is not 1 are not built: "
                             "its held-out scores are counted in one process (calibrate.FoldSpill)")
        folds = _fold_arrays(spam_filter, fold_class_count, fold_feature_count, counts)
        layout = next(folds)
        transform, length = COUNT_TRANSFORMS[spam_filter.counts], float(spam_filter.length_norm)
        if folder is not None:
            _write_folds(folder, layout, folds, transform, length, between)
            return folder
        import numpy as np

        key_offsets, count_offsets = layout["key_offsets"], layout["count_offsets"]
        out = {"keys": np.empty(int(key_offsets[-1]), dtype=np.uint64),
               "values": np.empty(int(key_offsets[-1]), dtype=np.int32),
               "log_count": np.empty(int(count_offsets[-1])), **layout}
        for k, table, index, log_count in folds:
            out["keys"][key_offsets[k]:key_offsets[k + 1]] = table
            out["values"][key_offsets[k]:key_offsets[k + 1]] = index
            out["log_count"][count_offsets[k]:count_offsets[k + 1]] = log_count.ravel()
        return cls(out, transform, length)

    def save(self, folder):
        """Write the arrays to ``folder`` (one ``.npy`` each, for :meth:`load`); returns ``folder``."""
        import json
        import os   # not at the top: a learn that refits the cutoffs loads no os.py

        import numpy as np

        for name in self._NAMES:
            np.save(os.path.join(folder, name + ".npy"), self.arrays[name])
        with open(os.path.join(folder, "settings.json"), "w") as f:
            json.dump({"transform": self.transform, "length": self.length}, f)
        return folder

    @classmethod
    def load(cls, folder):
        """The models :meth:`save` wrote, memory-mapped (the processes that load
        them share the pages)."""
        import json
        import os   # not at the top: a learn that refits the cutoffs loads no os.py

        import numpy as np

        with open(os.path.join(folder, "settings.json")) as f:
            settings = json.load(f)
        arrays = {name: np.load(os.path.join(folder, name + ".npy"), mmap_mode="r") for name in cls._NAMES}
        return cls(arrays, settings["transform"], settings["length"])

    def log_odds(self, fold, hashes):
        """The log-odds of a message (its token ``hashes``) under fold ``fold``'s model."""
        jll = self.scorers_[fold].score(hashes)[0]
        return jll[1] - jll[0]


def _fold_arrays(spam_filter, fold_class_count, fold_feature_count, counts=None):
    """:meth:`FoldModels.from_counts`'s work, one fold at a time: a generator
    of the layout first (``key_offsets``, ``count_offsets``, and the filled
    ``log_norm``, ``log_prior``: their values are ready once every fold is
    given), then of each fold's ``(k, hash table, index, (2, m_k)
    log-counts)``, which the caller copies or writes before asking for the
    next (its temporaries are gone by then)."""
    import numpy as np

    alpha = float(spam_filter.alpha)
    if counts is None:
        total = np.asarray(spam_filter.word_counts_.matrix(), dtype=np.float64)
        class_count = np.asarray(spam_filter.class_count_, dtype=np.float64)
    else:   # what Counts.to_filter gives the filter: the same numbers
        total = np.asarray(counts.dense[:2], dtype=np.float64)
        class_count = np.asarray(counts.class_count[:2], dtype=np.float64)
    n_features = total.shape[1]
    fold_class_count = np.asarray(fold_class_count, dtype=np.float64).reshape(-1, 2)
    n_folds = fold_class_count.shape[0]
    cells = 2 * n_folds
    if isinstance(fold_feature_count, tuple):
        keys, values = fold_feature_count
    else:   # dense: its non-zero entries, in key order
        rows = np.asarray(fold_feature_count, dtype=np.float64).reshape(n_folds * 2, n_features).T
        token, row = np.nonzero(rows)
        keys, values = token.astype(np.int64) * cells + row, rows[token, row]
        del rows, row
    keep = values > 0                                # what the fold holds (counts are >= 0)
    if not keep.all():
        keys, values = keys[keep], values[keep]
    del keep
    token = np.empty(keys.size, dtype=np.int32)     # ascending (keys are)
    cell = np.empty(keys.size, dtype=np.int8)
    for at in range(0, keys.size, 1 << 20):         # bounded int64 temporaries
        token[at:at + (1 << 20)], cell[at:at + (1 << 20)] = np.divmod(keys[at:at + (1 << 20)], cells)
    del keys
    fold, klass = cell // 2, cell % 2
    del cell
    first = np.ones(token.size, dtype=bool)           # first entry of each (token, fold)
    first[1:] = (token[1:] != token[:-1]) | (fold[1:] != fold[:-1])
    in_folds = np.bincount(token[first], minlength=n_features).astype(np.int32)   # folds holding each token
    n_tokens = np.bincount(fold[first], minlength=n_folds)                         # tokens each fold holds
    del first
    n_held = int(np.count_nonzero(in_folds))
    capacity = [16] * n_folds                         # each fold's hash index: a power of two, at most half full
    for k in range(n_folds):
        while capacity[k] < 2 * n_tokens[k]:
            capacity[k] <<= 1
    layout = {"key_offsets": np.cumsum([0] + capacity).astype(np.int64),
              "count_offsets": np.cumsum([0] + [2 * int(m) for m in n_tokens]).astype(np.int64),
              "log_norm": np.empty((n_folds, 2)), "log_prior": np.zeros((n_folds, 2))}
    yield layout
    hashes = np.frombuffer(spam_filter.vocabulary_.hashes() if counts is None else counts.hashes, dtype=np.uint64)
    for k in range(n_folds):
        mine = np.flatnonzero(fold == k)             # fold k's entries, in key order
        mine_token = token[mine]
        new = np.ones(mine.size, dtype=bool)
        new[1:] = mine_token[1:] != mine_token[:-1]
        tokens = mine_token[new]                      # fold k's tokens, in vocabulary order
        local = np.cumsum(new) - 1
        mine_class = klass[mine]
        fc = np.ascontiguousarray(total[:, tokens])   # total - fold k's counts (0 where it has none)
        fc[mine_class, local] = total[mine_class, mine_token] - values[mine]
        np.maximum(fc, 0.0, out=fc)                   # rounding of total - part
        del mine, mine_token, new, local, mine_class
        n_ham, n_spam = class_count - fold_class_count[k]
        layout["log_norm"][k], layout["log_prior"][k, 1], table, index = _fold_model(
            total, tokens, fc, in_folds, hashes, alpha, spam_filter.prior, n_ham, n_spam, n_held)
        del tokens
        yield k, table, index, fc
        del table, index, fc


def _less_fold(kept, part):
    """``part`` (a fold's own counts of a class at some tokens) made ``kept``
    (the training's counts at them) less it, clipped at 0 (the rounding of
    total - part), in place: a fold model's counts, however they are read."""
    import numpy as np

    np.subtract(kept, part, out=part)
    np.maximum(part, 0.0, out=part)


def _fold_counts_in_place(total, tokens, part):
    """A fold model's counts and its dense rows' sums, a class at a time:
    ``part`` (``(2, m)``, the fold's own sums at ``tokens``) made ``total``'s
    counts at ``tokens`` less them, clipped at 0 (rounding), in place; and
    each row of ``total`` with those counts put at ``tokens`` summed (numpy's
    pairwise sum of the whole row, as :func:`_fold_model` sums a copy of it),
    then its own put back: no copy of a row as long as the vocabulary (``total``
    is a training's own counts, no other thread reading them).  One gather of
    a row's counts at ``tokens`` serves both.  Returns the ``(2,)`` sums."""
    import numpy as np

    sums = np.empty(2)
    for c in range(2):
        row = total[c]
        kept = row[tokens]
        _less_fold(kept, part[c])
        row[tokens] = part[c]
        sums[c] = row.sum()
        row[tokens] = kept
        del row, kept
    return sums


def _fold_model(total, tokens, fc, in_folds, hashes, alpha, prior, n_ham, n_spam, n_held, index=True,
                sums=None, held_by=None):
    """One fold's model from its counts: ``total`` the ``(2, n_features)``
    counts, ``tokens`` the fold's tokens (ascending), ``fc`` ``(2, m)`` the
    counts without the fold's at them (made their logs here, alpha added),
    ``in_folds`` the number of folds holding each token, ``hashes`` the
    tokens' hashes; ``n_ham``, ``n_spam`` the messages of the other folds.
    Returns ``(log_norm (2,), log prior ratio, hash table, index)``, the
    index -1 for a token no other fold holds (unknown to the model).
    ``n_held``: the number of tokens some fold holds (``in_folds >= 1``):
    the model knows those less the ones only this fold holds (its norm's
    count of tokens, from the fold's own tokens).  ``index`` False: no hash
    table is made (``table`` and ``index`` None: the caller scores by
    vocabulary index, :func:`held_out_by_fold`).  ``sums``: the sums of the
    dense model's rows, made already (:func:`_fold_counts_in_place`, in a
    training's own counts), else made here from a copy of each row;
    ``held_by``: ``in_folds[tokens]``, gathered already."""
    import numpy as np

    from spamnb.bayes import token_kernels

    if sums is None:
        sums = np.empty(2)
        for c in range(2):   # the dense model's counts, a row at a time, for its norm (the sums of its rows)
            whole = total[c].copy()
            whole[tokens] = fc[c]
            sums[c] = whole.sum()
            del whole
    log_norm = np.array(sums, dtype=np.float64)
    held_by = in_folds[tokens] if held_by is None else held_by
    n_seen = int(n_held) - int((held_by == 1).sum())   # the tokens another fold holds
    log_norm = arithmetic.log_norm(log_norm, alpha, n_seen)
    if not index:
        arithmetic.log_counts(fc, alpha, out=fc)
        return log_norm, arithmetic.prior_log_odds(prior, n_ham, n_spam), None, None
    capacity = 16                                 # a power of two, at most half full
    while capacity < 2 * tokens.size:
        capacity <<= 1
    table = np.zeros(capacity, dtype=np.uint64)
    index = np.full(capacity, -1, dtype=np.int32)
    token_kernels.insert(table, index, np.ascontiguousarray(hashes[tokens]), np.empty(tokens.size, dtype=np.int32),
                         0, np.empty(tokens.size, dtype=np.int32))   # token j of the fold at index j
    occupied = np.flatnonzero(table != 0)
    mine = index[occupied]
    index[occupied] = np.where((in_folds[tokens] >= 2)[mine], mine, -1)   # -1: a token no other fold holds
    del occupied, mine
    arithmetic.log_counts(fc, alpha, out=fc)
    return log_norm, arithmetic.prior_log_odds(prior, n_ham, n_spam), table, index


def _write_folds(folder, layout, folds, transform, length, between=None):
    """Write the folds :func:`_fold_arrays` gives to ``folder`` as
    :meth:`FoldModels.save` writes them (``.npy`` files of the arrays back
    to back), appending each fold's arrays as it comes."""
    import json
    import os   # not at the top: a learn that refits the cutoffs loads no os.py

    import numpy as np

    from spamnb.estimator.heap import release_free_memory

    fmt = np.lib.format
    sizes = {"keys": (np.uint64, int(layout["key_offsets"][-1])),
             "values": (np.int32, int(layout["key_offsets"][-1])),
             "log_count": (np.float64, int(layout["count_offsets"][-1]))}
    files = {}
    try:
        for name, (dtype, size) in sizes.items():
            files[name] = f = open(os.path.join(folder, name + ".npy"), "wb")
            fmt.write_array_header_1_0(f, {"descr": fmt.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
                                           "shape": (size,)})
        for _k, table, index, log_count in folds:
            files["keys"].write(memoryview(table).cast("B"))
            files["values"].write(memoryview(index).cast("B"))
            files["log_count"].write(memoryview(log_count).cast("B"))
            del table, index, log_count
            release_free_memory()   # the fold's arrays and temporaries: not kept by the C heap for the next
            if between is not None:
                between()
    finally:
        for f in files.values():
            f.close()
    for name in ("key_offsets", "count_offsets", "log_norm", "log_prior"):
        np.save(os.path.join(folder, name + ".npy"), layout[name])
    with open(os.path.join(folder, "settings.json"), "w") as f:
        json.dump({"transform": int(transform), "length": float(length)}, f)


def held_out_log_odds(models, tokenizer, messages):
    """Score ``(bytes, is_spam)`` pairs, each with its fold's model:
    ``(ham_log_odds, spam_log_odds, per_fold)``, two float64 arrays in the
    order of the messages and the ``(n_folds, 2)`` numbers of ham and spam
    per fold (int64; what the counting pass counted, if the corpus did not
    change)."""
    stream = tokenizer.stream
    n_folds = models.n_folds
    return _held_out(models, ((fold_of(data, n_folds), is_spam, stream(data).hashes) for data, is_spam in messages))


def spill(out, hashes, is_spam, fold):
    """Write one message's record for :func:`held_out_spilled` to the binary
    file ``out``: its token ``hashes`` (``array('Q')``), class and fold."""
    out.write((len(hashes) | int(bool(is_spam)) << 32 | fold << 40).to_bytes(8, "little"))
    out.write(hashes)


def held_out_spilled(models, path):
    """:func:`held_out_log_odds` of the messages :func:`spill` wrote to the
    file at ``path`` (or to the open binary file ``path``): the counting
    pass's token hashes, so the corpus is not read or tokenized again."""
    def records(f):
        read = f.read
        while True:
            head = read(8)
            if not head:
                return
            word = int.from_bytes(head, "little")
            n = word & 0xFFFFFFFF
            hashes = read(8 * n)
            if len(head) != 8 or len(hashes) != 8 * n or (word >> 40) >= models.n_folds:
                raise ValueError(f"{path}: a damaged record")
            yield word >> 40, (word >> 32) & 0xFF, memoryview(hashes).cast("Q")

    if hasattr(path, "read"):   # an open file, read from its start
        path.seek(0)
        return _held_out(models, records(path))
    with open(path, "rb", buffering=1 << 20) as f:
        return _held_out(models, records(f))


_SPILL_BUFFER = 1 << 15   # bytes of buffer a FoldSpill file


def _read_whole(f):
    """The bytes of the open file ``f`` (flushed), read from its start by
    ``pread``: its offset, shared with a process forked from this one that
    reads it too, is neither used nor moved (a seek and read elsewhere)."""
    import os   # not at the top: a learn that refits the cutoffs loads no os.py
    fd = f.fileno()
    if not hasattr(os, "pread"):
        f.seek(0)
        return f.read()
    from spamnb.bayes.checks import read_range

    return read_range(fd, 0, os.fstat(fd).st_size)


class FoldSpill:
    """The held-out pass of one process without fold rows (``spamnb train -j 1``,
    ``SpamFilter.fit``): the counting pass writes each message's token indices
    (int32, as :meth:`~spamnb.bayes.vocabulary.Vocabulary.add` gave them: its
    stream in order) to its fold's temporary file, and a word (its number of
    tokens, its class, its place among the messages of its class) to the
    fold's file of heads (:meth:`write`); :func:`held_out_by_fold` then counts
    one fold at a time from its files (the sums the dense fold rows held, in
    the same order), builds that fold's model and scores its messages.
    Memory: one fold's two count rows at a time, instead of ``2 * n_folds``
    rows as long as the vocabulary.  ``class_count``: the ``(n_folds, 2)``
    messages per fold and class.  A context manager (the files closed, and so
    removed, at its end)."""

    def __init__(self, n_folds):
        import tempfile

        self.n_folds = int(n_folds)
        # written a message at a time, a few KiB each: buffered by 32 KiB (the default 8 KiB made a system
        # call of nearly every write), 2 * n_folds buffers
        self.files = [(tempfile.TemporaryFile(prefix="spamnb-train-", buffering=_SPILL_BUFFER),
                       tempfile.TemporaryFile(prefix="spamnb-train-", buffering=_SPILL_BUFFER))
                      for _ in range(self.n_folds)]
        self.counts = [0] * (2 * self.n_folds)    # messages per fold and class
        self.seen = [0, 0]                         # messages per class so far: each one's place in its class
        self.starts = [array("q") for _ in range(self.n_folds)]   # each message's pairs_start (-1: no pairs)

    @property
    def class_count(self):
        import numpy as np

        return np.array(self.counts, dtype=np.float64).reshape(-1, 2)

    def write(self, indices, is_spam, fold, pairs_start=-1):
        """One message: its token ``indices`` (a buffer of int32), class and fold;
        ``pairs_start``: its token stream's (where its word pairs begin; -1: none),
        for a filter that weighs pairs (``pair_weight`` other than 1)."""
        spam = 1 if is_spam else 0
        place = self.seen[spam]
        self.seen[spam] = place + 1
        self.counts[2 * fold + spam] += 1
        self.starts[fold].append(pairs_start)
        heads, out = self.files[fold]
        heads.write((len(indices) | spam << 32 | place << 33).to_bytes(8, "little"))
        out.write(indices)

    def write_many(self, indices, lengths, spam, place, folds, starts=None):
        """Messages given together in the order of their folds (``folds``
        ascending; within a fold in the order counted), as :meth:`write` of
        each in the order counted: ``indices`` (int32) their token indices
        back to back, ``lengths`` the number of each one's, ``spam`` each
        one's class (0, 1), ``place`` its place among the messages of its
        class given here (0, 1, ... in the order counted), ``folds`` its fold,
        ``starts`` its ``pairs_start`` (None: -1)."""
        import numpy as np

        lengths = np.asarray(lengths, dtype=np.int64)
        spam = np.asarray(spam, dtype=np.int64)
        place = np.asarray(place, dtype=np.int64)
        folds = np.asarray(folds, dtype=np.int64)
        indices = np.ascontiguousarray(indices, dtype=np.int32)
        n = lengths.size
        if not (spam.size == place.size == folds.size == n) or int(lengths.sum()) != indices.size:
            raise ValueError("the messages' arrays do not fit together")
        if n and (int(folds[0]) < 0 or int(folds[-1]) >= self.n_folds or int(spam.max()) > 1
                  or bool((np.diff(folds) < 0).any())):
            raise ValueError("a message's fold or class is out of range, or the folds are not in order")
        starts = np.full(n, -1, dtype=np.int64) if starts is None else np.asarray(starts, dtype=np.int64)
        per_class = np.bincount(spam, minlength=2)[:2]
        heads = (lengths | spam << 32 | (place + np.array(self.seen, dtype=np.int64)[spam]) << 33).astype("<u8")
        fold_bounds = np.searchsorted(folds, np.arange(self.n_folds + 1)).tolist()
        token_bounds = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=token_bounds[1:])
        for k in range(self.n_folds):
            a, b = fold_bounds[k], fold_bounds[k + 1]
            if a == b:
                continue
            heads_file, out = self.files[k]
            heads_file.write(heads[a:b].tobytes())
            out.write(indices[token_bounds[a]:token_bounds[b]].tobytes())
            n_spam = int(np.count_nonzero(spam[a:b]))
            self.counts[2 * k] += b - a - n_spam
            self.counts[2 * k + 1] += n_spam
            self.starts[k].frombytes(starts[a:b].tobytes())
        self.seen = [self.seen[0] + int(per_class[0]), self.seen[1] + int(per_class[1])]

    def fold(self, k):
        """Fold ``k``'s messages: ``(indices, bounds, spam, place)``, numpy
        arrays: every token index of the fold (int32) back to back, message
        ``j``'s at ``bounds[j]:bounds[j + 1]`` (int64), its class (uint8) and
        its place in its class (int64), in the order written."""
        import numpy as np

        heads, out = self.files[k]
        arrays = []
        for f in (heads, out):
            f.flush()
            arrays.append(_read_whole(f))
        words = np.frombuffer(arrays[0], dtype="<u8")
        indices = np.frombuffer(arrays[1], dtype=np.int32)
        bounds = np.zeros(words.size + 1, dtype=np.int64)
        np.cumsum(words & 0xFFFFFFFF, out=bounds[1:])
        if bounds[-1] != indices.size:
            raise ValueError("a damaged fold file")
        return indices, bounds, ((words >> 32) & 1).astype(np.uint8), (words >> 33).astype(np.int64)

    def indices(self, k):
        """Fold ``k``'s token indices (int32) back to back, as :meth:`fold` gives
        them, its file of heads not read."""
        import numpy as np

        out = self.files[k][1]
        out.flush()
        return np.frombuffer(_read_whole(out), dtype=np.int32)

    def flush(self):
        """Every file's buffer written out (before a fork: the child's copy of a buffer is then empty)."""
        for heads, out in self.files:
            heads.flush()
            out.flush()

    def pairs_starts(self, k):
        """Fold ``k``'s messages' ``pairs_start`` (int64), in the order written."""
        import numpy as np

        return np.frombuffer(self.starts[k], dtype=np.int64) if len(self.starts[k]) else np.zeros(0, dtype=np.int64)

    def close(self):
        for heads, out in self.files:
            heads.close()
            out.close()
        self.files = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def held_out_by_fold(spam_filter, spill, counts=None, sum_fold=None, fork=None):
    """The held-out log-odds of the messages of a :class:`FoldSpill`, each
    under the model of the fitted ``spam_filter``'s counts minus its fold's:
    ``(ham_log_odds, spam_log_odds, per_fold)`` as :func:`held_out_spilled`
    gives them, bit for bit the same (fold ``k``'s model is the one
    :class:`FoldModels` builds: its counts, tokens, hash index, norms and
    prior), without the folds' rows: fold ``k``'s counts are summed from its
    file into two rows (the messages in the order counted, each added as the
    counting pass added it: one compiled call, ``add_counts_rows``), its
    model built (no hash index: with ``pair_weight`` 1 its messages are
    scored in one compiled call by the vocabulary indices they were counted
    with, ``token_kernels.held_out_log_odds``, token ``i`` being the model's
    ``local_of[i]``: what the fold model's hash index says of its hash), the
    rows cleared for the next.  A token occurring in a message has a positive
    value (a transformed count scaled to a positive length), so the folds
    holding a token are the folds of the messages it occurs in (a first
    reading of the files).  ``counts``: the :class:`~spamnb.estimator.counting.Counts`
    (model rows only) the filter is made of, used instead of the filter's
    own (``spam_filter`` may then be unfitted: its parameters are read).
    ``sum_fold``: a function ``(k, indices, bounds, spam, n_features)`` that
    sums fold ``k``'s messages otherwise than one after the other (the
    partitions' tree of ``spamnb train``:
    :func:`spamnb.estimator.counting.partition_fold_sums`), giving ``(tokens,
    sums)``: the tokens they hold (ascending) and their ``(2, len(tokens))``
    sums (no rows as long as the vocabulary then).  ``fork``: a function
    ``(function, folds)`` that starts ``function(folds)`` in a process forked
    from this one and gives a handle of its ``result()`` and ``close()``, or
    None (``spamnb train -j N``'s ``Workers.fork``: its workers are idle by
    then): the first half of the folds is scored there, the other half here
    meanwhile, each fold apart from the others as in one process (the same
    scores, bit for bit)."""
    import numpy as np

    from spamnb.bayes import token_kernels
    from spamnb.errors import BrokenPool
    from spamnb.estimator.defaults import COUNT_TRANSFORMS

    transform, length = COUNT_TRANSFORMS[spam_filter.counts], float(spam_filter.length_norm)
    alpha, pair_weight = float(spam_filter.alpha), float(spam_filter.pair_weight)
    if counts is None:
        total = np.asarray(spam_filter.word_counts_.matrix(), dtype=np.float64)
        class_count = np.asarray(spam_filter.class_count_, dtype=np.float64)
        hashes = np.asarray(spam_filter.vocabulary_.hashes(), dtype=np.uint64)
    else:   # what Counts.to_filter gives the filter: the same numbers
        total = np.asarray(counts.dense[:2], dtype=np.float64)
        class_count = np.asarray(counts.class_count[:2], dtype=np.float64)
        hashes = np.asarray(counts.hashes, dtype=np.uint64)
    n_features = total.shape[1]
    fold_class_count = spill.class_count
    n_folds = spill.n_folds
    in_folds = np.zeros(n_features, dtype=np.uint8 if n_folds < 256 else np.int32)   # folds holding each token
    mark = np.zeros(n_features, dtype=bool)
    for k in range(n_folds):
        mark[:] = False
        mark[spill.indices(k)] = True
        in_folds += mark
    del mark
    n_held = int(np.count_nonzero(in_folds))
    local_of = np.full(n_features, -1, dtype=np.int32)   # fold k's tokens' places in its model (held_out_log_odds)
    in_place = counts is not None and total.flags.writeable   # a training's own counts: _fold_counts_in_place
    rows = np.zeros((2, n_features)) if sum_fold is None else None

    def score_folds(folds):   # each fold's messages' (class, place, log-odds); every fold apart from the others
        out = []
        for k in folds:
            out.append(_score_fold(k))
        return out

    def _score_fold(k):
        indices, bounds, spam, place = spill.fold(k)
        if sum_fold is None:
            token_kernels.add_counts_rows(indices, bounds, spam, rows[0], rows[1], transform, length)
            tokens = np.flatnonzero((rows[0] > 0) | (rows[1] > 0))   # fold k's tokens, in vocabulary order
            part = rows[:, tokens]
            rows[:, tokens] = 0.0
        else:
            tokens, part = sum_fold(k, indices, bounds, spam, n_features)
            held = (part[0] > 0) | (part[1] > 0)   # (each is: a token's value in a message is positive)
            if not held.all():
                tokens, part = tokens[held], part[:, held]
            del held
        n_ham, n_spam = class_count - fold_class_count[k]
        if pair_weight == 1.0 and in_place:
            # total - fold k's counts and the fold model's row sums, a class at a time (one gather of its totals)
            sums = _fold_counts_in_place(total, tokens, part)
            fc, part = part, None
        else:
            sums = None
            for c in range(2):   # total - fold k's counts (0 where it has none), into the fold's rows: no third array
                _less_fold(total[c][tokens], part[c])
            fc, part = part, None
        if pair_weight == 1.0:
            # every message of the fold in one compiled call, by the vocabulary indices it was counted with:
            # token i is the model's local_of[i] (its place among the fold's tokens; -1 when no other fold
            # holds it), what the hash index FoldModels makes says of its hash: score's log-odds, bit for bit
            held_by = in_folds[tokens]   # the folds holding each of the fold's tokens
            log_norm, prior_ratio, _, _ = _fold_model(total, tokens, fc, in_folds, hashes, alpha, spam_filter.prior,
                                                      n_ham, n_spam, n_held, index=False, sums=sums, held_by=held_by)
            local_of[tokens] = np.where(held_by >= 2, np.arange(tokens.size, dtype=np.int32), -1)
            del held_by
            log_odds = np.frombuffer(token_kernels.held_out_log_odds(indices, bounds, local_of, fc.ravel(),
                                                                     log_norm.tolist(), [0.0, prior_ratio],
                                                                     transform, length))
        else:   # the pairs weighed: each message scored with its pairs_start (what a model file's scorer does)
            log_norm, prior_ratio, table, index = _fold_model(total, tokens, fc, in_folds, hashes, alpha,
                                                              spam_filter.prior, n_ham, n_spam, n_held)
            scorer = token_kernels.Scorer(table, index, fc.ravel(), tokens.size, log_norm.tolist(),
                                          [0.0, prior_ratio], transform, length, None, pair_weight)
            log_odds = _weighed_log_odds(scorer, hashes[indices], bounds, spill.pairs_starts(k))
            del scorer, table, index
        return spam, place, log_odds

    # with ``fork`` the first half of the folds is scored in a process forked now (it has these arrays and
    # files as they are), the other half here meanwhile: each fold's scores are the same wherever scored
    away = None
    if fork is not None and n_folds >= 2:
        spill.flush()
        away = fork(score_folds, range(n_folds // 2))
    try:
        here = score_folds(range(0 if away is None else n_folds // 2, n_folds))
        try:
            done = [] if away is None else away.result()
        except BrokenPool:   # it died (killed): its folds scored here
            done = score_folds(range(n_folds // 2))
    finally:
        if away is not None:
            away.close()
    counted = spill.seen
    scores = (np.empty(counted[0]), np.empty(counted[1]))
    per_fold = np.zeros((n_folds, 2), dtype=np.int64)
    for k, (spam, place, log_odds) in enumerate(done + here):
        for s in range(2):
            scores[s][place[spam == s]] = log_odds[spam == s]
        per_fold[k] = np.bincount(spam, minlength=2)[:2]
    return scores[0], scores[1], per_fold


def _weighed_log_odds(scorer, hashes, bounds, starts):
    """The log-odds of the messages ``hashes[bounds[j]:bounds[j + 1]]``, each
    scored alone with its word pairs from ``starts[j]`` on weighed by the
    scorer's ``pair_weight`` (``Scorer.score``: a message at a time)."""
    import numpy as np

    hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
    if starts.size != bounds.size - 1:
        raise ValueError("a fold's pair starts do not match its messages")
    out = np.empty(starts.size)
    score = scorer.score
    for j, (a, b, start) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), starts.tolist())):
        jll = score(hashes[a:b], 0, start)[0]
        out[j] = jll[1] - jll[0]
    return out


def _held_out(models, records, batch=4096):
    """The records' log-odds, each fold's messages of a batch of ``batch``
    records scored in one compiled call (``Scorer.log_odds_many``: bit for
    bit :meth:`FoldModels.log_odds`), in the records' order."""
    import numpy as np
    from itertools import islice

    scores = (array("d"), array("d"))
    per_fold = np.zeros((models.n_folds, 2), dtype=np.int64)
    records = iter(records)
    while True:
        chunk = list(islice(records, batch))
        if not chunk:
            break
        folds = np.fromiter((r[0] for r in chunk), dtype=np.int64, count=len(chunk))
        spam = np.fromiter((bool(r[1]) for r in chunk), dtype=bool, count=len(chunk))
        log_odds = np.empty(len(chunk))
        for k in np.unique(folds).tolist():
            mine = np.flatnonzero(folds == k)
            lengths = np.fromiter((len(chunk[j][2]) for j in mine.tolist()), dtype=np.int64, count=mine.size)
            bounds = np.zeros(mine.size + 1, dtype=np.int64)
            np.cumsum(lengths, out=bounds[1:])
            hashes = np.frombuffer(b"".join(chunk[j][2] for j in mine.tolist()), dtype=np.uint64)
            log_odds[mine] = np.frombuffer(models.scorers_[k].log_odds_many(hashes, bounds))
        np.add.at(per_fold, (folds, spam.astype(np.int64)), 1)
        scores[0].extend(log_odds[~spam].tolist())
        scores[1].extend(log_odds[spam].tolist())
        del chunk
    return np.frombuffer(scores[0], dtype=np.float64), np.frombuffer(scores[1], dtype=np.float64), per_fold


def choose_cutoffs(ham_log_odds, spam_log_odds, target_fpr=DEFAULT_TARGET_FPR, max_unsure=DEFAULT_MAX_UNSURE,
                   margin=DEFAULT_MARGIN):
    """``(spam cutoff, ham cutoff)`` in log-odds from held-out scores (see the module doc)."""
    import numpy as np

    ham = np.sort(np.asarray(ham_log_odds, dtype=np.float64))[::-1]
    spam = np.asarray(spam_log_odds, dtype=np.float64)
    allowed = int(math.floor(target_fpr * ham.size + 1e-9))    # ham that may reach the cutoff
    if allowed >= ham.size:
        spam_cut = -math.inf
    else:
        spam_cut = _above(float(ham[allowed])) + margin
    spam_cut = min(max(spam_cut, SPAM_CUTOFF_FLOOR), MAX_LOG_ODDS)
    from spamnb.estimator.defaults import DEFAULT_HAM_LOG_ODDS

    ham_cut = min(DEFAULT_HAM_LOG_ODDS, spam_cut)
    everything = np.concatenate([ham, spam])
    in_band = ((everything > ham_cut) & (everything < spam_cut)).sum()
    if everything.size and in_band > max_unsure * everything.size:
        below = np.sort(everything[everything < spam_cut])[::-1]
        keep = int(math.floor(max_unsure * everything.size))  # messages left in the band
        ham_cut = float(below[keep]) if keep < below.size else ham_cut
    return spam_cut, min(_on_grid(ham_cut), spam_cut)


# Cutoffs are chosen on a grid of 1e-9 in log-odds.  A held-out score is a sum
# of float counts (``counts="log"``, ``length_norm``) added in the order the
# mail came in, so the same mail in another order moves it by ~1e-13; on the
# grid the cutoffs do not follow that noise (the mail, not its order, makes
# the filter: tests/test_fit_matches_train.py).
CUTOFF_GRID = 1e9


def _above(log_odds):
    """The first point of the cutoff grid above ``log_odds`` (a held-out ham's
    score: the spam cutoff is set above it)."""
    return (math.floor(log_odds * CUTOFF_GRID) + 1) / CUTOFF_GRID


def _on_grid(log_odds):
    """``log_odds`` moved up to the cutoff grid (a ham cutoff: the held-out
    score it was set at stays on the ham side)."""
    if not math.isfinite(log_odds):
        return log_odds
    return math.ceil(log_odds * CUTOFF_GRID) / CUTOFF_GRID


def calibrate(spam_filter, messages, labels, target_fpr=DEFAULT_TARGET_FPR, max_unsure=DEFAULT_MAX_UNSURE,
              margin=DEFAULT_MARGIN, n_folds=DEFAULT_FOLDS, seed=0, min_ham=MIN_HAM, min_spam=MIN_SPAM):
    """A :class:`Calibration` for ``spam_filter`` (fitted on ``messages``/``labels``).

    ``messages`` is read once (an iterable: `spamnb train` reads the corpus again).  The filter is not
    changed: :func:`apply` sets its cutoffs.
    """
    import numpy as np

    from spamnb.estimator.labels import is_spam_label

    y = np.array([is_spam_label(v) for v in labels], dtype=bool)
    n_spam, n_ham = int(y.sum()), int((~y).sum())
    defaults = calibration_check(spam_filter, n_ham, n_spam, target_fpr, max_unsure, min_ham, min_spam)
    if defaults is not None:
        return defaults
    scores = cross_val_log_odds(spam_filter, messages, y, n_folds, seed)
    return from_scores(scores[~y], scores[y], n_folds, target_fpr, max_unsure, margin)


def min_ham_for(target_fpr, min_ham=MIN_HAM):
    """The held-out ham needed to set a spam cutoff for ``target_fpr``: at least
    ``min_ham``, and enough that the target allows one ham over the cutoff
    (1 / target_fpr: 1,000 for 0.1 %); fewer cannot estimate that tail."""
    if target_fpr <= 0:
        return min_ham
    return max(min_ham, math.ceil(1.0 / target_fpr - 1e-9))


def calibration_check(spam_filter, n_ham, n_spam, target_fpr=DEFAULT_TARGET_FPR, max_unsure=DEFAULT_MAX_UNSURE,
                      min_ham=MIN_HAM, min_spam=MIN_SPAM):
    """Check the options (ValueError) and return the :class:`Calibration` of
    the default cutoffs when there is too little data for the held-out scores
    (or the message features are on); None when the cutoffs can be chosen."""
    from spamnb.estimator.defaults import DEFAULT_HAM_CUTOFF, DEFAULT_SPAM_CUTOFF

    if not 0.0 <= target_fpr < 1.0:
        raise ValueError(f"target_fpr must be in [0, 1), got {target_fpr!r}")
    if not 0.0 <= max_unsure <= 1.0:
        raise ValueError(f"max_unsure must be in [0, 1], got {max_unsure!r}")
    why = None
    needed_ham = min_ham_for(target_fpr, min_ham)
    if n_ham < needed_ham or n_spam < min_spam:
        why = (f"too little data to estimate them ({n_ham} ham, {n_spam} spam; "
               f"needs {needed_ham} ham and {min_spam} spam)")
    elif getattr(spam_filter, "feature_weight", 0):
        why = "the fold scores leave out the message features (feature_weight > 0)"
    if why is None:
        return None
    return Calibration(DEFAULT_SPAM_CUTOFF, DEFAULT_HAM_CUTOFF, _logit(DEFAULT_SPAM_CUTOFF),
                       _logit(DEFAULT_HAM_CUTOFF), None, None, None, n_ham, n_spam, 0, f"default cutoffs: {why}")


def from_scores(ham_log_odds, spam_log_odds, n_folds=DEFAULT_FOLDS, target_fpr=DEFAULT_TARGET_FPR,
                max_unsure=DEFAULT_MAX_UNSURE, margin=DEFAULT_MARGIN):
    """The :class:`Calibration` of held-out log-odds (:func:`choose_cutoffs`, and the
    figures expected at the cutoffs)."""
    import numpy as np

    ham = np.asarray(ham_log_odds, dtype=np.float64)
    spam = np.asarray(spam_log_odds, dtype=np.float64)
    spam_cut, ham_cut = choose_cutoffs(ham, spam, target_fpr, max_unsure, margin)
    floor = ""
    allowed = int(math.floor(target_fpr * ham.size + 1e-9))
    if allowed >= ham.size or _above(float(np.sort(ham)[::-1][allowed])) + margin < SPAM_CUTOFF_FLOOR:
        floor = (f"; the spam cutoff held at its floor, log-odds {SPAM_CUTOFF_FLOOR:g} (the held-out ham "
                 f"put it lower, where the model's own evidence says ham: copies of messages in the "
                 f"training mail?)")
    fpr = float((ham >= spam_cut).mean())
    missed = float((spam < spam_cut).mean())
    everything = np.concatenate([ham, spam])
    unsure = float(((everything > ham_cut) & (everything < spam_cut)).mean())
    rule = (f"{n_folds}-fold cross-validation on the training mail: spam at log-odds >= {spam_cut:.2f} "
            f"(at most {100 * target_fpr:g} % of held-out ham, + {margin:g} margin), ham at <= {ham_cut:.2f}"
            + floor)
    return Calibration(_probability(spam_cut), _probability(ham_cut), spam_cut, ham_cut, fpr, missed, unsure,
                       int(ham.size), int(spam.size), n_folds, rule)


def apply(spam_filter, calibration):
    """Set the filter's cutoffs to the calibration's; returns the filter."""
    spam_filter.spam_cutoff = float(calibration.spam_cutoff)
    spam_filter.ham_cutoff = min(float(calibration.ham_cutoff), spam_filter.spam_cutoff)
    return spam_filter


def prefer_pairs(missed, missed_pairs, error, error_pairs):
    """The rule of ``spamnb train`` (:func:`spamnb.estimator.fitting.choose_pairs`): the variant with word pairs is kept when, at
    the cutoffs chosen for each, it misses at most :data:`PAIRS_GAIN` times
    the held-out spam the other misses (which must be some), and its held-out
    1-AUC (``error_pairs``) is no higher."""
    return missed > 0 and missed_pairs <= PAIRS_GAIN * missed and error_pairs <= error


# Word pairs are kept only when they cut the spam missed at the held-out
# cutoffs by a fifth or more and do not rank worse (they make the model larger
# and scoring slower).  On the shared corpora (docs/accuracy.md): Enron-Spam
# 11.79 -> 7.96 % (0.68x), 1-AUC 0.0762 -> 0.0405 %: kept; SpamAssassin 3.48
# -> 6.22 % (1.79x), 1-AUC 0.0373 -> 0.0337 %: not kept.
PAIRS_GAIN = 0.8
# The choice tokenizes and counts the corpus a second time (in the same reading
# since issue 23), with a vocabulary several times larger (pairs): on 96,736 messages (16 copies of the SpamAssassin corpus with
# varied bytes) `spamnb train -j 2` took 28.1 s against 5.9 s without the choice
# and peaked at 384 MiB against 245 (docs/scale.md, runs E and F, when it read
# the corpus twice).  Above this many messages it is not tried (``--word-pairs W`` still gives pairs).
PAIRS_MAX_MESSAGES = 20_000


def describe(calibration):
    """One or two lines for ``spamnb train``."""
    c = calibration
    if c.expected_fpr is None:
        return f"cutoffs: {c.rule}"
    pairs = ""
    if c.word_pairs is not None and c.word_pairs[1] is None:
        pairs = (f"\nword pairs: {'on' if c.word_pairs[0] else 'off'}: not tried on more than "
                 f"{PAIRS_MAX_MESSAGES:,} messages (--word-pairs 2 turns them on)")
    elif c.word_pairs is not None:
        window, missed, missed_pairs, error, error_pairs = c.word_pairs
        pairs = (f"\nword pairs: {'on (window ' + str(window) + ')' if window else 'off'}: held-out spam missed "
                 f"{100 * missed:.2f} % without them, {100 * missed_pairs:.2f} % with (1-AUC {error:.4f} %, "
                 f"{error_pairs:.4f} %)")
    if "held at its floor" in c.rule:
        pairs += (f"\nfloor: the spam cutoff is held at log-odds {SPAM_CUTOFF_FLOOR:g}: the held-out ham put it "
                  f"lower, where the model's own evidence says ham")
    return (f"cutoffs: spam if log-odds >= {c.spam_log_odds:.2f}, ham if <= {c.ham_log_odds:.2f} "
            f"({c.n_folds}-fold cross-validation on the training mail)\n"
            f"expected: false positives {100 * c.expected_fpr:.2f} %, spam missed {100 * c.expected_spam_missed:.2f} %, "
            f"unsure {100 * c.expected_unsure:.2f} % (held-out training mail, {c.n_ham} ham, {c.n_spam} spam)" + pairs)


def stratified_folds(y, n_folds, seed=0):
    """Test indices of each fold: list of ``n_folds`` sorted int arrays.

    Each class is shuffled (numpy ``default_rng(seed)``) and dealt round-robin,
    so fold sizes per class differ by at most one.
    """
    import numpy as np

    y = np.asarray(y, dtype=bool)
    if n_folds < 2:
        raise ValueError("--folds must be at least 2")
    rng = np.random.default_rng(seed)
    fold_of = np.empty(y.size, dtype=np.int64)
    for cls in (False, True):
        members = np.flatnonzero(y == cls)
        members = members[rng.permutation(members.size)]
        fold_of[members] = np.arange(members.size) % n_folds
    return [np.flatnonzero(fold_of == k) for k in range(n_folds)]
