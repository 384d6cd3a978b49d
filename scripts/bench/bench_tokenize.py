"""Throughput of parsing and tokenizing the SpamAssassin corpus, one process, one core.

    python scripts/bench/bench_tokenize.py [--corpus DIR] [--repeat N] [--profile]

Reads every message into memory first (so disk time is not counted), then times
``spamnb.mail.parser.parse`` alone (with the tokenizer's limits) and ``Tokenizer().stream``
(parse + tokenize) per message, best CPU time of ``--repeat`` passes; also the
whole path read file -> stream.
"""

import argparse
import time
from pathlib import Path

from spamnb.mail import parser as mail
from spamnb.mail.tokenizer import Tokenizer

FOLDERS = ("easy_ham", "easy_ham_2", "hard_ham", "spam", "spam_2")


def load(corpus):
    paths = [p for folder in FOLDERS for p in sorted((corpus / folder).iterdir()) if p.is_file()]
    return paths, [p.read_bytes() for p in paths]


def best_time(fn, messages, repeat):
    """Best CPU time of ``repeat`` passes (process time: the machine is shared, so
    wall-clock time would count other processes' work)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for message in messages:
            fn(message)
        best = min(best, time.process_time() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parents[3] / "shared/corpora/spamassassin")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile one pass of Tokenizer().stream")
    args = parser.parse_args()

    paths, messages = load(args.corpus)
    n, n_bytes = len(messages), sum(map(len, messages))
    tokenizer = Tokenizer()
    n_tokens = sum(len(tokenizer.stream(m)) for m in messages)
    print(f"{n} messages, {n_bytes / n:.0f} bytes/message, {n_tokens / n:.0f} tokens/message")
    if args.profile:
        import cProfile
        import pstats
        cProfile.runctx("for m in messages: tokenizer.stream(m)", globals(), locals(), "/tmp/bench_tokenize.prof")
        pstats.Stats("/tmp/bench_tokenize.prof").sort_stats("tottime").print_stats(20)
        return
    def parse(message):
        return mail.parse(message, tokenizer.max_bytes, tokenizer.max_depth, tokenizer.max_parts,
                          tokenizer.fallback_charset)

    t_parse = best_time(parse, messages, args.repeat)
    t_stream = best_time(tokenizer.stream, messages, args.repeat)
    t_file = best_time(lambda p: tokenizer.stream(p.read_bytes()), paths, args.repeat)
    for label, t in (("parse only", t_parse), ("parse + tokenize", t_stream),
                     ("read file + parse + tokenize", t_file)):
        print(f"{label:30s} {n / t:8.0f} messages/s  {t / n * 1e6:7.1f} us/message  {n_bytes / t / 1e6:6.1f} MB/s")
    print(f"{'tokenize share':30s} {(t_stream - t_parse) / t_stream:8.0%} of parse + tokenize")


if __name__ == "__main__":
    main()
