"""Does the Gaussian model of message features help the word model?  Measure it.

Cross-validation uses only the TRAIN part of the fixed split (md5(relative
path) % 5 != 0): 5-fold stratified, seed 0.  Per fold the word model is
``SpamFilter()`` with its defaults, fitted with ``SpamFilter.fit`` on the fold's
training messages, and held-out messages are scored with
``SpamFilter.score(message).log_odds``; the feature model (``FeatureModel``) is
fitted on the same training messages.  Combined score:

    log-odds = word log-odds + weight * (log p(f | spam) - log p(f | ham))

(one class prior: the word model's).  Then, once, the fixed split: train on
the train part, test on the test part, for words only and the CV-chosen weight.

    python scripts/tune_features.py [--corpus ../shared/corpora/spamassassin]

Prints markdown tables: 1-AUC %, spam caught at 0.1 % and 1 % false-positive
rate, false positives / false negatives at log-odds 0.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spamnb.bayes import metrics  # noqa: E402
from spamnb.training.corpus import is_test_message, labelled_messages  # noqa: E402
from spamnb.model.calibrate import stratified_folds  # noqa: E402
from spamnb.model.message_features import FEATURE_NAMES, FeatureModel, message_features  # noqa: E402
from spamnb.mail.parser import parse  # noqa: E402
from spamnb.model.spam_filter import SpamFilter  # noqa: E402

WEIGHTS = (0.0, 0.1, 0.25, 0.5, 1.0)
VAR_SMOOTHINGS = (1e-9, 1e-4, 1e-3, 1e-2, 1e-1)
CLIPS = (1.0, 3.0, 10.0, float("inf"))
CLIP_WEIGHTS = (0.5, 1.0, 2.0, 4.0)


def word_log_odds(train_data, train_y, test_data):
    spam_filter = SpamFilter().fit(train_data, train_y)
    return np.array([spam_filter.score(data).log_odds for data in test_data])


def row(name, y, s):
    ham, spam = s[~y], s[y]
    return (f"| {name} | {metrics.one_minus_auc_percent(y, s):.4f} | {100 * metrics.tpr_at_fpr(y, s, 0.001):.2f} "
            f"| {100 * metrics.tpr_at_fpr(y, s, 0.01):.2f} | {int((ham > 0).sum())} | {int((spam <= 0).sum())} |")


HEADER = "| score | 1-AUC % | spam caught at 0.1 % FPR | at 1 % FPR | FP at 0 | FN at 0 |\n|---|---:|---:|---:|---:|---:|"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpora" / "spamassassin"))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--split", action="store_true", help="also run the fixed split (once, at the end)")
    parser.add_argument("--weight", type=float, default=None,
                        help="the CV-chosen weight for the fixed split (default: lowest CV 1-AUC)")
    parser.add_argument("--var-smoothing", type=float, default=None,
                        help="the CV-chosen var_smoothing (default: lowest CV 1-AUC of features + words)")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    messages = list(labelled_messages([args.corpus]))
    test = np.array([is_test_message(m.relpath) for m in messages])
    data = [m.data for m in messages]
    y_all = np.array([m.is_spam for m in messages])
    clock = time.perf_counter()
    mails = [parse(d) for d in data]
    parsed = time.perf_counter()
    F_all = np.array([message_features(m) for m in mails])
    done = time.perf_counter()
    del mails
    print(f"# {len(data)} messages: parse {1e6 * (parsed - clock) / len(data):.0f} us/message, "
          f"message_features {1e6 * (done - parsed) / len(data):.0f} us/message")
    train_idx = np.flatnonzero(~test)
    y = y_all[train_idx]
    F = F_all[train_idx]
    fold = np.empty(len(y), dtype=int)           # each message's fold (seed 0)
    for f, te in enumerate(stratified_folds(y, args.folds)):
        fold[te] = f
    print(f"# {len(y)} train-part messages ({int(y.sum())} spam); {len(FEATURE_NAMES)} features; "
          f"{args.folds}-fold stratified CV, seed 0 (features in {time.perf_counter() - started:.1f} s)")

    words = np.empty(len(y))
    llr = {vs: np.empty(len(y)) for vs in VAR_SMOOTHINGS}
    for f in range(args.folds):
        tr, te = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        words[te] = word_log_odds([data[train_idx[i]] for i in tr], y[tr], [data[train_idx[i]] for i in te])
        for vs in VAR_SMOOTHINGS:
            llr[vs][te] = FeatureModel(var_smoothing=vs).fit(F[tr], y[tr]).log_likelihood_ratio(F[te])
        print(f"# fold {f}: {time.perf_counter() - started:.0f} s", flush=True)

    print("\n## var_smoothing (CV 1-AUC %)\n")
    print("| var_smoothing | features alone | " + " | ".join(f"words + {w:g} x features" for w in WEIGHTS[1:]) + " |")
    print("|---:|---:|" + "---:|" * (len(WEIGHTS) - 1))
    best = None
    for vs in VAR_SMOOTHINGS:
        cells = [metrics.one_minus_auc_percent(y, llr[vs])]
        for w in WEIGHTS[1:]:
            value = metrics.one_minus_auc_percent(y, words + w * llr[vs])
            cells.append(value)
            if best is None or value < best[0]:
                best = (value, vs, w)
        print(f"| {vs:g} | " + " | ".join(f"{c:.4f}" for c in cells) + " |")
    vs = args.var_smoothing if args.var_smoothing is not None else best[1]
    print(f"\nwords only: 1-AUC {metrics.one_minus_auc_percent(y, words):.4f} %; "
          f"lowest combined 1-AUC {best[0]:.4f} % at var_smoothing={best[1]:g}, weight={best[2]:g}")

    print(f"\n## CV, var_smoothing={vs:g}\n\n{HEADER}")
    cv = {}
    for w in WEIGHTS:
        s = words + w * llr[vs]
        cv[w] = metrics.one_minus_auc_percent(y, s)
        print(row("words only" if w == 0 else f"words + {w:g} x features", y, s))
    print(row("features alone (+ log prior ratio)", y,
              llr[vs] + np.log(y.mean() / (1 - y.mean()))))

    print("\n## Clipped feature evidence, CV (exploration; 1-AUC % / FP at 0 / spam caught at 0.1 % FPR)\n")
    print("word log-odds percentiles 5/25/50/75/95: "
          + " / ".join(f"{v:.0f}" for v in np.percentile(words, [5, 25, 50, 75, 95]))
          + "; feature log-likelihood ratio: "
          + " / ".join(f"{v:.1f}" for v in np.percentile(llr[vs], [5, 25, 50, 75, 95])) + "\n")
    print("| clip c | " + " | ".join(f"weight {w:g}" for w in CLIP_WEIGHTS) + " |")
    print("|---:|" + "---|" * len(CLIP_WEIGHTS))
    for c in CLIPS:
        cells = []
        for w in CLIP_WEIGHTS:
            s = words + w * np.clip(llr[vs], -c, c)
            cells.append(f"{metrics.one_minus_auc_percent(y, s):.4f} / {int((s[~y] > 0).sum())} / "
                         f"{100 * metrics.tpr_at_fpr(y, s, 0.001):.2f}")
        print(f"| {c:g} | " + " | ".join(cells) + " |")

    s = words + np.clip(llr[vs], -1.0, 1.0)
    print("\nper fold 1-AUC %, words only vs words + 1 x clip(ratio, -1, 1): "
          + ", ".join(f"{metrics.one_minus_auc_percent(y[fold == f], words[fold == f]):.4f} vs "
                      f"{metrics.one_minus_auc_percent(y[fold == f], s[fold == f]):.4f}" for f in range(args.folds))
          + f"; {int((~y).sum()) * int(y.sum())} ham-spam pairs")

    print("\n## The word model's CV false positives (log-odds > 0)\n")
    false_pos = np.flatnonzero(~y & (words > 0))
    html = FEATURE_NAMES.index("html_share")
    print("| folder | word log-odds | feature ratio | html_share |\n|---|---:|---:|---:|")
    for i in false_pos[np.argsort(words[false_pos])]:
        folder = messages[train_idx[i]].relpath.split("/")[0]
        print(f"| {folder} | {words[i]:.1f} | {llr[vs][i]:.1f} | {F[i, html]:.2f} |")

    print("\n## Per feature, CV, features alone (one feature at a time)\n")
    print("| feature | 1-AUC % |\n|---|---:|")
    for j, name in enumerate(FEATURE_NAMES):
        s = np.empty(len(y))
        for f in range(args.folds):
            tr, te = fold != f, fold == f
            model = FeatureModel(var_smoothing=vs, names=(name,)).fit(F[tr][:, [j]], y[tr])
            s[te] = model.log_likelihood_ratio(F[te][:, [j]])
        print(f"| {name} | {metrics.one_minus_auc_percent(y, s):.4f} |")

    weight = args.weight if args.weight is not None else min(cv, key=cv.get)
    print(f"\nCV-chosen weight (lowest 1-AUC): {weight:g}")
    if args.split:
        tr, te = ~test, test
        print(f"\n## Fixed split (train {int(tr.sum())}, test {int(te.sum())}), var_smoothing={vs:g}\n\n{HEADER}")
        words_test = word_log_odds([d for d, t in zip(data, test) if not t], y_all[tr],
                                   [d for d, t in zip(data, test) if t])
        llr_test = FeatureModel(var_smoothing=vs).fit(F_all[tr], y_all[tr]).log_likelihood_ratio(F_all[te])
        print(row("words only", y_all[te], words_test))
        shown = [weight] if weight != 0 else [min((w for w in cv if w != 0), key=cv.get)]
        for w in shown:
            note = "" if w == weight else " (best non-zero CV weight; for information, not chosen)"
            print(row(f"words + {w:g} x features{note}", y_all[te], words_test + w * llr_test))
    print(f"\n# total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
