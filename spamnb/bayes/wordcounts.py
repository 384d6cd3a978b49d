"""The count model of the spam filter: per-class message and token counts.

For class c and token i, with N_ci the (transformed) count of token i in the
messages learned as c, N_c = sum_i N_ci and V the number of tokens,

    log theta_ci = log(N_ci + alpha) - log(N_c + alpha V)
    log P(c)     = the prior estimator's (``spamnb.bayes.priors.log_prior``)

derived by :mod:`spamnb.bayes.arithmetic` (the one module that writes them
out); :class:`WordCounts` serves every path of the filter (``fit``, ``learn``
and ``forget`` as one signed add, the single-message scorer, batch scoring,
the evidence, ``save``/``load`` and ``merge``).

The counts are the state.  The derived values (``log_count``, flat like the
counts; ``log_norm`` and ``log_prior``, one per class) are computed once, on
first use, with numpy; a model loaded from a file brings them along, so
scoring a loaded model imports no numpy (the ``spamnb classify`` cold path).
A filter's learns (:meth:`WordCounts.learn`) keep them up to date in place
instead: the logs of the counts a message changes, the class totals, and
side rows for new tokens (:meth:`WordCounts.scorer_state`), so a learn and
the score after it cost the message's tokens, not the vocabulary.
"""

from _thread import RLock   # (loaded with the interpreter: no import cost)
from array import array

from spamnb.bayes import token_kernels
from spamnb.bayes.token_kernels import exp, isfinite, log

__all__ = ["WordCounts"]


class WordCounts:
    """Messages and token counts per class, with Dirichlet soft counts.

    Parameters
    ----------
    alpha : float
        Soft count added to every token count (> 0 for a filter).
    prior : {"mle", "map", "uniform"}
        The class prior estimator ("map": one pseudo-message per class).
    n_classes : int
        Classes are indices ``0 .. n_classes - 1`` (the filter: 0 ham, 1 spam).

    Attributes
    ----------
    class_count_ : list of float, (n_classes,)
    n_features_ : int
    feature_count_ : flat float64 buffer, (n_classes * n_features,), class-major
    """

    def __init__(self, alpha, prior="mle", n_classes=2):
        self.alpha = alpha
        self.prior = prior
        self.n_classes = n_classes
        self.class_count_ = [0.0] * n_classes
        self.n_features_ = 0
        self._rows = [array("d") for _ in range(n_classes)]  # writable rows, short ones end in zeros
        self._flat = None       # or the flat counts (a model file's, or joined rows)
        self._derived = None    # (log_count, log_norm, log_prior)
        self._in_place = None   # _InPlace: a model file's counts and logs patched in place (extend_in_place)
        self._holes = 0         # tokens forgotten out of the rows, not counted in V until compacted (forget_zeros)
        # readers (the filter's read lock lets several in at once) make the views below when first asked for:
        # the flat counts, their matrix, the logs, the width of the vocabulary; one at a time, or one reader
        # reshapes the counts another is growing
        self._making = RLock()

    @classmethod
    def from_arrays(cls, alpha, prior, class_count, feature_count, derived=None):
        """Counts over existing buffers (e.g. a model file's), not copied.
        ``derived`` = ``(log_count, log_norm, log_prior)`` if known."""
        self = cls(alpha, prior, len(class_count))
        if len(feature_count) % self.n_classes:
            raise ValueError("the counts do not split into the classes")
        self.class_count_ = [float(v) for v in class_count]
        self.n_features_ = len(feature_count) // self.n_classes
        self._rows = None
        self._flat = feature_count
        self._derived = derived
        return self

    def extend_in_place(self, feature_count, log_count):
        """Learn and forget without copying the counts: ``feature_count`` and
        ``log_count`` are writable buffers holding these counts and their logs
        (the private memory a model file was read into).  Counts of known
        tokens and their logs are changed there, new tokens go to side rows,
        the class totals are kept from the file's log(N_c + alpha V); so a
        learn, and scoring after it (:meth:`scorer_logs`), cost in proportion
        to the messages, not the model.  Anything else (``derived``, a save,
        ``matrix``) joins them into rows first, once.  Returns whether it applies."""
        if self._in_place is not None:
            return True
        if self._flat is None or self._rows is not None or self._derived is None or not self.alpha > 0:
            return False
        counts, logs = memoryview(feature_count).cast("B").cast("d"), memoryview(log_count).cast("B").cast("d")
        n = self.n_features_
        log_norm = self._derived[1]
        if (counts.readonly or logs.readonly or len(counts) != len(self._flat) or len(logs) != len(counts)
                or not all(map(isfinite, log_norm))):
            return False
        self._flat = counts
        self._in_place = _InPlace(n, self.n_classes, logs, [exp(v) - self.alpha * n for v in log_norm],
                                  self.alpha)
        return True

    def learn(self, indices, cls, transform, sign=1, n_features=None, length=0.0):
        """:meth:`add` as a filter learns one message (``SpamFilter.learn``):
        in place from the first learn on (:meth:`_start_growing`), so each
        learn, and the scoring after it (:meth:`scorer_state`), costs in
        proportion to the message, not the vocabulary.  (:meth:`add` of counts
        held as rows, as ``fit`` counts, leaves the logs to be derived once.)"""
        if self._in_place is None:
            self._start_growing()
        return self.add(indices, cls, transform, sign, n_features, length)

    def _start_growing(self):
        """Learn and forget in place from now on (as :meth:`extend_in_place`),
        the counts and logs copied once into buffers of this process, the class
        totals summed: a model that grows by learning, or one fitted or read
        whole, learns and scores at a cost in its messages' tokens, not in the
        vocabulary.  Returns the in-place state, or None (alpha 0)."""
        if not self.alpha > 0:
            return None
        flat, logs, totals = array("d"), array("d"), [0.0] * self.n_classes
        if self.n_features_:   # (an empty model: no numpy)
            totals = self.matrix().sum(axis=1).tolist()   # joins rows; a file's counts as they are
            flat.frombytes(memoryview(self.feature_count_).cast("B"))
            logs.frombytes(memoryview(self.derived()[0]).cast("B"))
        self._rows, self._flat = None, memoryview(flat)   # views: a slice of a class is its counts, not a copy
        self._in_place = _InPlace(self.n_features_, self.n_classes, memoryview(logs), totals, self.alpha)
        self._in_place.holes, self._holes = self._holes, 0
        return self._in_place

    def scorer_logs(self):
        """``(log_count, log_norm, log_prior, tail)`` for ``spamnb.bayes.token_kernels.Scorer``:
        the derived values, or, patched in place (:meth:`extend_in_place`),
        the file's logs, those of the side rows (``tail``, flat) and the
        totals kept, without numpy."""
        log_count, log_norm, log_prior, tail, _stride = self.scorer_state()
        return log_count, log_norm, log_prior, tail if tail is None else self._in_place.joined_log_tail()

    def scorer_state(self):
        """:meth:`scorer_logs` and the stride of ``tail``, which is not copied:
        class c's logs of the tokens from the file's (or the learns') base on
        start at ``tail[c * stride]`` (``stride`` None without a tail).  A
        learn and the scoring after it cost in proportion to the message:
        ``token_kernels.Scorer(..., tail, pair_weight, stride)``."""
        ip = self._in_place
        if ip is None:
            return (*self.derived(), None, None)
        if not ip.changed and self._derived is not None:
            return (*self._derived, array("d"), 0)
        from spamnb.bayes.arithmetic import log_norms, plain_log_prior   # a model learned in place's: not a classify's

        n = self.n_features_ - ip.holes   # V: the holes a forget left (forget_in_place) are no tokens
        return (ip.logs, log_norms(ip.totals, self.alpha, n), plain_log_prior(self.prior, self.class_count_),
                ip.log_tail, ip.stride)

    def forget_in_place(self, indices, cls, transform, n_features, length):
        """Remove one message of class ``cls`` in place (:meth:`extend_in_place`),
        as ``add(..., sign=-1)``; returns a bytearray, one byte per occurrence in
        ``indices``, 1 where the token is left with no count in any class: the
        caller takes those out of the vocabulary's hash index, and they stay
        here as holes (zero counts, not counted in V) until the counts are
        joined (:meth:`holes_left`).  None when not in place, or when the
        file's counts have a token without counts (then only a whole
        compaction is exact)."""
        ip = self._in_place
        if ip is None:
            return None
        from spamnb.bayes import _holes   # a forget's: one compiled module less for a cold classify to load

        if not ip.checked:
            if _holes.any_unused(self._flat, self.n_classes):
                return None
            ip.checked = True
        self.add(indices, cls, transform, -1, n_features, length)
        zero = bytearray(b"\x01") * len(indices)
        n = ip.n_base
        for c in range(self.n_classes):
            _holes.zero_counts(indices, self._flat[c * n:(c + 1) * n], ip.tails[c], zero)
        return zero

    def forget_zeros(self, indices, cls, transform, n_features, length):
        """Remove one message of class ``cls`` from the counts held as rows (not
        in place), as ``add(..., sign=-1)``, and return what
        :meth:`forget_in_place` returns: one byte per occurrence, 1 where the
        token is left with no count in any class.  The caller takes those out
        of the vocabulary's index and counts them with :meth:`holes_left`: no
        scan of all the counts, so a forget costs what a learn costs.  None
        when the counts are held in place (see :meth:`forget_in_place`)."""
        if self._in_place is not None:
            return None
        from spamnb.bayes import _holes   # a forget's: one compiled module less for a cold classify to load

        self._add_rows(indices, cls, transform, -1, n_features, length)
        self._pad()
        zero = bytearray(b"\x01") * len(indices)
        empty = array("d")
        for row in self._rows:
            _holes.zero_counts(indices, row, empty, zero)
        return zero

    def holes_left(self, count):
        """``count`` more tokens of the counts are holes (see :meth:`forget_in_place`,
        :meth:`forget_zeros`): zero counts that V does not count until :meth:`compact`."""
        if self._in_place is not None:
            self._in_place.holes += count
        else:
            self._holes += count
            self._derived = None

    @property
    def in_place(self):
        """Whether the counts are held in place (:meth:`extend_in_place`)."""
        return self._in_place is not None

    @property
    def n_holes(self):
        return self._in_place.holes if self._in_place is not None else self._holes

    def _join(self):
        """Leave the in-place mode: the file's rows copied, the side rows after them."""
        ip, self._in_place = self._in_place, None
        self._holes += ip.holes
        self._rows = _copy_rows(self._flat, self.n_classes, ip.n_base)
        for row, tail in zip(self._rows, ip.tails):
            row += tail
        self._flat = None
        if ip.changed:
            self._derived = None

    # -- state ------------------------------------------------------------
    @property
    def as_loaded(self):
        """True while the counts and their logs are the buffers :meth:`from_arrays`
        was given, unchanged (no learn or forget since, in place or not)."""
        ip = self._in_place
        return self._rows is None and self._flat is not None and self._derived is not None and (
            ip is None or (not ip.changed and self.n_features_ == ip.n_base))

    @property
    def feature_count_(self):
        with self._making:
            return self._feature_count()

    def _feature_count(self):
        if self._in_place is not None and (self._in_place.changed or self.n_features_ != self._in_place.n_base):
            self._join()
        if self._flat is None:
            self._pad()
            self._flat = self._rows[0] if self.n_classes == 1 else self._rows[0] + self._rows[1]
            for row in self._rows[2:]:
                self._flat += row
        return self._flat

    def matrix(self):
        """The counts as a float64 ``(n_classes, n_features)`` numpy array (a view;
        read-only for a model read from a file)."""
        import numpy as np

        with self._making:   # the counts and their width as one
            return np.frombuffer(self._feature_count(), dtype=np.float64).reshape(self.n_classes, self.n_features_)

    def _writable_rows(self):
        """The rows, about to change: copies a file's counts once, drops what is derived."""
        if self._in_place is not None:
            self._join()
        if self._rows is None:
            self._rows = _copy_rows(self._flat, self.n_classes, self.n_features_)
        self._flat = None
        self._derived = None
        return self._rows

    def _pad(self):
        for row in self._rows:
            if len(row) < self.n_features_:
                row.frombytes(bytes(8 * (self.n_features_ - len(row))))

    def resize(self, n_features):
        """Grow to ``n_features`` tokens (the new ones count 0)."""
        with self._making:
            self._resize(n_features)

    def _resize(self, n_features):
        ip = self._in_place
        if ip is not None and n_features > self.n_features_:
            ip.grow(n_features - ip.n_base)
            self.n_features_ = n_features
            ip.changed = True
        if n_features > self.n_features_:
            self._writable_rows()
            self.n_features_ = n_features

    # -- learning ---------------------------------------------------------
    def add(self, indices, cls, transform, sign=1, n_features=None, length=0.0):
        """Add (``sign`` 1) or remove (``sign`` -1) one message of class ``cls``.

        ``indices``: the feature index of each token occurrence (``array('i')``,
        -1 for unknown tokens); ``transform`` a ``token_kernels.COUNTS_*`` code;
        ``n_features``: the vocabulary's size now (it may have grown); ``length``
        > 0 scales the message's values to that Euclidean length.  Removing
        raises ValueError, changing nothing, when the message cannot have been
        learned as ``cls`` (a count would become negative).
        """
        if sign != 1:
            if sign != -1:
                raise ValueError("sign must be 1 or -1")
            if self.class_count_[cls] < 1 - 1e-9:
                raise ValueError("no message of that class was learned")
        ip = self._in_place
        if ip is not None:
            self.resize(n_features or 0)
            n = ip.n_base
            change = token_kernels.add_counts_split(indices, self._flat[cls * n:(cls + 1) * n], ip.tails[cls],
                                                    transform, float(sign), length, ip.logs[cls * n:(cls + 1) * n],
                                                    ip.log_row(cls), float(self.alpha))[1]
            ip.totals[cls] += change
            ip.changed = True
            self.class_count_[cls] = (self.class_count_[cls] + 1.0 if sign == 1
                                      else max(0.0, self.class_count_[cls] - 1.0))
            return self
        return self._add_rows(indices, cls, transform, sign, n_features, length)

    def _add_rows(self, indices, cls, transform, sign, n_features, length):
        """:meth:`add` to the counts held as rows (the logs derived again when next needed)."""
        rows = self._rows
        if rows is None or self._flat is not None or self._derived is not None:
            rows = self._writable_rows()
        if n_features is not None and n_features > self.n_features_:
            self.n_features_ = n_features
        row = rows[cls]
        if len(row) < self.n_features_:   # only the class added to grows now; the rest pad later
            row.frombytes(bytes(8 * (self.n_features_ - len(row))))
        if sign == 1:
            token_kernels.add_counts(indices, row, transform, 1.0, length)
            self.class_count_[cls] += 1.0
        else:
            token_kernels.add_counts(indices, row, transform, -1.0, length)
            self.class_count_[cls] = max(0.0, self.class_count_[cls] - 1.0)
        return self

    def unused(self):
        """True for each token with no count in any class (a list of bools)."""
        return (self.matrix().sum(axis=0) <= 0).tolist()

    def compact(self, keep):
        """Keep the tokens where ``keep`` (a sequence of bools) is true, in order."""
        import numpy as np

        if self._in_place is not None:   # leave the in-place mode for good, changed or not
            self._join()
        keep = np.asarray(keep, dtype=bool)
        kept = np.ascontiguousarray(self.matrix()[:, keep])
        self._rows = [_from_numpy(kept[c]) for c in range(self.n_classes)]
        self.n_features_ = int(keep.sum())
        self._holes = 0   # compacted with every token without counts (spamnb.persistence.deltas.fold)
        self._flat = None
        self._derived = None
        return self

    def merge(self, other):
        """Add the counts of ``other`` (same settings; its tokens numbered as
        ours, ``other.n_features_`` may be smaller or larger): the counts are
        added, so whole counts ("raw", "binary") come out exactly as if the
        messages had been learned here; "log" counts to the rounding of the
        order of the sums."""
        if not isinstance(other, WordCounts):
            raise TypeError(f"can only merge WordCounts, got {type(other).__name__}")
        if (other.alpha, other.prior, other.n_classes) != (self.alpha, self.prior, self.n_classes):
            raise ValueError("cannot merge counts with other settings (alpha, prior or classes differ)")
        import numpy as np

        width = max(self.n_features_, other.n_features_)
        self.resize(width)
        theirs = other.matrix()
        rows = self._writable_rows()
        self._pad()
        for c, row in enumerate(rows):
            mine = np.frombuffer(row, dtype=np.float64)
            mine[:other.n_features_] += theirs[c]
        self.class_count_ = [a + b for a, b in zip(self.class_count_, other.class_count_)]
        return self

    # -- derived ----------------------------------------------------------
    def derived(self):
        """``(log_count, log_norm, log_prior)``: flat log(N_ci + alpha) (a buffer
        like the counts), and tuples of log(N_c + alpha V) and log P(c)."""
        with self._making:
            return self._derive()

    def _derive(self):
        if self._in_place is not None and self._in_place.changed:
            self._join()
        if self._derived is None:
            from spamnb.bayes.arithmetic import smoothed_logs

            counts = self.matrix()   # V without the holes (zero counts: the sums are the same)
            log_count, log_norm = smoothed_logs(counts, self.alpha, self.n_features_ - self._holes)
            self._derived = (log_count.reshape(-1), tuple(log_norm.tolist()), self._log_prior())
        return self._derived

    def norms(self):
        """``(log_norm, log_prior)`` of :meth:`derived`, without making the
        log-counts (a model file written a piece at a time: :meth:`log_count_pieces`)."""
        if self._derived is not None:
            return self._derived[1:]
        import numpy as np

        from spamnb.bayes.arithmetic import log_norm

        with np.errstate(divide="ignore"):   # smoothed_logs' norm: the class totals of the same matrix
            norm = log_norm(self.matrix().sum(axis=1), self.alpha, self.n_features_ - self._holes)
        return tuple(norm.tolist()), self._log_prior()

    def log_count_pieces(self, size=1 << 16):
        """:meth:`derived`'s flat log-counts, ``size`` values at a time (a new
        float64 array each, the same values: the logarithm is taken element by element)."""
        import numpy as np

        from spamnb.bayes.arithmetic import log_counts

        flat = np.frombuffer(self.feature_count_, dtype=np.float64)
        with np.errstate(divide="ignore"):
            for start in range(0, len(flat), size):
                yield log_counts(flat[start:start + size], self.alpha)

    def _log_prior(self):
        import numpy as np

        from spamnb.bayes.priors import log_prior

        class_count = np.asarray(self.class_count_, dtype=np.float64)
        alpha = np.ones(self.n_classes) if self.prior == "map" else None
        return tuple(log_prior(self.prior, class_count, alpha).tolist())

    def log_theta(self):
        """log theta: float64 ``(n_classes, n_features)`` (see :func:`log_theta`)."""
        from spamnb.bayes.arithmetic import log_theta

        return log_theta(self.matrix(), self.alpha)

    def log_prior(self):
        return self.derived()[2]


class _InPlace:
    """The state of :meth:`WordCounts.extend_in_place`: ``n_base`` tokens in the
    file's flat counts and ``logs``; the side rows of counts of the tokens
    after them, one per class; their logs in one buffer, class c's from
    ``c * stride`` on (``stride`` its capacity per class, doubled when full,
    the free entries log(alpha): a new token's log is there before it is
    counted); the class totals N_c."""

    __slots__ = ("n_base", "logs", "tails", "log_tail", "stride", "log_alpha", "totals", "changed", "holes",
                 "checked")

    def __init__(self, n_base, n_classes, logs, totals, alpha):
        self.n_base, self.logs, self.totals, self.changed = n_base, logs, totals, False
        self.holes, self.checked = 0, False   # tokens forgotten in place; the file's counts have none unused
        self.tails = [array("d") for _ in range(n_classes)]
        self.log_alpha = log(alpha)
        self.log_tail, self.stride = array("d"), 0

    def grow(self, n_tail):
        """Side rows of ``n_tail`` tokens (the new ones count 0)."""
        old = len(self.tails[0])
        if n_tail <= old:
            return
        for row in self.tails:
            row.frombytes(bytes(8 * (n_tail - old)))
        if n_tail > self.stride:   # a new buffer (a scorer may hold the old one): amortised O(1) a token
            stride = max(n_tail, 2 * self.stride, 1024)
            log_tail = array("d", [self.log_alpha]) * (len(self.tails) * stride)
            new, were = memoryview(log_tail), memoryview(self.log_tail)
            for c in range(len(self.tails)):
                new[c * stride:c * stride + old] = were[c * self.stride:c * self.stride + old]
            self.log_tail, self.stride = log_tail, stride

    def log_row(self, c):
        """Class ``c``'s logs of the side rows (a writable view)."""
        return memoryview(self.log_tail)[c * self.stride:c * self.stride + len(self.tails[c])]

    def joined_log_tail(self):
        """The side rows' logs, class after class, as one buffer (a copy)."""
        out = array("d")
        for c in range(len(self.tails)):
            out.frombytes(self.log_row(c).cast("B"))
        return out


def _copy_rows(flat, n_classes, n_features):
    """Writable copies of the class rows of flat counts: ``array('d')`` each."""
    flat = memoryview(flat).cast("B")
    size = 8 * n_features
    rows = []
    for c in range(n_classes):
        row = array("d")
        row.frombytes(flat[c * size:(c + 1) * size])
        rows.append(row)
    return rows


def _from_numpy(values):
    out = array("d")
    out.frombytes(values.tobytes())
    return out
