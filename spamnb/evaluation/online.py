"""Online evaluation: the TREC Spam Track protocol.

Messages arrive one at a time, in order.  Each is classified by the filter as
it stands, then (full feedback) learned with its true label, or (train on
error) learned only when the classification was wrong; the filter starts
empty.  This is how a filter lives: it never sees a message's label before
scoring it, and it is judged on every message of the stream.

The filter is a :class:`spamnb.SpamFilter` grown from empty by
``SpamFilter.learn`` (:class:`OnlineModel`: the code ``spamnb learn``, TELL
and auto-learn run), scored by its single-message scorer; a learn and the
score after it cost work in the message's own tokens, not the vocabulary
(``spamnb.bayes.wordcounts``: the logs of the counts a message changes are
updated in place).  The protocol keeps only its own bookkeeping: the
held-out scores and the cutoffs they give.

Figures (:func:`online_figures`), as the TREC Spam Track reports them:

- ``(1-ROCA) %``: 100 (1 - area under the ROC curve) of the scores given
  before each message was learned;
- ``hm %`` / ``sm %``: ham / spam misclassified by the filter's binary
  decision (spam when the log-odds reach ``threshold``, 0 by default);
- ``lam %``: the logistic average of the two,
  logit^-1((logit(hm) + logit(sm)) / 2); a rate of 0 is taken as 0.5 / n
  (half a message) so that the average stays finite;
- ``h=.1 %``: ham misclassified at the threshold where 0.1 % of spam is
  misclassified, ``s=.1 %``: spam misclassified where 0.1 % of ham is;
- the learning curve: errors over time, per window of messages.

Order of the stream (:func:`order_messages`): ``date`` sorts by the Date:
header (messages without a usable one keep the place of the message before
them in path order); ``name`` sorts by top folder, then the number a file
name starts with, then path (the Enron-Spam files are numbered in the
order of their arrival within each user's folder, ham and spam interleaved;
the users' folders follow one another); ``auto`` uses ``date`` when most
messages have a Date: header, else ``name``.  An index file of
``judgement path`` lines (TREC's ``full/index``) gives order and labels
itself (:func:`read_index`).
"""

from __future__ import annotations

import math
import os
import re
import time
from collections import namedtuple

from pathlib import Path

from spamnb.model import counts_scores, held_out_score, message_bytes, pair_scores   # per message: imported once

__all__ = ["OnlineModel", "run_online", "online_figures", "cutoff_figures", "order_messages", "read_index",
           "learning_curve", "format_online", "lam", "OnlineResult", "FEEDBACK", "feedback_options"]

OnlineResult = namedtuple("OnlineResult", "log_odds y trained seconds n_features spam_cutoffs ham_cutoffs auto_learned",
                          defaults=(None, None, None))
OnlineResult.__doc__ = """log-odds given before learning each message, labels, which were learned (by the
user or automatically), seconds, vocabulary size; the model's own cutoffs (log-odds) when each message
arrived, and which messages were auto-learned (None when not recorded)."""

_LEADING_NUMBER = re.compile(r"(\d+)")
_DATE_HEADER = re.compile(rb"^Date:[ \t]*([^\r\n]*)", re.IGNORECASE | re.MULTILINE)


class OnlineModel:
    """A filter as the online protocol grows it: a :class:`spamnb.SpamFilter`
    (``learn`` of the token stream, ``forget_hashes``, its scorer: the code
    ``spamnb learn``, TELL and auto-learn run) and the protocol's bookkeeping
    of its own cutoffs.

    Parameters
    ----------
    tokenizer : Tokenizer, optional
        Default: a model that grows by learning's (``spamnb.model.learning.learned_model``:
        word pairs of window ``LEARNED_WORD_PAIRS``).
    params : dict, optional
        :class:`spamnb.SpamFilter`'s hyper-parameters (``alpha``, ``prior``,
        ``counts``, ``length_norm``, ``pair_weight``; checked there); ``pair_weight``
        None or absent: ``LEARNED_PAIR_WEIGHT``, a learned model's.

    Attributes
    ----------
    filter : SpamFilter
    held_out_ : ScoreHistogram, the scores of learned messages before each was learned
    """

    REFIT = 25   # the cutoffs are fitted again every REFIT learned messages

    def __init__(self, tokenizer=None, params=None, variants=None):
        from spamnb.mail.tokenizer import Tokenizer
        from spamnb.model import LEARNED_PAIR_WEIGHT, LEARNED_WORD_PAIRS, ScoreHistogram, SpamFilter

        params = dict(params or {})
        if params.get("pair_weight") is None:
            params["pair_weight"] = LEARNED_PAIR_WEIGHT
        self.filter = SpamFilter(tokenizer if tokenizer is not None else Tokenizer(word_pairs=LEARNED_WORD_PAIRS),
                                 **params)
        self.held_out_ = ScoreHistogram()
        self._cutoffs = None
        self._since_fit = 0
        self.variants = variants
        self._scored = None     # with variants: (stream, words, pairs) of the message scored last
        self._learned = [0, 0]  # messages learned less those taken back, [ham, spam]: the filter's class_count_

    @property
    def class_count_(self):
        return self.filter.class_count_

    @property
    def pair_weight(self):
        """The filter's ``pair_weight``; set, the scorer is made again (``SpamFilter.counts_changed``)."""
        return self.filter.pair_weight

    @pair_weight.setter
    def pair_weight(self, value):
        self.filter.pair_weight = float(value)
        self.filter.counts_changed()

    @property
    def n_features(self):
        """The vocabulary's size (the tokens learned)."""
        return self.filter.vocabulary_.n_features if self.filter.is_fitted else 0

    def cutoffs(self):
        """``(spam log-odds, ham log-odds)``: fitted on the held-out scores of the
        messages learned so far (``spamnb.estimator.prequential``), refitted every
        ``REFIT`` learned messages; the thin band while there is too little evidence."""
        if self._cutoffs is None or self._since_fit >= self.REFIT:
            self._cutoffs = self.held_out_.cutoffs()[:2]
            self._since_fit = 0
        return self._cutoffs

    def stream(self, message):
        """The message's token stream (bytes, or a path: a str is a file name here)."""
        return self.filter.tokenizer_.stream(message_bytes(Path(message) if isinstance(message, str) else message))

    def log_odds(self, stream):
        """log P(spam | message) / P(ham | message) under the filter as it stands
        (its single-message scorer; 0 before it has learned anything)."""
        if not self.filter.is_fitted:
            return 0.0
        if self.variants is None:
            jll = self.filter.scorer().score(stream.hashes, 0, stream.pairs_start)[0]
            return jll[1] - jll[0]
        # the pair weight chosen on the model's own stream (``variants``: spamnb.estimator.variants):
        # its log-odds at weights 0 and 1 over the same counts (one pass of the filter's scorer: its own
        # weight takes no part), given at the variants' weight
        words, pairs = pair_scores(self.filter.scorer(), stream.hashes, stream.pairs_start)
        self._scored = (stream, words, pairs)
        scale = getattr(self.variants, "scale", 1.0)   # a mixture may keep its scores' scale as its weight moves
        return held_out_score(words, pairs, self.variants.weight, scale)

    def learn(self, stream, spam, score=None, weight=1):
        """``SpamFilter.learn`` of a tokenized message (``weight`` -1:
        ``SpamFilter.forget``, a learned message taken back out); ``score``: its
        log-odds before it was learned, counted in :attr:`held_out_`."""
        if weight not in (1, -1):
            raise ValueError(f"a message is learned (1) or taken back (-1), not {weight!r} times")
        if score is not None and counts_scores(self._learned):   # the filter's class_count_, without its lock
            self.held_out_.add(score, spam, float(weight))
            self._since_fit += 1
            if self.variants is not None and self._scored is not None and self._scored[0] is stream:
                self.variants.add(self._scored[1], self._scored[2], spam, float(weight))
        if weight > 0:
            self.filter.learn(None, spam, stream)
        else:
            self.filter.forget_hashes(stream.hashes, spam)
        self._learned[1 if spam else 0] += weight
        return self

    def relabel(self, stream, spam, score=None):
        """A message learned as the other class is learned as ``spam`` instead."""
        self.learn(stream, not spam, score, -1)
        return self.learn(stream, spam, score)


def run_online(messages, y, params=None, train_on_error=False, margin=0.0, threshold=0.0, tokenizer=None,
               progress=None, unsure=False, auto_learn=None, variants=None):
    """Classify then learn each message in turn, from an empty model.

    ``messages``: bytes or paths, in arrival order; ``y``: True for spam.
    ``train_on_error``: learn a message only when the binary decision
    (spam when log-odds >= ``threshold``) was wrong or its log-odds were within
    ``margin`` of the threshold (a "thick threshold"; 0: errors only).
    ``unsure`` (with ``train_on_error``): the decision is the model's own
    verdict at its cutoffs (:meth:`OnlineModel.cutoffs`), and a message is
    learned when that verdict was wrong or unsure (what a user who corrects
    mistakes and sorts the unsure folder gives the filter).  The filter is a
    :class:`spamnb.SpamFilter` (:class:`OnlineModel`), learning as ``spamnb learn`` does.
    ``auto_learn`` (a margin in log-odds, with ``train_on_error``): a verdict at
    least that far beyond its cutoff (spam over the spam cutoff, ham under the
    ham cutoff) is learned as that verdict; when it was wrong the user's
    correction relabels it (taken back from the verdict's class, learned as
    the other), as ``spamnb learn`` does with a message in the ledger.
    ``variants``: the pair weight chosen on the model's own stream as it goes
    (a :class:`spamnb.estimator.variants.PairWeightMixture` or ``PairWeightChooser``:
    each message scored at pair weights 0 and 1 over the same counts, given the
    variants' weight's log-odds, and its two held-out scores counted when it is
    learned); None: the filter's own ``pair_weight``.
    Returns an :class:`OnlineResult` (log-odds given before learning each
    message, labels, which messages were learned, seconds, vocabulary size,
    the model's cutoffs when each arrived, which were auto-learned).
    """
    import numpy as np

    from spamnb.model import auto_label

    model = OnlineModel(tokenizer, params, variants)
    y = np.asarray(y, dtype=bool)
    log_odds = np.empty(len(y), dtype=np.float64)
    spam_cuts = np.empty(len(y), dtype=np.float64)
    ham_cuts = np.empty(len(y), dtype=np.float64)
    trained = np.zeros(len(y), dtype=bool)
    auto = np.zeros(len(y), dtype=bool)
    started = time.perf_counter()
    n = 0
    for i, message in enumerate(messages):
        if i >= len(y):
            raise ValueError("more messages than labels")
        stream = model.stream(message)
        score = model.log_odds(stream)
        log_odds[i] = score
        spam_cut, ham_cut = model.cutoffs()
        spam_cuts[i], ham_cuts[i] = spam_cut, ham_cut
        is_spam = bool(y[i])
        if not train_on_error:
            learn = True
        elif unsure or auto_learn is not None:
            right = (score >= spam_cut) if is_spam else (score <= ham_cut)
            learn = not right
        else:
            wrong = (score >= threshold) != is_spam
            learn = wrong or abs(score - threshold) < margin
        verdict = None if auto_learn is None else auto_label(score, spam_cut, ham_cut, auto_learn)
        if verdict is not None:
            model.learn(stream, verdict, score)
            auto[i] = True
            if verdict != is_spam:          # the user's correction: relabelled exactly
                model.relabel(stream, is_spam, score)
            trained[i] = True
        elif learn:
            model.learn(stream, is_spam, score)
            trained[i] = True
        n = i + 1
        if progress is not None:
            progress(n)
    if n != len(y):
        raise ValueError(f"{n} messages but {len(y)} labels")
    return OnlineResult(log_odds, y, trained, time.perf_counter() - started, model.n_features,
                        spam_cuts, ham_cuts, auto)


# The feedback modes of scripts/bench/bench_online.py and ``spamnb evaluate --online``:
# what a user gives the filter after each message (see feedback_options).
FEEDBACK = {"full": "full feedback", "error": "on error or unsure", "auto": "on error + auto-learn"}


def feedback_options(mode, auto_margin=None):
    """:func:`run_online`'s keyword arguments for a feedback mode of :data:`FEEDBACK`:
    ``full`` every message learned with its label; ``error`` a message learned
    when the model's verdict at its own cutoffs was wrong or unsure; ``auto``
    that, and a verdict ``auto_margin`` log-odds beyond its cutoff (default
    ``spamnb.model.autolearn.AUTO_LEARN_MARGIN``, as ``classify --auto-learn``
    and ``serve --auto-learn`` learn) learned as itself, relabelled when the
    user corrects it.  ``bench_online.py`` and ``spamnb evaluate --online
    --train-on-error --auto-learn`` run the same mode through this."""
    if mode == "full":
        return {}
    if mode == "error":
        return {"train_on_error": True, "unsure": True}
    if mode == "auto":
        from spamnb.model import AUTO_LEARN_MARGIN

        return {"train_on_error": True, "auto_learn": AUTO_LEARN_MARGIN if auto_margin is None else auto_margin}
    raise ValueError(f"unknown feedback mode {mode!r} ({', '.join(FEEDBACK)})")


def cutoff_figures(result, start=1000):
    """The false-positive rate, spam missed and unsure share at the model's own
    cutoffs (as they stood when each message arrived), over the messages after
    the first ``start``: fractions, and the ham/spam counted."""
    import numpy as np

    y = np.asarray(result.y, dtype=bool)[start:]
    s = np.asarray(result.log_odds, dtype=np.float64)[start:]
    spam_cut = np.asarray(result.spam_cutoffs)[start:]
    ham_cut = np.asarray(result.ham_cutoffs)[start:]
    called_spam = s >= spam_cut
    called_ham = s <= ham_cut
    n_ham, n_spam = int((~y).sum()), int(y.sum())
    return {"start": start, "n_ham": n_ham, "n_spam": n_spam,
            "false_positives": int((called_spam & ~y).sum()),
            "fpr": float((called_spam & ~y).sum() / n_ham) if n_ham else float("nan"),
            "spam_missed": float((~called_spam & y).sum() / n_spam) if n_spam else float("nan"),
            "ham_called_ham": float((called_ham & ~y).sum() / n_ham) if n_ham else float("nan"),
            "unsure": float((~called_spam & ~called_ham).mean()) if y.size else float("nan"),
            "spam_cutoff_last": float(spam_cut[-1]) if spam_cut.size else float("nan"),
            "ham_cutoff_last": float(ham_cut[-1]) if ham_cut.size else float("nan")}


# ---------------------------------------------------------------- figures
def lam(ham_rate, spam_rate, n_ham, n_spam):
    """Logistic average misclassification, in [0, 1]; a rate of 0 counts as 0.5 / n."""
    def logit(rate, n):
        rate = min(max(rate, 0.5 / max(n, 1)), 1.0 - 0.5 / max(n, 1))
        return math.log(rate / (1.0 - rate))

    z = (logit(ham_rate, n_ham) + logit(spam_rate, n_spam)) / 2.0
    return 1.0 / (1.0 + math.exp(-z))


def _error_at(y, scores, max_other):
    """(ham misclassified where spam misclassified <= max_other,
    spam misclassified where ham misclassified <= max_other): fractions."""
    import numpy as np

    from spamnb.bayes import metrics

    fpr, tpr, _ = metrics.roc_curve(y, scores)
    fnr = 1.0 - tpr
    ham_at = float(fpr[fnr <= max_other + 1e-12].min()) if np.any(fnr <= max_other + 1e-12) else 1.0
    spam_at = 1.0 - metrics.tpr_at_fpr(y, scores, max_other)
    return ham_at, float(spam_at)


def online_figures(result, threshold=0.0):
    """The TREC figures of an :class:`OnlineResult` (rates as fractions, 1-ROCA in %)."""
    import numpy as np

    from spamnb.bayes import metrics

    y = np.asarray(result.y, dtype=bool)
    scores = np.nan_to_num(np.asarray(result.log_odds, dtype=np.float64), posinf=1e300, neginf=-1e300)
    n_spam, n_ham = int(y.sum()), int((~y).sum())
    called_spam = scores >= threshold
    hm = float((called_spam & ~y).sum() / n_ham) if n_ham else float("nan")
    sm = float((~called_spam & y).sum() / n_spam) if n_spam else float("nan")
    out = {"n": int(y.size), "n_spam": n_spam, "n_ham": n_ham, "threshold": threshold,
           "n_trained": int(np.asarray(result.trained).sum()), "seconds": result.seconds,
           "messages_per_second": y.size / result.seconds if result.seconds > 0 else float("nan"),
           "n_features": result.n_features, "hm": hm, "sm": sm}
    if n_spam and n_ham:
        out["one_minus_roca_percent"] = metrics.one_minus_auc_percent(y, scores)
        out["lam"] = lam(hm, sm, n_ham, n_spam)
        out["ham_at_spam_0.001"], out["spam_at_ham_0.001"] = _error_at(y, scores, 0.001)
    return out


def learning_curve(result, window=1000, threshold=0.0):
    """Errors over time: ``[(end, ham errors %, spam errors %, cumulative errors %)]``
    for each window of ``window`` messages (the last may be shorter)."""
    import numpy as np

    y = np.asarray(result.y, dtype=bool)
    wrong = (np.asarray(result.log_odds) >= threshold) != y
    rows = []
    for start in range(0, y.size, window):
        stop = min(start + window, y.size)
        ys, ws = y[start:stop], wrong[start:stop]
        ham, spam = ~ys, ys
        rows.append((stop,
                     100.0 * ws[ham].sum() / ham.sum() if ham.any() else float("nan"),
                     100.0 * ws[spam].sum() / spam.sum() if spam.any() else float("nan"),
                     100.0 * wrong[:stop].sum() / stop))
    return rows


def format_online(figures, curve=None):
    """Lines of text: the TREC summary, then the learning curve."""
    def pct(v):
        return "n/a" if v is None or v != v else f"{100.0 * v:.2f}"

    lines = [f"messages: {figures['n']} ({figures['n_spam']} spam, {figures['n_ham']} ham), "
             f"learned {figures['n_trained']}"
             + (f" ({figures['n_auto']} auto-learned)" if figures.get("n_auto") is not None else "")
             + f"; vocabulary {figures['n_features']} tokens; "
             f"{figures['seconds']:.1f} s ({figures['messages_per_second']:.0f} messages/s, classify + learn)"]
    if "one_minus_roca_percent" in figures:
        lines.append(f"(1-ROCA) %: {figures['one_minus_roca_percent']:.4f}")
        lines.append(f"lam %: {pct(figures['lam'])}   (hm % {pct(figures['hm'])}, sm % {pct(figures['sm'])}, "
                     f"decision: spam at log-odds >= {figures['threshold']:g})")
        lines.append(f"ham misclassified at 0.1 % spam misclassified (h=.1) %: {pct(figures['ham_at_spam_0.001'])}")
        lines.append(f"spam misclassified at 0.1 % ham misclassified (s=.1) %: {pct(figures['spam_at_ham_0.001'])}")
    if curve:
        lines.append("learning curve (errors per window of messages, %):")
        lines.append(f"{'messages':>10}{'ham err %':>11}{'spam err %':>12}{'cumulative %':>14}")
        for end, ham, spam, cumulative in curve:
            lines.append(f"{end:>10}{ham:>11.2f}{spam:>12.2f}{cumulative:>14.2f}")
    return "\n".join(lines) + "\n"


def write_curve_plot(path, result, window=500, threshold=0.0, title=""):
    """Learning curve (errors per window, ham and spam) and the cumulative error rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = learning_curve(result, window, threshold)
    ends = [r[0] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(ends, [r[1] for r in rows], label=f"ham misclassified (per {window})")
    ax.plot(ends, [r[2] for r in rows], label=f"spam misclassified (per {window})")
    ax.plot(ends, [r[3] for r in rows], label="all errors, cumulative", color="black")
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_xlabel("messages seen")
    ax.set_ylabel("errors %")
    ax.set_title(title or "online learning curve")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- order of the stream
def message_date(data):
    """POSIX time of a message's Date: header (in its header block), or None."""
    from email.utils import parsedate_to_datetime

    from spamnb.mail.headers import header_of

    head = header_of(data, 65536)
    if b"date:" not in head.lower():   # no match below (its case is folded as ASCII, as lower's): a cheaper scan
        return None
    match = _DATE_HEADER.search(head)
    if not match:
        return None
    try:
        when = parsedate_to_datetime(match.group(1).decode("ascii", "replace").strip())
        if when.tzinfo is None:
            from datetime import timezone

            when = when.replace(tzinfo=timezone.utc)
        return when.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _name_key(relpath):
    parts = relpath.split("/")
    match = _LEADING_NUMBER.match(parts[-1])
    return (parts[0] if len(parts) > 1 else "", int(match.group(1)) if match else -1, relpath)


def order_messages(relpaths, datas, how="auto"):
    """Indices of the messages in arrival order, and the order used ("date" or "name")."""
    if how not in ("auto", "date", "name"):
        raise ValueError(f"order must be auto, date or name, not {how!r}")
    by_name = sorted(range(len(relpaths)), key=lambda i: _name_key(relpaths[i]))
    if how == "name":
        return by_name, "name"
    if how == "auto":   # read until the dated can no longer be half (a corpus without dates: half read)
        dates, n_undated, most_undated = [], 0, len(datas) - 0.5 * max(1, len(datas))
        for d in datas:
            when = message_date(d)
            dates.append(when)
            if when is None:
                n_undated += 1
                if n_undated > most_undated:   # n_dated < half, whatever the rest hold
                    return by_name, "name"
        if n_undated > most_undated:   # no message at all
            return by_name, "name"
    else:
        dates = [message_date(d) for d in datas]
    keyed, last = [], float("-inf")
    for rank, i in enumerate(sorted(range(len(relpaths)), key=lambda i: relpaths[i])):
        if dates[i] is not None:
            last = dates[i]
        keyed.append((last, rank, i))   # undated: just after the message before it in path order
    keyed.sort()
    return [i for _, _, i in keyed], "date"


def read_index(path):
    """``[(is_spam, message path)]`` from an index file of ``judgement path`` lines
    (``spam ../data/inmail.1``); paths are relative to the index's folder."""
    folder = os.path.dirname(os.path.abspath(path))
    out = []
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for n, line in enumerate(f, 1):
            fields = line.split(None, 1)
            if not fields:
                continue
            if len(fields) != 2 or fields[0].lower() not in ("spam", "ham"):
                raise ValueError(f"{path}:{n}: expected 'spam PATH' or 'ham PATH'")
            out.append((fields[0].lower() == "spam", os.path.join(folder, fields[1].strip())))
    return out


# ---------------------------------------------------------------- the command
