#!/usr/bin/env python
"""A TELL (``spamc -L spam``, ``spamc -L forget``) against a CHECK (``spamc -c``) through ``spamnb serve``.

    python scripts/bench/bench_tell.py MODEL MESSAGE_DIR [--runs 21] [--before PYTHONPATH]

Starts ``spamnb serve --allow-tell`` on a loopback port over a copy of MODEL
(in a temporary folder) and runs the real spamc, one process per request,
as an MTA or a mail client does.  Each round takes one message (sorted, evenly
spread over MESSAGE_DIR) and runs, in this order: ``spamc -c`` (the first
CHECK after the last round's TELLs: with the default two workers, one of
them may not have seen those TELLs yet and follows the model's journal first), ``spamc -c`` again (a CHECK of a model already loaded: what a CHECK
costs), ``spamc -L spam`` (a learn), ``spamc -L ham`` (a relabel: spam to
ham), ``spamc -L forget``.  Whole spamc processes, wall time; medians and
the ratios to the loaded CHECK, and the server's own time (its log).  ``--before PYTHONPATH``: a second server
running the spamnb on that path (a checkout of main, say) on its own copy of
the model, its requests interleaved with this one's round by round.
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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # scripts/: harness.py
from harness import free_port, wait_port  # noqa: E402

STEPS = (("check after TELL", ["-c"]), ("check", ["-c"]), ("TELL learn", ["-L", "spam"]),
         ("TELL relabel", ["-L", "ham"]), ("TELL forget", ["-L", "forget"]))


def server_times(log_path):
    """The server's own time of each request of the rounds (its log: "... 1.23 ms peer=..."), in order."""
    times = []
    with open(log_path, "rb") as log:
        for line in log:
            words = line.split()
            if b"ms" in words and (b"CHECK" in words or b"TELL" in words):
                times.append(float(words[words.index(b"ms") - 1]))
    return times[1:]   # the CHECK before the rounds


def spamc(port, options, path):
    with open(path, "rb") as stdin:
        start = time.perf_counter()
        out = subprocess.run(["spamc", "-d", "127.0.0.1", "-p", str(port), *options], stdin=stdin,
                             capture_output=True)
        wall = time.perf_counter() - start
    if options[0] == "-L" and out.returncode != 0:
        raise SystemExit(f"spamc {' '.join(options)} failed ({out.returncode}): {out.stdout!r} {out.stderr!r}")
    return wall


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("messages")
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--before", metavar="PYTHONPATH", default=None,
                        help="also serve with the spamnb on this PYTHONPATH, interleaved round by round")
    args = parser.parse_args(argv)
    files = sorted(os.path.join(root, name) for root, _, names in os.walk(args.messages) for name in names
                   if not name.startswith(".") and name != "README.md")
    step = max(1, len(files) // args.runs)
    files = files[::step][:args.runs]
    trees = {"after": dict(os.environ)}
    if args.before:
        trees = {"before": dict(os.environ, PYTHONPATH=args.before), **trees}
    servers = {}
    with tempfile.TemporaryDirectory() as work:
        try:
            for tree, env in trees.items():
                model = os.path.join(work, tree, "model.spamnb")
                os.makedirs(os.path.dirname(model))
                shutil.copyfile(args.model, model)
                port = free_port()
                log = open(os.path.join(work, tree, "serve.log"), "wb")
                proc = subprocess.Popen([sys.executable, "-m", "spamnb", "serve", "-l", f"127.0.0.1:{port}", "-m",
                                         model, "--allow-tell"], env=env, cwd=work,
                                        stdout=subprocess.DEVNULL, stderr=log)
                log.close()
                servers[tree] = (port, proc, model)
                wait_port(port, proc)
                spamc(port, ["-c"], files[0])   # the model loaded once before the rounds
            times = {(tree, name): [] for tree in trees for name, _ in STEPS}
            for path in files:
                for tree, (port, _proc, _model) in servers.items():
                    for name, options in STEPS:
                        times[tree, name].append(spamc(port, options, path))
            for tree, (port, _proc, model) in servers.items():
                out = subprocess.run([sys.executable, "-c", "import spamnb; print(spamnb.__file__)"],
                                     env=trees[tree], capture_output=True, text=True).stdout.strip()
                journal = os.path.getsize(model + ".journal") if os.path.exists(model + ".journal") else 0
                print(f"{tree}: spamnb serve from {out}; model {args.model} "
                      f"({os.path.getsize(model) / 2 ** 20:.1f} MiB, journal {journal / 1024:.0f} KiB at the end), "
                      f"{len(files)} rounds")
                check = statistics.median(times[tree, "check"])
                inside = server_times(os.path.join(os.path.dirname(model), "serve.log"))
                for i, (name, _) in enumerate(STEPS):
                    wall = statistics.median(times[tree, name])
                    ratio = "" if name == "check" else f"  = {wall / check:.2f}x a CHECK"
                    own = inside[i::len(STEPS)]
                    server = f"; in the server {statistics.median(own):6.2f} ms" if own else ""
                    print(f"  {name:17s} wall {wall * 1000:7.1f} ms{ratio}{server}")
        finally:
            for port, proc, _model in servers.values():
                proc.terminate()
                proc.wait(10)


if __name__ == "__main__":
    main()
