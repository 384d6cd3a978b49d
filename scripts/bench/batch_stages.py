#!/usr/bin/env python3
"""Where ``spamnb classify --batch`` spends its time, stage by stage, in one process.

Loads MODEL, reads every path listed in PATHS (one a line, as ``classify
--batch`` reads stdin), then times each stage of a batch over all of the
messages held in memory (best of ``--repeat`` passes, seconds; the first
pass of the scorer apart: the hash index and the logs of a large model are
not in the cache then, as in a real batch):

- ``read_file``: the files read (``open`` + ``fstat`` + ``read``);
- ``messages_of``: the same paths through ``cli.common.messages_of``, as the
  batch reads them (type checked before opening, an mbox split);
- ``parse``: the MIME parse alone; ``tokenize``: parse and tokens
  (``Tokenizer.stream``);
- ``scores``: ``Scorer.verdict_sums`` of the token streams (first pass and best);
- ``classify``: ``SpamFilter.classify(data, evidence=False)`` (tokenize +
  score + the verdict); ``lines``: ``VerdictLines.verdict`` into a file
  (classify + the line written and flushed);
- ``read lock``: one ``with spam_filter.guard.reading()`` per message.

    python scripts/bench/batch_stages.py MODEL PATHS [--repeat 3]

Run it from outside the checkout with PYTHONPATH set to the tree to measure.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("paths", help="a file of message paths, one a line")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()

    t0 = time.perf_counter()
    from spamnb.cli.common import messages_of
    from spamnb.mail.reader import read_file
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.report.lines import VerdictLines

    spam_filter = SpamFilter.load(args.model)
    print(f"{'imports + load':24s} {time.perf_counter() - t0:7.3f}")
    with open(args.paths, "rb") as f:
        paths = [os.fsdecode(line.rstrip(b"\n")) for line in f if line.strip()]
    datas = [read_file(p) for p in paths]
    tokenizer = spam_filter.tokenizer_
    streams = [tokenizer.stream(d) for d in datas]
    scorer = spam_filter.scorer()

    def scores():
        for s in streams:
            scorer.verdict_sums(s.hashes, s.regions, s.truncated)

    def timed(fn):
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    first_scores = timed(scores)
    guard = spam_filter.guard

    def lock():
        for _ in datas:
            with guard.reading():
                pass

    with tempfile.TemporaryFile("w") as out:
        lines = VerdictLines(spam_filter, False, out)
        stages = [
            ("read_file", lambda: [read_file(p) for p in paths]),
            ("messages_of", lambda: [list(messages_of(p)) for p in paths]),
            ("parse", lambda: [tokenizer.parse(d) for d in datas]),
            ("tokenize", lambda: [tokenizer.stream(d) for d in datas]),
            ("scores", scores),
            ("classify", lambda: [spam_filter.classify(d, evidence=False) for d in datas]),
            ("lines", lambda: [lines.verdict(p, d) for p, d in zip(paths, datas)]),
            ("read lock", lock),
        ]
        print(f"{len(datas)} messages, {sum(len(s) for s in streams) / len(streams):.0f} tokens each on average; "
              f"seconds (best of {args.repeat}), microseconds per message")
        print(f"{'scores, first pass':24s} {first_scores:7.3f} {first_scores / len(datas) * 1e6:7.2f}")
        for name, fn in stages:
            best = min(timed(fn) for _ in range(args.repeat))
            print(f"{name:24s} {best:7.3f} {best / len(datas) * 1e6:7.2f}")


if __name__ == "__main__":
    main()
