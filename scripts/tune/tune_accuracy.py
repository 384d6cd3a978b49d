#!/usr/bin/env python3
"""Accuracy on both shared corpora: cutoffs chosen on the training mail, tested on the fixed split.

For each corpus: fit ``SpamFilter`` on the train part of the fixed split
(md5(relpath) % 5 != 0), choose cutoffs with ``spamnb.estimator.calibrate`` (k-fold
cross-validation inside the train part only), then score the test part and
report, at those cutoffs and at the default ones: FPR (ham called spam),
spam missed (unsure counts as missed), unsure share, 1-AUC, spam caught at
0.1 % FPR.  Several target FPRs and margins side by side.

    python scripts/tune/tune_accuracy.py                     # both shared corpora
    python scripts/tune/tune_accuracy.py --margins 0,1,2 --targets 0.001,0.0005
    python scripts/tune/tune_accuracy.py --ranking "max_text_chars=750;max_text_chars=3000;alpha=0.1"

``--matrix``: model-side variants on one token-count matrix (``;``-separated):
``log`` (the filter's transform), ``binary``, ``l2=S`` (log counts, each
message scaled to Euclidean length S: Rennie et al.'s length normalisation),
``l2k=S`` (the same, the held-out message's length taken over the tokens the
model knows, as a compiled scorer would), ``min_df=2`` (tokens seen in one training message dropped: hapax selection),
``alpha=A`` (0.01 when not given: ``l2k=50`` then ranks as the filter's
``length_norm=5, alpha=0.001``, only alpha / S counts), ``dir=MU[,beta=B]``
(per-token soft counts alpha_i = alpha + MU (n_i + B) / (N + V B) from the
pooled counts; alpha 0 unless given), ``boost=W,bmargin=M`` (training beyond
errors without an order: each training set's own 5-fold held-out scores; the
messages on the wrong side or within M of 0 count 1 + W times); combined with ``,``.
Tokenizer settings (``subject_words=false``, ...) and ``pairs=W`` build their own matrix
(word pairs, an experiment in Python: ``pair_scope=all|body|subject``, ``pair_limit=N``;
with ``pw=W`` the pairs' columns weigh W before the length is taken, with
``palpha=A`` they get their own soft count A), and so do ``stems=N`` (each word's
first N characters as ``stem:`` tokens too) and ``shapes=true`` (``shape:`` of words
with digits).  ``idf[=P]``: each column times log(n / df) ** P over the train part.

``--thick``: training on error with a margin ("thick threshold"), variants
``margin=M,passes=P`` (``;``-separated): the train part (of each CV fold, and
of the fixed split) is passed over P times in a fixed shuffled order; a message
is learned when the model as it stands misclassifies it or its |log-odds| < M
(``spamnb.evaluation.online.OnlineModel``); against the filter learning everything once.

``--tails N``: the N held-out train ham scored highest and spam scored
lowest (5-fold CV inside the train part; settings from ``--params``).
``--test-tails N``: the same on the test part, scored by the model of the
whole train part, with the spam caught above each of the highest test ham
and the spam's low percentiles (what caught at 0.1 % FPR rests on).
``--speed VARIANTS``: CPU time of ``fit`` and of one-message scoring against
the defaults, best of 3 alternated runs in this process.
``--subsample N`` (with ``--seed``): the comparisons on N train messages drawn
at random.  ``--ham-cuts``: the held-out trade at candidate ham cutoffs.
``--base``: the variant the others are paired against.

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

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
CORPORA = (os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
           os.path.join(REPO, "..", "shared", "corpora", "enron-spam"))
sys.path.insert(0, os.path.join(REPO, "scripts"))   # harness.py
from harness import MATRIX_ALPHA, transformed_matrix  # noqa: E402


def rates(y, log_odds, spam_cut, ham_cut):
    import numpy as np

    y = np.asarray(y, dtype=bool)
    fp = int((log_odds[~y] >= spam_cut).sum())
    return {"fp": fp, "fpr": fp / max(1, (~y).sum()),
            "missed": float((log_odds[y] < spam_cut).mean()),
            "unsure": float(((log_odds > ham_cut) & (log_odds < spam_cut)).mean())}


def main(argv=None):
    import numpy as np

    from spamnb import SpamFilter

    from spamnb.bayes import metrics
    from spamnb.estimator.calibrate import _logit, calibrate
    from spamnb.training.corpus import labelled_messages
    from spamnb.evaluation.crossval import md5_split
    from spamnb.estimator.defaults import DEFAULT_HAM_CUTOFF, DEFAULT_SPAM_CUTOFF

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", default=list(CORPORA), metavar="CORPUS")
    parser.add_argument("--targets", default="0.001", help="target FPRs, comma-separated")
    parser.add_argument("--margins", default="0,1,2", help="safety margins in log-odds, comma-separated")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--params", default="", help="filter settings for the cutoff runs, e.g. length_norm=5,alpha=0.001")
    parser.add_argument("--ranking", help="compare settings instead (see above)")
    parser.add_argument("--matrix", help="compare model-side variants instead (see above)")
    parser.add_argument("--subsample", type=int, default=0,
                        help="--ranking/--matrix/--thick on this many train messages drawn at random (a small user)")
    parser.add_argument("--seed", type=int, default=0, help="the --subsample draw")
    parser.add_argument("--ham-cuts", type=lambda v: [float(x) for x in v.split(",")],
                        help="with --ranking/--matrix: held-out ham above and spam at or below these log-odds")
    parser.add_argument("--base", default="log",
                        help="the --matrix (or --ranking) variant the others are paired against")
    parser.add_argument("--thick", help="compare thick-threshold training instead (see above)")
    parser.add_argument("--speed", metavar="VARIANTS",
                        help="CPU seconds of fit (train part) and score (test part, one message at a time) "
                             "for ;-separated settings against the defaults, best of 3 alternated runs")
    parser.add_argument("--tails", type=int, metavar="N",
                        help="list the N held-out train ham scored highest and spam lowest (with --params)")
    parser.add_argument("--test-tails", type=int, metavar="N",
                        help="the same for the test part, scored by the model of the train part")
    args = parser.parse_args(argv)
    if args.tails:
        return tails(args)
    if args.test_tails:
        return test_tails(args)
    if args.speed:
        return speed(args)
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
        spam_filter = SpamFilter(tokenizer=_tokenizer(tok, model), **model).fit([messages[i] for i in train], y[train], tune=False)
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


def _pair_tokenizer(window, scope="all", limit=0, only=False, **settings):
    """A Tokenizer that also gives word pairs of the body words (an experiment done
    outside the tokenizer, in Python: orthogonal sparse bigrams, Siefkes et al. 2004:
    each word with each of the next ``window - 1`` words, the distance in the token).
    ``scope``: "all" the untagged words (the Subject: words given as body words,
    then the body's), "body" pairs within each text part only, "subject" the
    Subject: words only; ``limit`` > 0: pairs of the first ``limit`` words of each;
    ``only``: the pairs alone (their own matrix, for ``pw=``/``palpha=``)."""
    from spamnb.mail.tokenizer import Tokenizer

    def osb(words):
        words = words[:limit] if limit else words
        return [f"{word} {d} {words[i + d]}" for i, word in enumerate(words)
                for d in range(1, window) if i + d < len(words)]

    class PairTokenizer(Tokenizer):
        def stream(self, message):
            stream = super().stream(message)
            tokens = stream.tokens()
            if scope == "all":
                runs = [[t for t in tokens if ":" not in t]]
            elif scope == "body":
                runs = [[t for t in tokens[a:b] if ":" not in t] for a, b in stream.regions]
            elif scope == "subject":
                runs = [[t[8:] for t in tokens if t.startswith("subject:")]]
            else:
                raise ValueError(f"unknown pair scope {scope!r}")
            out = self._scanner.stream() if only else stream
            for words in runs:
                out.add_tokens(osb(words), self._prefix("pair:"))
            return out

    return PairTokenizer(**settings)


def _received_lines(data, n):
    """The first ``n`` Received: fields of a message (the ones the receiving side
    added last: hard for a sender to fake), unfolded, lower-cased, each cut at its
    ``;`` (the date)."""
    import re

    from spamnb.mail.headers import header_of

    head = header_of(data, 65536).decode("latin-1")
    head = re.sub(r"\r?\n[ \t]+", " ", head)
    fields = re.findall(r"^received:[ \t]*(.*)$", head, re.IGNORECASE | re.MULTILINE)[:n]
    return [field.lower().split(";", 1)[0] for field in fields]


def _extra_tokenizer(stems=0, shapes=False, rcvd_words=0, rcvd_phrases=0, **settings):
    """A Tokenizer that also gives, for each untagged word, ``stem:`` + its first
    ``stems`` characters (words longer than that) and, with ``shapes``, ``shape:``
    + the word with each digit run as 9 and each letter run as a (words with a
    digit); ``rcvd_words`` N: ``rcvd:`` + each word (host names, addresses,
    ``from``/``by``/``with``/``id`` and the rest) of the first N Received: fields,
    the ones the receiving side added, and ``rcvd_phrases`` N: ``rcvd2:`` + each
    two adjacent words of them (spamprobe's Received-line phrases): an
    experiment in Python, as the word pairs above."""
    import re

    from spamnb.model import message_bytes
    from spamnb.mail.tokenizer import Tokenizer

    digits, letters = re.compile(r"[0-9]+"), re.compile(r"[^\W\d_]+")
    word = re.compile(r"[a-z0-9][a-z0-9.\-]*[a-z0-9]|[a-z0-9]")

    class ExtraTokenizer(Tokenizer):
        def stream(self, message):
            stream = super().stream(message)
            if rcvd_words or rcvd_phrases:
                lines = _received_lines(message_bytes(message), max(rcvd_words, rcvd_phrases))
                for k, line in enumerate(lines):
                    words = word.findall(line)
                    if k < rcvd_words:
                        stream.add_tokens(words, self._prefix("rcvd:"))
                    if k < rcvd_phrases:
                        stream.add_tokens([f"{a} {b}" for a, b in zip(words, words[1:])], self._prefix("rcvd2:"))
            words = [t for t in stream.tokens() if ":" not in t]
            if stems:
                stream.add_tokens([w[:stems] for w in words if len(w) > stems], self._prefix("stem:"))
            if shapes:
                stream.add_tokens([letters.sub("a", digits.sub("9", w)) for w in words
                                   if any(c.isdigit() for c in w)], self._prefix("shape:"))
            return stream

    return ExtraTokenizer(**settings)


def speed(args):
    """Same-process A/B of training and scoring time (CPU time, best of 3, the
    variants alternated so that a busy machine costs them alike)."""
    from spamnb import SpamFilter
    from spamnb.training.corpus import labelled_messages
    from spamnb.evaluation.crossval import md5_split

    variants = ["default"] + [v.strip() for v in args.speed.split(";") if v.strip()]
    for path in args.corpora:
        items = labelled_messages([path])
        train, test = md5_split([m.relpath for m in items])
        messages = [items[i].data for i in train]
        labels = [items[i].is_spam for i in train]
        test_messages = [items[i].data for i in test]
        best = {v: [float("inf"), float("inf")] for v in variants}
        for _ in range(3):
            for variant in variants:
                tok, model = _variant("" if variant == "default" else variant)
                t0 = time.process_time()
                spam_filter = SpamFilter(tokenizer=_tokenizer(tok, model), **model).fit(messages, labels, tune=False)
                t1 = time.process_time()
                for m in test_messages:
                    spam_filter.score(m)
                t2 = time.process_time()
                best[variant] = [min(best[variant][0], t1 - t0), min(best[variant][1], t2 - t1)]
        name = os.path.basename(os.path.normpath(path))
        for variant in variants:
            fit_s, score_s = best[variant]
            print(f"{name:<14}{variant:<48} fit {fit_s:.3f} s ({len(messages) / fit_s:,.0f} msg/s)  "
                  f"score {score_s:.3f} s ({len(test_messages) / score_s:,.0f} msg/s)")
    return 0


def tails(args):
    """The held-out (CV) train messages ranked worst: what the tail is made of."""
    import numpy as np

    from spamnb import SpamFilter
    from spamnb.estimator.calibrate import cross_val_log_odds
    from spamnb.training.corpus import labelled_messages
    from spamnb.evaluation.crossval import md5_split

    for path in args.corpora:
        items = labelled_messages([path])
        train, _test = md5_split([m.relpath for m in items])
        tok, model = _variant(args.params)
        messages = [items[i].data for i in train]
        y = np.array([items[i].is_spam for i in train], dtype=bool)
        spam_filter = SpamFilter(tokenizer=_tokenizer(tok, model), **model).fit(messages, y, tune=False)
        cv = cross_val_log_odds(spam_filter, messages, y, args.folds, 0)
        ham, spam = np.flatnonzero(~y), np.flatnonzero(y)
        ham, spam = ham[np.argsort(-cv[ham], kind="stable")], spam[np.argsort(cv[spam], kind="stable")]
        allowed = int(0.001 * ham.size)
        print(f"# {os.path.basename(os.path.normpath(path))} {args.params or 'defaults'}: ham #{allowed + 1} "
              f"(the 0.1 % cutoff) at {cv[ham[allowed]]:.1f}, spam at or below it "
              f"{100 * (cv[spam] <= cv[ham[allowed]]).mean():.1f} %")
        for label, rows in (("ham", ham[:args.tails]), ("spam", spam[:args.tails])):
            for i in rows:
                _tail_row(label, cv[i], items[train[i]])
    return 0


def test_tails(args):
    """The test messages the model of the train part ranks worst."""
    import numpy as np

    from spamnb import SpamFilter
    from spamnb.training.corpus import labelled_messages
    from spamnb.evaluation.crossval import md5_split

    for path in args.corpora:
        items = labelled_messages([path])
        train, test = md5_split([m.relpath for m in items])
        tok, model = _variant(args.params)
        y = np.array([m.is_spam for m in items], dtype=bool)
        spam_filter = SpamFilter(tokenizer=_tokenizer(tok, model), **model).fit([items[i].data for i in train],
                                                                                y[train], tune=False)
        scores = np.asarray(spam_filter.score_many([items[i].data for i in test]))
        yt = y[test]
        ham, spam = np.sort(scores[~yt])[::-1], scores[yt]
        print(f"# {os.path.basename(os.path.normpath(path))} {args.params or 'defaults'}: {ham.size} test ham, "
              f"{spam.size} test spam; the highest ham {', '.join(f'{v:.1f}' for v in ham[:args.test_tails])}")
        print("  spam caught above ham #1..#4: " + ", ".join(f"{100 * (spam > ham[k]).mean():.1f} %"
                                                          for k in range(min(4, ham.size))))
        print("  spam percentiles 1 / 3 / 5 / 8 / 10: " + " / ".join(
            f"{v:.1f}" for v in np.percentile(spam, [1, 3, 5, 8, 10])))
        order = np.argsort(-scores, kind="stable")
        for label, rows in (("ham", [j for j in order if not yt[j]][:args.test_tails]),
                            ("spam", [j for j in order[::-1] if yt[j]][:args.test_tails])):
            for j in rows:
                _tail_row(label, scores[j], items[test[j]])
    return 0


def _tail_row(label, log_odds, item):
    """One line of --tails / --test-tails: label, log-odds, path, the message's first characters."""
    first = item.data[:160].decode("latin-1").replace("\n", " | ")
    print(f"{label:<5}{log_odds:>8.1f}  {item.relpath}  {first[:100]}")


def _tokenizer(tok, model):
    """The tokenizer of a variant: ``tok`` its settings; ``pairs=W`` (taken
    out of ``model``) the experiment above."""
    from spamnb.mail.tokenizer import Tokenizer

    extra = {key: model.pop(key) for key in ("stems", "shapes", "rcvd_words", "rcvd_phrases") if key in model}
    if extra:
        return _extra_tokenizer(**extra, **tok)
    window = model.pop("pairs", 0)
    pair_options = {key[5:]: model.pop(key) for key in ("pair_scope", "pair_limit", "pair_only") if key in model}
    return _pair_tokenizer(window, **pair_options, **tok) if window else Tokenizer(**tok)


def _variant(text):
    from spamnb.mail.tokenizer import DEFAULTS

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

    def __init__(self, path, n_folds, subsample=0, seed=0):
        import numpy as np

        from spamnb.training.corpus import labelled_messages
        from spamnb.evaluation.crossval import md5_split
        from spamnb.estimator.calibrate import stratified_folds

        items = labelled_messages([path])
        self.name = os.path.basename(os.path.normpath(path))
        self.messages = [m.data for m in items]
        self.y = np.array([m.is_spam for m in items], dtype=bool)
        self.train, self.test = md5_split([m.relpath for m in items])
        if subsample:   # a random share of the train part (the test part stays whole)
            rng = np.random.default_rng(seed)
            self.train = np.sort(rng.choice(np.asarray(self.train), size=min(subsample, len(self.train)),
                                            replace=False))
            self.name += f"[{len(self.train)}]"
        self.folds = stratified_folds(self.y[self.train], n_folds, 0)   # indices into the train part


def _compare(args, variants, score):
    """One line per corpus and variant: CV 1-AUC per fold of the train part (mean ± std,
    paired wins/losses against the first variant), then the test part's figures.
    ``score(corpus, variant, cache)`` returns (held-out log-odds of the train part, of the test part)."""
    import numpy as np

    from spamnb.bayes import metrics

    width = max(24, max(len(v) for v in variants) + 2)
    print(f"{'corpus':<14}{'variant':<{width}}{'CV 1-AUC % mean ± std':>24}{'wins/losses':>13}"
          f"{'test 1-AUC %':>14}{'test caught@0.1%':>18}")
    for path in args.corpora:
        corpus = _Corpus(path, args.folds, args.subsample, args.seed)
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
            for cut in getattr(args, "ham_cuts", None) or ():   # the trade at the ham cutoff, held out
                print(f"{'':<14}  ham cutoff {cut:g}: held-out ham above it {100 * (cv[~y_train] > cut).mean():.2f} %, "
                      f"spam at or below it {100 * (cv[y_train] <= cut).mean():.2f} %")
    return 0


def ranking(args):
    import numpy as np

    from spamnb import SpamFilter
    from spamnb.estimator.calibrate import cross_val_log_odds
    from spamnb.mail.tokenizer import Tokenizer

    def score(corpus, variant, cache):
        tok, model = _variant("" if variant == "default" else variant)
        tokenizer = _tokenizer(tok, model)
        train_msgs = [corpus.messages[i] for i in corpus.train]
        spam_filter = SpamFilter(tokenizer=tokenizer, **model).fit(train_msgs, corpus.y[corpus.train], tune=False)
        cv = cross_val_log_odds(spam_filter, train_msgs, corpus.y[corpus.train], args.folds, 0)
        return cv, np.asarray(spam_filter.score_many([corpus.messages[i] for i in corpus.test]))

    base = "default" if args.base == "log" else args.base
    return _compare(args, [base] + [v.strip() for v in args.ranking.split(";") if v.strip()], score)


def _soft_scores(X_train, y_train, X_test, alpha, mu=0.0, beta=0.0, renormalise=None, row_weight=None):
    """Log-odds of the rows of ``X_test`` under the naive Bayes of ``X_train``
    (rows weighted by ``row_weight``, default 1), over the tokens ``X_train``
    holds, with per-token Dirichlet soft counts
    alpha_i = alpha + mu (n_i + beta) / (N + V beta), n_i the token's count in
    both classes, N their sum, V the tokens held (``mu`` 0: one alpha for all)."""
    import numpy as np

    from spamnb.bayes.arithmetic import prior_log_odds

    y_train = np.asarray(y_train, dtype=bool)
    if row_weight is not None:
        from scipy import sparse

        X_train = sparse.diags(np.asarray(row_weight, dtype=np.float64)) @ X_train
    fc = np.vstack([np.asarray(X_train[~y_train].sum(axis=0)).ravel(),
                    np.asarray(X_train[y_train].sum(axis=0)).ravel()])
    seen = np.diff(X_train.tocsc().indptr) > 0
    n_features = int(seen.sum())
    a = np.broadcast_to(np.asarray(alpha, dtype=np.float64), fc.shape[1:]).copy()   # one, or one per column
    if mu:
        pooled = fc.sum(axis=0)
        a = a + mu * (pooled + beta) / (pooled[seen].sum() + n_features * beta)
    a_total = a[seen].sum()
    log_norm = np.log(fc.sum(axis=1) + a_total)
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = (np.log(fc[1] + a) - np.log(fc[0] + a)) - (log_norm[1] - log_norm[0])
    weight[~seen] = 0.0
    words = X_test @ weight
    if renormalise is not None:
        known = X_test.multiply(seen[None, :].astype(np.float64)).tocsr()
        norms = np.sqrt(np.asarray(known.multiply(known).sum(axis=1)).ravel())
        words = np.divide(renormalise * (known @ weight), norms, out=np.zeros_like(norms), where=norms > 0)
    return prior_log_odds("mle", float((~y_train).sum()), float(y_train.sum())) + words


def _boost_weights(X, y, margin, extra, n_folds=5):
    """Row weights of a training set: 1, plus ``extra`` for each row whose held-out
    score (``n_folds``-fold cross-validation inside the set) is on the wrong side
    or within ``margin`` of 0 (training beyond errors, order-free)."""
    import numpy as np

    from spamnb.estimator.calibrate import stratified_folds

    scores = np.empty(y.size)
    for f in stratified_folds(y, n_folds, 1):
        rest = np.setdiff1d(np.arange(y.size), f)
        scores[f] = _soft_scores(X[rest], y[rest], X[f], **_BOOST_MODEL)
    signed = np.where(y, scores, -scores)
    return 1.0 + extra * (signed < margin)


_BOOST_MODEL = {}


def _soft_variant(X, y, train, test, folds, spec):
    """(CV log-odds of the train part, test log-odds) of a ``dir=``/``boost=`` variant."""
    import numpy as np

    alpha = spec.get("alpha", 0.0 if "dir" in spec else MATRIX_ALPHA)
    if "palpha" in spec:   # the word pairs' own soft count (columns from spec["pair_columns"])
        alpha = np.where(spec["pair_columns"], spec["palpha"], alpha)
    model = dict(alpha=alpha, mu=spec.get("dir", 0.0),
                 beta=spec.get("beta", 0.0), renormalise=spec.get("l2k"))
    boost = spec.get("boost")
    _BOOST_MODEL.clear()
    _BOOST_MODEL.update(model)

    def fit_score(rows, held_out):
        weights = _boost_weights(X[rows], y[rows], spec.get("bmargin", 0.0), boost) if boost else None
        return _soft_scores(X[rows], y[rows], X[held_out], row_weight=weights, **model)

    train = np.asarray(train)
    cv = np.empty(len(train))
    for f in folds:
        rest = np.setdiff1d(np.arange(len(train)), f)
        cv[f] = fit_score(train[rest], train[f])
    return cv, fit_score(train, np.asarray(test))


def matrix_variants(args):
    import numpy as np

    from spamnb import SpamFilter
    from spamnb.estimator.calibrate import fold_log_odds
    from spamnb.mail.tokenizer import Tokenizer

    def score(corpus, variant, cache):
        tok, model = _variant("" if variant == "log" else ",".join(
            p for p in variant.split(",") if "=" in p and p.split("=")[0] not in ("l2", "l2k")))
        key = tuple(sorted(tok.items())) + tuple((k, model[k]) for k in ("pairs", "pair_scope", "pair_limit")
                                                 if model.get(k))
        split = model.get("pairs") and ("pw" in model or "palpha" in model)
        if split:   # the words' matrix and the pairs' own, side by side
            key += ("split",)
        if key not in cache:   # raw counts of the whole corpus over one vocabulary
            def raw(tokenizer):
                return SpamFilter(tokenizer=tokenizer, counts="raw", length_norm=0).fit(
                    corpus.messages, corpus.y, tune=False).transform(corpus.messages)
            if split:
                from scipy import sparse

                words = raw(Tokenizer(**tok))
                pairs = raw(_tokenizer(tok, {**model, "pair_only": True}))
                cache[key] = (sparse.hstack([words, pairs]).tocsr(),
                              np.arange(words.shape[1] + pairs.shape[1]) >= words.shape[1])
            else:
                cache[key] = (raw(_tokenizer(tok, model)), None)
        X_raw, pair_columns = cache[key]
        train, test, y = corpus.train, corpus.test, corpus.y
        X, alpha, min_df, renorm = transformed_matrix(X_raw, variant, pair_columns, idf_rows=train)
        soft = {k: float(v) for k, _, v in (p.partition("=") for p in variant.split(","))
                if k in ("dir", "beta", "boost", "bmargin", "alpha", "l2k", "palpha")}
        if "palpha" in soft:
            soft["pair_columns"] = pair_columns
        if "dir" in soft or "boost" in soft or "palpha" in soft:
            return _soft_variant(X, y, train, test, corpus.folds, soft)
        cv = fold_log_odds(X[train], y[train], corpus.folds, alpha, min_df=min_df, renormalise=renorm)
        return cv, fold_log_odds(X, y, [test], alpha, min_df=min_df, renormalise=renorm)[test]

    return _compare(args, [args.base] + [v.strip() for v in args.matrix.split(";") if v.strip()], score)


def _thick_scores(streams, y, train, test, margin, passes, seed=0):
    import numpy as np

    from spamnb.evaluation.online import OnlineModel

    model = OnlineModel()
    order = np.asarray(train)[np.random.default_rng(seed).permutation(len(train))]
    for _ in range(passes):
        for i in order:
            score = model.log_odds(streams[i])
            if margin is None or (score >= 0) != y[i] or abs(score) < margin:
                model.learn(streams[i], bool(y[i]))
    return np.array([model.log_odds(streams[i]) for i in test])


def thick_variants(args):
    import numpy as np

    from spamnb.mail.tokenizer import Tokenizer

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
