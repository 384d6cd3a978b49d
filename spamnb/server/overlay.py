"""A user model that is the site model plus a journal, held as what the
journal changed (issue 34, item 4).

``spamnb serve --create-user-models`` starts a user's model as a hard link
of the site model's file and appends the user's learns to the user's own
journal (:func:`spamnb.server.models._start_user_model`).  Loaded whole,
each such model was a private copy of the site model (8.3 MiB a user with
a SpamAssassin-sized model).  An :class:`Overlay` keeps instead, besides
one open file shared by every user of the same site file:

* the feature indices whose log-counts the journal changed, and those
  log-counts (sparse: a learned message changes a few hundred);
* the tokens the journal added (their hashes, log-counts and strings);
* the user's ``log(N_c + alpha V)``, log-priors and cutoffs.

A message is scored as :class:`spamnb.estimator.scoring.FileScorer` scores one
of a mapped, unchanged model: its tokens' entries of the hash index and
their log-counts are read from the shared file (``pread``, no page of the
model mapped), then the journal's changes are put over them (numpy, no
loop per token) and the tokens the journal added put beside them, and a
``Scorer`` over those tokens alone gives the sums, numbered in the order of
the full model's feature indices.  The scores are those of the user model
loaded whole (tests/test_overlay.py: to 1e-9).

The overlay is made from the user model loaded whole once (the journal
replayed as a fresh reader replays it), diffed against the site model's
logs, and that copy let go: the learn path stays the one every model uses.
A model the overlay cannot stand for (its own file, a forget's holes,
message features, a site model with a journal of its own) is loaded whole
as before (:func:`build` returns None).
"""

from __future__ import annotations

import os
from array import array

from spamnb.model import ScorerBase

__all__ = ["Overlay", "build"]


class _SiteFile:
    """The site model's file, open (``SpamFilter.load(mapped=True)``: nothing
    of it read but its header), shared by the overlays of one site file."""

    def __init__(self, path):
        from spamnb.model import SpamFilter

        self.filter = SpamFilter.load(path, form="mapped")
        mapped = self.filter.file_layout()
        if mapped is None:
            raise ValueError("not a mapped model")
        self.file, self.layout = mapped
        st = os.fstat(self.file.fileno())
        self.identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


_site_files = {}   # identity -> _SiteFile (one per site file: a replaced site model drops the old one)


def _site_file(path, identity):
    site = _site_files.get(identity)
    if site is None:
        site = _SiteFile(path)
        if site.identity != identity:   # replaced meanwhile
            return None
        _site_files.clear()
        _site_files[identity] = site
    return site


def build(user_path, site_filter, site_path):
    """An :class:`Overlay` for the model at ``user_path`` over the site model
    ``site_filter`` (loaded whole, with its counts: a TELL server's), read
    from ``site_path``; None when the user model is not the site model's
    file plus a journal of learns (it is then loaded whole)."""
    import numpy as np

    from spamnb.model import SpamFilter

    try:
        st_user, st_site = os.stat(user_path), os.stat(site_path)
    except OSError:
        return None
    identity = (st_site.st_dev, st_site.st_ino, st_site.st_size, st_site.st_mtime_ns)
    if (st_user.st_dev, st_user.st_ino) != identity[:2]:
        return None   # compacted into a file of its own
    site_counts = site_filter.replayed().word_counts
    journal = site_filter.journal_
    if (site_counts is None or not site_counts.as_loaded or (journal is not None and journal.payloads)
            or site_filter.features_ is not None and site_filter.feature_weight):
        return None
    user = SpamFilter.load(user_path)
    vocab, counts, _ages = user.replayed()
    if counts is None or counts.n_holes or user.features_ is not None and user.feature_weight:
        return None
    site = _site_file(site_path, identity)
    if site is None:
        return None
    counts.resize(vocab.n_features)
    log_count, log_norm, log_prior, tail = counts.scorer_logs()
    site_log_count = site_counts.scorer_logs()[0]
    n_classes = len(log_prior)
    n_base = len(site_log_count) // n_classes
    if len(log_count) != len(site_log_count) or (tail is not None and len(tail) % n_classes):
        return None
    mine = np.frombuffer(log_count, dtype=np.float64).reshape(n_classes, n_base)
    theirs = np.frombuffer(site_log_count, dtype=np.float64).reshape(n_classes, n_base)
    changed = np.flatnonzero((mine != theirs).any(axis=0)).astype(np.int32)
    n_new = vocab.n_features - n_base
    tail = np.frombuffer(tail, dtype=np.float64).reshape(n_classes, n_new) if n_new else np.zeros((n_classes, 0))
    keys = np.frombuffer(vocab.keys, dtype=np.uint64)
    values = np.frombuffer(vocab.values, dtype=np.int32)
    slots = np.flatnonzero(values >= n_base)
    new_hashes = np.empty(n_new, dtype=np.uint64)
    new_hashes[values[slots] - n_base] = keys[slots]
    if len(slots) != n_new:
        return None
    order = np.argsort(new_hashes)
    return Overlay(site, user, n_base, changed, mine[:, changed].copy(), new_hashes[order],
                   (order + n_base).astype(np.int32), tail[:, order].copy(),
                   [vocab.token(i) for i in range(n_base, vocab.n_features)], log_norm, log_prior)


class Overlay(ScorerBase):
    """A user model as the site model's file plus what its journal changed
    (:func:`build`): a :class:`spamnb.estimator.forms.Scorer` (its own kernel),
    which classifies through the forms' one path as ``SpamFilter.classify`` does."""

    def __init__(self, site, user, n_base, changed, changed_logs, new_hashes, new_index, new_logs, new_tokens,
                 log_norm, log_prior):
        from spamnb.model import COUNT_TRANSFORMS

        self.site, self.n_base = site, n_base
        self.changed, self.changed_logs = changed, changed_logs
        self.new_hashes, self.new_index, self.new_logs, self.new_tokens = new_hashes, new_index, new_logs, new_tokens
        self.log_norm, self.log_prior = tuple(log_norm), tuple(log_prior)
        self.tokenizer = site.filter.tokenizer_
        self.counts, self.length = COUNT_TRANSFORMS[user.counts], float(user.length_norm)
        self.pair_weight, self.scale = user.pair_scoring()   # a learned model's pair-weight mixture: its weight
        self.cutoffs, self.n_evidence = user.cutoffs, int(user.n_evidence)   # a verdict.Cutoffs

    @property
    def held_bytes(self):
        """What this overlay holds (its arrays and token strings; the shared file not counted)."""
        arrays = (self.changed, self.changed_logs, self.new_hashes, self.new_index, self.new_logs)
        # 4 KiB: the objects around the arrays (the cache entry, score map, array headers), as measured
        return 4096 + sum(a.nbytes for a in arrays) + sum(len(t) + 56 for t in self.new_tokens)

    def token(self, index):
        if index >= self.n_base:
            return self.new_tokens[index - self.n_base]
        return self.site.filter.token_names(((index, 0.0),))[0][0]   # read from the site file (its strings unread)

    def kernel(self):
        return self

    def _compact(self, hashes):
        """``(scorer, index)``: a Scorer over the message's known tokens, their
        log-counts the site file's with the journal's changes over them, and
        their feature indices in the user model."""
        import numpy as np

        from spamnb.model import compact_scorer, gather

        n_classes = len(self.log_prior)
        found, index, logs = gather(self.site.file, self.site.layout, self.n_base, n_classes, hashes)
        found = np.frombuffer(found, dtype=np.uint64) if len(found) else np.zeros(0, np.uint64)
        index = np.frombuffer(index, dtype=np.int32) if len(index) else np.zeros(0, np.int32)
        logs = (np.frombuffer(logs, dtype=np.float64).reshape(n_classes, len(found)).copy() if len(found)
                else np.zeros((n_classes, 0)))
        if len(self.changed) and len(index):
            at = np.searchsorted(self.changed, index)
            hit = at < len(self.changed)
            hit[hit] = self.changed[at[hit]] == index[hit]
            logs[:, hit] = self.changed_logs[:, at[hit]]
        if len(self.new_hashes) and len(hashes):
            wanted = np.unique(np.frombuffer(hashes, dtype=np.uint64))
            wanted = wanted[~np.isin(wanted, found)]
            at = np.searchsorted(self.new_hashes, wanted)
            ok = at < len(self.new_hashes)
            ok[ok] = self.new_hashes[at[ok]] == wanted[ok]
            at = at[ok]
            found = np.concatenate((found, self.new_hashes[at]))
            index = np.concatenate((index, self.new_index[at]))
            logs = np.concatenate((logs, self.new_logs[:, at]), axis=1)
        order = np.argsort(index, kind="stable")   # numbered as the full model's features
        found, index, logs = found[order], index[order], np.ascontiguousarray(logs[:, order])
        scorer = compact_scorer(array("Q", found.tobytes()), array("d", logs.reshape(-1).tobytes()), self.log_norm,
                                self.log_prior, self.counts, self.length, self.pair_weight)
        if self.scale != 1.0:
            from spamnb.model import Scaled

            scorer = Scaled(scorer, self.scale)
        return scorer, index

    def score(self, hashes, n_evidence=0, pairs_start=-1):
        scorer, index = self._compact(hashes)
        jll, evidence, *rest = scorer.score(hashes, n_evidence, pairs_start)
        return (jll, [(int(index[i]), w) for i, w in evidence], *rest)

    def verdict_sums(self, hashes, regions, truncated=False, pairs_start=-1):
        return self._compact(hashes)[0].verdict_sums(hashes, regions, truncated, pairs_start)
