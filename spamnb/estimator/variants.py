"""A learned model's pair weight chosen on its own mail: the variants ranked by their held-out scores.

A model that grows by learning counts words and word pairs together; when it
scores a message it may weigh the pairs by any ``w`` (``pair_weight``: 0 is
words alone over the same counts).  The log-odds are linear in ``w``::

    log_odds(w) = words + w * pairs

where ``words`` is the log-odds at weight 0 and ``pairs`` the difference made
by the pairs at weight 1 (two scores of the same counts, in one pass of the
compiled kernel: :func:`pair_scores`).  So every variant of :data:`WEIGHTS` has an exact held-out score for
every message learned, from the two numbers taken just before the message was
learned (the prequential view of :mod:`spamnb.estimator.prequential`).

:class:`PairWeightChooser` keeps, per variant and class, a histogram of those
held-out scores (:data:`N_BINS` bins of :data:`BIN_WIDTH` log-odds, wide
enough that pairs at weight 1 rarely reach the ends: a variant whose scores
pile up in an end bin would be ranked on ties), and its running ranking loss:
the share of (ham, spam) pairs of held-out scores in the wrong order (1-AUC,
ties counted half), the loss the online protocol reports.  The variant with
the lowest loss is the weight the model scores with (ties: the one nearest
the default :data:`~spamnb.estimator.defaults.LEARNED_PAIR_WEIGHT`); with fewer
than :data:`MIN_CLASS` held-out scores of a class the default stays.  A
class's counts are halved past :data:`MAX_COUNT`, as the cutoffs' are.

Cost per message: the two scores of one kernel pass (``pair_scores``), and one numpy
binning of ``len(WEIGHTS)`` numbers; per choice (every :data:`CHOOSE_EVERY`
messages) a cumulative sum over ``len(WEIGHTS) x N_BINS`` counts.  Size:
``len(WEIGHTS) x 2 x N_BINS`` doubles (80 KiB).

Measured (scripts/tune/cross_corpus.py ``--mixing``, full feedback): better
than the shipped weight on both shared corpora in their default order, but
worse on SpamAssassin in each of four random orders (it ends at 0.25 in three)
while better on Enron-Spam in each (docs/accuracy.md, "Settings that
travel").  :class:`PairWeightMixture` (below) moves smoothly instead of
flipping; with the ranking loss it wins Enron-Spam's orders and, unscaled,
loses three of SpamAssassin's five by less; rescaled (``rescale``) it is no
worse than the weight 0.5 on both (``cross_corpus.py --variants``).  The
online harness (``run_online(..., variants=...)``) and the tuning script
measure these.

:class:`PairMixture` is the rescaled ranking mixture at ``eta`` 3 as a
learned model ships it: pure Python, its state in the model file (schema 8)
and each learn's two held-out scores in the journal
(``spamnb.persistence.deltas`` PAIR_SCORES), its weight and scale applied by
every scorer (``SpamFilter.pair_scoring``); docs/accuracy.md, "A learned
model's pair weight, chosen on its own mail".
"""

from __future__ import annotations

from array import array

__all__ = ["PairWeightChooser", "PairWeightMixture", "WEIGHTS", "MIXTURE_WEIGHTS", "N_BINS", "BIN_WIDTH", "LOW",
           "MIN_CLASS", "MAX_COUNT", "CHOOSE_EVERY", "ranking_loss", "log_loss", "PairMixture", "SHIPPED_ETA",
           "PAIR_MIXTURE_SIZE", "PAIR_MIXTURE_DEFAULT", "mixture_setting", "gets_mixture",
           "pair_scores", "held_out_score"]

WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
LOW = -512.0
BIN_WIDTH = 1.0
N_BINS = 1024
MIN_CLASS = 50
MAX_COUNT = 20_000.0
CHOOSE_EVERY = 25


def ranking_loss(ham, spam):
    """1-AUC of two histograms over the same bins (ham's, spam's): the share of
    (ham, spam) pairs with the spam in a lower bin, pairs in one bin counted half;
    arrays of shape (..., N_BINS); 0 where a class is empty."""
    import numpy as np

    ham = np.asarray(ham, dtype=np.float64)
    spam = np.asarray(spam, dtype=np.float64)
    n_ham, n_spam = ham.sum(-1), spam.sum(-1)
    above = n_ham[..., None] - np.cumsum(ham, -1)          # ham strictly above each bin
    wrong = (spam * above).sum(-1) + 0.5 * (spam * ham).sum(-1)
    pairs = n_ham * n_spam
    return np.where(pairs > 0, wrong / np.where(pairs > 0, pairs, 1.0), 0.0)


class PairWeightChooser:
    """Held-out scores of each pair weight in :data:`WEIGHTS`, and the weight they favour."""

    __slots__ = ("counts", "weight", "_since")

    def __init__(self, counts=None, weight=None):
        import numpy as np

        from spamnb.estimator.defaults import LEARNED_PAIR_WEIGHT

        shape = (len(WEIGHTS), 2, N_BINS)
        if counts is None:
            counts = np.zeros(shape, dtype=np.float64)
        counts = np.array(counts, dtype=np.float64).reshape(shape)
        if not (np.isfinite(counts).all() and (counts >= 0).all()):
            raise ValueError("a pair-weight chooser's counts must be finite and >= 0")
        self.counts = counts
        self.weight = LEARNED_PAIR_WEIGHT if weight is None else float(weight)
        self._since = 0

    @staticmethod
    def bins(words, pairs):
        """The bin of each variant's score ``words + w * pairs``."""
        import numpy as np

        scores = words + np.asarray(WEIGHTS) * pairs
        scores = np.nan_to_num(scores, nan=0.0, posinf=LOW + N_BINS * BIN_WIDTH, neginf=LOW)
        return np.clip(np.floor((scores - LOW) / BIN_WIDTH), 0, N_BINS - 1).astype(np.intp)

    def add(self, words, pairs, spam, weight=1.0):
        """Count a learned message's held-out scores (``words``: log-odds at pair
        weight 0; ``pairs``: at weight 1 minus ``words``); ``weight`` -1 takes them back.
        Returns the weight to score with now."""
        import math

        import numpy as np

        if not (math.isfinite(words) and math.isfinite(pairs)):
            return self.weight
        c = 1 if spam else 0
        at = (np.arange(len(WEIGHTS)), c, self.bins(words, pairs))
        self.counts[at] = np.maximum(0.0, self.counts[at] + weight)
        if weight > 0 and self.counts[0, c].sum() > MAX_COUNT:
            self.counts *= 0.5
        self._since += 1
        if self._since >= CHOOSE_EVERY:
            self._since = 0
            self.weight = self.choose()
        return self.weight

    def losses(self):
        """Each variant's running ranking loss (1-AUC as a fraction)."""
        return ranking_loss(self.counts[:, 0], self.counts[:, 1])

    def choose(self):
        """The weight of the lowest running loss (ties: nearest the default);
        the default while a class has fewer than :data:`MIN_CLASS` scores."""
        from spamnb.estimator.defaults import LEARNED_PAIR_WEIGHT

        n_ham, n_spam = self.counts[0].sum(-1)
        if min(n_ham, n_spam) < MIN_CLASS:
            return LEARNED_PAIR_WEIGHT
        losses = self.losses()
        best = float(losses.min())
        tied = [w for w, loss in zip(WEIGHTS, losses) if loss <= best]
        return min(tied, key=lambda w: (abs(w - LEARNED_PAIR_WEIGHT), w))


# ---------------------------------------------------------------- a smooth mixture of the weights
MIXTURE_WEIGHTS = tuple(k / 8 for k in range(9))   # 0, 0.125, ..., 1
TEMPERATURES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)   # each weight's log-odds read at these scales
LEARNING_RATE = 0.01    # eta: a variant's share moves by exp(-eta * its cumulative log loss)
PRIOR_WIDTH = 0.25      # the prior over the weights: a Gaussian centred on the shipped weight, this wide


def log_loss(log_odds, spam):
    """-log P(the true class) of logistic(``log_odds``) (arrays), without overflow."""
    import numpy as np

    z = np.asarray(log_odds, dtype=np.float64)
    z = z if spam else -z
    return np.logaddexp(0.0, -z)


class PairWeightMixture:
    """A learned model's pair weight as the posterior mean of exponentially weighted variants.

    The variants are the weights ``w`` of :data:`MIXTURE_WEIGHTS` (0: words
    alone; 1: pairs counted as any token), each scoring a message at
    ``words + w * pairs`` (the same counts: exact held-out scores of every
    variant from the two numbers :class:`PairWeightChooser` takes), each read
    as a probability of spam at every temperature ``T`` of
    :data:`TEMPERATURES`: ``logistic((words + w * pairs) / T)``.  A naive
    Bayes model's log-odds are overconfident, and the more so the more pairs
    weigh; compared at ``T = 1`` the log loss would favour the least
    confident variant, not the best ranked one, so the temperature is a
    nuisance parameter of each variant, marginalised.  Each (weight,
    temperature) carries its cumulative log loss ``L`` over the held-out
    scores of the messages learned (the prequential loss: each message
    scored before it was learned), and the shares are a posterior (Hedge, or
    Bayesian model averaging at learning rate ``eta``)::

        share(w, T)  ~  prior(w) * exp(-eta * L(w, T))
        weight       =  sum over (w, T) of share(w, T) * w

    The model scores with that one weight (the log-odds are linear in it,
    so the mixture of the variants' log-odds is a model at the mean weight).
    ``prior(w)``: a Gaussian of width :data:`PRIOR_WIDTH` centred on the
    shipped weight (flat over ``T``); ``eta`` (:data:`LEARNING_RATE`) below
    1 so the weight moves only when one variant has been cheaper over many
    messages.  Unlike the argmax of :class:`PairWeightChooser`, the weight
    moves smoothly and does not flip.

    ``loss="rank"``: instead of the log loss, each message's prequential
    ranking loss (the share of the other class's earlier held-out scores,
    under that weight, on the wrong side of it: the sum over a stream is
    its misordered pairs, what (1-ROCA) counts), from a histogram per weight
    and class as :class:`PairWeightChooser` keeps (no temperature).
    ``horizon`` H > 0: the losses discounted by ``1 - 1/H`` a message (the
    last ~H messages weigh; a take-back is then approximate).  ``rescale``:
    the log-odds at the mixture's weight are multiplied by :attr:`scale`
    (the mean |held-out log-odds| at the shipped weight over that at the
    current one), so that a weight that moves does not move the scale of
    the scores that the cutoffs and a stream's ranking pool together.

    State: ``len(MIXTURE_WEIGHTS) x len(temperatures)`` cumulative losses
    (doubles; the smallest subtracted after each message so they stay
    bounded relative to one another).  ``add(..., weight=-1)`` takes a
    message's loss back out (a forget, a relabel).  Cost per message: two
    scores (the kernel's) and a few numpy operations on that grid.
    """

    __slots__ = ("losses", "eta", "temperatures", "log_prior", "weights", "weight", "n", "loss", "counts", "keep",
                 "rescale", "spread", "centre")

    def __init__(self, losses=None, eta=LEARNING_RATE, prior_width=PRIOR_WIDTH, temperatures=TEMPERATURES,
                 centre=None, weights=MIXTURE_WEIGHTS, loss="log", horizon=0, rescale=False):
        import numpy as np

        from spamnb.estimator.defaults import LEARNED_PAIR_WEIGHT

        if loss not in ("log", "rank"):
            raise ValueError(f"loss must be log or rank, not {loss!r}")
        self.loss = loss
        self.weights = np.asarray(weights, dtype=np.float64)
        if loss == "rank":   # a ranking does not see a temperature
            temperatures = (1.0,)
            self.counts = np.zeros((self.weights.size, 2, N_BINS))
        else:
            self.counts = None
        self.temperatures = np.asarray(temperatures, dtype=np.float64)
        shape = (self.weights.size, self.temperatures.size)
        if losses is None:
            losses = np.zeros(shape)
        losses = np.array(losses, dtype=np.float64).reshape(shape)
        if not np.isfinite(losses).all():
            raise ValueError("a pair-weight mixture's losses must be finite")
        if not (eta >= 0 and prior_width > 0 and (self.temperatures > 0).all()):
            raise ValueError("eta >= 0, prior_width > 0 and temperatures > 0")
        self.losses = losses
        self.eta = float(eta)
        if horizon < 0:
            raise ValueError("horizon must be >= 0 (0: no discount)")
        self.keep = 1.0 - 1.0 / horizon if horizon else 1.0   # each message's loss discounted by this per message
        centre = LEARNED_PAIR_WEIGHT if centre is None else float(centre)
        self.centre = centre
        self.rescale = bool(rescale)
        self.spread = np.zeros(self.weights.size)   # each weight's sum of |held-out log-odds|
        self.log_prior = (-0.5 * ((self.weights - centre) / float(prior_width)) ** 2)[:, None]
        self.n = 0
        self.weight = self.mean()

    def shares(self):
        """Each (weight, temperature)'s share of the posterior (sums to 1)."""
        import numpy as np

        logits = self.log_prior - self.eta * self.losses
        logits -= logits.max()
        p = np.exp(logits)
        return p / p.sum()

    def mean(self):
        """The posterior mean weight."""
        return float(self.shares().sum(axis=1) @ self.weights)

    def add(self, words, pairs, spam, weight=1.0):
        """Count a learned message's held-out loss for every variant (``words``:
        log-odds at pair weight 0; ``pairs``: at weight 1 minus ``words``);
        ``weight`` -1 takes it back.  Returns the weight to score with now."""
        import math

        import numpy as np

        if not (math.isfinite(words) and math.isfinite(pairs)):
            return self.weight
        if weight > 0 and self.keep != 1.0:
            self.losses *= self.keep
        self.spread += weight * np.abs(words + self.weights * pairs)
        if self.loss == "rank":
            self.losses[:, 0] += weight * self._rank_loss(words, pairs, bool(spam), weight)
        else:
            scores = (words + self.weights * pairs)[:, None] / self.temperatures[None, :]
            self.losses += weight * log_loss(scores, bool(spam))
        self.losses -= self.losses.min()
        self.n += 1 if weight > 0 else -1
        self.weight = self.mean()
        return self.weight

    def _rank_loss(self, words, pairs, spam, weight):
        """Each weight's prequential ranking loss of one message: the share of the
        other class's earlier held-out scores (under that weight) on the wrong
        side of this one (ties half; 0 while the other class has fewer than
        :data:`MIN_CLASS`); the message's scores then join the histograms."""
        import numpy as np

        scores = words + self.weights * pairs
        scores = np.nan_to_num(scores, nan=0.0, posinf=LOW + N_BINS * BIN_WIDTH, neginf=LOW)
        bins = np.clip(np.floor((scores - LOW) / BIN_WIDTH), 0, N_BINS - 1).astype(np.intp)
        rows = np.arange(self.weights.size)
        other = self.counts[:, 0 if spam else 1]
        n_other = other[0].sum()
        loss = np.zeros(self.weights.size)
        if n_other >= MIN_CLASS:
            below = np.cumsum(other, axis=1)                   # the other class at or below each bin
            at = other[rows, bins]
            if spam:    # ham above this spam is wrong
                wrong = n_other - below[rows, bins] + 0.5 * at
            else:       # spam below this ham is wrong
                wrong = below[rows, bins] - at + 0.5 * at
            loss = wrong / n_other
        c = 1 if spam else 0
        self.counts[rows, c, bins] = np.maximum(0.0, self.counts[rows, c, bins] + weight)
        if weight > 0 and self.counts[0, c].sum() > MAX_COUNT:
            self.counts *= 0.5
        return loss

    @property
    def scale(self):
        """What the log-odds at the mixture's weight are multiplied by (``rescale``):
        the mean |held-out log-odds| at the centre weight over that at the current
        weight, so that a weight that moves does not move the scale of the scores
        (1 without ``rescale`` or evidence)."""
        import numpy as np

        if not self.rescale or self.n <= 0:
            return 1.0
        at_centre = float(np.interp(self.centre, self.weights, self.spread))
        at_weight = float(np.interp(self.weight, self.weights, self.spread))
        return at_centre / at_weight if at_weight > 0 and at_centre > 0 else 1.0


# ---------------------------------------------------------------- the mixture a learned model carries
SHIPPED_ETA = 3.0   # rank-scaled:3 (docs/notes/2026-11-29-variant-mixture.md)
PAIR_MIXTURE_DEFAULT = True   # models that grow by learning get one unless SPAMNB_PAIR_MIXTURE="0"
_NW = len(MIXTURE_WEIGHTS)
_STATE_SIZE = 1 + 2 * _NW + _NW * 2 * N_BINS   # n, losses, spread, counts
_WEIGHTS_ARRAY = array("d", MIXTURE_WEIGHTS)   # the compiled count's (read only)
PAIR_MIXTURE_SIZE = _STATE_SIZE


class PairMixture:
    """The pair-weight mixture a learned model keeps in its file and applies
    when it scores (schema version 8): :class:`PairWeightMixture` with the
    ranking loss, ``eta`` :data:`SHIPPED_ETA`, the prior of width
    :data:`PRIOR_WIDTH` centred on the model's own ``pair_weight``, and
    ``rescale``, in pure Python (``array``: a learn of ``spamnb learn``
    imports no numpy), on the same arithmetic (the histograms' counts are
    integers or halves of them, so their sums are exact in any order).

    :attr:`weight` and :attr:`scale`: what the model scores with (the
    log-odds at ``pair_weight = weight`` times ``scale``); with no evidence
    (:attr:`n` 0) exactly the centre and 1, so a model with the mixture's
    prior scores as one without it.  :meth:`add` counts a learned message's
    two held-out scores (log-odds at pair weight 0, and at 1 minus that).

    State (:meth:`to_array`, the model file's array ``pair_mixture``):
    ``n``, the losses and the sums of |held-out log-odds| of each weight of
    :data:`MIXTURE_WEIGHTS`, then ``len(MIXTURE_WEIGHTS) x 2 x N_BINS``
    histogram counts: 18,451 doubles (144 KiB), whatever the mail learned.
    A model read from its file keeps the state unread (:meth:`stored`: the
    weight and scale come from the header and from the journal's records)
    until a learn needs it.
    """

    __slots__ = ("centre", "n", "losses", "spread", "counts", "weight", "scale", "_log_prior", "_loader",
                 "_pending", "_added")

    def __init__(self, centre=None, state=None):
        from spamnb.estimator.defaults import LEARNED_PAIR_WEIGHT

        self.centre = LEARNED_PAIR_WEIGHT if centre is None else float(centre)
        self._log_prior = _log_prior(self.centre)
        self._loader, self._pending = None, []
        self._set_state(state)

    @classmethod
    def stored(cls, centre, weight, scale, n, loader):
        """A mixture read from a model file: ``weight``, ``scale`` and ``n`` as its
        header has them, the state read by ``loader()`` (an ``array('d')``) when
        a learn needs it (:meth:`state`)."""
        self = cls.__new__(cls)
        self.centre = float(centre)
        self._log_prior = _log_prior(self.centre)
        self.weight, self.scale, self.n = float(weight), float(scale), int(n)
        self.losses = self.spread = self.counts = None
        self._loader, self._pending = loader, []
        self._added = 0
        if not (0.0 <= self.weight <= 1.0 and 0.0 < self.scale < 1e6 and self.n >= 0):
            raise ValueError("a pair-weight mixture's weight, scale or count is out of range")
        return self

    def _set_state(self, state):
        import math
        from array import array

        if state is None:
            state = array("d", bytes(8 * _STATE_SIZE))
        if isinstance(state, memoryview):   # a model file's array
            raw, state = state, array("d")
            state.frombytes(raw.cast("B"))
        else:
            state = array("d", state)
        if len(state) != _STATE_SIZE:
            raise ValueError(f"a pair-weight mixture holds {_STATE_SIZE} numbers, not {len(state)}")
        if not (min(state) >= 0 and math.isfinite(sum(state))):   # NaN fails both
            raise ValueError("a pair-weight mixture's state must be finite and >= 0")
        if state[0] != int(state[0]):
            raise ValueError("a pair-weight mixture's count of messages must be whole")
        self.n = int(state[0])
        self.losses = state[1:1 + _NW]
        self.spread = state[1 + _NW:1 + 2 * _NW]
        self.counts = state[1 + 2 * _NW:]
        self._added = 0
        self._settle()
        if not (0.0 < self.scale < 1e6 and 0.0 <= self.weight <= 1.0):
            raise ValueError("a pair-weight mixture's state gives a scale or weight out of range")

    def state(self):
        """Read the state a :meth:`stored` mixture left unread, and apply the
        journal's records noted meanwhile (:meth:`note`).  Returns self."""
        if self.counts is None:
            loader, pending = self._loader, self._pending
            try:
                self._set_state(loader())
            except ValueError as exc:   # a crafted or damaged file: its checksum holds, its numbers do not
                from spamnb.errors import ModelError

                raise ModelError(f"the model's pair-weight mixture is damaged ({exc})") from None
            self._loader, self._pending = None, []
            for words, pairs, spam in pending:
                self.add(words, pairs, spam)
        return self

    def copy(self):
        """A mixture of its own (its state read)."""
        self.state()
        return PairMixture(self.centre, self.to_array())

    def to_array(self):
        """The state as the model file keeps it (``array('d')``)."""
        from array import array

        self.state()
        out = array("d", [float(self.n)])
        out.extend(self.losses)
        out.extend(self.spread)
        out.extend(self.counts)
        return out

    def header(self):
        """What the model file's header keeps of it (``pair_mixture``)."""
        return {"centre": self.centre, "weight": self.weight, "scale": self.scale, "n": self.n}

    def _settle(self):
        """:attr:`weight` and :attr:`scale` from the state (as PairWeightMixture.mean and .scale)."""
        import math

        if self.n <= 0:
            self.weight, self.scale = self.centre, 1.0
            return
        logits = [p - SHIPPED_ETA * loss for p, loss in zip(self._log_prior, self.losses)]
        top = max(logits)
        p = [math.exp(v - top) for v in logits]
        total = math.fsum(p)
        self.weight = math.fsum(pi / total * w for pi, w in zip(p, MIXTURE_WEIGHTS))
        at_centre, at_weight = _interp(self.centre, self.spread), _interp(self.weight, self.spread)
        self.scale = at_centre / at_weight if at_weight > 0 and at_centre > 0 else 1.0

    def note(self, words, pairs, spam, weight, scale):
        """A journal's record of a learn that counted ``words``, ``pairs`` and left
        the mixture at ``weight``, ``scale``: counted now when the state is
        read, else kept for :meth:`state` (a reader that only scores takes the
        record's weight and scale)."""
        import math

        if self.counts is not None:
            return self.add(words, pairs, spam)
        if not (math.isfinite(words) and math.isfinite(pairs)):
            return self.weight
        self._pending.append((words, pairs, spam))
        self.weight, self.scale, self.n = float(weight), float(scale), self.n + 1
        return self.weight

    def add(self, words, pairs, spam, weight=1.0):
        """Count a learned message's held-out scores: ``words`` its log-odds at pair
        weight 0, ``pairs`` at weight 1 minus ``words`` (``weight`` -1: taken
        back, as PairWeightMixture.add).  Returns the new weight."""
        import math

        if not (math.isfinite(words) and math.isfinite(pairs)):
            return self.weight
        self.state()
        self._added += 1
        if self._added > 1:   # more than one message in this process (a replay, the online protocol)
            return self._add_compiled(words, pairs, spam, weight)
        spam = bool(spam)
        bins = []
        for k, w in enumerate(MIXTURE_WEIGHTS):
            s = words + w * pairs
            self.spread[k] += weight * abs(s)
            b = math.floor((s - LOW) / BIN_WIDTH) if math.isfinite(s) else (0 if s < 0 else N_BINS - 1)
            bins.append(min(max(int(b), 0), N_BINS - 1))
        other = 0 if spam else 1
        counts = self.counts
        n_other = sum(counts[other * N_BINS:(other + 1) * N_BINS])   # weight 0's row: each row's total
        if n_other >= MIN_CLASS:
            for k, b in enumerate(bins):
                start = (k * 2 + other) * N_BINS
                below = sum(counts[start:start + b + 1])   # the other class at or below this bin
                at = counts[start + b]
                wrong = (n_other - below + 0.5 * at) if spam else (below - at + 0.5 * at)
                self.losses[k] += weight * (wrong / n_other)
        low = min(self.losses)
        for k in range(_NW):
            self.losses[k] -= low
        mine = 1 if spam else 0
        for k, b in enumerate(bins):
            j = (k * 2 + mine) * N_BINS + b
            counts[j] = max(0.0, counts[j] + weight)
        if weight > 0 and sum(counts[mine * N_BINS:(mine + 1) * N_BINS]) > MAX_COUNT:
            for j in range(len(counts)):
                counts[j] *= 0.5
        self.n += 1 if weight > 0 else -1
        self._settle()
        return self.weight

    def _add_compiled(self, words, pairs, spam, weight):
        """:meth:`add` in two compiled calls (``token_kernels.mixture_add`` and
        ``mixture_settle``, the same operations in the same order), for a
        process that counts more than one message."""
        global token_kernels
        if token_kernels is None:   # imported once, not a message
            from spamnb.bayes import token_kernels

        token_kernels.mixture_add(self.counts, self.losses, self.spread, _WEIGHTS_ARRAY, float(words),
                                  float(pairs), bool(spam), float(weight), float(LOW), float(BIN_WIDTH), N_BINS,
                                  float(MIN_CLASS), float(MAX_COUNT))
        self.n += 1 if weight > 0 else -1
        if self.n <= 0:
            self._settle()
        else:   # _settle's arithmetic, compiled
            self.weight, self.scale = token_kernels.mixture_settle(self.losses, self.spread, self._log_prior,
                                                                   _WEIGHTS_ARRAY, SHIPPED_ETA, self.centre)
        return self.weight

    def describe(self):
        """A line for ``spamnb info``: the weight, the scale, the messages counted."""
        if self.n <= 0:
            return f"{self.weight:g} (the prior: no held-out message counted yet)"
        return (f"{self.weight:.4f}, chosen on the model's own mail ({self.n} held-out messages; "
                f"log-odds x {self.scale:.4f}, the spread at {self.centre:g})")


token_kernels = None   # spamnb.bayes.token_kernels, imported by PairMixture._add_compiled's first call


def _log_prior(centre):
    """The mixture's log prior over :data:`MIXTURE_WEIGHTS`: a Gaussian of
    width :data:`PRIOR_WIDTH` centred on ``centre`` (an ``array('d')``, as the
    compiled settle takes it)."""
    return array("d", [-0.5 * ((w - centre) / PRIOR_WIDTH) ** 2 for w in MIXTURE_WEIGHTS])


def mixture_setting():
    """Whether models that grow by learning choose their pair weight on their own
    mail: the environment's ``SPAMNB_PAIR_MIXTURE`` ("1" on, "0" off), else
    :data:`PAIR_MIXTURE_DEFAULT`."""
    import os

    value = os.environ.get("SPAMNB_PAIR_MIXTURE", "")
    return PAIR_MIXTURE_DEFAULT if value == "" else value not in ("0", "off", "no")


def gets_mixture(spam_filter):
    """Whether ``spam_filter``, which has no pair-weight mixture, is given one (the
    prior, :class:`PairMixture`): the setting is on (:func:`mixture_setting`) and it
    is a model that grows by learning (its cutoffs fitted on its held-out
    scores, word pairs in its tokens, no message features)."""
    return (mixture_setting() and spam_filter.cutoff_source_ == "held-out"
            and spam_filter.tokenizer_.settings.get("word_pairs", 0) > 0 and not spam_filter.feature_weight)


def pair_scores(kernel, hashes, pairs_start):
    """A message's two held-out scores: ``(words, pairs)``, its log-odds at pair
    weight 0 and the difference made by the pairs at weight 1, both from one
    pass of ``kernel.pair_sums`` (the compiled ``token_kernels.Scorer``'s, a
    ``spamnb.estimator.scoring.FileScorer``'s or a journal view's: the
    class sums at weight 0 and at 1 over the same counts, bit for bit those
    of two scores by kernels at those weights; the kernel's own weight and
    scale take no part); ``words`` may be infinite (then ``pairs`` 0)."""
    import math

    jll_words, jll_all = kernel.pair_sums(hashes, pairs_start)
    words = jll_words[1] - jll_words[0]
    pairs = jll_all[1] - jll_all[0] - words if math.isfinite(words) else 0.0
    return words, pairs


def held_out_score(words, pairs, weight, scale):
    """The log-odds a model scoring at pair ``weight`` and ``scale`` gives a message
    whose two held-out scores are ``words``, ``pairs`` (as the online harness
    computes it: ``spamnb.evaluation.online.OnlineModel``)."""
    import math

    return (words + weight * pairs) * scale if math.isfinite(words) else words


def _interp(x, values):
    """numpy.interp(x, MIXTURE_WEIGHTS, values) for x within the grid."""
    grid = MIXTURE_WEIGHTS
    if x <= grid[0]:
        return values[0]
    if x >= grid[-1]:
        return values[-1]
    j = 0
    while grid[j + 1] < x:
        j += 1
    if x == grid[j + 1]:
        return values[j + 1]
    slope = (values[j + 1] - values[j]) / (grid[j + 1] - grid[j])
    return slope * (x - grid[j]) + values[j]
