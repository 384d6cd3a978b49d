"""A learned model's pair weight chosen on its own mail: the variants ranked by their held-out scores.

A model that grows by learning counts words and word pairs together; when it
scores a message it may weigh the pairs by any ``w`` (``pair_weight``: 0 is
words alone over the same counts).  The log-odds are linear in ``w``::

    log_odds(w) = words + w * pairs

where ``words`` is the log-odds at weight 0 and ``pairs`` the difference made
by the pairs at weight 1 (two scores of the same counts, each by the compiled
kernel).  So every variant of :data:`WEIGHTS` has an exact held-out score for
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

Cost per message: two scores instead of one (the kernel's), and one numpy
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
worse than the shipped weight on both (``cross_corpus.py --variants``).
Neither is shipped: not in the model file nor in ``spamnb learn``'s path;
the online harness (``run_online(..., variants=...)``) and the tuning
script measure them.
"""

from __future__ import annotations

__all__ = ["PairWeightChooser", "PairWeightMixture", "WEIGHTS", "MIXTURE_WEIGHTS", "N_BINS", "BIN_WIDTH", "LOW",
           "MIN_CLASS", "MAX_COUNT", "CHOOSE_EVERY", "ranking_loss", "log_loss"]

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
