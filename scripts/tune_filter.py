"""Choose SpamFilter's defaults (alpha, counts, prior, cutoffs) by cross-validation.

Only the TRAIN part of the fixed split is used (md5(relative path) % 5 != 0):
5-fold stratified cross-validation, fixed seed.  Messages are tokenized once
with the default Tokenizer; each fold's model sees only the tokens of its own
training messages (the same as SpamFilter.fit on those messages).

    python scripts/tune_filter.py [--corpus ../shared/corpora/spamassassin] [--folds 5]

Prints, per setting: 1-AUC %, spam caught at 0.1 % and 1 % false-positive
rate, and the held-out log-odds of the highest-scoring ham and the
lowest-scoring spam quantiles that the cutoffs are chosen from.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import sparse

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spamnb.bayes import _vocab

from spamnb.bayes import metrics  # noqa: E402
from spamnb.training.corpus import is_test_message, labelled_messages  # noqa: E402
from spamnb.model.calibrate import stratified_folds  # noqa: E402
from spamnb.bayes.multinomial import MultinomialNB  # noqa: E402
from spamnb.mail.tokenizer import Tokenizer  # noqa: E402
from spamnb.bayes.vocabulary import Vocabulary  # noqa: E402


def tokenize(messages, tokenizer):
    vocab = Vocabulary()
    builder = _vocab.CSRBuilder(_vocab.COUNTS_RAW)
    for data in messages:
        builder.add_row(vocab.add(tokenizer.stream(data)))
    return sparse.csr_matrix((np.frombuffer(builder.data), np.frombuffer(builder.indices, np.int32),
                              np.frombuffer(builder.indptr, np.int64)), shape=(builder.n_rows, vocab.n_features))


def transform(X, counts):
    X = X.copy()
    if counts == "binary":
        X.data[:] = 1.0
    elif counts == "log":
        X.data = np.log1p(X.data)
    return X


def cross_validated_log_odds(X, y, test_folds, alpha, prior):
    out = np.empty(len(y))
    for test in test_folds:
        train = np.ones(len(y), dtype=bool)
        train[test] = False
        seen = np.asarray(X[train].sum(axis=0)).ravel() > 0  # the fold's own vocabulary
        Xtr, Xte = X[train][:, seen], X[test][:, seen]
        nb = MultinomialNB(alpha=alpha, prior=prior).fit(Xtr, y[train])
        out[test] = nb.decision_function(Xte)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpora" / "spamassassin"))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--alphas", default="1,0.3,0.1,0.03,0.01,0.003,0.001")
    parser.add_argument("--counts", default="raw,binary,log")
    parser.add_argument("--priors", default="mle,map")
    args = parser.parse_args(argv)
    messages = [m for m in labelled_messages([args.corpus]) if not is_test_message(m.relpath)]
    y = np.array([m.is_spam for m in messages])
    started = time.perf_counter()
    X_raw = tokenize([m.data for m in messages], Tokenizer())
    print(f"# {len(y)} train-part messages ({y.sum()} spam), {X_raw.shape[1]} tokens, "
          f"tokenized in {time.perf_counter() - started:.1f} s; {args.folds}-fold CV, seed 0")
    test_folds = stratified_folds(y, args.folds)   # seed 0
    print(f"{'counts':7} {'alpha':>6} {'prior':5} {'1-AUC%':>8} {'TPR@0.1%':>9} {'TPR@1%':>7} "
          f"{'max ham':>8} {'ham q99.9':>9} {'spam q5':>8} {'FP@0':>5} {'FN@0':>5}")
    for counts in args.counts.split(","):
        X = transform(X_raw, counts)
        for alpha in map(float, args.alphas.split(",")):
            for prior in args.priors.split(","):
                s = cross_validated_log_odds(X, y, test_folds, alpha, prior)
                ham, spam = s[~y], s[y]
                print(f"{counts:7} {alpha:6g} {prior:5} {metrics.one_minus_auc_percent(y, s):8.4f} "
                      f"{100 * metrics.tpr_at_fpr(y, s, 0.001):9.2f} {100 * metrics.tpr_at_fpr(y, s, 0.01):7.2f} "
                      f"{ham.max():8.1f} {np.quantile(ham, 0.999):9.1f} {np.quantile(spam, 0.05):8.1f} "
                      f"{int((ham > 0).sum()):5d} {int((spam <= 0).sum()):5d}", flush=True)


if __name__ == "__main__":
    main()
