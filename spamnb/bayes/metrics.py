"""How well a spam filter does: confusion matrices, rates, ROC curves.

numpy only (no scikit-learn at run time).

Labels.  ``y_true`` is booleans (True = spam), 0/1, or the strings
``"spam"``/``"ham"`` (any case).  Predictions ``y_pred`` may also be
``"unsure"``: a three-way verdict (spam / unsure / ham).

How an unsure verdict counts (it is neither a spam nor a ham verdict):

- for a ham message it is **not a false positive**: the false positive rate
  counts only ham put in the spam folder, the costly error;
- for a spam message it is **missed**: recall (spam caught) counts only spam
  called spam, so the false negative rate ``1 - recall`` includes unsure spam;
- specificity counts only ham called ham, so with unsure verdicts
  ``specificity + false_positive_rate <= 1`` (the rest is ``unsure_rate`` of ham);
- accuracy counts only right spam/ham verdicts; precision is computed over
  the messages called spam.

Scores.  ``scores`` are any real numbers that grow with spamminess (log-odds,
probabilities).  A threshold ``t`` calls a message spam when ``score >= t``.
All messages sharing a score fall on the same side of every threshold, so the
ROC curve has one point per distinct score and a group of tied ham and spam
is a straight (diagonal) segment; the area under it counts each tied
(spam, ham) pair as 1/2, which is the Mann-Whitney statistic.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "HAM", "SPAM", "UNSURE", "VERDICT_COLUMNS",
    "as_spam_labels", "as_verdicts",
    "confusion_matrix", "verdict_confusion_matrix",
    "accuracy", "precision", "recall", "specificity", "false_positive_rate",
    "false_negative_rate", "unsure_rate", "f1",
    "ThresholdSweep", "threshold_sweep", "roc_curve", "roc_auc", "one_minus_auc_percent",
    "tpr_at_fpr", "summary", "classification_report",
]

HAM, SPAM, UNSURE = 0, 1, 2
VERDICT_COLUMNS = ("ham", "unsure", "spam")
_NAMES = {"ham": HAM, "spam": SPAM, "unsure": UNSURE}


# ---------------------------------------------------------------- labels
def _encode(y, allow_unsure):
    y = np.asarray(y)
    if y.ndim != 1:
        y = y.reshape(-1)
    if y.dtype == bool:
        return y.astype(np.int8)
    if y.dtype.kind in "iuf":
        if y.size and not np.all((y == 0) | (y == 1)):
            raise ValueError("numeric labels must be 0 (ham) or 1 (spam)")
        return y.astype(np.int8)
    if y.dtype.kind == "O" and y.size and all(isinstance(v, (bool, np.bool_)) for v in y):
        return y.astype(bool).astype(np.int8)
    if y.dtype.kind in "UOS":
        if y.dtype.kind == "S":
            y = y.astype(str)
        lowered = np.char.lower(y.astype(str))
        uniq, inverse = np.unique(lowered, return_inverse=True)
        allowed = ("ham", "spam", "unsure") if allow_unsure else ("ham", "spam")
        bad = [u for u in uniq if u not in allowed]
        if bad:
            raise ValueError(f"labels must be among {allowed}, got {bad[:5]!r}")
        codes = np.array([_NAMES[u] for u in uniq], dtype=np.int8)
        return codes[inverse.reshape(-1)] if uniq.size else np.zeros(0, np.int8)
    raise ValueError(f"cannot read labels of dtype {y.dtype}")


def as_spam_labels(y_true):
    """Boolean array (True = spam) of labels given as bools, 0/1 or "spam"/"ham"."""
    return _encode(y_true, allow_unsure=False).astype(bool)


def as_verdicts(y_pred):
    """int8 array of verdicts: HAM (0), SPAM (1), UNSURE (2)."""
    return _encode(y_pred, allow_unsure=True)


def _pair(y_true, y_pred):
    t = _encode(y_true, allow_unsure=False)
    p = _encode(y_pred, allow_unsure=True)
    if t.shape != p.shape:
        raise ValueError(f"y_true has {t.size} labels but y_pred has {p.size}")
    return t, p


# ---------------------------------------------------------------- confusion matrices
def confusion_matrix(y_true, y_pred, labels=None):
    """Counts of (true, predicted) label pairs: int64 array (n_labels, n_labels).

    Row i is the true label ``labels[i]``, column j the predicted ``labels[j]``
    (as scikit-learn).  ``labels`` defaults to the sorted union of both;
    pairs with a label outside ``labels`` are not counted.
    """
    y_true = np.asarray(y_true).reshape(-1)
    y_pred = np.asarray(y_pred).reshape(-1)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true has {y_true.size} labels but y_pred has {y_pred.size}")
    if labels is None:
        labels = np.unique(np.concatenate([y_true, y_pred]))
    labels = np.asarray(labels)
    n = labels.size
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]

    def index(y):
        pos = np.clip(np.searchsorted(sorted_labels, y), 0, max(n - 1, 0))
        found = sorted_labels[pos] == y if n else np.zeros(y.shape, bool)
        return order[pos] if n else pos, found

    ti, tf = index(y_true)
    pi, pf = index(y_pred)
    keep = tf & pf
    flat = np.bincount(ti[keep] * n + pi[keep], minlength=n * n)
    return flat.reshape(n, n).astype(np.int64)


def verdict_confusion_matrix(y_true, y_pred):
    """The three-way confusion matrix: int64 (2, 3).

    Rows: true ham, true spam.  Columns: ``VERDICT_COLUMNS`` = ham, unsure, spam.
    Two-way predictions simply leave the unsure column at 0.
    """
    t, p = _pair(y_true, y_pred)
    column = np.array([0, 2, 1], dtype=np.int64)[p]  # HAM->0, SPAM->2, UNSURE->1
    flat = np.bincount(t.astype(np.int64) * 3 + column, minlength=6)
    return flat.reshape(2, 3).astype(np.int64)


class _Counts(NamedTuple):
    ham_ham: int
    ham_unsure: int
    ham_spam: int   # false positives
    spam_ham: int
    spam_unsure: int
    spam_spam: int  # true positives


def _counts(y_true, y_pred):
    return _Counts(*(int(v) for v in verdict_confusion_matrix(y_true, y_pred).reshape(-1)))


def _ratio(num, den):
    return float(num) / den if den else float("nan")


# ---------------------------------------------------------------- rates from verdicts
def accuracy(y_true, y_pred):
    """Share of messages given their right verdict (unsure is never right)."""
    c = _counts(y_true, y_pred)
    return _ratio(c.ham_ham + c.spam_spam, sum(c))


def precision(y_true, y_pred):
    """Of the messages called spam, the share that is spam (nan if none is called spam)."""
    c = _counts(y_true, y_pred)
    return _ratio(c.spam_spam, c.spam_spam + c.ham_spam)


def recall(y_true, y_pred):
    """Spam caught: share of spam called spam (unsure spam is missed)."""
    c = _counts(y_true, y_pred)
    return _ratio(c.spam_spam, c.spam_ham + c.spam_unsure + c.spam_spam)


def false_negative_rate(y_true, y_pred):
    """Spam missed: share of spam called ham or unsure (= 1 - recall)."""
    c = _counts(y_true, y_pred)
    return _ratio(c.spam_ham + c.spam_unsure, c.spam_ham + c.spam_unsure + c.spam_spam)


def specificity(y_true, y_pred):
    """Share of ham called ham (unsure ham is not counted as called ham)."""
    c = _counts(y_true, y_pred)
    return _ratio(c.ham_ham, c.ham_ham + c.ham_unsure + c.ham_spam)


def false_positive_rate(y_true, y_pred):
    """Ham lost to the spam folder: share of ham called spam (unsure ham is not a false positive)."""
    c = _counts(y_true, y_pred)
    return _ratio(c.ham_spam, c.ham_ham + c.ham_unsure + c.ham_spam)


def unsure_rate(y_true, y_pred, label=None):
    """Share of messages called unsure; ``label="ham"``/``"spam"`` restricts to that true class."""
    c = _counts(y_true, y_pred)
    if label is None:
        return _ratio(c.ham_unsure + c.spam_unsure, sum(c))
    if as_spam_labels([label])[0]:
        return _ratio(c.spam_unsure, c.spam_ham + c.spam_unsure + c.spam_spam)
    return _ratio(c.ham_unsure, c.ham_ham + c.ham_unsure + c.ham_spam)


def f1(y_true, y_pred):
    """Harmonic mean of precision and recall for spam: 2 TP / (2 TP + FP + FN), unsure spam in FN."""
    c = _counts(y_true, y_pred)
    fn = c.spam_ham + c.spam_unsure
    return _ratio(2 * c.spam_spam, 2 * c.spam_spam + c.ham_spam + fn)


# ---------------------------------------------------------------- scores
class ThresholdSweep(NamedTuple):
    """Counts at every distinct score used as a threshold (score >= t is spam).

    All arrays have shape (n_distinct + 1,); index 0 is threshold +inf (nothing
    called spam), then the distinct scores in decreasing order, the last one
    calling every message spam.
    """

    thresholds: np.ndarray       # float64
    true_positives: np.ndarray   # int64: spam with score >= t
    false_positives: np.ndarray  # int64: ham with score >= t
    n_spam: int
    n_ham: int

    @property
    def tpr(self):
        return self.true_positives / self.n_spam if self.n_spam else np.full(self.thresholds.shape, np.nan)

    @property
    def fpr(self):
        return self.false_positives / self.n_ham if self.n_ham else np.full(self.thresholds.shape, np.nan)


def threshold_sweep(y_true, scores):
    """The :class:`ThresholdSweep` of scores (any real numbers, larger = spammier)."""
    t = as_spam_labels(y_true)
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if s.shape != t.shape:
        raise ValueError(f"y_true has {t.size} labels but scores has {s.size}")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN")
    order = np.argsort(-s, kind="stable")
    s_sorted = s[order]
    t_sorted = t[order]
    # the last position of each run of equal scores
    last = np.flatnonzero(np.r_[s_sorted[1:] != s_sorted[:-1], True]) if s.size else np.zeros(0, np.int64)
    cum_spam = np.cumsum(t_sorted, dtype=np.int64)
    cum_ham = np.arange(1, s.size + 1, dtype=np.int64) - cum_spam
    thresholds = np.r_[np.inf, s_sorted[last]]
    tp = np.r_[0, cum_spam[last]].astype(np.int64)
    fp = np.r_[0, cum_ham[last]].astype(np.int64)
    n_spam = int(t.sum())
    return ThresholdSweep(thresholds, tp, fp, n_spam, int(t.size - n_spam))


def roc_curve(y_true, scores):
    """``(fpr, tpr, thresholds)``: one point per distinct score, from (0, 0) at +inf."""
    sweep = threshold_sweep(y_true, scores)
    return sweep.fpr, sweep.tpr, sweep.thresholds


def roc_auc(y_true, scores):
    """Area under the ROC curve = P(score of a random spam > score of a random ham),
    a tie counting 1/2 (the Mann-Whitney U / (n_spam n_ham)).  nan without both classes."""
    sweep = threshold_sweep(y_true, scores)
    if sweep.n_spam == 0 or sweep.n_ham == 0:
        return float("nan")
    tp = sweep.true_positives.astype(np.float64)
    fp = sweep.false_positives.astype(np.float64)
    # trapezoids: exact for the straight segments of tied groups
    area2 = np.sum((fp[1:] - fp[:-1]) * (tp[1:] + tp[:-1]))
    return float(area2 / (2.0 * sweep.n_spam * sweep.n_ham))


def one_minus_auc_percent(y_true, scores):
    """100 (1 - AUC): the ranking error in percent (lower is better)."""
    return 100.0 * (1.0 - roc_auc(y_true, scores))


def tpr_at_fpr(y_true, scores, max_fpr):
    """Spam caught at a fixed false positive rate: the largest TPR over the
    thresholds whose FPR is <= ``max_fpr``.

    Ties at the threshold: a threshold calls every message with that score
    spam, so a group of tied ham and spam is taken whole or not at all (no
    interpolation inside a tie, no random tie-breaking).  nan without both classes.
    """
    sweep = threshold_sweep(y_true, scores)
    if sweep.n_spam == 0 or sweep.n_ham == 0:
        return float("nan")
    allowed = sweep.false_positives <= np.floor(max_fpr * sweep.n_ham + 1e-9)
    return float(sweep.true_positives[allowed].max() / sweep.n_spam)


# ---------------------------------------------------------------- summaries
FPR_POINTS = (0.001, 0.01)


def summary(y_true, y_pred=None, scores=None, fpr_points=FPR_POINTS):
    """A flat dict of the usual figures (JSON-ready floats/ints).

    With ``y_pred``: n, n_spam, n_ham, accuracy, fpr, fnr, unsure (share of all
    messages), precision, recall, f1, confusion (2x3 nested list, rows ham/spam,
    columns ham/unsure/spam).  With ``scores``: auc, one_minus_auc_percent and
    ``tpr_at_fpr_<x>`` for each x in ``fpr_points``.
    """
    t = as_spam_labels(y_true)
    out = {"n": int(t.size), "n_spam": int(t.sum()), "n_ham": int(t.size - t.sum())}
    if y_pred is not None:
        cm = verdict_confusion_matrix(t, y_pred)
        out.update(
            accuracy=accuracy(t, y_pred), fpr=false_positive_rate(t, y_pred), fnr=false_negative_rate(t, y_pred),
            unsure=unsure_rate(t, y_pred), precision=precision(t, y_pred), recall=recall(t, y_pred),
            f1=f1(t, y_pred), confusion=cm.tolist(),
        )
    if scores is not None:
        out["auc"] = roc_auc(t, scores)
        out["one_minus_auc_percent"] = 100.0 * (1.0 - out["auc"])
        for x in fpr_points:
            out[f"tpr_at_fpr_{x:g}"] = tpr_at_fpr(t, scores, x)
    return out


def _fmt(value, digits=4):
    return "nan" if value != value else f"{value:.{digits}f}"


def classification_report(y_true, y_pred, scores=None, fpr_points=FPR_POINTS):
    """A readable text table: the three-way confusion matrix, per-class
    precision/recall/f1/support, accuracy, FPR/FNR/unsure, and with ``scores``
    the ROC figures."""
    t = as_spam_labels(y_true)
    cm = verdict_confusion_matrix(t, y_pred)
    width = max(7, len(str(int(cm.max(initial=0)))) + 2)
    lines = ["confusion (rows: true, columns: verdict)",
             " " * 10 + "".join(f"{c:>{width}}" for c in VERDICT_COLUMNS)]
    for name, row in zip(("ham", "spam"), cm):
        lines.append(f"{name:<10}" + "".join(f"{int(v):>{width}}" for v in row))
    lines.append("")
    lines.append(f"{'':<10}{'precision':>10}{'recall':>10}{'f1':>10}{'support':>10}")
    p = as_verdicts(y_pred)
    for name, cls in (("ham", HAM), ("spam", SPAM)):
        called = int(np.sum(p == cls))
        right = int(cm[cls, 0 if cls == HAM else 2])
        support = int(cm[cls].sum())
        prec = _ratio(right, called)
        rec = _ratio(right, support)
        f = _ratio(2 * right, called + support)
        lines.append(f"{name:<10}{_fmt(prec):>10}{_fmt(rec):>10}{_fmt(f):>10}{support:>10}")
    n = int(cm.sum())
    lines.append("")
    lines.append(f"accuracy                {_fmt(_ratio(cm[0, 0] + cm[1, 2], n))}   (n = {n})")
    lines.append(f"false positive rate     {_fmt(_ratio(cm[0, 2], cm[0].sum()))}   (ham called spam; unsure ham is not a false positive)")
    lines.append(f"false negative rate     {_fmt(_ratio(cm[1, 0] + cm[1, 1], cm[1].sum()))}   (spam called ham or unsure)")
    lines.append(f"unsure                  {_fmt(_ratio(cm[0, 1] + cm[1, 1], n))}")
    if scores is not None:
        lines.append(f"1 - AUC (%)             {_fmt(one_minus_auc_percent(t, scores))}")
        for x in fpr_points:
            lines.append(f"{f'spam caught at {100 * x:g}% FPR':<24}{_fmt(tpr_at_fpr(t, scores, x))}")
    return "\n".join(lines) + "\n"
