#!/usr/bin/env python3
"""What a pair weight other than 1 costs ``SpamFilter.fit`` (train's cutoffs chosen on held-out scores).

A filter whose word pairs weigh 1 scores each fold's held-out messages in one
compiled call (``Scorer.log_odds_many``); with another weight each message is
scored alone with its ``pairs_start`` (``calibrate.held_out_by_fold``).  This
fits ``SpamFilter(Tokenizer(word_pairs=2), pair_weight=W)`` on a corpus with
the pairs kept (``word_pairs=0``: no trial), for each weight of ``--weights``,
interleaved round by round, each fit in a child process, and prints each
fit's CPU time (user + system of the child and the processes it waited for,
``RUSAGE_CHILDREN``: less sensitive to other jobs than the wall), its wall
time, and the median of each weight against the first's, with the chosen
spam cutoff (the same mail, so the weight alone moves it).

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


CHILD = """
import sys
from spamnb import SpamFilter
from spamnb.mail.tokenizer import Tokenizer
from spamnb.training.corpus import labelled_messages
items = labelled_messages([sys.argv[1]])
messages, y = [m.data for m in items], [m.is_spam for m in items]
import resource, time
started = time.perf_counter()
fitted = SpamFilter(Tokenizer(word_pairs=2), pair_weight=float(sys.argv[2])).fit(messages, y, word_pairs=0)
print(time.perf_counter() - started, fitted.calibration_.spam_log_odds)
"""


def fit_once(corpus, weight):
    """(CPU s of the child and its children, wall s of the fit alone, spam cutoff) of one fit;
    the CPU includes reading the corpus, the same for every weight."""
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", CHILD, corpus, str(weight)], check=True, capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=REPO)).stdout.split()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, float(out[0]), float(out[1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=os.path.join(REPO, "..", "shared", "corpora", "spamassassin"))
    parser.add_argument("--weights", default="1,0.5")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    weights = [float(w) for w in args.weights.split(",")]
    cpu, wall, cutoff = {w: [] for w in weights}, {w: [] for w in weights}, {}
    print(f"{args.corpus}: load average {os.getloadavg()[0]:.1f} before", file=sys.stderr)
    for r in range(args.rounds):
        for w in weights:
            c, t, cutoff[w] = fit_once(args.corpus, w)
            cpu[w].append(c)
            wall[w].append(t)
            print(f"  round {r + 1} pair_weight {w:g}: {c:.2f} s CPU (the process), fit {t:.2f} s wall", file=sys.stderr)
    first = statistics.median(cpu[weights[0]])
    print("| pair weight | CPU s of the process, median | against the first | fit wall s, median | spam cutoff (log-odds) |")
    print("|---:|---:|---:|---:|---:|")
    for w in weights:
        m = statistics.median(cpu[w])
        print(f"| {w:g} | {m:.2f} | {m / first:.2f}x | {statistics.median(wall[w]):.2f} | {cutoff[w]:.2f} |")
    print(f"load average {os.getloadavg()[0]:.1f} after", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
