#!/usr/bin/env python3
"""How much the spam cutoff `spamnb train` chooses depends on the fold
assignment, and whether pooling several assignments steadies it.

For each corpus: the fixed split's train part, its held-out log-odds under
the streaming calibration's folds (BLAKE2b of each message, mod the number
of folds: salt 0 with the default ``--folds`` is exactly ``spamnb.estimator.calibrate.fold_of``) and under other salts (the same hash
keyed by the salt), the cutoff the rule chooses from each (and from 2, 3, 4
assignments pooled), and what each cutoff gives on the test part (ham called
spam, spam missed), scored by the model of the whole train part.  The word
pairs as ``spamnb train`` chooses them for these corpora (SpamAssassin none,
Enron-Spam window 2).

    python scripts/tune/cutoff_variance.py [--salts 4] [--folds K]

``--folds K``: K folds instead of the calibration's ``calibrate.DEFAULT_FOLDS``
(10; each fold model holds (K - 1) / K of the train part); the mean over the
``--salts`` assignments is printed too.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))   # harness.py

from harness import transformed_matrix  # noqa: E402

CORPORA = {"spamassassin": 0, "enron-spam": 2}   # corpus -> the word pairs spamnb train keeps


def fold_ids(messages, salt, n_folds=5):
    import numpy as np

    key = bytes([salt]) if salt else b""   # salt 0: calibrate.fold_of's hash
    return np.array([int.from_bytes(hashlib.blake2b(m, digest_size=8, key=key).digest(), "little") % n_folds
                     for m in messages])


def main(argv=None):
    import numpy as np

    from spamnb.estimator import calibrate
    from spamnb.training.corpus import is_test_message, labelled_messages
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.mail.tokenizer import with_pairs

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--salts", type=int, default=4)
    parser.add_argument("--folds", type=int, default=calibrate.DEFAULT_FOLDS)
    parser.add_argument("--root", default=str(REPO.parent / "shared" / "corpora"))
    args = parser.parse_args(argv)
    for name, pairs in CORPORA.items():
        items = labelled_messages([os.path.join(args.root, name)])
        train = [m for m in items if not is_test_message(m.relpath)]
        test = [m for m in items if is_test_message(m.relpath)]
        y, y_test = np.array([m.is_spam for m in train]), np.array([m.is_spam for m in test])
        messages = [m.data for m in train]
        model = SpamFilter(tokenizer=with_pairs(pairs)).fit(messages, y, tune=False)
        alpha, scale = float(model.alpha), float(model.length_norm)
        test_scores = np.asarray(model.score_many([m.data for m in test]))
        # the filter's counts as a matrix: log(1 + n), each row scaled to length_norm (the tuning script's)
        X_raw = SpamFilter(tokenizer=with_pairs(pairs), counts="raw", length_norm=0).fit(
            messages, y, tune=False).transform(messages)
        X = transformed_matrix(X_raw, f"l2={scale}")[0]

        def report(label, ham, spam):
            cut, _ = calibrate.choose_cutoffs(ham, spam)
            fp, missed = int((test_scores[~y_test] >= cut).sum()), 100 * (test_scores[y_test] < cut).mean()
            outcomes.append((cut, fp, missed))
            print(f"{name:<14}{label:<22}spam cutoff {cut:6.2f}   test: ham called spam "
                  f"{fp} of {int((~y_test).sum())}, spam missed {missed:.2f} %")

        held_out, outcomes = [], []
        for salt in range(args.salts):
            folds = fold_ids(messages, salt, args.folds)
            scores = calibrate.fold_log_odds(X, y, [np.flatnonzero(folds == k) for k in range(args.folds)], alpha,
                                             model.prior, renormalise=scale)
            held_out.append(scores)
            report(f"{args.folds} folds, salt {salt}", scores[~y], scores[y])
        cut, fp, missed = np.array(outcomes).T
        print(f"{name:<14}{'mean of the salts':<22}spam cutoff {cut.mean():6.2f}   test: ham called spam "
              f"{fp.mean():.2f}, spam missed {missed.mean():.2f} ± {missed.std(ddof=1) if missed.size > 1 else 0:.2f} %")
        for k in range(2, args.salts + 1):
            report(f"{k} salts pooled", np.concatenate([s[~y] for s in held_out[:k]]),
                   np.concatenate([s[y] for s in held_out[:k]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
