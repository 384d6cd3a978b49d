#!/usr/bin/env python3
"""Wall time of the online (TREC) protocol, this tree against another, interleaved.

    python scripts/bench/bench_online_speed.py --before PYTHONPATH [--corpus enron] [--mode full] [--rounds 3]

Each round runs ``spamnb.evaluation.online.run_online`` over the whole corpus
in arrival order (as ``spamnb evaluate --online`` orders it), in a fresh
process per tree: first the tree on ``--before`` (a checkout of main, say),
then this one (or the reverse on odd rounds, so neither always runs on a
warmer machine).  The time is ``run_online``'s own (classify + learn of every
message; reading the corpus is not counted).  Prints each run, the median per
tree, the ratio this / before, and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPORA = {"spamassassin": os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
           "enron": os.path.join(REPO, "..", "shared", "corpora", "enron-spam")}


def child(corpus, mode):
    """In the tree's own process: one run, its figures as one JSON line."""
    from spamnb.evaluation.online import feedback_options, online_figures, order_messages, run_online
    from spamnb.training.corpus import labelled_messages

    items = labelled_messages([corpus])
    order, _how = order_messages([m.relpath for m in items], [m.data for m in items], "auto")
    datas, y = [items[i].data for i in order], [items[i].is_spam for i in order]
    result = run_online(datas, y, **feedback_options(mode))
    figures = online_figures(result)
    print(json.dumps({"seconds": result.seconds, "n": figures["n"], "n_features": figures["n_features"],
                      "one_minus_roca_percent": figures.get("one_minus_roca_percent")}))


def run_tree(path, corpus, mode):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(path))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", corpus, "--mode", mode], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{path}: {out.stderr.strip()}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", metavar="PYTHONPATH", help="the other tree (e.g. a checkout of main)")
    parser.add_argument("--corpus", default="enron", help="spamassassin, enron, or a folder (default enron)")
    parser.add_argument("--mode", default="full", choices=("full", "error", "auto"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", metavar="CORPUS", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.mode)
    if not args.before:
        parser.error("--before PYTHONPATH is required")
    corpus = os.path.normpath(CORPORA.get(args.corpus, args.corpus))
    trees = {"before": args.before, "this": REPO}
    times = {"before": [], "this": []}
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for r in range(args.rounds):
        for name in (("before", "this") if r % 2 == 0 else ("this", "before")):
            got = run_tree(trees[name], corpus, args.mode)
            times[name].append(got["seconds"])
            print(f"round {r + 1} {name:>6}: {got['seconds']:.2f} s, {got['n']} messages, "
                  f"{got['n_features']} tokens, 1-ROCA {got['one_minus_roca_percent']:.4f} %", flush=True)
    before, this = statistics.median(times["before"]), statistics.median(times["this"])
    print(f"median: before {before:.2f} s, this {this:.2f} s, this / before {this / before:.3f} "
          f"({os.path.basename(corpus)}, {args.mode} feedback, {args.rounds} rounds)")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
