"""The SpamFilter's hyper-parameters: their defaults, the figures that settled
them, the table of them (``PARAMS``: what ``SpamFilter.get_params`` returns,
``SpamFilter.from_params`` takes, a model file and a dump store), and the one
check of a set of them (``check_params``: the SpamFilter and the online filter
of ``spamnb.evaluation.online`` share it); and the held-out histogram's bins
with the two rules a learn and the histogram both apply (``held_out_bin``,
``counts_scores``), and where a filter's cutoffs came from (``cutoffs_from``)."""

from spamnb.bayes import token_kernels
from spamnb.bayes.token_kernels import exp, isfinite

CLASSES = ["ham", "spam"]   # the class indices (persistence/schema stores them)
COUNT_TRANSFORMS = {"raw": token_kernels.COUNTS_RAW, "binary": token_kernels.COUNTS_BINARY,
                    "log": token_kernels.COUNTS_LOG}
# the held-out histogram's bins (estimator/prequential): log-odds from -64 to 64, 0.25 wide
HELD_OUT_LOW, HELD_OUT_HIGH, HELD_OUT_BIN_WIDTH = -64.0, 64.0, 0.25
HELD_OUT_BINS = int((HELD_OUT_HIGH - HELD_OUT_LOW) / HELD_OUT_BIN_WIDTH)      # 512
PRIORS = ("mle", "map", "uniform")
# A held-out score counts only when the model that gave it had learned this many messages of
# each class: a model of one class (a folder of ham learned before any spam) gives
# scores that say nothing of the model it becomes (infinite under the "mle" prior).
MIN_CLASS = 50


def counts_scores(class_count):
    """Whether a model with ``class_count`` ([ham, spam] messages) gives scores worth counting."""
    return min(class_count) >= MIN_CLASS


def cutoffs_from(spam_filter):
    """Where a filter's cutoffs came from: "train" (cross-validated by ``fit``),
    "held-out" (fitted by ``spamnb.estimator.prequential`` on the scores learned
    messages had before each was learned), "given" or "defaults".  Here, not
    there: a classify through a journal asks it, and needs that module only
    when the cutoffs follow the journal's scores."""
    if spam_filter.cutoff_source_ is not None:
        return spam_filter.cutoff_source_
    if spam_filter.spam_cutoff == DEFAULT_SPAM_CUTOFF and spam_filter.ham_cutoff == DEFAULT_HAM_CUTOFF:
        return "defaults"
    return "given"   # a file older than schema 5: train's or the user's, not told apart


def held_out_bin(log_odds):
    """The bin of ``spamnb.estimator.prequential``'s histogram a held-out score
    falls in (a ledger entry notes it), None for NaN (no evidence).  Here, beside
    the bins, so that neither a learn of one message (no ``prequential``) nor a
    classify through the journal (no ``ledger``) imports more than it uses."""
    if log_odds != log_odds:
        return None
    # floor by // 1.0 (the same integer as math.floor of a finite float): a learn loads no math module
    i = int(((log_odds - HELD_OUT_LOW) / HELD_OUT_BIN_WIDTH) // 1.0) if isfinite(log_odds) else (
        0 if log_odds < 0 else HELD_OUT_BINS - 1)
    return min(max(i, 0), HELD_OUT_BINS - 1)


# Defaults, chosen by 5-fold cross-validation on the TRAIN part of the fixed split
# (a script since retired; figures in docs/filter.md).
# -- alpha and counts: log(1 + count) with alpha 0.01 had the lowest CV 1-AUC
#    (0.0313 %; binary 0.0316 %, alpha 0.1: 0.0480 %, alpha 0.003: 0.0317 %)
#    without length normalisation; with it (below) alpha 0.001: alpha / length
#    is what ranks, and 0.001 / 5 won on both corpora (docs/accuracy.md).
DEFAULT_ALPHA = 0.001
DEFAULT_COUNTS = "log"
# -- prior: MLE and Dirichlet MAP give the same figures to the precision shown.
DEFAULT_PRIOR = "mle"
# -- cutoffs: spam at log-odds >= 14 (P >= 0.9999992) is the lowest cutoff whose CV
#    false-positive rate is <= 0.1 % (0.091 %; spam missed 5.45 %, unsure counted as
#    missed); ham at log-odds <= -4 (P <= 0.018), unsure in between.  With length
#    normalisation the scores of both classes sit closer to 0: at log-odds 0 the
#    held-out spam at or below the cutoff rose (SpamAssassin 2.66 -> 3.06 %), at -4
#    the held-out ham above it is where log-odds 0 had it before (0.33 %) and the
#    spam below it lower (2.26 %): 5-fold CV inside the train part, docs/accuracy.md.
DEFAULT_SPAM_CUTOFF = 0.9999992
DEFAULT_HAM_LOG_ODDS = -4.0
DEFAULT_HAM_CUTOFF = 1.0 / (1.0 + exp(-DEFAULT_HAM_LOG_ODDS))   # P = 0.018
# -- length_norm: 5 (with alpha 0.001).  Scaling each message's log counts to
#    Euclidean length 5 lowered the 5-fold CV 1-AUC on the train part of BOTH
#    corpora (SpamAssassin 0.0441 -> 0.0259 %, 4 wins / 0 losses; Enron-Spam
#    0.1421 -> 0.1110 %, 5/0; docs/accuracy.md, "The default since ...").
#    A model file keeps the settings it was written with (0 when it has none).
DEFAULT_LENGTH_NORM = 5.0
# -- pair_weight: what a word pair's value (log count, scaled to length with the
#    message's other tokens) is multiplied by when a message is scored; counting is
#    unchanged.  1 (pairs count as any token) for ``spamnb train``, whose trial
#    between words alone and pairs is by cross-validation.  A model that grows by
#    learning from empty (``spamnb learn``, a move, TELL) is made with pairs of
#    window LEARNED_WORD_PAIRS at weight LEARNED_PAIR_WEIGHT: online, full feedback
#    from an empty model, (1-ROCA) % against words alone SpamAssassin 0.1642 ->
#    0.1319, Enron-Spam 0.2265 -> 0.1239 in the default order, 4 wins / 1 loss and
#    5 / 0 over it and four random orders (docs/accuracy.md, "Word pairs online").
DEFAULT_PAIR_WEIGHT = 1.0
LEARNED_WORD_PAIRS = 2
# -- training's choices (spamnb.estimator.calibrate, which names them too): the
#    false-positive rate the cutoffs aim at, and the window of the word pairs
#    ``spamnb train --word-pairs auto`` tries (docs/accuracy.md: window 3 ranked
#    worse than 2 on both corpora).  Here, not only there: SpamFilter.fit's
#    defaults, and a cold ``spamnb classify`` does not import the calibration.
DEFAULT_TARGET_FPR = 0.001
AUTO_PAIRS = 2
LEARNED_PAIR_WEIGHT = 0.5
MAX_PAIR_WEIGHT = 1e3
DEFAULT_EVIDENCE = 10
MAX_EVIDENCE = 1000
# Ranges a model's settings must lie in (a dump, a model file and the library
# are checked alike: a value outside would make every score NaN or infinite,
# e.g. length_norm 1e308 overflows the counts).  Far beyond any value tuned
# (alpha 0.001 .. 1, length_norm 0 .. 100, feature_weight 0 .. 10).
MAX_ALPHA = 1e3
MAX_LENGTH_NORM = 1e6
MAX_FEATURE_WEIGHT = 1e6

# The hyper-parameters, in the SpamFilter constructor's order: name -> (default,
# the type a model file stores it as, the value of a file written before it
# existed: None when every file has it).  The one list of them: the model file
# (``spamnb.persistence.codec``), merge/prune and the dump (``spamnb.model.lifecycle``,
# ``spamnb.model.dumpfile``) all read and write ``SpamFilter.get_params()``.
PARAMS = {
    "alpha": (DEFAULT_ALPHA, float, None),
    "prior": (DEFAULT_PRIOR, str, None),
    "counts": (DEFAULT_COUNTS, str, None),
    "spam_cutoff": (DEFAULT_SPAM_CUTOFF, float, None),
    "ham_cutoff": (DEFAULT_HAM_CUTOFF, float, None),
    "n_evidence": (DEFAULT_EVIDENCE, int, None),
    "feature_weight": (0.0, float, None),
    "length_norm": (DEFAULT_LENGTH_NORM, float, 0.0),   # files before it: no normalisation
    "pair_weight": (DEFAULT_PAIR_WEIGHT, float, 1.0),   # files before it (schema 6 and older): 1
}


def params_of(obj):
    """``{name: value}`` of every hyper-parameter of ``obj`` (a SpamFilter), as a
    model file stores it (plain float, str, int)."""
    return {name: kind(getattr(obj, name)) for name, (_default, kind, _before) in PARAMS.items()}


def stored_params(stored):
    """The constructor's keyword arguments from a model file's or a dump's
    ``params`` (a dict): a name it lacks takes the value of a file written
    before that parameter existed (KeyError for a name every file has);
    names that are not hyper-parameters are left out."""
    return {name: stored[name] if name in stored or before is None else before
            for name, (_default, _kind, before) in PARAMS.items()}


def are_params(names):
    """True when ``names`` are hyper-parameters, every one a model file must have among them."""
    names = set(names)
    return names <= set(PARAMS) and all(name in names for name, (_d, _k, before) in PARAMS.items()
                                        if before is None)


def check_params(alpha, prior, counts, length_norm, ham_cutoff=0.0, spam_cutoff=1.0, n_evidence=0,
                 feature_weight=0.0, pair_weight=DEFAULT_PAIR_WEIGHT):
    """ValueError naming the first hyper-parameter out of its range."""
    if not (_number(alpha) and 0 < alpha <= MAX_ALPHA):
        raise ValueError(f"alpha must be a number > 0 and <= {MAX_ALPHA:g}, got {alpha!r}")
    if prior not in PRIORS:
        raise ValueError(f"prior must be one of {PRIORS}, got {prior!r}")
    if counts not in COUNT_TRANSFORMS:
        raise ValueError(f"counts must be one of {tuple(COUNT_TRANSFORMS)}, got {counts!r}")
    if not (_number(ham_cutoff) and _number(spam_cutoff) and 0.0 <= ham_cutoff <= spam_cutoff <= 1.0):
        raise ValueError("cutoffs must satisfy 0 <= ham_cutoff <= spam_cutoff <= 1")
    if isinstance(n_evidence, bool) or not isinstance(n_evidence, int) or not 0 <= n_evidence <= MAX_EVIDENCE:
        raise ValueError(f"n_evidence must be an integer from 0 to {MAX_EVIDENCE}, got {n_evidence!r}")
    if not (_number(feature_weight) and 0 <= feature_weight <= MAX_FEATURE_WEIGHT):
        raise ValueError(f"feature_weight must be a number from 0 to {MAX_FEATURE_WEIGHT:g}, got {feature_weight!r}")
    if not (_number(length_norm) and 0 <= length_norm <= MAX_LENGTH_NORM):
        raise ValueError(f"length_norm must be a number from 0 to {MAX_LENGTH_NORM:g}, got {length_norm!r}")
    if not (_number(pair_weight) and 0 <= pair_weight <= MAX_PAIR_WEIGHT):
        raise ValueError(f"pair_weight must be a number from 0 to {MAX_PAIR_WEIGHT:g}, got {pair_weight!r}")


def _number(value):
    """A finite int or float (not a bool, not NaN)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and isfinite(value)


def new_counts(spam_filter):
    """An empty count model (``WordCounts``) of the filter's alpha and prior."""
    from spamnb.bayes.wordcounts import WordCounts

    return WordCounts(float(spam_filter.alpha), spam_filter.prior, len(CLASSES))
