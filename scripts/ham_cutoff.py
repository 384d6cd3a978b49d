"""The trade at the ham cutoff on the fixed split: test spam called ham and test
ham not called ham by the verdict rule (spamnb.model.verdict), at several ham
cutoffs, the filter trained on the train part with the default settings.
Experiments only: the default was chosen on the held-out train mail
(``python scripts/tune_accuracy.py --ranking default --ham-cuts ...``).

    python scripts/ham_cutoff.py [CORPUS ...]
"""

import math
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from spamnb import SpamFilter  # noqa: E402
from spamnb.training.corpus import labelled_messages  # noqa: E402
from spamnb.evaluation.crossval import md5_split  # noqa: E402

CORPORA = [os.path.join(REPO, "..", "shared", "corpora", name) for name in ("spamassassin", "enron-spam")]

for root in sys.argv[1:] or CORPORA:
    name = os.path.basename(os.path.normpath(root))
    items = labelled_messages([root])
    msgs = [m.data for m in items]
    y = np.array([m.is_spam for m in items])
    train, test = md5_split([m.relpath for m in items])
    f = SpamFilter().fit([msgs[i] for i in train], y[train])
    yt = y[test]
    for cut in (0, -1, -2, -4, -6, -8):
        f.ham_cutoff = 1 / (1 + math.exp(-cut))
        labels = np.array([f.classify(msgs[i], evidence=False).label for i in test])
        spam_as_ham = labels[yt] == "ham"
        print(f"{name} ham cut {cut:+d}: spam called ham {100 * spam_as_ham.mean():.2f} % ({spam_as_ham.sum()}), "
              f"ham not called ham {100 * (labels[~yt] != 'ham').mean():.2f} %")
