#!/usr/bin/env python3
"""Does a journal scored, not replayed, give the replayed model's verdicts?

For a model file with a journal of learns (e.g. the copy ``bench_pipe.py
--journal 200`` writes), every test message of ``--corpus`` (the fixed
split) is classified by ``SpamFilter.load(MODEL, mapped=True)``, which
scores through the journal (``spamnb/persistence/journal_view.py``, what a cold
``spamnb classify`` does), and by ``SpamFilter.load(MODEL)``, which replays
it; the verdicts must be equal in every field (label, probability,
log-odds, ``--evidence`` tokens and their names, counts, reason), and the
model's large arrays unread by the first after all of them::

    python scripts/check/check_journal_view.py /tmp/pipe/enron-spam.journal-200.spamnb --corpus ../shared/corpora/enron-spam

Exit 0 when every verdict is equal, 1 when one differs or the journal was
replayed at load (a forget in it, or a record that does not fit).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO), str(HERE.parent)]

from harness import corpus_split  # noqa: E402

from spamnb.model.spam_filter import SpamFilter  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="a model file with a journal of learns beside it")
    parser.add_argument("--corpus", type=Path, required=True, help="the corpus whose test messages are classified")
    parser.add_argument("--evidence", type=int, default=50, help="evidence tokens a verdict lists (default 50)")
    args = parser.parse_args()
    viewed, replayed = SpamFilter.load(args.model, mapped=True), SpamFilter.load(args.model)
    if viewed.pending_journal_ is None:
        print(f"{args.model}: the journal was replayed at load, not viewed")
        return 1
    viewed.n_evidence = replayed.n_evidence = args.evidence
    _train, test = corpus_split(args.corpus)
    differ = [path for path, _spam in test
              if tuple(viewed.classify(path.read_bytes())) != tuple(replayed.classify(path.read_bytes()))]
    unread = sorted(viewed.unread_.unread) if viewed.unread_ is not None else []
    print(f"{args.model.name}: {len(test) - len(differ)} of {len(test)} verdicts equal "
          f"({args.evidence} evidence tokens); the journal still viewed: {viewed.pending_journal_ is not None}; "
          f"the model's arrays unread: {', '.join(unread) or 'none'}")
    for path in differ[:10]:
        print(f"  differs: {path}")
    return 1 if differ or viewed.pending_journal_ is None else 0


if __name__ == "__main__":
    sys.exit(main())
