#!/usr/bin/env python3
"""Does ``SpamFilter.learn`` cost the message's tokens or the model's vocabulary?

    python scripts/bench/bench_learn_scale.py [--corpus spamassassin] [--factor 10] [--rounds 200]

Fits a model (``fit(tune=False)``, words and pairs as a learned model) on
every other message of the corpus, then makes a copy whose vocabulary is
``--factor`` times as large (the same counts, plus messages of random words
learned as ham until the vocabulary has grown so far: their tokens never
occur in mail).  Then, interleaved message by message over the messages it
was not fitted on, each model in turn: ``learn`` of the message (its label),
then ``score`` of the next one (what the online protocol and ``spamnb learn``
do: the score after a learn reads the learned state), and ``classify`` of a
third (the verdict with its evidence).  CPU time (``time.process_time``) of
each call; prints the median per model, the ratio large / small, and the
ratio learn / classify.  ``--before PYTHONPATH`` runs the same in a process
with the spamnb found there (a checkout of main, say), after this one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))   # harness.py

from harness import random_message  # noqa: E402

CORPORA = {"spamassassin": os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
           "enron": os.path.join(REPO, "..", "shared", "corpora", "enron-spam")}




def measure(corpus, factor, rounds, seed=0):
    from spamnb.mail.tokenizer import Tokenizer
    from spamnb.estimator.defaults import LEARNED_PAIR_WEIGHT, LEARNED_WORD_PAIRS
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.training.corpus import labelled_messages

    items = labelled_messages([corpus])
    random.Random(seed).shuffle(items)
    train, rest = items[::2], items[1::2]

    def fitted():
        sf = SpamFilter(Tokenizer(word_pairs=LEARNED_WORD_PAIRS), pair_weight=LEARNED_PAIR_WEIGHT)
        return sf.fit([m.data for m in train], [m.is_spam for m in train], tune=False)

    small = fitted()
    large = fitted()
    target = factor * small.vocabulary_.n_features
    rng = random.Random(seed)
    while large.vocabulary_.n_features < target:
        large.learn(random_message(rng), False)
    models = {"small": small, "large": large}
    sizes = {name: sf.vocabulary_.n_features for name, sf in models.items()}
    for sf in models.values():   # the first learn of a fitted model takes its counts in place: once
        sf.learn(rest[0].data, rest[0].is_spam)
        sf.score(rest[1].data)
    times = {(name, what): [] for name in models for what in ("learn", "score", "classify")}
    clock = time.process_time
    for i in range(rounds):
        m, nxt, third = rest[2 + (3 * i) % (len(rest) - 4)], rest[3 + (3 * i) % (len(rest) - 4)], \
            rest[4 + (3 * i) % (len(rest) - 4)]
        for name in (("small", "large") if i % 2 == 0 else ("large", "small")):
            sf = models[name]
            t = clock()
            sf.learn(m.data, m.is_spam)
            times[name, "learn"].append(clock() - t)
            t = clock()
            sf.score(nxt.data)
            times[name, "score"].append(clock() - t)
            t = clock()
            sf.classify(third.data)
            times[name, "classify"].append(clock() - t)
    medians = {f"{name} {what}": statistics.median(v) for (name, what), v in times.items()}
    return {"vocabulary": sizes, "medians_ms": {k: 1000 * v for k, v in medians.items()}, "rounds": rounds}


def report(label, result):
    m = result["medians_ms"]
    v = result["vocabulary"]
    print(f"{label}: vocabulary {v['small']} and {v['large']} tokens ({v['large'] / v['small']:.1f}x), "
          f"{result['rounds']} rounds, median CPU ms:")
    for what in ("learn", "score", "classify"):
        print(f"  {what:8s} small {m['small ' + what]:7.3f}  large {m['large ' + what]:7.3f}  "
              f"large / small {m['large ' + what] / m['small ' + what]:.2f}")
    for name in ("small", "large"):
        print(f"  {name}: learn / classify {m[name + ' learn'] / m[name + ' classify']:.2f}, "
              f"learn + score / classify {(m[name + ' learn'] + m[name + ' score']) / m[name + ' classify']:.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="spamassassin")
    parser.add_argument("--factor", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--before", metavar="PYTHONPATH", help="also run with the spamnb on this path, after")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    corpus = os.path.normpath(CORPORA.get(args.corpus, args.corpus))
    if args.child:
        print(json.dumps(measure(corpus, args.factor, args.rounds)))
        return 0
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    runs = [("this", REPO)] + ([("before", args.before)] if args.before else [])
    for label, path in runs:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(path))
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--corpus", corpus,
                              "--factor", str(args.factor), "--rounds", str(args.rounds)], env=env,
                             capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"{label}: {out.stderr.strip()}")
        report(label, json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
