#!/usr/bin/env python3
"""What ``spamnb train`` spends on each message, in CPU microseconds a
message, one step at a time over a whole corpus held in memory (read once
first): its cross-validation fold (``fold_of``), its near-duplicate key,
its ledger digest, the parse, and the token stream of
the default tokenizer and of the word-pair trial's (``with_pairs(2)``), both
from the one parse in one tokenizer pass as ``count_variants`` makes them
(``Tokenizer.streams``; a tree without it: each apart, the paired stream
taking the default stream's head of header tokens, HTML converted and text
lower-cased, ``Tokenizer.stream``'s ``like``); each made apart, and the
paired one alone, are printed outside the sum, for comparison.  Before them, reading the files
(``planning.piece_messages``, as ``train`` reads a partition); after them,
the whole of ``count_variants`` over the messages in memory as ``train -j
1`` runs it (partitions, fold spills, both variants: every step above but
the reading and the near-duplicate key, plus counting) and what is left of
it beside those steps (counting both variants: the vocabularies, rows and
fold spills, and the loop), and of that the compiled call that counts both
variants of a message (``token_kernels.VariantCounter.count``: numbering,
strings, partition rows), where the tree has it.  The stages after counting (held-out scoring,
the kept filter made and saved) are ``train_stages.py``'s.  CPU time
(``time.process_time``): less sensitive to a busy machine than wall time.

    python scripts/bench/train_per_message.py ../shared/corpora/spamassassin [MORE_CORPORA]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def per_message(function, items):
    start = time.process_time()
    for item in items:
        function(*item)
    return (time.process_time() - start) / max(1, len(items)) * 1e6


def main(argv):
    from spamnb.mail.tokenizer import Tokenizer, with_pairs
    from spamnb.estimator.calibrate import fold_of, near_duplicate_key
    from spamnb.estimator.ledger import train_digest
    from spamnb.training.corpus import labelled_messages

    from spamnb.bayes import token_kernels
    from spamnb.estimator.calibrate import FoldSpill
    from spamnb.estimator.counting import DEFAULT_FAN_IN, count_variants, counting_spec
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.training.corpus import CorpusReport
    from spamnb.training.planning import DEFAULT_PARTITION_SIZE, partitions, piece_messages, plan_training

    plain = Tokenizer()
    paired = with_pairs(2, plain)
    spec = counting_spec(SpamFilter())
    specs = [spec, dict(spec, tokenizer=paired.settings)]
    for corpus in argv:
        parts = list(partitions(plan_training([corpus], (), (), CorpusReport(), False, DEFAULT_PARTITION_SIZE),
                                DEFAULT_PARTITION_SIZE))
        start = time.process_time()
        labelled = [(data, is_spam) for part in parts for _name, data, is_spam in piece_messages(part, CorpusReport(),
                                                                                              False)]
        read = (time.process_time() - start) / max(1, len(labelled)) * 1e6
        data = [d for d, _ in labelled]
        parsed = [plain.parse(d) for d in data]
        both = list(zip(data, parsed))
        one = [(d,) for d in data]
        shared = [(d, p, None, True) for d, p in both]
        heads = [(d, p, plain.stream(d, p, None, True)) for d, p in both]
        rows = [("fold (fold_of)", per_message(fold_of, one)),
                ("near-duplicate key", per_message(near_duplicate_key, one)),
                ("ledger digest (train_digest)", per_message(train_digest, one)),
                ("parse", per_message(plain.parse, one))]
        apart = [("token stream, default tokenizer", per_message(plain.stream, shared)),
                 ("token stream, with_pairs(2)", per_message(paired.stream, heads))]
        if hasattr(paired, "streams"):   # both streams in one pass, as count_variants makes them
            rows.append(("token streams, both in one pass", per_message(paired.streams,
                                                                         [(d, p, plain) for d, p in both])))
        else:
            rows += apart
            apart = []
        alone = per_message(paired.stream, both)
        del heads
        batches = [labelled[i:i + DEFAULT_PARTITION_SIZE] for i in range(0, len(labelled), DEFAULT_PARTITION_SIZE)]
        spills = [FoldSpill(10), FoldSpill(10)]
        counting_call = [0.0]
        counter = getattr(token_kernels, "VariantCounter", None)
        if counter is not None:   # the compiled counting call of both variants, timed where count_variants makes it
            class Timed(counter):
                def count(self, streams, is_spam):
                    start = time.process_time()
                    try:
                        return counter.count(self, streams, is_spam)
                    finally:
                        counting_call[0] += time.process_time() - start

            token_kernels.VariantCounter = Timed
        start = time.process_time()
        try:
            count_variants(specs, batches, n_folds=10, group=False, fold_spills=spills, fan_in=DEFAULT_FAN_IN)
        finally:
            if counter is not None:
                token_kernels.VariantCounter = counter
        whole = (time.process_time() - start) / max(1, len(labelled)) * 1e6
        for spill in spills:
            spill.close()
        print(f"{os.path.basename(os.path.normpath(corpus))}: {len(data)} messages, "
              f"{sum(map(len, data)) / max(1, len(data)):.0f} bytes each on average; load average "
              f"{os.getloadavg()[0]:.1f}")
        print(f"  {'read (piece_messages)':34s} {read:7.1f} us")
        for name, us in rows:
            print(f"  {name:34s} {us:7.1f} us")
        print(f"  {'all of them':34s} {sum(us for _, us in rows):7.1f} us")
        for name, us in apart:
            print(f"  {'(' + name + ', apart)':34s} {us:7.1f} us")
        print(f"  {'(with_pairs(2) made alone)':34s} {alone:7.1f} us")
        print(f"  {'count_variants as train -j 1':34s} {whole:7.1f} us")
        print(f"  {'  of which counting and the loop':34s} {whole - sum(us for name, us in rows if 'near' not in name):7.1f} us")
        if counter is not None:
            print(f"  {'    of which the counting call':34s} {counting_call[0] / max(1, len(labelled)) * 1e6:7.1f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", metavar="CORPUS",
                        default=[str(Path(__file__).resolve().parents[3] / "shared" / "corpora" / "spamassassin")],
                        help="corpus roots (default: the shared SpamAssassin corpus next to this repository)")
    main(parser.parse_args().corpora)
