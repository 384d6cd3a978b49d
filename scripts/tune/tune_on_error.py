#!/usr/bin/env python3
"""The thin-evidence band of a model that grows by learning (spamnb.estimator.prequential.THIN_HAM_LOG_ODDS,
THIN_SPAM_LOG_ODDS), and two ways of learning a correction that were tried beside it.

Each corpus is one stream in ``spamnb evaluate --online``'s order, from an empty
model (``spamnb.evaluation.online.OnlineModel``), in the given feedback mode
(``error``: learned when the model's verdict at its own cutoffs was wrong or
unsure, what a user who corrects mistakes and sorts the unsure folder gives it;
``auto``, ``full``: as ``scripts/bench/bench_online.py``).  For each candidate band
(``--band SPAM/HAM`` log-odds, repeatable): (1-ROCA) %, lam %, messages learned,
false positives and spam missed at the model's own cutoffs after the first 1,000.
With ``--repeat K`` (error mode) a correction is learned again, up to K times in
all, while its score stays on the wrong side of its cutoff (``--repeat-margin M``:
until M log-odds past it); with ``--weight W`` a correction counts W times.

    python scripts/tune/tune_on_error.py --band 36/-30 --band 36/-40 --band 36/-50 CORPUS
    python scripts/tune/tune_on_error.py --repeat 4 --weight 2 CORPUS ...
"""

from __future__ import annotations

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)
CORPORA = (os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
           os.path.join(REPO, "..", "shared", "corpora", "enron-spam"))


def on_error(streams, y, repeat=1, repeat_margin=0.0, weight=1):
    """The ``error`` mode of ``run_online``, a correction learned ``weight`` times (a whole number) its
    counts and again while it stays on the wrong side: an OnlineResult and the repeats."""
    import numpy as np

    from spamnb.evaluation.online import OnlineModel, OnlineResult

    model = OnlineModel()
    n = len(y)
    log_odds, spam_cuts, ham_cuts = np.empty(n), np.empty(n), np.empty(n)
    trained = np.zeros(n, dtype=bool)
    repeats = 0
    for i, stream in enumerate(streams):
        score = log_odds[i] = model.log_odds(stream)
        spam_cut, ham_cut = spam_cuts[i], ham_cuts[i] = model.cutoffs()
        spam = bool(y[i])
        if (score >= spam_cut) if spam else (score <= ham_cut):
            continue
        for _ in range(weight):
            model.learn(stream, spam, score)
            score = None   # its held-out score counted once
        trained[i] = True
        for _ in range(repeat - 1):
            again = model.log_odds(stream)
            if (again >= spam_cut + repeat_margin) if spam else (again <= ham_cut - repeat_margin):
                break
            for _ in range(weight):
                model.learn(stream, spam)
            repeats += 1
    return OnlineResult(log_odds, np.asarray(y, dtype=bool), trained, 0.0, model.n_features,
                        spam_cuts, ham_cuts), repeats


def main(argv=None):
    import numpy as np

    from spamnb.evaluation.online import OnlineModel, cutoff_figures, feedback_options, online_figures, run_online
    from spamnb.estimator import prequential

    from spamnb.evaluation.online import order_messages
    from spamnb.training.corpus import labelled_messages

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", default=list(CORPORA), metavar="CORPUS")
    parser.add_argument("--mode", default="error", choices=("error", "auto", "full"))
    parser.add_argument("--band", action="append", metavar="SPAM/HAM",
                        help="the band of no evidence, log-odds (default: the shipped one)")
    parser.add_argument("--repeat", type=int, default=1, metavar="K")
    parser.add_argument("--repeat-margin", type=float, default=0.0, metavar="M")
    parser.add_argument("--weight", type=int, default=1, metavar="W")
    parser.add_argument("--shuffle", type=int, metavar="SEED", help="a random order of each stream (seeded)")
    args = parser.parse_args(argv)
    bands = [tuple(float(v) for v in band.split("/")) for band in args.band] if args.band else [
        (prequential.THIN_SPAM_LOG_ODDS, prequential.THIN_HAM_LOG_ODDS)]
    plain = args.repeat == 1 and args.weight == 1.0
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| corpus | band | mode | (1-ROCA) % | lam % | learned | repeats | FP at own cutoffs after 1,000 "
          "| spam missed there |\n|---|---|---|---:|---:|---:|---:|---:|---:|")
    for corpus in args.corpora:
        items = labelled_messages([corpus])
        order, how = order_messages([m.relpath for m in items], [m.data for m in items], "auto")
        if args.shuffle is not None:     # as bench_online.py --shuffle
            import random

            random.Random(args.shuffle).shuffle(order)
            how = f"shuffled, seed {args.shuffle}"
        labels, datas = [items[i].is_spam for i in order], [items[i].data for i in order]
        y = np.asarray(labels, dtype=bool)
        tokenizer = OnlineModel()
        streams = [tokenizer.stream(d) for d in datas] if not plain else None
        for spam_cut, ham_cut in bands:
            prequential.THIN_SPAM_LOG_ODDS, prequential.THIN_HAM_LOG_ODDS = spam_cut, ham_cut
            if plain:
                result, repeats = run_online(datas, y, **feedback_options(args.mode)), 0
            else:
                if args.mode != "error":
                    parser.error("--repeat and --weight are of the error mode")
                result, repeats = on_error(streams, y, args.repeat, args.repeat_margin, args.weight)
            f, own = online_figures(result), cutoff_figures(result)
            print(f"| {os.path.basename(os.path.normpath(corpus))} ({len(y)}, {how}) | {spam_cut:g} / {ham_cut:g} | "
                  f"{args.mode} | {f['one_minus_roca_percent']:.4f} | {100 * f['lam']:.2f} | "
                  f"{int(result.trained.sum())} | {repeats} | {100 * own['fpr']:.2f} % "
                  f"({own['false_positives']}/{own['n_ham']}) | {100 * own['spam_missed']:.2f} % |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
