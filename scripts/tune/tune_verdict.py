"""The verdict rule's evidence thresholds (spamnb.estimator.verdict.MIN_EVIDENCE, CONFLICT, PART_SPAM),
from cross-validation on the TRAIN part of the fixed split of each corpus.

For each held-out train message: its log-odds, spam evidence (sum of the
positive token weights), ham evidence (sum of the negative ones) and the
largest sum of one text part's weights (``SpamFilter.evidence``).  Printed:
quantiles of ham's spam evidence and total evidence among the ham the cutoffs
call ham, and for candidate CONFLICT and PART_SPAM values the share of that
ham the rule would move to unsure.  The test part is not read.

Usage: ``python scripts/tune/tune_verdict.py [--corpus DIR ...] [--folds K]``
"""

from __future__ import annotations

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_CORPORA = [os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
                   os.path.join(REPO, "..", "shared", "corpora", "enron-spam")]


def held_out_evidence(messages, y, folds):
    import numpy as np

    from spamnb.estimator.calibrate import stratified_folds
    from spamnb.model.spam_filter import SpamFilter

    out = np.zeros((len(y), 4))
    for test in stratified_folds(y, folds, seed=0):
        train = np.setdiff1d(np.arange(len(y)), test)
        f = SpamFilter().fit([messages[i] for i in train], y[train], tune=False)
        out[test] = [f.evidence(messages[i]) for i in test]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", action="append")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)
    sys.path.insert(0, REPO)
    import numpy as np

    from spamnb.training.corpus import is_test_message, labelled_messages
    from spamnb.estimator.defaults import DEFAULT_HAM_CUTOFF

    for root in args.corpus or DEFAULT_CORPORA:
        items = [m for m in labelled_messages(trees=[root]) if not is_test_message(m.relpath)]
        y = np.array([m.is_spam for m in items])
        ev = held_out_evidence([m.data for m in items], y, args.folds)
        ham_lo = np.log(DEFAULT_HAM_CUTOFF / (1 - DEFAULT_HAM_CUTOFF))
        called_ham = ~y & (ev[:, 0] <= ham_lo)
        spam_ev, total = ev[called_ham, 1], ev[called_ham, 1] - ev[called_ham, 2]
        print(f"{os.path.basename(os.path.normpath(root))}: {len(y)} train messages, {called_ham.sum()} ham called "
              f"ham in {args.folds}-fold CV")
        for q in (0.5, 0.9, 0.99, 0.999, 1.0):
            print(f"  ham spam evidence q{q:g}: {np.quantile(spam_ev, q):8.1f}   "
                  f"total evidence q{1 - q:g}: {np.quantile(total, 1 - q):8.1f}")
        for conflict in (20, 30, 40, 50, 60, 80, 100):
            print(f"  CONFLICT {conflict:3d}: {100 * np.mean(spam_ev >= conflict):.2f} % of that ham unsure")
        part = ev[called_ham, 3]
        for q in (0.5, 0.9, 0.99, 0.999, 1.0):
            print(f"  ham largest part sum q{q:g}: {np.quantile(part, q):8.1f}")
        for limit in (0, 4, 8, 12, 16, 24):
            print(f"  PART_SPAM {limit:3d}: {100 * np.mean(part >= limit):.2f} % of that ham unsure")
        spam_called_ham = y & (ev[:, 0] <= ham_lo)
        print(f"  spam called ham by the cutoffs: {spam_called_ham.sum()}; their spam evidence: "
              f"{np.round(np.sort(ev[spam_called_ham, 1])[::-1][:10], 1).tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
