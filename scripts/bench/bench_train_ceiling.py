#!/usr/bin/env python3
"""How fast can ``spamnb train`` be on this machine's cores?  The ceiling of a
perfect split, measured against bogofilter (issue 51).

Each round runs, one after the other (interleaved over the rounds), with the
load average (``/proc/loadavg``, 1 minute) read before each:

1. ``spamnb train -q -j 1`` alone (this process's work on one core);
2. two ``spamnb train -q -j 1`` at once, each to its own model file: the
   wall until both ended, and each one's own wall.  Two independent copies of
   the same work show what the two cores really give when both are busy
   (shared caches, memory bandwidth, the hypervisor's scheduling): the
   *pair ratio* = wall of the pair / wall alone (1.0: two perfect cores;
   2.0: one core's worth);
3. bogofilter's bulk training, as scripts/bench/bench_commands.py runs it
   (``bogofilter -C -d DB -s -b`` fed the spam list, then ``-n -b`` the ham
   list; wall of both, CPU the sum);
4. ``spamnb train -q -j 2`` (what the default ``-j`` chooses on two idle
   cores).

From the medians: the best wall a perfect split of today's ``-j 1`` work
into two halves could reach here is half the pair's wall (each core does one
``-j 1``'s work in the pair's wall when both are busy), so the ceiling
against bogofilter is ``bogofilter wall / (pair wall / 2)``; beside it the
``-j 2`` run's wall and CPU against ``-j 1``'s (the work the split adds).
Walls on a shared machine are noisy; the ratios of the same run matter more
than the absolute figures.

    VENV/bin/python scripts/bench/bench_train_ceiling.py --spamnb VENV/bin/spamnb --corpus DIR [--rounds 5]

Run it by the measured venv's Python (the corpus is listed by its spamnb),
from a folder without a ``spamnb`` package in it.  Models and
databases go to a temporary folder (``SPAMNB_HOME`` there too).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import check, labelled_files, run, run_steps  # noqa: E402


def load():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def fresh(path):
    for p in (path, path + ".bak"):
        if os.path.exists(p):
            os.unlink(p)
    return path


def run_pair(argvs, env):
    """Start every argv at once; the wall until all ended, each one's wall and
    CPU (user + system, its waited-for children included)."""
    started = time.perf_counter()
    procs = {subprocess.Popen(a, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env).pid: i
             for i, a in enumerate(argvs)}
    walls, cpus = [0.0] * len(argvs), [0.0] * len(argvs)
    while procs:
        pid, status, usage = os.wait4(-1, 0)
        if pid not in procs:
            continue
        i = procs.pop(pid)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{argvs[i]} failed")
        walls[i] = time.perf_counter() - started
        cpus[i] = usage.ru_utime + usage.ru_stime
    return max(walls), walls, cpus


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spamnb", default="spamnb", help="the spamnb command (a venv's bin/spamnb)")
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    spamnb = [args.spamnb]
    work = tempfile.mkdtemp(prefix="bench-ceiling-")
    env = dict(os.environ, SPAMNB_HOME=os.path.join(work, "home"))
    try:
        files = labelled_files(args.corpus)
        lists = {}
        for name, paths in (("spam", [p for p, s in files if s]), ("ham", [p for p, s in files if not s])):
            lists[name] = os.path.join(work, f"{name}.list")
            with open(lists[name], "w") as f:
                f.write("".join(p + "\n" for p in paths))
        model = os.path.join(work, "model")
        bogo = os.path.join(work, "bogo")
        rows = {k: [] for k in ("alone", "pair", "bogofilter", "j2")}

        def train(jobs, path):
            return [*spamnb, "train", "-q", "-j", str(jobs), "-m", fresh(path), args.corpus]

        for i in range(args.rounds):
            before = load()
            r = check(run(train(1, model + ".a"), env=env), "train -j 1")
            rows["alone"].append((r.wall, r.cpu, before))
            before = load()
            wall, walls, cpus = run_pair([train(1, model + ".p1"), train(1, model + ".p2")], env)
            rows["pair"].append((wall, sum(cpus), before, walls))
            before = load()
            shutil.rmtree(bogo, ignore_errors=True)
            os.mkdir(bogo)
            r = check(run_steps([(["bogofilter", "-C", "-d", bogo, "-s", "-b"], lists["spam"]),
                                 (["bogofilter", "-C", "-d", bogo, "-n", "-b"], lists["ham"])], env), "bogofilter")
            rows["bogofilter"].append((r.wall, r.cpu, before))
            before = load()
            r = check(run(train(2, model + ".j2"), env=env), "train -j 2")
            rows["j2"].append((r.wall, r.cpu, before))
            print(f"round {i + 1}: alone {rows['alone'][-1][0]:.2f} s, pair {wall:.2f} s "
                  f"({walls[0]:.2f} / {walls[1]:.2f}), bogofilter {rows['bogofilter'][-1][0]:.2f} s, "
                  f"-j 2 {rows['j2'][-1][0]:.2f} s; load {before:.2f}", file=sys.stderr, flush=True)

        def med(key, field):
            return statistics.median(r[field] for r in rows[key])

        loads = [r[2] for k in rows for r in rows[k]]
        alone, pair, bogo_wall, j2 = (med(k, 0) for k in ("alone", "pair", "bogofilter", "j2"))
        print(f"\n{args.corpus}: medians of {args.rounds} rounds, load {min(loads):.2f}-{max(loads):.2f}\n")
        print("| run | wall s | CPU s |\n|---|---:|---:|")
        print(f"| `train -q -j 1` alone | {alone:.2f} | {med('alone', 1):.2f} |")
        print(f"| two `train -q -j 1` at once (until both ended; CPU of both) | {pair:.2f} | {med('pair', 1):.2f} |")
        print(f"| bogofilter `-s -b` + `-n -b` | {bogo_wall:.2f} | {med('bogofilter', 1):.2f} |")
        print(f"| `train -q -j 2` | {j2:.2f} | {med('j2', 1):.2f} |")
        ceiling = pair / 2
        print(f"\npair ratio (two at once / alone): {pair / alone:.2f}; a perfect split of `-j 1`'s work: "
              f"{ceiling:.2f} s, bogofilter / that = {bogo_wall / ceiling:.2f}x; "
              f"bogofilter / `-j 2` = {bogo_wall / j2:.2f}x; bogofilter / `-j 1` = {bogo_wall / alone:.2f}x; "
              f"`-j 2` CPU / `-j 1` CPU = {med('j2', 1) / med('alone', 1):.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
