#!/usr/bin/env python3
"""Does the library train what the command line trains?

Trains ``SpamFilter().fit`` (its defaults: cutoffs chosen, word pairs decided)
on every message of a corpus folder, and ``spamnb train`` on the same folder
in a subprocess, then compares the two models: cutoffs, tokenizer settings
and the log-odds of every message (largest difference printed)::

    python scripts/check/check_fit_matches_train.py ../shared/corpora/spamassassin

Exit 0 when the cutoffs agree and the log-odds differ by at most 1e-6.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from spamnb import SpamFilter  # noqa: E402
from spamnb.training.corpus import labelled_messages  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus")
    parser.add_argument("--tolerance", type=float, default=1e-6)
    args = parser.parse_args(argv)
    messages = labelled_messages([args.corpus])
    fitted = SpamFilter().fit([m.data for m in messages], [m.is_spam for m in messages])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.spamnb")
        subprocess.run([sys.executable, "-m", "spamnb", "train", "-q", "-m", path, args.corpus], check=True)
        trained = SpamFilter.load(path)
    worst = max(abs(fitted.score(m.data).log_odds - trained.score(m.data).log_odds) for m in messages)
    same = (fitted.spam_cutoff == trained.spam_cutoff and fitted.ham_cutoff == trained.ham_cutoff
            and fitted.tokenizer_.settings == trained.tokenizer_.settings)
    print(f"{len(messages)} messages; spam cutoff fit {fitted.spam_cutoff!r}, train {trained.spam_cutoff!r}; "
          f"ham cutoff fit {fitted.ham_cutoff!r}, train {trained.ham_cutoff!r}; word pairs fit "
          f"{fitted.tokenizer_.word_pairs}, train {trained.tokenizer_.word_pairs}; "
          f"largest log-odds difference {worst:.3g}")
    return 0 if same and worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
