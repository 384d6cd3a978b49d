"""The one verdict rule: a message's score and evidence -> "spam", "unsure" or "ham".

``SpamFilter.classify`` (one message) and ``spamnb.evaluation.crossval`` (arrays) both call
:func:`decide` / :func:`decide_many`; the rule is written once, in
:func:`_spam_ham`, with operators that work on floats and on numpy arrays alike.

A message's log-odds is the class prior's log ratio plus the sum of its known
tokens' weights ``w_i = x_i (log theta_spam,i - log theta_ham,i)``.  Besides
the log-odds the rule reads two sums of those weights: the *spam evidence*
``sum(w_i for w_i > 0)`` and the *ham evidence* ``sum(w_i for w_i < 0)`` (<= 0).

- **spam** when P(spam) >= ``spam_cutoff`` (as before);
- **ham** when P(spam) <= ``ham_cutoff`` *and* the message has evidence
  (``spam_evidence - ham_evidence >= MIN_EVIDENCE``: a message of unknown tokens
  is not ham because the prior leans to ham) *and* it is not conflicted: its
  spam evidence is below ``CONFLICT`` and no one of its text parts, scored on
  its own, leans to spam by ``PART_SPAM`` or more (``part_max``: the largest sum
  of a text part's token weights; +inf when the byte limit cut the message
  before any text part).  Strong spam words next to strong ham words,
  as in a good-word attack (a paragraph of ordinary mail as a first part), do
  not cancel out into "ham";
- **unsure** otherwise.

The constants were chosen on the train part of the fixed split (figures and the
cost on clean mail in docs/reliability.md, "Attacks").
"""

from spamnb.bayes.token_kernels import INF, exp, log


__all__ = ["MIN_EVIDENCE", "CONFLICT", "PART_SPAM", "REASONS", "Cutoffs", "EvidenceSums", "MessageScore",
           "probability", "logit", "probabilities", "decide", "decide_many", "part_max", "evidence_sums", "reason",
           "verdict_of", "TupleRecord", "field"]

# Chosen by 5-fold cross-validation on the train part of the fixed split of
# both corpora (python scripts/tune/tune_verdict.py; among the held-out ham that the
# cutoffs call ham, the share each constant moves to unsure, SpamAssassin /
# Enron-Spam):
# - a ham verdict needs this much evidence (sum of |w_i|, nats); that ham's 0.1 %
#   quantile was 46.3 / 3.4, a message of only unknown tokens has 0;
MIN_EVIDENCE = 5.0
# - spam evidence at or above which a message is never ham: 0.33 % / 0.00 % (that
#   ham's largest was 95.3 / 60.9);
CONFLICT = 80.0
# - a text part whose own weights sum to this much (nats, no prior) keeps a
#   message from being ham: 0 ("no text part leans to spam on its own") costs
#   0.85 % / 0.42 % of that ham (8: 0.36 % / 0.01 %), and under the good-word
#   attack on Enron-Spam's test spam leaves 3.9 % ham where 8 left 11.9 %
#   (4: 7.8 %, 2: 5.8 %).
PART_SPAM = 0.0


def probability(log_odds):
    """sigmoid(log_odds) of one float, without overflow."""
    if log_odds >= 0:
        return 1.0 / (1.0 + exp(-log_odds))
    z = exp(log_odds)
    return z / (1.0 + z)


def logit(p):
    """log(p / (1 - p)), the log-odds of a probability; -inf at 0 and +inf at 1."""
    if p <= 0.0:
        return -INF
    if p >= 1.0:
        return INF
    return log(p / (1.0 - p))


def probabilities(log_odds):
    """sigmoid(log_odds) of an array, without overflow: float64 array."""
    import numpy as np

    lo = np.asarray(log_odds, dtype=np.float64)
    p = np.empty_like(lo)
    pos = lo >= 0
    p[pos] = 1.0 / (1.0 + np.exp(-lo[pos]))
    z = np.exp(lo[~pos])
    p[~pos] = z / (1.0 + z)
    return p


def field(index):
    """The property that reads a :class:`TupleRecord`'s field ``index``: a
    function of its own, not ``operator.itemgetter`` (whose module, ``_operator``,
    a cold ``spamnb classify`` would load for nothing else)."""
    return property(lambda self: self[index])


class TupleRecord(tuple):
    """The base of this module's records: a tuple whose fields are named by the
    subclass's ``_fields`` (its properties read them), as a
    ``collections.namedtuple``'s are, with its ``_replace``, ``_asdict``,
    ``_make``, repr, equality and pickling.  Written out, not made by
    ``namedtuple``: that builds two classes and ``eval``s a ``__new__`` for
    each record type, 0.5 million instructions apiece of a cold ``spamnb
    classify``; a subclass here is one class statement."""

    __slots__ = ()
    _fields = ()

    @classmethod
    def _make(cls, iterable):
        made = tuple.__new__(cls, iterable)
        if len(made) != len(cls._fields):
            raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(made)}")
        return made

    def _replace(self, **changes):
        made = self._make(changes.pop(name, value) for name, value in zip(self._fields, self))
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return made

    def _asdict(self):
        return dict(zip(self._fields, self))

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, self)) + ")"

    def __getnewargs__(self):
        return tuple(self)


class Cutoffs(TupleRecord):
    """A filter's two cutoffs, as probabilities: spam when P(spam) >= ``spam``,
    ham (evidence permitting) when P(spam) <= ``ham``; ``ham <= spam``."""

    __slots__ = ()
    _fields = __match_args__ = ("spam", "ham")
    spam, ham = field(0), field(1)

    def __new__(cls, spam, ham):
        return tuple.__new__(cls, (spam, ham))


class EvidenceSums(TupleRecord):
    """What the rule reads of a message besides its log-odds: ``spam`` the sum
    of its positive token weights, ``ham`` of its negative ones (<= 0),
    ``part_max`` the largest sum of one text part's weights (None when not
    computed).  Floats, or numpy arrays of many messages (:func:`decide_many`)."""

    __slots__ = ()
    _fields = __match_args__ = ("spam", "ham", "part_max")
    spam, ham, part_max = field(0), field(1), field(2)

    def __new__(cls, spam, ham, part_max):
        return tuple.__new__(cls, (spam, ham, part_max))


class MessageScore(TupleRecord):
    """One message through the single-message scorer (``spamnb.estimator.scoring.score_one``):
    its ``log_odds``, ``evidence`` (the strongest ``(feature index, weight)``,
    or empty), its number of ``tokens`` and of ``known_tokens``, and the
    :class:`EvidenceSums` the rule reads."""

    __slots__ = ()
    _fields = __match_args__ = ("log_odds", "evidence", "tokens", "known_tokens", "sums")
    log_odds, evidence, tokens = field(0), field(1), field(2)
    known_tokens, sums = field(3), field(4)

    def __new__(cls, log_odds, evidence, tokens, known_tokens, sums):
        return tuple.__new__(cls, (log_odds, evidence, tokens, known_tokens, sums))


def _spam_ham(p_spam, sums, cutoffs):
    """(is spam, is ham) by the rule; floats or numpy arrays (then bool arrays).
    Both can hold when the cutoffs are equal: spam wins (the callers test it first)."""
    spam = p_spam >= cutoffs.spam
    ham = ((p_spam <= cutoffs.ham) & (sums.spam - sums.ham >= MIN_EVIDENCE)
           & (sums.spam < CONFLICT) & (sums.part_max < PART_SPAM))
    return spam, ham


def decide(log_odds, sums, cutoffs):
    """The label of one message: "spam", "unsure" or "ham" (``log_odds`` a float,
    ``sums`` its :class:`EvidenceSums`, ``cutoffs`` :class:`Cutoffs`)."""
    sums = EvidenceSums(float(sums.spam), float(sums.ham), float(sums.part_max))
    spam, ham = _spam_ham(probability(log_odds), sums, cutoffs)
    return "spam" if spam else "ham" if ham else "unsure"


# Why a message whose P(spam) is at or below the ham cutoff is not ham: the
# rule's conditions in the order :func:`reason` tests them.  code -> (symbol of
# the tests= list, the sentence ``classify -v`` and the report print).
REASONS = {
    "text-unread": ("SPAMNB_TEXT_UNREAD", "no text part within the byte limit"),
    "part-leans-spam": ("SPAMNB_PART_SPAM", "a text part leans to spam on its own"),
    "conflict": ("SPAMNB_CONFLICT", "strong spam evidence next to ham evidence"),
    "little-evidence": ("SPAMNB_FEW_KNOWN", "too few known tokens to call it ham"),
}


def reason(label, log_odds, sums, ham_cutoff):
    """Why the rule did not call a message ham although its P(spam) is at or
    below ``ham_cutoff``: a key of :data:`REASONS`, or "" (the label is the
    cutoffs' own, or not "unsure").  Tested in that order: a part beyond the
    byte limit, a text part that leans to spam by itself (``sums.part_max`` >=
    PART_SPAM), spam evidence >= CONFLICT, evidence below MIN_EVIDENCE."""
    if label != "unsure" or probability(log_odds) > ham_cutoff:
        return ""
    if sums.part_max is not None and sums.part_max == INF:
        return "text-unread"
    if sums.part_max is not None and sums.part_max >= PART_SPAM:
        return "part-leans-spam"
    if sums.spam >= CONFLICT:
        return "conflict"
    if sums.spam - sums.ham < MIN_EVIDENCE:
        return "little-evidence"
    return ""


def verdict_of(scored, cutoffs, evidence=()):
    """The :class:`Verdict` of a :class:`MessageScore` under ``cutoffs``
    (``evidence``: its strongest tokens as ``(token, weight)``)."""
    label = decide(scored.log_odds, scored.sums, cutoffs)
    why = reason(label, scored.log_odds, scored.sums, cutoffs.ham) if label == "unsure" else ""
    return Verdict(label, probability(scored.log_odds), scored.log_odds, evidence, scored.tokens,
                   scored.known_tokens, why, scored.sums.part_max)


def part_max(scorer, hashes, regions, truncated=False):
    """The largest sum of token weights of one region (a text part) of a message
    (``scorer`` a ``token_kernels.Scorer``, ``hashes`` the message's token hashes,
    ``regions`` its (start, end) ranges); -inf without regions, but +inf for a
    ``truncated`` message without one: its text lies beyond the byte limit
    (e.g. after a 300 KB attachment) and may be anything."""
    if truncated and not regions:
        return INF
    best = -INF
    for start, end in regions:
        _jll, _evidence, _n, _known, spam_evidence, ham_evidence = scorer.score(hashes[start:end], 0)
        best = max(best, spam_evidence + ham_evidence)
    return best


def decide_many(log_odds, sums, cutoffs):
    """The labels of many messages: object array of "spam" / "unsure" / "ham"
    (``sums`` an :class:`EvidenceSums` of arrays, ``cutoffs`` :class:`Cutoffs`)."""
    import numpy as np

    sums = EvidenceSums(*(np.asarray(v, dtype=np.float64) for v in sums))
    spam, ham = _spam_ham(probabilities(log_odds), sums, cutoffs)
    return np.where(spam, "spam", np.where(ham, "ham", "unsure")).astype(object)


def evidence_sums(X, feature_log_prob):
    """(spam evidence, ham evidence) arrays of the rows of a (transformed) count
    matrix ``X`` (n_messages, n_features) under log theta ``feature_log_prob``
    (2, n_features): the sums of the positive and of the negative weights."""
    import numpy as np

    flp = np.asarray(feature_log_prob, dtype=np.float64)
    w = flp[1] - flp[0]
    return (np.asarray(X @ np.maximum(w, 0.0), dtype=np.float64).reshape(-1),
            np.asarray(X @ np.minimum(w, 0.0), dtype=np.float64).reshape(-1))


class Score(TupleRecord):
    """A message's spam probability P(spam | message) and log-odds log P(spam|m)/P(ham|m)."""

    __slots__ = ()
    _fields = __match_args__ = ("probability", "log_odds")
    probability, log_odds = field(0), field(1)

    def __new__(cls, probability, log_odds):
        return tuple.__new__(cls, (probability, log_odds))


class Verdict(TupleRecord):
    """The filter's decision on one message.

    ``label`` is "spam", "ham" or "unsure"; ``evidence`` lists the strongest
    tokens as ``(token, weight)``, weight > 0 pointing to spam, strongest
    first; ``tokens`` counts the message's tokens, ``known_tokens`` those in
    the vocabulary.  ``reason`` says why a message with P(spam) at or below
    the ham cutoff is "unsure" rather than "ham" (a key of :data:`REASONS`,
    e.g. "part-leans-spam"; "" otherwise); ``part_max`` is the largest sum of
    one text part's token weights (the per-part evidence the rule reads;
    None when not computed).
    """

    __slots__ = ()
    _fields = __match_args__ = ("label", "probability", "log_odds", "evidence", "tokens", "known_tokens", "reason",
                                "part_max")
    _field_defaults = {"evidence": (), "tokens": 0, "known_tokens": 0, "reason": "", "part_max": None}
    label, probability, log_odds = field(0), field(1), field(2)
    evidence, tokens, known_tokens = field(3), field(4), field(5)
    reason, part_max = field(6), field(7)

    def __new__(cls, label, probability, log_odds, evidence=(), tokens=0, known_tokens=0, reason="", part_max=None):
        return tuple.__new__(cls, (label, probability, log_odds, evidence, tokens, known_tokens, reason, part_max))


# ---------------------------------------------------------------------------- verdict lines
