"""Accuracy experiments for the tokenizer: 5-fold stratified CV on the TRAIN part.

    python scripts/tune_tokenizer.py                      # every experiment below
    python scripts/tune_tokenizer.py --only case length   # some of them
    python scripts/tune_tokenizer.py --test               # the chosen settings, once, on TEST

The fixed split: a message is TEST when md5(relpath) % 5 == 0 (relpath relative
to the corpus root); everything else is TRAIN.  Tuning never looks at TEST.

Model: plain multinomial naive Bayes (scikit-learn's MultinomialNB, an oracle
allowed in scripts) on token-hash features: the hashes of all messages ->
``np.unique`` -> CSR counts.  Features unseen in a training fold are dropped from
its held-out fold.  Score = log P(spam, x) - log P(ham, x); out-of-fold scores
of the 5 folds are pooled for the metrics:

- 1-AUC (in %), lower is better;
- TPR@0.1%FPR: share of spam scored above the highest-scoring 0.1 % of ham.

Each experiment varies one tokenizer setting from BASE and reports the metrics
for three count transforms (raw counts, binary presence, log(1 + count)) and
alpha in (1, 0.1, 0.01, 0.001).
"""

import argparse
import hashlib
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.naive_bayes import MultinomialNB

from spamnb.mail.tokenizer import Tokenizer

HAM = ("easy_ham", "easy_ham_2", "hard_ham")
SPAM = ("spam", "spam_2")
TRANSFORMS = ("raw", "binary", "log")
ALPHAS = (1.0, 0.1, 0.01, 0.001)
# the first "selected" list; the later groups start from it to reproduce the log
SELECTED = ["subject", "from", "reply-to", "sender", "to", "cc", "return-path", "x-mailer", "user-agent",
            "organization", "list-id", "precedence", "content-type", "errors-to", "x-mailing-list",
            "mailing-list"]
FIRST_SELECTION = {"headers": SELECTED, "html_tells": True}
FINAL_1 = {"headers": SELECTED, "max_text_chars": 1000, "html_tells": True}    # the defaults of group "final"

BASE = {}   # the Tokenizer defaults, for --test
# The settings each group of experiments starts from, so that re-running a group
# reproduces its logged figures after the defaults moved on: round 1 ran with
# headers="all", a 256 KiB byte limit and no text budget; rounds 2-4 with no
# text budget and the 256 KiB limit unless they set them; rounds 1-3 before
# max_len_joined existed (i.e. with it equal to max_len); "final", "pairs" and
# "text budget 2" with the first header selection and a 1,000-character budget;
# "header fields" with the 1,000-character budget; "final 2" with the HTML
# tells on; "tells" and "final 3" with the defaults.  Every group before
# "tells" ran with the HTML tells on.
ROUND_1 = {"headers": "all", "max_bytes": 262144, "max_text_chars": 0, "max_len_joined": 20, "html_tells": True}
ROUND_2 = {"max_bytes": 262144, "max_text_chars": 0, "max_len_joined": 20, "html_tells": True}
GROUP_BASE = {"round 2": ROUND_2, "round 3": ROUND_2, "text budget": {"max_bytes": 262144, "html_tells": True},
              "byte and text budget": FIRST_SELECTION, "final": FINAL_1,
              "pairs (emulated)": FINAL_1, "text budget 2": FINAL_1,
              "header fields": {"max_text_chars": 1000, "html_tells": True}, "final 2": {"html_tells": True}, "tells": {},
              "final 3": {}}

EXPERIMENTS = {
    "base": [{}],
    "case": [{"lowercase": False}],
    "length": [{"min_len": 2}, {"min_len": 3}, {"max_len": 12}, {"max_len": 30}, {"max_len": 60}],
    "word characters": [{"joiners": ""}, {"joiners": "'"}, {"word_chars": ""}, {"word_chars": "$!"}],
    "headers": [{"headers": "none"}, {"headers": SELECTED}, {"header_names": False},
                {"received": False}],
    "urls": [{"urls": False}],
    "html": [{"html_tells": False}],
    "mime": [{"mime_tells": False}],
    "cjk": [{"cjk_bigrams": False}],
    "charset": [{"fallback_charset": "latin-1"}, {"fallback_charset": "utf-8"}],
    "max_bytes": [{"max_bytes": 16384}, {"max_bytes": 65536}],
    # second round, around headers="selected" (the first round's winner)
    "round 2": [{"headers": SELECTED},
                {"headers": SELECTED, "max_len": 40}, {"headers": SELECTED, "max_len": 60},
                {"headers": SELECTED, "max_bytes": 16384}, {"headers": SELECTED, "max_bytes": 32768},
                {"headers": SELECTED, "header_names": False},
                {"headers": SELECTED, "lowercase": False},
                {"headers": SELECTED, "max_len": 40, "max_bytes": 32768},
                {"headers": SELECTED, "max_len": 40, "max_bytes": 32768, "lowercase": False}],
    # third round: the byte limit as a length normaliser
    "round 3": [{"headers": SELECTED, "max_bytes": 8192}, {"headers": SELECTED, "max_bytes": 12288},
                {"headers": SELECTED, "max_bytes": 16384}, {"headers": SELECTED, "max_bytes": 24576},
                {"headers": SELECTED, "max_bytes": 16384, "header_names": False},
                {"headers": SELECTED, "max_bytes": 16384, "received": False}],
    # fourth round: a budget of body text characters instead of the raw byte limit
    "text budget": [{"headers": SELECTED, "max_text_chars": n} for n in (1000, 2000, 3000, 4000, 6000, 10000)]
                   + [{"headers": SELECTED, "max_text_chars": 3000, "max_bytes": 8192}],
    "final": [{}, {"max_len_joined": 20}, {"header_names": False}, {"max_len": 60}, {"lowercase": False}, {"min_len": 2},
              {"received": False}, {"urls": False}, {"html_tells": False}, {"mime_tells": False},
              {"headers": "all"}, {"joiners": ""}],
    "header fields": [
        {"headers": [f for f in SELECTED if f not in ("to", "cc")]},
        {"headers": [f for f in SELECTED if f not in ("return-path", "sender", "errors-to")]},
        {"headers": [f for f in SELECTED if f not in ("list-id", "precedence", "x-mailing-list", "mailing-list")]},
        {"headers": [f for f in SELECTED if f != "content-type"]},
        {"headers": SELECTED + ["x-priority", "x-msmail-priority", "importance", "x-mimeole"]},
        {"headers": SELECTED + ["list-unsubscribe", "list-post", "list-help", "x-beenthere"]},
        {"headers": SELECTED + ["delivered-to", "date"]},
        {"headers": ["subject", "from", "reply-to"]},
    ],
    "final 2": [{}, {"headers": SELECTED}, {"headers": "all"}, {"header_names": False},
                {"html_tells": False}, {"mime_tells": False}, {"max_text_chars": 1000}],
    "final 3": [{}, {"html_tells": True}, {"mime_tells": False}, {"header_names": False},
                {"max_text_chars": 500}, {"max_text_chars": 1000}, {"max_bytes": 4096}, {"max_bytes": 8192}],
    "tells": [{"html_tells": False, "mime_tells": False},
              {"html_tells": False, "header_names": False},
              {"html_tells": False, "mime_tells": False, "header_names": False}],
    "text budget 2": [{"max_text_chars": n} for n in (300, 500, 750, 1500)],
    "pairs (emulated)": [{"pairs": True}, {"pairs": True, "max_text_chars": 2000},
                         {"pairs": True, "max_text_chars": 500}],
    "byte and text budget": [{"headers": SELECTED, "max_bytes": b, "max_text_chars": t}
                             for b in (4096, 6144, 8192, 12288) for t in (0, 1000, 2000, 3000)],
}


def is_test(relpath):
    return int(hashlib.md5(relpath.encode()).hexdigest(), 16) % 5 == 0


def load(corpus):
    """(messages, labels, is_test) over the whole corpus; label 1 = spam."""
    messages, labels, test = [], [], []
    for label, folders in ((0, HAM), (1, SPAM)):
        for folder in folders:
            for path in sorted((corpus / folder).iterdir()):
                if path.is_file():
                    messages.append(path.read_bytes())
                    labels.append(label)
                    test.append(is_test(f"{folder}/{path.name}"))
    return messages, np.array(labels), np.array(test)


def pair_hashes(stream):
    """Hashes of the stream plus "w1 w2" tokens for consecutive untagged words
    (a slow Python emulation, to decide whether word pairs earn a compiled version)."""
    from spamnb.mail._tokenize import hash_token
    words = [t for t in stream.tokens() if ":" not in t]
    pairs = [hash_token(a + " " + b) for a, b in zip(words, words[1:])]
    return np.concatenate([np.frombuffer(stream.hashes, dtype=np.uint64), np.array(pairs, dtype=np.uint64)])


def count_matrix(tokenizer, messages, pairs=False):
    """CSR token counts, shape (n_messages, n_distinct_tokens), via np.unique over the hashes."""
    if pairs:
        streams = [pair_hashes(tokenizer.stream(m)) for m in messages]
    else:
        streams = [np.frombuffer(tokenizer.stream(m).hashes, dtype=np.uint64) for m in messages]
    lengths = np.array([len(s) for s in streams])
    hashes = np.concatenate(streams) if streams else np.zeros(0, np.uint64)
    _, columns = np.unique(hashes, return_inverse=True)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    X = sp.csr_matrix((np.ones(len(hashes)), columns.ravel(), indptr),
                      shape=(len(messages), columns.max() + 1 if len(columns) else 0))
    X.sum_duplicates()
    return X


def transform(X, how):
    X = X.copy()
    if how == "binary":
        X.data[:] = 1.0
    elif how == "log":
        X.data = np.log1p(X.data)
    return X


def metrics(y, score):
    """(1-AUC in %, TPR at 0.1 % FPR in %)."""
    auc = roc_auc_score(y, score)
    ham = np.sort(score[y == 0])[::-1]
    threshold = ham[int(np.floor(0.001 * len(ham)))]
    tpr = np.mean(score[y == 1] > threshold)
    return 100 * (1 - auc), 100 * tpr


def nb_scores(X_train, y_train, X_eval, alpha):
    seen = np.asarray(X_train.sum(axis=0)).ravel() > 0
    model = MultinomialNB(alpha=alpha).fit(X_train[:, seen], y_train)
    jll = model.predict_joint_log_proba(X_eval[:, seen])
    return jll[:, 1] - jll[:, 0]


def cross_validate(X, y, folds=5, seed=0):
    """{(transform, alpha): (1-AUC %, TPR@0.1%FPR %)} from pooled out-of-fold scores."""
    splits = list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))
    out = {}
    for how in TRANSFORMS:
        Xt = transform(X, how)
        for alpha in ALPHAS:
            score = np.zeros(len(y))
            for train, held in splits:
                score[held] = nb_scores(Xt[train], y[train], Xt[held], alpha)
            out[how, alpha] = metrics(y, score)
    return out


def describe(settings):
    def show(value):
        if value == SELECTED:
            return "first selection"
        if isinstance(value, list) and set(SELECTED) <= set(value):
            return "selected + " + repr(sorted(set(value) - set(SELECTED)))
        if isinstance(value, list) and set(value) < set(SELECTED) and len(value) > 3:
            return "selected - " + repr(sorted(set(SELECTED) - set(value)))
        return repr(value)
    return ", ".join(f"{k}={show(v)}" for k, v in settings.items()) or "defaults"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parents[2] / "shared/corpora/spamassassin")
    parser.add_argument("--only", nargs="*", help="experiment names (default: all)")
    parser.add_argument("--test", action="store_true", help="train on TRAIN, evaluate once on TEST")
    parser.add_argument("--transform", default="log", choices=TRANSFORMS, help="for --test")
    parser.add_argument("--alpha", type=float, default=0.1, help="for --test")
    args = parser.parse_args()

    messages, y, test = load(args.corpus)
    if args.test:
        tokenizer = Tokenizer(**BASE)
        X = transform(count_matrix(tokenizer, messages), args.transform)
        score = nb_scores(X[~test], y[~test], X[test], args.alpha)
        one_minus_auc, tpr = metrics(y[test], score)
        n_fp = 0
        print(f"TEST ({test.sum()} messages, {y[test].sum()} spam), {describe(tokenizer.settings)}")
        print(f"transform={args.transform} alpha={args.alpha}: 1-AUC = {one_minus_auc:.4f} %, "
              f"TPR@0.1%FPR = {tpr:.2f} %")
        ham_scores = np.sort(score[y[test] == 0])
        spam_scores = np.sort(score[y[test] == 1])
        n_fp = int(np.sum(ham_scores > 0))
        n_fn = int(np.sum(spam_scores <= 0))
        print(f"at threshold 0: {n_fp} false positives of {len(ham_scores)} ham, "
              f"{n_fn} false negatives of {len(spam_scores)} spam")
        return

    messages = [m for m, t in zip(messages, test) if not t]
    y = y[~test]
    print(f"TRAIN: {len(y)} messages, {y.sum()} spam; 5-fold stratified CV, pooled out-of-fold scores")
    print("cells: 1-AUC % / TPR@0.1%FPR %")
    header = "".join(f"{f'{h} a={a:g}':>16s}" for h in TRANSFORMS for a in ALPHAS)
    names = args.only or list(EXPERIMENTS)
    for name in names:
        print(f"\n## {name}")
        print(f"{'settings':42s}{'tokens/msg':>11s}{header}")
        for change in EXPERIMENTS[name]:
            settings = {**GROUP_BASE.get(name, ROUND_1), **change}
            pairs = settings.pop("pairs", False)
            start = time.perf_counter()
            X = count_matrix(Tokenizer(**settings), messages, pairs)
            result = cross_validate(X, y)
            cells = "".join(f"{result[h, a][0]:9.4f}/{result[h, a][1]:6.2f}" for h in TRANSFORMS for a in ALPHAS)
            print(f"{describe(change):42s}{X.sum() / X.shape[0]:11.0f}{cells}"
                  f"   ({X.shape[1]} features, {time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
