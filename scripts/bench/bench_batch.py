#!/usr/bin/env python3
"""``spamnb classify --batch`` over every message of a corpus against ``bogofilter -b``:
whole processes, interleaved runs, medians and ratios from the same run.

For each corpus folder (``--corpus DIR``, repeatable) the script

1. lists the message files as ``spamnb train DIR`` reads the tree (a message
   is spam when a folder on its way below DIR starts with "spam" or "junk";
   hidden files, empty files and files whose first line is no header field
   are skipped), trains a model with ``spamnb train DIR -m MODEL`` (defaults;
   the first ``--tree``) and a bogofilter database in bulk
   (``bogofilter -d DB -s -b`` fed the spam list, ``-n -b`` the ham list);
2. runs, interleaved (the order rotated every round), ``--runs`` times each:
   ``spamnb classify -m MODEL --batch [-j N]`` fed every path on stdin, for
   each ``--tree`` and each ``--jobs``; ``bogofilter -d DB -b -v`` (one line
   per message, as spamnb writes) and ``bogofilter -d DB -b`` (no output);
   and the floor of the work: one Python process that loads the model, reads
   and tokenizes every message (``Tokenizer.stream``) and does nothing else;
   with ``--ceiling``, two ``classify --batch -j 1`` processes started at once,
   each fed every other path (the wall until both end): what the machine's
   cores give two processes that share nothing, the ceiling of ``-j 2``;
3. checks that every tree wrote the same bytes as the first (and one line
   per message) and prints a markdown table: median wall time (min-max),
   median CPU (user + system, the process and the children it waited for,
   from ``os.wait4``) and the speed against each bogofilter command:
   bogofilter's time over the command's in the same round (they ran one
   shortly after the other), median over the rounds, and the ratio of the
   medians; for wall time and for CPU (above 1: spamnb is faster).

    python scripts/bench/bench_batch.py --corpus corpora/ [--corpus OTHER] [--tree new=.] [--tree main=../main]
                                  [--jobs 1 --jobs 2] [--runs 7] [--ceiling]

Run it from a folder outside the checkouts: ``python -m spamnb`` puts the
working directory first on ``sys.path``.  Each tree's spamnb is byte-compiled
first (an installed package has its bytecode; a checkout without it would
compile every module in every process), and the children run without
PYTHONDONTWRITEBYTECODE and PYTHONUNBUFFERED, as from a user's shell.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # scripts/: harness.py
from harness import labelled_files   # the corpus read as `spamnb train DIR` reads it

_FLOOR = """
import sys
from spamnb.mail.reader import read_file
from spamnb.model.spam_filter import SpamFilter
stream = SpamFilter.load(sys.argv[1]).tokenizer_.stream
with open(sys.argv[2], "rb") as f:
    for line in f:
        stream(read_file(line.rstrip(b"\\n")))
"""


def run(argv, stdin, stdout, env):
    """One process: (wall seconds, CPU seconds, exit code)."""
    with open(stdin, "rb") as fin, open(stdout, "wb") as fout:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=fin, stdout=fout, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def run_pair(argv, stdins, env):
    """Two processes started at once, each on its own list: (wall seconds until both
    ended, their CPU seconds summed, the worse exit code)."""
    start = time.perf_counter()
    procs = []
    for i, stdin in enumerate(stdins):
        with open(stdin, "rb") as fin, open(os.devnull, "wb") as fout:
            procs.append(subprocess.Popen(argv, stdin=fin, stdout=fout, stderr=subprocess.DEVNULL, env=env))
    cpu, codes = 0.0, []
    for proc in procs:
        _, status, usage = os.wait4(proc.pid, 0)
        cpu += usage.ru_utime + usage.ru_stime
        codes.append(os.waitstatus_to_exitcode(status))
    return time.perf_counter() - start, cpu, max(codes)


def _fmt(seconds):
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def bench(corpus, args, trees, say):
    work = tempfile.mkdtemp(prefix="bench-batch-")
    try:
        files = labelled_files(corpus)
        lists = {}
        for name, keep in (("spam", lambda s: s), ("ham", lambda s: not s), ("all", lambda s: True)):
            lists[name] = os.path.join(work, f"{name}.list")
            with open(lists[name], "w") as f:
                f.write("".join(p + "\n" for p, s in files if keep(s)))
        halves = [os.path.join(work, f"half{i}.list") for i in (0, 1)]
        for i, half in enumerate(halves):   # every other message: halves of the same mix
            with open(half, "w") as f:
                f.write("".join(p + "\n" for p, _ in files[i::2]))
        model, db = os.path.join(work, "model.spamnb"), os.path.join(work, "bogo")
        first_env = trees[0][2]
        subprocess.run([sys.executable, "-m", "spamnb", "train", "-q", "-m", model, corpus], check=True,
                       env=first_env, stdout=subprocess.DEVNULL)
        os.mkdir(db)
        for flag, name in (("-s", "spam"), ("-n", "ham")):
            with open(lists[name], "rb") as f:
                subprocess.run(["bogofilter", "-d", db, flag, "-b"], stdin=f, check=True)
        say(f"\n### {corpus}: {len(files)} messages, model {os.path.getsize(model) / 2**20:.1f} MiB\n")

        commands = []   # (label, argv, env, checks the output)
        for name, _path, env in trees:
            for jobs in args.jobs:
                commands.append((f"`spamnb classify --batch -j {jobs}` ({name})",
                                 [sys.executable, "-m", "spamnb", "classify", "-m", model, "--batch", "-j", str(jobs)],
                                 env, True))
        commands.append(("`bogofilter -b -v`", ["bogofilter", "-d", db, "-b", "-v"], first_env, False))
        commands.append(("`bogofilter -b`", ["bogofilter", "-d", db, "-b"], first_env, False))
        commands.append((f"floor: load + read + tokenize ({trees[0][0]})",
                         [sys.executable, "-c", _FLOOR, model, lists["all"]], first_env, False))
        if args.ceiling:
            commands.append((f"ceiling: two `-j 1` at once, half the paths each ({trees[0][0]})",
                             [sys.executable, "-m", "spamnb", "classify", "-m", model, "--batch", "-j", "1"],
                             first_env, "pair"))
        times = {label: [] for label, *_ in commands}
        reference = None
        for i in range(args.runs):
            shift = i % len(commands)
            for label, argv, env, check in commands[shift:] + commands[:shift]:
                out = os.path.join(work, "out")
                if check == "pair":
                    wall, cpu, rc = run_pair(argv, halves, env)
                    check = False
                else:
                    wall, cpu, rc = run(argv, lists["all"], out, env)
                if rc not in (0, 1, 2) or (rc != 0 and check):
                    raise SystemExit(f"{label}: exit {rc}")
                times[label].append((wall, cpu))
                if check and i == 0:
                    with open(out, "rb") as f:
                        text = f.read()
                    n_lines = text.count(b"\n")
                    if n_lines != len(files):
                        raise SystemExit(f"{label}: {n_lines} lines for {len(files)} messages")
                    if reference is None:
                        reference = (label, text)
                    elif text != reference[1]:
                        raise SystemExit(f"{label} wrote other lines than {reference[0]}")
        say(f"every spamnb command wrote the same {len(files)} lines, byte for byte\n")
        def speed(label, peer, field=0):
            """bogofilter's time over the command's: the median of the ratios of the same round
            (the two ran one shortly after the other), and the ratio of the medians."""
            pairs = [b[field] / a[field] for a, b in zip(times[label], times[peer])]
            medians = statistics.median(b[field] for b in times[peer]) / statistics.median(a[field] for a in times[label])
            return f"{statistics.median(pairs):.2f}x ({medians:.2f}x)"

        say("| command | median wall (min-max) | median CPU | speed vs `bogofilter -b -v`: wall | CPU "
            "| speed vs `bogofilter -b`: wall | CPU |")
        say("|---|---|---|---|---|---|---|")
        for label, *_ in commands:
            walls = [w for w, _ in times[label]]
            cpu = statistics.median(c for _, c in times[label])
            say(f"| {label} | {_fmt(statistics.median(walls))} ({_fmt(min(walls))}-{_fmt(max(walls))}) | {_fmt(cpu)} | "
                + " | ".join(speed(label, peer, field) for peer in ("`bogofilter -b -v`", "`bogofilter -b`")
                             for field in (0, 1)) + " |")
        say("\nspeed: bogofilter's time over the command's, the median of the same round's ratios "
            "(in brackets: the ratio of the medians); above 1, faster than bogofilter")
        say(f"\n{args.runs} runs each, interleaved; load average at the end: "
            + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", action="append", required=True, help="a corpus folder (repeatable)")
    p.add_argument("--tree", action="append", default=[], metavar="NAME=PATH",
                   help="a spamnb checkout to time (repeatable; default: this script's own, as 'this')")
    p.add_argument("--jobs", action="append", type=int, help="-j of spamnb classify --batch (repeatable; default 1)")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--ceiling", action="store_true",
                   help="also two `classify --batch -j 1` processes at once, each on every other path: what two "
                        "cores give two processes that share nothing (the ceiling of -j 2)")
    args = p.parse_args()
    args.jobs = args.jobs or [1]
    if shutil.which("bogofilter") is None:
        raise SystemExit("bogofilter is not installed")
    trees = []
    for spec in args.tree or [f"this={os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))}"]:
        name, _, path = spec.partition("=")
        path = os.path.abspath(path)
        compileall.compile_dir(os.path.join(path, "spamnb"), quiet=1)
        env = dict(os.environ, PYTHONPATH=path, SPAMNB_HOME=tempfile.mkdtemp(prefix="bench-batch-home-"))
        for name_ in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"):   # as a user's shell runs it
            env.pop(name_, None)
        trees.append((name, path, env))
    if os.path.exists(os.path.join(os.getcwd(), "spamnb", "__init__.py")):
        raise SystemExit("run this from outside a checkout: python -m spamnb would import ./spamnb")

    def say(text):
        print(text, flush=True)

    version = subprocess.run(["bogofilter", "-V"], capture_output=True, text=True).stdout.splitlines()[0]
    say(f"{version}; {os.cpu_count()} CPUs; {sys.executable} {sys.version.split()[0]}")
    for corpus in args.corpus:
        bench(os.path.abspath(corpus), args, trees, say)


if __name__ == "__main__":
    main()
