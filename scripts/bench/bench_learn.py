#!/usr/bin/env python
"""One ``spamnb learn`` (and ``forget``) of a message against one ``spamnb classify`` of it: whole processes.

    python scripts/bench/bench_learn.py MODEL MESSAGE_DIR [--runs 11] [--no-forget] [--before PYTHONPATH]

Works on a copy of MODEL (and of its journal, if any) in a temporary folder.
Each round runs, interleaved: ``spamnb classify < msg``, ``spamnb learn --spam
< msg`` (a message not learned before: a real learn, not "already known"),
then ``spamnb learn --ham < msg`` (a relabel: the message moves from spam to
ham), then ``spamnb forget < msg`` of the same message.  Each process's wall time
and CPU time (user + system, ``os.wait4``) are taken; the medians and the
ratios learn/classify and forget/classify are printed.  ``--before
PYTHONPATH``: the same rounds with the spamnb on that path (a checkout of
main, say), interleaved round by round, on a copy of its own.  MESSAGE_DIR: where
the messages are taken from (sorted, the first ``--runs`` regular files).
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


def run(command, stdin_path, env, ok=(0,)):
    with open(stdin_path, "rb") as stdin:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
    err = process.stderr.read()
    process.stderr.close()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in ok:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}): {err.decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def _which(base, env):
    out = subprocess.run(base[:-2] + ["-c", "import spamnb; print(spamnb.__file__)"], env=env, capture_output=True)
    return out.stdout.decode().strip() or out.stderr.decode().strip()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("messages")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--spamnb", default=None, help="the spamnb command (default: this Python's -m spamnb)")
    parser.add_argument("--no-forget", action="store_true", help="leave the learned messages in")
    parser.add_argument("--before", metavar="PYTHONPATH", default=None,
                        help="also run the spamnb found on this PYTHONPATH (e.g. a checkout of main), "
                             "interleaved with this one round by round, on its own copy of the model")
    args = parser.parse_args(argv)
    files = sorted(os.path.join(root, name) for root, _, names in os.walk(args.messages) for name in names
                   if not name.startswith(".") and name != "README.md")
    step = max(1, len(files) // args.runs)
    files = files[::step][:args.runs]
    base = [args.spamnb] if args.spamnb else [sys.executable, "-m", "spamnb"]
    trees = {"after": dict(os.environ)}
    if args.before:
        trees = {"before": dict(os.environ, PYTHONPATH=args.before), **trees}
    with tempfile.TemporaryDirectory() as work:
        models = {}
        for tree in trees:
            models[tree] = os.path.join(work, tree, "model.spamnb")
            os.makedirs(os.path.dirname(models[tree]))
            shutil.copyfile(args.model, models[tree])
            if os.path.exists(args.model + ".journal"):
                shutil.copyfile(args.model + ".journal", models[tree] + ".journal")
        times = {(tree, name): [] for tree in trees for name in ("classify", "learn", "relabel", "forget")}
        for path in files:
            for tree, env in trees.items():
                model = models[tree]
                times[tree, "classify"].append(run(base + ["classify", "-m", model], path, env, ok=(0, 1, 2)))
                times[tree, "learn"].append(run(base + ["learn", "-q", "--spam", "-m", model], path, env))
                if not args.no_forget:
                    times[tree, "relabel"].append(run(base + ["learn", "-q", "--ham", "-m", model], path, env))
                    times[tree, "forget"].append(run(base + ["forget", "-q", "-m", model], path, env))
        for tree, model in models.items():
            size = os.path.getsize(model)
            journal = os.path.getsize(model + ".journal") if os.path.exists(model + ".journal") else 0
            print(f"{tree}: spamnb from {_which(base, trees[tree]) if not args.spamnb else args.spamnb}; "
                  f"model {args.model} ({size / 2 ** 20:.1f} MiB, journal {journal / 1024:.0f} KiB at the end), "
                  f"{len(files)} rounds")
            medians = {name: (statistics.median(w for w, _ in rows), statistics.median(c for _, c in rows))
                       for (t, name), rows in times.items() if rows and t == tree}
            for name, (wall, cpu) in medians.items():
                ratio = "" if name == "classify" else (f"  = {wall / medians['classify'][0]:.2f}x classify (wall), "
                                                       f"{cpu / medians['classify'][1]:.2f}x (CPU)")
                print(f"  {name:9s} wall {wall * 1000:7.1f} ms  CPU {cpu * 1000:7.1f} ms{ratio}")


if __name__ == "__main__":
    main()
