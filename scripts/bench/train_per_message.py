#!/usr/bin/env python3
"""What ``spamnb train`` spends on each message before counting it, in CPU
microseconds a message, one step at a time over a whole corpus held in
memory (read once first): its cross-validation fold (``fold_of``), its
near-duplicate key, its ledger digest, the parse, and the token stream of
the default tokenizer and of the word-pair trial's (``with_pairs(2)``), each
from the one parse as ``count_variants`` makes them: the paired stream takes
the default stream's head of header tokens, HTML converted and text
lower-cased (``Tokenizer.stream``'s ``like``); the paired stream made alone
is the last line, outside the sum, for comparison.  CPU time
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

    plain = Tokenizer()
    paired = with_pairs(2, plain)
    for corpus in argv:
        data = [m.data for m in labelled_messages(trees=[corpus])]
        parsed = [plain.parse(d) for d in data]
        both = list(zip(data, parsed))
        one = [(d,) for d in data]
        shared = [(d, p, None, True) for d, p in both]
        heads = [(d, p, plain.stream(d, p, None, True)) for d, p in both]
        rows = [("fold (fold_of)", per_message(fold_of, one)),
                ("near-duplicate key", per_message(near_duplicate_key, one)),
                ("ledger digest (train_digest)", per_message(train_digest, one)),
                ("parse", per_message(plain.parse, one)),
                ("token stream, default tokenizer", per_message(plain.stream, shared)),
                ("token stream, with_pairs(2)", per_message(paired.stream, heads))]
        alone = per_message(paired.stream, both)
        del heads
        print(f"{os.path.basename(os.path.normpath(corpus))}: {len(data)} messages, "
              f"{sum(map(len, data)) / max(1, len(data)):.0f} bytes each on average; load average "
              f"{os.getloadavg()[0]:.1f}")
        for name, us in rows:
            print(f"  {name:34s} {us:7.1f} us")
        print(f"  {'all of them':34s} {sum(us for _, us in rows):7.1f} us")
        print(f"  {'(with_pairs(2) made alone)':34s} {alone:7.1f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", metavar="CORPUS",
                        default=[str(Path(__file__).resolve().parents[3] / "shared" / "corpora" / "spamassassin")],
                        help="corpus roots (default: the shared SpamAssassin corpus next to this repository)")
    main(parser.parse_args().corpora)
