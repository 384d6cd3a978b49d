#!/usr/bin/env python3
"""Wall time of the online (TREC) protocol, this tree against another, interleaved.

    python scripts/bench/bench_online_speed.py --before PYTHONPATH [--corpus enron] [--mode full] [--rounds 3]
    python scripts/bench/bench_online_speed.py --before PYTHONPATH --whole [--rounds 9]
    python scripts/bench/bench_online_speed.py --before PYTHONPATH --instructions 2000

Each round runs ``spamnb.evaluation.online.run_online`` over the whole corpus
in arrival order (as ``spamnb evaluate --online`` orders it), in a fresh
process per tree: first the tree on ``--before`` (a checkout of main, say),
then this one (or the reverse on odd rounds, so neither always runs on a
warmer machine).  The time is ``run_online``'s own (classify + learn of every
message; reading the corpus is not counted).  Prints each run, the median per
tree, the ratio this / before, and the load average before and after.

``--whole``: each run is the whole command instead, ``python -m spamnb evaluate
--online --no-progress CORPUS`` (``--train-on-error --auto-learn`` for
``--mode auto``, ``--train-on-error`` for ``error``) as a process of its
own, started in an empty folder (so ``-m`` finds the tree on PYTHONPATH, not
one in the current folder; each tree's modules compiled to bytecode before
the first round, so that neither pays for compiling them in its runs): its
wall time, its CPU (user + system, of the process) and the protocol's own
seconds it prints (classify + learn of every message, the corpus's reading
not counted) are printed, and the medians and ratios of each; the (1-ROCA) each run printed is checked to be the same in
every run of a tree.

``--instructions N``: the instructions (``valgrind --tool=callgrind``) of one
process per tree that reads the corpus, orders it and runs the protocol over
its first N messages, with the pair-weight mixture as ``spamnb evaluate
--online`` makes it (none in a tree without one); the figure the load does
not move.  Each prints a digest of the log-odds it gave.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import re
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPORA = {"spamassassin": os.path.join(REPO, "..", "shared", "corpora", "spamassassin"),
           "enron": os.path.join(REPO, "..", "shared", "corpora", "enron-spam")}


def command_variants():
    """``spamnb evaluate --online``'s pair-weight mixture, as the command makes it (None in a tree
    without one, or with ``SPAMNB_PAIR_MIXTURE=0``)."""
    try:
        from spamnb.model import LEARNED_PAIR_WEIGHT, PairMixture, mixture_setting
    except ImportError:   # a tree before the mixture
        return None
    return PairMixture(LEARNED_PAIR_WEIGHT) if mixture_setting() else None


def child(corpus, mode, first=None):
    """In the tree's own process: one run, its figures as one JSON line (``first``: the
    first messages in arrival order only, with the command's pair-weight mixture)."""
    from spamnb.evaluation.online import feedback_options, online_figures, order_messages, run_online
    from spamnb.training.corpus import labelled_messages

    items = labelled_messages([corpus])
    order, _how = order_messages([m.relpath for m in items], [m.data for m in items], "auto")
    datas, y = [items[i].data for i in order], [items[i].is_spam for i in order]
    options = feedback_options(mode)
    if first is not None:
        datas, y = datas[:first], y[:first]
        options["variants"] = command_variants()
    result = run_online(datas, y, **options)
    figures = online_figures(result)
    print(json.dumps({"digest": hashlib.sha1(result.log_odds.tobytes()).hexdigest()[:16], "seconds": result.seconds, "n": figures["n"], "n_features": figures["n_features"],
                      "one_minus_roca_percent": figures.get("one_minus_roca_percent")}))


def run_tree(path, corpus, mode):
    env = dict(os.environ, PYTHONPATH=os.path.abspath(path))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", corpus, "--mode", mode], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{path}: {out.stderr.strip()}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def instructions(path, corpus, mode, first, folder):
    """The instructions (``valgrind --tool=callgrind``) of a child process of the tree
    on ``path`` that reads the corpus, orders it and runs the protocol over its
    first ``first`` messages; and the log-odds' digest it printed."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(path), OPENBLAS_NUM_THREADS="1")
    out_file = os.path.join(folder, "callgrind.out")
    out = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", sys.executable,
                          os.path.abspath(__file__), "--child", corpus, "--mode", mode, "--first", str(first)],
                         env=env, cwd=folder, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{path}: {out.stderr.strip()[-2000:]}")
    with open(out_file) as f:
        total = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
    return total, json.loads(out.stdout.strip().splitlines()[-1])["digest"]


def main_instructions(args, corpus, trees):
    """``--instructions N``: each tree's child over the first N messages, under callgrind."""
    compile_trees(trees)
    got = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in ("before", "this"):
            got[name] = instructions(trees[name], corpus, args.mode, args.instructions, folder)
            print(f"{name:>6}: {got[name][0]:,} instructions, log-odds digest {got[name][1]}", flush=True)
    print(f"this / before {got['this'][0] / got['before'][0]:.3f} (the first {args.instructions} messages of "
          f"{os.path.basename(corpus)}, {args.mode} feedback; the process whole: imports, the corpus read and ordered)")
    return 0


MODE_FLAGS = {"full": [], "error": ["--train-on-error"], "auto": ["--train-on-error", "--auto-learn"]}


def run_whole(path, corpus, mode, folder):
    """One ``spamnb evaluate --online`` as a process: ``(wall s, CPU s, (1-ROCA) printed, the
    protocol's own seconds printed: classify + learn of every message, no reading)``."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(path))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "spamnb", "evaluate", "--online", "--no-progress",
                          *MODE_FLAGS[mode], corpus], env=env, cwd=folder, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        raise SystemExit(f"{path}: {out.stderr.strip()}")
    roca = re.search(r"\(1-ROCA\) %: (\S+)", out.stdout)
    protocol = re.search(r" ([0-9.]+) s \([0-9]+ messages/s", out.stdout)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, roca.group(1) if roca else "?", float(protocol.group(1)) if protocol else math.nan


def compile_trees(trees):
    """Each tree's modules compiled to bytecode first (``compileall``): a tree whose
    ``__pycache__`` is missing or stale (a fresh checkout, ``PYTHONDONTWRITEBYTECODE``)
    would pay for compiling its modules in every run, the other not."""
    import compileall

    for path in trees.values():
        compileall.compile_dir(os.path.join(os.path.abspath(path), "spamnb"), quiet=2)


def main_whole(args, corpus, trees):
    """``--whole``: the whole command per run, wall and CPU."""
    runs = {"before": [], "this": []}
    compile_trees(trees)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.rounds):
            for name in (("before", "this") if r % 2 == 0 else ("this", "before")):
                wall, cpu, roca, protocol = run_whole(trees[name], corpus, args.mode, folder)
                runs[name].append((wall, cpu, roca, protocol))
                print(f"round {r + 1} {name:>6}: {wall:.2f} s wall, {cpu:.2f} s CPU, the protocol {protocol:.2f} s, "
                      f"1-ROCA {roca} %, load {os.getloadavg()[0]:.2f}", flush=True)
    for name, got in runs.items():
        if len({roca for _w, _c, roca, _p in got}) != 1:
            raise SystemExit(f"{name}: the runs printed different (1-ROCA) figures")
    wall = {name: statistics.median(w for w, _c, _r, _p in got) for name, got in runs.items()}
    cpu = {name: statistics.median(c for _w, c, _r, _p in got) for name, got in runs.items()}
    protocol = {name: statistics.median(p for _w, _c, _r, p in got) for name, got in runs.items()}
    print(f"median wall: before {wall['before']:.2f} s, this {wall['this']:.2f} s, this / before "
          f"{wall['this'] / wall['before']:.3f}; median CPU: before {cpu['before']:.2f} s, this {cpu['this']:.2f} s, "
          f"this / before {cpu['this'] / cpu['before']:.3f} ({os.path.basename(corpus)}, {args.mode} feedback, "
          f"{args.rounds} interleaved pairs of whole processes)")
    print(f"median of the protocol's own seconds (as the command prints them): before {protocol['before']:.2f} s, "
          f"this {protocol['this']:.2f} s, this / before {protocol['this'] / protocol['before']:.3f}")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", metavar="PYTHONPATH", help="the other tree (e.g. a checkout of main)")
    parser.add_argument("--corpus", default="enron", help="spamassassin, enron, or a folder (default enron)")
    parser.add_argument("--mode", default="full", choices=("full", "error", "auto"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--whole", action="store_true",
                        help="time the whole `spamnb evaluate --online` process (wall and CPU)")
    parser.add_argument("--instructions", type=int, metavar="N",
                        help="count each tree's instructions (callgrind) over the first N messages instead")
    parser.add_argument("--child", metavar="CORPUS", help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.mode, args.first)
    if not args.before:
        parser.error("--before PYTHONPATH is required")
    corpus = os.path.normpath(CORPORA.get(args.corpus, args.corpus))
    trees = {"before": args.before, "this": REPO}
    if args.instructions:
        return main_instructions(args, corpus, trees)
    if args.whole:
        return main_whole(args, corpus, trees)
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
