"""The longest CPU time any known hostile input takes to classify at the default limits.

Inputs: the hand-made messages of tests/data/hostile, the generated ones of
tests/test_hostile.py (50 MB attachments, MIME 1,000 deep, 60,000 header
fields, ...) and, for every regular expression, a message made of its worst
case (tests/test_slow_input.py).  The filter is trained on the sample corpus
(corpora/); each input is classified three times in this process
(``SpamFilter.classify`` on bytes already in memory), the best time kept; the
slowest inputs are printed.

Usage: ``python scripts/check/longest_input.py [--top N] [--word-pairs W]`` (``--word-pairs 2``: the
tokenizer `spamnb train` keeps for mail like Enron-Spam's, pairs over 2,000 characters a part)
"""

import argparse
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--word-pairs", type=int, default=0, metavar="W",
                        help="the tokenizer spamnb train uses with word pairs of window W (and their text budget)")
    args = parser.parse_args(argv)
    sys.path[:0] = [REPO, os.path.join(REPO, "tests")]
    import test_hostile
    import test_slow_input

    from spamnb.training.corpus import labelled_messages
    from spamnb.model.spam_filter import SpamFilter
    from spamnb.mail.tokenizer import with_pairs

    items = labelled_messages(trees=[os.path.join(REPO, "corpora")])
    spam_filter = SpamFilter(tokenizer=with_pairs(args.word_pairs)).fit([m.data for m in items], [m.is_spam for m in items], tune=False)
    cases = {name: make() for name, make in test_hostile.GENERATED.items()}
    folder = os.path.join(REPO, "tests", "data", "hostile")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            cases[name] = f.read()
    n = test_slow_input.N
    for name, texts in test_slow_input.WORST.items():
        body = texts[0][: n // 3]
        cases["worst" + name] = ("Subject: " + body[:2000] + "\nContent-Type: multipart/mixed; boundary=b\n\n--b\n"
                                 "Content-Type: text/html\n\n" + body + "\n--b\nContent-Type: text/plain\n\n" + body
                                 + "\n--b--\n").encode("utf-8")[:n]
    results = []
    for name, raw in cases.items():
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            spam_filter.classify(raw)
            best = min(best, time.process_time() - start)
        results.append((best, name, len(raw)))
    results.sort(reverse=True)
    for seconds, name, size in results[:args.top]:
        print(f"{name:36s} {size:>12,d} bytes  {1000 * seconds:8.2f} ms CPU")
    print(f"{len(results)} inputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
