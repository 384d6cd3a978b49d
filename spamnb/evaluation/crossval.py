"""``spamnb evaluate``: how well the filter does on labelled mail.

Three protocols, all scoring held-out mail only:

- stratified k-fold cross-validation (``--folds K``, default 10, fixed
  ``--seed``): each class is shuffled and dealt round-robin into K folds;
- the project's fixed split (``--split md5``): a message is test when
  md5(relpath) % 5 == 0, relpath relative to the corpus root given;
- separate corpora (``--train A --test B``);
- online (``--online``): the TREC Spam Track protocol, each message classified
  then learned, in order, from an empty model (:mod:`spamnb.evaluation.online`).

Each fold trains a fresh :class:`SpamFilter` on its training part as
``spamnb train`` trains (``SpamFilter.fit(tune=True)``: the cutoffs chosen by
cross-validation inside that training part for ``target_fpr``, the word pairs
kept when its held-out figures favour them; ``spamnb.estimator.fitting``) and
scores its test part (``score_many``: log-odds) at that filter's own cutoffs;
``tune=False`` (``spamnb evaluate --plain``) only counts, at the cutoffs given
(the defaults unless set).  Printed per fold and as mean ± std
(sample std over folds): 1-AUC %, FPR, FNR, unsure, spam caught at 0.1 % and
1 % FPR, accuracy; then the confusion matrix pooled over folds at the
filter's cutoffs (an unsure ham is not a false positive, an unsure spam is
missed; see :mod:`spamnb.bayes.metrics`).

``--compare`` adds, on the same folds: naive Bayes with MLE vs MAP class
priors, several Dirichlet alphas, binary / raw / log counts (one setting
changed at a time from the filter's), and k-nearest-neighbour voting on the
same sparse vectors (Euclidean and cosine, several k).  The variants are fitted
on one token-count matrix of the whole corpus, cut per fold to the tokens
seen in that fold's training part, which is exactly the vocabulary a filter
trained on it has.

Layout of a corpus: every file below it is a message, spam when a folder on
its way is named like ``spam*``, ham otherwise (:mod:`spamnb.training.corpus`).

This module imports only the standard library at import time (the CLI builds
its parser from ``add_arguments`` on every run, ``spamnb classify`` included).
"""

from __future__ import annotations


__all__ = ["md5_split", "verdicts_from_log_odds",
           "knn_spam_fraction", "count_transform", "evaluate"]



FPR_POINTS = (0.001, 0.01)
COMPARE_ALPHAS = (0.01, 0.1, 0.3, 1.0)
COMPARE_PRIORS = ("mle", "map")
COMPARE_COUNTS = ("binary", "raw", "log")
KNN_K = (1, 5, 15)
KNN_METRICS = ("euclidean", "cosine")

# (json key, column title, scale) of the figures in the tables
COLUMNS = (
    ("one_minus_auc_percent", "1-AUC %", 1.0),
    ("fpr", "FPR %", 100.0),
    ("fnr", "FNR %", 100.0),
    ("unsure", "unsure %", 100.0),
    ("tpr_at_fpr_0.001", "caught@0.1%", 100.0),
    ("tpr_at_fpr_0.01", "caught@1%", 100.0),
    ("accuracy", "accuracy %", 100.0),
)


# ---------------------------------------------------------------- arguments
def md5_split(relpaths):
    """``(train, test)`` index arrays of the project's fixed split."""
    import numpy as np

    from spamnb.training.corpus import is_test_message

    test = np.array([is_test_message(p) for p in relpaths], dtype=bool)
    return np.flatnonzero(~test), np.flatnonzero(test)


# ---------------------------------------------------------------- scores and verdicts
def spam_probability(log_odds):
    """sigmoid(log_odds) without overflow, float64 array (``spamnb.estimator.verdict.probabilities``)."""
    from spamnb.model import probabilities

    return probabilities(log_odds)


def verdicts_from_log_odds(log_odds, spam_cutoff, ham_cutoff, evidence=None):
    """The labels of ``SpamFilter.classify`` (``spamnb.estimator.verdict.decide_many``):
    object array of shape (n,).  ``evidence`` holds the arrays (spam evidence,
    ham evidence[, largest text-part sum]) (``SpamFilter.evidence``, or
    ``spamnb.estimator.verdict.evidence_sums`` for a count matrix, which has no parts);
    without it every message counts as having evidence enough and no conflict
    (the cutoffs alone decide)."""
    import numpy as np

    from spamnb.model import Cutoffs, EvidenceSums, decide_many

    n = len(log_odds)
    if evidence is None:
        evidence = (np.zeros(n), np.full(n, -np.inf))
    part_max = evidence[2] if len(evidence) > 2 else np.full(n, -np.inf)
    return decide_many(log_odds, EvidenceSums(evidence[0], evidence[1], part_max), Cutoffs(spam_cutoff, ham_cutoff))


def count_transform(X, counts):
    """Raw token counts (CSR) as the filter weights them: "raw", "binary" (presence) or "log" (log(1 + count))."""
    import numpy as np

    X = X.tocsr(copy=True)
    X.data = X.data.astype(np.float64)
    if counts == "binary":
        X.data[:] = 1.0
    elif counts == "log":
        X.data = np.log1p(X.data)
    elif counts != "raw":
        raise ValueError(f"counts must be one of {COMPARE_COUNTS}, got {counts!r}")
    return X


def knn_spam_fraction(X_train, y_train, X_test, ks=KNN_K, metric="euclidean", chunk=256):
    """Share of spam among each test row's k nearest training rows, for each k.

    Sparse products only: similarities are (chunk, n_train) blocks of
    ``X_test @ X_train.T``; Euclidean distance is |a|^2 + |b|^2 - 2 a.b, cosine
    distance is 1 - a.b / (|a| |b|) (a zero row is at distance 1 from all).
    Equal distances are broken by training-row order.  Returns {k: float64 (n_test,)}.
    """
    import numpy as np
    from scipy import sparse

    X_train = sparse.csr_matrix(X_train, dtype=np.float64)
    X_test = sparse.csr_matrix(X_test, dtype=np.float64)
    y_train = np.asarray(y_train, dtype=np.float64)
    n_train, n_test = X_train.shape[0], X_test.shape[0]
    if n_train == 0:
        raise ValueError("kNN needs training rows")
    if metric not in KNN_METRICS:
        raise ValueError(f"metric must be one of {KNN_METRICS}, got {metric!r}")
    sq_train = np.asarray(X_train.multiply(X_train).sum(axis=1)).ravel()
    sq_test = np.asarray(X_test.multiply(X_test).sum(axis=1)).ravel()
    if metric == "cosine":
        def unit(X, sq):
            inv = np.zeros_like(sq)
            np.divide(1.0, np.sqrt(sq), out=inv, where=sq > 0)
            return sparse.diags(inv) @ X
        X_train, X_test = unit(X_train, sq_train).tocsr(), unit(X_test, sq_test).tocsr()
    kmax = min(max(ks), n_train)
    X_train_t = X_train.T.tocsc()
    out = {k: np.empty(n_test, dtype=np.float64) for k in ks}
    for start in range(0, n_test, chunk):
        stop = min(start + chunk, n_test)
        sim = (X_test[start:stop] @ X_train_t).toarray()
        if metric == "euclidean":
            dist = sq_test[start:stop, None] + sq_train[None, :] - 2.0 * sim
        else:
            dist = 1.0 - sim
        if kmax < n_train:
            near = np.argpartition(dist, kmax - 1, axis=1)[:, :kmax]
        else:
            near = np.broadcast_to(np.arange(n_train), dist.shape).copy()
        # order the kmax nearest by (distance, row index)
        near.sort(axis=1)
        order = np.argsort(np.take_along_axis(dist, near, axis=1), axis=1, kind="stable")
        near = np.take_along_axis(near, order, axis=1)
        labels = y_train[near]
        for k in ks:
            out[k][start:stop] = labels[:, :min(k, n_train)].mean(axis=1)
    return out


# ---------------------------------------------------------------- evaluation
class _Silent:
    """The progress of a caller that shows none."""

    def step(self, *args, **kwargs):
        pass

    def wrap(self, items, *args, **kwargs):
        return items

    def close(self):
        pass


def _figures(y, log_odds, verdicts):
    from spamnb.bayes import metrics

    return metrics.summary(y, verdicts, log_odds, FPR_POINTS)


def _mean_std(rows):
    import numpy as np

    keys = [k for k, _, _ in COLUMNS]
    mean = {k: float(np.nanmean([r[k] for r in rows])) for k in keys}
    std = {k: (float(np.nanstd([r[k] for r in rows], ddof=1)) if len(rows) > 1 else 0.0) for k in keys}
    return mean, std


def compare_variants(params):
    """The naive Bayes settings of --compare: the filter's, then one change at a time."""
    base = (params["alpha"], params["prior"], params["counts"])
    out = [base]
    out += [(base[0], p, base[2]) for p in COMPARE_PRIORS]
    out += [(a, base[1], base[2]) for a in COMPARE_ALPHAS]
    out += [(base[0], base[1], c) for c in COMPARE_COUNTS]
    seen, unique = set(), []
    for v in out:
        if v not in seen:
            seen.add(v)
            unique.append(v)
    return unique


def _nb_model(alpha, prior):
    from spamnb.bayes.multinomial import MultinomialNB

    return MultinomialNB(alpha=float(alpha), prior=prior)


def evaluate(messages, y, splits, params, compare=False, progress=None, n_jobs=1, tune=True, target_fpr=None,
             word_pairs="auto"):
    """Train and score on each ``(name, train_idx, test_idx)`` of ``splits``.

    ``messages``: list of bytes; ``y``: bool array (True = spam); ``params``:
    SpamFilter keyword arguments.  Returns a dict with per-fold figures
    (``folds``), ``mean``/``std``, the pooled three-way ``confusion`` and,
    with ``compare``, ``compare`` rows with their own mean/std.  Also keeps the
    pooled ``y_test``/``log_odds`` (numpy arrays) for plotting.

    ``tune`` (the default): each split's filter is fitted as ``spamnb
    train`` fits it (``SpamFilter.fit(tune=True)`` with ``target_fpr``, None:
    its default; ``word_pairs`` "auto" lets the fit decide them, 0 never; a
    window in ``params["word_pairs"]`` is used as given) and scored at the
    cutoffs it chose; each fold's row then says which (``spam_log_odds``,
    ``ham_log_odds``, ``word_pairs``).  ``tune=False``: counts only, at the
    cutoffs of ``params`` (the defaults unless given).

    ``n_jobs``: the filter of each split is trained and scored on that many
    worker processes (0 or None: every available core), each sent the
    messages once; the same figures as in one process (each split's work is
    the same, only where it runs changes).  ``--compare``'s variants stay in
    this process.
    """
    import numpy as np

    from spamnb.bayes import metrics
    from spamnb.model import SpamFilter

    from spamnb.model import AUTO_PAIRS, DEFAULT_TARGET_FPR

    y = np.asarray(y, dtype=bool)
    progress = progress or _Silent()
    spam_filter = make_filter(params)
    resolved = {k: getattr(spam_filter, k) for k in ("alpha", "prior", "counts", "spam_cutoff", "ham_cutoff")}
    fitting = None
    if tune:
        fitting = {"target_fpr": DEFAULT_TARGET_FPR if target_fpr is None else float(target_fpr),
                   "word_pairs": AUTO_PAIRS if word_pairs == "auto" and not params.get("word_pairs") else 0}
    resolved["tuned"] = fitting is not None
    folds, pooled_y, pooled_scores, pooled_verdicts = [], [], [], []
    variants = compare_variants(resolved) if compare else []
    compare_rows = {}
    X_all = None
    if compare:
        progress.step("counting tokens of the whole corpus", 0)
        vectoriser = make_filter(params, counts="raw", length_norm=0).fit(messages, y, tune=False)  # raw counts
        X_all = vectoriser.transform(messages)
        progress.step("counted tokens")
    for (name, train_idx, test_idx), (log_odds, verdicts, chosen) in zip(splits, _fold_results(
            messages, y, splits, params, resolved, fitting, n_jobs, progress)):
        row = _figures(y[test_idx], log_odds, verdicts)
        row.update(name=name, n_train=int(len(train_idx)), n_test=int(len(test_idx)), **chosen)
        folds.append(row)
        pooled_y.append(y[test_idx])
        pooled_scores.append(log_odds)
        pooled_verdicts.append(verdicts)
        progress.step(f"{name}: scored")
        if compare:   # the variants at this fold's cutoffs
            cutoffs = dict(resolved, spam_cutoff=chosen["spam_cutoff"], ham_cutoff=chosen["ham_cutoff"])
            _compare_fold(X_all, y, train_idx, test_idx, cutoffs, variants, compare_rows, progress, name)
    mean, std = _mean_std(folds)
    y_pool = np.concatenate(pooled_y) if pooled_y else np.zeros(0, bool)
    verdict_pool = np.concatenate(pooled_verdicts) if pooled_verdicts else np.zeros(0, object)
    result = {
        "params": resolved, "folds": folds, "mean": mean, "std": std,
        "confusion": metrics.verdict_confusion_matrix(y_pool, verdict_pool).tolist(),
        "y_test": y_pool, "log_odds": np.concatenate(pooled_scores) if pooled_scores else np.zeros(0),
        "verdicts": verdict_pool,
    }
    if compare:
        rows = []
        for key, fold_rows in compare_rows.items():
            m, s = _mean_std(fold_rows)
            rows.append({"name": key, "mean": m, "std": s, "folds": fold_rows})
        result["compare"] = rows
    return result


def default_jobs(jobs):
    if jobs is not None:
        return jobs
    from spamnb.training.workers import DEFAULT_JOBS

    return DEFAULT_JOBS


def _fold_result(messages, y, params, resolved, fitting, train_idx, test_idx):
    """``(log_odds, verdicts, chosen)`` of a split's test part, scored by a
    filter trained on its training part (as ``spamnb train`` trains it when
    ``fitting`` holds fit's ``target_fpr`` and ``word_pairs``; else counted
    only), at that filter's cutoffs; ``chosen``: those cutoffs (probabilities
    and log-odds) and the word-pair window it has."""
    import numpy as np

    from spamnb.model import logit

    train_messages, train_y = [messages[i] for i in train_idx], y[train_idx]
    if fitting is None:
        fold_filter = make_filter(params).fit(train_messages, train_y, tune=False)
    else:
        fold_filter = make_filter(params).fit(train_messages, train_y, tune=True, **fitting)
    spam_cutoff = resolved["spam_cutoff"] if fitting is None else fold_filter.spam_cutoff
    ham_cutoff = resolved["ham_cutoff"] if fitting is None else fold_filter.ham_cutoff
    test_messages = [messages[i] for i in test_idx]
    log_odds = np.asarray(fold_filter.score_many(test_messages), dtype=np.float64)
    evidence = np.array([fold_filter.evidence(m)[1:] for m in test_messages], dtype=np.float64).reshape(-1, 3)
    chosen = {"spam_cutoff": float(spam_cutoff), "ham_cutoff": float(ham_cutoff),
              "spam_log_odds": logit(spam_cutoff), "ham_log_odds": logit(ham_cutoff),
              "word_pairs": int(fold_filter.tokenizer_.word_pairs)}
    return log_odds, verdicts_from_log_odds(log_odds, spam_cutoff, ham_cutoff, evidence.T), chosen


_SHARED = None   # in a worker: (messages, y, params, resolved, fitting), sent once


def _share(*data):
    global _SHARED
    _SHARED = data


def _fold_in_worker(train_idx, test_idx):
    return _fold_result(*_SHARED, train_idx, test_idx)


def _fold_results(messages, y, splits, params, resolved, fitting, n_jobs, progress):
    """``_fold_result`` of each split, in order: here, or on ``n_jobs`` worker processes."""
    from spamnb.training.workers import process_pool, available_cores

    n_jobs = available_cores() if n_jobs is None or n_jobs <= 0 else n_jobs
    n_jobs = min(n_jobs, len(splits))
    if n_jobs <= 1:
        for name, train_idx, test_idx in splits:
            progress.step(f"{name}: training the filter", 0)
            yield _fold_result(messages, y, params, resolved, fitting, train_idx, test_idx)
        return
    progress.step(f"{len(splits)} splits on {n_jobs} processes", 0)
    with process_pool(n_jobs, _share, (messages, y, params, resolved, fitting)) as pool:
        yield from pool.map(_fold_in_worker, [train for _n, train, _t in splits], [test for _n, _t2, test in splits])


def _compare_fold(X_all, y, train_idx, test_idx, params, variants, rows, progress, fold_name):
    import numpy as np

    from spamnb.model import evidence_sums

    X_train_raw = X_all[train_idx]
    seen = np.asarray(X_train_raw.getnnz(axis=0)) > 0   # the fold's own vocabulary
    X_train_raw = X_train_raw[:, seen]
    X_test_raw = X_all[test_idx][:, seen]
    y_train, y_test = y[train_idx], y[test_idx]
    transformed = {}
    for alpha, prior, counts in variants:
        if counts not in transformed:
            transformed[counts] = (count_transform(X_train_raw, counts), count_transform(X_test_raw, counts))
        X_train, X_test = transformed[counts]
        model = _nb_model(alpha, prior).fit(X_train, y_train)
        log_odds = np.asarray(model.decision_function(X_test), dtype=np.float64)
        verdicts = verdicts_from_log_odds(log_odds, params["spam_cutoff"], params["ham_cutoff"],
                                          evidence_sums(X_test, model.feature_log_prob_))
        key = f"NB alpha={alpha:g} {prior} {counts}"
        if (alpha, prior, counts) == (params["alpha"], params["prior"], params["counts"]):
            key += " (filter)"
        rows.setdefault(key, []).append(_figures(y_test, log_odds, verdicts))
        progress.step(f"{fold_name}: {key}")
    X_train, X_test = (count_transform(X_train_raw, params["counts"]), count_transform(X_test_raw, params["counts"]))
    for metric in KNN_METRICS:
        fractions = knn_spam_fraction(X_train, y_train, X_test, KNN_K, metric)
        for k in KNN_K:
            verdicts = np.where(fractions[k] > 0.5, "spam", "ham").astype(object)
            key = f"kNN {metric} k={k}"
            rows.setdefault(key, []).append(_figures(y_test, fractions[k], verdicts))
        progress.step(f"{fold_name}: kNN {metric}")


# ---------------------------------------------------------------- output
def _cell(value, scale):
    if value is None or value != value:
        return "n/a"
    return f"{value * scale:.2f}" if scale != 1.0 else f"{value:.3f}"


def format_folds(result):
    """The per-fold table (with each fold's cutoffs as log-odds and word-pair
    window when they were chosen by the fold's training) and the mean ± std line."""
    tuned = result["params"].get("tuned", False)
    extra = f"{'spam>=':>9}{'ham<=':>8}{'pairs':>6}" if tuned else ""
    head = f"{'fold':<10}{'train':>7}{'test':>7}" + "".join(f"{title:>13}" for _, title, _ in COLUMNS) + extra
    lines = [head, "-" * len(head)]
    for row in result["folds"]:
        chosen = (f"{row['spam_log_odds']:>9.2f}{row['ham_log_odds']:>8.2f}{row['word_pairs'] or '-':>6}"
                  if tuned else "")
        lines.append(f"{row['name']:<10}{row['n_train']:>7}{row['n_test']:>7}"
                     + "".join(f"{_cell(row[k], s):>13}" for k, _, s in COLUMNS) + chosen)
    lines.append("-" * len(head))
    lines.append(f"{'mean':<24}" + "".join(f"{_cell(result['mean'][k], s):>13}" for k, _, s in COLUMNS))
    if len(result["folds"]) > 1:
        lines.append(f"{'± std':<24}" + "".join(f"{_cell(result['std'][k], s):>13}" for k, _, s in COLUMNS))
    return "\n".join(lines) + "\n"


def format_compare(rows):
    """One line per method: mean ± std of each figure over the folds."""
    width = max(len(r["name"]) for r in rows) + 2
    head = f"{'method':<{width}}" + "".join(f"{title:>16}" for _, title, _ in COLUMNS)
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = []
        for k, _, s in COLUMNS:
            mean, std = _cell(r["mean"][k], s), _cell(r["std"][k], s)
            cells.append(f"{mean} ± {std}" if len(r["folds"]) > 1 else mean)
        lines.append(f"{r['name']:<{width}}" + "".join(f"{c:>16}" for c in cells))
    return "\n".join(lines) + "\n"


def write_plot(path, y, log_odds, cutoffs=None):
    """ROC curve with a log FPR axis and histograms of ham and spam log-odds;
    ``cutoffs`` (spam, ham probabilities) are drawn as lines on the histogram."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from spamnb.bayes import metrics

    y = np.asarray(y, dtype=bool)
    fpr, tpr, _ = metrics.roc_curve(y, log_odds)
    n_ham = max(1, int((~y).sum()))
    floor = 0.5 / n_ham  # where FPR = 0 is drawn on the log axis
    fig, (ax_roc, ax_hist) = plt.subplots(1, 2, figsize=(11, 4.5))
    ax_roc.step(np.maximum(fpr, floor), tpr, where="post")
    ax_roc.set_xscale("log")
    ax_roc.set_xlim(floor, 1.0)
    caught_at_zero = float(tpr[fpr <= 0].max()) if np.any(fpr <= 0) else 0.0
    ax_roc.set_ylim(max(0.0, min(0.8, caught_at_zero - 0.05)), 1.005)  # zoom on the part that matters
    ax_roc.set_xlabel(f"false positive rate (log; FPR 0 drawn at {floor:.1e})")
    ax_roc.set_ylabel("spam caught (TPR)")
    ax_roc.set_title(f"ROC of all test folds pooled, 1-AUC = {metrics.one_minus_auc_percent(y, log_odds):.3f} %")
    ax_roc.grid(True, which="both", alpha=0.3)
    finite = np.asarray(log_odds)[np.isfinite(log_odds)]
    lo, hi = (np.percentile(finite, [0.5, 99.5]) if finite.size else (-1.0, 1.0))
    bins = np.linspace(lo, hi if hi > lo else lo + 1, 60)
    clipped = np.clip(log_odds, bins[0], bins[-1])
    ax_hist.hist(clipped[~y], bins=bins, alpha=0.6, label=f"ham ({int((~y).sum())})")
    ax_hist.hist(clipped[y], bins=bins, alpha=0.6, label=f"spam ({int(y.sum())})")
    if cutoffs is not None:
        for p, style in zip(cutoffs, ("--", ":")):
            if 0.0 < p < 1.0:
                ax_hist.axvline(np.log(p / (1.0 - p)), color="black", linestyle=style, linewidth=1,
                                label=f"cutoff P = {p:g}")
    ax_hist.set_yscale("log")
    ax_hist.set_xlabel("log-odds log P(spam|m)/P(ham|m) (clipped to the 0.5-99.5 percentiles)")
    ax_hist.set_ylabel("messages")
    # above the axes, outside them: inside, the legend hid the histogram's bars wherever it went
    ax_hist.legend(loc="lower center", bbox_to_anchor=(0.5, 1.01), ncol=2, fontsize="small", frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def json_ready(result, settings):
    out = {k: v for k, v in result.items() if k not in ("y_test", "log_odds", "verdicts")}
    out["settings"] = settings
    return out


# ---------------------------------------------------------------- the command
def resolved_params(params):
    f = make_filter(params)
    return {k: getattr(f, k) for k in ("alpha", "prior", "counts", "spam_cutoff", "ham_cutoff")}


def make_filter(params, **overrides):
    """``SpamFilter(**params)``; with ``params["word_pairs"]`` W, the tokenizer
    ``spamnb train --word-pairs W`` trains with (``tokenizer.with_pairs``)."""
    from spamnb.model import SpamFilter
    from spamnb.mail.tokenizer import with_pairs

    params = {**params, **overrides}
    pairs = params.pop("word_pairs", 0)
    return SpamFilter(tokenizer=with_pairs(pairs) if pairs else None, **params)
