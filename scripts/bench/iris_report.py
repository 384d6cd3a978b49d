"""Cross-validated accuracy of the four GaussianBayes covariance families on Iris.

Stratified 10-fold cross-validation with a fixed seed; for each family prints
the per-fold accuracy summary and the confusion matrix of the pooled
out-of-fold predictions, next to scikit-learn's GaussianNB / LDA / QDA run on
the same folds as a reference.  scikit-learn is used here only to load Iris,
make the folds and provide those references.

    python scripts/bench/iris_report.py [--seed 0] [--folds 10]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from spamnb.bayes.gaussian import COVARIANCE_TYPES, GaussianBayes  # noqa: E402

DESCRIPTIONS = {
    "diag": "naive Bayes",
    "spherical": "sigma_c^2 I",
    "tied": "linear",
    "full": "quadratic",
}


def cross_validate(make_model, X, y, folds):
    """Out-of-fold predictions (n_samples,) and per-fold accuracies (n_folds,)."""
    predicted = np.empty_like(y)
    accuracies = []
    for train, test in folds:
        model = make_model().fit(X[train], y[train])
        predicted[test] = model.predict(X[test])
        accuracies.append(np.mean(predicted[test] == y[test]))
    return predicted, np.array(accuracies)


def confusion(y_true, y_pred, n_classes):
    """counts[i, j] = number of samples of class i predicted as class j."""
    return np.bincount(y_true * n_classes + y_pred, minlength=n_classes * n_classes).reshape(n_classes, n_classes)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--folds", type=int, default=10)
    args = parser.parse_args(argv)

    from sklearn.datasets import load_iris
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis
    from sklearn.model_selection import StratifiedKFold
    from sklearn.naive_bayes import GaussianNB as SklearnGaussianNB

    iris = load_iris()
    X, y = iris.data, iris.target
    names = [str(n) for n in iris.target_names]
    folds = list(StratifiedKFold(n_splits=args.folds, shuffle=True, random_state=args.seed).split(X, y))

    references = {
        "diag": ("sklearn GaussianNB", SklearnGaussianNB),
        "tied": ("sklearn LDA (lsqr)", lambda: LinearDiscriminantAnalysis(solver="lsqr")),
        "full": ("sklearn QDA", QuadraticDiscriminantAnalysis),
    }

    print(f"Iris: {X.shape[0]} samples, {X.shape[1]} features, classes {names}")
    print(f"Stratified {args.folds}-fold cross-validation, shuffle seed {args.seed}; "
          "default reg=1e-9, MLE class prior\n")
    header = f"{'model':<40} {'mean acc':>8} {'std':>6} {'min':>6} {'pooled':>7} {'errors':>6}"
    print(header)
    print("-" * len(header))
    matrices = {}
    for covariance in COVARIANCE_TYPES:
        rows = [(f"GaussianBayes({covariance!r}): {DESCRIPTIONS[covariance]}", lambda c=covariance: GaussianBayes(c))]
        if covariance in references:
            rows.append(("  " + references[covariance][0], references[covariance][1]))
        for label, make in rows:
            predicted, acc = cross_validate(make, X, y, folds)
            errors = int(np.sum(predicted != y))
            pooled = np.mean(predicted == y)
            print(f"{label:<40} {acc.mean():8.4f} {acc.std():6.4f} {acc.min():6.4f} {pooled:7.4f} {errors:6d}")
            if label.startswith("GaussianBayes"):
                matrices[covariance] = confusion(y, predicted, len(names))

    width = max(len(n) for n in names)
    for covariance, counts in matrices.items():
        print(f"\nConfusion matrix, GaussianBayes({covariance!r}), pooled out-of-fold (rows: true, columns: predicted)")
        print(" " * (width + 2) + "".join(f"{n:>{width + 2}}" for n in names))
        for name, row in zip(names, counts):
            print(f"{name:<{width + 2}}" + "".join(f"{v:>{width + 2}d}" for v in row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
