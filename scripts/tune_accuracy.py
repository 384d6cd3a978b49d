#!/usr/bin/env python3
"""Accuracy on both shared corpora: cutoffs chosen on the training mail, tested on the fixed split.

For each corpus: fit ``SpamFilter`` on the train part of the fixed split
(md5(relpath) % 5 != 0), choose cutoffs with ``spamnb.calibrate`` (k-fold
cross-validation inside the train part only), then score the test part and
report, at those cutoffs and at the default ones: FPR (ham called spam),
spam missed (unsure counts as missed), unsure share, 1-AUC, spam caught at
0.1 % FPR.  Several target FPRs and margins side by side.

    python scripts/tune_accuracy.py                     # both shared corpora
    python scripts/tune_accuracy.py --margins 0,1,2 --targets 0.001,0.0005
    python scripts/tune_accuracy.py --ranking "max_text_chars=750;max_text_chars=3000;alpha=0.1"

``--matrix``: model-side variants on one token-count matrix (``;``-separated):
``log`` (the filter's transform), ``binary``, ``l2=S`` (log counts, each
message scaled to Euclidean length S: Rennie et al.'s length normalisation),
``l2k=S`` (the same, the held-out message's length taken over the tokens the
model knows, as a compiled scorer would), ``min_df=2`` (tokens seen in one training message dropped: hapax selection),
``alpha=A``; combined with ``,``.

``--thick``: training on error with a margin ("thick threshold"), variants
``margin=M,passes=P`` (``;``-separated): the train part (of each CV fold, and
of the fixed split) is passed over P times in a fixed shuffled order; a message
is learned when the model as it stands misclassifies it or its |log-odds| < M
(``spamnb.online.OnlineFilter``); against the filter learning everything once.

``--ranking``: settings (``;``-separated; each ``name=value[,name=value]``,
tokenizer settings or alpha/counts/prior) against the defaults: 1-AUC per
fold of the 5-fold cross-validation inside the train part (mean ± std, paired
wins/losses against the defaults on the same folds), then on the fixed split's
test part; both corpora.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
CORPORA = (os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
           os.path.join(REPO, "..", "shared", "corpora", "enron-spam"))


def rates(y, log_odds, spam_cut, ham_cut):
    import numpy as np

    y = np.asarray(y, dtype=bool)
    fp = int((log_odds[~y] >= spam_cut).sum())
    return {"fp": fp, "fpr": fp / max(1, (~y).sum()),
            "missed": float((log_odds[y] < spam_cut).mean()),
            "unsure": float(((log_odds > ham_cut) & (log_odds < spam_cut)).mean())}


def main(argv=None):
    import numpy as np

    from spamnb import SpamFilter, metrics
    from spamnb.calibrate import _logit, calibrate
    from spamnb.corpus import labelled_messages
    from spamnb.evaluate import md5_split
    from spamnb.filter import DEFAULT_HAM_CUTOFF, DEFAULT_SPAM_CUTOFF
    from spamnb.tokenizer import Tokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", default=list(CORPORA), metavar="CORPUS")
    parser.add_argument("--targets", default="0.001", help="target FPRs, comma-separated")
    parser.add_argument("--margins", default="0,1,2", help="safety margins in log-odds, comma-separated")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--params", default="", help="filter settings for the cutoff runs, e.g. length_norm=5,alpha=0.001")
    parser.add_argument("--ranking", help="compare settings instead (see above)")
    parser.add_argument("--matrix", help="compare model-side variants instead (see above)")
    parser.add_argument("--thick", help="compare thick-threshold training instead (see above)")
    args = parser.parse_args(argv)
    if args.thick:
        return thick_variants(args)
    if args.ranking:
        return ranking(args)
    if args.matrix:
        return matrix_variants(args)
    targets = [float(v) for v in args.targets.split(",")]
    margins = [float(v) for v in args.margins.split(",")]
    print(f"{'corpus':<14}{'cutoffs':<28}{'spam at':>9}{'ham at':>8}{'CV FPR%':>9}{'CV miss%':>9}"
          f"{'FP':>5}{'FPR%':>7}{'missed%':>9}{'unsure%':>9}")
    for corpus in args.corpora:
        items = labelled_messages([corpus])
        messages = [m.data for m in items]
        y = np.array([m.is_spam for m in items], dtype=bool)
        train, test = md5_split([m.relpath for m in items])
        name = os.path.basename(os.path.normpath(corpus))
        t0 = time.perf_counter()
        tok, model = _variant(args.params)
        spam_filter = SpamFilter(tokenizer=Tokenizer(**tok), **model).fit([messages[i] for i in train], y[train])
        fit_seconds = time.perf_counter() - t0
        log_odds = np.asarray(spam_filter.score_many([messages[i] for i in test]))
        yt = y[test]
        print(f"# {name} {args.params or 'defaults'}: train {len(train)} ({int(y[train].sum())} spam), test {len(test)} "
              f"({int(yt.sum())} spam); fit {fit_seconds:.2f} s; test 1-AUC "
              f"{metrics.one_minus_auc_percent(yt, log_odds):.4f} %, caught at 0.1 % FPR "
              f"{100 * metrics.tpr_at_fpr(yt, log_odds, 0.001):.1f} %")
        r = rates(yt, log_odds, _logit(DEFAULT_SPAM_CUTOFF), _logit(DEFAULT_HAM_CUTOFF))
        print(f"{name:<14}{'default':<28}{_logit(DEFAULT_SPAM_CUTOFF):>9.2f}{_logit(DEFAULT_HAM_CUTOFF):>8.2f}"
              f"{'':>9}{'':>9}{r['fp']:>5}{100 * r['fpr']:>7.2f}{100 * r['missed']:>9.2f}{100 * r['unsure']:>9.2f}")
        for target in targets:
            for margin in margins:
                t0 = time.perf_counter()
                cal = calibrate(spam_filter, [messages[i] for i in train], y[train], target_fpr=target,
                                margin=margin, n_folds=args.folds)
                seconds = time.perf_counter() - t0
                r = rates(yt, log_odds, cal.spam_log_odds, cal.ham_log_odds)
                label = f"target {100 * target:g}% margin {margin:g}"
                print(f"{name:<14}{label:<28}{cal.spam_log_odds:>9.2f}{cal.ham_log_odds:>8.2f}"
                      f"{100 * cal.expected_fpr:>9.3f}{100 * cal.expected_spam_missed:>9.2f}"
                      f"{r['fp']:>5}{100 * r['fpr']:>7.2f}{100 * r['missed']:>9.2f}{100 * r['unsure']:>9.2f}"
                      f"   ({seconds:.2f} s)")
    return 0


def _pair_tokenizer(window, **settings):
    """A Tokenizer that also gives word pairs of the body words (an experiment done
    outside the tokenizer, in Python: orthogonal sparse bigrams, Siefkes et al. 2004:
    each word with each of the next ``window - 1`` words, the distance in the token)."""
    from spamnb.tokenizer import Tokenizer

    class PairTokenizer(Tokenizer):
        def stream(self, message):
            stream = super().stream(message)
            words = [t for t in stream.tokens() if ":" not in t]
            pairs = []
            for i, word in enumerate(words):
                for d in range(1, window):
                    if i + d >= len(words):
                        break
                    pairs.append(f"{word} {d} {words[i + d]}")
            stream.add_tokens(pairs, self._prefix("pair:"))
            return stream

    return PairTokenizer(**settings)


def _variant(text):
    from spamnb.tokenizer import DEFAULTS

    tokenizer, model = {}, {}
    for pair in filter(None, text.split(",")):
        key, value = pair.split("=", 1)
        key = key.strip()
        try:
            value = int(value)
        except ValueError:
            try:
                value = float(value)
            except ValueError:
                value = {"true": True, "false": False}.get(value.lower(), value)
        (tokenizer if key in DEFAULTS else model)[key] = value
    return tokenizer, model


class _Corpus:
    """A corpus read once: messages, labels, the fixed split, the CV folds of its train part."""

    def __init__(self, path, n_folds):
        import numpy as np

        from spamnb.corpus import labelled_messages
        from spamnb.evaluate import md5_split, stratified_folds

        items = labelled_messages([path])
        self.name = os.path.basename(os.path.normpath(path))
        self.messages = [m.data for m in items]
        self.y = np.array([m.is_spam for m in items], dtype=bool)
        self.train, self.test = md5_split([m.relpath for m in items])
        self.folds = stratified_folds(self.y[self.train], n_folds, 0)   # indices into the train part


def _compare(args, variants, score):
    """One line per corpus and variant: CV 1-AUC per fold of the train part (mean ± std,
    paired wins/losses against the first variant), then the test part's figures.
    ``score(corpus, variant, cache)`` returns (held-out log-odds of the train part, of the test part)."""
    import numpy as np

    from spamnb import metrics

    width = max(24, max(len(v) for v in variants) + 2)
    print(f"{'corpus':<14}{'variant':<{width}}{'CV 1-AUC % mean ± std':>24}{'wins/losses':>13}"
          f"{'test 1-AUC %':>14}{'test caught@0.1%':>18}")
    for path in args.corpora:
        corpus = _Corpus(path, args.folds)
        y_train, y_test = corpus.y[corpus.train], corpus.y[corpus.test]
        cache, base = {}, None
        for variant in variants:
            cv, test_scores = score(corpus, variant, cache)
            per_fold = np.array([metrics.one_minus_auc_percent(y_train[f], cv[f]) for f in corpus.folds])
            if base is None:
                base, record = per_fold, ""
            else:
                record = f"{int((per_fold < base).sum())}/{int((per_fold > base).sum())}"
            print(f"{corpus.name:<14}{variant:<{width}}{per_fold.mean():>14.4f} ± {per_fold.std(ddof=1):<7.4f}"
                  f"{record:>13}{metrics.one_minus_auc_percent(y_test, test_scores):>14.4f}"
                  f"{100 * metrics.tpr_at_fpr(y_test, test_scores, 0.001):>18.1f}")
    return 0


def ranking(args):
    import numpy as np

    from spamnb import SpamFilter
    from spamnb.calibrate import cross_val_log_odds
    from spamnb.tokenizer import Tokenizer

    def score(corpus, variant, cache):
        tok, model = _variant("" if variant == "default" else variant)
        window = model.pop("pairs", 0)
        tokenizer = _pair_tokenizer(window, **tok) if window else Tokenizer(**tok)
        train_msgs = [corpus.messages[i] for i in corpus.train]
        spam_filter = SpamFilter(tokenizer=tokenizer, **model).fit(train_msgs, corpus.y[corpus.train])
        cv = cross_val_log_odds(spam_filter, train_msgs, corpus.y[corpus.train], args.folds, 0)
        return cv, np.asarray(spam_filter.score_many([corpus.messages[i] for i in corpus.test]))

    return _compare(args, ["default"] + [v.strip() for v in args.ranking.split(";") if v.strip()], score)


def _transformed(X_raw, spec):
    """(matrix, alpha, min_df) of a ``--matrix`` variant."""
    import numpy as np
    from scipy import sparse

    from spamnb.filter import DEFAULT_ALPHA

    from spamnb.tokenizer import DEFAULTS

    X = X_raw.tocsr().astype(np.float64)
    alpha, min_df, counts, scale, renormalise = DEFAULT_ALPHA, 1, "log", None, None
    for item in filter(None, spec.split(",")):
        key, _, value = item.partition("=")
        if key in DEFAULTS:
            continue   # a tokenizer setting: in the matrix already
        if key in ("log", "binary", "raw"):
            counts = key
        elif key in ("l2", "l2k"):
            scale = float(value)
            renormalise = scale if key == "l2k" else None
        elif key == "alpha":
            alpha = float(value)
        elif key == "min_df":
            min_df = int(value)
        elif key != "default":
            raise ValueError(f"unknown variant {item!r}")
    X = X.copy()
    if counts == "log":
        X.data = np.log1p(X.data)
    elif counts == "binary":
        X.data[:] = 1.0
    if scale is not None:
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
        inv = np.divide(scale, norms, out=np.zeros_like(norms), where=norms > 0)
        X = sparse.diags(inv) @ X
    return X.tocsr(), alpha, min_df, renormalise


def matrix_variants(args):
    from spamnb import SpamFilter
    from spamnb.calibrate import fold_log_odds
    from spamnb.tokenizer import Tokenizer

    def score(corpus, variant, cache):
        tok, _ = _variant("" if variant == "log" else ",".join(
            p for p in variant.split(",") if "=" in p and p.split("=")[0] not in ("l2", "l2k")))
        key = tuple(sorted(tok.items()))
        if key not in cache:   # raw counts of the whole corpus over one vocabulary
            cache[key] = SpamFilter(tokenizer=Tokenizer(**tok), counts="raw").fit(
                corpus.messages, corpus.y).transform(corpus.messages)
        X, alpha, min_df, renorm = _transformed(cache[key], variant)
        train, test, y = corpus.train, corpus.test, corpus.y
        cv = fold_log_odds(X[train], y[train], corpus.folds, alpha, min_df=min_df, renormalise=renorm)
        return cv, fold_log_odds(X, y, [test], alpha, min_df=min_df, renormalise=renorm)[test]

    return _compare(args, ["log"] + [v.strip() for v in args.matrix.split(";") if v.strip()], score)


def _thick_scores(streams, y, train, test, margin, passes, seed=0):
    import numpy as np

    from spamnb.online import OnlineFilter

    model = OnlineFilter()
    order = np.asarray(train)[np.random.default_rng(seed).permutation(len(train))]
    for _ in range(passes):
        for i in order:
            score = model.log_odds(streams[i])
            if margin is None or (score >= 0) != y[i] or abs(score) < margin:
                model.learn(streams[i], bool(y[i]))
    return np.array([model.log_odds(streams[i]) for i in test])


def thick_variants(args):
    import numpy as np

    from spamnb.tokenizer import Tokenizer

    def score(corpus, variant, cache):
        if "streams" not in cache:
            tokenizer = Tokenizer()
            cache["streams"] = [tokenizer.stream(m) for m in corpus.messages]
        streams, y, train = cache["streams"], corpus.y, corpus.train
        opts = dict(item.split("=") for item in variant.split(",") if "=" in item)
        margin = None if variant == "all" else float(opts.get("margin", 0))
        passes = int(opts.get("passes", 1))
        cv = np.empty(len(train))
        for f in corpus.folds:
            rest = np.setdiff1d(np.arange(len(train)), f)
            cv[f] = _thick_scores(streams, y, train[rest], train[f], margin, passes)
        return cv, _thick_scores(streams, y, train, corpus.test, margin, passes)

    return _compare(args, ["all"] + [v.strip() for v in args.thick.split(";") if v.strip()], score)


if __name__ == "__main__":
    sys.exit(main())
