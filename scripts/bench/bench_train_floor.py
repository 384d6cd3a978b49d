#!/usr/bin/env python3
"""How close ``spamnb train`` can come to bogofilter's bulk training: the floor.

For each corpus folder (``--corpus DIR``, repeatable) it runs, interleaved
round by round (whole processes, medians of ``--runs``), and prints a table
of wall time, CPU (user + system of the process and its workers, from
``os.wait4``), peak RSS (``ru_maxrss``: the largest process of the tree) and
bogofilter's median wall time over each row's (above 1: faster than
bogofilter):

1. bogofilter's bulk training into a fresh database (``bogofilter -s -b`` fed
   the spam paths, then ``-n -b`` fed the ham paths: as scripts/bench/bench_commands.py);
2. ``spamnb train DIR`` with its defaults (cutoffs chosen, word pairs decided);
   with ``--before TREE`` also the spamnb of another checkout (PYTHONPATH=TREE);
3. ``spamnb train --target-fpr 0 --word-pairs 0 DIR``: counting alone;
4. the floor of any design that reads the mail: this script in a child
   process reading, parsing and tokenizing every message once (the default
   tokenizer; no counting), with one process and with ``-j 2`` workers over
   partitions of 500 messages (spamnb's own planner, reader and workers); and
   the same with the word-pair trial's second tokenizer on the same parse
   (what a one-pass trial cannot go below);
5. with ``--memory``, the memory floors of the peak RSS targets: the
   interpreter alone (``python -c pass``), the modules ``train`` imports
   (numpy among them), the model file the default ``train`` wrote read
   whole into a filter (``SpamFilter.load``: the kept model in memory, as
   the save holds it), and the word-pair trial's paired vocabulary alone
   (read, parse, tokenize with the paired tokenizer, every token indexed as
   the counting pass indexes it; no rows, no folds: ``-j 1``);
6. with ``--parts``, what the defaults are made of: ``--word-pairs 0`` (the
   cutoffs chosen, no trial), ``--word-pairs 2`` (the paired model and its
   cutoffs, no trial), ``--target-fpr 0 --word-pairs 2`` (the paired model
   counted alone), and the floor with the paired tokenizer alone (-j 2); the
   last column gives the size of the model file each training wrote.

    python scripts/bench/bench_train_floor.py --corpus corpora/ [--corpus OTHER] [--runs 5] [--before TREE] [--parts]
        [--memory]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import sys
import tempfile
from array import array
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # scripts/: harness.py

from harness import check, labelled_files, run, run_steps  # noqa: E402


# ---------------------------------------------------------------------------- the floor (child process)
_TOKENIZERS = []


def _tokenize(pieces, vocabulary=None):
    from spamnb.training.corpus import CorpusReport
    from spamnb.training.planning import piece_messages

    n = 0
    first = _TOKENIZERS[0]
    scratch = [array("i"), array("i")]
    for _name, data, _is_spam in piece_messages(pieces, CorpusReport(), False):
        parsed = first.parse(data)
        for tokenizer in _TOKENIZERS:
            stream = tokenizer.stream(data, parsed)
            n += len(stream)
            if vocabulary is not None:
                vocabulary.add(stream, scratch)
    return n


def floor(corpus, n_jobs, tokenizers="plain", vocabulary=False):
    """Read, parse and tokenize every message of ``corpus`` once with the
    default tokenizer (``tokenizers`` "plain"), its word-pair variant
    ("paired"), or both on the same parse ("both"); prints the tokens.
    ``vocabulary`` (``n_jobs`` 1): every token also indexed in one
    vocabulary, as the counting pass's (``Vocabulary(fill=0.75)``)."""
    from spamnb.mail.tokenizer import Tokenizer, with_pairs
    from spamnb.training.planning import partitions, plan_training
    from spamnb.training.workers import Workers

    plain = Tokenizer()
    paired = with_pairs(2, plain)
    _TOKENIZERS.extend({"plain": [plain], "paired": [paired], "both": [plain, paired]}[tokenizers])
    if n_jobs == 1:
        from spamnb.bayes.vocabulary import Vocabulary

        index = Vocabulary(fill=0.75) if vocabulary else None
        total = _tokenize(plan_training([corpus], partition_size=None), index)
        if index is not None:
            print(len(index), "tokens in the vocabulary")
    else:
        with Workers(n_jobs) as workers:
            total = sum(workers.run_ordered(_tokenize, ((part,) for part in partitions(plan_training([corpus])))))
    print(total)


# ---------------------------------------------------------------------------- the benchmark
def bench(corpus, args, say):
    work = tempfile.mkdtemp(prefix="bench-train-floor-")
    env = dict(os.environ, SPAMNB_HOME=os.path.join(work, "home"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        files = labelled_files(corpus)
        lists = {}
        for name, want in (("spam", True), ("ham", False)):
            lists[name] = os.path.join(work, name + ".list")
            with open(lists[name], "w") as f:
                f.writelines(path + "\n" for path, is_spam in files if is_spam == want)
        py = shlex.split(args.python)
        me = [*py, os.path.abspath(__file__)]
        spamnb = [*py, "-m", "spamnb"]
        model = os.path.join(work, "model.spamnb")
        commands = {}
        db = os.path.join(work, "bogo")

        def bogofilter():
            shutil.rmtree(db, ignore_errors=True)
            os.mkdir(db)
            return run_steps([(["bogofilter", "-C", "-d", db, "-s", "-b"], lists["spam"]),
                              (["bogofilter", "-C", "-d", db, "-n", "-b"], lists["ham"])], env=env)

        commands["bogofilter -s -b + -n -b (bulk training)"] = bogofilter
        if args.before:
            before_env = dict(env, PYTHONPATH=args.before)
            commands["spamnb train DIR (before: the other checkout)"] = \
                lambda: run([*spamnb, "train", "-q", "-m", model, corpus], env=before_env)
        kept = os.path.join(work, "kept.spamnb")

        def train_default():
            result = run([*spamnb, "train", "-q", "-m", model, corpus], env=env)
            if os.path.exists(model):
                shutil.copyfile(model, kept)   # the --memory row's model: read whole
            return result

        commands["spamnb train DIR"] = train_default
        commands["spamnb train --target-fpr 0 --word-pairs 0 DIR (counting alone)"] = \
            lambda: run([*spamnb, "train", "-q", "--target-fpr", "0", "--word-pairs", "0", "-m", model, corpus],
                        env=env)
        for jobs in (1, 2):
            commands[f"read + parse + tokenize, -j {jobs} (floor)"] = \
                (lambda jobs=jobs: run([*me, "--floor", corpus, "-j", str(jobs)], env=env))
        commands["read + parse + tokenize plain and paired (one parse), -j 2 (floor of the pair trial)"] = \
            lambda: run([*me, "--floor", corpus, "-j", "2", "--tokenizers", "both"], env=env)
        if args.memory:
            commands["python -c pass (memory floor: the interpreter)"] = lambda: run([*py, "-c", "pass"], env=env)
            commands["import numpy and train's modules (memory floor: the process)"] = \
                lambda: run([*py, "-c", "import numpy, spamnb.cli.train, spamnb.training.pipeline, "
                             "spamnb.estimator.calibrate, spamnb.model.spam_filter"], env=env)
            commands["the kept model read whole (memory floor: SpamFilter.load of train's file)"] = \
                lambda: run([*py, "-c", "import sys; from spamnb.model.spam_filter import SpamFilter; "
                             "SpamFilter.load(sys.argv[1])", kept], env=env)
            commands["read + parse + tokenize paired, its vocabulary kept, -j 1 (memory floor of the pair trial)"] = \
                lambda: run([*me, "--floor", corpus, "-j", "1", "--tokenizers", "paired", "--vocabulary"], env=env)
        if args.parts:
            for options, what in ((["--word-pairs", "0"], "cutoffs, no trial"),
                                  (["--word-pairs", "2"], "the paired model and its cutoffs, no trial"),
                                  (["--target-fpr", "0", "--word-pairs", "2"], "the paired model counted alone")):
                commands[f"spamnb train {' '.join(options)} DIR ({what})"] = \
                    (lambda options=options: run([*spamnb, "train", "-q", *options, "-m", model, corpus], env=env))
            commands["read + parse + tokenize, paired tokenizer alone, -j 2 (floor)"] = \
                lambda: run([*me, "--floor", corpus, "-j", "2", "--tokenizers", "paired"], env=env)
        results = {name: [] for name in commands}
        sizes = {}
        for _ in range(args.runs):
            for name, command in commands.items():
                if os.path.exists(model):
                    os.unlink(model)
                results[name].append(check(command(), name))
                if os.path.exists(model):
                    sizes[name] = os.path.getsize(model)
        bogo = statistics.median(r.wall for r in results["bogofilter -s -b + -n -b (bulk training)"])
        say(f"\n### {corpus}: {len(files)} messages; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
        say("| command | median wall (min-max) | CPU (median) | peak RSS, max (median) | bogofilter / this | model |")
        say("|---|---|---|---|---|---|")
        for name, runs in results.items():
            walls = sorted(r.wall for r in runs)
            wall = statistics.median(walls)
            say(f"| {name} | {wall:.2f} s ({walls[0]:.2f}-{walls[-1]:.2f}) | "
                f"{statistics.median(r.cpu for r in runs):.2f} s | {max(r.rss for r in runs) / 1024:.0f} MiB "
                f"({statistics.median(r.rss for r in runs) / 1024:.0f}) | "
                f"**{bogo / wall:.2f}x** | {f'{sizes[name] / 2**20:.1f} MiB' if name in sizes else ''} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", metavar="DIR", help="corpus folder (repeatable)")
    parser.add_argument("--runs", type=int, default=5, metavar="N", help="interleaved rounds (default 5)")
    parser.add_argument("--before", metavar="TREE", help="also time the spamnb of this checkout")
    parser.add_argument("--python", default=shlex.quote(sys.executable), help="the Python to run spamnb with")
    parser.add_argument("--floor", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("-j", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--tokenizers", choices=("plain", "paired", "both"), default="plain", help=argparse.SUPPRESS)
    parser.add_argument("--vocabulary", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--memory", action="store_true",
                        help="also the memory floors: the interpreter, train's imports, the kept model read whole, "
                             "the paired vocabulary alone")
    parser.add_argument("--parts", action="store_true",
                        help="also the trainings the defaults are made of, and the paired tokenizer's floor")
    args = parser.parse_args()
    if args.floor:
        floor(args.floor, args.j, args.tokenizers, args.vocabulary)
        return
    if not args.corpus:
        parser.error("--corpus is required")
    if shutil.which("bogofilter") is None:
        raise SystemExit("bogofilter is not installed")

    def say(text):
        print(text, flush=True)

    say(f"{os.cpu_count()} cores; python {sys.version.split()[0]}; runs {args.runs}")
    for corpus in args.corpus:
        bench(corpus, args, say)


if __name__ == "__main__":
    main()
