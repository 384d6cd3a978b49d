#!/usr/bin/env python3
"""What a pair weight other than 1 costs ``SpamFilter.fit`` (train's cutoffs chosen on held-out scores).

A filter whose word pairs weigh 1 scores each fold's held-out messages in one
compiled call (``Scorer.log_odds_many``); with another weight each message is
scored alone with its ``pairs_start`` (``calibrate.held_out_by_fold``).  This
fits ``SpamFilter(Tokenizer(word_pairs=2), pair_weight=W)`` on a corpus with
the pairs kept (``word_pairs=0``: no trial), for each weight of ``--weights``,
interleaved round by round in this process, and prints each fit's CPU time
(``time.process_time``: user + system, less sensitive to other jobs than the
wall) and the median of each weight against the first's, with the chosen spam
cutoff (the same mail, so the weight alone moves it).

    python scripts/bench/bench_fit_pair_weight.py [--corpus DIR] [--weights 1,0.5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=os.path.join(REPO, "..", "shared", "corpora", "spamassassin"))
    parser.add_argument("--weights", default="1,0.5")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    from spamnb import SpamFilter
    from spamnb.mail.tokenizer import Tokenizer
    from spamnb.training.corpus import labelled_messages

    items = labelled_messages([args.corpus])
    messages, y = [m.data for m in items], [m.is_spam for m in items]
    weights = [float(w) for w in args.weights.split(",")]
    cpu = {w: [] for w in weights}
    cutoff = {}
    print(f"{args.corpus}: {len(y)} messages; load average {os.getloadavg()[0]:.1f} before", file=sys.stderr)
    for r in range(args.rounds):
        for w in weights:
            started = time.process_time()
            fitted = SpamFilter(Tokenizer(word_pairs=2), pair_weight=w).fit(messages, y, word_pairs=0)
            cpu[w].append(time.process_time() - started)
            cutoff[w] = f"P >= {fitted.spam_cutoff:.6g}"
            print(f"  round {r + 1} pair_weight {w:g}: {cpu[w][-1]:.2f} s CPU", file=sys.stderr)
    first = statistics.median(cpu[weights[0]])
    print("| pair weight | fit CPU s (median) | against the first | spam cutoff |")
    print("|---:|---:|---:|---|")
    for w in weights:
        m = statistics.median(cpu[w])
        print(f"| {w:g} | {m:.2f} | {m / first:.2f}x | {cutoff[w]} |")
    print(f"load average {os.getloadavg()[0]:.1f} after", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
