"""The cost of pruning: ranking quality against model size.

For each corpus: train on the TRAIN part of the fixed split (md5(relative
path) % 5 != 0), prune the model to 100 %, 50 %, 25 %, 10 %, 5 % and 2 % of
its tokens by each usefulness measure of ``spamnb.model.lifecycle`` (jeffreys: the
default; weighted: |log theta_spam - log theta_ham| x total count; count:
total count), score the TEST part, and report 1-AUC (%) and spam caught at
0.1 % false-positive rate.  With ``--folds K`` the same over K stratified
folds of the whole corpus (mean +- std, and the folds where each measure is
worse than the unpruned model).

    python scripts/tune/prune_curve.py [--corpus ../shared/corpora/spamassassin]
        [--corpus ../shared/corpora/enron-spam] [--folds 5] [--plot docs/prune_curve.png]
        [--json docs/prune_curve.json]
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from spamnb.model import lifecycle

from spamnb.bayes import metrics  # noqa: E402
from spamnb.training.corpus import is_test_message, labelled_messages  # noqa: E402
from spamnb.estimator.calibrate import stratified_folds  # noqa: E402
from spamnb.model.spam_filter import SpamFilter  # noqa: E402

FRACTIONS = (1.0, 0.5, 0.25, 0.10, 0.05, 0.02)
KINDS = ("jeffreys", "weighted", "count")
DEFAULT_CORPORA = (REPO.parent / "shared" / "corpora" / "spamassassin",
                   REPO.parent / "shared" / "corpora" / "enron-spam")


def curve(train_data, train_y, test_data, test_y):
    """{kind: [(fraction, n_tokens, 1-AUC %, caught @ 0.1 % FPR), ...]} for one split."""
    model = SpamFilter().fit(train_data, train_y, tune=False)
    state = lifecycle.state_of(model)
    n = state.n_features
    out = {}
    for kind in KINDS:
        rows = []
        for fraction in FRACTIONS:
            size = int(round(fraction * n))
            pruned, _ = lifecycle.prune(model, target_size=size, kind=kind)
            scores = pruned.score_many(test_data)
            rows.append((fraction, size, metrics.one_minus_auc_percent(test_y, scores),
                         100.0 * metrics.tpr_at_fpr(test_y, scores, 0.001)))
        out[kind] = rows
    return n, out


def run(corpus, n_folds):
    messages = labelled_messages([corpus])
    data = [m.data for m in messages]
    y = np.array([m.is_spam for m in messages])
    test = np.array([is_test_message(m.relpath) for m in messages])
    started = time.perf_counter()
    n, fixed = curve([d for d, t in zip(data, test) if not t], y[~test].tolist(),
                     [d for d, t in zip(data, test) if t], y[test])
    result = {"corpus": Path(corpus).name, "messages": len(data), "train": int((~test).sum()),
              "test": int(test.sum()), "tokens": n, "fixed_split": fixed, "folds": []}
    for test_idx in stratified_folds(y, n_folds) if n_folds else []:
        train_idx = np.setdiff1d(np.arange(len(data)), test_idx)
        n_fold, rows = curve([data[i] for i in train_idx], y[train_idx].tolist(),
                             [data[i] for i in test_idx], y[test_idx])
        result["folds"].append({"tokens": n_fold, "curve": rows})
    result["seconds"] = time.perf_counter() - started
    return result


def report(result):
    print(f"\n{result['corpus']}: {result['messages']} messages (train {result['train']}, test {result['test']}), "
          f"{result['tokens']} tokens in the full model")
    print("fixed split      " + "".join(f"{f'{100 * f:g} %':>22}" for f in FRACTIONS))
    for kind, rows in result["fixed_split"].items():
        print(f"  {kind:9s} 1-AUC " + "".join(f"{r[2]:22.4f}" for r in rows))
        print(f"  {'':9s} @0.1% " + "".join(f"{r[3]:21.1f}%" for r in rows))
    if result["folds"]:
        k = len(result["folds"])
        print(f"{k}-fold CV (mean +- std; folds worse than 100 % on 1-AUC)")
        for kind in KINDS:
            auc = np.array([[r[2] for r in fold["curve"][kind]] for fold in result["folds"]])
            caught = np.array([[r[3] for r in fold["curve"][kind]] for fold in result["folds"]])
            worse = (auc > auc[:, :1] + 1e-12).sum(axis=0)
            print(f"  {kind:9s} 1-AUC " + "".join(f"{m:11.4f} +-{s:7.4f} " for m, s in zip(auc.mean(0), auc.std(0))))
            print(f"  {'':9s} @0.1% " + "".join(f"{m:11.1f} +-{s:7.1f} " for m, s in zip(caught.mean(0), caught.std(0))))
            print(f"  {'':9s} worse " + "".join(f"{w:>18d}/{k} " for w in worse))


def paired(results):
    """Paired wins/losses of the usefulness measures over every split of every corpus."""
    print("\npaired over all splits (fixed split + folds, both corpora): wins/losses of the first measure")
    for first, second in (("jeffreys", "weighted"), ("jeffreys", "count"), ("weighted", "count")):
        for k, fraction in enumerate(FRACTIONS[1:], start=1):
            auc = [0, 0]
            caught = [0, 0]
            for result in results:
                for split in [result["fixed_split"]] + [fold["curve"] for fold in result["folds"]]:
                    a, b = split[first][k], split[second][k]
                    auc[0] += a[2] < b[2]
                    auc[1] += a[2] > b[2]
                    caught[0] += a[3] > b[3]
                    caught[1] += a[3] < b[3]
            print(f"  {first} vs {second} at {100 * fraction:g} %: 1-AUC {auc[0]}/{auc[1]}, "
                  f"caught at 0.1 % FPR {caught[0]}/{caught[1]}")


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(5.5 * len(results), 7), squeeze=False)
    for col, result in enumerate(results):
        for kind, style in zip(KINDS, ("o-", "s--", "^:")):
            rows = result["fixed_split"][kind]
            x = [100 * r[0] for r in rows]
            axes[0, col].plot(x, [r[2] for r in rows], style, label=kind)
            axes[1, col].plot(x, [r[3] for r in rows], style, label=kind)
        axes[0, col].set_title(f"{result['corpus']} (fixed split; full model {result['tokens']:,} tokens)")
        axes[0, col].set_ylabel("1-AUC (%)")
        axes[1, col].set_ylabel("spam caught at 0.1 % FPR (%)")
        for row in range(2):
            axes[row, col].set_xscale("log")
            axes[row, col].set_xticks([100 * f for f in FRACTIONS], [f"{100 * f:g}" for f in FRACTIONS])
            axes[row, col].set_xlabel("tokens kept (% of the full model)")
            axes[row, col].invert_xaxis()
            axes[row, col].grid(alpha=0.3)
            axes[row, col].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", help="corpus folder (repeatable)")
    parser.add_argument("--folds", type=int, default=0, help="also K-fold cross-validation over the whole corpus")
    parser.add_argument("--plot", help="write the plot (PNG) here")
    parser.add_argument("--json", help="write the figures (JSON) here")
    args = parser.parse_args()
    results = []
    for corpus in args.corpus or DEFAULT_CORPORA:
        result = run(corpus, args.folds)
        report(result)
        results.append(result)
    paired(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
