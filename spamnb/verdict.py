"""The one verdict rule: a message's score and evidence -> "spam", "unsure" or "ham".

``SpamFilter.classify`` (one message) and ``spamnb.evaluate`` (arrays) both call
:func:`decide` / :func:`decide_many`; the rule is written once, in
:func:`_spam_ham`, with operators that work on floats and on numpy arrays alike.

A message's log-odds is the class prior's log ratio plus the sum of its known
tokens' weights ``w_i = x_i (log theta_spam,i - log theta_ham,i)``.  Besides
the log-odds the rule reads two sums of those weights: the *spam evidence*
``sum(w_i for w_i > 0)`` and the *ham evidence* ``sum(w_i for w_i < 0)`` (<= 0).

- **spam** when P(spam) >= ``spam_cutoff`` (as before);
- **ham** when P(spam) <= ``ham_cutoff`` *and* the message has evidence
  (``spam_evidence - ham_evidence >= MIN_EVIDENCE``: a message of unknown tokens
  is not ham because the prior leans to ham) *and* it is not conflicted
  (``spam_evidence < CONFLICT``: strong spam words next to strong ham words, as
  in a good-word attack, do not cancel out into "ham");
- **unsure** otherwise.

The constants were chosen on the train part of the fixed split (figures and the
cost on clean mail in docs/reliability.md, "Attacks").
"""

from __future__ import annotations

import math

__all__ = ["MIN_EVIDENCE", "CONFLICT", "probability", "decide", "decide_many", "evidence_sums"]

# A ham verdict needs at least this much evidence (sum of |w_i|, nats).  Clean
# ham on the train part's cross-validation has far more (its 0.1 % quantile was
# above 60 on both corpora); a message of only unknown tokens has 0.
MIN_EVIDENCE = 5.0
# Spam evidence at or above which a message is never ham (unsure instead).
# Clean ham's spam evidence on the train part's cross-validation: 99.9 %
# quantile below this on both corpora (docs/reliability.md).
CONFLICT = 80.0


def probability(log_odds):
    """sigmoid(log_odds) of one float, without overflow."""
    if log_odds >= 0:
        return 1.0 / (1.0 + math.exp(-log_odds))
    z = math.exp(log_odds)
    return z / (1.0 + z)


def _spam_ham(p_spam, spam_evidence, ham_evidence, spam_cutoff, ham_cutoff):
    """(is spam, is ham) by the rule; floats or numpy arrays (then bool arrays).
    Both can hold when the cutoffs are equal: spam wins (the callers test it first)."""
    spam = p_spam >= spam_cutoff
    ham = ((p_spam <= ham_cutoff) & (spam_evidence - ham_evidence >= MIN_EVIDENCE)
           & (spam_evidence < CONFLICT))
    return spam, ham


def decide(log_odds, spam_evidence, ham_evidence, spam_cutoff, ham_cutoff):
    """The label of one message: "spam", "unsure" or "ham" (floats in, str out)."""
    spam, ham = _spam_ham(probability(log_odds), float(spam_evidence), float(ham_evidence),
                          spam_cutoff, ham_cutoff)
    return "spam" if spam else "ham" if ham else "unsure"


def decide_many(log_odds, spam_evidence, ham_evidence, spam_cutoff, ham_cutoff):
    """The labels of many messages: object array of "spam" / "unsure" / "ham"."""
    import numpy as np

    lo = np.asarray(log_odds, dtype=np.float64)
    p = np.empty_like(lo)
    pos = lo >= 0
    p[pos] = 1.0 / (1.0 + np.exp(-lo[pos]))
    z = np.exp(lo[~pos])
    p[~pos] = z / (1.0 + z)
    spam, ham = _spam_ham(p, np.asarray(spam_evidence, dtype=np.float64),
                          np.asarray(ham_evidence, dtype=np.float64), spam_cutoff, ham_cutoff)
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
